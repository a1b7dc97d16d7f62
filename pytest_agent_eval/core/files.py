"""Which files are eval files (SPEC §2).

Shared by the plugin and the command-line tool, which imports no pytest.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl",)
"""One JSON value a line: dataset exports (SPEC §19)."""
SIDECAR_SUFFIXES = (".expect.yaml", ".expect.yml")
"""A dataset's checks (``<stem>.expect.yaml``): read with its dataset, never an eval file itself."""
CALIBRATION_SUFFIXES = (
    ".calibration.yaml",
    ".calibration.yml",
    ".calibration.json",
    ".calibration.jsonl",
)
"""The suffixes of a judge's calibration set (SPEC §26).

Such a file is collected as calibration items (``plugin.calibration``), not cases.
"""

DEFAULT_FILES = (
    "eval_*.yaml eval_*.yml eval_*.json eval_*.jsonl "
    "*.eval.yaml *.eval.yml *.eval.json *.eval.jsonl "
    "promptfooconfig.yaml promptfooconfig.yml"
)


def is_eval_file(path: Path, patterns: tuple[str, ...], explicit: bool) -> bool:
    """Whether ``path`` is collected as an eval file.

    It is when the name matches an ``agent_eval_files`` pattern, or a YAML/JSON(L) file is named on
    the CLI; a dataset's sidecar (``<stem>.expect.yaml``) never is.
    """
    if path.suffix.lower() not in YAML_SUFFIXES + JSON_SUFFIXES + JSONL_SUFFIXES:
        return False
    if path.name.lower().endswith(SIDECAR_SUFFIXES + CALIBRATION_SUFFIXES):
        return False
    return explicit or any(fnmatch.fnmatch(path.name, p) for p in patterns)


def sidecar_stem(path: Path) -> str | None:
    """The dataset stem of a sidecar's name, or ``None`` for another file.

    ``eval_rows.expect.yaml`` -> ``eval_rows``.
    """
    name = path.name
    suffix = next((s for s in SIDECAR_SUFFIXES if name.lower().endswith(s)), None)
    return name[: -len(suffix)] if suffix is not None else None


def orphan_sidecar(path: Path, patterns: tuple[str, ...], explicit: bool) -> bool:
    """Whether ``path`` is a sidecar with no dataset beside it, to be reported as an error.

    A sidecar whose dataset would be an eval file (or that was named on the command line) is
    reported, never ignored in silence: a misnamed sidecar would leave its rows unchecked.
    """
    stem = sidecar_stem(path)
    if stem is None:
        return False
    datasets = [
        path.with_name(stem + suffix) for suffix in JSONL_SUFFIXES + JSON_SUFFIXES + YAML_SUFFIXES
    ]
    if any(dataset.is_file() for dataset in datasets):
        return False
    return explicit or any(fnmatch.fnmatch(d.name, p) for d in datasets for p in patterns)
