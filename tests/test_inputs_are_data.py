"""Inputs are data (SPEC §22): untrusted files never run code or read outside the project.

A promptfoo config, a CSV cell, a ``file://`` var or a dataset row from an untrusted pull request
never runs code, never reads outside the project, and one bad one errors only its own case.

Each test runs real pytest (``pytester``) or the real ``agent-eval`` command on files written here,
and asserts what a user sees: outcomes, the error text, whether a marker file appeared.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dialect_promptfoo import outcomes, run  # the promptfoo tests' run and its outcomes by id

PROVIDER = """
def call_api(prompt, options, context):
    return {"output": prompt}
"""

AGENT = "def run(query, context):\n    return 'Paris'\n"
ESCAPE = "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}"


def write(pytester: pytest.Pytester, **files: str | bytes) -> None:
    """Files by name (``__`` for ``.``), text dedented."""
    for name, content in files.items():
        path = pytester.path / name.replace("__", ".")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))


def validate(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest_agent_eval.cli", "validate", *args)


# -- templates render in a sandbox
# -----------------------------------------------------------------------------


def test_a_prompt_template_never_runs_code(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        provider__py=PROVIDER,
        promptfooconfig__yaml=f"""
        prompts: ["Hi {{{{ name }}}} {ESCAPE}"]
        providers: [file://provider.py]
        tests: [{{vars: {{name: Ann}}}}]
        """,
        eval_asserted__yaml=f"""
        prompts: ["Hi {{{{ name }}}}"]
        providers: [file://provider.py]
        tests:
          - description: escape
            vars: {{name: Ann}}
            assert: [{{type: contains, value: "{ESCAPE}"}}]
          - description: plain
            vars: {{name: Bob}}
            assert: [{{type: contains, value: Bob}}]
        """,
    )
    checked = validate(pytester, ".")
    assert not (pytester.path / "PWNED").exists()
    assert checked.ret == 1, checked.stdout.str()
    checked.stdout.fnmatch_lines(
        [
            "eval_asserted.yaml:7: template error: access to attribute '__init__' "
            "*unsafe* (case escape)",
            "promptfooconfig.yaml:4: template error: access to attribute '__init__' "
            "*unsafe* (case test-1)",
        ],
        consecutive=False,
    )
    assert "Traceback" not in checked.stdout.str() + checked.stderr.str()
    collected = run(pytester, "--collect-only", "-q")
    assert not (pytester.path / "PWNED").exists()
    result = run(pytester)
    assert not (pytester.path / "PWNED").exists()
    assert outcomes(result) == {"test-1": "ERROR", "escape": "ERROR", "plain": "PASSED"}
    result.stdout.fnmatch_lines(["*eval_asserted.yaml:7: template error: *__init__*unsafe*"])
    assert collected.ret == 0


def test_a_csv_cell_never_runs_code_and_one_bad_cell_errors_only_its_row(
    pytester: pytest.Pytester,
) -> None:
    write(
        pytester,
        tests__csv=(
            "name,__expected,__threshold\n"
            f'Ann,"contains:{ESCAPE}",\n'
            "Bob,contains:Bob,abc\n"
            "Cy,{{ 1/0 }},\n"
            f"Dee,contains:{'x' * 200_000},\n"
            "Eve,contains:Eve,\n"
        ),
        promptfooconfig__yaml="""
        prompts: ["Hi {{ name }}"]
        providers: ["openai:gpt-4o-mini"]
        tests: file://tests.csv
        """,
    )
    checked = validate(pytester, "promptfooconfig.yaml")
    assert not (pytester.path / "PWNED").exists()
    out = checked.stdout.str()
    assert "Traceback" not in out + checked.stderr.str(), out + checked.stderr.str()
    checked.stdout.fnmatch_lines(
        [
            "*tests.csv:2: template error: *unsafe*",
            "*tests.csv:3: threshold: expected a number, got 'abc'*",
            "*tests.csv:4: template error: ZeroDivisionError*",
            "*tests.csv:5: the row cannot be read: field larger than field limit*",
        ],
        consecutive=False,
    )
    result = run(pytester, "--collect-only", "-q")
    assert not (pytester.path / "PWNED").exists()
    result.stdout.fnmatch_lines(["*test-1*", "*test-2*", "*test-3*", "*test-4*", "*test-5*"])


def test_a_template_cannot_make_a_huge_value(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        provider__py=PROVIDER,
        promptfooconfig__yaml="""
        prompts: ["{{ 'x' * 10000000000 }}", "{{ 9 ** 99999999 }}", "{{ range(10**9) | list }}"]
        providers: [file://provider.py]
        tests: [{description: huge}]
        """,
    )
    result = run(pytester)
    assert set(outcomes(result).values()) == {"ERROR"}
    result.stdout.fnmatch_lines(
        ["*template error: *repeated value*", "*template error: *power*", "*range*"]
    )


# -- file:// reads inside the project only
# ---------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("elsewhere")
    (folder / "credentials").write_text("SECRET-TOKEN-42")
    (folder / "rows.csv").write_text("name\nOut\n")
    return folder


def test_a_file_var_outside_the_project_is_an_error_of_its_case(
    pytester: pytest.Pytester, outside: Path
) -> None:
    project = pytester.path
    relative = os.path.relpath(outside / "credentials", project)
    (project / "inside.txt").write_text("fine")
    (project / "link.txt").symlink_to(outside / "credentials")
    write(
        pytester,
        provider__py=PROVIDER,
        promptfooconfig__yaml=f"""
        prompts: ["{{{{ secret }}}}"]
        providers: [file://provider.py]
        tests:
          - {{description: dotdot, vars: {{secret: "file://{relative}"}}}}
          - {{description: absolute, vars: {{secret: "file://{outside / "credentials"}"}}}}
          - {{description: symlink, vars: {{secret: "file://link.txt"}}}}
          - {{description: inside, vars: {{secret: "file://inside.txt"}}, assert: [{{type: equals, \
value: fine}}]}}
        """,
    )
    report = project / "report.json"
    result = run(pytester, f"--agent-eval-report={report}")
    assert outcomes(result) == {
        "dotdot": "ERROR",
        "absolute": "ERROR",
        "symlink": "ERROR",
        "inside": "PASSED",
    }
    result.stdout.fnmatch_lines(
        ["*var file://*credentials: outside the project*--agent-eval-allow-path*"]
    )
    assert "SECRET-TOKEN-42" not in result.stdout.str()
    assert "SECRET-TOKEN-42" not in report.read_text()
    allowed = run(pytester, f"--agent-eval-allow-path={outside}", "-k", "absolute")
    assert outcomes(allowed) == {"absolute": "PASSED"}


def test_the_ini_allows_a_folder(pytester: pytest.Pytester, outside: Path) -> None:
    write(
        pytester,
        provider__py=PROVIDER,
        pytest__ini=f"[pytest]\nagent_eval_allow_paths = {outside}\n",
        promptfooconfig__yaml=f"""
        prompts: ["{{{{ secret }}}}"]
        providers: [file://provider.py]
        tests: [{{description: allowed, vars: {{secret: "file://{outside / "credentials"}"}}}}]
        """,
    )
    assert outcomes(run(pytester)) == {"allowed": "PASSED"}


def test_a_glob_never_walks_outside_the_project(pytester: pytest.Pytester, outside: Path) -> None:
    up = "/".join([".."] * len(pytester.path.parts))
    write(
        pytester,
        provider__py=PROVIDER,
        here__csv="name\nHere\n",
        promptfooconfig__yaml=f"""
        prompts: ["{{{{ name }}}}"]
        providers: [file://provider.py]
        tests:
          - "file://{up}/**/rows.csv"
          - "file://{outside}/*.csv"
          - "file://*.csv"
        """,
    )
    result = run(pytester)
    assert outcomes(result) == {"test-1": "ERROR", "test-2": "ERROR", "test-3": "PASSED"}
    result.stdout.fnmatch_lines(
        ["*tests file://*rows.csv: outside the project*", "*an absolute glob*"]
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_a_device_and_a_huge_file_are_refused_unread(pytester: pytest.Pytester) -> None:
    os.mkfifo(pytester.path / "pipe.txt")  # opening it for reading would block until a writer came
    (pytester.path / "dev.txt").symlink_to("/dev/zero")
    with open(pytester.path / "big.txt", "wb") as big:
        big.truncate(17 * 1024 * 1024)
    write(
        pytester,
        provider__py=PROVIDER,
        promptfooconfig__yaml="""
        prompts: ["{{ v }}"]
        providers: [file://provider.py]
        tests:
          - {description: fifo, vars: {v: "file://pipe.txt"}}
          - {description: device, vars: {v: "file://dev.txt"}}
          - {description: big, vars: {v: "file://big.txt"}}
        """,
    )
    checked = validate(pytester, "promptfooconfig.yaml")
    checked.stdout.fnmatch_lines(
        ["*var file://pipe.txt: not a regular file*", "*var file://big.txt: larger than 16 MiB*"]
    )
    result = run(pytester)
    assert outcomes(result) == {"fifo": "ERROR", "device": "ERROR", "big": "ERROR"}


def test_a_bad_file_var_errors_only_its_case(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        provider__py=PROVIDER,
        broken__json='{"a": ',
        broken__yaml="a: [1,\n",
        latin__txt=b"caf\xe9",
        good__json='{"a": 1}',
        promptfooconfig__yaml="""
        prompts: ["{{ v }}"]
        providers: [file://provider.py]
        tests:
          - {description: json, vars: {v: "file://broken.json"}}
          - {description: yaml, vars: {v: "file://broken.yaml"}}
          - {description: latin, vars: {v: "file://latin.txt"}}
          - {description: good, vars: {v: "file://good.json"}}
        """,
        agent__py=AGENT,
        eval_other__yaml="""
        agent: agent:run
        cases:
          - {id: other, input: hi}
        """,
    )
    checked = validate(pytester, "promptfooconfig.yaml")
    assert "Traceback" not in checked.stdout.str() + checked.stderr.str()
    checked.stdout.fnmatch_lines(
        ["*broken.json: not JSON*", "*broken.yaml*", "*latin.txt: not UTF-8 (byte 3*"]
    )
    result = run(pytester)
    found = outcomes(result)
    assert {k: found[k] for k in ("json", "yaml", "latin")} == {
        "json": "ERROR",
        "yaml": "ERROR",
        "latin": "ERROR",
    }
    assert found["good"] == "PASSED"
    assert "other" in found  # the other file ran


def test_a_latin1_tests_csv_is_an_error_of_its_entry(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        provider__py=PROVIDER,
        latin__csv=b"name\ncaf\xe9\n",
        good__csv="name\nok\n",
        promptfooconfig__yaml="""
        prompts: ["{{ name }}"]
        providers: [file://provider.py]
        tests: [file://latin.csv, file://good.csv]
        """,
    )
    result = run(pytester)
    assert outcomes(result) == {"test-1": "ERROR", "test-2": "PASSED"}
    result.stdout.fnmatch_lines(["*latin.csv: not UTF-8*"])


# -- expansion is bounded
# --------------------------------------------------------------------------------------


def test_expansion_over_the_bound_is_one_error_of_that_file(pytester: pytest.Pytester) -> None:
    values = json.dumps(list(range(40)))
    write(
        pytester,
        provider__py=PROVIDER,
        promptfooconfig__yaml=f"""
        prompts: ["{{{{ a }}}}"]
        providers: [file://provider.py]
        tests:
          - vars: {{a: {values}, b: {values}, c: {values}, d: {values}, e: {values}}}
        """,
        agent__py=AGENT,
        eval_other__yaml="""
        agent: agent:run
        cases:
          - {id: other, input: hi}
        """,
    )
    result = run(pytester)
    found = outcomes(result)
    assert found == {"@file": "ERROR", "other": "PASSED"}, found
    result.stdout.fnmatch_lines(
        ["*expands to 102,400,000 cases, over the bound of 100,000 per file*"]
    )
    write(pytester, pytest__ini="[pytest]\nagent_eval_max_cases_per_file = 10\n")
    small = json.dumps(list(range(11)))
    write(
        pytester,
        promptfooconfig__yaml=f"""
        prompts: ["{{{{ a }}}}"]
        providers: [file://provider.py]
        tests: [{{vars: {{a: {small}}}}}]
        """,
    )
    bounded = run(pytester)
    bounded.stdout.fnmatch_lines(["*expands to 11 cases, over the bound of 10 per file*"])


# -- dataset rows
# ----------------------------------------------------------------------------------------------


def test_one_malformed_jsonl_line_errors_only_that_row(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        agent__py=AGENT,
        eval_rows__jsonl=(
            '{"id": "one", "input": "capital?", "expected": "Paris"}\n'
            '{"id": "two", "input": "capital?", "expec\n'
            '{"id": "three", "input": "capital?", "expected": "Paris"}\n'
        ),
        eval_rows__expect__yaml="agent: agent:run\nexpect:\n  matches_reference: contains\n",
    )
    result = run(pytester)
    assert outcomes(result) == {"one": "PASSED", "line-2": "ERROR", "three": "PASSED"}
    result.stdout.fnmatch_lines(["*eval_rows.jsonl:2: JSON Lines syntax error*"])


# -- local state lives in a private per-user folder
# ------------------------------------------------------------


@pytest.fixture
def shared_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp folder standing for the machine's shared ``/tmp``, where other local users write."""
    folder = tmp_path_factory.mktemp("shared_tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return folder


@pytest.fixture
def llm_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[pytest.Pytester]:
    pytest.importorskip("openai")
    from openai_server import ChatServer
    from test_traffic import AGENTS, evals_file, point_at

    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert()
    (pytester.path / "eval_pace.yaml").write_text(evals_file("sync_agent", cases=1))
    with ChatServer(lambda prompt: None, max_requests=50) as chat:
        point_at(monkeypatch, chat.base_url)
        yield pytester


PACE = "pace_requests_5_per_1000ms.json"


def test_with_the_cache_off_the_pace_store_is_private(
    llm_project: pytest.Pytester, shared_tmp: Path
) -> None:
    """A planted ``pace.json -> victim`` where the store used to be is never written through.

    Another local user plants it at that predictable shared path: the run never writes through it,
    and keeps its state in a folder of its own, 0700.
    """
    victim = llm_project.path / "victim.txt"
    victim.write_text("precious")
    digest = hashlib.sha256(str(llm_project.path).encode()).hexdigest()[:12]
    planted = shared_tmp / f"pytest-agent-eval-limits-{digest}"
    planted.mkdir()
    (planted / PACE).symlink_to(victim)
    result = run(llm_project, "--agent-eval-rate-limit", "5/s")
    result.assert_outcomes(passed=1)
    assert victim.read_text() == "precious"
    private = shared_tmp / f"pytest-agent-eval-{os.geteuid()}"
    info = os.lstat(private)
    assert (
        stat.S_ISDIR(info.st_mode)
        and stat.S_IMODE(info.st_mode) == 0o700
        and info.st_uid == os.geteuid()
    )
    (store,) = private.glob(f"limits-*/{PACE}")
    assert stat.S_ISREG(os.lstat(store).st_mode)


def test_a_planted_private_folder_or_state_symlink_is_never_followed(
    llm_project: pytest.Pytester, shared_tmp: Path
) -> None:
    victim = llm_project.path / "victim.txt"
    victim.write_text("precious")
    elsewhere = shared_tmp / "attacker"
    elsewhere.mkdir()
    (shared_tmp / f"pytest-agent-eval-{os.geteuid()}").symlink_to(elsewhere)
    result = run(llm_project, "--agent-eval-rate-limit", "5/s")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*private folder *pytest-agent-eval-* is a symlink*"])
    assert list(elsewhere.iterdir()) == []
    (shared_tmp / f"pytest-agent-eval-{os.geteuid()}").unlink()
    run(llm_project, "--agent-eval-rate-limit", "5/s").assert_outcomes(passed=1)
    (store,) = (shared_tmp / f"pytest-agent-eval-{os.geteuid()}").glob(f"limits-*/{PACE}")
    store.unlink()
    store.symlink_to(
        victim
    )  # only this user could: the folder is 0700; the store still never follows it
    result = run(llm_project, "--agent-eval-rate-limit", "5/s")
    assert victim.read_text() == "precious"
    assert "is a symlink, which is never followed" in result.stdout.str() + result.stderr.str()


# -- a provider that answers only 429 never stands the run still
# -----------------------------------------------


def test_the_step_429s_set_is_capped() -> None:
    from pytest_agent_eval.traffic.store import MAX_STEP_S, update_state

    state: dict[str, float] = {}
    for n in range(40):  # each 429 to a request sent after the last slow-down doubles the step
        update_state(state, float(n), [("slower", "step:api", 0.0)])
    assert state["step:api"] == MAX_STEP_S


@pytest.mark.slow
def test_a_provider_answering_only_429_ends_each_case_as_an_infrastructure_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Retry-After: nan`` on every answer, the pace already at 8 s a request: capped, then errors.

    The pace was slowed to 8 s a request by earlier 429s: one more 429 doubles it to the cap, not
    past it, and every case ends as an error naming the 429.
    """
    pytest.importorskip("openai")
    from openai_server import ChatServer
    from test_traffic import AGENTS, evals_file, point_at

    from pytest_agent_eval.traffic.store import MAX_STEP_S

    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert()
    (pytester.path / "eval_limited.yaml").write_text(evals_file("sync_agent", cases=2))
    with ChatServer(lambda prompt: None, failures=100, retry_after="nan", max_requests=100) as chat:
        point_at(monkeypatch, chat.base_url)
        host = chat.base_url.split("//")[1].split("/")[0]
        store = pytester.path / ".pytest_cache" / "d" / "agent_eval_limits" / "pace.json"
        store.parent.mkdir(parents=True)
        store.write_text(json.dumps({"at": time.time(), f"step:{host}": MAX_STEP_S * 0.8}))
        result = pytester.runpytest("-rA", "--agent-eval-retries", "1")
    assert "INTERNALERROR" not in result.stdout.str()
    found = outcomes(result)
    assert set(found) == {"case_0", "case_1"} and "PASSED" not in found.values(), found
    result.stdout.fnmatch_lines(["*429*"])
    state = json.loads(store.read_text())
    assert 0 < state[f"step:{host}"] <= MAX_STEP_S


# -- agent-eval init writes all or nothing, inside DIR, never through a symlink
# --------------------------------


def _init(folder: Path) -> tuple[int, str]:
    import contextlib
    import io

    from pytest_agent_eval.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["init", str(folder)])
    return code, err.getvalue()


def test_init_never_writes_through_a_dangling_symlink(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "evals").mkdir()
    (project / "evals" / "conftest.py").symlink_to(
        outside / "planted.py"
    )  # dangling: exists() says False
    code, err = _init(project)
    assert code == 1
    assert (
        "conftest.py is a symlink (never written through)" in err and "nothing was written" in err
    )
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in project.rglob("*")) == ["conftest.py", "evals"]


def test_init_checks_every_target_first_and_writes_nothing_when_one_is_blocked(
    tmp_path: Path,
) -> None:
    (tmp_path / ".github").write_text("not a folder")
    code, err = _init(tmp_path)
    assert code == 1
    assert ".github is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".github"]  # nothing left half-way
    (tmp_path / ".github").unlink()
    (tmp_path / ".github").symlink_to(tmp_path.parent)
    code, err = _init(tmp_path)
    assert code == 1 and ".github is a symlink" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".github"]


def test_a_reference_bomb_is_an_error_of_its_test(pytester: pytest.Pytester) -> None:
    """Eleven lines of ``$ref`` s to lists of ten ``$ref`` s: 10^11 assertions; refs are bounded."""
    templates = {f"t{i}": [{"$ref": f"#/assertionTemplates/t{i - 1}"}] * 10 for i in range(1, 12)}
    templates["t0"] = {"type": "contains", "value": "x"}
    config = {
        "prompts": ["{{ q }}"],
        "providers": ["file://provider.py"],
        "assertionTemplates": templates,
        "tests": [
            {
                "description": "bomb",
                "vars": {"q": "x"},
                "assert": [{"$ref": "#/assertionTemplates/t11"}],
            },
            {
                "description": "fine",
                "vars": {"q": "x"},
                "assert": [{"$ref": "#/assertionTemplates/t0"}],
            },
        ],
    }
    write(pytester, provider__py=PROVIDER, promptfooconfig__yaml=json.dumps(config))
    result = run(pytester)
    assert outcomes(result) == {"bomb": "ERROR", "fine": "PASSED"}
    result.stdout.fnmatch_lines(["*$refs expand to more than 100,000 values*"])
