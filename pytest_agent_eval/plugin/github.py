"""The run in a GitHub pull request (SPEC §25): error annotations and the step summary.

Under GitHub Actions (``GITHUB_ACTIONS=true``) or with ``--agent-eval-github``, an ``::error``
annotation per failed or errored case at its file and line, and the markdown summary appended to
``$GITHUB_STEP_SUMMARY``.

On the xdist controller (or the only process) only: the annotations are made from the run's records,
one per case, so a case is annotated once however many workers ran. The engine (``report.github``)
loads at the end of a run that has records.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.report.collector import Records


class GitHubRun:
    """A plugin object on the controller: the annotations at the end of the terminal output."""

    def __init__(self, config: pytest.Config, records: Records) -> None:
        self.config = config
        self.records = records

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        records = self.records.records
        if not records:
            return
        from pytest_agent_eval.report.github import error_commands

        workspace = os.environ.get("GITHUB_WORKSPACE") or None
        for line in error_commands(records, self.config.rootpath, workspace):
            terminalreporter.write_line(line)


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--agent-eval-github",
        dest="agent_eval_github",
        action="store_true",
        default=False,
        help="GitHub annotations for failed cases and the summary in $GITHUB_STEP_SUMMARY (on by "
        "itself under GitHub Actions)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if compat.is_worker(
        config
    ):  # an xdist worker: its records go to the controller, which annotates
        return
    on = (
        config.getoption("agent_eval_github", False)
        or os.environ.get("GITHUB_ACTIONS", "").lower() == "true"
    )
    if not on:
        return
    from pytest_agent_eval.report.formats import run_records

    records = run_records(config)
    config.pluginmanager.register(GitHubRun(config, records), "agent_eval_github_annotations")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    markdown = config.getoption("agent_eval_markdown", None)
    if summary and not (markdown and _same_file(Path(markdown), Path(summary))):
        from pytest_agent_eval.report.markdown import MarkdownReport

        config.pluginmanager.register(
            MarkdownReport(config, Path(summary), records), "agent_eval_step_summary"
        )


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``--agent-eval-markdown`` already writes the step summary (it is written once)."""
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
