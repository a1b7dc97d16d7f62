"""JSON Lines files (dataset exports, SPEC §19): one JSON value a line, each item at its own line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agent_eval.core.errors import EvalFileError


def read_jsonl(path: Path, text: str) -> tuple[list[Any], dict[tuple[str | int, ...], int]]:
    """The lines' values (blank lines skipped) and the line of each (``(n,)``); a bad line is an error."""
    data: list[Any] = []
    lines: dict[tuple[str | int, ...], int] = {(): 1}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise EvalFileError(
                path, number, f"JSON Lines syntax error: {exc.msg} (column {exc.colno}); each line is one JSON value"
            ) from exc
        except RecursionError as exc:
            raise EvalFileError(path, number, "JSON nested too deeply; flatten the data") from exc
        lines[(len(data) - 1,)] = number
    return data, lines
