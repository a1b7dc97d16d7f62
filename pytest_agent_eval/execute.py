"""Running one eval item: its agent and fixtures, its case on the runner, and the verdict as pytest reports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval.prepare import prepare_item, user_error
from pytest_agent_eval.report.attach import note_result
from pytest_agent_eval.report.failure import details
from pytest_agent_eval.report.render import printable
from pytest_agent_eval.runner import CaseResult, blocked_result
from pytest_agent_eval.secrets import scrub_text
from pytest_agent_eval.skipping import skip_at_item
from pytest_agent_eval.state import get_state

if TYPE_CHECKING:
    from pytest_agent_eval.collect import EvalItem
    from pytest_agent_eval.scheduler import Scheduler


def run_item(item: EvalItem, request: pytest.FixtureRequest) -> None:
    """Run the item's case (or wait for it, if it started early) and pass, skip or fail the item."""
    __tracebackhide__ = user_error
    state = get_state(item.config)
    scheduler = state.scheduler
    if scheduler is None:
        result = state.runner.run(prepare_item(item, request, None))
    else:
        result = _run_concurrently(item, request, scheduler)
    note_result(item, result)
    item.ihook.pytest_agent_eval_case_result(item=item, result=result)
    infra = next((t.run.infra_error for t in result.trials if t.run.infra_error), None)
    if infra is not None:
        where = f"{item.location[0]}:{item.case.line}"
        message = f"{where}: case {item.case.id}: infrastructure error, not the agent's: {infra}"
        raise InfrastructureError(printable(scrub_text(message)))
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
        future = scheduler.take(item) or scheduler.submit(item, prepare_item(item, request, scheduler))
        if not alone:
            scheduler.prefetch(item)
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
