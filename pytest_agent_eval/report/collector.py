"""The records of a run, gathered on the xdist controller (or the only process) from the test reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import gc_policy
from pytest_agent_eval.compat import is_worker_crash

if TYPE_CHECKING:
    from pytest_agent_eval.report.record import CaseRecord

COLLECTOR = pytest.StashKey["Records"]()

ATTRIBUTE = "agent_eval"
"""The test report attribute that carries the record (a dict) from the worker to the controller."""
CASSETTE = "agent_eval_cassette"
"""The test report attribute that carries a cassette recorded on a worker to the controller (``plugin.cassettes``)."""

DECIDED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
"""Exit statuses a report's verdict (a threshold, the baseline gate) may change; an interrupt, internal or usage
error is left as it is."""


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker (its reports go to the controller, which reports)."""
    return hasattr(config, "workerinput")


class Records:
    """A plugin object, registered on the controller only: one record per eval item, by node id.

    Fed by ``pytest_runtest_logreport`` with the reports the workers sent (or this process made), so every
    format built from it is the same with and without ``-n``.
    """

    def __init__(self, is_eval_file: Callable[[str], bool] = lambda file: False) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        """The records as the reports carry them (plain data): made into ``CaseRecord`` s when first read, so a long
        run keeps one copy of each, not two, for the cyclic GC to go over."""
        self._built: list[CaseRecord] | None = None
        self._started: dict[str, tuple[str, int | None]] = {}
        self._collected: list[str] = []
        self.is_eval_file = is_eval_file
        """Whether a file (relative to the rootdir) holds eval items: tells a crashed worker's eval item."""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._note_collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        if not self._collected:  # every worker collects the same items (xdist checks it)
            self._note_collected(ids)

    def _note_collected(self, nodeids: list[str]) -> None:
        files = {nodeid.split("::")[0] for nodeid in nodeids}
        evals = {file for file in files if self.is_eval_file(file)}
        self._collected = [nodeid for nodeid in nodeids if nodeid.split("::")[0] in evals]

    def not_finished(self) -> list[str]:
        """The eval items collected that have no record (an interrupted run's cases that did not run or finish)."""
        return [nodeid for nodeid in self._collected if nodeid not in self._records]

    @property
    def collected(self) -> int:
        """How many eval items were collected (0 when not known)."""
        return len(self._collected)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._started[nodeid] = location[:2]  # what is known of an item whose worker may crash running it

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, ATTRIBUTE, None)
        if isinstance(data, dict):
            self._keep(report.nodeid, data)
        elif is_worker_crash(report) and report.nodeid not in self._records:
            self._crashed(report)
        elif report.when == "teardown" and report.failed and report.nodeid in self._records:
            self._keep(report.nodeid, {**self._records[report.nodeid], "outcome": "error"})  # as pytest counts it

    def _keep(self, nodeid: str, data: dict[str, Any]) -> None:
        self._records[nodeid] = data
        self._built = None

    def _crashed(self, report: pytest.TestReport) -> None:
        """The record of an eval item whose xdist worker died running it: an error, with where it is and why."""
        from pytest_agent_eval.report.record import CaseRecord, crash_message

        file, line = self._started.get(report.nodeid, (report.nodeid.split("::")[0], None))
        if not self.is_eval_file(file):
            return
        case_id = report.nodeid.rpartition("::")[2]
        record = CaseRecord(report.nodeid, case_id, file, (line or 0) + 1, "error", error=crash_message(report))
        self._keep(report.nodeid, record.to_dict())

    @property
    def record_data(self) -> list[dict[str, Any]]:
        """Every record so far as plain data (``CaseRecord.to_dict``), by node id."""
        return [self._records[k] for k in sorted(self._records)]

    @property
    def records(self) -> list[CaseRecord]:
        """Every record so far, by node id (the order does not depend on which worker finished first)."""
        if not self._records:
            return []
        if self._built is None:
            from pytest_agent_eval.report.record import CaseRecord

            with gc_policy.paused():  # objects kept to the end: the collector would go over them for nothing
                self._built = [CaseRecord.from_dict(self._records[k]) for k in sorted(self._records)]
        return self._built


def records(config: pytest.Config) -> Records | None:
    """The run's records (``None`` on an xdist worker)."""
    return config.stash.get(COLLECTOR, None)
