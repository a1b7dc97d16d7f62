"""The records of a run, gathered from the test reports.

On the xdist controller, or the only process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import compat, gc_policy
from pytest_agent_eval.compat import is_worker_crash

if TYPE_CHECKING:
    from pytest_agent_eval.report.record import CaseRecord

COLLECTOR = pytest.StashKey["Records"]()

ATTRIBUTE = "agent_eval"
"""The test report attribute that carries the record (a dict) from the worker to the controller."""
CASSETTE = "agent_eval_cassette"
"""The test report attribute that carries a cassette recorded on a worker to the controller.

Read by ``plugin.traffic``.
"""

DECIDED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
"""Exit statuses a report's verdict (a threshold, the baseline gate) may change.

An interrupt, internal or usage error is left as it is.
"""


class Records:
    """A plugin object, registered on the controller only: one record per eval item, by node id.

    Fed by ``pytest_runtest_logreport`` with the reports the workers sent (or this process made), so
    every format built from it is the same with and without ``-n``.
    """

    def __init__(
        self,
        is_eval_file: Callable[[str], bool] = lambda file: False,
        case_lines: Callable[[str], dict[str, int]] = lambda file: {},
    ) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        """The records as the reports carry them (plain data).

        They are made into ``CaseRecord`` s when first read, so a long run keeps one copy of each,
        not two, for the cyclic GC to go over.
        """
        self._built: list[CaseRecord] | None = None
        self._made: dict[str, tuple[dict[str, Any], CaseRecord]] = {}
        """Node id -> a record made in this process and the data it was attached as.

        ``records`` takes the record itself while that data is the node id's: nothing is rebuilt
        from the data (a record is not changed once attached).
        """
        self._started: dict[str, tuple[str, int | None]] = {}
        self._collected: list[str] = []
        self.is_eval_file = is_eval_file
        """Whether a file (relative to the rootdir) holds eval items.

        Tells a crashed worker's eval item.
        """
        self.case_lines = case_lines
        """The line of each case id of an eval file (relative to the rootdir).

        Tells where a case not run is.
        """
        self._items: list[pytest.Item] = []
        self._died: dict[str, str] = {}
        """Node id -> the xdist worker that died while it ran the case.

        The case's record is the crash's error.
        """
        self._lost: dict[str, str] = {}
        """Node id -> the xdist worker that died with the case sent to it and not finished."""
        self.ended = how_it_ended(None)
        """How the run ended (``pytest_sessionfinish``), as the reasons of ``not_run`` say it."""
        self.held: dict[str, str] = {}
        """Node id -> why the run chose not to start the case (the spend cap).

        It is the case's reason in ``not_run``.
        """

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._items = (
            session.items
        )  # where the cases are (not a copy): read only for the cases not run
        self._note_collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object, error: object | None) -> None:
        if error is not None:  # a worker died: the cases it had been sent and not finished
            worker = compat.worker_id(node)
            for nodeid in compat.pending_on(node):
                self._lost.setdefault(nodeid, worker)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        if not self._collected:  # every worker collects the same items (xdist checks it)
            self._note_collected(ids)

    def _note_collected(self, nodeids: list[str]) -> None:
        files = {nodeid.split("::")[0] for nodeid in nodeids}
        evals = {file for file in files if self.is_eval_file(file)}
        self._collected = [nodeid for nodeid in nodeids if nodeid.split("::")[0] in evals]

    def not_finished(self) -> list[str]:
        """The eval items collected that have no record.

        An interrupted run's cases that did not run or finish.
        """
        return [nodeid for nodeid in self._collected if nodeid not in self._records]

    @pytest.hookimpl(tryfirst=True)  # before the formats write
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.ended = how_it_ended(exitstatus, bool(session.shouldfail or session.shouldstop))

    def not_run(self, ended: str | None = None) -> list[dict[str, Any]]:
        """The JSON report's ``not_run``: the eval items without a final record, and why.

        ``{nodeid, file, line, reason}`` for each eval item collected without a final record
        (``ended``: how the run ended, e.g. ``the run was interrupted``) and each whose record is a
        worker crash's error; in collection order (then by node id, crashes of items not known to be
        collected).
        """
        missing = self.not_finished()
        crashed = {nodeid for nodeid in self._died if nodeid in self._records}
        if not missing and not crashed:
            return []
        ended = ended or self.ended
        dead = sorted({*self._died.values(), *self._lost.values()} - {""})
        if dead and missing:
            ended += (
                f" after {'the worker' if len(dead) == 1 else 'the workers'} {', '.join(dead)} died"
            )
        order = [
            n for n in self._collected if n in crashed or n not in self._records
        ]  # collection order
        order += sorted(crashed - set(order))
        lines = self._lines(order)
        entries = []
        for nodeid in order:
            if nodeid in self._died:
                reason = (
                    f"{_worker(self._died[nodeid])} died while it ran the case; "
                    "its record is that error"
                )
            elif nodeid in self._lost:
                reason = f"{_worker(self._lost[nodeid])} died before it finished the case"
            elif nodeid in self.held and nodeid not in self._started:
                reason = self.held[nodeid]
            elif nodeid in self._started:
                reason = f"it did not finish: {ended}"
            else:
                reason = f"not started: {ended}"
            file = nodeid.split("::")[0]
            entries.append(
                {"nodeid": nodeid, "file": file, "line": lines.get(nodeid), "reason": reason}
            )
        return entries

    def _lines(self, nodeids: list[str]) -> dict[str, int]:
        """The (1-based) line of each of ``nodeids``.

        From its item, else its start, else its eval file read again (an item an xdist worker never
        started); none when it cannot be told.
        """
        wanted = set(nodeids)
        lines: dict[str, int] = {}
        for item in self._items:  # without xdist, this process's items
            if item.nodeid in wanted and item.location[1] is not None:
                lines[item.nodeid] = item.location[1] + 1
        for nodeid in wanted - lines.keys():
            line = self._started.get(nodeid, ("", None))[1]
            if line is not None:
                lines[nodeid] = line + 1
        unknown = wanted - lines.keys()
        for file in sorted({nodeid.split("::")[0] for nodeid in unknown}):
            cases = self.case_lines(file)
            for nodeid in unknown:
                in_file, _, name = nodeid.partition("::")
                line = (
                    cases.get(name, cases.get(name.partition("[")[0])) if in_file == file else None
                )
                if line is not None:  # a matrix variant (``case[agent]``) is where its case is
                    lines[nodeid] = line
        return lines

    @property
    def collected(self) -> int:
        """How many eval items were collected (0 when not known)."""
        return len(self._collected)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._started[nodeid] = location[
            :2
        ]  # what is known of an item whose worker may crash running it

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, ATTRIBUTE, None)
        if isinstance(data, dict):
            self._keep(report.nodeid, data)
        elif is_worker_crash(report) and report.nodeid not in self._records:
            self._crashed(report)
        elif report.when == "teardown" and report.failed and report.nodeid in self._records:
            self._keep(
                report.nodeid, {**self._records[report.nodeid], "outcome": "error"}
            )  # as pytest counts it

    def made(self, nodeid: str, data: dict[str, Any], record: CaseRecord) -> None:
        """Note that ``data``, which a report of ``nodeid`` carries, is ``record.to_dict()``.

        Called where the record was made (the only process, not an xdist worker's).
        """
        self._made[nodeid] = (data, record)

    def carry(self, records: dict[str, dict[str, Any]]) -> None:
        """Start from an earlier report's records, by node id (``--agent-eval-resume``).

        This run's records replace them.
        """
        for nodeid, data in records.items():
            self._keep(nodeid, data)

    def _keep(self, nodeid: str, data: dict[str, Any], died: str | None = None) -> None:
        self._records[nodeid] = data
        self._built = None
        if died is not None:
            self._died[nodeid] = died
        else:  # finished (a crashed case run again, alone)
            self._died.pop(nodeid, None)

    def _crashed(self, report: pytest.TestReport) -> None:
        """The record of an eval item whose xdist worker died running it.

        An error, with where it is and why.
        """
        from pytest_agent_eval.report.record import CaseRecord, crash_message

        file, line = self._started.get(report.nodeid, (report.nodeid.split("::")[0], None))
        if not self.is_eval_file(file):
            return
        case_id = report.nodeid.rpartition("::")[2]
        record = CaseRecord(
            report.nodeid, case_id, file, (line or 0) + 1, "error", error=crash_message(report)
        )
        self._keep(report.nodeid, record.to_dict(), died=compat.crashed_worker(report) or "")

    def final_record(self, nodeid: str) -> dict[str, Any] | None:
        """The record of ``nodeid`` when it is final; ``None`` when there is none yet.

        A crashed worker's error is not final: a resumed run runs the case again.
        """
        return None if nodeid in self._died else self._records.get(nodeid)

    @property
    def record_data(self) -> list[dict[str, Any]]:
        """Every record so far as plain data (``CaseRecord.to_dict``), by node id."""
        return [self._records[k] for k in sorted(self._records)]

    @property
    def records(self) -> list[CaseRecord]:
        """Every record so far, by node id.

        The order does not depend on which worker finished first.
        """
        if not self._records:
            return []
        if self._built is None:
            from pytest_agent_eval.report.record import CaseRecord

            with (
                gc_policy.paused()
            ):  # objects kept to the end: the collector would go over them for nothing
                self._built = [self._record(k, CaseRecord) for k in sorted(self._records)]
        return self._built

    def _record(self, nodeid: str, kind: type[CaseRecord]) -> CaseRecord:
        """The record of ``nodeid``: the one made in this process, else built from its data.

        ``kind`` is ``CaseRecord``, imported once by the caller rather than once a record.
        """
        data = self._records[nodeid]
        made = self._made.get(nodeid)
        if made is not None and made[0] is data:
            return made[1]
        return kind.from_dict(data)


def how_it_ended(exit_status: int | None, stopped: bool = False) -> str:
    """How a run that left cases without a record ended, as ``not_run`` reasons say it."""
    if exit_status is None or exit_status == pytest.ExitCode.INTERRUPTED:
        return "the run was interrupted"
    if exit_status == pytest.ExitCode.INTERNAL_ERROR:
        return "the run ended with an internal error"
    return "the run stopped early" if stopped else "the run ended"


def _worker(worker: str) -> str:
    return f"the worker {worker}" if worker else "its worker"


def records(config: pytest.Config) -> Records | None:
    """The run's records (``None`` on an xdist worker)."""
    return config.stash.get(COLLECTOR, None)
