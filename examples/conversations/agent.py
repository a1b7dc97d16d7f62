"""A small support agent for conversations: asks what it needs, looks up orders, opens returns.

It asks for what it needs, looks orders up and opens return tickets. Offline and deterministic
(keyword-routed, no LLM). Its tickets live in ``TICKETS``, the "knowledge graph" that the
conversation job's assertions query (see ``conftest.py``).
"""

from __future__ import annotations

import re
from typing import Any

from pytest_agent_eval import AgentResult, ToolCall

ORDERS = {"A100": {"status": "shipped", "item": "USB-C cable", "eta": "2026-11-25"}}
TICKETS: list[dict[str, str]] = []


def lookup_order(order_id: str) -> dict[str, Any]:
    """Find an order by id."""
    return ORDERS.get(order_id.upper(), {"error": f"order {order_id} not found"})


def run(query: str, context: dict[str, Any]) -> AgentResult:
    """Answer one user message; ``context["history"]`` holds the conversation so far."""
    text = query.lower()
    said = " ".join(m["content"] for m in context.get("history", [])) + " " + query
    order_id = re.search(r"\b([A-Z]\d{3})\b", query)
    if "return" in text:
        ticket = {"id": f"T{len(TICKETS) + 1}", "kind": "return"}
        TICKETS.append(ticket)
        return AgentResult(
            f"I have opened return ticket {ticket['id']}; the return ticket is opened for you."
        )
    if order_id:
        order = lookup_order(order_id.group(1))
        call = ToolCall("lookup_order", {"order_id": order_id.group(1)}, order)
        if "error" in order:
            return AgentResult(f"Sorry, {order['error']}.", [call])
        return AgentResult(
            f"Order {order_id.group(1)} ({order['item']}) has "
            f"{order['status']}; ETA {order['eta']}.",
            [call],
        )
    if "order" in text and not re.search(r"\b[A-Z]\d{3}\b", said):
        return AgentResult("I can check that. What is your order number?")
    if "shipping" in text:
        return AgentResult("Standard shipping takes 3-5 business days; express takes 1-2.")
    return AgentResult("Hello! I'm the support assistant. How can I help?")
