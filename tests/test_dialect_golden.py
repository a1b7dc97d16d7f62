"""Golden-set JSON (decision and QA cases) loads unchanged and means what it meant (SPEC §12)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dialect_support import answering, run_evals, seed_file

from pytest_agent_eval.checks.answers import allocation_valid
from pytest_agent_eval.core.results import RunRecord


def golden(
    pytester: pytest.Pytester, items: list[dict[str, Any]], name: str = "eval_golden"
) -> None:
    pytester.makefile(".json", **{name: json.dumps(items, indent=2)})


def decision(case_id: str, query: str, **expected: Any) -> dict[str, Any]:
    return {"id": case_id, "input": query, "expected": expected}


def test_tools_used_compares_sets(pytester: pytest.Pytester) -> None:
    answering(
        pytester,
        {
            "repeat": ["Allocated.", ["allocate", "allocate"]],
            "reorder": ["Allocated.", ["b", "a"]],
            "extra": ["Allocated.", ["a", "c"]],
            "missing": ["Allocated.", []],
        },
    )
    golden(
        pytester,
        [
            decision("repeat", "repeat", tools_used=["allocate"]),
            decision("reorder", "reorder", tools_used=["a", "b"]),
            decision("extra", "extra", tools_used=["a"]),
            decision("missing", "missing", tools_used=["a"]),
        ],
    )
    result = run_evals(pytester, "-rA", "-m", "decision")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*✗ tools_exactly: unexpected: c*",
            "*✗ tools_exactly: not called: a*",
            "PASSED eval_golden.json::repeat",
            "PASSED eval_golden.json::reorder",
        ]
    )


@pytest.mark.parametrize(
    ("answer", "valid", "passes"),
    [
        ("Allocated in requested window on dyno 3.", True, True),
        ("Vehicle not found.", True, False),  # "found" inside "not found" is never success
        ("Vehicle not found.", False, True),
        ("Allocated with backup shift.", False, False),
        (
            "I looked at the calendar.",
            False,
            True,
        ),  # false fails only when the answer reads as success
        ("I looked at the calendar.", True, False),
        ("Booked, but the dyno is unavailable on Monday.", True, False),  # a failure phrase wins
    ],
)
def test_allocation_valid_reads_the_answer(
    pytester: pytest.Pytester, answer: str, valid: bool, passes: bool
) -> None:
    answering(pytester, {"q": [answer, []]})
    golden(pytester, [decision("alloc", "q", allocation_valid=valid)])
    result = run_evals(pytester)
    result.assert_outcomes(passed=int(passes), failed=int(not passes))
    if not passes:
        result.stdout.fnmatch_lines(["*✗ allocation_valid: answer reads as *"])


@pytest.mark.parametrize(
    ("answer", "reading"),
    [
        (
            "There are 42 completed tests.",
            "unclear",
        ),  # a metrics answer is no allocation: not a success word
        ("The brake test is scheduled on dyno 2.", "success"),
        ("Allocation successful.", "success"),
        ("3 dynos are available for that window.", "success"),
        ("Dyno 2 is unavailable.", "failure"),  # never "available"
        ("Vehicle 99999 not found.", "failure"),  # never "found"
        ("No dynos match a 9000 lb AWD vehicle.", "failure"),
        ("A start date is required.", "failure"),
        ("Allocation failed: errors in the request.", "failure"),
        ("Booked dyno 3. Note: the 2WD dyno was invalid.", "failure"),  # a failure phrase wins
    ],
)
def test_allocation_reading_uses_the_home_projects_word_lists(answer: str, reading: str) -> None:
    valid = allocation_valid(RunRecord(output=answer), True, None)  # type: ignore[arg-type]
    invalid = allocation_valid(RunRecord(output=answer), False, None)  # type: ignore[arg-type]
    assert valid.actual.startswith(f"reads as {reading}")
    assert (valid.passed, invalid.passed) == (reading == "success", reading != "success")


def test_a_metrics_answer_passes_allocation_valid_false(pytester: pytest.Pytester) -> None:
    """A decision case that is no allocation (a count) passes `allocation_valid: false`.

    As in its home project.
    """
    answering(
        pytester,
        {"How many tests are completed right now?": ["There are 42 completed tests.", ["count"]]},
    )
    item = decision(
        "metric",
        "How many tests are completed right now?",
        tools_used=["count"],
        allocation_valid=False,
    )
    golden(pytester, [{**item, "expected": {**item["expected"], "reason_contains": ["completed"]}}])
    run_evals(pytester).assert_outcomes(passed=1)


def test_reason_contains_is_case_insensitive_and_constraints_are_shown(
    pytester: pytest.Pytester,
) -> None:
    answering(
        pytester,
        {"ok": ["VEHICLE NOT FOUND: id 99999", ["auto_allocate_vehicle"]], "bad": ["Done.", []]},
    )
    constraints = ["vehicle record must exist before allocation"]
    golden(
        pytester,
        [
            decision("ok", "ok", reason_contains=["Vehicle not found"], constraints=constraints),
            decision("bad", "bad", reason_contains=["Vehicle not found"], constraints=constraints),
        ],
    )
    result = run_evals(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*case bad failed*",
            "*✗ contains: output lacks 'Vehicle not found'*",
            "*metadata: {'constraints': *'vehicle record must exist before allocation'*",
            "eval_golden.json:*: bad",
        ]
    )


@pytest.mark.parametrize("key", ["expected_contains", "expected"])
def test_qa_cases_accept_both_key_variants(pytester: pytest.Pytester, key: str) -> None:
    answering(
        pytester,
        {
            "good": ["Matching uses SUPPORTED_WEIGHT_CLASSES from the DB.", []],
            "vague": ["I guess it uses weights.", []],
        },
    )
    items = [
        {
            "id": "good",
            "input": "good",
            key: ["supported_weight_classes"],
            "must_not_contain": ["guess"],
        },
        {
            "id": "vague",
            "input": "vague",
            key: ["supported_weight_classes"],
            "must_not_contain": ["guess"],
        },
    ]
    golden(pytester, items)
    result = run_evals(
        pytester, "-rA", "-m", "qa"
    )  # QA cases are tagged `qa`, decision cases `decision`
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ contains: output lacks 'supported_weight_classes'*",
            "*✗ not_contains: output contains 'guess'*",
            "PASSED eval_golden.json::good",
        ]
    )


def test_ids_and_bad_items(pytester: pytest.Pytester) -> None:
    answering(pytester, {"q": ["Matching uses the DB.", []]})
    pytester.makefile(
        ".json",
        eval_golden="""[
  {"id": "basis", "input": "q", "expected_contains": ["db"]},
  {"id": "alloc.v1", "input": "q", "expected": {"tools_used": []}},
  {"id": "basis", "input": "q", "expected_contains": ["db"]},
  {"id": "no_input", "expected_contains": ["db"]},
  {"id": "typo", "input": "q",
   "expected": {"tool_used": ["x"]}}
]
""",
    )
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "PASSED eval_golden.json::basis",
            # not an [A-Za-z0-9_-]+ id: slugified, the original kept
            "PASSED eval_golden.json::alloc_v1*",
            "eval_golden.json:4: duplicate case id 'basis' (first at line 2); give each case a "
            "unique `id` (case basis-line4)",
            "eval_golden.json:5: [[]3]: missing `input` (the prompt sent to the "
            "agent) (case no_input)",
            "eval_golden.json:7: unknown key 'tool_used' in [[]4].expected (did you mean "
            '"tools_used"?) (case typo)',
        ]
    )


def test_seed_golden_sets_run_with_an_agent_that_answers_them(pytester: pytest.Pytester) -> None:
    """Every decision and QA file of the original project runs; each case passes on its merits."""
    items = json.loads(
        seed_file("dyno-agent/agent_qa_v1.0.0.HEAD-expected-key-variant.json").read_text()
    )
    answers = {item["input"]: ["; ".join(item["expected"]), []] for item in items}
    answers[items[0]["input"]] = ["I am not sure, I would guess.", []]
    answering(pytester, answers)
    pytester.makefile(".json", eval_qa=json.dumps(items))
    result = run_evals(pytester)
    result.assert_outcomes(passed=len(items) - 1, failed=1)
    result.stdout.fnmatch_lines([f"*case {items[0]['id']} failed: 2 of 2 checks failed*"])


def test_seed_completed_tests_metric_passes_with_its_home_answer(pytester: pytest.Pytester) -> None:
    """The real decision case `completed_tests_metric` passes with the answer passing at home."""
    items = json.loads(seed_file("dyno-agent/agent_decisions_v1.0.0.json").read_text())
    case = next(item for item in items if item["id"] == "completed_tests_metric")
    answering(
        pytester, {case["input"]: ["There are 42 completed tests.", case["expected"]["tools_used"]]}
    )
    pytester.makefile(".json", eval_decisions=json.dumps([case]))
    run_evals(pytester, "-rA").stdout.fnmatch_lines(
        ["PASSED eval_decisions.json::completed_tests_metric"]
    )
