"""Resolve ``module:attribute`` references, with errors that say what to fix.

A module that is not importable from ``sys.path`` is looked for in the rootdir (appended to
``sys.path`` when needed): ``agent: myproject.agents:run`` works under bare ``pytest``, as it does
under ``python -m pytest``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

_ROOTS: list[Path] = []
"""The rootdirs of the pytest sessions running (a pytester run inside a run adds its own)."""


class ImportRefError(Exception):
    """A ``module:attribute`` reference that cannot be resolved."""


def add_root(path: Path) -> None:
    """Look in ``path`` for modules not importable from ``sys.path``.

    Called when a session starts.
    """
    _ROOTS.append(path)


def remove_root(path: Path) -> None:
    """Stop looking in ``path`` (the session ends); what was imported from it stays imported."""
    if path in _ROOTS:
        _ROOTS.remove(path)


FRAMEWORK_EXTRAS = {
    "agents": "openai-agents",
    "pydantic_ai": "pydantic-ai",
    "langgraph": "langgraph",
    "langchain_core": "langgraph",
    "langchain_openai": "langgraph",
    "openai": "openai",
}
"""A missing top-level module an agent's framework installs -> the plugin's extra that installs it.
"""


def _missing_top_level(exc: ModuleNotFoundError, module_name: str) -> bool:
    """The module (or a package above it) is missing, not something the module itself imports."""
    parts = module_name.split(".")
    return exc.name in {".".join(parts[: n + 1]) for n in range(len(parts))}


def import_module(module_name: str) -> Any:
    """``importlib.import_module``, also looking in the rootdir.

    The rootdir is looked in for a module that sys.path does not have.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        roots = [str(r) for r in reversed(_ROOTS) if str(r) not in sys.path and r.is_dir()]
        if not roots or not _missing_top_level(exc, module_name):
            raise
    sys.path.append(roots[0])  # at the end: nothing installed is shadowed
    importlib.invalidate_caches()
    return importlib.import_module(module_name)


def _where(exc: Exception) -> str:
    """`` (at file:line)`` of the innermost frame of an error raised while the module ran.

    Else nothing.
    """
    if isinstance(exc, ModuleNotFoundError):
        return ""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")
    ]
    return (
        f" (at {frames[-1].filename}:{frames[-1].lineno})"
        if frames and frames[-1].filename != __file__
        else ""
    )


def import_object(ref: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted).

    Raises :class:`ImportRefError` with the cause.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ImportRefError(
            f"{ref!r} is not a 'module:attribute' reference (e.g. 'myproject.agent:run')"
        )
    error: ImportRefError | None = None
    try:
        obj: Any = import_module(module_name)
    except Exception as exc:
        extra = (
            FRAMEWORK_EXTRAS.get(getattr(exc, "name", None) or "")
            if isinstance(exc, ImportError)
            else None
        )
        advice = (
            f"the agent's framework is not installed: pip install 'pytest-agent-evalset[{extra}]'"
            if extra
            else "check the module path and that it is importable from the rootdir or sys.path"
        )
        error = ImportRefError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}{_where(exc)}; "
            f"{advice}"
        )
    if (
        error is not None
    ):  # raised outside `except`: no "During handling of the above exception" in reports
        raise error
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportRefError(f"module {module_name!r} has no attribute {attr!r} (from {ref!r})")
        obj = getattr(obj, part)
    return obj


_FILE_MODULES: dict[tuple[str, Path], ModuleType] = {}


def file_module(path: Path, prefix: str) -> ModuleType:
    """The ``.py`` file ``path`` run as a module.

    Once per path and ``prefix``; named ``<prefix><n>``.

    What a user declared as code (a promptfoo ``python:`` provider or assertion, a ``-p x.py``
    plugin): run only when asked for. ``FileNotFoundError`` when there is no such file; the module's
    own error as raised.
    """
    key = (prefix, path.resolve())
    module = _FILE_MODULES.get(key)
    if module is None:
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        spec = importlib.util.spec_from_file_location(f"{prefix}{len(_FILE_MODULES)}", path)
        assert (
            spec is not None and spec.loader is not None
        )  # a path ending in .py always has a source loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _FILE_MODULES[key] = module
    return module
