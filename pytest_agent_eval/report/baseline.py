"""Comparing a run with an earlier report (``--agent-eval-baseline``, ``agent-eval compare``): regressions,
fixes, new and missing cases. Plain Python, no pytest.

* A case with one trial regresses when it passed and now fails (or errors), or when its score dropped by more
  than the tolerance; it is fixed when it failed and now passes.
* A repeated case (more than one trial on either side) regresses only when its pass rate dropped
  significantly: a one-sided Fisher exact test on the pass counts gives ``p`` below the significance level.
  Its score is not compared: trial-to-trial noise must not gate CI. It is fixed when it failed and now passes.
* Skipped and xfailed cases are compared with nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import comb
from pathlib import Path

from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.report.render import text_table
from pytest_agent_eval.report.schema import SCHEMA_VERSION

DEFAULT_TOLERANCE = 0.05
DEFAULT_SIGNIFICANCE = 0.05
_PASSED = ("passed", "xpassed")
_FAILED = ("failed", "error")


class BaselineError(Exception):
    """A baseline report that cannot be read; the message names the file and what is wrong."""


def fisher_less(base_passes: int, base_trials: int, passes: int, trials: int) -> float:
    """One-sided Fisher exact test: the probability, with both runs' pass rates equal, of the baseline holding
    ``base_passes`` or more of all the passes (that is, of the candidate doing this badly or worse)."""
    total_passes, total = base_passes + passes, base_trials + trials
    denominator = comb(total, base_trials)
    upper = min(total_passes, base_trials)
    numerator = sum(
        comb(total_passes, x) * comb(total - total_passes, base_trials - x) for x in range(base_passes, upper + 1)
    )
    return numerator / denominator


@dataclass(frozen=True)
class Change:
    """One case that differs between the baseline and this run, with a line saying how."""

    nodeid: str
    detail: str


@dataclass
class Comparison:
    """What changed between a baseline and a candidate run."""

    regressions: list[Change] = field(default_factory=list)
    fixes: list[Change] = field(default_factory=list)
    new: list[Change] = field(default_factory=list)
    missing: list[Change] = field(default_factory=list)

    def counts(self) -> str:
        """``1 regressions, 0 fixes, 2 new, 0 missing``."""
        return (
            f"{len(self.regressions)} regressions, {len(self.fixes)} fixes, {len(self.new)} new, "
            f"{len(self.missing)} missing"
        )

    def groups(self) -> list[tuple[str, list[Change]]]:
        """Each kind of change with its cases, in the order shown."""
        return [("regressions", self.regressions), ("fixes", self.fixes), ("new", self.new), ("missing", self.missing)]

    def lines(self) -> list[str]:
        """The comparison as text: a count line, then each change under its heading."""
        out = [f"compared with the baseline: {self.counts()}"]
        for title, changes in self.groups():
            if changes:
                out.append(f"{title}:")
                out += [f"  {c.nodeid}: {c.detail}" for c in changes]
        return out

    def table(self) -> list[str]:
        """The comparison as a text table (``agent-eval compare``): a count line, then a row per changed case."""
        out = [f"compared with the baseline: {self.counts()}"]
        rows = [(title, c.nodeid, c.detail) for title, changes in self.groups() for c in changes]
        if rows:
            out += ["", *text_table([("change", "case", "detail"), *rows], align_left=3)]
        return out

    def markdown(self) -> list[str]:
        """The comparison as GitHub markdown: a count line, then a table of the changed cases."""
        out = [f"**Compared with the baseline:** {self.counts()}"]
        rows = [(title, c) for title, changes in self.groups() for c in changes]
        if rows:
            out += ["", "| change | case | detail |", "|---|---|---|"]
            out += [f"| {title} | {md_code(c.nodeid)} | {md_cell(c.detail)} |" for title, c in rows]
        return out


def md_cell(text: str) -> str:
    """``text`` fit for one markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def md_code(text: str) -> str:
    """``text`` as inline code in a table cell."""
    return f"`{md_cell(text).replace('`', chr(39))}`"


def _rate(record: CaseRecord) -> str:
    return f"{record.passes}/{len(record.trials)}"


def _compare_case(base: CaseRecord, cand: CaseRecord, tolerance: float, significance: float, out: Comparison) -> None:
    if base.outcome not in _PASSED + _FAILED or cand.outcome not in _PASSED + _FAILED:
        return
    repeated = len(base.trials) > 1 or len(cand.trials) > 1
    if base.outcome in _FAILED and cand.outcome in _PASSED:
        out.fixes.append(Change(cand.nodeid, f"{base.outcome} -> {cand.outcome}"))
    elif repeated:
        if base.trials and cand.trials and cand.passes / len(cand.trials) < base.passes / len(base.trials):
            p = fisher_less(base.passes, len(base.trials), cand.passes, len(cand.trials))
            if p < significance:
                detail = f"pass rate {_rate(base)} -> {_rate(cand)} (Fisher p = {p:.3g} < {significance:g})"
                out.regressions.append(Change(cand.nodeid, detail))
    elif base.outcome in _PASSED and cand.outcome in _FAILED:
        out.regressions.append(Change(cand.nodeid, f"{base.outcome} -> {cand.outcome}"))
    elif base.score is not None and cand.score is not None and base.score - cand.score > tolerance:
        detail = f"score {base.score:.2f} -> {cand.score:.2f} (dropped more than {tolerance:g})"
        out.regressions.append(Change(cand.nodeid, detail))


def compare(
    baseline: list[CaseRecord],
    candidate: list[CaseRecord],
    tolerance: float = DEFAULT_TOLERANCE,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> Comparison:
    """Regressions, fixes, new and missing cases of ``candidate`` against ``baseline``, each by node id."""
    base = {r.nodeid: r for r in baseline}
    cand = {r.nodeid: r for r in candidate}
    out = Comparison()
    for nodeid in sorted(base.keys() | cand.keys()):
        if nodeid not in base:
            out.new.append(Change(nodeid, cand[nodeid].outcome))
        elif nodeid not in cand:
            out.missing.append(Change(nodeid, f"was {base[nodeid].outcome}"))
        else:
            _compare_case(base[nodeid], cand[nodeid], tolerance, significance, out)
    return out


def load_records(path: Path) -> list[CaseRecord]:
    """The records of an ``--agent-eval-report`` file; ``BaselineError`` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the report: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION or "cases" not in data:
        raise BaselineError(
            f"{path}: not an --agent-eval-report file of schema_version {SCHEMA_VERSION}; "
            "write one with pytest --agent-eval-report PATH"
        )
    try:
        return [CaseRecord.from_dict(c) for c in data["cases"]]
    except (TypeError, KeyError, AttributeError) as exc:
        raise BaselineError(f"{path}: a case record does not match the report schema: {exc}") from None
