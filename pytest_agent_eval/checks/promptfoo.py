"""The ``promptfoo`` check: a promptfoo test's assertions, with promptfoo's meaning (SPEC §19).

The promptfoo dialect (``cases/dialects/promptfoo.py``) reads and validates the assertions; this
module judges a run against them as promptfoo does (``src/assertions/index.ts`` and
``assertionsResult.ts``): every assertion yields a pass and a score; ``not-`` inverts it; an
assertion of weight 0 always passes and does not count; the test's score is the weighted mean; the
test passes when every assertion passes, or, with a test ``threshold``, when the score reaches it;
an ``assert-set`` is judged the same way with its own threshold and counts as one assertion of its
weight. A model-graded assertion asks the plugin's judge (``agent_eval_llm``); with no LLM it is
"not scored", and the test's verdict is unknown unless the other assertions decide it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckError, CheckRegistry
from pytest_agent_eval.checks.promptfoo_deterministic import DETERMINISTIC, Verdict, cost_so_far
from pytest_agent_eval.checks.promptfoo_graded import Judge, graded, python
from pytest_agent_eval.checks.promptfoo_types import ALIASES, unsupported
from pytest_agent_eval.core.results import CheckResult, RunRecord

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
"""The assertion types (without ``not-``) the plugin honours.

Any other errors its case as not supported.
"""


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
    judge = Judge(run, spec, ctx)
    cost = cost_so_far(run)  # before a grader's own calls add to what the traffic hook counts
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
    expected = (
        f"score >= {main.threshold:g}" if main.threshold is not None else "every assertion passes"
    )
    actual = f"score {total.low:.2f}" + (f"..{total.high:.2f}" if total.high != total.low else "")
    if total.error is not None:
        why = f"no verdict: {total.error}"
        return CheckResult(NAME, False, 0.0, expected, why, why, lines, scored=False, error=True)
    if total.passed is None:
        return CheckResult(
            NAME, True, total.low, expected, actual, total.reason, lines, scored=False
        )
    return CheckResult(
        NAME, total.passed, total.low, expected, actual, "" if total.passed else total.reason, lines
    )


def _line(assertion: dict[str, Any], verdict: Verdict) -> str:
    mark = "?" if verdict.passed is None or verdict.error else ("✓" if verdict.passed else "✗")
    weight = assertion.get("weight", 1.0)
    extra = f", weight {weight:g}" if weight != 1.0 else ""
    metric = f", metric {assertion['metric']}" if assertion.get("metric") else ""
    return (
        f"{mark} {label(assertion)}: score {verdict.low:.2f}{extra}{metric}: "
        f"{verdict.error or verdict.reason}"
    )


def _one(assertion: dict[str, Any], run: RunRecord, cost: float | None, judge: Judge) -> Verdict:
    """One assertion's verdict, ``not-`` applied.

    Weight 0 always passes (promptfoo's metric-only assertion).
    """
    kind = str(assertion["type"])
    inverse = assertion.get("inverse", kind.startswith("not-"))
    base = assertion.get("base", kind[4:] if kind.startswith("not-") else kind)
    base = ALIASES.get(base, base)
    if base not in _HANDLERS:
        why = unsupported(kind)
        return Verdict(False, 0.0, 0.0, why, error=why)
    try:
        verdict = _HANDLERS[base]({**assertion, "base": base}, run, inverse, cost, judge)
    except CheckError as exc:
        return Verdict(False, 0.0, 0.0, str(exc), error=str(exc))
    except (
        Exception
    ) as exc:  # user code (a python assertion) or a bad value: no verdict, never a pass
        why = f"{type(exc).__name__}: {exc}"
        return Verdict(False, 0.0, 0.0, why, error=why)
    if assertion.get("weight", 1.0) == 0 and verdict.passed is not None:
        verdict.passed = True
    return verdict


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
"""What the promptfoo dialect makes of a test (``{assert, threshold, vars, prompt}``).

In a native file, ``promptfoo: {assert: [...]}`` judges promptfoo assertions (values as promptfoo
reads them, no templates).
"""


_HANDLERS: dict[str, Callable[..., Verdict]] = {
    **DETERMINISTIC,
    "python": python,
    "llm-rubric": graded,
    "factuality": graded,
    "model-graded-closedqa": graded,
}


def register(registry: CheckRegistry) -> None:
    registry.register(
        NAME,
        promptfoo,
        SCHEMA,
        "a promptfoo test's assertions (the promptfoo dialect)",
        uses_llm=True,
    )
