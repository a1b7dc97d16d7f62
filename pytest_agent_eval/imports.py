"""Resolve ``module:attribute`` references, with errors that say what to fix."""

from __future__ import annotations

import importlib
from typing import Any


class ImportRefError(Exception):
    """A ``module:attribute`` reference that cannot be resolved."""


def import_object(ref: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted); raise :class:`ImportRefError` with the cause."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ImportRefError(f"{ref!r} is not a 'module:attribute' reference (e.g. 'myproject.agent:run')")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ImportRefError(
            f"cannot import module {module_name!r} for {ref!r}: {type(exc).__name__}: {exc}; "
            "check the module path and that it is importable from the rootdir (sys.path)"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportRefError(f"module {module_name!r} has no attribute {attr!r} (from {ref!r})") from None
    return obj
