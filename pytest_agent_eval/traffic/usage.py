"""Token usage read from LLM responses (OpenAI-compatible and Anthropic, whole or streamed) and its cost.

Prices are dollars per million tokens, ``{model: {"input": x, "output": y}}`` with, optionally, ``cached_input``
(cache reads), ``cache_write`` and ``cache_write_1h`` (Anthropic's five-minute and one-hour cache writes). A
model's price comes from the ini's table (``agent_eval_prices``), else the maintained ``genai-prices`` table when
it is installed, else the built-in table; a dated snapshot (``gpt-4o-2024-08-06``) takes its family's price by
the longest name it starts with. A call whose price is not known (no price for the model, or none for the cached
tokens it reports) has no cost (``None``) and names its model, never a guessed cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    # USD per million tokens, list prices when this table was written; override with ini agent_eval_prices.
    # OpenAI reports no cache writes; Anthropic's cache writes cost 1.25x input (5 minutes) or 2x (1 hour).
    "gpt-4o": {"input": 2.50, "cached_input": 1.25, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "cached_input": 0.50, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "cached_input": 0.10, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "cached_input": 0.025, "output": 0.40},
    "o3-mini": {"input": 1.10, "cached_input": 0.55, "output": 4.40},
    "claude-3-5-haiku": {"input": 0.80, "cached_input": 0.08, "cache_write": 1.00, "cache_write_1h": 1.60,
                         "output": 4.00},
    "claude-3-5-sonnet": {"input": 3.00, "cached_input": 0.30, "cache_write": 3.75, "cache_write_1h": 6.00,
                          "output": 15.00},
    "claude-sonnet-4": {"input": 3.00, "cached_input": 0.30, "cache_write": 3.75, "cache_write_1h": 6.00,
                        "output": 15.00},
    "claude-opus-4": {"input": 15.00, "cached_input": 1.50, "cache_write": 18.75, "cache_write_1h": 30.00,
                      "output": 75.00},
}  # fmt: skip
PRICE_KEYS = ("input", "output", "cached_input", "cache_write", "cache_write_1h")
"""The keys of a model's price: ``input`` and ``output`` are required."""
_INPUT = ("prompt_tokens", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
"""Input token counts, added up: Anthropic's ``input_tokens`` leaves out its cache reads and writes."""
_OUTPUT = ("completion_tokens", "output_tokens")
_CACHE_READ = ("cache_read_input_tokens",)
_CACHE_WRITE = ("cache_creation_input_tokens",)
_DETAILS = ("prompt_tokens_details", "input_tokens_details", "cache_creation")
"""Nested counts: OpenAI's ``cached_tokens`` (part of ``prompt_tokens`` / ``input_tokens``), Anthropic's cache
writes by lifetime (``ephemeral_1h_input_tokens``)."""


@dataclass(frozen=True)
class CallUsage:
    """The tokens one LLM response reports, and its model. ``input_tokens`` counts every input token, those read
    from and written to the prompt cache included."""

    model: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    """Of ``cache_write_tokens``, those written for one hour (Anthropic), dearer than the five-minute ones."""


def read_usage(body: bytes, content_type: str) -> CallUsage | None:
    """The usage a response body reports: a JSON answer's ``usage``, or a stream's (``text/event-stream``)."""
    events: list[Any] = []
    if "event-stream" in content_type:
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:"):
                events.append(_json(line[5:].strip()))
    else:
        events.append(_json(body.decode("utf-8", "replace")) if body[:1] in (b"{", b" ", b"\n") else None)
    found: dict[str, int] = {}
    model: str | None = None
    for event in events:
        if not isinstance(event, dict):
            continue
        for holder in (event, event.get("message"), event.get("response")):  # Anthropic's message_start, Responses
            if not isinstance(holder, dict):
                continue
            if isinstance(holder.get("model"), str):
                model = model or holder["model"]
            usage = holder.get("usage")
            if isinstance(usage, dict):
                _counts(usage, found)
                for details in _DETAILS:
                    if isinstance(usage.get(details), dict):
                        _counts(usage[details], found)
    if not any(k in found for k in (*_INPUT, *_OUTPUT)):
        return None
    return CallUsage(
        model,
        sum(found.get(k, 0) for k in _INPUT),
        sum(found.get(k, 0) for k in _OUTPUT),
        cache_read_tokens=sum(found.get(k, 0) for k in (*_CACHE_READ, "cached_tokens")),
        cache_write_tokens=sum(found.get(k, 0) for k in _CACHE_WRITE),
        cache_write_1h_tokens=found.get("ephemeral_1h_input_tokens", 0),
    )


def _counts(usage: dict[str, Any], found: dict[str, int]) -> None:
    """The integer counts of ``usage`` into ``found``: streamed counts are cumulative, the largest is the total."""
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
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
    """The call's cost in dollars at ``price``, or the price it lacks (``"cached_input"``, ...) for its tokens."""
    reads, writes, writes_1h = call.cache_read_tokens, call.cache_write_tokens, call.cache_write_1h_tokens
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
    """Where a model's price comes from: the ini's table first, then the maintained ``genai-prices`` table when
    it is installed (imported at the first call it prices), then the built-in table."""

    def __init__(self, own: dict[str, dict[str, float]] | None = None) -> None:
        self.own = dict(own or {})
        self.table = {**DEFAULT_PRICES, **self.own}
        self._maintained: Any = _UNSET

    def cost(self, call: CallUsage) -> float | str:
        """The call's cost in dollars, or why it has none: the model's name, with the price it lacks if any."""
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
        """The call's cost from ``genai-prices``; ``None`` when it is not installed or has no price for the model."""
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

    def add(self, call: CallUsage, prices: Prices) -> None:
        self.measured += 1
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
        """The run record's ``usage``: tokens (cache reads and writes when there were any), cost (``None`` when some
        model had no price), requests."""
        data: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "cost": self.cost,
            "requests": self.requests,
        }
        if self.cache_read_tokens:
            data["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            data["cache_write_tokens"] = self.cache_write_tokens
        if self.unpriced:
            data["unpriced_models"] = list(self.unpriced)
        return data


def parse_prices(text: str) -> dict[str, dict[str, float]]:
    """``{model: {input, output[, cached_input, cache_write, cache_write_1h]}}`` from JSON text; ValueError naming
    what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object {model: {input: $/M tokens, output: $/M tokens}}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        if not isinstance(price, dict) or not {"input", "output"} <= set(price) or not set(price) <= set(PRICE_KEYS):
            raise ValueError(
                f"{model!r}: expected {{input: <$ per million tokens>, output: <...>}} and optionally cached_input, "
                f"cache_write, cache_write_1h, got {price!r}"
            )
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in price.values()):
            raise ValueError(f"{model!r}: prices must be numbers of at least 0, got {price!r}")
        prices[str(model)] = {key: float(value) for key, value in price.items()}
    return prices
