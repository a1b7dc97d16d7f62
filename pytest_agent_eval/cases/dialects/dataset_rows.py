"""Dataset rows (SPEC §19): one case per row of a dataset export, checked by its sidecar.

JSON or JSONL files of rows as LangSmith, Langfuse, Braintrust and inspect_ai export them, one case
per row, with checks from the sidecar ``<stem>.expect.yaml``.

A row: ``input`` (LangSmith: ``inputs``), the reference answer in ``expected`` (Braintrust),
``expected_output`` (Langfuse's Python SDK), ``expectedOutput`` (Langfuse's API), ``outputs``
(LangSmith) or ``target`` (inspect_ai; a list lists alternatives, any one right), ``metadata`` and
``id``; the exports' bookkeeping fields (timestamps, dataset ids, …, camelCase or snake_case) are
read and left aside. The sidecar is a native file without ``cases`` (SPEC §3): ``agent``,
``tool_dispatch``, ``tags``, ``defaults`` and ``expect`` (the checks of every row). The reference
answer is the case's ``reference``: the ``matches_reference`` check and the judge read it. A dataset
without a sidecar is a warning (its rows have no checks); a sidecar without its dataset is an error
naming the dataset it may have meant.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from pathlib import Path
from typing import Any

from pytest_agent_eval.cases.dialects import native
from pytest_agent_eval.cases.dialects.base import Dialect
from pytest_agent_eval.cases.dialects.common import Ids, Problems, explicit_id, pretty
from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.case import Case, LoadedFile
from pytest_agent_eval.core.document import Document, PathKey, read_document
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.core.files import SIDECAR_SUFFIXES, sidecar_stem

NAME = "dataset_rows"
NEED = (
    "a list (JSON or JSONL) of rows with `input` (or `inputs`) and a reference answer or `metadata`"
)
INPUT_KEYS = ("input", "inputs")
REFERENCE_KEYS = ("expected", "expected_output", "expectedOutput", "outputs", "target")
BOOKKEEPING = frozenset(
    {
        # LangSmith
        "name", "created_at", "modified_at", "dataset_id", "source_run_id", "split",
        "attachment_urls",
        # Langfuse: the API's camelCase, and the Python SDK's snake_case (DatasetItem.dict())
        "datasetId", "status", "sourceTraceId", "sourceObservationId", "createdAt", "updatedAt",
        "datasetName", "mediaReferences", "source_trace_id", "source_observation_id",
        "dataset_name", "updated_at",
        # Braintrust
        "tags", "created", "_xact_id", "_pagination_key", "project_id", "span_id", "root_span_id",
        "is_root", "origin", "_object_delete",
        # inspect_ai
        "choices", "sandbox", "files", "setup",
    }
)  # fmt: skip
"""Fields of the exports that say nothing about the case, left aside.

``tags`` become the case's tags.
"""
ROW_KEYS = frozenset({"id", "metadata", *INPUT_KEYS, *REFERENCE_KEYS, *BOOKKEEPING})
SIDECAR_KEYS = (
    "agent",
    "agents",
    "tool_dispatch",
    "tags",
    "defaults",
    "expect",
    "name",
    "description",
)
QUERY_KEYS = ("query", "question", "input", "prompt", "message", "text")


def sidecar_schema(registry: CheckRegistry) -> dict[str, Any]:
    """The JSON Schema of a sidecar: the native file's fields but ``cases``, and ``expect``.

    Printed by ``agent-eval schema --format sidecar``.
    """
    from pytest_agent_eval.cases.dialects.native_schema import native_schema

    schema = native_schema(registry)
    properties = {k: v for k, v in schema["properties"].items() if k != "cases"}
    properties["expect"] = {"$ref": "#/$defs/expect", "description": "the checks of every row"}
    return {
        **schema,
        "$id": schema["$id"].replace("native.json", "sidecar.json"),
        "title": "pytest-agent-eval dataset sidecar (<stem>.expect.yaml)",
        "properties": properties,
        "required": [],
    }


def detect(data: Any) -> tuple[bool, str]:
    """Whether ``data`` is a list of rows as the exports write them.

    A non-empty list of mappings, each with an input, the keys all those of the exports, and some
    row with a reference answer or ``metadata``.
    """
    if not isinstance(data, list) or not data or not all(isinstance(row, dict) for row in data):
        return False, NEED
    if not all(any(k in row for k in INPUT_KEYS) for row in data):
        return False, f"{NEED} (a row has no `input`)"
    keys: set[str] = set().union(*(row.keys() for row in data))
    if not keys <= ROW_KEYS:
        return False, f"{NEED} (rows have {', '.join(sorted(keys - ROW_KEYS))})"
    if not keys & {*REFERENCE_KEYS, "metadata"}:
        return False, f"{NEED} (no row has a reference answer or `metadata`)"
    return True, ""


def sidecar_of(path: Path) -> Path | None:
    """The dataset's checks file beside it, if there is one.

    It is ``<stem>.expect.yaml`` (or ``.yml``).
    """
    for suffix in SIDECAR_SUFFIXES:
        candidate = path.with_name(path.stem + suffix)
        if candidate.is_file():
            return candidate
    return None


def claims(path: Path) -> bool:
    """Whether the file has a sidecar: a dataset with its sidecar is a dataset.

    Whatever else its rows' shape fits (a golden set).
    """
    return sidecar_of(path) is not None


def load(doc: Document, registry: CheckRegistry) -> LoadedFile:
    """One case per row; the sidecar's problems are the file's, a row's problems its own case's."""
    sidecar_path = sidecar_of(doc.path)
    sidecar = _sidecar(sidecar_path, registry) if sidecar_path is not None else ({}, {})
    settings, lines = sidecar
    ids = Ids()
    rows: list[dict[str, Any]] = []
    row_lines: dict[PathKey, int] = {}
    extra: dict[int, tuple[str | list[str] | None, dict[str, Any]]] = {}
    errors: list[tuple[int, Case]] = []
    alternatives: dict[int, list[str]] = {}  # inspect_ai's list targets: any one is right
    for index, raw in enumerate(doc.data):
        key: PathKey = (index,)
        line = doc.line(key)
        problems = Problems(doc)
        if "id" in raw and raw["id"] not in (None, ""):
            case_id, original = explicit_id(raw["id"], line, ids, problems, (*key, "id"))
        else:
            case_id, original = ids.derive(f"row-{index + 1}", line), None
        problems.case_id = case_id
        query, context = _input(raw, problems, key)
        reference = _reference(raw)
        if (
            _reference_key(raw) == "target"
            and isinstance(raw["target"], list)
            and len(raw["target"]) > 1
        ):
            alternatives[index] = [str(t) for t in raw["target"]]
        if problems:
            errors.append(
                (index, Case(case_id, doc.path, line, error=problems.text(), dialect=NAME))
            )
            continue
        row: dict[str, Any] = {
            "id": case_id,
            "input": {"query": query, "context": context} if context else query,
        }
        if original:
            row["description"] = original
        metadata = raw.get("metadata")
        if isinstance(metadata, dict) and metadata:
            row["metadata"] = metadata
        tags = raw.get("tags")
        if isinstance(tags, list) and all(isinstance(t, str) for t in tags) and tags:
            row["tags"] = tags
        row_lines[("cases", len(rows))] = line
        extra[len(rows)] = (alternatives.get(index, reference), raw)
        rows.append(row)
    data = {**settings, "cases": rows}
    built = native.load(Document(doc.path, data, {**lines, **row_lines}), registry)
    cases = [
        dataclasses.replace(
            case, dialect=NAME, reference=extra[i][0], reference_any=isinstance(extra[i][0], list)
        )
        for i, case in enumerate(built.cases)
    ]
    for index, case in errors:  # in row order
        cases.insert(index, case)
    notes = [] if sidecar_path is not None else [no_sidecar(doc.path)]
    return LoadedFile(
        doc.path,
        NAME,
        cases,
        name=built.name,
        description=built.description,
        agents=built.agents,
        notes=notes,
    )


class NoSidecarWarning(UserWarning):
    """A dataset with no sidecar: its rows run without checks.

    ``filterwarnings`` can silence it.
    """


def no_sidecar(path: Path) -> str:
    """The note for a dataset without a sidecar (a near miss beside it, if there is one, named)."""
    want = path.stem + SIDECAR_SUFFIXES[0]
    near = _near(
        path.stem, [p for p in path.parent.iterdir() if sidecar_stem(p) is not None], sidecar_stem
    )
    hint = (
        f"; {near.name} is beside it: rename it {want}"
        if near is not None
        else f" (write them in {want})"
    )
    return f"{path}: no sidecar {want}: its rows have no checks, each only has to be answered{hint}"


def orphan_error(path: Path) -> EvalFileError:
    """The error of a sidecar with no dataset beside it, naming the dataset it may have meant."""
    stem = sidecar_stem(path) or path.stem
    datasets = [
        p for p in path.parent.iterdir()
        if p.suffix.lower() in (".jsonl", ".json", ".yaml", ".yml") and sidecar_stem(p) is None
    ]  # fmt: skip
    near = _near(stem, datasets, lambda p: p.stem)
    if near is not None:
        hint = (
            f' (did you mean "{near.stem}{path.name[len(stem) :]}", '
            f"the sidecar of {near.name}?); rename it"
        )
    else:
        hint = f"; put the dataset beside it as {stem}.jsonl or {stem}.json, or rename the sidecar"
    return EvalFileError(
        path, 1, f"a dataset sidecar with no dataset {stem}.jsonl or {stem}.json beside it{hint}"
    )


def _near(stem: str, paths: list[Path], key: Any) -> Path | None:
    names = {str(key(p)): p for p in paths}
    close = difflib.get_close_matches(stem, list(names), n=1, cutoff=0.8)
    return names[close[0]] if close else None


def _sidecar(path: Path, registry: CheckRegistry) -> tuple[dict[str, Any], dict[PathKey, int]]:
    """The sidecar as the native file fields it stands for, checked as such.

    Its ``expect`` goes into ``defaults``.
    """
    sidecar = read_document(path)
    data = sidecar.data
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise EvalFileError(
            path, 1, f"a dataset's sidecar is a mapping of {', '.join(SIDECAR_KEYS)}"
        )
    problems = Problems(sidecar)
    problems.unknown_keys(data, SIDECAR_KEYS, (), "sidecar")
    if problems:
        raise EvalFileErrors(problems.in_order())
    settings = {k: v for k, v in data.items() if k != "expect"}
    lines = dict(sidecar.lines)
    if "expect" in data:
        defaults = data.get("defaults")
        if defaults is not None and not isinstance(defaults, dict):
            raise EvalFileError(
                path, sidecar.line(("defaults",)), "defaults: expected a mapping of case fields"
            )
        expect = data["expect"]
        own = (defaults or {}).get("expect")
        merged = {**own, **expect} if isinstance(own, dict) and isinstance(expect, dict) else expect
        settings["defaults"] = {**(defaults or {}), "expect": merged}
        for key, line in sidecar.lines.items():
            if key[:1] == ("expect",):
                lines[("defaults", *key)] = line
    # checked as a native file with one stand-in case: its problems are the sidecar's, at the
    # sidecar's lines
    try:
        native.load(
            Document(path, {**settings, "cases": [{"id": "row", "input": "?"}]}, lines), registry
        )
    except (EvalFileError, EvalFileErrors) as exc:
        errors = exc.errors if isinstance(exc, EvalFileErrors) else [exc]
        if "expect" in data and not isinstance((data.get("defaults") or {}).get("expect"), dict):
            for err in errors:  # the sidecar's own `expect`, not the `defaults` it stands for
                err.message = err.message.replace("defaults.expect", "expect")
        raise EvalFileErrors(errors) from None
    return settings, {k: v for k, v in lines.items() if k[:1] != ("cases",)}


def _input(raw: dict[str, Any], problems: Problems, key: PathKey) -> tuple[str, dict[str, Any]]:
    """The query and context of a row's input.

    The input is a string; a mapping (its one text, or its ``question``/``query``/… with the rest as
    context); a chat (the last user message, the earlier ones as ``history``).
    """
    name = "input" if "input" in raw else "inputs"
    value = raw.get(name)
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict):
        texts = [v for v in value.values() if isinstance(v, str)]
        for field in QUERY_KEYS:
            if isinstance(value.get(field), str):
                rest = {k: v for k, v in value.items() if k != field}
                return value[field], ({"inputs": rest} if rest else {})
        if len(value) == 1 and len(texts) == 1:
            return texts[0], {}
        return json.dumps(value, ensure_ascii=False), {"inputs": value}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and "role" in m for m in value)
    ):
        users = [i for i, m in enumerate(value) if m.get("role") == "user"]
        if users:
            last = users[-1]
            history = value[:last]
            return str(value[last].get("content", "")), ({"history": history} if history else {})
    problems.add(
        (*key, name),
        f"{pretty((*key, name))}: expected a string, a mapping or a chat (a list of "
        f"{{role, content}} with a user message), got {value!r}",
    )
    return "", {}


def _reference_key(raw: dict[str, Any]) -> str | None:
    """The field the row's reference answer is read from."""
    return next((name for name in REFERENCE_KEYS if raw.get(name) is not None), None)


def _reference(raw: dict[str, Any]) -> str | None:
    """The row's reference answer as text: a string; a mapping's one value; else its JSON."""
    for name in REFERENCE_KEYS:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and len(value) == 1:
            (only,) = value.values()
            return only if isinstance(only, str) else json.dumps(only, ensure_ascii=False)
        if isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) == 1:
            return str(value[0])
        return json.dumps(value, ensure_ascii=False)
    return None


DIALECT = Dialect(NAME, detect, load, fallback=True, claims=claims)
