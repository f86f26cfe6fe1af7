"""Request and response bodies of the HTTP API (they also make the OpenAPI docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eor.core.data import MAX_QUESTION_CHARS

#: most member names a request can list (the server's own limit, `max_members`, may be lower).
MAX_MEMBER_NAMES = 64
#: most chat messages a request can hold.
MAX_MESSAGES = 256
RISK = (
    "decline to answer (abstained: true, answer: null) where the answer's P(right) is below the weights file's "
    "threshold for this error rate among answered questions (docs/abstention.md); default: the config's voter.risk"
)


class ErrorDetail(BaseModel):
    type: str = Field(description="a stable machine-readable kind, e.g. invalid_request, timeout")
    message: str = Field(description="what went wrong and what to do about it")


class ErrorBody(BaseModel):
    error: ErrorDetail


class AnswerRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"question": "who painted the mona lisa", "members": ["BM25@3", "PK"]}]},
    )

    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, description="the question")
    members: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MEMBER_NAMES,
        description="run and vote over only these members (names as in GET /healthz); default: all",
    )
    return_passages: bool = Field(default=False, description="include each member's passages and prompt")
    explain: bool = Field(default=False, description="include the vote's explanation (similarities, weights)")
    risk: float | None = Field(default=None, gt=0, lt=1, strict=True, description=RISK)


class Passage(BaseModel):
    id: str | None = None
    title: str = ""
    text: str
    score: float | None = None
    url: str | None = Field(default=None, description="the page a web passage comes from")


class MemberAnswer(BaseModel):
    answer: str
    score: float | None = Field(description="decision score s_m; null when the member's weight drops it")
    seconds: float
    tokens: dict[str, int] | None = Field(
        default=None,
        description="prompt tokens evaluated, kept from the prompt before (reused) and generated; absent when the "
        "answer was read back from the generation cache",
    )
    confidence: dict[str, float | int | None] | None = Field(
        default=None,
        description="the reader's confidence in the answer: mean and minimum token log-probability, the first "
        "token's margin (top-1 minus top-2 log-probability) and the token count; absent when the reader gives none",
    )
    passages: list[Passage] | None = Field(default=None, description="with return_passages only")
    prompt: str | None = Field(default=None, description="with return_passages only")


class CascadeReport(BaseModel):
    ran: list[str] = Field(description="the members the cascade ran, in its order")
    skipped: list[str] = Field(description="the members after its stop, never run (no retrieval, no prompt)")
    stopped_after: str = Field(description="the last member it ran")
    probability: float = Field(description="P of the stopping rule at the stop")
    threshold: float | None = Field(description="the threshold P was held against (null: never stops early)")
    reason: str = Field(description="why it stopped, in words")


class Abstention(BaseModel):
    abstained: bool = Field(description="whether eor declined to answer")
    kind: Literal["not_sure", "not_in_documents"] | None = Field(
        default=None,
        description="why eor declined: not sure enough of the answer, or the passages read do not seem to hold it "
        "(P(unanswerable) reached 1/2); null when it answered",
    )
    unanswerable: float | None = Field(
        default=None, description="P(unanswerable): that the documents do not hold the answer (weights trained for it)"
    )
    share: float | None = Field(
        default=None, description="the share of questions the documents cannot answer that the error rate holds for"
    )
    outside_guarantee: str | None = Field(
        default=None,
        description="why the error rate is not guaranteed here: the thresholds were certified on another pool's "
        "questions (another corpus or reader); null when nothing says so",
    )
    risk: float = Field(description="the error rate asked for")
    alpha: float = Field(description="the level of the weights file's grid used: the largest not above risk")
    threshold: float | None = Field(description="P(right) needed to answer; null: no threshold kept that rate")
    probability: float | None = Field(description="the answer's P(right); null: unknown (no answer to stand behind)")
    correctness: str = Field(description="what right means: the correctness the thresholds were chosen with")
    reason: str = Field(description="why, in words")


class Source(BaseModel):
    member: str = Field(description="the member that read it (one credited with the answer first)")
    id: str | None = Field(default=None, description="the passage's id in the corpus")
    title: str | None = Field(default=None, description="the passage's title")
    file: str | None = Field(default=None, description="an imported document's path relative to its folder")
    page: int | None = Field(default=None, description="the page of a PDF")
    url: str | None = Field(default=None, description="a web page's address")
    holds: bool = Field(description="whether the passage holds the answer (normalised, whole words); false: read only")
    sentence: str | None = Field(default=None, description="the passage's sentence that holds the answer")


class JudgeCandidate(BaseModel):
    text: str
    members: list[str] = Field(description="the members that wrote it; empty for a span of the passages")
    rule: str = Field(description="what proposed it: `members`, or the span rule (voters.candidates)")
    supported_by: list[str] = Field(description="the members whose passages hold it (the evidence behind it)")
    score: float | None = Field(description="the judge's log-odds that it is right; null: it did not compete")
    scores: dict[str, dict[str, float]] = Field(
        description="the reader's likelihood of it under each prompt (a member's name, or `#` and a passage id for "
        "a passage alone): total and mean token log-probability, the least, the token count"
    )


class JudgeReport(BaseModel):
    fit: str = Field(description="the judge voter's fit that chose: its feature families and competing spans")
    scored: list[str] = Field(description="what the reader scored: `scores` (the members' prompts), `passages`")
    chosen: int = Field(description="the chosen candidate's position in `candidates`")
    candidates: list[JudgeCandidate]


class AnswerResponse(BaseModel):
    id: str
    question: str
    answer: str | None = Field(
        description="the chosen answer (a member's, or with a judge voter a candidate); null when eor abstained"
    )
    abstained: bool = Field(description="eor declined to answer at the risk asked for (see abstention)")
    probability: float | None = Field(
        description="P(right): the probability that the answer is right, calibrated on the training records; null "
        "when the voter's weights file has none"
    )
    probability_fit: str | None = Field(
        default=None,
        description="which of the voter's P(right) fits gave it: 'confidence' (with the reader's confidence in the "
        "answer) or 'no confidence' (a reader or records without it); with a judge voter, the likelihood level its "
        "fit read ('scores+passages', 'scores', 'text'); absent where a cascade step's own calibration gave it",
    )
    abstention: Abstention | None = Field(default=None, description="with a risk only: answered or declined, why")
    member: str = Field(
        description="the chosen member (its answer is in members even when eor abstained); with a judge voter, a "
        "member that wrote the chosen candidate, or for a span the first member whose passages hold it"
    )
    given_by: list[str] = Field(
        description="every member that gave the chosen answer (equal once normalised), the chosen member first; "
        "with a judge voter, the members that wrote it (none for a span)"
    )
    sources: list[Source] = Field(
        default_factory=list,
        description="the passages that hold the answer, whichever member read them (with the sentence that holds "
        "it), then those the members credited with it read that do not (holds: false); empty when eor declined or "
        "no passage was read (the reader's own knowledge)",
    )
    members: dict[str, MemberAnswer] = Field(description="every member that ran and took part in the vote")
    timings: dict[str, float] = Field(description="seconds per question: retrieval, generation, voting, total")
    degraded: list[str] = Field(description="members left out of the vote because they failed or ran late")
    degraded_reasons: dict[str, str] = Field(description="why each degraded member was left out")
    skipped: list[str] = Field(
        default_factory=list,
        description="members not run: the lazy vote stopped once they could no longer change the answer, or "
        "the cascade stopped before them",
    )
    stages: dict[str, Any] | None = Field(
        default=None, description="per stage: seconds, and the reader's prompts, cache hits, tokens and seconds"
    )
    cascade: CascadeReport | None = Field(
        default=None, description="with a cascade weights file: the members it ran and skipped, and why it stopped"
    )
    judge: JudgeReport | None = Field(
        default=None,
        description="with a judge voter (config judge.weights): the candidates it chose among; the answer may be a "
        "span of the passages that no member wrote",
    )
    explanation: dict[str, Any] | None = Field(default=None, description="with explain only")


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = "text"
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(max_length=64)
    content: str | list[TextPart] | None = None


class ChatRequest(BaseModel):
    """OpenAI's chat completion request; sampling options (temperature, max_tokens, ...) are accepted and
    ignored: the reader decodes greedily with the config's settings."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [{"model": "eor", "messages": [{"role": "user", "content": "who painted the mona lisa"}]}]
        },
    )

    model: str = Field(max_length=256, description="`eor` or the config's name (GET /v1/models)")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool | None = Field(default=False, description="server-sent events: the answer in one chunk")
    members: list[str] | None = Field(default=None, min_length=1, max_length=MAX_MEMBER_NAMES)
    return_passages: bool = False
    risk: float | None = Field(default=None, gt=0, lt=1, strict=True, description=RISK)


class ChatChoiceMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatChoiceMessage
    finish_reason: Literal["stop"] = "stop"


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt tokens kept from an earlier prompt (not evaluated again)")


class ChatUsage(BaseModel):
    """The reader's tokens for this answer, summed over the members that ran and whose counts are known."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class ChatResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage | None = Field(description="the reader's tokens over every member that ran (null: not counted)")
    eor: AnswerResponse = Field(description="the ensemble's details: every member's answer, the vote, degraded")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "eor"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    status: str = Field(description="ok, loading, draining (shutting down), failed or stopped")
    members: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    waiting: int = Field(default=0, description="questions queued")
    max_batch: int | None = Field(default=None, description="most questions answered together")
    error: ErrorDetail | None = None


class ReportSummary(BaseModel):
    name: str = Field(description="the report's folder, relative to the server's --reports folder")
    questions: int | None = None
    members: int | None = None
    metric: str | None = Field(default=None, description="the report's correctness metric")
    eor: float | None = Field(default=None, description="EoR on the metric (a fraction)")
    top_r: float | None = Field(default=None, description="the best member on the metric")
    oracle: float | None = Field(default=None, description="the upper bound on the metric")


class ReportList(BaseModel):
    reports: list[ReportSummary]
