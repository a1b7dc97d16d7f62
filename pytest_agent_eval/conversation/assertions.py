"""Post-conversation assertions (SPEC §9): weighted checks, Cypher queries and expressions.

Native checks carry a weight, Cypher runs through Neo4j, and expressions are handed to the hook
``pytest_agent_eval_evaluate_assertion``. What nothing can evaluate is "not scored".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry, evaluate
from pytest_agent_eval.conversation.neo4j import Connection, NotConfigured
from pytest_agent_eval.core.conversation import Assertion
from pytest_agent_eval.core.results import CheckResult, RunRecord

ExpressionHook = Callable[..., Any]
"""``(assertion, run, case) -> bool | float | CheckResult | None`` (the hook, firstresult)."""
HOOK = "pytest_agent_eval_evaluate_assertion(assertion, run, case)"


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cypher(a: Assertion, name: str, connection: Connection) -> CheckResult:
    query, expected = a.spec["cypher"], a.spec.get("expected")
    try:
        value = connection.single_value(query)
    except NotConfigured as exc:
        return CheckResult(name, True, 0.0, expected, "not run", f"not scored: {exc}", scored=False)
    except Exception as exc:
        why = f"cypher failed: {_describe(exc)}"
        return CheckResult(
            name, False, 0.0, expected, why, f"no verdict: {why}", scored=False, error=True
        )
    ok = str(value) == str(expected)  # the home project compared the single value's string form
    return CheckResult.of(
        name, ok, expected=str(expected), actual=str(value), message="" if ok else "value differs"
    )


def _expression(
    a: Assertion, name: str, run: RunRecord, ctx: CheckContext, hook: ExpressionHook | None
) -> CheckResult:
    expression = a.spec["expression"]
    answer = None
    if hook is not None:
        try:
            answer = hook(assertion={**a.spec, "weight": a.weight}, run=run, case=ctx.case)
        except Exception as exc:
            why = f"{HOOK.split('(')[0]} raised {_describe(exc)}"
            return CheckResult(
                name, False, 0.0, expression, why, f"no verdict: {why}", scored=False, error=True
            )
    if answer is None:
        why = (
            f"not scored: no plugin evaluates expressions; implement the hook {HOOK} in conftest.py"
        )
        return CheckResult(name, True, 0.0, expression, "not evaluated", why, scored=False)
    if isinstance(answer, CheckResult):
        answer.name = name
        return answer
    if isinstance(answer, bool):
        message = "" if answer else "false"
        return CheckResult.of(
            name, answer, expected="true", actual=str(answer).lower(), message=message
        )
    if isinstance(answer, (int, float)) and 0.0 <= answer <= 1.0:
        return CheckResult.of(
            name, answer >= 0.5, score=float(answer), expected="true", actual=f"{answer:g}"
        )
    why = (
        f"{HOOK.split('(')[0]} returned {answer!r}; "
        "expected a bool, a score in 0..1, a CheckResult or None"
    )
    return CheckResult(
        name, False, 0.0, expression, why, f"no verdict: {why}", scored=False, error=True
    )


def evaluate_assertions(
    assertions: tuple[Assertion, ...],
    run: RunRecord,
    ctx: CheckContext,
    registry: CheckRegistry,
    hook: ExpressionHook | None,
    connection: Connection,
) -> list[CheckResult]:
    """One result per assertion, named ``assertion N: ...``, in order."""
    results = []
    for n, a in enumerate(assertions, 1):
        name = f"assertion {n}: {a.name}"
        if a.kind == "cypher":
            result = _cypher(a, name, connection)
        elif a.kind == "expression":
            result = _expression(a, name, run, ctx, hook)
        else:
            (result,) = evaluate(run, a.spec, ctx, registry)
            result.name = name
        results.append(result)
    return results


def assertion_part(
    assertions: tuple[Assertion, ...], results: list[CheckResult]
) -> tuple[float | None, float, float]:
    """The weighted share of passing scored assertions.

    Returned as (share or None, passing weight, scored weight).
    """
    scored = [
        (a.weight, r) for a, r in zip(assertions, results, strict=True) if r.scored and not r.error
    ]
    total = sum(w for w, _ in scored)
    passing = sum(w * r.score for w, r in scored)
    return (passing / total if total else None), passing, total
