"""P(right) recalibrated on a few labelled questions of one's own (eor.learning.recalibration, `eor calibrate`):
Platt scaling against an independent maximum-likelihood fit, thresholds chosen on the shipped P and worked by hand,
their slack, the weights file that keeps the voter, and "outside its guarantee" on another pool."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import beta, binom

from eor.cli import main
from eor.core.config import load_config, package_file
from eor.core.errors import ConfigError, InputError
from eor.learning.recalibration import Labelled, fit_platt, recalibrate
from eor.pipeline.abstention import abstention
from eor.pipeline.pool import outside_guarantee
from voters.choice_evidence import ALL, FITS, WITH_CONFIDENCE, WITHOUT_CONFIDENCE
from voters.loading import choose_voter
from voters.right import Logistic, Platt, RightFit, RightModel

ROOT = Path(__file__).resolve().parent.parent
#: training questions these weights never saw (the 600 they were fitted on come first; the shipped default, trained
#: again on all 1,566, saw every one)
UNSEEN = ROOT / "docs" / "records" / "nq-train-rest.jsonl.gz"
SHIPPED = "eor:weights/nq-offline-cascade-600.json"
#: what `eor init` writes: the cascade fitted beyond the corpus (on all 1,566 training questions: none is unseen)
INIT_DEFAULT = "eor:weights/nq-offline-cascade.json"


def _labelled(*groups: tuple[float, int, int], fit: str = WITH_CONFIDENCE) -> Labelled:
    """Questions in groups of (shipped P(right), how many, how many of them right)."""
    p = np.concatenate([np.full(n, q) for q, n, _ in groups])
    right = np.concatenate([np.arange(n) < k for _, n, k in groups])
    return Labelled(p, np.full(len(p), fit), right)


def _model(*names: str) -> RightModel:
    """A shipped P(right) of the fits `names`, richest first (default: one, with confidence); their logistics do
    not matter here: recalibration reads their outputs."""
    fits = {}
    for name in names or (WITH_CONFIDENCE,):
        features = FITS[name]
        zero = (0.0,) * len(features)
        logistic = Logistic(0.0, zero, zero, (1.0,) * len(features), features)
        fits[name] = RightFit(name, {ALL: logistic}, 600, [], "em", 0.1)
    return RightModel("em", fits, 600, 5, 0)


def test_platt_scaling_is_the_maximum_likelihood_fit() -> None:
    # calibrated already (each group right as often as its P says): the fit is the identity, a = 1, b = 0
    calibrated = _labelled((0.9, 20, 18), (0.6, 20, 12), (0.2, 20, 4))
    identity = fit_platt(calibrated.probability, calibrated.right)
    assert identity.slope == pytest.approx(1.0, abs=2e-3) and identity.intercept == pytest.approx(0.0, abs=2e-3)
    # overconfident: scipy's minimiser of the log-loss over (a, b), an independent fit
    over = _labelled((0.9, 20, 12), (0.6, 20, 6), (0.2, 20, 2))
    x, y = Platt.logit(over.probability), over.right.astype(float)

    def loss(ab: np.ndarray) -> float:
        z = ab[0] * x + ab[1]
        return float(np.sum(np.logaddexp(0, z) - y * z))

    a, b = minimize(loss, np.zeros(2), method="BFGS").x
    found = fit_platt(over.probability, over.right)
    assert found.slope == pytest.approx(a, abs=2e-3) and found.intercept == pytest.approx(b, abs=2e-3)
    assert found.apply(0.9) == pytest.approx(1 / (1 + np.exp(-(a * np.log(9) + b))), abs=1e-3)


def test_platt_refuses_one_class_and_a_p_that_does_not_rise_with_being_right() -> None:
    with pytest.raises(InputError, match="all 60 are right"):
        fit_platt(np.full(60, 0.7), np.ones(60, dtype=bool))
    inverted = _labelled((0.9, 30, 5), (0.2, 30, 25))
    with pytest.raises(InputError, match="does not rise with being right"):
        fit_platt(inverted.probability, inverted.right)


def test_thresholds_chosen_on_the_shipped_p_by_hand_with_their_slack() -> None:
    # 60 labelled questions: 20 at shipped P 0.9 (18 right), 20 at 0.6 (12 right), 20 at 0.2 (4 right), δ 0.1.
    # α 0.3, from λ 0.95 down: 0.95 answers none (skipped, under a tenth); 0.9 ... 0.65 answer the 20 at 0.9, 2
    # wrong: P(Binom(20, 0.3) ≤ 2) = 0.035483 ≤ 0.1, rejected; 0.6 answers 40, 10 wrong: P(Binom(40, 0.3) ≤ 10) =
    # 0.308743 > 0.1, the sequence stops. Threshold 0.65: a third answered, 10% wrong; Clopper–Pearson's upper bound
    # at δ on 2 of 20 is the 0.9 quantile of Beta(3, 18) = 0.244765: a slack of 14.5 points.
    # α 0.2: at 0.9, P(Binom(20, 0.2) ≤ 2) = 0.206085 > 0.1: nothing certified, every question declined.
    labelled = _labelled((0.9, 20, 18), (0.6, 20, 12), (0.2, 20, 4))
    found = recalibrate(_model(), labelled, delta=0.1, alphas=(0.2, 0.3))
    (figures,) = found.figures
    at_02, at_03 = figures.chosen
    assert at_02.threshold is None and at_03.threshold == 0.65
    assert at_03.p_value == pytest.approx(binom.cdf(2, 20, 0.3)) == pytest.approx(0.035483, abs=1e-6)
    assert at_03.coverage == pytest.approx(1 / 3) and at_03.error == pytest.approx(0.1)
    assert at_03.bound == pytest.approx(beta.ppf(0.9, 3, 18)) == pytest.approx(0.244765, abs=1e-6)
    stored = found.model.fit().thresholds
    assert stored[0]["threshold"] is None
    assert stored[1]["threshold"] == pytest.approx(figures.platt.apply(0.65))  # its image under the rescaling
    lines = "\n".join(found.lines())
    assert "α 0.3: answer at P' ≥" in lines and "certified ≤ 24.5%, a slack of 14.5 points" in lines
    assert "α 0.2: no threshold certified" in lines and "answerable questions only" in lines
    # P' at least the stored threshold exactly where the shipped P is at least 0.65, on a fine grid of P
    p = np.linspace(0.001, 0.999, 4001)
    rescaled = figures.platt.apply(p)
    assert np.array_equal(rescaled >= stored[1]["threshold"], p >= 0.65 - 1e-12)
    verdict = abstention(found.model.fit(), float(figures.platt.apply(0.7)), 0.3)
    assert not verdict.abstained and verdict.share is None


def test_a_mix_certified_with_the_users_unanswerable_questions() -> None:
    answerable = _labelled((0.9, 40, 37), (0.6, 40, 24), (0.2, 20, 4))
    nocorpus = _labelled((0.3, 60, 0))
    found = recalibrate(_model(), answerable, nocorpus, share=0.33, delta=0.1, alphas=(0.3,))
    (row,) = found.figures[0].chosen
    assert row.share == 0.33 and row.threshold is not None and row.bound is not None and row.bound <= 0.3
    assert found.share == 0.33 and found.model.recalibrated["nocorpus"] == 60
    assert "a mix with a share 0.33" in "\n".join(found.lines())
    with pytest.raises(InputError, match="share"):
        recalibrate(_model(), answerable, nocorpus)


def test_too_few_questions_for_every_fit_is_refused() -> None:
    with pytest.raises(InputError, match="label more questions"):
        recalibrate(_model(), _labelled((0.9, 10, 9), (0.2, 10, 2)))


def test_a_richer_fit_no_labelled_choice_reaches_is_left_out_one_that_some_reach_is_not() -> None:
    """A reader that reports no confidence: every choice falls to the fit without it, here as when answering, so
    the fit with confidence (which none reaches) is left out and said so; where some choices reach it but too few,
    the recalibration is refused (a choice it would score must not fall to a fit recalibrated on others)."""
    model = _model(WITH_CONFIDENCE, WITHOUT_CONFIDENCE)
    plain = _labelled((0.9, 20, 18), (0.6, 20, 12), (0.2, 20, 4), fit=WITHOUT_CONFIDENCE)
    found = recalibrate(model, plain, alphas=(0.3,))
    assert list(found.model.fits) == [WITHOUT_CONFIDENCE] and found.dropped == {WITH_CONFIDENCE: 0}
    assert "fit 'confidence' left out: no labelled choice has its features" in "\n".join(found.lines())
    some = Labelled(
        np.concatenate([plain.probability, np.full(5, 0.8)]),
        np.concatenate([plain.fits, np.full(5, WITH_CONFIDENCE)]),
        np.concatenate([plain.right, np.ones(5, dtype=bool)]),
    )
    with pytest.raises(InputError, match=r"too few labelled questions for the fit 'confidence' \(5\)"):
        recalibrate(model, some, alphas=(0.3,))


def test_the_recalibration_survives_the_weights_file_and_rescales_p() -> None:
    found = recalibrate(_model(), _labelled((0.9, 20, 12), (0.6, 20, 6), (0.2, 20, 2)), pool={"members": ["a"]})
    again = RightModel.from_dict(json.loads(json.dumps(found.model.to_dict())), "test")
    assert again.recalibrated == found.model.recalibrated and again.fit().platt == found.model.fit().platt
    bad = found.model.to_dict()
    bad["fits"][WITH_CONFIDENCE]["platt"]["slope"] = -1.0
    with pytest.raises(ConfigError, match="malformed"):
        RightModel.from_dict(bad, "test")


class _Voter:
    def __init__(self, meta: dict) -> None:
        self.metadata_ = meta


def test_outside_the_guarantee_on_another_corpus_until_recalibrated_on_it() -> None:
    nq = {"members": ["a"], "reader": "r", "corpus": {"file": "wiki-nq.jsonl", "bytes": 10, "sha256": "1" * 64}}
    mine = {**nq, "corpus": {"file": "corpus.jsonl", "bytes": 5, "sha256": "2" * 64}}
    shipped = _Voter({"pool": nq, "probability": {"fits": {}}})
    assert outside_guarantee(shipped, nq) is None
    said = outside_guarantee(shipped, mine)
    assert said is not None and "corpus wiki-nq.jsonl" in said and "eor calibrate" in said
    recalibrated = _Voter({"pool": nq, "probability": {"fits": {}, "recalibrated": {"pool": mine}}})
    assert outside_guarantee(recalibrated, mine) is None and outside_guarantee(recalibrated, nq) is not None
    assert outside_guarantee(_Voter({"pool": nq}), mine) == said  # a judge voter's P(right) lives in its fits
    assert outside_guarantee(_Voter({}), mine) is None  # no pool recorded: nothing says otherwise
    fit = RightFit(WITH_CONFIDENCE, {}, 1, [{"alpha": 0.3, "threshold": 0.5, "coverage": 0.2}], "em", 0.1)
    verdict = abstention(fit, 0.4, 0.3, outside=said)
    assert verdict.abstained and f"outside its guarantee here: {said}" in verdict.reason()
    assert verdict.to_dict()["outside_guarantee"] == said


def _head(source: Path, target: Path, n: int) -> Path:
    """The header and first `n` questions of a packed records file."""
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        lines = [next(handle) for _ in range(n + 1)]
    with gzip.open(target, "wt", encoding="utf-8") as handle:
        handle.writelines(lines)
    return target


def test_eor_calibrate_on_60_unseen_training_questions(tmp_path, capsys) -> None:
    records = _head(UNSEEN, tmp_path / "labelled.jsonl.gz", 60)
    out = tmp_path / "mine.json"
    assert main(["calibrate", str(records), "--weights", SHIPPED, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "on 60 labelled questions" in printed and str(out) in printed
    assert "a slack of" in printed or "no threshold certified" in printed
    shipped = json.loads(package_file("weights/nq-offline-cascade-600.json").read_text())
    written = json.loads(out.read_text())
    assert {k: v for k, v in written.items() if k != "meta"} == {k: v for k, v in shipped.items() if k != "meta"}
    probability = written["meta"]["probability"]
    assert probability["recalibrated"]["questions"] == 60 and probability["recalibrated"]["pool"]["corpus"]
    voter = choose_voter(out, shipped["members"])
    model = RightModel.from_voter(voter)
    assert model is not None and all(fit.platt is not None for fit in model.fits.values())
    # recalibrated again on the same questions: from the P as shipped, never the first rescaling's inverse
    twice = tmp_path / "twice.json"
    assert main(["calibrate", str(records), "--weights", str(out), "--out", str(twice)]) == 0
    assert json.loads(twice.read_text())["meta"]["probability"] == probability
    # without answers, nothing to recalibrate on
    bare = tmp_path / "bare.jsonl"
    with gzip.open(records, "rt", encoding="utf-8") as handle:
        header, *rows = [json.loads(line) for line in handle]
    bare.write_text("".join(json.dumps(row) + "\n" for row in [header] + [{**row, "answers": []} for row in rows]))
    assert main(["calibrate", str(bare), "--weights", SHIPPED, "--out", str(tmp_path / "x.json")]) == 1
    assert "60 of the 60 questions" in capsys.readouterr().err
    # records that do not say which pool answered them: the recalibration could not say where it holds
    (tmp_path / "anonymous.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["calibrate", str(tmp_path / "anonymous.jsonl"), "--weights", SHIPPED, "--out", str(out)]) == 1
    assert "does not say which pool answered it" in capsys.readouterr().err
    # a mistyped path is said as such, not as records of an older eor
    assert main(["calibrate", str(tmp_path / "labeled"), "--weights", SHIPPED, "--out", str(out)]) == 1
    assert "records file not found" in capsys.readouterr().err
    # questions the documents cannot answer must have been answered by the same pool, and say so
    nocorpus = ["--nocorpus", str(tmp_path / "anonymous.jsonl"), "--unanswerable-share", "0.3"]
    assert main(["calibrate", str(records), "--weights", SHIPPED, *nocorpus, "--out", str(out)]) == 1
    assert "anonymous.jsonl does not say which pool answered it" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    said = header["eor_records"]
    pool = {**said["pool"], "corpus": {**said["pool"]["corpus"], "sha256": "0" * 64}}
    other.write_text("".join(json.dumps(row) + "\n" for row in [{"eor_records": {**said, "pool": pool}}, *rows]))
    nocorpus[1] = str(other)
    assert main(["calibrate", str(records), "--weights", SHIPPED, *nocorpus, "--out", str(out)]) == 1
    assert "was answered by another pool" in capsys.readouterr().err
    # the judge's P(right) lives in its own fits, which eor calibrate does not rescale
    for judged, kind in (("judge", "a judge voter"), ("judge-cascade", "a cascade ending with the judge")):
        weights = f"eor:weights/nq-offline-{judged}.json"
        assert main(["calibrate", str(records), "--weights", weights, "--out", str(out)]) == 1
        assert f"is {kind}: eor calibrate recalibrates" in capsys.readouterr().err


def test_eor_init_answers_with_the_shipped_weights_installed_with_eor(tmp_path, capsys) -> None:
    assert main(["init", str(tmp_path / "mine")]) == 0
    assert "eor calibrate" in capsys.readouterr().out
    config = load_config(tmp_path / "mine" / "config.yaml")
    assert config.voter.weights == INIT_DEFAULT
    assert config.default_weights() == package_file("weights/nq-offline-cascade.json")
    assert config.default_weights().is_file()
    assert RightModel.from_voter(choose_voter(config.default_weights(), config.members)).unanswerable is not None


# -- one's own documents, end to end (slow: the default reader answers 70 questions, about 7 minutes on 2 cores) --

TOWNS = [a + b for a in ("Or", "Bel", "Kas", "Mir", "Tal", "Vor", "Quen", "Dra") for b in ("avik", "mont", "dor")]
PEOPLE = ["Mirela Danst", "Tomas Elgrin", "Ada Perrow", "Ivo Sarnak", "Lena Ostwald", "Piet Varga", "Nora Kell",
          "Emil Brandt", "Sara Lind", "Oskar Feld", "Rita Moss", "Jon Hale"]  # fmt: skip
RIVERS = ["Ulla", "Senn", "Varo", "Isk", "Thane", "Corra", "Mell", "Brisk"]


def _towns() -> tuple[list[dict], list[dict], list[dict]]:
    """A hand-made corpus of 20 fictional towns (a passage each, naming two people and two years), 60 questions it
    answers (who founded each, in which year, on which river) and 10 about towns it does not hold."""
    passages, labelled = [], []
    for i, town in enumerate(TOWNS[:20]):
        founder, river, year = PEOPLE[i % len(PEOPLE)], RIVERS[(i * 3) % len(RIVERS)], str(1601 + 17 * i)
        passages.append(
            {
                "id": f"town-{i:02d}",
                "title": town,
                "text": f"{town} is a small town on the {river} river. It was founded in {year} by {founder}, a "
                f"merchant who traded wool along the {river}. In {int(year) + 38} {town} received a royal charter, "
                f"and {PEOPLE[(i + 5) % len(PEOPLE)]} built its bridge. Its market is held every Thursday.",
            }
        )
        labelled += [
            {"id": f"q{i:02d}a", "question": f"who founded the town of {town}", "answers": [founder]},
            {"id": f"q{i:02d}b", "question": f"in what year was {town} founded", "answers": [year]},
            {"id": f"q{i:02d}c", "question": f"on which river is the town of {town}", "answers": [river]},
        ]
    absent = [
        {"id": f"n{i:02d}", "question": f"who founded the town of {town}", "answers": []}
        for i, town in enumerate(TOWNS[20:] + ["Zelmark", "Hanvik", "Pordell", "Ilbrun", "Sketmore", "Yarrow"])
    ]
    return passages, labelled, absent


@pytest.mark.slow
def test_your_own_documents_recalibrated_from_60_labelled_questions(tmp_path) -> None:
    from tests.conftest import write_jsonl
    from tests.test_cli import run_cli

    passages, labelled, absent = _towns()
    assert len(labelled) == 60 and len(absent) == 10
    folder = tmp_path / "towns"
    assert run_cli("init", str(folder)).returncode == 0
    write_jsonl(folder / "corpus.jsonl", passages)
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("parametric_max_tokens: 192", "parametric_max_tokens: 48", 1))
    for name, rows in (("labelled", labelled), ("absent", absent)):
        write_jsonl(tmp_path / f"{name}.jsonl", rows)
        ran = run_cli(
            "run",
            "--config",
            str(config),
            "--data",
            str(tmp_path / f"{name}.jsonl"),
            "--out",
            str(tmp_path / name),
            "--batch-size",
            "16",
            "--no-cache",
            timeout=60 * len(rows),  # a hang guard of a minute a question: the reader's speed is not what is tested
        )
        assert ran.returncode == 0, ran.stderr[-2000:]
    question = ["ask", "who founded the town of Belmont", "--config", str(config), "--risk", "0.3", "--json"]
    before = run_cli(*question)
    assert before.returncode == 0, before.stderr[-2000:]
    said = json.loads(before.stdout)["abstention"]
    assert "another pool" in said["outside_guarantee"] and "outside its guarantee here" in said["reason"]
    absent = ["--nocorpus", str(tmp_path / "absent"), "--unanswerable-share", "0.2"]
    out = ["--out", str(folder / "weights.json")]
    done = run_cli("calibrate", str(tmp_path / "labelled"), "--weights", INIT_DEFAULT, *absent, *out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "on 60 labelled questions" in done.stdout and "and 10 the documents cannot answer" in done.stdout
    assert "a slack of" in done.stdout or "no threshold certified" in done.stdout
    print(done.stdout)
    config.write_text(config.read_text().replace(f"weights: {INIT_DEFAULT}", "weights: weights.json"))
    after = run_cli(*question)
    assert after.returncode == 0, after.stderr[-2000:]
    said = json.loads(after.stdout)["abstention"]
    assert "outside_guarantee" not in said and said["share"] == 0.2
