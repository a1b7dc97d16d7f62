"""The run's memory (SPEC §24): the journal of a SIGKILLed run, and the run store.

The journal a SIGKILLed run leaves and resumes from, and the run store (SQLite here; PostgreSQL in
test_memory_postgres.py) with ``agent-eval runs``, ``import`` and ``store:BRANCH``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from memory_support import SAY_AGENT, run_together

pytest.importorskip(
    "sqlalchemy", reason="the run store's tests need the [store] extra (SQLAlchemy, Alembic)"
)

BLOCKING_AGENT = '''
import os, pathlib, time

def run(query, context):
    """Answers at once, or (``wait: true``) once the file ``release`` exists in the \
working directory;
    ``say_env`` answers the named environment variable's value."""
    if context.get("wait"):
        while not pathlib.Path("release").exists():
            time.sleep(0.05)
    if context.get("say_env"):
        return os.environ.get(context["say_env"], "")
    return context.get("say", "hello")
'''


def _suite(quick: int, waiting: int) -> str:
    cases = [f"  - {{id: q{n}, input: hi, expect: {{contains: [hello]}}}}\n" for n in range(quick)]
    cases += [
        f"  - {{id: w{n}, input: hi, context: {{wait: true}}, expect: {{contains: [hello]}}}}\n"
        for n in range(waiting)
    ]
    return "agent: blocking_agent:run\ncases:\n" + "".join(cases)


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args]


def _journal_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    return [line for line in lines if "nodeid" in line]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_a_killed_run_resumes_exactly_the_cases_its_journal_lacks(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    """SIGKILL mid-run: no report, the journal holds what finished; resume and report rebuild it.

    The cases left block on a file. No report is written, the journal holds every case that
    finished; ``--agent-eval-resume JOURNAL`` runs exactly the others and writes one whole report,
    and ``agent-eval report JOURNAL`` rebuilds the killed run's reports.
    """
    pytester.makepyfile(blocking_agent=BLOCKING_AGENT)
    pytester.makefile(".yaml", eval_k=_suite(quick=4, waiting=3))
    journal = pytester.path / "r.json.journal.jsonl"
    temp = pytester.path / "temp"
    temp.mkdir()
    run = subprocess.Popen(
        _pytest(*workers, "--agent-eval-report=r.json", "--agent-eval-html=r.html"),
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its xdist workers in its process group: killed with it
        env={**os.environ, "TMPDIR": str(temp), "PYTEST_DEBUG_TEMPROOT": str(temp)},
    )
    try:
        deadline = time.monotonic() + 60
        while len(_journal_records(journal)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the waiting cases are running
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert not (
        pytester.path / "r.json"
    ).exists()  # the report is written at the end, which never came
    finished = {record["nodeid"] for record in _journal_records(journal)}
    assert finished == {f"eval_k.yaml::q{n}" for n in range(4)}
    # the workers' shared folder is left only where pytest rotates its temporary folders
    assert not list(temp.glob("agent-eval-workers-*"))
    left = list(temp.glob("pytest-of-*/pytest-[0-9]*/agent-eval-workers-*"))
    assert len(left) == (1 if workers else 0)

    from pytest_agent_eval.cli import main

    assert main(["report", str(journal), "-o", str(pytester.path / "killed.json")]) == 0
    killed = json.loads((pytester.path / "killed.json").read_text(encoding="utf-8"))
    assert killed["run"]["finished"] is False and killed["run"]["exit_status"] is None
    assert {c["nodeid"] for c in killed["cases"]} == finished

    (pytester.path / "release").write_text("")
    resumed = subprocess.run(
        _pytest(*workers, "-rA", f"--agent-eval-resume={journal}", "--agent-eval-report=r.json"),
        cwd=pytester.path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    ran = {line.split()[1] for line in resumed.stdout.splitlines() if line.startswith("PASSED ")}
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ran == {f"eval_k.yaml::w{n}" for n in range(3)}
    assert "kept its 4 final records" in resumed.stdout
    whole = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert [c["outcome"] for c in whole["cases"]] == ["passed"] * 7
    assert whole["run"]["finished"] is True and whole["not_run"] == []
    assert whole["run"]["resumed_from"] == {"report": str(journal), "kept": 4}
    # the resumed run's journal (the same path) holds the whole run
    assert len({r["nodeid"] for r in _journal_records(journal)}) == 7


def test_a_journal_cut_short_mid_line_loses_only_that_line(pytester: pytest.Pytester) -> None:
    """A power loss may leave half a line: that case did not finish (a resume runs it).

    A bad line elsewhere is an error naming the file and line.
    """
    pytester.makepyfile(blocking_agent=BLOCKING_AGENT)
    pytester.makefile(".yaml", eval_k=_suite(quick=3, waiting=0))
    pytester.runpytest("--agent-eval-report=r.json").assert_outcomes(passed=3)
    journal = pytester.path / "r.json.journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    journal.write_text(
        "\n".join(lines[:3]) + "\n" + lines[3][:40], encoding="utf-8"
    )  # q2's line cut, no end
    from pytest_agent_eval.memory.journal import read_journal

    document = read_journal(journal)
    assert [c["case_id"] for c in document["cases"]] == ["q0", "q1"]
    assert document["run"]["finished"] is False
    result = pytester.runpytest("-rA", f"--agent-eval-resume={journal}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["PASSED eval_k.yaml::q2*"])

    from pytest_agent_eval.cli import main

    html, markdown = pytester.path / "killed.html", pytester.path / "killed.md"
    assert main(["report", str(journal), "--html", str(html), "--markdown", str(markdown)]) == 0
    assert "**The run did not finish** (rebuilt from its journal)" in markdown.read_text(
        encoding="utf-8"
    )
    assert "eval_k.yaml::q1" in html.read_text(encoding="utf-8")

    journal.write_text(lines[0] + "\n{oops\n" + lines[1] + "\n", encoding="utf-8")
    assert main(["report", str(journal), "-o", str(pytester.path / "x.json")]) == 2
    result = pytester.runpytest(f"--agent-eval-resume={journal}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agent-eval-resume: {journal}:2: not a JSON line*"])


def _runs(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT id, total, passed, failed FROM runs ORDER BY started, saved"
        ).fetchall()


def _git(path: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)


def _say_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(say_agent=SAY_AGENT)
    pytester.makefile(
        ".yaml",
        eval_s="agent: say_agent:run\ncases:\n"
        "  - {id: greet, input: hi, expect: {contains: [hello]}}\n"
        "  - {id: steady, input: hi, expect: {contains: ['']}}\n",
    )


def test_every_run_is_stored_and_store_branch_is_a_baseline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run lands in .agent-eval/runs.db with its branch, commit and cases.

    ``agent-eval runs`` lists them; ``--agent-eval-baseline store:main`` compares with the newest
    run of main; a case whose outcome flips while its content stays is flaky in the summary.
    """
    _say_suite(pytester)
    _git(pytester.path, "init", "-q", "-b", "main")
    _git(pytester.path, "add", "eval_s.yaml", "say_agent.py")
    _git(pytester.path, "commit", "-q", "-m", "suite")
    first = pytester.runpytest("-v")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["agent eval store: run * saved to */.agent-eval/runs.db"])
    db = pytester.path / ".agent-eval" / "runs.db"
    monkeypatch.setenv("AGENT_SAYS", "bye")
    second = pytester.runpytest(
        "--agent-eval-baseline=store:main",
        "--agent-eval-fail-on-regression",
        "--agent-eval-report=r.json",
        "--agent-eval-markdown=r.md",
        "--agent-eval-html=r.html",
    )
    assert second.ret == pytest.ExitCode.TESTS_FAILED
    second.stdout.fnmatch_lines(
        ["*1 regressions, 0 fixes, 0 new, 0 missing*", "*eval_s.yaml::greet: passed -> failed*"]
    )
    second.stdout.fnmatch_lines(
        ["flaky: 1 cases changed outcome*: eval_s.yaml::greet (passed failed)"]
    )
    assert [row[1:] for row in _runs(db)] == [(2, 2, 0), (2, 1, 1)]
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert report["flaky"] == {"eval_s.yaml::greet": ["passed", "failed"]}
    assert report["baseline"]["path"] == "store:main"
    markdown = (pytester.path / "r.md").read_text(encoding="utf-8")
    flaky_line = "**Flaky (1)**, passing and failing over the last runs with the case unchanged:"
    assert f"{flaky_line} `eval_s.yaml::greet` (passed failed)" in markdown
    page = (pytester.path / "r.html").read_text(encoding="utf-8").split('<section id="flaky">')[1]
    assert "eval_s.yaml::greet" in page.split("</section>")[0]
    from pytest_agent_eval.report.schema import report_schema

    jsonschema.validate(report, report_schema())

    # an edited case is not flaky: its content hash changed
    pytester.path.joinpath("eval_s.yaml").write_text(
        pytester.path.joinpath("eval_s.yaml")
        .read_text()
        .replace(
            "input: hi, expect: {contains: [hello]}", "input: hey, expect: {contains: [hello]}"
        )
    )
    monkeypatch.setenv("AGENT_SAYS", "hello")
    third = pytester.runpytest("--agent-eval-report=r.json")
    third.assert_outcomes(passed=2)
    assert "flaky" not in json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))


def test_the_store_records_git_and_agent_eval_runs_lists_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's row: branch, commit, tracked files changed or not; ``agent-eval runs`` shows them."""
    _say_suite(pytester)
    _git(pytester.path, "init", "-q", "-b", "feature")
    _git(pytester.path, "add", "eval_s.yaml", "say_agent.py")
    _git(pytester.path, "commit", "-q", "-m", "suite")
    pytester.path.joinpath("say_agent.py").write_text(SAY_AGENT + "\n# changed\n")
    pytester.runpytest().assert_outcomes(passed=2)
    with sqlite3.connect(pytester.path / ".agent-eval" / "runs.db") as conn:
        row = conn.execute(
            "SELECT git_branch, git_commit, git_dirty, total, passed, pass_rate FROM runs"
        ).fetchone()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pytester.path, capture_output=True, text=True
    ).stdout
    assert row == ("feature", head.strip(), 1, 2, 2, 1.0)
    from pytest_agent_eval.cli import main

    monkeypatch.chdir(pytester.path)
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    assert "feature" in out and head[:8] + "+" in out and "2/2" in out and "100%" in out


def test_store_off_saves_nothing_and_the_journal_stays(pytester: pytest.Pytester) -> None:
    _say_suite(pytester)
    pytester.runpytest("--agent-eval-store=off").assert_outcomes(passed=2)
    assert not (pytester.path / ".agent-eval" / "runs.db").exists()
    journals = list((pytester.path / ".agent-eval" / "journal").glob("*.jsonl"))
    assert len(journals) == 1 and len(_journal_records(journals[0])) == 2


def test_a_corrupt_store_is_one_warning_and_the_reports_and_exit_status_stay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _say_suite(pytester)
    db = pytester.path / ".agent-eval" / "runs.db"
    db.parent.mkdir()
    db.write_bytes(b"this is not a database, it is a text file " * 100)
    monkeypatch.setenv("AGENT_SAYS", "bye")
    result = pytester.runpytest("--agent-eval-report=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the run's own status: one case fails
    warnings = [line for line in result.stdout.lines if "agent eval store" in line]
    assert warnings == [
        f"warning: agent eval store: the run was not saved: {db}: file is not a database"
    ]
    assert len(json.loads((pytester.path / "r.json").read_text())["cases"]) == 2


def test_a_store_of_a_newer_schema_is_refused_with_what_to_do(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _say_suite(pytester)
    pytester.runpytest().assert_outcomes(passed=2)
    db = pytester.path / ".agent-eval" / "runs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["warning: agent eval store: the run was not saved: *schema version 0099 is newer*"]
    )
    from pytest_agent_eval.cli import main

    monkeypatch.chdir(pytester.path)
    assert main(["runs"]) == 2
    err = capsys.readouterr().err
    assert "schema version 0099 is newer than this pytest-agent-evalset knows (up to 0002)" in err
    assert "upgrade pytest-agent-evalset" in err


def test_two_processes_writing_one_store_lose_nothing(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Two pytest runs (each with xdist) save to one SQLite file at once: both runs, every case."""
    _say_suite(pytester)
    many = "".join(
        f"  - {{id: c{n:03}, input: hi, expect: {{contains: [hello]}}}}\n" for n in range(150)
    )
    pytester.makefile(".yaml", eval_many=f"agent: say_agent:run\ncases:\n{many}")
    store = tmp_path / "shared.db"
    done = run_together(pytester.path, "-q", "-n", "1", f"--agent-eval-store={store}")
    assert [code for code, _ in done] == [0, 0], done
    assert [row[1:] for row in _runs(store)] == [(152, 152, 0), (152, 152, 0)]
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM cases").fetchone() == (304,)


def test_agent_eval_import_stores_reports_once(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _say_suite(pytester)
    pytester.runpytest("--agent-eval-store=off", "--agent-eval-report=r.json").assert_outcomes(
        passed=2
    )
    from pytest_agent_eval.cli import main

    monkeypatch.chdir(pytester.path)
    assert main(["import", "r.json", "--branch", "release"]) == 0
    assert main(["import", "r.json", "nothing.json"]) == 2
    out, err = capsys.readouterr()
    assert "r.json: run import-" in out and "r.json: stored already" in out
    assert "nothing.json: cannot read the report" in err
    assert main(["runs", "--branch", "release"]) == 0
    assert "2/2" in capsys.readouterr().out


def test_the_store_loads_its_libraries_at_the_end_only_and_never_when_off(
    pytester: pytest.Pytester,
) -> None:
    """SPEC §27: the store is on by default, and a run saves to it without SQLAlchemy.

    A new store is made at the schema's head, a current one saved, through ``sqlite3``; SQLAlchemy
    and Alembic load only to migrate an older store. Off, nothing of the store loads.
    """
    _say_suite(pytester)
    pytester.makeconftest(
        "import sys\n"
        "def pytest_runtest_call(item):\n"
        "    print('during the run:', 'sqlalchemy' in sys.modules)\n"
        "def pytest_unconfigure(config):\n"
        "    print('at the end:', 'sqlalchemy' in sys.modules)\n"
    )
    on = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    assert (
        on.stdout.str().count("during the run: False") == 2
        and "at the end: False" in on.stdout.str()
    )
    again = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    assert "at the end: False" in again.stdout.str()
    assert [row[1:] for row in _runs(pytester.path / ".agent-eval" / "runs.db")] == [(2, 2, 0)] * 2
    off = pytester.runpytest_subprocess("-s", "-p", "no:randomly", "--agent-eval-store=off")
    assert (
        "at the end: False" in off.stdout.str() and "during the run: True" not in off.stdout.str()
    )


def test_the_quick_reader_finds_the_flaky_cases_the_store_finds(tmp_path: Path) -> None:
    """``memory.quick`` reads only the rows of cases that failed; the flaky cases stay the same.

    Over runs where a few cases fail (their rows read by node id) and where more than a few hundred
    fail (every row read), a run where none failed: flips, an edited case, errors and skips, the
    newest run not stored yet.
    """
    pytest.importorskip("sqlalchemy", reason="the run store's tests need the [store] extra")
    from pytest_agent_eval.memory.quick import QuickStore
    from pytest_agent_eval.memory.rows import run_row
    from pytest_agent_eval.memory.store import Store

    def record(n: int, outcome: str, content: str = "h") -> dict[str, Any]:
        nodeid = f"eval_f.yaml::c{n}"
        return {"nodeid": nodeid, "case_id": f"c{n}", "file": "eval_f.yaml", "line": n,
                "outcome": outcome, "content_hash": f"{content}{n}"}  # fmt: skip

    def run(outcomes: dict[int, str], edited: frozenset[int] = frozenset()) -> list[Any]:
        return [
            record(n, outcomes.get(n, "passed"), "e" if n in edited else "h") for n in range(800)
        ]

    runs = [
        run({1: "failed", 2: "error", 4: "skipped"}),
        run({}),  # none failed: its rows are not searched
        run({3: "failed", 5: "failed"}),
        run({5: "failed", 6: "failed"}, edited=frozenset({1})),
        run({n: "failed" for n in range(100, 700)}),  # more than a few hundred failed
    ]
    newest = run({7: "failed", 1: "failed", 150: "xpassed"}, edited=frozenset({1}))
    for stored in (2, 3, 4, 5):
        path = tmp_path / f"runs{stored}.db"
        store = Store(f"sqlite:///{path}")
        store.open()
        for n, cases in enumerate(runs[:stored]):
            started = f"2026-01-0{n + 1}T00:00:00+00:00"
            store.save(run_row({"run": {"started": started}, "cases": cases}, f"r{n}"), cases)
        quick = QuickStore.open(path)
        assert quick is not None
        try:
            for nodeids in (None, [c["nodeid"] for c in newest[:8]]):
                for newer in (None, newest):
                    found = quick.flaky(nodeids=nodeids, newest=newer)
                    assert found == store.flaky(nodeids=nodeids, newest=newer)
            assert quick.flaky(newest=newest) != {}
        finally:
            quick.close()
            store.close()


def _schema(path: Path) -> dict[str, Any]:
    """What a SQLite database's tables are: columns, keys, indexes and the schema version."""
    with sqlite3.connect(path) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        schema: dict[str, Any] = {}
        for table in sorted(tables):
            indexes = {
                row[1]: (row[2:], conn.execute(f"PRAGMA index_info('{row[1]}')").fetchall())
                for row in conn.execute(f"PRAGMA index_list('{table}')")
            }
            schema[table] = (
                conn.execute(f"PRAGMA table_xinfo('{table}')").fetchall(),
                conn.execute(f"PRAGMA foreign_key_list('{table}')").fetchall(),
                sorted(indexes.items()),
            )
        schema["version"] = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    return schema


def test_a_new_store_is_made_as_the_migrations_make_it(tmp_path: Path) -> None:
    """``sqlite3`` makes a missing store (SPEC §27): the tables Alembic's migrations make, stamped.

    SQLAlchemy then opens it as current (no migration) and reads what the quick store saved.
    """
    pytest.importorskip("sqlalchemy", reason="the run store's tests need the [store] extra")
    from pytest_agent_eval.memory.quick import QuickStore
    from pytest_agent_eval.memory.rows import run_row
    from pytest_agent_eval.memory.store import Store

    migrated = Store(f"sqlite:///{tmp_path / 'alembic.db'}")
    migrated.open()
    migrated.close()
    made = tmp_path / "new" / "runs.db"
    quick = QuickStore.open(made, create=True)
    assert quick is not None
    cases = [{"nodeid": "eval_f.yaml::c1", "case_id": "c1", "file": "eval_f.yaml", "line": 1,
              "outcome": "failed", "content_hash": "h1"}]  # fmt: skip
    try:
        quick.save(
            run_row({"run": {"started": "2026-01-01T00:00:00+00:00"}, "cases": cases}, "r1"),
            cases,
            lambda data: None,
        )
    finally:
        quick.close()
    assert _schema(made) == _schema(tmp_path / "alembic.db")
    store = Store(f"sqlite:///{made}")
    try:
        store.open()
        assert [run.id for run in store.runs()] == ["r1"]
    finally:
        store.close()
    again = QuickStore.open(made, create=True)  # found made: opened as it is
    assert again is not None
    again.close()


def test_the_journal_folder_keeps_the_newest_runs_journals(pytester: pytest.Pytester) -> None:
    """One journal per run under ``.agent-eval/journal/``: the 20 newest stay, older ones go.

    A journal beside a report is the user's file and stays whatever its age.
    """
    _say_suite(pytester)
    folder = pytester.path / ".agent-eval" / "journal"
    folder.mkdir(parents=True)
    for n in range(25):  # 25 earlier runs, the oldest first
        old = folder / f"old{n:02}.jsonl"
        old.write_text("{}\n", encoding="utf-8")
        os.utime(old, (1_000_000 + n, 1_000_000 + n))
    beside = pytester.path / "kept.json.journal.jsonl"
    beside.write_text("{}\n", encoding="utf-8")
    os.utime(beside, (1_000, 1_000))
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    left = sorted(p.name for p in folder.iterdir())
    assert len(left) == 20
    assert [name for name in left if name.startswith("old")] == [
        f"old{n:02}.jsonl" for n in range(6, 25)
    ]  # the 19 newest earlier runs and this run's journal
    (new,) = [name for name in left if not name.startswith("old")]
    assert '"end"' in (folder / new).read_text(encoding="utf-8")
    assert beside.exists()
