"""Checks on the tool calls: which tools, in which order, how many, with which arguments."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.run.results import CheckResult, RunRecord, ToolCall
from pytest_agent_eval.subset import mismatches
from pytest_agent_eval.text import bounded_repr

if TYPE_CHECKING:
    from pytest_agent_eval.cases.model import Case

NAMES = {"type": "array", "items": {"type": "string"}}


def calls_table(calls: list[ToolCall]) -> list[str]:
    """The recorded calls, one a line, with what each returned or raised (once per failure text, not per check)."""
    if not calls:
        return ["(no tool calls)"]
    out = []
    for i, c in enumerate(calls, 1):
        if c.error is not None:
            got = f"raised {c.error}"
        else:
            text = bounded_repr(c.result)
            got = f"-> {text[:80]}…" if len(text) > 80 else f"-> {text}"
        out.append(f"{i:>2}. {c.describe()} {got}")
    return out


def align(expected: list[str], calls: list[ToolCall]) -> list[str]:
    """Expected tool names and actual calls side by side, aligned call by call."""
    actual = [c.name for c in calls]
    rows: list[tuple[str, str, str]] = []
    sm = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        for k in range(max(a1 - a0, b1 - b0)):
            e = expected[a0 + k] if a0 + k < a1 else "-"
            a = calls[b0 + k].describe() if b0 + k < b1 else "-"
            mark = " " if op == "equal" else ("≠" if e != "-" and a != "-" else ("+" if e == "-" else "-"))
            rows.append((e, mark, a))
    width = max([len("expected")] + [len(r[0]) for r in rows])
    lines = [f"    {'expected'.ljust(width)}    actual"]
    for n, (e, mark, a) in enumerate(rows, 1):
        lines.append(f"{n:>2}. {e.ljust(width)}  {mark} {a}")
    return lines


def tools_called(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Each tool was called at least once; other calls are allowed."""
    called = set(run.tool_names)
    missing = [t for t in spec if t not in called]
    return CheckResult.of(
        "tools_called",
        not missing,
        score=(len(spec) - len(missing)) / len(spec) if spec else 1.0,
        expected=list(spec),
        actual=run.tool_names,
        message=f"not called: {', '.join(missing)}" if missing else "",
    )


def tools_not_called(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """None of these tools was called."""
    bad = [t for t in spec if t in set(run.tool_names)]
    return CheckResult.of(
        "tools_not_called",
        not bad,
        expected=f"none of {list(spec)}",
        actual=run.tool_names,
        message=f"called: {', '.join(bad)}" if bad else "",
    )


def tools_exactly(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The set of called tools equals this set."""
    want, got = set(spec), set(run.tool_names)
    parts = []
    if want - got:
        parts.append(f"not called: {', '.join(sorted(want - got))}")
    if got - want:
        parts.append(f"unexpected: {', '.join(sorted(got - want))}")
    union = want | got
    return CheckResult.of(
        "tools_exactly",
        want == got,
        score=len(want & got) / len(union) if union else 1.0,
        expected=sorted(want),
        actual=sorted(got),
        message="; ".join(parts),
    )


def tool_sequence(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The ordered list of calls equals this list."""
    want, got = list(spec), run.tool_names
    ok = want == got
    msg = ""
    if not ok:
        pos = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got)))
        msg = f"calls differ at position {pos + 1}"
    sm = difflib.SequenceMatcher(a=want, b=got, autojunk=False)
    return CheckResult.of(
        "tool_sequence",
        ok,
        score=1.0 if ok else sm.ratio(),
        expected=want,
        actual=got,
        message=msg,
        detail=[] if ok else align(want, run.tool_calls),
    )


def tools_in_order(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """These calls occur in this relative order; other calls may come between them."""
    want = list(spec)
    it: Iterator[str] = iter(run.tool_names)
    matched = 0
    for name in want:
        if any(name == got for got in it):
            matched += 1
        else:
            break
    ok = matched == len(want)
    return CheckResult.of(
        "tools_in_order",
        ok,
        score=matched / len(want) if want else 1.0,
        expected=want,
        actual=run.tool_names,
        message=""
        if ok
        else f"{want[matched]!r} not called after {want[:matched]}"
        if matched
        else f"{want[0]!r} never called",
        detail=[] if ok else align(want, run.tool_calls),
    )


def max_tool_calls(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """At most n tool calls."""
    n = len(run.tool_calls)
    ok = n <= int(spec)
    return CheckResult.of(
        "max_tool_calls",
        ok,
        score=1.0 if ok else int(spec) / n,
        expected=f"<= {spec}",
        actual=n,
        message="" if ok else f"{n} tool calls, at most {spec} allowed",
    )


def tool_args(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Some call of each tool has arguments that contain these (nested subset match)."""
    detail: list[str] = []
    failed: list[str] = []
    for tool, want in spec.items():
        calls = [c for c in run.tool_calls if c.name == tool]
        if not calls:
            failed.append(tool)
            detail.append(f"{tool}: never called")
            continue
        best = min((mismatches(want, c.args, tool) for c in calls), key=len)
        if best:
            failed.append(tool)
            detail.extend(best)
    return CheckResult.of(
        "tool_args",
        not failed,
        score=(len(spec) - len(failed)) / len(spec) if spec else 1.0,
        expected=spec,
        actual={c.name: c.args for c in run.tool_calls},
        message=f"arguments differ for {', '.join(failed)}" if failed else "",
        detail=detail,
    )


def forbidden_tools(case: Case) -> Callable[[str], bool]:
    """Whether the case's checks say a tool must not be called (``max_tool_calls: 0``, ``tools_not_called``, left
    out of ``tools_exactly``): tool mocks take a mock of it for a safety net, not a typo."""
    banned: set[str] = set()
    allowed: list[set[str]] = []
    for expect in (case.expect, *(turn.expect for turn in case.turns)):
        if expect.get("max_tool_calls") == 0:
            return lambda name: True
        if isinstance(expect.get("tools_not_called"), list):
            banned.update(map(str, expect["tools_not_called"]))
        if isinstance(expect.get("tools_exactly"), list):
            allowed.append(set(map(str, expect["tools_exactly"])))
    return lambda name: name in banned or any(name not in names for names in allowed)


def register(registry: CheckRegistry) -> None:
    registry.register("tools_called", tools_called, NAMES, "each tool was called at least once", blocking=False)
    registry.register("tools_not_called", tools_not_called, NAMES, "none of these tools was called", blocking=False)
    registry.register("tools_exactly", tools_exactly, NAMES, "the set of called tools equals this set", blocking=False)
    registry.register("tool_sequence", tool_sequence, NAMES, "the ordered calls equal this list", blocking=False)
    registry.register(
        "tools_in_order", tools_in_order, NAMES, "these calls occur in this relative order", blocking=False
    )
    registry.register(
        "max_tool_calls", max_tool_calls, {"type": "integer", "minimum": 0}, "at most n tool calls", blocking=False
    )
    registry.register(
        "tool_args",
        tool_args,
        {"type": "object", "additionalProperties": {"type": "object"}},
        "some call of the tool has these arguments (subset match)",
        blocking=False,
    )
