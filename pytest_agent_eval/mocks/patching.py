"""Patching module attributes with stand-ins, reference-counted so that patches can overlap.

A patch covers ``module:attr`` and every module that imported the same object by the same name; with
the reference counts, overlapping patches (a test's and one held for the session) share one stand-in
and the last one out restores the original.

One process-wide piece of state, ``_PATCHES``: module attributes are process-wide, so the record of
who patched them (and what to restore) must be too.
"""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pytest_agent_eval.core.tool_errors import MockConfigError
from pytest_agent_eval.faults import describe
from pytest_agent_eval.imports import ImportRefError, import_module, import_object
from pytest_agent_eval.mocks.standins import answers_for


@dataclass
class _Patch:
    """A stand-in installed at a module attribute and wherever that object was imported.

    That is, imported by the same name.
    """

    target: str
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
    """The object holding the attribute named by ``module:attr``, and the last name.

    ``attr`` may be dotted.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise MockConfigError(
            f"{target!r} is not a 'module:attribute' reference (e.g. 'myproject.agent:dispatch')"
        )
    parent, _, name = attr.rpartition(".")
    try:
        owner = import_object(f"{module_name}:{parent}") if parent else import_module(module_name)
    except ImportRefError as exc:
        raise MockConfigError(str(exc)) from None
    except Exception as exc:
        raise MockConfigError(
            f"cannot import module {module_name!r} for {target!r}: {describe(exc)}"
        ) from None
    if not hasattr(owner, name):
        raise MockConfigError(
            f"{target}: {module_name}{'.' + parent if parent else ''} has no attribute {name!r}"
        )
    if inspect.isclass(owner) and inspect.isfunction(inspect.getattr_static(owner, name)):
        raise MockConfigError(
            f"{target}: a method on a class cannot be patched this way; "
            "patch a module-level function, "
            "or wrap the tool where the agent is built (tool_mocks.wrap)"
        )
    return owner, name


def install(
    target: str, make: Callable[[Any], Any], dispatcher: bool, held: bool
) -> tuple[Key, Any]:
    """Install ``make(original)`` at ``target``; the key to :func:`uninstall` it, and the stand-in.

    Ref-counted: overlapping patches share one stand-in. ``held``: for the session (cases started
    early).
    """
    owner, name = _owner(target)
    key: Key = (id(owner), name)
    with _LOCK:
        patch = _PATCHES.get(key)
        if patch is not None:
            patch.count += 1
            patch.held += held
            return key, patch.standin
        original = getattr(owner, name)
        standin = make(original)
        places = [(owner, name)]
        if inspect.ismodule(
            owner
        ):  # `from pkg.mod import dispatch_tool` elsewhere: patch those names too
            places += [
                (module, name) for module in _importers(name, original) if module is not owner
            ]
        for place, attr in places:
            setattr(place, attr, standin)
        _PATCHES[key] = _Patch(target, places, original, standin, dispatcher, held=int(held))
        return key, standin


def key_of(target: str) -> Key:
    """The key of the attribute ``module:attr`` names."""
    owner, name = _owner(target)
    return id(owner), name


def patched_target(key: Key) -> str:
    """The ``module:attr`` the stand-in at ``key`` was installed for (its first patch's)."""
    with _LOCK:
        return _PATCHES[key].target


def patched_dispatchers() -> int:
    """Dispatchers patched for a running test (not only held for the session)."""
    with _LOCK:
        return sum(
            1 for patch in _PATCHES.values() if patch.dispatcher and patch.count > patch.held
        )


def _importers(name: str, obj: Any) -> list[Any]:
    """Loaded modules that hold ``obj`` under ``name``."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is obj:
            found.append(module)
    return found


class Holder(NamedTuple):
    """Where a module holds an object.

    That is ``module.attr`` (``key`` None) or the item ``key`` of ``module.attr``.
    """

    module: str
    attr: str
    key: Any = None
    container: str = ""
    """``dict``, ``list``, ``tuple``… when ``key`` is set."""

    def __str__(self) -> str:
        return f"{self.module}.{self.attr}" + (f"[{self.key!r}]" if self.container else "")


class Unreached(NamedTuple):
    """References to a patched original that the patch did not replace.

    A call through them runs the real tool.
    """

    target: str
    """The patch, ``module:attr``."""
    dispatcher: bool
    places: list[Holder]
    """Places a loaded module names: ``module.attr``, ``module.attr[key]``."""
    others: list[str]
    """Other holders, by kind (``a closure variable``, ``a dict``): reachable, but not by a name."""


def unreached(tool: str) -> list[Unreached]:
    """The references to the real function that the patches standing in for ``tool`` missed.

    The patches are the tool's own, or a dispatcher's; the references are found in loaded modules
    and, unnamed, through the garbage collector.

    Slow (it reads every module and asks the collector): for a failure message only.
    """
    with _LOCK:
        patches = [p for p in _PATCHES.values() if p.dispatcher or answers_for(p.standin, tool)]
    found = []
    for patch in patches:
        places = _holders(patch.original)
        others = _other_holders(patch, places)
        if places or others:
            found.append(Unreached(patch.target, patch.dispatcher, places, others))
    return found


def _holders(obj: Any) -> list[Holder]:
    """Where loaded modules hold ``obj``.

    As an attribute, or as an item of a dict, list or tuple attribute.
    """
    found: list[Holder] = []
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            # a module's odd object (a lazy proxy, a dict subclass) must not break a failure message
            try:
                found.extend(_held_by(obj, value, name, attr))
            except Exception:  # not a holder we can read: left unnamed
                continue
    return found


def _held_by(obj: Any, value: Any, module: str, attr: str) -> list[Holder]:
    if value is obj:
        return [Holder(module, attr)]
    if isinstance(value, dict):
        return [Holder(module, attr, k, "dict") for k, v in list(value.items()) if v is obj]
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return [Holder(module, attr, i, kind) for i, v in enumerate(list(value)) if v is obj]
    return []


def _other_holders(patch: _Patch, named: list[Holder]) -> list[str]:
    """What else holds ``patch.original``, by kind.

    Not a module (:func:`_holders` names those), not this patch and its stand-in, not a running
    frame.
    """
    ours = {
        id(patch),
        id(vars(patch)),
        id(getattr(patch.standin, "__dict__", None)),
    }  # vars: Python < 3.11
    ours.update(id(cell) for cell in getattr(patch.standin, "__closure__", None) or ())
    ours.update(id(getattr(sys.modules.get(h.module), h.attr, None)) for h in named if h.container)
    modules = {id(getattr(module, "__dict__", None)) for module in list(sys.modules.values())}
    kinds = {
        types.CellType: "a closure variable",
        dict: "a dict",
        list: "a list",
        tuple: "a tuple",
        set: "a set",
    }
    out = []
    for referrer in gc.get_referrers(patch.original):
        if id(referrer) in ours or id(referrer) in modules or isinstance(referrer, types.FrameType):
            continue
        kind = next((what for cls, what in kinds.items() if isinstance(referrer, cls)), None)
        out.append(kind or f"an object of type {type(referrer).__name__}")
    return out


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
