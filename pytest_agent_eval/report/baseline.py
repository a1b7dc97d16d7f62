"""Comparing a run with an earlier report: regressions, fixes, new and missing cases.

For ``--agent-eval-baseline`` and ``agent-eval compare``. Plain Python, no pytest.

* A case with one trial regresses when it passed and now fails (or errors), or when its score
  dropped by more than the tolerance; it is fixed when it failed and now passes.
* A repeated case (more than one trial on either side) regresses only when its pass rate dropped
  significantly: a one-sided Fisher exact test on the pass counts gives ``p`` below the significance
  level. Its score is not compared: trial-to-trial noise must not gate CI. It is fixed when it
  failed and now passes.
* Skipped and xfailed cases are compared with nothing.

Cases are matched by node id. A baseline written from another rootdir (the same files, node ids
under another directory) is matched by path: the directory prefix that makes the most node ids equal
is left out on each side, and the comparison says so. A baseline that still shares no case with the
run is "not compared" (and fails a gate): every case new or missing would otherwise read as "0
regressions".
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from math import comb
from pathlib import Path
from typing import Any

from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.report.schema import SCHEMA_VERSION
from pytest_agent_eval.report.significance import Pair, SuiteTest
from pytest_agent_eval.text import text_table

DEFAULT_TOLERANCE = 0.05
DEFAULT_SIGNIFICANCE = 0.05
_PASSED = ("passed", "xpassed")
_FAILED = ("failed", "error")
_CANDIDATES = 20
"""How many node ids of this run a baseline's node id is matched against (bounds the work).

The candidates are the node ids with the same file name and case.
"""


class BaselineError(Exception):
    """A baseline report that cannot be read; the message names the file and what is wrong."""


def fisher_less(base_passes: int, base_trials: int, passes: int, trials: int) -> float:
    """One-sided Fisher exact test: ``p`` of the candidate doing this badly or worse by chance.

    The probability, with both runs' pass rates equal, of the baseline holding ``base_passes`` or
    more of all the passes (that is, of the candidate doing this badly or worse).
    """
    total_passes, total = base_passes + passes, base_trials + trials
    denominator = comb(total, base_trials)
    upper = min(total_passes, base_trials)
    numerator = sum(
        comb(total_passes, x) * comb(total - total_passes, base_trials - x)
        for x in range(base_passes, upper + 1)
    )
    return numerator / denominator


@dataclass(frozen=True)
class Change:
    """One case that differs between the baseline and this run, with a line saying how.

    ``nodeid`` is this run's (the baseline's for a missing case); ``base_nodeid`` the baseline's
    when it differs (matched across rootdirs).
    """

    nodeid: str
    detail: str
    base_nodeid: str | None = None

    @property
    def in_baseline(self) -> str:
        """The case's node id in the baseline."""
        return self.base_nodeid or self.nodeid


_GROUPS = ("regressions", "fixes", "new", "missing")


@dataclass
class Comparison:
    """What changed between a baseline and a candidate run.

    Made once per run, shown by every report.
    """

    regressions: list[Change] = field(default_factory=list)
    fixes: list[Change] = field(default_factory=list)
    new: list[Change] = field(default_factory=list)
    missing: list[Change] = field(default_factory=list)
    tolerance: float = DEFAULT_TOLERANCE
    significance: float = DEFAULT_SIGNIFICANCE
    not_compared: str | None = None
    """Why the runs could not be compared (no case in common); ``None`` when they were."""
    matched: str | None = None
    """How node ids were matched when the baseline was written from another rootdir.

    ``None``: as they are.
    """
    suite: SuiteTest | None = None
    """The suite-level test over the cases both runs decided (McNemar, bootstrap interval).

    ``None`` without any.
    """

    def suite_dropped(self) -> bool:
        """Whether the suite gate fails the run.

        It does when the pass rate dropped with McNemar p below the significance, or when there is
        nothing to test (not compared, no case decided on both sides).
        """
        return (
            self.not_compared is not None
            or self.suite is None
            or self.suite.dropped(self.significance)
        )

    @property
    def failed(self) -> bool:
        """Whether a gate fails the run.

        It does when a case regressed, or when the baseline could not be compared with the run.
        """
        return bool(self.regressions) or self.not_compared is not None

    def counts(self) -> str:
        """``1 regressions, 0 fixes, 2 new, 0 missing``, or ``not compared: why``."""
        if self.not_compared is not None:
            return f"not compared: {self.not_compared}"
        return (
            f"{len(self.regressions)} regressions, {len(self.fixes)} fixes, {len(self.new)} new, "
            f"{len(self.missing)} missing"
        )

    def headline(self) -> str:
        """The first line of the text reports."""
        if self.not_compared is not None:
            return f"baseline not compared: {self.not_compared}"
        return f"compared with the baseline: {self.counts()}"

    def groups(self) -> list[tuple[str, list[Change]]]:
        """Each kind of change with its cases, in the order shown (none when not compared)."""
        if self.not_compared is not None:
            return []
        return [(name, getattr(self, name)) for name in _GROUPS]

    def suite_lines(self) -> list[str]:
        """The suite-level test, one line (none when not compared)."""
        return [self.suite.line()] if self.suite is not None and self.not_compared is None else []

    def lines(self) -> list[str]:
        """The comparison as text lines.

        A count line, the suite-level test, then each change under its heading.
        """
        out = [self.headline(), *self.suite_lines(), *([self.matched] if self.matched else [])]
        for title, changes in self.groups():
            if changes:
                out.append(f"{title}:")
                out += [f"  {c.nodeid}: {c.detail}" for c in changes]
        return out

    def table(self) -> list[str]:
        """The comparison as a text table (``agent-eval compare``).

        A count line, the suite-level test, then a row per changed case.
        """
        out = [self.headline(), *self.suite_lines(), *([self.matched] if self.matched else [])]
        rows = [(title, c.nodeid, c.detail) for title, changes in self.groups() for c in changes]
        if rows:
            out += ["", *text_table([("change", "case", "detail"), *rows], align_left=3)]
        return out

    def markdown(self) -> list[str]:
        """The comparison as GitHub markdown: a count line, then a table of the changed cases."""
        if self.not_compared is not None:
            return [f"**Baseline not compared:** {md_cell(self.not_compared)}"]
        out = [f"**Compared with the baseline:** {self.counts()}"]
        out += [item for line in self.suite_lines() for item in ("", md_cell(line))]
        if self.matched:
            out += ["", md_cell(self.matched)]
        rows = [(title, c) for title, changes in self.groups() for c in changes]
        if rows:
            out += ["", "| change | case | detail |", "|---|---|---|"]
            out += [f"| {title} | {md_code(c.nodeid)} | {md_cell(c.detail)} |" for title, c in rows]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        """The comparison a JSON report kept (``to_dict``)."""
        groups = {name: [Change(**c) for c in data.get(name, [])] for name in _GROUPS}
        return cls(
            **groups,
            tolerance=data.get("tolerance", DEFAULT_TOLERANCE),
            significance=data.get("significance", DEFAULT_SIGNIFICANCE),
            not_compared=data.get("not_compared"),
            matched=data.get("matched"),
            suite=SuiteTest.from_dict(data["suite"]) if data.get("suite") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The comparison as the JSON report keeps it (``baseline`` beside ``run``)."""
        out: dict[str, Any] = {
            "tolerance": self.tolerance,
            "significance": self.significance,
            "not_compared": self.not_compared,
            "matched": self.matched,
            "suite": self.suite.to_dict() if self.suite is not None else None,
        }
        for name in _GROUPS:
            out[name] = [
                {"nodeid": c.nodeid, "detail": c.detail, "base_nodeid": c.base_nodeid}
                for c in getattr(self, name)
            ]
        return out


_MD_ESCAPES = str.maketrans({c: f"\\{c}" for c in "\\`*_[]~|"} | {"&": "&amp;", "<": "&lt;"})
"""What makes agent text inert in GitHub markdown.

HTML as text, no emphasis, link, code or strike, no new column.
"""


def md_cell(text: str) -> str:
    """``text`` fit for one markdown table cell: one line, shown as it is, pipes escaped.

    Shown as it is: no HTML, link or emphasis of its own (it may be an agent's output).
    """
    return " ".join(text.split()).translate(_MD_ESCAPES)


def md_code(text: str) -> str:
    """``text`` as inline code in a table cell."""
    return (
        "`" + " ".join(text.split()).replace("`", "'").replace("|", "\\|") + "`"
    )  # nothing else is active in code


def _rate(record: CaseRecord) -> str:
    return f"{record.passes}/{len(record.trials)}"


def _compare_case(
    base: CaseRecord, cand: CaseRecord, tolerance: float, significance: float, out: Comparison
) -> None:
    if base.outcome not in _PASSED + _FAILED or cand.outcome not in _PASSED + _FAILED:
        return
    repeated = len(base.trials) > 1 or len(cand.trials) > 1
    other = base.nodeid if base.nodeid != cand.nodeid else None
    if base.outcome in _FAILED and cand.outcome in _PASSED:
        out.fixes.append(Change(cand.nodeid, f"{base.outcome} -> {cand.outcome}", other))
    elif repeated:
        if (
            base.trials
            and cand.trials
            and cand.passes / len(cand.trials) < base.passes / len(base.trials)
        ):
            p = fisher_less(base.passes, len(base.trials), cand.passes, len(cand.trials))
            if p < significance:
                detail = (
                    f"pass rate {_rate(base)} -> {_rate(cand)} "
                    f"(Fisher p = {p:.3g} < {significance:g})"
                )
                out.regressions.append(Change(cand.nodeid, detail, other))
    elif base.outcome in _PASSED and cand.outcome in _FAILED:
        out.regressions.append(Change(cand.nodeid, f"{base.outcome} -> {cand.outcome}", other))
    elif base.score is not None and cand.score is not None and base.score - cand.score > tolerance:
        detail = f"score {base.score:.2f} -> {cand.score:.2f} (dropped more than {tolerance:g})"
        out.regressions.append(Change(cand.nodeid, detail, other))


def compare(
    baseline: list[CaseRecord],
    candidate: list[CaseRecord],
    tolerance: float = DEFAULT_TOLERANCE,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> Comparison:
    """Regressions, fixes, new and missing cases of ``candidate`` against ``baseline``.

    Each by node id (matched across rootdirs when no node id is in both); "not compared" when the
    two share no case.
    """
    base = {r.nodeid: r for r in baseline}
    cand = {r.nodeid: r for r in candidate}
    out = Comparison(tolerance=tolerance, significance=significance)
    base_key, cand_key = _as_is, _as_is
    if bool(cand) != bool(
        base
    ):  # in either direction: a gate that cannot compare fails (SPEC §17, §22)
        empty = "the baseline" if not base else "this run"
        out.not_compared = f"no case in common with this run ({empty} has no case)"
        return out
    if base and cand and base.keys().isdisjoint(cand.keys()):
        prefixes = _rootdir_prefixes(list(base), list(cand))
        if prefixes is None:
            out.not_compared = (
                f"no case in common with this run (the baseline has {_some(base)},"
                f" this run {_some(cand)})"
            )
            return out
        base_key, cand_key = partial(_strip, prefixes[0]), partial(_strip, prefixes[1])
    base_by = {base_key(b): base[b] for b in base}
    cand_by = {cand_key(c): cand[c] for c in cand}
    decided: list[tuple[bool, bool, Pair]] = []
    for key in sorted(base_by.keys() | cand_by.keys(), key=lambda k: k[1]):
        before, after = base_by.get(key), cand_by.get(key)
        if before is None and after is not None:
            out.new.append(Change(after.nodeid, after.outcome))
        elif after is None and before is not None:
            out.missing.append(Change(before.nodeid, f"was {before.outcome}"))
        elif before is not None and after is not None:
            _compare_case(before, after, tolerance, significance, out)
            if before.outcome in _PASSED + _FAILED and after.outcome in _PASSED + _FAILED:
                decided.append(
                    (
                        before.outcome in _PASSED,
                        after.outcome in _PASSED,
                        (_trials(before), _trials(after)),
                    )
                )
            if out.matched is None and before.nodeid != after.nodeid:
                out.matched = (
                    "node ids matched across rootdirs: "
                    f"the baseline's {_file_of(before.nodeid)}::* "
                    f"is this run's {_file_of(after.nodeid)}::*"
                )
    out.suite = SuiteTest.of(decided)
    return out


def _trials(record: CaseRecord) -> tuple[int, int]:
    """``(passing trials, trials)`` of a decided case.

    One trial of its outcome when it never ran (an error).
    """
    if record.trials:
        return record.passes, len(record.trials)
    return (1 if record.outcome in _PASSED else 0), 1


_Key = tuple[bool, str]
"""A node id as compared: whether it had the run's rootdir prefix, and the node id without it.

``(True, the node id without the run's rootdir prefix)``, ``(False, the node id)`` for one without
that prefix.
"""


def _as_is(nodeid: str) -> _Key:
    return True, nodeid


def _strip(prefix: str, nodeid: str) -> _Key:
    return (True, nodeid[len(prefix) :]) if nodeid.startswith(prefix) else (False, nodeid)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _leading(parts: list[str], same: int) -> str:
    """The directories before the last ``same`` parts of a path, each with its ``/``."""
    return "".join(f"{part}/" for part in parts[: len(parts) - same])


def _some(records: dict[str, CaseRecord], shown: int = 2) -> str:
    names = sorted(records)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _rootdir_prefixes(base: list[str], cand: list[str]) -> tuple[str, str] | None:
    """``(the baseline's prefix, this run's)``: the prefixes that make the most node ids match.

    The leading directories that, left out of the node ids, make the most cases match (the same
    files seen from two rootdirs: ``evals/eval_x.yaml::a`` and ``eval_x.yaml::a``); ``None`` when no
    two node ids name the same file name and case.
    """
    by_tail: dict[str, list[list[str]]] = {}
    for nodeid in cand:
        parts = _file_of(nodeid).split("/")
        by_tail.setdefault(parts[-1] + nodeid[len(_file_of(nodeid)) :], []).append(parts)
    votes: Counter[tuple[str, str]] = Counter()
    for nodeid in base:
        parts = _file_of(nodeid).split("/")
        for other in by_tail.get(parts[-1] + nodeid[len(_file_of(nodeid)) :], [])[:_CANDIDATES]:
            same = 1
            while same < min(len(parts), len(other)) and parts[-same - 1] == other[-same - 1]:
                same += 1
            votes[_leading(parts, same), _leading(other, same)] += 1
    return votes.most_common(1)[0][0] if votes else None


def load_records(path: Path) -> list[CaseRecord]:
    """The records of an ``--agent-eval-report`` file.

    ``BaselineError`` naming the file when it is not one.
    """
    return records_of(load_report(path)["cases"], path)


def records_of(cases: list[Any], path: Path | None = None) -> list[CaseRecord]:
    """A report's cases as records.

    ``BaselineError`` (naming ``path``, when given) when one is not a record.
    """
    try:
        return [CaseRecord.from_dict(c) for c in cases]
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        where = f"{path}: " if path is not None else ""
        raise BaselineError(
            f"{where}a case record does not match the report schema: {exc}"
        ) from None


def load_report(path: Path) -> dict[str, Any]:
    """An ``--agent-eval-report`` file as data, its cases checked against the report schema.

    Each field must be of the type the reports read; ``BaselineError`` naming the file, and the case
    and field, when it is not one.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the report: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    return check_report(data, path)


def check_report(data: Any, path: Path) -> dict[str, Any]:
    """``data`` when it is a report whose cases match the report schema.

    ``data`` is read from ``path``: a report, or one a journal was made into. ``BaselineError``
    naming the file, and the case and field, when it is not.
    """
    if (
        not isinstance(data, dict)
        or data.get("schema_version") != SCHEMA_VERSION
        or "cases" not in data
    ):
        raise BaselineError(
            f"{path}: not an --agent-eval-report file of schema_version {SCHEMA_VERSION}; "
            "write one with pytest --agent-eval-report PATH"
        )
    from pytest_agent_eval.report.reading import problem

    found = problem(
        data
    )  # every field of its type and range (SPEC §22): one line naming the first that is not
    if found is not None:
        what = "a case record" if found.startswith("cases[") else "the report"
        raise BaselineError(f"{path}: {what} does not match the report schema: {found}")
    return data


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")
