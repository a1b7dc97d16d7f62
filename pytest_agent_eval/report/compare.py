"""``--agent-eval-baseline PATH``: this run against an earlier report, shown after the summary.

With ``--agent-eval-fail-on-regression`` or ``--agent-eval-gate regressions``, the comparison
decides the exit status; with ``--agent-eval-gate suite`` the suite-level test alone decides it
(SPEC §20).

A baseline that cannot be used (not JSON, another schema version, not a report) is one line in the
summary; the run runs and reports as without a baseline, its exit status its own. A baseline that
shares no case with the run is "not compared" and fails a gate: every case new or missing must not
pass as "0 regressions".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.report.baseline import BaselineError, Comparison, compare, load_records
from pytest_agent_eval.report.collector import DECIDED, Records
from pytest_agent_eval.report.record import CaseRecord


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
        load: Callable[[], list[CaseRecord]] | None = None,
    ) -> None:
        self.baseline: list[CaseRecord] | None = None
        self.error: str | None = None
        try:
            self.baseline = load() if load is not None else load_records(path)
        except BaselineError as exc:
            self.error = str(exc)
        self.path = path
        self.collector = collector
        self.tolerance = tolerance
        self.significance = significance
        self.fail_on_regression = fail_on_regression or gate == "regressions"
        self.gate = gate
        self.comparison: Comparison | None = None

    def compared(self) -> Comparison | None:
        """The comparison with the records so far, made once, at the end of the session.

        ``None`` when the baseline could not be read.
        """
        if self.comparison is None and self.baseline is not None:
            self.comparison = compare(
                self.baseline, self.collector.records, self.tolerance, self.significance
            )
        return self.comparison

    def to_dict(self) -> dict[str, Any]:
        """What the JSON report keeps of the comparison.

        The baseline's path and the comparison, or why the baseline was not used.
        """
        if self.error is not None:
            return {"path": str(self.path), "error": self.error}
        comparison = self.compared()
        return {"path": str(self.path), **(comparison.to_dict() if comparison is not None else {})}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        comparison = self.compared()
        if exitstatus not in DECIDED or not self.collector.records or comparison is None:
            return
        if self.gate == "regressions":
            session.exitstatus = (
                pytest.ExitCode.TESTS_FAILED if comparison.failed else pytest.ExitCode.OK
            )
        elif self.gate == "suite":
            session.exitstatus = (
                pytest.ExitCode.TESTS_FAILED if comparison.suite_dropped() else pytest.ExitCode.OK
            )
        elif self.fail_on_regression and comparison.failed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.error is not None:
            gate = "; the regression gate is not applied" if self.fail_on_regression else ""
            terminalreporter.write_line(
                f"agent eval baseline not used: {self.error}{gate}", red=True
            )
            return
        comparison = self.compared()
        if not self.collector.records or comparison is None:
            return
        lines = comparison.lines()
        if terminalreporter.config.get_verbosity() <= -2:
            terminalreporter.write_line(lines[0])
            return
        terminalreporter.write_sep("-", f"baseline {self.path}")
        for line in lines:
            terminalreporter.write_line(line)
        if self.gate == "suite":
            if comparison.not_compared is not None:
                terminalreporter.write_line(
                    "the run fails: the baseline was not compared with it", red=True
                )
            elif comparison.suite is None:
                terminalreporter.write_line(
                    "the run fails: no case was decided in both runs", red=True
                )
            elif comparison.suite_dropped():
                why = f"the suite's pass rate dropped (McNemar p < {comparison.significance:g})"
                terminalreporter.write_line(f"the run fails: {why}", red=True)
        elif comparison.not_compared is not None and self.fail_on_regression:
            terminalreporter.write_line(
                "the run fails: the baseline was not compared with it", red=True
            )
        elif comparison.regressions and self.fail_on_regression:
            terminalreporter.write_line("the run fails: regressions against the baseline", red=True)
