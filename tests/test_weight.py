"""A feature that is off costs nothing (SPEC §27): a run without options imports no feature module.

A run that asks for no option imports none of the optional features' modules. Not timed: what a
run loads is read from ``sys.modules`` at the session's end, in a real pytest subprocess (and in
each xdist worker), so the guard bites the day a feature's module is imported without its option.
"""

from __future__ import annotations

import json
import os

import pytest

OPTIONAL = (
    # the traffic engine: hook, cassettes, pace and its store (the options and the clients' error
    # classes are light)
    "pytest_agent_eval.traffic.hook",
    "pytest_agent_eval.traffic.cassette",
    "pytest_agent_eval.traffic.session",
    "pytest_agent_eval.traffic.store",
    "pytest_agent_eval.traffic.pace",
    "pytest_agent_eval.traffic.usage",
    "pytest_agent_eval.traffic.scope",
    "pytest_agent_eval.traffic.retry",
    "pytest_agent_eval.traffic.limits",
    # the written reports and what compares runs
    "pytest_agent_eval.report.json_report",
    "pytest_agent_eval.report.markdown",
    "pytest_agent_eval.report.html",
    "pytest_agent_eval.report.junit",
    "pytest_agent_eval.report.compare",
    "pytest_agent_eval.report.baseline",
    "pytest_agent_eval.report.gate",
    "pytest_agent_eval.report.merge",
    "pytest_agent_eval.report.significance",
    "pytest_agent_eval.report.comment",
    "pytest_agent_eval.report.github",
    "pytest_agent_eval.report.verdict_cache",
    "pytest_agent_eval.traffic.spend",
    "pytest_agent_eval.mocks.mcp",
    "pytest_agent_eval.mocks.mcp_standin",
    "pytest_agent_eval.cases.injection",
    "pytest_agent_eval.checks.calibration",
    "pytest_agent_eval.checks.agreement",
    "pytest_agent_eval.plugin.resume",
    "pytest_agent_eval.plugin.scheduler",
    # this round's features (module prefixes: the guard holds as they land)
    "pytest_agent_eval.traces",
    "pytest_agent_eval.memory",
    "pytest_agent_eval.store",
    "pytest_agent_eval.journal",
    "pytest_agent_eval.cache",
    "pytest_agent_eval.injection",
    "pytest_agent_eval.mcp",
    "pytest_agent_eval.viewer",
    # libraries a JSON eval file of a plain function agent does not need
    "yaml",
    "httpx",
    "httpx2",
    # the run store's (the verdict cache's too): loaded only to make a store, or read one through
    # SQLAlchemy (a current SQLite store is read and written without it)
    "sqlalchemy",
    "alembic",
)
"""Modules (and packages: every module under them too) a run without options must not import."""

CONTROLLER = (
    "pytest_agent_eval.report.formats",
    "pytest_agent_eval.report.summary",
    "pytest_agent_eval.report.stats",
)
"""What only the xdist controller (or the only process) loads: an xdist worker starts without it."""

CONFIGURED = {"pytest_agent_eval.cases", "pytest_agent_eval.cases.trust"}
"""Issue 35's limits on what a data file may read (stdlib only): loaded at configure, by design
(plugin/trust.py).
"""

ENGINE = (
    "pytest_agent_eval.core.case",  # the case model: the options check names with core.names
    "pytest_agent_eval.cases",
    "pytest_agent_eval.checks",
    "pytest_agent_eval.run",
    "pytest_agent_eval.adapters",
)
"""The engine: a run with no eval file in sight loads none of it either."""

LOADED_CONFTEST = """
import json, sys

def pytest_sessionfinish(session):
    # xdist's own: an environment variable would be inherited from an outer run under -n
    worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
    names = sorted(name for name in sys.modules if name.split(".")[0] in ("pytest_agent_eval", \
"yaml", "httpx",
                   "httpx2", "sqlalchemy", "alembic"))
    with open(f"loaded-{worker}.json", "w") as out:
        json.dump(names, out)
"""

AGENT = "def run(query):\n    return f'answer to {query}'\n"


def _loaded(pytester: pytest.Pytester) -> dict[str, list[str]]:
    """The modules each process of the last run had loaded at its end (``main``, ``gw0``...)."""
    return {
        path.stem.removeprefix("loaded-"): json.loads(path.read_text())
        for path in pytester.path.glob("loaded-*.json")
    }


def _matches(loaded: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [name for name in loaded if any(name == p or name.startswith(p + ".") for p in prefixes)]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(LOADED_CONFTEST)
    pytester.makepyfile(weight_agent=AGENT)
    cases = [
        {"id": f"c{i}", "input": f"question {i}", "expect": {"contains": "answer"}}
        for i in range(3)
    ]
    pytester.makefile(
        ".json", eval_weight=json.dumps({"agent": "weight_agent:run", "cases": cases})
    )
    return pytester


MEMORY_OFF = ("-p", "no:agent_eval_memory")
"""The run memory (issue 41: the journal and the store, on by default) loads its own modules with
the first eval record: left out here, so the guard holds for everything else;
``test_the_run_memory_loads_its_own_modules_only`` holds what it loads.
"""
MEMORY = (
    "pytest_agent_eval.memory",
    "pytest_agent_eval.memory.journal",
    "pytest_agent_eval.memory.location",
    "pytest_agent_eval.memory.quick",
    "pytest_agent_eval.memory.rows",
)
"""What the run memory of a run with eval cases loads when its SQLite store is current."""


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_a_run_without_options_imports_no_optional_feature(
    project: pytest.Pytester, xdist: tuple[str, ...]
) -> None:
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", *MEMORY_OFF, *xdist
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*agent eval summary*"]
    )  # the plugin ran the cases and summed them up
    loaded = _loaded(project)
    assert set(loaded) == ({"main", "gw0", "gw1"} if xdist else {"main"})
    for process, names in loaded.items():
        if (
            process != "main" or not xdist
        ):  # the cases ran here: the engine is loaded, the options' features not
            assert "pytest_agent_eval.run.runner" in names, process
        assert _matches(names, OPTIONAL) == [], process
        if process != "main":  # the summary and the formats are the controller's
            assert _matches(names, CONTROLLER) == [], process


def test_the_xdist_controller_of_a_written_budget_hooks_no_client(
    project: pytest.Pytester,
) -> None:
    """Issue 38: the hook imports no HTTP client; under ``-n`` the controller hooks none at all.

    It still reads the budget and writes it to the run's store, as every process does. The workers
    hook the clients their agents load (this agent loads none): httpx's import, with its command
    line's rich and click, held every process's start back.
    """
    result = project.runpytest_subprocess(
        "-p", "no:randomly", *MEMORY_OFF, "-n", "2", "--agent-eval-rate-limit", "20/s"
    )
    result.assert_outcomes(passed=3)
    loaded = _loaded(project)
    assert set(loaded) == {"main", "gw0", "gw1"}
    for process, names in loaded.items():
        assert _matches(names, ("httpx", "httpx2")) == [], process
        assert "pytest_agent_eval.traffic.pace" in names, process
    (store,) = (project.path / ".pytest_cache" / "d" / "agent_eval_limits").glob("pace_*.json")
    assert 0.05 <= json.loads(store.read_text())["step"] <= 0.052  # 20/s, with the 2% guard


def test_a_plain_test_beside_eval_files_loads_no_engine(project: pytest.Pytester) -> None:
    """pytest makes a node of every file of the directory: the eval file next door is not read."""
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", *MEMORY_OFF, "test_plain.py"
    )
    result.assert_outcomes(passed=1)
    (names,) = _loaded(project).values()
    assert "pytest_agent_eval.plugin" in names  # the plugin is loaded, only its engine is not
    assert [name for name in _matches(names, OPTIONAL + ENGINE) if name not in CONFIGURED] == []


def test_the_run_memory_costs_nothing_either(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain tests and ``--collect-only`` load none of the memory and start no ``git status``.

    The ``git`` on the ``PATH`` here writes down each time it runs; a run with eval cases runs it.
    """
    tools = project.mkdir("tools")
    git = tools / "git"
    git.write_text(f'#!/bin/sh\necho "$*" >> {project.path / "git-runs.txt"}\nexit 128\n')
    git.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "test_plain.py"
    )
    result.assert_outcomes(passed=1)
    (names,) = _loaded(project).values()
    assert [name for name in _matches(names, OPTIONAL + ENGINE) if name not in CONFIGURED] == []
    assert not (project.path / "git-runs.txt").exists()
    collected = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--collect-only", "eval_weight.json"
    )
    collected.stdout.fnmatch_lines(["*3 tests collected*"])
    assert not (project.path / "git-runs.txt").exists()  # nothing ran: nothing to record
    project.runpytest_subprocess("-p", "no:cacheprovider", "eval_weight.json").assert_outcomes(
        passed=3
    )
    assert (project.path / "git-runs.txt").read_text().startswith("--no-optional-locks status")


def test_the_run_memory_loads_its_own_modules_only(project: pytest.Pytester) -> None:
    """The run memory of a run with eval cases loads its own modules, and no report or SQLAlchemy.

    The journal writes its records without the JSON report; a current SQLite store is read (the
    flaky cases) and saved without SQLAlchemy, which only the run that made the store loaded.
    """
    for _ in range(2):
        result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
        result.assert_outcomes(passed=3)
    (names,) = _loaded(project).values()
    assert _matches(names, ("pytest_agent_eval.memory",)) == list(MEMORY)
    others = tuple(name for name in OPTIONAL if name != "pytest_agent_eval.memory")
    assert _matches(names, others) == []
    assert len(list((project.path / ".agent-eval" / "journal").glob("*.jsonl"))) == 2


COMPILED_CONFTEST = """
import dataclasses, json, sys

def pytest_sessionfinish(session):
    compiled = sorted(
        f"{name}.{kind.__name__}"
        for name, module in list(sys.modules.items()) if name.startswith("pytest_agent_eval")
        for kind in vars(module).values()
        if isinstance(kind, type) and kind.__module__ == name and dataclasses.is_dataclass(kind)
        and (kind.__dataclass_params__.frozen or kind.__dataclass_params__.repr
             or kind.__dataclass_params__.eq)
    )
    with open("compiled.json", "w") as out:
        json.dump(compiled, out)
"""


def test_a_run_compiles_no_dataclass_method_but_init(project: pytest.Pytester) -> None:
    """The start-up of a default run compiles no dataclass method but ``__init__`` (SPEC §27).

    ``dataclasses`` compiles a class's methods from source when its module loads: a frozen one's
    six cost about 4 M instructions, a named tuple (one small ``__new__``) about 0.65 M; the
    immutable settings, options, specs and steps every run loads are named tuples (or plain
    classes). The data model every run loads is made with ``core.model.model``: its ``__repr__``
    and ``__eq__`` are shared functions, not compiled (26 M instructions of each start). A frozen
    dataclass, or one with a compiled ``__repr__`` or ``__eq__``, loaded by default would take
    that back: it is listed.
    """
    project.makeconftest(COMPILED_CONFTEST)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert json.loads((project.path / "compiled.json").read_text()) == []


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_the_verdict_cache_looks_cases_up_without_sqlalchemy(
    project: pytest.Pytester, xdist: tuple[str, ...]
) -> None:
    """SPEC §25, §27: the cache's lookups read a current SQLite store through ``sqlite3``.

    A store not made yet is a miss for every case, with nothing loaded to read it; the run's records
    are stored at its end (SQLAlchemy and Alembic make the store, after the cases). The next run
    takes every verdict from the store without loading SQLAlchemy, in every process.
    """
    pytest.importorskip("sqlalchemy", reason="the verdict cache lives in the run store ([store])")
    run = ("-p", "no:cacheprovider", "-p", "no:randomly", *MEMORY_OFF, *xdist)
    project.runpytest_subprocess(*run, "--agent-eval-cache=on").assert_outcomes(passed=3)
    store = project.path / ".agent-eval" / "runs.db"
    assert store.is_file()
    for names in _loaded(project).values():  # at the session's end, before the cache's save
        assert not _matches(names, ("sqlalchemy", "alembic", "pytest_agent_eval.memory.store"))
    again = project.runpytest_subprocess(*run, "-v", "--agent-eval-cache=on")
    again.assert_outcomes(passed=3)
    assert again.stdout.str().count("PASSED (cached)") == 3
    loaded = _loaded(project)
    assert len(loaded) == (3 if xdist else 1)
    for names in loaded.values():
        assert not _matches(names, ("sqlalchemy", "alembic", "pytest_agent_eval.memory.store"))
    assert "pytest_agent_eval.memory.quick" in loaded["gw0" if xdist else "main"]


def test_a_written_report_loads_its_format(project: pytest.Pytester) -> None:
    """The guard's other side: with the option, its module loads (the names above are real)."""
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--agent-eval-report=r.json"
    )
    result.assert_outcomes(passed=3)
    (names,) = _loaded(project).values()
    assert "pytest_agent_eval.report.json_report" in names
    record = json.loads((project.path / "r.json").read_text())["cases"][0]
    assert record["input"] == {"query": "question 0"} and len(record["content_hash"]) == 16


def test_records_with_nothing_to_scrub_are_not_copied_and_the_rest_still_are_scrubbed() -> None:
    """The records' secrets pass (every case) is one look in C when no string can hold a secret."""
    from pytest_agent_eval import secrets

    clean = {"output": "answer", "transcript": [{"role": "user", "content": "hi"}], "score": 1.0}
    assert secrets.scrub_strings(clean) is clean
    url = {"transcript": [{"content": "see https://bob:hunter22@example.com/x"}], "tags": ["a@b"]}
    assert secrets.scrub_strings(url) == {
        "transcript": [{"content": "see https://<scrubbed>@example.com/x"}],
        "tags": ["a@b"],
    }
    secrets.remember("sk-known-secret")
    try:
        assert secrets.scrub_strings({"output": ["key sk-known-secret"]}) == {
            "output": ["key <scrubbed>"]
        }
    finally:
        secrets.forget()


ALL_LOADED_CONFTEST = """
import json, sys

def pytest_sessionfinish(session):
    with open("all-loaded.json", "w") as out:
        json.dump(sorted(sys.modules), out)
"""

UNNEEDED_BY_PLAIN_CASES = (
    "asyncio",  # a sync agent's case that never waits runs without a turn of the loop
    "ssl",
    "concurrent.futures",
    "pytest_agent_eval.adapters.openai_agents",  # a plain function is no framework's agent
    "pytest_agent_eval.adapters.pydantic_ai",
    "pytest_agent_eval.adapters.langchain",
    "pytest_agent_eval.adapters.promptfoo",
    "pytest_agent_eval.adapters.http",
    "pytest_agent_eval.mocks.fixture",  # a case without tool mocks records, and mocks nothing
    "pytest_agent_eval.mocks.patching",
    "pytest_agent_eval.mocks.responses",
    "pytest_agent_eval.mocks.standins",
)
"""What a run of sync plain-function cases without tool mocks leaves unloaded (issue 38)."""


def test_plain_function_cases_load_no_event_loop_framework_adapter_or_mock_machinery(
    project: pytest.Pytester,
) -> None:
    """Measured against a plain test's run with the same plugins, so other plugins do not count.

    (anyio's and langsmith's pytest plugins load asyncio in any run: left out on both sides.)
    """
    project.makeconftest(ALL_LOADED_CONFTEST)
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    flags = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:anyio")
    flags += ("-p", "no:langsmith_plugin")
    loaded = {}
    # the eval files' second run: the first made the run store (through SQLAlchemy, which loads
    # asyncio; a current store is read and written without it)
    for run, selected in (
        ("plain", "test_plain.py"),
        ("new store", "eval_weight.json"),
        ("eval", "eval_weight.json"),
    ):
        project.runpytest_subprocess(*flags, selected).assert_outcomes(
            passed=1 if run == "plain" else 3
        )
        loaded[run] = set(json.loads((project.path / "all-loaded.json").read_text()))
    assert "pytest_agent_eval.run.runner" in loaded["eval"]  # the cases ran here
    added = loaded["eval"] - loaded["plain"]
    assert _matches(sorted(added), UNNEEDED_BY_PLAIN_CASES) == []


def test_a_native_file_loads_only_its_format_and_the_checks_it_names(
    project: pytest.Pytester,
) -> None:
    """A native JSON file with `contains` loads the native format and the output checks, no other.

    The other formats are tried by their shape without their modules, and the other check families
    are named in a table until a file names one of their checks (issue 38, SPEC §27).
    """
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", *MEMORY_OFF
    )
    result.assert_outcomes(passed=3)
    (names,) = _loaded(project).values()
    formats = _matches(names, ("pytest_agent_eval.cases.dialects",))
    assert [name for name in formats if not name.endswith(("base", "common", "neon_shape"))] == [
        "pytest_agent_eval.cases.dialects",
        "pytest_agent_eval.cases.dialects.native",
        "pytest_agent_eval.cases.dialects.native_schema",
    ]
    families = [name.rpartition(".")[2] for name in _matches(names, ("pytest_agent_eval.checks",))]
    assert sorted(families) == ["base", "checks", "output"]  # not even the regex machinery


REWRITE_PROBE = """\
import importlib, sys

def pytest_sessionfinish(session):
    # a module of the plugin loaded afresh while the session runs, as a lazily loaded one is
    name = "pytest_agent_eval.report.markdown"
    sys.modules.pop(name, None)
    module = importlib.import_module(name)
    with open("loader.txt", "w") as out:
        out.write(type(module.__loader__).__name__)
"""


def test_pytest_does_not_rewrite_the_plugins_modules(pytester: pytest.Pytester) -> None:
    """The plugin's modules load as Python loads any module, never through pytest's rewriting.

    pytest marks every module of an installed plugin for assertion rewriting (its own import hook
    parses each with ``ast``: a fifth of a one-case run, and not thread-safe in CPython 3.11 when
    modules load in worker threads). The package takes itself off that list for each session: in
    a fresh process, and in a process that imported it already (pytester's in-process runs).
    """
    pytester.makeconftest(REWRITE_PROBE)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    loaders = []
    for run in (pytester.runpytest_subprocess, pytester.runpytest_inprocess):
        run("-p", "no:cacheprovider").assert_outcomes(passed=1)
        loaders.append((pytester.path / "loader.txt").read_text(encoding="utf-8"))
    # Python's loader, or another library's import hook (beartype's claw wraps it): not pytest's
    assert "AssertionRewritingHook" not in loaders and all(loaders), loaders
