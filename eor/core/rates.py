"""A reader's token rates as a user writes them (`--rates 281,60`: PROMPT,GENERATED tokens per second), read without
loading anything: the command line's option (eor.cli.options.token_rates) and the benchmarks parse them here;
what rates mean, and where measured ones come from, is eor.runs.costs."""

from __future__ import annotations

from eor.core.errors import InputError


def parse_rates(text: str) -> dict[str, float]:
    """The reader's rates written PROMPT,GENERATED tokens per second (`--rates 281,60`), both finite and > 0;
    InputError otherwise."""
    prompt, comma, generated = text.partition(",")
    try:
        rates = {"prompt": float(prompt), "generated": float(generated)}
    except ValueError:
        rates = {}
    if not comma or not rates or not all(0 < value < float("inf") for value in rates.values()):
        raise InputError(f"expected PROMPT,GENERATED tokens per second above 0, e.g. 281,60; got {text!r}")
    return rates
