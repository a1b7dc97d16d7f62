"""``--agent-eval-html`` and ``agent-eval html``: the page as a person sees it, in Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.report.html import embedded_json, render

AGENT = """
def run(query, context):
    if query == "xss":
        return "<script>window.__xss = 1</script><img src=x onerror='window.__xss = 2'>"
    if query == "refund":
        return {"output": "Refunds take 30 days.", "tools_called": [{"name": "lookup_order", \
"args": {"id": 7},
                "result": "order 7: shipped"}]}
    if query == "broken":
        return {"output": "No idea.", "tools_called": [{"name": "search_kb", \
"args": {"q": "refund"}}]}
    return "You said: " + query
"""

SUITE = """\
agent: page_agent:run
cases:
  - id: refund
    input: refund
    tags: [billing]
    expect: {contains: "30 days", tools_called: [lookup_order]}
  - id: broken
    input: broken
    tags: [billing]
    expect: {contains: "30 days", tools_called: [lookup_order]}
  - id: xss
    input: xss
    tags: [safety]
    expect: {contains: "window"}
  - id: chat
    tags: [chat]
    turns:
      - input: first question
        expect: {contains: first}
      - input: second question
"""


def _report_run(pytester: pytest.Pytester, suite: str, *args: str) -> pytest.RunResult:
    pytester.makefile(".yaml", eval_page=suite)
    return pytester.runpytest("-p", "no:cacheprovider", *args)


@pytest.fixture
def site(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(page_agent=AGENT)
    pytester.syspathinsert()
    return pytester


def test_the_page_is_written_with_every_case_and_escapes_what_the_agent_said(
    site: pytest.Pytester,
) -> None:
    result = _report_run(
        site, SUITE, "--agent-eval-html", "out/page.html", "--agent-eval-report", "out/r.json"
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*- agent eval html report: out/page.html -*"])
    page = (site.path / "out" / "page.html").read_text()
    assert (
        "<script>window.__xss" not in page and "<img" not in page
    )  # in the data as \u003c, as text
    assert page.count("<script") == 2  # the data and the page's own code, nothing from the run
    assert 'http-equiv="Content-Security-Policy" content="default-src \'none\'' in page
    assert "4 cases: " in page and '<span class="o-failed">1 failed</span>' in page
    report = json.loads((site.path / "out" / "r.json").read_text())
    data = page.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data) == report["cases"]  # the page holds the JSON report's records
    assert not list((site.path / "out").glob("*.tmp"))


def test_embedded_json_cannot_end_its_script() -> None:
    text = embedded_json({"a": "</script><!-- \u2028 & >"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- \u2028 & >"}


def test_an_interrupted_run_renders_what_finished() -> None:
    document = {
        "run": {"finished": False, "args": ["-x"]},
        "cases": [
            {
                "nodeid": "e.yaml::a",
                "case_id": "a",
                "file": "e.yaml",
                "line": 3,
                "outcome": "passed",
                "score": 1.0,
            }
        ],
    }
    page = render(document)
    assert 'id="interrupted"' in page and "1 cases: " in page
    assert "e.yaml" in page


def test_agent_eval_html_builds_the_page_from_saved_reports(site: pytest.Pytester) -> None:
    _report_run(site, SUITE, "--agent-eval-report", "base.json")
    _report_run(
        site, SUITE.replace("input: refund", "input: broken", 1), "--agent-eval-report", "cand.json"
    )
    done = site.run("agent-eval", "html", "cand.json", "base.json", "-o", "page.html")
    assert done.ret == 0
    done.stdout.fnmatch_lines(["agent-eval html: wrote page.html (4 cases)"])
    page = (site.path / "page.html").read_text()
    assert '<h3 id="baseline-regressions">regressions (1)</h3>' in page
    assert page.index('id="baseline"') < page.index('id="summary"')  # what changed comes first
    bad = site.run("agent-eval", "html", "nope.json", "-o", "x.html")
    assert bad.ret == 2
    bad.stderr.fnmatch_lines(["agent-eval html: nope.json: cannot read the report*"])
    assert not (site.path / "x.html").exists()


# -- in the browser
# ----------------------------------------------------------------------------------------


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The page from disk, every request other than the file itself refused and noted."""
    page = browser.new_page()
    requested: list[str] = []

    def route(r: Any) -> None:
        if r.request.url == path.as_uri():
            r.continue_()
        else:
            requested.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    return page, requested


def test_a_person_reads_filters_and_expands_the_run(site: pytest.Pytester, browser: Any) -> None:
    _report_run(site, SUITE, "--agent-eval-html", "page.html")
    page, requested = _open(browser, site.path / "page.html")
    assert page.inner_text("#counts") == "4 cases: 3 passed, 1 failed"
    assert page.inner_text("#shown") == "4 of 4 cases"
    page.select_option("#f-outcome", "failed")
    assert page.inner_text("#shown") == "1 of 4 cases"
    assert (
        page.locator("#case-table tbody tr.case")
        .all_inner_texts()[0]
        .startswith("eval_page.yaml::broken")
    )
    page.click("#case-table tbody tr.case")
    detail = page.inner_text("#case-table tr.detail")
    assert "contains (0.00): output lacks '30 days'" in detail
    assert "search_kb" in detail and '"q": "refund"' in detail  # the tool call with its arguments
    page.select_option("#f-outcome", "")
    page.fill("#f-text", "second question")
    assert page.inner_text("#shown") == "1 of 4 cases"
    page.click("#case-table tbody tr.case")
    transcript = page.inner_text("#case-table tr.detail ol.transcript")
    assert (
        "user" in transcript
        and "second question" in transcript
        and "You said: first question" in transcript
    )
    page.fill("#f-text", "")
    page.select_option("#f-tag", "safety")
    page.click("#case-table tbody tr.case")
    assert "<script>window.__xss = 1</script>" in page.inner_text("#case-table tr.detail")
    assert page.evaluate("window.__xss") is None  # shown as text, never run
    assert requested == []


def test_the_baseline_comparison_is_side_by_side(site: pytest.Pytester, browser: Any) -> None:
    _report_run(site, SUITE, "--agent-eval-report", "base.json")
    _report_run(
        site,
        SUITE.replace("input: refund", "input: broken", 1),
        "--agent-eval-baseline", "base.json", "--agent-eval-html", "page.html",
    )  # fmt: skip
    page, requested = _open(browser, site.path / "page.html")
    section = page.inner_text("#baseline")
    assert "1 regressions, 0 fixes, 0 new, 0 missing" in section
    row = page.locator("#baseline table.sbs tbody tr").first.inner_text()
    assert "eval_page.yaml::refund" in row and "passed -> failed" in row
    assert "Refunds take 30 days." in row and "No idea." in row  # the old and the new answer
    assert requested == []


def test_a_cases_detail_shows_its_input_and_content_hash(
    site: pytest.Pytester, browser: Any
) -> None:
    """Issue 24 item 20: the page shows what the case gave the agent, and its content's hash."""
    _report_run(site, SUITE, "--agent-eval-html", "page.html", "--agent-eval-report", "r.json")
    hashes = {
        c["case_id"]: c["content_hash"]
        for c in json.loads((site.path / "r.json").read_text())["cases"]
    }
    page, requested = _open(browser, site.path / "page.html")
    page.fill("#f-text", "eval_page.yaml::chat")
    page.click("#case-table tbody tr.case")
    detail = page.inner_text("#case-table tr.detail")
    assert f"content hash {hashes['chat']}" in detail
    assert page.locator("#case-table tr.detail ol.turns li").all_inner_texts() == [
        "first question",
        "second question",
    ]
    page.fill("#f-text", "eval_page.yaml::refund")
    page.click("#case-table tbody tr.case")  # a second detail opens below the first
    assert page.locator("#case-table tr.detail .input pre.query").all_inner_texts() == ["refund"]
    assert f"content hash {hashes['refund']}" in page.inner_text("#case-table tr.detail")
    assert requested == []
