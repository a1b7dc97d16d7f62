"""``--agent-eval-report PATH``: the run's metadata and every record as JSON.

Written atomically when the session ends, also when it is interrupted (then with what finished).
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.report.atomic import write_report, write_text_atomically
from pytest_agent_eval.report.collector import Records, how_it_ended
from pytest_agent_eval.report.options import FLAKY
from pytest_agent_eval.report.run_info import git_commit, run_end, run_start
from pytest_agent_eval.report.run_info import redacted as redacted
from pytest_agent_eval.report.schema import SCHEMA_VERSION, report_text
from pytest_agent_eval.report.stats import agent_figures


def write_atomically(path: Path, document: dict[str, Any]) -> None:
    """Write the report to a temporary file beside ``path``, then rename it over ``path``."""
    write_text_atomically(path, report_text(document))


class JsonReport:
    """A plugin object on the controller, registered when ``--agent-eval-report`` is given."""

    def __init__(self, config: pytest.Config, path: Path, collector: Records) -> None:
        self.config = config
        self.path = path
        self.collector = collector
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.start = time.perf_counter()
        self.written = False

    def document(self, exit_status: int | None, stopped: bool = False) -> dict[str, Any]:
        """The report: run metadata and one record per finished item.

        ``stopped`` when the run stopped early.
        """
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "run": self.run_data(exit_status, stopped),
        }
        agents = agent_figures(self.collector.records)
        if agents:  # a matrix: its agents side by side
            document["agents"] = agents
        compared = self.config.pluginmanager.get_plugin("agent_eval_baseline")
        if (
            compared is not None
        ):  # the run's one comparison, as the terminal and every report show it
            document["baseline"] = compared.to_dict()
        flaky = self.config.stash.get(FLAKY, None)
        if flaky:  # the run store's flaky cases (SPEC §24)
            document["flaky"] = flaky
        from pytest_agent_eval.report.trust import figures  # injection variants, judges (SPEC §26)

        document.update(figures(self.collector.records))
        document["cases"] = self.collector.record_data  # as the reports carried them: no round trip
        # the cases a dead worker, an interrupt or a stop left without a final record (what a
        # resumed run runs)
        document["not_run"] = self.collector.not_run(how_it_ended(exit_status, stopped))
        return document

    def run_data(self, exit_status: int | None, stopped: bool = False) -> dict[str, Any]:
        """The report's ``run``: when and how it ran, and how it ended."""
        start = run_start(self.config, self.started, git_commit(self.config.rootpath))
        return run_end(start, round(time.perf_counter() - self.start, 3), exit_status, stopped)

    def write(self, exit_status: int | None, stopped: bool = False) -> None:
        self.written = True
        document = self.document(exit_status, stopped)
        write_report(
            self.config,
            "agent eval report",
            self.path,
            lambda: write_atomically(self.path, document),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write(exitstatus, stopped=bool(session.shouldfail or session.shouldstop))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_sep("-", f"agent eval report: {self.path}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if (
            not self.written
        ):  # the session ended before pytest_sessionfinish (a usage error, a crash)
            self.write(None)
