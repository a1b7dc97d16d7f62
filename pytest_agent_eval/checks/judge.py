"""The ``judge`` check: an LLM scores the answer against a rubric (SPEC §8)."""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry, CheckResult
from pytest_agent_eval.record import RunRecord

NO_LLM = (
    "no LLM configured for the judge: set AGENT_EVAL_LLM_MODEL (with OPENAI_API_KEY / OPENAI_BASE_URL and the "
    "`openai` extra), or override the `agent_eval_llm` fixture in conftest.py"
)
PROMPT = """You grade an AI agent's answer against a rubric.
Rubric: {rubric}
User input: {query}
Agent answer: {output}
Reply with JSON only: {{"score": <number from 0 to 1>, "reason": "<one sentence>"}}"""


def parse_score(reply: str) -> tuple[float, str]:
    """Read ``{"score": x, "reason": ...}`` (or a bare number) from the judge's reply."""
    match = re.search(r"\{.*\}", reply, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group(0))
            return max(0.0, min(1.0, float(data["score"]))), str(data.get("reason", ""))
        except (ValueError, KeyError, TypeError):
            pass
    number = re.search(r"\d+(?:\.\d+)?", reply)
    if number is None:
        raise ValueError(f"judge reply has no score: {reply[:200]!r}")
    return max(0.0, min(1.0, float(number.group(0)))), reply.strip()[:200]


def judge(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """An LLM judge scores the answer against the rubric at least ``min_score`` (default 0.7)."""
    rubric = spec if isinstance(spec, str) else spec["rubric"]
    threshold = 0.7 if isinstance(spec, str) else float(spec.get("min_score", 0.7))
    if ctx.llm is None:
        return CheckResult.of("judge", False, expected=rubric, actual="not judged", message=NO_LLM)
    prompt = PROMPT.format(rubric=rubric, query=ctx.case.query, output=run.output)
    score, reason = parse_score(ctx.llm([{"role": "user", "content": prompt}]))
    ok = score >= threshold
    return CheckResult.of(
        "judge",
        ok,
        score=score,
        expected=f"score >= {threshold:g}: {rubric}",
        actual=f"{score:.2f}: {reason}",
        message="" if ok else f"judge scored {score:.2f} < {threshold:g}: {reason}",
    )


SCHEMA = {  # a rubric, or {rubric, min_score}
    "type": ["string", "object"],
    "properties": {"rubric": {"type": "string"}, "min_score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["rubric"],
    "additionalProperties": False,
}


def register(registry: CheckRegistry) -> None:
    registry.register("judge", judge, SCHEMA, "an LLM judge scores the answer against the rubric", uses_llm=True)
