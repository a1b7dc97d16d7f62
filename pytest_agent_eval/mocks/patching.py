"""Patching module attributes with stand-ins: ``module:attr`` and every module that imported the same object by
the same name, reference-counted so overlapping patches (a test's and one held for the session) share one
stand-in and the last one out restores the original.

One process-wide piece of state, ``_PATCHES``: module attributes are process-wide, so the record of who patched
them (and what to restore) must be too.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_agent_eval.faults import describe
from pytest_agent_eval.imports import ImportRefError, import_module, import_object
from pytest_agent_eval.mocks.errors import MockConfigError


@dataclass
class _Patch:
    """A stand-in installed at a module attribute and wherever that object was imported by the same name."""

    places: list[tuple[Any, str]]
    original: Any
    standin: Any
    dispatcher: bool
    count: int = 1
    held: int = 0
    """How many of ``count`` are held for the session (:class:`ToolMocks` with ``held``)."""


Key = tuple[int, str]
"""A patched attribute: ``(id(owner), name)``."""
_PATCHES: dict[Key, _Patch] = {}
_LOCK = threading.Lock()  # guards _PATCHES


def _owner(target: str) -> tuple[Any, str]:
    """The object holding the attribute named by ``module:attr`` (``attr`` may be dotted), and the last name."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise MockConfigError(f"{target!r} is not a 'module:attribute' reference (e.g. 'myproject.agent:dispatch')")
    parent, _, name = attr.rpartition(".")
    try:
        owner = import_object(f"{module_name}:{parent}") if parent else import_module(module_name)
    except ImportRefError as exc:
        raise MockConfigError(str(exc)) from None
    except Exception as exc:
        raise MockConfigError(f"cannot import module {module_name!r} for {target!r}: {describe(exc)}") from None
    if not hasattr(owner, name):
        raise MockConfigError(f"{target}: {module_name}{'.' + parent if parent else ''} has no attribute {name!r}")
    if inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, name)):
        raise MockConfigError(
            f"{target}: a method on a class cannot be patched this way; patch a module-level function, "
            "or wrap the tool where the agent is built (tool_mocks.wrap)"
        )
    return owner, name


def install(target: str, make: Callable[[Any], Any], dispatcher: bool, held: bool) -> tuple[Key, Any]:
    """Install ``make(original)`` at ``target`` (ref-counted: overlapping patches share one stand-in); the key to
    :func:`uninstall` it with, and the stand-in. ``held``: for the session (cases started early)."""
    owner, name = _owner(target)
    key = (id(owner), name)
    with _LOCK:
        patch = _PATCHES.get(key)
        if patch is not None:
            patch.count += 1
            patch.held += held
            return key, patch.standin
        original = getattr(owner, name)
        standin = make(original)
        places = [(owner, name)]
        if inspect.ismodule(owner):  # `from pkg.mod import dispatch_tool` elsewhere: patch those names too
            places += [(module, name) for module in _importers(name, original) if module is not owner]
        for place, attr in places:
            setattr(place, attr, standin)
        _PATCHES[key] = _Patch(places, original, standin, dispatcher, held=int(held))
        return key, standin


def patched_dispatchers() -> int:
    """Dispatchers patched for a running test (not only held for the session)."""
    with _LOCK:
        return sum(1 for patch in _PATCHES.values() if patch.dispatcher and patch.count > patch.held)


def _importers(name: str, obj: Any) -> list[Any]:
    """Loaded modules that hold ``obj`` under ``name``."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is obj:
            found.append(module)
    return found


def uninstall(key: Key, held: bool) -> None:
    """Undo one :func:`install`; the last one restores the original everywhere it was installed."""
    with _LOCK:
        patch = _PATCHES[key]
        patch.count -= 1
        patch.held -= held
        if patch.count:
            return
        del _PATCHES[key]
        for place, attr in patch.places:
            if getattr(place, attr, None) is patch.standin:  # leave later patches by others alone
                setattr(place, attr, patch.original)
