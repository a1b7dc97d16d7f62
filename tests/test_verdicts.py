"""Verdicts and failure text as users see them, in pytester runs.

Scores and counts that agree with the ✗ lines, each message once, cases without `expect`, the
failure-text hook, agent references from the rootdir.
"""

from __future__ import annotations

import asyncio
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.checks import builtin_registry
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.run.agents import as_agent
from pytest_agent_eval.run.runner import run_case
from pytest_agent_eval.run.settings import RunSettings

AGENT = '''
def dispatch(name, args):
    raise RuntimeError(f"real tool {name} reached")

def run(query, context):
    """Calls the tools in the context (catching their errors), then answers `say`, or \
raises `raise`."""
    for name in context.get("calls", []):
        try:
            dispatch(name, {})
        except Exception:
            pass
    if context.get("raise"):
        raise RuntimeError(context["raise"])
    return context.get("result", context.get("say", "the answer"))

def broken_check(run):
    raise RuntimeError("the check broke")
'''


def run_evals(pytester: pytest.Pytester, cases: str, *args: str) -> pytest.RunResult:
    """Write `vagent.py` and `eval_v.yaml` (cases under `cases:`); run pytest, a junit report on."""
    pytester.makepyfile(vagent=AGENT)
    pytester.syspathinsert()
    head = "agent: vagent:run\ntool_dispatch: vagent:dispatch\ncases:\n"
    pytester.path.joinpath("eval_v.yaml").write_text(
        head + textwrap.indent(textwrap.dedent(cases), "  ")
    )
    return pytester.runpytest(
        "-p", "no:randomly", "-p", "no:cacheprovider", "--junitxml=r.xml", *args
    )


def junit_scores(pytester: pytest.Pytester) -> dict[str, str]:
    root = ET.parse(pytester.path / "r.xml").getroot()
    return {
        str(tc.get("name")): next(
            str(p.get("value")) for p in tc.iter("property") if p.get("name") == "score"
        )
        for tc in root.iter("testcase")
    }


def test_score_and_counts_agree_with_the_failed_lines(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - id: unmocked
          input: {query: q, context: {calls: [refund]}}
          expect: {contains: [the answer]}
        - id: raising
          input: {query: q, context: {raise: model overloaded}}
          expect: {contains: [the answer]}
        - id: fine
          input: q
          expect: {contains: [the answer]}
        - id: no_verdict
          input: q
          expect: {custom: vagent:broken_check}
        """,
    )
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "case unmocked failed: 1 of 2 checks failed (score 0.50)",
            "  ✓ contains",
            "  ✗ unmocked tool call refund() in case unmocked *",
            "case raising failed: the agent failed, nothing was checked (score 0.00)",
            "  ✗ agent raised RuntimeError: model overloaded",
            "case no_verdict failed: 1 of 1 checks failed, 1 without a verdict (no score)",
        ]
    )
    # a check without a verdict leaves nothing to score: no made-up 1.000
    assert junit_scores(pytester) == {
        "unmocked": "0.500",
        "raising": "0.000",
        "fine": "1.000",
        "no_verdict": "not scored",
    }
    out = result.stdout.str()
    # each message once: the header counts, the ✗ line says what
    assert out.count("unmocked tool call refund()") == 1
    assert out.count("agent raised RuntimeError: model overloaded") == 1


def test_a_case_without_expect_checks_that_the_agent_answered(pytester: pytest.Pytester) -> None:
    result = run_evals(
        pytester,
        """
        - {id: returns_none, input: {query: q, context: {result: null}}}
        - {id: returns_blank, input: {query: q, context: {result: "  "}}}
        - {id: answers, input: q}
        """,
    )
    result.assert_outcomes(passed=1, failed=2)
    for case in ("returns_none", "returns_blank"):
        result.stdout.fnmatch_lines(
            [
                f"case {case} failed: 1 of 1 checks failed (score 0.00)",
                "  ✗ answered: the agent finished without an answer (empty output) (score 0.00)",
            ]
        )


def test_a_dict_without_an_answer_fails_naming_the_keys_it_accepts(
    pytester: pytest.Pytester,
) -> None:
    result = run_evals(
        pytester,
        """
        - id: text_key
          input: {query: q, context: {result: {text: the answer}}}
          expect: {contains: [the answer]}
        - id: output_key
          input: {query: q, context: {result: {output: the answer}}}
          expect: {contains: [the answer]}
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    assert (
        "  ✗ the agent returned a dict without an answer: its keys are ['text']; put the answer "
        "under 'output', 'response', 'answer', 'final_message', or return a chat state with "
        "'messages' (a list), a string or an AgentResult\n"
    ) in result.stdout.str()


def test_another_plugins_assertrepr_compare_cannot_replace_the_failure_text(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
def pytest_assertrepr_compare(config, op, left, right):
    return ["HIJACKED"]  # as pytest-icdiff does for every ==
"""
    )
    result = run_evals(pytester, "- {id: wrong, input: q, expect: {contains: [nowhere]}}\n")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["case wrong failed: 1 of 1 checks failed (score 0.00)", "  ✗ contains: *"]
    )
    result.stdout.no_fnmatch_line("*HIJACKED*")


def test_the_failure_lines_hook_replaces_the_text(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
def pytest_agent_eval_failure_lines(item, result, verbose):
    if result.case.id == "mine":
        return [f"my text for {result.case.id}: score {result.score:.1f}, verbose {verbose}"]
    return None  # the plugin's own text
"""
    )
    result = run_evals(
        pytester,
        """
        - {id: mine, input: q, expect: {contains: [nowhere]}}
        - {id: theirs, input: q, expect: {contains: [nowhere]}}
        """,
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["my text for mine: score 0.0, verbose 0", "case theirs failed: 1 of 1 checks failed*"]
    )


def test_an_unimportable_agent_reads_as_one_message(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", eval_imp="agent: nosuchmodule:run\ncases:\n  - {id: a, input: q}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "_* a _*",
            "eval_imp.yaml:1: agent 'nosuchmodule:run': cannot import module 'nosuchmodule': "
            "ModuleNotFoundError: No module named 'nosuchmodule'; check the module path and that "
            "it is importable from the rootdir or sys.path",
            "*short test summary info*",
        ]
    )
    assert result.stdout.str().count("No module named 'nosuchmodule'") == 1
    result.stdout.no_fnmatch_line("*During handling of the above exception*")
    result.stdout.no_fnmatch_line("*direct cause*")


def test_an_agent_fixture_that_needs_a_missing_fixture_is_named_as_such(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
import pytest

@pytest.fixture
def agent(api_key):
    return lambda query, context: "hi"
"""
    )
    pytester.makefile(".yaml", eval_fx="cases:\n  - {id: a, input: q}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*fixture 'api_key' not found*"])
    result.stdout.no_fnmatch_line("*('api_key', <*")
    result.stdout.no_fnmatch_line("*no agent for case*")
    result.stdout.no_fnmatch_line("*During handling of the above exception*")


def test_an_agent_fixture_that_raises_shows_its_own_frames_only(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import os, pytest

@pytest.fixture
def agent():
    key = os.environ["NO_SUCH_API_KEY_FOR_THE_TEST"]
    return lambda query, context: key
"""
    )
    pytester.makefile(".yaml", eval_fx="cases:\n  - {id: a, input: q}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*def agent():",
            ">*key = os.environ*",
            "conftest.py:5: *",
            "E*KeyError: 'NO_SUCH_API_KEY_FOR_THE_TEST'",
        ]
    )
    for plumbing in (
        "_pytest",
        "pluggy",
        "pytest_agent_eval",
    ):  # pytest's calls into the fixture, the plugin's
        result.stdout.no_fnmatch_line(f"*{plumbing}*.py*")


def test_an_agent_fixture_of_the_wrong_kind_reads_as_one_message(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef agent():\n    return 42\n")
    pytester.makefile(".yaml", eval_fx="cases:\n  - {id: a, input: q}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "eval_fx.yaml:2: the `agent` fixture: got int 42, not an agent: expected a callable "
            "(query, context) -> result, or an object with run/invoke/ainvoke"
        ]
    )
    result.stdout.no_fnmatch_line("*During handling of the above exception*")


def test_an_agent_reference_imports_from_the_rootdir_under_bare_pytest(
    pytester: pytest.Pytester,
) -> None:
    # The project is proj/ (its rootdir): no conftest.py, so nothing puts proj/ on sys.path.
    # pytester runs
    # `python -m pytest` in its own directory, which puts that directory (not proj/) on sys.path.
    proj = pytester.mkdir("proj")
    (proj / "pytest.ini").write_text("[pytest]\n")
    (proj / "myproject").mkdir()
    (proj / "myproject" / "__init__.py").write_text("")
    (proj / "myproject" / "agents.py").write_text(
        "def run(query, context):\n    return 'answer to ' + query\n"
    )
    (proj / "myproject" / "broken.py").write_text("import no_such_dependency\n")
    (proj / "evals").mkdir()
    (proj / "evals" / "eval_x.yaml").write_text(
        "agent: myproject.agents:run\ncases:\n"
        "  - {id: a, input: q, expect: {contains: [answer to q]}}\n"
    )
    (proj / "evals" / "eval_broken.yaml").write_text(
        "agent: myproject.broken:run\ncases:\n  - {id: b, input: q}\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "proj")
    result.assert_outcomes(passed=1, failed=1)
    # a module the agent's module imports is not looked for elsewhere: the message names it
    result.stdout.fnmatch_lines(
        [
            "evals/eval_broken.yaml:1: agent 'myproject.broken:run': cannot import module "
            "'myproject.broken': ModuleNotFoundError: No module named 'no_such_dependency'*"
        ]
    )


# -- the runner alone
# --------------------------------------------------------------------------------------------


def _run(agent: Any, timeout: float | None, expect: dict[str, Any] | None = None) -> Any:
    case = Case(
        id="c", path=Path("eval_x.yaml"), line=1, query="q", timeout=timeout, expect=expect or {}
    )
    return asyncio.run(
        run_case(case, as_agent(agent), RunSettings(checks=builtin_registry()))
    ).trials[0]


def _own_timeout(query: str, context: dict[str, Any]) -> str:
    raise TimeoutError("upstream slow")


async def _own_asyncio_timeout(query: str, context: dict[str, Any]) -> str:
    raise asyncio.TimeoutError("asyncio slow")  # not the builtin on Python 3.10


async def _hang(query: str, context: dict[str, Any]) -> str:
    await asyncio.sleep(5)
    return "late"


@pytest.mark.parametrize("agent", [_own_timeout, _own_asyncio_timeout])
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_the_agents_own_timeout_error_is_not_the_timeout(agent: Any, timeout: float | None) -> None:
    trial = _run(agent, timeout)
    assert trial.run.error.startswith("agent raised TimeoutError: ")
    assert f"in {agent.__name__}" in trial.run.traceback
    assert (trial.passed, trial.score) == (False, 0.0)


def test_only_the_deadline_reads_as_did_not_answer() -> None:
    trial = _run(_hang, 0.05)
    assert trial.run.error == "agent did not answer within 0.05 s (timeout of case c)"


def test_without_expect_the_answer_is_checked() -> None:
    assert [(c.name, c.passed) for c in _run(lambda q, c: None, None).checks] == [
        ("answered", False)
    ]
    assert [(c.name, c.passed) for c in _run(lambda q, c: "hi", None).checks] == [
        ("answered", True)
    ]
    assert [c.name for c in _run(lambda q, c: "hi", None, {"contains": ["hi"]}).checks] == [
        "contains"
    ]
