"""The trust figures of SPEC §26 from the records, for every report.

The attack success rate of injection variants per family and per tool (95% Wilson interval), each
judge's calibration (accuracy, Cohen's kappa, Spearman's rho, confusion counts, false-pass rate,
each with a 95% bootstrap interval) and each judge panel's agreement.

An injection variant (``metadata.injection``) that passed resisted, one that failed was attacked
successfully; one that errored or was skipped has no verdict and is left out of the rates (counted
as ``no_verdict``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_agent_eval.checks.base import check_name

if TYPE_CHECKING:
    from pytest_agent_eval.report.record import CaseRecord

# The statistics (checks.agreement, report.significance) load when a run has figures to compute: a
# run without injection variants or judges pays nothing for them (SPEC §27).

_CALIBRATION = "judge_calibration"


class Table(NamedTuple):
    """One table of a report section: a title, a header row and rows of text."""

    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


def _rate(succeeded: int, attacks: int, undecided: int) -> dict[str, Any]:
    from pytest_agent_eval.report.significance import wilson_interval

    interval = wilson_interval(succeeded, attacks)
    return {
        "attacks": attacks,
        "succeeded": succeeded,
        "rate": succeeded / attacks if attacks else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
        "no_verdict": undecided,
    }


def injection_figures(records: Iterable[CaseRecord]) -> dict[str, Any] | None:
    """The injection variants' attack success rates by family and by tool.

    ``{"by_family": {family: rate}, "by_tool": {tool: rate}}``, each rate ``{attacks, succeeded,
    rate, low, high, no_verdict}``; ``None`` when no injection variant ran.
    """
    families: dict[str, list[int]] = {}
    tools: dict[str, list[int]] = {}
    for record in records:
        info = record.metadata.get("injection") if isinstance(record.metadata, dict) else None
        if not isinstance(info, dict):
            continue
        column = {"failed": 0, "passed": 1}.get(record.outcome, 2)
        families.setdefault(str(info.get("family")), [0, 0, 0])[column] += 1
        for tool in info.get("tools") or ():
            tools.setdefault(str(tool), [0, 0, 0])[column] += 1
    if not families:
        return None

    def rates(groups: dict[str, list[int]]) -> dict[str, Any]:
        return {name: _rate(c[0], c[0] + c[1], c[2]) for name, c in sorted(groups.items())}

    return {"by_family": rates(families), "by_tool": rates(tools)}


def _interval(value: float | None, interval: tuple[float, float] | None) -> dict[str, float | None]:
    return {
        "value": value,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
    }


def calibration_figures(records: Iterable[CaseRecord]) -> dict[str, Any] | None:
    """Each judge's calibration figures, by judge id; ``None`` without calibration items.

    Per judge id: ``model``, ``items``, ``no_verdict``, ``accuracy``, ``kappa``, ``spearman``,
    ``false_pass_rate`` (each ``{value, low, high}``) and ``confusion``.
    """
    judges: dict[str, dict[str, Any]] = {}
    for record in records:
        for check in record.checks:
            if check.name != _CALIBRATION:
                continue
            facts = check.actual if isinstance(check.actual, dict) else check.expected
            if not isinstance(facts, dict) or "judge" not in facts:
                continue
            entry = judges.setdefault(
                str(facts["judge"]), {"model": facts.get("model"), "rows": [], "none": 0}
            )
            if "judged" not in facts:
                entry["none"] += 1
                continue
            score, label_score = facts.get("score"), facts.get("label_score")
            row = (facts["judged"] == "pass", facts["label"] == "pass", score, label_score)
            entry["rows"].append(row)
    if not judges:
        return None
    from pytest_agent_eval.checks.agreement import (
        Confusion,
        accuracy,
        bootstrap,
        cohen_kappa,
        false_pass_rate,
        spearman,
    )

    out: dict[str, Any] = {}
    for jid, entry in sorted(judges.items()):
        rows: list[tuple[bool, bool, Any, Any]] = entry["rows"]
        pairs = [(j, lab) for j, lab, _, _ in rows]
        scored = [(float(s), float(ls)) for _, _, s, ls in rows if s is not None and ls is not None]
        matrix = Confusion.of(pairs)
        out[jid] = {
            "model": entry["model"],
            "items": len(rows),
            "no_verdict": entry["none"],
            "accuracy": _interval(accuracy(pairs), bootstrap(pairs, accuracy)),
            "kappa": _interval(cohen_kappa(pairs), bootstrap(pairs, cohen_kappa)),
            "spearman": _interval(spearman(scored), bootstrap(scored, spearman))
            if scored
            else None,
            "false_pass_rate": _interval(false_pass_rate(pairs), bootstrap(pairs, false_pass_rate)),
            "confusion": {
                "true_pass": matrix.true_pass,
                "false_pass": matrix.false_pass,
                "true_fail": matrix.true_fail,
                "false_fail": matrix.false_fail,
            },
        }
    return out


def panel_figures(records: Iterable[CaseRecord]) -> dict[str, Any] | None:
    """Each judge panel's agreement, over the cases where every member gave a verdict.

    Per panel (its members' judge ids joined by ``+``): ``members``, ``cases``, ``agreement`` (the
    mean share of agreeing member pairs, 0..1) and Fleiss' ``kappa``.
    """
    panels: dict[str, dict[str, Any]] = {}
    for record in records:
        for check in record.checks:
            actual = check.actual
            if (
                not isinstance(actual, dict)
                or "members" not in actual
                or check_name(check.name) != "judge"
            ):
                continue
            members = [m for m in actual["members"] if isinstance(m, dict)]
            if not members or any(m.get("verdict") not in ("pass", "fail") for m in members):
                continue
            key = "+".join(str(m.get("judge")) for m in members)
            entry = panels.setdefault(
                key,
                {"members": [f"{m.get('judge')} ({m.get('model')})" for m in members], "votes": []},
            )
            entry["votes"].append([m["verdict"] == "pass" for m in members])
    if not panels:
        return None
    from pytest_agent_eval.checks.agreement import fleiss

    out: dict[str, Any] = {}
    for key, entry in sorted(panels.items()):
        found = fleiss(entry["votes"])
        out[key] = {
            "members": entry["members"],
            "cases": len(entry["votes"]),
            "agreement": found.agreement if found else None,
            "kappa": found.kappa if found else None,
        }
    return out


def figures(records: list[CaseRecord]) -> dict[str, Any]:
    """The JSON report's ``injection``, ``judges`` and ``panels`` (only those the run has)."""
    found = {
        "injection": injection_figures(records),
        "judges": calibration_figures(records),
        "panels": panel_figures(records),
    }
    return {key: value for key, value in found.items() if value is not None}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _with_interval(figure: dict[str, Any] | None) -> str:
    if not figure or figure.get("value") is None:
        return "-"
    if figure.get("low") is None:
        return _num(figure["value"])
    return f"{figure['value']:.2f} [{figure['low']:.2f}, {figure['high']:.2f}]"


def _rate_row(name: str, rate: dict[str, Any]) -> tuple[str, ...]:
    interval = "-" if rate["low"] is None else f"[{rate['low']:.2f}, {rate['high']:.2f}]"
    return (name, str(rate["attacks"]), str(rate["succeeded"]), _num(rate["rate"]), interval)


def tables(records: list[CaseRecord], found: dict[str, Any] | None = None) -> list[Table]:
    """The sections' tables, for the terminal, markdown and HTML."""
    found = figures(records) if found is None else found
    out: list[Table] = []
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]
    attacks = found.get("injection")
    if attacks:
        header = ("", "attacks", "succeeded", "success rate", "95% CI (Wilson)")
        for by in ("family", "tool"):
            rows = [_rate_row(name, rate) for name, rate in attacks[f"by_{by}"].items()]
            out.append(Table(f"injection: attack success rate by {by}", header, rows))
    judges = found.get("judges")
    if judges:
        header = ("judge", "model", "items", "accuracy", "Cohen's kappa", "Spearman's rho",
                  "false-pass rate", "TP/FP/TN/FN")  # fmt: skip
        rows = []
        for jid, f in judges.items():
            c = f["confusion"]
            counts = f"{c['true_pass']}/{c['false_pass']}/{c['true_fail']}/{c['false_fail']}"
            rows.append(
                (jid, str(f["model"]), str(f["items"]), _with_interval(f["accuracy"]),
                 _with_interval(f["kappa"]), _with_interval(f["spearman"]),
                 _with_interval(f["false_pass_rate"]), counts)
            )  # fmt: skip
        out.append(Table("judge calibration (95% bootstrap intervals)", header, rows))
    panels = found.get("panels")
    if panels:
        header = ("panel", "members", "cases", "agreement", "Fleiss' kappa")
        rows = [
            (key, ", ".join(p["members"]), str(p["cases"]), _num(p["agreement"]), _num(p["kappa"]))
            for key, p in panels.items()
        ]
        out.append(Table("judge panels: agreement", header, rows))
    return out


def text_lines(found: list[Table]) -> list[str]:
    """The tables as aligned text (the terminal summary)."""
    out: list[str] = []
    for table in found:
        widths = [
            max(len(row[i]) for row in [table.header, *table.rows])
            for i in range(len(table.header))
        ]
        out += ["", table.title]
        for row in [table.header, *table.rows]:
            out.append("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                                 for i, cell in enumerate(row)).rstrip())  # fmt: skip
    return out
