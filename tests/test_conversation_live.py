"""A native simulated-user conversation through the default ``agent_eval_llm`` (SPEC §9).

It goes through the real ``openai`` client, against a loopback OpenAI-compatible server that plays
the user and the scorer.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from openai_server import ChatServer

pytest.importorskip("openai")

AGENT = """
import time

def run(query, context):
    time.sleep(0.02)
    if "A100" in query:
        return "Order A100 has shipped."
    if "order" in query.lower():
        return "Sure, what is your order number?"
    return "Hi! How can I help?"

def never_asks(query, context):
    return "Hi! How can I help?"
"""

CASE = """
  - id: {id}
    simulated_user:
      persona: {{name: Ann, voice: terse}}
      tasks:
        - {{task: Ask where your order is, acceptance_criteria: the agent says where the order is}}
      facts: ["order number: A100"]
      signoff: Bye now{max_turns}
    score: {{aspirational_latency_s: 5}}
"""


def _cases(agent: str, *specs: tuple[str, int | None]) -> str:
    return f"agent: {agent}\ncases:\n" + "".join(
        CASE.format(id=i, max_turns=f"\n      max_turns: {m}" if m else "") for i, m in specs
    )


class Player:
    """The loopback LLM: the simulated user (tasks in order, facts only when asked), the scorer."""

    TASK = re.compile(r"^\d+\. \[\w+\] (.*)$", re.M)

    def __init__(self) -> None:
        self.replies: list[tuple[list[dict[str, Any]], str]] = []

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        reply = self._score(messages[-1]["content"]) if len(messages) == 1 else self._user(messages)
        self.replies.append((messages, reply))
        return reply

    def _score(self, prompt: str) -> str:
        head, transcript = prompt.split("Conversation:", 1)
        tasks = re.findall(r"^\d+\. \[\w+\] (.*?) \(acceptance criteria:", head, re.M)
        score = 1.0 if "has shipped" in transcript else 0.2
        return json.dumps({"tone": 0.8, "tasks": [{"scored": t, "score": score} for t in tasks]})

    def _user(self, messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"]
        tasks = self.TASK.findall(system)
        facts = re.findall(r"^- (.*)$", system, re.M)
        signoff = re.search(r'contains exactly: "(.*)"', system).group(1)  # type: ignore[union-attr]
        mine = [m["content"] for m in messages[1:] if m["role"] == "assistant"]
        agent_said = messages[-1]["content"] if messages[-1]["role"] == "user" else ""
        for fact in facts:
            topic = fact.split(":")[0].strip().lower()
            if "?" in agent_said and topic in agent_said.lower() and fact not in mine:
                return fact
        pending = [t for t in tasks if t not in mine]
        return pending[0] if pending else f"Thanks. {signoff}"


@pytest.fixture
def player(monkeypatch: pytest.MonkeyPatch) -> Any:
    play = Player()
    with ChatServer(lambda prompt: None, answer=play, max_requests=400) as server:
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "loopback-model")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        play.server = server
        yield play


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    return result


def test_the_fact_is_revealed_only_after_the_agent_asks_for_it(
    pytester: pytest.Pytester, player: Player
) -> None:
    pytester.makepyfile(support=AGENT)
    pytester.syspathinsert()
    pytester.makefile(
        ".yaml",
        eval_asks=_cases("support:run", ("asks", None)),
        eval_never=_cases("support:never_asks", ("never_asks", None)),
    )
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=1, failed=1)
    # the user's reply that told the fact came right after the agent's question about it, and only
    # in that case
    told = [
        (msgs[-1]["content"], reply)
        for msgs, reply in player.replies
        if reply == "order number: A100"
    ]
    assert told == [("Sure, what is your order number?", "order number: A100")]
    # the model, the temperature and the response format reached the server through the real client
    bodies = player.server.requests
    assert {b["model"] for b in bodies} == {"loopback-model"}
    assert {b.get("temperature") for b in bodies if b["messages"][0]["role"] == "system"} == {0.5}
    assert all(
        b.get("response_format") == {"type": "json_object"}
        for b in bodies
        if len(b["messages"]) == 1
    )
    # -v: the failing conversation's transcript, each message with its latency; the fact was never
    # told there
    result.stdout.fnmatch_lines(
        [
            "case never_asks failed: timing 1.00, tasks 0.20, penalty 0.00 → 0.47 < 0.70",
            "*Captured transcript call*",
            " 1. user (0.000 s): Hello",
            " 2. assistant (0.0* s): Hi! How can I help?",
            " 3. user (0.* s): Ask where your order is",
            " 4. assistant (0.0* s): Hi! How can I help?",
            " 5. user (0.* s): Thanks. Bye now",
        ]
    )
    assert "A100" not in result.stdout.str().split("never_asks failed")[1]


def test_max_turns_aborts_the_conversation_and_it_is_still_scored(
    pytester: pytest.Pytester, player: Player
) -> None:
    pytester.makepyfile(support=AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_chat=_cases("support:run", ("short", 4)))
    result = _run(pytester, "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "case short failed: timing 1.00, tasks 0.20, penalty 0.00 → 0.47 < 0.70 (aborted at "
            "max_turns: 4 messages)",
            "*✗ task 1: Ask where your order is: scored 0.20 (score 0.20)",
        ]
    )
    transcript = result.stdout.str().split("Captured transcript call")[1]
    assert re.findall(r"^\s+(\d+)\. ", transcript, re.M) == ["1", "2", "3", "4"]


def test_conversations_at_concurrency_4_end_as_at_concurrency_1(
    pytester: pytest.Pytester, player: Player
) -> None:
    pytester.makepyfile(support=AGENT)
    pytester.syspathinsert()
    specs = [(f"c{n}", 4 if n % 3 == 0 else None) for n in range(8)]
    pytester.makefile(
        ".yaml",
        eval_asks=_cases("support:run", *[s for n, s in enumerate(specs) if n % 2]),
        eval_never=_cases("support:never_asks", *[s for n, s in enumerate(specs) if not n % 2]),
    )
    outcomes = []
    for concurrency in ("1", "4"):
        xml = pytester.path / f"junit-{concurrency}.xml"
        _run(pytester, f"--agent-eval-concurrency={concurrency}", f"--junitxml={xml}")
        cases = ET.parse(xml).getroot().iter("testcase")
        outcomes.append(
            {
                c.get("name"): (
                    "failed" if c.find("failure") is not None else "passed",
                    next(p.get("value") for p in c.iter("property") if p.get("name") == "score"),
                )
                for c in cases
            }
        )
    assert outcomes[0] == outcomes[1]
    assert {name: outcome for name, (outcome, _) in outcomes[0].items()} == {
        f"c{n}": "passed" if n % 2 and n % 3 else "failed" for n in range(8)
    }


def test_a_recorded_conversation_replays_with_the_server_stopped(
    pytester: pytest.Pytester, player: Player, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay covers the simulated user's and the scorer's requests (SPEC §17).

    No prompt carries run-dependent text such as the agent's response times, which differ here
    between the recording and the replay.
    """
    pytester.makepyfile(
        support=AGENT.replace("time.sleep(0.02)", "time.sleep(float(os.environ['AGENT_DELAY_S']))")
    )
    pytester.syspathinsert()
    (pytester.path / "support.py").write_text(
        "import os\n" + (pytester.path / "support.py").read_text()
    )
    pytester.makefile(
        ".yaml",
        eval_asks=_cases("support:run", ("asks", None)),
        eval_never=_cases("support:never_asks", ("never_asks", 4)),
    )

    def seen(report: str) -> dict[str, Any]:
        cases = json.loads((pytester.path / report).read_text())["cases"]
        return {
            c["case_id"]: (c["outcome"], c["score"], c["conversation"], c["tokens"]) for c in cases
        }

    monkeypatch.setenv("AGENT_DELAY_S", "0.011")
    _run(pytester, "--agent-eval-record", "--agent-eval-report", "recorded.json").assert_outcomes(
        passed=1, failed=1
    )
    asked = len(player.server.requests)
    player.server.stop()  # nothing answers on its port any more
    monkeypatch.setenv("AGENT_DELAY_S", "0.057")
    replayed = _run(pytester, "--agent-eval-replay", "--agent-eval-report", "replayed.json")
    replayed.assert_outcomes(passed=1, failed=1)
    assert len(player.server.requests) == asked
    assert seen("replayed.json") == seen("recorded.json")
    outcomes = {
        case: (outcome, score is not None)
        for case, (outcome, score, *_) in seen("replayed.json").items()
    }
    assert outcomes == {"asks": ("passed", True), "never_asks": ("failed", True)}
