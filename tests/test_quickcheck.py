"""The compiled schema pre-check agrees with jsonschema: it rejects whatever jsonschema rejects."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pytest_agent_eval.cases.dialects.native_schema import native_schema
from pytest_agent_eval.cases.quickcheck import compile_schema
from pytest_agent_eval.checks import builtin_registry

BASE: dict[str, Any] = {
    "agent": "pkg.mod:run",
    "agents": {
        "fast": "pkg.mod:fast",
        "svc": {
            "url": "http://x/chat",
            "headers": {"A": "b"},
            "output": "data.text",
            "session": {"from": "id"},
        },
    },
    "tags": ["routing"],
    "defaults": {"timeout": 5, "tool_mocks": {"search": "hit"}},
    "cases": [
        {
            "id": "a",
            "input": {"query": "q", "context": {"user": "x"}},
            "tags": ["kb"],
            "repeat": 3,
            "min_pass_rate": 0.5,
            "expect": {
                "contains": ["x"],
                "regex": "a+b",
                "outcome": {"expected": "success", "success_words": ["ok"]},
                "judge": {"rubric": "good", "min_score": 0.5},
                "max_tool_calls": 2,
                "tool_args": {"search": {"q": "x"}},
                "case_sensitive": True,
            },
        },
        {"id": "b", "turns": ["hi", {"input": "more", "expect": {"equals": "x"}}], "skip": True},
        {"id": "c", "input": "q", "agent": "https://host/agent"},
    ],
}
# Values that are wrong somewhere (or right) — each is tried at many places in the document.
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    "",
    "x y",
    "(",
    [],
    ["x"],
    [1],
    {},
    {"k": 1},
    "success",
    2,
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


@pytest.fixture(scope="module", params=[False, True], ids=["full", "lazy"])
def validators(request: pytest.FixtureRequest) -> tuple[Any, Draft202012Validator]:
    """The check compiled from the full schema, and from the lazy one the loader uses.

    The lazy schema looks each ``expect:`` check up as a document names it (issue 38).
    """
    registry = builtin_registry()
    schema = native_schema(registry)
    quick = compile_schema(native_schema(registry, lazy=request.param))
    assert quick is not None, "the native schema should compile"
    return quick, Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_base_document_is_valid(validators: tuple[Any, Draft202012Validator]) -> None:
    quick, full = validators
    assert list(full.iter_errors(BASE)) == []
    assert quick(BASE)


def test_agrees_with_jsonschema_on_mutations(validators: tuple[Any, Draft202012Validator]) -> None:
    quick, full = validators
    rng = random.Random(7)
    paths = _paths(BASE)
    tried = rejected = 0
    for path in paths:
        for value in ODD_VALUES:
            doc = _set(copy.deepcopy(BASE), path, value)
            valid = not list(full.iter_errors(doc))
            assert quick(doc) == valid, f"disagree at {path} = {value!r}"
            tried += 1
            rejected += not valid
    for _ in range(300):  # unknown keys at random mappings
        doc = copy.deepcopy(BASE)
        path = rng.choice([p for p in paths if isinstance(_get(doc, p), dict)])
        _get(doc, path)[rng.choice(["expct", "foo", "id2"])] = 1
        assert quick(doc) == (not list(full.iter_errors(doc))), (
            f"disagree with an extra key at {path}"
        )
    assert tried > 500 and rejected > 100


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def test_a_property_with_a_keyword_it_cannot_compile_is_left_to_jsonschema() -> None:
    """A property it cannot check, compiled when first seen, leaves the value to jsonschema."""
    quick = compile_schema(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"uniqueItems": True}},
            "additionalProperties": False,
        }
    )
    assert quick is not None
    assert quick({"a": "x"}) and not quick({"a": 1}) and not quick({"c": 1})
    assert not quick({"a": "x", "b": [1, 2]})  # not "invalid": jsonschema decides
