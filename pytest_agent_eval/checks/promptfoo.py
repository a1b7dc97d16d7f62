"""The ``promptfoo`` check: a promptfoo test's assertions, with promptfoo's meaning (SPEC §19).

The promptfoo dialect (``cases/dialects/promptfoo.py``) reads and validates the assertions; this module judges a
run against them as promptfoo does (``src/assertions/index.ts`` and ``assertionsResult.ts``): every assertion
yields a pass and a score; ``not-`` inverts it; an assertion of weight 0 always passes and does not count; the
test's score is the weighted mean; the test passes when every assertion passes, or, with a test ``threshold``,
when the score reaches it; an ``assert-set`` is judged the same way with its own threshold and counts as one
assertion of its weight. A model-graded assertion asks the plugin's judge (``agent_eval_llm``); with no LLM it is
"not scored", and the test's verdict is unknown unless the other assertions decide it.
"""

from __future__ import annotations

import csv
import fnmatch
import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckError, CheckRegistry, CheckResult
from pytest_agent_eval.checks.judge import NO_LLM, prompt_fields, read_score
from pytest_agent_eval.checks.patterns import DEFAULT_LIMIT, search
from pytest_agent_eval.llm import ask
from pytest_agent_eval.record import RunRecord

NAME = "promptfoo"
MODEL_GRADED = frozenset({"llm-rubric", "factuality", "model-graded-closedqa"})
SUPPORTED = frozenset(
    {
        "equals",
        "contains",
        "icontains",
        "contains-any",
        "contains-all",
        "icontains-any",
        "icontains-all",
        "starts-with",
        "regex",
        "is-json",
        "contains-json",
        "python",
        "latency",
        "cost",
        "trajectory:tool-used",
        "trajectory:tool-sequence",
        "trajectory:step-count",
        "tool-call-f1",
        *MODEL_GRADED,
    }
)
"""The assertion types (without ``not-``) the plugin honours; any other errors its case as not supported."""

RUBRIC_PROMPT = """You grade an output against a rubric.
Rubric: {rubric}
Input: {input}
Output: {output}
Reply with JSON only: {{"pass": true or false, "score": <number from 0 to 1>, "reason": "<one sentence>"}}"""
FACTUALITY_PROMPT = """You compare the factual content of a submitted answer with an expert answer.
Question: {input}
Expert answer: {reference}
Submitted answer: {output}
Pick one option: (A) the submitted answer is a subset of the expert answer and fully consistent with it; (B) it is
a superset of the expert answer and fully consistent with it; (C) it contains all the same details as the expert
answer; (D) there is a disagreement between the submitted answer and the expert answer; (E) the answers differ,
but these differences don't matter from the perspective of factuality.
Reply with JSON only: {{"choice": "<A, B, C, D or E>", "reason": "<one sentence>"}}"""
CLOSEDQA_PROMPT = """You assess a submitted answer on a given task against a criterion.
Task: {input}
Submission: {output}
Criterion: {criteria}
Does the submission meet the criterion? Reply with JSON only: {{"answer": "Y" or "N", "reason": "<one sentence>"}}"""
FACTUALITY_SCORES = {"A": "subset", "B": "superset", "C": "agree", "D": "disagree", "E": "differButFactual"}
"""promptfoo's factuality categories and the option names that set their scores (default 1, disagree 0)."""


@dataclass
class Verdict:
    """One assertion's (or set's) verdict: ``passed`` None when not scored; ``low``/``high`` bound its score."""

    passed: bool | None
    low: float
    high: float
    reason: str = ""
    error: str | None = None

    @classmethod
    def of(cls, passed: bool, score: float, reason: str = "") -> Verdict:
        return cls(passed, score, score, reason)


class Tally:
    """Weighted verdicts of one test or ``assert-set`` (promptfoo's ``AssertionsResult``)."""

    def __init__(self, threshold: float | None) -> None:
        self.threshold = threshold
        self.low = self.high = self.weight = 0.0
        self.count = 0
        self.failed: list[str] = []
        self.unknown: list[str] = []
        self.errors: list[str] = []

    def add(self, verdict: Verdict, weight: float, label: str) -> None:
        self.count += 1
        self.low += verdict.low * weight
        self.high += verdict.high * weight
        self.weight += weight
        if verdict.error is not None:
            self.errors.append(f"{label}: {verdict.error}")
        elif verdict.passed is None:
            self.unknown.append(f"{label}: {verdict.reason}")
        elif not verdict.passed:
            self.failed.append(f"{label}: {verdict.reason}")

    def verdict(self) -> Verdict:
        if not self.count:  # promptfoo: a test without assertions passes, scoring 1
            return Verdict(True, 1.0, 1.0, "no assertions")
        low = self.low / self.weight if self.weight > 0 else 0.0
        high = self.high / self.weight if self.weight > 0 else 0.0
        if self.errors:
            return Verdict(False, low, high, "; ".join(self.errors), error="; ".join(self.errors))
        if self.threshold is not None:
            if low >= self.threshold:
                return Verdict(True, low, high, f"score {low:.2f} >= threshold {self.threshold:g}")
            if high < self.threshold:
                return Verdict(False, low, high, f"score {high:.2f} < threshold {self.threshold:g}")
            return Verdict(None, low, high, "not scored: " + "; ".join(self.unknown))
        if self.failed:
            return Verdict(False, low, high, "; ".join(self.failed))
        if self.unknown:
            return Verdict(None, low, high, "not scored: " + "; ".join(self.unknown))
        return Verdict(True, low, high, "all assertions passed")


def label(assertion: dict[str, Any]) -> str:
    """``icontains-any ['a', 'b']`` (line 12): how an assertion is named in failure text."""
    value = assertion.get("value")
    shown = "" if value is None else " " + _short(value)
    return f"{assertion['type']}{shown} (line {assertion.get('line', '?')})"


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(str(text).split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def promptfoo(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """A promptfoo test's assertions on the run, judged as promptfoo does."""
    judge = _Judge(run, spec, ctx)
    cost = _cost(run)  # before a grader's own calls add to what the traffic hook counts
    main = Tally(spec.get("threshold"))
    lines: list[str] = []
    for assertion in spec["assert"]:
        if assertion["type"] == "assert-set":
            inner = Tally(assertion.get("threshold"))
            for sub in assertion["assert"]:
                verdict = _one(sub, run, cost, judge)
                inner.add(verdict, sub.get("weight", 1.0), label(sub))
                lines.append("  " + _line(sub, verdict))
            verdict = inner.verdict()
            lines.insert(len(lines) - len(assertion["assert"]), _line(assertion, verdict))
        else:
            verdict = _one(assertion, run, cost, judge)
            lines.append(_line(assertion, verdict))
        main.add(verdict, assertion.get("weight", 1.0), label(assertion))
    total = main.verdict()
    expected = f"score >= {main.threshold:g}" if main.threshold is not None else "every assertion passes"
    actual = f"score {total.low:.2f}" + (f"..{total.high:.2f}" if total.high != total.low else "")
    if total.error is not None:
        why = f"no verdict: {total.error}"
        return CheckResult(NAME, False, 0.0, expected, why, why, lines, scored=False, error=True)
    if total.passed is None:
        return CheckResult(NAME, True, total.low, expected, actual, total.reason, lines, scored=False)
    return CheckResult(NAME, total.passed, total.low, expected, actual, "" if total.passed else total.reason, lines)


def _line(assertion: dict[str, Any], verdict: Verdict) -> str:
    mark = "?" if verdict.passed is None or verdict.error else ("✓" if verdict.passed else "✗")
    weight = assertion.get("weight", 1.0)
    extra = f", weight {weight:g}" if weight != 1.0 else ""
    metric = f", metric {assertion['metric']}" if assertion.get("metric") else ""
    return f"{mark} {label(assertion)}: score {verdict.low:.2f}{extra}{metric}: {verdict.error or verdict.reason}"


def _one(assertion: dict[str, Any], run: RunRecord, cost: float | None, judge: _Judge) -> Verdict:
    """One assertion's verdict, ``not-`` applied; weight 0 always passes (promptfoo's metric-only assertion)."""
    kind = str(assertion["type"])
    inverse = assertion.get("inverse", kind.startswith("not-"))
    base = assertion.get("base", kind[4:] if kind.startswith("not-") else kind)
    if base not in _HANDLERS:
        why = f"not supported: assertion `{kind}`"
        return Verdict(False, 0.0, 0.0, why, error=why)
    try:
        verdict = _HANDLERS[base](assertion, run, inverse, cost, judge)
    except CheckError as exc:
        return Verdict(False, 0.0, 0.0, str(exc), error=str(exc))
    except Exception as exc:  # user code (a python assertion) or a bad value: no verdict, never a pass
        why = f"{type(exc).__name__}: {exc}"
        return Verdict(False, 0.0, 0.0, why, error=why)
    if assertion.get("weight", 1.0) == 0 and verdict.passed is not None:
        verdict.passed = True
    return verdict


def _binary(passed: bool, inverse: bool, what: str) -> Verdict:
    ok = passed != inverse
    return Verdict.of(
        ok, 1.0 if ok else 0.0, "passed" if ok else f"expected output to {'not ' if inverse else ''}{what}"
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
        missing = "" if mode != "all" or inverse else f" (missing {[p for p in phrases if p not in found]})"
        return _binary(hit, inverse, f"{what} {phrases if mode != 'one' else phrases[0]!r}{missing}")

    return check


def _starts_with(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    return _binary(run.output.startswith(str(a["value"])), inverse, f"start with {str(a['value'])!r}")


def _regex(a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: _Judge) -> Verdict:
    """``re.search`` under the plugin's time limit (a catastrophically backtracking pattern has no verdict)."""
    timeout = judge.ctx.case.timeout
    found = search(str(a["value"]), run.output, limit=timeout if timeout is not None else DEFAULT_LIMIT)
    return _binary(found is not None, inverse, f"match /{a['value']}/")


def _schema_ok(value: Any, schema: Any) -> tuple[bool, str]:
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
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
    return _binary(valid, inverse, "be JSON conforming to the schema" + (f" ({why})" if why else ""))


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
    return _binary(any(ok for ok, _ in results), inverse, f"contain JSON conforming to the schema ({why})")


def _python(a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: _Judge) -> Verdict:
    """promptfoo's ``python``: a bool, a number (a score: passes above 0, or at ``threshold``) or a GradingResult."""
    context = {"vars": judge.spec.get("vars", {}), "prompt": judge.spec.get("prompt", ""), "config": a.get("config")}
    value = str(a["value"])
    if a.get("file"):
        result = _python_file(a["file"], a.get("function") or "get_assert")(run.output, context)
    elif "\n" in value.strip():
        scope: dict[str, Any] = {"json": json, "re": re}
        body = "\n".join("    " + line for line in value.strip("\n").splitlines())
        exec(f"def __assert(output, context):\n{body}\n", scope)  # the config's own code, as promptfoo runs it
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
        raise CheckError(f"python assertion returned {result!r}: return a bool, a number or {{pass, score, reason}}")
    if inverse:
        passed, score = not passed, 1.0 - score
    return Verdict.of(passed, score, reason or ("passed" if passed else "python assertion failed"))


_MODULES: dict[str, Any] = {}


def _python_file(path: str, function: str) -> Callable[..., Any]:
    module = _MODULES.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"_promptfoo_{len(_MODULES)}", path)
        if spec is None or spec.loader is None:
            raise CheckError(f"cannot load python assertion file {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[path] = module
    func = getattr(module, function, None)
    if not callable(func):
        raise CheckError(f"{path} has no function {function}(output, context)")
    return func  # type: ignore[no-any-return]


def _latency(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    ms = run.latency_s * 1000.0
    threshold = float(a["threshold"])
    ok = (ms > threshold) if inverse else (ms <= threshold)
    return Verdict.of(ok, 1.0 if ok else 0.0, f"latency {ms:.0f} ms, threshold {threshold:g} ms")


def _cost(run: RunRecord) -> float | None:
    """The case's cost so far: the traffic hook's measure of this trial, else what the agent reported."""
    from pytest_agent_eval.traffic.scope import CURRENT  # light: imports no client

    trial = CURRENT.get()
    if trial is not None and trial.usage.measured:
        return trial.usage.cost
    cost = run.usage.get("cost")
    return float(cost) if isinstance(cost, (int, float)) else None


def _cost_check(a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, *_: Any) -> Verdict:
    if cost is None:
        raise CheckError(
            "cost unknown: the provider reported none and the traffic hook priced none (turn the hook on, "
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
    """A trajectory step matcher: a name (a glob when it has ``*`` or ``?``) or ``{name | pattern}``."""
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
        return _binary(base, inverse, f"call {shown} {low}..{high if high is not None else ''} times (called {count})")
    matchers = [matcher_of(v) for v in (value if isinstance(value, list) else [value])]
    used = [m for m in matchers if any(_matches(n, m) for n in names)]
    ok = not used if inverse else len(used) == len(matchers)
    wanted = [m.get("pattern") or m.get("name") for m in matchers]
    why = f"{'not use' if inverse else 'use'} {wanted}; tools called: {names or '(none)'}"
    return Verdict.of(ok, 1.0 if ok else 0.0, "passed" if ok else f"expected the agent to {why}")


def _tool_sequence(a: dict[str, Any], run: RunRecord, inverse: bool, *_: Any) -> Verdict:
    value = a["value"]
    mode, steps = ("in_order", value) if isinstance(value, list) else (value.get("mode", "in_order"), value["steps"])
    matchers = [matcher_of(s) for s in steps]
    names = [c.name for c in run.tool_calls]
    if mode == "exact":
        base = len(names) == len(matchers) and all(_matches(n, m) for n, m in zip(names, matchers, strict=True))
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
        f"take {low if low is not None else 0}..{high if high is not None else ''} tool steps (took {count})",
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
        f"F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f}); expected {sorted(expected)}, "
        f"called {sorted(actual) or '(none)'}; threshold {threshold:g}"
    )
    return Verdict.of(ok, f1, why)


class _Judge:
    """Model-graded assertions through the plugin's judge LLM (``agent_eval_llm``)."""

    def __init__(self, run: RunRecord, spec: dict[str, Any], ctx: CheckContext) -> None:
        self.run, self.spec, self.ctx = run, spec, ctx

    def reply(self, prompt: str) -> dict[str, Any]:
        assert self.ctx.llm is not None
        try:
            text = ask(self.ctx.llm, [{"role": "user", "content": prompt}], response_format={"type": "json_object"})
        except Exception as exc:
            raise CheckError(f"judge LLM call failed: {type(exc).__name__}: {exc}") from exc
        for candidate in [text.strip(), *re.findall(r"\{.*\}", text, re.DOTALL)]:
            try:
                data = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
        raise CheckError(f"judge reply unreadable: {' '.join(text.split())[:200]!r}; the judge must reply JSON")

    def fields(self) -> dict[str, str]:
        fields = prompt_fields(self.run, self.ctx, "")
        fields["input"] = str(self.spec.get("prompt") or fields["input"])
        return fields


def _graded(a: dict[str, Any], run: RunRecord, inverse: bool, cost: float | None, judge: _Judge) -> Verdict:
    if judge.ctx.llm is None:
        return Verdict(None, 0.0, 1.0, NO_LLM)
    fields = judge.fields()
    base, value = a["base"], str(a["value"])
    if base == "llm-rubric":
        data = judge.reply(RUBRIC_PROMPT.format(rubric=value, input=fields["input"], output=run.output))
        score, reason = read_score(json.dumps(data)) if "score" in data else (None, str(data.get("reason", "")))
        verdict = data.get("pass")
        if not isinstance(verdict, bool):
            if score is None:
                raise CheckError(f"judge reply has neither `pass` nor `score`: {data!r}")
            verdict = score >= 0.5
        score = score if score is not None else (1.0 if verdict else 0.0)
        threshold = a.get("threshold")
        passed = verdict and (threshold is None or score >= threshold)
    elif base == "factuality":
        data = judge.reply(FACTUALITY_PROMPT.format(input=fields["input"], reference=value, output=run.output))
        choice = str(data.get("choice", "")).strip().upper()[:1]
        if choice not in FACTUALITY_SCORES:
            raise CheckError(f"judge reply unreadable: no choice A-E in {data!r}")
        options = a.get("options") or judge.spec.get("options") or {}
        scores = options.get("factuality") or {}
        score = float(scores.get(FACTUALITY_SCORES[choice], 0.0 if choice == "D" else 1.0))
        passed, reason = score > 0, f"({choice}) {data.get('reason', '')}"
    else:  # model-graded-closedqa
        data = judge.reply(CLOSEDQA_PROMPT.format(input=fields["input"], output=run.output, criteria=value))
        answer = str(data.get("answer", "")).strip().upper()[:1]
        if answer not in ("Y", "N"):
            raise CheckError(f"judge reply unreadable: no answer Y or N in {data!r}")
        passed, score, reason = answer == "Y", 1.0 if answer == "Y" else 0.0, str(data.get("reason", ""))
    if base == "llm-rubric":
        reason = str(data.get("reason", ""))
    if inverse:
        passed, score = not passed, 1.0 - score
    return Verdict.of(passed, score, reason or ("passed" if passed else "failed"))


_HANDLERS: dict[str, Callable[..., Verdict]] = {
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
    "python": _python,
    "latency": _latency,
    "cost": _cost_check,
    "trajectory:tool-used": _tool_used,
    "trajectory:tool-sequence": _tool_sequence,
    "trajectory:step-count": _step_count,
    "tool-call-f1": _tool_call_f1,
    "llm-rubric": _graded,
    "factuality": _graded,
    "model-graded-closedqa": _graded,
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "assert": {"type": "array", "items": {"type": "object", "required": ["type"]}},
        "threshold": {"type": "number"},
        "vars": {"type": "object"},
        "prompt": {"type": "string"},
    },
    "required": ["assert"],
}
"""What the promptfoo dialect makes of a test (``{assert, threshold, vars, prompt}``); in a native file,
``promptfoo: {assert: [...]}`` judges promptfoo assertions (values as promptfoo reads them, no templates)."""


def register(registry: CheckRegistry) -> None:
    registry.register(NAME, promptfoo, SCHEMA, "a promptfoo test's assertions (the promptfoo dialect)", uses_llm=True)


def python_path(ref: str, base: Path) -> tuple[str, str | None]:
    """``x.py[:fn]`` (after ``file://`` or ``python:``) -> (absolute path, function or None)."""
    path, function = ref.split(".py:", 1) if ".py:" in ref else (ref, "")
    path = path if path.endswith(".py") else path + ".py"
    return str((base / path).resolve()), function or None
