"""Reader backends behind one protocol, `generate(prompts) -> list[str]`, found through a registry."""

from __future__ import annotations

from collections.abc import Callable

from eor.config import ReaderConfig
from eor.errors import ConfigError
from eor.models import is_gguf, resolve_model
from eor.readers.base import BatchedReader, Reader


def _llamacpp(config: ReaderConfig) -> Reader:
    from eor.readers.llamacpp import LlamaCppReader

    location = resolve_model(config.model)
    if not is_gguf(location):
        raise ConfigError(f"the llama.cpp backend needs a .gguf file; {config.model!r} resolved to {location}")
    return LlamaCppReader(
        location,
        name=config.model,
        context_tokens=config.context_tokens,
        threads=config.threads,
        batch_threads=config.batch_threads,
        max_tokens=config.max_tokens,
        seed=config.seed,
        prefix_chunk=config.prefix_chunk,
        parallel=config.parallel,
        parallel_min_tokens=config.parallel_min_tokens,
    )


def _transformers(config: ReaderConfig) -> Reader:
    from eor.readers.hf import TransformersReader

    return TransformersReader(
        resolve_model(config.model),
        name=config.model,
        max_tokens=config.max_tokens,
        batch_size=config.batch_size,
        device=config.device,
    )


def _openai(config: ReaderConfig) -> Reader:
    from eor.readers.openai_compat import OpenAIReader

    return OpenAIReader(
        config.model,
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        max_tokens=config.max_tokens,
        concurrency=config.concurrency,
        seed=config.seed,
        retries=config.retries,
    )


READERS: dict[str, Callable[[ReaderConfig], Reader]] = {
    "llama.cpp": _llamacpp,
    "transformers": _transformers,
    "openai": _openai,
}


def build_reader(config: ReaderConfig) -> Reader:
    """The reader a config names; `auto` is llama.cpp for GGUF files and transformers for everything else."""
    backend = config.backend
    if backend == "auto":
        backend = (
            "openai" if config.base_url else ("llama.cpp" if is_gguf(resolve_model(config.model)) else "transformers")
        )
    if backend not in READERS:
        raise ConfigError(f"unknown reader backend {backend!r}; valid: auto, {', '.join(READERS)}")
    return READERS[backend](config)


__all__ = ["READERS", "BatchedReader", "Reader", "build_reader"]
