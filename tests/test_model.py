"""The data model's shared ``__repr__`` and ``__eq__`` behave as those ``dataclasses`` compiles.

Each class made with ``core.model.model`` is compared with a twin made by ``dataclasses`` from the
same fields: the same repr, the same equality and inequality field by field, unhashable alike.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from pytest_agent_eval.core.model import model

MODULES = (
    "pytest_agent_eval.checks.base",
    "pytest_agent_eval.core.case",
    "pytest_agent_eval.core.document",
    "pytest_agent_eval.core.results",
    "pytest_agent_eval.mocks.recording",
    "pytest_agent_eval.report.record",
    "pytest_agent_eval.run.settings",
)


def _models() -> list[type]:
    found = []
    for name in MODULES:
        for kind in vars(importlib.import_module(name)).values():
            if (
                isinstance(kind, type)
                and kind.__module__ == name
                and dataclasses.is_dataclass(kind)
                and kind.__repr__.__module__ == "pytest_agent_eval.core.model"
            ):
                found.append(kind)
    return found


MODELS = _models()


def test_the_data_model_is_made_with_model() -> None:
    """The classes every run loads are there (the comparisons below are not over an empty list)."""
    names = {kind.__name__ for kind in MODELS}
    assert {"Case", "CaseRecord", "RunRecord", "ToolCall", "CheckResult", "RunSettings"} <= names
    assert len(MODELS) == 17


def _twin(kind: type) -> type:
    """A dataclass of ``kind``'s fields, its methods compiled by ``dataclasses``."""
    fields = [
        (
            f.name,
            f.type,
            dataclasses.field(
                default=f.default,
                default_factory=f.default_factory,
                init=f.init,
                repr=f.repr,
                compare=f.compare,
            ),
        )
        for f in dataclasses.fields(kind)
    ]
    twin = dataclasses.make_dataclass(kind.__name__, fields)
    twin.__qualname__ = kind.__qualname__
    return twin


def _pair(kind: type) -> tuple[Any, Any]:
    """An instance of ``kind`` and of its twin, each field a distinct value."""
    values = {
        f.name: f"the {f.name}" for f in dataclasses.fields(kind) if f.init
    }  # every field set: no default or factory is relied on
    built = [cls(**values) for cls in (kind, _twin(kind))]
    return built[0], built[1]


@pytest.mark.parametrize("kind", MODELS, ids=lambda kind: kind.__name__)
def test_repr_and_eq_are_those_of_a_dataclass(kind: type) -> None:
    ours, twin = _pair(kind)
    assert repr(ours) == repr(twin)
    assert ours == dataclasses.replace(ours) and twin == dataclasses.replace(twin)
    assert ours != twin and twin != ours  # different classes, as for two dataclasses
    assert ours.__eq__(object()) is NotImplemented
    for f in dataclasses.fields(kind):
        if not f.init:
            continue
        other = object()
        assert (ours == dataclasses.replace(ours, **{f.name: other})) is (not f.compare)
        assert (twin == dataclasses.replace(twin, **{f.name: other})) is (not f.compare)
    with pytest.raises(TypeError):
        hash(ours)
    with pytest.raises(TypeError):
        hash(twin)


@pytest.mark.parametrize("kind", MODELS, ids=lambda kind: kind.__name__)
def test_a_repr_that_contains_itself(kind: type) -> None:
    ours, twin = _pair(kind)
    first = next(f.name for f in dataclasses.fields(kind) if f.repr)
    setattr(ours, first, ours)
    setattr(twin, first, twin)
    assert repr(ours) == repr(twin)
    assert f"{first}=..." in repr(ours)


def test_a_method_the_class_defines_stays() -> None:
    @model
    class Shown:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert repr(Shown("x")) == "<x>"
    assert Shown("x") == Shown("x") and Shown("x") != Shown("y")
