"""Figures over a group of case records, shared by the terminal summary and the other reports.

Pass counts, scores, pass rate of repeated cases, latency, tool selection, usage. Plain Python.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import NamedTuple

from pytest_agent_eval.checks.base import TOOL_SELECTION_CHECKS, check_name
from pytest_agent_eval.report.record import CaseRecord


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile of ``values``.

    The smallest value with at least ``p`` of the values at or below it.
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


class Stats(NamedTuple):
    """What the summary shows for one group of cases.

    ``None`` where the group has nothing to measure.
    """

    total: int
    passed: int
    failed: int
    errors: int
    skipped: int
    mean_score: float | None
    min_score: float | None
    repeated_pass_rate: float | None
    """Passing trials over all trials of the repeated cases (``repeat`` > 1)."""
    latency_p50: float | None
    latency_p95: float | None
    """Over every trial's agent latency."""
    tool_accuracy: float | None
    """The mean score of the tool-selection checks that were scored, over every trial."""
    tokens: int | None
    cost: float | None
    """Summed over the cases with a cost: partial when ``unpriced_cases``."""
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    """Means over the repeated cases that have them (SPEC §20)."""
    ks: tuple[int, ...] = ()
    """The k of those cases (one value unless cases ran different numbers of trials)."""
    pass_k_cases: int = 0
    unpriced_cases: int = 0
    """Cases whose cost is unknown because a model had no price."""
    unpriced_models: tuple[str, ...] = ()

    @property
    def partial_cost(self) -> str | None:
        """The cases whose models had no price, as ``"1 case with unpriced models: foo-model"``.

        Said when the cost leaves those cases out.
        """
        if not self.unpriced_cases:
            return None
        cases = f"{self.unpriced_cases} case{'s' if self.unpriced_cases != 1 else ''}"
        return f"{cases} with unpriced models: {', '.join(self.unpriced_models)}"

    def pass_k_line(self) -> str | None:
        """The repeated cases' pass@k and pass^k line.

        ``repeated cases (2): pass@3 0.96, pass^3 0.42 (means)``, with each case's k when they
        differ; ``None`` without a repeated case that has them.
        """
        if self.pass_at_k is None or self.pass_hat_k is None:
            return None
        k = str(self.ks[0]) if len(self.ks) == 1 else "k"
        note = (
            "means"
            if len(self.ks) == 1
            else f"means; k = each case's trials: {', '.join(map(str, self.ks))}"
        )
        return (
            f"repeated cases ({self.pass_k_cases}): "
            f"pass@{k} {self.pass_at_k:.2f}, pass^{k} {self.pass_hat_k:.2f}"
            f" ({note})"
        )

    def cost_line(self) -> str | None:
        """The cost line, saying so when the cost is partial.

        ``cost $0.0123 (partial: 2 cases with unpriced models: foo-model)``, when the cost is
        partial.
        """
        partial = self.partial_cost
        if partial is None:
            return None
        return (
            f"cost unknown ({partial})"
            if self.cost is None
            else f"cost ${self.cost:.4f} (partial: {partial})"
        )

    @classmethod
    def of(cls, records: Iterable[CaseRecord]) -> Stats:
        """The figures of ``records``.

        Those of the last few groups are kept, by their records' identity (a record is not changed
        once made): a run's summary, reports and stored run ask for the same group's several times.
        """
        group = tuple(records)
        for seen, stats in _KEPT:
            if len(seen) == len(group) and all(map(operator.is_, seen, group)):
                return stats
        stats = cls._of(group)
        _KEPT.insert(0, (group, stats))
        del _KEPT[_KEEP:]
        return stats

    @classmethod
    def _of(cls, records: tuple[CaseRecord, ...]) -> Stats:
        group = sorted(
            records, key=lambda r: r.nodeid
        )  # sums in one order: the same figures under -n
        outcomes = [r.outcome for r in group]
        scores = [r.score for r in group if r.score is not None]
        repeated = [r for r in group if len(r.trials) > 1]
        latencies = [t.latency_s for r in group for t in r.trials]
        tool_scores = [
            c.score
            for r in group
            for t in r.trials
            for c in t.checks
            if c.scored and c.score is not None and check_name(c.name) in TOOL_SELECTION_CHECKS
        ]
        tokens = [r.tokens["total"] for r in group if r.tokens is not None]
        costs = [r.cost for r in group if r.cost is not None]
        unpriced = [r.unpriced_models for r in group if r.unpriced_models]
        at_k = [r for r in group if r.pass_at_k is not None and r.pass_hat_k is not None]
        return cls(
            total=len(group),
            passed=sum(o in ("passed", "xpassed") for o in outcomes),
            failed=outcomes.count("failed"),
            errors=outcomes.count("error"),
            skipped=sum(o in ("skipped", "xfailed") for o in outcomes),
            mean_score=sum(scores) / len(scores) if scores else None,
            min_score=min(scores) if scores else None,
            repeated_pass_rate=(
                sum(r.passes for r in repeated) / sum(len(r.trials) for r in repeated)
                if repeated
                else None
            ),
            latency_p50=percentile(latencies, 0.5) if latencies else None,
            latency_p95=percentile(latencies, 0.95) if latencies else None,
            tool_accuracy=sum(tool_scores) / len(tool_scores) if tool_scores else None,
            tokens=sum(tokens) if tokens else None,
            cost=sum(costs) if costs else None,
            pass_at_k=sum(r.pass_at_k or 0.0 for r in at_k) / len(at_k) if at_k else None,
            pass_hat_k=sum(r.pass_hat_k or 0.0 for r in at_k) / len(at_k) if at_k else None,
            ks=tuple(sorted({r.k for r in at_k if r.k is not None})),
            pass_k_cases=len(at_k),
            unpriced_cases=len(unpriced),
            unpriced_models=tuple(sorted({m for models in unpriced for m in models})),
        )


_KEEP = 4
_KEPT: list[tuple[tuple[CaseRecord, ...], Stats]] = []
"""The figures of the last groups of records asked for (``Stats.of``), the newest first."""


def by_file_and_tag(
    records: Iterable[CaseRecord],
) -> tuple[dict[str, list[CaseRecord]], dict[str, list[CaseRecord]]]:
    """The records of each file, and of each tag."""
    by_file: dict[str, list[CaseRecord]] = {}
    by_tag: dict[str, list[CaseRecord]] = {}
    for record in records:
        by_file.setdefault(record.file, []).append(record)
        for tag in record.tags:
            by_tag.setdefault(tag, []).append(record)
    return by_file, by_tag


def by_agent(records: Iterable[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """The records of each matrix agent, by name.

    Empty unless the run has two agents or more to compare.
    """
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        if record.agent is not None:
            groups.setdefault(record.agent, []).append(record)
    return dict(sorted(groups.items())) if len(groups) > 1 else {}


def agent_figures(
    records: Iterable[CaseRecord],
) -> dict[str, dict[str, float | int | list[str] | None]]:
    """The JSON report's figures per matrix agent.

    Per agent: passed, total, mean score, latency p50/p95, cost and the models without a price.
    """
    out: dict[str, dict[str, float | int | list[str] | None]] = {}
    for name, group in by_agent(records).items():
        stats = Stats.of(group)
        out[name] = {
            "passed": stats.passed,
            "total": stats.total,
            "pass_rate": stats.passed / stats.total if stats.total else None,
            "mean_score": stats.mean_score,
            "latency_p50_s": stats.latency_p50,
            "latency_p95_s": stats.latency_p95,
            "tokens": stats.tokens,
            "cost": stats.cost,
            "unpriced_models": list(stats.unpriced_models),
        }
    return out


def partial_passes(records: Iterable[CaseRecord]) -> list[tuple[CaseRecord, list[str]]]:
    """Cases that passed with something failing inside, each with what failed.

    Something failing inside: a check under ``min_score``, trials under ``min_pass_rate``; one line
    per thing.
    """
    found = []
    for record in sorted(records, key=lambda r: r.nodeid):
        if record.outcome not in ("passed", "xpassed") or not record.trials:
            continue
        lines = []
        if len(record.trials) > 1 and record.passes < len(record.trials):
            lines.append(
                f"{record.passes}/{len(record.trials)} trials passed "
                f"(min_pass_rate {record.min_pass_rate:g})"
            )
        failed: dict[str, str] = {}
        for trial in record.trials:
            for check in trial.checks:
                if not check.passed and check.scored:
                    failed.setdefault(check.name, check.message)
        for name, message in failed.items():
            lines.append(f"{name}: {message}" if message else name)
        if lines:
            found.append((record, lines))
    return found
