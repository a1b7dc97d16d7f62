"""Scored checks from existing eval formats (SPEC §12): a score in [0, 1], passing at a threshold.

``tool_selection``, ``grounding``, ``reasoning`` and ``efficiency`` are Neon's scorers;
``tool_usage``, ``behavior`` and ``response_time`` are the category-JSON ones. Checks that need an
LLM and have none are "not scored": they pass, and the runner leaves them out of the mean score.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.checks.judge import NO_LLM, ask_score, judge
from pytest_agent_eval.checks.output import excerpt
from pytest_agent_eval.checks.patterns import search
from pytest_agent_eval.checks.tools import align
from pytest_agent_eval.core.results import CheckResult, RunRecord
from pytest_agent_eval.llm import prompt_json

DEFAULT_MIN_SCORE = 0.7
"""The pass threshold of a scorer when neither it nor its case sets ``min_score``.

Neon's default.
"""
TARGET_LATENCY_S = 10.0
RESPONSE_TIME_BUDGET_S = 30.0
GROUNDING_LLM_WEIGHT = 0.7
"""The LLM's weight in grounding.

With an LLM, grounding is 0.3 x the share of expected content found + 0.7 x the LLM's score (as in
Neon).
"""

_MIN_SCORE = {"type": "number", "minimum": 0, "maximum": 1}
_NAMES = {"type": ["array", "null"], "items": {"type": "string"}}


def threshold(spec: Any, ctx: CheckContext) -> float:
    """The check's own ``min_score``, else the case's, else 0.7."""
    if isinstance(spec, dict) and spec.get("min_score") is not None:
        return float(spec["min_score"])
    return ctx.case.min_score if ctx.case.min_score is not None else DEFAULT_MIN_SCORE


def not_scored(name: str, why: str, expected: Any = None) -> CheckResult:
    """A check that could not be scored: it passes and is left out of the mean."""
    return CheckResult(name, True, 0.0, expected, "not scored", f"not scored: {why}", scored=False)


def scored(name: str, score: float, spec: Any, ctx: CheckContext, **kw: Any) -> CheckResult:
    """A result that passes when ``score`` reaches the threshold; ``message`` explains a miss."""
    limit = threshold(spec, ctx)
    ok = score >= limit
    why = kw.pop("message", "")
    message = "" if ok else f"below min_score {limit:g}" + (f": {why}" if why else "")
    return CheckResult(name, ok, score, message=message, **kw)


def lcs_length(a: list[str], b: list[str]) -> int:
    """The length of the longest common subsequence of ``a`` and ``b``."""
    prev = [0] * (len(b) + 1)
    for x in a:
        row = [0]
        for j, y in enumerate(b, 1):
            row.append(prev[j - 1] + 1 if x == y else max(prev[j], row[j - 1]))
        prev = row
    return prev[-1]


def tool_selection(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Jaccard overlap of expected and called tool sets, with an order score when a sequence is set.

    The two are averaged. ``expected_tools: []`` scores 1.0 when nothing was called and 0 otherwise;
    the order score is the longest common subsequence of expected and actual calls over the longer
    of the two.
    """
    tools, sequence = spec.get("expected_tools"), spec.get("expected_tool_sequence")
    if tools is None and sequence is None:
        return not_scored("tool_selection", "no expected_tools or expected_tool_sequence")
    called = run.tool_names
    want, got = set(tools if tools is not None else sequence), set(called)
    union = want | got
    overlap = len(want & got) / len(union) if union else 1.0
    notes = [f"not called: {', '.join(sorted(want - got))}"] if want - got else []
    notes += [f"unexpected: {', '.join(sorted(got - want))}"] if got - want else []
    detail: list[str] = []
    score = overlap
    if sequence is not None:
        longer = max(len(sequence), len(called))
        order = lcs_length(list(sequence), called) / longer if longer else 1.0
        score = (overlap + order) / 2
        if order < 1.0:
            notes.append(f"order {order:.2f}")
            detail = align(list(sequence), run.tool_calls)
    expected = {k: v for k, v in spec.items() if k != "min_score"}
    return scored(
        "tool_selection",
        score,
        spec,
        ctx,
        expected=expected,
        actual=called,
        message="; ".join(notes),
        detail=detail,
    )


def tool_usage(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """(precision + recall) / 2 of the called tools against the expected ones; fails only at 0.

    ``[]`` means no tool: 1.0 when nothing was called, else 0.
    """
    want, got = set(spec), set(run.tool_names)
    hit = want & got
    score = 0.0
    if not want and not got:
        score = 1.0
    elif want and got:
        score = (len(hit) / len(got) + len(hit) / len(want)) / 2
    notes = [f"not called: {', '.join(sorted(want - got))}"] if want - got else []
    notes += [f"unexpected: {', '.join(sorted(got - want))}"] if got - want else []
    return CheckResult.of(
        "tool_usage",
        score > 0,
        score=score,
        expected=sorted(want),
        actual=run.tool_names,
        message="" if score > 0 else "; ".join(notes) or "no expected tool was called",
    )


GROUNDING_PROMPT = """You grade whether an AI agent's answer is grounded in the evidence it had.
User input: {query}
Context the agent was given: {context}
Tool results: {tools}
Expected content: {expected}
Agent answer: {output}
Are its factual claims accurate and supported by the context and tool results, with nothing made up?
Reply with JSON only: {{"score": <number from 0 to 1>, "reason": "<one sentence>"}}"""


def grounding(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The share of expected phrases found (case-insensitive) and pattern matched.

    Blended with the LLM if set.
    """
    phrases: list[str] = list(spec.get("contains") or [])
    pattern: str | None = spec.get("pattern")
    folded = run.output.casefold()
    missing = [p for p in phrases if p.casefold() not in folded]
    matched = (
        pattern is not None
        and search(pattern, run.output, re.IGNORECASE, ctx.case.timeout) is not None
    )
    total = len(phrases) + (pattern is not None)
    content = (len(phrases) - len(missing) + matched) / total if total else None
    notes = [f"missing {', '.join(repr(m) for m in missing)}"] if missing else []
    notes += [f"no match of /{pattern}/"] if pattern is not None and not matched else []
    detail = [
        line
        for p in missing
        for line in [f"missing {p!r}", *("  " + x for x in excerpt(run.output, p))]
    ]
    expected = {k: v for k, v in spec.items() if k != "min_score"}
    if ctx.llm is None:
        if content is None:
            return not_scored("grounding", f"no expected content and {NO_LLM}", expected)
        score = content
    else:
        tools = [{"tool": c.name, "result": c.result} for c in run.tool_calls]
        prompt = GROUNDING_PROMPT.format(
            query=ctx.case.query,
            context=prompt_json(ctx.case.context) if ctx.case.context else "(none)",
            tools=prompt_json(tools) if tools else "(none)",
            expected=phrases + ([f"/{pattern}/"] if pattern else []) or "(none)",
            output=run.output,
        )
        llm_score, reason = ask_score(ctx, prompt)
        blended = (1 - GROUNDING_LLM_WEIGHT) * (content or 0.0) + GROUNDING_LLM_WEIGHT * llm_score
        score = llm_score if content is None else blended
        notes.append(f"LLM {llm_score:.2f}: {reason}")
    return scored(
        "grounding",
        score,
        spec,
        ctx,
        expected=expected,
        actual=run.output[:200],
        message="; ".join(notes),
        detail=detail,
    )


REASONING_PROMPT = (
    "You grade the reasoning of an AI agent's answer.\n"
    "User input: {query}\n"
    "Tools called: {tools}\n"
    "Agent's reasoning trace: {reasoning}\n"
    "Agent answer: {output}\n"
    "Is the reasoning logically coherent, does it use the tools' information correctly, "
    "break the problem into\n"
    "sensible steps{steps} and address every part of the question?\n"
    'Reply with JSON only: {{"score": <number from 0 to 1>, "reason": "<one sentence>"}}'
)


def reasoning(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """An LLM judges the reasoning.

    Without an LLM the check is "not scored" and left out of the mean.
    """
    if ctx.llm is None:
        return not_scored("reasoning", NO_LLM)
    steps = ""
    if spec.get("require_steps") or spec.get("min_steps"):
        steps = f" (at least {int(spec.get('min_steps') or 2)} explicit steps are required)"
    prompt = REASONING_PROMPT.format(
        query=ctx.case.query,
        tools=", ".join(run.tool_names) or "(none)",
        reasoning=run.reasoning or "(none)",
        output=run.output,
        steps=steps,
    )
    score, reason = ask_score(ctx, prompt)
    return scored(
        "reasoning",
        score,
        spec,
        ctx,
        expected="coherent reasoning" + steps,
        actual=f"{score:.2f}: {reason}",
        message=reason,
    )


def efficiency(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The mean of a tool-call score and a latency score.

    Tool calls (when ``max_tool_calls`` is set): 1.0 up to the budget, then (budget + 1) / (calls +
    1). Latency: 1.0 up to ``target_latency_s`` (default 10 s), then target / latency.
    """
    parts: list[float] = []
    notes: list[str] = []
    budget = spec.get("max_tool_calls")
    if budget is not None:
        calls = len(run.tool_calls)
        parts.append(1.0 if calls <= budget else (budget + 1) / (calls + 1))
        notes.append(f"{calls} tool calls (budget {budget})")
    target = float(spec.get("target_latency_s", TARGET_LATENCY_S))
    latency = run.latency_s
    parts.append(1.0 if latency <= target else target / latency)
    notes.append(f"{latency:.2f} s (target {target:g} s)")
    score = sum(parts) / len(parts)
    expected = {"max_tool_calls": budget, "target_latency_s": target}
    return scored(
        "efficiency",
        score,
        spec,
        ctx,
        expected=expected,
        actual=", ".join(notes),
        message=", ".join(notes),
    )


def behavior(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """An LLM judges the answer against the expected behaviour.

    Without an LLM it is listed as not checked.
    """
    rubric = spec if isinstance(spec, str) else spec["rubric"]
    if ctx.llm is None:
        return not_scored("behavior", f"not checked ({NO_LLM})", rubric)
    result = judge(run, {"rubric": rubric, "min_score": threshold(spec, ctx)}, ctx)
    result.name = "behavior"
    return result


def response_time(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Scores 1 - latency / budget (default 30 s), floored at 0; reported, never failing."""
    budget = float(spec) if spec is not True else RESPONSE_TIME_BUDGET_S
    score = max(0.0, 1.0 - run.latency_s / budget)
    return CheckResult(
        "response_time",
        True,
        score,
        f"1 - t / {budget:g} s",
        f"{run.latency_s:.2f} s -> {score:.2f}",
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "tool_selection",
        tool_selection,
        {
            "type": "object",
            "properties": {
                "expected_tools": _NAMES,
                "expected_tool_sequence": _NAMES,
                "min_score": _MIN_SCORE,
            },
            "additionalProperties": False,
        },
        "Jaccard overlap of expected and called tools, "
        "averaged with the order (LCS) when a sequence is given",
        blocking=False,
    )
    registry.register(
        "tool_usage",
        tool_usage,
        {"type": "array", "items": {"type": "string"}},
        "(precision + recall) / 2 of the called tools; fails at 0",
        blocking=False,
    )
    registry.register(
        "grounding",
        grounding,
        {
            "type": "object",
            "properties": {
                "contains": {"type": "array", "items": {"type": "string"}},
                "pattern": {"type": "string", "format": "regex"},
                "min_score": _MIN_SCORE,
            },
            "additionalProperties": False,
        },
        "share of expected content found (blended with an LLM judge when one is configured)",
        uses_llm=True,
    )
    registry.register(
        "reasoning",
        reasoning,
        {
            "type": "object",
            "properties": {
                "require_steps": {"type": "boolean"},
                "min_steps": {"type": "integer", "minimum": 1},
                "min_score": _MIN_SCORE,
            },
            "additionalProperties": False,
        },
        "an LLM judges the reasoning; not scored without an LLM",
        uses_llm=True,
    )
    registry.register(
        "efficiency",
        efficiency,
        {
            "type": "object",
            "properties": {
                "max_tool_calls": {"type": "integer", "minimum": 0},
                "target_latency_s": {"type": "number", "exclusiveMinimum": 0},
                "min_score": _MIN_SCORE,
            },
            "additionalProperties": False,
        },
        "mean of a tool-call budget score and a latency score",
        blocking=False,
    )
    registry.register(
        "behavior",
        behavior,
        {
            "oneOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {"rubric": {"type": "string"}, "min_score": _MIN_SCORE},
                    "required": ["rubric"],
                    "additionalProperties": False,
                },
            ]
        },
        "an LLM judges the expected behaviour; not checked without an LLM",
        uses_llm=True,
    )
    registry.register(
        "response_time",
        response_time,
        {"oneOf": [{"const": True}, {"type": "number", "exclusiveMinimum": 0}]},
        "scores 1 - latency / budget (default 30 s); reported, never failing",
        blocking=False,
    )
