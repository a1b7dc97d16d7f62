"""The traffic layer's engine alone: usage, prices, matching, scrubbing, cassettes, budgets.

Usage from whole and streamed answers (OpenAI, Anthropic), prices, request matching and scrubbing,
cassettes in vcrpy's format, Retry-After, budgets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_agent_eval.traffic.cassette import (
    Cassette,
    Interaction,
    body_text,
    cassette_path,
    match_key,
    scrub_url,
)
from pytest_agent_eval.traffic.limits import Budget
from pytest_agent_eval.traffic.retry import retry_delay
from pytest_agent_eval.traffic.usage import CallUsage, Prices, Usage, parse_prices, read_usage


def sse(*events: object) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    "body, content_type, expected",
    [
        (  # OpenAI chat completions
            json.dumps(
                {"model": "gpt-4o", "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
            ).encode(),
            "application/json",
            CallUsage("gpt-4o", 12, 3),
        ),
        (  # Anthropic messages: cached input tokens are input too
            json.dumps(
                {
                    "model": "claude-sonnet-4",
                    "usage": {"input_tokens": 20, "cache_read_input_tokens": 5, "output_tokens": 7},
                }
            ).encode(),
            "application/json",
            CallUsage("claude-sonnet-4", 25, 7, cache_read_tokens=5),
        ),
        (  # OpenAI stream with include_usage: the last chunk
            sse(
                {"model": "gpt-4o-mini", "choices": [{"delta": {"content": "hi"}}]},
                {"usage": {"prompt_tokens": 9, "completion_tokens": 2}},
            ),
            "text/event-stream; charset=utf-8",
            CallUsage("gpt-4o-mini", 9, 2),
        ),
        (  # Anthropic stream: input in message_start, cumulative output in message_delta
            sse(
                {
                    "type": "message_start",
                    "message": {
                        "model": "claude-3-5-haiku",
                        "usage": {"input_tokens": 30, "output_tokens": 1},
                    },
                },
                {"type": "message_delta", "usage": {"output_tokens": 15}},
            ),
            "text/event-stream",
            CallUsage("claude-3-5-haiku", 30, 15),
        ),
        (  # Anthropic stream with cache writes, some of them for an hour
            sse(
                {
                    "type": "message_start",
                    "message": {
                        "model": "claude-sonnet-4",
                        "usage": {
                            "input_tokens": 4,
                            "cache_creation_input_tokens": 300,
                            "cache_read_input_tokens": 0,
                            "cache_creation": {
                                "ephemeral_5m_input_tokens": 100,
                                "ephemeral_1h_input_tokens": 200,
                            },
                            "output_tokens": 1,
                        },
                    },
                },
                {"type": "message_delta", "usage": {"output_tokens": 9}},
            ),
            "text/event-stream",
            CallUsage("claude-sonnet-4", 304, 9, cache_write_tokens=300, cache_write_1h_tokens=200),
        ),
        # Responses API stream: the usage of response.completed, cached tokens part of input_tokens
        (
            sse(
                {"type": "response.created", "response": {"model": "gpt-4.1", "usage": None}},
                {
                    "type": "response.completed",
                    "response": {
                        "model": "gpt-4.1",
                        "usage": {
                            "input_tokens": 50,
                            "input_tokens_details": {"cached_tokens": 40},
                            "output_tokens": 3,
                        },
                    },
                },
            ),
            "text/event-stream",
            CallUsage("gpt-4.1", 50, 3, cache_read_tokens=40),
        ),
        (b'{"data": [1, 2]}', "application/json", None),
        (b"\x89PNG", "image/png", None),
    ],
)
def test_usage_is_read_from_whole_and_streamed_answers(
    body: bytes, content_type: str, expected: CallUsage | None
) -> None:
    assert read_usage(body, content_type) == expected


def test_cost_from_the_price_table_and_none_for_an_unpriced_model() -> None:
    usage = Usage()
    prices = Prices(
        {"my-gpt": {"input": 2.5, "output": 10.0}, "my-gpt-mini": {"input": 0.15, "output": 0.6}}
    )
    usage.add(
        CallUsage("my-gpt-2024-08-06", 1_000_000, 100_000), prices
    )  # a dated snapshot: its family's price
    assert usage.cost == pytest.approx(2.5 + 1.0)
    assert prices.cost(CallUsage("my-gpt-mini-2024-07-18", 1_000_000, 0)) == pytest.approx(
        0.15
    )  # the longest wins
    usage.add(CallUsage("mystery", 10, 10), prices)
    assert usage.cost is None and usage.as_dict()["unpriced_models"] == ["mystery"]
    assert usage.as_dict()["total_tokens"] == 1_100_020


def test_cache_writes_for_an_hour_cost_their_own_price() -> None:
    prices = Prices({"m": {"input": 1.0, "output": 2.0, "cache_write": 1.25}})
    call = CallUsage("m", 1_000_000, 0, cache_write_tokens=1_000_000, cache_write_1h_tokens=400_000)
    assert prices.cost(call) == "m (no cache_write_1h price)"  # never priced as five-minute writes
    prices = Prices(
        {"m": {"input": 1.0, "output": 2.0, "cache_write": 1.25, "cache_write_1h": 2.0}}
    )
    assert prices.cost(call) == pytest.approx(0.6 * 1.25 + 0.4 * 2.0)


def test_prices_are_checked() -> None:
    assert parse_prices('{"m": {"input": 1, "output": 2.5}}') == {
        "m": {"input": 1.0, "output": 2.5}
    }
    assert (
        parse_prices('{"m": {"input": 1, "output": 2, "cached_input": 0.1}}')["m"]["cached_input"]
        == 0.1
    )
    with pytest.raises(ValueError, match="'m': expected"):
        parse_prices('{"m": {"input": 1}}')
    with pytest.raises(ValueError, match=r"'m': expected .* optionally cached_input"):
        parse_prices('{"m": {"input": 1, "output": 2, "cached": 0.1}}')
    with pytest.raises(ValueError, match="at least 0"):
        parse_prices('{"m": {"input": -1, "output": 1}}')


def test_secrets_never_reach_a_cassette_and_matching_ignores_named_fields() -> None:
    assert scrub_url("https://x.test/v1?api_key=sk-1&model=a&key=2") == (
        "https://x.test/v1?api_key=<scrubbed>&model=a&key=<scrubbed>"
    )
    assert "sk-1" not in body_text(b'{"api_key": "sk-1", "messages": []}')
    one = match_key(
        "post",
        "https://x.test/v1",
        b'{"a": 1, "user": "u1", "b": {"user": "u2"}}',
        frozenset({"user"}),
    )
    two = match_key(
        "POST", "https://x.test/v1", '{"b": {}, "a": 1, "user": "other"}', frozenset({"user"})
    )
    assert one == two
    assert one != match_key("POST", "https://x.test/v1", '{"a": 2}', frozenset({"user"}))


def test_a_cassette_is_vcrpy_yaml_and_answers_in_order(tmp_path: Path) -> None:
    path = cassette_path(
        tmp_path / "cassettes", Path("evals/eval_routing.yaml"), "a case/with odd:chars"
    )
    assert (
        path.parent == tmp_path / "cassettes" / "eval_routing"
    )  # with a hash of the id, as its name had to change
    assert path.name.startswith("a_case_with_odd_chars-") and path.suffix == ".yaml"
    cassette = Cassette(path, frozenset())
    for n, answer in enumerate(["first", "second"], 1):
        cassette.add(
            Interaction(
                "POST",
                "https://x.test/v1",
                '{"q": 1}',
                "application/json",
                200,
                "OK",
                "text/plain",
                answer,
                trial=n,
            )
        )
    cassette.save(keep_old=False)
    data = yaml.safe_load(path.read_text())
    assert data["version"] == 1
    assert data["interactions"][0]["request"] == {
        "body": '{"q": 1}',
        "headers": {"Content-Type": ["application/json"]},
        "method": "POST",
        "uri": "https://x.test/v1",
    }
    assert data["interactions"][0]["response"]["status"] == {"code": 200, "message": "OK"}
    assert data["interactions"][1]["response"]["body"] == {"string": "second"}
    again = Cassette(path, frozenset())
    key = match_key("POST", "https://x.test/v1", b'{"q": 1}', frozenset())
    assert [again.take(key).response_body for _ in range(3)] == ["first", "second", "first"]  # type: ignore[union-attr]
    assert again.take(match_key("GET", "https://x.test/v1", None, frozenset())) is None


def test_retry_after_in_seconds_milliseconds_or_a_date_else_backoff() -> None:
    assert retry_delay({"retry-after": "2"}, 0) == 2.0
    assert retry_delay({"retry-after-ms": "250"}, 0) == 0.25
    assert retry_delay({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0) == 0.0  # in the past
    assert retry_delay({"retry-after": "9999"}, 0) == 60.0
    assert 0.25 <= retry_delay({}, 0) <= 0.5 and 1.0 <= retry_delay({}, 2) <= 2.0


@pytest.mark.parametrize(
    "text, limit, interval", [("4/s", 4, 1000), ("500/min", 500, 60_000), ("2 / h", 2, 3_600_000)]
)
def test_budgets_are_n_per_second_minute_or_hour(text: str, limit: int, interval: int) -> None:
    budget = Budget.parse(text, "--agent-eval-rate-limit")
    assert (budget.limit, budget.interval_ms) == (limit, interval)


@pytest.mark.parametrize("text", ["4", "0/s", "4/day", "x/min"])
def test_a_bad_budget_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="write the budget as N/s, N/min or N/h"):
        Budget.parse(text, "--agent-eval-rate-limit")
