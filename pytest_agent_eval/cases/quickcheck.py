"""A compiled yes/no JSON Schema check for our schemas' keywords, ~10x faster than jsonschema.

Collection validates every case; most are valid. This check answers "valid?" fast; when it says no,
jsonschema runs and produces the messages, so jsonschema stays the one source of errors. A schema
that uses a keyword this module does not know compiles to ``None`` and jsonschema does all the work;
a property's schema is compiled the first time a value has the property, and if it uses such a
keyword, every value with it is left to jsonschema.

Types are as in :data:`TYPE_CHECKER`: an eval file's ``integer`` is a whole number written without a
fraction (``2``, not ``2.0``) and a ``number`` is finite (not ``.nan`` or ``.inf``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

Validator = Callable[[Any], bool]
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "title", "description", "default", "examples", "$comment", "$defs"}
)
LAZY_PROPERTIES = "x-lazy-properties"
"""A key of our own, never in a schema we print: ``name -> schema | None``.

It gives the schema of a property that ``properties`` does not list, looked up the first time a
value has it (the native ``expect:`` checks: only the families a file names are loaded).
"""
_MAPPING = frozenset({"properties", "additionalProperties", "required", LAZY_PROPERTIES})
_ABSENT: Any = object()
_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)
}  # fmt: skip


def _finite_number(checker: Any, value: Any) -> bool:
    return _is_type(value, "number")


def _integer(checker: Any, value: Any) -> bool:
    return _is_type(value, "integer")


TYPE_CHECKS: dict[str, Callable[[Any, Any], bool]] = {"number": _finite_number, "integer": _integer}
"""Redefinitions of jsonschema's ``number`` and ``integer`` for eval files.

See the module docstring.
"""


class Unsupported(Exception):
    """The schema uses a keyword this module does not compile."""


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "number":
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if name == "integer":
        return isinstance(value, int)
    raise Unsupported(f"type {name}")


def _regex_ok(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        re.compile(value)
    except re.error:
        return False
    return True


def _all(checks: list[Validator]) -> Validator:
    """One check that passes when every one of ``checks`` passes.

    Written for the fewest calls at the common lengths.
    """
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda v: a(v) and b(v)
    first, *rest = checks

    def check_all(v: Any) -> bool:
        if not first(v):
            return False
        # - a loop is faster than all() over a generator, and this runs per value
        for c in rest:  # noqa: SIM110
            if not c(v):
                return False
        return True

    return check_all


def _never(value: Any) -> bool:
    return False


class _Compiler:
    def __init__(self, root: dict[str, Any]):
        self.defs: dict[str, Any] = root.get("$defs", {})
        self.compiled_defs: dict[str, Validator] = {}
        self.compiling: set[str] = set()

    def ref(self, ref: str) -> Validator:
        if not ref.startswith("#/$defs/"):
            raise Unsupported(ref)
        name = ref.removeprefix("#/$defs/")
        compiled = self.compiled_defs
        if name in self.compiling:  # a recursive definition: look it up when called
            return lambda v: compiled[name](v)
        if name not in compiled:
            self.compiling.add(name)
            compiled[name] = self.compile(self.defs[name])
            self.compiling.discard(name)
        return compiled[name]

    def compile(self, schema: Any) -> Validator:
        if schema is True:
            return lambda v: True
        if schema is False:
            return lambda v: False
        checks: list[Validator] = []
        skip = _ANNOTATIONS | _MAPPING
        if not _MAPPING.isdisjoint(schema):
            is_object = schema.get("type") == "object"
            checks.append(self.mapping(schema, is_object))
            if is_object:  # checked by the mapping check
                skip = skip | {"type"}
        for key, arg in schema.items():
            if key not in skip:
                checks.append(self.keyword(key, arg, schema))
        return _all(checks)

    def mapping(self, schema: dict[str, Any], is_object: bool) -> Validator:
        """``type: object``, properties, additionalProperties and required in one pass.

        Each property's schema is compiled the first time a value has it.
        """
        listed: dict[str, Any] = schema.get("properties", {})
        lazy: Callable[[str], Any] | None = schema.get(LAZY_PROPERTIES)
        props: dict[str, Validator] = {}
        additional = schema.get("additionalProperties", True)
        extra = None if additional is True else self.compile(additional)
        required = list(schema.get("required", ()))

        def first_sight(k: str) -> Validator | None:
            sub = listed.get(k, _ABSENT)
            if sub is _ABSENT:
                sub = lazy(k) if lazy is not None else None
                if sub is None:
                    return None
            try:
                compiled = self.compile(sub)
            except Unsupported:  # jsonschema decides every value with this property
                compiled = _never
            props[k] = compiled
            return compiled

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return not is_object
            for k, x in v.items():
                c = props.get(k) or first_sight(k)
                if c is None:
                    if extra is not None and not extra(x):
                        return False
                elif not c(x):
                    return False
            for r in required:  # noqa: SIM110 - as above
                if r not in v:
                    return False
            return True

        return check

    def keyword(self, key: str, arg: Any, schema: dict[str, Any]) -> Validator:
        if key == "type":
            names = [arg] if isinstance(arg, str) else list(arg)
            for n in names:
                _is_type(None, n)  # raises Unsupported for unknown names
            if all(n in _PY_TYPES for n in names) and "boolean" not in names:
                py = tuple(
                    _PY_TYPES[n] for n in names
                )  # bool is an int, but no listed type is numeric
                return lambda v: isinstance(v, py)
            return lambda v: any(_is_type(v, n) for n in names)
        if key == "items":
            item = self.compile(arg)

            def items(v: Any) -> bool:
                if isinstance(v, list):
                    for x in v:
                        if not item(x):
                            return False
                return True

            return items
        if key == "enum":
            allowed = list(arg)
            return lambda v: any(v == a and type(v) is type(a) for a in allowed)
        if key == "const":
            return lambda v: v == arg and type(v) is type(arg)
        if key == "pattern":
            rx = re.compile(arg)
            return lambda v: not isinstance(v, str) or rx.search(v) is not None
        if key == "format":
            return _regex_ok if arg == "regex" else (lambda v: True)
        if key == "minLength":
            return lambda v: not isinstance(v, str) or len(v) >= arg
        if key == "minProperties":
            return lambda v: not isinstance(v, dict) or len(v) >= arg
        if key == "propertyNames":
            name = self.compile(arg)
            return lambda v: not isinstance(v, dict) or all(name(k) for k in v)
        if key == "minItems":
            return lambda v: not isinstance(v, list) or len(v) >= arg
        if key == "maxItems":
            return lambda v: not isinstance(v, list) or len(v) <= arg
        numeric: dict[str, Callable[[Any], bool]] = {
            "minimum": lambda x: bool(x >= arg),
            "maximum": lambda x: bool(x <= arg),
            "exclusiveMinimum": lambda x: bool(x > arg),
            "exclusiveMaximum": lambda x: bool(x < arg),
        }
        if key in numeric:
            test = numeric[key]
            return lambda v: isinstance(v, bool) or not isinstance(v, (int, float)) or test(v)
        if key in ("anyOf", "oneOf", "allOf"):
            subs = [self.compile(s) for s in arg]
            if key == "anyOf":
                return lambda v: any(s(v) for s in subs)
            if key == "allOf":
                return lambda v: all(s(v) for s in subs)
            return lambda v: sum(1 for s in subs if s(v)) == 1
        if key == "not":
            sub = self.compile(arg)
            return lambda v: not sub(v)
        if key == "$ref":
            return self.ref(arg)
        raise Unsupported(key)


def compile_schema(schema: dict[str, Any]) -> Validator | None:
    """A fast ``valid?`` function for ``schema``; ``None`` if it uses keywords not compiled here."""
    try:
        return _Compiler(schema).compile(schema)
    except Unsupported:
        return None
