"""`eor train`: learn voter weights from run records (section 4.2 of the EoR paper) and save them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from eor.errors import InputError
from eor.records import read_records


def records_matrix(
    folder: str | Path, members: list[str] | None = None
) -> tuple[list[str], list, list, list]:
    """(member names, answers, golds, passage texts) of a run; questions without gold answers are skipped.

    Every record must hold every member; the member order is that of the first record (or `members`).
    """
    records = read_records(folder)
    if not records:
        raise InputError(f"{folder}: no records")
    names = members or list(records[0]["members"])
    answers, golds, passages = [], [], []
    for record in records:
        missing = [name for name in names if name not in record["members"]]
        if missing:
            raise InputError(f"{folder}: record {record['id']!r} lacks member(s) {', '.join(missing)}")
        if not record.get("answers"):
            continue
        outputs = [record["members"][name] for name in names]
        answers.append([out["answer"] for out in outputs])
        golds.append(list(record["answers"]))
        passages.append([" ".join(p["text"] for p in out["passages"]) for out in outputs])
    if not answers:
        raise InputError(f"{folder}: no record has gold answers to train on")
    return names, answers, golds, passages


def train(
    records: Path,
    out: Path,
    *,
    metric: str = "em",
    dev: Path | None = None,
    metrics: tuple[str, ...] = ("em", "f1", "cosine"),
    pooling: str = "mean",
    grounding: bool = False,
    restarts: int = 4,
    seed: int = 0,
) -> str:
    from voters import Voter
    from voters.correctness import correctness_matrix

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names, answers, golds, passages = records_matrix(records)
    dev_split: tuple[Any, ...] | None = None
    if dev is not None:
        _, dev_answers, dev_golds, dev_passages = records_matrix(dev, names)
        dev_split = (dev_answers, dev_golds, dev_passages)
    voter = Voter(
        metrics=metrics,
        pooling=pooling,
        correctness=metric,
        grounding=grounding,
        restarts=restarts,
        seed=seed,
        members=names,
    )
    voter.fit(answers, golds, passages, dev=dev_split)

    def best_single(ans: list, gold: list) -> tuple[str, float]:
        accuracy = correctness_matrix(ans, gold, metric).mean(axis=0)
        return names[int(accuracy.argmax())], float(accuracy.max())

    top_name, top_train = best_single(answers, golds)
    uniform = Voter.uniform(len(names), metrics=metrics, pooling=pooling, correctness=metric, members=names)
    meta: dict[str, Any] = {
        "records": str(records),
        "dev_records": str(dev) if dev else None,
        "top_r_train": {"member": top_name, "train": top_train},
        "uniform": {"train": uniform.score(answers, golds, passages)},
    }
    config_file = Path(records) / "config.json"
    if config_file.is_file():
        import json

        config = json.loads(config_file.read_text())
        meta["reader"] = config.get("reader", {}).get("model")
        corpus = (config.get("corpus") or {}).get("path")
        meta["dataset"] = Path(corpus).name if corpus else None  # the file name: no machine paths in weights
    if dev_split is not None:
        dev_answers, dev_golds, dev_passages = dev_split
        index = names.index(top_name)
        top_dev = float(correctness_matrix(dev_answers, dev_golds, metric)[:, index].mean())
        meta["top_r_train"]["dev"] = top_dev
        meta["uniform"]["dev"] = uniform.score(dev_answers, dev_golds, dev_passages)
        meta["top_r_dev"] = dict(zip(("member", "dev"), best_single(dev_answers, dev_golds), strict=True))
    voter.save(out, **meta)

    kept = [f"{names[i]} ({voter.retriever_weights_[i]:.2f})" for i in voter.active_members_]
    lines = [
        f"weights written to {out}",
        f"{metric} on train ({len(answers)} questions): trained {voter.train_score_:.4f}, "
        f"uniform {meta['uniform']['train']:.4f}, best single member {top_name} {top_train:.4f}",
    ]
    if dev_split is not None:
        lines.append(
            f"{metric} on dev ({len(dev_split[0])} questions): trained {voter.dev_score_:.4f}, "
            f"uniform {meta['uniform']['dev']:.4f}, {top_name} {meta['top_r_train']['dev']:.4f}, "
            f"best on dev {meta['top_r_dev']['member']} {meta['top_r_dev']['dev']:.4f}"
        )
    lines.append(f"members kept: {', '.join(kept)}; pooling {voter.pooling_}")
    return "\n".join(lines)
