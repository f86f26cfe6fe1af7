"""Benchmark: a reader's prompt and generation rates on an accelerator, for `eor plan --prompt-rate
--generation-rate` (docs/scale.md), measured with the reader's architecture at random weights.

A rate depends on the architecture's shapes, not on the values of its weights, so the model is built from
its published configuration (Qwen2.5-0.5B-Instruct, the packaged reader; Qwen2.5-7B-Instruct, the size the
scale plan assumes) with random bf16 weights: nothing is downloaded. For each batch size B, B prompts of L
random tokens are evaluated in one forward pass (prompt tokens per second = B·L / its seconds), then G tokens
are generated one step at a time from the KV cache, greedily (generated tokens per second = B·G / their
seconds). L and G default to the 16-member pool's mean prompt and answer (docs/performance.md: 13,093 prompt
and 777 generated tokens over its 24 generations a question: about 512 and 32). The implementation is
transformers' own (SDPA attention, eager, no CUDA graphs, no paged KV cache, every sequence of a batch the same
length), so the rates are a floor for a serving engine with continuous batching (vLLM, llama.cpp's server).

    python benchmarks/gpu_reader_rates.py [--arch qwen2.5-0.5b,qwen2.5-7b] [--batches 1,8,32,128]
        [--prompt 512] [--generate 32] [--device cuda] [--layers N] [--json FILE]

`--layers N` keeps the first N layers only (a quick check of the script on a CPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

#: the published shapes (config.json of each Hugging Face model).
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "qwen2.5-7b": {
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
}


def build(arch: str, device: str, layers: int | None) -> Any:
    """The architecture at random weights, bf16 on `device` (fp32 on a CPU), in evaluation mode."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    shapes = dict(ARCHITECTURES[arch])
    if layers:
        shapes["num_hidden_layers"] = layers
    config = Qwen2Config(**shapes, max_position_embeddings=32768, rope_theta=1_000_000.0)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def measure(model: Any, batch: int, prompt: int, generate: int, device: str) -> dict[str, float]:
    """One prompt evaluation of `batch` × `prompt` random tokens and `generate` greedy steps after it."""
    import torch

    def synced() -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter()

    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, prompt), device=device)
    with torch.inference_mode():
        start = synced()
        out = model.model(input_ids=ids, use_cache=True)
        token = model.lm_head(out.last_hidden_state[:, -1:]).argmax(-1)
        prompt_seconds = synced() - start
        cache = out.past_key_values
        start = synced()
        for _ in range(generate):
            out = model.model(input_ids=token, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            token = model.lm_head(out.last_hidden_state).argmax(-1)
        generate_seconds = synced() - start
    return {
        "batch": batch,
        "prompt_seconds": prompt_seconds,
        "generate_seconds": generate_seconds,
        "prompt_rate": batch * prompt / prompt_seconds,
        "generation_rate": batch * generate / generate_seconds,
    }


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = ", ".join(ARCHITECTURES)
    parser.add_argument("--arch", default="qwen2.5-0.5b,qwen2.5-7b", help=f"comma-separated: {names}")
    parser.add_argument("--batches", default="1,8,32,128", help="batch sizes (comma-separated)")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens per sequence (default 512)")
    parser.add_argument("--generate", type=int, default=32, help="generated tokens per sequence (default 32)")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--layers", type=int, help="keep the first N layers only (a quick check)")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    archs = args.arch.split(",")
    unknown = [arch for arch in archs if arch not in ARCHITECTURES]
    if unknown:
        parser.error(f"unknown architecture {unknown[0]!r}; available: {', '.join(ARCHITECTURES)}")
    batches = [int(value) for value in args.batches.split(",")]
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    out: dict[str, Any] = {
        "device": device_name,
        "torch": torch.__version__,
        "prompt_tokens": args.prompt,
        "generated_tokens": args.generate,
        "layers": args.layers,
        "architectures": {},
    }
    print(f"{device_name}; torch {torch.__version__}; {args.prompt} prompt and {args.generate} generated tokens")
    for arch in archs:
        model = build(arch, args.device, args.layers)
        parameters = sum(p.numel() for p in model.parameters())
        measure(model, batches[0], args.prompt, 2, args.device)  # warm-up: kernels chosen, memory allocated
        rows = [measure(model, batch, args.prompt, args.generate, args.device) for batch in batches]
        out["architectures"][arch] = {"parameters": parameters, "rows": rows}
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        out["architectures"][arch]["dtype"] = dtype
        print(f"{arch} ({parameters / 1e9:.2f}B parameters, random {dtype} weights):")
        print("   batch   prompt tokens/s   generated tokens/s")
        for row in rows:
            print(f"  {row['batch']:6d}   {row['prompt_rate']:15,.0f}   {row['generation_rate']:18,.0f}")
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
