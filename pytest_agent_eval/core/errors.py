"""Errors raised while reading eval files: each names the file, the line and what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


class EvalFileError(Exception):
    """A problem with an eval file, located at ``path:line``."""

    def __init__(
        self, path: Path | str, line: int | None, message: str, case_id: str | None = None
    ):
        self.path = Path(path)
        self.line = line
        self.message = message
        self.case_id = case_id
        super().__init__(self.format())

    def format(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else f"{self.path}"
        case = f" (case {self.case_id})" if self.case_id else ""
        return f"{where}: {self.message}{case}"


class UnknownFormat(EvalFileError):
    """A file that fits no known format, or several."""


class EvalFileErrors(Exception):
    """Several problems with one file, reported together."""

    def __init__(self, errors: list[EvalFileError]):
        self.errors = errors
        super().__init__("\n".join(e.format() for e in errors))


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """``' (did you mean "x"?)'`` when a close match exists, else ``''``."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f' (did you mean "{matches[0]}"?)' if matches else ""
