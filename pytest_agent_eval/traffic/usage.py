"""Token usage read from LLM responses and its cost.

The responses are OpenAI-compatible and Anthropic ones, whole or streamed.

Prices are dollars per million tokens, ``{model: {"input": x, "output": y}}`` with, optionally,
``cached_input`` (cache reads), ``cache_write`` and ``cache_write_1h`` (Anthropic's five-minute and
one-hour cache writes). A model's price comes from the ini's table (``agent_eval_prices``), else the
maintained ``genai-prices`` table when it is installed, else the built-in table; a dated snapshot
(``gpt-4o-2024-08-06``) takes its family's price by the longest name it starts with. A call whose
price is not known (no price for the model, or none for the cached tokens it reports) has no cost
(``None``) and names its model, never a guessed cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    # USD per million tokens, list prices when this table was written; override with ini
    # agent_eval_prices.
    # OpenAI reports no cache writes; Anthropic's cache writes cost 1.25x input (5 minutes) or 2x (1
    # hour).
    "gpt-4o": {"input": 2.50, "cached_input": 1.25, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "cached_input": 0.50, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "cached_input": 0.10, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "cached_input": 0.025, "output": 0.40},
    "o3-mini": {"input": 1.10, "cached_input": 0.55, "output": 4.40},
    "claude-3-5-haiku": {
        "input": 0.80, "cached_input": 0.08, "cache_write": 1.00, "cache_write_1h": 1.60,
        "output": 4.00,
    },
    "claude-3-5-sonnet": {
        "input": 3.00, "cached_input": 0.30, "cache_write": 3.75, "cache_write_1h": 6.00,
        "output": 15.00,
    },
    "claude-sonnet-4": {
        "input": 3.00, "cached_input": 0.30, "cache_write": 3.75, "cache_write_1h": 6.00,
        "output": 15.00,
    },
    "claude-opus-4": {
        "input": 15.00, "cached_input": 1.50, "cache_write": 18.75, "cache_write_1h": 30.00,
        "output": 75.00,
    },
}  # fmt: skip
PRICE_KEYS = ("input", "output", "cached_input", "cache_write", "cache_write_1h")
"""The keys of a model's price: ``input`` and ``output`` are required."""
MAX_TOKENS = 10**12
"""A count at or above this (a trillion tokens in one call) is not a count: the usage is unreadable.
"""
_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
"""The counts read from a response's ``usage`` (each must be a whole number from 0 below
``MAX_TOKENS``).
"""
_DETAILS = {
    "prompt_tokens_details": "cached_tokens",
    "input_tokens_details": "cached_tokens",
    "cache_creation": "ephemeral_1h_input_tokens",
}
"""Nested counts: OpenAI's ``cached_tokens`` (part of ``prompt_tokens`` / ``input_tokens``),
Anthropic's cache writes by lifetime (``ephemeral_1h_input_tokens``).
"""


@dataclass(frozen=True)
class CallUsage:
    """The tokens one LLM response reports, and its model.

    ``input_tokens`` counts every input token, those read from and written to the prompt cache
    included.
    """

    model: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written for one hour (Anthropic), dearer than the
    five-minute ones.
    """
    unreadable: str | None = None
    """Why the counts cannot be used (a negative, fractional, NaN or absurd count): the call's
    tokens and cost are unknown, never counted (the counts above are then 0).
    """


def read_usage(body: bytes, content_type: str) -> CallUsage | None:
    """The usage a response body reports.

    A JSON answer's ``usage``, or a stream's (``text/event-stream``).

    Each count is read once under whichever name the API gives it: OpenAI's chat ``prompt_tokens`` /
    ``completion_tokens`` (a proxy that adds the Responses API's ``input_tokens`` /
    ``output_tokens`` beside them names the same tokens), else ``input_tokens`` / ``output_tokens``
    with Anthropic's cache reads and writes (which its ``input_tokens`` leaves out); of the details,
    only the cached and one-hour cache-write counts.
    """
    events: list[Any] = []
    if "event-stream" in content_type:
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                events.append(_json(line[5:].strip()))
    else:
        events.append(
            _json(body.decode("utf-8", "replace")) if body[:1] in (b"{", b" ", b"\n") else None
        )
    found: dict[str, int] = {}
    bad: list[str] = []
    model: str | None = None
    for event in events:
        if not isinstance(event, dict):
            continue
        for holder in (
            event,
            event.get("message"),
            event.get("response"),
        ):  # Anthropic's message_start, Responses
            if not isinstance(holder, dict):
                continue
            if isinstance(holder.get("model"), str):
                model = model or holder["model"]
            usage = holder.get("usage")
            if isinstance(usage, dict):
                _counts(usage, _COUNTS, found, bad)
                for details, key in _DETAILS.items():
                    if isinstance(usage.get(details), dict):
                        _counts(usage[details], (key,), found, bad)
    if bad:
        return CallUsage(model, 0, 0, unreadable=", ".join(dict.fromkeys(bad)))
    if not any(
        k in found for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
    ):
        return None
    reads, writes = (
        found.get("cache_read_input_tokens", 0),
        found.get("cache_creation_input_tokens", 0),
    )
    anthropic_inputs = found.get("input_tokens", 0) + reads + writes
    inputs = found.get("prompt_tokens", anthropic_inputs)
    outputs = found.get("completion_tokens", found.get("output_tokens", 0))
    reads += found.get("cached_tokens", 0)
    writes_1h = found.get("ephemeral_1h_input_tokens", 0)
    if reads + writes > inputs or writes_1h > writes:
        why = f"cached tokens ({reads} read, {writes} written) beyond the {inputs} input tokens"
        return CallUsage(model, 0, 0, unreadable=why)
    return CallUsage(model, inputs, outputs, reads, writes, writes_1h)


def _counts(
    usage: dict[str, Any], keys: tuple[str, ...], found: dict[str, int], bad: list[str]
) -> None:
    """The counts ``keys`` of ``usage`` into ``found``; one that is unusable into ``bad``.

    Streamed counts are cumulative: the largest is the total. One that is not a whole number from 0
    below ``MAX_TOKENS`` goes into ``bad``, named with its value.
    """
    for key in keys:
        value = usage.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_TOKENS:
            bad.append(f"{key} {value!r}"[:80])
        else:
            found[key] = max(found.get(key, 0), value)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _family(model: str | None, prices: dict[str, dict[str, float]]) -> str | None:
    """The name ``model`` is priced under: its own, else the longest priced name it starts with."""
    if model is None or model in prices:
        return model
    return max((name for name in prices if model.startswith(name)), key=len, default=None)


def cost_at(price: dict[str, float], call: CallUsage) -> float | str:
    """The call's cost in dollars at ``price``, or the price it lacks for its tokens.

    The price it lacks is named (``"cached_input"``, ...).
    """
    reads, writes, writes_1h = (
        call.cache_read_tokens,
        call.cache_write_tokens,
        call.cache_write_1h_tokens,
    )
    counts = {
        "input": call.input_tokens - reads - writes,
        "cached_input": reads,
        "cache_write": writes - writes_1h,
        "cache_write_1h": writes_1h,
        "output": call.output_tokens,
    }
    missing = next((key for key, count in counts.items() if count and key not in price), None)
    if missing is not None:
        return missing
    return sum(count * price[key] for key, count in counts.items() if count) / 1_000_000


class Prices:
    """Where a model's price comes from.

    The ini's table first, then the maintained ``genai-prices`` table when it is installed (imported
    at the first call it prices), then the built-in table.
    """

    def __init__(self, own: dict[str, dict[str, float]] | None = None) -> None:
        self.own = dict(own or {})
        self.table = {**DEFAULT_PRICES, **self.own}
        self._maintained: Any = _UNSET

    def cost(self, call: CallUsage) -> float | str:
        """The call's cost in dollars, or why it has none.

        Why: the model's name, with the price it lacks if any.
        """
        name = call.model or "(no model named)"
        family = _family(call.model, self.table)
        price = self.table[family] if family is not None else None
        if price is None or family not in self.own:
            maintained = self._maintained_cost(call)
            if maintained is not None:
                return maintained
        if price is None:
            return name
        cost = cost_at(price, call)
        return f"{name} (no {cost} price)" if isinstance(cost, str) else cost

    def _maintained_cost(self, call: CallUsage) -> float | None:
        """The call's cost from ``genai-prices``.

        ``None`` when it is not installed or has no price for the model.
        """
        if call.model is None:
            return None
        maintained = self._maintained
        if maintained is _UNSET:
            maintained = self._maintained = _import_maintained()
        if maintained is None:
            return None
        usage = maintained.Usage(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cache_read_tokens=call.cache_read_tokens,
            cache_write_tokens=call.cache_write_tokens,
            cache_write_1h_tokens=call.cache_write_1h_tokens,
        )
        try:
            return float(maintained.calc_price(usage, call.model).total_price)
        except (LookupError, ValueError):  # a model it does not know, or counts it cannot price
            return None


_UNSET = object()


def _import_maintained() -> Any:
    """The ``genai_prices`` module, or ``None`` when it is not installed (the extra ``prices``)."""
    try:
        import genai_prices
    except ImportError:
        return None
    return genai_prices


@dataclass
class Usage:
    """Usage summed over the LLM calls of one trial."""

    requests: int = 0
    measured: int = 0
    """Responses that reported usage."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = 0.0
    unpriced: list[str] = field(default_factory=list)
    """Models seen without a price: the cost is then unknown (``None``)."""
    unreadable: bool = False
    """A call's counts could not be used (``CallUsage.unreadable``): the tokens are unknown too."""

    def add(self, call: CallUsage, prices: Prices) -> None:
        self.measured += 1
        if (
            call.unreadable is not None
        ):  # its tokens are unknown: so is the cost, named with the reason
            name = f"{call.model or '(no model named)'} (usage unreadable: {call.unreadable})"
            if name not in self.unpriced:
                self.unpriced.append(name)
            self.cost = None
            self.unreadable = True
            return
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        self.cache_read_tokens += call.cache_read_tokens
        self.cache_write_tokens += call.cache_write_tokens
        cost = prices.cost(call)
        if isinstance(cost, str):
            if cost not in self.unpriced:
                self.unpriced.append(cost)
            self.cost = None
        elif self.cost is not None:
            self.cost += cost

    def as_dict(self) -> dict[str, Any]:
        """The run record's ``usage``: tokens, cost and requests.

        Tokens are with cache reads and writes when there were any; cost is ``None`` when some model
        had no price; no token counts when a call's were unreadable (unknown, not a part).
        """
        data: dict[str, Any] = {"cost": self.cost, "requests": self.requests}
        if not self.unreadable:
            data["input_tokens"] = self.input_tokens
            data["output_tokens"] = self.output_tokens
            data["total_tokens"] = self.input_tokens + self.output_tokens
        if self.cache_read_tokens:
            data["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            data["cache_write_tokens"] = self.cache_write_tokens
        if self.unpriced:
            data["unpriced_models"] = list(self.unpriced)
        return data


def parse_prices(text: str) -> dict[str, dict[str, float]]:
    """A price table parsed from JSON text.

    ``{model: {input, output[, cached_input, cache_write, cache_write_1h]}}``; ValueError naming
    what is wrong.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object {model: {input: $/M tokens, output: $/M tokens}}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        if (
            not isinstance(price, dict)
            or not {"input", "output"} <= set(price)
            or not set(price) <= set(PRICE_KEYS)
        ):
            raise ValueError(
                f"{model!r}: expected {{input: <$ per million tokens>, output: <...>}} and "
                f"optionally cached_input, cache_write, cache_write_1h, got {price!r}"
            )
        if not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for v in price.values()
        ):
            raise ValueError(f"{model!r}: prices must be numbers of at least 0, got {price!r}")
        prices[str(model)] = {key: float(value) for key, value in price.items()}
    return prices
