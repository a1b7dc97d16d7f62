"""A promptfoo test's assertions, checked at load time.

What the plugin cannot honour, or what promptfoo would refuse when it runs, errors the case now
(``path:line: not supported: …``); values are rendered with the test's vars.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_agent_eval.cases.dialects.common import is_number
from pytest_agent_eval.cases.dialects.promptfoo_files import (
    Source,
    assertion_of_string,
    read_var,
    render,
)
from pytest_agent_eval.checks.promptfoo import MODEL_GRADED, SUPPORTED
from pytest_agent_eval.checks.promptfoo_graded import python_path
from pytest_agent_eval.checks.promptfoo_types import ALIASES, TRANSFORM, unsupported
from pytest_agent_eval.core.document import read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors

ASSERT_KEYS = frozenset(
    {"type", "value", "threshold", "weight", "metric", "config", "options", "provider"}
)


SET_KEYS = frozenset({"type", "assert", "threshold", "weight", "metric"})


def assertions_of(
    raw: list[Any],
    variables: dict[str, Any],
    source: Source,
    default_source: Source,
    n_default: int,
    base: Path,
    problems: list[str],
) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(raw):
        where = (
            default_source.at("assert", i) if i < n_default else source.at("assert", i - n_default)
        )
        a = _assertion(item, variables, where, base, problems, in_set=False)
        if a is not None:
            out.append(a)
    return out


def _assertion(
    item: Any,
    variables: dict[str, Any],
    source: Source,
    base: Path,
    problems: list[str],
    in_set: bool,
) -> dict[str, Any] | None:
    if isinstance(item, str):
        item = assertion_of_string(item)
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        problems.append(source.error(f"an assertion is a mapping with `type`, got {item!r}"))
        return None
    kind = item["type"]
    if kind == "assert-set":
        if in_set:
            problems.append(source.error("not supported: an assert-set inside an assert-set"))
            return None
        extra = sorted(set(item) - SET_KEYS)
        if extra:
            problems.append(source.error(f"not supported: assert-set field {', '.join(extra)}"))
        inner = [
            _assertion(sub, variables, source.at("assert", j), base, problems, True)
            for j, sub in enumerate(item.get("assert") or [])
        ]
        if not inner:
            problems.append(source.error("assert-set: `assert` needs at least one assertion"))
        return {
            **_common(item, source, problems),
            "type": kind,
            "assert": [a for a in inner if a is not None],
        }
    inverse = kind.startswith("not-")
    base_type = kind[4:] if inverse else kind
    base_type = ALIASES.get(base_type, base_type)
    if base_type not in SUPPORTED:
        problems.append(source.error(unsupported(kind)))
        return None
    extra = sorted(set(item) - ASSERT_KEYS)
    if extra:
        why = f"not supported: assertion field {', '.join(extra)} (on `{kind}`)"
        problems.append(
            source.error(why + (f"; instead {TRANSFORM}" if "transform" in extra else ""))
        )
    if item.get("provider") is not None:
        problems.append(
            source.error(
                f"not supported: a grader `provider` on `{kind}` (the plugin's judge grades)"
            )
        )
    out = {**_common(item, source, problems), "type": kind, "base": base_type, "inverse": inverse}
    for name in ("config", "options"):  # `config` reaches a python assertion as context["config"]
        if item.get(name) is not None:
            out[name] = item[name]
    value = item.get("value")
    if base_type == "python" and isinstance(value, str) and value.startswith("file://"):
        path, function = python_path(value[len("file://") :], base)
        out.update(file=path, function=function, value=value)
        return out
    if isinstance(value, str) and value.startswith("file://"):
        value = read_var(value, base, source, problems)
    try:
        out["value"] = _render_value(value, variables)
    except ValueError as exc:
        problems.append(source.error(str(exc)))
        out["value"] = (
            value  # unrendered: the case is an error already, its value needs no second message
        )
    _check_value(out, source, problems)
    return out


def _common(item: dict[str, Any], source: Source, problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"line": source.line}
    for name in ("threshold", "weight"):
        value = item.get(name)
        if value is not None:
            if not is_number(value) or (name == "weight" and value < 0):
                problems.append(
                    source.error(
                        f"{item.get('type')}: `{name}` must be a number >= 0, got {value!r}"
                    )
                )
            else:
                out[name] = float(value)
    if item.get("metric") is not None:
        out["metric"] = str(item["metric"])
    return out


def _render_value(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return render(value, variables)
    if isinstance(value, list):
        return [render(v, variables) if isinstance(v, str) else v for v in value]
    return value


def _check_value(a: dict[str, Any], source: Source, problems: list[str]) -> None:
    """What promptfoo would refuse at run time, refused at load time.

    The case errors, naming the line.
    """
    base, value = a["base"], a.get("value")
    needs_value = {
        "equals",
        "contains",
        "icontains",
        "contains-any",
        "contains-all",
        "icontains-any",
        "icontains-all",
        "starts-with",
        "regex",
        "python",
        "tool-call-f1",
        "trajectory:tool-used",
        "trajectory:tool-sequence",
        "trajectory:step-count",
        *MODEL_GRADED,
    }
    if base in needs_value and value in (None, "", []):
        problems.append(source.error(f"`{a['type']}` needs a `value`"))
        return
    if base in ("latency", "cost") and a.get("threshold") is None:
        problems.append(
            source.error(f"not supported: `{a['type']}` without `threshold` (a metric-only figure)")
        )
    if base == "regex":
        try:
            re.compile(str(value))
        except re.error as exc:
            problems.append(source.error(f"regex: bad pattern {value!r}: {exc}"))
    if base in ("is-json", "contains-json") and isinstance(value, str) and value:
        try:
            a["value"] = read_document(Path("schema.yaml"), value, core=True).data
        except (EvalFileError, EvalFileErrors) as exc:
            why = exc.message if isinstance(exc, EvalFileError) else exc
            problems.append(source.error(f"{a['type']}: the schema is not YAML/JSON: {why}"))
    if base == "trajectory:step-count":
        kinds = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict) or ("min" not in value and "max" not in value):
            problems.append(
                source.error("trajectory:step-count needs a mapping with `min` or `max`")
            )
        elif kinds not in (None, "tool", ["tool"]):
            problems.append(
                source.error(
                    f"not supported: trajectory:step-count of type {kinds} (tool steps only)"
                )
            )
        elif kinds is None:
            problems.append(
                source.error(
                    "not supported: trajectory:step-count without `type: tool` (the plugin "
                    "sees the agent's tool calls, not its other trace spans)"
                )
            )
    if (
        base == "trajectory:tool-sequence"
        and isinstance(value, dict)
        and value.get("mode") not in (None, "exact", "in_order")
    ):
        problems.append(
            source.error(
                f"trajectory:tool-sequence: mode must be exact or in_order, got {value['mode']}"
            )
        )
