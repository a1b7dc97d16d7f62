"""The ``max_latency_s`` check: the agent answered within a time limit."""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord


def max_latency_s(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The agent answered within x seconds."""
    limit = float(spec)
    ok = run.latency_s <= limit
    return CheckResult.of(
        "max_latency_s",
        ok,
        score=1.0 if ok else min(1.0, limit / run.latency_s),
        expected=f"<= {limit:g} s",
        actual=f"{run.latency_s:.3f} s",
        message="" if ok else f"answered in {run.latency_s:.3f} s, limit {limit:g} s",
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "max_latency_s",
        max_latency_s,
        {"type": "number", "exclusiveMinimum": 0},
        "answered within x s",
        blocking=False,
    )
