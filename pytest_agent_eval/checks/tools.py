"""Checks on the tool calls: which tools, in which order, how many, with which arguments."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord, ToolCall
from pytest_agent_eval.subset import exact_mismatches, mismatches, without_paths
from pytest_agent_eval.text import bounded_repr

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case

NAMES = {"type": "array", "items": {"type": "string"}}
ARGS_STEP = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
    "required": ["name"],
    "additionalProperties": False,
}
"""A ``tool_sequence`` step with arguments: ``{name, args}``.

The call's arguments contain ``args``.
"""


def counted(run: RunRecord, ctx: CheckContext) -> RunRecord:
    """The run as the tool checks see it.

    With ``failed_calls: ignore``, it is without the calls whose tool raised.
    """
    if ctx.options.get("failed_calls", "count") != "ignore" or all(
        c.error is None for c in run.tool_calls
    ):
        return run
    return dataclasses.replace(run, tool_calls=[c for c in run.tool_calls if c.error is None])


def _numbered(calls: list[tuple[int, ToolCall]]) -> list[str]:
    return [f"{i:>2}. {c.describe()}" for i, c in calls]


def calls_table(calls: list[ToolCall]) -> list[str]:
    """The recorded calls, one a line, with what each returned or raised.

    Shown once per failure text, not per check.
    """
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
            mark = (
                " "
                if op == "equal"
                else ("≠" if e != "-" and a != "-" else ("+" if e == "-" else "-"))
            )
            rows.append((e, mark, a))
    width = max([len("expected")] + [len(r[0]) for r in rows])
    lines = [f"    {'expected'.ljust(width)}    actual"]
    for n, (e, mark, a) in enumerate(rows, 1):
        lines.append(f"{n:>2}. {e.ljust(width)}  {mark} {a}")
    return lines


def tools_called(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Each tool was called at least once; other calls are allowed."""
    run = counted(run, ctx)
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
    run = counted(run, ctx)
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
    run = counted(run, ctx)
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
    """The ordered list of calls equals this list.

    A ``{name, args}`` step's call has arguments containing these.
    """
    run = counted(run, ctx)
    want, got = [step if isinstance(step, str) else step["name"] for step in spec], run.tool_names
    with_args = any(isinstance(step, dict) for step in spec)
    detail: list[str] = []
    if want != got:
        pos = next(
            (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
            min(len(want), len(got)),
        )
        message = f"calls differ at position {pos + 1}"
        detail = align(want, run.tool_calls)
        score = difflib.SequenceMatcher(a=want, b=got, autojunk=False).ratio()
    else:
        differing = []
        for i, (step, call) in enumerate(zip(spec, run.tool_calls, strict=True), 1):
            lines = (
                mismatches(step["args"], call.args, call.name)
                if isinstance(step, dict) and "args" in step
                else []
            )
            if lines:
                differing.append(str(i))
                detail += [f"{i:>2}. {call.describe()}", *(f"    {line}" for line in lines)]
        message = f"arguments differ at step {', '.join(differing)}" if differing else ""
        score = 1.0 - len(differing) / len(spec) if spec else 1.0
    return CheckResult.of(
        "tool_sequence",
        not message,
        score=score,
        expected=list(spec),
        actual=[{"name": c.name, "args": c.args} for c in run.tool_calls] if with_args else got,
        message=message,
        detail=detail,
    )


def tools_in_order(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """These calls occur in this relative order; other calls may come between them."""
    run = counted(run, ctx)
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
    run = counted(run, ctx)
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
    run = counted(run, ctx)
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


def tools_only(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Every call is one of these tools (``[]``: no call at all)."""
    run = counted(run, ctx)
    allowed = set(spec)
    bad = [(i, c) for i, c in enumerate(run.tool_calls, 1) if c.name not in allowed]
    names = list(dict.fromkeys(c.name for _, c in bad))
    return CheckResult.of(
        "tools_only",
        not bad,
        score=1.0 - len(bad) / len(run.tool_calls) if run.tool_calls else 1.0,
        expected=f"only {sorted(allowed)}" if allowed else "no tool call",
        actual=run.tool_names,
        message=f"{len(bad)} call(s) of other tools: {', '.join(names)}" if bad else "",
        detail=_numbered(bad),
    )


def _bounds(want: Any) -> tuple[int, int | None]:
    if isinstance(want, dict):
        return int(want.get("min", 0)), (int(want["max"]) if "max" in want else None)
    return int(want), int(want)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def tool_counts(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """Each tool was called exactly n times (``t: n``) or within the bounds (``t: {min, max}``)."""
    run = counted(run, ctx)
    counts = Counter(run.tool_names)
    wrong: list[str] = []
    for tool, want in spec.items():
        low, high = _bounds(want)
        n = counts[tool]
        if n < low or (high is not None and n > high):
            if low == high:
                expected = f"exactly {_times(low)}"
            elif high is None:
                expected = f"at least {_times(low)}"
            else:
                expected = f"{low} to {high} times"
            wrong.append(f"{tool}: called {_times(n) if n else 'never'}, expected {expected}")
    return CheckResult.of(
        "tool_counts",
        not wrong,
        score=(len(spec) - len(wrong)) / len(spec) if spec else 1.0,
        expected=dict(spec),
        actual={tool: counts[tool] for tool in spec},
        message="; ".join(wrong),
    )


def _chosen(calls: list[tuple[int, ToolCall]], occurrence: Any) -> list[tuple[int, ToolCall]]:
    if occurrence == "first":
        return calls[:1]
    if occurrence == "last":
        return calls[-1:]
    if isinstance(occurrence, int):
        return calls[occurrence - 1 : occurrence]
    return calls


def _one_tool_call(run: RunRecord, want: dict[str, Any]) -> tuple[bool, str, list[str]]:
    """Whether the chosen call(s) of ``want["name"]`` have the arguments.

    Also the message and detail lines.
    """
    name, occurrence = want["name"], want.get("occurrence", "any")
    exact, ignore = want.get("match", "subset") == "exact", list(want.get("ignore", []))
    args = without_paths(want.get("args", {}), ignore)
    calls = [(i, c) for i, c in enumerate(run.tool_calls, 1) if c.name == name]
    if not calls:
        return False, f"{name} never called", []
    chosen = _chosen(calls, occurrence)
    if not chosen:
        return (
            False,
            f"{name} called {_times(len(calls))}, no call number {occurrence}",
            _numbered(calls),
        )
    compare = exact_mismatches if exact else mismatches
    found = [(i, c, compare(args, without_paths(c.args, ignore), name)) for i, c in chosen]
    if any(not lines for _, _, lines in found):
        return True, "", []
    i, call, lines = min(found, key=lambda f: len(f[2]))
    which = (
        ""
        if occurrence == "any"
        else f" ({occurrence} call)"
        if isinstance(occurrence, str)
        else f" (call {occurrence})"
    )
    nearest = " (the closest)" if len(found) > 1 else ""
    return (
        False,
        f"{name}{which}: arguments differ" + (" (exact match)" if exact else ""),
        [f"{i:>2}. {call.describe()}{nearest}", *(f"    {line}" for line in lines)],
    )


def tool_call(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """That call of the tool has these arguments.

    The call: ``occurrence``: any, first, last or N from 1. The arguments: contained in its own
    (``match: subset``, the default) or equal to them (``exact``), leaving out the ``ignore`` paths.
    """
    run = counted(run, ctx)
    wants = spec if isinstance(spec, list) else [spec]
    messages: list[str] = []
    detail: list[str] = []
    for want in wants:
        ok, message, lines = _one_tool_call(run, want)
        if not ok:
            messages.append(message)
            detail.extend(lines)
    return CheckResult.of(
        "tool_call",
        not messages,
        score=(len(wants) - len(messages)) / len(wants),
        expected=spec,
        actual=[{"name": c.name, "args": c.args} for c in run.tool_calls],
        message="; ".join(messages),
        detail=detail,
    )


def _same_call(call: ToolCall) -> str:
    """A key equal for calls of one tool with arguments equal as data (key order doesn't matter)."""
    return json.dumps([call.name, call.args], sort_keys=True, default=repr)


def max_repeated_calls(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """No identical call (same tool, same arguments) is made more than n times.

    The agent does not loop.
    """
    run = counted(run, ctx)
    limit = int(spec)
    seen: Counter[str] = Counter()
    first: dict[str, ToolCall] = {}
    for call in run.tool_calls:
        key = _same_call(call)
        seen[key] += 1
        first.setdefault(key, call)
    repeated = [(key, n) for key, n in seen.most_common() if n > limit]
    worst = repeated[0][1] if repeated else max(seen.values(), default=0)
    return CheckResult.of(
        "max_repeated_calls",
        not repeated,
        score=1.0 if not repeated else limit / worst,
        expected=f"each call at most {_times(limit)}",
        actual=worst,
        message="; ".join(
            f"{first[key].describe()} made {n} times, at most {limit} allowed"
            for key, n in repeated
        ),
    )


def forbidden_tools(case: Case) -> Callable[[str], bool]:
    """Whether the case's checks say a tool must not be called.

    They do with ``max_tool_calls: 0``, ``tools_not_called``, or by leaving it out of
    ``tools_exactly``. Tool mocks take a mock of it for a safety net, not a typo.
    """
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
    registry.register(
        "tools_called", tools_called, NAMES, "each tool was called at least once", blocking=False
    )
    registry.register(
        "tools_not_called",
        tools_not_called,
        NAMES,
        "none of these tools was called",
        blocking=False,
    )
    registry.register(
        "tools_exactly",
        tools_exactly,
        NAMES,
        "the set of called tools equals this set",
        blocking=False,
    )
    registry.register(
        "tool_sequence",
        tool_sequence,
        {"type": "array", "items": {"anyOf": [{"type": "string"}, ARGS_STEP]}},
        "the ordered calls equal this list "
        "({name, args} steps: the call's arguments contain these)",
        blocking=False,
    )
    registry.register(
        "tools_in_order",
        tools_in_order,
        NAMES,
        "these calls occur in this relative order",
        blocking=False,
    )
    registry.register(
        "max_tool_calls",
        max_tool_calls,
        {"type": "integer", "minimum": 0},
        "at most n tool calls",
        blocking=False,
    )
    registry.register(
        "tool_args",
        tool_args,
        {"type": "object", "additionalProperties": {"type": "object"}},
        "some call of the tool has these arguments (subset match)",
        blocking=False,
    )
    registry.register(
        "tools_only",
        tools_only,
        NAMES,
        "every call is one of these tools ([]: none)",
        blocking=False,
    )
    count = {"type": "integer", "minimum": 0}
    bounds = {
        "type": "object",
        "properties": {"min": count, "max": count},
        "minProperties": 1,
        "additionalProperties": False,
    }
    registry.register(
        "tool_counts",
        tool_counts,
        {"type": "object", "additionalProperties": {"anyOf": [count, bounds]}},
        "each tool was called exactly n times / within {min, max}",
        blocking=False,
    )
    one_call = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "args": {"type": "object"},
            "match": {"enum": ["subset", "exact"]},
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "dotted paths in the arguments",
            },
            "occurrence": {
                "anyOf": [{"enum": ["any", "first", "last"]}, {"type": "integer", "minimum": 1}]
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    registry.register(
        "tool_call",
        tool_call,
        {"anyOf": [one_call, {"type": "array", "items": one_call, "minItems": 1}]},
        "that call of the tool has these arguments (subset or exact, ignoring paths)",
        blocking=False,
    )
    registry.register(
        "max_repeated_calls",
        max_repeated_calls,
        {"type": "integer", "minimum": 1},
        "no identical call (tool and arguments) more than n times",
        blocking=False,
    )
