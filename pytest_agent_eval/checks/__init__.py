"""Built-in checks (SPEC §4) and the registry they live in."""

from __future__ import annotations

from pytest_agent_eval.checks import (
    answers,
    custom,
    injection,
    judge,
    latency,
    outcome,
    output,
    output_schema,
    promptfoo,
    scorers,
    spans,
    tools,
)
from pytest_agent_eval.checks.base import (
    Check,
    CheckContext,
    CheckError,
    CheckRegistry,
    CheckSpec,
    evaluate,
)
from pytest_agent_eval.core.results import CheckResult

__all__ = [
    "Check",
    "CheckContext",
    "CheckError",
    "CheckRegistry",
    "CheckResult",
    "CheckSpec",
    "builtin_registry",
    "evaluate",
]


def builtin_registry() -> CheckRegistry:
    """A registry holding every built-in check."""
    registry = CheckRegistry()
    families = (
        output,
        tools,
        outcome,
        latency,
        output_schema,
        judge,
        custom,
        answers,
        scorers,
        promptfoo,
        injection,
        spans,
    )
    for family in families:
        family.register(registry)
    registry.mark_builtin()
    return registry
