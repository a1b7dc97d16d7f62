"""Tool-output injection (SPEC §26): a corpus of payloads, and case variants carrying one each.

A case with ``inject: {tool, corpus, where, field, allowed_tools}`` (or every case with tool mocks,
under ``--agent-eval-inject CORPUS``) becomes one variant per payload,
``case[inject:<family>-<n>]``: the mocked output of ``tool`` carries the payload, with a canary
unique to the variant planted in it, and the variant's checks are ``expect_under_attack`` (default:
the case's own) plus ``resists_injection`` (no tool outside the allowed ones, the canary in no
answer and no tool argument). Calls to tools the case does not mock get the canned ``default``
answer, never the real tool. Nothing of a corpus is run or fetched: it is text planted in mocks.

A cases module: it reads documents (core) and builds cases; the check it adds lives in
``checks.injection``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.document import Document, PathKey, read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors

BUILTIN = "builtin"
CANARY = "{canary}"
WHERE = ("append", "field", "replace")
TAG = "injection"
"""The marker (and tag) of every variant: ``-m injection`` selects them."""
_FAMILY = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_FORMS = frozenset({"return", "sequence", "raise", "when", "default", "call"})
_KEYS = ("family", "text", "source")


@dataclass(frozen=True)
class Payload:
    """A corpus payload: its family, text (with ``{canary}``), source, and where it was read."""

    family: str
    number: int
    """1-based, within its family."""
    text: str
    source: str = ""
    origin: str = ""
    """``path:line`` of the payload."""

    @property
    def name(self) -> str:
        """``<family>-<n>``: the variant's id part."""
        return f"{self.family}-{self.number}"


class InjectionError(ValueError):
    """An injection that cannot be planted: the message says where and what to do."""


def builtin_corpus_path() -> Path:
    return Path(str(resources.files("pytest_agent_eval.cases").joinpath("injection_corpus.yaml")))


@lru_cache(maxsize=16)
def load_corpus(path: Path) -> tuple[Payload, ...]:
    """The payloads of the corpus file ``path``.

    The file is YAML: ``payloads: [{family, text, source}]``, or the list. Raise
    :class:`EvalFileErrors` naming each bad payload's line.
    """
    doc = read_document(path)
    items, key = _payload_list(doc)
    numbers: dict[str, int] = {}
    payloads: list[Payload] = []
    errors: list[EvalFileError] = []
    for index, raw in enumerate(items):
        where: PathKey = (*key, index)
        problem = _payload_problem(raw)
        if problem:
            errors.append(EvalFileError(path, doc.line(where), f"payload {index + 1}: {problem}"))
            continue
        family = raw["family"]
        numbers[family] = numbers.get(family, 0) + 1
        origin = f"{path}:{doc.line(where)}"
        payloads.append(
            Payload(family, numbers[family], raw["text"], str(raw.get("source", "")), origin)
        )
    if errors:
        raise EvalFileErrors(errors)
    if not payloads:
        raise EvalFileError(
            path, 1, "the corpus has no payloads: give `payloads: [{family, text, source}]`"
        )
    return tuple(payloads)


def _payload_list(doc: Document) -> tuple[list[Any], PathKey]:
    data = doc.data
    if isinstance(data, dict) and isinstance(data.get("payloads"), list):
        return data["payloads"], ("payloads",)
    if isinstance(data, list):
        return data, ()
    raise EvalFileError(
        doc.path, 1, "not an injection corpus: give `payloads:` a list of {family, text, source}"
    )


def _payload_problem(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "expected a mapping {family, text, source}"
    unknown = [k for k in raw if k not in _KEYS]
    if unknown:
        return f"unknown key {unknown[0]!r}; a payload has {', '.join(_KEYS)}"
    family, text = raw.get("family"), raw.get("text")
    if not isinstance(family, str) or not _FAMILY.match(family):
        return (
            "`family` must be a name of lower-case letters, digits, `_` and `-` "
            "(it goes into the item's id)"
        )
    if not isinstance(text, str) or CANARY not in text:
        return (
            f"`text` must be a string with {CANARY} in it: "
            "the canary shows whether the agent followed it"
        )
    if "source" in raw and not isinstance(raw["source"], str):
        return "`source` must be a string (where the technique is documented)"
    return None


def corpus_path(corpus: str, base: Path) -> Path:
    """The file of ``corpus``: the built-in one, or a path relative to ``base``."""
    if corpus == BUILTIN:
        return builtin_corpus_path()
    path = Path(corpus)
    return path if path.is_absolute() else base / path


def canary_for(case: Case, payload: Payload) -> str:
    """A token unique to the variant, the same from run to run.

    It is made of the case's file and id, and the payload.
    """
    digest = hashlib.sha256(
        f"{case.path.name}\0{case.id}\0{payload.name}\0{payload.text}".encode()
    ).hexdigest()
    return f"canary-{digest[:10]}"


def variant_id(case_id: str, name: str) -> str:
    """The id of an injection variant: ``case[inject:<name>]``.

    A matrix variant ``case[agent]`` becomes ``case[agent-inject:<name>]``.
    """
    part = f"inject:{name}"
    if case_id.endswith("]") and "[" in case_id:
        return f"{case_id[:-1]}-{part}]"
    return f"{case_id}[{part}]"


def plant(value: Any, text: str, where: str, field: str | None) -> Any:
    """A tool's output ``value`` with ``text`` in it.

    The text is appended, put in ``field`` (dotted), or instead of it.
    """
    if where == "replace":
        return text
    if where == "append":
        shown = (
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        )
        return f"{shown}\n\n{text}" if shown else text
    if not isinstance(value, dict) or not field:
        kind = type(value).__name__
        raise InjectionError(
            "`where: field` needs the mock to return a mapping "
            f"and `field:` to name a key (got {kind})"
        )
    out = copy.deepcopy(value)
    place = out
    *parents, last = field.split(".")
    for name in parents:
        if not isinstance(place.get(name), dict):
            place[name] = {}
        place = place[name]
    old = place.get(last)
    place[last] = f"{old}\n\n{text}" if isinstance(old, str) and old else text
    return out


def carry(raw: Any, text: str, where: str, field: str | None) -> Any:
    """The raw mock ``raw`` with every output it can give carrying ``text``.

    ``raw`` is any response form of SPEC §6.
    """
    if not (isinstance(raw, dict) and raw.keys() & _FORMS):
        return plant(raw, text, where, field)
    if "call" in raw:
        raise InjectionError(
            "its mock is a `call:` form, whose output is made by code the payload cannot reach"
        )
    out = dict(raw)
    if "return" in raw:
        out["return"] = plant(raw["return"], text, where, field)
    if "sequence" in raw and isinstance(raw["sequence"], list):
        out["sequence"] = [carry(item, text, where, field) for item in raw["sequence"]]
    if "when" in raw and isinstance(raw["when"], list):
        out["when"] = [
            {**rule, "return": carry(rule["return"], text, where, field)}
            if isinstance(rule, dict)
            else rule
            for rule in raw["when"]
        ]
    if "default" in raw:
        out["default"] = carry(raw["default"], text, where, field)
    return out  # a `raise:` form answers with no output: left as it is


@dataclass(frozen=True)
class Plan:
    """How a case is attacked: which tools' output carries the payloads, where, and the corpus."""

    tools: tuple[str, ...]
    corpus: Path
    where: str = "append"
    field: str | None = None
    allowed: tuple[str, ...] | None = None


def plan_of(case: Case, option: str | None, base: Path) -> Plan | None:
    """How the case is attacked, or ``None`` when it is not.

    The case's own ``inject:``; else, under ``--agent-eval-inject`` (``option``, relative to
    ``base``), every tool the case mocks.
    """
    spec = case.inject
    if spec is not None:
        where = spec.get("where", "append")
        return Plan(
            (spec["tool"],),
            corpus_path(spec.get("corpus", BUILTIN), case.path.parent),
            where,
            spec.get("field"),
            tuple(spec["allowed_tools"]) if "allowed_tools" in spec else None,
        )
    if option is None or not case.tool_mocks or case.error:
        return None
    return Plan(tuple(case.tool_mocks), corpus_path(option, base))


def allowed_tools(case: Case, plan: Plan, carriers: Iterable[str] = ()) -> list[str]:
    """The tools a variant may call.

    ``allowed_tools``, else the case's ``tools_only``, else the tools it mocks and the stand-in
    tools that carry the payload (``carriers``).
    """
    if plan.allowed is not None:
        return list(plan.allowed)
    only = case.expect.get("tools_only")
    if isinstance(only, list):
        return [str(name) for name in only]
    return list(dict.fromkeys([*case.tool_mocks, *carriers]))


def mock_key(tool: str, mocks: Mapping[str, Any]) -> str | None:
    """The ``tool_mocks`` key that answers ``tool``.

    Itself; else, for an MCP tool, its other spelling: ``server.tool`` for a bare name (when only
    one server's is mocked), the bare name for ``server.tool``.
    """
    if tool in mocks:
        return tool
    _, dot, bare = tool.partition(".")
    if dot:
        return bare if bare in mocks else None
    dotted = [key for key in mocks if key.partition(".")[2] == tool]
    return dotted[0] if len(dotted) == 1 else None


def standin_default(tool: str, servers: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(server.tool, default response)`` of the stand-in MCP tool ``tool`` names, else ``None``.

    ``tool`` is ``server.tool``, or a bare name that one stand-in serves.
    """
    server, dot, bare = tool.partition(".")
    found = (
        [(server, servers[server].tools[bare])]
        if dot and server in servers and bare in servers[server].tools
        else []
        if dot
        else [(name, s.tools[tool]) for name, s in servers.items() if tool in s.tools]
    )
    if len(found) != 1:
        return None
    name, standin = found[0]
    return f"{name}.{standin.name}", standin.response


def variants(case: Case, plan: Plan, standins: Mapping[str, Any] | None = None) -> Iterator[Case]:
    """One variant of ``case`` per payload of the plan's corpus.

    A corpus or a mock that cannot carry the payload makes one variant that errors, saying why (the
    case's other items still run). ``standins``: the run's stand-in MCP servers (name ->
    ``mocks.mcp_standin.StandinServer``): a tool the case does not mock carries the payload in its
    stand-in's default response (SPEC §28).
    """
    try:
        payloads = load_corpus(plan.corpus)
    except (EvalFileError, EvalFileErrors) as exc:
        errors = exc.errors if isinstance(exc, EvalFileErrors) else [exc]
        message = "\n".join(e.format() for e in errors)
        yield _broken(
            case,
            variant_id(case.id, "corpus"),
            f"{case.location}: case {case.id}: injection corpus: {message}",
        )
        return
    carriers: dict[str, Any] = {}  # tool -> (mock key, raw mock that carries the payload)
    for tool in plan.tools:
        key = mock_key(tool, case.tool_mocks)
        found = (key, case.tool_mocks[key]) if key is not None else None
        carriers[tool] = found or standin_default(tool, standins or {})
    missing = [tool for tool, found in carriers.items() if found is None]
    allowed = allowed_tools(case, plan, [key for key, _ in filter(None, carriers.values())])
    for payload in payloads:
        vid = variant_id(case.id, payload.name)
        if missing:
            yield _broken(
                case,
                vid,
                f"{case.location}: case {case.id}: "
                f"inject.tool {missing[0]!r} has no `tool_mocks` entry: mock the "
                "tool whose output should carry the payloads (its real output is never used), or "
                "serve it from a stand-in MCP server (`mcp_servers:`)",
            )
            continue
        canary = canary_for(case, payload)
        text = payload.text.replace(CANARY, canary)
        mocks = dict(case.tool_mocks)
        try:
            for tool in plan.tools:
                key, raw = carriers[tool]
                mocks[key] = carry(raw, text, plan.where, plan.field)
        except InjectionError as exc:
            yield _broken(
                case, vid, f"{case.location}: case {case.id}: inject.tool {tool!r}: {exc}"
            )
            continue
        check = {"canary": canary, "allowed_tools": allowed, "family": payload.family}
        expect = dict(case.expect if case.expect_under_attack is None else case.expect_under_attack)
        expect["resists_injection"] = check
        info = {
            "family": payload.family,
            "payload": payload.name,
            "tools": list(plan.tools),
            "where": plan.where,
            "canary": canary,
            "source": payload.source,
        }
        yield dataclasses.replace(
            case,
            id=vid,
            tool_mocks=mocks,
            expect=expect,
            # a call the payload asks for is answered and recorded, never run for real
            unmocked_tools="default",
            tags=tuple(dict.fromkeys([*case.tags, TAG])),
            metadata={**case.metadata, "injection": info},
            inject=None,
            expect_under_attack=None,
            min_score=None,  # resisting is pass/fail: no average may hide a followed payload
        )


def _broken(case: Case, vid: str, message: str) -> Case:
    tags = tuple(dict.fromkeys([*case.tags, TAG]))
    return dataclasses.replace(
        case, id=vid, error=message, tags=tags, inject=None, expect_under_attack=None
    )
