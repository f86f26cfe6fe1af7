"""Reader backends behind one protocol, `generate(prompts) -> list[str]`, found through a registry."""

from __future__ import annotations

from collections.abc import Callable

from eor.core.config import ReaderConfig
from eor.core.errors import ConfigError
from eor.core.models import is_gguf, resolve_model
from eor.core.registry import Registry
from eor.readers.base import BatchedReader, Reader
from eor.readers.hf import TransformersReader
from eor.readers.llamacpp import LlamaCppReader
from eor.readers.openai_compat import OpenAIReader


def _llamacpp(config: ReaderConfig) -> Reader:
    location = resolve_model(config.model)
    if not is_gguf(location):
        raise ConfigError(f"the llama.cpp backend needs a .gguf file; {config.model!r} resolved to {location}")
    options = config.llama_cpp
    return LlamaCppReader(
        location,
        name=config.model,
        context_tokens=options.context_tokens,
        threads=options.threads,
        batch_threads=options.batch_threads,
        max_tokens=config.max_tokens,
        seed=config.seed,
        prefix_chunk=options.prefix_chunk,
        parallel=options.parallel,
        parallel_min_tokens=options.parallel_min_tokens,
        prompt_states=options.prompt_states_mb * 2**20,
        record_confidence=config.confidence,
    )


def _transformers(config: ReaderConfig) -> Reader:
    options = config.transformers
    return TransformersReader(
        resolve_model(config.model),
        name=config.model,
        max_tokens=config.max_tokens,
        batch_size=options.batch_size,
        device=options.device,
        record_confidence=config.confidence,
    )


def _openai(config: ReaderConfig) -> Reader:
    options = config.openai
    return OpenAIReader(
        config.model,
        base_url=options.base_url,
        api_key_env=options.api_key_env,
        max_tokens=config.max_tokens,
        concurrency=options.concurrency,
        seed=config.seed,
        retries=options.retries,
        record_confidence=config.confidence,
        chat_template=options.chat_template,
    )


ReaderFactory = Callable[[ReaderConfig], Reader]
READERS: Registry[ReaderFactory] = Registry(
    "reader backend", group="eor.readers", accept=callable, expected="a reader factory"
)
READERS.register("llama.cpp", _llamacpp)
READERS.register("transformers", _transformers)
READERS.register("openai", _openai)


def reader_backends() -> dict[str, ReaderFactory]:
    """Every reader backend: eor's, and those of installed packages (entry point group `eor.readers`, each a
    factory `(ReaderConfig) -> Reader`; eor.core.plugins)."""
    return dict(READERS.items())


def resolve_backend(config: ReaderConfig) -> str:
    """The backend a config names; `auto` is openai when `openai.base_url` is set, llama.cpp for GGUF files
    and transformers for everything else."""
    if config.backend != "auto":
        return config.backend
    if config.openai.base_url:
        return "openai"
    return "llama.cpp" if is_gguf(resolve_model(config.model)) else "transformers"


def check_backend(config: ReaderConfig, backend: str) -> None:
    """ConfigError unless `backend` is registered and the config sets no option of another backend (an
    option for another backend is an error, not ignored). `build_reader` checks the backend it resolved;
    eor.pipeline.validation checks one the config names outright, before anything loads."""
    if backend not in READERS:
        raise ConfigError(f"reader.backend: unknown reader backend {backend!r}; valid: auto, {', '.join(READERS)}")
    config.check_sections(backend)


def build_reader(config: ReaderConfig) -> Reader:
    """The reader a config names (`resolve_backend`)."""
    backend = resolve_backend(config)
    check_backend(config, backend)
    return READERS[backend](config)


__all__ = [
    "READERS",
    "BatchedReader",
    "Reader",
    "build_reader",
    "check_backend",
    "reader_backends",
    "resolve_backend",
]
