"""The run in a GitHub pull request (SPEC §25): annotations per bad case, and the summary.

``::error`` annotations per failed or errored case, read back as GitHub's runner reads them, and
the markdown summary in ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agent_eval.report.github import command, escape_data, escape_property
from pytest_agent_eval.report.github import error_commands as github_annotations
from pytest_agent_eval.report.record import CaseRecord, CheckRecord

AGENT = """
def run(query, context):
    if context.get("raise"):
        raise RuntimeError(context["raise"])
    return context.get("say", "ok")
"""
CASES = """\
agent: gh_agent:run
cases:
  - id: fine
    input: hi
    expect: {contains: [ok]}
  - id: wrong
    input: hi
    context: {say: "100% wrong"}
    expect: {contains: [ok]}
  - id: broken
    input: hi
    context:
      raise: "50% broken\\nsecond: line, here"
    expect: {contains: [ok]}
  - id: later
    input: hi
    skip: not today
  - id: also_wrong
    input: hi
    context: {say: nope}
    expect: {equals: ok}
"""
LINES = {"wrong": 6, "broken": 10, "also_wrong": 18}
"""Each failing case's line: that of its first key (``id``)."""
FILE = "eval_pr,1.yaml"
"""A file name with a comma: a property's value is escaped as GitHub requires."""


def unescape_property(text: str) -> str:
    """As GitHub's runner reads a command property (``ActionCommand.UnescapeProperty``)."""
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(code, char)
    return text


def unescape_data(text: str) -> str:
    """As GitHub's runner reads a command's message (``ActionCommand.UnescapeData``)."""
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
        text = text.replace(code, char)
    return text


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """``::name k=v,k=v::message`` as the runner parses it: the command, properties, message."""
    assert line.startswith("::"), line
    end = line.index("::", 2)
    info, data = line[2:end], line[end + 2 :]
    name, _, props = info.partition(" ")
    properties = {}
    for pair in filter(None, props.split(",")):
        key, _, value = pair.partition("=")
        properties[key] = unescape_property(value)
    return name, properties, unescape_data(data)


def annotations(lines: list[str]) -> list[tuple[str, dict[str, str], str]]:
    return [parse(line) for line in lines if line.startswith("::error")]


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "100% sure",
        "a\nb\r\nc",
        "key: value, other",
        "%0A stays literal",
        "::error::inside",
        "",
    ],
)
def test_commands_read_back_as_github_reads_them(text: str) -> None:
    line = command("error", {"file": f"dir/{text}.yaml", "line": "3", "title": text}, text)
    assert "\n" not in line and "\r" not in line
    name, properties, message = parse(line)
    assert name == "error"
    assert message == text
    assert properties.get("title", "") == text
    assert properties["file"] == f"dir/{text}.yaml"


def test_an_errored_case_is_annotated_once_with_what_failed_line_by_line() -> None:
    record = CaseRecord(
        "evals/x.yaml::boom[a]", "boom", "evals/x.yaml", 12, "error", error="Kaput: 100%\ndetail"
    )
    passed = CaseRecord("evals/x.yaml::fine", "fine", "evals/x.yaml", 3, "passed")
    (line,) = github_annotations([record, passed, record], Path("/repo/sub"), "/repo")
    assert parse(line) == (
        "error",
        {"file": "sub/evals/x.yaml", "line": "12", "title": "boom[a]"},
        "Kaput: 100% detail",
    )
    record.outcome, record.error = "failed", None
    record.checks = [CheckRecord("a", False, 0.0, "no"), CheckRecord("b", False, 0.0, "50%,\r\nno")]
    assert parse(github_annotations([record], Path("/repo"), None)[0])[2] == "a: no\nb: 50%,\r\nno"


def test_escaping_is_the_toolkits() -> None:
    assert escape_data("50%\r\n:,") == "50%25%0D%0A:,"
    assert escape_property("50%\r\n:,") == "50%25%0D%0A%3A%2C"


@pytest.fixture
def pr(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(gh_agent=AGENT)
    (pytester.path / FILE).write_text(CASES)
    pytester.syspathinsert()
    return pytester


def _check(found: list[tuple[str, dict[str, str], str]], file: str) -> None:
    by_title = {props["title"]: (props, message) for _, props, message in found}
    assert len(found) == len(by_title) == 3, found  # once per case
    assert set(by_title) == set(LINES)
    for title, (props, _) in by_title.items():
        assert props["file"] == file
        assert props["line"] == str(LINES[title])
    assert by_title["wrong"][1] == "contains: output lacks 'ok'"
    assert by_title["also_wrong"][1] == "equals: output differs"
    broken = by_title["broken"][1].splitlines()
    assert broken == ["agent raised RuntimeError: 50% broken second: line, here"], broken


def test_annotations_under_github_actions(
    pr: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pr.path / "step_summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv(
        "GITHUB_WORKSPACE", str(pr.path.parent)
    )  # the repository holds the project's folder
    result = pr.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    _check(annotations(result.outlines), f"{pr.path.name}/{FILE}")
    text = summary.read_text()
    assert text.startswith("# earlier step\n## agent eval summary\n")
    assert text.count("## agent eval summary") == 1
    assert "**Failures (3)**" in text


def test_markdown_option_on_the_step_summary_writes_it_once(
    pr: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pr.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pr.runpytest("-p", "no:cacheprovider", f"--agent-eval-markdown={summary}")
    assert summary.read_text().count("## agent eval summary") == 1


def test_the_option_annotates_outside_actions_relative_to_the_rootdir(pr: pytest.Pytester) -> None:
    result = pr.runpytest("-p", "no:cacheprovider", "--agent-eval-github")
    _check(annotations(result.outlines), FILE)
    assert not (pr.path / "step_summary.md").exists()


def test_no_annotations_outside_actions(pr: pytest.Pytester) -> None:
    result = pr.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    assert not annotations(result.outlines)


def test_annotations_once_per_case_under_xdist(
    pr: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pr.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    result = pr.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, failed=3, skipped=1)
    _check(annotations(result.outlines), FILE)
    assert Path(summary).read_text().count("**Failures (3)**") == 1
