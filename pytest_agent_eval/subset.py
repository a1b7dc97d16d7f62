"""The nested subset match that a ``tool_args`` check and a tool mock's ``when:`` rule share.

Does a call's arguments contain what was written? Extra keys are allowed at every level, lists
compared item by item.
"""

from __future__ import annotations

from typing import Any


def mismatches(want: Any, got: Any, path: str) -> list[str]:
    """Where ``got`` does not contain ``want`` (nested subset match), one line per path."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected a mapping {want!r}, got {got!r}"]
        out: list[str] = []
        for k, v in want.items():
            if k not in got:
                out.append(f"{path}.{k}: missing (expected {v!r})")
            else:
                out.extend(mismatches(v, got[k], f"{path}.{k}"))
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: expected {want!r}, got {got!r}"]
        return [
            m
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for m in mismatches(w, g, f"{path}[{i}]")
        ]
    return [] if want == got else [f"{path}: expected {want!r}, got {got!r}"]


def exact_mismatches(want: Any, got: Any, path: str) -> list[str]:
    """Where ``got`` differs from ``want`` as data.

    Mappings compared key by key, whatever their order.
    """
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}.{k}: unexpected (got {got[k]!r})" for k in got if k not in want]
        for k, v in want.items():
            out.extend(
                [f"{path}.{k}: missing (expected {v!r})"]
                if k not in got
                else exact_mismatches(v, got[k], f"{path}.{k}")
            )
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [
            m
            for i, (w, g) in enumerate(zip(want, got, strict=True))
            for m in exact_mismatches(w, g, f"{path}[{i}]")
        ]
    if want == got and isinstance(want, bool) == isinstance(got, bool):  # True is not 1 here
        return []
    return [f"{path}: expected {want!r}, got {got!r}"]


def without_paths(args: Any, paths: list[str]) -> Any:
    """``args`` without the values at the dotted ``paths`` (``meta.trace_id``).

    A copy: ``args`` is left alone.
    """
    if not paths or not isinstance(args, dict):
        return args
    heads: dict[str, list[str]] = {}
    for path in paths:
        head, _, rest = path.partition(".")
        heads.setdefault(head, []).append(rest)
    out = {}
    for key, value in args.items():
        rests = heads.get(key)
        if rests is None:
            out[key] = value
        elif "" not in rests:  # a deeper path: keep the key, drop inside it
            out[key] = without_paths(value, rests)
    return out
