"""The run store on a real PostgreSQL server that the tests start.

The server is ``postgres_url`` (tests/postgres_support.py): runs saved and listed,
``store:BRANCH``, two writers at once on a new database, and a URL that cannot be used (a wrong
password, nothing listening) as one usage error with the password left out.
"""

from __future__ import annotations

import uuid

import pytest
from memory_support import SAY_AGENT, run_together
from postgres_support import PASSWORD, fresh_database

pytest.importorskip(
    "sqlalchemy", reason="the run store's tests need the [store] extra (SQLAlchemy, Alembic)"
)


@pytest.fixture
def database(postgres_url: str) -> str:
    return fresh_database(postgres_url, f"t_{uuid.uuid4().hex[:12]}")


def _suite(pytester: pytest.Pytester, cases: int = 2) -> None:
    pytester.makepyfile(say_agent=SAY_AGENT)
    rows = "".join(
        f"  - {{id: c{n:03}, input: hi, expect: {{contains: [hello]}}}}\n" for n in range(cases)
    )
    pytester.makefile(".yaml", eval_s=f"agent: say_agent:run\ncases:\n{rows}")


def test_runs_are_saved_listed_and_compared_on_postgresql(
    pytester: pytest.Pytester,
    database: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _suite(pytester)
    first = pytester.runpytest("-v", f"--agent-eval-store={database}")
    first.assert_outcomes(passed=2)
    shown = database.replace(PASSWORD, "***")
    first.stdout.fnmatch_lines([f"agent eval store: run * saved to {shown}"])
    assert PASSWORD not in first.stdout.str()
    from pytest_agent_eval.cli import main

    monkeypatch.chdir(pytester.path)
    pytester.runpytest(
        f"--agent-eval-store={database}", "--agent-eval-report=r.json"
    ).assert_outcomes(passed=2)
    assert main(["import", "r.json", "--store", database, "--branch", "main"]) == 0
    monkeypatch.setenv("AGENT_SAYS", "bye")
    gated = pytester.runpytest(
        f"--agent-eval-store={database}",
        "--agent-eval-baseline=store:main",
        "--agent-eval-gate=regressions",
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(["*2 regressions, 0 fixes, 0 new, 0 missing*"])
    capsys.readouterr()
    assert main(["runs", "--store", database]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 + 4 and "0/2" in listed[1] and "main" in listed[2]


def test_two_processes_migrate_and_write_one_new_postgresql_store(
    pytester: pytest.Pytester, database: str
) -> None:
    _suite(pytester, cases=120)
    done = run_together(pytester.path, "-q", f"--agent-eval-store={database}")
    assert [code for code, _ in done] == [0, 0], done
    import psycopg

    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT count(*), sum(total) FROM runs").fetchone() == (2, 240)
        assert conn.execute("SELECT count(*) FROM cases").fetchone() == (240,)


@pytest.mark.parametrize("broken", ["password", "port"])
def test_a_postgresql_store_that_cannot_be_used_is_a_usage_error_at_start(
    pytester: pytest.Pytester, postgres_url: str, broken: str
) -> None:
    _suite(pytester)
    if broken == "password":
        url = postgres_url.replace(PASSWORD, "wrong-" + PASSWORD)
        why = "password authentication failed"
    else:
        url = postgres_url.rsplit(":", 1)[0] + ":1/postgres"
        why = "connection*refused"
    result = pytester.runpytest_subprocess(f"--agent-eval-store={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --agent-eval-store: postgresql://agent_eval:***@127.0.0.1:*{why}*"]
    )
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / ".agent-eval" / "runs.db").exists()
