"""HTTP agents and the traffic hook against hostile or broken servers (issue 27).

A redirect to another origin, replies that are not an answer, bodies cut mid-way, secrets in URLs,
headers and echoed replies.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

RUN = ("-p", "no:cacheprovider")
SECRET = "s3cr3t-Value-4711"


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.log: list[dict[str, Any]] = []
        self.other: Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.log.append({"path": self.path, "headers": dict(self.headers)})
        path = self.path.split("?")[0]
        if path == "/redirect-away":
            assert self.server.other is not None
            self._raw(302, b"", [("Location", f"{self.server.other.url}/steal")])
        elif path == "/redirect-here":
            self._raw(307, b"", [("Location", "/chat")])
        elif path == "/html":
            self._raw(
                200,
                b"<!doctype html><html><body>Sign in</body></html>",
                [("Content-Type", "text/html")],
            )
        elif path == "/cut":
            self._raw(200, b'{"output": "half an ans', [("Content-Type", "application/json")])
        elif path.startswith("/cut-mid-body"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "500")
            self.end_headers()
            self.wfile.write(b'{"output": "half')
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        elif path == "/echo":
            seen = " ".join(
                v for k, v in self.headers.items() if k.lower() in ("authorization", "x-api-key")
            )
            self._json(200, {"output": "an answer", "debug": f"the request came with {seen}"})
        elif path == "/down":
            self._json(503, {"error": "overloaded"})
        else:
            self._json(200, {"output": "the real answer" if path == "/chat" else "stolen answer"})

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        self._raw(status, json.dumps(payload).encode(), [("Content-Type", "application/json")])

    def _raw(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve() -> Server:
    server = Server()
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    home, other = _serve(), _serve()
    home.other = other
    yield home, other
    for server in (home, other):
        server.shutdown()
        server.server_close()


def _agent_file(pytester: pytest.Pytester, url: str, contains: str = "answer") -> None:
    pytester.makefile(
        ".yaml",
        eval_http=f"""\
agent:
  url: {url}
  headers: {{Authorization: "Bearer ${{AGENT_TOKEN}}", X-Api-Key: "${{AGENT_TOKEN}}"}}
cases:
  - id: c
    input: hi
    expect: {{contains: ["{contains}"]}}
""",
    )


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return SECRET


def test_item1_a_redirect_to_another_origin_carries_no_credentials_and_is_not_an_answer(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str
) -> None:
    home, other = servers
    _agent_file(pytester, f"{home.url}/redirect-away")
    result = pytester.runpytest(*RUN)
    assert not [entry for entry in other.log if SECRET in json.dumps(entry["headers"])]
    assert "passed" not in result.stdout.lines[-1]
    result.stdout.fnmatch_lines([f"*redirected to another origin {other.url}*not followed*"])


def test_item1_a_redirect_on_the_same_origin_is_followed(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str
) -> None:
    home, _ = servers
    _agent_file(pytester, f"{home.url}/redirect-here", contains="the real answer")
    pytester.runpytest(*RUN).assert_outcomes(passed=1)


@pytest.mark.parametrize("path", ["/html", "/cut"])
def test_item18_an_html_page_or_a_cut_json_reply_is_not_the_agents_answer(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str, path: str
) -> None:
    home, _ = servers
    _agent_file(pytester, f"{home.url}{path}", contains="")
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*infrastructure error, not the agent's: POST */* answered *not JSON*"]
    )


NO_HTTPX = """
import sys
sys.modules["httpx"] = None  # the HTTP agent falls back to urllib
sys.modules["httpx2"] = None
"""


def test_item14_a_body_cut_mid_way_is_infrastructure_without_httpx(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str
) -> None:
    home, _ = servers
    pytester.makeconftest(NO_HTTPX)
    _agent_file(pytester, f"{home.url}/cut-mid-body")
    result = pytester.runpytest_subprocess(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*infrastructure error, not the agent's: POST */cut-mid-body*"])


SWALLOWING_AGENT = """
import openai

def run(query):
    try:
        reply = openai.OpenAI(max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": query}]
        )
        return reply.choices[0].message.content
    except Exception:
        return "sorry, something went wrong"
"""


def test_item14_a_body_cut_mid_way_through_the_traffic_hook_is_infrastructure(
    pytester: pytest.Pytester, servers: tuple[Server, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    home, _ = servers
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{home.url}/cut-mid-body")
    pytester.makepyfile(swallowing=SWALLOWING_AGENT)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_cut="agent: swallowing:run\ncases:\n  - {id: c, input: hi, expect: {contains: [x]}}\n",
    )
    result = pytester.runpytest(*RUN, "--agent-eval-record")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*infrastructure error, not the agent's: POST */cut-mid-body/chat/completions*"]
    )


# -- secrets
# --------------------------------------------------------------------------------------------------


def _everything(root: Path) -> str:
    texts = []
    for path in root.rglob("*"):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix != ".py"
            and path.name != "eval_http.yaml"
        ):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def test_item2_userinfo_in_an_agent_url_is_in_no_message_or_report(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str
) -> None:
    home, _ = servers
    url = home.url.replace("http://", f"http://user:{SECRET}@") + "/down"
    _agent_file(pytester, url)
    reports = (
        "--agent-eval-report",
        "r.json",
        "--junitxml",
        "j.xml",
        "--agent-eval-html",
        "r.html",
    )
    result = pytester.runpytest(*RUN, *reports)
    result.assert_outcomes(errors=1)
    assert SECRET not in result.stdout.str()
    assert SECRET not in _everything(pytester.path)


def test_item2_a_server_echoing_credentials_puts_none_in_the_cassette_or_reports(
    pytester: pytest.Pytester, servers: tuple[Server, Server], token: str
) -> None:
    home, _ = servers
    _agent_file(pytester, f"{home.url}/echo?api_key={SECRET}")
    reports = ("--agent-eval-report", "r.json", "--agent-eval-markdown", "s.md")
    pytester.runpytest(*RUN, "--agent-eval-record", *reports).assert_outcomes(passed=1)
    text = _everything(pytester.path)
    assert "interactions" in text and SECRET not in text


def test_item2_secret_fields_of_any_type_and_name_are_scrubbed() -> None:
    from pytest_agent_eval.traffic.cassette import body_text

    body = {
        "password": {"value": SECRET},
        "api_key": [SECRET],
        "private_key": SECRET,
        "passphrase": SECRET,
        "accessKey": SECRET,
        "credentials": {"id": SECRET},
        "X-Amz-Credential": SECRET,
        "pwd": SECRET,
        "tokens_used": 12,
        "max_tokens": 100,
    }
    scrubbed = json.loads(body_text(json.dumps(body).encode()))
    assert SECRET not in json.dumps(scrubbed)
    assert scrubbed["tokens_used"] == 12 and scrubbed["max_tokens"] == 100  # counts are not secrets


def test_item2_a_redis_password_is_not_in_run_args_or_the_html_header(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(plain="def run(query):\n    return 'hello'\n")
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_p="agent: plain:run\ncases:\n  - {id: c, input: hi, expect: {contains: [hello]}}\n",
    )
    url = f"redis://:{SECRET}@127.0.0.1:1/0"
    result = pytester.runpytest(
        *RUN,
        "--agent-eval-report",
        "r.json",
        "--agent-eval-html",
        "r.html",
        f"--agent-eval-rate-limit-url={url}",
    )
    assert (
        SECRET not in (pytester.path / "r.json").read_text()
        if (pytester.path / "r.json").exists()
        else True
    )
    assert SECRET not in result.stdout.str() + result.stderr.str()
    for name in ("r.json", "r.html"):
        path = pytester.path / name
        assert not path.exists() or SECRET not in path.read_text()
