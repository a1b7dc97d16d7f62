"""promptfoo configs (SPEC §19): ``promptfooconfig.yaml`` or any YAML/JSON with promptfoo's top-level keys.

Every test (inline, or from ``file://`` YAML/JSON/JSONL/CSV, CSV ``__expected`` columns as assertions) × every
prompt × every provider is a case; ``vars`` render into the prompt through Jinja2 (Nunjucks-compatible for
``{{ var }}``, filters and loops; the ``promptfoo`` extra, imported only when a prompt has a template);
``defaultTest`` merges into each test; ``description`` gives the id. Several providers are variants
``<case id>[<provider>]``. The assertions become the ``promptfoo`` check (``checks/promptfoo.py``). What the
plugin cannot honour errors its case with ``path:line: not supported: …``; nothing is dropped silently.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems, explicit_id, is_number
from pytest_agent_eval.cases.document import Document, PathKey, read_document
from pytest_agent_eval.cases.errors import EvalFileError
from pytest_agent_eval.cases.model import Case, LoadedFile, slugify
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.checks.promptfoo import MODEL_GRADED, SUPPORTED
from pytest_agent_eval.checks.promptfoo_graded import python_path

NAME = "promptfoo"
NEED = "a promptfoo config: a mapping with `providers` (or `targets`) and `prompts` or `tests`"
PROVIDER_KEY = "promptfoo_provider"
"""An agent reference ``{promptfoo_provider: {...}}``: the adapter in ``adapters/promptfoo.py`` calls it."""
IGNORED = frozenset(
    {"description", "outputPath", "sharing", "writeLatestResults", "evaluateOptions", "tags", "metadata", "env"}
)
"""Top-level keys that do not change a verdict (where results go, UI tags): read and left aside."""
TOP = frozenset({"prompts", "providers", "targets", "tests", "defaultTest", *IGNORED})
TEST_KEYS = frozenset({"description", "vars", "assert", "threshold", "metadata", "options"})
TEST_OPTIONS = frozenset({"provider", "factuality"})
"""Test ``options`` that change no verdict here (graders are the plugin's judge) or that it honours."""
ASSERT_KEYS = frozenset({"type", "value", "threshold", "weight", "metric", "config", "options", "provider"})
SET_KEYS = frozenset({"type", "assert", "threshold", "weight", "metric"})
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
_CSV_TYPES = sorted(SUPPORTED | {"javascript", "grade", "fn"}, key=len, reverse=True)
_TYPED = re.compile(r"^(not-)?([a-z][a-z0-9:-]*?)(?:\((\d+(?:\.\d+)?)\))?(?::(.*))?$", re.DOTALL)


def config_schema() -> dict[str, Any]:
    """The JSON Schema of the promptfoo config the plugin runs (``agent-eval schema --format promptfoo``): the
    keys, test fields and assertion types it honours; promptfoo's own schema describes the rest."""
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
        "properties": {"type": {"const": "assert-set"}, "assert": {"type": "array", "items": assertion}, **common},
        "required": ["type", "assert"],
        "additionalProperties": False,
    }
    test = {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "vars": {"type": "object"},
            "assert": {"type": "array", "items": {"anyOf": [assertion, assert_set]}},
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
            "prompts": {"anyOf": [{"type": "string"}, {"type": "array"}]},
            "providers": {"anyOf": [provider, {"type": "array", "items": provider}]},
            "targets": {"anyOf": [provider, {"type": "array", "items": provider}]},
            "tests": {"anyOf": [tests, {"type": "array", "items": tests}]},
            "defaultTest": {"anyOf": [{"type": "string", "pattern": "^file://"}, test]},
        },
        "additionalProperties": False,
    }


def detect(data: Any) -> tuple[bool, str]:
    """promptfoo's top-level keys: providers (or targets) with prompts or tests, and no native ``cases``."""
    if not isinstance(data, dict) or "cases" in data:
        return False, NEED
    if ("providers" in data or "targets" in data) and ("prompts" in data or "tests" in data):
        return True, ""
    return False, NEED


def claims(path: Path) -> bool:
    """promptfoo's own file name claims a file whatever else its shape fits."""
    return path.name in ("promptfooconfig.yaml", "promptfooconfig.yml", "promptfooconfig.json")


class _Source:
    """Where a test came from: the config or a tests file, at a line (and the key of the test in ``doc``, whose
    parts have lines of their own), for messages."""

    def __init__(self, path: Path, line: int, doc: Document | None = None, key: PathKey = ()) -> None:
        self.path, self.line, self.doc, self.key = path, line, doc, key

    def at(self, *sub: str | int) -> _Source:
        """The source of a part of the test (an assertion): its own line where known."""
        if self.doc is None:
            return self
        return _Source(self.path, self.doc.line((*self.key, *sub)), self.doc, (*self.key, *sub))

    def error(self, message: str) -> str:
        return f"{self.path}:{self.line}: {message}"


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """Every test × prompt × provider as a case; a test or provider the plugin cannot honour errors its cases."""
    data = doc.data
    base = doc.path.parent
    file_problems = Problems(doc)
    for key in data:
        if key not in TOP:
            file_problems.add(
                (key,), f"not supported: promptfoo's `{key}` (the plugin runs prompts × providers × tests)"
            )
    if file_problems:
        raise file_problems.errors[0] if len(file_problems.errors) == 1 else _errors(file_problems)
    prompts = _prompts(doc, base)
    providers = _providers(doc, base)
    default = _default_test(doc, base)
    ids = Ids()
    cases: list[Case] = []
    for number, (test, source, key) in enumerate(_tests(doc, base), 1):
        cases.extend(_cases(doc, test, source, key, default, prompts, providers, ids, base, number))
    return LoadedFile(doc.path, NAME, cases, description=data.get("description"))


def _errors(problems: Problems) -> Exception:
    from pytest_agent_eval.cases.errors import EvalFileErrors

    return EvalFileErrors(problems.in_order())


# -- prompts ---------------------------------------------------------------------------------------------------


def _prompts(doc: Document, base: Path) -> list[tuple[str, str | None, str | None]]:
    """(label, raw text, problem) per prompt; no ``prompts`` is promptfoo's ``{{prompt}}``."""
    raw = doc.data.get("prompts", ["{{prompt}}"])
    items = raw if isinstance(raw, list) else [raw]
    out: list[tuple[str, str | None, str | None]] = []
    for i, item in enumerate(items):
        where = f"{doc.path}:{doc.line(('prompts', i) if isinstance(raw, list) else ('prompts',))}"
        label = f"prompt{i + 1}"
        if isinstance(item, dict):
            label = str(item.get("label") or label)
            item = item.get("raw", item.get("id"))
        if not isinstance(item, str):
            out.append((label, None, f"{where}: a prompt is a string, `file://path` or {{raw|id, label}}"))
            continue
        if item.startswith("file://"):
            ref = item[len("file://") :]
            path = base / ref
            if path.suffix in (".py", ".js", ".ts", ".mjs", ".cjs") or "*" in ref:
                out.append((label, None, f"{where}: not supported: prompt {item} (prompt functions and globs)"))
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                out.append((label, None, f"{where}: cannot read prompt {item}: {exc.strerror or exc}"))
                continue
            parts = re.split(r"\n-{3,}\n", text) if path.suffix in (".txt", ".md", "") else [text]
            for n, part in enumerate(parts):
                out.append((label if len(parts) == 1 else f"{label}-{n + 1}", part.strip("\n"), None))
            continue
        out.append((label, item, None))
    return out


@functools.cache
def _jinja() -> ModuleType:
    import jinja2

    return jinja2


def render(template: str, variables: dict[str, Any]) -> str:
    """A Nunjucks-style template (``{{ var }}``, filters, ``{% for %}``) rendered with ``variables`` via Jinja2."""
    if "{{" not in template and "{%" not in template:
        return template
    try:
        jinja2 = _jinja()
    except ImportError:
        raise ValueError(
            "rendering promptfoo templates needs Jinja2: pip install 'pytest-agent-evalset[promptfoo]'"
        ) from None
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["load"] = json.loads  # promptfoo's own filters: JSON.parse / JSON.stringify
    env.filters["dump"] = json.dumps
    try:
        return str(env.from_string(template).render(**variables))
    except jinja2.TemplateError as exc:
        raise ValueError(f"template error: {exc}") from None


# -- providers -------------------------------------------------------------------------------------------------


def _providers(doc: Document, base: Path) -> list[tuple[str, dict[str, Any] | None, str | None, int]]:
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
        if isinstance(item, dict) and "id" not in item and len(item) == 1:  # {"openai:gpt-4o": {config: ...}}
            ((pid, options),) = item.items()
            item = {"id": pid, **(options if isinstance(options, dict) else {})}
        if isinstance(item, dict):
            pid, config, label = item.get("id"), item.get("config") or {}, item.get("label")
        else:
            pid = item
        if not isinstance(pid, str):
            out.append((f"provider{i + 1}", None, f"{where}: a provider is a string id or {{id, label, config}}", line))
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
            return None, f"not supported: provider {pid}: config {', '.join(unknown)} (supported: " + ", ".join(
                sorted(OPENAI_CONFIG | CLIENT_CONFIG)
            ) + ")"
        return {PROVIDER_KEY: {"kind": vendor, "model": match.group(3), "id": pid, "config": config}}, None
    return None, (
        f"not supported: provider {pid} (the plugin calls Python providers `file://x.py` / `python:x.py` and "
        "`openai:…` / `anthropic:…` chat models; for another, write a Python provider that calls it)"
    )


# -- tests -----------------------------------------------------------------------------------------------------


def _default_test(doc: Document, base: Path) -> tuple[dict[str, Any], _Source]:
    raw = doc.data.get("defaultTest") or {}
    source = _Source(doc.path, doc.line(("defaultTest",)), doc, ("defaultTest",))
    if isinstance(raw, str) and raw.startswith("file://"):
        loaded = list(_file_tests(raw, base, source))
        if len(loaded) != 1:
            raise EvalFileError(doc.path, source.line, f"defaultTest {raw}: expected one test, got {len(loaded)}")
        return loaded[0][0], loaded[0][1]
    if not isinstance(raw, dict):
        raise EvalFileError(doc.path, source.line, "defaultTest: expected a mapping of test fields")
    return raw, source


def _tests(doc: Document, base: Path) -> list[tuple[Any, _Source, PathKey]]:
    """Every test with where it came from: inline, or each row of a ``file://`` tests file."""
    raw = doc.data.get("tests", [{}])
    items = raw if isinstance(raw, list) else [raw]
    out: list[tuple[Any, _Source, PathKey]] = []
    for i, item in enumerate(items):
        key: PathKey = ("tests", i) if isinstance(raw, list) else ("tests",)
        source = _Source(doc.path, doc.line(key), doc, key)
        if isinstance(item, str):
            try:
                out.extend((test, where, key) for test, where in _file_tests(item, base, source))
            except EvalFileError as exc:
                out.append((exc, source, key))
        else:
            out.append((item, source, key))
    return out


def _file_tests(ref: str, base: Path, source: _Source) -> list[tuple[Any, _Source]]:
    if not ref.startswith("file://"):
        raise EvalFileError(source.path, source.line, f"tests entry {ref!r}: not supported (use `file://path`)")
    paths = sorted(base.glob(ref[len("file://") :])) if "*" in ref else [base / ref[len("file://") :]]
    out: list[tuple[Any, _Source]] = []
    for path in paths:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            out.extend(_csv_tests(path, source))
        elif suffix == ".jsonl":
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise EvalFileError(source.path, source.line, f"cannot read {path}: {exc.strerror or exc}") from None
            for n, text in enumerate(lines, 1):
                if text.strip():
                    try:
                        out.append((json.loads(text), _Source(path, n)))
                    except ValueError as exc:
                        out.append((EvalFileError(path, n, f"not JSON: {exc}"), _Source(path, n)))
        elif suffix in (".yaml", ".yml", ".json"):
            try:
                tests = read_document(path)
            except OSError as exc:
                raise EvalFileError(source.path, source.line, f"cannot read {path}: {exc}") from None
            items = tests.data if isinstance(tests.data, list) else [tests.data]
            for n, item in enumerate(items):
                key = (n,) if isinstance(tests.data, list) else ()
                out.append((item, _Source(path, tests.line(key), tests, key)))
        else:
            raise EvalFileError(source.path, source.line, f"not supported: tests file {ref} (CSV, JSON, JSONL, YAML)")
    if not paths:
        raise EvalFileError(source.path, source.line, f"tests {ref}: no such file")
    return out


def _csv_tests(path: Path, source: _Source) -> list[tuple[Any, _Source]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise EvalFileError(source.path, source.line, f"cannot read {path}: {exc.strerror or exc}") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    out: list[tuple[Any, _Source]] = []
    line = reader.line_num
    for cells in reader:
        where = _Source(path, line + 1)
        line = reader.line_num
        if not any(cells):
            continue
        test: dict[str, Any] = {"vars": {}, "assert": []}
        if len(cells) > len(header):
            out.append(({"__error": "a row has more cells than the header has columns"}, where))
            continue
        for column, value in itertools.zip_longest(header, cells, fillvalue=""):
            if re.fullmatch(r"__expected\d*", column):
                if value:
                    test["assert"].append(value)
            elif column == "__description":
                test["description"] = value
            elif column == "__threshold":
                test["threshold"] = float(value) if value else None
            elif column.startswith("__metadata:"):
                test.setdefault("metadata", {})[column[len("__metadata:") :]] = value
            elif column.startswith("__"):
                test = {"__error": f"not supported: CSV column {column}"}
                break
            else:
                test["vars"][column] = value
        out.append((test, where))
    return out


def assertion_of_string(text: str) -> dict[str, Any]:
    """promptfoo's assertion string syntax (CSV ``__expected``): ``type:value``, ``type(threshold):value``,
    ``not-type:value``; ``grade:`` is ``llm-rubric``; anything else is ``equals``."""
    if text.startswith("file://"):
        return {"type": "javascript" if not text.endswith(".py") else "python", "value": text}
    match = _TYPED.match(text)
    if match:
        negated, kind, threshold, value = match.groups()
        kind = {"grade": "llm-rubric", "fn": "javascript"}.get(kind, kind)
        if kind in _CSV_TYPES or kind in SUPPORTED:
            out: dict[str, Any] = {"type": f"{negated or ''}{kind}"}
            if value is not None:
                out["value"] = value
            if threshold is not None:
                out["threshold"] = float(threshold)
            if value is not None or kind in ("is-json", "contains-json"):
                return out
    return {"type": "equals", "value": text}


# -- cases -----------------------------------------------------------------------------------------------------


def _cases(
    doc: Document,
    test: Any,
    source: _Source,
    key: PathKey,
    default: tuple[dict[str, Any], _Source],
    prompts: list[tuple[str, str | None, str | None]],
    providers: list[tuple[str, dict[str, Any] | None, str | None, int]],
    ids: Ids,
    base: Path,
    number: int,
) -> list[Case]:
    line = doc.line(key)
    problems: list[str] = []
    if isinstance(test, EvalFileError):
        problems.append(test.format())
        test = {}
    elif not isinstance(test, dict):
        problems.append(source.error(f"a test is a mapping of {', '.join(sorted(TEST_KEYS))}, got {test!r}"))
        test = {}
    elif "__error" in test:
        problems.append(source.error(test["__error"]))
        test = {}
    for name in test:
        if name not in TEST_KEYS:
            problems.append(source.error(f"not supported: test field `{name}`"))
    default_test, default_source = default
    for options in (test.get("options"), default_test.get("options")):
        for name in options if isinstance(options, dict) else ():
            if name not in TEST_OPTIONS:
                problems.append(source.error(f"not supported: test option `{name}` (options: provider, factuality)"))
    variables = {**_dict(default_test.get("vars")), **_dict(test.get("vars"))}
    variables = {k: _var(v, base, source, problems) for k, v in variables.items()}
    threshold = test.get("threshold", default_test.get("threshold"))
    if threshold is not None and not is_number(threshold):
        problems.append(source.error(f"threshold: expected a number, got {threshold!r}"))
        threshold = None
    raw_asserts = [*(default_test.get("assert") or []), *(test.get("assert") or [])]
    description = test.get("description")
    own = Problems(doc)
    if description is not None:
        case_id, original = explicit_id(description, line, ids, own, key)
        original = original or str(description)
    else:
        case_id, original = ids.derive(f"test-{number}", line), None
    problems.extend(e.format() for e in own.errors)
    metadata = {**_dict(default_test.get("metadata")), **_dict(test.get("metadata"))}
    options = {**_dict(default_test.get("options")), **_dict(test.get("options"))}
    combos = _expand(variables)
    cases: list[Case] = []
    for n, combo in enumerate(combos):
        combo_id = case_id if len(combos) == 1 else ids.unique(f"{case_id}-{n + 1}", line)
        for prompt_label, prompt, prompt_problem in prompts:
            prompt_id = combo_id if len(prompts) == 1 else f"{combo_id}-{slugify(prompt_label)}"
            case_problems = list(problems)
            if prompt_problem:
                case_problems.append(prompt_problem)
            asserts = _assertions(
                raw_asserts, combo, source, default_source, len(default_test.get("assert") or []), base, case_problems
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
                common: dict[str, Any] = {"id": variant, "path": doc.path, "line": line, "dialect": NAME}
                if errors:
                    text = "\n".join(f"{e} (case {variant})" for e in dict.fromkeys(errors))
                    cases.append(Case(**common, error=text))
                    continue
                spec = {"assert": asserts, "threshold": threshold, "vars": combo, "prompt": rendered}
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


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _var(value: Any, base: Path, source: _Source, problems: list[str]) -> Any:
    """A var's value; ``file://`` reads the file (text; JSON and YAML parsed), as promptfoo does."""
    if not isinstance(value, str) or not value.startswith("file://"):
        return value
    path = base / value[len("file://") :]
    if path.suffix in (".py", ".js", ".ts", ".mjs", ".cjs"):
        problems.append(source.error(f"not supported: var {value} (script vars)"))
        return value
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(source.error(f"cannot read var {value}: {exc.strerror or exc}"))
        return value
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text)
    return text


def _expand(variables: dict[str, Any]) -> list[dict[str, Any]]:
    """promptfoo's var arrays: a list value makes one test per item (the product over every list var)."""
    lists = [k for k, v in variables.items() if isinstance(v, list)]
    if not lists:
        return [variables]
    combos = itertools.product(*(variables[k] for k in lists))
    return [{**variables, **dict(zip(lists, values, strict=True))} for values in combos]


def _assertions(
    raw: list[Any],
    variables: dict[str, Any],
    source: _Source,
    default_source: _Source,
    n_default: int,
    base: Path,
    problems: list[str],
) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(raw):
        where = default_source.at("assert", i) if i < n_default else source.at("assert", i - n_default)
        a = _assertion(item, variables, where, base, problems, in_set=False)
        if a is not None:
            out.append(a)
    return out


def _assertion(
    item: Any, variables: dict[str, Any], source: _Source, base: Path, problems: list[str], in_set: bool
) -> dict[str, Any] | None:
    if isinstance(item, str):
        item = assertion_of_string(item)
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        problems.append(source.error(f"an assertion is a mapping with `type`, got {item!r}"))
        return None
    kind = item["type"]
    if kind == "assert-set":
        if in_set:
            problems.append(source.error("not supported: an assert-set inside an assert-set"))
            return None
        extra = sorted(set(item) - SET_KEYS)
        if extra:
            problems.append(source.error(f"not supported: assert-set field {', '.join(extra)}"))
        inner = [
            _assertion(sub, variables, source.at("assert", j), base, problems, True)
            for j, sub in enumerate(item.get("assert") or [])
        ]
        if not inner:
            problems.append(source.error("assert-set: `assert` needs at least one assertion"))
        return {**_common(item, source, problems), "type": kind, "assert": [a for a in inner if a is not None]}
    inverse = kind.startswith("not-")
    base_type = kind[4:] if inverse else kind
    if base_type not in SUPPORTED:
        problems.append(source.error(f"not supported: assertion `{kind}`" + _why(base_type)))
        return None
    extra = sorted(set(item) - ASSERT_KEYS)
    if extra:
        problems.append(source.error(f"not supported: assertion field {', '.join(extra)} (on `{kind}`)"))
    if item.get("provider") is not None:
        problems.append(source.error(f"not supported: a grader `provider` on `{kind}` (the plugin's judge grades)"))
    out = {**_common(item, source, problems), "type": kind, "base": base_type, "inverse": inverse}
    value = item.get("value")
    if base_type == "python" and isinstance(value, str) and value.startswith("file://"):
        path, function = python_path(value[len("file://") :], base)
        out.update(file=path, function=function, value=value)
        return out
    if isinstance(value, str) and value.startswith("file://"):
        value = _var(value, base, source, problems)
    try:
        out["value"] = _render_value(value, variables)
    except ValueError as exc:
        problems.append(source.error(str(exc)))
    if item.get("config") is not None:
        out["config"] = item["config"]
    if item.get("options") is not None:
        out["options"] = item["options"]
    _check_value(out, source, problems)
    return out


def _why(base_type: str) -> str:
    if base_type in ("javascript", "ruby", "webhook"):
        return " (write it as a `python` assertion)"
    return " (see the README's promptfoo section for the supported assertions)"


def _common(item: dict[str, Any], source: _Source, problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"line": source.line}
    for name in ("threshold", "weight"):
        value = item.get(name)
        if value is not None:
            if not is_number(value) or (name == "weight" and value < 0):
                problems.append(source.error(f"{item.get('type')}: `{name}` must be a number >= 0, got {value!r}"))
            else:
                out[name] = float(value)
    if item.get("metric") is not None:
        out["metric"] = str(item["metric"])
    return out


def _render_value(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return render(value, variables)
    if isinstance(value, list):
        return [render(v, variables) if isinstance(v, str) else v for v in value]
    return value


def _check_value(a: dict[str, Any], source: _Source, problems: list[str]) -> None:
    """What promptfoo would refuse at run time, refused at load time (the case errors, naming the line)."""
    base, value = a["base"], a.get("value")
    needs_value = {
        "equals",
        "contains",
        "icontains",
        "contains-any",
        "contains-all",
        "icontains-any",
        "icontains-all",
        "starts-with",
        "regex",
        "python",
        "tool-call-f1",
        "trajectory:tool-used",
        "trajectory:tool-sequence",
        "trajectory:step-count",
        *MODEL_GRADED,
    }
    if base in needs_value and value in (None, "", []):
        problems.append(source.error(f"`{a['type']}` needs a `value`"))
        return
    if base in ("latency", "cost") and a.get("threshold") is None:
        problems.append(source.error(f"not supported: `{a['type']}` without `threshold` (a metric-only figure)"))
    if base == "regex":
        try:
            re.compile(str(value))
        except re.error as exc:
            problems.append(source.error(f"regex: bad pattern {value!r}: {exc}"))
    if base in ("is-json", "contains-json") and isinstance(value, str) and value:
        import yaml

        try:
            a["value"] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            problems.append(source.error(f"{a['type']}: the schema is not YAML/JSON: {exc}"))
    if base == "trajectory:step-count":
        kinds = value.get("type") if isinstance(value, dict) else None
        if not isinstance(value, dict) or ("min" not in value and "max" not in value):
            problems.append(source.error("trajectory:step-count needs a mapping with `min` or `max`"))
        elif kinds not in (None, "tool", ["tool"]):
            problems.append(source.error(f"not supported: trajectory:step-count of type {kinds} (tool steps only)"))
        elif kinds is None:
            problems.append(
                source.error(
                    "not supported: trajectory:step-count without `type: tool` (the plugin "
                    "sees the agent's tool calls, not its other trace spans)"
                )
            )
    if (
        base == "trajectory:tool-sequence"
        and isinstance(value, dict)
        and value.get("mode") not in (None, "exact", "in_order")
    ):
        problems.append(source.error(f"trajectory:tool-sequence: mode must be exact or in_order, got {value['mode']}"))


DIALECT = Dialect(NAME, detect, load, claims=claims)
