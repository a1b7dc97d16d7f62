"""MCP tools mocked per case (SPEC §28), against real MCP servers.

A FastMCP server of the official SDK as a subprocess over stdio and over streamable HTTP on
loopback, whose tools write a file when they really run; the agent is the SDK's own
``ClientSession`` (and each framework's MCP client) against the loopback LLM.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("openai")

import mcp.client.session  # noqa: F401 - loaded before the runs, as an agent's module loads it
from mcp_support import AGENT, SERVER, http_server, loopback_llm, ran, server_command
from openai_server import ChatServer

# - the engine, loaded once for pytester's in-process runs
import pytest_agent_eval.mocks.mcp  # noqa: F401

RUN = ("-p", "no:cacheprovider", "-p", "no:randomly")


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with loopback_llm(monkeypatch) as server:
        yield server


@pytest.fixture
def marker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the server's tools write when they really run; server script and agent in place."""
    pytester.makepyfile(mcp_server=SERVER, mcp_agent=AGENT)
    path = pytester.path / "ran.txt"
    monkeypatch.setenv("MCP_RAN", str(path))
    monkeypatch.delenv("MCP_URL", raising=False)
    monkeypatch.setenv("MCP_COMMAND", " ".join(server_command(pytester.path / "mcp_server.py")))
    return path


FORMS = """
agent: mcp_agent:run_agent
cases:
  - id: literal
    input: What is the weather in Paris?
    tool_mocks:
      weather.get_forecast: "sunny in Paris"
    expect:
      contains: ["sunny in Paris"]
      tools_called: [get_forecast]
      tool_args: {get_forecast: {city: Paris}}
  - id: mapping_bare_name
    input: Any alerts for north?
    tool_mocks:
      get_alerts: {region: north, alerts: [flood]}
    expect:
      contains: ['structured={"alerts": ["flood"], "region": "north"}']
  - id: return_form
    input: What is the weather in Oslo?
    tool_mocks:
      get_forecast: {return: "snow in Oslo"}
    expect:
      contains: ["snow in Oslo"]
  - id: sequence_form
    input: What is the weather in Rome?
    tool_mocks:
      weather.get_forecast: {sequence: ["hot in Rome"]}
    expect:
      contains: ["hot in Rome"]
  - id: when_form
    input: What is the weather in Lima?
    tool_mocks:
      get_forecast:
        when:
          - {args: {city: Lima}, return: "fog in Lima"}
        default: "no idea"
    expect:
      contains: ["fog in Lima"]
  - id: raise_form
    input: What is the weather in Kyiv?
    tool_mocks:
      get_forecast: {raise: "TimeoutError: the weather service did not answer"}
    expect:
      contains: ["tool error: TimeoutError: the weather service did not answer"]
  - id: call_form
    input: What is the weather in Bern?
    tool_mocks:
      get_forecast: {call: "forecasts:forecast"}
    expect:
      contains: ["computed for Bern"]
"""


def test_every_mock_form_answers_an_mcp_tool_over_stdio_and_the_server_never_runs_it(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path
) -> None:
    pytester.makepyfile(forecasts="def forecast(city):\n    return f'computed for {city}'\n")
    pytester.path.joinpath("eval_mcp.yaml").write_text(FORMS)
    result = pytester.runpytest(*RUN, "-v")
    result.assert_outcomes(passed=7)
    assert ran(marker) == []  # no mocked call reached the real server
    answers = [
        m["content"] for body in chat.requests for m in body["messages"] if m.get("role") == "tool"
    ]
    assert "sunny in Paris" in answers
    assert "tool error: TimeoutError: the weather service did not answer" in answers
    # the tools the agent offered the LLM came from the real server (listing is not mocked)
    assert {t["function"]["name"] for t in chat.requests[0]["tools"]} == {
        "get_forecast",
        "get_alerts",
    }


STRICT = """
agent: mcp_agent:run_agent
cases:
  - id: unmocked
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_alerts: "none"
"""


def test_strict_mode_fails_an_unmocked_mcp_call_naming_server_tool_arguments_and_line(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path
) -> None:
    pytester.path.joinpath("eval_mcp.yaml").write_text(STRICT)
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*unmocked tool call weather.get_forecast(city='Oslo') in case unmocked "
            "(eval_mcp.yaml:4): `tool_mocks` has no response for 'weather.get_forecast'*",
        ]
    )
    assert ran(marker) == []


PASSTHROUGH = """
agent: mcp_agent:run_agent
cases:
  - id: real
    input: What is the weather in Oslo?
    unmocked_tools: passthrough
    expect:
      contains: ["real forecast for Oslo: rain"]
      tools_called: [get_forecast]
  - id: mocked
    input: Any alerts for south?
    tool_mocks:
      weather.get_alerts: "calm"
    expect:
      contains: ["calm"]
"""


def test_over_streamable_http_a_mocked_call_never_runs_and_an_unmocked_one_reaches_the_server(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.path.joinpath("eval_mcp.yaml").write_text(PASSTHROUGH)
    with http_server(pytester.path / "mcp_server.py", {"MCP_RAN": str(marker)}) as url:
        monkeypatch.setenv("MCP_URL", url)
        result = pytester.runpytest(*RUN, "--agent-eval-report=report.json")
    result.assert_outcomes(passed=2)
    assert ran(marker) == ["get_forecast Oslo"]  # the passed-through call only
    report = json.loads((pytester.path / "report.json").read_text())
    calls = {case["case_id"]: case["tool_calls"] for case in report["cases"]}
    assert calls["real"] == [
        {
            "name": "get_forecast",
            "args": {"city": "Oslo"},
            "result": {
                "result": "real forecast for Oslo: rain"
            },  # FastMCP's structured content of a `str`
            "error": None,
            "server": "weather",
        }
    ]
    assert calls["mocked"] == [
        {
            "name": "get_alerts",
            "args": {"region": "south"},
            "result": "calm",
            "error": None,
            "server": "weather",
        }
    ]


TYPO = """
agent: mcp_agent:run_agent
cases:
  - id: first
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_forecast: "mild"
  - id: typo
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_forcast: "mild"
"""


def test_a_mock_naming_a_tool_the_server_lacks_is_an_error_with_a_did_you_mean(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path
) -> None:
    pytester.path.joinpath("eval_mcp.yaml").write_text(TYPO)
    result = pytester.runpytest(*RUN, "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*eval_mcp.yaml:8: case typo: tool_mocks: 'weather.get_forcast': the MCP server "
            "'weather' has no tool 'get_forcast' (did you mean \"get_forecast\"?); its tools: "
            "get_forecast, get_alerts;*"
        ]
    )
    assert ran(marker) == []


STANDIN = """
agent: mcp_agent:run_agent
mcp_servers:
  weather:
    transport: {transport}
    tools:
      get_forecast:
        description: The forecast for a city.
        input_schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
        response: "stand-in: cloudy"
      get_alerts:
        input_schema: {{type: object, properties: {{region: {{type: string}}}}}}
        response: {{alerts: []}}
cases:
  - id: default_response
    input: What is the weather in Paris?
    expect:
      contains: ["stand-in: cloudy"]
      tools_called: [get_forecast]
  - id: mapping_default
    input: Any alerts for east?
    expect:
      contains: ['structured={{"alerts": []}}']
  - id: overridden
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_forecast: "mocked: snow"
    expect:
      contains: ["mocked: snow"]
  - id: typo
    input: What is the weather in Oslo?
    tool_mocks:
      weather.get_forcast: "mocked: snow"
"""

FIXTURE_CONFTEST = """
import pytest

import mcp_agent


@pytest.fixture
def agent(agent_eval_mcp_servers):
    server = agent_eval_mcp_servers["weather"]
    assert (server["url"] is None) == (server["command"] is not None), server
    return mcp_agent.run_agent
"""


@pytest.mark.parametrize(
    ("transport", "mode"),
    [
        ("stdio", ()),
        ("http", ()),
        ("stdio", ("--agent-eval-concurrency", "4")),
        ("http", ("-n", "2", "--agent-eval-concurrency", "2")),
    ],
    ids=["stdio", "http", "stdio-concurrency", "http-xdist-concurrency"],
)
def test_a_stand_in_server_from_yaml_answers_its_defaults_and_a_case_mock_overrides_them(
    pytester: pytest.Pytester,
    chat: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    transport: str,
    mode: tuple[str],
) -> None:
    pytester.makepyfile(mcp_agent=AGENT)
    monkeypatch.delenv("MCP_URL", raising=False)
    monkeypatch.delenv("MCP_COMMAND", raising=False)
    pytester.path.joinpath("eval_standin.yaml").write_text(STANDIN.format(transport=transport))
    run = pytester.runpytest_subprocess if "-n" in mode else pytester.runpytest
    result = run(*RUN, *mode)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*eval_standin.yaml:30: case typo: tool_mocks: 'weather.get_forcast': the MCP server "
            "'weather' has no tool 'get_forcast' (did you mean \"get_forecast\"?)*"
        ]
    )
    assert (
        "AGENT_EVAL_MCP_WEATHER_URL" not in __import__("os").environ
    )  # the run put its environment back


def test_the_fixture_and_the_ini_file_give_the_stand_ins_address(
    pytester: pytest.Pytester, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(mcp_agent=AGENT, conftest=FIXTURE_CONFTEST)
    monkeypatch.delenv("MCP_URL", raising=False)
    monkeypatch.delenv("MCP_COMMAND", raising=False)
    block = (
        STANDIN.format(transport="http")
        .split("cases:")[0]
        .replace("agent: mcp_agent:run_agent\n", "")
    )
    pytester.path.joinpath("servers.yaml").write_text(block)
    pytester.makeini("[pytest]\nagent_eval_mcp_servers = servers.yaml\n")
    pytester.path.joinpath("eval_mcp.yaml").write_text(
        "cases:\n  - id: default\n    input: What is the weather in Rome?\n"
        "    expect: {contains: ['stand-in: cloudy']}\n"
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1)


def test_a_malformed_mcp_servers_block_is_a_validate_error_at_its_line(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    path = pytester.path / "eval_bad.yaml"
    path.write_text(
        "agent: a:b\nmcp_servers:\n  weather:\n    transport: stdio\n    tools:\n"
        "      get_forecast:\n"
        "        input_shema: {type: object}\ncases:\n  - input: hi\n"
    )
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        f"{path}:7: mcp_servers: tool 'get_forecast': unknown key 'input_shema' (did you "
        'mean "input_schema"?)' in out
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*eval_bad.yaml:7: mcp_servers: tool 'get_forecast': unknown key 'input_shema'*"]
    )


def test_a_stand_in_that_does_not_start_is_an_infrastructure_error_naming_its_command(
    pytester: pytest.Pytester, chat: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(mcp_agent=AGENT)
    broken = pytester.mkpydir("broken") / "mcp"
    broken.mkdir()
    broken.joinpath("__init__.py").write_text("raise ImportError('no MCP SDK here')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))  # the stand-in's process finds this `mcp`
    pytester.path.joinpath("eval_standin.yaml").write_text(STANDIN.format(transport="http"))
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(
        [
            "*eval_standin.yaml:4: the stand-in MCP server 'weather' did not start (*-m "
            "pytest_agent_eval.mocks.mcp_standin *weather.json --http *): it exited with code 1: "
            "*ImportError: no MCP SDK here*"
        ]
    )


REPLAYED = """
agent: mcp_agent:run_agent
cases:
  - id: real_call
    input: What is the weather in Oslo?
    unmocked_tools: passthrough
    expect:
      contains: ["real forecast for Oslo: rain"]
  - id: mocked_call
    input: Any alerts for south?
    tool_mocks:
      weather.get_alerts: "calm"
    expect:
      contains: ["calm"]
"""


def test_a_recorded_cassette_replays_the_mcp_traffic_with_no_mcp_server_running(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.path.joinpath("eval_mcp.yaml").write_text(REPLAYED)
    with http_server(pytester.path / "mcp_server.py", {"MCP_RAN": str(marker)}) as url:
        monkeypatch.setenv("MCP_URL", url)
        recorded = pytester.runpytest(*RUN, "--agent-eval-record")
    recorded.assert_outcomes(passed=2)
    assert ran(marker) == ["get_forecast Oslo"]
    cassette = (pytester.path / "cassettes" / "eval_mcp" / "real_call.yaml").read_text()
    assert "uri: mcp://weather/tools/list" in cassette
    assert "uri: mcp://weather/tools/call" in cassette
    assert "real forecast for Oslo: rain" in cassette
    # the server is gone: the replay's MCP session is answered from the cassettes alone
    replayed = pytester.runpytest(*RUN, "--agent-eval-replay")
    replayed.assert_outcomes(passed=2)
    assert ran(marker) == ["get_forecast Oslo"]
    # an MCP request the cassette lacks is the case's infrastructure error, named
    path = pytester.path / "cassettes" / "eval_mcp" / "real_call.yaml"
    path.write_text(
        cassette.replace("uri: mcp://weather/tools/call", "uri: mcp://weather/tools/other")
    )
    missed = pytester.runpytest(*RUN, "--agent-eval-replay", "-k", "real_call")
    missed.assert_outcomes(errors=1)
    missed.stdout.fnmatch_lines(
        [
            '*infrastructure error*replay miss: MCP mcp://weather/tools/call {"arguments": '
            '{"city": "Oslo"}, "name": "get_forecast"} (no recorded answer in '
            "cassettes*real_call.yaml; record it with "
            "--agent-eval-record=new)*"
        ]
    )


SEEN = """
import sys


def pytest_sessionfinish(session):
    loaded = sorted(m for m in ("mcp", "pytest_agent_eval.mocks.mcp") if m in sys.modules)
    print("loaded:", loaded or "nothing of MCP")
"""


def test_the_patch_installs_when_the_agent_imports_mcp_and_nothing_of_it_loads_otherwise(
    pytester: pytest.Pytester, chat: ChatServer, marker: Path
) -> None:
    pytester.makeconftest(SEEN)
    pytester.makepyfile(plain_agent="def run(query):\n    return 'no tools here'\n")
    pytester.path.joinpath("eval_plain.yaml").write_text(
        "agent: plain_agent:run\ncases:\n  - id: plain\n    input: hi\n"
        "    expect: {contains: [no tools]}\n"
    )
    plain = pytester.runpytest_subprocess(*RUN, "eval_plain.yaml", "-s")
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["*loaded: nothing of MCP"])
    # a fresh process whose agent module imports the SDK after the plugin started: the import hook
    # patches it
    pytester.path.joinpath("eval_mcp.yaml").write_text(STRICT)
    mcp_run = pytester.runpytest_subprocess(*RUN, "eval_mcp.yaml", "-s")
    mcp_run.assert_outcomes(failed=1)
    mcp_run.stdout.fnmatch_lines(
        [
            "*loaded: [[]'mcp', *",
            "*unmocked tool call weather.get_forecast(city='Oslo') in case unmocked*",
        ]
    )
    assert ran(marker) == []
