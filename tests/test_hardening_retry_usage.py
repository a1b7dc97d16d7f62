"""The retry loop and the usage count hold under what providers really send (issue 27, 13 and 17).

What a provider (or a proxy in front of it) sends: a ``Retry-After`` that cannot be used is as if
absent; tokens named twice are counted once; absurd counts are unknown, never the run's cost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai_server import ChatServer
from test_fuzz_new_inputs import FUZZ, USAGES
from test_traffic import AGENTS, PRICES, RUN, USAGE_HOOK, evals_file, point_at, usages

pytest.importorskip("openai")


class _RetryAfterMs(ChatServer):
    """A provider whose 429 asks for ``retry-after-ms: <text>`` (any text, as a proxy may send)."""

    def __init__(self, text: str, **kwargs: Any) -> None:
        super().__init__(lambda prompt: None, retry_after=None, **kwargs)
        self.text = text

    def limit_headers(self, status: int) -> dict[str, str]:
        return {"retry-after-ms": self.text} if status == 429 else {}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.makeconftest(USAGE_HOOK)
    pytester.makeini(f"[pytest]\nagent_eval_traffic = true\nagent_eval_prices = {PRICES}\n")
    pytester.syspathinsert()
    return pytester


UNUSABLE_RETRY_AFTER = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-3",
    "1e400",
    "soon",
    "",
    "Wed, 21 Oct 2015 07:28:00 GMT",
]


@pytest.mark.parametrize("pace", ["on", "off"])
@pytest.mark.parametrize("value", UNUSABLE_RETRY_AFTER)
def test_item13_an_unusable_retry_after_is_as_if_absent(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str, pace: str
) -> None:
    """A 429 with a useless ``Retry-After`` is retried after the usual backoff; the agent answers.

    Useless: NaN, infinite, negative, garbage or a date in the past.
    """
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=1))
    with ChatServer(lambda prompt: None, failures=1, retry_after=value) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-pace", pace)
    result.assert_outcomes(passed=1)
    assert len(chat.log) == 2
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("pace", ["on", "off"])
@pytest.mark.parametrize("value", ["nan", "-5", "-inf", "inf", "x", "1e400"])
def test_item13_an_unusable_retry_after_ms_is_as_if_absent(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str, pace: str
) -> None:
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=1))
    with _RetryAfterMs(value, failures=1) as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-pace", pace)
    result.assert_outcomes(passed=1)
    assert len(chat.log) == 2


def test_item13_a_huge_retry_after_is_an_infrastructure_error_not_the_agents_failure(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makefile(".yaml", eval_retry=evals_file("sync_agent", cases=1))
    with ChatServer(lambda prompt: None, failures=5, retry_after="99999999999999999999") as chat:
        point_at(monkeypatch, chat.base_url)
        result = project.runpytest(*RUN, "--agent-eval-report", "report.json")
    result.assert_outcomes(errors=1)
    (case,) = json.loads((project.path / "report.json").read_text())["cases"]
    assert case["error"].startswith(
        "infrastructure error (not the agent's): POST http://127.0.0.1:"
    )
    assert "more than 60 s: not retried" in case["error"]


# -- item 17: usage
# ------------------------------------------------------------------------------------------


@pytest.fixture
def usage_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None) as chat:
        point_at(monkeypatch, chat.base_url)
        yield chat


def _run_with_usage(
    project: pytest.Pytester, chat: ChatServer, usage: dict[str, Any]
) -> dict[str, Any]:
    chat.usage = usage
    project.makefile(".yaml", eval_usage=evals_file("sync_agent", cases=1))
    result = project.runpytest(*RUN, "--agent-eval-report", "report.json")
    result.assert_outcomes(passed=1)
    (use,) = usages(project)
    (case,) = json.loads((project.path / "report.json").read_text())["cases"]
    return {"usage": use["usage"], "case": case, "stdout": result.stdout.str()}


@pytest.mark.parametrize(
    "usage",
    [
        pytest.param(  # a proxy (LiteLLM-style) that names the chat counts and the Responses counts
            {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "total_tokens": 15,
                "input_tokens": 10,
                "output_tokens": 5,
            },
            id="chat-and-responses-names",
        ),
        pytest.param(  # Responses-style details that repeat the totals
            {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0, "input_tokens": 10},
                "output_tokens_details": {"reasoning_tokens": 0, "output_tokens": 5},
            },
            id="details-repeat-totals",
        ),
        pytest.param(
            {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "total_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 0, "prompt_tokens": 10},
                "completion_tokens_details": {"completion_tokens": 5},
            },
            id="chat-details-repeat-totals",
        ),
    ],
)
def test_item17_tokens_named_twice_are_counted_once(
    project: pytest.Pytester, usage_server: ChatServer, usage: dict[str, Any]
) -> None:
    found = _run_with_usage(project, usage_server, usage)
    assert found["usage"]["input_tokens"] == 10 and found["usage"]["output_tokens"] == 5
    assert found["usage"]["cost"] == pytest.approx((10 * 1.0 + 5 * 2.0) / 1e6)
    assert found["case"]["tokens"] == {"input": 10, "output": 5, "total": 15}


@pytest.mark.parametrize(
    "usage",
    [
        pytest.param({"prompt_tokens": -10, "completion_tokens": 5}, id="negative"),
        pytest.param({"prompt_tokens": 10**30, "completion_tokens": 5}, id="10^30"),
        pytest.param({"prompt_tokens": 10**12, "completion_tokens": 5}, id="10^12"),
        pytest.param({"prompt_tokens": 10.5, "completion_tokens": 5}, id="non-integer"),
        pytest.param({"prompt_tokens": "10", "completion_tokens": 5}, id="text"),
        pytest.param(
            {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": -15}, id="negative-total"
        ),
        pytest.param(
            {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": -3},
            id="negative-cache",
        ),
        pytest.param(
            {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 10**20},
            },
            id="absurd-cached",
        ),
    ],
)
def test_item17_absurd_counts_are_unknown_never_the_runs_cost(
    project: pytest.Pytester, usage_server: ChatServer, usage: dict[str, Any]
) -> None:
    found = _run_with_usage(project, usage_server, usage)
    assert found["usage"]["cost"] is None
    assert any("usage unreadable" in name for name in found["usage"].get("unpriced_models", [])), (
        found["usage"]
    )
    assert found["case"]["cost"] is None
    assert found["case"]["tokens"] is None  # unknown, not 0 and not the absurd count
    assert "input_tokens" not in found["usage"]
    assert "usage unreadable" in found["stdout"]


def test_item17_an_absurd_count_with_nan_is_unknown(
    project: pytest.Pytester, usage_server: ChatServer
) -> None:
    """``NaN`` is not JSON, but Python's ``json`` reads it: a proxy in Python may send it."""
    usage_server.usage = {"prompt_tokens": float("nan"), "completion_tokens": 5}
    found = _run_with_usage(project, usage_server, usage_server.usage)
    assert found["usage"]["cost"] is None
    assert found["case"]["cost"] is None


# -- the fuzz guard, on what the retry loop and the usage count read
# -----------------------------------------

WAIT_TEXT = st.one_of(
    st.text(
        st.characters(min_codepoint=32, max_codepoint=126), max_size=12
    ),  # what a header can carry
    st.sampled_from(
        [
            "nan",
            "-nan",
            "inf",
            "-inf",
            "1e400",
            "-0",
            "0",
            "1e-400",
            "Wed, 21 Oct 2015 07:28:00 GMT",
        ]
    ),
    st.floats().map(repr),
    st.integers().map(str),
)


@FUZZ
@given(
    st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms"]), WAIT_TEXT),
    st.integers(0, 5),
)
def test_item13_any_retry_after_gives_a_finite_wait_or_none(
    headers: dict[str, str], attempt: int
) -> None:
    import math

    import httpx

    from pytest_agent_eval.traffic.retry import asked_wait, verdict

    asked = asked_wait(headers)
    assert asked is None or (math.isfinite(asked) and asked >= 0)
    response = httpx.Response(429, headers=headers)
    wait, _ = verdict(response, attempt, retries=3)
    assert wait is None or (math.isfinite(wait) and 0 <= wait <= 60)


@FUZZ
@given(USAGES, st.sampled_from(["application/json", "text/event-stream"]))
def test_item17_any_usage_is_read_as_sane_counts_or_unreadable(
    usage: Any, content_type: str
) -> None:
    from pytest_agent_eval.traffic.usage import MAX_TOKENS, read_usage

    text = json.dumps({"model": "m", "usage": usage})
    body = (f"data: {text}\n\n" if "stream" in content_type else text).encode()
    call = read_usage(body, content_type)
    if call is not None and call.unreadable is None:
        counts = (
            call.input_tokens,
            call.output_tokens,
            call.cache_read_tokens,
            call.cache_write_tokens,
        )
        assert all(isinstance(n, int) and 0 <= n < MAX_TOKENS for n in counts)
        assert call.cache_read_tokens + call.cache_write_tokens <= call.input_tokens
