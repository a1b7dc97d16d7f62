"""The OpenAI example agent, unchanged, through the plugin, its dispatch layer mocked.

The real `openai` client and agent loop run against a loopback chat-completions server. The real
dispatch raises if reached.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer

pytest.importorskip("openai")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "openai_agent"


def route(prompt: str) -> tuple[str, dict[str, Any]] | None:
    """The scripted LLM: which tool to call for a prompt of the example evals."""
    if "type hints" in prompt:
        return "search_knowledge_base", {"query": "Python type hints"}
    if "trending" in prompt:
        return "fetch_subreddit_posts", {"subreddit": "python", "limit": 2}
    if match := re.search(r"thread with ID (\w+)", prompt):
        return "fetch_reddit_thread", {"thread_id": match.group(1)}
    return None


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    """A loopback server for the example's `OpenAI()` client (set through the env, as users do)."""
    with ChatServer(route) as chat:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("OPENAI_MODEL", "loopback-model")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        yield chat


def tool_results(chat: ChatServer) -> list[str]:
    """Every tool result the agent sent back to the LLM."""
    return [
        m["content"] for body in chat.requests for m in body["messages"] if m.get("role") == "tool"
    ]


def assert_dispatch_never_reached(chat: ChatServer) -> None:
    """The example's real tools raise "...

    would call the Reddit API"; the agent would pass that on to the LLM.
    """
    assert chat.requests, "the agent never talked to the loopback server"
    assert not [r for r in tool_results(chat) if "would call" in r or "would query" in r]


def test_the_example_eval_file_runs_unchanged_against_a_loopback_llm(
    pytester: pytest.Pytester, server: ChatServer
) -> None:
    result = pytester.runpytest(
        str(EXAMPLE / "eval_openai_agent.yaml"), "-p", "no:cacheprovider", "-p", "no:randomly"
    )
    result.assert_outcomes(passed=4)
    assert_dispatch_never_reached(server)
    sent_tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert sent_tools == {"search_knowledge_base", "fetch_reddit_thread", "fetch_subreddit_posts"}
    assert server.requests[0]["model"] == "loopback-model"
    assert sorted(tool_results(server)) == sorted(
        [
            "Result 1 (r/python, summary): Discussion about Python type hints: most "
            "people like them for\n"
            "large codebases; some find the syntax for generics noisy.",
            "Latest hot posts from r/python:\n1. [150 pts, 45 comments] What's new in Python 3.13\n"
            "2. [89 pts, 23 comments] Best practices for async Python",
            "Thread: What's new in Python 3.13 (150 points, 45 comments)",
            "error: TimeoutError: Reddit did not answer",
        ]
    )


EVALS = """
agent: examples.openai_agent.agent:run_agent
tool_dispatch: examples.openai_agent.tools:dispatch_tool
cases:
  - id: wrong_tool
    input: What's trending on r/python right now?
    tool_mocks:
      fetch_subreddit_posts: "1. What's new in Python 3.13"
      search_knowledge_base: "nothing"
    expect:
      tools_called: [search_knowledge_base]
      tool_args: {fetch_subreddit_posts: {subreddit: rust}}
  - id: unmocked_thread
    input: Can you fetch the Reddit thread with ID abc123?
    expect:
      contains: ["Here is what I found"]
"""


def test_failures_show_the_recorded_calls_and_strict_mode_names_the_unmocked_call(
    pytester: pytest.Pytester, server: ChatServer
) -> None:
    pytester.path.joinpath("eval_openai.yaml").write_text(EVALS)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--junitxml=report.xml"
    )
    result.assert_outcomes(failed=2)
    result.stdout.re_match_lines(
        [
            re.escape(line)
            for line in [
                "case wrong_tool failed: 3 of 3 checks failed (score 0.00)",
                "  ✗ tools_called: not called: search_knowledge_base (score 0.00)",
                "      expected: ['search_knowledge_base']",
                "      actual:   ['fetch_subreddit_posts']",
                "  ✗ tool_args: arguments differ for fetch_subreddit_posts (score 0.00)",
                "      fetch_subreddit_posts.subreddit: expected 'rust', got 'python'",
                "  calls:",
                "     1. fetch_subreddit_posts(subreddit='python', limit=2) -> \"1. What's "
                'new in Python 3.13"',
                "eval_openai.yaml:5: wrong_tool",
                # The agent caught the unmocked call's error and answered anyway: the case still
                # fails.
                "case unmocked_thread failed: 1 of 2 checks failed (score 0.50)",
                "  ✓ contains",
                "  ✗ unmocked tool call fetch_reddit_thread(thread_id='abc123') in case "
                "unmocked_thread (eval_openai.yaml:13): `tool_mocks` has no response for "
                "'fetch_reddit_thread'",
            ]
        ]
    )
    assert_dispatch_never_reached(server)
    assert tool_results(server)[-1].startswith(
        "error: UnmockedToolError: no mock response for tool 'fetch_reddit_thread'"
    )
    junit = pytester.path.joinpath("report.xml").read_text()
    assert 'name="tools_called" value="fetch_subreddit_posts"' in junit
