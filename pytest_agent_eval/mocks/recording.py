"""One case's compiled tool mocks (:class:`MockPlan`) and one trial's record of calls.

The record, :class:`Recording`, answers each call from the plan: a response, the real tool
(``passthrough``), a canned answer (``default``) or, in ``strict`` mode, an error that fails the
trial.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import field
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_agent_eval.core.errors import did_you_mean
from pytest_agent_eval.core.model import model
from pytest_agent_eval.core.names import UNMOCKED_MODES
from pytest_agent_eval.core.results import ToolCall
from pytest_agent_eval.core.tool_errors import MockConfigError, UnmockedToolError
from pytest_agent_eval.faults import describe
from pytest_agent_eval.mocks.current import current, passing_through

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.mocks.patching import Holder
    from pytest_agent_eval.mocks.responses import Call, Raise, Response, Value

# The responses, patching and stand-ins load with the first case that has mocks or the first tool
# call a recording answers: a case without mocks records with this module and ``current`` only.


class MockPlan(NamedTuple):
    """The compiled tool mocks of one case: a response per tool; what a call without one does."""

    responses: Mapping[str, Response]
    unmocked: str = "strict"
    case_id: str = "(no case)"
    location: str = "(no file)"
    declared: tuple[str, ...] = ()
    """The tools the case mocks: each must be patched.

    Its own and its file's ``defaults``, not the ini defaults.
    """
    must_call: tuple[str, ...] = ()
    """The case's own mocks that a trial must call.

    A mock never called is a typo or a stale case.
    """

    @classmethod
    def for_case(
        cls, case: Case, base: Mapping[str, Response] | None = None, unmocked: str | None = None
    ) -> MockPlan:
        """The case's ``tool_mocks`` over ``base`` (the ini defaults).

        Its ``unmocked_tools``, else ``unmocked``.
        """
        own = {}
        if case.tool_mocks:
            from pytest_agent_eval.mocks.responses import compile_response

            where = f"{case.location}: case {case.id}: tool_mocks"
            own = {
                name: compile_response(raw, f"{where}.{name}")
                for name, raw in case.tool_mocks.items()
            }
        mode = case.unmocked_tools or unmocked or "strict"
        if mode not in UNMOCKED_MODES:
            raise MockConfigError(
                f"{case.location}: unmocked_tools {mode!r}: use one of {', '.join(UNMOCKED_MODES)}"
            )
        if (
            not own
        ):  # nothing of its own to call: most cases, each of them (no forbidden tools to read)
            return cls(base or {}, mode, case.id, case.location)
        from pytest_agent_eval.checks.tools import (
            forbidden_tools,
        )  # with the first case that has mocks

        unwanted = forbidden_tools(case)
        must = (
            [n for n in own if n not in case.inherited_mocks and not unwanted(n)]
            if mode != "passthrough"
            else []
        )
        return cls({**(base or {}), **own}, mode, case.id, case.location, tuple(own), tuple(must))

    def require_patched(
        self,
        dispatched: bool = False,
        others: bool = True,
        agent: Any = None,
        module: str | None = None,
    ) -> None:
        """Raise :class:`MockConfigError` when a mocked tool has no stand-in.

        Its real tool would run. Called before the agent: every tool the case mocks must be patched
        or wrapped by then (a patched dispatcher answers for every name). Stand-ins made inside the
        agent's call come too late. ``dispatched``: the case's own dispatcher is patched;
        ``others``: count dispatchers patched by the running test's fixtures (not for a case started
        early, while another test runs); ``agent`` and ``module``: the agent's object and the module
        of its ``module:attr`` reference (whether it uses MCP).
        """
        problems = _unpatched(self, dispatched, others, agent, module)
        if problems:
            raise MockConfigError("\n".join(problems))

    def never_called(self, calls: list[ToolCall]) -> list[str]:
        """Violations for the case's own mocks that no call of the trial used.

        Each names the closest called tool, and the references to the real tool that its patch did
        not reach (a call through them is not seen).
        """
        called = list(dict.fromkeys(name for call in calls for name in _names(call)))
        return [
            f"tool_mocks: {name!r} was mocked but never called{did_you_mean(name, called)}"
            f"{_why_not_called(name, called)} (case {self.case_id}, {self.location}); "
            "fix the name, remove the "
            "mock, or list the tool under `tools_not_called` if the agent must not call it"
            for name in self.must_call
            if name not in called
        ]

    def recorder(self, case: Any) -> AbstractContextManager[Recording]:
        """:meth:`record`, as the runner's per-trial recorder of a case that patched nothing.

        The recorder is handed the case: a patch another case holds meanwhile is not its own.
        """
        return self.record(frozenset())

    def record(self, patches: frozenset[str] | None = None) -> AbstractContextManager[Recording]:
        """Make a fresh recording current for the code run inside the block (one trial).

        ``patches``: the ``module:attr`` patches of the case (``None``: every patch in force).
        """
        return _Recorded(self, patches)


class _Recorded:
    """``MockPlan.record``'s block: one context manager per trial, made for every case."""

    __slots__ = ("current", "patches", "plan", "recording")

    def __init__(self, plan: MockPlan, patches: frozenset[str] | None) -> None:
        self.plan, self.patches = plan, patches

    def __enter__(self) -> Recording:
        self.recording = Recording(self.plan, patches=self.patches)
        self.current = current(self.recording)
        self.current.__enter__()
        return self.recording

    def __exit__(self, *exc: object) -> None:
        try:
            self.current.__exit__(*exc)
        finally:
            self.recording.unused.extend(self.plan.never_called(self.recording.calls))


def _names(call: ToolCall) -> list[str]:
    """The names a mock may give a call.

    For an MCP tool ``server.tool`` and ``tool``, else its name.
    """
    return [f"{call.server}.{call.name}", call.name] if call.server else [call.name]


def _why_not_called(name: str, called: list[str]) -> str:
    """What the stand-ins saw instead, and where the real tool is still reachable.

    Only calls that reach a stand-in are seen, so "the agent called no tool" cannot be told.
    """
    from pytest_agent_eval.mocks.patching import unreached

    seen = f"; the agent called {', '.join(called)}" if called else ": no call reached its stand-in"
    missed = unreached(name)
    if not missed:
        if called:
            return seen
        return (
            f"{seen} (either no tool was called, "
            "or one was called through a reference no patch reached: a dict, "
            "a list or a closure made before the patch)"
        )
    notes = []
    for patch in missed:
        held = [str(place) for place in patch.places] + patch.others
        one = len(held) == 1
        fixes = [fix for fix in (_fix(place, patch.dispatcher) for place in patch.places) if fix][
            :2
        ]
        how = (
            f"Patch {'it' if one else 'them'} too ({'; '.join(fixes)}) or have" if fixes else "Have"
        )
        notes.append(
            f"{'patch' if patch.dispatcher else 'patch_tool'}({patch.target!r}) "
            f"did not reach {_listed(held)}, "
            f"which still {'holds' if one else 'hold'} "
            f"the real {'dispatcher' if patch.dispatcher else 'tool'}: a "
            f"call through {'it' if one else 'them'} runs the real tool, unrecorded. "
            f"{how} the agent look the "
            f"{'dispatcher' if patch.dispatcher else 'tool'} up when it calls it"
        )
    return f"{seen}; {' '.join(notes)}"


def _fix(place: Holder, dispatcher: bool) -> str | None:
    """The line that patches ``place`` too, for the test only.

    A module attribute with the ``tool_mocks`` fixture, a dict or list entry with
    ``monkeypatch.setitem`` (a tuple cannot be patched; nor can a dispatcher's entry).
    """
    if not place.container:
        return (
            f"tool_mocks.{'patch' if dispatcher else 'patch_tool'}"
            f"({place.module + ':' + place.attr!r})"
        )
    if dispatcher or place.container not in ("dict", "list"):
        return None
    container = f"{place.module}.{place.attr}"
    return (
        f"monkeypatch.setitem({container}, {place.key!r}, "
        f"tool_mocks.wrap({container}[{place.key!r}]))"
    )


def _listed(items: list[str], most: int = 3) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _unpatched(
    plan: MockPlan, dispatched: bool, others: bool, agent: Any = None, module: str | None = None
) -> list[str]:
    """Problems for mocks of tools no stand-in answers for.

    A patched dispatcher answers for any name.

    ``dispatched``: the case's own dispatcher is patched. ``others``: a dispatcher patched for the
    running test counts too (those the scheduler keeps patched for the session, for cases it started
    early, never do). ``agent`` (the object the agent's adapter recognised) and ``module`` (of its
    ``module:attr`` reference) tell whether the agent uses MCP, whose servers may serve any name.
    """
    if dispatched or not plan.declared:
        return []
    from pytest_agent_eval.mocks.patching import patched_dispatchers
    from pytest_agent_eval.mocks.standins import live_tools

    if others and patched_dispatchers():
        return []
    where = f"{plan.location}: case {plan.case_id}"
    known, missing = live_tools(plan.declared)
    if not missing:
        return []
    problems: list[str] = []
    hints: list[str] = []
    mcp_tools = sys.modules.get(
        "pytest_agent_eval.mocks.mcp"
    )  # loaded with an MCP client only (SPEC §27)
    if mcp_tools is not None and mcp_tools.installed():
        # mcp is loaded (the Agents SDK loads it for every agent): relaxed only for the names an
        # MCP server of this agent may serve, the others must have a stand-in (issue 39)
        served = mcp_tools.mcp_names(missing, mcp_tools.uses_mcp(agent, module))
        problems = [
            f"{where}: {problem}; the agent was not called"
            for problem in mcp_tools.mock_problems(served)
        ]
        missing = [name for name in missing if name not in served]
        one = len(missing) == 1
        hints = [
            f"{where}: if {', '.join(missing)} {'is a tool' if one else 'are tools'} of an MCP "
            f"server, name {'it' if one else 'them'} `<server>.<tool>`: a bare name is taken for "
            "an MCP tool only when a stand-in server serves it or the agent's module uses an MCP "
            "client"
        ]
    if not missing:
        return problems
    if not known:
        return [
            *problems,
            f"{where} has tool_mocks for {', '.join(missing)} but no tool is patched, so the real "
            "tools would run; the agent was not called. Set `tool_dispatch: module:function` in "
            "the file (or ini agent_eval_tool_dispatch), or use the tool_mocks fixture (patch, "
            "patch_tool, wrap) in your `agent` fixture: tools must be patched or wrapped before "
            "the agent is called",
            *hints,
        ]
    return [
        *problems,
        *(
            f"{where}: tool_mocks has a response for {name!r} but the agent has no mocked tool of "
            f"that name{did_you_mean(name, known)}; mocked tools: {', '.join(known)}; the agent "
            "was not called (tools must be patched or wrapped before it is)"
            for name in missing
        ),
        *hints,
    ]


@model
class Recording:
    """The tool calls of one trial, in call order, answered from its plan."""

    plan: MockPlan
    patches: frozenset[str] | None = None
    """The ``module:attr`` patches of the trial's case.

    ``None``: every patch in force is the case's.
    """
    calls: list[ToolCall] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """Problems that fail the trial whatever the agent did with them.

    They are unmocked calls in strict mode.
    """
    unused: list[str] = field(default_factory=list)
    """The case's own mocks that no call used.

    A failure only when the agent answered (else it is noise).
    """
    _served: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def patched(self, target: str) -> bool:
        """Whether the case patched ``target``.

        A patch another case holds meanwhile does not answer it.
        """
        return self.patches is None or target in self.patches

    def handle(self, name: str, args: dict[str, Any], real: Callable[[], Any]) -> Any:
        """Answer a sync call and record it; ``real`` runs the real tool (passthrough)."""
        call = self._begin(name, args)
        try:
            response = self._resolve(call)
            call.mocked = response is not None
            if response is None:
                with passing_through():
                    result = real()
            else:
                from pytest_agent_eval.mocks.responses import produce

                result = produce(response, call.args)
        except Exception as exc:
            call.error, call.end_ns = describe(exc), time.time_ns()
            raise
        call.result, call.end_ns = result, time.time_ns()
        return result

    async def ahandle(
        self,
        name: str,
        args: dict[str, Any],
        real: Callable[[], Awaitable[Any]],
        server: str | None = None,
        standin: bool = False,
    ) -> Any:
        """Answer an async call and record it.

        ``real`` returns the real tool's awaitable (passthrough); ``server``: the MCP server of the
        tool (a mock named ``server.name`` answers before one named ``name``); ``standin``: the
        server is a stand-in, whose default response answers a call no mock answers.
        """
        call = self._begin(name, args, server)
        try:
            response = self._resolve(call, standin)
            call.mocked = response is not None
            if response is None:
                with passing_through():
                    result = await real()
            else:
                from pytest_agent_eval.mocks.responses import produce

                result = produce(response, call.args)
                if inspect.isawaitable(result):
                    result = await result
        except Exception as exc:
            call.error, call.end_ns = describe(exc), time.time_ns()
            raise
        call.result, call.end_ns = result, time.time_ns()
        return result

    def _begin(self, name: str, args: dict[str, Any], server: str | None = None) -> ToolCall:
        call = ToolCall(name, args, server=server, start_ns=time.time_ns())
        with self._lock:
            self.calls.append(call)
        return call

    def _resolve(self, call: ToolCall, standin: bool = False) -> Value | Raise | Call | None:
        """The response for this call; ``None`` runs the real tool.

        With ``standin``, ``None`` runs the stand-in server's default; an unmocked call in strict
        mode raises.
        """
        spec = self.plan.responses.get(f"{call.server}.{call.name}") if call.server else None
        if spec is None:
            spec = self.plan.responses.get(call.name)
        with self._lock:
            picked = self._pick(spec, call.args) if spec is not None else "no response"
        if not isinstance(picked, str):
            return picked
        if standin:
            return None
        if self.plan.unmocked == "default":
            from pytest_agent_eval.mocks.responses import Value

            return Value(f"Mock response for {call.name}")
        if self.plan.unmocked == "passthrough":
            return None
        named = f"{call.server}.{call.name}" if call.server else call.name
        why = (
            f"`tool_mocks` has no response for {named!r}{did_you_mean(named, self.plan.responses)}"
            if spec is None
            else picked
        )
        violation = (
            f"unmocked tool call {call.describe()} in case {self.plan.case_id} "
            f"({self.plan.location}): {why}; "
            f"add a response under `tool_mocks:` (in the case or the file's `defaults:`), or set "
            "`unmocked_tools: default` (canned answer) or `passthrough` (the real tool runs)"
        )
        self.violations.append(violation)
        raise UnmockedToolError(
            f"no mock response for tool {named!r} in this eval case ({why})", violation
        )

    def _pick(self, spec: Response, args: dict[str, Any]) -> Value | Raise | Call | str:
        """The leaf response for ``args``, or why there is none.

        Sequences advance (call under the lock).
        """
        from pytest_agent_eval.mocks.responses import Sequence, When
        from pytest_agent_eval.subset import mismatches

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
