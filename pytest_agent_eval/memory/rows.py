"""The run store's rows as plain data (SPEC §24), without SQLAlchemy.

What a run and its cases are saved as, the flaky cases found in them, and the store's schema
versions: shared by ``memory.store`` (SQLAlchemy) and ``memory.quick`` (the run's own save to a
current SQLite store, which loads no SQLAlchemy).
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_agent_eval.report.record import CaseRecord

HEAD = "0002"
"""The newest schema revision this release knows (``migrations/versions``)."""
KNOWN = ("0001", "0002")
TRUST_FIGURES = ("judges", "injection")
"""A report's run-level figures of SPEC §26 (judge calibration, attack success rates), kept in a
run's ``run``.
"""
RUN_COLUMNS = (
    "id",
    "started",
    "ended",
    "saved",
    "git_commit",
    "git_branch",
    "git_dirty",
    "agents",
    "models",
    "options",
    "shard",
    "finished",
    "exit_status",
    "total",
    "passed",
    "failed",
    "errors",
    "skipped",
    "pass_rate",
    "cost",
    "p50_latency_s",
    "p95_latency_s",
    "source",
    "run",
)
"""The columns of ``runs`` (``memory.store.RUNS``), in order."""
CASE_COLUMNS = (
    "run_id",
    "nodeid",
    "file",
    "agent",
    "tags",
    "outcome",
    "content_hash",
    "score",
    "cost",
    "latency_s",
    "record",
)
"""The columns of ``cases`` (``memory.store.CASES``), in order."""
CACHE_COLUMNS = {
    "verdicts": ("key", "nodeid", "version", "run_id", "record", "stored"),
    "judgments": ("key", "model", "replies", "stored"),
}
"""The columns of the verdict cache's tables (``memory.store.VERDICTS``, ``JUDGMENTS``)."""


class StoreError(Exception):
    """A store that cannot be used.

    The message names it (its password left out) and says what to do.
    """


def newer_schema(store: str, version: str) -> str:
    """Why a store of a newer schema version is refused, and what to do."""
    return (
        f"{store}: the store's schema version {version} is newer than this pytest-agent-evalset "
        f"knows (up to {HEAD}): upgrade pytest-agent-evalset, or point --agent-eval-store (ini "
        "agent_eval_store) at another store"
    )


def flaky_in(
    rows: list[tuple[str, str, str | None]],
    nodeids: list[str] | None,
    newest: list[dict[str, Any]] | None,
) -> dict[str, list[str]]:
    """The flaky cases of the stored ``rows`` and ``newest``, the records of a run not stored yet.

    ``rows``: ``(nodeid, outcome, content hash)`` of the runs read, each case's oldest first; only
    the cases of ``nodeids`` when given.
    """
    # in Python: an IN list of 10,000 node ids is past some databases' limits
    wanted = None if nodeids is None else set(nodeids)
    # each case's newest content hash and its outcomes under it, oldest first (as flaky_of)
    latest: dict[str, tuple[str | None, list[str]]] = {}
    found = latest.get
    added = ((c["nodeid"], c["outcome"], c.get("content_hash")) for c in newest or [])
    for part in (rows, added):  # each case's rows stay oldest first
        for nodeid, outcome, content in part:
            if wanted is not None and nodeid not in wanted:
                continue
            kept = found(nodeid)
            if kept is None or kept[0] != content:
                kept = latest[nodeid] = (content, [])
            kept[1].append(outcome)
    return dict(sorted(_flaky_of_latest(latest).items()))  # by node id, as flaky_of gives them


def flaky_of(rows: list[tuple[str, str, str | None]]) -> dict[str, list[str]]:
    """The flaky cases of ``(nodeid, outcome, content hash)`` rows, each case's oldest first.

    A case is flaky when it both passed and failed under its newest content hash (an edited case
    starts afresh); its value is its outcomes under that hash.
    """
    newest: dict[str, tuple[str | None, list[str]]] = {}
    for nodeid, outcome, content in rows:
        kept = newest.get(nodeid)
        if kept is None or kept[0] != content:
            kept = newest[nodeid] = (content, [])
        kept[1].append(outcome)
    return _flaky_of_latest(newest)


def _flaky_of_latest(latest: dict[str, tuple[str | None, list[str]]]) -> dict[str, list[str]]:
    """The flaky cases of each case's newest content hash and its outcomes under it."""
    out = {}
    for nodeid, (content, outcomes) in latest.items():
        if content is None or len(outcomes) < 2:  # one outcome is never both
            continue
        decided = {
            "pass" if o in ("passed", "xpassed") else "fail" for o in outcomes if o in _DECIDED
        }
        if decided == {"pass", "fail"}:
            out[nodeid] = outcomes
    return out


FAILING = ("failed", "error")
"""The outcomes that fail a case: a flaky case has one under its newest content hash."""
_DECIDED = ("passed", "xpassed", *FAILING)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def case_row(run_id: str, data: dict[str, Any], text: str | None) -> dict[str, Any]:
    return dict(zip(CASE_COLUMNS, case_values(run_id, data, text), strict=True))


def case_values(run_id: str, data: dict[str, Any], text: str | None) -> tuple[Any, ...]:
    """A case's row in the order of ``CASE_COLUMNS``; ``text``: its record's JSON text, if made."""
    get = data.get
    nodeid = data["nodeid"]
    return (
        run_id,
        nodeid,
        data["file"] if "file" in data else nodeid.split("::")[0],
        get("agent"),
        _json(tags) if (tags := get("tags")) else "[]",
        data["outcome"],
        get("content_hash"),
        get("score"),
        get("cost"),
        get("latency_s"),
        text if text is not None else json.dumps(data),
    )


def run_row(
    document: dict[str, Any],
    run_id: str,
    git: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    source: str | None = None,
    records: list[CaseRecord] | None = None,
) -> dict[str, Any]:
    """The ``runs`` row of a JSON report's document: its run, totals, cost and latency.

    The figures are over its cases, or ``records`` (the same cases, made already).
    """
    from pytest_agent_eval.report.stats import Stats

    run = document.get("run") or {}
    git = git or {}
    if records is None:
        from pytest_agent_eval.report.baseline import records_of

        records = records_of(document.get("cases") or [])
    stats = Stats.of(records)
    decided = stats.passed + stats.failed + stats.errors
    shard = run.get("shard") if isinstance(run.get("shard"), dict) else None
    cases = document.get("cases") or []
    models = {run["llm_model"]} if run.get("llm_model") else set()
    models |= {str(m) for c in cases for m in c.get("unpriced_models") or []}
    return {
        "id": run_id,
        "started": str(run.get("started") or ""),
        "ended": _ended(run),
        "saved": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
        "git_commit": run.get("git_commit"),
        "git_branch": git.get("branch", run.get("git_branch")),
        "git_dirty": git.get("dirty", run.get("git_dirty")),
        "agents": _json(sorted({c["agent"] for c in cases if c.get("agent")})),
        "models": _json(sorted(models)),
        "options": _json(options if options is not None else {"args": run.get("args") or []}),
        "shard": f"{shard.get('index')}/{shard.get('count')}" if shard else None,
        "finished": bool(run.get("finished")),
        "exit_status": run.get("exit_status"),
        "total": stats.total,
        "passed": stats.passed,
        "failed": stats.failed,
        "errors": stats.errors,
        "skipped": stats.skipped,
        "pass_rate": stats.passed / decided if decided else None,
        "cost": None if stats.unpriced_cases else stats.cost,
        "p50_latency_s": stats.latency_p50,
        "p95_latency_s": stats.latency_p95,
        "source": source,
        "run": _json({**run, **{key: document[key] for key in TRUST_FIGURES if document.get(key)}}),
    }


def _ended(run: dict[str, Any]) -> str | None:
    """When a report's run ended: its start plus its duration (``None`` when either is missing)."""
    try:
        started = datetime.datetime.fromisoformat(str(run.get("started")))
        return (started + datetime.timedelta(seconds=float(run["duration_s"]))).isoformat(
            timespec="seconds"
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
