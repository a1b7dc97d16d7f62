"""Running one eval item: its agent and fixtures, its case on the runner, and the verdict.

The verdict is reported as pytest reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval.core.results import CaseResult
from pytest_agent_eval.plugin.cache import lookup
from pytest_agent_eval.plugin.prepare import CaseCannotRun, prepare_item, user_error
from pytest_agent_eval.plugin.skipping import fail_item, skip_at_item
from pytest_agent_eval.plugin.state import get_state
from pytest_agent_eval.report.attach import note_cached, note_result
from pytest_agent_eval.report.failure import details
from pytest_agent_eval.secrets import scrub_text
from pytest_agent_eval.text import printable

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.plugin.scheduler import Scheduler


def run_item(item: pytest.Item, case: Case, request: pytest.FixtureRequest) -> None:
    """Run the item's case (or wait for it, if it started early) and pass, skip or fail the item.

    A case that cannot run (``prepare.CaseCannotRun``) fails it with the reason.
    """
    __tracebackhide__ = user_error
    cached = lookup(item, case)
    if cached is not None:  # the verdict cache's record: the case is not run again
        record = note_cached(item, cached)
        if record.outcome == "failed":
            from pytest_agent_eval.report.markdown_text import reason as failure_reason

            fail_item(
                item,
                f"case {case.id} failed (from the verdict cache, not run again): "
                f"{failure_reason(record)}",
            )
        return
    state = get_state(item.config)
    scheduler = state.scheduler
    try:
        if scheduler is None:
            result = state.loops.runner.run(prepare_item(item, case, request, None))
        else:
            result = _run_concurrently(item, case, request, scheduler)
    except CaseCannotRun as exc:
        fail_item(item, str(exc))
    note_result(item, result)
    item.ihook.pytest_agent_eval_case_result(item=item, result=result)
    infra = next((t.run.infra_error for t in result.trials if t.run.infra_error), None)
    if infra is not None:
        where = f"{item.location[0]}:{case.line}"
        message = f"{where}: case {case.id}: infrastructure error, not the agent's: {infra}"
        raise InfrastructureError(printable(scrub_text(message)))
    if result.passed and result.unscored:  # a pass with nothing scored would be a made-up verdict
        names = ", ".join(dict.fromkeys(c.name for c in result.unscored))
        reason = f"nothing scored ({names}): {result.unscored[0].message}"
        skip_at_item(item, reason)  # reported at the case's line
    if not result.passed:
        verbose = item.config.get_verbosity()
        if verbose > 0:  # shown under the failure, as pytest shows captured output
            for title, text in details(result):
                item.add_report_section(
                    "call", title, printable(text)
                )  # no control character reaches the terminal
        lines = item.ihook.pytest_agent_eval_failure_lines(
            item=item, result=result, verbose=verbose
        )
        fail_item(item, "\n".join(lines or [f"case {case.id} failed"]))


def _run_concurrently(
    item: pytest.Item, case: Case, request: pytest.FixtureRequest, scheduler: Scheduler
) -> CaseResult:
    """The case on the background loop.

    When an agent blocks that loop past this case's timeout, the culprit fails, the loop is left
    behind, and this case (if it is not the culprit) runs once more on a fresh loop.
    """
    loops = get_state(item.config).loops
    for attempt in range(2):
        blocked = loops.blocked.get(id(case))
        if blocked is not None:
            return blocked
        # started early, or now from this item's own fixtures; then the next cases start while this
        # one runs
        alone = scheduler.alone(item)
        future = scheduler.take(item) or scheduler.submit(
            item, prepare_item(item, case, request, scheduler)
        )
        if not alone:
            scheduler.prefetch(item)
        result = loops.wait(future, case, retried=attempt > 0)
        if result is not None:
            return result
    raise AssertionError("unreachable")


class InfrastructureError(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The case's LLM requests failed on infrastructure: its report reads as ERROR, not FAILED.

    Failed on infrastructure: refused, 429/5xx after retries, a replay miss. The status comes from
    ``plugin.pytest_report_teststatus``; the request is named.
    """

    __module__ = (
        "builtins"  # read as "InfrastructureError: ...", as pytest's own Failed reads "Failed: ..."
    )

    def __init__(self, message: str) -> None:
        super().__init__(message, pytrace=False)
