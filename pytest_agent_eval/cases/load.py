"""Load an eval file: parse it, detect its format (dialect) and build its cases."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agent_eval.cases import native
from pytest_agent_eval.cases.cache import ParseCache
from pytest_agent_eval.cases.dialects import category_json, conversation_job, golden_set, neon_suite, tool_routing
from pytest_agent_eval.cases.document import Document, read_document
from pytest_agent_eval.cases.errors import EvalFileError
from pytest_agent_eval.cases.model import EvalFile
from pytest_agent_eval.checks import CheckRegistry


@dataclass(frozen=True)
class Dialect:
    """A file format: ``detect`` says whether data has its shape (and what it needs if not); ``load`` reads it.

    A ``fallback`` format (the native one) fits broadly; a more specific format that also fits wins over it.
    """

    name: str
    detect: Callable[[Any], tuple[bool, str]]
    load: Callable[[Document, CheckRegistry], EvalFile]
    fallback: bool = False


class DialectRegistry:
    """Formats by name, tried in registration order. Plugins add theirs via ``pytest_agent_eval_register_dialects``."""

    def __init__(self) -> None:
        self._dialects: dict[str, Dialect] = {}

    def register(self, dialect: Dialect) -> None:
        self._dialects[dialect.name] = dialect

    def __iter__(self) -> Iterator[Dialect]:
        return iter(self._dialects.values())

    def names(self) -> list[str]:
        return list(self._dialects)


def builtin_dialects() -> DialectRegistry:
    """The native format and the formats of existing eval setups (SPEC §12)."""
    registry = DialectRegistry()
    registry.register(Dialect(native.NAME, native.detect, native.load, fallback=True))
    for module in (neon_suite, golden_set, category_json, tool_routing, conversation_job):
        registry.register(Dialect(module.NAME, module.detect, module.load))
    return registry


def detect(doc: Document, dialects: DialectRegistry) -> Dialect:
    """The one dialect whose shape ``doc`` has; an error naming all of them when none or several fit."""
    fits: list[tuple[Dialect, str]] = []
    needs: list[tuple[Dialect, str]] = []
    for dialect in dialects:
        ok, need = dialect.detect(doc.data)
        (fits if ok else needs).append((dialect, need))
    if len(fits) > 1 and not all(d.fallback for d, _ in fits):
        fits = [(d, need) for d, need in fits if not d.fallback]
    if len(fits) == 1:
        return fits[0][0]
    if not fits:
        wanted = "".join(f"\n  {d.name}: {need}" for d, need in needs)
        raise EvalFileError(
            doc.path,
            1,
            f"not an eval file of any known format; compared with:{wanted}\n"
            "rename it so it does not match `agent_eval_files`, or give it one of these shapes (see the README)",
        )
    names = ", ".join(d.name for d, _ in fits)
    raise EvalFileError(doc.path, 1, f"file fits several formats ({names}); make its shape unambiguous")


def load_file(
    path: Path,
    checks: CheckRegistry,
    dialects: DialectRegistry,
    text: str | None = None,
    cache: ParseCache | None = None,
) -> EvalFile:
    """Read ``path`` and build its cases. Raises EvalFileError(s) for problems with the file as a whole."""
    doc = read_document(path, text, cache)
    return detect(doc, dialects).load(doc, checks)
