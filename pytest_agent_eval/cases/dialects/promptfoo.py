"""promptfoo configs (SPEC §19): ``promptfooconfig.yaml`` or a YAML/JSON with its top-level keys.

Every test (inline, or from ``file://`` YAML/JSON/JSONL/CSV, CSV ``__expected`` columns as
assertions) × every prompt × every provider is a case; ``vars`` render into the prompt through
Jinja2 (Nunjucks-compatible for ``{{ var }}``, filters and loops; the ``promptfoo`` extra, imported
only when a prompt has a template); ``defaultTest`` merges into each test; ``description`` gives the
id. Several providers are variants ``<case id>[<provider>]``. The assertions become the
``promptfoo`` check (``checks/promptfoo.py``). What the plugin cannot honour errors its case with
``path:line: not supported: …``; nothing is dropped silently.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from typing import Any

from pytest_agent_eval.adapters.recognise import PROVIDER_KEY
from pytest_agent_eval.cases import trust
from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems, explicit_id, is_number
from pytest_agent_eval.cases.dialects.promptfoo_asserts import assertions_of
from pytest_agent_eval.cases.dialects.promptfoo_files import (
    Source,
    default_test,
    prompts_of,
    read_var,
    render,
    resolve_refs,
    tests_of,
)
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.checks.promptfoo import SUPPORTED
from pytest_agent_eval.checks.promptfoo_graded import python_path
from pytest_agent_eval.checks.promptfoo_types import TRANSFORM
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.errors import EvalFileError
from pytest_agent_eval.core.names import slugify

NAME = "promptfoo"
NEED = "a promptfoo config: a mapping with `providers` (or `targets`) and `prompts` or `tests`"
IGNORED = frozenset(
    {
        "description",
        "outputPath",
        "sharing",
        "writeLatestResults",
        "evaluateOptions",
        "tags",
        "metadata",
        "env",
    }
)
"""Top-level keys that do not change a verdict (where results go, UI tags): read and left aside."""
TEMPLATES = "assertionTemplates"
"""Assertions tests use by ``$ref: '#/assertionTemplates/<name>'``.

Any ``$ref`` inside the config resolves.
"""
TOP = frozenset({"prompts", "providers", "targets", "tests", "defaultTest", TEMPLATES, *IGNORED})
TEST_KEYS = frozenset({"description", "vars", "assert", "threshold", "metadata", "options"})
TEST_OPTIONS = frozenset({"provider", "factuality"})
"""Test ``options`` that change no verdict here (graders are the plugin's judge) or that it honours.
"""
OPENAI_CONFIG = frozenset(
    {
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "top_p",
        "seed",
        "stop",
        "response_format",
        "tools",
        "tool_choice",
        "frequency_penalty",
        "presence_penalty",
    }
)
CLIENT_CONFIG = frozenset({"apiBaseUrl", "apiKey", "apiKeyEnvar"})


def config_schema() -> dict[str, Any]:
    """The JSON Schema of the promptfoo config the plugin runs.

    Printed by ``agent-eval schema --format promptfoo``: the keys, test fields and assertion types
    it honours; promptfoo's own schema describes the rest.
    """
    types = sorted({*SUPPORTED, *(f"not-{t}" for t in SUPPORTED)})
    common = {
        "threshold": {"type": "number"},
        "weight": {"type": "number", "minimum": 0},
        "metric": {"type": "string"},
    }
    assertion = {
        "type": "object",
        "properties": {
            "type": {"enum": types},
            "value": {},
            "config": {"type": "object"},
            "options": {"type": "object"},
            **common,
        },
        "required": ["type"],
        "additionalProperties": False,
    }
    assert_set = {
        "type": "object",
        "properties": {
            "type": {"const": "assert-set"},
            "assert": {"type": "array", "items": assertion},
            **common,
        },
        "required": ["type", "assert"],
        "additionalProperties": False,
    }
    ref = {
        "type": "object",
        "properties": {"$ref": {"type": "string", "pattern": "^#"}},
        "required": ["$ref"],
    }
    test = {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "vars": {"type": "object"},
            "assert": {"type": "array", "items": {"anyOf": [assertion, assert_set, ref]}},
            "threshold": {"type": "number"},
            "metadata": {"type": "object"},
            "options": {"type": "object"},
        },
        "additionalProperties": False,
    }
    tests = {"anyOf": [{"type": "string", "pattern": "^file://"}, test]}
    provider = {"anyOf": [
        {"type": "string"},
        {"type": "object", "properties": {"id": {"type": "string"}, "label": {"type": "string"},
                                          "config": {"type": "object"}}, "required": ["id"]},
    ]}  # fmt: skip
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "promptfoo config, as pytest-agent-eval runs it",
        "type": "object",
        "properties": {
            **{key: {} for key in IGNORED},
            TEMPLATES: {
                "type": "object",
                "additionalProperties": {"anyOf": [assertion, assert_set]},
            },
            "prompts": {"anyOf": [{"type": "string"}, {"type": "array"}]},
            "providers": {"anyOf": [provider, {"type": "array", "items": provider}]},
            "targets": {"anyOf": [provider, {"type": "array", "items": provider}]},
            "tests": {"anyOf": [tests, {"type": "array", "items": tests}]},
            "defaultTest": {"anyOf": [{"type": "string", "pattern": "^file://"}, test]},
        },
        "additionalProperties": False,
    }


def detect(data: Any) -> tuple[bool, str]:
    """Whether ``data`` has promptfoo's top-level keys.

    Providers (or targets) with prompts or tests, and no native ``cases``.
    """
    if not isinstance(data, dict) or "cases" in data:
        return False, NEED
    if ("providers" in data or "targets" in data) and ("prompts" in data or "tests" in data):
        return True, ""
    return False, NEED


def claims(path: Path) -> bool:
    """promptfoo's own file name claims a file whatever else its shape fits."""
    return path.name in ("promptfooconfig.yaml", "promptfooconfig.yml", "promptfooconfig.json")


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """Every test × prompt × provider as a case.

    A test or provider the plugin cannot honour errors its cases.
    """
    data = doc.data
    base = doc.path.parent
    file_problems = Problems(doc)
    for key in data:
        if key not in TOP:
            file_problems.add(
                (key,),
                f"not supported: promptfoo's `{key}` (the plugin runs prompts × providers × tests)",
            )
    if file_problems:
        raise file_problems.errors[0] if len(file_problems.errors) == 1 else _errors(file_problems)
    prompts = prompts_of(doc, base)
    providers = _providers(doc, base)
    default = default_test(doc, base)
    ids = Ids()
    cases: list[Case] = []
    for number, (test, source, key) in enumerate(tests_of(doc, base), 1):
        cases.extend(
            _cases(
                doc, test, source, key, default, prompts, providers, ids, base, number, len(cases)
            )
        )
    return LoadedFile(doc.path, NAME, cases, description=data.get("description"))


def _errors(problems: Problems) -> Exception:
    from pytest_agent_eval.core.errors import EvalFileErrors

    return EvalFileErrors(problems.in_order())


# -- providers
# -------------------------------------------------------------------------------------------------


def _providers(
    doc: Document, base: Path
) -> list[tuple[str, dict[str, Any] | None, str | None, int]]:
    """(variant name, agent reference, problem, line) per provider."""
    key = "providers" if "providers" in doc.data else "targets"
    raw = doc.data[key]
    items = raw if isinstance(raw, list) else [raw]
    out: list[tuple[str, dict[str, Any] | None, str | None, int]] = []
    for i, item in enumerate(items):
        line = doc.line((key, i) if isinstance(raw, list) else (key,))
        where = f"{doc.path}:{line}"
        config: dict[str, Any] = {}
        label = None
        if (
            isinstance(item, dict) and "id" not in item and len(item) == 1
        ):  # {"openai:gpt-4o": {config: ...}}
            ((pid, options),) = item.items()
            item = {"id": pid, **(options if isinstance(options, dict) else {})}
        if isinstance(item, dict):
            pid, config, label = item.get("id"), item.get("config") or {}, item.get("label")
        else:
            pid = item
        if not isinstance(pid, str):
            out.append(
                (
                    f"provider{i + 1}",
                    None,
                    f"{where}: a provider is a string id or {{id, label, config}}",
                    line,
                )
            )
            continue
        name = slugify(str(label or pid))
        ref, problem = provider_ref(pid, config, base)
        if ref is not None:
            ref[PROVIDER_KEY]["label"] = str(label or pid)
        out.append((name, ref, f"{where}: {problem}" if problem else None, line))
    return out


def provider_ref(pid: str, config: Any, base: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The agent reference of a provider id, or why it cannot be called."""
    if not isinstance(config, dict):
        return None, f"provider {pid}: `config` must be a mapping"
    for prefix in ("file://", "python:"):
        if pid.startswith(prefix) and ".py" in pid:
            path, function = python_path(pid[len(prefix) :], base)
            if not Path(path).is_file():
                return None, f"provider {pid}: no such file {path}"
            return {
                PROVIDER_KEY: {
                    "kind": "python",
                    "path": path,
                    "function": function or "call_api",
                    "id": pid,
                    "config": config,
                }
            }, None
    match = re.fullmatch(r"(openai|anthropic):(?:(chat|messages):)?(.+)", pid)
    if (
        match
        and match.group(3) not in ("", "chat", "messages")
        and not match.group(3).startswith(
            ("completion:", "embedding:", "embeddings:", "responses:", "assistant:", "realtime:")
        )
    ):
        vendor = match.group(1)
        if (vendor == "openai" and match.group(2) == "messages") or (
            vendor == "anthropic" and match.group(2) == "chat"
        ):
            return None, f"not supported: provider {pid}"
        unknown = sorted(set(config) - OPENAI_CONFIG - CLIENT_CONFIG - {"max_tokens"})
        if unknown:
            return (
                None,
                f"not supported: provider {pid}: config {', '.join(unknown)} (supported: "
                + ", ".join(sorted(OPENAI_CONFIG | CLIENT_CONFIG))
                + ")",
            )
        return {
            PROVIDER_KEY: {"kind": vendor, "model": match.group(3), "id": pid, "config": config}
        }, None
    return None, (
        f"not supported: provider {pid} "
        "(the plugin calls Python providers `file://x.py` / `python:x.py` and "
        "`openai:…` / `anthropic:…` chat models; "
        "for another, write a Python provider that calls it)"
    )


# -- cases
# -------------------------------------------------------------------------------------------------


def _cases(
    doc: Document,
    test: Any,
    source: Source,
    key: PathKey,
    default: tuple[dict[str, Any], Source],
    prompts: list[tuple[str, str | None, str | None]],
    providers: list[tuple[str, dict[str, Any] | None, str | None, int]],
    ids: Ids,
    base: Path,
    number: int,
    made: int,
) -> list[Case]:
    """The cases of one test.

    ``made``: how many the file's tests before it made (the file's bound counts all).
    """
    line = doc.line(key)
    problems: list[str] = []
    if isinstance(test, EvalFileError):
        problems.append(test.format())
        test = {}
    elif not isinstance(test, dict):
        problems.append(
            source.error(f"a test is a mapping of {', '.join(sorted(TEST_KEYS))}, got {test!r}")
        )
        test = {}
    elif "__error" in test:
        problems.append(source.error(test["__error"]))
        test = {}
    test = _resolved(test, doc, source, problems)
    for name in test:
        if name not in TEST_KEYS:
            problems.append(source.error(f"not supported: test field `{name}`"))
    default_test, default_source = default
    for options in (test.get("options"), default_test.get("options")):
        for name in options if isinstance(options, dict) else ():
            if name not in TEST_OPTIONS:
                why = f"not supported: test option `{name}` (options: provider, factuality)"
                problems.append(
                    source.error(why + (f"; instead {TRANSFORM}" if name == "transform" else ""))
                )
    variables = {**_dict(default_test.get("vars")), **_dict(test.get("vars"))}
    variables = {k: read_var(v, base, source, problems) for k, v in variables.items()}
    threshold = test.get("threshold", default_test.get("threshold"))
    if threshold is not None and not is_number(threshold):
        problems.append(source.error(f"threshold: expected a number, got {threshold!r}"))
        threshold = None
    raw_asserts = [*(default_test.get("assert") or []), *(test.get("assert") or [])]
    description = test.get("description")
    own = Problems(doc)
    if description is not None:
        case_id, original = explicit_id(description, line, ids, own, key, "description")
        original = original or str(description)
    else:
        case_id, original = ids.derive(f"test-{number}", line), None
    problems.extend(e.format() for e in own.errors)
    metadata = {**_dict(default_test.get("metadata")), **_dict(test.get("metadata"))}
    options = {**_dict(default_test.get("options")), **_dict(test.get("options"))}
    lists = [len(v) for v in variables.values() if isinstance(v, list)]
    try:
        trust.check_count(made + math.prod(lists) * len(prompts) * len(providers), "the config")
    except trust.Refused as exc:
        raise EvalFileError(doc.path, line, str(exc)) from None
    combos = _expand(variables)
    cases: list[Case] = []
    for n, combo in enumerate(combos):
        combo_id = case_id if len(combos) == 1 else ids.unique(f"{case_id}-{n + 1}", line)
        for prompt_label, prompt, prompt_problem in prompts:
            prompt_id = combo_id if len(prompts) == 1 else f"{combo_id}-{slugify(prompt_label)}"
            case_problems = list(problems)
            if prompt_problem:
                case_problems.append(prompt_problem)
            asserts = assertions_of(
                raw_asserts,
                combo,
                source,
                default_source,
                len(default_test.get("assert") or []),
                base,
                case_problems,
            )
            rendered = ""
            if prompt is not None:
                try:
                    rendered = render(prompt, combo)
                except ValueError as exc:
                    case_problems.append(source.error(str(exc)))
            for name, ref, provider_problem, provider_line in providers:
                variant = prompt_id if len(providers) == 1 else f"{prompt_id}[{name}]"
                errors = case_problems + ([provider_problem] if provider_problem else [])
                common: dict[str, Any] = {
                    "id": variant,
                    "path": doc.path,
                    "line": line,
                    "dialect": NAME,
                }
                if errors:
                    text = "\n".join(f"{e} (case {variant})" for e in dict.fromkeys(errors))
                    cases.append(Case(**common, error=text))
                    continue
                spec = {
                    "assert": asserts,
                    "threshold": threshold,
                    "vars": combo,
                    "prompt": rendered,
                }
                if options:
                    spec["options"] = options
                cases.append(
                    Case(
                        **common,
                        query=rendered,
                        context={"vars": combo, "prompt": {"raw": rendered, "label": prompt_label}},
                        description=original,
                        expect={"promptfoo": spec},
                        metadata=metadata,
                        agent=ref,
                        agent_line=provider_line,
                        agent_name=name if len(providers) > 1 else None,
                    )
                )
    return cases


def _resolved(
    test: dict[str, Any], doc: Document, source: Source, problems: list[str]
) -> dict[str, Any]:
    """The test with its ``$ref`` s resolved.

    One that cannot be is this test's problem (at its line), not the other tests'.
    """
    out: dict[str, Any] = {}
    for name, value in test.items():
        parts = (
            list(enumerate(value))
            if name == "assert" and isinstance(value, list)
            else [(None, value)]
        )
        kept = []
        for i, part in parts:
            try:
                kept.append(resolve_refs(part, doc.data))
            except ValueError as exc:
                where = source.at(name, i) if i is not None else source.at(name)
                problems.append(where.error(str(exc)))
        out[name] = (
            kept if name == "assert" and isinstance(value, list) else kept[0] if kept else None
        )
    return out


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _expand(variables: dict[str, Any]) -> list[dict[str, Any]]:
    """promptfoo's var arrays: a list value makes one test per item.

    The tests are the product over every list var.
    """
    lists = [k for k, v in variables.items() if isinstance(v, list)]
    if not lists:
        return [variables]
    combos = itertools.product(*(variables[k] for k in lists))
    return [{**variables, **dict(zip(lists, values, strict=True))} for values in combos]


DIALECT = Dialect(NAME, detect, load, claims=claims, yaml_core=True)
