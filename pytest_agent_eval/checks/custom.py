"""The ``custom`` check: user functions named by ``module:function`` judge the run."""

from __future__ import annotations

import inspect
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord
from pytest_agent_eval.imports import import_object


def _to_result(name: str, value: Any) -> CheckResult:
    if isinstance(value, CheckResult):
        return value
    if isinstance(value, bool):
        return CheckResult.of(name, value, message="" if value else "returned False")
    if isinstance(value, (int, float)):
        score = float(value)
        return CheckResult.of(name, score >= 0.5, score=score, message=f"score {score:.2f}")
    if isinstance(value, tuple) and len(value) == 2:
        ok, msg = value
        return CheckResult.of(name, bool(ok), message=str(msg))
    raise TypeError(
        f"custom check {name} returned {type(value).__name__}; "
        "return a bool, a score, (bool, message) or a CheckResult"
    )


def custom(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Each named function, given the run (and the case, if it takes two arguments), passes."""
    refs = [spec] if isinstance(spec, str) else list(spec)
    results = []
    for ref in refs:
        func = import_object(ref)
        nargs = len(inspect.signature(func).parameters)
        value = func(run, ctx.case) if nargs >= 2 else func(run)
        results.append(_to_result(ref, value))
    failed = [r for r in results if not r.passed]
    detail = [
        f"{'✓' if r.passed else '✗'} {r.name}" + (f": {r.message}" if r.message else "")
        for r in results
    ]
    return CheckResult.of(
        "custom",
        not failed,
        score=sum(r.score for r in results) / len(results) if results else 1.0,
        expected=refs,
        actual=[f"{r.name}: {'pass' if r.passed else 'fail'}" for r in results],
        message="; ".join(f"{r.name}: {r.message or 'failed'}" for r in failed),
        detail=detail,
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "custom",
        custom,
        {"type": ["string", "array"], "items": {"type": "string"}},
        "user functions given the run pass",
    )
