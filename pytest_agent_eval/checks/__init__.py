"""Built-in checks (SPEC §4) and the registry they live in.

The checks come in families, one module each; the table below names the checks of each, so that
a run imports only the families its files use (SPEC §27).
"""

from __future__ import annotations

from typing import Any

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

FAMILIES: dict[str, tuple[str, ...]] = {
    "output": ("contains", "contains_any", "not_contains", "regex", "not_regex", "equals"),
    "tools": (
        "tools_called", "tools_not_called", "tools_exactly", "tool_sequence", "tools_in_order",
        "max_tool_calls", "tool_args", "tools_only", "tool_counts", "tool_call",
        "max_repeated_calls",
    ),
    "outcome": ("outcome",),
    "latency": ("max_latency_s",),
    "output_schema": ("output_schema",),
    "judge": ("judge",),
    "custom": ("custom",),
    "answers": ("matches_reference", "answer", "answered", "allocation_valid"),
    "scorers": (
        "tool_selection", "tool_usage", "grounding", "reasoning", "efficiency", "behavior",
        "response_time",
    ),
    "promptfoo": ("promptfoo",),
    "injection": ("resists_injection",),
    "spans": ("spans", "no_error_spans", "max_llm_calls"),
}  # fmt: skip
"""Each built-in family (a module of this package) and the checks its ``register`` adds, in order.

A test holds the table to what the modules register.
"""

SPAN_CHECKS = frozenset(FAMILIES["spans"])
"""The checks that read a trial's spans: a case with one is traced without any trace option."""

MODIFIERS: dict[str, dict[str, Any]] = {
    "case_sensitive": {"type": "boolean"},
    "failed_calls": {
        "enum": ["count", "ignore"],
        "description": "ignore: calls whose tool raised are left out of every tool check",
    },
}
"""``expect:`` keys that tune the checks of a family (``output``'s, ``tools``'), not checks."""


def builtin_registry() -> CheckRegistry:
    """A registry holding every built-in check (each family imported when first used)."""
    registry = CheckRegistry()
    for family, names in FAMILIES.items():
        registry.register_family(f"{__name__}.{family}", names)
    registry.modifiers.update(MODIFIERS)
    registry.mark_builtin()
    return registry
