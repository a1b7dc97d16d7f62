"""The JSON Schema of the ``--agent-eval-report`` file, shipped in the package.

No pytest import: the CLI uses it.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCHEMA_VERSION = 1


def report_schema() -> dict[str, Any]:
    """The schema of the report file (``pytest_agent_eval/report/report.schema.json``)."""
    text = (
        resources.files("pytest_agent_eval.report")
        .joinpath("report.schema.json")
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


def report_text(document: dict[str, Any]) -> str:
    """The report as JSON text: a line per top-level key and a line per case.

    Readable, and a diff shows the cases that changed. Each line comes from the C encoder;
    ``indent`` would take the pure-Python one (0.4 s of a 10,000-case report).
    """
    parts = []
    for key, value in document.items():
        name = json.dumps(key)
        if key == "cases" and value:
            cases = ",\n  ".join(json.dumps(case, ensure_ascii=False) for case in value)
            parts.append(f" {name}: [\n  {cases}\n ]")
        else:
            parts.append(f" {name}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
