"""The run's memory (SPEC §24) as pytest sees it: the journal, and the run store.

Each finished case is appended to the journal; every run is saved to the run store
(``--agent-eval-store``, ini ``agent_eval_store``; ``off`` saves nothing). On the xdist controller
(or the only process) only, and loaded by the run's first eval record: a run without one imports
none of ``memory`` (SPEC §27). The journal is opened with the first record; the store is opened
once, when the session ends, after the cases: a SQLite store at this release's schema through the
standard library (``memory.quick``), any other (a new or older SQLite file, PostgreSQL) through
SQLAlchemy and Alembic, which then load. A PostgreSQL store is checked at the start (a URL that
cannot be used is a usage error, its password left out). A store that fails at the end (a corrupt
SQLite file) is one warning: the reports are written and the exit status is the run's.
``--agent-eval-baseline store:BRANCH`` compares with the newest run of BRANCH in the store.
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.compat import hands_out_cases, is_worker
from pytest_agent_eval.plugin.options import option_group
from pytest_agent_eval.plugin.state import get_state

if TYPE_CHECKING:
    from pytest_agent_eval.memory.journal import Journal
    from pytest_agent_eval.memory.quick import QuickStore
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.report.collector import Records
    from pytest_agent_eval.report.record import CaseRecord

_OUTPUTS = frozenset(
    {
        "agent_eval_report",
        "agent_eval_markdown",
        "agent_eval_html",
        "agent_eval_store",
        "agent_eval_resume",
    }
)
"""Options that change where the run's results go, not what they are: left out of a stored run's
options.
"""
STORE_PREFIX = "store:"


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--agent-eval-store",
        dest="agent_eval_store",
        metavar="URL",
        default=None,
        help="where every run is saved: a SQLite file (default .agent-eval/runs.db under the "
        "rootdir), postgresql://user:password@host/db, or off",
    )
    parser.addini(
        "agent_eval_store",
        "the run store (as --agent-eval-store): a SQLite file, postgresql://..., off",
    )


@pytest.hookimpl(tryfirst=True)  # before the report formats: the baseline may come from the store
def pytest_configure(config: pytest.Config) -> None:
    if is_worker(config):  # the controller keeps the run's memory
        return
    from pytest_agent_eval.report.formats import run_records

    memory = Memory(config, run_records(config), _checked_url(config))
    config.pluginmanager.register(memory, "agent_eval_run_memory")
    baseline = str(config.getoption("agent_eval_baseline", None) or "")
    if baseline.startswith(STORE_PREFIX):
        from pytest_agent_eval.report.options import BASELINE_LOADER

        branch = baseline[len(STORE_PREFIX) :]
        config.stash[BASELINE_LOADER] = lambda: memory.baseline(branch)


_DEFAULT = ""
"""The store's URL when none is given: the default SQLite file, resolved when it is opened."""
_URL = pytest.StashKey[tuple[str | None]]()


def given_store(config: pytest.Config) -> str:
    """``--agent-eval-store`` / ini ``agent_eval_store`` as given (``""``: not given)."""
    try:
        ini = config.getini("agent_eval_store")
    except ValueError:  # this module's options are not there (``-p no:agent_eval_memory``)
        ini = ""
    return str(config.getoption("agent_eval_store", None) or ini or "")


def _checked_url(config: pytest.Config) -> str | None:
    """:func:`_url` of the store given, worked out (a PostgreSQL store checked) once per process."""
    found = config.stash.get(_URL, None)
    if found is None:
        found = config.stash[_URL] = (_url(config, given_store(config)),)
    return found[0]


def store_url_of(config: pytest.Config) -> str | None:
    """The run store's SQLAlchemy URL, worked out (a PostgreSQL store checked) once per process.

    ``None``: off, or its libraries missing and it was not asked for.
    """
    url = _checked_url(config)
    if url == _DEFAULT:
        from pytest_agent_eval.memory.location import store_url

        url = store_url(None, config.rootpath)
    return url


def _url(config: pytest.Config, given: str) -> str | None:
    """The store's SQLAlchemy URL (``None``: off; :data:`_DEFAULT`: the default file).

    A usage error when its libraries are missing and it was asked for, or when a PostgreSQL store
    cannot be used now.
    """
    if given.strip().lower() == "off":
        return None
    if importlib.util.find_spec("sqlalchemy") is None:
        if given:
            raise pytest.UsageError(
                f"--agent-eval-store {given.split('@')[-1]}: the run store needs SQLAlchemy: "
                "pip install 'pytest-agent-evalset[store]' (and [postgres] for PostgreSQL)"
            )
        return None  # the default store without its libraries: said in the summary
    if not given.strip():
        return _DEFAULT
    from pytest_agent_eval.memory.location import store_url

    url = store_url(given, config.rootpath)
    if url is not None and not url.startswith(
        "sqlite:"
    ):  # checked now: a usage error, not a lost run
        from pytest_agent_eval.memory.store import Store, StoreError, shown

        try:
            store = Store(url)
            try:
                store.open()
            finally:
                store.close()
        except StoreError as exc:
            raise pytest.UsageError(f"--agent-eval-store: {exc}") from None
        except ImportError as exc:
            raise pytest.UsageError(
                f"--agent-eval-store {shown(url)}: {exc}: pip install "
                "'pytest-agent-evalset[postgres]'"
            ) from None
    return url


class Memory:
    """A plugin object on the controller: the run's journal, and its store."""

    def __init__(self, config: pytest.Config, collector: Records, url: str | None) -> None:
        self.config = config
        self.collector = collector
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.start = time.perf_counter()
        self.run_id = f"{self.started:%Y%m%dT%H%M%SZ}-{os.urandom(3).hex()}"
        """The run's id: its start (UTC, to the second) and 6 random hex digits, e.g.
        ``20261127T123456Z-3f9a0c``.
        """
        self._url = url
        self.journal: Journal | None = None
        """Made with the first record."""
        self.saved: str | None = None
        self.warning: str | None = None
        self.flaky: dict[str, list[str]] = {}
        self._git: _Git | None = None
        self._run: dict[str, Any] | None = None
        self._store: QuickStore | Store | None = None
        self._store_error: str | None = None

    def url(self) -> str | None:
        """The store's URL (``None``: off).

        A method, not a property: pytest < 8.1 reads every attribute of a plugin object when it
        looks for fixtures, and this one would load the memory's modules in every run.
        """
        if self._url == _DEFAULT:
            from pytest_agent_eval.memory.location import store_url

            self._url = store_url(None, self.config.rootpath)
        return self._url

    def _sqlalchemy_store(self) -> Store:
        from pytest_agent_eval.memory.store import Store

        url = self.url()
        assert url is not None
        return Store(url)

    def baseline(self, branch: str) -> list[CaseRecord]:
        """The records of the newest run of ``branch`` in the store.

        ``BaselineError`` when there is none.
        """
        from pytest_agent_eval.memory.store import StoreError
        from pytest_agent_eval.report.baseline import BaselineError

        if self.url() is None:
            raise BaselineError(
                f"{STORE_PREFIX}{branch}: the run store is off (--agent-eval-store off)"
            )
        store = self._sqlalchemy_store()
        try:
            found = store.newest(branch)
        except StoreError as exc:
            raise BaselineError(f"{STORE_PREFIX}{branch}: {exc}") from None
        finally:
            store.close()
        if found is None:
            raise BaselineError(
                f"{STORE_PREFIX}{branch}: the store {store} has no run of the branch {branch!r}"
            )
        return found[1]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if hands_out_cases(self.config):  # the workers collect: runs beside them
            self.git()
        if self.collector.record_data:  # a resumed run: its journal starts with the records kept
            self._open_journal()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # runs beside the first cases; a collection alone keeps no record
        if get_state(self.config).eval_items and not self.config.option.collectonly:
            self.git()

    def git(self) -> _Git:
        """The checkout's ``git status``, started when first asked for.

        Asked for once a run has eval cases to run: a run of plain tests, or ``--collect-only``,
        starts no process.
        """
        if self._git is None:
            self._git = _Git(self.config.rootpath)
        return self._git

    def _run_start(self) -> dict[str, Any]:
        """The run as the JSON report has it at the start (its ``run`` without duration or end)."""
        if self._run is None:
            from pytest_agent_eval.report.run_info import run_start

            commit = self.git().state()["commit"]
            self._run = run_start(self.config, self.started, commit)
        return self._run

    def _open_journal(self) -> bool:
        if self.journal is None:
            from pytest_agent_eval.memory.journal import Journal, journal_path
            from pytest_agent_eval.report.attach import encoded

            report = self.config.getoption("agent_eval_report", None)
            rootdir = self.config.rootpath
            path = journal_path(rootdir, Path(report) if report else None, self.run_id)
            fallback = journal_path(rootdir, None, self.run_id)
            self.journal = Journal(
                path, self.run_id, self._run_start(), fallback=fallback, encode=encoded
            )
        if self.journal.opened:
            return True
        data = self.collector.record_data
        return self.journal.open([d for d in data if self.collector.final_record(d["nodeid"]) is d])

    @pytest.hookimpl(trylast=True)  # after the collector kept the report's record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.passed and report.when != "call":  # a setup or teardown that passed: no record
            return
        data = self.collector.final_record(report.nodeid)
        if data is not None and self._open_journal():
            assert self.journal is not None
            self.journal.record(data)

    @pytest.hookimpl(
        wrapper=True, trylast=True
    )  # inside the other wrappers: before the terminal summary
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None]:
        stored = self._url is not None and bool(self.collector.record_data)
        if stored:
            self._open_store()
            self._flaky()  # for the reports, written next
        yield  # the reports are written, the gates have decided the exit status
        if self.journal is not None and self.journal.opened:
            duration = round(time.perf_counter() - self.start, 3)
            self.journal.end(int(session.exitstatus), duration, self.collector.not_run())
            from pytest_agent_eval.memory.journal import journal_path, prune

            prune(journal_path(self.config.rootpath, None, self.run_id).parent)
        if stored:
            self._save(int(session.exitstatus), bool(session.shouldfail or session.shouldstop))
        self._close_store()

    def _open_store(self) -> None:
        """Open the store once, for the session's end.

        A current SQLite file through ``sqlite3``, any other through SQLAlchemy; why it cannot be
        opened is the save's warning.
        """
        from pytest_agent_eval.memory.quick import QuickStore, sqlite_file
        from pytest_agent_eval.memory.rows import StoreError

        url = self.url()
        assert url is not None
        try:
            path = sqlite_file(url)
            quick = QuickStore.open(path, create=True) if path is not None else None
            if quick is not None:
                self._store = quick
            else:
                store = self._sqlalchemy_store()
                try:
                    store.open()  # a new or older store migrated, committed: read and written next
                except BaseException:
                    store.close()
                    raise
                self._store = store
        except (StoreError, OSError) as exc:
            self._store_error = str(exc)
        except Exception as exc:  # a URL SQLAlchemy cannot read, a missing driver: one warning
            self._store_error = str(exc)

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def _flaky(self) -> None:
        """The run's flaky cases over the last runs in the store and this one.

        For the reports and the summary; a store that cannot be read is the warning of the save that
        follows.
        """
        from pytest_agent_eval.memory.rows import StoreError
        from pytest_agent_eval.report.options import FLAKY

        if self._store is None:  # said by the save
            return
        data = self.collector.record_data
        try:
            self.flaky = self._store.flaky(nodeids=[d["nodeid"] for d in data], newest=data)
        except (StoreError, OSError):
            return
        if self.flaky:
            self.config.stash[FLAKY] = self.flaky

    def _document(self, exit_status: int, stopped: bool) -> dict[str, Any]:
        """What the store keeps of the run: the report's ``run``, its trust figures and cases."""
        from pytest_agent_eval.report.run_info import run_end
        from pytest_agent_eval.report.trust import figures

        duration = round(time.perf_counter() - self.start, 3)
        document: dict[str, Any] = {
            "run": run_end(self._run_start(), duration, exit_status, stopped)
        }
        document.update(figures(self.collector.records))
        document["cases"] = self.collector.record_data
        return document

    def _save(self, exit_status: int, stopped: bool) -> None:
        from pytest_agent_eval.memory.rows import StoreError, run_row

        if self._store is None:
            self.warning = f"agent eval store: the run was not saved: {self._store_error}"
            return
        document = self._document(exit_status, stopped)
        try:
            git, options = self._git_state(), self._options()
            row = run_row(document, self.run_id, git, options, records=self.collector.records)
            text_of = self.journal.text_of if self.journal is not None else _no_text
            self._store.save(row, document["cases"], text_of)
            self.saved = str(self._store)
        except (StoreError, OSError) as exc:
            self.warning = f"agent eval store: the run was not saved: {exc}"

    def _git_state(self) -> dict[str, Any]:
        """The checkout's branch and whether tracked files changed.

        On a detached HEAD, the branch a CI names.
        """
        state = self.git().state()
        return {"branch": state.get("branch"), "dirty": state.get("dirty")}

    def _options(self) -> dict[str, Any]:
        """The options that can change a verdict.

        Every agent-eval option but where results go; ``-k``, ``-m``.
        """
        out: dict[str, Any] = {}
        for name, value in sorted(vars(self.config.option).items()):
            wanted = name.startswith("agent_eval_") and name not in _OUTPUTS
            if (wanted or name in ("keyword", "markexpr")) and value not in (
                None,
                False,
                "",
                [],
                (),
            ):
                out[name] = value if isinstance(value, (str, int, float, bool)) else str(value)
        return out

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        journal = self.journal
        if journal is not None and journal.error is not None:
            terminalreporter.write_line(
                f"agent eval journal not written: {journal.error}", yellow=True
            )
        elif journal is not None and journal.moved is not None:
            terminalreporter.write_line(f"agent eval journal: {journal.moved}", yellow=True)
        if self.warning is not None:
            terminalreporter.write_line(f"warning: {self.warning}", yellow=True)
        elif self.saved is not None and self.config.get_verbosity() >= 1:  # -v: where the run went
            terminalreporter.write_line(
                f"agent eval store: run {self.run_id} saved to {self.saved}"
            )
        if self.flaky:
            terminalreporter.write_line(
                f"flaky: {len(self.flaky)} cases changed outcome over the last runs with their "
                "content unchanged: "
                + ", ".join(
                    f"{nodeid} ({' '.join(o)})" for nodeid, o in sorted(self.flaky.items())[:10]
                ),
                yellow=True,
            )

    def pytest_unconfigure(self) -> None:
        if self.journal is not None:
            self.journal.close()
        if self._git is not None:
            self._git.close()
        self._close_store()


def _no_text(data: dict[str, Any]) -> str | None:
    return None


class _Git:
    """The checkout's commit, branch and whether tracked files changed.

    One ``git status``, started with the session in a process of its own, read when first needed
    (the journal's first line, the store's run).
    """

    def __init__(self, directory: Path) -> None:
        self._state: dict[str, Any] | None = None
        try:
            self._process: subprocess.Popen[str] | None = subprocess.Popen(
                ["git", "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-uno"],
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:  # no git
            self._process = None

    def state(self) -> dict[str, Any]:
        """``{commit, branch, dirty}``, each ``None`` when it cannot be told (no git checkout)."""
        if self._state is None:
            self._state = _git_status(self._process)
        return self._state

    def close(self) -> None:
        """Reap the process (killed when still running) unless its state was read."""
        process, self._process = self._process, None
        if process is not None and self._state is None:
            if process.poll() is None:
                process.kill()
            process.communicate()


def _git_status(process: subprocess.Popen[str] | None) -> dict[str, Any]:
    """Read ``git status --porcelain=v2 --branch``: the commit, branch and whether a file changed.

    On a detached HEAD the branch is the one a CI names.
    """
    from pytest_agent_eval.report.run_info import commit_or_none

    unknown: dict[str, Any] = {"commit": None, "branch": None, "dirty": None}
    if process is None:
        return unknown
    try:
        out, _ = process.communicate(timeout=10)
    except (OSError, subprocess.SubprocessError):
        process.kill()
        process.communicate()
        return unknown
    if process.returncode != 0:
        return unknown
    state: dict[str, Any] = {"commit": None, "branch": None, "dirty": False}
    for line in out.splitlines():
        if line.startswith("# branch.oid "):
            state["commit"] = commit_or_none(line.split(" ", 2)[2].strip())
        elif line.startswith("# branch.head "):
            state["branch"] = line.split(" ", 2)[2].strip()
        elif line and not line.startswith("#"):
            state["dirty"] = True
    if state["branch"] == "(detached)":  # the branch CI names
        state["branch"] = (
            os.environ.get("GITHUB_HEAD_REF") or os.environ.get("GITHUB_REF_NAME") or None
        )
    return state
