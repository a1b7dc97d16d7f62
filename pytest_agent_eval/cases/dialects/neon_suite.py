"""Neon suite YAML (SPEC §12): ``name``, ``agent_id``, ``default_*`` and ``cases``.

The cases are scored by named scorers. Each scorer becomes the registered check of the same name; a
case passes when the agent did not fail and the mean of its scored scorers reaches ``min_score``
(the case's, else ``default_min_score``, else 0.7).
"""

from __future__ import annotations

from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems, build_case, is_str_list, pretty
from pytest_agent_eval.cases.dialects.neon_shape import CASE_KEYS, SUITE_KEYS, detect
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.checks.scorers import DEFAULT_MIN_SCORE
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.errors import EvalFileErrors, did_you_mean

NAME = "neon_suite"
SCORERS = ("tool_selection", "reasoning", "grounding", "efficiency", "custom")
DEFAULT_SCORERS = ("tool_selection", "reasoning")
"""Neon's scorers for a case when neither it nor the suite names any."""
# What each scorer's check takes from the case's scorer_config (the rest is kept in metadata).
_CONFIG_KEYS = {
    "reasoning": ("require_steps", "min_steps"),
    "efficiency": ("max_tool_calls", "target_latency_s"),
}


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """Build the cases of a suite. Suite-level problems raise; a bad case becomes an error case."""
    data: dict[str, Any] = doc.data
    suite = _suite(doc, data)
    ids = Ids()
    cases: list[Case] = []
    for index, raw in enumerate(data["cases"]):
        key: PathKey = ("cases", index)
        cases.append(_case(doc, raw, key, index, suite, ids, registry))
    return LoadedFile(
        doc.path, NAME, cases, name=data.get("name"), description=data.get("description")
    )


def _suite(doc: Document, data: dict[str, Any]) -> dict[str, Any]:
    """The suite's defaults, or every problem with the suite's own keys raised together."""
    problems = Problems(doc)
    problems.unknown_keys(data, SUITE_KEYS, (), "suite")
    for name in ("name", "description", "agent_id"):
        if name in data and not isinstance(data[name], str):
            problems.add((name,), f"{name}: expected a string, got {data[name]!r}")
    agent = data.get("agent_id")
    if isinstance(agent, str) and ":" not in agent:
        problems.add(
            ("agent_id",),
            f"agent_id: {agent!r} is not 'module:attribute' (e.g. 'myproject.agent:run')",
        )
    scorers = _scorers(problems, data, "default_scorers", ())
    min_score = problems.number(data, "default_min_score", (), 0, 1)
    timeout = problems.number(data, "default_timeout_seconds", (), 0)
    for flag in ("parallel", "stop_on_failure"):
        if flag in data and not isinstance(data[flag], bool):
            problems.add((flag,), f"{flag}: expected true or false, got {data[flag]!r}")
    if problems:
        raise EvalFileErrors(problems.in_order())
    return {
        "agent": agent,
        "agent_line": doc.line(("agent_id",)) if agent else None,
        "scorers": scorers if scorers is not None else list(DEFAULT_SCORERS),
        "min_score": min_score if min_score is not None else DEFAULT_MIN_SCORE,
        "timeout": timeout,
        "stop_on_failure": bool(data.get("stop_on_failure", False)),
    }


def _scorers(problems: Problems, raw: dict[str, Any], name: str, key: PathKey) -> list[str] | None:
    """``raw[name]`` when it lists known scorers (None when absent).

    A problem per unknown scorer.
    """
    value = raw.get(name)
    if value is None:
        return None
    where = (*key, name)
    if not is_str_list(value) or not value:
        problems.add(
            where, f"{pretty(where)}: expected a non-empty list of scorers ({', '.join(SCORERS)})"
        )
        return None
    for i, scorer in enumerate(value):
        if scorer not in SCORERS:
            hint = did_you_mean(scorer, SCORERS) or f"; valid scorers: {', '.join(SCORERS)}"
            problems.add((*where, i), f"unknown scorer {scorer!r} in {pretty(where)}{hint}")
    return list(value)


def _case(
    doc: Document,
    raw: Any,
    key: PathKey,
    index: int,
    suite: dict[str, Any],
    ids: Ids,
    registry: CheckRegistry,
) -> Case:
    line = doc.line(key)
    if not isinstance(raw, dict):
        problems = Problems(doc)
        problems.add(
            key, f"{pretty(key)}: a case is a mapping with `name` and `input`, got {raw!r}"
        )
        return build_case(doc, key, ids.derive(f"case-{index + 1}", line), problems, NAME)
    name = raw.get("name")
    named = name if isinstance(name, str) and name.strip() else None
    case_id = ids.derive(named or f"case-{index + 1}", line)
    problems = Problems(doc, case_id)
    if named:
        ids.name(named, line, problems, (*key, "name"))
    else:
        problems.add(
            key, f"{pretty(key)}: missing `name` (a case needs a name, unique within the suite)"
        )
    problems.unknown_keys(raw, CASE_KEYS, key, "case")
    query, context = _input(problems, raw, key)
    tools = problems.str_list(raw, "expected_tools", key)
    sequence = problems.str_list(raw, "expected_tool_sequence", key)
    contains = problems.str_list(raw, "expected_output_contains", key)
    pattern = problems.regex(raw, "expected_output_pattern", key)
    scorers = _scorers(problems, raw, "scorers", key)
    min_score = problems.number(raw, "min_score", key, 0, 1)
    timeout = problems.number(raw, "timeout_seconds", key, 0)
    tags = problems.tags(raw, "tags", key)
    config = raw.get("scorer_config") or {}
    if not isinstance(config, dict):
        problems.add(
            (*key, "scorer_config"),
            f"{pretty((*key, 'scorer_config'))}: expected a mapping of scorer names",
        )
        config = {}
    for scorer in config:
        if scorer not in SCORERS:
            where = (*key, "scorer_config", scorer)
            hint = did_you_mean(str(scorer), SCORERS) or f"; valid scorers: {', '.join(SCORERS)}"
            problems.add(where, f"unknown scorer {scorer!r} in {pretty(where[:-1])}{hint}")
    expect: dict[str, Any] = {}
    for scorer in scorers if scorers is not None else suite["scorers"]:
        if scorer == "tool_selection":
            spec = {"expected_tools": tools, "expected_tool_sequence": sequence}
            expect[scorer] = {k: v for k, v in spec.items() if v is not None}
        elif scorer == "grounding":
            expect[scorer] = {"contains": contains} if contains is not None else {}
            if pattern is not None:
                expect[scorer]["pattern"] = pattern
        elif scorer == "efficiency":
            expect[scorer] = (
                {"max_tool_calls": _call_budget(tools, sequence)} if tools or sequence else {}
            )
            expect[scorer].update(_scorer_config(config, scorer))
        elif scorer == "reasoning":
            expect[scorer] = _scorer_config(config, scorer)
        elif scorer == "custom":
            expect.update(_custom(problems, config, (*key, "scorer_config"), registry))
    description = raw.get("description")
    if name != case_id:
        description = f"{name}: {description}" if description else name
    return build_case(
        doc,
        key,
        case_id,
        problems,
        NAME,
        query=query,
        context=context,
        description=description,
        expect=expect,
        tags=tuple(dict.fromkeys(tags or ())),
        timeout=timeout if timeout is not None else suite["timeout"],
        min_score=min_score if min_score is not None else suite["min_score"],
        metadata={"scorer_config": config} if config else {},
        agent=suite["agent"],
        agent_line=suite["agent_line"],
        stop_on_failure=suite["stop_on_failure"],
    )


def _input(problems: Problems, raw: dict[str, Any], key: PathKey) -> tuple[str, dict[str, Any]]:
    """``input.query`` and ``input.context``; Neon passes nothing else to the agent."""
    if not problems.require(raw, "input", key, "`input: {query: ...}`"):
        return "", {}
    value = raw["input"]
    where = (*key, "input")
    if not isinstance(value, dict):
        problems.add(
            where, f"{pretty(where)}: expected a mapping with `query` (and optional `context`)"
        )
        return "", {}
    problems.unknown_keys(value, ("query", "context"), where, "input")
    query, context = value.get("query"), value.get("context") or {}
    if not isinstance(query, str):
        problems.add(where, f"{pretty(where)}: `query` must be a string, got {query!r}")
    if not isinstance(context, dict):
        problems.add(
            (*where, "context"),
            f"{pretty((*where, 'context'))}: expected a mapping, got {context!r}",
        )
    return (query if isinstance(query, str) else ""), (context if isinstance(context, dict) else {})


def _call_budget(tools: list[str] | None, sequence: list[str] | None) -> int:
    """The tool calls a case needs.

    The expected sequence's length, else the number of expected tools.
    """
    return len(sequence) if sequence is not None else len(set(tools or ()))


def _scorer_config(config: dict[str, Any], scorer: str) -> dict[str, Any]:
    own = config.get(scorer)
    if not isinstance(own, dict):
        return {}
    return {k: v for k, v in own.items() if k in _CONFIG_KEYS.get(scorer, ()) or k == "min_score"}


def _custom(
    problems: Problems, config: dict[str, Any], key: PathKey, registry: CheckRegistry
) -> dict[str, Any]:
    """The checks ``scorer_config.custom`` names.

    Registered check names (with their argument) or ``module:function`` refs.
    """
    value = config.get("custom")
    where = (*key, "custom")
    usage = (
        "scorer `custom` needs `scorer_config: "
        "{custom: <check name> | module:function | {<check name>: <argument>}}`"
        " naming a check registered through `pytest_agent_eval_register_checks`"
    )
    if value is None:
        problems.add(key, usage)
        return {}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        refs = [v for v in value if isinstance(v, str) and ":" in v]
        named: dict[str, Any] = {v: True for v in value if isinstance(v, str) and ":" not in v}
        if len(refs) + len(named) != len(value):
            problems.add(where, usage)
    elif isinstance(value, dict):
        refs, named = [], dict(value)
    else:
        problems.add(where, usage)
        return {}
    expect: dict[str, Any] = {"custom": refs} if refs else {}
    for check, arg in named.items():
        if check not in registry or check in SCORERS:
            hint = (
                did_you_mean(str(check), registry.names())
                or "; register it with pytest_agent_eval_register_checks"
            )
            problems.add(where, f"unknown check {check!r} in {pretty(where)}{hint}")
        else:
            expect[check] = arg
    return expect


DIALECT = Dialect(NAME, detect, load)
