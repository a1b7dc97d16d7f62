"""Span checks (SPEC §23): ``spans: [matcher, …]``, ``no_error_spans: true``, ``max_llm_calls: n``.

They read the trial's span tree (``RunRecord.spans``): a case with one of them is traced without any
trace option. A matcher ``{name: glob, attributes: {key: value | {regex: …}}, status: ok|error,
min_count, max_count, max_duration_ms, within: matcher}`` counts the spans that fit every given part
(no ``min_count``: at least one); ``status: ok`` is "not ERROR"; attribute values compare as data,
``regex`` searches their string form. A failure shows the closest span and its path in the tree.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks import SPAN_CHECKS as SPAN_CHECKS  # its old home
from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord

if TYPE_CHECKING:
    from pytest_agent_eval.traces.tree import Span

_COUNT = {"type": "integer", "minimum": 0}
_ATTRIBUTES = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [
            {
                "type": "object",
                "properties": {"regex": {"type": "string"}},
                "required": ["regex"],
                "additionalProperties": False,
            },
            {"not": {"type": "object"}},
        ]
    },
}
_MATCHER_PROPS: dict[str, Any] = {
    "name": {"type": "string", "description": "a glob of the span's name (`execute_tool *`)"},
    "attributes": _ATTRIBUTES,
    "status": {"enum": ["ok", "error"]},
    "min_count": _COUNT,
    "max_count": _COUNT,
    "max_duration_ms": {"type": "number", "minimum": 0},
}
_INNER = {"type": "object", "properties": dict(_MATCHER_PROPS), "additionalProperties": False}
MATCHER = {
    "type": "object",
    "properties": {**_MATCHER_PROPS, "within": _INNER},
    "additionalProperties": False,
}


def _spans(run: RunRecord, name: str) -> list[Span] | CheckResult:
    if run.spans is None:
        return CheckResult.of(
            name,
            False,
            error=True,
            message="no spans were captured for this trial (the OpenTelemetry SDK: "
            "pip install 'pytest-agent-evalset[otel]')",
        )
    return run.spans


def _fits(span: Span, matcher: dict[str, Any], spans: list[Span], index: int) -> list[str]:
    """What of ``matcher`` the span does not fit, one phrase each (empty: it fits)."""
    from pytest_agent_eval.traces.tree import ancestors

    misses: list[str] = []
    name = matcher.get("name")
    if name is not None and not fnmatch.fnmatchcase(str(span.get("name")), name):
        misses.append(f"name {span.get('name')!r} is not {name!r}")
    attributes = span.get("attributes") or {}
    for key, want in (matcher.get("attributes") or {}).items():
        if key not in attributes:
            misses.append(f"no attribute {key}")
            continue
        got = attributes[key]
        if isinstance(want, dict):
            text = got if isinstance(got, str) else json.dumps(got)
            if re.search(want["regex"], text) is None:
                misses.append(f"{key}={got!r} does not match /{want['regex']}/")
        elif not _same(got, want):
            misses.append(f"{key}={got!r}, not {want!r}")
    status = matcher.get("status")
    if status == "error" and span.get("status") != "error":
        misses.append(f"status {span.get('status')}, not error")
    elif status == "ok" and span.get("status") == "error":
        misses.append("status error")
    limit = matcher.get("max_duration_ms")
    if limit is not None and float(span.get("duration_ms") or 0) > limit:
        misses.append(f"took {span.get('duration_ms')} ms, over {limit:g} ms")
    within = matcher.get("within")
    if within is not None and not any(
        not _fits(spans[a], within, spans, a) for a in ancestors(spans, index)
    ):
        misses.append(f"not within a span like {_shown(within)}")
    return misses


def _same(got: Any, want: Any) -> bool:
    """Equal as data: ``1`` is not ``true``; a JSON text attribute equals the data it holds."""
    if type(got) is bool or type(want) is bool:
        return type(got) is type(want) and got == want
    if got == want:
        return True
    if isinstance(got, str) and not isinstance(want, str):
        try:
            return bool(json.loads(got) == want)
        except ValueError:
            return False
    return False


def _shown(matcher: dict[str, Any]) -> str:
    return json.dumps(matcher, default=str)


def spans(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Each matcher counts ``min_count`` (default 1) to ``max_count`` spans of the trial."""
    from pytest_agent_eval.traces.tree import path_to

    found = _spans(run, "spans")
    if isinstance(found, CheckResult):
        return found
    failures: list[str] = []
    detail: list[str] = []
    for matcher in spec:
        fitting = [n for n, span in enumerate(found) if not _fits(span, matcher, found, n)]
        low, high = matcher.get("min_count", 1), matcher.get("max_count")
        if len(fitting) < low:
            failures.append(f"{len(fitting)} spans like {_shown(matcher)}, at least {low} expected")
            detail.append(_closest(found, matcher))
        elif high is not None and len(fitting) > high:
            failures.append(f"{len(fitting)} spans like {_shown(matcher)}, at most {high} allowed")
            detail += [f"  {path_to(found, n)}" for n in fitting]
    return CheckResult.of(
        "spans",
        not failures,
        expected=spec,
        actual=f"{len(found)} spans",
        message="; ".join(failures),
        detail=detail,
    )


def _closest(found: list[Span], matcher: dict[str, Any]) -> str:
    """The span missing the fewest parts of ``matcher``, with its tree path and what it misses."""
    from pytest_agent_eval.traces.tree import path_to

    if not found:
        return "  no spans in this trial"
    misses = [(_fits(span, matcher, found, n), n) for n, span in enumerate(found)]
    best, index = min(misses, key=lambda m: (len(m[0]), m[1]))
    return f"  closest span: {path_to(found, index)}: {'; '.join(best)}"


def no_error_spans(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """No span of the trial ended with status ERROR (``no_error_spans: true``)."""
    from pytest_agent_eval.traces.tree import path_to

    found = _spans(run, "no_error_spans")
    if isinstance(found, CheckResult):
        return found
    if not spec:
        return CheckResult.of("no_error_spans", True, message="not asked (false)")
    errors = [n for n, span in enumerate(found) if span.get("status") == "error"]
    detail = [
        f"  {path_to(found, n)}"
        + (f": {found[n]['status_message']}" if found[n].get("status_message") else "")
        for n in errors
    ]
    return CheckResult.of(
        "no_error_spans",
        not errors,
        expected="no span with status ERROR",
        actual=f"{len(errors)} error spans",
        message="" if not errors else f"{len(errors)} spans ended with status ERROR",
        detail=detail,
    )


def max_llm_calls(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """At most n model calls: the agent's LLM spans, else the plugin's chat spans.

    The agent's LLM spans are GenAI chat or OpenInference LLM ones; the plugin's chat spans are
    those of the requests the traffic hook saw. No verdict when neither tells.
    """
    from pytest_agent_eval.traces.tree import is_llm_call, is_ours, path_to

    found = _spans(run, "max_llm_calls")
    if isinstance(found, CheckResult):
        return found
    agents = [n for n, span in enumerate(found) if is_llm_call(span) and not is_ours(span)]
    ours = [n for n, span in enumerate(found) if is_llm_call(span) and is_ours(span)]
    calls = agents or ours
    if not calls:
        requests = run.usage.get("requests")
        if not isinstance(requests, int):
            return CheckResult.of(
                "max_llm_calls",
                False,
                error=True,
                message="no LLM spans to count: the agent emits none and no trace option "
                "(--agent-eval-traces/--agent-eval-otlp) had the traffic hook see its requests",
            )
        count, detail = requests, []
    else:
        count, detail = len(calls), [f"  {path_to(found, n)}" for n in calls]
    ok = count <= int(spec)
    return CheckResult.of(
        "max_llm_calls",
        ok,
        score=1.0 if ok else min(1.0, int(spec) / count),
        expected=f"<= {int(spec)}",
        actual=count,
        message="" if ok else f"{count} LLM calls, at most {int(spec)} allowed",
        detail=[] if ok else detail,
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "spans",
        spans,
        {"type": "array", "items": MATCHER, "minItems": 1},
        "each matcher "
        "`{name, attributes, status, min_count, max_count, max_duration_ms, within}` counts the "
        "trial's spans (SPEC §23)",
        blocking=False,
    )
    registry.register(
        "no_error_spans",
        no_error_spans,
        {"type": "boolean"},
        "no span ended with status ERROR",
        blocking=False,
    )
    registry.register(
        "max_llm_calls",
        max_llm_calls,
        {"type": "integer", "minimum": 0},
        "at most n LLM calls",
        blocking=False,
    )
