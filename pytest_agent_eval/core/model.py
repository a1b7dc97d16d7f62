"""The data model's decorator: dataclasses with a shared ``__repr__`` and ``__eq__``.

``dataclasses`` writes the source of each class's ``__init__``, ``__repr__`` and ``__eq__`` and
compiles it when the class's module loads. For the 17 classes every run loads (the case, its
results, the report records, the run settings) compiling ``__repr__`` and ``__eq__`` was 26 M
instructions of each start (about 2%, SPEC §27). ``@model`` makes the same dataclass (its fields,
``dataclasses.fields``/``replace``/``asdict``, its generated ``__init__`` and ``__match_args__``)
with the two functions below in place of the compiled ones: they read the class's fields and behave
as Python 3.11's generated methods do. Type checkers see ``dataclass`` itself.
"""

from __future__ import annotations

import dataclasses
import reprlib
from typing import TYPE_CHECKING, Any, TypeVar

T = TypeVar("T", bound=type)

_SHAPES: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}
"""Per class: the names of its fields in ``repr``, and those compared by ``==``."""


def _shape(cls: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    shape = _SHAPES.get(cls)
    if shape is None:
        fields = dataclasses.fields(cls)
        shape = _SHAPES[cls] = (
            tuple(f.name for f in fields if f.repr),
            tuple(f.name for f in fields if f.compare),
        )
    return shape


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    """As a dataclass's ``__repr__``: ``Name(field=value, ...)``, ``...`` for a repr in itself."""
    names = _shape(self.__class__)[0]
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: object) -> Any:
    """As a dataclass's ``__eq__``: the compared fields as tuples, for objects of one class."""
    if other.__class__ is self.__class__:
        names = _shape(self.__class__)[1]
        return tuple(getattr(self, name) for name in names) == tuple(
            getattr(other, name) for name in names
        )
    return NotImplemented


def _model(cls: T) -> T:
    """``@dataclass`` with the shared ``__repr__`` and ``__eq__``: unhashable, as ``eq=True``."""
    dataclasses.dataclass(repr=False, eq=False)(cls)  # the class itself, completed
    for name, method in (("__repr__", _repr), ("__eq__", _eq)):
        if name not in cls.__dict__:  # as ``dataclass``: a method the class defines stays
            setattr(cls, name, method)
    if "__hash__" not in cls.__dict__:
        cls.__hash__ = None  # type: ignore[assignment]
    return cls


__all__ = ["model"]

if TYPE_CHECKING:
    from dataclasses import dataclass as model
else:
    model = _model
