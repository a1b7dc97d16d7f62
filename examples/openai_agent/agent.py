"""The agent loop: the LLM picks tools and ``dispatch_tool`` runs them.

It goes on until the LLM answers or the rounds run out.
"""

from __future__ import annotations

import json
import os
from typing import Any

from openai import OpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from examples.openai_agent.tools import TOOLS, dispatch_tool

MAX_ROUNDS = 5
SYSTEM = (
    "You answer questions about Reddit discussions. Use search_knowledge_base for what people "
    "have said, fetch_subreddit_posts for what is trending now, and fetch_reddit_thread for a "
    "thread named by its id."
)


def run_agent(query: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Answer ``query``; returns the answer and the tool calls made (name and arguments)."""
    client = OpenAI()  # reads OPENAI_API_KEY and OPENAI_BASE_URL
    model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": query},
    ]
    called: list[dict[str, Any]] = []
    for _ in range(MAX_ROUNDS):
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return {"output": message.content or "", "tools_called": called}
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            if not isinstance(call, ChatCompletionMessageFunctionToolCall):
                continue  # only function tools are offered
            name = call.function.name
            args = json.loads(call.function.arguments or "{}")
            called.append({"name": name, "args": args})
            try:
                result = dispatch_tool(name, args)
            except Exception as exc:  # the LLM sees the error and may retry or explain
                result = f"error: {type(exc).__name__}: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    return {"output": f"I could not finish within {MAX_ROUNDS} rounds.", "tools_called": called}
