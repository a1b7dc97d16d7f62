"""Load an eval file: parse it, detect its format (dialect) and build its cases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.cases import trust
from pytest_agent_eval.cases.dialects import neon_shape
from pytest_agent_eval.cases.dialects.base import Dialect, DialectRegistry
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors, UnknownFormat
from pytest_agent_eval.core.files import JSON_SUFFIXES, JSONL_SUFFIXES

if TYPE_CHECKING:  # hashlib (OpenSSL): only a run with a parse cache imports it
    from pytest_agent_eval.core.parse_cache import ParseCache

# Dialect: its old home
__all__ = [
    "Dialect",
    "DialectRegistry",
    "builtin_dialects",
    "detect",
    "load_file",
    "read_and_detect",
]


def _cases_list(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("cases"), list)


def _no_cases(data: Any) -> bool:
    return isinstance(data, dict) and bool(data) and "cases" not in data


def _rows(data: Any) -> bool:
    return isinstance(data, list) and bool(data)


BUILTIN: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    ("native", _cases_list),
    ("neon_suite", lambda data: neon_shape.detect(data)[0]),
    ("golden_set", _rows),
    ("category_json", _no_cases),
    ("tool_routing", _rows),
    ("conversation_job", _no_cases),
    ("promptfoo", _no_cases),
    ("dataset_rows", _rows),
)
"""The built-in formats in the order they are tried, each with a quick test of its shape.

Each is the module of ``cases.dialects`` named as the format; its ``detect`` implies its test, and a
file imports only the formats whose test its data passes (a native file: the native one).
"""


def builtin_dialects() -> DialectRegistry:
    """The built-in dialects: the native format and the formats of existing eval setups.

    Those of existing eval setups (SPEC §12) and those users migrate with (§19).
    """
    registry = DialectRegistry()
    for name, may_fit in BUILTIN:
        registry.register_module(name, f"pytest_agent_eval.cases.dialects.{name}", may_fit)
    return registry


def detect(doc: Document, dialects: DialectRegistry) -> Dialect:
    """The one dialect whose shape ``doc`` has.

    Raise an error naming all of them when none or several fit.
    """
    fits: list[tuple[Dialect, str]] = []
    needs: list[tuple[Dialect, str]] = []
    for dialect in dialects.candidates(doc.data):
        ok, need = dialect.detect(doc.data)
        (fits if ok else needs).append((dialect, need))
    if not fits:  # every format's need, in order, for the message: they all load
        needs = [(dialect, dialect.detect(doc.data)[1]) for dialect in dialects]
    claimed = [d for d, _ in fits if d.claims is not None and d.claims(doc.path)]
    if len(claimed) == 1:
        return claimed[0]
    if len(fits) > 1 and not all(d.fallback for d, _ in fits):
        fits = [(d, need) for d, need in fits if not d.fallback]
    if len(fits) == 1:
        return fits[0][0]
    if not fits:
        wanted = "".join(f"\n  {d.name}: {need}" for d, need in needs)
        raise UnknownFormat(
            doc.path,
            1,
            f"not an eval file of any known format; compared with:{wanted}\n"
            "rename it so it does not match `agent_eval_files`, or give it one of these shapes "
            "(see docs/reference/formats.md)",
        )
    names = ", ".join(d.name for d, _ in fits)
    raise UnknownFormat(
        doc.path, 1, f"file fits several formats ({names}); make its shape unambiguous"
    )


def load_file(
    path: Path,
    checks: CheckRegistry,
    dialects: DialectRegistry,
    text: str | None = None,
    cache: ParseCache | None = None,
) -> LoadedFile:
    """Read ``path`` and build its cases.

    Raises EvalFileError(s) for problems with the file as a whole.
    """
    doc, dialect = read_and_detect(path, dialects, text, cache)
    return finish(doc, dialect.load(doc, checks))


def read_and_detect(
    path: Path, dialects: DialectRegistry, text: str | None = None, cache: ParseCache | None = None
) -> tuple[Document, Dialect]:
    """The file's data and its format.

    A YAML file of a format whose tool reads YAML 1.2 (promptfoo) is read again with the core
    schema, as that tool reads it (a key such as ``on:``, not a string under YAML 1.1, is then
    text).
    """
    yaml = path.suffix.lower() not in JSON_SUFFIXES + JSONL_SUFFIXES
    try:
        doc = read_document(path, text, cache)
    except EvalFileErrors:
        if not yaml:
            raise
        try:
            core = read_document(path, text, core=True)
            dialect = detect(core, dialects)
        except (EvalFileError, EvalFileErrors):
            dialect = None
        if dialect is None or not dialect.yaml_core:
            raise
        return core, dialect
    dialect = detect(doc, dialects)
    if yaml and dialect.yaml_core:
        doc = read_document(path, text, core=True)
    return doc, dialect


def finish(doc: Document, loaded: LoadedFile) -> LoadedFile:
    """The dialect's cases, bounded (SPEC §22).

    With one error case per JSON Line that is not JSON.
    """
    try:
        trust.check_count(len(loaded.cases), "the file")
    except trust.Refused as exc:
        raise EvalFileError(doc.path, 1, str(exc)) from None
    for error in doc.bad_lines:
        case_id = f"line-{error.line}"
        loaded.cases.append(
            Case(
                case_id,
                doc.path,
                error.line or 1,
                error=f"{error.format()} (case {case_id})",
                dialect=loaded.dialect,
            )
        )
    return loaded
