"""Response forms of tool mocks: compiled once, checked with the file and line of a malformed one.

The forms: a literal, ``{return: x}``, ``{sequence: [...]}``, ``{raise: "Type: msg"}``,
``{when: [{args, return}], default: r}``, ``{call: "module:function"}``. Compiled by
:func:`compile_response`; the ini's responses file is read by :func:`load_responses`.
"""

from __future__ import annotations

import builtins
import copy
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from pytest_agent_eval.core.document import read_document
from pytest_agent_eval.core.errors import EvalFileError, did_you_mean
from pytest_agent_eval.core.tool_errors import MockConfigError, ToolMockError
from pytest_agent_eval.imports import ImportRefError, import_object

_FORM_KEYS = frozenset({"return", "sequence", "raise", "when", "default", "call"})
_RAISE_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(.*))?$", re.DOTALL)


@dataclass(frozen=True, eq=False)
class Value:
    """Answer with this value, a fresh copy per call.

    So an agent that mutates it cannot leak into other calls.
    """

    value: Any


@dataclass(frozen=True, eq=False)
class Raise:
    """Raise ``Type(message)`` for a builtin exception type, else :class:`ToolMockError`.

    The :class:`ToolMockError` has the whole text.
    """

    text: str

    def exception(self) -> Exception:
        match = _RAISE_RE.match(self.text)
        if match:
            kind = getattr(builtins, match.group(1), None)
            if isinstance(kind, type) and issubclass(kind, Exception):
                try:
                    return kind(match.group(2)) if match.group(2) is not None else kind()
                except TypeError:  # e.g. UnicodeDecodeError needs five arguments
                    pass
        return ToolMockError(self.text)


@dataclass(frozen=True, eq=False)
class Sequence:
    """One response per call, in order; once used up, further calls are unmocked calls."""

    items: tuple[Response, ...]


@dataclass(frozen=True, eq=False)
class When:
    """The first rule whose ``args`` are contained in the call's arguments answers.

    Contained: a nested subset match.
    """

    rules: tuple[tuple[dict[str, Any], Response], ...]
    default: Response | None = None


@dataclass(frozen=True, eq=False)
class Call:
    """Answer with ``func(**args)``."""

    ref: str
    func: Callable[..., Any]


# - a runtime alias, Python 3.10 compatible
Response = Union[Value, Raise, Sequence, When, Call]  # noqa: UP007


def compile_response(raw: Any, where: str, resolve: bool = True) -> Response:
    """Read one response form; raise :class:`MockConfigError` naming ``where`` when it is malformed.

    A mapping is a form when it has a form key (``return``, ``sequence``, ``raise``,
    ``when``/``default``, ``call``); any other value is returned as it is. ``{return: {...}}``
    returns a mapping that looks like a form. ``resolve=False`` checks the shape only: a ``call``
    target is not imported (validation of a file).
    """
    if not isinstance(raw, dict) or not raw.keys() & _FORM_KEYS:
        if isinstance(raw, dict) and len(raw) == 1:
            (key,) = raw
            close = difflib.get_close_matches(str(key), sorted(_FORM_KEYS), n=1, cutoff=0.8)
            if close:
                raise MockConfigError(
                    f"{where}: unknown response form {key!r} (did you mean {close[0]!r}?); "
                    "to answer with this mapping as it is, write {return: {...}}"
                )
        return Value(raw)
    keys = set(raw)
    if keys == {"return"}:
        return Value(raw["return"])
    if keys == {"sequence"}:
        items = raw["sequence"]
        if not isinstance(items, list) or not items:
            raise MockConfigError(
                f"{where}.sequence: expected a non-empty list of responses, got {items!r}"
            )
        return Sequence(
            tuple(
                compile_response(r, f"{where}.sequence[{i}]", resolve) for i, r in enumerate(items)
            )
        )
    if keys == {"raise"}:
        if not isinstance(raw["raise"], str) or not raw["raise"].strip():
            raise MockConfigError(
                f"{where}.raise: expected 'Type: message' (e.g. 'TimeoutError: upstream')"
            )
        return Raise(raw["raise"])
    if keys == {"call"}:
        ref = raw["call"]
        if not resolve and isinstance(ref, str) and ":" in ref:
            return Call(ref, _not_imported)
        try:
            func = import_object(ref) if isinstance(ref, str) else None
        except ImportRefError as exc:
            raise MockConfigError(f"{where}.call: {exc}") from None
        if not callable(func):
            raise MockConfigError(
                f"{where}.call: expected 'module:function' naming a callable, got {ref!r}"
            )
        return Call(ref, func)
    if "when" in keys and keys <= {"when", "default"}:
        return _compile_when(raw, where, resolve)
    unknown = sorted(str(k) for k in keys - _FORM_KEYS)
    if unknown:
        raise MockConfigError(
            f"{where}: unknown key {unknown[0]!r} in a response form"
            f"{did_you_mean(unknown[0], _FORM_KEYS)}; "
            "to answer with this mapping as it is, write {return: {...}}"
        )
    raise MockConfigError(
        f"{where}: a response mapping with keys {sorted(keys)} "
        "mixes or misuses the response forms; use one of "
        "{sequence: [...]}, {raise: 'Type: message'}, {when: [...], default: r}, "
        "{call: 'module:function'}, "
        "or {return: <value>} to answer with this mapping as it is"
    )


def _not_imported(**args: Any) -> Any:
    raise MockConfigError("a `call` response compiled for validation only")  # never answers a call


def _compile_when(raw: dict[str, Any], where: str, resolve: bool) -> When:
    rules = raw["when"]
    if not isinstance(rules, list) or not rules:
        raise MockConfigError(
            f"{where}.when: expected a non-empty list of {{args: {{...}}, return: r}} entries"
        )
    out = []
    for i, rule in enumerate(rules):
        here = f"{where}.when[{i}]"
        if (
            not isinstance(rule, dict)
            or set(rule) != {"args", "return"}
            or not isinstance(rule["args"], dict)
        ):
            odd = (
                sorted(str(k) for k in rule if k not in ("args", "return"))
                if isinstance(rule, dict)
                else []
            )
            hint = (
                f"; unknown key {odd[0]!r}{did_you_mean(odd[0], ('args', 'return'))}" if odd else ""
            )
            raise MockConfigError(
                f"{here}: expected {{args: {{...}}, return: r}}, got {rule!r}{hint}"
            )
        out.append((rule["args"], compile_response(rule["return"], f"{here}.return", resolve)))
    default = (
        compile_response(raw["default"], f"{where}.default", resolve) if "default" in raw else None
    )
    return When(tuple(out), default)


def load_responses(path: Path) -> dict[str, Response]:
    """Read a JSON/YAML file of ``{tool: response}`` (ini ``agent_eval_tool_responses``)."""
    if not path.is_file():
        raise MockConfigError(
            f"{path}: agent_eval_tool_responses names a file that does not exist "
            "(paths are relative to the rootdir)"
        )
    try:
        doc = read_document(path)
    except EvalFileError as exc:
        raise MockConfigError(f"{exc} (agent_eval_tool_responses)") from None
    if not isinstance(doc.data, dict):
        raise MockConfigError(
            f"{path}: agent_eval_tool_responses must hold a mapping of tool name to response"
        )
    return {
        str(name): compile_response(raw, f"{path}:{doc.line((name,))}: tool {name!r}")
        for name, raw in doc.data.items()
    }


def produce(response: Value | Raise | Call, args: dict[str, Any]) -> Any:
    """What a leaf response gives for a call with ``args``.

    A fresh copy of a value, a raise, a call's result.
    """
    if isinstance(response, Value):
        return copy.deepcopy(response.value)
    if isinstance(response, Raise):
        raise response.exception()
    return response.func(**args)
