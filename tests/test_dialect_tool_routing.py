"""Tool-routing case lists load unchanged and mean what they meant (SPEC §12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dialect_support import answering, run_evals, seed_file

from pytest_agent_eval.cases.load import builtin_dialects, load_file
from pytest_agent_eval.checks import builtin_registry

CASES = [
    {"name": "Knowledge base search", "prompt": "kb", "expected_tools": ["search_knowledge_base"]},
    {
        "name": "Live subreddit browse",
        "prompt": "browse",
        "expected_tools": ["fetch_subreddit_posts"],
    },
    {
        "name": "Two tools",
        "prompt": "both",
        "expected_tools": ["fetch_reddit_thread", "search_knowledge_base"],
    },
]


def test_each_expected_tool_must_be_called_at_least_once(pytester: pytest.Pytester) -> None:
    answering(
        pytester,
        {
            "kb": [
                "ok",
                ["search_knowledge_base", "search_knowledge_base", "fetch_reddit_thread"],
            ],  # extras are fine
            "browse": ["ok", ["search_knowledge_base"]],
            "both": ["ok", ["search_knowledge_base", "fetch_reddit_thread"]],
        },
    )
    pytester.makefile(".json", eval_routing=json.dumps(CASES, indent=2))
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "case live_subreddit_browse failed: 1 of 1 checks failed (score 0.00)",
            "  ✗ tools_called: not called: fetch_subreddit_posts (score 0.00)",
            "PASSED eval_routing.json::knowledge_base_search",
            "PASSED eval_routing.json::two_tools",
        ]
    )


def test_ids_come_from_names_and_names_stay_the_description(pytester: pytest.Pytester) -> None:
    answering(pytester, {})
    cases = [*CASES, {"name": "Two tools", "prompt": "again", "expected_tools": []}]
    pytester.makefile(".json", eval_routing=json.dumps(cases))
    result = run_evals(pytester, "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "eval_routing.json::knowledge_base_search",
            "eval_routing.json::live_subreddit_browse",
            "eval_routing.json::two_tools",
            "eval_routing.json::two_tools-2",
        ]
    )
    loaded = load_file(pytester.path / "eval_routing.json", builtin_registry(), builtin_dialects())
    assert [c.description for c in loaded.cases] == [c["name"] for c in cases]
    assert {c.unmocked_tools for c in loaded.cases} == {"default"}


def test_canned_responses_and_mock_response_for_unmocked_tools(pytester: pytest.Pytester) -> None:
    """The agent's own tool dispatch is patched: the ini file's responses, then the stand-in's."""
    answering(
        pytester,
        {"both": {"tools": ["search_knowledge_base", "fetch_reddit_thread"], "dispatch": True}},
    )
    pytester.makefile(".json", eval_routing=json.dumps([CASES[2]]))
    (pytester.path / "responses.json").write_text(
        json.dumps({"search_knowledge_base": "Result 1 (r/python)"})
    )
    pytester.makeini(
        """
[pytest]
agent_eval_tool_dispatch = table_agent:dispatch_tool
agent_eval_tool_responses = responses.json
"""
    )
    result = run_evals(pytester, "-v", "-rA")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["PASSED eval_routing.json::two_tools*"])
    pytester.makefile(
        ".json", eval_routing=json.dumps([{**CASES[2], "expected_tools": ["seed_subreddit"]}])
    )
    result = run_evals(pytester, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ tools_called: not called: seed_subreddit*",
            "*- Captured agent output call -*",
            "Result 1 (r/python) | Mock response for fetch_reddit_thread",
        ]
    )


def test_bad_items_are_reported_and_the_rest_run(pytester: pytest.Pytester) -> None:
    answering(pytester, {"kb": ["ok", ["search_knowledge_base"]]})
    pytester.makefile(
        ".json",
        eval_routing="""[
  {"name": "ok", "prompt": "kb", "expected_tools": ["search_knowledge_base"]},
  {"name": "no tools", "prompt": "kb"},
  {"name": "typo", "prompt": "kb", "expected_tool": ["x"]}
]
""",
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "eval_routing.json:3: [[]1]: missing `expected_tools` (the tools the agent should "
            "call) (case no_tools)",
            "eval_routing.json:4: unknown key 'expected_tool' in [[]2] (did you mean "
            '"expected_tools"?) (case typo)',
        ]
    )


def test_the_original_case_list_runs_with_its_canned_responses(pytester: pytest.Pytester) -> None:
    cases = json.loads(seed_file("forager/eval_cases.json").read_text())
    responses = seed_file("forager/mock_tool_responses.json").read_text()
    answering(
        pytester,
        {case["prompt"]: {"tools": case["expected_tools"], "dispatch": True} for case in cases},
    )
    pytester.makefile(".json", eval_cases=json.dumps(cases))
    (pytester.path / "mock_tool_responses.json").write_text(responses)
    pytester.makeini(
        "[pytest]\nagent_eval_tool_dispatch = table_agent:dispatch_tool\n"
        "agent_eval_tool_responses = mock_tool_responses.json\n"
    )
    result = run_evals(pytester, "-v")
    result.assert_outcomes(passed=len(cases))


def test_the_example_case_list_answers_from_its_canned_responses(pytester: pytest.Pytester) -> None:
    """examples/formats with the ini wiring on the command line: canned responses, then stand-in."""
    repo = Path(__file__).resolve().parents[1]
    examples = repo / "examples" / "formats"
    pytester.syspathinsert(repo)
    pytester.makepyfile(
        probe="def pytest_agent_eval_case_result(item, result):\n"
        "    print('OUT', result.shown_trial.run.output)\n"
    )
    pytester.syspathinsert()
    result = pytester.runpytest(
        str(examples),
        "-p",
        "probe",
        "-s",
        "-p",
        "no:cacheprovider",
        "-o",
        "agent_eval_tool_dispatch=examples.formats.agent:dispatch_tool",
        "-o",
        f"agent_eval_tool_responses={examples / 'tool_responses.json'}",
    )
    result.assert_outcomes(
        passed=22
    )  # 15, and the promptfoo config and dataset of SPEC §19 (5 + 2)
    result.stdout.fnmatch_lines_random(
        [
            "*OUT From the knowledge base: Result 1 (r/python, summary): type hints make "
            "code easier to read.",
            "*OUT The thread: Mock response for fetch_reddit_thread",
        ]
    )
