"""The OpenAI Agents SDK (``openai-agents``, imported as ``agents``): agents, their runs and tools.

An ``Agent`` is run with ``Runner.run`` (in a conversation, on the earlier items,
``result.to_input_list()``, and the new message); the run's new items give the tool calls (arguments
and outputs) and handoffs; ``FunctionTool`` objects are replaced by copies with the same name,
description and JSON schema whose ``on_invoke_tool`` answers from the case's tool mocks. The SDK is
imported only for an object that is already one of its own. Its tracing: the SDK's default processor
(it sends the spans to OpenAI's servers) is taken out; processors the project registered (such as
OpenInference's instrumentor) keep the SDK's spans, which land under the trial's root; with none
left, the SDK's tracing is off (``keep_tracing_local``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from typing import Any

from pytest_agent_eval.adapters.base import Agent, StandIn
from pytest_agent_eval.adapters.plain import normalise as read_plain
from pytest_agent_eval.adapters.recognise import of_class, openai_agent
from pytest_agent_eval.core.results import RunRecord, ToolCall
from pytest_agent_eval.core.tool_errors import unmocked_stop
from pytest_agent_eval.core.trial import CONVERSATION

EXTRA = "pip install 'pytest-agent-evalset[openai-agents]'"


def is_function_tool(obj: Any) -> bool:
    return of_class(obj, "agents", "FunctionTool")


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _arguments(raw: Any) -> dict[str, Any]:
    text = _field(raw, "arguments")
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def read_result(result: Any) -> RunRecord:
    """A ``RunResult`` read into the run record.

    That is ``final_output``, the tool and handoff calls in order with their outputs, and the usage.
    """
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    handoffs: list[str] = []
    for item in getattr(result, "new_items", None) or []:
        kind = getattr(item, "type", "")
        raw = getattr(item, "raw_item", None)
        if kind in ("tool_call_item", "handoff_call_item"):
            call = ToolCall(str(_field(raw, "name") or "tool"), _arguments(raw))
            calls.append(call)
            call_id = _field(raw, "call_id")
            if call_id:
                by_id[str(call_id)] = call
        elif kind == "tool_call_output_item":
            answered = by_id.get(str(_field(raw, "call_id")))
            if answered is not None:
                answered.result = getattr(item, "output", _field(raw, "output"))
        elif kind == "handoff_output_item":
            target = getattr(getattr(item, "target_agent", None), "name", "?")
            handoffs.append(str(target))
            handoff = by_id.get(str(_field(raw, "call_id")))
            if handoff is not None:
                handoff.result = f"handed off to {target}"
    output = getattr(result, "final_output", None)
    record = RunRecord(
        output=output
        if isinstance(output, str)
        else ("" if output is None else json.dumps(output, default=str)),
        tool_calls=calls,
    )
    if handoffs:
        record.metadata["handoffs"] = handoffs
        last = getattr(result, "last_agent", None)
        record.metadata["last_agent"] = getattr(last, "name", None)
    to_input_list = getattr(result, "to_input_list", None)
    if callable(
        to_input_list
    ):  # what the next message of a conversation continues (the SDK's own way)
        record.conversation = to_input_list()
    usage = getattr(getattr(result, "context_wrapper", None), "usage", None)
    if usage is not None:
        record.usage = {
            "input_tokens": getattr(usage, "input_tokens", 0),
            "output_tokens": getattr(usage, "output_tokens", 0),
            "total_tokens": getattr(usage, "total_tokens", 0),
            "requests": getattr(usage, "requests", 0),
        }
        cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0)
        if cached:  # part of input_tokens
            record.usage["cache_read_tokens"] = cached
    return record


def keep_tracing_local() -> None:
    """Take the SDK's exporter to OpenAI's servers out of its tracing; off if nothing else is left.

    The SDK lists its processors only on a private attribute (read as OpenInference's instrumentor
    reads it); where that cannot be read, tracing is turned off as a whole, as before.
    """
    from agents import set_trace_processors, set_tracing_disabled
    from agents.tracing import get_trace_provider
    from agents.tracing.processors import default_processor

    multi = getattr(get_trace_provider(), "_multi_processor", None)
    registered = getattr(multi, "_processors", None)
    if not isinstance(registered, tuple | list):
        set_tracing_disabled(True)
        return
    default = default_processor()
    own = [p for p in registered if p is not default]
    if len(own) != len(registered):
        set_trace_processors(own)
    if not own:
        set_tracing_disabled(True)


class OpenAIAgentsAdapter:
    """``agents.Agent`` objects, run with ``agents.Runner.run``.

    Called as ``agents.Runner.run(agent, query, context=<the case's context>)``; each later message
    of a conversation starts from the same agent, with the earlier items as its input list.
    """

    name = "openai_agents"

    def recognises(self, obj: Any) -> bool:
        return openai_agent(obj)

    def agent(self, obj: Any, name: str) -> Agent:
        async def run_agent(query: str, context: dict[str, Any]) -> Any:
            try:
                from agents import Runner
            except ImportError as exc:  # an object of the SDK, but the SDK cannot be imported whole
                raise ImportError(
                    f"the OpenAI Agents SDK cannot be imported ({exc}): {EXTRA}"
                ) from None
            keep_tracing_local()
            earlier = CONVERSATION.get()  # in a conversation: the earlier items, then this message
            given = [*earlier, {"role": "user", "content": query}] if earlier else query
            return await Runner.run(obj, given, context=context)

        return Agent(run_agent, True, getattr(obj, "name", None) or name, self, obj)

    def normalise(self, result: Any) -> RunRecord:
        if hasattr(result, "new_items") and hasattr(result, "final_output"):
            return read_result(result)
        return read_plain(result)

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """A copy of a ``FunctionTool`` whose ``on_invoke_tool`` goes through the stand-in.

        ``on_invoke_tool`` takes ``(ctx, json_args)``.
        """
        if not is_function_tool(tool):
            return None
        original = tool.on_invoke_tool
        real_calls: set[int] = set()  # the invocations (their tool contexts) the real tool answered

        async def real(ctx: Any, json_args: str) -> Any:
            real_calls.add(id(ctx))
            return await original(ctx, json_args)

        def args_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            text = args[1] if len(args) > 1 else kwargs.get("input", "")
            return _arguments({"arguments": text})

        mocked = standin(real, tool.name, args_of)

        async def on_invoke_tool(ctx: Any, json_args: str) -> Any:
            try:
                value = mocked(ctx, json_args)
                value = await value if inspect.isawaitable(value) else value
            except (
                Exception
            ) as exc:  # a {raise: …} mock: what the SDK does when the real tool raises
                real_calls.discard(id(ctx))
                return await _tool_failure(copy, ctx, exc)
            if (
                id(ctx) in real_calls
            ):  # the real tool's answer goes to the model as the SDK sends it
                real_calls.discard(id(ctx))
                return value
            return mock_text(value)

        copy = dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)
        return copy

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        """A clone of the agent whose function tools are ``wrap(tool)``.

        The agents it hands off to are cloned the same way.
        """
        return _cloned(obj, wrap, {})


def mock_text(value: Any) -> Any:
    """What the model gets for a mocked answer.

    A mapping or a list as JSON, the text a tool returning JSON sends (the SDK would send Python's
    repr of it); text and the SDK's own output objects as they are.
    """
    if (
        isinstance(value, dict) and "type" in value
    ):  # maybe one of the SDK's structured outputs: its own
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


async def _tool_failure(tool: Any, ctx: Any, exc: Exception) -> Any:
    """What the model gets when ``tool`` raised ``exc``.

    That is the tool's ``failure_error_function`` answer (the SDK's default one's message unless the
    tool set its own); ``exc`` is raised on when the tool has none (``None``).
    """
    if unmocked_stop(exc) is not None:  # no tool error: the case stops on it
        raise exc
    try:
        from agents.tool import maybe_invoke_function_tool_failure_error_function
    except (
        ImportError
    ):  # an older SDK keeps no failure function on the tool: the default one it used then
        from agents.tool import default_tool_error_function

        return default_tool_error_function(ctx, exc)
    answer = await maybe_invoke_function_tool_failure_error_function(
        function_tool=tool, context=ctx, error=exc
    )
    if answer is None:
        raise exc
    return answer


def _cloned(agent: Any, wrap: Callable[[Any], Any], done: dict[int, Any]) -> Any:
    if id(agent) in done:  # agents that hand off to each other
        return done[id(agent)]
    clone = done[id(agent)] = agent.clone()
    clone.tools = [wrap(t) if is_function_tool(t) else t for t in agent.tools]
    clone.handoffs = [_cloned(h, wrap, done) if openai_agent(h) else h for h in agent.handoffs]
    return clone


ADAPTER = OpenAIAgentsAdapter()
