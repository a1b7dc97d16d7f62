"""Tool mocks (SPEC §6): canned tool responses per case and a record of every tool call. No pytest here.

* A *stand-in* takes the place of a tool (:func:`wrap`) or of a dispatcher ``(name, args) -> result``
  (:meth:`ToolMocks.patch`). When called it asks the current :class:`Recording` for the answer and records the
  call; outside a running case it calls the real tool.
* The current recording is a context variable set for one trial (:meth:`MockPlan.record`), so concurrent trials
  and cases each record only their own calls. Sync agents run in threads that copy the context.
* Responses (:func:`compile_response`): a literal, ``{return: x}``, ``{sequence: [...]}``, ``{raise: "Type: msg"}``,
  ``{when: [{args, return}], default: r}``, ``{call: "module:function"}``. A call with no response follows
  ``unmocked_tools``: ``strict`` (raise, and fail the trial), ``default`` or ``passthrough``.
* Before the agent runs, every mocked tool must have a stand-in (:meth:`MockPlan.require_patched`), else its real
  tool would run; after a trial, a mock the case itself declared and nobody called fails the trial.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import copy
import difflib
import functools
import gc
import inspect
import re
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union, cast

from pytest_agent_eval.adapters import AdapterRegistry, ArgsOf, builtin_adapters
from pytest_agent_eval.adapters.messages import decode_args
from pytest_agent_eval.cases.document import read_document
from pytest_agent_eval.cases.errors import EvalFileError, did_you_mean
from pytest_agent_eval.cases.model import UNMOCKED_MODES
from pytest_agent_eval.checks.tools import mismatches
from pytest_agent_eval.imports import ImportRefError, import_module, import_object
from pytest_agent_eval.record import ToolCall

if TYPE_CHECKING:
    from pytest_agent_eval.cases.model import Case

T = TypeVar("T")
_FORM_KEYS = frozenset({"return", "sequence", "raise", "when", "default", "call"})
_MARK = "__agent_eval_tool__"  # set on stand-ins: the tool name they answer for
_RAISE_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(.*))?$", re.DOTALL)


class ToolMockError(Exception):
    """Raised by a ``{raise: "Type: message"}`` response whose ``Type`` is not a builtin exception."""


class UnmockedToolError(Exception):
    """Raised by a call to a tool that has no response for the running case (``unmocked_tools: strict``)."""


class MockConfigError(ValueError):
    """A tool mock, patch target or responses file that cannot be used; the message says where and what to do."""


# -- responses -------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Value:
    """Answer with this value (a fresh copy per call, so an agent that mutates it cannot leak into other calls)."""

    value: Any


@dataclass(frozen=True, eq=False)
class Raise:
    """Raise ``Type(message)`` for a builtin exception type, else :class:`ToolMockError` with the whole text."""

    text: str

    def exception(self) -> Exception:
        match = _RAISE_RE.match(self.text)
        if match:
            kind = getattr(builtins, match.group(1), None)
            if isinstance(kind, type) and issubclass(kind, Exception):
                try:
                    return kind(match.group(2)) if match.group(2) is not None else kind()
                except TypeError:  # e.g. UnicodeDecodeError needs five arguments
                    pass
        return ToolMockError(self.text)


@dataclass(frozen=True, eq=False)
class Sequence:
    """One response per call, in order; once used up, further calls are unmocked calls."""

    items: tuple[Response, ...]


@dataclass(frozen=True, eq=False)
class When:
    """The first rule whose ``args`` are contained in the call's arguments (nested subset match) answers."""

    rules: tuple[tuple[dict[str, Any], Response], ...]
    default: Response | None = None


@dataclass(frozen=True, eq=False)
class Call:
    """Answer with ``func(**args)``."""

    ref: str
    func: Callable[..., Any]


Response = Union[Value, Raise, Sequence, When, Call]  # noqa: UP007 - a runtime alias, Python 3.10 compatible


def compile_response(raw: Any, where: str, resolve: bool = True) -> Response:
    """Read one response form; raise :class:`MockConfigError` naming ``where`` when it is malformed.

    A mapping is a form when it has a form key (``return``, ``sequence``, ``raise``, ``when``/``default``,
    ``call``); any other value is returned as it is. ``{return: {...}}`` returns a mapping that looks like a form.
    ``resolve=False`` checks the shape only: a ``call`` target is not imported (validation of a file).
    """
    if not isinstance(raw, dict) or not raw.keys() & _FORM_KEYS:
        if isinstance(raw, dict) and len(raw) == 1:
            (key,) = raw
            close = difflib.get_close_matches(str(key), sorted(_FORM_KEYS), n=1, cutoff=0.8)
            if close:
                raise MockConfigError(
                    f"{where}: unknown response form {key!r} (did you mean {close[0]!r}?); "
                    "to answer with this mapping as it is, write {return: {...}}"
                )
        return Value(raw)
    keys = set(raw)
    if keys == {"return"}:
        return Value(raw["return"])
    if keys == {"sequence"}:
        items = raw["sequence"]
        if not isinstance(items, list) or not items:
            raise MockConfigError(f"{where}.sequence: expected a non-empty list of responses, got {items!r}")
        return Sequence(tuple(compile_response(r, f"{where}.sequence[{i}]", resolve) for i, r in enumerate(items)))
    if keys == {"raise"}:
        if not isinstance(raw["raise"], str) or not raw["raise"].strip():
            raise MockConfigError(f"{where}.raise: expected 'Type: message' (e.g. 'TimeoutError: upstream')")
        return Raise(raw["raise"])
    if keys == {"call"}:
        ref = raw["call"]
        if not resolve and isinstance(ref, str) and ":" in ref:
            return Call(ref, _not_imported)
        try:
            func = import_object(ref) if isinstance(ref, str) else None
        except ImportRefError as exc:
            raise MockConfigError(f"{where}.call: {exc}") from None
        if not callable(func):
            raise MockConfigError(f"{where}.call: expected 'module:function' naming a callable, got {ref!r}")
        return Call(ref, func)
    if "when" in keys and keys <= {"when", "default"}:
        return _compile_when(raw, where, resolve)
    unknown = sorted(str(k) for k in keys - _FORM_KEYS)
    if unknown:
        raise MockConfigError(
            f"{where}: unknown key {unknown[0]!r} in a response form{did_you_mean(unknown[0], _FORM_KEYS)}; "
            "to answer with this mapping as it is, write {return: {...}}"
        )
    raise MockConfigError(
        f"{where}: a response mapping with keys {sorted(keys)} mixes or misuses the response forms; use one of "
        "{sequence: [...]}, {raise: 'Type: message'}, {when: [...], default: r}, {call: 'module:function'}, "
        "or {return: <value>} to answer with this mapping as it is"
    )


def _not_imported(**args: Any) -> Any:
    raise MockConfigError("a `call` response compiled for validation only")  # never answers a call


def _compile_when(raw: dict[str, Any], where: str, resolve: bool) -> When:
    rules = raw["when"]
    if not isinstance(rules, list) or not rules:
        raise MockConfigError(f"{where}.when: expected a non-empty list of {{args: {{...}}, return: r}} entries")
    out = []
    for i, rule in enumerate(rules):
        here = f"{where}.when[{i}]"
        if not isinstance(rule, dict) or set(rule) != {"args", "return"} or not isinstance(rule["args"], dict):
            odd = sorted(str(k) for k in rule if k not in ("args", "return")) if isinstance(rule, dict) else []
            hint = f"; unknown key {odd[0]!r}{did_you_mean(odd[0], ('args', 'return'))}" if odd else ""
            raise MockConfigError(f"{here}: expected {{args: {{...}}, return: r}}, got {rule!r}{hint}")
        out.append((rule["args"], compile_response(rule["return"], f"{here}.return", resolve)))
    default = compile_response(raw["default"], f"{where}.default", resolve) if "default" in raw else None
    return When(tuple(out), default)


def load_responses(path: Path) -> dict[str, Response]:
    """Read a JSON/YAML file of ``{tool: response}`` (ini ``agent_eval_tool_responses``)."""
    if not path.is_file():
        raise MockConfigError(
            f"{path}: agent_eval_tool_responses names a file that does not exist (paths are relative to the rootdir)"
        )
    try:
        doc = read_document(path)
    except EvalFileError as exc:
        raise MockConfigError(f"{exc} (agent_eval_tool_responses)") from None
    if not isinstance(doc.data, dict):
        raise MockConfigError(f"{path}: agent_eval_tool_responses must hold a mapping of tool name to response")
    return {
        str(name): compile_response(raw, f"{path}:{doc.line((name,))}: tool {name!r}") for name, raw in doc.data.items()
    }


# -- one case's plan and one trial's recording ---------------------------------------------------------


@dataclass(frozen=True)
class MockPlan:
    """The compiled tool mocks of one case: a response per tool, and what a call without one does."""

    responses: Mapping[str, Response]
    unmocked: str = "strict"
    case_id: str = "(no case)"
    location: str = "(no file)"
    declared: tuple[str, ...] = ()
    """The tools the case mocks (its own and its file's ``defaults``, not the ini defaults): each must be patched."""
    must_call: tuple[str, ...] = ()
    """The case's own mocks that a trial must call: a mock never called is a typo or a stale case."""

    @classmethod
    def for_case(cls, case: Case, base: Mapping[str, Response] | None = None, unmocked: str | None = None) -> MockPlan:
        """The case's ``tool_mocks`` over ``base`` (the ini defaults); its ``unmocked_tools``, else ``unmocked``."""
        where = f"{case.location}: case {case.id}: tool_mocks"
        own = {name: compile_response(raw, f"{where}.{name}") for name, raw in case.tool_mocks.items()}
        mode = case.unmocked_tools or unmocked or "strict"
        if mode not in UNMOCKED_MODES:
            raise MockConfigError(f"{case.location}: unmocked_tools {mode!r}: use one of {', '.join(UNMOCKED_MODES)}")
        unwanted = _unwanted(case)
        must = [n for n in own if n not in case.inherited_mocks and not unwanted(n)] if mode != "passthrough" else []
        return cls({**(base or {}), **own}, mode, case.id, case.location, tuple(own), tuple(must))

    def require_patched(self, dispatched: bool = False, others: bool = True) -> None:
        """Raise :class:`MockConfigError` when a mocked tool has no stand-in: its real tool would run.

        Called before the agent: every tool the case mocks must be patched or wrapped by then (a patched
        dispatcher answers for every name). Stand-ins made inside the agent's call come too late.
        ``dispatched``: the case's own dispatcher is patched; ``others``: count dispatchers patched by the
        running test's fixtures (not for a case started early, while another test runs).
        """
        problems = _REGISTRY.unknown_tools(self, dispatched, others)
        if problems:
            raise MockConfigError("\n".join(problems))

    def never_called(self, calls: list[ToolCall]) -> list[str]:
        """Violations for the case's own mocks that no call of the trial used, with the closest called tool."""
        called = list(dict.fromkeys(call.name for call in calls))
        return [
            f"tool_mocks: {name!r} was mocked but never called{did_you_mean(name, called)}; the agent called "
            f"{', '.join(called) or 'no tool'} (case {self.case_id}, {self.location}); fix the name, remove the "
            "mock, or list the tool under `tools_not_called` if the agent must not call it"
            for name in self.must_call
            if name not in called
        ]

    def recorder(self, case: Any) -> AbstractContextManager[Recording]:
        """:meth:`record`, as the runner's per-trial recorder (which is handed the case)."""
        return self.record()

    @contextlib.contextmanager
    def record(self) -> Iterator[Recording]:
        """Make a fresh recording current for the code run inside the block (one trial)."""
        recording = Recording(self)
        token = _CURRENT.set(recording)
        with _ACTIVE_LOCK:
            _ACTIVE.append(recording)
        try:
            yield recording
        finally:
            _CURRENT.reset(token)
            with _ACTIVE_LOCK:
                _ACTIVE.remove(recording)
            recording.unused.extend(self.never_called(recording.calls))


def _unwanted(case: Case) -> Callable[[str], bool]:
    """Whether the case's checks say a tool must not be called (a mock of it is a safety net, not a typo)."""
    banned: set[str] = set()
    allowed: list[set[str]] = []
    for expect in (case.expect, *(turn.expect for turn in case.turns)):
        if expect.get("max_tool_calls") == 0:
            return lambda name: True
        if isinstance(expect.get("tools_not_called"), list):
            banned.update(map(str, expect["tools_not_called"]))
        if isinstance(expect.get("tools_exactly"), list):
            allowed.append(set(map(str, expect["tools_exactly"])))
    return lambda name: name in banned or any(name not in names for names in allowed)


@dataclass
class Recording:
    """The tool calls of one trial, in call order, answered from its plan."""

    plan: MockPlan
    calls: list[ToolCall] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """Problems that fail the trial whatever the agent did with them: unmocked calls in strict mode."""
    unused: list[str] = field(default_factory=list)
    """The case's own mocks that no call used: a failure only when the agent answered (else it is noise)."""
    _served: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, name: str, args: dict[str, Any], real: Callable[[], Any]) -> Any:
        """Answer a sync call and record it; ``real`` runs the real tool (passthrough)."""
        call = self._begin(name, args)
        try:
            response = self._resolve(call)
            if response is None:
                with _passing_through():
                    result = real()
            else:
                result = _produce(response, call.args)
        except Exception as exc:
            call.error = _describe(exc)
            raise
        call.result = result
        return result

    async def ahandle(self, name: str, args: dict[str, Any], real: Callable[[], Awaitable[Any]]) -> Any:
        """Answer an async call and record it; ``real`` returns the real tool's awaitable (passthrough)."""
        call = self._begin(name, args)
        try:
            response = self._resolve(call)
            if response is None:
                with _passing_through():
                    result = await real()
            else:
                result = _produce(response, call.args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            call.error = _describe(exc)
            raise
        call.result = result
        return result

    def _begin(self, name: str, args: dict[str, Any]) -> ToolCall:
        call = ToolCall(name, args)
        with self._lock:
            self.calls.append(call)
        return call

    def _resolve(self, call: ToolCall) -> Value | Raise | Call | None:
        """The response for this call; ``None`` runs the real tool; an unmocked call in strict mode raises."""
        spec = self.plan.responses.get(call.name)
        with self._lock:
            picked = self._pick(spec, call.args) if spec is not None else "no response"
        if not isinstance(picked, str):
            return picked
        if self.plan.unmocked == "default":
            return Value(f"Mock response for {call.name}")
        if self.plan.unmocked == "passthrough":
            return None
        why = (
            f"`tool_mocks` has no response for {call.name!r}{did_you_mean(call.name, self.plan.responses)}"
            if spec is None
            else picked
        )
        self.violations.append(
            f"unmocked tool call {call.describe()} in case {self.plan.case_id} ({self.plan.location}): {why}; "
            f"add a response under `tool_mocks:` (in the case or the file's `defaults:`), or set "
            "`unmocked_tools: default` (canned answer) or `passthrough` (the real tool runs)"
        )
        raise UnmockedToolError(f"no mock response for tool {call.name!r} in this eval case ({why})")

    def _pick(self, spec: Response, args: dict[str, Any]) -> Value | Raise | Call | str:
        """The leaf response for ``args``, or why there is none. Sequences advance (call under the lock)."""
        if isinstance(spec, Sequence):
            n = self._served.get(id(spec), 0)
            self._served[id(spec)] = n + 1
            if n >= len(spec.items):
                return f"its `sequence` has {len(spec.items)} responses and this is call {n + 1}"
            return self._pick(spec.items[n], args)
        if isinstance(spec, When):
            for want, response in spec.rules:
                if not mismatches(want, args, "args"):
                    return self._pick(response, args)
            if spec.default is not None:
                return self._pick(spec.default, args)
            return "no `when` entry matches these arguments and there is no `default`"
        return spec


def _produce(response: Value | Raise | Call, args: dict[str, Any]) -> Any:
    if isinstance(response, Value):
        return copy.deepcopy(response.value)
    if isinstance(response, Raise):
        raise response.exception()
    return response.func(**args)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# -- which recording is current ---------------------------------------------------------------------------

_CURRENT: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("agent_eval_recording", default=None)
_PASSING: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_eval_passthrough", default=False)
# Recordings in progress, only to serve code that lost the context (a bare threading.Thread in the agent).
_ACTIVE: list[Recording] = []
_ACTIVE_LOCK = threading.Lock()


@contextlib.contextmanager
def _passing_through() -> Iterator[None]:
    """A real tool runs: stand-ins it calls in turn are not mocked or recorded again."""
    token = _PASSING.set(True)
    try:
        yield
    finally:
        _PASSING.reset(token)


def current_recording(tool: str = "a tool") -> Recording | None:
    """The recording of the trial this code runs for; ``None`` outside a running case (the real tool runs).

    Code that lost the context (a thread started without copying it) gets the one recording in progress; with
    several in progress it cannot be told which case it belongs to, and the call raises rather than reach the
    real tool.
    """
    if _PASSING.get():
        return None
    recording = _CURRENT.get()
    if recording is not None:
        return recording
    with _ACTIVE_LOCK:
        active = list(_ACTIVE)
    if len(active) > 1:
        raise UnmockedToolError(
            f"{tool} was called from a thread that did not inherit the eval case's context while "
            f"{len(active)} cases run; start threads with contextvars.copy_context().run(...) or use "
            "asyncio.to_thread / loop.run_in_executor with a copied context"
        )
    return active[0] if active else None


# -- stand-ins ------------------------------------------------------------------------------------------------


class _Registry:
    """Names of the live tool stand-ins, to catch mocks of tools that nothing patched."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tools: Counter[str] = Counter()
        self.wrapped: dict[int, weakref.ref[object]] = {}

    def add_wrapped(self, tool: object) -> None:
        """Note a framework's tool object that an adapter wrapped (wrapping it again returns it as it is)."""
        with contextlib.suppress(TypeError):  # an object without weak references is wrapped again: no harm
            weakref.finalize(tool, self.wrapped.pop, id(tool), None)
            with self.lock:
                self.wrapped[id(tool)] = weakref.ref(tool)

    def is_wrapped(self, tool: object) -> bool:
        with self.lock:
            ref = self.wrapped.get(id(tool))
        return ref is not None and ref() is tool

    def add_tool(self, standin: object, name: str) -> None:
        with self.lock:
            self.tools[name] += 1
        weakref.finalize(standin, self._drop_tool, name)

    def _drop_tool(self, name: str) -> None:
        with self.lock:
            self.tools[name] -= 1
            if self.tools[name] <= 0:
                del self.tools[name]

    def _live(self) -> list[str]:
        with self.lock:
            return sorted(self.tools)

    def unknown_tools(self, plan: MockPlan, dispatched: bool, others: bool) -> list[str]:
        """Problems for mocks of tools no stand-in answers for (a patched dispatcher answers for any name).

        ``dispatched``: the case's own dispatcher is patched. ``others``: a dispatcher patched for the running
        test counts too (those the scheduler keeps patched for the session, for cases it started early, never do).
        """
        if dispatched or not plan.declared or (others and _patched_dispatchers()):
            return []
        known = self._live()
        missing = [name for name in plan.declared if name not in known]
        if missing:  # stand-ins that are garbage but not yet collected (reference cycles) must not count
            gc.collect()
            known = self._live()
            missing = [name for name in plan.declared if name not in known]
        where = f"{plan.location}: case {plan.case_id}"
        if not known:
            return [
                f"{where} has tool_mocks for {', '.join(plan.declared)} but no tool is patched, so the real tools "
                "would run; the agent was not called. Set `tool_dispatch: module:function` in the file (or ini "
                "agent_eval_tool_dispatch), or use the tool_mocks fixture (patch, patch_tool, wrap) in your `agent` "
                "fixture: tools must be patched or wrapped before the agent is called"
            ]
        return [
            f"{where}: tool_mocks has a response for {name!r} but the agent has no mocked tool of that name"
            f"{did_you_mean(name, known)}; mocked tools: {', '.join(known)}; the agent was not called "
            "(tools must be patched or wrapped before it is)"
            for name in missing
        ]


_REGISTRY = _Registry()


def _is_standin(obj: Any) -> bool:
    if getattr(obj, _MARK, None) is not None:
        return True
    return _REGISTRY.is_wrapped(obj)


def _mark(standin: Callable[..., Any], name: str) -> None:
    setattr(standin, _MARK, name)


def _bound_args(func: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """Reads a call of ``func`` as ``{parameter: value}`` (``**kwargs`` flattened, ``*args`` as a list)."""
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
    args_of: Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]],
    label: str,
) -> Callable[..., Any]:
    """A function with ``func``'s metadata that answers from the current recording, or calls ``func`` outside one."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_standin(*a: Any, **kw: Any) -> Any:
            recording = current_recording(label)
            if recording is None:
                return await func(*a, **kw)
            return await recording.ahandle(name_of(a, kw), args_of(a, kw), lambda: func(*a, **kw))

        return async_standin

    @functools.wraps(func)
    def standin(*a: Any, **kw: Any) -> Any:
        recording = current_recording(label)
        if recording is None:
            return func(*a, **kw)
        return recording.handle(name_of(a, kw), args_of(a, kw), lambda: func(*a, **kw))

    return standin


def standin(func: Callable[..., Any], name: str, args_of: ArgsOf | None = None) -> Callable[..., Any]:
    """A stand-in for the tool function ``func``, recorded as tool ``name`` (what adapters wrap tools with)."""
    made = _standin(func, lambda a, kw: name, args_of or _bound_args(func), f"tool {name!r}")
    _mark(made, name)
    _REGISTRY.add_tool(made, name)
    return made


def wrap(tool: T, adapters: AdapterRegistry | None = None) -> T:
    """A mocked stand-in for ``tool`` that keeps its name, signature, docstring and schema.

    ``tool`` is a plain function (sync or async) or a tool object of a framework an adapter knows (a LangChain
    ``BaseTool``: ``@tool``, ``StructuredTool``, ``Tool``, subclasses); for a tool object the stand-in is a copy
    of it. Calls are answered from the running case's ``tool_mocks`` and recorded under the tool's name; outside
    a running case the real tool runs. ``adapters``: the session's (``tool_mocks.wrap``), else the built-in ones.
    """
    if _is_standin(tool):
        return tool
    wrapped = (adapters or builtin_adapters()).wrap_tool(tool, standin)
    if getattr(wrapped, _MARK, None) is None:  # a framework's tool object: its functions are the stand-ins
        _REGISTRY.add_wrapped(wrapped)
    return cast(T, wrapped)


def _dispatcher(original: Callable[..., Any], target: str) -> Callable[..., Any]:
    """A stand-in for a dispatcher ``(name, args, ...)``: the call is recorded as tool ``name`` with ``args``."""
    read = _bound_args(original)

    def name_of(a: tuple[Any, ...], kw: dict[str, Any]) -> str:
        values = list(read(a, kw).values())
        return str(values[0]) if values else "?"

    def args_of(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        values = list(read(a, kw).values())
        return decode_args(values[1]) if len(values) > 1 else {}  # a JSON string too, as OpenAI sends it

    standin = _standin(original, name_of, args_of, f"the dispatcher {target}")
    _mark(standin, "*")
    return standin


def _check_dispatcher(func: Callable[..., Any], target: str) -> None:
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


# -- patching module attributes ------------------------------------------------------------------------


@dataclass
class _Patch:
    """A stand-in installed at a module attribute and wherever that object was imported by the same name."""

    places: list[tuple[Any, str]]
    original: Any
    standin: Any
    dispatcher: bool
    count: int = 1
    held: int = 0
    """How many of ``count`` are held for the session (:class:`ToolMocks` with ``held``)."""


_PATCHES: dict[tuple[int, str], _Patch] = {}
_PATCHES_LOCK = threading.Lock()


def _owner(target: str) -> tuple[Any, str]:
    """The object holding the attribute named by ``module:attr`` (``attr`` may be dotted), and the last name."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise MockConfigError(f"{target!r} is not a 'module:attribute' reference (e.g. 'myproject.agent:dispatch')")
    parent, _, name = attr.rpartition(".")
    try:
        owner = import_object(f"{module_name}:{parent}") if parent else import_module(module_name)
    except ImportRefError as exc:
        raise MockConfigError(str(exc)) from None
    except Exception as exc:
        raise MockConfigError(f"cannot import module {module_name!r} for {target!r}: {_describe(exc)}") from None
    if not hasattr(owner, name):
        raise MockConfigError(f"{target}: {module_name}{'.' + parent if parent else ''} has no attribute {name!r}")
    if inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, name)):
        raise MockConfigError(
            f"{target}: a method on a class cannot be patched this way; patch a module-level function, "
            "or wrap the tool where the agent is built (tool_mocks.wrap)"
        )
    return owner, name


def _install(target: str, make: Callable[[Any], Any], dispatcher: bool, held: bool) -> Any:
    """Install ``make(original)`` at ``target`` (ref-counted: overlapping patches share one stand-in)."""
    owner, name = _owner(target)
    key = (id(owner), name)
    with _PATCHES_LOCK:
        patch = _PATCHES.get(key)
        if patch is not None:
            patch.count += 1
            patch.held += held
            return patch.standin
        original = getattr(owner, name)
        standin = make(original)
        places = [(owner, name)]
        if inspect.ismodule(owner):  # `from pkg.mod import dispatch_tool` elsewhere: patch those names too
            places += [(module, name) for module in _importers(name, original) if module is not owner]
        for place, attr in places:
            setattr(place, attr, standin)
        _PATCHES[key] = _Patch(places, original, standin, dispatcher, held=int(held))
        return standin


def _patched_dispatchers() -> int:
    """Dispatchers patched for a running test (not only held for the session)."""
    with _PATCHES_LOCK:
        return sum(1 for patch in _PATCHES.values() if patch.dispatcher and patch.count > patch.held)


def _importers(name: str, obj: Any) -> list[Any]:
    """Loaded modules that hold ``obj`` under ``name``."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is obj:
            found.append(module)
    return found


def _uninstall(key: tuple[int, str], held: bool) -> None:
    with _PATCHES_LOCK:
        patch = _PATCHES[key]
        patch.count -= 1
        patch.held -= held
        if patch.count:
            return
        del _PATCHES[key]
        for place, attr in patch.places:
            if getattr(place, attr, None) is patch.standin:  # leave later patches by others alone
                setattr(place, attr, patch.original)


# -- the fixture's object ----------------------------------------------------------------------------------


class ToolMocks:
    """What the ``tool_mocks`` fixture gives: patch a dispatcher or a tool, wrap tool objects, read the calls.

    Patches last until :meth:`undo` (the fixture's teardown). Calls are answered from the running case's
    ``tool_mocks`` and recorded per trial; outside a running case the real tools run.
    """

    def __init__(self, held: bool = False, adapters: AdapterRegistry | None = None) -> None:
        self._adapters = adapters
        """The session's adapters, which know the tool objects of frameworks (built-in ones when not given)."""
        self._held = held
        """Patches kept for the session for cases started early: they do not count as patched for other cases."""
        self._patches: list[tuple[int, str]] = []
        self._recordings: list[Recording] = []

    def patch(self, target: str) -> Callable[..., Any]:
        """Patch the dispatcher ``(name, args) -> result`` at ``module:attr``; each call is recorded as tool ``name``.

        Also patched: modules that imported it by the same name (``from pkg.mod import dispatch_tool``).
        References kept elsewhere (a dict, a closure, a default argument) are not reached.
        """

        def make(original: Any) -> Any:
            if not callable(original):
                raise MockConfigError(f"{target}: expected a dispatcher function, got {type(original).__name__}")
            _check_dispatcher(original, target)
            return _dispatcher(original, target)

        standin = _install(target, make, dispatcher=True, held=self._held)
        self._patches.append(_owner_key(target))
        return cast(Callable[..., Any], standin)

    def patch_tool(self, target: str) -> Any:
        """Patch one tool at ``module:attr`` (a function or a LangChain tool) with its :func:`wrap` stand-in."""

        def make(original: Any) -> Any:
            try:
                return wrap(original, self._adapters)
            except TypeError as exc:
                raise MockConfigError(f"{target}: {exc}") from None

        standin = _install(target, make, dispatcher=False, held=self._held)
        self._patches.append(_owner_key(target))
        return standin

    def wrap(self, tool: T) -> T:
        """A mocked stand-in for a tool object a framework is handed (see :func:`wrap`)."""
        return wrap(tool, self._adapters)

    @property
    def calls(self) -> list[ToolCall]:
        """The calls recorded for the current test's case so far: every trial, trial by trial, in call order."""
        return [call for recording in self._recordings for call in recording.calls]

    def recorder(self, plan: MockPlan) -> Callable[[Any], AbstractContextManager[Recording]]:
        """The runner's per-trial recorder for ``plan``; its recordings feed :attr:`calls`."""

        @contextlib.contextmanager
        def record(case: Any) -> Iterator[Recording]:
            with plan.record() as recording:
                self._recordings.append(recording)
                yield recording

        return record

    def undo(self) -> None:
        """Undo this object's patches (the last user of a patched attribute restores the original)."""
        while self._patches:
            _uninstall(self._patches.pop(), self._held)


def _owner_key(target: str) -> tuple[int, str]:
    owner, name = _owner(target)
    return id(owner), name
