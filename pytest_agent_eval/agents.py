"""Calling an agent (sync, async, or an object with run/invoke/ainvoke) and normalising what it returns."""

from __future__ import annotations

import inspect
import json
import os
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.blocking import in_thread, outside_loop
from pytest_agent_eval.faults import describe, escape, interrupt
from pytest_agent_eval.imports import ImportRefError, import_object
from pytest_agent_eval.record import AgentResult, RunRecord, ToolCall
from pytest_agent_eval.stalls import timed_steps

OUTPUT_KEYS = ("output", "response", "answer", "final_message")


@dataclass(frozen=True)
class Agent:
    """A resolved agent: ``call(query, context)`` returns the raw result, or an awaitable of it."""

    call: Callable[[str, dict[str, Any]], Any]
    is_async: bool
    name: str


def _accepts_two(func: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _is_runnable(obj: Any) -> bool:
    """LangChain / LangGraph runnables take ``{"messages": [...]}`` state, not ``(query, context)``."""
    return hasattr(obj, "ainvoke") and hasattr(obj, "with_config")


def _wrap(func: Callable[..., Any], name: str) -> Agent:
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
    if _accepts_two(func):
        return Agent(func, is_async, name)
    return Agent(lambda query, context: func(query), is_async, name)


def as_agent(obj: Any, name: str | None = None) -> Agent:
    """Turn a callable or an object with ``ainvoke``/``invoke``/``run`` into an :class:`Agent`."""
    name = name or getattr(obj, "__qualname__", None) or type(obj).__name__
    if isinstance(obj, Agent):
        return obj
    if _is_runnable(obj):

        async def run_graph(query: str, context: dict[str, Any]) -> Any:
            state = {"messages": [{"role": "user", "content": query}]}
            return await obj.ainvoke(state, config=context.get("config"))

        return Agent(run_graph, True, name)
    for method in ("ainvoke", "invoke", "run"):
        bound = getattr(obj, method, None)
        if callable(bound) and not inspect.isclass(obj):
            return _wrap(bound, f"{name}.{method}")
    if callable(obj):
        return _wrap(obj, name)
    shown = repr(obj)
    raise TypeError(
        f"got {type(obj).__name__} {shown[:60] + '…' if len(shown) > 60 else shown}, not an agent: expected a "
        "callable (query, context) -> result, or an object with run/invoke/ainvoke"
    )


def resolve(ref: str, instances: dict[str, Any]) -> Agent:
    """Import ``module:attr``; a class is instantiated once (cached in ``instances``) and its instance used."""
    cached = instances.get(f"agent {ref}")
    if cached is not None:  # resolved once per session: importing and inspecting per case costs ~0.1 ms
        return cached  # type: ignore[no-any-return]
    obj = import_object(ref)
    if inspect.isclass(obj):
        if ref not in instances:
            instances[ref] = _create(obj)
        obj = instances[ref]
    agent = instances[f"agent {ref}"] = as_agent(obj, ref)
    return agent


class AgentCreationError(ImportRefError):
    """An agent class (``module:Class``) whose constructor raised."""


def _create(cls: type) -> Any:
    """An instance of the agent class; what its constructor raises becomes one line naming where."""
    try:
        return cls()
    except BaseException as exc:
        interrupt(exc)
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise AgentCreationError(
            f"could not be created: {describe(exc)} ({os.path.relpath(where.filename)}:{where.lineno})"
        ) from None


async def invoke(agent: Agent, query: str, context: dict[str, Any], *, inline: bool = False) -> Any:
    """Call the agent: async agents on the running loop, sync ones in a worker thread (in this one when
    ``inline``); await what they return. What the agent raises comes out as an ``Exception`` (see ``faults``)."""
    try:
        if agent.is_async:
            result = agent.call(query, context)
        elif inline:
            result = outside_loop(agent.call, query, context)
        else:
            result = await in_thread(agent.call, query, context)
        if inspect.isawaitable(result):
            result = await timed_steps(result)  # fails when a step blocks the loop past the case's timeout
    except BaseException as exc:
        interrupt(exc)  # KeyboardInterrupt: the run stops, as on Ctrl-C
        carried = escape(exc)
        if carried is exc:
            raise
        raise carried from None
    return result


# -- normalising results ---------------------------------------------------------------------------


def _text(content: Any) -> str:
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


def _tool_call(raw: Any) -> ToolCall:
    if isinstance(raw, ToolCall):
        return raw
    if isinstance(raw, str):
        return ToolCall(raw)
    if isinstance(raw, dict):
        fn = raw.get("function")
        if isinstance(fn, dict):  # OpenAI shape: {"function": {"name", "arguments"}}
            return ToolCall(str(fn.get("name")), decode_args(fn.get("arguments")))
        args = raw.get("args", raw.get("arguments", {}))
        return ToolCall(str(raw.get("name")), decode_args(args), raw.get("result"), raw.get("error"))
    name = getattr(raw, "name", None)
    if name is not None:
        return ToolCall(str(name), decode_args(getattr(raw, "args", getattr(raw, "arguments", {}))))
    raise TypeError(f"cannot read a tool call from {raw!r}: give a name, or a dict with `name` and `args`")


def _field(msg: Any, name: str) -> Any:
    return msg.get(name) if isinstance(msg, dict) else getattr(msg, name, None)


def _from_messages(messages: list[Any]) -> RunRecord:
    """A LangGraph / chat-style message list: the last assistant text, and the tool calls with results."""
    record = RunRecord()
    by_id: dict[str, ToolCall] = {}
    for msg in messages:
        role = _field(msg, "role") or _field(msg, "type")
        if role in ("assistant", "ai", "AIMessage", "AIMessageChunk"):
            for raw in _field(msg, "tool_calls") or []:
                call = _tool_call(raw)
                record.tool_calls.append(call)
                call_id = _field(raw, "id")
                if call_id:
                    by_id[str(call_id)] = call
            text = _text(_field(msg, "content"))
            if text:
                record.output = text
        elif role == "tool":
            answered = by_id.get(str(_field(msg, "tool_call_id")))
            if answered is not None:
                answered.result = _text(_field(msg, "content"))
                if _field(msg, "status") == "error":
                    answered.error = answered.result
    record.history = [
        {"role": str(_field(m, "role") or _field(m, "type")), "content": _text(_field(m, "content"))} for m in messages
    ]
    return record


class UnreadableResult(ValueError):
    """The agent returned something that holds no answer the plugin can read; the message says what to return."""


def normalise(result: Any) -> RunRecord:
    """Read any accepted result shape (SPEC §5) into a :class:`RunRecord`."""
    if isinstance(result, RunRecord):
        return result
    if isinstance(result, str):
        return RunRecord(output=result)
    if isinstance(result, AgentResult):
        return RunRecord(
            output=result.output,
            tool_calls=[_tool_call(c) for c in result.tool_calls],
            reasoning=result.reasoning,
            metadata=dict(result.metadata),
            usage=dict(result.usage),
        )
    if isinstance(result, dict):
        key = next((k for k in OUTPUT_KEYS if k in result), None)
        if key is None and not isinstance(result.get("messages"), list):
            raise UnreadableResult(
                f"the agent returned a dict without an answer: its keys are {sorted(map(str, result))}; "
                f"put the answer under {', '.join(map(repr, OUTPUT_KEYS))}, or return a chat state with "
                "'messages' (a list), a string or an AgentResult"
            )
        if key is None:
            record = _from_messages(result["messages"])
        else:
            record = RunRecord(output=_text(result.get(key)) if key else "")
            calls = result.get("tools_called", result.get("tool_calls")) or []
            record.tool_calls = [_tool_call(c) for c in calls]
        record.reasoning = result.get("reasoning", record.reasoning)
        record.metadata = dict(result.get("metadata") or {})
        usage = result.get("usage") or result.get("token_usage")
        record.usage = dict(usage) if isinstance(usage, dict) else {}
        return record
    messages = getattr(result, "messages", None)
    if isinstance(messages, list):
        return _from_messages(messages)
    if result is None:
        return RunRecord()
    if hasattr(result, "content"):  # a single chat message
        return RunRecord(output=_text(result.content))
    return RunRecord(output=str(result))


AgentCall = Callable[[str, dict[str, Any]], Awaitable[Any]]
