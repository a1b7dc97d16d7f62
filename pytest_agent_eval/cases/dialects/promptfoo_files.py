"""Reading a promptfoo config's parts: prompts, tests, ``defaultTest`` and ``file://`` vars.

Prompts (inline or ``file://``, split at ``---``) are rendered through Jinja2; tests (inline, or
``file://`` CSV/JSON/JSONL/YAML files, CSV ``__expected`` columns in promptfoo's assertion string
syntax), ``defaultTest`` and ``file://`` vars; each test with where it came from, for messages.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

from pytest_agent_eval.cases import trust
from pytest_agent_eval.checks.promptfoo import SUPPORTED
from pytest_agent_eval.core.document import MAX_ALIASED, Document, PathKey, read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors

_CSV_TYPES = sorted(SUPPORTED | {"javascript", "grade", "fn"}, key=len, reverse=True)


_TYPED = re.compile(r"^(not-)?([a-z][a-z0-9:-]*?)(?:\((\d+(?:\.\d+)?)\))?(?::(.*))?$", re.DOTALL)


class Source:
    """Where a test came from, for messages: the config or a tests file, at a line.

    Also the key of the test in ``doc``, whose parts have lines of their own.
    """

    def __init__(
        self, path: Path, line: int, doc: Document | None = None, key: PathKey = ()
    ) -> None:
        self.path, self.line, self.doc, self.key = path, line, doc, key

    def at(self, *sub: str | int) -> Source:
        """The source of a part of the test (an assertion): its own line where known."""
        if self.doc is None:
            return self
        return Source(self.path, self.doc.line((*self.key, *sub)), self.doc, (*self.key, *sub))

    def error(self, message: str) -> str:
        return f"{self.path}:{self.line}: {message}"


def prompts_of(doc: Document, base: Path) -> list[tuple[str, str | None, str | None]]:
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
            out.append(
                (label, None, f"{where}: a prompt is a string, `file://path` or {{raw|id, label}}")
            )
            continue
        if item.startswith("file://"):
            ref = item[len("file://") :]
            path = base / ref
            if path.suffix in (".py", ".js", ".ts", ".mjs", ".cjs") or "*" in ref:
                out.append(
                    (
                        label,
                        None,
                        f"{where}: not supported: prompt {item} (prompt functions and globs)",
                    )
                )
                continue
            try:
                text = trust.read_text(path, f"prompt {item}")
            except trust.Refused as exc:
                out.append((label, None, f"{where}: {exc}"))
                continue
            parts = re.split(r"\n-{3,}\n", text) if path.suffix in (".txt", ".md", "") else [text]
            for n, part in enumerate(parts):
                out.append(
                    (label if len(parts) == 1 else f"{label}-{n + 1}", part.strip("\n"), None)
                )
            continue
        out.append((label, item, None))
    return out


@functools.cache
def _environment() -> Any:
    env = trust.sandbox()
    env.filters["load"] = json.loads  # promptfoo's own filters: JSON.parse / JSON.stringify
    env.filters["dump"] = json.dumps
    return env


def render(template: str, variables: dict[str, Any]) -> str:
    """A Nunjucks-style template rendered with ``variables`` in Jinja2's sandbox (SPEC §22).

    The template has ``{{ var }}``, filters, ``{% for %}``. An attribute of an internal, a failing
    expression (``{{ 1/0 }}``) or a huge value is a :class:`ValueError` the caller makes its case's
    error, never code run.
    """
    if "{{" not in template and "{%" not in template and "{#" not in template:
        return template
    try:
        env = _environment()
    except ImportError:
        raise ValueError(
            "rendering promptfoo templates needs Jinja2: "
            "pip install 'pytest-agent-evalset[promptfoo]'"
        ) from None
    try:
        return str(env.from_string(template).render(**variables))
    except RecursionError:
        raise ValueError("template error: nested too deeply") from None
    except Exception as exc:  # the template is data: whatever it raises is its case's error
        kind = "" if type(exc).__module__.startswith("jinja2") else f"{type(exc).__name__}: "
        raise ValueError(f"template error: {kind}{exc}") from None


def default_test(doc: Document, base: Path) -> tuple[dict[str, Any], Source]:
    raw = doc.data.get("defaultTest") or {}
    source = Source(doc.path, doc.line(("defaultTest",)), doc, ("defaultTest",))
    try:
        raw = resolve_refs(raw, doc.data)
    except ValueError as exc:  # every test uses the default: the file's problem
        raise EvalFileError(doc.path, source.line, f"defaultTest: {exc}") from None
    if isinstance(raw, str) and raw.startswith("file://"):
        loaded = list(_file_tests(raw, base, source))
        if len(loaded) != 1:
            raise EvalFileError(
                doc.path, source.line, f"defaultTest {raw}: expected one test, got {len(loaded)}"
            )
        return loaded[0][0], loaded[0][1]
    if not isinstance(raw, dict):
        raise EvalFileError(doc.path, source.line, "defaultTest: expected a mapping of test fields")
    return raw, source


def tests_of(doc: Document, base: Path) -> list[tuple[Any, Source, PathKey]]:
    """Every test with where it came from: inline, or each row of a ``file://`` tests file."""
    raw = doc.data.get("tests", [{}])
    items = raw if isinstance(raw, list) else [raw]
    out: list[tuple[Any, Source, PathKey]] = []
    for i, item in enumerate(items):
        key: PathKey = ("tests", i) if isinstance(raw, list) else ("tests",)
        source = Source(doc.path, doc.line(key), doc, key)
        if isinstance(item, str):
            try:
                out.extend((test, where, key) for test, where in _file_tests(item, base, source))
            except EvalFileError as exc:
                out.append((exc, source, key))
        else:
            out.append((item, source, key))
    return out


def _file_tests(ref: str, base: Path, source: Source) -> list[tuple[Any, Source]]:
    """The tests of a ``file://`` tests entry (a glob: every match).

    A file the entry may not read, or cannot, is one error of that entry.
    """
    if not ref.startswith("file://"):
        raise EvalFileError(
            source.path, source.line, f"tests entry {ref!r}: not supported (use `file://path`)"
        )
    pattern = ref[len("file://") :]
    try:
        paths = trust.glob(base, pattern, f"tests {ref}") if "*" in pattern else [base / pattern]
    except trust.Refused as exc:
        raise EvalFileError(source.path, source.line, str(exc)) from None
    out: list[tuple[Any, Source]] = []
    for path in paths:
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".yaml", ".yml", ".json"):
            raise EvalFileError(
                source.path,
                source.line,
                f"not supported: tests file {ref} (CSV, JSON, JSONL, YAML)",
            )
        try:
            text = trust.read_text(
                path, f"tests file {path}", "utf-8-sig" if suffix == ".csv" else "utf-8"
            )
        except trust.Refused as exc:
            raise EvalFileError(source.path, source.line, str(exc)) from None
        if suffix == ".csv":
            out.extend(_csv_tests(path, text))
        elif suffix == ".jsonl":
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        out.append((json.loads(line), Source(path, n)))
                    except (ValueError, RecursionError) as exc:
                        out.append((EvalFileError(path, n, f"not JSON: {exc}"), Source(path, n)))
        else:
            tests = read_document(path, text, core=True)  # as promptfoo reads it: js-yaml, YAML 1.2
            items = tests.data if isinstance(tests.data, list) else [tests.data]
            for n, item in enumerate(items):
                key = (n,) if isinstance(tests.data, list) else ()
                out.append((item, Source(path, tests.line(key), tests, key)))
    if not paths:
        raise EvalFileError(source.path, source.line, f"tests {ref}: no such file")
    return out


def _csv_tests(path: Path, text: str) -> list[tuple[Any, Source]]:
    """The tests of a CSV tests file, one a row.

    A row that cannot be read (a cell over the CSV reader's limit, a broken quote) is that row's
    error, and the rows after it are read.
    """
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, [])
    except csv.Error as exc:
        return [({"__error": f"the header row cannot be read: {exc}"}, Source(path, 1))]
    out: list[tuple[Any, Source]] = []
    line = reader.line_num
    while True:
        where = Source(path, line + 1)
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            line = reader.line_num
            out.append(({"__error": f"the row cannot be read: {exc}"}, where))
            continue
        line = reader.line_num
        if not any(cells):
            continue
        if len(cells) > len(header):
            out.append(({"__error": "a row has more cells than the header has columns"}, where))
            continue
        out.append((_csv_test(header, cells), where))
    return out


def _csv_test(header: list[str], cells: list[str]) -> dict[str, Any]:
    test: dict[str, Any] = {"vars": {}, "assert": []}
    for column, value in itertools.zip_longest(header, cells, fillvalue=""):
        if re.fullmatch(r"__expected\d*", column):
            if value:
                test["assert"].append(value)
        elif column == "__description":
            test["description"] = value
        elif column == "__threshold":
            test["threshold"] = (
                _number(value) if value else None
            )  # not a number: the test's own error
        elif column.startswith("__metadata:"):
            test.setdefault("metadata", {})[column[len("__metadata:") :]] = value
        elif column.startswith("__"):
            return {"__error": f"not supported: CSV column {column}"}
        else:
            test["vars"][column] = value
    return test


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def assertion_of_string(text: str) -> dict[str, Any]:
    """An assertion in promptfoo's assertion string syntax (CSV ``__expected``).

    ``type:value``, ``type(threshold):value``, ``not-type:value``; ``grade:`` is ``llm-rubric``;
    anything else is ``equals``.
    """
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


def read_var(value: Any, base: Path, source: Source, problems: list[str]) -> Any:
    """A var's value, read from its file for ``file://``.

    ``file://`` reads the file (text; JSON and YAML parsed), as promptfoo does,
    when it is a regular file inside the project (:mod:`pytest_agent_eval.cases.trust`); what cannot
    be read or parsed is a problem of the case.
    """
    if not isinstance(value, str) or not value.startswith("file://"):
        return value
    path = base / value[len("file://") :]
    if path.suffix in (".py", ".js", ".ts", ".mjs", ".cjs"):
        problems.append(source.error(f"not supported: var {value} (script vars)"))
        return value
    try:
        text = trust.read_text(path, f"var {value}")
        if path.suffix == ".json":
            return json.loads(text)
        if path.suffix in (".yaml", ".yml"):
            return read_document(path, text, core=True).data
    except trust.Refused as exc:
        problems.append(source.error(str(exc)))
    except (ValueError, RecursionError) as exc:
        problems.append(source.error(f"var {value}: not JSON: {exc}"))
    except EvalFileError as exc:
        problems.append(source.error(f"var {value}: {exc.format()}"))
    except EvalFileErrors as exc:
        problems.append(source.error(f"var {value}: {exc.errors[0].format()}"))
    else:
        return text
    return value


MAX_REF_DEPTH = 20
"""References followed through at most this many others (a longer chain is almost surely a loop)."""


def resolve_refs(value: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """``value`` with each ``{$ref: '#/json/pointer', …}`` replaced by what the pointer names.

    The pointer names a part of the config (``root``), the ref's other keys go over it: promptfoo
    dereferences a config so (``assertionTemplates``). Raises ``ValueError`` naming a reference that
    points nowhere, outside the config, or in a loop, and when the references make more than
    ``MAX_ALIASED`` values (a few lines of references to lists of references can mean billions: SPEC
    §22).
    """
    if budget is None:
        budget = [MAX_ALIASED]
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(
            f"$refs expand to more than {MAX_ALIASED:,} values (references to lists of references?)"
        )
    if isinstance(value, list):
        return [resolve_refs(v, root, depth, budget) for v in value]
    if not isinstance(value, dict):
        return value
    if "$ref" not in value:
        return {k: resolve_refs(v, root, depth, budget) for k, v in value.items()}
    ref = value["$ref"]
    if depth >= MAX_REF_DEPTH:
        raise ValueError(f"$ref {ref!r}: references nested deeper than {MAX_REF_DEPTH} (a loop?)")
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ValueError(
            f"not supported: $ref {ref!r} (only references inside the config, `#/path/to/it`, e.g. "
            "`#/assertionTemplates/name`; copy what another file holds into the config)"
        )
    target = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        name = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and name in target:
            target = target[name]
        elif isinstance(target, list) and name.isdigit() and int(name) < len(target):
            target = target[int(name)]
        else:
            raise ValueError(
                f"$ref {ref!r}: the config has nothing at that path ({name!r} not found)"
            )
    resolved = resolve_refs(target, root, depth + 1, budget)
    rest = {k: resolve_refs(v, root, depth, budget) for k, v in value.items() if k != "$ref"}
    if rest and isinstance(resolved, dict):
        return {**resolved, **rest}
    return resolved
