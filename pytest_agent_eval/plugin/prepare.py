"""Preparing a case's run: its agent and its tool mocks.

For its item's own run and for an early start.

One place for both: the item's run (``execute``) takes what it needs from the item's fixtures and
fails the item with what to do; an early start (the scheduler's, at concurrency > 1) takes only what
needs no fixture of the item and leaves the case to its item's turn when anything is missing.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.adapters import Agent
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import CaseResult
from pytest_agent_eval.core.tool_errors import MockConfigError
from pytest_agent_eval.imports import ImportRefError
from pytest_agent_eval.mocks.recording import MockPlan
from pytest_agent_eval.plugin.options import Settings
from pytest_agent_eval.plugin.state import EvalSession, get_state
from pytest_agent_eval.run.agents import resolve
from pytest_agent_eval.run.runner import case_run
from pytest_agent_eval.run.settings import RecorderFactory

if TYPE_CHECKING:
    from pytest_agent_eval.llm import LLM
    from pytest_agent_eval.mocks.fixture import ToolMocks
    from pytest_agent_eval.mocks.responses import Response
    from pytest_agent_eval.plugin.scheduler import Scheduler

_PLUMBING = ("_pytest.", "pluggy.", "pytest_agent_eval.")
"""Modules whose frames a user's fixture error is shown without."""
_RESPONSES = pytest.StashKey["Mapping[str, Response] | MockConfigError"]()


# -- what both runs share
# ----------------------------------------------------------------------------------


def agent_ref(case: Case, settings: Settings) -> str | dict[str, Any] | None:
    """The case's ``module:attr`` agent: ``--agent``, else the file's ``agent:``."""
    return settings.agent or case.agent


def tool_recorder(
    case: Case,
    settings: Settings,
    responses: Mapping[str, Response],
    mocks: Callable[[], ToolMocks] | None,
    *,
    others: bool = True,
    agent: Agent | None = None,
) -> RecorderFactory:
    """Patch the case's dispatcher and compile its mocks.

    The runner records each trial with the result.

    ``mocks``: the ``ToolMocks`` to patch with and record on (``None``: nothing to patch, the plan
    records itself); ``others``: count dispatchers patched by the running test's fixtures;
    ``agent``: the case's agent (whether it uses MCP). Raises :class:`MockConfigError` with the
    file, line and what to do when the mocks cannot be used.
    """
    dispatch = case.tool_dispatch or settings.tool_dispatch
    plan = MockPlan.for_case(case, responses, settings.unmocked_tools)
    ref = agent_ref(case, settings)
    module = ref.partition(":")[0] if isinstance(ref, str) else None
    source = agent.source if agent is not None else None
    if mocks is None:
        # e.g. tools wrapped where the agent's module builds them
        plan.require_patched(others=others, agent=source, module=module)
        return plan.recorder
    patcher = mocks()
    if dispatch:
        source = (
            "the file's `tool_dispatch:`" if case.tool_dispatch else "ini agent_eval_tool_dispatch"
        )
        try:
            patcher.patch(dispatch)
        except MockConfigError as exc:
            raise MockConfigError(f"{case.location}: {source} {dispatch!r}: {exc}") from None
    plan.require_patched(dispatched=bool(dispatch), others=others, agent=source, module=module)
    return patcher.recorder(plan, dispatch)


def with_mocked_tools(agent: Agent, case: Case, state: EvalSession) -> Agent:
    """The agent with its own tools replaced by stand-ins, for a case with ``tool_mocks``.

    The stand-ins are its adapter's ``mock_tools``, made once per agent object while it lives. Else,
    or when the adapter cannot reach its tools, ``agent``.
    """
    if not case.tool_mocks or agent.source is None:
        return agent
    made: dict[int, tuple[weakref.ref[Any], Agent]] = state.agent_instances.setdefault(
        "mocked agents", {}
    )
    key = id(agent.source)
    entry = made.get(key)
    if entry is not None and entry[0]() is agent.source:
        return entry[1]
    from pytest_agent_eval.mocks.standins import wrap

    copy = agent.adapter.mock_tools(agent.source, lambda tool: wrap(tool, state.adapters))
    mocked = agent if copy is None else agent.adapter.agent(copy, agent.name)

    def forget(
        ref: weakref.ref[Any],
    ) -> None:  # the agent object is gone: so is its copy, and the stand-ins in it
        entry = made.get(key)
        if entry is not None and entry[0] is ref:
            made.pop(key, None)

    # kept while the agent object lives (a function-scoped fixture's goes with its test) and the
    # session lasts;
    # an object without weak references gets its copy made again for each case
    with contextlib.suppress(TypeError):
        made[key] = (weakref.ref(agent.source, forget), mocked)
    return mocked


def session_responses(config: pytest.Config) -> Mapping[str, Response]:
    """The ini ``agent_eval_tool_responses`` file, read once per session.

    A bad file fails every case.
    """
    if _RESPONSES not in config.stash:
        path = get_state(config).settings.tool_responses
        try:
            if path:
                from pytest_agent_eval.mocks.responses import load_responses

                config.stash[_RESPONSES] = load_responses(path)
            else:
                config.stash[_RESPONSES] = {}
        except MockConfigError as exc:
            config.stash[_RESPONSES] = exc
    found = config.stash[_RESPONSES]
    if isinstance(found, MockConfigError):
        raise found
    return found


def _agent_fixture(item: pytest.Item) -> Any:
    """The ``agent`` fixture definition that applies to ``item``, if any."""
    return compat.fixture_definition(item, "agent")


# -- the item's own run
# ------------------------------------------------------------------------------------


class CaseCannotRun(Exception):
    """The case cannot run: the message the item fails with.

    Its agent cannot be had, or its tool mocks do not fit.
    """


def prepare_item(
    item: pytest.Item, case: Case, request: pytest.FixtureRequest, scheduler: Scheduler | None
) -> Coroutine[Any, Any, CaseResult]:
    """The case's run, with its agent, LLM and tool mocks from the item's fixtures.

    ``CaseCannotRun`` when one of them cannot be had.
    """
    __tracebackhide__ = user_error
    state = get_state(item.config)
    agent = item_agent(item, case, request)
    mocked = with_mocked_tools(
        agent, case, state
    )  # before the check that every mocked tool is patched
    llm = None
    if state.checks.case_uses_llm(case):
        llm = _fixture(request, "agent_eval_llm")
        if scheduler is not None:
            scheduler.llm = llm
    # after the agent and its fixtures: a mocked tool that nothing has patched by now fails the case
    # here
    try:
        recorder: RecorderFactory | MockConfigError = item_recorder(request, case, agent)
    except MockConfigError as exc:
        recorder = exc
    if isinstance(
        recorder, MockConfigError
    ):  # failed outside `except`: no "During handling..." in the report
        raise CaseCannotRun(str(recorder))
    if scheduler is not None and not agent_ref(case, state.settings):
        scheduler.early.remember_agent(item, agent)
    settings = state.run_settings(case, llm, recorder)
    user = case.simulated_user
    if user is not None and user.uses_neo4j:
        settings.neo4j = request.getfixturevalue("agent_eval_neo4j")
    return case_run(case, mocked, settings)


def item_agent(item: pytest.Item, case: Case, request: pytest.FixtureRequest) -> Agent:
    """The agent: ``--agent``, else the case's, else the ``agent`` fixture.

    The case's is its own ``agent:``, its matrix agent, the file's ``agent:``.

    Each failure (``CaseCannotRun``) is raised outside the ``except`` that caught its cause: one
    message, no exception chain.
    """
    __tracebackhide__ = user_error
    state = get_state(item.config)
    ref = agent_ref(case, state.settings)
    problem: str
    if ref:
        try:
            return resolve(ref, state.agent_instances, state.adapters)
        except (ImportRefError, TypeError) as exc:
            if state.settings.agent:
                source = "--agent"
            elif case.agent_line is None:  # a variant of --agent-eval-agent
                source = f"{case.location}: --agent-eval-agent {case.agent_name}"
            else:
                source = f"{case.path}:{case.agent_line}"
            named = (
                f" ({case.agent_name})" if case.agent_name and case.agent_line is not None else ""
            )
            # never a header: it may hold a secret; a promptfoo provider by its id
            shown = (
                ref
                if isinstance(ref, str)
                else ref.get("url") or ref.get("promptfoo_provider", {}).get("id")
            )
            problem = f"{source}: agent{named} {shown!r}: {exc}"
        raise CaseCannotRun(problem)
    try:
        value = _fixture(request, "agent")
    except pytest.FixtureLookupError as exc:
        if (
            exc.argname != "agent"
        ):  # the `agent` fixture exists but needs a missing one: pytest says which
            raise
        problem = (
            f"{case.location}: no agent for case {case.id}: set `agent: module:function` in the "
            "file, pass --agent module:function, or define an `agent` fixture in conftest.py"
        )
    else:
        try:
            return state.adapters.as_agent(value, "agent fixture")
        except TypeError as exc:
            problem = f"{case.location}: the `agent` fixture: {exc}"
    raise CaseCannotRun(problem)


def item_recorder(
    request: pytest.FixtureRequest, case: Case, agent: Agent | None = None
) -> RecorderFactory:
    """The case's tool mocks on the item's ``tool_mocks`` fixture (undone when the test ends).

    Call it after the agent (``agent``) and its fixtures are set up: it checks that every mocked
    tool is patched by then.
    """
    settings = get_state(request.config).settings
    needed = (
        bool(case.tool_dispatch or settings.tool_dispatch) or "tool_mocks" in request.fixturenames
    )

    def fixture() -> ToolMocks:
        mocks: ToolMocks = request.getfixturevalue("tool_mocks")
        return mocks

    # without a dispatcher to patch nor a fixture to report calls to, no fixture lookup to pay
    return tool_recorder(
        case, settings, session_responses(request.config), fixture if needed else None, agent=agent
    )


def _plumbing(tb: TracebackType) -> bool:
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_PLUMBING)


def _from_user_code(exc: Exception) -> Exception:
    """``exc`` with its traceback from its first frame outside pytest, pluggy and the plugin."""
    tb = exc.__traceback__
    while tb is not None and _plumbing(tb):
        tb = tb.tb_next
    return exc.with_traceback(tb) if tb is not None else exc


def user_error(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """For ``__tracebackhide__``: whether the plugin's frames are left out of an error.

    They are left out of an error raised in the user's code (a fixture), kept for one raised in the
    plugin itself.
    """
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    return not _plumbing(tb)


def _fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """The fixture's value.

    An error it raises is shown from the fixture's own frames, not pytest's calls.
    """
    __tracebackhide__ = user_error
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        raise
    except Exception as exc:
        raise _from_user_code(exc)  # noqa: B904 - the same exception, from its own frames


# -- an early start
# ----------------------------------------------------------------------------------------


class EarlyStart:
    """A case's run before its item's turn (the scheduler's), from what needs no item fixture.

    That is a ``module:attr`` agent or a session-scoped ``agent`` fixture an earlier item built, and
    mocks patched for the session. Anything missing or wrong is left to the item, which reports it
    when its turn comes.
    """

    def __init__(self, state: EvalSession) -> None:
        self._state = state
        self._fixture_agents: dict[int, Agent] = {}
        """Agents from session-scoped ``agent`` fixtures, by fixture definition."""
        self._mocks: ToolMocks | None = None
        """Holds declarative dispatch patches for cases started early until the session ends."""

    def run(
        self, item: pytest.Item, case: Case, llm: LLM | None
    ) -> Coroutine[Any, Any, CaseResult] | None:
        """The case's run, or ``None`` when it needs its item's own setup."""
        agent = self._agent(item, case)
        if agent is not None:
            agent = with_mocked_tools(agent, case, self._state)
        recorder = self._recorder(case, agent)
        if agent is None or recorder is None:
            return None
        return case_run(case, agent, self._state.run_settings(case, llm, recorder))

    def _agent(self, item: pytest.Item, case: Case) -> Agent | None:
        ref = agent_ref(case, self._state.settings)
        if ref:
            try:
                return resolve(ref, self._state.agent_instances, self._state.adapters)
            except Exception:
                return None
        definition = _agent_fixture(item)
        return self._fixture_agents.get(id(definition)) if definition is not None else None

    def _recorder(self, case: Case, agent: Agent | None) -> RecorderFactory | None:
        settings = self._state.settings
        # nothing to patch: the held mocks would record as the plan itself does
        held = self._held if case.tool_dispatch or settings.tool_dispatch else None
        try:
            responses = session_responses(self._state.config)
            return tool_recorder(case, settings, responses, held, others=False, agent=agent)
        except MockConfigError:  # others: the running item's patches
            return None  # the item reports it when its turn comes

    def _held(self) -> ToolMocks:
        if self._mocks is None:
            from pytest_agent_eval.mocks.fixture import ToolMocks

            self._mocks = ToolMocks(held=True, adapters=self._state.adapters)
        return self._mocks

    def remember_agent(self, item: pytest.Item, agent: Agent) -> None:
        """Keep an agent built by a session-scoped ``agent`` fixture.

        For later cases that use the same one.
        """
        definition = _agent_fixture(item)
        if definition is not None and definition.scope == "session":
            self._fixture_agents[id(definition)] = agent

    def close(self) -> None:
        """Undo the patches held for the session."""
        if self._mocks is not None:
            self._mocks.undo()


def register_scheduler(config: pytest.Config) -> None:
    """At concurrency > 1, register the scheduler as a plugin object (``agent_eval_scheduler``).

    It is handed its collaborators. At concurrency 1 nothing of it is made, imported or called.
    """
    from pytest_agent_eval.plugin.scheduler import Scheduler

    state = get_state(config)
    inflight = state.inflight
    scheduler = Scheduler(
        concurrency=state.settings.concurrency,
        early=EarlyStart(state),
        start=state.start,
        suspects=state.suspects,
        note=None if inflight is None else inflight.around,
        blocked=state.loops.blocked,
        uses_llm=lambda case: state.checks.case_uses_llm(
            case
        ),  # the checks load with the first case
    )
    state.scheduler = scheduler
    state.loops.on_leave = (
        scheduler.forget
    )  # the cases it started early were on the loop left behind
    config.pluginmanager.register(scheduler, "agent_eval_scheduler")
