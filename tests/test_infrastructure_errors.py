"""Infrastructure errors are not the agent's failures, with or without the hook (SPEC §14).

An exception of a known client's infrastructure class raised out of the agent ends its case as
ERROR, naming the request; the plugin's own error class is matched by identity, so a user's class of
the same name is an ordinary failure.
"""

from __future__ import annotations

import json

import pytest
from openai_server import ChatServer

pytest.importorskip("openai")

AGENT = """
import openai


def agent(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model="loopback-model", messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content
"""

RUN = ("-p", "no:cacheprovider", "-p", "no:randomly", "--agent-eval-report", "report.json")


def _point_at(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def _outcome(pytester: pytest.Pytester) -> tuple[str, str]:
    (case,) = json.loads((pytester.path / "report.json").read_text())["cases"]
    return case["outcome"], case["error"]


@pytest.mark.parametrize("server", ["always 429", "closed port"])
def test_an_agent_clients_infrastructure_exception_is_an_error_without_the_hook(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    pytester.makepyfile(llm_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml", eval_infra="agent: llm_agent:agent\ncases:\n  - id: ask\n    input: Hello\n"
    )
    with ChatServer(lambda prompt: None, failures=1000, failure_status=429) as chat:
        url = chat.base_url
        if server == "always 429":
            _point_at(monkeypatch, url)
            result = pytester.runpytest(*RUN)
    if server == "closed port":
        _point_at(monkeypatch, url)  # the server is stopped: its port refuses
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    said = "answered 429 Too Many Requests" if server == "always 429" else "failed: "
    result.stdout.fnmatch_lines(
        [
            "eval_infra.yaml:3: case ask: infrastructure error, not the agent's: POST "
            f"{url}/chat/completions {said}*",
            "*short test summary info*",
            "ERROR eval_infra.yaml::ask - InfrastructureError: *",
        ]
    )
    assert "failed" not in result.stdout.lines[-1]
    outcome, error = _outcome(pytester)
    assert outcome == "error" and f"POST {url}/chat/completions" in error


def test_a_users_own_class_named_infrastructure_error_is_an_ordinary_failure(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        own_errors="""
class InfrastructureError(Exception):
    pass


def agent(query):
    raise InfrastructureError("the agent's own")
""",
        test_plain="""
from own_errors import InfrastructureError


def test_mine():
    raise InfrastructureError("the test's own")
""",
    )
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml", eval_own="agent: own_errors:agent\ncases:\n  - id: ask\n    input: Hello\n"
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--junitxml", "junit.xml"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "  ✗ agent raised InfrastructureError: the agent's own",
            "*short test summary info*",
            "FAILED eval_own.yaml::ask - *",
            "FAILED test_plain.py::test_mine - own_errors.InfrastructureError: the test's own",
        ]
    )
    junit = (pytester.path / "junit.xml").read_text()
    assert 'errors="0"' in junit and 'failures="2"' in junit


def test_the_simulated_users_llm_failing_on_infrastructure_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin's own LLM answering 429: the case errors naming the request, no traffic option.

    That is the simulated user's LLM, through the default `agent_eval_llm`; the case errors as the
    agent's client would make it.
    """
    pytester.makepyfile(support="def run(query, context):\n    return 'Hi! How can I help?'\n")
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_talk="""\
agent: support:run
cases:
  - id: talk
    simulated_user:
      persona: {name: Ann}
      tasks: [Ask where your order is]
      signoff: Bye now
""",
    )
    with ChatServer(lambda prompt: None, failures=1000, failure_status=429) as chat:
        _point_at(monkeypatch, chat.base_url)
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "loopback-model")
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_talk.yaml:3: case talk: infrastructure error, not the agent's: POST "
            f"{chat.base_url}/chat/completions answered 429 Too Many Requests "
            "(openai.RateLimitError)"
        ]
    )
    assert _outcome(pytester)[0] == "error"


@pytest.mark.parametrize("server", ["always 429", "closed port"])
def test_the_judges_llm_failing_on_infrastructure_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    """The judge's own LLM call failing on infrastructure (no traffic option): the case errors.

    The call is the default `agent_eval_llm`'s; the case errors naming the request, not "no verdict"
    failing it.
    """
    pytester.makepyfile(
        plain_agent="def run(query):\n    return 'Paris is the capital of France.'\n"
    )
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_judged="agent: plain_agent:run\ncases:\n  - id: capital\n    input: Capital?\n"
        "    expect:\n      judge: names Paris\n",
    )
    monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "loopback-model")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    with ChatServer(lambda prompt: None, failures=1000, failure_status=429) as chat:
        url = chat.base_url
        _point_at(monkeypatch, url)
        if server == "always 429":
            result = pytester.runpytest(*RUN)
    if server == "closed port":
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    said = (
        "answered 429 Too Many Requests (openai.RateLimitError)"
        if server == "always 429"
        else "failed: *"
    )
    result.stdout.fnmatch_lines(
        [
            f"eval_judged.yaml:3: case capital: infrastructure error, not the agent's:"
            f" POST {url}/chat/completions {said}"
        ]
    )
    assert _outcome(pytester)[0] == "error"


def test_the_task_scorers_llm_failing_on_infrastructure_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation's task scorer (the user's `agent_eval_llm`, openai) answered 429: an error."""
    pytester.makepyfile(support="def run(query, context):\n    return 'Your order ships today.'\n")
    pytester.makeconftest(
        """
import openai
import pytest


@pytest.fixture(scope="session")
def agent_eval_llm():
    client = openai.OpenAI(max_retries=0)

    def llm(messages, **options):
        if "response_format" not in options:  # the simulated user: done at once
            return "Thanks. Bye now"
        reply = client.chat.completions.create(model="loopback-model", messages=messages, **options)
        return reply.choices[0].message.content

    return llm
"""
    )
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_talk="""\
agent: support:run
cases:
  - id: talk
    simulated_user:
      persona: {name: Ann}
      tasks: [Ask where your order is]
      signoff: Bye now
""",
    )
    with ChatServer(lambda prompt: None, failures=1000, failure_status=429) as chat:
        _point_at(monkeypatch, chat.base_url)
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "eval_talk.yaml:3: case talk: infrastructure error, not the agent's: POST "
            f"{chat.base_url}/chat/completions answered 429 Too Many Requests "
            "(openai.RateLimitError)"
        ]
    )
    assert _outcome(pytester)[0] == "error"


def test_an_http_agent_refused_inside_a_simulated_conversation_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's service refusing a conversation's first reply: the case errors, not the agent.

    The connection is refused at its first reply of a simulated-user conversation: the case errors
    (infrastructure, not the agent), in the terminal and in the report.
    """
    with ChatServer(lambda prompt: None) as closed:
        refused = f"{closed.base_url}/chat"  # the server is stopped below: its port refuses
    pytester.makefile(
        ".yaml",
        eval_talk=f"""\
agent: {refused}
cases:
  - id: talk
    simulated_user:
      persona: {{name: Ann}}
      tasks: [Ask where your order is]
      signoff: Bye now
""",
    )
    with ChatServer(lambda prompt: None) as chat:
        _point_at(monkeypatch, chat.base_url)
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "loopback-model")
        result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    said = f"eval_talk.yaml:3: case talk: infrastructure error, not the agent's: POST {refused}*"
    result.stdout.fnmatch_lines([said])
    outcome, error = _outcome(pytester)
    assert outcome == "error" and f"POST {refused}" in error
