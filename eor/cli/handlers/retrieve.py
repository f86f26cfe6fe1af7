"""What `eor retrieve` does: retrieval alone, no reader. A question or a file of questions, any members in the
paper's notation built over the config's sources (BM25, Wiki, their top-k, picks, fusions, reranks), top
passages with their ids, scores and sources, as text or JSON Lines, with timings.

The config is validated first, and the members checked as its own are (eor.pipeline.validation); members that
need the reader (PK's generated document, @CP's compression) are refused before anything loads. A source
serves the members built on it from one in-process memo, so a question is retrieved once per source. Each
member is built once (its index loaded, or built and stored, on first use: `load_seconds`), then asked every
question one at a time; `seconds` is one question's retrieval, and the closing summary (stderr) gives each
member's p50 and p95 over the questions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from eor.core.config import default_config_path
from eor.core.data import check_question, load_questions
from eor.core.errors import InputError
from eor.core.formatting import fixed
from eor.pipeline.members import member_list, source_pool
from eor.pipeline.validation import check_member, load_valid_config
from retrievers import notation

NEEDS_READER = ("parametric",)
PASSAGE_KEYS = ("id", "title", "score", "source")
PLACE_KEYS = ("file", "page", "url")  # where a passage comes from, where it says (imported documents, web pages)
SNIPPET = 90  # characters of a passage's text shown in the text output


def run(args: argparse.Namespace) -> int:
    if (args.question is None) == (args.questions is None):
        raise InputError("eor retrieve: give a question or --questions FILE (one of them)")
    if args.question is not None:
        questions = [("q1", check_question(args.question))]
    else:
        questions = [(q.id, q.question) for q in load_questions(args.questions)]
    config = load_valid_config(args.config or default_config_path())  # the door
    names = member_list(args.members)
    for name in names:
        check_member(config, name, "--members")
    pool = source_pool(config, None)
    trees = {}
    for name in names:
        tree = notation.parse(name)
        needing = [
            source for source in sorted(notation.sources(tree)) if pool.specs.get(source, ("",))[0] in NEEDS_READER
        ]
        if needing or any(isinstance(node, notation.Compress) for node in notation.walk(tree)):
            what = f"source {needing[0]}" if needing else "@CP"
            raise InputError(f"member {name}: {what} needs the reader; eor retrieve runs retrieval alone")
        trees[name] = tree
    timings: dict[str, list[float]] = {name: [] for name in names}
    for name, tree in trees.items():
        started = time.perf_counter()
        retriever = pool.build(tree)
        load_seconds = time.perf_counter() - started
        for qid, question in questions:
            started = time.perf_counter()
            documents = retriever.invoke(question)
            seconds = time.perf_counter() - started
            timings[name].append(seconds)
            shown = documents[: args.top]
            if args.json:
                print(json.dumps(_line(qid, question, name, shown, seconds, load_seconds), ensure_ascii=False))
            else:
                print(_text(question, name, shown, seconds))
            load_seconds = 0.0
    _summary(timings)
    return 0


def _line(qid: str, question: str, member: str, documents: list, seconds: float, load: float) -> dict[str, Any]:
    return {
        "id": qid,
        "question": question,
        "member": member,
        "passages": [
            {
                "rank": rank,
                **{key: doc.metadata.get(key) for key in PASSAGE_KEYS},
                **{key: doc.metadata[key] for key in PLACE_KEYS if doc.metadata.get(key) is not None},
                "text": doc.page_content,
            }
            for rank, doc in enumerate(documents, start=1)
        ],
        "seconds": round(seconds, 6),
        "load_seconds": round(load, 3),
    }


def _text(question: str, member: str, documents: list, seconds: float) -> str:
    count = f"{len(documents)} passage{'' if len(documents) == 1 else 's'}"
    lines = [f"{member}: {question}  ({count}, {fixed(seconds * 1000, 1)} ms)"]
    for rank, doc in enumerate(documents, start=1):
        meta = doc.metadata
        score = meta.get("score")
        shown = "-" if score is None else fixed(score, 4)
        text = " ".join(doc.page_content.split())
        text = text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"
        place = meta.get("file") or meta.get("url")
        page = f" p. {meta['page']}" if meta.get("page") is not None else ""
        where = f"  ({place}{page})" if place else ""
        title = meta.get("title") or ""
        lines.append(f"{rank:>3}. {meta.get('id')}  {shown}  [{meta.get('source')}]  {title}{where}: {text}")
    return "\n".join(lines) + "\n"


def _summary(timings: dict[str, list[float]]) -> None:
    for member, seconds in timings.items():
        if seconds:
            p50, p95 = np.percentile(np.asarray(seconds) * 1000, [50, 95])
            print(
                f"{member}: {len(seconds)} question(s), p50 {fixed(p50, 1)} ms, p95 {fixed(p95, 1)} ms", file=sys.stderr
            )
