"""A run's own save to a current SQLite store, through the standard library's ``sqlite3``.

The flaky cases are read and the run saved without loading SQLAlchemy, whose import alone costs more
than the whole save (SPEC §24, §27). Only for a SQLite file whose schema is this release's
(``HEAD``), or none yet: a missing store is made here at ``HEAD`` (the tables Alembic's migrations
make, stamped as Alembic stamps them; the first run of a fresh clone would otherwise load SQLAlchemy
and Alembic for it, a second of CPU); an older store (a migration), PostgreSQL and every command go
through ``memory.store`` (SQLAlchemy Core, Alembic). The statements are those ``memory.store`` runs
on SQLite, over the same tables (the columns of ``memory.rows``), with the same write lock (``BEGIN
IMMEDIATE``, waiting up to 60 s for another writer) and one transaction per run, so two processes
writing one store lose nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agent_eval.memory.rows import (
    CACHE_COLUMNS,
    CASE_COLUMNS,
    FAILING,
    HEAD,
    KNOWN,
    RUN_COLUMNS,
    StoreError,
    case_values,
    flaky_in,
    newer_schema,
)

_WAIT_S = 60
_PREFIX = "sqlite:///"
_RUNS_BY_AGE = "ORDER BY runs.started DESC, runs.saved DESC"
_FAILED_OF_RUN = (
    "SELECT nodeid FROM cases WHERE run_id = ? AND outcome IN "
    f"({', '.join(repr(outcome) for outcome in FAILING)})"
)
_ROWS_OF_RUN = "SELECT nodeid, outcome, content_hash FROM cases WHERE run_id = ?"
_FEW = 500
"""Up to this many cases that failed, their rows are read by node id (bound parameters)."""
_HEAD_SCHEMA = (
    """CREATE TABLE alembic_version (
        version_num VARCHAR(32) NOT NULL,
        CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
    )""",
    """CREATE TABLE runs (
        id VARCHAR(64) NOT NULL, started VARCHAR(40) NOT NULL, ended VARCHAR(40),
        saved VARCHAR(40) NOT NULL, git_commit VARCHAR(64), git_branch VARCHAR(255),
        git_dirty BOOLEAN, agents TEXT NOT NULL, models TEXT NOT NULL, options TEXT NOT NULL,
        shard VARCHAR(32), finished BOOLEAN NOT NULL, exit_status INTEGER,
        total INTEGER NOT NULL, passed INTEGER NOT NULL, failed INTEGER NOT NULL,
        errors INTEGER NOT NULL, skipped INTEGER NOT NULL, pass_rate FLOAT, cost FLOAT,
        p50_latency_s FLOAT, p95_latency_s FLOAT, source TEXT, run TEXT NOT NULL,
        PRIMARY KEY (id)
    )""",
    "CREATE INDEX ix_runs_started ON runs (started)",
    "CREATE INDEX ix_runs_git_branch ON runs (git_branch)",
    """CREATE TABLE cases (
        run_id VARCHAR(64) NOT NULL, nodeid TEXT NOT NULL, file TEXT NOT NULL,
        agent VARCHAR(255), tags TEXT NOT NULL, outcome VARCHAR(16) NOT NULL,
        content_hash VARCHAR(64), score FLOAT, cost FLOAT, latency_s FLOAT,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, nodeid),
        FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
    )""",
    "CREATE INDEX ix_cases_file ON cases (file)",
    "CREATE INDEX cases_by_nodeid ON cases (nodeid)",
    """CREATE TABLE verdicts (
        "key" VARCHAR(64) NOT NULL, nodeid TEXT NOT NULL, version VARCHAR(40) NOT NULL,
        run_id VARCHAR(64), record TEXT NOT NULL, stored VARCHAR(40) NOT NULL,
        PRIMARY KEY ("key")
    )""",
    "CREATE INDEX ix_verdicts_version ON verdicts (version)",
    """CREATE TABLE judgments (
        "key" VARCHAR(64) NOT NULL, model VARCHAR(255) NOT NULL, replies TEXT NOT NULL,
        stored VARCHAR(40) NOT NULL,
        PRIMARY KEY ("key")
    )""",
)
"""The store's schema at ``HEAD``, as the migrations (``migrations/versions``) make it on SQLite.

A test keeps the two equal (tables, columns, keys, indexes): a new migration changes both.
"""


def sqlite_file(url: str) -> Path | None:
    """The file of a plain SQLite URL (``sqlite:///PATH``); ``None`` for any other URL.

    ``memory.location`` makes such URLs of the default store and of a store given as a path.
    """
    if not url.startswith(_PREFIX) or "?" in url or len(url) == len(_PREFIX):
        return None
    return Path(url[len(_PREFIX) :])


def _insert(table: str, columns: tuple[str, ...], named: bool = True) -> str:
    names = ", ".join(columns)
    marks = ", ".join(f":{name}" if named else "?" for name in columns)
    return f"INSERT INTO {table} ({names}) VALUES ({marks})"


_INSERT_RUN = _insert("runs", RUN_COLUMNS)
_INSERT_CASE = _insert("cases", CASE_COLUMNS, named=False)
"""Bound by position: each case's row is a tuple (``case_values``), no name looked up per value."""


class QuickStore:
    """A current SQLite store, open: ``flaky`` and ``save`` as ``memory.store.Store`` has them."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn

    @classmethod
    def open(cls, path: Path, threads: bool = False, create: bool = False) -> QuickStore | None:
        """The store at ``path`` when it exists at this release's schema, else ``None``.

        ``None``: the store must go through ``memory.store`` (missing, new or older);
        ``StoreError`` when it cannot be used (not a database, a newer schema). ``threads``: the
        connection may be used from any thread (the caller serialises its use). ``create``: a
        missing store is made at ``HEAD`` (its directory too).
        """
        missing = not path.is_file()
        if missing:
            if not create:
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(
                path, timeout=_WAIT_S, isolation_level=None, check_same_thread=not threads
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: {_why(exc)}") from None
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            version = _create(conn) if missing else _version(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{path}: {_why(exc)}") from None
        if version is not None and version not in KNOWN:
            conn.close()
            raise StoreError(newer_schema(str(path), version))
        if version != HEAD:
            conn.close()
            return None
        return cls(path, conn)

    def __str__(self) -> str:
        return str(self.path)

    def close(self) -> None:
        self._conn.close()

    def flaky(
        self,
        last: int = 10,
        nodeids: list[str] | None = None,
        newest: list[dict[str, Any]] | None = None,
    ) -> dict[str, list[str]]:
        """As ``memory.store.Store.flaky``.

        Only the rows of cases that failed (or erred) in one of the runs read, or in ``newest``, are
        read in full: a case that never failed is not flaky (in a run that mostly passes, a few
        hundred rows instead of every case of every run). A run whose counts (``failed``,
        ``errors``) are 0 is not searched for them.
        """
        if newest is not None:
            last -= 1
        try:
            runs = self._conn.execute(
                f"SELECT id, failed, errors FROM runs {_RUNS_BY_AGE} LIMIT ?", (last,)
            ).fetchall()
            ids = [run_id for run_id, _, _ in runs]
            failed = {c["nodeid"] for c in newest or [] if c["outcome"] in FAILING}
            for run_id, failures, errors in runs:
                if failures == 0 and errors == 0:  # the run's counts: none of its cases failed
                    continue
                # by the primary key: the run's rows, no join
                failed.update(r for (r,) in self._conn.execute(_FAILED_OF_RUN, (run_id,)))
            if nodeids is not None:
                failed.intersection_update(nodeids)
            rows: list[tuple[str, str, str | None]] = []
            if len(failed) > _FEW:  # many failed: every row, as the whole runs
                for run_id in reversed(ids):  # oldest first: each case's rows in run order
                    rows += self._conn.execute(_ROWS_OF_RUN, (run_id,))
            elif failed:
                wanted = sorted(failed)
                of_wanted = f"{_ROWS_OF_RUN} AND nodeid IN ({', '.join('?' * len(wanted))})"
                for run_id in reversed(ids):
                    rows += self._conn.execute(of_wanted, (run_id, *wanted))
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: {_why(exc)}") from None
        if nodeids is not None and len(failed) <= _FEW:
            nodeids = [n for n in nodeids if n in failed]
        return flaky_in(rows, nodeids, newest)

    def save(
        self,
        row: dict[str, Any],
        cases: list[dict[str, Any]],
        text_of: Callable[[dict[str, Any]], str | None],
    ) -> None:
        """As ``memory.store.Store.save``: one run and its cases' records, in one transaction."""
        run_id = row["id"]
        rows = [case_values(run_id, data, text_of(data)) for data in cases]
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")  # the write lock now: no two writers interleave
            try:
                conn.execute(_INSERT_RUN, row)
                if rows:
                    conn.executemany(_INSERT_CASE, rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: {_why(exc)}") from None

    def cache_keys(self, table: str, version: str | None = None) -> set[str]:
        """As ``memory.store.Store.cache_keys``: the table by name (``verdicts``, ``judgments``)."""
        query = f"SELECT key FROM {_cache_table(table)}"
        try:
            if version is None:
                return {key for (key,) in self._conn.execute(query)}
            return {key for (key,) in self._conn.execute(f"{query} WHERE version = ?", (version,))}
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: {_why(exc)}") from None

    def cache_row(self, table: str, key: str) -> dict[str, Any] | None:
        """As ``memory.store.Store.cache_row``, the table by its name."""
        columns = CACHE_COLUMNS[_cache_table(table)]
        query = f"SELECT {', '.join(columns)} FROM {table} WHERE key = ?"
        try:
            row = self._conn.execute(query, (key,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self}: {_why(exc)}") from None
        return None if row is None else dict(zip(columns, row, strict=True))


def _cache_table(name: str) -> str:
    if name not in CACHE_COLUMNS:  # a name from this package's code, never from data
        raise ValueError(f"not a cache table: {name!r}")
    return name


def _version(conn: sqlite3.Connection) -> str | None:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if found is None:
        return None
    version = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if version is None else str(version[0])


def _create(conn: sqlite3.Connection) -> str | None:
    """Make an empty database the store at ``HEAD``; the version of any other, as it is.

    Under the write lock: of two processes making one store, the second finds it made.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM sqlite_master").fetchone() is None:
            for statement in _HEAD_SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD,))
        version = _version(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return version


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
