"""A keyword-routed support agent with a few tools. Offline and deterministic: no LLM, no network.

It stands in for a real agent so the example evals run anywhere; the plugin calls it exactly as it
would call an LLM-backed one.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from pytest_agent_eval import AgentResult, ToolCall

ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"status": "shipped", "item": "USB-C cable", "total": 12.5, "eta": "2026-11-25"},
    "A200": {
        "status": "processing",
        "item": "Mechanical keyboard",
        "total": 89.0,
        "eta": "2026-11-30",
    },
    "A300": {"status": "delivered", "item": "Laptop stand", "total": 35.0, "eta": None},
}
ARTICLES = {
    "return": "Returns are accepted within 30 days of delivery with the original receipt.",
    "shipping": "Standard shipping takes 3-5 business days; express takes 1-2.",
    "warranty": "Electronics carry a 1-year limited warranty.",
}


def lookup_order(order_id: str) -> dict[str, Any]:
    """Find an order by id."""
    order = ORDERS.get(order_id.upper())
    if order is None:
        raise KeyError(f"order {order_id} not found")
    return {"order_id": order_id.upper(), **order}


def search_kb(query: str) -> str:
    """Search the help-centre articles."""
    hits = [text for key, text in ARTICLES.items() if key in query.lower()]
    return " ".join(hits) or "No article found."


def refund_order(order_id: str, reason: str) -> str:
    """Refund a delivered order."""
    order = lookup_order(order_id)
    if order["status"] != "delivered":
        return f"Refund for {order['order_id']} denied: order is {order['status']}."
    return f"Refund for {order['order_id']} approved ({reason})."


TOOLS = {"lookup_order": lookup_order, "search_kb": search_kb, "refund_order": refund_order}


class SupportAgent:
    """Routes a question to tools by keyword and writes an answer from their results."""

    def run(self, query: str, context: dict[str, Any] | None = None) -> AgentResult:
        context = context or {}
        calls: list[ToolCall] = []

        def use(name: str, **args: Any) -> Any:
            call = ToolCall(name, args)
            calls.append(call)
            try:
                call.result = TOOLS[name](**args)
            except Exception as exc:
                call.error = f"{type(exc).__name__}: {exc}"
                return None
            return call.result

        text = query.lower()
        order_id = _order_id(query) or context.get("order_id")
        if "json" in text and order_id:
            order = use("lookup_order", order_id=order_id)
            output = json.dumps(order or {"error": "not found"})
        elif "refund" in text and order_id:
            use("lookup_order", order_id=order_id)
            output = use(
                "refund_order", order_id=order_id, reason=context.get("reason", "customer request")
            ) or (f"Sorry, order {order_id} was not found.")
        elif order_id:
            order = use("lookup_order", order_id=order_id)
            if order is None:
                output = f"Sorry, order {order_id} was not found. Please check the order number."
            else:
                eta = f", expected {order['eta']}" if order["eta"] else ""
                output = f"Order {order['order_id']} ({order['item']}) is {order['status']}{eta}."
        elif any(word in text for word in ARTICLES):
            output = use("search_kb", query=query)
        elif "order" in text and context.get("history"):
            output = "Could you give me the order number? It looks like A100."
        else:
            output = "Hello! I can help with orders, returns, shipping and warranty questions."
        name = context.get("user")
        if name:
            output = f"Hi {name}. {output}"
        return AgentResult(output=output, tool_calls=calls, metadata={"router": "keyword"})


def _order_id(text: str) -> str | None:
    match = re.search(r"\b([A-Z]\d{3})\b", text.upper())
    return match.group(1) if match else None


_AGENT = SupportAgent()


def run(query: str, context: dict[str, Any]) -> AgentResult:
    """The sync entry point: ``(query, context) -> AgentResult``."""
    return _AGENT.run(query, context)


async def arun(query: str, context: dict[str, Any]) -> AgentResult:
    """The same agent, async (as an agent awaiting an LLM client would be)."""
    await asyncio.sleep(0)
    return _AGENT.run(query, context)


def answer_is_polite(run: Any) -> tuple[bool, str]:
    """A custom check: answers never shout (no ALL-CAPS words longer than 4 letters)."""
    shouted = [w for w in re.findall(r"[A-Za-z]+", run.output) if len(w) > 4 and w.isupper()]
    return not shouted, f"shouted: {shouted}" if shouted else "polite"
