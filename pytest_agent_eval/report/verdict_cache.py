"""The verdict cache's key and storage (SPEC §25 "Verdict cache").

A case's record may be reused without running its agent only while everything its verdict depends
on is unchanged. Plain Python, no pytest.

The key is a SHA-256 over, in a canonical JSON form:

* the case's content hash (``case_input.content_hash``: every field of the case but where it is: its
  input, checks, mocks, agent reference, repeat ...);
* the agent's fingerprint: a declared ``agent_version``, else its reference and a hash of the source
  of its module and of every module of the project (under the rootdir) that module imports,
  transitively (:func:`agent_fingerprint`);
* the models and parameters configured (what the caller passes: e.g. ``AGENT_EVAL_LLM_MODEL``, the
  repeat override, the matrix agent);
* the judge: its model and prompt template;
* the mocks the session adds to the case's own (``agent_eval_tool_responses``);
* the plugin's version.

Storage: the run store's ``verdicts`` table (SPEC §24, ``memory.store``). A row read back is
checked field by field (:func:`trusted`): one that cannot be trusted is a miss, never a verdict; a
row written by another plugin version is never reused.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.version import __version__


@dataclass(frozen=True)
class KeyParts:
    """Everything a case's verdict depends on; :meth:`key` is the cache key."""

    content_hash: str
    agent: str
    """The agent's fingerprint (:func:`agent_fingerprint`)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """The models and parameters configured (JSON-able)."""
    judge_model: str | None = None
    judge_prompt: str = ""
    mocks: Mapping[str, Any] = field(default_factory=dict)
    """Tool mocks from outside the case (the session's ``agent_eval_tool_responses``)."""
    version: str = __version__

    def key(self) -> str:
        data = {
            "case": self.content_hash,
            "agent": self.agent,
            "settings": dict(self.settings),
            "judge": [self.judge_model, self.judge_prompt],
            "mocks": dict(self.mocks),
            "version": self.version,
        }
        return hashlib.sha256(_KEY_JSON.encode(data).encode("utf-8")).hexdigest()


_KEY_JSON = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr
)
"""The key's JSON form (made once: ``json.dumps`` with these options makes an encoder per call)."""


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of module ``name`` when it is the project's own.

    The project's own: found on ``sys.path`` under ``root``; ``None`` otherwise (the standard
    library, an installed package: their version is not the project's to change). Found on the file
    system: nothing is imported (``importlib.util.find_spec`` imports a dotted name's parents).
    """
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    top = root.resolve()
    for entry in [*sys.path, str(top)]:
        try:
            base = Path(entry or ".").resolve()
            base.relative_to(top)
        except (ValueError, OSError):
            continue
        if any(
            part in {"site-packages", "dist-packages"} for part in base.parts
        ):  # a venv inside the project
            continue
        for path in (
            base.joinpath(*parts[:-1], parts[-1] + ".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            if path.is_file():
                return path
    return None


def _imported(source: str, package: str) -> list[str]:
    """The modules ``source`` imports.

    ``import a.b``, ``from a import b`` as ``a`` and ``a.b``, relative ones resolved against
    ``package``.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            if base:
                names.append(base)
                names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def project_sources(module: str, root: Path) -> dict[str, str]:
    """``{module: sha256 of its source}`` of ``module`` and of the project's modules it imports.

    Every module of the project it imports, transitively; the project's modules only (found under
    ``root``).
    """
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name in sys.builtin_module_names:
            continue
        path = _module_file(name, root)
        if path is None:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            seen[name] = "unreadable"
            continue
        seen[name] = hashlib.sha256(data).hexdigest()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo += _imported(data.decode("utf-8", "replace"), package)
    return seen


def agent_fingerprint(
    ref: str | Mapping[str, Any] | None, root: Path, agent_version: str | None = None
) -> str:
    """The agent's part of the key.

    Its declared ``agent_version``, else its reference and the hashes of its module's source and of
    the project's modules it imports. An HTTP agent (a URL, ``{url, ...}``) or an agent from a
    fixture is its reference alone: declare an ``agent_version`` to cache it safely.
    """
    if agent_version:
        return f"version:{agent_version}"
    if isinstance(ref, str) and ":" in ref and "://" not in ref:
        module = ref.partition(":")[0]
        sources = project_sources(module, root)
        text = json.dumps({"ref": ref, "sources": sources}, sort_keys=True)
        return "source:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return "ref:" + json.dumps(ref, sort_keys=True, default=repr)


def trusted(text: str, case_id: str, content: str | None) -> tuple[dict[str, Any] | None, str]:
    """The record a cache row's JSON ``text`` holds, and ``""``; or ``None`` and why not trusted.

    Of the case ``case_id`` of content hash ``content``.

    Trusted: a report's case record field by field (``reading.case_problem``: types, ranges),
    of this case (its id and content hash), a verdict (passed or failed) that ran (trials), whose
    ``passes`` are its passing trials and whose outcome is the one its trials give.
    """
    from pytest_agent_eval.report.reading import case_problem

    try:
        record = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None, "not JSON"
    problem = case_problem(record)
    if problem is not None:
        return None, problem
    if record["outcome"] not in ("passed", "failed"):
        return None, f"outcome: {record['outcome']!r} is not a verdict"
    if record["case_id"] != case_id:
        return None, f"case_id: {record['case_id']!r}, not the case's {case_id!r}"
    if content is not None and record.get("content_hash") not in (None, content):
        return None, f"content_hash: {record.get('content_hash')!r}, not the case's {content!r}"
    trials = record.get("trials") or []
    if not trials:
        return None, "trials: none (a cached verdict comes from a case that ran)"
    passes = sum(bool(t.get("passed")) for t in trials)
    if record.get("passes") != passes:
        return None, f"passes: {record.get('passes')!r}, but {passes} of its trials passed"
    if _verdict(record, passes, len(trials)) != record["outcome"]:
        return None, f"outcome: {record['outcome']!r}, not the one its trials give"
    return record, ""


def _verdict(record: dict[str, Any], passes: int, n: int) -> str:
    """The outcome a record's trials give: enough passes at its ``min_pass_rate``.

    Of an adaptive case: of all its ``max`` trials.
    """
    rate = float(record.get("min_pass_rate", 1.0))
    used, saved = record.get("trials_used"), record.get("trials_saved")
    if isinstance(used, int) and isinstance(saved, int):  # as run.runner.passes_needed
        decided = passes >= max(0, math.ceil(rate * (used + saved) - 1e-9))
    else:
        decided = passes / n >= rate
    return "passed" if decided else "failed"
