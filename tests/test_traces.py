"""Traces in and out (SPEC §23, issue 40): every trial a trace, span checks, a trace as a case.

Every trial an OpenTelemetry trace (OTLP JSON lines, OTLP/HTTP), the agent's own spans caught
under its trial's root, span checks, tool checks from spans, a trace made a case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from otlp_support import read_traces
from test_hardening_traffic import echo  # noqa: F401 - the loopback LLM, as a fixture
from test_traffic import RUN

pytest.importorskip("openai")
pytest.importorskip("opentelemetry.sdk")

AGENT = """
import openai

MODEL = "loopback-model"


def dispatch_tool(name, args):
    return f"real {name}"


def agent(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": query}])
    try:
        found = dispatch_tool("lookup", {"city": query})
    except Exception as exc:
        found = f"lookup failed: {exc}"
    return reply.choices[0].message.content + " / " + str(found)
"""

SUITE = """
agent: tracing_agent:agent
tool_dispatch: tracing_agent:dispatch_tool
cases:
  - id: paris
    input: Paris
    tool_mocks: {lookup: "sunny in Paris"}
    expect: {contains: [sunny], tools_called: [lookup]}
  - id: oslo
    input: Oslo
    tool_mocks: {lookup: {raise: "TimeoutError: upstream"}}
    expect: {contains: [failed]}
"""


@pytest.fixture
def project(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> pytest.Pytester:
    request.getfixturevalue("echo")  # the loopback LLM
    pytester.makepyfile(tracing_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_trace=SUITE)
    return pytester


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def test_every_trial_is_one_trace_with_chat_and_tool_spans_and_the_checks_verdicts(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest(
        *RUN, "--agent-eval-traces", "traces.jsonl", "--agent-eval-report", "report.json"
    )
    result.assert_outcomes(passed=2)
    spans = read_traces(project.path / "traces.jsonl")
    roots = [s for s in spans if s["name"] == "invoke_agent tracing_agent:agent"]
    assert len(roots) == 2 and {r["attrs"]["agent_eval.case.id"] for r in roots} == {
        "paris",
        "oslo",
    }
    assert all(
        r["resource"]["service.name"] == "agent-eval" and r["resource"]["agent_eval.run.id"]
        for r in roots
    )
    for root in roots:
        children = {s["name"]: s for s in spans if s.get("parentSpanId") == root["spanId"]}
        assert set(children) == {"chat loopback-model", "execute_tool lookup"}, children
        assert all(c["traceId"] == root["traceId"] for c in children.values())
        chat = children["chat loopback-model"]["attrs"]
        assert (
            chat["gen_ai.operation.name"] == "chat"
            and chat["gen_ai.request.model"] == "loopback-model"
        )
        assert chat["gen_ai.usage.input_tokens"] == 10 and chat["gen_ai.usage.output_tokens"] == 5
        assert "gen_ai.usage.cache_read.input_tokens" in chat and chat["gen_ai.response.id"]
        tool = children["execute_tool lookup"]
        assert tool["attrs"]["agent_eval.tool.mocked"] is True
        city = root["attrs"]["agent_eval.case.id"].title()
        assert json.loads(tool["attrs"]["gen_ai.tool.call.arguments"]) == {"city": city}
        events = {e["attributes"][0]["value"]["stringValue"]: e for e in root.get("events", [])}
        assert all(e["name"] == "gen_ai.evaluation.result" for e in root["events"])
        if root["attrs"]["agent_eval.case.id"] == "paris":
            assert set(events) == {"contains", "tools_called"}
            assert tool["attrs"]["gen_ai.tool.call.result"] == "sunny in Paris"
            assert tool.get("status", {}).get("code", 0) != 2
        else:
            assert tool["status"]["code"] == 2  # ERROR: the mock raised
    cases = {
        c["case_id"]: c for c in json.loads((project.path / "report.json").read_text())["cases"]
    }
    by_trace = {r["attrs"]["agent_eval.case.id"]: r["traceId"] for r in roots}
    for case_id, case in cases.items():
        assert case["trace_id"] == by_trace[case_id] == case["trials"][0]["trace_id"]
        names = [s["name"] for s in case["spans"]]
        assert names[0] == "invoke_agent tracing_agent:agent" and "execute_tool lookup" in names


INSTRUMENTED = '''
import asyncio
import json

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry import trace

OpenAIInstrumentor().instrument()  # the global provider, whichever is set (a proxy until then)
tracer = trace.get_tracer("weather-agent")


def lookup(city):
    """A tool the agent traces itself, with OpenInference's attributes (no adapter, no mocks)."""
    attributes = {"openinference.span.kind": "TOOL", "tool.name": "lookup", \
"input.value": json.dumps({"city": city})}
    with tracer.start_as_current_span("lookup", attributes=attributes) as span:
        span.set_attribute("output.value", f"sunny in {city}")
        return f"sunny in {city}"


async def agent(query):
    async with openai.AsyncOpenAI(max_retries=0) as client:
        await asyncio.sleep(0.05)  # the cases are in flight together
        reply = await client.chat.completions.create(
            model="loopback-model", messages=[{"role": "user", "content": query}]
        )
        await asyncio.sleep(0.05)
    return reply.choices[0].message.content + " / " + lookup(query)
'''


def _instrumented_suite(n: int) -> str:
    cases = "".join(
        f"""  - id: city{k}
    input: City{k}
    expect:
      contains: [sunny in City{k}]
      tool_sequence: [{{name: lookup, args: {{city: City{k}}}}}]
      max_llm_calls: 1
      no_error_spans: true
      spans:
        - {{name: ChatCompletion, attributes: {{openinference.span.kind: LLM}}, \
within: {{name: "invoke_agent *"}}}}
        - {{name: lookup, attributes: {{input.value: {{regex: 'City{k}\\b'}}}}, max_count: 1}}
"""
        for k in range(n)
    )
    return f"agent: weather:agent\ncases:\n{cases}"


@pytest.fixture
def instrumented(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> pytest.Pytester:
    request.getfixturevalue("echo")  # the loopback LLM
    pytest.importorskip("openinference.instrumentation.openai")
    pytester.makepyfile(weather=INSTRUMENTED)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_weather=_instrumented_suite(6))
    return pytester


@pytest.mark.parametrize(
    "how",
    [
        (),
        ("--agent-eval-concurrency", "4"),
        ("-n", "2"),
        ("--agent-eval-traces", "t.jsonl", "-n", "2"),
    ],
    ids=["serial-no-option", "concurrency", "xdist", "xdist-traces"],
)
def test_the_agents_own_spans_are_children_of_their_trials_root(
    instrumented: pytest.Pytester, how: tuple[str, ...]
) -> None:
    """OpenInference's OpenAI instrumentation and the agent's own tool spans, read by the checks.

    Span checks and tool checks read them, each case's spans its own under concurrency and -n;
    `expect: spans:` needs no trace option.
    """
    result = instrumented.runpytest(*RUN, *how, "--agent-eval-report", "report.json")
    result.assert_outcomes(passed=6)
    for case in json.loads((instrumented.path / "report.json").read_text())["cases"]:
        spans = case["spans"]
        llm = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"]
        assert len(llm) == 1, spans
        asked = llm[0]["attributes"]["llm.input_messages.0.message.content"]
        assert asked == case["input"]["query"], (case["case_id"], asked)  # its own trial's request
        assert spans[llm[0]["parent"]]["name"] == "invoke_agent weather:agent"
        assert [c["name"] for c in case["tool_calls"]] == ["lookup"]  # read from the agent's span
    if "--agent-eval-traces" in how:
        spans = read_traces(instrumented.path / "t.jsonl")
        roots = {
            s["traceId"]: s["attrs"]["agent_eval.case.id"]
            for s in spans
            if s["name"].startswith("invoke_agent")
        }
        assert len(roots) == 6 and len({s["resource"]["agent_eval.run.id"] for s in spans}) == 1
        for span in spans:
            if span["name"] == "ChatCompletion":
                case = roots[span["traceId"]]
                assert span["attrs"][
                    "llm.input_messages.0.message.content"
                ] == "City" + case.removeprefix("city")


def test_a_failing_span_check_shows_the_closest_span_and_its_path(
    instrumented: pytest.Pytester,
) -> None:
    instrumented.makefile(
        ".yaml",
        eval_weather="""
agent: weather:agent
cases:
  - id: strict
    input: Paris
    expect:
      max_llm_calls: 0
      spans:
        - {name: lookup, attributes: {tool.name: search}}
""",
    )
    result = instrumented.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*max_llm_calls: 1 LLM calls, at most 0 allowed*",
            "*invoke_agent weather:agent > ChatCompletion",
            '*spans: 0 spans like {"name": "lookup", "attributes": {"tool.name": "search"}}, '
            "at least 1 expected*",
            "*closest span: invoke_agent weather:agent > lookup: tool.name='lookup', not 'search'*",
        ]
    )


USER_PROVIDER = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(PROVIDER)


def pytest_sessionfinish(session):
    names = sorted({span.name for span in EXPORTER.get_finished_spans()})
    (session.config.rootpath / "user_spans.json").write_text(__import__("json").dumps(names))
    assert trace.get_tracer_provider() is PROVIDER
"""


def test_a_tracer_provider_the_user_set_keeps_working(instrumented: pytest.Pytester) -> None:
    instrumented.makeconftest(USER_PROVIDER)
    result = instrumented.runpytest(*RUN, "--agent-eval-traces", "t.jsonl")
    result.assert_outcomes(passed=6)
    names = json.loads((instrumented.path / "user_spans.json").read_text())
    assert {"ChatCompletion", "lookup", "invoke_agent weather:agent", "chat loopback-model"} <= set(
        names
    )
    assert {s["name"] for s in read_traces(instrumented.path / "t.jsonl")} >= {
        "ChatCompletion",
        "lookup",
    }


def test_a_span_matcher_with_a_typo_is_a_validate_error_at_its_line_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    (tmp_path / "eval_typo.yaml").write_text(
        "agent: x:y\ncases:\n  - id: c\n    input: hi\n    expect:\n      spans:\n"
        "        - {name: 'chat *', atributes: {a: 1}}\n        - {name: x, status: fine}\n"
    )
    assert main(["validate", str(tmp_path / "eval_typo.yaml")]) != 0
    out = capsys.readouterr().out
    assert (
        "eval_typo.yaml:7: unknown key 'atributes' in cases[0].expect.spans[0] (did you mean "
        '"attributes"?) (case c)' in out
    ), out
    assert (
        "eval_typo.yaml:8: cases[0].expect.spans[1].status: 'fine' is not one of "
        "['ok', 'error'] (case c)" in out
    )


def test_an_unreachable_otlp_endpoint_is_one_warning_and_the_run_goes_on(
    project: pytest.Pytester,
) -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = project.runpytest(
        *RUN, "--agent-eval-otlp", f"http://127.0.0.1:{port}/v1/traces", "-W", "default"
    )
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    # one warning; at least 6 spans (a root, a chat and a tool span per case; a request the client
    # sent again under
    # load is one chat span more), the same count in the summary
    counts = re.findall(r"the run went on: (\d+) spans dropped", output)
    assert len(counts) == 1 and int(counts[0]) >= 6, output
    result.stdout.fnmatch_lines(["*TraceWarning*spans not sent*the run went on: * spans dropped*"])
    # refused at once, or (a loaded machine) still unsent when the run ended: either way dropped and
    # counted
    result.stdout.fnmatch_lines(
        [
            f"agent eval traces over OTLP: {counts[0]} spans dropped "
            "(--agent-eval-otlp: spans not sent to *"
        ]
    )


def test_the_trace_id_is_in_the_junit_properties_and_linked_in_the_html_report(
    project: pytest.Pytester,
) -> None:
    import xml.etree.ElementTree as ET

    result = project.runpytest(
        *RUN,
        "--agent-eval-traces",
        "t.jsonl",
        "--junitxml",
        "junit.xml",
        "--agent-eval-html",
        "report.html",
        "--agent-eval-trace-url",
        "http://127.0.0.1:6006/projects/agent-eval/traces/{trace_id}",
    )
    result.assert_outcomes(passed=2)
    roots = {
        s["attrs"]["agent_eval.case.id"]: s["traceId"]
        for s in read_traces(project.path / "t.jsonl")
        if s["name"].startswith("invoke_agent")
    }
    tree = ET.parse(project.path / "junit.xml")
    for case in tree.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert props["trace_id"] == roots[case.get("name")]
    page = (project.path / "report.html").read_text()
    for trace_id in roots.values():
        assert f"http://127.0.0.1:6006/projects/agent-eval/traces/{trace_id}" in page


def test_a_trace_url_without_the_placeholder_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest(*RUN, "--agent-eval-trace-url", "http://127.0.0.1/traces")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agent-eval-trace-url*put {trace_id} where the trace id goes*"])


NO_OTEL = """
import sys


def pytest_sessionfinish(session):
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") or m == \
"pytest_agent_eval.traces.engine")
    (session.config.rootpath / "loaded.txt").write_text(" ".join(loaded))
"""


def test_nothing_of_opentelemetry_is_imported_when_no_option_asks_for_it(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(NO_OTEL)
    # arize-phoenix's own pytest plugin (installed by the dev extra for the Phoenix test) imports
    # OpenTelemetry
    plugins = ("-p", "no:phoenix") if _has_module("phoenix.client.pytest") else ()
    project.runpytest_subprocess(*RUN, *plugins).assert_outcomes(passed=2)
    assert (project.path / "loaded.txt").read_text() == ""


def test_capture_makes_a_trace_a_case_that_validates_and_runs(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    project.runpytest(*RUN, "--agent-eval-traces", "t.jsonl").assert_outcomes(passed=2)
    roots = {
        s["attrs"]["agent_eval.case.id"]: s["traceId"]
        for s in read_traces(project.path / "t.jsonl")
        if s["name"].startswith("invoke_agent")
    }
    traces = str(project.path / "t.jsonl")
    assert main(["capture", traces]) == 2
    assert "holds 2 traces: choose one with --trace-id" in capsys.readouterr().err
    for case_id in ("paris", "oslo"):
        out = project.path / f"eval_captured_{case_id}.yaml"
        assert main(["capture", traces, "--trace-id", roots[case_id], "-o", str(out)]) == 0
        import yaml

        captured = yaml.safe_load(out.read_text())["cases"][0]
        city = case_id.title()
        assert captured["input"] == city and captured["reference"] == f"answer to {city} / " + (
            "sunny in Paris" if case_id == "paris" else "lookup failed: upstream"
        )
        assert captured["expect"] == {"tool_sequence": [{"name": "lookup", "args": {"city": city}}]}
        expected_mock = (
            "sunny in Paris" if case_id == "paris" else {"raise": "TimeoutError: upstream"}
        )
        assert captured["tool_mocks"] == {"lookup": expected_mock}
        assert main(["validate", str(out)]) == 0, capsys.readouterr().out
    (project.path / "eval_trace.yaml").unlink()
    project.makeini("[pytest]\nagent_eval_tool_dispatch = tracing_agent:dispatch_tool\n")
    project.runpytest(*RUN, "--agent", "tracing_agent:agent").assert_outcomes(passed=2)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "t.json: not JSON"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "00"}]}]}]}',
            "t.json: resourceSpans[0].scopeSpans[0].spans[0].traceId: 'zz' is "
            "not a hex or base64 id",
        ),
        ('{"cases": []}', "t.json: not a trace export"),
        ('{"resourceSpans": []}', "t.json: no spans in it"),
    ],
    ids=["not-json", "bad-id", "not-a-trace", "empty"],
)
def test_capture_names_what_is_wrong_with_a_malformed_trace_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_agent_eval.cli import main

    monkeypatch.chdir(tmp_path)
    Path("t.json").write_text(text)
    assert main(["capture", "t.json"]) == 2
    assert message in capsys.readouterr().err


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Arize Phoenix (``phoenix serve``) on loopback ports, in a temporary working dir.

    Phoenix runs from its own virtual environment (``AGENT_EVAL_PHOENIX``: its ``phoenix`` command;
    .ci/run makes it), not the test venv: arize-phoenix brings arize-phoenix-client, whose pytest
    plugin (auto-loaded) hangs every ``-n`` run of eval items.
    """
    import os
    import shutil
    import signal
    import subprocess
    import time
    import urllib.request

    command = os.environ.get("AGENT_EVAL_PHOENIX") or shutil.which("phoenix")
    if not command:
        pytest.skip(
            "no Arize Phoenix: set AGENT_EVAL_PHOENIX to the `phoenix` command of a venv with "
            "arize-phoenix (python -m venv /tmp/phoenix && /tmp/phoenix/bin/pip install "
            "arize-phoenix; .ci/run does)"
        )
    port = _free_port()
    folder = tmp_path_factory.mktemp("phoenix")
    env = {
        **os.environ,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_WORKING_DIR": str(folder),
    }
    log = (folder / "phoenix.log").open("wb")
    server = subprocess.Popen(
        [command, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = (
            time.monotonic() + 300
        )  # it migrates its database first: slow on a loaded machine
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"phoenix serve did not start: {(folder / 'phoenix.log').read_text()[-2000:]}"
                )
            time.sleep(1)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _phoenix_spans(url: str, want: set[str]) -> list[dict[str, Any]]:
    """The spans of project agent-eval via Phoenix's REST API, once each trace of ``want`` is in."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + 60  # Phoenix ingests in the background
    while True:
        spans: list[dict[str, Any]] = []
        cursor = ""
        try:
            while True:
                page = f"{url}/v1/projects/agent-eval/spans?limit=1000" + (
                    f"&cursor={cursor}" if cursor else ""
                )
                with urllib.request.urlopen(page, timeout=10) as answer:
                    body = json.load(answer)
                spans += body["data"]
                cursor = body.get("next_cursor") or ""
                if not cursor:
                    break
        except urllib.error.HTTPError as exc:  # 404 until the project's first span is in
            if exc.code != 404:
                raise
        roots = {s["context"]["trace_id"] for s in spans if s["parent_id"] is None}
        if want <= roots or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_a_run_sent_to_a_real_phoenix_is_found_through_its_api_and_captured_back(
    instrumented: pytest.Pytester, phoenix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    result = instrumented.runpytest(
        *RUN,
        "--agent-eval-otlp",
        f"{phoenix}/v1/traces",
        "--agent-eval-report",
        "report.json",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["agent eval traces over OTLP: sent"])
    cases = json.loads((instrumented.path / "report.json").read_text())["cases"]
    traces = {c["trace_id"]: c for c in cases}
    spans = _phoenix_spans(phoenix, set(traces))
    for trace_id, case in traces.items():
        mine = {s["name"]: s for s in spans if s["context"]["trace_id"] == trace_id}
        root = mine["invoke_agent weather:agent"]
        assert (
            root["parent_id"] is None
            and root["attributes"]["agent_eval.case.id"] == case["case_id"]
        )
        for child in (
            "ChatCompletion",
            "chat loopback-model",
            "lookup",
        ):  # the agent's own spans and the plugin's
            assert mine[child]["parent_id"] == root["context"]["span_id"], (child, mine[child])
        verdicts = {
            e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in root["events"]
        }
        assert set(verdicts) == {
            "contains",
            "tool_sequence",
            "max_llm_calls",
            "no_error_spans",
            "spans",
        }
        assert all(v["gen_ai.evaluation.score.label"] == "pass" for v in verdicts.values())
    export = instrumented.path / "phoenix.json"
    chosen = next(iter(traces))
    export.write_text(
        json.dumps({"data": [s for s in spans if s["context"]["trace_id"] == chosen]})
    )
    out = instrumented.path / "eval_from_phoenix.yaml"
    assert main(["capture", str(export), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0, capsys.readouterr().out
    import yaml

    captured = yaml.safe_load(out.read_text())["cases"][0]
    city = traces[chosen]["input"]["query"]
    assert captured["input"] == city
    assert captured["expect"]["tool_sequence"] == [{"name": "lookup", "args": {"city": city}}]
    assert captured["tool_mocks"] == {"lookup": f"sunny in {city}"}


@pytest.mark.parametrize(
    "given, environ, endpoint",
    [
        (
            "http://127.0.0.1:6006/v1/traces",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
            "http://127.0.0.1:6006/v1/traces",
        ),
        (
            None,
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/api/otel",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x",
            },
            "http://t/api/otel",
        ),
        (
            None,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            "http://collector:4318/v1/traces",
        ),
        (None, {}, "http://localhost:4318/v1/traces"),
    ],
    ids=["option", "traces-variable", "base-variable", "default"],
)
def test_the_otlp_endpoint_follows_the_conventions(
    given: str | None, environ: dict[str, str], endpoint: str
) -> None:
    from pytest_agent_eval.traces.engine import otlp_endpoint

    assert otlp_endpoint(given, environ) == endpoint
