"""The records of a run, gathered on the xdist controller (or the only process) from the test reports."""

from __future__ import annotations

import pytest

from pytest_agent_eval.report.record import ATTRIBUTE, CaseRecord

COLLECTOR = pytest.StashKey["Records"]()

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

    def __init__(self) -> None:
        self._records: dict[str, CaseRecord] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, ATTRIBUTE, None)
        if isinstance(data, dict):
            self._records[report.nodeid] = CaseRecord.from_dict(data)
        elif report.when == "teardown" and report.failed and report.nodeid in self._records:
            self._records[report.nodeid].outcome = "error"  # pytest counts a failed teardown as an error

    @property
    def records(self) -> list[CaseRecord]:
        """Every record so far, by node id (the order does not depend on which worker finished first)."""
        return [self._records[k] for k in sorted(self._records)]


def records(config: pytest.Config) -> Records | None:
    """The run's records (``None`` on an xdist worker)."""
    return config.stash.get(COLLECTOR, None)
