"""The native format (SPEC §3): ``cases:`` of ``input`` and ``expect``, plus file-level defaults."""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems
from pytest_agent_eval.cases.dialects.native_schema import schema_errors
from pytest_agent_eval.cases.fields import field_errors
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile, Turn
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.core.names import ID_RE, slugify

NAME = "native"
# Mapping fields whose defaults merge key by key with the case's own; other fields are replaced.
_MERGED = ("expect", "tool_mocks", "metadata", "weights", "context")


def detect(data: Any) -> tuple[bool, str]:
    """Native files are mappings with a ``cases`` list."""
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        return True, ""
    return False, "a mapping with a `cases:` list"


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """Build the cases of a native file.

    File-level problems raise; a bad case becomes an error case.
    """
    data = doc.data
    case_errors: dict[int, list[EvalFileError]] = {}
    file_errors: list[EvalFileError] = []
    found = [*schema_errors(doc, registry), *field_errors(doc, registry)]
    for key, err in sorted(found, key=lambda pair: pair[1].line or 0):
        if len(key) >= 2 and key[0] == "cases" and isinstance(key[1], int):
            case_errors.setdefault(key[1], []).append(err)
        else:
            file_errors.append(err)
    if file_errors:
        raise EvalFileErrors(file_errors)
    servers = {}
    if (
        "mcp_servers" in data
    ):  # stand-in MCP servers: their engine loads only for a file that declares some
        from pytest_agent_eval.mocks.mcp_standin import parse_servers

        servers = parse_servers(doc)

    defaults: dict[str, Any] = data.get("defaults") or {}
    file_tags = tuple(dict.fromkeys([*(data.get("tags") or ()), *(defaults.get("tags") or ())]))
    agent = data.get("agent")
    ids = Ids()
    cases: list[Case] = []
    for index, raw in enumerate(data["cases"]):
        where: PathKey = ("cases", index)
        line = doc.line(where)
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        duplicate = Problems(doc)
        if isinstance(raw_id, str) and ID_RE.match(raw_id) is not None:
            case_id = ids.claim(
                raw_id, line, duplicate, where
            )  # a repeat: a stand-in id and the problem
        else:
            case_id = ids.unique(_derived_id(raw, index), line)
        if duplicate:  # the case reports only that: its other problems come once its id is its own
            case = Case(id=case_id, path=doc.path, line=line, error=duplicate.text())
        elif index in case_errors:
            errs = case_errors[index]
            for err in errs:
                err.case_id = case_id
            case = Case(
                id=case_id, path=doc.path, line=line, error="\n".join(e.format() for e in errs)
            )
        else:
            case = _build(doc, raw, where, case_id, defaults, file_tags)
            if raw.get("agent"):
                case.agent, case.agent_line, case.own_agent = (
                    raw["agent"],
                    doc.line((*where, "agent")),
                    True,
                )
            else:
                case.agent = agent
                case.agent_line = doc.line(("agent",)) if agent else None
            case.tool_dispatch = data.get("tool_dispatch")
        cases.append(case)
    agents = {
        name: (ref, doc.line(("agents", name))) for name, ref in (data.get("agents") or {}).items()
    }
    return LoadedFile(
        doc.path,
        NAME,
        cases,
        name=data.get("name"),
        description=data.get("description"),
        agents=agents,
        mcp_servers=servers,
    )


def _derived_id(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("description"), str):
        return slugify(raw["description"])
    return f"case-{index + 1}"


def _merge(defaults: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    if not defaults:
        return raw
    out = {**defaults, **raw}
    for name in _MERGED:
        if isinstance(defaults.get(name), dict) and isinstance(raw.get(name), dict):
            out[name] = {**defaults[name], **raw[name]}
    return out


def _flag(value: Any, what: str) -> str | None:
    if value is True:
        return what
    return value if isinstance(value, str) and value else None


_NONE: dict[str, Any] = {}  # never mutated: shared by every case that lacks a mapping field

_OPTIONS = ("case_sensitive", "failed_calls")
"""``expect:`` keys that tune checks (the registry's modifiers), kept apart from the checks."""


def _build(
    doc: Document,
    raw: dict[str, Any],
    key: PathKey,
    case_id: str,
    defaults: dict[str, Any],
    file_tags: tuple[str, ...],
) -> Case:
    """The case from its (schema-valid) data.

    Mappings are the file's own, not copies: a Case is read-only.
    """
    spec = _merge(defaults, raw)
    get = spec.get
    raw_input = get("input", "")
    context = get("context") or _NONE
    if isinstance(raw_input, dict):
        query = raw_input["query"]
        if raw_input.get("context"):
            context = {**context, **raw_input["context"]}
    else:
        query = raw_input
    expect = get("expect") or _NONE
    options = _NONE
    if any(name in expect for name in _OPTIONS):  # they tune checks, are not ones
        expect = dict(expect)
        options = {name: expect.pop(name) for name in _OPTIONS if name in expect}
    turns = tuple(
        Turn(t, {}, doc.line((*key, "turns", i)))
        if isinstance(t, str)
        else Turn(t["input"], t.get("expect") or {}, doc.line((*key, "turns", i)))
        for i, t in enumerate(get("turns") or ())
    )
    user = get("simulated_user")
    simulated = None
    if user is not None:
        from pytest_agent_eval.core.conversation import from_native

        assertions = get("assertions") or []
        lines = [doc.line((*key, "assertions", i)) for i in range(len(assertions))]
        simulated = from_native(user, assertions, get("score") or {}, lines)
    repeat = get("repeat", 1)  # a count, or {max, stop: decided} (the schema has checked it)
    own_mocks = raw.get("tool_mocks") or _NONE
    inherited = tuple(name for name in defaults.get("tool_mocks") or _NONE if name not in own_mocks)
    own_tags = raw.get("tags")
    tags = tuple(dict.fromkeys([*file_tags, *own_tags])) if own_tags else file_tags
    return Case(
        id=case_id,
        path=doc.path,
        line=doc.line(key),
        query=query,
        context=context,
        description=get("description"),
        turns=turns,
        simulated_user=simulated,
        expect=expect,
        expect_options=options,
        tags=tags,
        timeout=get("timeout"),
        repeat=repeat["max"] if isinstance(repeat, dict) else repeat,
        stop_when_decided=isinstance(repeat, dict),
        min_pass_rate=get("min_pass_rate", 1.0),
        min_score=get("min_score"),
        weights=get("weights") or _NONE,
        tool_mocks=get("tool_mocks") or _NONE,
        inherited_mocks=inherited,
        unmocked_tools=get("unmocked_tools"),
        skip=_flag(get("skip"), "skipped in the eval file"),
        xfail=_flag(get("xfail"), "expected to fail (eval file)"),
        metadata=get("metadata") or _NONE,
        reference=get("reference"),
        inject=get("inject"),
        expect_under_attack=get("expect_under_attack"),
    )


DIALECT = Dialect(NAME, detect, load, fallback=True)
