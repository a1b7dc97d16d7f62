"""The journal (SPEC §24): each finished case's final record, appended as one JSON line.

The line is appended as the case finishes, so that SIGKILL, an OOM kill or a power loss leave every
finished case to resume from or to report.

The file is ``<report>.journal.jsonl`` beside ``--agent-eval-report``, else
``.agent-eval/journal/<run>.jsonl`` under the rootdir; only the controller (or the only process)
writes it. Its first line is ``{"journal": 1, "run": {...}}`` (the run's id, start, arguments,
commit), then one record per line as the JSON report's ``cases`` hold them (a record written again,
e.g. a teardown that failed after the call, replaces the earlier line of its node id), and, when the
session ends, ``{"end": {...}, "not_run": [...]}``.

Each line is written with one ``write`` and flushed to the operating system at once: a process
killed after that loses nothing. ``fsync`` (for a power loss) runs at most once a second: with a
record when the last was a second ago or more, else by a timer a second after the first record not
yet synced (one ``fsync`` per record would cost a 10,000-case run seconds on a slow disk).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

JOURNAL_VERSION = 1
SYNC_EVERY_S = 1.0
SUFFIX = ".journal.jsonl"


def journal_path(rootdir: Path, report: Path | None, run_id: str) -> Path:
    """Where a run's journal goes.

    Beside its JSON report, else under ``.agent-eval/journal/`` in the rootdir.
    """
    if report is not None:
        return report.with_name(report.name + SUFFIX)
    return rootdir / ".agent-eval" / "journal" / f"{run_id}.jsonl"


KEPT = 20
"""Journals kept in ``.agent-eval/journal/``: those of the newest runs (by when last written)."""


def prune(folder: Path, keep: int = KEPT) -> None:
    """Remove the journals of ``.agent-eval/journal/`` but the ``keep`` written last.

    One is written per run: without this the folder grew by a run's records each run. A journal
    beside a report is the user's and never removed; what cannot be removed stays.
    """
    try:
        found = [(entry.stat().st_mtime, entry) for entry in folder.glob("*.jsonl")]
    except OSError:
        return
    found.sort(key=lambda pair: pair[0], reverse=True)
    for _, old in found[keep:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _created(path: Path) -> IO[str]:
    """``path`` opened anew for writing, its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8")


def is_journal(path: Path) -> bool:
    """Whether ``path`` names a journal.

    ``--agent-eval-resume`` and ``agent-eval report`` take one.
    """
    return path.name.endswith(".jsonl")


class Journal:
    """A journal being written: lines appended and flushed at once.

    What is written is ``fsync`` ed at least every second.
    """

    def __init__(
        self,
        path: Path,
        run_id: str,
        run: dict[str, Any] | None = None,
        fallback: Path | None = None,
        encode: Callable[[dict[str, Any]], str] = json.dumps,
    ) -> None:
        self.path = path
        self._encode = encode
        """A record's JSON text (``json.dumps``, or one that reuses a text already made)."""
        self.fallback = fallback
        """Where the journal goes when ``path`` cannot be written.

        For example a report path in a folder that is a file.
        """
        self.moved: str | None = None
        """Why the journal went to ``fallback`` (said once in the summary).

        ``None`` while it is at ``path``.
        """
        self.run_id = run_id
        self.run = run or {}
        """The JSON report's ``run`` as far as it is known at the start (no duration, exit status).
        """
        self._file: IO[str] | None = None
        self._written: dict[str, dict[str, Any]] = {}
        self.texts: dict[str, str] = {}
        """Node id -> the JSON text of its last line."""
        self._lock = threading.Lock()
        self._synced = time.monotonic()
        self._timer: threading.Timer | None = None
        self.error: str | None = None
        """Why the journal could not be written (said once in the summary); ``None`` while it can.
        """

    @property
    def opened(self) -> bool:
        return self._file is not None

    def open(self, records: list[dict[str, Any]]) -> bool:
        """Open (truncate) the journal with its first line and ``records``, unless open already.

        ``records``: those the run started from, a resumed run's. ``False`` when the journal cannot
        be written.
        """
        if self._file is None and self.error is None:
            try:
                self._file = _created(self.path)
            except OSError as exc:
                why = f"{self.path}: {exc.strerror or exc}"
                if self.fallback is None or self.fallback == self.path:
                    self.error = why
                    return False
                try:  # nothing is lost: the journal goes where it goes without a report
                    self._file = _created(self.fallback)
                except OSError as again:
                    self.error = f"{why}; {self.fallback}: {again.strerror or again}"
                    return False
                self.moved = f"{why}; written to {self.fallback} instead"
                self.path = self.fallback
            self._line({"journal": JOURNAL_VERSION, "id": self.run_id, "run": self.run})
            for data in records:
                self.record(data)
        return self._file is not None

    def record(self, data: dict[str, Any]) -> None:
        """Append a case's record, unless this very record is its last line already."""
        if self._file is not None and self._written.get(data["nodeid"]) is not data:
            self._written[data["nodeid"]] = data
            self.texts[data["nodeid"]] = self._line(data)

    def text_of(self, data: dict[str, Any]) -> str | None:
        """The JSON text this journal wrote of the record ``data``, if it did.

        The store keeps that text as it is.
        """
        return self.texts.get(data["nodeid"]) if self._written.get(data["nodeid"]) is data else None

    def end(self, exit_status: int, duration_s: float, not_run: list[dict[str, Any]]) -> None:
        """Append the run's end and close the journal."""
        if self._file is not None:
            self._line(
                {"end": {"exit_status": exit_status, "duration_s": duration_s}, "not_run": not_run}
            )
        self.close()

    def _line(self, data: dict[str, Any]) -> str:
        text = self._encode(data)  # ASCII: the C encoder's faster path
        if self._file is None:
            return text
        try:
            self._file.write(text + "\n")
            self._file.flush()  # to the operating system: a killed process loses nothing
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            self.close()
            return text
        if time.monotonic() - self._synced >= SYNC_EVERY_S:
            self._sync()
        elif self._timer is None:
            self._timer = threading.Timer(SYNC_EVERY_S, self._sync)
            self._timer.daemon = True
            self._timer.start()
        return text

    def _sync(self) -> None:
        """``fsync`` what was written, so that a power loss keeps it.

        Called by the timer's thread or the writer's.
        """
        with self._lock:
            self._timer = None
            self._synced = time.monotonic()
            if self._file is not None:
                with contextlib.suppress(
                    OSError, ValueError
                ):  # closed meanwhile, or no fsync on this file system
                    os.fsync(self._file.fileno())

    def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self._file is not None:
            self._sync()
            with self._lock:
                try:
                    self._file.close()
                except OSError as exc:
                    self.error = f"{self.path}: {exc.strerror or exc}"
                self._file = None


def read_journal(path: Path) -> dict[str, Any]:
    """A journal as the JSON report it stands for.

    Its run, the last record of each node id (by node id) and the cases its run left unfinished
    (when the run ended at all); ``BaselineError`` naming the file and line when it is not a
    journal, or naming the file, line and field when a case record's field is not of its type or
    range (the checks of a report's ``cases[i]``, SPEC §22). A last line cut short (the process died
    writing it) is left out: its case did not finish.
    """
    from pytest_agent_eval.report.baseline import BaselineError, check_report
    from pytest_agent_eval.report.reading import case_problem
    from pytest_agent_eval.report.schema import SCHEMA_VERSION

    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the journal: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"{path}: not a journal: {exc}") from None
    if lines and lines[-1] == "":
        lines.pop()
    run: dict[str, Any] | None = None
    cases: dict[str, dict[str, Any]] = {}
    not_run: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    for number, line in enumerate(lines, 1):
        try:
            data = json.loads(line)
        except ValueError as exc:
            if number == len(lines) and number > 1:  # cut short by the process's death
                break
            raise BaselineError(f"{path}:{number}: not a JSON line: {exc}") from None
        if not isinstance(data, dict):
            raise BaselineError(f"{path}:{number}: not an object")
        if number == 1:
            if data.get("journal") != JOURNAL_VERSION or not isinstance(data.get("run"), dict):
                raise BaselineError(
                    f"{path}:1: not an agent eval journal of version {JOURNAL_VERSION}; "
                    "pytest writes one beside --agent-eval-report PATH (PATH.journal.jsonl) "
                    "or under .agent-eval/journal/"
                )
            run = {**data["run"], "finished": False, "exit_status": None}
        elif "end" in data:
            end = data["end"] if isinstance(data["end"], dict) else {}
            not_run = [e for e in data.get("not_run") or [] if isinstance(e, dict)]
        elif isinstance(data.get("nodeid"), str):
            found = case_problem(data)
            if found is not None:
                raise BaselineError(f"{path}:{number}: {found} (the record of {data['nodeid']!r})")
            cases[data["nodeid"]] = data
        else:
            raise BaselineError(f"{path}:{number}: neither a case record nor the journal's end")
    if run is None:
        raise BaselineError(f"{path}: an empty journal")
    if end is not None:
        run["finished"] = end.get("exit_status") in (0, 1) and not not_run
        run["exit_status"] = end.get("exit_status")
        run["duration_s"] = end.get("duration_s")
    if not isinstance(run.get("duration_s"), (int, float)):  # killed: until the journal's last line
        run["duration_s"] = _until_written(path, run.get("started"))
    document = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "cases": [cases[k] for k in sorted(cases)],
    }
    document["not_run"] = not_run
    return check_report(document, path)


def _until_written(path: Path, started: Any) -> float:
    """Seconds from ``started`` (ISO 8601) to the journal's last write.

    How long a killed run ran, as far as its journal tells (0 when either cannot be read).
    """
    try:
        begun = datetime.datetime.fromisoformat(str(started)).timestamp()
        return round(max(0.0, path.stat().st_mtime - begun), 3)
    except (OSError, ValueError):
        return 0.0
