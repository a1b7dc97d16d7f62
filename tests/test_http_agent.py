"""Agents served over HTTP (SPEC §15), against a real local service on a loopback port."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.adapters.http import HttpAgent, HttpAgentError, at_path, fill, http_agent

SECRET = "s3cr3t-token-value-4711"


class Service(ThreadingHTTPServer):
    """A support bot: answers refund questions, keeps a log of every request it got."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Service

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.log.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
        if self.path == "/down":
            self._send(503, {"error": "overloaded"})
            return
        text = body.get("message") or body.get("input", {}).get("text", "")
        answer = "Refunds take 30 days." if "refund" in text else f"You said: {text}"
        if self.path == "/chat":
            self._send(200, {"output": answer})
        else:  # /v2: nested answer, its own conversation id, the tools it used
            self._send(
                200,
                {"data": {"answer": answer}, "conversation": "c-1", "tools_called": ["search_kb"]},
            )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def service() -> Iterator[Service]:
    server = Service()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_url_agent_posts_each_message_and_reads_the_answer(
    pytester: pytest.Pytester, service: Service
) -> None:
    pytester.makefile(
        ".yaml",
        eval_http=f"""\
agent: {service.url}/chat
cases:
  - id: refund
    input: How long do refunds take?
    expect: {{contains: "30 days"}}
  - id: wrong
    input: hello
    expect: {{contains: "30 days"}}
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*output: You said: hello*"])
    assert sorted(r["body"]["message"] for r in service.log) == [
        "How long do refunds take?",
        "hello",
    ]
    sessions = {r["body"]["session_id"] for r in service.log}
    assert len(sessions) == 2  # one per case


def test_the_session_is_kept_per_case_and_trial(
    pytester: pytest.Pytester, service: Service
) -> None:
    pytester.makefile(
        ".yaml",
        eval_turns=f"""\
agent: {service.url}/chat
cases:
  - id: chat
    repeat: 2
    turns: [first message, second message, third message]
  - id: other
    turns: [one, two]
""",
    )
    pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-concurrency", "4").assert_outcomes(
        passed=2
    )
    by_session: dict[str, list[str]] = {}
    for request in service.log:
        by_session.setdefault(request["body"]["session_id"], []).append(request["body"]["message"])
    conversations = sorted(sorted(messages) for messages in by_session.values())
    assert conversations == [
        ["first message", "second message", "third message"],
        ["first message", "second message", "third message"],
        ["one", "two"],
    ]


def test_a_configured_agent_sends_headers_from_the_environment_and_never_shows_them(
    pytester: pytest.Pytester, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    pytester.makefile(
        ".yaml",
        eval_v2=f"""\
agent:
  url: {service.url}/v2
  headers: {{Authorization: "Bearer ${{AGENT_TOKEN}}"}}
  body: {{input: {{text: "{{message}}"}}, conversation: "{{session}}", case: "{{case_id}}"}}
  output: data.answer
  session: {{from: conversation}}
cases:
  - id: refund
    turns:
      - input: How long do refunds take?
        expect: {{contains: "30 days", tools_called: [search_kb]}}
      - input: and after that?
        expect: {{contains: "refund policy"}}
""",
    )
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-v",
        "--junitxml",
        "junit.xml",
        "--agent-eval-report",
        "report.json",
    )
    result.assert_outcomes(failed=1)
    assert [r["auth"] for r in service.log] == [f"Bearer {SECRET}"] * 2
    assert service.log[0]["body"]["case"] == "refund"
    assert service.log[1]["body"]["conversation"] == "c-1"  # the id the first reply gave
    result.stdout.fnmatch_lines(["*turn 2: contains: output lacks 'refund policy'*"])
    for text in (result.stdout.str(), result.stderr.str()):
        assert SECRET not in text
    for path in pytester.path.rglob(
        "*"
    ):  # the reports, and the run's journal and store under .agent-eval/
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
    report = json.loads((pytester.path / "report.json").read_text())
    assert [c["name"] for c in report["cases"][0]["tool_calls"]] == [
        "search_kb",
        "search_kb",
    ]  # one per turn


def test_a_missing_environment_variable_is_named(
    pytester: pytest.Pytester, service: Service
) -> None:
    pytester.makefile(
        ".yaml",
        eval_env=f"""\
agent:
  url: {service.url}/chat
  headers: {{X-Key: "${{NO_SUCH_AGENT_TOKEN_VAR}}"}}
cases: [{{id: c, input: hi}}]
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*eval_env.yaml:1: agent '*/chat': *NO_SUCH_AGENT_TOKEN_VAR is not set*"]
    )
    assert service.log == []


@pytest.mark.parametrize("where", ["refused", "503"])
def test_an_unreachable_service_is_an_error_not_a_failure(
    pytester: pytest.Pytester, service: Service, where: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/chat" if where == "refused" else f"{service.url}/down"
    pytester.makefile(".yaml", eval_down=f"agent: {url}\ncases: [{{id: c, input: hi}}]\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-report", "r.json")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*infrastructure error*"])
    assert json.loads((pytester.path / "r.json").read_text())["cases"][0]["outcome"] == "error"


def test_the_body_template_and_the_output_path() -> None:
    values = {"message": "hi", "session": "s1", "case_id": "c", "trial": "0"}
    template = {
        "q": "{message}",
        "meta": ["{session}", 3, {"k": "case {case_id}/{trial}"}],
        "n": None,
    }
    assert fill(template, values) == {"q": "hi", "meta": ["s1", 3, {"k": "case c/0"}], "n": None}
    reply = {"data": {"choices": [{"text": "yes"}]}}
    assert at_path(reply, "data.choices.0.text") == "yes"
    # - the sentinel, not a value
    assert at_path(reply, "data.choices.1.text") is not "yes"  # noqa: F632


def test_a_configuration_that_cannot_work_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HttpAgentError, match="unknown key"):
        http_agent({"url": "http://x", "header": {}})
    monkeypatch.delenv("MISSING_VAR_X", raising=False)
    with pytest.raises(HttpAgentError, match="MISSING_VAR_X is not set"):
        http_agent({"url": "http://x", "headers": {"A": "${MISSING_VAR_X}"}})
    agent = http_agent({"url": "http://host/p?api_key=abc"})
    assert isinstance(agent, HttpAgent) and agent.shown == "http://host/p"


def test_the_reply_without_a_known_key_says_what_to_set(tmp_path: Path) -> None:
    agent = http_agent("http://host/p")
    with pytest.raises(ValueError, match="set `output:`"):
        agent.read(b'{"weird": 1}')
    assert agent.read(b'"plain"') == {"output": "plain"}


def test_an_http_agent_is_recorded_and_replayed_with_the_service_stopped(
    pytester: pytest.Pytester, service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's calls go through the hooked client (SPEC §14, §17): recorded and replayed.

    They are recorded beside the case and replayed with nothing listening; a request the cassette
    lacks is an error naming it, never a call to the service.
    """
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    eval_file = f"""\
agent:
  url: {service.url}/chat
  headers: {{Authorization: "Bearer ${{AGENT_TOKEN}}"}}
cases:
  - id: refund
    repeat: 2
    turns:
      - input: How long do refunds take?
        expect: {{contains: "30 days"}}
      - input: thanks
        expect: {{contains: "You said: thanks"}}
"""
    pytester.makefile(".yaml", eval_rr=eval_file)
    run = ("-p", "no:cacheprovider")
    pytester.runpytest(*run, "--agent-eval-record").assert_outcomes(passed=1)
    assert len(service.log) == 4  # two trials of two turns
    cassette = pytester.path / "cassettes" / "eval_rr" / "refund.yaml"
    assert "30 days" in cassette.read_text() and SECRET not in cassette.read_text()
    service.shutdown()
    service.server_close()  # nothing listens on its port any more

    pytester.runpytest(*run, "--agent-eval-replay").assert_outcomes(passed=1)
    (pytester.path / "eval_rr.yaml").write_text(
        eval_file.replace("- input: thanks", "- input: thank you")
    )
    result = pytester.runpytest(*run, "--agent-eval-replay")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_rr.yaml:5: case refund: infrastructure error, not the agent's: replay miss: "
            f"POST {service.url}/chat (no recorded answer in cassettes/eval_rr/refund.yaml; "
            "record it with --agent-eval-record=new)",
        ]
    )
    assert len(service.log) == 4


def test_without_httpx_a_traffic_option_says_what_to_install(
    pytester: pytest.Pytester, service: Service
) -> None:
    """Without httpx the service is called with urllib, which the traffic hook cannot see.

    Fine with no traffic option; with one, an error saying what to install (the call would escape
    recording and replay).
    """
    pytester.makeconftest(
        'import sys\n\nsys.modules["httpx"] = sys.modules["httpx2"] = None  # not installed\n'
    )
    pytester.makefile(
        ".yaml", eval_plain=f"agent: {service.url}/chat\ncases: [{{id: c, input: a refund?}}]\n"
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert len(service.log) == 1
    result = pytester.runpytest("-p", "no:cacheprovider", "--agent-eval-record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "  ✗ agent raised HttpAgentError: the HTTP agent's calls are recorded and "
            "replayed through httpx, "
            # [[] : a literal [ for fnmatch
            "which is not installed: pip install 'pytest-agent-evalset[[]traffic]'"
        ]
    )
    assert len(service.log) == 1
