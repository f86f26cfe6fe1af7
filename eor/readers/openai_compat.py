"""OpenAI-compatible HTTP reader: OpenAI, vLLM, llama.cpp's server, Ollama, ... through the `openai` client."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from eor.errors import MissingSecretError, ReaderError
from eor.readers.base import BatchedReader, Generated


class OpenAIReader(BatchedReader):
    """Chat completions at temperature 0, sent concurrently from a bounded thread pool. Thread-safe: the
    server does the queueing, so concurrent callers are not serialised here."""

    thread_safe = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 32,
        concurrency: int = 4,
        timeout: float = 120.0,
        seed: int | None = 0,
    ) -> None:
        super().__init__()
        import openai

        if api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise MissingSecretError(
                    f"the reader's API key is read from the environment variable {api_key_env}, which is not set"
                )
        else:
            api_key = "not-needed"  # local servers (llama.cpp, vLLM) accept any key
        self.name = model
        self.model = model
        self.base_url = base_url
        self.default_max_tokens = max_tokens
        self.concurrency = concurrency
        self.seed = seed
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=2)
        self._errors = openai.OpenAIError

    @property
    def identity(self) -> str:
        """The server and the model it serves (plus the seed sent with every request). The server's model
        weights are not visible from here: clear the cache entries of this identity when they change."""
        return f"openai:{(self.base_url or 'https://api.openai.com/v1').rstrip('/')}|model={self.model}|seed={self.seed}"

    def _timed_completion(self, prompt: str, max_tokens: int) -> Generated:
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                max_tokens=max_tokens,
                seed=self.seed,
            )
        except self._errors as exc:
            raise ReaderError(
                f"OpenAI-compatible reader {self.model!r} failed: {type(exc).__name__}: {exc}"
            ) from None
        usage = getattr(response, "usage", None)
        return Generated(
            response.choices[0].message.content or "",
            time.perf_counter() - started,
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
        )

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> list[Generated]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda prompt: self._timed_completion(prompt, max_tokens), prompts))
