"""llama.cpp reader (llama-cpp-python): the default for GGUF models on a CPU."""

from __future__ import annotations

import os
from pathlib import Path

from eor.errors import ReaderError
from eor.readers.base import BatchedReader, Generated


class LlamaCppReader(BatchedReader):
    """Greedy chat completions from a local GGUF file, one prompt at a time.

    Every prompt is evaluated from an empty KV cache. llama.cpp would otherwise reuse the prefix that a
    prompt shares with the one before it, and the different evaluation batches change the floating-point
    sums enough to flip greedy choices: the same prompt would get different answers depending on what ran
    before it. Answers must depend on the prompt alone, so that runs reproduce and caches stay valid.

    The model loads on first use, so a run served entirely by the generation cache never loads it.
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
            import llama_cpp  # noqa: F401  (checked now; the model itself loads on first use)
        except ImportError as exc:  # pragma: no cover - llama-cpp-python is a core dependency
            raise ReaderError("llama-cpp-python is not installed: pip install llama-cpp-python") from exc
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ReaderError(f"model file not found: {self.model_path}")
        self.name = name or self.model_path.name
        self.default_max_tokens = max_tokens
        self.context_tokens = context_tokens
        self.threads = threads or os.cpu_count() or 1
        self.seed = seed
        self._identity: str | None = None
        self._model = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def _llm(self):  # noqa: ANN202 - llama_cpp.Llama, imported lazily
        """The llama.cpp model, loaded on first use."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    from llama_cpp import Llama

                    try:
                        self._model = Llama(
                            model_path=str(self.model_path),
                            n_ctx=self.context_tokens,
                            n_threads=self.threads,
                            seed=self.seed,
                            verbose=False,
                        )
                    except ValueError as exc:  # llama-cpp-python's error for a file it cannot load
                        raise ReaderError(f"{self.name}: cannot load {self.model_path}: {exc}") from None
        return self._model

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

    def _generate_one(self, prompt: str, max_tokens: int) -> Generated:
        import llama_cpp

        messages = [{"role": "user", "content": prompt}]
        self._llm.reset()
        llama_cpp.llama_perf_context_reset(self._llm.ctx)
        try:
            response = self._llm.create_chat_completion(
                messages=messages, temperature=0.0, max_tokens=max_tokens
            )
        except ValueError as exc:  # llama-cpp-python raises ValueError when the prompt exceeds the context
            raise ReaderError(f"{self.name}: {exc}") from exc
        perf = llama_cpp.llama_perf_context(self._llm.ctx)  # what llama.cpp itself evaluated, and its time
        usage = response.get("usage") or {}
        return Generated(
            response["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(perf.n_p_eval),  # the prompt tokens evaluated (all of them: no prefix reuse)
            generated_tokens=usage.get("completion_tokens", int(perf.n_eval)),
            prompt_seconds=perf.t_p_eval_ms / 1000,
            generation_seconds=perf.t_eval_ms / 1000,
        )
