"""Where the record is made, and carried on the test report.

The record is made from the item's case result (where the case ran) and its test report's outcome,
then carried on the report as ``report.agent_eval`` (a JSON-able dict that pytest-xdist sends
along).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.report.case_input import case_input, content_hash
from pytest_agent_eval.report.collector import ATTRIBUTE, CASSETTE, records
from pytest_agent_eval.report.jsonable import dumps, jsonable
from pytest_agent_eval.report.record import CaseRecord, crash_message, from_result, outcome
from pytest_agent_eval.secrets import any_known, scrub_strings

if TYPE_CHECKING:
    from pytest_agent_eval.core.results import CaseResult

_RECORD = pytest.StashKey[CaseRecord]()
_CASSETTE = pytest.StashKey[tuple[str, str]]()
_CONTENT = pytest.StashKey[bool]()
WRITTEN = (
    "agent_eval_report",
    "agent_eval_markdown",
    "agent_eval_html",
    "agent_eval_baseline",
    "agent_eval_resume",
)
"""The options (``dest``) of the reports written from the records.

With one (or the run memory, whose journal keeps every record), a record keeps the case's input and
content hash (SPEC §17); without, neither is computed (the terminal summary and ``--junitxml`` show
neither).
"""


def wants_content(config: pytest.Config) -> bool:
    """Whether the records need the case's input and content hash.

    They do when a written report is asked for, or a plugin registers report formats of its own
    (which may read them). Decided once per process, workers alike.
    """
    wanted = config.stash.get(_CONTENT, None)
    if wanted is None:
        hook = config.hook.pytest_agent_eval_register_formats
        wanted = (
            any(config.getoption(name, None) for name in WRITTEN)
            or config.pluginmanager.hasplugin(
                "agent_eval_memory"
            )  # the run memory's journal keeps every record
            or any(
                not impl.function.__module__.startswith("pytest_agent_eval.")
                for impl in hook.get_hookimpls()
            )
        )
        config.stash[_CONTENT] = wanted
    return wanted


def note_result(item: pytest.Item, result: CaseResult) -> None:
    """Record the case's result for its report, and add its ``--junitxml`` properties.

    The properties are taken from the record.
    """
    k = item.config.getoption("agent_eval_k", None)
    record = from_result(item.nodeid, item.location[0], result, k, wants_content(item.config))
    item.stash[_RECORD] = record
    if (
        result.cassette is not None
    ):  # recorded on an xdist worker: the controller writes it (``plugin.traffic``)
        item.stash[_CASSETTE] = result.cassette
    item.user_properties.extend(record.junit_properties())


def note_cached(item: pytest.Item, data: dict[str, Any]) -> CaseRecord:
    """The record of a case reported from the verdict cache.

    The stored one, marked ``cached``, at this item, with the id of the run that made it
    (``run_id``).
    """
    record = CaseRecord.from_dict(
        {**data, "nodeid": item.nodeid, "file": item.location[0], "cached": True}
    )
    item.stash[_RECORD] = record
    cached = [("cached", "true")] + ([("run_id", record.run_id)] if record.run_id else [])
    item.user_properties.extend([*record.junit_properties(), *cached])
    return record


def attach(item: pytest.Item, report: pytest.TestReport) -> None:
    """Put the item's record on its call report.

    Or on its setup report when the case never got to run.
    """
    if report.when == "teardown":
        return
    if report.when == "setup" and report.passed:
        return
    record = item.stash.get(_RECORD, None) or _not_run(item, report)
    if _RECORD in item.stash:
        del item.stash[
            _RECORD
        ]  # the report carries it from here: the item need not keep it for the session
    cassette = item.stash.get(_CASSETTE, None)
    if cassette is not None:
        del item.stash[_CASSETTE]
        setattr(report, CASSETTE, {"path": cassette[0], "text": cassette[1]})
    record.outcome = outcome(report)
    record.duration_s = report.duration
    message = crash_message(report)
    if record.outcome in ("skipped", "xfailed"):
        record.reason = getattr(report, "wasxfail", None) or message
    elif record.outcome in ("failed", "error") and not record.ran:
        record.error = message
    data = record.to_dict()
    kept = _scrubbed(data)  # no secret the run knows leaves it
    setattr(report, ATTRIBUTE, kept)
    collector = records(item.config)
    if kept is data and collector is not None:  # kept as it is: the reports read the record itself
        collector.made(report.nodeid, data, record)


_encoded: tuple[dict[str, Any], str] | None = None
"""The last record attached as it was (nothing to scrub), and its JSON text (for the journal)."""


def _scrubbed(data: dict[str, Any]) -> dict[str, Any]:
    """``scrub_strings(data)``; when nothing is to scrub, ``data`` itself, its JSON text kept.

    Nothing is to scrub when no secret is known and no string has an ``@`` (a URL's userinfo): told
    by the record's JSON text, which the journal then writes without encoding the record again.
    """
    global _encoded
    if not any_known():
        try:
            text = dumps(data)  # as the journal writes it
        except (TypeError, ValueError, RecursionError):  # not JSON data: scrubbed as it is
            text = "@"
        if "@" not in text:
            _encoded = (data, text)
            return data
    scrubbed: dict[str, Any] = scrub_strings(data)
    return scrubbed


def encoded(data: dict[str, Any]) -> str:
    """The JSON text of a record (``json.dumps``).

    The text made when it was attached when ``data`` is that very record (a record is not changed
    once attached).
    """
    global _encoded
    kept = _encoded
    if kept is not None and kept[0] is data:
        _encoded = None
        return kept[1]
    return dumps(data)


def _not_run(item: pytest.Item, report: pytest.TestReport) -> CaseRecord:
    """The record of an item whose case never ran.

    A skip, a setup error, a file that cannot be read.
    """
    case = getattr(item, "case", None)
    _, line, _ = item.reportinfo()
    file = item.location[0]
    if case is None:  # a file that cannot be read: `file::@file`
        return CaseRecord(item.nodeid, item.name, file, (line or 0) + 1, "error")
    content = wants_content(item.config)
    return CaseRecord(
        nodeid=item.nodeid,
        case_id=case.id,
        file=file,
        line=case.line,
        outcome="error",
        tags=list(case.tags),
        description=case.description,
        metadata=jsonable(case.metadata),
        min_score=case.min_score,
        min_pass_rate=case.min_pass_rate,
        agent=case.agent_name,
        input=case_input(case) if content else None,
        content_hash=content_hash(case) if content else None,
    )
