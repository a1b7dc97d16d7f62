"""``agent-eval gate`` (SPEC §18): a saved or merged report judged as a run judges itself.

``agent-eval gate REPORT [--baseline B] [--min-pass-rate X] [--max-cost X] [--max-p95-latency S]
[--markdown PATH]`` judges a saved or merged report as a run judges itself with
``--agent-eval-gate regressions`` and the suite thresholds. Plain Python, no pytest; the comparison
(``baseline.compare``), the thresholds (``limits.Thresholds``) and the markdown (``markdown_text``)
are the run's own.

The gate fails (exit 1) on a regression against the baseline (or a baseline that shares no case with
the report), on a missed threshold, and on a report that does not hold the whole run: a missing
shard, cases not run, a run that did not finish — a gate that cannot compare fails rather than
passes. Known failures alone do not fail it. An unusable report or baseline is exit 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_agent_eval.report.atomic import append_text
from pytest_agent_eval.report.baseline import (
    BaselineError,
    Comparison,
    compare,
    load_records,
    load_report,
    md_cell,
    records_of,
)
from pytest_agent_eval.report.limits import Thresholds
from pytest_agent_eval.report.markdown_text import markdown_lines
from pytest_agent_eval.report.merge import not_run_of, run_of
from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.text import one_line

_SHOWN = 20


@dataclass
class Verdict:
    """What the gate found; ``failed`` when any of it fails the gate."""

    records: list[CaseRecord]
    comparison: Comparison | None = None
    missed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        """Why the gate fails, one phrase each (none: it passes)."""
        out = []
        if not self.records:
            out.append("the report has no case (a -k, -m or path that matched nothing?)")
        if self.comparison is not None and self.comparison.not_compared is not None:
            out.append("the baseline was not compared with the report")
        elif self.comparison is not None and self.comparison.regressions:
            out.append(f"{len(self.comparison.regressions)} regressions against the baseline")
        if self.missed:
            out.append(f"{len(self.missed)} thresholds missed")
        if self.incomplete:
            out.append("the report does not hold the whole run")
        return out

    @property
    def failed(self) -> bool:
        return bool(self.reasons)

    def verdict(self) -> str:
        return f"gate failed: {'; '.join(self.reasons)}" if self.failed else "gate passed"

    def lines(self) -> list[str]:
        """The verdict as text lines.

        The comparison, the thresholds, what is missing, then the one-line verdict.
        """
        out = [*(self.comparison.lines() if self.comparison is not None else [])]
        out += [f"threshold missed: {line}" for line in self.missed]
        out += [f"threshold not checked: {line}" for line in self.unknown]
        out += [f"incomplete: {line}" for line in self.incomplete]
        return [*out, self.verdict()]

    def markdown(self) -> list[str]:
        """The verdict as markdown.

        The run's markdown summary of the report, then the thresholds, what is missing and the
        verdict.
        """
        stopped = None
        if self.incomplete:
            stopped = "**The report does not hold the whole run:** " + "; ".join(
                md_cell(i) for i in self.incomplete
            )
        out = markdown_lines(self.records, self.comparison, stopped)
        notes = [f"threshold missed: {line}" for line in self.missed]
        notes += [f"threshold not checked: {line}" for line in self.unknown]
        if notes:
            out += ["", *(f"- {md_cell(line)}" for line in notes)]
        verdict = (
            f"**Gate failed:** {md_cell('; '.join(self.reasons))}"
            if self.failed
            else "**Gate passed**"
        )
        return [*out, "", verdict]


def incomplete(path: Path, document: dict[str, Any]) -> list[str]:
    """Why a report does not hold its whole run.

    A merge's reasons, the cases not run, a run that did not finish.
    """
    run = run_of(path, document)
    given = run.get("incomplete") or []
    reasons = (
        [line for line in given if isinstance(line, str)]
        if isinstance(given, list)
        else [str(given)]
    )
    not_run = not_run_of(path, document)
    if not_run:
        names = ", ".join(e["nodeid"] for e in not_run[:_SHOWN])
        more = f" and {len(not_run) - _SHOWN} more" if len(not_run) > _SHOWN else ""
        noun = "case" if len(not_run) == 1 else "cases"
        reasons.append(
            f"{len(not_run)} {noun} not run: {names}{more} "
            f"(run them with --agent-eval-resume {path})"
        )
    if run.get("finished") is not True and not reasons:
        reasons.append(
            "the run did not finish (interrupted, stopped early or a session error): "
            "cases may be missing"
        )
    return reasons


def judge(
    path: Path,
    document: dict[str, Any],
    records: list[CaseRecord],
    baseline: list[CaseRecord] | None,
    thresholds: Thresholds,
    tolerance: float,
    significance: float,
) -> Verdict:
    """The report's verdict.

    Compared with ``baseline`` (when given), its thresholds checked, its completeness.
    """
    from pytest_agent_eval.report.stats import Stats

    verdict = Verdict(records, incomplete=incomplete(path, document))
    if baseline is not None:
        verdict.comparison = compare(baseline, records, tolerance, significance)
    if thresholds:
        verdict.missed, verdict.unknown = thresholds.check(Stats.of(records))
    return verdict


def gate(
    report: str,
    base: str | None,
    thresholds: Thresholds,
    tolerance: float,
    significance: float,
    markdown: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """The ``agent-eval gate`` command: print the verdict (and append its markdown to ``markdown``).

    1 when the gate fails, 0 when it passes, 2 for an unusable report or baseline or an unwritable
    markdown file.
    """
    try:
        path = Path(report)
        document = load_report(path)
        records = records_of(document["cases"], path)
        baseline = load_records(Path(base)) if base else None
        verdict = judge(path, document, records, baseline, thresholds, tolerance, significance)
    except BaselineError as exc:
        print(one_line(f"agent-eval gate: {exc}"), file=err)
        return 2
    print(one_line(f"agent-eval gate: {report}: {len(records)} cases"), file=out)
    for line in verdict.lines():
        print(
            one_line(line), file=out
        )  # a report is data: an id's control characters are shown escaped
    if markdown:
        try:
            append_text(Path(markdown), "\n".join(verdict.markdown()) + "\n\n")
        except OSError as exc:
            print(f"agent-eval gate: {markdown} not written: {exc.strerror or exc}", file=err)
            return 2
    return 1 if verdict.failed else 0
