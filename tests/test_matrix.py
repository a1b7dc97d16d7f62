"""A matrix: every case against each agent as ``case[name]`` (``agents:``, --agent-eval-agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_agent_eval.cases.load import builtin_dialects, load_file
from pytest_agent_eval.checks import builtin_registry
from pytest_agent_eval.plugin.collect import matrix_variants
from pytest_agent_eval.report.schema import report_schema

# Two agents that differ on one question: `careful` knows the refund window, `hasty` does not.
AGENTS = """
import time

def careful(query, context):
    time.sleep(0.001)
    return {"output": "Refunds within 30 days." if "refund" in query else "Hello!",
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.002}}

def hasty(query, context):
    return {"output": "No idea." if "refund" in query else "Hello!",
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "cost": 0.001}}

def own(query, context):
    return "mine"
"""

MATRIX = """\
agents:
  careful: matrix_agents:careful
  hasty: matrix_agents:hasty
cases:
  - id: refund
    input: How long do refunds take?
    expect: {contains: "30 days"}
  - id: greet
    input: hi
    expect: {contains: Hello}
  - id: pinned
    agent: matrix_agents:own
    input: anything
    expect: {contains: mine}
"""


@pytest.fixture
def matrix(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(matrix_agents=AGENTS)
    pytester.makefile(".yaml", eval_matrix=MATRIX)
    pytester.syspathinsert()
    return pytester


def _outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {c["nodeid"]: c["outcome"] for c in report["cases"]}


def _load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    return report


def test_each_case_runs_against_each_agent_as_its_own_item(matrix: pytest.Pytester) -> None:
    result = matrix.runpytest("-p", "no:cacheprovider", "-v", "--agent-eval-report", "r.json")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*eval_matrix.yaml::refund[[]careful[]] PASSED*",
            "*eval_matrix.yaml::refund[[]hasty[]] FAILED*",
            "*eval_matrix.yaml::greet[[]careful[]] PASSED*",
            "*eval_matrix.yaml::greet[[]hasty[]] PASSED*",
            "*eval_matrix.yaml::pinned PASSED*",  # its own agent: once, not per matrix agent
        ]
    )
    report = _load(matrix.path / "r.json")
    by_id = {c["case_id"]: c for c in report["cases"]}
    assert by_id["refund[hasty]"]["agent"] == "hasty"
    assert by_id["refund[careful]"]["agent"] == "careful"
    assert by_id["pinned"]["agent"] is None
    agents = report["agents"]
    assert set(agents) == {"careful", "hasty"}
    assert (agents["careful"]["passed"], agents["careful"]["total"]) == (2, 2)
    assert (agents["hasty"]["passed"], agents["hasty"]["total"]) == (1, 2)
    assert agents["hasty"]["pass_rate"] == 0.5
    assert agents["careful"]["cost"] == pytest.approx(0.004)
    assert agents["hasty"]["cost"] == pytest.approx(0.002)
    assert agents["careful"]["mean_score"] == 1.0


def test_the_summary_shows_the_agents_side_by_side(matrix: pytest.Pytester) -> None:
    result = matrix.runpytest("-p", "no:cacheprovider")
    lines = [line for line in result.outlines if line.startswith("agent ")]
    assert len(lines) == 2, result.outlines
    careful, hasty = (line.split() for line in lines)
    assert careful[:3] == ["agent", "careful", "2/2"]
    assert hasty[:3] == ["agent", "hasty", "1/2"]
    assert (
        careful[-1] == "0.0040" and hasty[-1] == "0.0020"
    )  # cost, the last column when agents report usage


def test_k_selects_one_agent(matrix: pytest.Pytester) -> None:
    result = matrix.runpytest("-p", "no:cacheprovider", "-k", "hasty", "-v")
    result.assert_outcomes(passed=1, failed=1)
    assert "careful" not in result.stdout.str().split("short test summary")[0].split("collected")[1]


def test_last_failed_reruns_only_the_failing_variant(matrix: pytest.Pytester) -> None:
    matrix.runpytest().assert_outcomes(passed=4, failed=1)
    result = matrix.runpytest("--lf", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*refund[[]hasty[]] FAILED*"])


def test_under_xdist_the_same_items_summary_and_report(matrix: pytest.Pytester) -> None:
    serial = matrix.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "serial.json")
    parallel = matrix.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-report", "xdist.json"
    )
    parallel.assert_outcomes(passed=4, failed=1)
    one, two = _load(matrix.path / "serial.json"), _load(matrix.path / "xdist.json")
    assert _outcomes(one) == _outcomes(two)
    for figures in (one["agents"], two["agents"]):
        for name in figures:  # latency differs between runs; the rest is the same
            figures[name].pop("latency_p50_s")
            figures[name].pop("latency_p95_s")
    assert one["agents"] == two["agents"]
    rows = [
        [line.split()[:3] for line in r.outlines if line.startswith("agent ")]
        for r in (serial, parallel)
    ]
    assert rows[0] == rows[1] == [["agent", "careful", "2/2"], ["agent", "hasty", "1/2"]]


def test_the_command_line_matrix_replaces_the_files_agents(matrix: pytest.Pytester) -> None:
    result = matrix.runpytest(
        "-p", "no:cacheprovider", "-v", "--agent-eval-agent", "first=matrix_agents:hasty",
        "--agent-eval-agent", "second=matrix_agents:careful",
    )  # fmt: skip
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines_random(
        ["*::refund[[]first[]] FAILED*", "*::refund[[]second[]] PASSED*", "*::pinned PASSED*"]
    )
    assert "[careful]" not in result.stdout.str()


def test_the_command_line_matrix_applies_to_files_without_agents(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(matrix_agents=AGENTS)
    pytester.syspathinsert()
    pytester.makefile(
        ".json", eval_qa=json.dumps([{"id": "q1", "input": "hi", "expected_contains": ["Hello"]}])
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-v", "--agent-eval-agent", "a1=matrix_agents:careful",
        "--agent-eval-agent", "a2=matrix_agents:hasty",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(
        ["*eval_qa.json::q1[[]a1[]] PASSED*", "*eval_qa.json::q1[[]a2[]] PASSED*"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--agent-eval-agent", "nameless"],
            "*--agent-eval-agent 'nameless': give NAME=MODULE:ATTR*",
        ),
        (
            ["--agent-eval-agent", "a b=m:f"],
            "*--agent-eval-agent 'a b=m:f': give NAME=MODULE:ATTR*",
        ),
        (
            ["--agent-eval-agent", "a=m:f", "--agent-eval-agent", "a=m:g"],
            "*the name 'a' is given twice*",
        ),
        (
            ["--agent-eval-agent", "a=m:f", "--agent", "m:f"],
            "*--agent and --agent-eval-agent: choose one*",
        ),
    ],
)
def test_a_bad_matrix_option_is_a_usage_error(
    matrix: pytest.Pytester, args: list[str], message: str
) -> None:
    result = matrix.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_an_agent_that_does_not_import_names_its_matrix_entry(matrix: pytest.Pytester) -> None:
    matrix.makefile(
        ".yaml",
        eval_broken="agents:\n  good: matrix_agents:careful\n  gone: matrix_agents:missing\n"
        "cases:\n  - id: c\n    input: hi\n",
    )
    result = matrix.runpytest("-p", "no:cacheprovider", "eval_broken.yaml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*eval_broken.yaml:3: agent (gone) 'matrix_agents:missing'*"])
    cli = matrix.runpytest(
        "-p", "no:cacheprovider", "eval_broken.yaml", "--agent-eval-agent", "x=matrix_agents:nope"
    )
    cli.stdout.fnmatch_lines(
        ["*eval_broken.yaml:5: --agent-eval-agent x: agent 'matrix_agents:nope'*"]
    )


def test_a_bad_agents_mapping_is_an_error_at_its_line(matrix: pytest.Pytester) -> None:
    matrix.makefile(
        ".yaml",
        eval_bad="agents:\n  'no spaces': matrix_agents:careful\ncases: [{id: c, input: hi}]\n",
    )
    result = matrix.runpytest("-p", "no:cacheprovider", "eval_bad.yaml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*eval_bad.yaml:*agents*"])


def test_variants_carry_the_agent_and_keep_the_case(tmp_path: Path) -> None:
    path = tmp_path / "eval_m.yaml"
    path.write_text(MATRIX)
    loaded = load_file(path, builtin_registry(), builtin_dialects())
    variants = list(matrix_variants(loaded, ()))
    assert [(c.id, c.agent, c.agent_name) for c in variants] == [
        ("refund[careful]", "matrix_agents:careful", "careful"),
        ("refund[hasty]", "matrix_agents:hasty", "hasty"),
        ("greet[careful]", "matrix_agents:careful", "careful"),
        ("greet[hasty]", "matrix_agents:hasty", "hasty"),
        ("pinned", "matrix_agents:own", None),
    ]
    assert variants[0].line == variants[1].line == 5  # both report the case's own line
    assert variants[0].agent_line == 2 and variants[1].agent_line == 3
    cli = list(matrix_variants(loaded, (("x", "m:f"),)))
    assert [c.id for c in cli] == ["refund[x]", "greet[x]", "pinned"]
    assert cli[0].agent_line is None
