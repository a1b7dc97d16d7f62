"""Category JSON loads unchanged and means what it meant (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dialect_support import answering, run_evals, seed_file

from pytest_agent_eval.checks import CheckContext
from pytest_agent_eval.checks.scorers import tool_usage
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import RunRecord, ToolCall


def categories(pytester: pytest.Pytester, data: dict[str, list[dict[str, Any]]]) -> None:
    pytester.makefile(".json", eval_cases=json.dumps(data, indent=2))


@pytest.mark.parametrize(
    ("expected", "answer", "passes"),
    [
        ("4", "2 + 2 = 4.", True),
        ("4", "The answer is 14", False),  # a bare number never matches inside another number
        ("4", "It is 4.5", False),
        ("25", "100 divided by 4 is 25%", True),
        (4, "four, or 4", True),  # a JSON number works the same
        ("4", "The answer is -4", False),  # numbers match as numbers, sign included
        ("4", "It is −4 °C", False),  # the minus sign too
        ("-4", "x = -4", True),
        ("-4", "x = 4", False),
        ("4", "It is 4.0", True),  # 4.0 is 4
        (4.0, "It is 4", True),
        ("4", "pages 3-4", True),  # a hyphen after a digit is not a sign
        ("1,000", "about 1000 people", True),
        (1000, "about 1,000 people", True),
        ("Paris", "PARIS is the capital", True),  # text is case-insensitive
        ("Paris", "Lyon", False),
    ],
)
def test_expected_answer(
    pytester: pytest.Pytester, expected: Any, answer: str, passes: bool
) -> None:
    answering(pytester, {"q": [answer, []]})
    categories(pytester, {"math_basic": [{"input": "q", "expected": expected}]})
    result = run_evals(pytester)
    result.assert_outcomes(passed=int(passes), failed=int(not passes))
    if not passes:
        result.stdout.fnmatch_lines(
            [f"*✗ answer: output does not contain the answer '{expected}'*"]
        )


def test_a_number_with_the_other_sign_is_shown_not_matched(pytester: pytest.Pytester) -> None:
    """Before, `expected: "4"` passed on "-4": the sign was not part of the number."""
    answering(pytester, {"q": ["It is -4 today, 14 tomorrow", []]})
    categories(pytester, {"math_basic": [{"input": "q", "expected": "4"}]})
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ answer: output does not contain the answer '4'*",
            "*expected: 4",
            "*actual:   not found; numbers in the output: -4, 14",
            "*output: It is -4 today, 14 tomorrow",
            "*      ^^ closest: '-4'",
        ]
    )


def test_ids_tags_and_descriptions(pytester: pytest.Pytester) -> None:
    answering(
        pytester,
        {"What is 2 + 2?": ["4", []], "What is 10 - 3?": ["7", []], "Hello there": ["Hi!", []]},
    )
    categories(
        pytester,
        {
            "math_basic": [
                {"input": "What is 2 + 2?", "expected": "4", "tags": ["math"]},
                {"input": "What is 10 - 3?", "expected": "7", "tags": ["math"]},
            ],
            "greeting": [{"input": "Hello there", "tags": ["basic"]}],
        },
    )
    result = run_evals(pytester, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "eval_cases.json::math_basic-1",
            "eval_cases.json::math_basic-2",
            "eval_cases.json::greeting-1",
        ]
    )
    result = run_evals(
        pytester, "-m", "math_basic", "-v", "--strict-markers"
    )  # the category is a tag
    result.assert_outcomes(passed=2, deselected=1)
    result = run_evals(pytester, "-k", "Hello")  # the input is the description
    result.assert_outcomes(passed=1, deselected=2)


def test_needs_a_non_empty_answer_and_no_error(pytester: pytest.Pytester) -> None:
    answering(
        pytester,
        {"empty": ["   ", []], "boom": {"raise": "model overloaded"}, "fine": ["Hello!", []]},
    )
    categories(pytester, {"greeting": [{"input": "empty"}, {"input": "boom"}, {"input": "fine"}]})
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*✗ answered: the agent finished without an answer (empty output)*",
            "*✗ agent raised RuntimeError: model overloaded*",
        ]
    )


def test_expected_tools_are_scored_and_fail_only_at_zero(pytester: pytest.Pytester) -> None:
    answering(
        pytester, {"some": ["done", ["web_search", "browser"]], "none": ["done", ["browser"]]}
    )
    item = {"expected_tools": ["web_search", "company_search_tool"]}
    categories(pytester, {"complex": [{"input": "some", **item}, {"input": "none", **item}]})
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ tool_usage: not called: company_search_tool, web_search; unexpected: "
            "browser (score 0.00)*"
        ]
    )


@pytest.mark.parametrize(
    ("expected", "called", "score"),
    [
        (["a", "b"], ["a", "b"], 1.0),
        (["a", "b"], ["a"], 0.75),  # precision 1, recall 0.5
        (["a"], ["a", "c", "d"], (1 / 3 + 1) / 2),
        (["a"], [], 0.0),
        ([], [], 1.0),
        ([], ["a"], 0.0),
    ],
)
def test_tool_usage_score(expected: list[str], called: list[str], score: float) -> None:
    run = RunRecord(output="x", tool_calls=[ToolCall(name) for name in called])
    result = tool_usage(run, expected, CheckContext(Case("c", Path("eval_cases.json"), 1)))
    assert result.score == pytest.approx(score)
    assert result.passed == (score > 0)


def test_expected_behavior_is_not_checked_without_an_llm(pytester: pytest.Pytester) -> None:
    answering(pytester, {"Hello": ["", []]})
    categories(
        pytester, {"greeting": [{"input": "Hello", "expected_behavior": "Should introduce itself"}]}
    )
    result = run_evals(pytester)
    result.assert_outcomes(
        failed=1
    )  # failed for the empty answer; the behaviour is listed, not judged
    result.stdout.fnmatch_lines(["*✗ answered*", "*✓ behavior (not scored)*"])


def test_expected_behavior_is_judged_with_an_llm(pytester: pytest.Pytester) -> None:
    answering(pytester, {"Hello": ["Hi, I am SprintLab.", []], "Hey": ["Whatever.", []]})
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages):
        good = "SprintLab." in messages[-1]["content"]
        return '{"score": 0.9, "reason": "ok"}' if good else '{"score": 0.1, "reason": "no intro"}'
    return llm
"""
    )
    rubric = "Should introduce itself as SprintLab"
    categories(
        pytester,
        {
            "greeting": [
                {"input": "Hello", "expected_behavior": rubric},
                {"input": "Hey", "expected_behavior": rubric},
            ]
        },
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*✗ behavior: judge scored 0.10 < 0.7: no intro*"])


def test_response_time_is_scored_and_reported_and_timeout_applies(
    pytester: pytest.Pytester,
) -> None:
    answering(
        pytester, {"slow": {"output": "4", "sleep": 0.3}, "slower": {"output": "4", "sleep": 3}}
    )
    categories(
        pytester,
        {
            "math": [
                {"input": "slow", "expected": "4", "timeout": 2},
                {"input": "slower", "expected": "4", "timeout": 0.5},
            ]
        },
    )
    result = run_evals(pytester, "--junitxml=report.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*✗ agent did not answer within 0.5 s*"])
    xml = (pytester.path / "report.xml").read_text()
    assert (
        'name="score" value="0.99' in xml
    )  # mean of answered 1, answer 1, response_time 1 - 0.3/30


def test_the_original_test_cases_file_loads(pytester: pytest.Pytester) -> None:
    data = json.loads(seed_file("kortix/test_cases.json").read_text())
    answering(pytester, {})
    pytester.makefile(".json", eval_test_cases=json.dumps(data))
    result = run_evals(pytester, "--collect-only", "-q")
    total = sum(len(items) for items in data.values())
    result.stdout.fnmatch_lines(
        [
            "eval_test_cases.json::math_basic-1",
            "eval_test_cases.json::complex-10",
            f"{total} tests collected*",
        ]
    )
