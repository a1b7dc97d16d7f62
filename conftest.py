"""Root conftest: its presence puts the repository root on sys.path, so `examples.*` agents import.

It also hands ``README.md`` and the pages of ``docs/`` to sybil (SPEC §21): every YAML, JSON and
Python example in them is a test item. By default a YAML or JSON block is an eval file, loaded with
the plugin's own loader and schema (as ``agent-eval validate`` does: no agent is imported), and a
Python block is executed. An HTML comment right before a block, ``<!-- example: KIND -->``, says it
is something else:

* ``file-fields`` — the top of an eval file (``agent:``, ``agents:``, ``tool_dispatch:`` …):
  validated with one case added;
* ``yaml`` / ``json`` — data of another kind (a CI workflow's steps, a shortened report): parsed;
* ``compile`` — Python that needs your project (``from myproject import …``): compiled, not run;
* ``files`` — one file of a multi-file example that a test runs as a project
  (``tests/test_docs_extending.py``): parsed or compiled here.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

try:
    from sybil import Example, Sybil
    from sybil.parsers.markdown import CodeBlockParser
except (
    ImportError
):  # sybil comes with the dev extra; without it the docs' examples are not collected
    Sybil = None

_KIND = re.compile(r"<!-- example: ([\w-]+) -->\s*\Z")
_NAMED = re.compile(
    r"#\s*([\w./-]+\.(?:ya?ml|json|py))\s*$"
)  # a block's first line naming its file
_KINDS = {"file-fields", "yaml", "json", "compile", "files"}


def _kind(example: Example) -> str:
    found = _KIND.search(example.document.text[: example.region.start])
    kind = found.group(1) if found else "default"
    assert kind in _KINDS | {"default"}, f"unknown example kind {kind!r}: one of {sorted(_KINDS)}"
    return kind


def _validate_eval_file(text: str, suffix: str, example: Example) -> None:
    """Load the text as an eval file with the plugin's loader; fail with every problem it finds."""
    from pytest_agent_eval.cases.load import builtin_dialects
    from pytest_agent_eval.checks import builtin_registry
    from pytest_agent_eval.cli import validate_file

    first = text.split("\n", 1)[0]
    named = _NAMED.match(first)
    name = Path(named.group(1)).name if named else f"eval_example{suffix}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        what, problems, _ = validate_file(path, builtin_registry(), builtin_dialects())
    where = f"{example.path}:{example.line}"
    assert not problems, f"{where}: the example is not a valid eval file ({what}):\n" + "\n".join(
        problems
    )
    assert what not in {"unknown format", "unreadable"}, f"{where}: {what}"


def _with_a_case(data: Any) -> str:
    assert isinstance(data, dict) and "cases" not in data, (
        "file-fields: a mapping of file-level keys, no cases"
    )
    return json.dumps({**data, "cases": [{"id": "example", "input": "hi"}]})


def evaluate_yaml(example: Example) -> None:
    import yaml

    kind = _kind(example)
    data = yaml.safe_load(example.parsed)  # every block parses
    if kind == "default":
        _validate_eval_file(example.parsed, ".yaml", example)
    elif kind == "file-fields":
        _validate_eval_file(_with_a_case(data), ".json", example)


def evaluate_json(example: Example) -> None:
    kind = _kind(example)
    data = json.loads(example.parsed)
    if kind == "default":
        _validate_eval_file(example.parsed, ".json", example)
    elif kind == "file-fields":
        _validate_eval_file(_with_a_case(data), ".json", example)


def evaluate_python(example: Example) -> None:
    code = compile(example.parsed, f"{example.path}:{example.line}", "exec")
    if _kind(example) == "default":
        exec(code, {"__name__": f"docs_example_{example.line}"})


if Sybil is not None:
    pytest_collect_file = Sybil(
        parsers=[
            CodeBlockParser("yaml", evaluate_yaml),
            CodeBlockParser("json", evaluate_json),
            CodeBlockParser("python", evaluate_python),
        ],
        patterns=["README.md", "docs/*.md", "docs/*/*.md"],
        excludes=["examples/*", "examples/*/*", "benchmarks/*", "tests/*"],
    ).pytest()
