"""The per-case record (SPEC §10): made where the case ran, on the test report, same under -n 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from report_support import BROKEN, DUMP_CONFTEST, SUITE, UNREADABLE, USAGE_AGENT

from pytest_agent_eval.report.jsonable import ITEMS_LIMIT, jsonable
from pytest_agent_eval.report.record import CaseRecord
from pytest_agent_eval.report.schema import report_schema


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("RECORDS_OUT", str(pytester.path / "records.jsonl"))
    pytester.makepyfile(usage_agent=USAGE_AGENT, conftest=DUMP_CONFTEST)
    pytester.makefile(".yaml", eval_suite=SUITE, eval_broken=BROKEN, eval_unreadable=UNREADABLE)
    return pytester


def _records(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, Any]]:
    out = pytester.path / "records.jsonl"
    out.unlink(missing_ok=True)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=4, failed=2, skipped=1, errors=2, xfailed=1, xpassed=1)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["nodeid"]: r for r in records}


def _steady(record: dict[str, Any]) -> dict[str, Any]:
    """The record without what differs between two runs of the same suite: timings."""
    record = {k: v for k, v in record.items() if k not in ("latency_s", "duration_s")}
    record["trials"] = [{k: v for k, v in t.items() if k != "latency_s"} for t in record["trials"]]
    return record


def test_every_item_has_one_record_with_its_outcome(suite: pytest.Pytester) -> None:
    records = _records(suite)
    outcomes = {k: r["outcome"] for k, r in records.items()}
    assert outcomes == {
        "eval_suite.yaml::ok": "passed",
        "eval_suite.yaml::bad": "failed",
        "eval_suite.yaml::partial": "passed",
        "eval_suite.yaml::rep": "passed",
        "eval_suite.yaml::flaky": "passed",
        "eval_suite.yaml::skipped": "skipped",
        "eval_suite.yaml::boom": "failed",
        "eval_suite.yaml::known_bug": "xfailed",
        "eval_suite.yaml::fixed_bug": "xpassed",
        "eval_broken.yaml::x": "error",
        "eval_unreadable.yaml::@file": "error",
    }
    for record in records.values():  # the dict round-trips through the dataclass
        assert CaseRecord.from_dict(record).to_dict() == record


def test_the_record_holds_checks_tool_calls_usage_and_reasons(suite: pytest.Pytester) -> None:
    records = _records(suite)
    ok = records["eval_suite.yaml::ok"]
    assert (ok["case_id"], ok["file"], ok["line"]) == ("ok", "eval_suite.yaml", 4)
    assert ok["description"] == "All good"
    assert ok["tags"] == ["routing"]
    assert ok["metadata"] == {"owner": "ann"}
    assert ok["score"] == 1.0
    assert ok["output"] == "hello there"
    assert ok["tool_calls"] == [
        {"name": "search", "args": {"q": "hi"}, "result": None, "error": None}
    ]
    assert [(c["name"], c["passed"], c["score"], c["scored"]) for c in ok["checks"]] == [
        ("contains", True, 1.0, True),
        ("tools_called", True, 1.0, True),
    ]
    assert ok["tokens"] == {"input": 10, "output": 5, "total": 15}
    assert ok["cost"] == 0.25
    assert ok["latency_s"] >= 0 and len(ok["trials"]) == 1 and ok["passes"] == 1
    bad = records["eval_suite.yaml::bad"]
    contains = bad["checks"][0]
    assert (contains["name"], contains["passed"], contains["expected"]) == (
        "contains",
        False,
        ["hello"],
    )
    assert contains["message"] == "output lacks 'hello'"
    assert bad["tokens"] == {"input": 3, "output": 4, "total": 7}
    assert bad["cost"] is None
    rep = records["eval_suite.yaml::rep"]
    assert (rep["passes"], len(rep["trials"]), rep["min_pass_rate"]) == (3, 3, 1.0)
    assert records["eval_suite.yaml::boom"]["error"] == "agent raised RuntimeError: kaput"
    assert records["eval_suite.yaml::skipped"]["reason"] == "not today"
    assert records["eval_suite.yaml::skipped"]["trials"] == []
    assert records["eval_suite.yaml::known_bug"]["reason"] == "tracked elsewhere"
    assert "unknown check 'contans'" in records["eval_broken.yaml::x"]["error"]
    assert "eval_unreadable.yaml" in records["eval_unreadable.yaml::@file"]["error"]
    assert records["eval_unreadable.yaml::@file"]["score"] is None


def test_the_record_reaches_the_xdist_controller_intact(suite: pytest.Pytester) -> None:
    serial = _records(suite)
    parallel = _records(suite, "-n", "2")
    assert sorted(parallel) == sorted(serial)
    for nodeid, record in serial.items():
        assert _steady(parallel[nodeid]) == _steady(record), nodeid


def test_junit_properties_come_from_the_record(suite: pytest.Pytester) -> None:
    suite.runpytest("--junitxml=r.xml", "-n", "2")
    cases = {tc.get("name"): tc for tc in ET.parse(suite.path / "r.xml").getroot().iter("testcase")}
    props = {
        name: {p.get("name"): p.get("value") for p in tc.iter("property")}
        for name, tc in cases.items()
    }
    assert props["ok"]["score"] == "1.000"
    assert props["ok"]["tools_called"] == "search"
    assert props["ok"]["location"] == "eval_suite.yaml:4"
    assert props["partial"]["score"] == "0.500"
    assert props["rep"]["passes"] == "3/3"
    assert "passes" not in props["ok"]
    assert props["skipped"] == {}


def test_huge_and_deep_values_are_bounded() -> None:
    deep: Any = "bottom"
    for _ in range(50):
        deep = [deep]
    value = {
        "text": "x" * 100_000,
        "many": list(range(1000)),
        "deep": deep,
        "obj": Path("p"),
        3: {1, 2},
    }
    out = jsonable(value)
    assert json.loads(json.dumps(out)) == out
    assert out["text"].startswith("x" * 4000) and out["text"].endswith(
        "(cut at 4,000 of 100,000 characters)"
    )
    assert len(out["many"]) == ITEMS_LIMIT + 1 and out["many"][-1] == "... 800 more items cut"
    assert "nested too deep" in json.dumps(out["deep"])
    assert out["obj"] == "PosixPath('p')" and out["3"] == "{1, 2}"


def test_a_conversation_record_has_its_transcript(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECORDS_OUT", str(pytester.path / "records.jsonl"))
    pytester.makepyfile(usage_agent=USAGE_AGENT, conftest=DUMP_CONFTEST)
    pytester.makefile(
        ".yaml",
        eval_chat="agent: usage_agent:run\ncases:\n  - id: chat\n    context: {say: sure}\n"
        "    turns: [first question, second question]\n",
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    (record,) = (
        json.loads(line) for line in (pytester.path / "records.jsonl").read_text().splitlines()
    )
    assert record["transcript"] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "sure"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "sure"},
    ]
    assert record["output"] == "sure"


def test_junit_score_of_a_case_with_nothing_scored_is_not_scored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_EVAL_LLM_MODEL", raising=False)
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makefile(
        ".yaml",
        eval_j="agent: usage_agent:run\ncases: [{id: j, input: hi, expect: {judge: polite}}]\n",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml=r.xml")
    result.assert_outcomes(
        skipped=1
    )  # nothing scored: no made-up verdict, and no made-up number in the record
    (case,) = ET.parse(pytester.path / "r.xml").getroot().iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["score"] == "not scored"
    assert props["location"] == "eval_j.yaml:2"


INPUTS = """\
agent: usage_agent:run
defaults: {context: {say: hello}}
cases:
  - {id: single, input: where is my order?, context: {say: hi, order: 7}}
  - id: chat
    turns: [first question, second question]
  - {id: skipped, skip: later, input: not asked}
"""


def test_the_record_carries_the_cases_input_and_a_hash_of_its_content(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24 item 20 (SPEC §17): what the agent was given, and a hash telling an edited case."""
    monkeypatch.setenv("RECORDS_OUT", str(pytester.path / "records.jsonl"))
    pytester.makepyfile(usage_agent=USAGE_AGENT, conftest=DUMP_CONFTEST)

    def run(text: str) -> dict[str, dict[str, Any]]:
        pytester.makefile(".yaml", eval_in=text)
        (pytester.path / "records.jsonl").unlink(missing_ok=True)
        pytester.runpytest(
            "-p", "no:cacheprovider", "--agent-eval-report", "r.json"
        ).assert_outcomes(passed=2, skipped=1)
        report = json.loads((pytester.path / "r.json").read_text())
        jsonschema.Draft202012Validator(report_schema()).validate(report)
        return {r["case_id"]: r for r in report["cases"]}

    first = run(INPUTS)
    assert first["single"]["input"] == {
        "query": "where is my order?",
        "context": {"say": "hi", "order": 7},
    }
    assert first["chat"]["input"] == {
        "turns": ["first question", "second question"],
        "context": {"say": "hello"},
    }
    assert first["skipped"]["input"] == {"query": "not asked", "context": {"say": "hello"}}
    hashes = {case: record["content_hash"] for case, record in first.items()}
    assert (
        all(isinstance(h, str) and len(h) == 16 for h in hashes.values())
        and len(set(hashes.values())) == 3
    )
    again = run("# a comment above moves every case down a line\n" + INPUTS)
    assert {case: record["content_hash"] for case, record in again.items()} == hashes
    edited = run(INPUTS.replace("second question", "second question, reworded"))
    assert edited["chat"]["content_hash"] != hashes["chat"]
    assert edited["single"]["content_hash"] == hashes["single"]
    defaults = run(
        INPUTS.replace("defaults: {context: {say: hello}}", "defaults: {context: {say: bye}}")
    )
    assert (
        defaults["chat"]["content_hash"] != hashes["chat"]
    )  # the file's defaults are part of the case
    assert (
        defaults["single"]["content_hash"] == hashes["single"]
    )  # its own `say` wins over the default
