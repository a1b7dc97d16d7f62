"""The verdict cache's key and storage (SPEC §25): the key follows what a verdict depends on.

The key changes with each thing a verdict depends on, and with nothing else; a row that cannot be
read, or that another plugin version wrote, is a miss.
"""

from __future__ import annotations

import dataclasses
import importlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.core.case import Case
from pytest_agent_eval.report.case_input import content_hash
from pytest_agent_eval.report.verdict_cache import KeyParts, agent_fingerprint
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


def test_a_case_keeps_its_hash_and_each_variant_is_hashed_afresh(tmp_path: Path) -> None:
    """The hash is computed once per case (the key and the record both need it), kept on the case.

    A variant made from a hashed case (``dataclasses.replace``: a matrix agent, an injection
    payload, a dataset row) is hashed from its own content; the kept hash is no field of the case.
    """
    fields: dict[str, Any] = {"id": "a", "path": tmp_path / "eval_a.yaml", "line": 3, "query": "hi"}
    case = Case(**fields, expect={"contains": ["ok"]})
    first = content_hash(case)
    assert content_hash(case) == first == content_hash(Case(**fields, expect={"contains": ["ok"]}))
    edited = dataclasses.replace(case, expect={"contains": ["okay"]})
    assert content_hash(edited) != first
    assert content_hash(dataclasses.replace(edited, expect={"contains": ["ok"]})) == first
    assert case == dataclasses.replace(case) and repr(case) == repr(dataclasses.replace(case))


def test_the_content_hash_of_a_case_stays_what_stores_keep(tmp_path: Path) -> None:
    """The hashes of cases with every kind of value are pinned: stores and caches keep them.

    A faster way to compute a hash must give the same 16 digits as the release that stored them
    (non-ASCII text, mappings with non-text keys, tuples, paths, turns, a simulated user).
    """
    from pytest_agent_eval.core.case import Turn
    from pytest_agent_eval.core.conversation import SimulatedUser, Task

    path = tmp_path / "eval_a.yaml"
    rich = Case(
        id="a",
        path=path,
        line=3,
        query="h\u00e9llo \u2603",
        context={"b": [1, 2.5, None, True], "a": {"k": (1, "x")}},
        tags=("t1",),
        metadata={"owner": "\u00fc", 3: Path("/p/q")},
        tool_mocks={"search": {"hits": [1, {"x": None}]}},
        expect={"contains": ["ok"], "max_tool_calls": 2},
    )
    turns = Case(
        id="b", path=path, line=9, turns=(Turn("hi", {"contains": ["a"]}, line=4), Turn("bye"))
    )
    user = SimulatedUser(tasks=(Task("book a table", "a table is booked"),), facts=("party of 2",))
    simulated = Case(id="c", path=path, line=12, simulated_user=user)
    assert [content_hash(c) for c in (rich, turns, simulated)] == [
        "a8f5840c4606e4f3",
        "63368414b626fddb",
        "a936dea71723f864",
    ]


def test_the_hash_text_of_any_case_is_the_json_encoders(tmp_path: Path) -> None:
    """The text hashed, written field by field, is what ``json`` writes of the canonical form.

    Over 3,000 cases with random values in random fields: text, numbers (``-0.0``, NaN, big
    integers), booleans, paths, nested mappings with non-text keys, lists, tuples, turns, objects.
    """
    import json
    import random

    from pytest_agent_eval.core.case import Turn
    from pytest_agent_eval.report import case_input

    rng = random.Random(38)
    scalars = [None, True, False, 0, -3, 10**20, 1.0, -0.0, float("nan"), "", 'é☃"\\\n', "x"]

    def value(depth: int = 0) -> Any:
        kind = rng.randrange(len(scalars) + (6 if depth < 3 else 1))
        if kind < len(scalars):
            return scalars[kind]
        return [
            lambda: tmp_path / "a",
            lambda: {rng.choice(["a", "b", 1, "ü"]): value(depth + 1) for _ in range(2)},
            lambda: [value(depth + 1) for _ in range(rng.randrange(3))],
            lambda: tuple(value(depth + 1) for _ in range(rng.randrange(3))),
            lambda: Turn("hi", {"contains": [value(depth + 1)]}, line=rng.randrange(9)),
            lambda: object(),
        ][kind - len(scalars)]()

    names = [f.name for f in dataclasses.fields(Case) if f.name not in ("id", "path", "line")]
    encoder = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    for _ in range(3000):
        fields = {name: value() for name in rng.sample(names, rng.randrange(len(names)))}
        case = Case(id="a", path=tmp_path / "eval_a.yaml", line=3, **fields)
        expected = encoder.encode(case_input._canonical(case))
        assert case_input._text(case) == expected, fields


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


# -- where the cache lives: the run store (SPEC §24)
# ---------------------------------------------------------------------


def _rows(path: Path, query: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def test_the_quick_reader_reads_the_cache_as_the_store_does(tmp_path: Path) -> None:
    """A current SQLite store's cache is read through ``sqlite3`` (``memory.quick``).

    The keys (of one plugin version, or all) and each row are what ``memory.store`` (SQLAlchemy)
    reads, a row of unexpected types included.
    """
    pytest.importorskip("sqlalchemy", reason="the run store's tests need the [store] extra")
    from pytest_agent_eval.memory.quick import QuickStore
    from pytest_agent_eval.memory.rows import CACHE_COLUMNS
    from pytest_agent_eval.memory.store import JUDGMENTS, VERDICTS, Store

    assert {t.name: tuple(c.name for c in t.columns) for t in (VERDICTS, JUDGMENTS)} == (
        CACHE_COLUMNS
    )
    path = tmp_path / "runs.db"
    store = Store(f"sqlite:///{path}")
    store.open()
    verdict = {"nodeid": "e.yaml::a", "run_id": "r1", "record": '{"case_id": "a"}', "stored": "t"}
    store.cache(
        {
            VERDICTS: [
                {"key": "k1", "version": __version__, **verdict},
                {"key": "k2", "version": "0.0.1", **verdict},
            ],
            JUDGMENTS: [{"key": "j1", "model": "m", "replies": '["ok"]', "stored": "t"}],
        }
    )
    db = sqlite3.connect(path)
    planted = "INSERT INTO verdicts (key, nodeid, version, record, stored) VALUES (?, 7, ?, 2.5, 1)"
    db.execute(planted, ("k3", __version__))
    db.commit()
    db.close()
    quick = QuickStore.open(path)
    assert quick is not None
    try:
        for table, version in (("verdicts", __version__), ("verdicts", None), ("judgments", None)):
            assert quick.cache_keys(table, version) == store.cache_keys(table, version)
        assert quick.cache_keys("verdicts", __version__) == {"k1", "k3"}
        for table, key in (("verdicts", "k1"), ("verdicts", "k3"), ("judgments", "j1")):
            assert quick.cache_row(table, key) == store.cache_row(table, key) is not None
        assert quick.cache_row("verdicts", "nothing") is None
    finally:
        quick.close()
        store.close()


def test_the_cache_lives_in_the_run_store(cached: pytest.Pytester) -> None:
    """The records go to the store's ``verdicts`` table, beside the runs; no file of its own."""
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed").assert_outcomes(
        passed=2, failed=1
    )
    store = cached.path / ".agent-eval" / "runs.db"
    ((run_id,),) = _rows(store, "SELECT id FROM runs")
    rows = _rows(store, "SELECT nodeid, version, run_id FROM verdicts ORDER BY nodeid")
    assert rows == [
        (f"eval_cached.yaml::{name}", __version__, run_id) for name in ("bad", "good", "other")
    ]
    assert not (cached.path / ".agent-eval" / "cache.db").exists()
    _calls(cached)
    elsewhere = cached.path / "team.db"  # another store: nothing cached there yet
    cached.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-changed", f"--agent-eval-store={elsewhere}"
    ).assert_outcomes(passed=2, failed=1)
    assert len(_calls(cached)) == 3
    assert len(_rows(elsewhere, "SELECT key FROM verdicts")) == 3


def test_an_old_cache_file_is_not_read_and_said_once(cached: pytest.Pytester) -> None:
    old = cached.path / ".agent-eval" / "cache.db"
    old.parent.mkdir()
    old.write_bytes(b"an earlier build's cache")
    result = cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed")
    result.assert_outcomes(passed=2, failed=1)
    assert len(_calls(cached)) == 3  # nothing came from it
    told = [line for line in result.outlines if ".agent-eval/cache.db is no longer read" in line]
    assert told == [
        "agent eval cache: .agent-eval/cache.db is no longer read: the verdict cache is in the run "
        "store now (--agent-eval-store); delete the file"
    ]
    assert old.read_bytes() == b"an earlier build's cache"  # left as it was


def test_the_cache_without_a_store_is_a_usage_error(cached: pytest.Pytester) -> None:
    result = cached.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-cache=on", "--agent-eval-store=off"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agent-eval-cache on: the verdict cache lives in the run store, which is off*"]
    )


def test_a_corrupt_store_runs_every_case_and_says_so_once(cached: pytest.Pytester) -> None:
    store = cached.path / ".agent-eval" / "runs.db"
    store.parent.mkdir()
    store.write_bytes(b"this is not an SQLite database" * 100)
    result = cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed")
    result.assert_outcomes(passed=2, failed=1)  # the verdicts of a run, not of the cache
    assert len(_calls(cached)) == 3
    said = [line for line in result.outlines if line.startswith("agent eval cache:")]
    assert len(said) == 1 and "the run store cannot be used" in said[0] and "runs.db" in said[0]


def test_the_cache_on_a_postgresql_store(cached: pytest.Pytester, postgres_url: str) -> None:
    """A team's store: a run on one machine fills it, the next run (anywhere) reuses it."""
    import uuid

    from postgres_support import fresh_database

    database = fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")
    run = ("-p", "no:cacheprovider", "--agent-eval-changed", f"--agent-eval-store={database}")
    cached.runpytest(*run).assert_outcomes(passed=2, failed=1)
    assert len(_calls(cached)) == 3
    again = cached.runpytest(*run, "--agent-eval-report", "r.json")
    again.assert_outcomes(passed=2, failed=1)
    assert _calls(cached) == []
    assert all(r["cached"] for r in _records(cached, "r.json").values())
    import psycopg

    with psycopg.connect(database) as conn:
        runs = [r for (r,) in conn.execute("SELECT id FROM runs ORDER BY started, saved")]
        stored = conn.execute("SELECT count(*), min(run_id), max(run_id) FROM verdicts").fetchone()
    assert len(runs) == 2 and stored == (3, runs[0], runs[0])  # the first run made them
    assert {r["run_id"] for r in _records(cached, "r.json").values()} == {runs[0]}


# -- what the user sees of a reused record
# ---------------------------------------------------------------------------


def test_a_reused_record_keeps_its_run_and_trace_ids_and_says_cached_everywhere(
    cached: pytest.Pytester,
) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra traces the first run")
    import xml.etree.ElementTree as ET

    first = cached.runpytest(
        "-p", "no:cacheprovider", "-v", "--agent-eval-changed", "--agent-eval-report=r1.json",
        "--agent-eval-traces=t1.jsonl",
    )  # fmt: skip
    first.assert_outcomes(passed=2, failed=1)
    (saved,) = [line for line in first.outlines if line.startswith("agent eval store: run ")]
    run_id = saved.split()[4]
    before = _records(cached, "r1.json")
    assert all(len(str(r["trace_id"])) == 32 for r in before.values())
    _calls(cached)
    again = cached.runpytest(
        "-p", "no:cacheprovider", "-v", "--agent-eval-changed", "--agent-eval-report=r2.json",
        "--agent-eval-traces=t2.jsonl", "--junitxml=j.xml", "--agent-eval-markdown=r.md",
        "--agent-eval-html=r.html",
    )  # fmt: skip
    again.assert_outcomes(passed=2, failed=1)
    assert _calls(cached) == []
    # the terminal
    again.stdout.fnmatch_lines(
        [
            "eval_cached.yaml::good PASSED (cached)*",
            "eval_cached.yaml::bad FAILED (cached)*",
            "eval_cached.yaml::other PASSED (cached)*",
        ],
        consecutive=True,
    )
    again.stdout.fnmatch_lines(["verdict cache: 3 of 3 cases reported from it (not run again)"])
    # the JSON report: the first run's ids
    after = _records(cached, "r2.json")
    for name, record in after.items():
        assert record["cached"] is True and record["run_id"] == run_id, name
        assert record["trace_id"] == before[name]["trace_id"], name
        assert record["trials"] == before[name]["trials"], name  # each trial's trace id with it
    assert (cached.path / "t2.jsonl").read_text() == ""  # nothing ran, nothing traced
    spans = (cached.path / "t1.jsonl").read_text()
    assert f'"stringValue": "{run_id}"' in spans or f'"stringValue":"{run_id}"' in spans
    # junit
    cases = {c.get("name"): c for c in ET.parse(cached.path / "j.xml").iter("testcase")}
    for name in ("bad", "good", "other"):
        props = {p.get("name"): p.get("value") for p in cases[name].iter("property")}
        assert props["cached"] == "true" and props["run_id"] == run_id, name
        assert props["trace_id"] == before[name]["trace_id"], name
    # markdown: the summary's note and the failure's row
    markdown = (cached.path / "r.md").read_text()
    assert "verdict cache: 3 of 3 cases reported from it (not run again)" in markdown
    assert "| `eval_cached.yaml::bad` | failed (cached) |" in markdown
    # the run store's viewer: the second run's cases, each linking the run that made it
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.memory.viewer import Viewer

    store = Store(f"sqlite:///{cached.path / '.agent-eval' / 'runs.db'}")
    try:
        (second,) = [r.id for r in store.runs() if r.id != run_id]
        status, html = Viewer(store).run(second)
    finally:
        store.close()
    assert status == 200 and html.count(f'(cached from <a href="/run/{run_id}">{run_id}</a>)') == 3
    # the HTML page's data (the page itself: test_the_html_page_shows_a_cached_case)
    page = (cached.path / "r.html").read_text()
    assert f'"run_id": "{run_id}"' in page or f'"run_id":"{run_id}"' in page


def test_the_html_page_shows_a_cached_case(cached: pytest.Pytester, browser: Any) -> None:
    cached.runpytest("-p", "no:cacheprovider", "-v", "--agent-eval-changed").assert_outcomes(
        passed=2, failed=1
    )
    store = cached.path / ".agent-eval" / "runs.db"
    ((run_id,),) = _rows(store, "SELECT id FROM runs")
    edited = CACHE_CASES.replace(
        "other, say: ok}, expect: {contains: [ok]}", "other, say: ok}, expect: {contains: [o]}"
    )
    cached.makefile(".yaml", eval_cached=edited)  # `other` runs again, the others are cached
    cached.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-changed", "--agent-eval-html=page.html"
    ).assert_outcomes(passed=2, failed=1)
    from test_html_report import _open  # the page from disk, any other request refused and noted

    page, requested = _open(browser, cached.path / "page.html")
    rows = page.locator("#case-table tbody tr.case").all_inner_texts()
    outcomes = {row.split("\t")[0].strip(): row.split("\t")[1].strip() for row in rows}
    assert outcomes == {
        "eval_cached.yaml::good": "passed (cached)",
        "eval_cached.yaml::bad": "failed (cached)",
        "eval_cached.yaml::other": "passed",
    }
    page.fill("#f-text", "eval_cached.yaml::bad")
    page.click("#case-table tbody tr.case")
    assert f"from the verdict cache (run {run_id})" in page.inner_text("#case-table tr.detail")
    assert requested == []


# -- rows read back are data (SPEC §22)
# ---------------------------------------------------------------------------


def _plant(store: Path, nodeid: str, **changes: Any) -> None:
    """Change the stored row of ``nodeid``: its columns as given.

    ``record`` may be a function of the record's JSON text.
    """
    db = sqlite3.connect(store)
    try:
        (text,) = db.execute("SELECT record FROM verdicts WHERE nodeid = ?", (nodeid,)).fetchone()
        values = {k: (v(text) if callable(v) else v) for k, v in changes.items()}
        sets = ", ".join(f"{k} = ?" for k in values)
        db.execute(f"UPDATE verdicts SET {sets} WHERE nodeid = ?", (*values.values(), nodeid))
        db.commit()
    finally:
        db.close()


def _flipped(text: str) -> str:
    import json

    record = json.loads(text)
    record["outcome"] = "passed"  # its trials still say it failed
    return json.dumps(record)


def test_a_planted_or_garbled_row_is_a_miss_said_once_never_a_verdict(
    cached: pytest.Pytester,
) -> None:
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed").assert_outcomes(
        passed=2, failed=1
    )
    _calls(cached)
    store = cached.path / ".agent-eval" / "runs.db"
    _plant(store, "eval_cached.yaml::good", record="{not json")
    _plant(store, "eval_cached.yaml::bad", record=_flipped)
    _plant(store, "eval_cached.yaml::other", version="0.0.1")  # another plugin version's
    result = cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed")
    result.assert_outcomes(passed=2, failed=1)  # bad still fails: its own verdict, not the row's
    assert _calls(cached) == ["bad", "good", "other"]
    said = [line for line in result.outlines if line.startswith("agent eval cache:")]
    assert said == [
        "agent eval cache: 2 stored entries could not be trusted and were not reused (run or "
        "asked again): eval_cached.yaml::good: not JSON"
    ]
    assert "Traceback" not in result.stdout.str()
    # the cases that ran stored their records again: the next run reuses them all
    cached.runpytest("-p", "no:cacheprovider", "--agent-eval-changed").assert_outcomes(
        passed=2, failed=1
    )
    assert _calls(cached) == []


RECORD = {
    "nodeid": "e.yaml::a", "case_id": "a", "file": "e.yaml", "line": 2, "outcome": "failed",
    "tags": [], "description": None, "metadata": {}, "score": 0.0, "min_score": None,
    "min_pass_rate": 1.0, "passes": 0, "checks": [], "tool_calls": [], "output": "nope",
    "transcript": [], "latency_s": 0.1, "tokens": None, "cost": None, "error": None, "reason": None,
    "duration_s": 0.1, "content_hash": "0123456789abcdef",
    "trials": [{"passed": False, "score": 0.0, "latency_s": 0.1, "error": None, "tokens": None,
                "cost": None, "checks": []}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"outcome": "passed"}, "outcome: 'passed', not the one its trials give"),
        ({"passes": 1}, "passes: 1, but 0 of its trials passed"),
        ({"outcome": "error"}, "outcome: 'error' is not a verdict"),
        ({"case_id": "b"}, "case_id: 'b', not the case's 'a'"),
        ({"content_hash": "fedcba9876543210"}, "content_hash: 'fedcba9876543210', not the case's"),
        ({"trials": []}, "trials: none"),
        ({"score": "high"}, "score: 'high' is not of type"),
        ({"score": 7.5}, "score: 7.5 is greater than the maximum of 1"),
        ({"cost": -1.0}, "cost: -1.0 is less than the minimum of 0"),
        ({"planted": "x"}, "(the document): Additional properties are not allowed ('planted' was"),
    ],
    ids=lambda value: next(iter(value)) if isinstance(value, dict) else None,
)
def test_a_stored_record_is_checked_field_by_field(change: dict[str, Any], why: str) -> None:
    import json

    from pytest_agent_eval.report.verdict_cache import trusted

    assert trusted(json.dumps(RECORD), "a", "0123456789abcdef") == (RECORD, "")
    record, said = trusted(json.dumps({**RECORD, **change}), "a", "0123456789abcdef")
    assert record is None and said.startswith(why), said


# -- the judge-verdict cache
# ----------------------------------------------------------------------------------------

JUDGED_CASES = """\
agent: cache_agent:run
cases:
  - {id: a, input: hi, context: {case: a, say: ok}, expect: {judge: answers politely}}
  - id: b
    input: hi
    context: {case: b, say: ok}
    expect: {judge: answers politely, contains: [ok]}
  - {id: c, input: hi, context: {case: c, say: hello}, expect: {judge: answers politely}}
"""


@pytest.fixture
def judge_llm(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The loopback OpenAI-compatible judge (tests/openai_server.py): every reply a score.

    Its ``log`` counts the requests.
    """
    pytest.importorskip("openai", reason="the default judge LLM talks through the openai client")
    from openai_server import ChatServer
    from test_traffic import point_at

    with ChatServer(
        lambda prompt: None, answer=lambda body: '{"score": 0.9, "reason": "polite"}'
    ) as server:
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "judge-model")
        point_at(monkeypatch, server.base_url)
        yield server


def _asked(server: Any) -> int:
    count = len(server.log)
    server.log.clear()
    return count


def test_a_judgment_is_paid_for_once_even_when_the_case_changed(
    cached: pytest.Pytester, judge_llm: Any
) -> None:
    cached.makefile(".yaml", eval_cached=JUDGED_CASES)
    run = ("-p", "no:cacheprovider", "--agent-eval-changed")
    cached.runpytest(*run).assert_outcomes(passed=3)
    assert _calls(cached) == ["a", "b", "c"]
    assert _asked(judge_llm) == 2  # a and b show the judge the same prompt and answer: once
    # a's other checks change (its key too), not what the judge is shown: the agent runs, the judge
    # is not asked again
    cached.makefile(
        ".yaml",
        eval_cached=JUDGED_CASES.replace(
            "say: ok}, expect: {judge: answers politely}}",
            "say: ok}, expect: {judge: answers politely, contains: [o]}}",
        ),
    )
    again = cached.runpytest(*run, "--agent-eval-report", "r.json")
    again.assert_outcomes(passed=3)
    assert _calls(cached) == ["a"]
    assert _asked(judge_llm) == 0
    judged = _records(cached, "r.json")["a"]["checks"]
    assert [(c["name"], c["score"]) for c in judged] == [("judge", 0.9), ("contains", 1.0)]
    # the judged output changed: asked again
    (cached.path / "cache_helper.py").write_text("def answer(text):\n    return text + '!'\n")
    cached.runpytest(*run).assert_outcomes(passed=3)
    assert _calls(cached) == ["a", "b", "c"] and _asked(judge_llm) == 2
    # a garbled judgment is asked again, said once, never a score
    db = sqlite3.connect(cached.path / ".agent-eval" / "runs.db")
    db.execute("UPDATE judgments SET replies = ?", ('["no score in here"]',))
    db.commit()
    db.close()
    (cached.path / "cache_helper.py").write_text(
        "def answer(text):\n    return text + '!'  # edited\n"
    )
    garbled = cached.runpytest(*run)
    garbled.assert_outcomes(passed=3)
    assert _calls(cached) == ["a", "b", "c"] and _asked(judge_llm) == 2
    said = [line for line in garbled.outlines if line.startswith("agent eval cache:")]
    assert (
        len(said) == 1 and "could not be trusted" in said[0] and "judge reply unreadable" in said[0]
    )


@pytest.mark.parametrize(
    "where", [("-n", "2"), ("--agent-eval-concurrency", "4")], ids=["-n 2", "concurrency"]
)
def test_judgments_made_on_xdist_workers_are_stored_by_the_controller(
    cached: pytest.Pytester, judge_llm: Any, where: tuple[str, ...]
) -> None:
    """Judgments made on workers, or on the runner's loop, are stored, then read back there."""
    cached.makefile(".yaml", eval_cached=JUDGED_CASES)
    run = ("-p", "no:cacheprovider", *where, "--agent-eval-changed")
    cached.runpytest_subprocess(*run).assert_outcomes(passed=3)
    assert _calls(cached) == ["a", "b", "c"]
    assert _asked(judge_llm) in (2, 3)  # a and b on one worker or on two, or judged at once
    rows = _rows(cached.path / ".agent-eval" / "runs.db", "SELECT model FROM judgments")
    assert rows == [("judge-model",), ("judge-model",)]
    (cached.path / "cache_helper.py").write_text("def answer(text):\n    return text  # edited\n")
    again = cached.runpytest_subprocess(*run)
    again.assert_outcomes(passed=3)
    assert _calls(cached) == ["a", "b", "c"] and _asked(judge_llm) == 0
    assert not [line for line in again.outlines if line.startswith("agent eval cache:")]
