"""The contract of a framework adapter, and the :class:`Agent` it makes.

No framework and no pytest here.

How to write an adapter (one module, one registration line):

1. A class with a ``name`` and five methods (it need not inherit anything; :class:`Adapter` is a
   ``Protocol``):

   * ``recognises(obj) -> bool``: whether ``obj`` (what ``agent:``/``--agent`` named, or the
     ``agent`` fixture returned) is this framework's agent. Recognise by duck typing or by module
     name (``type(obj).__module__.startswith("myframework.")``), never by importing the framework:
     the adapter is asked about every agent, and a user without the framework must not pay for (or
     fail on) its import. It is also asked about each ``agent:``/``--agent`` reference string before
     it is imported: an adapter for agents served over HTTP recognises ``"http://..."`` and gets
     that string as ``obj`` (no import happens).
   * ``agent(obj, name) -> Agent``: how to call it. ``Agent.call(query, context)`` returns the raw
     result or an awaitable of it; ``is_async`` says whether ``call`` is a coroutine function (run
     on the event loop) or sync (run in a worker thread). :func:`calling` builds one from a function
     ``(query, context)`` or ``(query)``. ``context`` holds the case's ``context:`` mapping; in a
     conversation (``turns:``, a simulated user) also ``history``, the messages so far as ``{role,
     content}``. An adapter whose framework takes a conversation in its own form keeps it in
     ``RunRecord.conversation`` (in ``normalise``) and continues it from ``CONVERSATION.get()`` at
     the next message (``None`` at the first).
   * ``normalise(result) -> RunRecord``: read what ``call`` returned into the run record: ``output``
     (the final text), ``tool_calls`` (``ToolCall(name, args, result, error)`` in call order),
     ``reasoning``, ``metadata``, ``usage``, and ``conversation`` (above); only what this call
     added, not the earlier messages it was given. Fall back to
     ``pytest_agent_eval.adapters.plain.normalise`` for shapes that are not the framework's own (a
     string, a dict with ``output``, an ``AgentResult``). Raise
     ``pytest_agent_eval.adapters.UnreadableResult`` with what to return instead when nothing can be
     read. Tool calls that tool mocks recorded take the place of the same calls read here; the
     others read here (a handoff, a tool without a stand-in) are kept beside them.
   * ``wrap_tool(tool, standin) -> object | None``: ``None`` when ``tool`` is not this framework's
     tool object; else a copy of it whose function goes through ``standin(func, name, args_of)``,
     which returns a function with ``func``'s signature that answers from the running case's
     ``tool_mocks`` and records the call (and calls ``func`` outside a running case).
     ``args_of(args, kwargs) -> dict`` reads the tool's arguments from a call of ``func`` (default:
     bound to ``func``'s signature). Keep the tool's name, description and schema, so the model sees
     the same tool. The copy must exist before the agent is called (``tool_mocks.wrap`` in the
     ``agent`` fixture). Return ``None`` for everything if the framework takes plain functions as
     tools.

   * ``mock_tools(obj, wrap) -> object | None``: a copy of the agent ``obj`` whose own tools are
     replaced by ``wrap(tool)`` (each tool's mocked stand-in), so a case's ``tool_mocks`` answer
     without the user wrapping anything; ``None`` when its tools cannot be reached (the user wraps
     them with ``tool_mocks.wrap``). Used only for cases that mock tools; the copy is made once per
     agent and called like ``obj``.

   Import the framework only inside these methods, after ``recognises`` said yes.

2. Register it, tried before the built-in adapters (``plain``, the catch-all for callables, is
   last)::

       def pytest_agent_eval_register_adapters(registry):
           registry.register(MyFrameworkAdapter())

   in a ``conftest.py``, a ``-p`` plugin module or an installed plugin (entry point ``pytest11``). A
   built-in adapter is one module of ``pytest_agent_eval.adapters`` listed in
   ``adapters.registry.builtin_adapters``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from pytest_agent_eval.core.trial import CONVERSATION, TRIAL

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import RunRecord

__all__ = [
    "CONVERSATION",
    "TRIAL",
    "Adapter",
    "Agent",
    "ArgsOf",
    "StandIn",
    "UnreadableResult",
    "calling",
]

ArgsOf = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]
"""How a tool's arguments are read from one call of its function.

``args_of(args, kwargs) -> {argument: value}``.
"""


class StandIn(Protocol):
    """Makes a tool-mock stand-in for ``func`` that answers and records calls as tool ``name``.

    See ``wrap_tool``.
    """

    def __call__(
        self, func: Callable[..., Any], name: str, args_of: ArgsOf | None = None
    ) -> Callable[..., Any]: ...


@runtime_checkable
class Adapter(Protocol):
    """One framework's agents and tools (see this module's docstring for how to write one)."""

    name: str

    def recognises(self, obj: Any) -> bool:
        """Whether ``obj`` is this framework's agent.

        Tells by duck typing or module name; no framework import.
        """
        ...

    def agent(self, obj: Any, name: str) -> Agent:
        """How to call ``obj``: ``Agent(call, is_async, name, self, obj)`` (or :func:`calling`)."""
        ...

    def normalise(self, result: Any) -> RunRecord:
        """What a call returned, as the run record."""
        ...

    def wrap_tool(self, tool: Any, standin: StandIn) -> Any:
        """A mocked copy of the framework's tool object ``tool``, or ``None`` when it is not one."""
        ...

    def mock_tools(self, obj: Any, wrap: Callable[[Any], Any]) -> Any:
        """A copy of agent ``obj`` with ``wrap(tool)`` for each of its own tools.

        ``None`` if its tools are unreachable.
        """
        ...


class UnreadableResult(ValueError):
    """The agent returned something that holds no answer the plugin can read.

    The message says what to return.
    """


class Agent(NamedTuple):
    """A resolved agent: a call and the adapter that reads its result.

    ``call(query, context)`` returns the raw result, or an awaitable of it; ``adapter`` reads that
    result (``adapter.normalise``).
    """

    call: Callable[[str, dict[str, Any]], Any]
    is_async: bool
    name: str
    adapter: Adapter
    source: Any = None
    """The object the adapter recognised (for ``adapter.mock_tools``).

    ``None`` for an agent made otherwise.
    """


def _accepts_two(func: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def calling(func: Callable[..., Any], name: str, adapter: Adapter, source: Any = None) -> Agent:
    """An :class:`Agent` calling ``func(query, context)``, or ``func(query)`` when it takes one arg.

    Async when ``func`` (or its ``__call__``) is a coroutine function. ``source``: the agent object
    ``func`` belongs to.
    """
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
    if _accepts_two(func):
        return Agent(func, is_async, name, adapter, source)
    return Agent(lambda query, context: func(query), is_async, name, adapter, source)
