"""Stand-ins: functions (and framework tool objects) that take a tool's place.

They answer from the current recording and record the call; outside a running case they call the
real tool.

One process-wide piece of state, ``_STANDINS``: the names of the live tool stand-ins (and the tool
objects adapters wrapped), so a case that mocks a tool nothing stands in for fails before its real
tool runs. It is global because user code makes stand-ins anywhere (an ``agent`` fixture of any
scope, a module at import) with no handle to a session; each entry goes when its stand-in is
garbage.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import threading
import weakref
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pytest_agent_eval.adapters import AdapterRegistry, ArgsOf, builtin_adapters
from pytest_agent_eval.adapters.messages import decode_args
from pytest_agent_eval.core.tool_errors import MockConfigError
from pytest_agent_eval.mocks.current import Answering, current_recording

T = TypeVar("T")
# set on stand-in functions: the tool name they answer for ("*": a dispatcher)
_MARK = "__agent_eval_tool__"


class _StandIns:
    """Names of the live tool stand-ins, and the framework tool objects adapters wrapped.

    A stand-in's finalizer may run inside any allocation of this thread (the cyclic GC), also while
    this thread holds the lock: it only queues the change (``deque.append`` takes no lock), which
    the next call applies.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: Counter[str] = Counter()
        self._wrapped: dict[int, weakref.ref[object]] = {}
        self._gone: deque[str | int] = deque()
        """Names of stand-ins and ids of wrapped tools that were garbage, not applied yet."""

    def _apply_gone(self) -> None:
        """Apply the queued changes (with the lock held)."""
        while self._gone:
            gone = self._gone.popleft()
            if isinstance(gone, str):
                self._tools[gone] -= 1
                if self._tools[gone] <= 0:
                    del self._tools[gone]
            else:
                ref = self._wrapped.get(gone)
                if (
                    ref is not None and ref() is None
                ):  # not a live object that got the dead one's id since
                    del self._wrapped[gone]

    def add_tool(self, standin: object, name: str) -> None:
        with self._lock:
            self._apply_gone()
            self._tools[name] += 1
        weakref.finalize(standin, self._gone.append, name)

    def add_wrapped(self, tool: object) -> None:
        """Note a framework's tool object that an adapter wrapped.

        Wrapping it again returns it as it is.
        """
        with contextlib.suppress(
            TypeError
        ):  # an object without weak references is wrapped again: no harm
            ref = weakref.ref(tool)
            with self._lock:
                self._apply_gone()
                self._wrapped[id(tool)] = ref
            weakref.finalize(tool, self._gone.append, id(tool))

    def is_wrapped(self, tool: object) -> bool:
        with self._lock:
            ref = self._wrapped.get(id(tool))
        return ref is not None and ref() is tool

    def names(self) -> list[str]:
        with self._lock:
            self._apply_gone()
            return sorted(self._tools)


_STANDINS = _StandIns()


def live_tools(names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(names of all live stand-ins, those of `names` without one)``, collecting garbage first.

    It collects garbage before saying "missing" (stand-ins left in reference cycles must not count).
    A collection can release more cycles (an agent's copy with stand-ins goes with its agent object,
    through a weak reference's callback), so it collects again while one freed something, a few
    times at most.
    """
    known = _STANDINS.names()
    missing = [name for name in names if name not in known]
    for _ in range(3):
        if not missing or not gc.collect():
            break
        known = _STANDINS.names()
        missing = [name for name in names if name not in known]
    return known, missing


def _is_standin(obj: Any) -> bool:
    return getattr(obj, _MARK, None) is not None or _STANDINS.is_wrapped(obj)


def answers_for(obj: Any, tool: str) -> bool:
    """Whether ``obj`` is a stand-in for the tool ``tool``.

    A stand-in is a function or a wrapped framework tool object.
    """
    if getattr(obj, _MARK, None) == tool:
        return True
    return _STANDINS.is_wrapped(obj) and getattr(obj, "name", None) == tool


def _mark(standin: Callable[..., Any], name: str) -> None:
    setattr(standin, _MARK, name)


def bound_args(func: Callable[..., Any]) -> ArgsOf:
    """Reads a call of ``func`` as ``{parameter: value}``.

    ``**kwargs`` are flattened, ``*args`` kept as a list.
    """
    try:
        sig: inspect.Signature | None = inspect.signature(func)
    except (TypeError, ValueError):
        sig = None

    def args_of(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        try:
            bound = sig.bind(*a, **kw) if sig is not None else None
        except TypeError:
            bound = None
        if sig is None or bound is None:
            return {**{f"arg{i}": v for i, v in enumerate(a)}, **kw}
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                out.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                if value:
                    out[name] = list(value)
            else:
                out[name] = value
        return out

    return args_of


def _standin(
    func: Callable[..., Any],
    name_of: Callable[[tuple[Any, ...], dict[str, Any]], str],
    args_of: ArgsOf,
    label: str,
    patched_as: str | None = None,
) -> Callable[..., Any]:
    """A function with ``func``'s metadata that answers from the current recording.

    Outside a recording it calls ``func``.

    ``patched_as``: the ``module:attr`` patch this stand-in was installed by; a running case that
    did not patch it (another file's, in flight at the same time) gets ``func``, as it would without
    that patch.
    """

    def recording_for() -> Answering | None:
        recording = current_recording(label)
        if recording is None or (patched_as is not None and not recording.patched(patched_as)):
            return None
        return recording

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_standin(*a: Any, **kw: Any) -> Any:
            recording = recording_for()
            if recording is None:
                return await func(*a, **kw)
            return await recording.ahandle(name_of(a, kw), args_of(a, kw), lambda: func(*a, **kw))

        return async_standin

    @functools.wraps(func)
    def standin(*a: Any, **kw: Any) -> Any:
        recording = recording_for()
        if recording is None:
            return func(*a, **kw)
        return recording.handle(name_of(a, kw), args_of(a, kw), lambda: func(*a, **kw))

    return standin


def standin(
    func: Callable[..., Any], name: str, args_of: ArgsOf | None = None
) -> Callable[..., Any]:
    """A stand-in for the tool function ``func``, recorded as tool ``name``.

    This is what adapters wrap tools with.
    """
    made = _standin(func, lambda a, kw: name, args_of or bound_args(func), f"tool {name!r}")
    _mark(made, name)
    _STANDINS.add_tool(made, name)
    return made


def wrap(tool: T, adapters: AdapterRegistry | None = None) -> T:
    """A mocked stand-in for ``tool`` that keeps its name, signature, docstring and schema.

    ``tool`` is a plain function (sync or async) or a tool object of a framework an adapter knows (a
    LangChain ``BaseTool``: ``@tool``, ``StructuredTool``, ``Tool``, subclasses); for a tool object
    the stand-in is a copy of it. Calls are answered from the running case's ``tool_mocks`` and
    recorded under the tool's name; outside a running case the real tool runs. ``adapters``: the
    session's (``tool_mocks.wrap``), else the built-in ones.
    """
    if _is_standin(tool):
        return tool
    wrapped = (adapters or builtin_adapters()).wrap_tool(tool, standin)
    if (
        getattr(wrapped, _MARK, None) is None
    ):  # a framework's tool object: its functions are the stand-ins
        _STANDINS.add_wrapped(wrapped)
    return cast(T, wrapped)


def dispatcher(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    """A stand-in for a dispatcher ``(name, args, ...)``.

    The call is recorded as tool ``name`` with ``args``.
    """
    read = bound_args(original)

    def name_of(a: tuple[Any, ...], kw: dict[str, Any]) -> str:
        values = list(read(a, kw).values())
        return str(values[0]) if values else "?"

    def args_of(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        values = list(read(a, kw).values())
        return (
            decode_args(values[1]) if len(values) > 1 else {}
        )  # a JSON string too, as OpenAI sends it

    standin = _standin(original, name_of, args_of, f"the dispatcher {target}", patched_as=target)
    _mark(standin, "*")
    return standin


def check_dispatcher(func: Callable[..., Any], target: str) -> None:
    """Raise :class:`MockConfigError` when ``func`` cannot be a dispatcher ``(name, args)``."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise MockConfigError(
            f"{target}: a dispatcher takes (name, args), this takes {inspect.signature(func)}; "
            "to mock one tool function use tool_mocks.patch_tool"
        )
