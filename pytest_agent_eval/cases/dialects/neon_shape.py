"""What makes a file a Neon suite (SPEC §12), apart from the dialect that reads one.

The loader tries this shape on every mapping with ``cases`` (the native format's shape too), so it
is a module of its own, light to import: the dialect (``neon_suite``) loads only for a suite.
"""

from __future__ import annotations

from typing import Any

SUITE_KEYS = (
    "name", "description", "agent_id", "default_scorers", "default_min_score",
    "default_timeout_seconds", "parallel", "stop_on_failure", "cases",
)  # fmt: skip
CASE_KEYS = (
    "name", "description", "input", "expected_tools", "expected_tool_sequence",
    "expected_output_contains", "expected_output_pattern", "scorers", "scorer_config", "min_score",
    "timeout_seconds", "tags",
)  # fmt: skip
_SUITE_SIGNS = frozenset(SUITE_KEYS) - {"name", "description", "cases"}
_CASE_SIGNS = frozenset(CASE_KEYS) - {"name", "description", "input", "min_score", "tags"}


def detect(data: Any) -> tuple[bool, str]:
    """Whether ``data`` is a Neon suite: a mapping with ``cases`` and Neon's suite or case keys.

    The suite keys are ``agent_id``, ``default_scorers``…
    """
    need = (
        "a mapping with `cases:` and suite keys "
        "(`agent_id`, `default_scorers`, `default_min_score`…) "
        "or case keys (`name` with `input.query`, `expected_tools`, `scorers`…)"
    )
    if not (isinstance(data, dict) and isinstance(data.get("cases"), list)):
        return False, need
    if _SUITE_SIGNS & data.keys():
        return True, ""
    for case in data["cases"]:
        if isinstance(case, dict) and (_CASE_SIGNS & case.keys() or _neon_named(case)):
            return True, ""
    return False, need


def _neon_named(case: dict[str, Any]) -> bool:
    """A case named by ``name`` with ``input: {query: ...}`` and none of the native case keys."""
    native = {"id", "expect", "turns"}
    return "name" in case and isinstance(case.get("input"), dict) and not native & case.keys()
