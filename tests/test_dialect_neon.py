"""Neon suite YAML loads unchanged and means what it meant (SPEC §12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dialect_support import answering, run_evals, seed_file

from pytest_agent_eval.cases.load import builtin_dialects, load_file
from pytest_agent_eval.checks import CheckContext, builtin_registry
from pytest_agent_eval.checks.scorers import efficiency, grounding, tool_selection
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import RunRecord, ToolCall

SUITE = """\
name: demo
agent_id: table_agent:run
default_scorers: [tool_selection]
default_min_score: 0.9
default_timeout_seconds: 0.5
cases:
  - name: uses_defaults
    input: {query: two tools}
    expected_tools: [web_search]
  - name: overrides
    input: {query: two tools}
    expected_tools: [web_search]
    scorers: [tool_selection, grounding]
    expected_output_contains: [Paris]
    min_score: 0.5
    timeout_seconds: 5
"""


def ctx(**case: Any) -> CheckContext:
    return CheckContext(Case("c", Path("eval_suite.yaml"), 1, **case))


def calls(*names: str) -> RunRecord:
    return RunRecord(output="", tool_calls=[ToolCall(n) for n in names])


def test_suite_defaults_apply_to_cases_that_do_not_set_their_own(tmp_path: Path) -> None:
    path = tmp_path / "eval_suite.yaml"
    path.write_text(SUITE)
    first, second = load_file(path, builtin_registry(), builtin_dialects()).cases
    assert (first.expect, first.min_score, first.timeout, first.agent) == (
        {"tool_selection": {"expected_tools": ["web_search"]}},
        0.9,
        0.5,
        "table_agent:run",
    )
    assert (list(second.expect), second.min_score, second.timeout) == (
        ["tool_selection", "grounding"],
        0.5,
        5,
    )


def test_suite_defaults_decide_the_verdict(pytester: pytest.Pytester) -> None:
    """Jaccard({web_search}, {web_search, browser}) = 0.5.

    Below the suite's 0.9, above the case's own 0.5.
    """
    answering(
        pytester, {"two tools": {"output": "Paris", "tools": ["web_search", "browser"], "sleep": 1}}
    )
    pytester.makefile(".yaml", eval_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider")  # the file's agent_id names the agent
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*✗ agent did not answer within 0.5 s*"])


def test_mean_of_scorers_reaches_min_score(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["Berlin", ["web_search", "browser"]]})
    pytester.makefile(
        ".yaml",
        eval_suite="""\
name: s
default_min_score: 0.6
cases:
  - name: half_and_half
    input: {query: q}
    expected_tools: [web_search]
    expected_output_contains: [Berlin, Paris]
    scorers: [tool_selection, grounding]
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case half_and_half failed: score 0.50 below min_score 0.6 (2 of 2 checks failed)",
            "  ✗ tool_selection: below min_score 0.6: unexpected: browser (score 0.50)",
            "  ✗ grounding: below min_score 0.6: missing 'Paris' (score 0.50)",
        ]
    )


def test_reasoning_is_not_scored_without_an_llm(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["4", []], "r": ["4", ["calculator"]]})
    pytester.makefile(
        ".yaml",
        eval_suite="""\
name: s
default_scorers: [tool_selection, reasoning]
cases:
  - {name: no_tools, input: {query: q}, expected_tools: []}
  - {name: tool_called, input: {query: r}, expected_tools: []}
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, failed=1)
    # the mean is tool_selection's alone (0.00), not pulled up or down by a made-up reasoning score
    result.stdout.fnmatch_lines(
        [
            "case tool_called failed: score 0.00 below min_score 0.7 (1 of 2 checks failed)",
            "*✗ tool_selection: below min_score 0.7: unexpected: calculator (score 0.00)",
            "  ✓ reasoning (not scored)",
        ]
    )


def test_reasoning_and_grounding_use_the_llm_when_configured(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["Paris, I think", []]})
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages):
        text = messages[-1]["content"]
        return '{"score": 0.2, "reason": "jumps to a conclusion"}' if "reasoning" in text \
else '{"score": 1}'
    return llm
"""
    )
    pytester.makefile(
        ".yaml",
        eval_suite="""\
name: s
cases:
  - name: judged
    input: {query: q}
    expected_output_contains: [Paris, Berlin]
    scorers: [reasoning, grounding]
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    # grounding = 0.3 x 0.5 (content) + 0.7 x 1.0 (LLM) = 0.85; mean with reasoning 0.2 = 0.525
    result.stdout.fnmatch_lines(
        [
            "case judged failed: score 0.53 below min_score 0.7 (1 of 2 checks failed)",
            "  ✗ reasoning: below min_score 0.7: jumps to a conclusion (score 0.20)",
            "  ✓ grounding",
        ]
    )


@pytest.mark.parametrize(
    ("spec", "called", "score"),
    [
        ({"expected_tools": []}, [], 1.0),
        ({"expected_tools": []}, ["a"], 0.0),
        ({"expected_tools": ["a", "b"]}, ["b", "a", "a"], 1.0),  # sets: order and repeats ignored
        ({"expected_tools": ["a", "b"]}, ["a", "c"], 1 / 3),
        ({"expected_tool_sequence": ["a", "b"]}, ["a", "b"], 1.0),
        ({"expected_tool_sequence": ["a", "b"]}, ["b", "a"], (1.0 + 0.5) / 2),  # LCS 1 of 2
        (
            {"expected_tools": ["a"], "expected_tool_sequence": ["a", "b"]},
            ["a", "b", "c"],
            (1 / 3 + 2 / 3) / 2,
        ),
    ],
)
def test_tool_selection_score(spec: dict[str, Any], called: list[str], score: float) -> None:
    assert tool_selection(calls(*called), spec, ctx()).score == pytest.approx(score)


def test_tool_selection_without_expectations_is_not_scored() -> None:
    result = tool_selection(calls("a"), {}, ctx())
    assert (result.passed, result.scored, result.message) == (
        True,
        False,
        "not scored: no expected_tools or expected_tool_sequence",
    )


def test_grounding_share_is_case_insensitive_and_counts_the_pattern() -> None:
    run = RunRecord(output="The XZ-5000 is FASTER and water resistant")
    result = grounding(
        run, {"contains": ["faster", "battery", "Water"], "pattern": r"xz-\d+"}, ctx(min_score=0.7)
    )
    assert (result.score, result.passed) == (0.75, True)


@pytest.mark.parametrize(
    ("calls_made", "latency", "spec", "score"),
    [
        (2, 1.0, {"max_tool_calls": 2}, 1.0),
        (5, 1.0, {"max_tool_calls": 2}, (3 / 6 + 1.0) / 2),  # (budget + 1) / (calls + 1)
        (0, 20.0, {}, 0.5),  # latency target 10 s: 10 / 20
        (1, 4.0, {"max_tool_calls": 0, "target_latency_s": 2}, (1 / 2 + 2 / 4) / 2),
    ],
)
def test_efficiency_rule(
    calls_made: int, latency: float, spec: dict[str, Any], score: float
) -> None:
    run = RunRecord(tool_calls=[ToolCall("t")] * calls_made, latency_s=latency)
    assert efficiency(run, spec, ctx()).score == pytest.approx(score)


def test_custom_scorer_is_a_registered_check_named_in_scorer_config(
    pytester: pytest.Pytester,
) -> None:
    answering(pytester, {"q": ["Sorry, no.", []], "p": ["Thanks!", []]})
    pytester.makeconftest(
        """
from pytest_agent_eval import CheckResult

def polite(run, spec, ctx):
    ok = "thank" in run.output.lower()
    return CheckResult.of("polite", ok, message="" if ok else "no thanks")

def pytest_agent_eval_register_checks(registry):
    registry.register("polite", polite, {"const": True})
"""
    )
    pytester.makefile(
        ".yaml",
        eval_suite="""\
name: s
default_scorers: [custom]
cases:
  - {name: rude, input: {query: q}, scorer_config: {custom: polite}}
  - {name: nice, input: {query: p}, scorer_config: {custom: {polite: true}}}
  - {name: unknown, input: {query: p}, scorer_config: {custom: politeness}}
  - {name: unset, input: {query: p}}
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, failed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "  ✗ polite: no thanks (score 0.00)",
            "eval_suite.yaml:6: unknown check 'politeness' in "
            "cases[[]2].scorer_config.custom (did you mean*",
            "eval_suite.yaml:7: scorer `custom` needs `scorer_config: *` naming a check "
            "registered through *",
        ]
    )


def test_stop_on_failure_skips_the_rest_of_the_suite(pytester: pytest.Pytester) -> None:
    answering(pytester, {"good": ["ok", ["t"]], "bad": ["ok", []]})
    cases = "\n".join(
        f"  - {{name: {name}, input: {{query: {query}}}, expected_tools: [t]}}"
        for name, query in [
            ("first", "good"),
            ("second", "bad"),
            ("third", "good"),
            ("fourth", "good"),
        ]
    )
    pytester.makefile(".yaml", eval_stop=f"name: s\nstop_on_failure: true\ncases:\n{cases}\n")
    pytester.makefile(".yaml", eval_go_on=f"name: t\nstop_on_failure: false\ncases:\n{cases}\n")
    result = run_evals(pytester, "-rs")
    result.assert_outcomes(passed=4, failed=2, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]2] eval_stop.yaml*: stop_on_failure: eval_stop.yaml::second failed "
            "earlier in this file"
        ]
    )


def test_cli_agent_overrides_agent_id(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["fine", []]})
    pytester.makefile(
        ".yaml",
        eval_suite="name: s\nagent_id: nowhere.to_be:found\ncases:\n"
        "  - {name: a, input: {query: q}, expected_tools: []}\n",
    )
    run_evals(pytester).assert_outcomes(passed=1)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["eval_suite.yaml:2: agent 'nowhere.to_be:found': cannot import module 'nowhere.to_be'*"]
    )


def test_bad_cases_are_reported_at_their_line_and_the_rest_run(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["fine", []]})
    pytester.makefile(
        ".yaml",
        eval_suite="""\
name: s
cases:
  - {name: good, input: {query: q}, expected_tools: []}
  - name: typo_scorer
    input: {query: q}
    scorers: [tool_selection, groundedness]
  - name: bad_regex
    input: {query: q}
    expected_output_pattern: "(unclosed"
  - {name: good, input: {query: q}, expected_tools: []}
  - {name: no_input, expected_tools: []}
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, errors=4)
    result.stdout.fnmatch_lines_random(
        [
            "eval_suite.yaml:6: unknown scorer 'groundedness' in cases[[]1].scorers (did you "
            'mean "grounding"?)*',
            "eval_suite.yaml:9: cases[[]2].expected_output_pattern: bad regular "
            "expression '(unclosed': *",
            "eval_suite.yaml:10: duplicate case name 'good' (first at line 3); give each "
            "case a unique `name`*",
            "eval_suite.yaml:11: cases[[]4]: missing `input` (`input: {query: "
            "...}`) (case no_input)",
        ]
    )


def test_suite_level_problems_fail_the_file_with_every_message(pytester: pytest.Pytester) -> None:
    answering(pytester, {})
    pytester.makefile(
        ".yaml",
        eval_suite="name: s\ndefault_scorers: [tool_selection, reasonning]\ndefault_min_score: 2\n"
        "paralel: 1\ncases: []\n",
    )
    result = run_evals(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_suite.yaml:2: unknown scorer 'reasonning' in default_scorers (did you "
            'mean "reasoning"?)',
            "eval_suite.yaml:3: default_min_score: must be between 0 and 1, got 2",
            "eval_suite.yaml:4: unknown key 'paralel' in (top level) (did you mean \"parallel\"?)",
        ]
    )


@pytest.mark.parametrize(
    "name",
    [
        "simple-suite.yaml",
        "demo-suite.yaml",
        "integration-fixture-test-suite.yaml",
        "integration-fixture-failing-suite.yaml",
    ],
)
def test_the_original_suites_load(pytester: pytest.Pytester, name: str) -> None:
    text = seed_file(f"neon/{name}").read_text()
    answering(pytester, {})
    pytester.makefile(".yaml", **{f"eval_{Path(name).stem}": text})
    result = run_evals(pytester, "--collect-only", "-q")
    assert "error" not in result.stdout.str().lower()
    result.stdout.fnmatch_lines(["* collected in *"])


def test_the_integration_suites_pass_and_fail_as_in_neon(pytester: pytest.Pytester) -> None:
    passing = seed_file("neon/integration-fixture-test-suite.yaml").read_text()
    failing = seed_file("neon/integration-fixture-failing-suite.yaml").read_text()
    answering(
        pytester,
        {
            "What is 2 + 2?": ["2 + 2 = 4", []],
            "What is the capital of France?": ["Paris", ["web_search"]],
            "Tell me something random": ["Bananas are berries.", []],
        },
    )
    pytester.makefile(".yaml", eval_passing=passing, eval_failing=failing)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*case impossible_test failed: score 0.00 below min_score 0.99*"])
