"""``agent-eval comment REPORT [--baseline B]`` (SPEC §25): a report's pull-request comment.

The pull-request comment of a saved or merged report.

Its first line is a hidden marker (:data:`MARKER`): a workflow finds the comment it wrote before by
it and edits that one, so a pull request keeps one sticky comment however often it is pushed. What a
reviewer needs comes first: the suite-level result, the regressions, the fixes and the cost against
the baseline; then the failures, and the whole summary folded away. Plain Python, no pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from pytest_agent_eval.report.baseline import (
    DEFAULT_SIGNIFICANCE,
    DEFAULT_TOLERANCE,
    BaselineError,
    Comparison,
    compare,
    load_records,
    load_report,
    md_cell,
    md_code,
    records_of,
)
from pytest_agent_eval.report.markdown_text import markdown_lines, reason
from pytest_agent_eval.report.record import CaseRecord

MARKER = "<!-- agent-eval -->"
"""The hidden marker of the sticky comment (an HTML comment: GitHub does not show it)."""
_SHOWN = 20
_FAILED = ("failed", "error", "xpassed")


def _cost(records: list[CaseRecord]) -> float | None:
    from pytest_agent_eval.report.stats import Stats

    return Stats.of(records).cost


def headline(records: list[CaseRecord], comparison: Comparison | None, not_run: int) -> str:
    """The first visible line: the suite's verdict against the baseline.

    Without a baseline, the pass count.
    """
    from pytest_agent_eval.report.stats import Stats

    stats = Stats.of(records)
    counted = f"{stats.passed}/{stats.total} passed"
    if not_run:
        counted += f", {not_run} not run"
    if comparison is None:
        mark = "❌" if stats.failed or stats.errors or not_run else "✅"
        return f"### {mark} agent eval: {counted}"
    if comparison.not_compared is not None:
        return (
            f"### ⚠️ agent eval: {counted}; "
            f"baseline not compared: {md_cell(comparison.not_compared)}"
        )
    if comparison.suite_dropped() and comparison.suite is not None:
        verdict = "the pass rate dropped significantly"
        mark = "❌"
    elif comparison.regressions:
        verdict = f"{len(comparison.regressions)} regressions"
        mark = "❌"
    else:
        verdict = "no regression"
        mark = "✅"
    return f"### {mark} agent eval: {verdict}; {counted}"


def _changes(title: str, changes: list[Any]) -> list[str]:
    if not changes:
        return []
    out = ["", f"**{title} ({len(changes)})**", "", "| case | detail |", "|---|---|"]
    out += [f"| {md_code(c.nodeid)} | {md_cell(c.detail)} |" for c in changes[:_SHOWN]]
    if len(changes) > _SHOWN:
        out.append(f"| … | and {len(changes) - _SHOWN} more |")
    return out


def cost_line(records: list[CaseRecord], baseline: list[CaseRecord] | None) -> str | None:
    """``**Cost:** $0.4200 (baseline $0.5000, -0.0800)``; ``None`` when no cost is known."""
    cost = _cost(records)
    if cost is None:
        return None
    line = f"**Cost:** ${cost:.4f}"
    base = _cost(baseline) if baseline is not None else None
    if base is not None:
        line += f" (baseline ${base:.4f}, {cost - base:+.4f})"
    return line


def comment_lines(
    records: list[CaseRecord],
    comparison: Comparison | None,
    baseline: list[CaseRecord] | None = None,
    not_run: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The comment, as markdown text.

    Marker, headline, the suite-level test, regressions, fixes, cost, failures, then the whole
    summary folded.
    """
    not_run = not_run or []
    out = [MARKER, headline(records, comparison, len(not_run))]
    if comparison is not None and comparison.not_compared is None:
        out += ["", *(md_cell(line) for line in comparison.suite_lines())]
        out += _changes("Regressions", comparison.regressions)
        out += _changes("Fixes", comparison.fixes)
    cost = cost_line(records, baseline)
    if cost is not None:
        out += ["", cost]
    if not_run:
        named = ", ".join(
            f"{md_code(e['nodeid'])} ({md_cell(str(e.get('reason', '')))})"
            for e in not_run[:_SHOWN]
        )
        more = f" and {len(not_run) - _SHOWN} more" if len(not_run) > _SHOWN else ""
        out += ["", f"**Not run ({len(not_run)}):** {named}{more}"]
    failures = [r for r in records if r.outcome in _FAILED]
    if failures:
        out += [
            "",
            f"**Failures ({len(failures)})**",
            "",
            "| case | reason | location |",
            "|---|---|---|",
        ]
        out += [
            f"| {md_code(r.nodeid)} | {md_cell(reason(r))} | {md_code(f'{r.file}:{r.line}')} |"
            for r in failures[:_SHOWN]
        ]
        if len(failures) > _SHOWN:
            out.append(f"| … | and {len(failures) - _SHOWN} more | |")
    out += [
        "",
        "<details><summary>The whole summary</summary>",
        "",
        *markdown_lines(records, comparison),
        "",
    ]
    out.append("</details>")
    return out


def comment(
    report: str,
    base: str | None,
    out: TextIO,
    err: TextIO,
    tolerance: float = DEFAULT_TOLERANCE,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> int:
    """The ``agent-eval comment`` command: print the comment; 0, or 2 for an unusable input.

    2 for an unusable report or baseline. The comment says what failed; the exit status does not
    (``agent-eval gate`` judges).
    """
    from pytest_agent_eval.report.merge import not_run_of

    try:
        path = Path(report)
        document = load_report(path)
        records = records_of(document["cases"], path)
        baseline = load_records(Path(base)) if base else None
        not_run = not_run_of(path, document)
    except BaselineError as exc:
        print(f"agent-eval comment: {exc}", file=err)
        return 2
    comparison = (
        compare(baseline, records, tolerance, significance) if baseline is not None else None
    )
    print("\n".join(comment_lines(records, comparison, baseline, not_run)), file=out)
    return 0
