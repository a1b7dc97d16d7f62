"""The contract of a file format (a dialect) and the registry the loader tries them from."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pytest_agent_eval.checks import CheckRegistry
    from pytest_agent_eval.core.case import LoadedFile
    from pytest_agent_eval.core.document import Document

Detect = Callable[[Any], "tuple[bool, str]"]
"""``detect(data) -> (fits, need)``: whether the parsed data has the format's shape.

If not, ``need`` says what it lacks (one short phrase, listed when no format fits).
"""
Load = Callable[["Document", "CheckRegistry"], "LoadedFile"]
"""``load(doc, checks) -> LoadedFile``: the file's cases.

A problem with one case makes that case an error case (``Case(id, path, line, error=...)``); a
problem with the file as a whole raises ``EvalFileError(s)``.
"""


class Dialect(NamedTuple):
    """A file format: ``detect`` says whether data has its shape, ``load`` reads it.

    ``detect`` also says what the data needs if it has not.

    A ``fallback`` format (the native one) fits broadly; a more specific format that also fits wins
    over it. Each built-in format is one module of ``pytest_agent_eval.cases.dialects`` with its
    ``DIALECT``.
    """

    name: str
    detect: Detect
    load: Load
    fallback: bool = False
    claims: Callable[[Path], bool] | None = None
    """Whether the file's name (or a file beside it) marks it as this format.

    Among several formats that fit its shape, the one that claims the file wins
    (``promptfooconfig.yaml``, a dataset with its sidecar).
    """
    yaml_core: bool = False
    """Whether the format's own tool reads YAML with the YAML 1.2 core schema (promptfoo: js-yaml).

    If so, its YAML files are then read that way (``Yes`` and ``on`` stay text), not with PyYAML's
    YAML 1.1 rules.
    """


class _Deferred:
    """A built-in format not imported yet: its module, and a quick test of whether data may fit."""

    __slots__ = ("may_fit", "module")

    def __init__(self, module: str, may_fit: Callable[[Any], bool]) -> None:
        self.module = module
        self.may_fit = may_fit


class DialectRegistry:
    """Formats by name, tried in registration order.

    Plugins add theirs via ``pytest_agent_eval_register_dialects``. A built-in format is registered
    by its module (:meth:`register_module`), imported when a file may have its shape.
    """

    def __init__(self) -> None:
        self._dialects: dict[str, Dialect | _Deferred] = {}

    def register(self, dialect: Dialect) -> None:
        self._dialects[dialect.name] = dialect

    def register_module(self, name: str, module: str, may_fit: Callable[[Any], bool]) -> None:
        """Add the format ``name``: the ``DIALECT`` of ``module``, imported when first needed.

        ``may_fit(data)`` is false only for data its ``detect`` rejects: the module loads for a
        file that may have its shape, not for every file.
        """
        self._dialects[name] = _Deferred(module, may_fit)

    def _dialect(self, name: str) -> Dialect:
        entry = self._dialects[name]
        if isinstance(entry, Dialect):
            return entry
        # __import__, not importlib.import_module: `python -X importtime` shows it
        dialect: Dialect = __import__(entry.module, fromlist=["DIALECT"]).DIALECT
        if self._dialects.get(name) is entry:
            self._dialects[name] = dialect
        return dialect

    def candidates(self, data: Any) -> list[Dialect]:
        """The formats that may fit ``data``, in order: the loaded ones and those whose test passes.

        Their ``detect`` decides.
        """
        return [
            self._dialect(name)
            for name, entry in list(self._dialects.items())
            if isinstance(entry, Dialect) or entry.may_fit(data)
        ]

    def __iter__(self) -> Iterator[Dialect]:
        return iter([self._dialect(name) for name in list(self._dialects)])

    def names(self) -> list[str]:
        return list(self._dialects)
