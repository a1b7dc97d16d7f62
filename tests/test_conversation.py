"""Simulated-user conversations offline, with a scripted ``agent_eval_llm``.

Scores, assertions, Neo4j, bad input.
"""

from __future__ import annotations

import socket

import pytest

from pytest_agent_eval.conversation.scoring import (
    Composite,
    ScorerReplyError,
    read_task_scores,
    timing_score,
)
from pytest_agent_eval.core.conversation import SimulatedUser, Task

AGENT = """
def run(query, context):
    if "A100" in query:
        return "Order A100 has shipped."
    if "order" in query.lower():
        return "Sure, what is your order number?"
    return "Hi! How can I help?"
"""

# The user asks its task, tells the fact when asked, then signs off; the scorer's reply is set per
# test.
CONFTEST = """
import json, re
import pytest

SCORER_REPLY = {scorer!r}

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages, **options):
        if messages[-1]["content"].startswith("You score a conversation"):
            return SCORER_REPLY
        system = messages[0]["content"]
        mine = [m["content"] for m in messages[1:] if m["role"] == "assistant"]
        if "order number?" in messages[-1]["content"]:
            return "{user_fact}"
        if len(mine) == 1:
            return "Where is my order?"
        return "Thanks, goodbye"
    return llm
"""
GOOD_SCORE = '{"tone": 0.9, "tasks": [{"scored": "Ask where the order is", "score": 1.0}]}'

CASE = """
agent: chat_agent:run
cases:
  - id: order
    simulated_user:
      tasks: [{{task: Ask where the order is, acceptance_criteria: the agent says it shipped}}]
      facts: ["order number: A100"]
{extra}
"""


def run_evals(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    return result


def _setup(
    pytester: pytest.Pytester,
    extra: str = "",
    scorer: str = GOOD_SCORE,
    user_fact: str = "It is A100.",
) -> None:
    pytester.makepyfile(chat_agent=AGENT)
    pytester.makeconftest(CONFTEST.format(scorer=scorer, user_fact=user_fact))
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_chat=CASE.format(extra=extra))


def test_a_passing_conversation_passes(pytester: pytest.Pytester) -> None:
    _setup(pytester, "    assertions:\n      - {contains: [shipped], weight: 2}\n")
    run_evals(pytester).assert_outcomes(passed=1)


def test_native_assertions_are_weighted_in_the_failure_text(pytester: pytest.Pytester) -> None:
    extra = (
        "    assertions:\n"
        "      - {contains: [shipped], weight: 2}\n"
        "      - {tools_called: [lookup_order], weight: 3}\n"
        "    score: {weights: {tasks: 1, assertions: 3}}\n"
    )
    _setup(pytester, extra)
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case order failed: tasks 1.00, assertions 0.40 (2/5 by weight), "
            "penalty 0.00 → 0.55 < 0.70",
            "*✓ assertion 1: contains",
            "*✗ assertion 2: tools_called*",
        ]
    )


def test_an_unreadable_scorer_reply_is_no_verdict_and_shown(pytester: pytest.Pytester) -> None:
    _setup(
        pytester,
        "    assertions:\n      - {contains: [shipped]}\n",
        scorer="Great job overall, 9/10!",
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case order failed: tasks not scored (task scorer reply unreadable: 'Great "
            "job overall, 9/10!'; "
            'expected {"tone": *}), assertions 1.00 (1/1 by weight), penalty 0.00 '
            "→ no composite score",
            "*✗ tasks: task scorer reply unreadable: 'Great job overall, 9/10!'*",
        ]
    )


def test_an_empty_simulated_user_reply_fails_the_case_saying_so(pytester: pytest.Pytester) -> None:
    _setup(pytester, user_fact="")
    pytester.makefile(
        ".yaml", eval_other="agent: chat_agent:run\ncases:\n  - {id: plain, input: hi}\n"
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "case order failed: the conversation stopped at an error, nothing was scored",
            "*✗ message 5: simulated user reply unusable: '' (expected the next "
            "user message as text)",
        ]
    )


def test_an_agent_call_that_fails_after_its_retries_stops_the_conversation(
    pytester: pytest.Pytester,
) -> None:
    _setup(pytester, "      retries: 1\n")
    pytester.makepyfile(
        chat_agent="def run(query, context):\n    if 'order' in query:\n"
        "        raise TimeoutError('upstream')\n"
        "    return 'Hi! How can I help?'\n"
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case order failed: the conversation stopped at an error, nothing was scored",
            "*✗ message 4: agent raised TimeoutError: upstream (after 2 attempts)",
        ]
    )


def test_without_an_llm_the_conversation_is_not_scored_and_skipped(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(chat_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_chat=CASE.format(extra=""))
    result = run_evals(pytester, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED * nothing scored (simulated_user): not scored: no LLM configured*"]
    )
    run_evals(pytester, "--agent-eval-require-llm").assert_outcomes(failed=1)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "    assertions:\n      - {weight: 2}\n",
            "eval_chat.yaml:8: assertions?0?: an assertion needs `cypher` (with `expected`), "
            "`expression`, or one*",
        ),
        (
            "    assertions:\n      - {cypher: 'RETURN 1'}\n",
            "eval_chat.yaml:8: assertions?0?: a `cypher` assertion*",
        ),
        ("    turns: [hi]\n", "eval_chat.yaml:7: `turns` and `simulated_user` exclude each other*"),
    ],
)
def test_a_bad_conversation_case_errors_at_its_line(
    pytester: pytest.Pytester, extra: str, message: str
) -> None:
    _setup(pytester, extra)
    pytester.makefile(
        ".yaml", eval_other="agent: chat_agent:run\ncases:\n  - {id: plain, input: hi}\n"
    )
    result = run_evals(pytester)
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines([message])


def test_score_without_a_simulated_user_is_an_error_of_its_case(pytester: pytest.Pytester) -> None:
    _setup(pytester, "  - id: plain\n    input: hi\n    score: {aspirational_latency_s: 1}\n")
    result = run_evals(pytester)
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(
        ["eval_chat.yaml:9: `score` belongs to a conversation with a `simulated_user`*"]
    )


NEO4J_CASE = (
    "    assertions:\n      - {cypher: 'MATCH (o:Order) RETURN count(o)', expected: 1, weight: 2}\n"
)


def test_cypher_without_neo4j_configured_is_not_scored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NEO4J_URI", "NEO_URI"):
        monkeypatch.delenv(name, raising=False)
    _setup(pytester, NEO4J_CASE + "    expect: {contains: [refund]}\n")
    result = run_evals(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✓ assertion 1: cypher MATCH (o:Order) RETURN count(o) (not scored)",
            "*not scored: no Neo4j configured: set NEO4J_URI (or NEO_URI)*agent_eval_neo4j*",
        ]
    )


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_neo4j_connection_is_the_assertions_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("neo4j")
    port = _unused_port()
    monkeypatch.setenv("NEO4J_URI", f"bolt://127.0.0.1:{port}")
    monkeypatch.setenv("NEO4J_USERNAME", "neo4j")
    monkeypatch.setenv("NEO4J_PASSWORD", "secret")
    _setup(pytester, NEO4J_CASE)
    pytester.makefile(
        ".yaml", eval_other="agent: chat_agent:run\ncases:\n  - {id: plain, input: hi}\n"
    )
    result = run_evals(pytester)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "case order failed: tasks 1.00, assertions no verdict (1 could not be "
            "evaluated), penalty 0.00 → no*",
            "*✗ assertion 1: cypher MATCH (o:Order) RETURN count(o): no verdict: cypher failed: "
            f"ServiceUnavailable: *{port}*Connection refused*",
        ]
    )


# -- the engine
# --------------------------------------------------------------------------------------------------

USER = SimulatedUser(tasks=(Task("Ask A", "a"), Task("Ask B", "b")))


def test_the_task_scorer_reads_the_home_reply_shape_only() -> None:
    reply = (
        '```json\n{"tone": 0.5, "tasks": [{"scored": "ask b", "score": 0.4}, {"scored": "Ask '
        'A", "score": 1}]}\n```'
    )
    assert read_task_scores(reply, USER) == ([1.0, 0.4], 0.5)
    assert read_task_scores(
        '{"tasks": [{"scored": "x", "score": 0.1}, {"scored": "y", "score": 0.2}]}', USER
    ) == (
        [0.1, 0.2],
        None,
    )
    for bad in (
        "8/10",
        '{"score": 0.8}',
        '{"tasks": [{"scored": "Ask A", "score": 1.5}]}',
        '{"tasks": [{"scored": "Ask A", "score": 1}]}',
    ):
        with pytest.raises(ScorerReplyError, match="task scorer reply unreadable"):
            read_task_scores(bad, USER)


def test_the_composite_line_gives_every_part() -> None:
    composite = Composite(
        0.75, 0.8, 0.4, (2.0, 5.0), 0.3, {"timing": 1, "tasks": 2, "assertions": 4}, 0.7, []
    )
    assert (
        composite.line()
        == "timing 0.75, tasks 0.80, assertions 0.40 (2/5 by weight), penalty 0.30 → 0.26 < 0.70"
    )
    assert (
        timing_score([1.0, 3.0], 1.5) == 0.75
        and timing_score([0.5], 3) == 1.0
        and timing_score([], 3) is None
    )
