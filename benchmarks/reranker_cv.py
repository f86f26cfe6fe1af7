"""Probe (issue 60, item 3): does a trained answer re-ranker add to the judge voter's choice, by nested
cross-validation on the training records alone (never dev)?

Two re-rankers of a question's candidates (the judge's: the members' answers and entity spans), each right or not:

- `head` (the default): a logistic head over the frozen packaged encoder (all-MiniLM-L6-v2). Per candidate c of
  question q: the embedding of "q c" (question and answer in one pass of the frozen transformer, so that they
  attend to each other), and of c's evidence sentences (the sentence of each passage read that holds c,
  eor.core.citations.evidence_sentence): [e(q c), e(q c) ⊙ s*, e(q) ⊙ s*] with s* the sentence closest to the
  question, and Wang et al. (ICLR 2018)'s strength (how many passages hold c, how close its best sentence is) and
  coverage (the share of the question's content words its sentences hold together). Every score out of fold at
  both levels: the held-out fold's from a head fitted on the other folds, the training part's from heads
  cross-fitted inside it (every outer fold: 1 + K fits, seconds each).
- `--fine-tune`: a cross-encoder fine-tuned from the same packaged MiniLM (a new one-logit head; AdamW at
  `--learning-rate`, 3e-5 unless told, batch 16, one epoch, a tenth of the steps warming up, seeded; `--train-layers
  N`: the top N of its six layers, the pooler and the head trained, the rest frozen, a form small enough to ship) on
  (question, "c | its first two evidence sentences"), each training question's right candidates and `--negatives`
  wrong ones (`--sample first`: the first wrong ones, the members' answers leading; `random`: drawn from all, spans
  included). One level of cross-fitting (each score out of fold, stacked as scikit-learn's `cross_val_predict` is: a
  fine-tune is minutes, not seconds).

Rows: the re-ranker alone (its best candidate), the judge voter under the members' prompts trained as `eor train
--voter judge` trains it (`train_fit`, level `scores`), and the same with the re-ranker's score (relative to the
question's best) as one more feature family its inner choice may take; the paired difference with a 95% bootstrap
interval.

    python -m benchmarks.reranker_cv docs/records/nq-train.jsonl.gz docs/records/nq-train-rest.jsonl.gz \
        --config configs/nq-judge.yaml [--fine-tune [--sample random]] [--cache FILE.npz] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from eor.core.citations import evidence_sentence
from eor.core.config import load_config
from eor.core.models import load_sentence_encoder, resolve_model
from eor.evaluation.stats import Bootstrap
from eor.learning.judge_training import LEVELS, JudgedQuestion, accuracy, judged_questions, train_fit, without_scores
from eor.runs.records import read_records
from voters.folds import cross_fit, folds
from voters.judge_features import FAMILIES, JudgeFeatures
from voters.relevance import content_words

ENCODER = "minilm-l6"
#: bootstrap resamples of a paired difference's interval
RESAMPLES = 2000
FAMILY, LEVEL = "rerank", "scores+rerank"
Scores = dict[int, np.ndarray]
Scorer = Callable[[int], np.ndarray]  # a held-out question's scores


@dataclass(frozen=True)
class Question:
    """A judged training question with the text its re-ranker reads: per candidate its evidence sentences."""

    judged: JudgedQuestion
    question: str
    held: list[list[str]]
    passages: int

    @property
    def candidates(self) -> list[str]:
        return self.judged.features.texts


def gathered(records: list[Any], members: list[str]) -> list[Question]:
    out = []
    for record, judged in zip(records, judged_questions(records, members), strict=True):
        outputs = [record.members[m] for m in members if m in record.members]
        passages = list(dict.fromkeys(text for output in outputs for text in output.retrieved_texts))
        held = [
            [s for s in (evidence_sentence(p, c) for p in passages) if s is not None] for c in judged.features.texts
        ]
        out.append(Question(judged, record.question, held, len(passages)))
    return out


# -- the head over the frozen encoder -------------------------------------------------------------------------


def encoded(questions: list[Question], cache: Path | None) -> dict[str, np.ndarray]:
    """Every text the head reads, encoded once (normalised; `cache`: an .npz kept between runs)."""
    texts = sorted(
        {t for q in questions for t in [q.question, *(f"{q.question} {c}" for c in q.candidates), *sum(q.held, [])]}
    )
    if cache is not None and cache.exists():
        stored = np.load(cache, allow_pickle=False)
        known = dict(zip(stored["texts"].tolist(), stored["vectors"], strict=True))
        if all(t in known for t in texts):
            return known
    started = time.perf_counter()
    vectors = load_sentence_encoder(ENCODER).encode(texts, normalize_embeddings=True, batch_size=64)
    print(f"encoded {len(texts)} texts in {time.perf_counter() - started:.0f} s", flush=True)
    if cache is not None:
        np.savez(cache, texts=np.array(texts), vectors=vectors)
    return dict(zip(texts, vectors, strict=True))


def head_rows(q: Question, vector: dict[str, np.ndarray]) -> np.ndarray:
    """The head's input per candidate: [e(q c), e(q c) ⊙ s*, e(q) ⊙ s*, strength and coverage]."""
    asked = vector[q.question]
    words = content_words(q.question)
    rows = []
    for c, sentences in zip(q.candidates, q.held, strict=True):
        joint = vector[f"{q.question} {c}"]
        best, scalars = np.zeros_like(asked), [0.0] * 5
        if sentences:
            cosines = np.array([vector[s] @ asked for s in sentences])
            best = vector[sentences[int(np.argmax(cosines))]]
            covered = len(words & content_words(" ".join(sentences))) / len(words) if words else 0.0
            scalars = [1.0, float(cosines.max()), float(joint @ best), len(sentences) / max(q.passages, 1), covered]
        rows.append(np.concatenate([joint, joint * best, asked * best, scalars]))
    return np.array(rows)


def head_scores(rows: list[np.ndarray], labels: list[np.ndarray], train: np.ndarray, c: float) -> Any:
    model = LogisticRegression(C=c, max_iter=2000)
    return model.fit(np.vstack([rows[i] for i in train]), np.concatenate([labels[i] for i in train]))


# -- the fine-tuned cross-encoder -----------------------------------------------------------------------------


def pairs_of(q: Question) -> list[tuple[str, str]]:
    return [(q.question, " | ".join([c, *held[:2]])) for c, held in zip(q.candidates, q.held, strict=True)]


def fine_tune(
    pairs: list[tuple[str, str]], labels: list[int], seed: int, layers: int | None = None, rate: float = 3e-5
) -> Any:
    """A cross-encoder fine-tuned from the packaged MiniLM-L6 (see the module), deterministic from `seed`; `layers`:
    only the top `layers` transformer layers (with the pooler and the new head) are trained, the rest frozen;
    `rate`: AdamW's peak learning rate."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(ENCODER)))
    model = AutoModelForSequenceClassification.from_pretrained(str(resolve_model(ENCODER)), num_labels=1)
    if layers is not None:
        body = model.base_model
        for frozen in [body.embeddings, *body.encoder.layer[: len(body.encoder.layer) - layers]]:
            frozen.requires_grad_(False)
    order = np.random.default_rng(seed).permutation(len(pairs))
    batches = [order[i : i + 16] for i in range(0, len(order), 16)]
    optimizer = torch.optim.AdamW([w for w in model.parameters() if w.requires_grad], lr=rate)
    schedule = get_linear_schedule_with_warmup(optimizer, len(batches) // 10, len(batches))
    loss = torch.nn.BCEWithLogitsLoss()
    model.train()
    for batch in batches:
        inputs = tokenized(tokenizer, [pairs[i] for i in batch])
        loss(model(**inputs).logits[:, 0], torch.tensor([float(labels[i]) for i in batch])).backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return tokenizer, model.eval()


def tokenized(tokenizer: Any, pairs: list[tuple[str, str]]) -> Any:
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    return tokenizer(first, second, truncation=True, max_length=128, padding=True, return_tensors="pt")


def cross_scores(tuned: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    import torch

    tokenizer, model = tuned
    with torch.inference_mode():
        chunks = [
            model(**tokenized(tokenizer, pairs[i : i + 64])).logits[:, 0].numpy() for i in range(0, len(pairs), 64)
        ]
    return np.concatenate(chunks) if chunks else np.zeros(0)


def training_pairs(
    questions: list[Question], train: np.ndarray, negatives: int, sample: str, seed: int
) -> tuple[list[tuple[str, str]], list[int]]:
    """Each training question's right candidates and `negatives` wrong ones (the first, or drawn at random)."""
    rng = np.random.default_rng(seed)
    pairs, labels = [], []
    for i in train:
        right = questions[i].judged.right
        wrong = np.flatnonzero(~right)
        wrong = wrong[:negatives] if sample == "first" else np.sort(rng.permutation(wrong)[:negatives])
        made = pairs_of(questions[i])
        for j in [*np.flatnonzero(right), *wrong]:
            pairs.append(made[j])
            labels.append(int(right[j]))
    return pairs, labels


def tuned_out_of_fold(questions: list[Question], parts: list[np.ndarray], args: argparse.Namespace) -> Scores:
    out: Scores = {}
    seconds: list[float] = []

    def fitted(train: np.ndarray) -> Any:
        started = time.perf_counter()
        made = training_pairs(questions, train, args.negatives, args.sample, args.seed)
        tuned = fine_tune(*made, args.seed, args.train_layers, args.learning_rate)
        seconds.append(time.perf_counter() - started)
        print(f"fine-tuned in {seconds[-1]:.0f} s", flush=True)
        return tuned

    def scored(tuned: Any, held: np.ndarray) -> None:
        values = cross_scores(tuned, [p for i in held for p in pairs_of(questions[i])])
        ends = np.cumsum([len(questions[i].candidates) for i in held])
        for i, end in zip(held, ends, strict=True):
            out[int(i)] = values[end - len(questions[i].candidates) : end]

    cross_fit(parts, np.arange(len(questions)), fitted, scored)
    args.fine_tune_seconds = seconds
    return out


# -- the nested estimate --------------------------------------------------------------------------------------


def with_scores(question: JudgedQuestion, score: np.ndarray) -> JudgedQuestion:
    f = question.features
    matrix = np.hstack([f.matrix, (score - score.max())[:, None]])
    return replace(question, features=JudgeFeatures(f.texts, matrix, [*f.names, f"{FAMILY}:score"], f.scored))


def nested(
    questions: list[Question], parts: list[np.ndarray], inner: Callable[[np.ndarray], tuple[Scores, Scorer]], seed: int
) -> dict[str, np.ndarray]:
    """Per question, out of fold: the re-ranker's best candidate right, the judge voter's choice right without and
    with the re-ranker's family. `inner(train)`: the scores of the training part's questions (out of fold within
    it), and what scores a held-out question (trained on the whole part)."""
    FAMILIES[FAMILY] = (f"{FAMILY}:",)  # the probe's family, for the judge voter's fits
    LEVELS[LEVEL] = (*LEVELS["scores"], FAMILY)
    judged = [q.judged for q in questions]
    hits = {name: np.zeros(len(questions)) for name in ("re-ranker alone", "scores", LEVEL)}

    def fitted(train: np.ndarray) -> tuple[Scorer, dict[str, Any]]:
        taught, held = inner(train)
        fits = {"scores": train_fit([judged[i] for i in train], "scores", seed=seed)[0]}
        fits[LEVEL] = train_fit([with_scores(judged[i], taught[int(i)]) for i in train], LEVEL, seed=seed)[0]
        return held, fits

    def answered(trained: tuple[Scorer, dict[str, Any]], part: np.ndarray) -> None:
        scorer, fits = trained
        held = {int(i): scorer(int(i)) for i in part}
        hits["re-ranker alone"][part] = [judged[i].right[int(np.argmax(held[int(i)]))] for i in part]
        for level, fit in fits.items():
            shown = [with_scores(judged[i], held[int(i)]) if level == LEVEL else judged[i] for i in part]
            test = [without_scores(q, fit.families) for q in shown]
            hits[level][part] = accuracy(test, [fit.choose(q.features) for q in test])

    cross_fit(parts, np.arange(len(questions)), fitted, answered)
    return hits


def head_inner(questions: list[Question], args: argparse.Namespace) -> Callable[[np.ndarray], tuple[Scores, Scorer]]:
    vector = encoded(questions, args.cache)
    rows = [head_rows(q, vector) for q in questions]
    labels = [q.judged.right.astype(int) for q in questions]

    def inner(train: np.ndarray) -> tuple[Scores, Scorer]:
        taught: Scores = {}

        def score(model: Any, held: np.ndarray) -> None:
            taught.update({int(i): model.decision_function(rows[i]) for i in held})

        parts = [train[part] for part in folds(len(train), args.folds, args.seed)]
        cross_fit(parts, train, lambda t: head_scores(rows, labels, t, args.c), score)
        model = head_scores(rows, labels, train, args.c)
        return taught, lambda i: model.decision_function(rows[i])

    return inner


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    members = load_config(args.config).members
    records = [r for path in args.records for r in read_records(path) if r.answers][: args.limit]
    questions = gathered(records, members)
    parts = folds(len(questions), args.folds, args.seed)
    started = time.perf_counter()
    if args.fine_tune:
        scores = tuned_out_of_fold(questions, parts, args)
        hits = nested(questions, parts, lambda train: (scores, scores.__getitem__), args.seed)
    else:
        hits = nested(questions, parts, head_inner(questions, args), args.seed)
    seconds = time.perf_counter() - started
    gain = hits[LEVEL] - hits["scores"]
    low, high = (100 * bound for bound in Bootstrap.draw(len(gain), RESAMPLES, args.seed).interval(gain))
    for name, right in hits.items():
        print(f"{name:<20} EM {100 * right.mean():5.1f}")
    print(f"the re-ranker's family adds {100 * gain.mean():+.1f} [{low:+.1f}, {high:+.1f}] ({seconds:.0f} s in all)")
    if args.json:
        document = {
            "questions": len(questions),
            "reranker": "fine-tuned cross-encoder" if args.fine_tune else "head over the frozen encoder",
            "settings": {k: v for k, v in vars(args).items() if k not in ("records", "json", "cache")},
            "em": {name: 100 * right.mean() for name, right in hits.items()},
            "gain": [100 * gain.mean(), low, high],
            "seconds": seconds,
        }
        Path(args.json).write_text(json.dumps(document, indent=1, default=str) + "\n")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="scored training records (several: read as one)")
    parser.add_argument("--config", required=True, help="the judge's pool (its members)")
    parser.add_argument("--fine-tune", action="store_true", help="a fine-tuned cross-encoder in place of the head")
    parser.add_argument(
        "--train-layers", type=int, help="fine-tune only the top N transformer layers and the head (all: unset)"
    )
    parser.add_argument("--learning-rate", type=float, default=3e-5, help="a fine-tune's peak learning rate")
    parser.add_argument("--negatives", type=int, default=4, help="wrong candidates per question a fine-tune sees")
    parser.add_argument("--sample", choices=("first", "random"), default="random", help="which wrong candidates")
    parser.add_argument("--c", type=float, default=0.1, help="the head's inverse regularisation")
    parser.add_argument("--cache", type=Path, help="an .npz of the head's encodings, kept between runs")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="the first N questions only (a smoke test)")
    parser.add_argument("--json", help="write the figures here")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
