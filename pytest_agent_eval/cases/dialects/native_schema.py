"""The JSON Schema of the native format, built from the registered checks, and readable errors."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.cases import quickcheck
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.conversation_schema import (
    assertions_schema,
    score_schema,
    user_schema,
)
from pytest_agent_eval.core.document import Document, PathKey, pretty_path
from pytest_agent_eval.core.errors import EvalFileError, did_you_mean
from pytest_agent_eval.core.names import (
    AGENT_NAME_PATTERN,
    ID_PATTERN,
    TAG_PATTERN,
    TAG_RULE,
    UNMOCKED_MODES,
)

if (
    TYPE_CHECKING
):  # jsonschema is imported only to explain invalid data: the fast check answers the rest
    import jsonschema

SCHEMA_ID = "https://pytest-agent-eval.readthedocs.io/schema/native.json"
UNMOCKED = {"enum": list(UNMOCKED_MODES)}
_STR_LIST = {"type": "array", "items": {"type": "string"}}
_INPUTS = [{"required": ["input"]}, {"required": ["turns"]}, {"required": ["simulated_user"]}]
REFERENCE = {
    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    "description": "a reference answer, or facts, that the judge compares the answer with",
}
INJECT = {
    "type": "object",
    "description": (
        "one variant per payload of the corpus, the payload in this tool's mocked output (SPEC §26)"
    ),
    "properties": {
        "tool": {
            "type": "string",
            "minLength": 1,
            "description": "the mocked tool whose output carries it",
        },
        "corpus": {
            "type": "string",
            "minLength": 1,
            "description": "`builtin`, or a YAML file of payloads",
        },
        "where": {"enum": ["append", "field", "replace"]},
        "field": {
            "type": "string",
            "minLength": 1,
            "description": "with `where: field`: the dotted key",
        },
        "allowed_tools": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["tool"],
    "additionalProperties": False,
}
_TAGS = {"type": "array", "items": {"type": "string", "pattern": TAG_PATTERN}}


def expect_schema(registry: CheckRegistry, lazy: bool = False) -> dict[str, Any]:
    """The JSON Schema of ``expect:``: one property per check and per modifier.

    ``lazy`` (for :mod:`quickcheck` only): the checks are looked up by name as values name them,
    so that only the families a file uses are imported.
    """
    if lazy:
        return {
            "type": "object",
            quickcheck.LAZY_PROPERTIES: _check_schema(registry),
            "additionalProperties": False,
        }
    props = {spec.name: {**spec.schema, "description": spec.description} for spec in registry}
    props.update(registry.modifiers)
    return {"type": "object", "properties": props, "additionalProperties": False}


def _check_schema(registry: CheckRegistry) -> Callable[[str], dict[str, Any] | None]:
    """The schema of one ``expect:`` key as :func:`expect_schema` has it, or ``None``."""

    def schema(name: str) -> dict[str, Any] | None:
        if name in registry.modifiers:
            return registry.modifiers[name]
        if name in registry:
            spec = registry[name]
            return {**spec.schema, "description": spec.description}
        return None

    return schema


_REF: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": r"^[\w.]+:[\w.]+$", "description": "module:attribute"},
        {
            "type": "string",
            "pattern": "^https?://",
            "description": "an agent served over HTTP: its URL",
        },
        {
            "type": "object",
            "description": "an agent served over HTTP",
            "properties": {
                "url": {"type": "string", "pattern": "^https?://"},
                "headers": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "header values; ${NAME} takes environment variable NAME",
                },
                "body": {
                    "description": (
                        "the JSON body; {message}, {session}, {case_id}, {trial} in its strings"
                    )
                },
                "output": {
                    "type": "string",
                    "description": "dotted path of the answer in the JSON reply",
                },
                "session": {
                    "type": "object",
                    "properties": {
                        "from": {"type": "string", "description": "dotted path of the reply's id"}
                    },
                    "additionalProperties": False,
                },
                "timeout": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["url"],
            "additionalProperties": False,
        },
    ]
}


def case_properties(registry: CheckRegistry, lazy: bool = False) -> dict[str, Any]:
    expect = {"$ref": "#/$defs/expect"}
    assertions = assertions_schema({} if lazy else expect_schema(registry)["properties"])
    if lazy:
        assertions["items"][quickcheck.LAZY_PROPERTIES] = _check_schema(registry)
    return {
        "id": {"type": "string", "pattern": ID_PATTERN, "description": "unique within the file"},
        "description": {"type": "string"},
        "agent": {**_REF, "description": "this case's own agent: runs once, with it"},
        "input": {  # a string, or {query, context}
            "type": ["string", "object"],
            "properties": {"query": {"type": "string"}, "context": {"type": "object"}},
            "required": ["query"],
            "additionalProperties": False,
        },
        "context": {"type": "object"},
        "turns": {
            "type": "array",
            "minItems": 1,
            "items": {  # a message, or {input, expect}
                "type": ["string", "object"],
                "properties": {"input": {"type": "string"}, "expect": expect},
                "required": ["input"],
                "additionalProperties": False,
            },
        },
        "simulated_user": user_schema(),
        "assertions": assertions,
        "score": score_schema(),
        "expect": expect,
        "tags": _TAGS,
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "repeat": {
            "oneOf": [
                {"type": "integer", "minimum": 1},
                {
                    "type": "object",
                    "description": (
                        "adaptive trials: at most `max`, "
                        "stopped once the verdict of all `max` is known"
                    ),
                    "properties": {
                        "max": {"type": "integer", "minimum": 1},
                        "stop": {"enum": ["decided"]},
                    },
                    "required": ["max", "stop"],
                    "additionalProperties": False,
                },
            ]
        },
        "min_pass_rate": {"type": "number", "minimum": 0, "maximum": 1},
        "min_score": {"type": "number", "minimum": 0, "maximum": 1},
        "weights": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
        "tool_mocks": {"type": "object"},
        "unmocked_tools": UNMOCKED,
        "skip": {"type": ["string", "boolean"]},
        "xfail": {"type": ["string", "boolean"]},
        "metadata": {"type": "object"},
        "reference": REFERENCE,
        "inject": INJECT,
        "expect_under_attack": {
            **expect,
            "description": "the checks of the case's injection variants",
        },
    }


def native_schema(registry: CheckRegistry, lazy: bool = False) -> dict[str, Any]:
    """The JSON Schema of a native eval file, with one property per registered check.

    ``lazy``: the checks' schemas looked up as a file names them (see :func:`expect_schema`).
    """
    case_props = case_properties(registry, lazy)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "pytest-agent-eval file",
        "type": "object",
        "properties": {
            "$schema": {"type": "string", "description": "this schema, for editors (ignored)"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "agent": _REF,
            "agents": {
                "type": "object",
                "description": "a matrix: every case runs against each agent, as case[name]",
                "minProperties": 1,
                "propertyNames": {"pattern": AGENT_NAME_PATTERN},
                "additionalProperties": _REF,
            },
            "tool_dispatch": {"type": "string", "pattern": r"^[\w.]+:[\w.]+$"},
            "mcp_servers": {
                "type": "object",
                "description": "stand-in MCP servers the run provides: "
                "name -> {transport: stdio|http, tools: "
                "{name: {description, input_schema, response}}} (SPEC §28)",
            },
            "tags": _TAGS,
            "defaults": {
                "type": "object",
                "properties": {
                    k: v for k, v in case_props.items() if k not in ("id", "description", "agent")
                },
                "additionalProperties": False,
            },
            "cases": {"type": "array", "items": {"$ref": "#/$defs/case"}},
        },
        "required": ["cases"],
        "additionalProperties": False,
        "$defs": {
            "expect": expect_schema(registry, lazy),
            "case": {
                "type": "object",
                "properties": case_props,
                "anyOf": _INPUTS,
                "additionalProperties": False,
            },
        },
    }


@lru_cache(maxsize=8)
def _validator(registry: CheckRegistry, version: int) -> jsonschema.Draft202012Validator:
    """The validator of ``registry`` as of ``version`` (a conftest may register checks later)."""
    from jsonschema import Draft202012Validator, validators

    types = Draft202012Validator.TYPE_CHECKER.redefine_many(quickcheck.TYPE_CHECKS)
    validator = validators.extend(Draft202012Validator, type_checker=types)  # type: ignore[no-untyped-call]
    schema = native_schema(registry)
    return validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)  # type: ignore[no-any-return]


@lru_cache(maxsize=8)
def _quick(registry: CheckRegistry, version: int) -> quickcheck.Validator | None:
    return quickcheck.compile_schema(native_schema(registry, lazy=True))


def schema_errors(doc: Document, registry: CheckRegistry) -> list[tuple[PathKey, EvalFileError]]:
    """Every schema problem of ``doc``, as ``(path into the data, located error)``."""
    quick = _quick(registry, registry.version)
    if quick is not None and quick(doc.data):
        return []  # the common case, decided fast; jsonschema explains the rest
    out: list[tuple[PathKey, EvalFileError]] = []
    for err in _validator(registry, registry.version).iter_errors(doc.data):
        key: PathKey = tuple(err.absolute_path)
        out.extend(
            (k, EvalFileError(doc.path, doc.line(k), msg))
            for k, msg in _explain(err, key, registry)
        )
    out.sort(key=lambda pair: pair[1].line or 0)
    return out


def _explain(
    err: jsonschema.ValidationError, key: PathKey, registry: CheckRegistry
) -> list[tuple[PathKey, str]]:
    where = pretty_path(key)
    schema = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = list(schema.get("properties", {}))
        is_expect = "contains" in allowed and "tools_called" in allowed
        what = "unknown check" if is_expect else "unknown key"
        extra = [k for k in err.instance if k not in allowed]
        hint = (
            f"; known checks: {', '.join(sorted(registry.names()))}"
            if is_expect
            else f"; allowed keys: {', '.join(allowed)}"
        )
        return [
            ((*key, k), f"{what} {k!r} in {where}{did_you_mean(k, allowed) or hint}") for k in extra
        ]
    if err.validator == "anyOf" and schema.get("anyOf") == _INPUTS:
        return [
            (
                key,
                f"{where}: a case needs `input` (or `turns` / `simulated_user` for a conversation)",
            )
        ]
    if err.validator in ("oneOf", "anyOf") and err.context:
        branch = _branch_for(err)
        if (
            branch is not None
        ):  # the one form of this type (a mapping where a string is the other form): its errors
            found = [
                e
                for e in err.context
                if e.relative_schema_path and e.relative_schema_path[0] == branch
            ]
            return [part for e in found for part in _explain(e, tuple(e.absolute_path), registry)]
        if schema.get("anyOf") == _REF["anyOf"]:
            return [(key, f"{where}: {bounded(repr(err.instance))} is not an agent: {_REF_FORMS}")]
        from jsonschema.exceptions import best_match

        best = best_match(err.context)
        return [(key, f"{where}: {best.message}")]
    if (
        err.validator == "type"
        and isinstance(err.instance, float)
        and err.validator_value in ("number", "integer")
    ):
        what = (
            "a finite number"
            if err.validator_value == "number"
            else "a whole number without a fraction"
        )
        return [(key, f"{where}: {err.instance!r} is not {what}")]
    if err.validator == "pattern" and err.validator_value == ID_PATTERN:
        return [(key, f"{where}: {err.instance!r} is not an id: letters, digits, `_` and `-` only")]
    if err.validator == "pattern" and err.validator_value == TAG_PATTERN:
        return [(key, f"{where}: {err.instance!r} is not a tag: {TAG_RULE}")]
    return [(key, f"{where}: {bounded(err.message)}")]


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _admits(schema: Any, value: Any) -> bool:
    """Whether ``schema``'s ``type`` (if any) admits ``value``."""
    if not isinstance(schema, dict) or "type" not in schema:
        return True
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    for kind in kinds:
        if kind in ("number", "integer"):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif isinstance(value, _JSON_TYPES.get(kind, ())):
            return True
    return False


def _branch_for(err: jsonschema.ValidationError) -> int | None:
    """The one branch of a failed ``anyOf``/``oneOf`` whose type fits the value, if only one does.

    It is what the value was meant to be, so its errors ("unknown key 'header'") say what is wrong,
    not another branch's type.
    """
    branches = err.validator_value if isinstance(err.validator_value, list) else []
    fitting = [n for n, branch in enumerate(branches) if _admits(branch, err.instance)]
    return fitting[0] if len(fitting) == 1 else None


_REF_FORMS = (
    "give `module:attribute`, the agent's http(s) URL, or a mapping {"
    + ", ".join(_REF["anyOf"][2]["properties"])
    + "}"
)


def bounded(message: str, limit: int = 300) -> str:
    """``message`` cut to ``limit`` characters.

    jsonschema messages quote the whole invalid value.
    """
    return (
        message if len(message) <= limit else f"{message[:limit]}... ({len(message):,} characters)"
    )
