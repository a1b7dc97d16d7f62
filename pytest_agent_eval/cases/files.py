"""Which files are eval files (SPEC §2): shared by the plugin and the command-line tool, which imports no pytest."""

from __future__ import annotations

import fnmatch
from pathlib import Path

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)

DEFAULT_FILES = "eval_*.yaml eval_*.yml eval_*.json *.eval.yaml *.eval.yml *.eval.json"


def is_eval_file(path: Path, patterns: tuple[str, ...], explicit: bool) -> bool:
    """Collected when the name matches an ``agent_eval_files`` pattern, or a YAML/JSON file is named on the CLI."""
    if path.suffix.lower() not in YAML_SUFFIXES + JSON_SUFFIXES:
        return False
    return explicit or any(fnmatch.fnmatch(path.name, p) for p in patterns)
