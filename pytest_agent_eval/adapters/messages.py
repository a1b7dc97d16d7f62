"""Reading tool calls and chat message lists into the run record: what several adapters share.

The lists are OpenAI-style dicts or LangChain-style message objects. No framework is imported here.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_agent_eval.core.results import RunRecord, ToolCall


def text_of(content: Any) -> str:
    """A message's content as text (content blocks joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)


def decode_args(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict, from a dict or a JSON string (as LLM APIs send them)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {"_raw": raw}
    return dict(raw) if isinstance(raw, dict) else {"_value": raw}


def tool_call(raw: Any) -> ToolCall:
    """A tool call from a name, a dict, or an object.

    The dict has ``name`` + ``args``/``arguments``, or OpenAI's ``function``; the object has
    ``name`` and ``args``/``arguments``.
    """
    if isinstance(raw, ToolCall):
        return raw
    if isinstance(raw, str):
        return ToolCall(raw)
    if isinstance(raw, dict):
        fn = raw.get("function")
        if isinstance(fn, dict):  # OpenAI shape: {"function": {"name", "arguments"}}
            return ToolCall(str(fn.get("name")), decode_args(fn.get("arguments")))
        args = raw.get("args", raw.get("arguments", {}))
        return ToolCall(
            str(raw.get("name")), decode_args(args), raw.get("result"), raw.get("error")
        )
    name = getattr(raw, "name", None)
    if name is not None:
        return ToolCall(str(name), decode_args(getattr(raw, "args", getattr(raw, "arguments", {}))))
    raise TypeError(
        f"cannot read a tool call from {raw!r}: give a name, or a dict with `name` and `args`"
    )


def field_of(msg: Any, name: str) -> Any:
    """A message's field, from a dict or an object."""
    return msg.get(name) if isinstance(msg, dict) else getattr(msg, name, None)


def from_messages(messages: list[Any], earlier: int = 0) -> RunRecord:
    """What a chat message list holds: the answer, the tool calls, the usage and the transcript.

    The list is a LangGraph ``messages`` state or OpenAI messages. Read from it: the last assistant
    text, the tool calls in order with the results of the tool messages that answer them, the usage
    LangChain's AI messages carry (``usage_metadata``), and the transcript. The first ``earlier``
    messages were given to the call (a conversation so far): only the transcript has them (all of
    them, when the list is not longer).
    """
    record = RunRecord()
    by_id: dict[str, ToolCall] = {}
    usages: list[Any] = []
    for msg in messages[earlier:] if len(messages) > earlier else messages:
        role = field_of(msg, "role") or field_of(msg, "type")
        if role in ("assistant", "ai", "AIMessage", "AIMessageChunk"):
            for raw in field_of(msg, "tool_calls") or []:
                call = tool_call(raw)
                record.tool_calls.append(call)
                call_id = field_of(raw, "id")
                if call_id:
                    by_id[str(call_id)] = call
            text = text_of(field_of(msg, "content"))
            if text:
                record.output = text
            usages.append(field_of(msg, "usage_metadata"))
        elif role == "tool":
            answered = by_id.get(str(field_of(msg, "tool_call_id")))
            if answered is not None:
                answered.result = text_of(field_of(msg, "content"))
                if field_of(msg, "status") == "error":
                    answered.error = answered.result
    if usages and all(
        isinstance(u, dict) for u in usages
    ):  # every answer's, or the sum would be short
        record.usage = {key: sum(int(u.get(key) or 0) for u in usages) for key in _USAGE_KEYS}
    record.history = [
        {
            "role": str(field_of(m, "role") or field_of(m, "type")),
            "content": text_of(field_of(m, "content")),
        }
        for m in messages
    ]
    return record


_USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")
"""LangChain's ``usage_metadata`` keys (also the run record's)."""
