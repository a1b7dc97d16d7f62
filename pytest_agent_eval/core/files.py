"""Which files are eval files (SPEC §2): shared by the plugin and the command-line tool, which imports no pytest."""

from __future__ import annotations

import fnmatch
from pathlib import Path

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
JSONL_SUFFIXES = (".jsonl",)
"""One JSON value a line: dataset exports (SPEC §19)."""
SIDECAR_SUFFIXES = (".expect.yaml", ".expect.yml")
"""A dataset's checks (``<stem>.expect.yaml``): read with its dataset, never an eval file itself."""

DEFAULT_FILES = (
    "eval_*.yaml eval_*.yml eval_*.json eval_*.jsonl *.eval.yaml *.eval.yml *.eval.json *.eval.jsonl "
    "promptfooconfig.yaml promptfooconfig.yml"
)


def is_eval_file(path: Path, patterns: tuple[str, ...], explicit: bool) -> bool:
    """Collected when the name matches an ``agent_eval_files`` pattern, or a YAML/JSON(L) file is named on the CLI;
    a dataset's sidecar (``<stem>.expect.yaml``) never is."""
    if path.suffix.lower() not in YAML_SUFFIXES + JSON_SUFFIXES + JSONL_SUFFIXES:
        return False
    if path.name.lower().endswith(SIDECAR_SUFFIXES):
        return False
    return explicit or any(fnmatch.fnmatch(path.name, p) for p in patterns)
