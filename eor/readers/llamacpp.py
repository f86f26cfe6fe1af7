"""llama.cpp reader (llama-cpp-python): the default for GGUF models on a CPU."""

from __future__ import annotations

import os
from pathlib import Path

from eor.errors import ReaderError
from eor.readers.base import BatchedReader


class LlamaCppReader(BatchedReader):
    """Greedy chat completions from a local GGUF file, one prompt at a time.

    Every prompt is evaluated from an empty KV cache. llama.cpp would otherwise reuse the prefix that a
    prompt shares with the one before it, and the different evaluation batches change the floating-point
    sums enough to flip greedy choices: the same prompt would get different answers depending on what ran
    before it. Answers must depend on the prompt alone, so that runs reproduce and caches stay valid.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        name: str | None = None,
        context_tokens: int = 8192,
        threads: int | None = None,
        max_tokens: int = 32,
        seed: int = 0,
    ) -> None:
        super().__init__()
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - llama-cpp-python is a core dependency
            raise ReaderError("llama-cpp-python is not installed: pip install llama-cpp-python") from exc
        self.name = name or Path(model_path).name
        self.model_path = Path(model_path)
        self.default_max_tokens = max_tokens
        self.context_tokens = context_tokens
        self._identity: str | None = None
        self._llm = Llama(
            model_path=str(model_path),
            n_ctx=context_tokens,
            n_threads=threads or os.cpu_count() or 1,
            seed=seed,
            verbose=False,
        )

    @property
    def identity(self) -> str:
        """Backend, model file and its sha256 (memoised, see eor.models.file_sha256), context size and the
        llama-cpp-python version. Not the thread count (each dot product is summed by one thread) nor the
        seed (decoding is greedy)."""
        if self._identity is None:
            import llama_cpp

            from eor.models import file_sha256

            digest = file_sha256(self.model_path)[:16]
            self._identity = (
                f"llama.cpp:{self.model_path.name}@sha256:{digest}|n_ctx={self.context_tokens}"
                f"|llama-cpp-python={llama_cpp.__version__}"
            )
        return self._identity

    def _generate_one(self, prompt: str, max_tokens: int) -> str:
        messages = [{"role": "user", "content": prompt}]
        self._llm.reset()
        try:
            response = self._llm.create_chat_completion(
                messages=messages, temperature=0.0, max_tokens=max_tokens
            )
        except ValueError as exc:  # llama-cpp-python raises ValueError when the prompt exceeds the context
            raise ReaderError(f"{self.name}: {exc}") from exc
        return response["choices"][0]["message"]["content"] or ""
