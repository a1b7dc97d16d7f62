"""Cassettes recorded on pytest-xdist workers are written by the controller (SPEC §18).

A worker may run on another machine (``--tx socket=…``/``ssh=…``), whose disk the controller never
sees. So a worker writes no cassette: it sends the one its case recorded on the case's test report
(``report.agent_eval_cassette``: the cassette's path in its cassette folder, and its text), and the
controller writes it, atomically, into its own project: the ``cassettes/`` folder beside the eval
file, or ini ``agent_eval_cassettes``. Local workers (``-n``) send theirs the same way, so every
cassette has one writer, the controller. Replay reads the cassettes of the checkout each worker runs
in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.report.atomic import tell
from pytest_agent_eval.report.collector import CASSETTE
from pytest_agent_eval.traffic.cassette import sent_cassette_path, write_cassette


class ReturnedCassettes:
    """A plugin object on the xdist controller of a recording run.

    It writes the cassettes the workers sent.
    """

    def __init__(self, config: pytest.Config, folder: Path | None) -> None:
        self.config = config
        self.folder = folder
        """ini ``agent_eval_cassettes`` (this project's); ``None``: the folder beside each eval
        file.
        """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        sent: Any = getattr(report, CASSETTE, None)
        if sent is None:
            return
        delattr(report, CASSETTE)  # the terminal keeps the report to the end: not its cassette
        if (
            not isinstance(sent, dict)
            or not isinstance(sent.get("path"), str)
            or not isinstance(sent.get("text"), str)
        ):
            tell(
                self.config,
                f"{report.nodeid}: the cassette its worker sent is not readable; not written",
            )
            return
        file = Path(report.nodeid.split("::")[0])
        folder = (
            self.folder
            if self.folder is not None
            else self.config.rootpath / file.parent / "cassettes"
        )
        target = sent_cassette_path(folder, sent["path"])
        if target is None:
            tell(
                self.config,
                f"{report.nodeid}: its worker sent a cassette outside the cassette folder: "
                f"{sent['path']}",
            )
            return
        try:
            write_cassette(target, sent["text"])
        except OSError as exc:
            tell(
                self.config,
                f"{report.nodeid}: cassette {target} not written: {exc.strerror or exc}",
            )
