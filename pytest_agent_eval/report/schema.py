"""The JSON Schema of the ``--agent-eval-report`` file, shipped in the package (no pytest import: the CLI uses it)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCHEMA_VERSION = 1


def report_schema() -> dict[str, Any]:
    """The schema of the report file (``pytest_agent_eval/report/report.schema.json``)."""
    text = resources.files("pytest_agent_eval.report").joinpath("report.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
