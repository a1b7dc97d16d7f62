"""A standing guard on the loader (SPEC §13): mutated valid files give located errors only."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agent_eval.cases.load import builtin_dialects, load_file
from pytest_agent_eval.checks import builtin_registry
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors

CHECKS = builtin_registry()
DIALECTS = builtin_dialects()
EXAMPLES = 400

NATIVE: dict[str, Any] = {
    "name": "fuzz",
    "agent": "scripted:run",
    "tags": ["smoke"],
    "defaults": {"timeout": 5, "expect": {"max_tool_calls": 3}},
    "cases": [
        {
            "id": "one",
            "description": "first case",
            "input": {"query": "hi", "context": {"say": "ok"}},
            "tags": ["kb", "fast"],
            "expect": {
                "contains": ["ok"],
                "tools_called": ["search"],
                "output_schema": {"type": "object"},
            },
            "repeat": 2,
            "min_pass_rate": 0.5,
            "metadata": {"owner": "me", "list": [1, 2, {"x": None}]},
            "tool_mocks": {"search": {"returns": "found"}},
        },
        {
            "id": "two",
            "turns": ["hello", {"input": "again", "expect": {"contains": ["x"]}}],
            "timeout": 1.5,
        },
        {"input": "derived", "weights": {"contains": 2}, "skip": "later", "xfail": True},
    ],
}
NEON = """\
name: demo
agent_id: table_agent:run
default_scorers: [tool_selection]
cases:
  - name: uses_defaults
    input: {query: two tools}
    expected_tools: [web_search]
    tags: [kb]
  - name: overrides
    input: {query: two tools}
    scorers: [tool_selection, grounding]
    min_score: 0.5
"""
SEEDS = [
    ("eval_native.yaml", yaml.safe_dump(NATIVE, sort_keys=False)),
    ("eval_native.json", json.dumps(NATIVE, indent=2)),
    ("eval_neon.yaml", NEON),
    (
        "eval_category.json",
        json.dumps({"kb": [{"input": "q", "expected": "a", "tags": ["t"], "timeout": 3}]}),
    ),
]
ODD_VALUES = st.sampled_from(
    [None, True, 0, -1, 2.0, 1e308, float("nan"), float("inf"), "", "x\n", "_wip", "__class__",
     "kb\n", [], {}, [None], {"": 1}, {1: "y"}, {True: "x"}, {None: "x"}, [[[[[]]]]],
     "http://127.0.0.1:1/x", {"$ref": "file:///etc/passwd"}]
)  # fmt: skip
ODD_KEYS = st.sampled_from(
    [1, True, None, "", "__class__", "_wip", "cases", "id", "expect", "x\ny", 2.5]
)
LOCATED = re.compile(r"/fuzz/eval_\w+\.(yaml|json):[1-9][0-9]*: ")


DEEP = "deep-data-goes-here"


def _nested(depth: int) -> str:
    """Flow-style nesting, the same text in YAML and JSON (a dumper would recurse too deep)."""
    return '[{"k": ' * (depth // 2) + "1" + "}]" * (depth // 2)


def _paths(data: Any, key: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [key]
    if isinstance(data, dict):
        for k, v in data.items():
            out.extend(_paths(v, (*key, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.extend(_paths(v, (*key, i)))
    return out


@st.composite
def structured(draw: st.DrawFn) -> tuple[str, str]:
    """A valid native file with a field set to a wrong value, an odd key added, or deep data in."""
    data = json.loads(json.dumps(NATIVE))
    paths = [p for p in _paths(data) if p]
    target = draw(st.sampled_from(paths))
    parent = data
    for part in target[:-1]:
        parent = parent[part]
    kind = draw(st.sampled_from(["value", "key", "deep"]))
    if kind == "value":
        parent[target[-1]] = draw(ODD_VALUES)
    elif kind == "deep":
        parent[target[-1]] = DEEP
    elif isinstance(parent, dict):
        parent[draw(ODD_KEYS)] = draw(ODD_VALUES)
    else:
        parent.append({draw(ODD_KEYS): draw(ODD_VALUES)})
    if draw(st.booleans()):
        name, text = "eval_mut.yaml", yaml.safe_dump(data, sort_keys=False, width=1 << 30)
    else:
        name, text = (
            "eval_mut.json",
            json.dumps(data, default=str),
        )  # non-string keys become strings
    return name, text.replace(DEEP, _nested(draw(st.sampled_from([60, 400, 3000]))))


@st.composite
def textual(draw: st.DrawFn) -> tuple[str, str]:
    """A seed file with bytes flipped, lines deleted or duplicated."""
    name, text = draw(st.sampled_from(SEEDS))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "delete", "duplicate", "insert"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "delete" and lines:
            del lines[i]
        elif op == "duplicate" and lines:
            lines.insert(i, lines[i])
        elif op == "insert":
            lines.insert(
                i,
                draw(
                    st.sampled_from(
                        ["&a [*a]\n", "x: *a\n", "- !!set {a}\n", "? [a]\n", "{\n", "\t\n"]
                    )
                ),
            )
        elif lines:
            line = lines[i]
            j = draw(st.integers(0, max(len(line) - 1, 0)))
            char = draw(st.sampled_from(list("\x00\ufeff{}[]:,-'\"&*!#|>%@` \n\t1")))
            lines[i] = line[:j] + char + line[j + 1 :]
    return name, "".join(lines)


@settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)
@given(st.one_of(structured(), textual()))
def test_mutated_files_give_located_errors_only(sample: tuple[str, str]) -> None:
    name, text = sample
    path = Path("/fuzz") / name
    try:
        loaded = load_file(path, CHECKS, DIALECTS, text=text)
    except EvalFileErrors as exc:
        assert exc.errors
        for err in exc.errors:
            assert LOCATED.match(err.format()), err.format()
        return
    except EvalFileError as exc:
        assert LOCATED.match(exc.format()), exc.format()
        return
    for case in loaded.cases:
        if case.error is not None:
            assert LOCATED.match(case.error), case.error
        repr(case)  # what reports print must be printable
        json.dumps(case.metadata, default=str)
