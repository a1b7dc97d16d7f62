"""JSON Lines files (dataset exports, SPEC §19): one JSON value a line, each item at its line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agent_eval.core.errors import EvalFileError


def read_jsonl(
    path: Path, text: str
) -> tuple[list[Any], dict[tuple[str | int, ...], int], list[EvalFileError]]:
    """The lines' values, the line of each and the error of each line that is not JSON.

    Blank lines are skipped; each value's line is ``(n,)``. One bad line is its own error, the other
    lines are read (SPEC §22); a file with no good line is one error.
    """
    data: list[Any] = []
    lines: dict[tuple[str | int, ...], int] = {(): 1}
    bad: list[EvalFileError] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data.append(json.loads(line))
        except json.JSONDecodeError as exc:
            why = (
                f"JSON Lines syntax error: {exc.msg} (column {exc.colno}); "
                "each line is one JSON value"
            )
            bad.append(EvalFileError(path, number, why))
            continue
        except RecursionError:
            bad.append(EvalFileError(path, number, "JSON nested too deeply; flatten the data"))
            continue
        lines[(len(data) - 1,)] = number
    if bad and not data:
        raise bad[0]
    return data, lines, bad
