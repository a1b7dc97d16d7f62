"""A worker process that dies under pytest-xdist (an agent calls ``os._exit``, native code crashes).

xdist blames the item the worker was running; with many agent calls in flight, another case's agent
may have ended the process. So each worker notes, in a small file of a directory the controller
shares, the cases it starts and finishes. After a crash the controller reads which were in flight:
when that was one case, it is the culprit and fails; otherwise the item xdist blames is not failed
but sent to run again, and every case that was in flight becomes a suspect, which workers then run
alone, so that a second crash names its culprit.

The directory is the controller's: a worker on another machine (``--tx socket=…``/``ssh=…``) does
not have it, and runs without this triage (:meth:`InFlight.open` gives ``None``); a crash there is
reported as xdist reports it.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_agent_eval import compat

T = TypeVar("T")
KEY = "agent_eval_crash_dir"
"""The ``workerinput`` key of the shared directory."""
_SUSPECTS = "suspects"


class InFlight:
    """Worker side: the cases started and finished on this worker.

    Also the suspects the controller names.
    """

    def __init__(self, directory: Path, worker: str) -> None:
        self._suspects_file = directory / _SUSPECTS
        self._log = os.open(
            directory / f"{worker}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600
        )
        self._seen: tuple[float, set[str]] = (-1.0, set())

    @classmethod
    def open(cls, directory: Path, worker: str) -> InFlight | None:
        """The worker's notes in ``directory``.

        ``None`` when it cannot be written here (not on this machine).
        """
        try:
            return cls(directory, worker)
        except OSError:
            return None

    async def around(self, nodeid: str, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` (the case of ``nodeid``), noted as in flight meanwhile."""
        os.write(self._log, f"+{nodeid}\n".encode())
        try:
            return await coro
        finally:
            os.write(self._log, f"-{nodeid}\n".encode())

    def suspects(self) -> set[str]:
        """Cases that were in flight when a worker crashed: they run alone."""
        try:
            mtime = self._suspects_file.stat().st_mtime
        except OSError:
            return set()
        if mtime != self._seen[0]:
            names = set(self._suspects_file.read_text(encoding="utf-8").split("\n")) - {""}
            self._seen = (mtime, names)
        return self._seen[1]


def in_flight(log: Path) -> list[str]:
    """The node ids started and not finished in a worker's log, in the order they started."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    open_ = Counter(line[1:] for line in lines if line.startswith("+"))
    open_.subtract(line[1:] for line in lines if line.startswith("-"))
    return [
        nodeid
        for nodeid in dict.fromkeys(line[1:] for line in lines if line.startswith("+"))
        if open_[nodeid] > 0
    ]


class CrashReporter:
    """Controller side (a plugin object): shares the directory with workers.

    It also rewrites crash reports.
    """

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._dir: Path | None = None
        self._rerun: set[str] = set()

    @property
    def directory(self) -> Path:
        """The shared directory, made at the first worker's start (removed at unconfigure).

        Under pytest's base temporary directory, which xdist has made by then: a controller killed
        before its unconfigure leaves it where pytest's own rotation removes it.
        """
        if self._dir is None:
            self._dir = compat.run_temp_dir(self._config, "agent-eval-workers-")
        return self._dir

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[KEY] = str(self.directory)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        worker = compat.crashed_worker(report)
        if self._dir is None or worker is None:
            return
        cases = in_flight(self._dir / f"{worker}.log")
        if not cases:
            return
        if cases == [crashitem] or crashitem in self._rerun:
            report.longrepr = (
                f"worker {worker!r} crashed while running {crashitem!r}, the only case in flight "
                "on it: its agent ended the worker process (os._exit, a signal, a crash in "
                "native code)"
                if cases == [crashitem]
                else f"worker {worker!r} crashed again while {crashitem!r} was in flight (with "
                f"{', '.join(cases)})"
            )
            return
        with open(self._dir / _SUSPECTS, "a", encoding="utf-8") as suspects:
            suspects.write("".join(f"{nodeid}\n" for nodeid in cases))
        culprit = f"the agent of {cases[0]!r}" if len(cases) == 1 else "the agent of one of them"
        what = (
            f"worker {worker!r} crashed while these cases were in flight on it: {', '.join(cases)}"
        )
        if compat.run_again(sched, crashitem):
            self._rerun.add(crashitem)
            report.outcome = "rerun"  # type: ignore[assignment]
            report.longrepr = (
                f"not run: {what}; {culprit} ended the process. This case runs again, alone."
            )
        else:
            report.longrepr = f"{what}; {culprit} ended the process (which one cannot be told)"

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        if report.outcome == "rerun":  # type: ignore[comparison-overlap]
            return "rerun", "R", "RERUN"
        return None

    def pytest_unconfigure(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
