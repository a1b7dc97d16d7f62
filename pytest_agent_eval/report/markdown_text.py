"""The markdown of a run (SPEC §10): summary table, failures and the comparison with a baseline.

The summary table, the failures with a one-line reason and ``path:line``, and the comparison with a
baseline. Plain Python, no pytest: ``--agent-eval-markdown`` (``report/markdown.py``) and
``agent-eval gate --markdown`` write the same text.
"""

from __future__ import annotations

from pytest_agent_eval.report.baseline import Comparison, md_cell, md_code
from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.report.summary import (
    TITLE,
    adaptive_notes,
    cache_notes,
    cost_notes,
    pass_k_notes,
    summary_rows,
)

_FAILED = ("failed", "error", "xpassed")
_REASON_LIMIT = 200
NOT_FINISHED_SHOWN = 20


def reason(record: CaseRecord) -> str:
    """Why the case failed, in one line.

    The agent's or the item's error, the trials' pass count, or the first failed check with its
    message.
    """
    if record.error:
        text = record.error
    elif record.outcome == "xpassed":
        text = (
            f"passed unexpectedly (xfail: {record.reason})"
            if record.reason
            else "passed unexpectedly"
        )
    else:
        failed = [c for c in record.checks if not c.passed]
        check = f"{failed[0].name}: {failed[0].message}" if failed and failed[0].message else ""
        check = check or (failed[0].name if failed else "")
        if len(record.trials) > 1:
            text = f"{record.passes}/{len(record.trials)} trials passed" + (
                f"; {check}" if check else ""
            )
        elif (
            record.score is not None
            and record.min_score is not None
            and record.score < record.min_score
        ):
            text = f"score {record.score:.2f} < min_score {record.min_score:g}" + (
                f"; {check}" if check else ""
            )
        else:
            text = check or record.outcome
    line = " ".join(text.split())
    return line if len(line) <= _REASON_LIMIT else line[: _REASON_LIMIT - 1] + "…"


def stopped_line(how: str, finished: int, not_finished: list[str], collected: int) -> str:
    """The line that says a run ended before every case finished, and which cases did not.

    ``how``: ``was interrupted``, ``stopped early (…)``.
    """
    line = f"**The run {how}:** "
    if not collected:  # not known (no collection reached this process)
        return (
            line + f"the figures are of the {finished} eval cases that finished; "
            "the others are not listed"
        )
    line += f"{finished} of {collected} eval cases finished"
    if not_finished:
        shown = ", ".join(md_code(n) for n in not_finished[:NOT_FINISHED_SHOWN])
        more = len(not_finished) - NOT_FINISHED_SHOWN
        line += f"; these did not: {shown}" + (f" and {more} more" if more > 0 else "")
    return line


def markdown_lines(
    records: list[CaseRecord],
    comparison: Comparison | None,
    stopped: str | None = None,
    flaky: dict[str, list[str]] | None = None,
) -> list[str]:
    """The run's markdown, as lines.

    A heading, the line saying the run ended early (``stopped``), the summary table, the failures,
    the flaky cases (from the run store), then the comparison (when there is one).
    """
    rows = summary_rows(records)
    header, body = rows[0], rows[1:]
    out = [f"## {TITLE}", ""]
    if stopped:
        out += [stopped, ""]
    out.append("| " + " | ".join(md_cell(h) for h in header) + " |")
    out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in body]
    # pass@k of repeated cases; what adaptive trials saved; a partial cost's models
    notes = (
        pass_k_notes(records) + adaptive_notes(records) + cache_notes(records) + cost_notes(records)
    )
    if notes:
        out += ["", *notes]
    failures = [r for r in records if r.outcome in _FAILED]
    if failures:
        out += ["", f"**Failures ({len(failures)})**", "", "| case | outcome | reason | location |"]
        out.append("|---|---|---|---|")
        out += [
            f"| {md_code(r.nodeid)} | {r.outcome}{' (cached)' if r.cached else ''} | "
            f"{md_cell(reason(r))} | {md_code(f'{r.file}:{r.line}')} |"
            for r in failures
        ]
    if flaky:
        named = ", ".join(f"{md_code(n)} ({' '.join(o)})" for n, o in sorted(flaky.items()))
        out += [
            "",
            f"**Flaky ({len(flaky)})**, passing and failing over the last runs "
            f"with the case unchanged: {named}",
        ]
    from pytest_agent_eval.report.trust import tables  # injection variants, judges (SPEC §26)

    for table in tables(records):
        out += [
            "",
            f"**{md_cell(table.title)}**",
            "",
            "| " + " | ".join(md_cell(h) for h in table.header) + " |",
        ]
        out.append(
            "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|"
        )
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table.rows]
    if comparison is not None:
        out += ["", *comparison.markdown()]
    return out
