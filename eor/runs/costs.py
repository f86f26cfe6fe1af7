"""The one cost model: what running a member costs on a question, in reader seconds.

Every cost eor reports or optimises comes from here: `eor bench`'s cost section and figures, the cascade's
member costs (`eor train`), the pool design's replay (`eor design`), the planner (`eor plan`,
eor.commands.plan_command), the live ensemble's order of lazy voting (`Ensemble.cost`) and the server's drain
(`running_mean`). One formula turns tokens into seconds, `reader_seconds`; `describe_rates` states the rates
wherever a figure from tokens is printed.

Two measures:

- `seconds`: the member's recorded wall seconds (retrieval plus generation, PK's and @CP's documents
  included). Measured in batches, sometimes beside other jobs: contention inflates it.
- `tokens`: the member's token counts (prompt tokens evaluated, generated tokens; records written since
  they were recorded hold them) at the reader's rates, cost = prompt / prompt_rate + generated /
  generation_rate, in seconds. Contention does not change a token count. The rates are given, or fitted to
  the records' own seconds by non-negative least squares (`fit_rates`: the reader's mean rates over the run).

A reader's rates come from here only: `fit_rates` (records' per-member seconds, which do not split into the
two phases) and `measured_rates` (a run's `generation.json`, whose seconds the reader split by phase: `eor
plan`'s pilot).

`member_costs(data, "auto")` uses tokens where every member of every question has them, else seconds.
Records benchmarked with a weights file are charged at the rates of the voter's training records
(`trained_rates`: `eor train` stores its cost model in the weights file's `meta.costs`), so a cost on dev is
at the same rates as the cascade's training, not refitted on dev.

Before a member of a live ensemble has been measured, its expected seconds (`expected_seconds`) are the
weights file's training cost, else a prior from its notation (`notation_prior`: for ordering only).

Prompt tokens kept from the prompt before depend on which prompt ran before, so a recorded count holds the
order `eor run` happened to use. `PromptReplay` charges members as another order would run them: the
reader (llama.cpp) keeps whole `chunk`-token chunks of the prefix a prompt shares with the prompt before it
(eor.readers.llamacpp.reusable_prefix), recomputed from the recorded answer prompts in the reader's own
tokens. A member whose retrieval generated first (PK's document, @CP's summary: its recorded prompt tokens
exceed its answer prompt's) keeps nothing, since its own generation ran just before its answer.

The reader as judge (eor.pipeline.judging) costs `scoring_seconds`: the candidates' tokens behind each prompt,
at the prompt rate, and the prompts the reader does not hold from answering (the passages alone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import InputError
from eor.readers.llamacpp import reusable_prefix
from eor.runs.run_data import RunData
from retrievers import notation

UNITS = ("auto", "seconds", "tokens")

Cost = TypeVar("Cost", np.ndarray, float)  # a cost per question, or one question's


@dataclass(frozen=True)
class MemberCosts:
    """Cost per question and member (Q, M) in seconds, by `unit` ("seconds" or "tokens"), with the rates
    (tokens per second) used for tokens; `seconds` is always the recorded seconds. `replay`: what each member
    costs run right after another, prefix reuse included (`PromptReplay`, `with_replay`), which a cascade learns
    its order and threshold from (voters.spend); None: `matrix`, whatever ran before."""

    matrix: np.ndarray
    unit: str
    seconds: np.ndarray
    rates: dict[str, float] | None = None
    replay: PromptReplay | None = None

    def mean(self) -> np.ndarray:
        return self.matrix.mean(axis=0)


def reader_seconds(prompt_tokens: Cost, generated_tokens: Cost, rates: Mapping[str, float]) -> Cost:
    """The reader's seconds for these tokens at `rates` (tokens per second, "prompt" and "generated"): the one
    formula from tokens to seconds."""
    return prompt_tokens / rates["prompt"] + generated_tokens / rates["generated"]


def describe_rates(rates: Mapping[str, float]) -> str:
    """The rates as every printed figure states them: "281 prompt / 60 generated tokens per second"."""
    return f"{rates['prompt']:.0f} prompt / {rates['generated']:.0f} generated tokens per second"


def unit_label(unit: str, rates: Mapping[str, float] | None) -> str:
    """How a cost's unit is printed: "s" for recorded seconds, else seconds from tokens at the rates."""
    return "s" if unit == "seconds" or not rates else f"s (from tokens at {describe_rates(rates)})"


def token_counts(data: RunData) -> np.ndarray | None:
    """(Q, M, 2): prompt tokens evaluated and generated tokens per member, or None unless every record has
    them for every member."""
    if not data.tokens or any(entry is None for row in data.tokens for entry in row):
        return None
    counts = [[[e.get("prompt", 0), e.get("generated", 0)] for e in row if e is not None] for row in data.tokens]
    return np.array(counts)  # (`is not None` drops nothing: checked above)


def recorded_seconds(data: RunData) -> np.ndarray:
    if not data.seconds or any(value is None for row in data.seconds for value in row):
        raise InputError("the records lack members' seconds: costs need records written by `eor run`")
    return np.asarray(data.seconds, dtype=float)


def measured_rates(stats: Mapping[str, Any]) -> dict[str, float]:
    """The reader's rates (tokens per second) as a run measured them, each phase's tokens over its seconds:
    `stats` holds `prompt_tokens`, `prompt_seconds`, `generated_tokens` and `generation_seconds` (a run
    folder's `generation.json`, eor.runs.run_folder). `eor plan`'s pilot and benchmarks/bench_throughput take
    their rates from here."""
    if not stats.get("prompt_seconds") or not stats.get("generation_seconds"):
        raise InputError("the reader reported no token timings (llama.cpp reports them; read from cache?)")
    return {
        "prompt": stats["prompt_tokens"] / stats["prompt_seconds"],
        "generated": stats["generated_tokens"] / stats["generation_seconds"],
    }


def fit_rates(tokens: np.ndarray, seconds: np.ndarray) -> dict[str, float]:
    """Prompt and generation rates (tokens per second) such that seconds ≈ prompt / p + generated / g,
    by non-negative least squares over every (question, member)."""
    from scipy.optimize import nnls

    design = tokens.reshape(-1, 2).astype(float)
    inverse, _ = nnls(design, seconds.reshape(-1))
    if np.any(inverse <= 0):
        raise InputError("the records' seconds do not determine both token rates; give the rates")
    return {"prompt": float(1 / inverse[0]), "generated": float(1 / inverse[1])}


def member_costs(data: RunData, unit: str = "auto", rates: dict[str, float] | None = None) -> MemberCosts:
    """Each member's cost per question (see the module docstring)."""
    if unit not in UNITS:
        raise InputError(f"unknown cost unit {unit!r}; available: {', '.join(UNITS)}")
    seconds = recorded_seconds(data)
    tokens = token_counts(data)
    if unit == "seconds" or (unit == "auto" and tokens is None):
        return MemberCosts(seconds, "seconds", seconds)
    if tokens is None:
        raise InputError("the records hold no token counts (written before eor recorded them); use seconds")
    used = rates or fit_rates(tokens, seconds)
    matrix = reader_seconds(tokens[..., 0], tokens[..., 1], used)
    return MemberCosts(matrix, "tokens", seconds, dict(used))


def training_costs(costs: MemberCosts, names: Sequence[str]) -> dict[str, Any]:
    """The cost model of a voter's training records, as `eor train` stores it in the weights file
    (`meta.costs`): the unit, the rates (tokens only) and each member's mean cost per question."""
    means = costs.mean()
    return {
        "unit": costs.unit,
        "rates": costs.rates,
        "members": {name: float(means[m]) for m, name in enumerate(names)},
    }


def trained_rates(voter: Any) -> dict[str, float] | None:
    """The token rates a voter's training records were charged at (its weights file's `meta.costs`), or None."""
    stored = voter.metadata_.get("costs") or {}
    rates = stored.get("rates")
    return {"prompt": float(rates["prompt"]), "generated": float(rates["generated"])} if rates else None


def expected_seconds(name: str, voter: Any) -> float:
    """A member's expected seconds per question before a live ensemble has measured it: its mean cost on the
    voter's training records (the weights file's `meta.costs`), else `notation_prior`."""
    stored = voter.metadata_.get("costs") or {}
    trained = (stored.get("members") or {}).get(name)
    return float(trained) if trained is not None else notation_prior(name)


#: weight of the latest measurement in a running cost (an exponential moving average)
RECENT_WEIGHT = 0.3


def running_mean(previous: float | None, latest: float, weight: float = RECENT_WEIGHT) -> float:
    """A running cost after the measurement `latest`: `latest` itself at first, then the exponential moving
    average (1 − weight) · previous + weight · latest. A live ensemble's members (eor.pipeline.running) and the
    server's seconds per question (eor.server.worker) follow their measured costs with it."""
    return latest if previous is None else (1 - weight) * previous + weight * latest


def notation_prior(name: str) -> float:
    """A member's cost before anything was measured, for ordering only: about a second per passage it reads,
    ten per generated background document or summary (PK, @CP), one for the question itself."""
    try:
        tree = notation.parse(name)
    except Exception:  # an unusual name: ordered last among the unmeasured
        return 100.0
    cost = 1.0
    for node in notation.walk(tree):
        match node:
            case notation.Compress() | notation.Source(name="PK"):
                cost += 10.0
            case notation.TopK(k=k):
                cost += k
            case notation.Pick():
                cost += 1.0
    return cost


@dataclass(frozen=True)
class PromptReplay:
    """What each member's answer costs when it runs right after another member's, per question: the prompt
    tokens it evaluates (its recorded prompt tokens, less the chunks it keeps from the prompt before), and its
    generated tokens, at `rates` (tokens per second). `tokens[q][m]` is member m's answer prompt on question
    q in the reader's tokens; `total` (Q, M) its recorded prompt tokens (evaluated and reused, the
    retrieval's generations included); `generated` (Q, M)."""

    tokens: list[list[tuple[int, ...]]]
    total: np.ndarray
    generated: np.ndarray
    chunk: int
    rates: dict[str, float]
    _kept: KeyedMemo[tuple[int | None, int], np.ndarray] = field(default_factory=KeyedMemo, repr=False, compare=False)

    def kept(self, previous: int | None, member: int) -> np.ndarray:
        """Per question, the prompt tokens `member` keeps when it runs right after `previous` (None: first)."""
        kept = self._kept.get((previous, member))
        if kept is None:
            kept = self._kept.keep((previous, member), self._count_kept(previous, member))
        return kept

    def _count_kept(self, previous: int | None, member: int) -> np.ndarray:
        if previous is None:
            return np.zeros(len(self.tokens), dtype=float)
        return np.array([self._kept_after(row[previous], q, member) for q, row in enumerate(self.tokens)], dtype=float)

    def _kept_after(self, before: Sequence[int], q: int, member: int) -> int:
        """The tokens of member's prompt on question q kept from the prompt `before` (none when its retrieval
        generated just before its answer)."""
        if self.total[q, member] > len(self.tokens[q][member]):
            return 0
        return reusable_prefix(list(before), list(self.tokens[q][member]), self.chunk)

    def _seconds(self, prompt: Cost, generated: Cost) -> Cost:
        return reader_seconds(prompt, generated, self.rates)

    def after(self, previous: int | None, member: int) -> np.ndarray:
        """Per question, the seconds of `member` run right after `previous` (None: first)."""
        return self._seconds(self.total[:, member] - self.kept(previous, member), self.generated[:, member])

    def spent(self, order: Sequence[int], stops: Sequence[int] | None = None) -> np.ndarray:
        """Per question, the seconds of running `order` up to `stops[q]` (every member when None), questions in
        record order: each member after the one before it, and a question's first member after the last
        prompt of the question before (prompts of two questions share a chunk only when their templates start
        alike for long enough, e.g. a variant's worked examples)."""
        n_questions = len(self.tokens)
        ends = np.full(n_questions, len(order) - 1) if stops is None else np.asarray(stops, dtype=int)
        if len(ends) != n_questions or (ends < 0).any() or (ends >= len(order)).any():
            raise InputError(f"stops must give one position in 0..{len(order) - 1} per question")
        seconds = np.zeros(n_questions)
        before: tuple[int, ...] | None = None
        for q in range(n_questions):
            for j in range(int(ends[q]) + 1):
                member = order[j]
                if j:
                    kept = float(self.kept(order[j - 1], member)[q])
                else:
                    kept = 0.0 if before is None else float(self._kept_after(before, q, member))
                seconds[q] += self._seconds(self.total[q, member] - kept, self.generated[q, member])
            before = self.tokens[q][order[int(ends[q])]]
        return seconds

    def subset(self, columns: Sequence[int]) -> PromptReplay:
        """The replay of the members at `columns` alone, in that order."""
        picked = list(columns)
        tokens = [[row[c] for c in picked] for row in self.tokens]
        return PromptReplay(tokens, self.total[:, picked], self.generated[:, picked], self.chunk, dict(self.rates))

    def in_order(self, order: Sequence[int], members: int) -> np.ndarray:
        """(Q, members): each member of `order` charged as run right after the one before it in `order`; the
        members not in `order` as run first (they never follow another). A cost per member and question cannot
        depend on the question before, so the first member keeps nothing from it; `spent` credits that prefix
        (less than a chunk, but for a variant's worked examples)."""
        costs = np.column_stack([self.after(None, m) for m in range(members)])
        for position, member in enumerate(order):
            costs[:, member] = self.after(order[position - 1] if position else None, member)
        return costs


def prompt_replay(
    data: RunData, tokenize: Callable[[str], Sequence[int]], rates: dict[str, float], chunk: int
) -> PromptReplay:
    """The replay of `data`'s recorded prompts with `tokenize` (the reader's chat tokens of a prompt, e.g.
    `LlamaCppReader.chat_tokens`), at `rates` and the reader's chunk size `chunk`."""
    counts = token_counts(data)
    if counts is None or not data.prompts or any(p is None for row in data.prompts for p in row):
        raise InputError("replaying prefix reuse needs records with every member's prompt and token counts")
    seen: dict[str, tuple[int, ...]] = {}

    def tokens_of(prompt: str) -> tuple[int, ...]:
        if prompt not in seen:
            seen[prompt] = tuple(tokenize(prompt))
        return seen[prompt]

    # `is not None` drops nothing (checked above: every prompt, and every entry of `counts`)
    tokens = [[tokens_of(prompt) for prompt in row if prompt is not None] for row in data.prompts]
    reused = np.array([[e.get("reused", 0) for e in row if e is not None] for row in data.tokens], dtype=float)
    return PromptReplay(tokens, counts[..., 0] + reused, counts[..., 1].astype(float), chunk, dict(rates))


@dataclass(frozen=True)
class ReaderTokens:
    """What a replay of prefix reuse counts in: the reader's chat tokens of a prompt (`tokenize`, e.g.
    `LlamaCppReader.chat_tokens`) and its prefix chunk."""

    tokenize: Callable[[str], Sequence[int]]
    chunk: int


def with_replay(costs: MemberCosts, data: RunData, tokens: ReaderTokens) -> MemberCosts:
    """`costs` (token counts at their rates) with the replay of `data`'s prompts in the reader's `tokens`
    (`prompt_replay`): what a cascade trained on them is charged, member after member in its own order.
    InputError for costs not counted in tokens."""
    if costs.unit != "tokens" or not costs.rates:
        raise InputError("replaying prefix reuse prices token counts: the costs are recorded seconds")
    return replace(costs, replay=prompt_replay(data, tokens.tokenize, costs.rates, tokens.chunk))


def scoring_seconds(
    candidates: Sequence[Mapping[str, Any]],
    prompts: Mapping[str, str],
    held: Sequence[str],
    tokenize: Callable[[str], Sequence[int]],
    rates: Mapping[str, float],
    chunk: int,
) -> float:
    """The reader seconds of scoring one question's candidates (a record's `judge["candidates"]`, each with
    its token count under each prompt) under `prompts` (name → prompt text), in the order the judge scores
    them (eor.pipeline.judging: sorted by text): every candidate's tokens behind each prompt, end of turn
    included, at the prompt rate; and each prompt's own tokens, less the chunks it keeps from the prompt
    before, unless the reader holds its state (`held`: the members' prompts it just evaluated to answer,
    eor.readers.llamacpp_states), when it evaluates none of them."""
    tokens = 0
    before: list[int] = []
    for name in sorted(prompts, key=lambda name: prompts[name]):
        text = list(tokenize(prompts[name]))
        if name not in held:
            tokens += len(text) - reusable_prefix(before, text, chunk)
        before = text
        tokens += sum(int((c.get("scores") or {}).get(name, {}).get("tokens", 0)) for c in candidates)
    return reader_seconds(float(tokens), 0.0, rates)
