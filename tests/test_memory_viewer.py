"""``agent-eval view`` (SPEC §24) over a store of real runs, on SQLite and PostgreSQL.

On SQLite and on the PostgreSQL server the tests start: every page answers and every link leads
somewhere; in headless Chromium the charts draw, links work, no request leaves the loopback and the
console stays clean.
"""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from otlp_support import read_traces

pytest.importorskip(
    "sqlalchemy", reason="the run store's tests need the [store] extra (SQLAlchemy, Alembic)"
)

SAY_AGENT = """
import os

def run(query, context):
    return os.environ.get("AGENT_SAYS", "hello") + "\\n" + context.get("tail", "")
"""
SUITE = """\
agent: say_agent:run
cases:
  - {id: greet, input: hi, tags: [smoke], context: {tail: first}, expect: {contains: [hello]}}
  - {id: steady, input: hi, context: {tail: second}, expect: {contains: [second]}}
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def viewer(
    request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The URL of a viewer of three runs of a suite, ``greet`` failing in the 2nd only (flaky)."""
    if request.param == "sqlite":
        url = str(pytester.path / "runs.db")
    else:
        from postgres_support import fresh_database

        url = fresh_database(request.getfixturevalue("postgres_url"), f"v_{uuid.uuid4().hex[:12]}")
    pytester.makepyfile(say_agent=SAY_AGENT)
    pytester.makefile(".yaml", eval_v=SUITE)
    for says in ("hello", "bye", "hello"):
        monkeypatch.setenv("AGENT_SAYS", says)
        pytester.runpytest(f"--agent-eval-store={url}")
    from pytest_agent_eval.memory.location import store_url
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.memory.viewer import background

    resolved = store_url(url, pytester.path)
    assert resolved is not None
    store = Store(resolved)
    server, stop = background(store)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop()
        store.close()


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
        text: str = answer.read().decode("utf-8")
        return text


def test_every_page_answers_and_every_link_leads_to_one(viewer: str) -> None:
    pages: dict[str, str] = {}
    todo = ["/"]
    while todo:
        path = todo.pop()
        if path in pages:
            continue
        pages[path] = _get(viewer + path)
        todo += [link.replace("&amp;", "&") for link in re.findall(r'href="([^"]+)"', pages[path])]
    assert all(path.startswith("/") for path in pages)  # no link leaves the viewer
    home = pages["/"]
    assert home.count('<svg class="chart"') == 3 and "3 runs of" in home
    assert (
        home.count("<circle") == 3 + 0 + 6
    )  # a point per run: pass rate, no cost (none known), p50 and p95
    case = pages["/case?nodeid=eval_v.yaml%3A%3Agreet"]
    assert case.count("flipped here (case unchanged)") == 2
    assert (
        '<span class="flaky">flaky</span>' in pages["/flaky"]
        and "eval_v.yaml::greet" in pages["/flaky"]
    )
    run_pages = [p for p in pages if p.startswith("/run/")]
    assert len(run_pages) == 3 and all("eval_v.yaml::steady" in pages[p] for p in run_pages)
    first, second = re.findall(r'<a href="/run/([^"]+)">', home)[
        -1:-3:-1
    ]  # the oldest two (newest first)
    compared = _get(f"{viewer}/compare?a={first}&b={second}")
    assert (
        '<span class="del">- hello</span>' in compared
        and '<span class="add">+ bye</span>' in compared
    )


def test_filters_narrow_the_charts(viewer: str) -> None:
    smoke = _get(viewer + "/?tag=smoke")
    assert (
        "<td>1/1</td>" in smoke and "<td>0/1</td>" in smoke
    )  # greet alone: passed, failed, passed
    assert "<td>2/2</td>" in _get(viewer + "/?file=eval_v.yaml")


def test_a_person_browses_runs_a_run_a_case_and_a_comparison(viewer: str, browser: Any) -> None:
    page = browser.new_page()
    elsewhere: list[str] = []
    problems: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(viewer + "/"):
            r.continue_()
        else:
            elsewhere.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(viewer + "/")
    assert page.locator("svg.chart").count() == 3
    assert page.locator("svg.chart circle").count() == 9
    box = page.locator("svg.chart").first.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100  # drawn, not collapsed
    page.locator("#runs a").first.click()
    page.wait_for_url(re.compile(r"/run/"))  # a click starts the navigation, never waits for it
    assert page.locator("h1").inner_text().startswith("Run ")
    page.locator("#cases a", has_text="eval_v.yaml::greet").click()
    page.wait_for_url(re.compile(r"/case\?"))
    assert page.locator("h1").inner_text() == "Case eval_v.yaml::greet"
    assert page.locator("svg.strip rect").count() == 3
    assert "flipped here (case unchanged)" in page.locator("#history").inner_text()
    page.goto(viewer + "/")
    page.select_option("select[name=tag]", "smoke")
    page.click("form.filters button")
    page.wait_for_url(re.compile(r"tag=smoke"))
    options = page.locator("form[action='/compare'] select[name=a] option").all_inner_texts()
    page.select_option("select[name=a]", options[-1])
    page.select_option("select[name=b]", options[-2])
    page.click("form[action='/compare'] button")
    page.wait_for_url(re.compile(r"/compare\?"))
    assert page.locator("#compare .add").count() >= 1
    page.click("nav a[href='/flaky']")
    page.wait_for_url(re.compile(r"/flaky$"))
    assert "eval_v.yaml::greet" in page.locator("#flaky").inner_text()
    assert elsewhere == [] and problems == []


TRACES = "https://traces.example/trace/{trace_id}"


def test_each_trial_of_a_repeated_case_links_its_own_trace(
    pytester: pytest.Pytester, browser: Any
) -> None:
    """Under ``--agent-eval-repeat 3`` every trial is a trace of its own, each linked.

    The run page and the case's history link the three (``trial 1`` … ``trial 3``), each to its
    trial's trace.
    """
    pytest.importorskip("opentelemetry.sdk", reason="the traces need the [otel] extra")
    import json

    from pytest_agent_eval.memory.location import store_url
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.memory.viewer import background

    pytester.makepyfile(say_agent=SAY_AGENT)
    pytester.makefile(".yaml", eval_v=SUITE)
    options = (
        f"--agent-eval-store={pytester.path / 'runs.db'}",
        "--agent-eval-repeat=3",
        "--agent-eval-traces=t.jsonl",
        f"--agent-eval-trace-url={TRACES}",
        "--agent-eval-report=r.json",
    )
    pytester.runpytest(*options).assert_outcomes(passed=2)
    report = json.loads((pytester.path / "r.json").read_text())
    trials = {
        c["nodeid"]: [TRACES.format(trace_id=t["trace_id"]) for t in c["trials"]]
        for c in report["cases"]
    }
    assert all(len(set(links)) == 3 for links in trials.values()), trials
    resolved = store_url(str(pytester.path / "runs.db"), pytester.path)
    assert resolved is not None
    store = Store(resolved)
    server, stop = background(store)
    page = browser.new_page()
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith("http://127.0.0.1:") else r.abort(),
    )
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        page.locator("#runs a").first.click()
        page.wait_for_url(re.compile(r"/run/"))
        for nodeid, links in trials.items():
            row = page.locator("#cases tr", has_text=nodeid)
            shown = row.locator("a.trace")
            assert shown.all_inner_texts() == ["trial 1", "trial 2", "trial 3"]
            assert [a.get_attribute("href") for a in shown.all()] == links
        page.locator("#cases a", has_text="eval_v.yaml::greet").click()
        page.wait_for_url(re.compile(r"/case\?"))
        history = page.locator("#history a.trace")
        assert [a.get_attribute("href") for a in history.all()] == trials["eval_v.yaml::greet"]
    finally:
        page.close()
        stop()
        store.close()


def test_a_case_links_its_trace_on_its_run_and_its_history(
    pytester: pytest.Pytester, browser: Any
) -> None:
    """A run made with traces links each case's trace by the run's own template.

    ``--trace-url`` wins over the template; the cases of a run without traces link none.
    """
    pytest.importorskip("opentelemetry.sdk", reason="the traces need the [otel] extra")

    from pytest_agent_eval.memory.location import store_url
    from pytest_agent_eval.memory.store import Store
    from pytest_agent_eval.memory.viewer import background

    pytester.makepyfile(say_agent=SAY_AGENT)
    pytester.makefile(".yaml", eval_v=SUITE)
    store_option = f"--agent-eval-store={pytester.path / 'runs.db'}"
    pytester.runpytest(store_option).assert_outcomes(passed=2)
    traced = ("--agent-eval-traces", "t.jsonl", "--agent-eval-trace-url", TRACES)
    pytester.runpytest(store_option, *traced).assert_outcomes(passed=2)
    written = {span["traceId"] for span in read_traces(pytester.path / "t.jsonl")}
    resolved = store_url(str(pytester.path / "runs.db"), pytester.path)
    assert resolved is not None
    store = Store(resolved)
    own, stop_own = background(store)
    chosen, stop_chosen = background(store, trace_url="http://127.0.0.1:1/t?id={trace_id}")
    page = browser.new_page()
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url.startswith("http://127.0.0.1:") else r.abort(),
    )
    try:
        page.goto(f"http://127.0.0.1:{own.server_address[1]}/")
        newest, oldest = page.locator("#runs a").all_inner_texts()
        page.goto(f"http://127.0.0.1:{own.server_address[1]}/run/{oldest}")
        assert page.locator("#cases .trace").count() == 0  # no traces, no link
        page.goto(f"http://127.0.0.1:{own.server_address[1]}/run/{newest}")
        hrefs = [a.get_attribute("href") or "" for a in page.locator("#cases a.trace").all()]
        ids = [href.removeprefix("https://traces.example/trace/") for href in hrefs]
        assert len(ids) == 2 and set(ids) <= written and len(set(ids)) == 2, hrefs
        page.locator("#cases a", has_text="eval_v.yaml::greet").click()
        page.wait_for_url(re.compile(r"/case\?"))
        assert page.locator("h1").inner_text() == "Case eval_v.yaml::greet"
        history = page.locator("#history a.trace")
        assert (
            history.count() == 1 and history.get_attribute("href") == hrefs[0]
        )  # the traced run's row only
        page.goto(f"http://127.0.0.1:{chosen.server_address[1]}/case?nodeid=eval_v.yaml%3A%3Agreet")
        assert (
            page.locator("#history a.trace").get_attribute("href")
            == f"http://127.0.0.1:1/t?id={ids[0]}"
        )
    finally:
        page.close()
        stop_own()
        stop_chosen()
        store.close()


def test_a_trace_url_without_the_trace_id_is_refused(tmp_path: Any) -> None:
    import io

    from pytest_agent_eval.memory.viewer import view_command

    out, err = io.StringIO(), io.StringIO()
    assert (
        view_command(str(tmp_path / "runs.db"), "127.0.0.1", 0, out, err, "https://traces.example/")
        == 2
    )
    assert err.getvalue() == (
        "agent-eval view: --trace-url 'https://traces.example/': put {trace_id} "
        "where the trace id goes\n"
    )
