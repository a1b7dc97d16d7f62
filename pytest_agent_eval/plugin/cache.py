"""The verdict cache (SPEC §25): ``--agent-eval-cache`` and ``--agent-eval-changed``.

``--agent-eval-cache off|read|write|on`` (ini ``agent_eval_cache``; default off);
``--agent-eval-changed``: the cache read and written, only the cases whose key changed run, the rest
are reported from the cache.

With ``read``, an eval item whose key (``report.verdict_cache.KeyParts``) has a stored passed or
failed record is not run: its record is that one, marked ``cached``, keeping the id of the run that
made it (``run_id``) and its trace ids, and the item passes or fails as it did. With ``write``,
every passed or failed record of a case that ran is stored under its key. Errors, skips and
infrastructure failures are never stored. An agent from a fixture (no ``module:attr`` reference) is
cached only with a declared ``agent_version`` (ini ``agent_eval_agent_version``): its source is not
known. The judge-verdict cache (``checks.judge.JUDGMENTS``) keeps each judge's replies by its model
and the prompt it was sent, so a judgment is paid for once even when the case's key changed.

Both live in the run store (SPEC §24, ``--agent-eval-store``: SQLite ``.agent-eval/runs.db`` or a
team's PostgreSQL), tables ``verdicts`` and ``judgments``. Every process that runs cases reads it
(the keys of this plugin version once, a row at each hit); the controller (or the only process)
writes what the run made, in one transaction at the session's end: records and judgments travel on
the items' reports. A row read back is checked field by field: one that cannot be trusted is a miss,
said once. The ``.agent-eval/cache.db`` of earlier builds is no longer read (said once; delete it).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from pytest_agent_eval.compat import is_worker
from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.memory.quick import QuickStore
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.plugin.options import Settings

MODES = ("off", "read", "write", "on")
CACHED = pytest.StashKey[dict[str, Any]]()
"""On an item whose record comes from the cache: that record."""
OLD_FILE = ".agent-eval/cache.db"
"""Where earlier builds kept the verdict cache (an SQLite file of its own): no longer read."""
KEY = "agent_eval_cache_key"
"""The report attribute carrying a case's cache key to the controller (which stores its record)."""
JUDGED = "agent_eval_judged"
"""The report attribute carrying the judgments a process made to the controller."""
DISTRUSTED = "agent_eval_cache_distrusted"
"""The report attribute carrying why cache rows were not trusted to the controller (said once)."""


class Cache:
    """A plugin object in every process: looks cases and judgments up, stores what the run made.

    Cases and judgments are looked up where cases run; the controller stores what the run made.
    """

    def __init__(self, config: pytest.Config, url: str, read: bool, write: bool) -> None:
        self.config = config
        self.url = url
        self.read = read
        self.write = write
        self._store: Store | None = None
        self._reader: QuickStore | Store | None = None
        self._absent = False
        """Whether the store's SQLite file does not exist (nothing to read)."""
        self._keys: dict[str, set[str]] = {}
        """The keys stored of each table (``verdicts``: of this plugin version), read once."""
        self._lock = threading.RLock()
        self._fingerprints: dict[str, str] = {}
        self._session: _Session | None = None
        self.keys: dict[str, str] = {}
        """Node id -> key of the items this process looked up (to store what they did)."""
        self.judgments = JudgeCache(self)
        self.problem: str | None = None
        """Why the store cannot be used (said once; every case runs)."""
        self.distrusted: list[str] = []
        """Why rows read back were not trusted, not yet sent to the controller."""
        self.told: list[str] = []
        """On the controller: every row not trusted (the summary says how many, and the first)."""
        self.verdicts: dict[str, dict[str, Any]] = {}
        """On the controller: the records to store, by key."""
        self.judged: dict[str, dict[str, Any]] = {}
        """On the controller: the judgments to store, by key."""
        self.saved: tuple[int, int] | None = None

    def store(self) -> Store | None:
        """The run store, opened once; ``None`` when it cannot be used (:attr:`problem`)."""
        with self._lock:
            if self._store is None and self.problem is None:
                from pytest_agent_eval.memory.store import Store, StoreError

                try:
                    store = Store(self.url)
                    store.open()
                except (StoreError, OSError, ImportError) as exc:
                    self.problem = f"the run store cannot be used ({exc}): every case runs"
                    return None
                self._store = store
            return self._store

    def reader(self) -> QuickStore | Store | None:
        """The store to read, opened once; ``None``: nothing to read (no store yet, or a problem).

        A SQLite file at this release's schema is read through ``sqlite3`` (``memory.quick``:
        SQLAlchemy does not load to look cases up); a missing file has nothing to read; any other
        store (PostgreSQL, an older SQLite file) through :meth:`store`.
        """
        with self._lock:
            if self._reader is None and self.problem is None and not self._absent:
                from pytest_agent_eval.memory.quick import QuickStore, sqlite_file
                from pytest_agent_eval.memory.rows import StoreError

                path = sqlite_file(self.url)
                if path is not None and not path.exists():
                    self._absent = True
                    return None
                try:
                    quick = QuickStore.open(path, threads=True) if path is not None else None
                except (StoreError, OSError) as exc:
                    self.problem = f"the run store cannot be used ({exc}): every case runs"
                    return None
                self._reader = quick if quick is not None else self.store()
            return self._reader

    def _row(self, table: str, key: str) -> dict[str, Any] | None:
        """The row of ``key`` in the cache table ``table``; ``None``: none to read."""
        from pytest_agent_eval.memory.rows import StoreError

        store = self.reader()
        if store is None:
            return None
        with self._lock:
            try:
                return store.cache_row(table, key)
            except (StoreError, OSError) as exc:
                self.problem = self.problem or f"the run store cannot be read ({exc})"
                return None

    def stored_keys(self, table: str, version: str | None) -> set[str]:
        """The keys of the cache table ``table`` (none when the store cannot be read)."""
        from pytest_agent_eval.memory.rows import StoreError

        store = self.reader()
        if store is None:
            return set()
        with self._lock:
            try:
                return store.cache_keys(table, version)
            except (StoreError, OSError) as exc:
                self.problem = self.problem or f"the run store cannot be read ({exc})"
                return set()

    def key(self, item: pytest.Item, case: Case) -> str | None:
        """The item's cache key; ``None`` when its agent cannot be fingerprinted.

        An agent from a fixture, without a declared version, cannot.
        """
        from pytest_agent_eval.plugin.prepare import agent_ref
        from pytest_agent_eval.report.case_input import content_hash
        from pytest_agent_eval.report.verdict_cache import KeyParts, agent_fingerprint

        session = self._session or self._session_parts(item.config)
        ref = agent_ref(case, session.settings)
        if ref is None and session.version is None:
            return None
        label = repr(ref)
        if label not in self._fingerprints:
            root = item.config.rootpath
            self._fingerprints[label] = agent_fingerprint(ref, root, session.version)
        if session.mocks is None:  # a bad responses file fails the case when it runs: not cached
            return None
        traffic = session.settings.traffic.record
        model = os.environ.get("AGENT_EVAL_LLM_MODEL")
        parts = KeyParts(
            content_hash=content_hash(case),
            agent=self._fingerprints[label],
            settings={
                "llm_model": model,
                "repeat": session.settings.repeat,
                "require_llm": session.require_llm,
                "agent_name": case.agent_name,
                "traffic": traffic,
                "cassette": _cassette(item, case) if traffic else None,
            },
            judge_model=model,
            judge_prompt=session.judge_prompt,
            mocks=session.mocks,
        )
        return parts.key()

    def _session_parts(self, config: pytest.Config) -> _Session:
        """The parts of every key that are the session's, read once (:meth:`key`)."""
        from pytest_agent_eval.checks.judge import PROMPT, REFERENCE_RUBRIC
        from pytest_agent_eval.plugin.prepare import session_responses
        from pytest_agent_eval.plugin.state import get_state

        try:
            mocks: dict[str, str] | None = {
                name: repr(response) for name, response in session_responses(config).items()
            }
        except Exception:  # a bad responses file (said by every case that runs)
            mocks = None
        self._session = _Session(
            settings=get_state(config).settings,
            version=str(config.getini("agent_eval_agent_version") or "").strip() or None,
            require_llm=bool(config.getini("agent_eval_require_llm")),
            judge_prompt=PROMPT + REFERENCE_RUBRIC,
            mocks=mocks,
        )
        return self._session

    def lookup(self, item: pytest.Item, case: Case) -> dict[str, Any] | None:
        """The stored record to report instead of running the case; ``None``: run it."""
        from pytest_agent_eval.version import __version__

        key = self.key(item, case)
        if key is None:
            return None
        self.keys[item.nodeid] = key
        row = self.stored("verdicts", key, __version__)
        return None if row is None else self._trusted(row, case, item.nodeid)

    def stored(self, table: str, key: str, version: str | None = None) -> dict[str, Any] | None:
        """The row of ``key`` in the cache table ``table`` when the cache is read; ``None``: a miss.

        Of plugin ``version`` only, when given.
        """
        if not self.read:
            return None
        with self._lock:
            keys = self._keys.get(table)
            if keys is None:
                keys = self._keys[table] = self.stored_keys(table, version)
        if key not in keys:
            return None
        row = self._row(table, key)
        if row is None or (version is not None and row.get("version") != version):
            return None
        return row

    def forget(self, table: str, key: str) -> None:
        """``key`` is not to be read again from the cache table ``table`` in this process."""
        with self._lock:
            self._keys.get(table, set()).discard(key)

    def _trusted(self, row: dict[str, Any], case: Case, nodeid: str) -> dict[str, Any] | None:
        """The row's record, checked field by field, with its run's id; ``None``: not trusted.

        Why it is not is kept for the summary.
        """
        from pytest_agent_eval.report.case_input import content_hash
        from pytest_agent_eval.report.record import CaseRecord
        from pytest_agent_eval.report.verdict_cache import trusted

        run_id = row.get("run_id")
        record, why = trusted(row.get("record"), case.id, content_hash(case))  # type: ignore[arg-type]
        if record is not None and run_id is not None and not isinstance(run_id, str):
            record, why = None, f"run_id: {run_id!r} is not a run's id"
        if record is not None:
            try:  # the record as the reports make it (a field of a newer report would fail here)
                CaseRecord.from_dict({**record, "run_id": run_id})
            except (TypeError, ValueError) as exc:
                record, why = None, f"{type(exc).__name__}: {exc}"
        if record is None:
            with self._lock:
                self.distrusted.append(f"{nodeid}: {why}")
            return None
        return {**record, "run_id": run_id}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Put on the item's call report what the controller needs of this process.

        The item's key, the judgments made since the last report, why rows were not trusted.
        """
        report = yield
        if call.when != "call":
            return report
        key = self.keys.get(item.nodeid)
        if key is not None:
            setattr(report, KEY, key)
        with self._lock:
            made, self.judgments.made = self.judgments.made, []
            distrusted, self.distrusted = self.distrusted, []
        if made:
            setattr(report, JUDGED, made)
        if distrusted:
            setattr(report, DISTRUSTED, distrusted)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """On the controller: keep what the report carries to store it at the end."""
        if report.when != "call" or is_worker(self.config):
            return
        from pytest_agent_eval.report.collector import ATTRIBUTE

        self.told += getattr(report, DISTRUSTED, None) or []
        if self.write:
            for entry in getattr(report, JUDGED, None) or []:
                self.judged[entry["key"]] = entry
        key = getattr(report, KEY, None)
        data = getattr(report, ATTRIBUTE, None)
        if not self.write or not isinstance(key, str) or not isinstance(data, dict):
            return
        if data.get("cached") or data.get("outcome") not in ("passed", "failed"):
            return
        self.verdicts[key] = {"nodeid": report.nodeid, "record": data}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        """On the controller: store the run's records and judgments, in one transaction."""
        if is_worker(self.config):
            return
        with self._lock:  # the judgments this process made after its last report
            for entry in self.judgments.made:
                self.judged[entry["key"]] = entry
            self.judgments.made = []
        if not (self.verdicts or self.judged):
            return
        self._save()

    def _save(self) -> None:
        from pytest_agent_eval.memory.store import JUDGMENTS, VERDICTS, StoreError
        from pytest_agent_eval.version import __version__

        store = self.store()
        if store is None:
            return
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        memory = self.config.pluginmanager.get_plugin("agent_eval_run_memory")
        run_id = getattr(memory, "run_id", None)
        verdicts = []
        for key, kept in self.verdicts.items():
            try:
                text = json.dumps(kept["record"], ensure_ascii=False, allow_nan=False)
            except ValueError:  # a number JSON cannot hold: not cached
                continue
            row = {"key": key, "nodeid": kept["nodeid"], "version": __version__}
            verdicts.append({**row, "run_id": run_id, "record": text, "stored": now})
        judged = [
            {"key": k, "model": j["model"], "replies": json.dumps(j["replies"]), "stored": now}
            for k, j in self.judged.items()
        ]
        try:
            store.cache({VERDICTS: verdicts, JUDGMENTS: judged})
        except (StoreError, OSError) as exc:
            self.problem = self.problem or f"the run store was not written ({exc})"
            return
        self.saved = (len(verdicts), len(judged))

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, str] | None:
        """``PASSED (cached)`` / ``FAILED (cached)`` (with ``-v``) for a case from the cache.

        A plain word, coloured by its outcome as pytest colours any: pytest 8.0 (the declared
        minimum) writes a ``(word, markup)`` pair as it is in the ``-r`` short summary.
        """
        if report.when != "call":
            return None
        from pytest_agent_eval.report.collector import ATTRIBUTE

        data = getattr(report, ATTRIBUTE, None)
        if not isinstance(data, dict) or not data.get("cached"):
            return None
        if report.passed:
            return "passed", ".", "PASSED (cached)"
        if report.failed:
            return "failed", "F", "FAILED (cached)"
        return None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.problem is not None:
            terminalreporter.write_line(f"agent eval cache: {self.problem}", yellow=True)
        if self.told:
            count = len(self.told)
            terminalreporter.write_line(
                f"agent eval cache: {count} stored entr{'ies' if count > 1 else 'y'} could not be "
                f"trusted and {'were' if count > 1 else 'was'} not reused (run or asked again): "
                f"{self.told[0]}",
                yellow=True,
            )
        if (self.config.rootpath / OLD_FILE).exists():
            terminalreporter.write_line(
                f"agent eval cache: {OLD_FILE} is no longer read: the verdict cache is in the run "
                "store now (--agent-eval-store); delete the file",
                yellow=True,
            )
        if self.saved is not None and self.config.get_verbosity() >= 1:
            terminalreporter.write_line(
                f"agent eval cache: {self.saved[0]} records and {self.saved[1]} judgments stored "
                f"in {self._store}"
            )

    def pytest_unconfigure(self) -> None:
        from pytest_agent_eval.checks import judge

        if judge.JUDGMENTS is self.judgments:
            judge.JUDGMENTS = None
        if self._reader is not None and self._reader is not self._store:
            self._reader.close()
        if self._store is not None:
            self._store.close()


class _Session(NamedTuple):
    """The parts of every cache key that are the session's (``Cache.key``), read once."""

    settings: Settings
    version: str | None
    """The declared ``agent_version`` (ini), if any."""
    require_llm: bool
    judge_prompt: str
    mocks: dict[str, str] | None
    """The session's tool mocks (``repr`` of each response); ``None``: its file cannot be read."""


class JudgeCache:
    """The judge-verdict cache of one process (``checks.judge.Judgments``).

    The judgments of this run first, then those of the store.
    """

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.known: dict[str, list[str]] = {}
        """The judgments this process made or read, by key."""
        self.made: list[dict[str, Any]] = []
        """Made since the last report (for the controller to store)."""

    def get(self, key: str) -> list[str] | None:
        if key in self.known:
            return self.known[key]
        row = self.cache.stored("judgments", key)
        if row is None:
            return None
        try:
            replies = json.loads(row.get("replies"))  # type: ignore[arg-type]
        except (TypeError, ValueError, RecursionError):
            replies = None
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            self.distrust(key, "replies: not a list of texts")
            return None
        return replies

    def put(self, key: str, model: str, replies: list[str]) -> None:
        with self.cache._lock:
            self.known[key] = replies
            if self.cache.write:
                self.made.append({"key": key, "model": model, "replies": replies})

    def distrust(self, key: str, why: str) -> None:
        self.cache.forget("judgments", key)
        with self.cache._lock:
            self.known.pop(key, None)
            self.cache.distrusted.append(f"judgment {key[:12]}: {why}")


def _cassette(item: pytest.Item, case: Case) -> str | None:
    """A hash of the case's cassette (what a replayed case is answered with); ``None``: none."""
    import hashlib

    from pytest_agent_eval.plugin.state import get_state
    from pytest_agent_eval.traffic.cassette import cassette_path

    folder = get_state(item.config).settings.traffic.cassettes
    beside = folder is None
    path = cassette_path(
        folder or case.path.parent / "cassettes",
        case.path,
        case.id,
        None if beside else item.config.rootpath,
    )
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def lookup(item: pytest.Item, case: Case) -> dict[str, Any] | None:
    """The cached record of ``item`` (the cache read and a hit), else ``None``."""
    cache = item.config.pluginmanager.get_plugin("agent_eval_cache_plugin")
    if not isinstance(cache, Cache):
        return None
    record = cache.lookup(item, case)
    if record is not None:
        item.stash[CACHED] = record
    return record


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--agent-eval-cache",
        dest="agent_eval_cache",
        choices=MODES,
        default=None,
        help="the verdict cache, in the run store: read (reuse a case's record when nothing it "
        "depends on changed), write, on (both), off (default; ini: agent_eval_cache)",
    )
    group.addoption(
        "--agent-eval-changed",
        dest="agent_eval_changed",
        action="store_true",
        default=False,
        help="run only the cases whose cache key changed; report the others from the verdict "
        "cache (cache on)",
    )
    parser.addini("agent_eval_cache", "the verdict cache: off, read, write or on", default="off")
    parser.addini(
        "agent_eval_agent_version", "the agent's version, for the verdict cache's key", default=""
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = (
        config.getoption("agent_eval_cache", None)
        or str(config.getini("agent_eval_cache") or "off").strip()
    )
    if config.getoption("agent_eval_changed", False):
        mode = "on"
    if mode not in MODES:
        raise pytest.UsageError(f"ini agent_eval_cache = {mode!r}: give one of {', '.join(MODES)}")
    if mode == "off":
        return
    from pytest_agent_eval.plugin.memory import given_store, store_url_of

    asked = (
        "--agent-eval-changed"
        if config.getoption("agent_eval_changed", False)
        else (f"--agent-eval-cache {mode}")
    )
    if importlib.util.find_spec("sqlalchemy") is None:
        raise pytest.UsageError(
            f"{asked}: the verdict cache lives in the run store, which needs SQLAlchemy: "
            "pip install 'pytest-agent-evalset[store]'"
        )
    url = store_url_of(config)
    if url is None:
        raise pytest.UsageError(
            f"{asked}: the verdict cache lives in the run store, which is off "
            f"(--agent-eval-store {given_store(config) or 'off'}): give a store, or leave the "
            "cache off"
        )
    cache = Cache(config, url, read=mode in ("read", "on"), write=mode in ("write", "on"))
    config.pluginmanager.register(cache, "agent_eval_cache_plugin")
    from pytest_agent_eval.checks import judge

    judge.JUDGMENTS = cache.judgments
