"""The run store (SPEC §24): every run and the JSON record of each of its cases, kept in a database.

In SQLite (by default ``.agent-eval/runs.db`` under the rootdir) or PostgreSQL, through SQLAlchemy
Core; its schema is versioned by Alembic (the migrations in ``memory/migrations/versions``, run in
code: no ``alembic.ini``).

Opening a store reads its schema version (``alembic_version``) with SQLAlchemy alone; Alembic is
imported only when the store is new or older than this release. A store of a newer version (an
unknown revision) is refused with what to do. Writers serialise: SQLite's ``BEGIN IMMEDIATE`` takes
the write lock at the start of a transaction (waiting up to 60 s for another writer), PostgreSQL's
transaction-scoped advisory lock guards a migration; a run is saved in one transaction, so two
processes writing one store lose nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from pytest_agent_eval.memory.rows import HEAD as HEAD
from pytest_agent_eval.memory.rows import KNOWN as KNOWN
from pytest_agent_eval.memory.rows import StoreError as StoreError
from pytest_agent_eval.memory.rows import case_row, flaky_in, newer_schema
from pytest_agent_eval.memory.rows import flaky_of as flaky_of
from pytest_agent_eval.memory.rows import run_row as run_row
from pytest_agent_eval.report.baseline import records_of
from pytest_agent_eval.report.record import CaseRecord

_LOCK_KEY = 0x61676576  # "agev": PostgreSQL's advisory lock around a migration
_WAIT_S = 60

METADATA = sa.MetaData()
RUNS = sa.Table(
    "runs",
    METADATA,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("started", sa.String(40)),
    sa.Column("ended", sa.String(40)),
    sa.Column("saved", sa.String(40)),
    sa.Column("git_commit", sa.String(64)),
    sa.Column("git_branch", sa.String(255)),
    sa.Column("git_dirty", sa.Boolean),
    sa.Column("agents", sa.Text),
    sa.Column("models", sa.Text),
    sa.Column("options", sa.Text),
    sa.Column("shard", sa.String(32)),
    sa.Column("finished", sa.Boolean),
    sa.Column("exit_status", sa.Integer),
    sa.Column("total", sa.Integer),
    sa.Column("passed", sa.Integer),
    sa.Column("failed", sa.Integer),
    sa.Column("errors", sa.Integer),
    sa.Column("skipped", sa.Integer),
    sa.Column("pass_rate", sa.Float),
    sa.Column("cost", sa.Float),
    sa.Column("p50_latency_s", sa.Float),
    sa.Column("p95_latency_s", sa.Float),
    sa.Column("source", sa.Text),
    sa.Column("run", sa.Text),
)
"""The tables as the queries use them; created by the migrations, never by ``create_all``."""
CASES = sa.Table(
    "cases",
    METADATA,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("nodeid", sa.Text, primary_key=True),
    sa.Column("file", sa.Text),
    sa.Column("agent", sa.String(255)),
    sa.Column("tags", sa.Text),
    sa.Column("outcome", sa.String(16)),
    sa.Column("content_hash", sa.String(64)),
    sa.Column("score", sa.Float),
    sa.Column("cost", sa.Float),
    sa.Column("latency_s", sa.Float),
    sa.Column("record", sa.Text),
)
VERDICTS = sa.Table(
    "verdicts",
    METADATA,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("nodeid", sa.Text),
    sa.Column("version", sa.String(40)),
    sa.Column("run_id", sa.String(64)),
    sa.Column("record", sa.Text),
    sa.Column("stored", sa.String(40)),
)
"""The verdict cache (SPEC §25): a case's record by its cache key, the plugin version and the run
that made it.
"""
JUDGMENTS = sa.Table(
    "judgments",
    METADATA,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(255)),
    sa.Column("replies", sa.Text),
    sa.Column("stored", sa.String(40)),
)
"""The judge-verdict cache (SPEC §25): a judge's replies (a JSON list) by model, prompt and samples.
"""
_VERSION = sa.Table("alembic_version", sa.MetaData(), sa.Column("version_num", sa.String(32)))


def _none(data: dict[str, Any]) -> str | None:
    return None


def shown(url: str) -> str:
    """``url`` fit to show: its password as ``***``; a SQLite store as its file."""
    try:
        parsed = make_url(url)
    except (SQLAlchemyError, ValueError):
        return "<a store URL that cannot be read>"
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return parsed.render_as_string(hide_password=True).replace(
        "postgresql+psycopg://", "postgresql://"
    )


def _scrubbed(url: str, text: str) -> str:
    try:
        password = make_url(url).password
    except (SQLAlchemyError, ValueError):
        password = None
    return text.replace(str(password), "***") if password else text


def why(url: str, exc: BaseException) -> str:
    """The reason a store failed, on one line, without its password or SQLAlchemy's link."""
    origin = getattr(exc, "orig", None) or exc
    text = " ".join(str(origin).split()) or type(origin).__name__
    return _scrubbed(url, text)


@dataclass
class RunSummary:
    """One row of ``agent-eval runs`` and of the viewer's runs."""

    id: str
    started: str
    git_branch: str | None
    git_commit: str | None
    git_dirty: bool | None
    agents: list[str]
    total: int
    passed: int
    failed: int
    errors: int
    skipped: int
    pass_rate: float | None
    cost: float | None
    p50_latency_s: float | None
    p95_latency_s: float | None
    shard: str | None
    source: str | None


class Store:
    """A run store at ``url`` (``memory.location.store_url``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:")
        if self.sqlite:
            database = make_url(url).database
            if database:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
        self.engine = _engine(url, self.sqlite)
        self._ready = False

    def __str__(self) -> str:
        return shown(self.url)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A transaction that holds the write lock (SQLite) with the schema made current."""
        with self.engine.begin() as conn:
            self._current(conn)
            yield conn

    def open(self) -> None:
        """Check (and, new or older, migrate) the schema.

        ``StoreError`` when the store cannot be used.
        """
        try:
            with self.engine.begin() as conn:
                self._current(conn)
        except SQLAlchemyError as exc:
            raise StoreError(f"{self}: {why(self.url, exc)}") from None

    def _current(self, conn: Connection) -> None:
        if self._ready:
            return
        version = _version(conn)
        if version is not None and version not in KNOWN:
            raise StoreError(newer_schema(str(self), version))
        if version != HEAD:
            if not self.sqlite:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
                version = _version(conn)  # another process may have migrated while this one waited
            if version != HEAD:
                _migrate(conn)
        self._ready = True

    def has_run(self, run_id: str) -> bool:
        with self.engine.connect() as conn:
            self._current(conn)
            return conn.execute(sa.select(RUNS.c.id).where(RUNS.c.id == run_id)).first() is not None

    def save(
        self,
        row: dict[str, Any],
        cases: list[dict[str, Any]],
        text_of: Callable[[dict[str, Any]], str | None] = _none,
    ) -> None:
        """Save one run (``run_row``) and its cases' records, in one transaction.

        ``text_of(record)``: its JSON text when already made (the journal's line), else ``None``.
        """
        rows = [case_row(row["id"], data, text_of(data)) for data in cases]
        try:
            with self._writing() as conn:
                conn.execute(sa.insert(RUNS), [row])
                if rows:
                    conn.execute(sa.insert(CASES), rows)
        except SQLAlchemyError as exc:
            raise StoreError(f"{self}: {why(self.url, exc)}") from None

    def cache_keys(self, name: str, version: str | None = None) -> set[str]:
        """The keys of the cache table ``name`` (``verdicts``: of plugin ``version`` only)."""
        table = METADATA.tables[name]
        query = sa.select(table.c.key)
        if version is not None:
            query = query.where(table.c.version == version)
        with self._reading() as conn:
            return {key for (key,) in conn.execute(query)}

    def cache_row(self, name: str, key: str) -> dict[str, Any] | None:
        """The row of ``key`` in the cache table ``name``; ``None`` when there is none."""
        table = METADATA.tables[name]
        with self._reading() as conn:
            row = conn.execute(sa.select(table).where(table.c.key == key)).first()
        return None if row is None else dict(row._mapping)

    def cache(self, rows: dict[sa.Table, list[dict[str, Any]]]) -> None:
        """Store cache rows in one transaction, each replacing a stored row of the same key."""
        try:
            with self._writing() as conn:
                for table, items in rows.items():
                    if items:
                        conn.execute(_upsert(conn, table), items)
        except SQLAlchemyError as exc:
            raise StoreError(f"{self}: {why(self.url, exc)}") from None

    def runs(self, branch: str | None = None, limit: int | None = None) -> list[RunSummary]:
        """The runs, newest first (of ``branch`` when given)."""
        query = sa.select(*(RUNS.c[name] for name in RunSummary.__dataclass_fields__))
        if branch is not None:
            query = query.where(RUNS.c.git_branch == branch)
        query = query.order_by(RUNS.c.started.desc(), RUNS.c.saved.desc()).limit(limit)
        with self._reading() as conn:
            return [_summary(dict(row._mapping)) for row in conn.execute(query)]

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                self._current(conn)
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"{self}: {why(self.url, exc)}") from None

    def run(self, run_id: str) -> dict[str, Any] | None:
        """One run's row with its ``run`` metadata read back; ``None`` when there is no such run."""
        with self._reading() as conn:
            row = conn.execute(sa.select(RUNS).where(RUNS.c.id == run_id)).first()
        if row is None:
            return None
        out = dict(row._mapping)
        for key in ("agents", "models", "options", "run"):
            out[key] = json.loads(out[key])
        return out

    def cases(self, run_id: str) -> list[dict[str, Any]]:
        """The records of a run's cases, by node id."""
        query = sa.select(CASES.c.record).where(CASES.c.run_id == run_id).order_by(CASES.c.nodeid)
        with self._reading() as conn:
            return [json.loads(text) for (text,) in conn.execute(query)]

    def newest(self, branch: str) -> tuple[str, list[CaseRecord]] | None:
        """``(run id, records)`` of the newest run of ``branch``; ``None`` when it has none."""
        found = self.runs(branch, limit=1)
        if not found:
            return None
        return found[0].id, records_of(self.cases(found[0].id))

    def history(self, nodeid: str, limit: int = 50) -> list[dict[str, Any]]:
        """A case across runs, newest first.

        Each row: the run, its start and branch, the case's figures, its ``trace_id``, its record
        and the template its run linked traces with (``trace_url``, ``None`` when it had none).
        """
        query = (
            sa.select(
                CASES.c.run_id,
                RUNS.c.started,
                RUNS.c.git_branch,
                RUNS.c.git_commit,
                CASES.c.outcome,
                CASES.c.content_hash,
                CASES.c.score,
                CASES.c.cost,
                CASES.c.latency_s,
                CASES.c.record,
                RUNS.c.run,
            )
            .join(RUNS, RUNS.c.id == CASES.c.run_id)
            .where(CASES.c.nodeid == nodeid)
            .order_by(RUNS.c.started.desc(), RUNS.c.saved.desc())
            .limit(limit)
        )
        with self._reading() as conn:
            rows = [dict(row._mapping) for row in conn.execute(query)]
        for row in rows:
            record, run = json.loads(row.pop("record") or "{}"), json.loads(row.pop("run") or "{}")
            row["trace_id"] = record.get("trace_id") if isinstance(record, dict) else None
            row["record"] = record
            row["trace_url"] = run.get("trace_url") if isinstance(run, dict) else None
        return rows

    def flaky(
        self,
        last: int = 10,
        nodeids: list[str] | None = None,
        newest: list[dict[str, Any]] | None = None,
    ) -> dict[str, list[str]]:
        """The flaky cases of the last ``last`` runs: node id -> the outcomes, oldest first.

        Cases whose outcome flipped between passing and failing over the last ``last`` runs while
        their content hash stayed the same (of ``nodeids`` only, when given). ``newest``: the
        records of a run not stored yet, taken as the newest of the ``last``.
        """
        if newest is not None:
            last -= 1
        with self._reading() as conn:
            ids = [
                r
                for (r,) in conn.execute(
                    sa.select(RUNS.c.id)
                    .order_by(RUNS.c.started.desc(), RUNS.c.saved.desc())
                    .limit(last)
                )
            ]
            query = (
                sa.select(CASES.c.nodeid, CASES.c.outcome, CASES.c.content_hash, RUNS.c.started)
                .join(RUNS, RUNS.c.id == CASES.c.run_id)
                .where(CASES.c.run_id.in_(ids))
                .order_by(CASES.c.nodeid, RUNS.c.started, RUNS.c.saved)
            )
            rows = (
                [(r.nodeid, r.outcome, r.content_hash) for r in conn.execute(query)] if ids else []
            )
        return flaky_in(rows, nodeids, newest)


def _engine(url: str, sqlite: bool) -> Engine:
    if not sqlite:
        return sa.create_engine(url, connect_args={"connect_timeout": 10}, pool_pre_ping=False)
    engine = sa.create_engine(url, connect_args={"timeout": _WAIT_S})

    @sa.event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = (
            None  # SQLAlchemy's recipe: the BEGIN below is the only one
        )
        dbapi_connection.execute("PRAGMA foreign_keys = ON")

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock now: no two writers interleave

    return engine


def _upsert(conn: Connection, table: sa.Table) -> Any:
    """An ``INSERT`` (of many rows: executemany) that updates the row of a key stored already.

    SQLite's and PostgreSQL's ``ON CONFLICT``: two runs caching one key at once both succeed.
    """
    from sqlalchemy.dialects import postgresql, sqlite

    dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table)
    updated = {c.name: statement.excluded[c.name] for c in table.columns if c.name != "key"}
    return statement.on_conflict_do_update(index_elements=[table.c.key], set_=updated)


def _version(conn: Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    versions = [v for (v,) in conn.execute(sa.select(_VERSION.c.version_num))]
    return versions[0] if versions else None


def _migrate(conn: Connection) -> None:
    """Upgrade the schema to ``HEAD`` with Alembic, in the caller's transaction."""
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    script = ScriptDirectory.from_config(config)

    def upgrade(revision: Any, context: Any) -> Any:
        return script._upgrade_revs(HEAD, revision)

    with EnvironmentContext(config, script, fn=upgrade, destination_rev=HEAD) as env:
        env.configure(connection=conn, target_metadata=None)
        env.run_migrations()


def _summary(row: dict[str, Any]) -> RunSummary:
    row["agents"] = json.loads(row["agents"] or "[]")
    return RunSummary(**row)


def imported_id(text: str) -> str:
    """The id of a run imported from a report, made from its content.

    So importing the report again finds it stored.
    """
    return "import-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
