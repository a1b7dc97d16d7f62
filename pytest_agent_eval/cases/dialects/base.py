"""The contract of a file format (a dialect) and the registry the loader tries them from."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class Dialect:
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


class DialectRegistry:
    """Formats by name, tried in registration order.

    Plugins add theirs via ``pytest_agent_eval_register_dialects``.
    """

    def __init__(self) -> None:
        self._dialects: dict[str, Dialect] = {}

    def register(self, dialect: Dialect) -> None:
        self._dialects[dialect.name] = dialect

    def __iter__(self) -> Iterator[Dialect]:
        return iter(self._dialects.values())

    def names(self) -> list[str]:
        return list(self._dialects)
