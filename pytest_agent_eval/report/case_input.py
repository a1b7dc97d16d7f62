"""What a record keeps of the case itself (SPEC §17): the agent's input and a content hash.

The input the agent is given, and a hash of the case's content that stays the same from run to run
and changes when the case (or a file default it takes) is edited.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.report.jsonable import JSON, c_encoder, jsonable

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case

_PLACE = frozenset({"path", "line", "agent_line", "agent_name"})
"""Fields that say where a case is or which matrix variant runs it, not what it is.

They are left out of the hash, so a case moved down its file keeps its hash.
"""
_UNSET_LEFT_OUT = frozenset({"inject", "expect_under_attack"})
"""Fields added after hashes were first kept.

They are left out while unset, so an unedited case keeps its hash.
"""
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def case_input(case: Case) -> JSON:
    """What the case gives the agent, bounded as every value in a report is.

    ``query`` (or the scripted ``turns``, or the ``simulated_user``) and the ``context``.
    """
    out: dict[str, Any] = {}
    if case.turns:
        out["turns"] = [turn.message for turn in case.turns]
    elif case.simulated_user is not None:
        out["simulated_user"] = _canonical(case.simulated_user)
    else:
        out["query"] = case.query
    if case.context:
        out["context"] = case.context
    return jsonable(out)


def content_hash(case: Case) -> str:
    """16 hex digits of the SHA-256 of the case's content, in a canonical form.

    The content is every field but where the case is. Computed once per case object (kept in the
    instance, :data:`_MEMO`): the verdict cache's key and the case's record both need it.
    """
    found: str | None = vars(case).get(_MEMO)
    if found is None:
        text = _text(case)
        found = vars(case)[_MEMO] = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return found


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
"""The hash's JSON form (as ``json.dumps(sort_keys=True, ensure_ascii=False, ...)`` writes it)."""


_C_ENCODER = c_encoder(_ENCODER)  # canonical data is a tree, made for the hash


def _encode(value: Any) -> str:
    """``_ENCODER.encode(value)``."""
    if _C_ENCODER is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def _text(value: Any) -> str:
    """``_ENCODER.encode(_canonical(value))``, written field by field for a dataclass.

    The same text, without building the canonical mapping: a field's name (in sorted order) and
    its value's text; a field at its class's default (the very object) as a text made once, the
    common values (``None``, text, numbers, an empty container) written directly.
    """
    kind = type(value)
    plan = _PLANS.get(kind)
    if plan is None:
        plan = _PLANS[kind] = _plan(kind)
    fields, values = plan
    if values is None:
        return _encode(_canonical(value))
    parts = []
    for (prefix, default, default_text, left_out), item in zip(fields, values(value), strict=True):
        if item is default and default_text is not None:
            if default_text:
                parts.append(default_text)
        elif item is None:
            if not left_out:
                parts.append(prefix + "null")
        else:
            item_kind = type(item)
            if item_kind is str:
                parts.append(prefix + _string(item))
            elif item_kind is bool:
                parts.append(prefix + ("true" if item else "false"))
            elif item_kind is int or (item_kind is float and math.isfinite(item)):
                parts.append(prefix + repr(item))  # as the encoder writes them (``__repr__``)
            elif (item_kind is dict or item_kind is list or item_kind is tuple) and not item:
                parts.append(prefix + ("{}" if item_kind is dict else "[]"))
            else:
                parts.append(prefix + _encode(_canonical(item)))
    return "{" + ",".join(parts) + "}"


_Field = tuple[str, Any, "str | None", bool]
"""A hashed field as ``_text`` writes it: its ``"name":`` prefix, its default, the text of the
field at that default (``""``: left out; ``None``: no default to tell), and whether ``None`` is
left out."""
_PLANS: dict[type, tuple[tuple[_Field, ...], Callable[[Any], tuple[Any, ...]] | None]] = {}
"""A dataclass's hashed fields as ``_text`` writes them, and the getter of their values."""
_NO_DEFAULT = object()


def _plan(kind: type) -> tuple[tuple[_Field, ...], Callable[[Any], tuple[Any, ...]] | None]:
    names, values = _FIELDS.get(kind) or _hashed_fields(kind)
    if values is None:
        return (), None
    defaults = {
        f.name: f.default for f in dataclasses.fields(kind) if f.default is not dataclasses.MISSING
    }
    fields = []
    for name in names:
        prefix, default = f'"{name}":', defaults.get(name, _NO_DEFAULT)
        left_out = name in _UNSET_LEFT_OUT
        if default is None:
            default_text: str | None = "" if left_out else prefix + "null"
        elif type(default) in _SCALARS or (type(default) is tuple and not default):
            default_text = prefix + _encode(_canonical(default))
        else:  # no default, or one whose text is not told by the object itself
            default, default_text = _NO_DEFAULT, None
        fields.append((prefix, default, default_text, left_out))
    return tuple(fields), values


_string: Callable[[str], str] = json.encoder.encode_basestring
"""A string's JSON text as ``_ENCODER`` writes it (``ensure_ascii=False``)."""


_MEMO = "_agent_eval_content_hash"
"""The instance attribute keeping a case's content hash once computed.

A collected case is not edited: the loader finishes it before its item exists, and every variant
(a matrix agent, an injection payload, a dataset row) is a new object made by
``dataclasses.replace``, which does not carry the attribute over (it is not a field).
"""


def _canonical(value: Any) -> Any:
    """``value`` as plain data for the hash.

    Dataclasses as their fields (without ``_PLACE``), no object addresses.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {
            str(key): item if type(item) in _SCALARS else _canonical(item)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [item if type(item) in _SCALARS else _canonical(item) for item in value]
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = _hashed_fields(kind)
    names, values = fields
    if values is not None:
        out: dict[str, Any] = {}
        for name, item in zip(names, values(value), strict=True):
            if item is None:
                if name not in _UNSET_LEFT_OUT:
                    out[name] = None
            else:
                out[name] = item if type(item) in _SCALARS else _canonical(item)
        return out
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Path):
        return value.as_posix()
    return _ADDRESS.sub("", repr(value))


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]] | None]] = {}
"""A dataclass's hashed field names and a getter of their values (in one tuple), by its class.

Found once per class; no getter for any other class (or a dataclass with no hashed field).
"""


def _hashed_fields(
    kind: type,
) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]] | None]:
    if not dataclasses.is_dataclass(kind):
        return (), None
    # in sorted order: as the encoder sorts a mapping's keys
    names = tuple(sorted(f.name for f in dataclasses.fields(kind) if f.name not in _PLACE))
    if not names:
        return (), None
    if len(names) == 1:
        return names, lambda value, name=names[0]: (getattr(value, name),)
    return names, operator.attrgetter(*names)
