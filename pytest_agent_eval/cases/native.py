"""The native format (SPEC §3): ``cases:`` with ``input`` and ``expect``, plus file-level defaults."""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.document import Document, PathKey
from pytest_agent_eval.cases.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.cases.model import ID_RE, Case, EvalFile, Turn, slugify
from pytest_agent_eval.cases.schema import schema_errors
from pytest_agent_eval.checks import CheckRegistry

NAME = "native"
# Mapping fields whose defaults merge key by key with the case's own; other fields are replaced.
_MERGED = ("expect", "tool_mocks", "metadata", "weights", "context")


def detect(data: Any) -> tuple[bool, str]:
    """Native files are mappings with a ``cases`` list."""
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        return True, ""
    return False, "a mapping with a `cases:` list"


def load(doc: Document, registry: CheckRegistry) -> EvalFile:
    """Build the cases of a native file. File-level problems raise; a bad case becomes an error case."""
    data = doc.data
    case_errors: dict[int, list[EvalFileError]] = {}
    file_errors: list[EvalFileError] = []
    for key, err in schema_errors(doc, registry):
        if len(key) >= 2 and key[0] == "cases" and isinstance(key[1], int):
            case_errors.setdefault(key[1], []).append(err)
        else:
            file_errors.append(err)
    if file_errors:
        raise EvalFileErrors(file_errors)

    defaults: dict[str, Any] = data.get("defaults") or {}
    file_tags = list(data.get("tags") or []) + list(defaults.get("tags") or [])
    agent = data.get("agent")
    seen: dict[str, int] = {}
    cases: list[Case] = []
    for index, raw in enumerate(data["cases"]):
        where: PathKey = ("cases", index)
        line = doc.line(where)
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        explicit = isinstance(raw_id, str) and ID_RE.match(raw_id) is not None
        case_id = str(raw_id) if explicit else _derived_id(raw, index)
        if not explicit:  # derived ids are made unique; explicit duplicates are errors
            base, n = case_id, 2
            while case_id in seen:
                case_id, n = f"{base}-{n}", n + 1
        if index in case_errors:
            errs = case_errors[index]
            case = Case(id=case_id, path=doc.path, line=line, error="\n".join(e.format() for e in errs))
        else:
            case = _build(doc, raw, where, case_id, defaults, file_tags)
            case.agent = agent
            case.agent_line = doc.line(("agent",)) if agent else None
            case.tool_dispatch = data.get("tool_dispatch")
        if case.id in seen:
            first = seen[case.id]
            msg = f"duplicate case id {case.id!r} (first at line {first}); give each case a unique `id`"
            case = Case(
                id=f"{case.id}-line{line}", path=doc.path, line=line, error=EvalFileError(doc.path, line, msg).format()
            )
        seen.setdefault(case.id, line)
        cases.append(case)
    return EvalFile(doc.path, NAME, cases, name=data.get("name"), description=data.get("description"))


def _derived_id(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("description"), str):
        return slugify(raw["description"])
    return f"case-{index + 1}"


def _merge(defaults: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    out = {**defaults, **raw}
    for name in _MERGED:
        if isinstance(defaults.get(name), dict) and isinstance(raw.get(name), dict):
            out[name] = {**defaults[name], **raw[name]}
    return out


def _flag(value: Any, what: str) -> str | None:
    if value is True:
        return what
    return value if isinstance(value, str) and value else None


def _build(
    doc: Document, raw: dict[str, Any], key: PathKey, case_id: str, defaults: dict[str, Any], file_tags: list[str]
) -> Case:
    spec = _merge(defaults, raw)
    raw_input = spec.get("input", "")
    context = dict(spec.get("context") or {})
    if isinstance(raw_input, dict):
        query = raw_input["query"]
        context.update(raw_input.get("context") or {})
    else:
        query = raw_input
    expect = dict(spec.get("expect") or {})
    options = {k: expect.pop(k) for k in list(expect) if k == "case_sensitive"}
    turns = [
        Turn(t, {}, doc.line((*key, "turns", i)))
        if isinstance(t, str)
        else Turn(t["input"], dict(t.get("expect") or {}), doc.line((*key, "turns", i)))
        for i, t in enumerate(spec.get("turns") or [])
    ]
    tags = tuple(dict.fromkeys([*file_tags, *(raw.get("tags") or [])]))
    return Case(
        id=case_id,
        path=doc.path,
        line=doc.line(key),
        query=query,
        context=context,
        description=spec.get("description"),
        turns=turns,
        expect=expect,
        expect_options=options,
        tags=tags,
        timeout=spec.get("timeout"),
        repeat=spec.get("repeat", 1),
        min_pass_rate=spec.get("min_pass_rate", 1.0),
        min_score=spec.get("min_score"),
        weights=dict(spec.get("weights") or {}),
        tool_mocks=dict(spec.get("tool_mocks") or {}),
        unmocked_tools=spec.get("unmocked_tools"),
        skip=_flag(spec.get("skip"), "skipped in the eval file"),
        xfail=_flag(spec.get("xfail"), "expected to fail (eval file)"),
        metadata=dict(spec.get("metadata") or {}),
    )
