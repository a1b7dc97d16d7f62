"""Token usage read from LLM responses (OpenAI-compatible and Anthropic, whole or streamed) and its cost.

Prices are dollars per million tokens, ``{model: {"input": x, "output": y}}``. A model without a price has no
cost (``None``), never a guessed one; a dated snapshot (``gpt-4o-2024-08-06``) takes its family's price by the
longest name it starts with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    # USD per million tokens, list prices when this table was written; override with ini agent_eval_prices.
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "o3-mini": {"input": 1.10, "output": 4.40},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00},
    "claude-3-5-sonnet": {"input": 3.00, "output": 15.00},
    "claude-sonnet-4": {"input": 3.00, "output": 15.00},
    "claude-opus-4": {"input": 15.00, "output": 75.00},
}
_INPUT = ("prompt_tokens", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_OUTPUT = ("completion_tokens", "output_tokens")


@dataclass(frozen=True)
class CallUsage:
    """The tokens one LLM response reports, and its model."""

    model: str | None
    input_tokens: int
    output_tokens: int


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
                for key, value in usage.items():  # streamed counts are cumulative: the largest is the total
                    if isinstance(value, int) and not isinstance(value, bool):
                        found[key] = max(found.get(key, 0), value)
    if not any(k in found for k in (*_INPUT, *_OUTPUT)):
        return None
    return CallUsage(model, sum(found.get(k, 0) for k in _INPUT), sum(found.get(k, 0) for k in _OUTPUT))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def price_of(model: str | None, prices: dict[str, dict[str, float]]) -> dict[str, float] | None:
    """The model's price: its own, else the longest priced name it starts with; ``None`` when unpriced."""
    if model is None:
        return None
    if model in prices:
        return prices[model]
    family = max((name for name in prices if model.startswith(name)), key=len, default=None)
    return prices[family] if family is not None else None


@dataclass
class Usage:
    """Usage summed over the LLM calls of one trial."""

    requests: int = 0
    measured: int = 0
    """Responses that reported usage."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    unpriced: list[str] = field(default_factory=list)
    """Models seen without a price: the cost is then unknown (``None``)."""

    def add(self, call: CallUsage, prices: dict[str, dict[str, float]]) -> None:
        self.measured += 1
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        price = price_of(call.model, prices)
        if price is None:
            name = call.model or "(no model named)"
            if name not in self.unpriced:
                self.unpriced.append(name)
            self.cost = None
        elif self.cost is not None:
            self.cost += (call.input_tokens * price["input"] + call.output_tokens * price["output"]) / 1_000_000

    def as_dict(self) -> dict[str, Any]:
        """The run record's ``usage``: tokens, cost (``None`` when some model had no price), requests."""
        data: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "cost": self.cost,
            "requests": self.requests,
        }
        if self.unpriced:
            data["unpriced_models"] = list(self.unpriced)
        return data


def parse_prices(text: str) -> dict[str, dict[str, float]]:
    """``{model: {input, output}}`` from JSON text; ValueError naming what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object {model: {input: $/M tokens, output: $/M tokens}}")
    prices: dict[str, dict[str, float]] = {}
    for model, price in data.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            raise ValueError(f"{model!r}: expected {{input: <$ per million tokens>, output: <...>}}, got {price!r}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in price.values()):
            raise ValueError(f"{model!r}: prices must be numbers of at least 0, got {price!r}")
        prices[str(model)] = {"input": float(price["input"]), "output": float(price["output"])}
    return prices
