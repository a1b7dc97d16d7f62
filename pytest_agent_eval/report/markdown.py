"""``--agent-eval-markdown PATH``: the run as GitHub markdown, appended when the session ends.

Appended in one write (for ``$GITHUB_STEP_SUMMARY``): the summary table, the failures with a
one-line reason and ``path:line``, and the regressions and fixes when ``--agent-eval-baseline`` is
given. A run that ended before every case finished (Ctrl-C, ``-x``) says so first, with the cases
that did not finish.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agent_eval.report.atomic import append_text, write_report
from pytest_agent_eval.report.baseline import Comparison, md_cell, md_code
from pytest_agent_eval.report.collector import Records
from pytest_agent_eval.report.markdown_text import (
    NOT_FINISHED_SHOWN,
    markdown_lines,
    reason,
    stopped_line,
)
from pytest_agent_eval.report.options import FLAKY
from pytest_agent_eval.report.summary import not_run_parts

__all__ = ["MarkdownReport", "markdown_lines", "reason", "stopped_line"]


class MarkdownReport:
    """A plugin object on the controller, registered when ``--agent-eval-markdown`` is given."""

    def __init__(self, config: pytest.Config, path: Path, collector: Records) -> None:
        self.config = config
        self.path = path
        self.collector = collector
        self.written = False

    def comparison(self) -> Comparison | None:
        baseline = self.config.pluginmanager.get_plugin("agent_eval_baseline")
        return None if baseline is None else baseline.compared()

    def write(self, how: str | None) -> None:
        """Append the run; ``how`` it ended before every case finished, ``None`` when it did not."""
        self.written = True
        records = self.collector.records
        not_run = self.collector.not_run()  # with the cases a worker's crash left as errors
        if not records and how is None and not not_run:
            return
        stopped = None
        if how is not None:
            finished = len(records) - (len(not_run) - len(self.collector.not_finished()))
            stopped = stopped_line(
                how, finished, [e["nodeid"] for e in not_run], self.collector.collected
            )
        elif not_run:  # the run went on after a worker died: its cases did not finish
            count, named = not_run_parts(
                not_run, self.collector.collected, NOT_FINISHED_SHOWN, md_code, md_cell
            )
            stopped = f"**Not run:** {count} did not finish: {named}"
        flaky = self.config.stash.get(FLAKY, None)
        text = "\n".join(markdown_lines(records, self.comparison(), stopped, flaky)) + "\n\n"
        write_report(
            self.config,
            "agent eval markdown summary",
            self.path,
            lambda: append_text(self.path, text),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        how = None
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            how = "was interrupted"
        elif exitstatus == pytest.ExitCode.INTERNAL_ERROR:
            how = "ended with an internal error"
        elif session.shouldfail or session.shouldstop:
            how = f"stopped early ({session.shouldfail or session.shouldstop})"
        self.write(how)

    def pytest_unconfigure(self) -> None:
        if not self.written:  # the session ended before pytest_sessionfinish
            self.write("was interrupted")
