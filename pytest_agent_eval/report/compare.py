"""``--agent-eval-baseline PATH``: this run against an earlier report, shown after the summary and, with
``--agent-eval-fail-on-regression`` or ``--agent-eval-gate regressions``, deciding the exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agent_eval.report.baseline import BaselineError, Comparison, compare, load_records
from pytest_agent_eval.report.collector import Records
from pytest_agent_eval.report.record import CaseRecord

_DECIDED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
"""Exit statuses a regression verdict may change; an interrupt, internal or usage error is left as it is."""


class BaselineCompare:
    """A plugin object on the controller, registered when ``--agent-eval-baseline`` is given."""

    def __init__(
        self,
        path: Path,
        collector: Records,
        tolerance: float,
        significance: float,
        fail_on_regression: bool,
        gate: str | None,
    ) -> None:
        try:
            self.baseline: list[CaseRecord] = load_records(path)
        except BaselineError as exc:
            raise pytest.UsageError(f"--agent-eval-baseline {exc}") from None
        self.path = path
        self.collector = collector
        self.tolerance = tolerance
        self.significance = significance
        self.fail_on_regression = fail_on_regression or gate == "regressions"
        self.gate = gate
        self.comparison: Comparison | None = None

    def compared(self) -> Comparison:
        """The comparison with the records so far (made once, at the end of the session)."""
        if self.comparison is None:
            self.comparison = compare(self.baseline, self.collector.records, self.tolerance, self.significance)
        return self.comparison

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus not in _DECIDED or not self.collector.records:
            return
        regressed = bool(self.compared().regressions)
        if self.gate == "regressions":
            session.exitstatus = pytest.ExitCode.TESTS_FAILED if regressed else pytest.ExitCode.OK
        elif self.fail_on_regression and regressed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.collector.records:
            return
        lines = self.compared().lines()
        if terminalreporter.config.get_verbosity() <= -2:
            terminalreporter.write_line(lines[0])
            return
        terminalreporter.write_sep("-", f"baseline {self.path}")
        for line in lines:
            terminalreporter.write_line(line)
        if self.compared().regressions and self.fail_on_regression:
            terminalreporter.write_line("the run fails: regressions against the baseline", red=True)
