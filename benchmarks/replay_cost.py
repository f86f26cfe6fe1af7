"""A cascade's reader seconds per question on records, two ways side by side: from the token counts as `eor run`
recorded them (whatever prompt its batch put before each member's), and replayed in the order the cascade runs
its members (eor.runs.costs.PromptReplay: the prefix a prompt shares with the one before it, in whole chunks,
recomputed from the recorded prompts in the reader's tokens); the whole pool likewise.

    python -m benchmarks.replay_cost [--config configs/nq-offline.yaml] [--weights docs/weights/nq-offline-cascade.json]
        [--records docs/records/nq-dev.jsonl.gz] [--rates 281,60]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.core.config import load_config
from eor.core.rates import parse_rates
from eor.learning.judge_cascade import chat_tokenizer
from eor.readers import build_reader
from eor.runs.costs import member_costs, prompt_replay
from eor.runs.run_data import load_run
from voters import VoteBatch, load_voter

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs/nq-offline.yaml"), help="the pool's config")
    parser.add_argument("--weights", default=str(ROOT / "docs/weights/nq-offline-cascade.json"), help="a cascade")
    parser.add_argument("--records", default=str(ROOT / "docs/records/nq-dev.jsonl.gz"), help="records to replay")
    parser.add_argument("--rates", type=parse_rates, default=parse_rates("281,60"), help="PROMPT,GENERATED tok/s")
    args = parser.parse_args(argv)

    rates = args.rates
    prompt, generated = rates["prompt"], rates["generated"]
    config = load_config(args.config)
    cascade = load_voter(args.weights, members=config.members)
    data = load_run(args.records, config.members)
    tokenize = chat_tokenizer(build_reader(config.reader))
    replay = prompt_replay(data, tokenize, rates, config.reader.llama_cpp.prefix_chunk)
    _, stops = cascade.replay(VoteBatch(data.answers, data.passages, data.texts, confidence=data.confidence))
    order = [data.names.index(name) for name in cascade.order_]
    recorded = member_costs(data, "tokens", rates).matrix
    print(f"{data.questions} questions, {prompt:g} prompt / {generated:g} generated tokens per second")
    spent = (cascade.spent(recorded, stops).mean(), replay.spent(order, stops).mean())
    print(f"cascade ({', '.join(cascade.order_)}): {spent[0]:.2f} s recorded order, {spent[1]:.2f} s replayed")
    whole = (recorded.sum(axis=1).mean(), replay.spent(order).mean())
    print(f"whole pool in the cascade's order: {whole[0]:.2f} s recorded order, {whole[1]:.2f} s replayed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
