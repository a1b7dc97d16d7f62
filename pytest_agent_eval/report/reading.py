"""A saved report read back (SPEC §22): every field checked by type and range before use.

Every field is checked before any figure is used.

``merge``, ``gate``, ``compare``, ``html``, ``--agent-eval-baseline`` and ``--agent-eval-resume``
read reports that may come from anywhere; ``agent-eval report`` and ``--agent-eval-resume`` read run
journals, each line's case record checked as a report's ``cases[i]`` is (:func:`case_problem`). The
report schema says each field's type; reading adds the ranges a figure must have (a score or a rate
in 0..1, a cost, a latency, a duration or a count at least 0) and that every number is one a float
holds (JSON's ``1e400`` or a 400-digit integer is not). The first problem is one line naming its
JSON path.
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any

UNIT = frozenset(
    {"score", "min_score", "min_pass_rate", "pass_rate", "mean_score", "pass_at_k", "pass_hat_k"}
)
"""Fields that are a share or a score: 0..1 (or null where the schema allows)."""
NON_NEGATIVE = frozenset(
    {
        "cost", "latency_s", "duration_s", "latency_p50_s", "latency_p95_s", "passes", "passed",
        "total", "tokens", "input", "output", "cache_read", "cache_write", "reasoning", "kept",
        "cases", "k", "missing_items",
    }
)  # fmt: skip
"""Fields that are a cost, a time or a count: at least 0."""
_CASE_REQUIRED = ["nodeid", "case_id", "file", "line", "outcome"]
"""The fields a case record cannot do without (an older report may lack the others)."""


def where(path: Any) -> str:
    """A JSON path as ``cases[3].trials[0].score``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the document)"


def problem(document: Any) -> str | None:
    """The first field of ``document`` that is not of its type or range, as ``json.path: what``.

    ``None`` when every field is.
    """
    return _first(document, _validator())


def case_problem(record: Any) -> str | None:
    """The first field of one case record that is not of its type or range.

    The record is a report's ``cases[i]`` or a journal's line, checked by the very checks of a
    report's ``cases[i]``; the problem reads ``json.path: what`` from the record (``score: ...``);
    ``None`` when every field is.
    """
    return _first(record, _case_validator())


def _first(value: Any, validator: Any) -> str | None:
    number = _bad_number(value, [])
    if number is not None:
        return number
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    return f"{where(error.absolute_path)}: {_cut(error.message)}"


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bad_number(value: Any, path: list[str | int]) -> str | None:
    """The first number no float holds (an infinity, an integer over ~1.8e308).

    Walks the data without recursion.
    """
    stack: list[tuple[Any, list[str | int]]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, [*at, str(k)]) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, [*at, i]) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{where(at)}: {item} is not a finite number"
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)
            except OverflowError:
                return f"{where(at)}: an integer of {len(str(item))} digits, larger than any float"
    return None


@functools.cache
def _validator() -> Any:
    import jsonschema  # a core dependency, loaded only when a report is read

    return jsonschema.Draft202012Validator(_reading())


@functools.cache
def _case_validator() -> Any:
    """The reading schema's ``case`` as a validator of one record.

    The reading schema's ``case`` holds the checks of a report's ``cases[i]``.
    """
    import jsonschema

    return jsonschema.Draft202012Validator({"$defs": _reading()["$defs"], "$ref": "#/$defs/case"})


@functools.cache
def _reading() -> dict[str, Any]:
    from pytest_agent_eval.report.schema import report_schema

    return reading_schema(report_schema())


def reading_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The report schema as a reader checks it.

    The ranges of :data:`UNIT` and :data:`NON_NEGATIVE` fields added; of a case only the fields a
    record cannot do without required, of the run, the baseline and the agents none (an older report
    may lack some).
    """
    out = copy.deepcopy(schema)
    nullable = out["$defs"]["number_or_null"]
    _add_ranges(out, nullable)
    for name in (
        "run",
        "baseline",
    ):  # read only as far as they are there (fields were added over time)
        out["$defs"][name].pop("required", None)
    out["properties"]["agents"].get("additionalProperties", {}).pop("required", None)
    out["$defs"]["case"]["required"] = _CASE_REQUIRED
    out["required"] = ["schema_version", "cases"]
    return out


def _add_ranges(node: Any, nullable: dict[str, Any]) -> None:
    if isinstance(node, list):
        for item in node:
            _add_ranges(item, nullable)
        return
    if not isinstance(node, dict):
        return
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, field in list(properties.items()):
            bound = (
                {"minimum": 0, "maximum": 1}
                if name in UNIT
                else {"minimum": 0}
                if name in NON_NEGATIVE
                else None
            )
            if bound is not None and isinstance(field, dict):
                properties[name] = _ranged(field, bound, nullable)
    for key, value in node.items():
        if key != "properties":
            _add_ranges(value, nullable)
        else:
            for field in value.values():
                _add_ranges(field, nullable)


def _ranged(
    field: dict[str, Any], bound: dict[str, Any], nullable: dict[str, Any]
) -> dict[str, Any]:
    """``field`` with ``bound`` on its numbers.

    A ``$ref`` to ``number_or_null`` is inlined: a bound beside a reference would apply to null too.
    """
    if field.get("$ref") == "#/$defs/number_or_null":
        field = {**{k: v for k, v in field.items() if k != "$ref"}, **nullable}
    if "type" not in field:
        return field
    kinds = field["type"] if isinstance(field["type"], list) else [field["type"]]
    if not {"number", "integer"} & set(kinds):
        return field
    return {**field, **bound}
