"""Collection and selection as users drive them.

Ids, -k, -m, node ids, --lf, -x, -n 2, junit, locations.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

YAML_FILE = """\
agent: scripted:run
tags: [routing]
cases:
  - id: first
    input: hello
    tags: [kb]
    context: {say: "all good"}
    expect:
      contains: [good]

  - id: second
    description: A second case
    input: hello
    context: {say: "nope"}
    expect:
      contains: [good]

  - id: third
    input: hello
    tags: [kb, slow_one]
    context: {say: "good again"}
    expect:
      contains: [good]
"""

JSON_FILE = {
    "agent": "scripted:run",
    "tags": ["routing"],
    "cases": [
        {"id": "first", "input": "hello", "tags": ["kb"], "context": {"say": "all good"},
         "expect": {"contains": ["good"]}},
        {"id": "second", "input": "hello", "context": {"say": "nope"},
         "expect": {"contains": ["good"]}},
        {"id": "third", "input": "hello", "tags": ["kb", "slow_one"],
         "context": {"say": "good again"}, "expect": {"contains": ["good"]}},
    ],
}  # fmt: skip


@pytest.fixture(params=["yaml", "json"])
def suite(request: pytest.FixtureRequest, evals: pytest.Pytester) -> str:
    """The same three cases (first passes, second fails, third passes): eval_suite.yaml or .json."""
    if request.param == "yaml":
        evals.makefile(".yaml", eval_suite=YAML_FILE)
        return "eval_suite.yaml"
    evals.makefile(".json", eval_suite=json.dumps(JSON_FILE, indent=2))
    return "eval_suite.json"


def test_one_item_per_case_with_file_id_node_ids(evals: pytest.Pytester, suite: str) -> None:
    result = evals.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [f"{suite}::first", f"{suite}::second", f"{suite}::third", "*3 tests collected*"]
    )


def test_outcomes(evals: pytest.Pytester, suite: str) -> None:
    evals.runpytest().assert_outcomes(passed=2, failed=1)


def test_k_selects_by_case_id(evals: pytest.Pytester, suite: str) -> None:
    result = evals.runpytest("-k", "third", "-v")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines([f"{suite}::third PASSED*"])


def test_m_selects_by_tag_under_strict_markers(evals: pytest.Pytester, suite: str) -> None:
    result = evals.runpytest("--strict-markers", "-m", "kb and not slow_one", "-v")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines([f"{suite}::first PASSED*"])
    # file-level tags and the agent_eval marker apply to every case
    evals.runpytest("--strict-markers", "-m", "routing and agent_eval").assert_outcomes(
        passed=2, failed=1
    )


def test_node_id_selection(evals: pytest.Pytester, suite: str) -> None:
    result = evals.runpytest(f"{suite}::second", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"{suite}::second FAILED*"])


def test_last_failed_reruns_only_the_failure(evals: pytest.Pytester, suite: str) -> None:
    evals.runpytest().assert_outcomes(passed=2, failed=1)
    result = evals.runpytest("--lf", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["run-last-failure: rerun previous 1 failure*", f"{suite}::second FAILED*"]
    )
    assert "::first" not in result.stdout.str()


def test_x_stops_at_first_failure(evals: pytest.Pytester, suite: str) -> None:
    result = evals.runpytest("-x")
    result.assert_outcomes(passed=1, failed=1)
    assert "third" not in result.stdout.str().split("short test summary")[0].split("FAILURES")[0]


def test_xdist_gives_the_same_outcomes_as_serial(evals: pytest.Pytester, suite: str) -> None:
    serial = evals.runpytest("-p", "no:cacheprovider", "-rA")
    parallel = evals.runpytest("-n", "2", "-p", "no:cacheprovider", "-rA")
    serial.assert_outcomes(passed=2, failed=1)
    parallel.assert_outcomes(passed=2, failed=1)
    for line in (f"PASSED {suite}::first", f"FAILED {suite}::second*", f"PASSED {suite}::third"):
        serial.stdout.fnmatch_lines([line])
        parallel.stdout.fnmatch_lines([line])


def test_junitxml_has_one_testcase_per_case_with_properties(
    evals: pytest.Pytester, suite: str
) -> None:
    evals.runpytest("--junitxml=report.xml")
    root = ET.parse(evals.path / "report.xml").getroot()
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    assert sorted(cases) == ["first", "second", "third"]
    props = {p.get("name"): p.get("value") for p in cases["second"].iter("property")}
    assert props["score"] == "0.000"
    assert props["tools_called"] == ""
    assert float(props["latency_s"]) >= 0
    lines = (evals.path / suite).read_text().splitlines()
    at = next(n for n, text in enumerate(lines, 1) if "second" in text)
    assert props["location"] == f"{suite}:{at if suite.endswith('yaml') else at - 1}"
    assert cases["second"].find("failure") is not None
    assert cases["first"].find("failure") is None


def test_failure_points_at_the_cases_own_line(evals: pytest.Pytester) -> None:
    filler = "".join(
        f"  - id: filler{i}\n    input: x\n    context: {{say: ok}}\n" for i in range(20)
    )
    evals.makefile(
        ".yaml",
        eval_deep=f"agent: scripted:run\ncases:\n{filler}  - id: deep\n    input: x\n"
        "    expect: {contains: [gone]}\n",
    )
    result = evals.runpytest(
        "--junitxml=r.xml", "-o", "junit_family=xunit1"
    )  # xunit1 has file and line
    result.assert_outcomes(passed=20, failed=1)
    line = 3 + 20 * 3  # 1-based line of "- id: deep"
    assert (evals.path / "eval_deep.yaml").read_text().splitlines()[line - 1] == "  - id: deep"
    result.stdout.fnmatch_lines([f"eval_deep.yaml:{line}: deep"])
    deep = next(
        tc
        for tc in ET.parse(evals.path / "r.xml").getroot().iter("testcase")
        if tc.get("name") == "deep"
    )
    assert deep.get("line") == str(
        line - 1
    )  # pytest's 0-based location, which IDEs turn into the line


def test_json_location_is_the_cases_own_line(evals: pytest.Pytester) -> None:
    cases = [{"id": f"c{i}", "input": "x", "context": {"say": "ok"}} for i in range(9)]
    cases.append({"id": "last", "input": "x", "expect": {"contains": ["missing"]}})
    text = json.dumps({"agent": "scripted:run", "cases": cases}, indent=2)
    evals.makefile(".json", eval_deep=text)
    line = (
        next(n for n, s in enumerate(text.splitlines(), 1) if '"last"' in s) - 1
    )  # the case's opening brace
    result = evals.runpytest()
    result.assert_outcomes(passed=9, failed=1)
    result.stdout.fnmatch_lines([f"eval_deep.json:{line}: last"])


def test_collection_is_deterministic(evals: pytest.Pytester, suite: str) -> None:
    first = evals.runpytest("--collect-only", "-q").stdout.lines
    second = evals.runpytest("--collect-only", "-q").stdout.lines
    assert [x for x in first if "::" in x] == [x for x in second if "::" in x]


def test_reserved_tags_do_not_change_how_a_case_runs(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_reserved="""\
agent: scripted:run
cases:
  - id: tagged_skip
    input: x
    tags: [skip, xfail, usefixtures, timeout]
    context: {say: fine}
    expect: {contains: [fine]}
""",
    )
    result = evals.runpytest("--strict-markers", "-v")
    result.assert_outcomes(passed=1)
    evals.runpytest("-k", "skip").assert_outcomes(passed=1)


def test_skip_and_xfail_fields(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_flags="""\
agent: scripted:run
cases:
  - id: skipped
    input: x
    skip: flaky upstream API
  - id: known_bad
    input: x
    xfail: model confuses the tools
    expect: {contains: [nope]}
""",
    )
    result = evals.runpytest("-rsx")
    result.assert_outcomes(skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["*flaky upstream API*", "*model confuses the tools*"])


def test_derived_ids_and_description(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_derived="""\
agent: scripted:run
cases:
  - description: Knowledge base search
    input: x
  - description: Knowledge base search
    input: y
  - input: z
""",
    )
    result = evals.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "eval_derived.yaml::knowledge_base_search",
            "eval_derived.yaml::knowledge_base_search-2",
            "eval_derived.yaml::case-3",
        ]
    )


def test_other_yaml_files_are_not_collected_unless_named(evals: pytest.Pytester) -> None:
    evals.makefile(".yaml", config="agent: scripted:run\ncases:\n  - id: a\n    input: x\n")
    evals.runpytest().assert_outcomes()
    evals.runpytest("config.yaml").assert_outcomes(passed=1)


def test_agent_eval_files_ini_option(evals: pytest.Pytester) -> None:
    evals.makeini("[pytest]\nagent_eval_files = golden_*.yaml\n")
    evals.makefile(".yaml", golden_set="agent: scripted:run\ncases:\n  - id: a\n    input: x\n")
    evals.runpytest().assert_outcomes(passed=1)


def test_verbose_failure_shows_full_output_and_tool_calls_as_report_sections(
    evals: pytest.Pytester,
) -> None:
    evals.makefile(
        ".yaml",
        eval_v="""\
agent: scripted:run
cases:
  - id: wordy
    input: x
    context:
      say: "line one\\nline two mentions nothing useful"
      calls: [{name: search, args: {q: cats}}]
    expect: {contains: [dogs]}
""",
    )
    quiet = evals.runpytest()
    assert "agent output" not in quiet.stdout.str()
    result = evals.runpytest("-v")
    result.assert_outcomes(failed=1)
    # the failure text ends at the case's location; the details follow as report sections, as
    # captured output does
    result.stdout.fnmatch_lines(
        [
            "eval_v.yaml:3: wordy",
            "*- Captured agent output call -*",
            "line one",
            "line two mentions nothing useful",
            "*- Captured tool calls call -*",
            " 1. search(q='cats') -> None",
            "*short test summary info*",
        ]
    )
