"""The verdict cache's key and storage (SPEC §25): the key follows what a verdict depends on.

The key changes with each thing a verdict depends on, and with nothing else; a row that cannot be
read, or that another plugin version wrote, is a miss.
"""

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
    assert dataclasses.replace(
        BASE, settings={"repeat": None, "AGENT_EVAL_LLM_MODEL": "gpt-4o-mini"}
    ).key() == (BASE.key())  # the order of a mapping is not a change


def test_the_case_content_is_the_case_not_its_place(tmp_path: Path) -> None:
    case = Case(
        id="a", path=tmp_path / "eval_a.yaml", line=3, query="hi", expect={"contains": ["ok"]}
    )
    moved = dataclasses.replace(case, line=30)
    edited = dataclasses.replace(case, expect={"contains": ["okay"]})
    mocked = dataclasses.replace(case, tool_mocks={"search": {"hits": 1}})
    assert content_hash(moved) == content_hash(case)
    assert len({content_hash(case), content_hash(edited), content_hash(mocked)}) == 3


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose agent module imports a helper of its own, a package's module and stdlib."""
    (tmp_path / "fp_agent.py").write_text(
        "import json\nimport fp_helper\nfrom fp_pkg import tools\n\ndef run(q, c):\n"
        "    return fp_helper.say()\n"
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


@pytest.mark.parametrize(
    "edited", ["fp_agent.py", "fp_helper.py", "fp_pkg/tools.py", "fp_pkg/deep.py"]
)
def test_the_agent_fingerprint_changes_with_its_projects_modules(
    project: Path, edited: str
) -> None:
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
    assert agent_fingerprint("fp_agent:other", project) != agent_fingerprint(
        "fp_agent:run", project
    )
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
    db.execute(
        "INSERT INTO verdicts VALUES ('old', 'e.yaml::b', '0.0.1', ?, 1.0)",
        ('{"outcome": "passed"}',),
    )
    db.execute(
        "INSERT INTO verdicts VALUES ('bad', 'e.yaml::c', ?, '{not json', 1.0)", (__version__,)
    )
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


CACHE_AGENT = '''
import pathlib
import cache_helper

def run(query, context):
    """Counts its calls in calls.txt; answers `say`."""
    with open("calls.txt", "a") as f:
        f.write(context["case"] + "\\n")
    return cache_helper.answer(context["say"])
'''
CACHE_CASES = """\
agent: cache_agent:run
cases:
  - {id: good, input: hi, context: {case: good, say: ok}, expect: {contains: [ok]}}
  - {id: bad, input: hi, context: {case: bad, say: nope}, expect: {contains: [ok]}}
  - {id: other, input: hi, context: {case: other, say: ok}, expect: {contains: [ok]}}
"""


@pytest.fixture
def cached(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(
        cache_agent=CACHE_AGENT, cache_helper="def answer(text):\n    return text\n"
    )
    pytester.makefile(".yaml", eval_cached=CACHE_CASES)
    pytester.syspathinsert()
    return pytester


def _calls(project: pytest.Pytester) -> list[str]:
    path = project.path / "calls.txt"
    calls = sorted(path.read_text().split()) if path.exists() else []
    path.unlink(missing_ok=True)
    return calls


def _records(project: pytest.Pytester, name: str) -> dict[str, dict[str, object]]:
    import json

    return {c["case_id"]: c for c in json.loads((project.path / name).read_text())["cases"]}


def test_a_rerun_reuses_every_verdict_and_an_edit_reruns_its_case(cached: pytest.Pytester) -> None:
    first = cached.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-cache", "on", "--agent-eval-report", "r1.json"
    )
    first.assert_outcomes(passed=2, failed=1)
    assert _calls(cached) == ["bad", "good", "other"]
    assert not any(r["cached"] for r in _records(cached, "r1.json").values())
    again = cached.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-changed", "--agent-eval-report", "r2.json"
    )
    again.assert_outcomes(passed=2, failed=1)  # the same verdicts
    assert _calls(cached) == []  # and no agent call
    records = _records(cached, "r2.json")
    assert all(r["cached"] for r in records.values())
    assert records["bad"]["outcome"] == "failed" and records["good"]["output"] == "ok"
    again.stdout.fnmatch_lines(["verdict cache: 3 of 3 cases reported from it (not run again)"])
    again.stdout.fnmatch_lines(
        ["*case bad failed (from the verdict cache, not run again): contains: *"]
    )
    # one case edited: only it runs
    cached.makefile(
        ".yaml",
        eval_cached=CACHE_CASES.replace(
            "expect: {contains: [ok]}}\n  - {id: bad", "expect: {contains: [o]}}\n  - {id: bad"
        ),
    )
    edited = cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed")
    edited.assert_outcomes(passed=2, failed=1)
    assert _calls(cached) == ["good"]
    # the agent's own helper module edited: every case runs
    (cached.path / "cache_helper.py").write_text("def answer(text):\n    return text  # edited\n")
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed").assert_outcomes(
        passed=2, failed=1
    )
    assert _calls(cached) == ["bad", "good", "other"]


def test_read_only_writes_nothing_and_off_reads_nothing(cached: pytest.Pytester) -> None:
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-cache", "read").assert_outcomes(
        passed=2, failed=1
    )
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-cache", "read").assert_outcomes(
        passed=2, failed=1
    )
    assert len(_calls(cached)) == 6
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-cache", "write").assert_outcomes(
        passed=2, failed=1
    )
    cached.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    assert len(_calls(cached)) == 6
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-cache", "read").assert_outcomes(
        passed=2, failed=1
    )
    assert _calls(cached) == []


def test_the_cache_under_xdist(cached: pytest.Pytester) -> None:
    cached.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-changed"
    ).assert_outcomes(passed=2, failed=1)
    assert len(_calls(cached)) == 3
    result = cached.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-changed"
    )
    result.assert_outcomes(passed=2, failed=1)
    assert _calls(cached) == []


def test_a_replayed_cases_cassette_is_part_of_its_key(cached: pytest.Pytester) -> None:
    run = (
        "-p",
        "no:cacheprovider",
        "--agent-eval-replay",
        "--agent-eval-changed",
        "--agent-eval-report",
        "r.json",
    )
    cached.runpytest(*run).assert_outcomes(passed=2, failed=1)
    cached.runpytest(*run).assert_outcomes(passed=2, failed=1)
    assert all(r["cached"] for r in _records(cached, "r.json").values())
    assert len(_calls(cached)) == 3
    cassette = (
        cached.path / "cassettes" / "eval_cached" / "good.yaml"
    )  # re-recorded: the case is answered anew
    cassette.parent.mkdir(parents=True)
    cassette.write_text("interactions: []\n")
    cached.runpytest(*run)
    records = _records(cached, "r.json")
    assert {name for name, r in records.items() if not r["cached"]} == {"good"}
