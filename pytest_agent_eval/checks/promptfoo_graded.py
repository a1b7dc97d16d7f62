"""promptfoo's assertions that run a model or code.

``llm-rubric``, ``factuality``, ``model-graded-closedqa`` run through the plugin's judge
(``agent_eval_llm``), and ``python`` (inline or a file's ``get_assert``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckError
from pytest_agent_eval.checks.judge import NO_LLM, prompt_fields, read_score
from pytest_agent_eval.checks.promptfoo_deterministic import Verdict
from pytest_agent_eval.core.results import RunRecord
from pytest_agent_eval.imports import file_module
from pytest_agent_eval.llm import ask

RUBRIC_PROMPT = (
    "You grade an output against a rubric.\n"
    "Rubric: {rubric}\n"
    "Input: {input}\n"
    "Output: {output}\n"
    'Reply with JSON only: {{"pass": true or false, "score": <number from 0 to 1>, '
    '"reason": "<one sentence>"}}'
)


FACTUALITY_PROMPT = (
    "You compare the factual content of a submitted answer with an expert answer.\n"
    "Question: {input}\n"
    "Expert answer: {reference}\n"
    "Submitted answer: {output}\n"
    "Pick one option: (A) the submitted answer is a subset of the expert answer and fully "
    "consistent with it; (B) it is\n"
    "a superset of the expert answer and fully consistent with it; (C) it contains all the same "
    "details as the expert\n"
    "answer; (D) there is a disagreement between the submitted answer and the expert answer; "
    "(E) the answers differ,\n"
    "but these differences don't matter from the perspective of factuality.\n"
    'Reply with JSON only: {{"choice": "<A, B, C, D or E>", "reason": "<one sentence>"}}'
)


CLOSEDQA_PROMPT = (
    "You assess a submitted answer on a given task against a criterion.\n"
    "Task: {input}\n"
    "Submission: {output}\n"
    "Criterion: {criteria}\n"
    "Does the submission meet the criterion? "
    'Reply with JSON only: {{"answer": "Y" or "N", "reason": "<one sentence>"}}'
)


FACTUALITY_SCORES = {
    "A": "subset",
    "B": "superset",
    "C": "agree",
    "D": "disagree",
    "E": "differButFactual",
}
"""promptfoo's factuality categories and the option names that set their scores.

The scores default to 1, and to 0 for disagree.
"""


class Judge:
    """Model-graded assertions through the plugin's judge LLM (``agent_eval_llm``)."""

    def __init__(self, run: RunRecord, spec: dict[str, Any], ctx: CheckContext) -> None:
        self.run, self.spec, self.ctx = run, spec, ctx

    def reply(self, prompt: str) -> dict[str, Any]:
        assert self.ctx.llm is not None
        try:
            text = ask(
                self.ctx.llm,
                [{"role": "user", "content": prompt}],
                response_format={"type": "json_object"},
            )
        except Exception as exc:
            raise CheckError(f"judge LLM call failed: {type(exc).__name__}: {exc}") from exc
        for candidate in [text.strip(), *re.findall(r"\{.*\}", text, re.DOTALL)]:
            try:
                data = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
        raise CheckError(
            f"judge reply unreadable: {' '.join(text.split())[:200]!r}; the judge must reply JSON"
        )

    def fields(self) -> dict[str, str]:
        fields = prompt_fields(self.run, self.ctx, "")
        fields["input"] = str(self.spec.get("prompt") or fields["input"])
        return fields


def graded(
    a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: Judge
) -> Verdict:
    if judge.ctx.llm is None:
        return Verdict(None, 0.0, 1.0, NO_LLM)
    fields = judge.fields()
    base, value = a["base"], str(a["value"])
    if base == "llm-rubric":
        data = judge.reply(
            RUBRIC_PROMPT.format(rubric=value, input=fields["input"], output=run.output)
        )
        score, reason = (
            read_score(json.dumps(data)) if "score" in data else (None, str(data.get("reason", "")))
        )
        verdict = data.get("pass")
        if not isinstance(verdict, bool):
            if score is None:
                raise CheckError(f"judge reply has neither `pass` nor `score`: {data!r}")
            verdict = score >= 0.5
        score = score if score is not None else (1.0 if verdict else 0.0)
        threshold = a.get("threshold")
        passed = verdict and (threshold is None or score >= threshold)
    elif base == "factuality":
        data = judge.reply(
            FACTUALITY_PROMPT.format(input=fields["input"], reference=value, output=run.output)
        )
        # promptfoo's own grader replies `category`; the plugin's prompt asks for `choice`: either
        # is read
        picked = data.get("category", data.get("choice", ""))
        choice = str(picked).strip().strip("()").upper()
        if choice not in FACTUALITY_SCORES:
            raise CheckError(
                f"judge reply unreadable: no category A-E (`category` or `choice`) in {data!r}"
            )
        options = a.get("options") or judge.spec.get("options") or {}
        scores = options.get("factuality") or {}
        score = float(scores.get(FACTUALITY_SCORES[choice], 0.0 if choice == "D" else 1.0))
        passed, reason = score > 0, f"({choice}) {data.get('reason', '')}"
    else:  # model-graded-closedqa
        data = judge.reply(
            CLOSEDQA_PROMPT.format(input=fields["input"], output=run.output, criteria=value)
        )
        answer = str(data.get("answer", "")).strip().upper()[:1]
        if answer not in ("Y", "N"):
            raise CheckError(f"judge reply unreadable: no answer Y or N in {data!r}")
        passed, score, reason = (
            answer == "Y",
            1.0 if answer == "Y" else 0.0,
            str(data.get("reason", "")),
        )
    if base == "llm-rubric":
        reason = str(data.get("reason", ""))
    if inverse:
        passed, score = not passed, 1.0 - score
    return Verdict.of(passed, score, reason or ("passed" if passed else "failed"))


def python(
    a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: Judge
) -> Verdict:
    """promptfoo's ``python``: a bool, a number or a GradingResult.

    A number is a score: it passes above 0, or at ``threshold``.
    """
    context = {
        "vars": judge.spec.get("vars", {}),
        "prompt": judge.spec.get("prompt", ""),
        "config": a.get("config"),
    }
    value = str(a["value"])
    if a.get("file"):
        result = _python_file(a["file"], a.get("function") or "get_assert")(run.output, context)
    elif "\n" in value.strip():
        scope: dict[str, Any] = {"json": json, "re": re}
        body = "\n".join("    " + line for line in value.strip("\n").splitlines())
        exec(
            f"def __assert(output, context):\n{body}\n", scope
        )  # the config's own code, as promptfoo runs it
        result = scope["__assert"](run.output, context)
    else:
        result = eval(value, {"output": run.output, "context": context, "json": json, "re": re})
    threshold = a.get("threshold")
    if isinstance(result, bool):
        passed, score, reason = result, 1.0 if result else 0.0, ""
    elif isinstance(result, (int, float)):
        score = float(result)
        passed = score >= threshold if threshold is not None else score > 0
        reason = f"returned {score:g}"
    elif isinstance(result, dict) and ("pass" in result or "pass_" in result):
        passed = bool(result.get("pass", result.get("pass_")))
        score = float(result.get("score", 1.0 if passed else 0.0))
        reason = str(result.get("reason", ""))
        if threshold is not None:
            passed = passed and score >= threshold
    else:
        raise CheckError(
            f"python assertion returned {result!r}: "
            "return a bool, a number or {pass, score, reason}"
        )
    if inverse:
        passed, score = not passed, 1.0 - score
    return Verdict.of(passed, score, reason or ("passed" if passed else "python assertion failed"))


def _python_file(path: str, function: str) -> Callable[..., Any]:
    try:
        module = file_module(Path(path), "_promptfoo_")
    except FileNotFoundError:
        raise CheckError(f"cannot load python assertion file {path}") from None
    func = getattr(module, function, None)
    if not callable(func):
        raise CheckError(f"{path} has no function {function}(output, context)")
    return func  # type: ignore[no-any-return]


def python_path(ref: str, base: Path) -> tuple[str, str | None]:
    """``x.py[:fn]`` (after ``file://`` or ``python:``) -> (absolute path, function or None)."""
    path, function = ref.split(".py:", 1) if ".py:" in ref else (ref, "")
    path = path if path.endswith(".py") else path + ".py"
    return str((base / path).resolve()), function or None
