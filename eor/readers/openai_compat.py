"""OpenAI-compatible HTTP reader: OpenAI, vLLM, llama.cpp's server, Ollama, ... through the `openai` client;
one server or several replicas of it (eor.readers.endpoints)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eor.core.confidence import Confidence
from eor.core.errors import ContextOverflowError, MissingSecretError, ReaderError
from eor.core.likelihood import TURN_MARK, Likelihood, turn_end_text
from eor.core.retry import RETRY_STATUSES, RetryPolicy, call_with_retries
from eor.readers.base import BatchedReader, Generated
from eor.readers.endpoints import EndpointPool

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIReader(BatchedReader):
    """Chat completions at temperature 0, sent concurrently from a bounded thread pool. Thread-safe: the
    server does the queueing, so concurrent callers are not serialised here.

    `base_url` may list several replicas serving the same model: each request goes to the least loaded
    healthy one, at most `concurrency` at once per replica, and a replica that stops answering is left out
    until its health check answers again (eor.readers.endpoints).

    A request is retried (eor.core.retry, `retries`: attempts or a policy mapping) on refused connections,
    timeouts, 429 (as long as `Retry-After` asks) and 500/502/503/504, on another replica when there is
    one; after the last try the prompt fails with the project's ReaderError, which costs only that prompt's
    member (the generation stage's policy)."""

    thread_safe = True
    batches = True  # concurrent requests: the server batches them
    confidence = True  # where the server offers logprobs; a completion without them has confidence None

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 32,
        concurrency: int = 4,
        timeout: float = 120.0,
        seed: int | None = 0,
        retries: Any = None,
        record_confidence: bool = True,
        chat_template: str | None = None,
    ) -> None:
        super().__init__()
        import openai

        self.chat_template = _template_text(chat_template)
        self.scores = self.chat_template is not None
        self.confidence = self.ask_logprobs = record_confidence  # off for good once a server refuses them
        if api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise MissingSecretError(
                    f"the reader's API key is read from the environment variable {api_key_env}, which is not set"
                )
        else:
            api_key = "not-needed"  # local servers (llama.cpp, vLLM) accept any key
        self._api_key = api_key if api_key_env else None
        self.name = model
        self.model = model
        urls = [base_url] if base_url is None or isinstance(base_url, str) else list(base_url)
        urls = [os.environ.get("OPENAI_BASE_URL", OPENAI_URL) if url is None else url for url in urls]
        self.default_max_tokens = max_tokens
        self.seed = seed
        self.retries = RetryPolicy() if retries is None else RetryPolicy.of(retries)
        # The client's own retries are off: eor.core.retry's policy (attempts, deadline, Retry-After) is the one.
        self.endpoints = EndpointPool(
            urls,
            lambda url: openai.OpenAI(base_url=url, api_key=api_key, timeout=timeout, max_retries=0),
            concurrency,
        )
        self.base_url = self.endpoints.endpoints[0].url
        self.concurrency = concurrency * len(urls)  # requests in flight at once, over every replica
        self._errors = openai.OpenAIError
        self._transient = (openai.APIConnectionError, openai.APITimeoutError)
        self._status_error = openai.APIStatusError

    @property
    def identity(self) -> str:
        """The servers (sorted) and the model they serve (plus the seed sent with every request). The servers'
        model weights are not visible from here: clear the cache entries of this identity when they change."""
        servers = ",".join(sorted(endpoint.url for endpoint in self.endpoints.endpoints))
        template = ""
        if self.chat_template is not None:  # scores depend on it
            template = f"|template={hashlib.sha256(self.chat_template.encode('utf-8')).hexdigest()[:12]}"
        return f"openai:{servers}|model={self.model}|seed={self.seed}{template}"

    def _score(self, prompt: str, continuations: list[str]) -> list[Likelihood]:
        """Each continuation's tokens' log-probabilities from the completions endpoint: the chat-formatted
        prompt (`chat_template`), the continuation and the end of the turn sent as one prompt and echoed with
        its log-probabilities; the continuation's tokens are those after the chat-formatted prompt's own (the
        server's echo of that prompt alone, asked once per call)."""
        assert self.chat_template is not None  # `scores` is False without one (why_not_scoring)
        head = _render(self.chat_template, [{"role": "user", "content": prompt}], generation_prompt=True)
        chat = [{"role": "user", "content": prompt}, {"role": "assistant", "content": TURN_MARK}]
        end = turn_end_text(_render(self.chat_template, chat, generation_prompt=False)) or ""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            echoes = list(pool.map(self._echo, [head, *(head + text + end for text in continuations)]))
        (head_tokens, _), scored = echoes[0], echoes[1:]
        results = []
        for tokens, values in scored:
            own = [v for v in values[len(head_tokens) :] if v is not None]
            if tokens[: len(head_tokens)] != head_tokens or len(own) != len(values) - len(head_tokens):
                raise ReaderError(
                    f"OpenAI-compatible server {self.base_url} tokenized the chat-formatted prompt differently "
                    "with a continuation behind it: its scores cannot be read apart"
                )
            results.append(Likelihood(tuple(float(v) for v in own)))
        return results

    def why_not_scoring(self) -> str:
        return (
            f"OpenAI-compatible reader {self.model!r} at {self.base_url} cannot score continuations without the "
            "chat template the server applies: set reader.openai.chat_template (its text or a file holding it)"
        )

    def _echo(self, text: str) -> tuple[list[str], list[float | None]]:
        """The server's tokens of `text` sent as a completion prompt, with their echoed log-probabilities."""

        def request() -> Any:
            endpoint = self.endpoints.acquire()
            failed = False
            try:
                return endpoint.client.completions.create(
                    model=self.model,
                    prompt=text,
                    max_tokens=1,
                    temperature=0.0,
                    echo=True,
                    logprobs=0,
                    seed=self.seed,
                )
            except self._errors as exc:
                failed = self._endpoint_down(exc)
                raise
            finally:
                self.endpoints.release(endpoint, failed)

        try:
            response = call_with_retries(
                request, self.retries, what=f"reader {self.model!r}", retryable=self._retryable
            )
        except self._errors as exc:
            message = str(exc).replace(self._api_key, "[the key]") if self._api_key else str(exc)
            raise ReaderError(
                f"OpenAI-compatible reader {self.model!r} at {self.base_url} could not score: {message}"
            ) from None
        logprobs = getattr(response.choices[0], "logprobs", None)
        tokens, values = getattr(logprobs, "tokens", None), getattr(logprobs, "token_logprobs", None)
        if not tokens or not values:
            raise ReaderError(
                f"OpenAI-compatible server {self.base_url} returned no prompt log-probabilities (completions with "
                f"echo and logprobs): reader {self.model!r} cannot score continuations there"
            )
        generated = getattr(getattr(response, "usage", None), "completion_tokens", None) or 0
        kept = len(tokens) - generated  # the echoed prompt, without the generated token
        return list(tokens[:kept]), list(values[:kept])

    def _timed_completion(self, prompt: str, max_tokens: int) -> Generated:
        started = time.perf_counter()
        tried: list[str] = []  # the addresses asked, for the error

        def request() -> Any:
            endpoint = self.endpoints.acquire()
            tried.append(endpoint.url)
            failed = False
            logprobs = {"logprobs": True, "top_logprobs": 2} if self.ask_logprobs else {}
            try:
                return endpoint.client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0.0,
                    max_tokens=max_tokens,
                    seed=self.seed,
                    **logprobs,
                )
            except self._errors as exc:
                if not (logprobs and self._refuses_logprobs(exc)):
                    failed = self._endpoint_down(exc)
                    raise
            finally:
                self.endpoints.release(endpoint, failed)
            self.ask_logprobs = False  # a server without logprobs: ask again, plainly, from now on
            return request()

        try:
            response = call_with_retries(
                request, self.retries, what=f"reader {self.model!r}", retryable=self._retryable
            )
        except self._errors as exc:  # the server's words may repeat the key it was sent: never pass it on
            message = str(exc) + (f" ({exc.__cause__})" if isinstance(exc, self._transient) and exc.__cause__ else "")
            message = message.replace(self._api_key, "[the key]") if self._api_key else message
            overflow = isinstance(exc, self._status_error) and exc.status_code == 400 and "context" in message.lower()
            error = ContextOverflowError if overflow else ReaderError
            where = ", ".join(dict.fromkeys(tried))
            raise error(
                f"OpenAI-compatible reader {self.model!r} at {where} failed: {type(exc).__name__}: {message}"
            ) from None
        usage = getattr(response, "usage", None)
        return Generated(
            response.choices[0].message.content or "",
            time.perf_counter() - started,
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
            confidence=response_confidence(response.choices[0]),
        )

    def _refuses_logprobs(self, error: BaseException) -> bool:
        """A 400/422 that names logprobs: this server does not offer them."""
        status = getattr(error, "status_code", None)
        return isinstance(error, self._status_error) and status in (400, 422) and "logprob" in str(error).lower()

    def _endpoint_down(self, error: BaseException) -> bool:
        """Whether the error says the server (not this request) is unwell: refused, timed out, 502/503/504."""
        if isinstance(error, self._status_error):
            return error.status_code in (502, 503, 504)
        return isinstance(error, self._transient)

    def _retryable(self, error: BaseException) -> bool:
        if isinstance(error, self._status_error):
            return error.status_code in RETRY_STATUSES
        return isinstance(error, self._transient)

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> list[Generated]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda prompt: self._timed_completion(prompt, max_tokens), prompts))


def _template_text(setting: str | None) -> str | None:
    """A chat template given as its text or as a file holding it."""
    if setting is None:
        return None
    if "{" not in setting and Path(setting).expanduser().is_file():
        return Path(setting).expanduser().read_text(encoding="utf-8")
    return setting


def _render(template: str, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    """A chat as the server formats it, through the same sandboxed Jinja environment as transformers."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return environment.from_string(template).render(
        messages=messages, add_generation_prompt=generation_prompt, bos_token="", eos_token=""
    )


def response_confidence(choice: Any) -> Confidence | None:
    """The confidence of a chat completion choice from its `logprobs.content` (each token's logprob, and the
    first token's top two); None when the server sent none."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    values = [float(item.logprob) for item in content]
    alternatives = sorted((float(t.logprob) for t in (content[0].top_logprobs or [])), reverse=True)
    margin = alternatives[0] - alternatives[1] if len(alternatives) >= 2 else None
    return Confidence(tuple(values), margin)
