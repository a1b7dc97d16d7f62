"""Reading the OTLP JSON lines files the plugin writes (``--agent-eval-traces``), for the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_traces(path: Path) -> list[dict[str, Any]]:
    """Every span of an OTLP JSON lines file.

    Each span as written, with its attributes as ``attrs`` (``{key: value}``, integers as ``int``)
    and its resource's attributes as ``resource``.
    """
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            found = attributes(resource["resource"].get("attributes", []))
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = attributes(span.get("attributes", []))
                    spans.append({**span, "resource": found})
    return spans


def attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    """OTLP's ``[{key, value: {stringValue: ...}}]`` as ``{key: value}``."""
    return {item["key"]: _value(item["value"]) for item in items}


def _value(value: dict[str, Any]) -> Any:
    ((kind, inner),) = value.items()
    return int(inner) if kind == "intValue" else inner
