"""Benchmark: a reader's prompt and generation rates and a passage encoder's rate on an accelerator, for
`eor plan --prompt-rate --generation-rate` and the dense index of a large corpus (docs/scale.md), measured with
each model's architecture at random weights.

A rate depends on the architecture's shapes, not on the values of its weights, so the model is built from
its published configuration (Qwen2.5-0.5B-Instruct, the packaged reader; Qwen2.5-7B-Instruct, the size the
scale plan assumes) with random bf16 weights: nothing is downloaded. For each batch size B, B prompts of L
random tokens are evaluated in one forward pass (prompt tokens per second = B·L / its seconds), then G tokens
are generated one step at a time from the KV cache, greedily (generated tokens per second = B·G / their
seconds). L and G default to the 16-member pool's mean prompt and answer (docs/performance.md: 13,093 prompt
and 777 generated tokens over its 24 generations a question: about 512 and 32). The implementation is
transformers' own (SDPA attention, eager, no CUDA graphs, no paged KV cache, every sequence of a batch the same
length), so the rates are a floor for a serving engine with continuous batching (vLLM, llama.cpp's server).

The passage encoder (all-MiniLM-L6-v2's shapes, the dense retriever's) encodes batches of `--passage` random
tokens (default 128: the shared NQ corpus's passages are 118 wordpieces on average, 154 at the 90th
percentile) in bf16; passages per second = batch / seconds, the mean of `--repeats` passes.

    python -m benchmarks.gpu_rates [--arch qwen2.5-0.5b,qwen2.5-7b] [--batches 1,8,32,128]
        [--prompt 512] [--generate 32] [--encoder-batches 256,1024] [--passage 128] [--device cuda]
        [--layers N] [--json FILE]

`--layers N` keeps the first N layers only (a quick check of the script on a CPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

# torch and transformers are imported inside the functions that use them: the test suite imports this module.

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


#: all-MiniLM-L6-v2's shapes (the packaged dense encoder, eor.core.models).
ENCODER: dict[str, Any] = {
    "hidden_size": 384,
    "intermediate_size": 1536,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "vocab_size": 30522,
    "max_position_embeddings": 512,
}


def build(arch: str, device: str, layers: int | None) -> Any:
    """The architecture at random weights, bf16 on `device` (fp32 on a CPU), in evaluation mode."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    shapes = {**ARCHITECTURES[arch], "max_position_embeddings": 32768, "rope_theta": 1_000_000.0}
    if layers:
        shapes["num_hidden_layers"] = layers
    config = Qwen2Config(**shapes)
    return _on(device, lambda: AutoModelForCausalLM.from_config(config, attn_implementation="sdpa"))


def build_encoder(device: str, layers: int | None) -> Any:
    """The passage encoder's architecture at random weights, as `build` makes a reader."""
    from transformers import BertConfig, BertModel

    shapes = dict(ENCODER)
    if layers:
        shapes["num_hidden_layers"] = layers
    config = BertConfig(**shapes)
    return _on(device, lambda: BertModel(config, add_pooling_layer=False))


def _on(device: str, make: Any) -> Any:
    """`make()`'s model built on `device` in bf16 (fp32 on a CPU), in evaluation mode."""
    import torch

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = make()
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def _synced(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter()


def measure(model: Any, batch: int, prompt: int, generate: int, device: str) -> dict[str, float]:
    """One prompt evaluation of `batch` × `prompt` random tokens and `generate` greedy steps after it."""
    import torch

    def synced() -> float:
        return _synced(device)

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


def measure_encoder(model: Any, batch: int, tokens: int, device: str, repeats: int) -> dict[str, float]:
    """`repeats` encodings of `batch` passages of `tokens` random tokens, mean-pooled as sentence-transformers
    pools: the mean seconds of one, and passages per second."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (batch, tokens), device=device)
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        start = _synced(device)
        for _ in range(repeats):
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        seconds = (_synced(device) - start) / repeats
    return {"batch": batch, "seconds": seconds, "passages_per_second": batch / seconds}


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = ", ".join(ARCHITECTURES)
    parser.add_argument("--arch", default="qwen2.5-0.5b,qwen2.5-7b", help=f"comma-separated: {names}")
    parser.add_argument("--batches", default="1,8,32,128", help="batch sizes (comma-separated)")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens per sequence (default 512)")
    parser.add_argument("--generate", type=int, default=32, help="generated tokens per sequence (default 32)")
    parser.add_argument("--encoder-batches", default="256,1024", help="the encoder's batch sizes ('' for none)")
    parser.add_argument("--passage", type=int, default=128, help="tokens per passage (default 128)")
    parser.add_argument("--repeats", type=int, default=10, help="encoder passes per batch size (default 10)")
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
    encoder_batches = [int(value) for value in args.encoder_batches.split(",") if value]
    if encoder_batches:
        encoder = build_encoder(args.device, args.layers)
        measure_encoder(encoder, encoder_batches[0], args.passage, args.device, 1)  # warm-up
        rows = [measure_encoder(encoder, b, args.passage, args.device, args.repeats) for b in encoder_batches]
        out["encoder"] = {"model": "all-MiniLM-L6-v2's shapes", "passage_tokens": args.passage, "rows": rows}
        print(f"passage encoder (all-MiniLM-L6-v2's shapes), {args.passage} tokens a passage:")
        for row in rows:
            print(f"  batch {row['batch']:5d}: {row['passages_per_second']:,.0f} passages/s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
