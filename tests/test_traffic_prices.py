"""What a run's LLM calls cost (SPEC §14) as a user reads it in the reports.

Cached and cache-written input tokens at their own list prices (OpenAI chat completions and
Responses through the real `openai` client, Anthropic's messages through `httpx`), prices from the
ini beside the maintained table, and a model without a price named in the record, the terminal
summary and every report, with the sums it leaves out marked partial.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from openai_server import ChatServer

from pytest_agent_eval.report.schema import report_schema

pytest.importorskip("openai")

AGENTS = '''
import os

import httpx
import openai


def chat(query, context):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=context["model"], messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content


def responses(query, context):
    client = openai.OpenAI(max_retries=0)
    return client.responses.create(model=context["model"], input=query).output_text


def anthropic(query, context):
    """Anthropic's messages API, called as its client does (httpx)."""
    reply = httpx.post(
        os.environ["OPENAI_BASE_URL"] + "/messages",
        headers={"x-api-key": "sk-ant-loopback", "anthropic-version": "2023-06-01"},
        json={"model": context["model"], "max_tokens": 100, "messages": [{"role": "user", \
"content": query}]},
    )
    reply.raise_for_status()
    return reply.json()["content"][0]["text"]
'''

RUN = (
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
    "--agent-eval-traffic",
    "--agent-eval-report",
    "report.json",
)


def cases(agent: str, *models: str) -> str:
    """One case per model, each asking it once through ``agent``."""
    lines = [f"agent: priced_agents:{agent}", "cases:"]
    for model in models:
        lines += [
            f"  - id: {model}",
            "    input: Where to in May?",
            f"    context: {{model: {model}}}",
        ]
        lines += ["    expect: {contains: [without tools]}"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None, max_requests=100) as chat:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-secret-key")
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        yield chat


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(priced_agents=AGENTS)
    pytester.syspathinsert()
    return pytester


def use_table(pytester: pytest.Pytester, table: str) -> None:
    """``maintained``: genai-prices' table (the ``prices`` extra); ``built-in``: as without it."""
    if table == "maintained":
        pytest.importorskip("genai_prices", reason="the dev extra installs genai-prices")
    else:
        pytester.makeconftest(
            "import sys\n\nsys.modules['genai_prices'] = None  # as if not installed\n"
        )


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / "report.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(document)
    return document


def by_case(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {c["case_id"]: c for c in report(pytester)["cases"]}


# -- item 6: cached input tokens at their own prices
# -------------------------------------------------------------

# 90,000 of the 100,000 prompt tokens read from the cache (they are part of prompt_tokens)
OPENAI_CACHED = {
    "chat": {
        "prompt_tokens": 100_000,
        "completion_tokens": 1_000,
        "total_tokens": 101_000,
        "prompt_tokens_details": {"cached_tokens": 90_000},
    },
    "responses": {
        "input_tokens": 100_000,
        "input_tokens_details": {"cached_tokens": 90_000},
        "output_tokens": 1_000,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 101_000,
    },
}


@pytest.mark.parametrize("table", ["maintained", "built-in"])
@pytest.mark.parametrize("agent", ["chat", "responses"])
def test_openai_cached_prompt_tokens_cost_the_cached_price(
    project: pytest.Pytester, server: ChatServer, agent: str, table: str
) -> None:
    use_table(project, table)
    server.usage = OPENAI_CACHED[agent]
    project.makefile(".yaml", eval_cached=cases(agent, "gpt-4o"))
    project.runpytest(*RUN).assert_outcomes(passed=1)
    (case,) = report(project)["cases"]
    assert case["tokens"] == {
        "input": 100_000,
        "output": 1_000,
        "total": 101_000,
        "cache_read": 90_000,
    }
    # gpt-4o's list price: $2.50 / M input tokens, $1.25 / M cached input tokens, $10.00 / M output
    # tokens
    assert case["cost"] == pytest.approx((10_000 * 2.50 + 90_000 * 1.25 + 1_000 * 10.00) / 1e6)
    assert case.get("unpriced_models", []) == []


ANTHROPIC_CACHED = {  # Anthropic counts cache reads and writes apart from input_tokens
    "input_tokens": 1_000,
    "cache_read_input_tokens": 100_000,
    "cache_creation_input_tokens": 2_000,
    "output_tokens": 500,
}


@pytest.mark.parametrize("table", ["maintained", "built-in"])
def test_anthropic_cache_reads_and_writes_cost_their_own_prices(
    project: pytest.Pytester, server: ChatServer, table: str
) -> None:
    use_table(project, table)
    server.usage = ANTHROPIC_CACHED
    project.makefile(".yaml", eval_cached=cases("anthropic", "claude-sonnet-4-20250514"))
    project.runpytest(*RUN).assert_outcomes(passed=1)
    (case,) = report(project)["cases"]
    assert case["tokens"] == {
        "input": 103_000,
        "output": 500,
        "total": 103_500,
        "cache_read": 100_000,
        "cache_write": 2_000,
    }
    # Claude Sonnet 4's list price: $3 / M input, $0.30 / M cache reads, $3.75 / M (5-minute) cache
    # writes, $15 / M
    # output; 7.7 times less than 103,000 input tokens at $3 / M.
    assert case["cost"] == pytest.approx(
        (1_000 * 3.00 + 100_000 * 0.30 + 2_000 * 3.75 + 500 * 15.00) / 1e6
    )


def test_the_ini_prices_give_cached_and_cache_write_prices(
    project: pytest.Pytester, server: ChatServer
) -> None:
    prices = {
        "travel-model": {"input": 1.0, "output": 2.0, "cached_input": 0.1, "cache_write": 1.25},
        "claude-sonnet-4": {
            "input": 10.0,
            "output": 20.0,
            "cached_input": 1.0,
            "cache_write": 12.0,
        },
    }
    project.makeini(f"[pytest]\nagent_eval_prices = {json.dumps(prices)}\n")
    server.usage = ANTHROPIC_CACHED
    project.makefile(
        ".yaml", eval_cached=cases("anthropic", "travel-model", "claude-sonnet-4-20250514")
    )
    project.runpytest(*RUN).assert_outcomes(passed=2)
    found = by_case(project)
    travel = (1_000 * 1.0 + 100_000 * 0.1 + 2_000 * 1.25 + 500 * 2.0) / 1e6
    assert found["travel-model"]["cost"] == pytest.approx(travel)
    # the ini's price overrides the maintained table's for the model it names (and its dated
    # snapshots)
    assert found["claude-sonnet-4-20250514"]["cost"] == pytest.approx(
        (1_000 * 10.0 + 100_000 * 1.0 + 2_000 * 12.0 + 500 * 20.0) / 1e6
    )


def test_an_ini_price_without_a_cached_price_leaves_cached_calls_unpriced(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makeini(
        '[pytest]\nagent_eval_prices = {"travel-model": {"input": 1.0, "output": 2.0}}\n'
    )
    server.usage = OPENAI_CACHED["chat"]
    project.makefile(".yaml", eval_cached=cases("chat", "travel-model"))
    result = project.runpytest(*RUN)
    result.assert_outcomes(passed=1)
    (case,) = report(project)["cases"]
    assert case["cost"] is None  # never the cached tokens at the full input price
    assert case["unpriced_models"] == ["travel-model (no cached_input price)"]


# -- item 7: a model without a price is named, and the sums it leaves out are partial
# -----------------------------


def test_unpriced_models_are_named_in_the_summary_and_every_report(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makeini(
        '[pytest]\nagent_eval_prices = {"travel-model": {"input": 1.0, "output": 2.0}}\n'
    )
    project.makefile(".yaml", eval_mixed=cases("chat", "travel-model", "foo-model", "bar-model"))
    result = project.runpytest(
        *RUN, "--agent-eval-markdown", "summary.md", "--agent-eval-html", "report.html"
    )
    result.assert_outcomes(passed=3)
    known = (
        10 * 1.0 + 5 * 2.0
    ) / 1e6  # the loopback server's usage: 10 input tokens, 5 output tokens
    found = by_case(project)
    assert (
        found["travel-model"]["cost"] == pytest.approx(known)
        and found["travel-model"]["unpriced_models"] == []
    )
    assert found["foo-model"]["cost"] is None and found["foo-model"]["unpriced_models"] == [
        "foo-model"
    ]
    assert found["bar-model"]["unpriced_models"] == ["bar-model"]
    assert all(c["trials"][0]["tokens"]["total"] == 15 for c in found.values())
    partial = f"cost ${known:.4f} (partial: 2 cases with unpriced models: bar-model, foo-model)"
    result.stdout.fnmatch_lines(["*agent eval summary*", "all *3/3*0.0000 (partial)", partial])
    assert partial in (project.path / "summary.md").read_text()
    page = (project.path / "report.html").read_text()
    assert (
        partial in page.split('<script type="application/json"')[0]
    )  # in the page's own text, not only its data


def test_the_one_line_summary_names_unpriced_models(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makefile(".yaml", eval_mixed=cases("chat", "foo-model"))
    result = project.runpytest(*RUN, "-q", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["agent eval: 1/1 passed, *, cost unknown (1 case with unpriced models: foo-model)"]
    )


def test_a_matrix_agent_s_figures_name_its_unpriced_models(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makefile(
        ".yaml",
        eval_matrix=cases("chat", "foo-model").replace(
            "agent: priced_agents:chat",
            "agents: {one: 'priced_agents:chat', two: 'priced_agents:responses'}",
        ),
    )
    project.runpytest(*RUN).assert_outcomes(passed=2)
    agents = report(project)["agents"]
    assert agents["one"]["cost"] is None and agents["one"]["unpriced_models"] == ["foo-model"]
    assert agents["two"]["unpriced_models"] == ["foo-model"]


def test_max_cost_fails_on_the_known_part_of_a_partial_sum(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makeini(
        '[pytest]\nagent_eval_prices = {"travel-model": {"input": 1.0, "output": 2.0}}\n'
    )
    # the unpriced case first: a spend cap stops starting cases once the known spend reached X (SPEC
    # §25), and the
    # threshold is still judged on the known part of the whole run
    project.makefile(".yaml", eval_mixed=cases("chat", "foo-model", "travel-model"))
    result = project.runpytest(*RUN, "--agent-eval-max-cost", "0.00001")
    result.assert_outcomes(passed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "agent eval threshold missed: cost 0.0000 (partial: 1 case with unpriced models: "
            "foo-model) > agent_eval_max_cost 1e-05"
        ]
    )


def test_max_cost_within_a_partial_sum_is_not_checked_and_says_why(
    project: pytest.Pytester, server: ChatServer
) -> None:
    project.makeini(
        '[pytest]\nagent_eval_prices = {"travel-model": {"input": 1.0, "output": 2.0}}\n'
    )
    project.makefile(".yaml", eval_mixed=cases("chat", "travel-model", "foo-model"))
    result = project.runpytest(*RUN, "--agent-eval-max-cost", "5")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "agent eval threshold not checked: agent_eval_max_cost: the known cost 0.0000 is "
            "within 5, but it leaves out 1 case with unpriced models: foo-model (give their "
            "prices in agent_eval_prices)"
        ]
    )


FRAMEWORK_AGENTS = """
import os

from openai import AsyncOpenAI


def sdk_agent():
    from agents import Agent, OpenAIChatCompletionsModel

    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="unused", max_retries=0)
    return Agent(name="travel", model=OpenAIChatCompletionsModel(model="gpt-4o", \
openai_client=client))


def pydantic_ai_agent():
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="unused")
    return Agent(OpenAIChatModel("gpt-4o", provider=provider))


SDK = sdk_agent() if os.environ.get("FRAMEWORK") == "agents" else None
PYDANTIC_AI = pydantic_ai_agent() if os.environ.get("FRAMEWORK") == "pydantic_ai" else None
"""


@pytest.mark.parametrize("framework, attr", [("agents", "SDK"), ("pydantic_ai", "PYDANTIC_AI")])
def test_a_framework_s_own_usage_carries_its_cached_tokens_with_the_hook_off(
    pytester: pytest.Pytester,
    server: ChatServer,
    monkeypatch: pytest.MonkeyPatch,
    framework: str,
    attr: str,
) -> None:
    pytest.importorskip(framework, reason="the dev extra installs it")
    monkeypatch.setenv("FRAMEWORK", framework)
    pytester.makepyfile(framework_agents=FRAMEWORK_AGENTS)
    pytester.syspathinsert()
    server.usage = OPENAI_CACHED["chat"]
    pytester.makefile(
        ".yaml",
        eval_cached=cases("chat", "gpt-4o").replace(
            "priced_agents:chat", f"framework_agents:{attr}"
        ),
    )
    pytester.runpytest(
        "-p", "no:cacheprovider", "--agent-eval-report", "report.json"
    ).assert_outcomes(passed=1)
    (case,) = report(pytester)["cases"]
    assert case["tokens"] == {
        "input": 100_000,
        "output": 1_000,
        "total": 101_000,
        "cache_read": 90_000,
    }
