"""Benchmark: llama.cpp's prompt-evaluation rate by chunk size U, prompt threads, and a Q4_0 copy of the model.

The same reading prompts (NQ dev questions with 1 to 10 passages of the shared corpus, 150–1,600 tokens) are
evaluated from an empty KV cache (`max_tokens=1`: prompt evaluation plus one token) by readers that differ in
one setting, side by side in one process:

- `U` (`prefix_chunk`, = n_batch = n_ubatch): 32, 64, 128, 256 and 512 (512: the former path);
- `batch_threads` 1 against 2 (the default, every core);
- the model requantized to Q4_0 (`--q4-0`), which llama.cpp repacks for its AVX2/AVX-512 matrix kernels. A
  requantized model answers differently: this measures what the kernels would give, not a setting to use.

    python -m benchmarks.bench_prompt_rate [--questions 4] [--q4-0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import llama_cpp

from eor.core.models import resolve_model
from eor.core.prompts import PromptTemplates
from eor.readers.llamacpp import LlamaCppReader

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


def prompts(count: int) -> list[str]:
    templates = PromptTemplates()
    corpus = [json.loads(line) for _, line in zip(range(200), open(SHARED / "corpus" / "wiki-nq.jsonl"), strict=False)]
    questions = [
        json.loads(line)["question"] for _, line in zip(range(count), open(SHARED / "nq" / "dev.jsonl"), strict=False)
    ]
    out = []
    for i, question in enumerate(questions):
        for passages in (1, 4, 10):
            chosen = corpus[(i * 10) % 190 : (i * 10) % 190 + passages]
            out.append(templates.answer_prompt(question, [(p["title"], p["text"]) for p in chosen]))
    return out


def rate(model: Path, texts: list[str], **settings: Any) -> tuple[float, int, float]:
    """(prompt tokens/s, prompt tokens, seconds) over `texts`, each from an empty KV cache."""
    reader = LlamaCppReader(model, context_tokens=4096, **settings)
    reader.generate_timed(["warm up"], 1)
    tokens, seconds = 0, 0.0
    for text in texts:
        reader.forget()  # every prompt from an empty cache: the rate of evaluation, not of reuse
        output = reader.generate_timed([text], 1)[0]
        assert output.prompt_tokens is not None and output.prompt_seconds is not None  # llama.cpp counts them
        tokens += output.prompt_tokens
        seconds += output.prompt_seconds
    return tokens / seconds, tokens, seconds


def requantized_q4_0(model: Path, folder: Path) -> Path:
    target = folder / (model.stem + ".q4_0.gguf")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(model).encode(), str(target).encode(), params) != 0:
        sys.exit("requantizing to Q4_0 failed")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--q4-0", action="store_true", help="also measure a Q4_0 copy of the model")
    args = parser.parse_args(argv)
    model = Path(resolve_model(args.model))
    texts = prompts(args.questions)
    runs = [(f"U={u}", model, {"prefix_chunk": u if u != 512 else 0}) for u in (32, 64, 128, 256, 512)]
    runs.append(("U=64, 1 prompt thread", model, {"prefix_chunk": 64, "batch_threads": 1}))
    with tempfile.TemporaryDirectory(prefix="eor-q4-0-") as folder:
        if args.q4_0:
            q4 = requantized_q4_0(model, Path(folder))
            runs += [("Q4_0, U=64", q4, {"prefix_chunk": 64}), ("Q4_0, U=512", q4, {"prefix_chunk": 0})]
        print(f"{len(texts)} prompts of {model.name}, each from an empty KV cache")
        print(f"{'setting':<24} {'tokens/s':>9} {'tokens':>7} {'seconds':>8}")
        for label, path, settings in runs:
            started = time.perf_counter()
            per_second, tokens, seconds = rate(path, texts, **settings)
            spent = time.perf_counter() - started
            print(f"{label:<24} {per_second:>9.1f} {tokens:>7} {seconds:>8.1f}   ({spent:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
