"""Suite thresholds (SPEC §10): a run whose pass rate, cost or p95 latency misses one fails.

Each missed threshold is one line.

A threshold that cannot be told (no cost reported, no latency measured) is not checked and says so:
it never fails or passes a run on a made-up figure. A cost that leaves out cases whose models have
no price is a lower bound: over the limit it fails the run; within it, the limit is not checked, and
the line names those models.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from pytest_agent_eval.report.collector import DECIDED, Records
from pytest_agent_eval.report.limits import Thresholds

__all__ = ["SuiteThresholds", "Thresholds"]


class SuiteThresholds:
    """Fails a finished run that misses a threshold.

    It lists what the run missed in the terminal summary.
    """

    def __init__(self, thresholds: Thresholds, collector: Records) -> None:
        self.thresholds = thresholds
        self.collector = collector
        self.missed: list[str] = []
        self.unknown: list[str] = []

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None]:
        """Fail the run on a missed threshold, after every other ``pytest_sessionfinish``.

        After the baseline gate's too, which may set the status to 0: a missed threshold fails the
        run under every gate. The innermost wrapper: done before the terminal summary.
        """
        yield
        if exitstatus not in DECIDED or not self.collector.records:
            return
        from pytest_agent_eval.report.stats import Stats

        self.missed, self.unknown = self.thresholds.check(Stats.of(self.collector.records))
        if self.missed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in self.missed:
            terminalreporter.write_line(f"agent eval threshold missed: {line}", red=True, bold=True)
        for line in self.unknown:
            terminalreporter.write_line(f"agent eval threshold not checked: {line}", yellow=True)
