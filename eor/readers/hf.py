"""transformers reader: any Hugging Face causal or seq2seq model by id or path (a GGUF file too)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from eor.core.confidence import Confidence, StepRecorder
from eor.core.likelihood import TURN_MARK, Likelihood, log_softmax_rows, turn_end_text
from eor.core.models import file_sha256
from eor.readers.base import BatchedReader, Generated


class TransformersReader(BatchedReader):
    """Greedy generation in padded batches; chat templates are applied when the tokenizer has one."""

    batches = True
    counts_tokens = True
    confidence = True
    scores = True

    def __init__(
        self,
        model: Path | str,
        *,
        name: str | None = None,
        max_tokens: int = 32,
        batch_size: int = 8,
        device: str = "cpu",
        record_confidence: bool = True,
    ) -> None:
        super().__init__()
        self.record_confidence = self.confidence = record_confidence
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        self.name = name or str(model)
        self.default_max_tokens = max_tokens
        self.batch_size = batch_size
        self.device = device
        self.model = model
        location, extra = _load_location(model)
        config = AutoConfig.from_pretrained(location, **extra)
        self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        loader = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
        self._tokenizer = AutoTokenizer.from_pretrained(location, **extra)
        if self._tokenizer.pad_token is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self._tokenizer.padding_side = "right" if self.seq2seq else "left"
        # Any: transformers' `to` (under functools.wraps) does not type-check as a method
        loaded: Any = loader.from_pretrained(location, **extra)
        self._model = loaded.to(device).eval()
        self._revision = getattr(config, "_commit_hash", None)
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        """The model (a GGUF file by sha256, a local folder by its files' names, sizes and times, a hub id by
        its commit), dtype, device, batch size (padding in a batch can change greedy outputs) and the
        transformers version."""
        if self._identity is None:
            import transformers

            self._identity = (
                f"transformers:{_model_fingerprint(self.model, self._revision)}|dtype={self._model.dtype}"
                f"|device={self.device}|batch={self.batch_size}|transformers={transformers.__version__}"
            )
        return self._identity

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text))

    def _format(self, prompt: str) -> str:
        if not self.seq2seq and getattr(self._tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": prompt}]
            text = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert isinstance(text, str)  # tokenize=False: the prompt as text
            return text
        return prompt

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> list[Generated]:
        import torch

        results: list[Generated] = []
        for start in range(0, len(prompts), self.batch_size):
            chunk = [self._format(prompt) for prompt in prompts[start : start + self.batch_size]]
            started = time.perf_counter()
            inputs = self._tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=self.seq2seq)
            inputs = inputs.to(self.device)
            with torch.inference_mode():
                decoded = self._model.generate(
                    **inputs,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    pad_token_id=self._tokenizer.pad_token_id,
                    return_dict_in_generate=True,
                    output_logits=self.record_confidence,  # the raw logits each step chose from (no extra pass)
                )
            output = decoded.sequences
            if not self.seq2seq:
                output = output[:, inputs["input_ids"].shape[1] :]
            texts = self._tokenizer.batch_decode(output, skip_special_tokens=True)
            seconds = (time.perf_counter() - started) / len(chunk)
            prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
            pad = self._tokenizer.pad_token_id
            generated = [int((row != pad).sum()) if pad is not None else int(row.numel()) for row in output]
            confidences = self._confidences(decoded, output, generated)
            results.extend(
                Generated(text, seconds, int(used), made, confidence=confidence)
                for text, used, made, confidence in zip(texts, prompt_tokens, generated, confidences, strict=True)
            )
        return results

    def end_of_turn(self) -> int:
        """The token that ends the assistant's turn: the first token the chat template writes after an
        assistant message (ChatML's `<|im_end|>`), else the generation config's end token, else the
        tokenizer's end of sequence."""
        if not self.seq2seq and getattr(self._tokenizer, "chat_template", None):
            chat = [{"role": "user", "content": "?"}, {"role": "assistant", "content": TURN_MARK}]
            end = turn_end_text(str(self._tokenizer.apply_chat_template(chat, tokenize=False)))
            tokens = self._tokenizer.encode(end, add_special_tokens=False) if end else []
            if tokens:
                return int(tokens[0])
        eos = getattr(getattr(self._model, "generation_config", None), "eos_token_id", None)
        if isinstance(eos, list | tuple):
            eos = eos[0] if eos else None
        return int(eos if eos is not None else self._tokenizer.eos_token_id)

    def continuation_tokens(self, text: str) -> list[int]:
        """The tokens a continuation is scored as: its text's tokens, then the end of the assistant's turn."""
        return [*self._tokenizer.encode(text, add_special_tokens=False), self.end_of_turn()]

    def _score(self, prompt: str, continuations: list[str]) -> list[Likelihood]:
        """Teacher forcing in padded batches of `batch_size` continuations: one forward pass each (causal:
        prompt and continuation as one right-padded sequence; seq2seq: the prompt encoded, the continuation
        as decoder labels)."""
        import torch

        prompt_ids = self._tokenizer.encode(self._format(prompt), add_special_tokens=self.seq2seq)
        followers = [self.continuation_tokens(text) for text in continuations]
        results: list[Likelihood] = []
        for start in range(0, len(followers), self.batch_size):
            part = followers[start : start + self.batch_size]
            with torch.inference_mode():
                rows = self._seq2seq_logits(prompt_ids, part) if self.seq2seq else self._causal_logits(prompt_ids, part)
            for logits, follower in zip(rows, part, strict=True):
                results.append(Likelihood(tuple(log_softmax_rows(logits.float().cpu().numpy(), follower))))
        return results

    def _causal_logits(self, prompt_ids: list[int], followers: list[list[int]]) -> list[Any]:
        """Per continuation, the logits that predict each of its tokens."""
        import torch

        sequences = [prompt_ids + follower[:-1] for follower in followers]
        width = max(map(len, sequences))
        pad = int(self._tokenizer.pad_token_id or 0)
        ids = torch.tensor([seq + [pad] * (width - len(seq)) for seq in sequences], device=self.device)
        mask = torch.tensor([[1] * len(seq) + [0] * (width - len(seq)) for seq in sequences], device=self.device)
        logits = self._model(input_ids=ids, attention_mask=mask).logits
        start = len(prompt_ids) - 1
        return [logits[row, start : start + len(follower)] for row, follower in enumerate(followers)]

    def _seq2seq_logits(self, prompt_ids: list[int], followers: list[list[int]]) -> list[Any]:
        import torch

        width = max(map(len, followers))
        labels = torch.tensor([f + [-100] * (width - len(f)) for f in followers], device=self.device)
        ids = torch.tensor([prompt_ids] * len(followers), device=self.device)
        logits = self._model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).logits
        return [logits[row, : len(follower)] for row, follower in enumerate(followers)]

    def _confidences(self, decoded: Any, output: Any, generated: list[int]) -> list[Confidence | None]:
        """Each row's confidence from the logits of its decoding steps (`output_logits`); the steps after a
        row's end (padding) are not its tokens."""
        if not self.record_confidence or getattr(decoded, "logits", None) is None:
            return [None] * len(generated)
        steps = [logits.float().cpu().numpy() for logits in decoded.logits]  # per step (B, V)
        tokens = output[:, -len(steps) :].cpu().numpy() if steps else output.cpu().numpy()
        confidences: list[Confidence | None] = []
        for row, count in enumerate(generated):
            recorder = StepRecorder()
            for step in range(min(count, len(steps))):
                recorder.step(steps[step][row], int(tokens[row, step]))
            confidences.append(recorder.confidence(count))
        return confidences


def _model_fingerprint(model: Path | str, revision: str | None) -> str:
    if isinstance(model, Path) and model.is_file():
        return f"{model.name}@sha256:{file_sha256(model)[:16]}"
    if isinstance(model, Path) and model.is_dir():
        files = sorted(p for p in model.rglob("*") if p.is_file())
        listing = "\n".join(f"{p.relative_to(model)} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in files)
        return f"{model.resolve()}@files:{hashlib.sha256(listing.encode()).hexdigest()[:16]}"
    return f"{model}@{revision or 'unknown-revision'}"


def _load_location(model: Path | str) -> tuple[str, dict]:
    """from_pretrained arguments: a GGUF file loads from its folder with `gguf_file` (dequantised)."""
    if isinstance(model, Path) and model.is_file() and model.suffix == ".gguf":
        return str(model.parent), {"gguf_file": model.name}
    return str(model), {}
