"""Cost of eRAG against end-to-end evaluation (the eRAG paper's table 2): wall time and peak memory on the
same questions and documents, each batch configuration measured in a fresh child process.

Configurations, as in table 2:
- `e2e`: end-to-end, each question's k documents in one prompt, one question per reader call (batch 1);
- `erag-query`: eRAG with query-level batching, the k one-document prompts of a question in one call;
- `erag-document`: eRAG with document-level batching, one one-document prompt per call (batch 1).

Each configuration runs `python -m eor.evaluation.erag.time_and_memory SPEC OUT` with the reader config of the run,
except that
- `batch_size` is the configuration's batch (readers that batch, e.g. transformers, pad a batch together;
  llama.cpp runs the prompts of a call one after another, so for it the batch changes little);
- `context_tokens` (the context window, which llama.cpp allocates in full when it loads the model: KV
  cache and compute buffers) is sized to what the configuration needs: its longest prompt in tokens, plus
  the answer tokens and a margin for the chat template, rounded up to 256. This is the memory a method
  *needs*, which is what table 2 compares. Without a tokenizer the config's window is kept.

Measured in the child (the reader behind a generation stage without a cache, like every generation in eor;
model loading excluded from the time):
- `seconds`: wall time of all reader calls;
- `cpu_seconds`: CPU time (user + system, all threads) the child spent in them: less sensitive than wall
  time to other jobs on a shared machine, though spin-waiting llama.cpp threads still inflate it there;
- `peak_rss_mb`: the child's peak resident set size over its whole life (Linux `VmHWM`, else
  `resource.getrusage(...).ru_maxrss`): Python, libraries, model weights, KV cache, buffers;
- `reader_rss_mb`: resident memory added by loading the reader and one warm-up generation (weights paged
  in, KV cache, compute buffers) — native memory, mostly outside Python's allocator;
- `generation_rss_mb`: the peak RSS during the measured generations above the RSS before them (the
  high-water mark is reset through `/proc/self/clear_refs` after the warm-up; where that is impossible,
  the value is null);
- `python_heap_peak_mb`: `tracemalloc`'s peak during generation: Python's allocator only, so llama.cpp's
  and torch's native buffers are invisible to it;
- `gpu_peak_mb`: `torch.cuda.max_memory_allocated` during generation, for a reader on a CUDA device.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import eor
from eor.core.config import ReaderConfig, from_dict
from eor.core.errors import EorError, InputError
from eor.pipeline.stages.generation import GenerationStage
from eor.readers import build_reader, resolve_backend
from eor.readers.base import capable

CONFIGURATIONS = ("e2e", "erag-query", "erag-document")
DESCRIPTIONS = {
    "e2e": "end-to-end: all k documents in one prompt, 1 question per reader call",
    "erag-query": "eRAG, query-level: the k one-document prompts of a question per reader call",
    "erag-document": "eRAG, document-level: 1 one-document prompt per reader call",
}
CHAT_MARGIN_TOKENS = 64  # chat-template tokens around the prompt (Qwen's default system prompt is ~30)
WINDOW_STEP = 256
MB = 1024 * 1024


def count_tokens(reader: Any, text: str) -> int | None:
    """Prompt tokens by the reader's own tokenizer, None when the reader does not count tokens."""
    return reader.count_tokens(text) if capable(reader, "counts_tokens") else None


def _sized(config: ReaderConfig, batch_size: int, window: int) -> dict[str, Any]:
    """The reader config of one configuration: its batch size (transformers batches prompts; llama.cpp runs
    them one by one) and the context window it needs (llama.cpp's)."""
    sized = asdict(config)
    backend = resolve_backend(config)
    if backend == "transformers":
        sized["transformers"]["batch_size"] = batch_size
    elif backend == "llama.cpp":
        sized["llama_cpp"]["context_tokens"] = window
    return sized


def window_for(longest_prompt_tokens: int, max_tokens: int) -> int:
    """The context window a configuration needs, rounded up to a multiple of 256 tokens."""
    needed = longest_prompt_tokens + max_tokens + CHAT_MARGIN_TOKENS
    return WINDOW_STEP * math.ceil(needed / WINDOW_STEP)


def plan(e2e_prompts: Sequence[str], erag_prompts: Sequence[Sequence[str]]) -> dict[str, list[list[str]]]:
    """Reader calls (batches of prompts) per configuration: one end-to-end prompt per question, and per
    question the list of its one-document prompts."""
    if len(e2e_prompts) != len(erag_prompts):
        raise InputError("cost plan: one end-to-end prompt and one list of eRAG prompts per question")
    return {
        "e2e": [[prompt] for prompt in e2e_prompts],
        "erag-query": [list(prompts) for prompts in erag_prompts if prompts],
        "erag-document": [[prompt] for prompts in erag_prompts for prompt in prompts],
    }


def measure_costs(
    reader_config: ReaderConfig,
    e2e_prompts: Sequence[str],
    erag_prompts: Sequence[Sequence[str]],
    *,
    reader: Any = None,
    max_tokens: int | None = None,
    configurations: Sequence[str] = CONFIGURATIONS,
    progress: Callable[[str, int], Any] | None = None,
) -> dict[str, Any]:
    """Measure every configuration in its own child process; `reader` (the run's loaded reader) only counts
    tokens to size each configuration's context window. Returns the table and how it was measured."""
    unknown = [name for name in configurations if name not in CONFIGURATIONS]
    if unknown:
        raise InputError(f"unknown cost configuration {unknown[0]!r}; known: {', '.join(CONFIGURATIONS)}")
    calls = plan(e2e_prompts, erag_prompts)
    tokens = max_tokens or reader_config.max_tokens
    counts = {prompt: count_tokens(reader, prompt) for prompt in dict.fromkeys(_all_prompts(calls))}
    counted = all(value is not None for value in counts.values())
    results: dict[str, Any] = {}
    bar = progress("cost (child processes)", len(configurations)) if progress is not None else None
    try:
        for name in configurations:
            batches = calls[name]
            longest = max((counts[p] or 0 for batch in batches for p in batch), default=0)
            size = max(len(batch) for batch in batches)
            window = window_for(longest, tokens) if counted else reader_config.llama_cpp.context_tokens
            config = _sized(reader_config, size, window)
            measured = _run_child({"reader": config, "batches": batches, "max_tokens": tokens})
            results[name] = {
                "description": DESCRIPTIONS[name],
                "prompts": sum(len(batch) for batch in batches),
                "calls": len(batches),
                "batch_size": size,
                "context_tokens": window,
                "longest_prompt_tokens": longest if counted else None,
                "prompt_tokens": sum(counts[p] or 0 for batch in batches for p in batch) if counted else None,
                **measured,
            }
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return {
        "questions": len(e2e_prompts),
        "documents": sum(len(prompts) for prompts in erag_prompts),
        "max_tokens": tokens,
        "window_sized_per_configuration": counted,
        "memory_measure": (
            "peak_rss_mb: the child's peak resident set size (VmHWM, else ru_maxrss); reader_rss_mb: RSS added by "
            "loading the reader and a warm-up generation; generation_rss_mb: peak RSS during the measured "
            "generations above the RSS before them (high-water mark reset via /proc/self/clear_refs); "
            "python_heap_peak_mb: tracemalloc peak during generation (Python's allocator only; native llama.cpp "
            "or torch memory is not included); gpu_peak_mb: torch.cuda.max_memory_allocated"
        ),
        "configurations": results,
    }


def _all_prompts(calls: dict[str, list[list[str]]]) -> list[str]:
    return [prompt for batches in calls.values() for batch in batches for prompt in batch]


def child_environment() -> dict[str, str]:
    """This process's environment with the folder that holds the `eor` package first on PYTHONPATH, so that the
    child imports the same eor, installed or not."""
    root = str(Path(eor.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="eor-cost-") as folder:
        spec_path, out_path = Path(folder) / "spec.json", Path(folder) / "out.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        completed = subprocess.run(
            [sys.executable, "-m", "eor.evaluation.erag.time_and_memory", str(spec_path), str(out_path)],
            env=child_environment(),
            stdout=subprocess.DEVNULL,
            check=False,
        )
        result = json.loads(out_path.read_text(encoding="utf-8")) if out_path.exists() else {}
        if completed.returncode != 0 or "error" in result:
            detail = result.get("error") or f"exit code {completed.returncode}; see the messages above"
            raise EorError(f"cost measurement failed in its child process: {detail}")
        return result


# --- the child process ------------------------------------------------------------------------------


def _status_kb(field: str) -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else None


def _peak_rss_mb() -> float:
    peak = _status_kb("VmHWM")
    if peak is None:
        # ru_maxrss is in kB on Linux and in bytes on macOS.
        value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return value / MB if sys.platform == "darwin" else value / 1024
    return peak / 1024


def _rss_mb() -> float | None:
    value = _status_kb("VmRSS")
    return None if value is None else value / 1024


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cuda() -> Any:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


def child_main(spec_path: Path, out_path: Path) -> int:
    """Load the reader, warm it up, then time and measure the spec's reader calls; write JSON to out_path."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    try:
        before_reader = _rss_mb()
        # No cache: every configuration pays for all its prompts, which is what is compared.
        reader = GenerationStage(build_reader(from_dict(ReaderConfig, spec["reader"], "the cost spec's reader")))
        reader.generate(["Say OK."], max_tokens=1)  # pages the weights in and allocates buffers, untimed
        after_reader = _rss_mb()
        reset = _reset_peak_rss()
        cuda = _cuda()
        if cuda is not None:
            cuda.synchronize()
            cuda.reset_peak_memory_stats()
        tracemalloc.start()
        cpu_started = _cpu_seconds()
        started = time.perf_counter()
        for batch in spec["batches"]:
            reader.generate(batch, max_tokens=spec["max_tokens"])
        if cuda is not None:
            cuda.synchronize()
        seconds = time.perf_counter() - started
        cpu_seconds = _cpu_seconds() - cpu_started
        heap_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        generation_peak = _status_kb("VmHWM") if reset else None
        result = {
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "peak_rss_mb": _peak_rss_mb(),
            "reader_rss_mb": None if before_reader is None or after_reader is None else after_reader - before_reader,
            "generation_rss_mb": None
            if generation_peak is None or after_reader is None
            else max(generation_peak / 1024 - after_reader, 0.0),
            "python_heap_peak_mb": heap_peak / MB,
            "gpu_peak_mb": None if cuda is None else cuda.max_memory_allocated() / MB,
        }
    except EorError as exc:
        out_path.write_text(json.dumps({"error": str(exc).splitlines()[0]}), encoding="utf-8")
        return 1
    out_path.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m eor.evaluation.erag.time_and_memory SPEC.json OUT.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(child_main(Path(sys.argv[1]), Path(sys.argv[2])))
