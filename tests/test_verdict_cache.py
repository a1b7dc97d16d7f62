"""The verdict cache's key and storage (SPEC §25): the key changes with each thing a verdict depends on, and with
nothing else; a row that cannot be read, or that another plugin version wrote, is a miss."""

from __future__ import annotations

import dataclasses
import importlib
import sqlite3
from pathlib import Path

import pytest

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.report.case_input import content_hash
from pytest_agent_eval.report.verdict_cache import KeyParts, VerdictCache, agent_fingerprint
from pytest_agent_eval.version import __version__

BASE = KeyParts(
    content_hash="0123456789abcdef",
    agent="source:abc",
    settings={"AGENT_EVAL_LLM_MODEL": "gpt-4o-mini", "repeat": None},
    judge_model="gpt-4o-mini",
    judge_prompt="You grade an AI agent's answer against a rubric.",
    mocks={"search": {"hits": 1}},
)


@pytest.mark.parametrize(
    "change",
    [
        {"content_hash": "fedcba9876543210"},
        {"agent": "source:abd"},
        {"settings": {"AGENT_EVAL_LLM_MODEL": "gpt-4o", "repeat": None}},
        {"settings": {"AGENT_EVAL_LLM_MODEL": "gpt-4o-mini", "repeat": 3}},
        {"judge_model": "claude-3-5-haiku"},
        {"judge_prompt": "You grade strictly."},
        {"mocks": {"search": {"hits": 2}}},
        {"version": "0.0.1"},
    ],
    ids=lambda change: next(iter(change)),
)
def test_each_part_invalidates_the_key(change: dict[str, object]) -> None:
    assert dataclasses.replace(BASE, **change).key() != BASE.key()  # type: ignore[arg-type]


def test_the_same_parts_make_the_same_key() -> None:
    again = KeyParts(**{f.name: getattr(BASE, f.name) for f in dataclasses.fields(BASE)})
    assert again.key() == BASE.key()
    assert dataclasses.replace(BASE, settings={"repeat": None, "AGENT_EVAL_LLM_MODEL": "gpt-4o-mini"}).key() == (
        BASE.key()
    )  # the order of a mapping is not a change


def test_the_case_content_is_the_case_not_its_place(tmp_path: Path) -> None:
    case = Case(id="a", path=tmp_path / "eval_a.yaml", line=3, query="hi", expect={"contains": ["ok"]})
    moved = dataclasses.replace(case, line=30)
    edited = dataclasses.replace(case, expect={"contains": ["okay"]})
    mocked = dataclasses.replace(case, tool_mocks={"search": {"hits": 1}})
    assert content_hash(moved) == content_hash(case)
    assert len({content_hash(case), content_hash(edited), content_hash(mocked)}) == 3


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with an agent module that imports a helper of its own, a package's module and the stdlib."""
    (tmp_path / "fp_agent.py").write_text(
        "import json\nimport fp_helper\nfrom fp_pkg import tools\n\ndef run(q, c):\n    return fp_helper.say()\n"
    )
    (tmp_path / "fp_helper.py").write_text("def say():\n    return 'ok'\n")
    (tmp_path / "fp_pkg").mkdir()
    (tmp_path / "fp_pkg" / "__init__.py").write_text("")
    (tmp_path / "fp_pkg" / "tools.py").write_text("from . import deep\n")
    (tmp_path / "fp_pkg" / "deep.py").write_text("X = 1\n")
    (tmp_path / "fp_unrelated.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path


@pytest.mark.parametrize("edited", ["fp_agent.py", "fp_helper.py", "fp_pkg/tools.py", "fp_pkg/deep.py"])
def test_the_agent_fingerprint_changes_with_its_projects_modules(project: Path, edited: str) -> None:
    before = agent_fingerprint("fp_agent:run", project)
    assert agent_fingerprint("fp_agent:run", project) == before
    (project / "fp_unrelated.py").write_text("Y = 2\n")  # not imported by the agent: no change
    assert agent_fingerprint("fp_agent:run", project) == before
    path = project / edited
    path.write_text(path.read_text() + "\n# edited\n")
    assert agent_fingerprint("fp_agent:run", project) != before


def test_a_declared_agent_version_stands_for_the_source(project: Path) -> None:
    before = agent_fingerprint("fp_agent:run", project, agent_version="2026-11-27")
    (project / "fp_helper.py").write_text("def say():\n    return 'changed'\n")
    assert agent_fingerprint("fp_agent:run", project, agent_version="2026-11-27") == before
    assert agent_fingerprint("fp_agent:run", project, agent_version="2026-11-28") != before
    assert agent_fingerprint("fp_agent:other", project) != agent_fingerprint("fp_agent:run", project)
    assert agent_fingerprint("http://127.0.0.1:9/agent", project).startswith("ref:")


def test_records_round_trip_and_unreadable_rows_are_misses(tmp_path: Path) -> None:
    path = tmp_path / ".agent-eval" / "cache.db"
    cache = VerdictCache(path)
    record = {"nodeid": "e.yaml::a", "outcome": "passed", "score": 1.0}
    cache.put("k1", "e.yaml::a", record, 1.0)
    assert cache.get("k1") == record
    assert cache.get("k2") is None
    cache.close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO verdicts VALUES ('old', 'e.yaml::b', '0.0.1', ?, 1.0)", ('{"outcome": "passed"}',))
    db.execute("INSERT INTO verdicts VALUES ('bad', 'e.yaml::c', ?, '{not json', 1.0)", (__version__,))
    db.execute("INSERT INTO verdicts VALUES ('odd', 'e.yaml::d', ?, '[1]', 1.0)", (__version__,))
    db.commit()
    db.close()
    again = VerdictCache(path)
    assert again.get("old") is None  # another plugin version's record is never reused
    assert again.get("bad") is None and again.get("odd") is None
    assert again.get("k1") == record


def test_a_corrupt_database_is_a_miss_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    path.write_bytes(b"this is not an SQLite database" * 100)
    cache = VerdictCache(path)
    assert cache.get("k1") is None
    cache.put("k1", "e.yaml::a", {"outcome": "passed"}, 1.0)
    assert cache.problem is not None and "cache.db" in cache.problem
