"""Running one eval item: its agent and fixtures, its case on the runner, and the verdict as pytest reports it."""

from __future__ import annotations

from collections.abc import Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.agents import Agent, as_agent, resolve
from pytest_agent_eval.case_mocks import case_recorder
from pytest_agent_eval.imports import ImportRefError
from pytest_agent_eval.mocks import MockConfigError
from pytest_agent_eval.report.attach import note_result
from pytest_agent_eval.report.failure import details, printable
from pytest_agent_eval.runner import CaseResult, RecorderFactory, blocked_result, run_case
from pytest_agent_eval.skipping import skip_at_item
from pytest_agent_eval.state import get_state

if TYPE_CHECKING:
    from pytest_agent_eval.collect import EvalItem
    from pytest_agent_eval.scheduler import Scheduler

_PLUMBING = ("_pytest.", "pluggy.", "pytest_agent_eval.")
"""Modules whose frames a user's fixture error is shown without."""


def run_item(item: EvalItem, request: pytest.FixtureRequest) -> None:
    """Run the item's case (or wait for it, if it started early) and pass, skip or fail the item."""
    __tracebackhide__ = user_error
    state = get_state(item.config)
    scheduler = state.scheduler(item.session)
    if scheduler is None:
        result = state.runner.run(_prepare(item, request))
    else:
        result = _run_concurrently(item, request, scheduler)
    note_result(item, result)
    item.ihook.pytest_agent_eval_case_result(item=item, result=result)
    infra = next((t.run.infra_error for t in result.trials if t.run.infra_error), None)
    if infra is not None:
        where = f"{item.location[0]}:{item.case.line}"
        raise InfrastructureError(f"{where}: case {item.case.id}: infrastructure error, not the agent's: {infra}")
    if result.passed and result.unscored:  # a pass with nothing scored would be a made-up verdict
        names = ", ".join(dict.fromkeys(c.name for c in result.unscored))
        reason = f"nothing scored ({names}): {result.unscored[0].message}"
        skip_at_item(item, reason)  # reported at the case's line
    if not result.passed:
        verbose = item.config.get_verbosity()
        if verbose > 0:  # shown under the failure, as pytest shows captured output
            for title, text in details(result):
                item.add_report_section("call", title, printable(text))  # no control character reaches the terminal
        lines = item.ihook.pytest_agent_eval_failure_lines(item=item, result=result, verbose=verbose)
        item.fail("\n".join(lines or [f"case {item.case.id} failed"]))


def _run_concurrently(item: EvalItem, request: pytest.FixtureRequest, scheduler: Scheduler) -> CaseResult:
    """The case on the background loop. When an agent blocks that loop past this case's timeout, the culprit
    fails, the loop is left behind, and this case (if it is not the culprit) runs once more on a fresh loop."""
    state = get_state(item.config)
    for attempt in range(2):
        blocked = state.blocked.get(id(item.case))
        if blocked is not None:
            return blocked
        # started early, or now from this item's own fixtures; then the next cases start while this one runs
        alone = scheduler.alone(item)
        future = scheduler.take(item) or scheduler.submit(item, _prepare(item, request))
        if not alone:
            scheduler.prefetch(item, state.run_settings)
        outcome = state.loop.wait_case(future, item.case, state.settings.timeout)
        if isinstance(outcome, CaseResult):
            return outcome
        state.leave_blocked_loop(outcome)
        if outcome.culprit is None or attempt:  # blocked by something else, or again: it cannot be told apart
            return blocked_result(item.case, outcome, item.case.timeout or state.settings.timeout)
    raise AssertionError("unreachable")


class InfrastructureError(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The case's LLM requests failed on infrastructure (refused, 429/5xx after retries, replay miss): its report
    reads as ERROR, not FAILED (``plugin.pytest_report_teststatus``), with the request named."""

    __module__ = "builtins"  # read as "InfrastructureError: ...", as pytest's own Failed reads "Failed: ..."

    def __init__(self, message: str) -> None:
        super().__init__(message, pytrace=False)


def _agent(item: EvalItem, request: pytest.FixtureRequest) -> Agent:
    """The agent: ``--agent``, else the file's ``agent:``, else the ``agent`` fixture.

    Each failure is raised outside the ``except`` that caught its cause: one message, no exception chain.
    """
    __tracebackhide__ = user_error
    state = get_state(item.config)
    case = item.case
    ref = state.settings.agent or case.agent
    problem: str
    if ref:
        try:
            return resolve(ref, state.agent_instances)
        except (ImportRefError, TypeError) as exc:
            source = "--agent" if state.settings.agent else f"{case.path}:{case.agent_line}"
            problem = f"{source}: agent {ref!r}: {exc}"
        item.fail(problem)
    try:
        value = _fixture(request, "agent")
    except pytest.FixtureLookupError as exc:
        if exc.argname != "agent":  # the `agent` fixture exists but needs a missing one: pytest says which
            raise
        problem = (
            f"{case.location}: no agent for case {case.id}: set `agent: module:function` in the "
            "file, pass --agent module:function, or define an `agent` fixture in conftest.py"
        )
    else:
        try:
            return as_agent(value, "agent fixture")
        except TypeError as exc:
            problem = f"{case.location}: the `agent` fixture: {exc}"
    item.fail(problem)


def _plumbing(tb: TracebackType) -> bool:
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_PLUMBING)


def _from_user_code(exc: Exception) -> Exception:
    """``exc`` with its traceback from the first frame that is neither pytest's, pluggy's nor the plugin's."""
    tb = exc.__traceback__
    while tb is not None and _plumbing(tb):
        tb = tb.tb_next
    return exc.with_traceback(tb) if tb is not None else exc


def user_error(excinfo: pytest.ExceptionInfo[BaseException]) -> bool:
    """For ``__tracebackhide__``: the plugin's frames are left out of an error raised in the user's code (a
    fixture), kept for one raised in the plugin itself."""
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    return not _plumbing(tb)


def _fixture(request: pytest.FixtureRequest, name: str) -> Any:
    """The fixture's value; an error it raises is shown from the fixture's own frames, not pytest's calls."""
    __tracebackhide__ = user_error
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        raise
    except Exception as exc:
        raise _from_user_code(exc)  # noqa: B904 - the same exception, from its own frames


def _prepare(item: EvalItem, request: pytest.FixtureRequest) -> Coroutine[Any, Any, CaseResult]:
    """The case's run, with its agent, LLM and tool mocks from the item's fixtures."""
    __tracebackhide__ = user_error
    state = get_state(item.config)
    scheduler = state.scheduler(item.session)
    agent = _agent(item, request)
    llm = None
    if state.checks.case_uses_llm(item.case):
        llm = _fixture(request, "agent_eval_llm")
        if scheduler is not None:
            scheduler.llm = llm
    try:  # after the agent and its fixtures: a mocked tool that nothing has patched by now fails the case here
        recorder: RecorderFactory | MockConfigError = case_recorder(request, item.case)
    except MockConfigError as exc:
        recorder = exc
    if isinstance(recorder, MockConfigError):  # failed outside `except`: no "During handling..." in the report
        item.fail(str(recorder))
    if scheduler is not None and not (state.settings.agent or item.case.agent):
        scheduler.remember_fixture_agent(item, agent)
    settings = state.run_settings(item.case, llm, recorder)
    user = item.case.simulated_user
    if user is not None and user.uses_neo4j:
        settings.neo4j = request.getfixturevalue("agent_eval_neo4j")
    return run_case(item.case, agent, settings)
