"""The run's memory (SPEC §24), as pytest sees it: the journal and the run store.

The journal each finished case is appended to, and the run store every run is saved to
(``--agent-eval-store``, ini ``agent_eval_store``; ``off`` saves nothing).

On the xdist controller (or the only process) only. The journal is opened with the first record; the
store is written when the session ends, after the reports, so that its libraries (SQLAlchemy,
Alembic) load then and never on the way to the first case; a PostgreSQL store is checked at the
start (a URL that cannot be used is a usage error, its password left out). A store that fails at the
end (a corrupt SQLite file) is one warning: the reports are written and the exit status is the
run's. ``--agent-eval-baseline store:BRANCH`` compares with the newest run of BRANCH in the store.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.compat import is_worker
from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.memory.journal import Journal
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
    from pytest_agent_eval.memory.journal import journal_path, new_run_id
    from pytest_agent_eval.report.formats import run_records

    run_id = new_run_id()
    report = config.getoption("agent_eval_report", None)
    journal = journal_path(config.rootpath, Path(report) if report else None, run_id)
    url = store_url_of(config)
    memory = Memory(config, run_records(config), run_id, journal, url)
    config.pluginmanager.register(memory, "agent_eval_run_memory")
    baseline = str(config.getoption("agent_eval_baseline", None) or "")
    if baseline.startswith(STORE_PREFIX):
        from pytest_agent_eval.report.options import BASELINE_LOADER

        branch = baseline[len(STORE_PREFIX) :]
        config.stash[BASELINE_LOADER] = lambda: memory.baseline(branch)


_URL = pytest.StashKey[tuple[str | None]]()


def given_store(config: pytest.Config) -> str:
    """``--agent-eval-store`` / ini ``agent_eval_store`` as given (``""``: not given)."""
    try:
        ini = config.getini("agent_eval_store")
    except ValueError:  # this module's options are not there (``-p no:agent_eval_memory``)
        ini = ""
    return str(config.getoption("agent_eval_store", None) or ini or "")


def store_url_of(config: pytest.Config) -> str | None:
    """The run store's SQLAlchemy URL, worked out (a PostgreSQL store checked) once per process.

    ``None``: off, or its libraries missing and it was not asked for.
    """
    found = config.stash.get(_URL, None)
    if found is None:
        found = config.stash[_URL] = (_url(config, given_store(config)),)
    return found[0]


def _url(config: pytest.Config, given: str) -> str | None:
    """The store's SQLAlchemy URL (``None``: off).

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

    def __init__(
        self, config: pytest.Config, collector: Records, run_id: str, journal: Path, url: str | None
    ) -> None:
        from pytest_agent_eval.memory.journal import Journal, journal_path

        self.config = config
        self.collector = collector
        self.run_id = run_id
        self.url = url
        fallback = journal_path(config.rootpath, None, run_id)
        self.journal: Journal = Journal(journal, run_id, fallback=fallback)
        self.saved: str | None = None
        self.warning: str | None = None
        self.flaky: dict[str, list[str]] = {}
        self._document: Any = None

    def _store(self) -> Store:
        from pytest_agent_eval.memory.store import Store

        assert self.url is not None
        return Store(self.url)

    def baseline(self, branch: str) -> list[CaseRecord]:
        """The records of the newest run of ``branch`` in the store.

        ``BaselineError`` when there is none.
        """
        from pytest_agent_eval.memory.store import StoreError
        from pytest_agent_eval.report.baseline import BaselineError

        if self.url is None:
            raise BaselineError(
                f"{STORE_PREFIX}{branch}: the run store is off (--agent-eval-store off)"
            )
        store = self._store()
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
    def pytest_sessionstart(self) -> None:
        from pytest_agent_eval.report.json_report import JsonReport

        self._document = JsonReport(
            self.config, Path(), self.collector
        )  # the run as the JSON report has it
        run = self._document.run_data(None)
        self.journal.run = {
            k: v for k, v in run.items() if k not in ("duration_s", "finished", "exit_status")
        }
        if self.collector.record_data:  # a resumed run: its journal starts with the records kept
            self._open_journal()

    def _open_journal(self) -> bool:
        if self.journal.opened:
            return True
        data = self.collector.record_data
        return self.journal.open([d for d in data if self.collector.final_record(d["nodeid"]) is d])

    @pytest.hookimpl(trylast=True)  # after the collector kept the report's record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.collector.final_record(report.nodeid)
        if data is not None and self._open_journal():
            self.journal.record(data)

    @pytest.hookimpl(
        wrapper=True, trylast=True
    )  # inside the other wrappers: before the terminal summary
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None]:
        if self.url is not None and self.collector.record_data:
            self._flaky()  # for the reports, written next
        yield  # the reports are written, the gates have decided the exit status
        if self.journal.opened:
            duration = round(time.perf_counter() - self._document.start, 3)
            self.journal.end(int(session.exitstatus), duration, self.collector.not_run())
        if self.url is not None and self.collector.record_data and self._document is not None:
            self._save(int(session.exitstatus), bool(session.shouldfail or session.shouldstop))

    def _flaky(self) -> None:
        """The run's flaky cases over the last runs in the store and this one.

        For the reports and the summary; a store that cannot be read is the warning of the save that
        follows.
        """
        from pytest_agent_eval.memory.store import StoreError
        from pytest_agent_eval.report.options import FLAKY

        data = self.collector.record_data
        try:
            store = self._store()
        except Exception:  # said by the save
            return
        try:
            self.flaky = store.flaky(nodeids=[d["nodeid"] for d in data], newest=data)
        except (StoreError, OSError):
            return
        finally:
            store.close()
        if self.flaky:
            self.config.stash[FLAKY] = self.flaky

    def _save(self, exit_status: int, stopped: bool) -> None:
        from pytest_agent_eval.memory.store import StoreError, run_row

        document = self._document.document(exit_status, stopped)
        try:
            store = self._store()
        except Exception as exc:  # a URL SQLAlchemy cannot read, a missing driver: one warning
            self.warning = f"agent eval store: the run was not saved: {exc}"
            return
        try:
            git, options = _git(self.config.rootpath), self._options()
            row = run_row(document, self.run_id, git, options, records=self.collector.records)
            store.save(row, document["cases"], self.journal.text_of)
            self.saved = str(store)
        except (StoreError, OSError) as exc:
            self.warning = f"agent eval store: the run was not saved: {exc}"
        finally:
            store.close()

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
        if self.journal.error is not None:
            terminalreporter.write_line(
                f"agent eval journal not written: {self.journal.error}", yellow=True
            )
        elif self.journal.moved is not None:
            terminalreporter.write_line(f"agent eval journal: {self.journal.moved}", yellow=True)
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
        self.journal.close()


def _git(directory: Path) -> dict[str, Any]:
    """The checkout's branch and whether tracked files changed.

    On a detached HEAD, the branch is the CI's.
    """
    out: dict[str, Any] = {}
    branch = _run_git(directory, "rev-parse", "--abbrev-ref", "HEAD")
    if branch == "HEAD":  # detached: the branch CI names
        branch = os.environ.get("GITHUB_HEAD_REF") or os.environ.get("GITHUB_REF_NAME") or None
    out["branch"] = branch
    status = _run_git(directory, "status", "--porcelain", "--untracked-files=no")
    out["dirty"] = None if status is None else bool(status)
    return out


def _run_git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
