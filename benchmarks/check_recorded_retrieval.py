"""Check that today's code retrieves and prompts as recorded: for the first N questions of a run's records,
every member that needs no reader (no PK document, no @CP summary) is retrieved again through the config's
pool and its answer prompt rebuilt; passage ids and the prompt must be byte-identical, scores equal within
1e-5 relative.

Run it before a long recording continues after a change to retrieval or prompts lands:

    python -m benchmarks.check_recorded_retrieval runs/nq16-train400 --config configs/nq-offline16.yaml -n 5

Prints one line per member and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import sys

from eor.core.config import load_config
from eor.pipeline.members import member_templates, source_pool
from eor.runs.records import iter_records
from retrievers import notation


def _same(found: list[tuple[str, float | None]], recorded: list[tuple[str, float | None]]) -> bool:
    """The same passage ids, with scores within 1e-5 relative: a dense encoder's float32 query vector differs
    in its last digits with the batch it was encoded in (a run encodes a batch of questions; this check, one)."""
    if [pid for pid, _ in found] != [pid for pid, _ in recorded]:
        return False
    return all(
        a == b or (a is not None and b is not None and abs(a - b) <= 1e-5 * max(abs(a), abs(b)))
        for (_, a), (_, b) in zip(found, recorded, strict=True)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="a run folder or records file")
    parser.add_argument("--config", required=True, help="the config the records were made with")
    parser.add_argument("-n", "--questions", type=int, default=5, help="questions checked (default 5)")
    args = parser.parse_args()
    config = load_config(args.config)
    pool = source_pool(config, None)
    templates = member_templates(config)
    records = [record for _, record in zip(range(args.questions), iter_records(args.records), strict=False)]
    differences = 0
    for name in config.members:
        tree = notation.parse(name)
        kinds = {pool.specs.get(source, ("",))[0] for source in notation.sources(tree)}
        if (
            "parametric" in kinds
            or "hybrid" in kinds
            or any(isinstance(n, notation.Compress) for n in notation.walk(tree))
        ):
            print(f"{name}: needs the reader (skipped)")
            continue
        retriever, same = pool.build(tree), 0
        for record in records:
            output = record.members[name]
            documents = retriever.invoke(record.question)
            found = [(d.metadata["id"], d.metadata["score"]) for d in documents]
            recorded = [(p["id"], p["score"]) for p in output.passages]
            cut = (output.document_cut or {}).get("kept_words")
            pairs = [(d.metadata.get("title", ""), d.page_content) for d in documents]  # as the ensemble
            prompt = templates[name].answer_prompt(record.question, pairs, cut)
            if _same(found, recorded) and prompt == output.prompt:
                same += 1
            else:
                differences += 1
                what = "prompt" if _same(found, recorded) else "passages"
                print(f"{name}: {record.id}: the {what} differ")
        print(f"{name}: {same} of {len(records)} identical (passage ids, scores within 1e-5, prompt)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
