"""Typed configuration loaded from YAML: unknown keys fail with a message that lists the valid ones.

Relative paths inside a config file are resolved against the file's own folder, so a config works from
any working directory.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.errors import ConfigError

#: a path that starts with it names a file shipped inside the eor package (`eor:demo/corpus.jsonl`).
PACKAGE_SCHEME = "eor:"


@dataclass
class LlamaCppOptions:
    """`reader.llama_cpp`: `context_tokens`, the context window; `threads` (default: llama.cpp's choice) and
    `batch_threads` (prompt evaluation; default `threads`); `prefix_chunk`, the chunk size U of deterministic
    prefix reuse (0: every prompt from an empty KV cache); `parallel`, the prompts of one call decoded
    together when each may generate more than `parallel_min_tokens` tokens (1: one at a time);
    `prompt_states_mb`, the megabytes of the latest prompts' KV states kept so that the reader as judge scores
    behind a prompt without evaluating it again (eor.readers.llamacpp_states; 0: none)."""

    context_tokens: int = 8192
    threads: int | None = None
    batch_threads: int | None = None
    prefix_chunk: int = 64
    parallel: int = 1
    parallel_min_tokens: int = 64
    prompt_states_mb: int = 96


@dataclass
class TransformersOptions:
    """`reader.transformers`: prompts per padded batch and the torch device."""

    batch_size: int = 8
    device: str = "cpu"


@dataclass
class OpenAIOptions:
    """`reader.openai`: an OpenAI-compatible server (`base_url`; OpenAI's own when unset) or a list of
    replicas serving the same model, the environment variable holding its key, requests in flight at once
    per server, and the retry policy (eor.core.retry). `chat_template`: the Jinja chat template the server
    applies (its text, or a file holding it), for scoring continuations through the completions endpoint
    (`score`: the chat-formatted text and the continuation, the prompt's log-probabilities echoed)."""

    base_url: str | list[str] | None = None
    api_key_env: str | None = None
    concurrency: int = 4
    retries: Any = None
    chat_template: str | None = None


#: each built-in backend's own section of `reader:`; `options` is for a backend of another package.
BACKEND_SECTIONS = {"llama.cpp": "llama_cpp", "transformers": "transformers", "openai": "openai"}


@dataclass
class ReaderConfig:
    """The shared reader LLM. `backend: auto` picks openai when `openai.base_url` is set, llama.cpp for GGUF
    files, transformers otherwise; a backend of another package (entry points `eor.readers`) is named as it
    is. Each built-in backend has its own section of options; a section set for another backend than the
    one used is an error, never silently ignored (`check_sections`). `options` goes to a plugin backend."""

    model: str = "qwen2.5-0.5b"
    backend: str = "auto"
    max_tokens: int = 32
    seed: int = 0
    confidence: bool = True  # keep each generated token's log-probability (eor.core.confidence)
    llama_cpp: LlamaCppOptions = field(default_factory=LlamaCppOptions)
    transformers: TransformersOptions = field(default_factory=TransformersOptions)
    openai: OpenAIOptions = field(default_factory=OpenAIOptions)
    options: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
        """Configs written before the sections existed: a flat backend key moves into its section."""
        moved = dict(data)
        for section, cls in (
            ("llama_cpp", LlamaCppOptions),
            ("transformers", TransformersOptions),
            ("openai", OpenAIOptions),
        ):
            for name in (f.name for f in dataclasses.fields(cls)):
                if name not in moved:
                    continue
                target = dict(moved[section]) if isinstance(moved.get(section), dict) else {}
                if name in target:
                    raise ConfigError(f"{where}: {name} is set twice, flat and in {section}")
                target[name] = moved.pop(name)
                moved[section] = target
        return moved

    def check_sections(self, backend: str) -> None:
        """ConfigError when an option is set for a backend other than `backend` (the one being built)."""
        for name, section in BACKEND_SECTIONS.items():
            if name != backend and getattr(self, section) != type(getattr(self, section))():
                raise ConfigError(
                    f"reader.{section} is set, but the reader's backend is {backend}: remove it, or set backend: {name}"
                )
        if self.options and backend in BACKEND_SECTIONS:
            section = BACKEND_SECTIONS[backend]
            raise ConfigError(f"reader.options is for a backend of another package; {backend} takes reader.{section}")


@dataclass
class CorpusConfig:
    """A JSON Lines corpus with `id`, `title` and `text` fields. `documents`: the folder it was imported from
    (eor import-corpus FOLDER), whose files `eor serve` shows behind its API key, so the explorer links each
    passage to its file and page."""

    path: str = ""
    documents: str = ""


@dataclass
class SourceConfig:
    """A base retriever: `type` is a registered source type; `params` go to its factory."""

    type: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class VoterConfig:
    """The pool's voter. `weights`: the weights file `eor ask`, `eor serve` and `Ensemble.from_config` answer
    with when none is given (a path relative to the config file); without one, uniform weights over these
    metrics.

    `metric_params` sets each metric's parameters by name, e.g. `{bertscore: {num_layers: 6}, nli: {model:
    PATH, combine: max}}`; `encoder` is the default model of `cosine` and `bertscore`. `risk`: the error rate
    `eor ask` and `eor serve` answer at when none is asked for: they decline where the answer's P(right) is
    below the weights file's threshold for it (eor.pipeline.abstention; `--risk` and a request's `risk` override it).
    """

    weights: str | None = None
    metrics: list[str] = field(default_factory=lambda: ["em", "f1", "cosine"])
    metric_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    pooling: str = "mean"
    threshold: float = 0.5
    encoder: str = "minilm-l6"
    risk: float | None = None

    def resolved_metric_params(self) -> dict[str, dict[str, Any]]:
        """`metric_params` with `encoder` as the model of cosine and bertscore unless they name one."""
        stray = sorted(set(self.metric_params) - set(self.metrics))
        if stray:
            raise ConfigError(f"voter.metric_params names metric(s) not in voter.metrics: {', '.join(stray)}")
        params: dict[str, dict[str, Any]] = {
            name: {"model": self.encoder} for name in ("cosine", "bertscore") if name in self.metrics
        }
        for name, values in self.metric_params.items():
            params[name] = {**params.get(name, {}), **values}
        return params

    def uniform(self) -> dict[str, Any]:
        """The hyper-parameters of the uniform vote over the members (voters.loading.choose_voter without a
        weights file): the metrics, their parameters, the pooling and the member threshold."""
        return {
            "metrics": tuple(self.metrics),
            "pooling": self.pooling,
            "threshold": self.threshold,
            "metric_params": self.resolved_metric_params() or None,
        }


@dataclass
class Demonstration:
    """One worked example of a few-shot prompt variant: a training question (`id`, so that training and
    held-out sets can leave it out), its short answer and, for variants that show evidence, a `passage` it
    is read from."""

    question: str = ""
    answer: str = ""
    id: str | None = None
    passage: str = ""


@dataclass
class PromptVariantConfig:
    """`prompts.variants.NAME`, the answer prompt of members named `...:NAME` (PromptTemplates.with_variant):
    `reading` and `retrieval_free` templates (`{query}`, `{document}`, and `{demonstrations}` for the worked
    examples, each written with `demonstration`: `{question}`, `{answer}`, `{passage}`); a template left out
    is the pool's own, with the examples put before it when there are any."""

    reading: str | None = None
    retrieval_free: str | None = None
    demonstrations: list[Demonstration] = field(default_factory=list)
    demonstration: str = "Question: {question}\nAnswer: {answer}"


@dataclass
class PromptConfig:
    """Appendix C.2 templates; `style` picks "few-words" (Llama2-chat) or "15-words" (ChatGPT); `variants`,
    the answer prompts that members may name (`Wiki@1:fewshot`)."""

    style: str = "few-words"
    retrieval_free: str | None = None
    reading: str | None = None
    parametric: str | None = None
    compression: str | None = None
    passage: str | None = None
    parametric_max_tokens: int = 256
    compression_max_tokens: int = 300
    variants: dict[str, PromptVariantConfig] = field(default_factory=dict)


#: what the judge answers after (`judge.after`): every member, or a cascade's last step (eor.pipeline.judging)
JUDGE_AFTER = ("members", "cascade")


@dataclass
class JudgeConfig:
    """`judge`: the reader as judge (eor.pipeline.judging). Each question's candidates (the members' answers and
    up to `k` spans of the passages they read by the span `rule`, voters.candidates; `rule: null` for the
    members' answers alone) scored by the reader under each member's prompt, and under each retrieved passage
    alone in the reading prompt (`passages`). `members`: the pool the judge weighs (default: every member of the
    config; a subset lets records that hold more members be scored for one pool). `eor run` grows its records
    by these scores.

    `weights`: the judge voter (`eor train --voter judge`) that `eor ask`, `eor serve` and `Ensemble` answer
    with: every member runs, then the voter chooses among the candidates. `score: false` answers without the
    reader's scores (the voter's fit on the text alone: no reader time after the members'); `passages: false`
    scores under the members' prompts only (the prompts the members just evaluated). `after`: `members` (every
    member runs, then the judge) or `cascade` (the config's voter is a cascade trained with this judge as its
    last step, `eor train --voter cascade --judge`: its steps answer the questions they stop, the judge those it
    runs to its end). `null_candidate`: `eor run` also scores the null candidate, the reader's own "no answer" in a few
    phrasings (eor.pipeline.judging.NULL_ANSWERS), under each member's prompt (SQuAD 2.0's null span), into the
    records; answering scores it only for a voter that reads it."""

    rule: str | None = "entities"
    k: int = 10
    passages: bool = True
    members: list[str] | None = None
    weights: str | None = None
    score: bool = True
    after: str = "members"
    null_candidate: bool = False


@dataclass
class EnsembleConfig:
    name: str = "eor"
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    corpus: CorpusConfig | None = None
    sources: dict[str, SourceConfig] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    voter: VoterConfig = field(default_factory=VoterConfig)
    prompts: PromptConfig = field(default_factory=PromptConfig)
    retrieval_depth: int = 20
    rrf_k: int = 60  # reciprocal rank fusion's k, for members that fuse rankings (`Wiki+BM25`)
    max_document_words: int = 1500
    batch_size: int = 8
    judge: JudgeConfig | None = None
    base_dir: str = "."  # the config file's folder; relative paths resolve against it

    def resolve_path(self, path: str) -> Path:
        """`path` as a file: `eor:demo/corpus.jsonl` is a file shipped inside the eor package (found wherever
        it is installed), a relative path is relative to the config file's folder."""
        if path.startswith(PACKAGE_SCHEME):
            return shipped_or_path(path)
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else (Path(self.base_dir) / candidate).resolve()

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("base_dir")
        if self.judge is None:  # as configs without the judge were always saved
            data.pop("judge")
        else:  # keys at their default, as configs were saved before they existed
            for key, default in (("after", "members"), ("null_candidate", False)):
                if data["judge"][key] == default:
                    data["judge"].pop(key)
        if self.corpus is not None:
            data["corpus"]["path"] = str(self.resolve_path(self.corpus.path))
        if self.voter.weights:
            data["voter"]["weights"] = str(self.resolve_path(self.voter.weights))
        return data

    def default_weights(self) -> Path | None:
        """The weights file `voter.weights` names, resolved against the config's folder; None without one."""
        return self.resolve_path(self.voter.weights) if self.voter.weights else None


def shipped_or_path(given: str | Path) -> Path:
    """A file given on the command line: `eor:weights/NAME.json` is one shipped inside the eor package (found
    wherever it is installed), anything else the path as given."""
    text = str(given)
    return package_file(text[len(PACKAGE_SCHEME) :]) if text.startswith(PACKAGE_SCHEME) else Path(given)


def from_dict(cls: type, data: Any, where: str) -> Any:
    """Build dataclass `cls` from a mapping, checking keys and simple types recursively."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    migrate = getattr(cls, "migrate", None)
    if callable(migrate):
        data = migrate(data, where)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(fields), key=repr)  # YAML keys may be numbers, not only strings
    if unknown:
        valid = ", ".join(name for name in fields if name != "base_dir")
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; valid keys: {valid}")
    values = {name: _convert(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    return cls(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:
            return _convert(options[0], value, where)
        for inner in options:  # the first that takes the value (e.g. str | list[str])
            try:
                return _convert(inner, value, where)
            except ConfigError:
                continue
        shown = " or ".join(
            str(inner).replace("typing.", "") if typing.get_args(inner) else inner.__name__ for inner in options
        )
        raise ConfigError(f"{where}: expected {shown}, got {value!r}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a class: get_type_hints gives no instances
        return from_dict(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        return [_convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return {str(key): _convert(args[1], item, f"{where}.{key}") for key, item in value.items()}
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def load_config(path: str | Path) -> EnsembleConfig:
    """Read and validate a YAML config file."""
    import yaml

    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:  # one line, with where it went wrong
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(file)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    if data is None:
        data = {}
    if isinstance(data, dict) and "base_dir" in data:
        raise ConfigError(f"{file}: 'base_dir' is set by eor, not by the config")
    config = from_dict(EnsembleConfig, data, file.name)
    config.base_dir = str(file.resolve().parent)
    if not config.members:
        raise ConfigError(f"{file}: 'members' must list at least one retriever name, e.g. [ReFree, BM25@3]")
    if len(set(config.members)) != len(config.members):
        raise ConfigError(f"{file}: 'members' has duplicates")
    for key, least in (("retrieval_depth", 1), ("rrf_k", 0), ("max_document_words", 1), ("batch_size", 1)):
        if getattr(config, key) < least:
            raise ConfigError(f"{file}: '{key}' must be a whole number ≥ {least}, got {getattr(config, key)}")
    if config.voter.risk is not None and not 0 < config.voter.risk < 1:
        raise ConfigError(f"{file}: 'voter.risk' must lie in (0, 1), got {config.voter.risk}")
    return config


def package_file(relative: str) -> Path:
    """A file shipped inside the eor package (package data), wherever eor is installed."""
    from importlib.resources import files

    return Path(str(files("eor").joinpath(relative)))


def default_config_path() -> Path:
    """configs/default.yaml, shipped inside the package as eor/configs/ (a link to the checkout's configs/)."""
    return package_file("configs/default.yaml")
