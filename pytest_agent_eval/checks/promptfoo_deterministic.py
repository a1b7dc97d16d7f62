"""promptfoo's deterministic assertions (``src/assertions/*.ts``), one handler each.

Each is a handler ``(assertion, run, inverse, cost, judge) -> Verdict``, ``not-`` applied by the
handler as promptfoo does. Tool steps are the run's tool calls.
"""

from __future__ import annotations

import csv
import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.checks.base import CheckError
from pytest_agent_eval.checks.patterns import DEFAULT_LIMIT, search
from pytest_agent_eval.core.results import RunRecord


@dataclass
class Verdict:
    """One assertion's (or set's) verdict.

    ``passed`` is None when not scored; ``low``/``high`` bound its score.
    """

    passed: bool | None
    low: float
    high: float
    reason: str = ""
    error: str | None = None

    @classmethod
    def of(cls, passed: bool, score: float, reason: str = "") -> Verdict:
        return cls(passed, score, score, reason)


def _binary(passed: bool, inverse: bool, what: str) -> Verdict:
    ok = passed != inverse
    return Verdict.of(
        ok,
        1.0 if ok else 0.0,
        "passed" if ok else f"expected output to {'not ' if inverse else ''}{what}",
    )


def _values(value: Any) -> list[str]:
    """A list value, or promptfoo's comma-separated string (quotes keep commas)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in next(csv.reader([str(value)], skipinitialspace=True), [])]


def _equals(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    value = a["value"]
    if isinstance(value, (dict, list)):
        try:
            same = json.loads(run.output) == value
        except ValueError:
            same = False
        return _binary(same, inverse, f"equal {json.dumps(value)}")
    return _binary(run.output == str(value), inverse, f"equal {str(value)!r}")


def _contains(fold: bool, mode: str) -> Callable[..., Verdict]:
    def check(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
        hay = run.output.lower() if fold else run.output
        phrases = [str(a["value"])] if mode == "one" else _values(a["value"])
        found = [p for p in phrases if (p.lower() if fold else p) in hay]
        hit = bool(found) if mode in ("one", "any") else len(found) == len(phrases)
        what = {"one": "contain", "any": "contain one of", "all": "contain all of"}[mode]
        missing = (
            ""
            if mode != "all" or inverse
            else f" (missing {[p for p in phrases if p not in found]})"
        )
        return _binary(
            hit, inverse, f"{what} {phrases if mode != 'one' else phrases[0]!r}{missing}"
        )

    return check


def _starts_with(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    return _binary(
        run.output.startswith(str(a["value"])), inverse, f"start with {str(a['value'])!r}"
    )


def _regex(
    a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: Any
) -> Verdict:
    """``re.search`` under the plugin's time limit.

    A catastrophically backtracking pattern has no verdict.
    """
    timeout = judge.ctx.case.timeout
    found = search(
        str(a["value"]), run.output, limit=timeout if timeout is not None else DEFAULT_LIMIT
    )
    return _binary(found is not None, inverse, f"match /{a['value']}/")


def _schema_ok(value: Any, schema: Any) -> tuple[bool, str]:
    import jsonschema

    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path)
    )
    return not errors, "; ".join(e.message for e in errors[:3])


def _is_json(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    try:
        parsed = json.loads(run.output)
    except ValueError:
        return _binary(False, inverse, "be valid JSON")
    schema = a.get("value")
    if schema in (None, ""):
        return _binary(True, inverse, "be valid JSON")
    valid, why = _schema_ok(parsed, schema)
    return _binary(
        valid, inverse, "be JSON conforming to the schema" + (f" ({why})" if why else "")
    )


def json_objects(text: str) -> list[Any]:
    """Every JSON object or array in ``text``, left to right (non-overlapping)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def _contains_json(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    objects = json_objects(run.output)
    schema = a.get("value")
    if not objects or schema in (None, ""):
        return _binary(bool(objects), inverse, "contain valid JSON")
    results = [_schema_ok(obj, schema) for obj in objects]
    why = next((w for ok, w in results if not ok), "")
    return _binary(
        any(ok for ok, _ in results), inverse, f"contain JSON conforming to the schema ({why})"
    )


def _latency(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    ms = run.latency_s * 1000.0
    threshold = float(a["threshold"])
    ok = (ms > threshold) if inverse else (ms <= threshold)
    return Verdict.of(ok, 1.0 if ok else 0.0, f"latency {ms:.0f} ms, threshold {threshold:g} ms")


def cost_so_far(run: RunRecord) -> float | None:
    """The case's cost so far.

    That is the traffic hook's measure of this trial, else what the agent reported.
    """
    from pytest_agent_eval.traffic.scope import CURRENT  # light: imports no client

    trial = CURRENT.get()
    if trial is not None and trial.usage.measured:
        return trial.usage.cost
    cost = run.usage.get("cost")
    return float(cost) if isinstance(cost, (int, float)) else None


def _cost_check(
    a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, *_: Any
) -> Verdict:
    if cost is None:
        raise CheckError(
            "cost unknown: the provider reported none and the traffic hook priced none "
            "(turn the hook on, "
            "e.g. --agent-eval-rate-limit, and give the model a price in agent_eval_prices)"
        )
    threshold = float(a["threshold"])
    ok = (cost > threshold) if inverse else (cost <= threshold)
    return Verdict.of(ok, 1.0 if ok else 0.0, f"cost {cost:.6g}, threshold {threshold:g}")


def _matches(name: str, matcher: dict[str, Any]) -> bool:
    if matcher.get("pattern"):
        return fnmatch.fnmatchcase(name, str(matcher["pattern"]))
    return name == matcher.get("name")


def matcher_of(step: Any) -> dict[str, Any]:
    """A trajectory step matcher: a name or ``{name | pattern}``.

    The name is a glob when it has ``*`` or ``?``.
    """
    if isinstance(step, str):
        return {"pattern": step} if any(c in step for c in "*?") else {"name": step}
    return dict(step)


def _tool_used(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    names = [c.name for c in run.tool_calls]
    value = a["value"]
    if isinstance(value, dict):
        matcher = matcher_of(value)
        count = sum(_matches(n, matcher) for n in names)
        low, high = value.get("min", 1), value.get("max")
        base = count >= low and (high is None or count <= high)
        shown = matcher.get("pattern") or matcher.get("name")
        return _binary(
            base,
            inverse,
            f"call {shown} {low}..{high if high is not None else ''} times (called {count})",
        )
    matchers = [matcher_of(v) for v in (value if isinstance(value, list) else [value])]
    used = [m for m in matchers if any(_matches(n, m) for n in names)]
    ok = not used if inverse else len(used) == len(matchers)
    wanted = [m.get("pattern") or m.get("name") for m in matchers]
    why = f"{'not use' if inverse else 'use'} {wanted}; tools called: {names or '(none)'}"
    return Verdict.of(ok, 1.0 if ok else 0.0, "passed" if ok else f"expected the agent to {why}")


def _tool_sequence(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    value = a["value"]
    mode, steps = (
        ("in_order", value)
        if isinstance(value, list)
        else (value.get("mode", "in_order"), value["steps"])
    )
    matchers = [matcher_of(s) for s in steps]
    names = [c.name for c in run.tool_calls]
    if mode == "exact":
        base = len(names) == len(matchers) and all(
            _matches(n, m) for n, m in zip(names, matchers, strict=True)
        )
    else:
        i = 0
        for n in names:
            if i < len(matchers) and _matches(n, matchers[i]):
                i += 1
        base = i == len(matchers)
    wanted = [m.get("pattern") or m.get("name") for m in matchers]
    return _binary(base, inverse, f"call {wanted} ({mode}); tools called: {names or '(none)'}")


def _step_count(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    value = a["value"]
    names = [c.name for c in run.tool_calls]
    has_matcher = value.get("name") or value.get("pattern")
    count = sum(_matches(n, matcher_of(value)) for n in names) if has_matcher else len(names)
    low, high = value.get("min"), value.get("max")
    base = (low is None or count >= low) and (high is None or count <= high)
    return _binary(
        base,
        inverse,
        f"take {low if low is not None else 0}..{high if high is not None else ''} tool steps "
        f"(took {count})",
    )


def _tool_call_f1(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    expected = {v for v in _values(a["value"]) if v}
    actual = {c.name for c in run.tool_calls}
    hits = len(expected & actual)
    precision = hits / len(actual) if actual else 0.0
    recall = hits / len(expected) if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    threshold = a.get("threshold", 1.0) if a.get("threshold") is not None else 1.0
    ok = (f1 >= threshold) != inverse
    why = (
        f"F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f}); "
        f"expected {sorted(expected)}, "
        f"called {sorted(actual) or '(none)'}; threshold {threshold:g}"
    )
    return Verdict.of(ok, f1, why)


DETERMINISTIC: dict[str, Callable[..., Verdict]] = {
    "equals": _equals,
    "contains": _contains(False, "one"),
    "icontains": _contains(True, "one"),
    "contains-any": _contains(False, "any"),
    "contains-all": _contains(False, "all"),
    "icontains-any": _contains(True, "any"),
    "icontains-all": _contains(True, "all"),
    "starts-with": _starts_with,
    "regex": _regex,
    "is-json": _is_json,
    "contains-json": _contains_json,
    "latency": _latency,
    "cost": _cost_check,
    "trajectory:tool-used": _tool_used,
    "trajectory:tool-sequence": _tool_sequence,
    "trajectory:step-count": _step_count,
    "tool-call-f1": _tool_call_f1,
}
"""The assertions read from the run alone.

Each has a handler ``(assertion, run, inverse, cost, judge) -> Verdict``.
"""
