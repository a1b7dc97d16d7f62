"""The traffic layer and HTTP agents hold under bad data, faults and hostile servers (issue 27).

Cassettes that collide or escape their folder, cassettes that cannot be read or written,
connections cut mid-body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer
from test_traffic import AGENTS, RUN, point_at

pytest.importorskip("openai")


def _answer(body: dict[str, Any]) -> str:
    return "answer to " + str(body["messages"][-1]["content"])


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None, answer=_answer, max_requests=500) as chat:
        point_at(monkeypatch, chat.base_url)
        yield chat


@pytest.fixture
def agents(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.syspathinsert()
    return pytester


def _suite(question: str, case_id: str = "case_0") -> str:
    return (
        f"agent: traffic_agents:sync_agent\ncases:\n  - id: {case_id}\n    input: {question}\n"
        f"    expect: {{contains: ['answer to {question}']}}\n"
    )


def _json_suite(question: str) -> str:
    case = {"id": "case_0", "input": question, "expect": {"contains": [f"answer to {question}"]}}
    return json.dumps({"agent": "traffic_agents:sync_agent", "cases": [case]})


def _files(root: Path) -> set[str]:
    """The files under ``root`` but caches and the run's memory (journal, run store; SPEC §24)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".agent-eval" not in p.parts
    }


def test_item3_eval_files_differing_only_in_suffix_have_their_own_cassettes(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    (agents.path / "eval_x.yaml").write_text(_suite("Question yaml"))
    (agents.path / "eval_x.json").write_text(_json_suite("Question json"))
    agents.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=2)
    echo.stop()
    agents.runpytest(*RUN, "--agent-eval-replay").assert_outcomes(passed=2)
    cassettes = sorted(p for p in _files(agents.path) if p.startswith("cassettes/"))
    assert len(cassettes) == 2, cassettes


def test_item3_eval_files_of_one_name_in_two_folders_have_their_own_cassettes(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    agents.makeini("[pytest]\nagent_eval_cassettes = recorded\n")
    for folder in ("a", "b"):
        (agents.path / folder).mkdir()
        (agents.path / folder / "eval_smoke.yaml").write_text(_suite(f"Question {folder}"))
    agents.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=2)
    echo.stop()
    agents.runpytest(*RUN, "--agent-eval-replay").assert_outcomes(passed=2)
    assert len([p for p in _files(agents.path) if p.startswith("recorded/")]) == 2


@pytest.mark.parametrize(
    "ini", ["", "[pytest]\nagent_eval_cassettes = recorded\n"], ids=["beside", "ini"]
)
def test_item3_a_file_whose_stem_is_dot_dot_keeps_its_cassette_inside_the_cassette_folder(
    agents: pytest.Pytester, echo: ChatServer, ini: str
) -> None:
    if ini:
        agents.makeini(ini)
    folder = agents.path / "evals"
    folder.mkdir()
    (folder / "...yaml").write_text(
        _suite("Question dots", case_id="eval_victim")
    )  # its stem is ".."
    victim = _suite("Question victim")
    (agents.path / "eval_victim.yaml").write_text(victim)
    before = _files(agents.path)
    agents.runpytest(*RUN, "evals/...yaml", "--agent-eval-record").assert_outcomes(passed=1)
    added = _files(agents.path) - before
    where = "recorded/" if ini else "evals/cassettes/"
    assert len(added) == 1 and all(p.startswith(where) for p in added), added
    assert (agents.path / "eval_victim.yaml").read_text() == victim


def test_item3_a_cassette_of_the_old_shape_is_still_replayed(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    (agents.path / "eval_old.json").write_text(_json_suite("Question old"))
    agents.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=1)
    echo.stop()
    (recorded,) = (p for p in (agents.path / "cassettes").rglob("*.yaml") if p.is_file())
    old = agents.path / "cassettes" / "eval_old" / "case_0.yaml"
    if recorded != old:  # recorded in the new shape: move it where an earlier version wrote it
        old.parent.mkdir(parents=True, exist_ok=True)
        recorded.rename(old)
    agents.runpytest(*RUN, "--agent-eval-replay").assert_outcomes(passed=1)


def test_item16_a_cassette_that_cannot_be_read_errors_its_case_in_one_line(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    (agents.path / "eval_bad.yaml").write_text(_suite("Question bad"))
    agents.runpytest(*RUN, "--agent-eval-record").assert_outcomes(passed=1)
    (recorded,) = (p for p in (agents.path / "cassettes").rglob("*.yaml") if p.is_file())
    recorded.write_text("interactions: [\n")
    result = agents.runpytest(*RUN, "--agent-eval-replay")
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "Traceback" not in output and "cassette.py" not in output, output
    result.stdout.fnmatch_lines(
        ["*infrastructure error, not the agent's: *case_0.yaml: not a readable cassette*"]
    )


def test_item16_a_cassette_that_cannot_be_written_errors_its_case_in_one_line(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    agents.makeini("[pytest]\nagent_eval_cassettes = recorded\n")
    (agents.path / "recorded").write_text("a file where the cassette folder should be")
    (agents.path / "eval_bad.yaml").write_text(_suite("Question bad"))
    result = agents.runpytest(*RUN, "--agent-eval-record")
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "Traceback" not in output and "cassette.py" not in output, output
    result.stdout.fnmatch_lines(
        ["*infrastructure error, not the agent's: cassette *case_0.yaml not written: *"]
    )


@pytest.mark.parametrize("agent", ["sync_agent", "async_agent"])
def test_item15_a_timeout_while_waiting_on_retry_after_is_infrastructure(
    agents: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    with ChatServer(lambda prompt: None, failures=1000, retry_after="30") as chat:
        point_at(monkeypatch, chat.base_url)
        # 3 s: the agent's first call imports its HTTP client (the hook imports none), which takes
        # up to a second on a loaded machine; the retry's wait (30 s) is what the timeout ends
        suite = (
            f"agent: traffic_agents:{agent}\ncases:\n"
            "  - {id: c, input: hi, timeout: 3, expect: {contains: [x]}}\n"
        )
        (agents.path / "eval_wait.yaml").write_text(suite)
        result = agents.runpytest(*RUN, "--agent-eval-retries", "3", "--agent-eval-record")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*infrastructure error, not the agent's: agent did not answer within 3 s *"
            " while waiting for a retry of POST*"
        ]
    )


def test_item15_a_timeout_while_waiting_on_the_runs_rate_limit_is_infrastructure(
    agents: pytest.Pytester, echo: ChatServer
) -> None:
    suite = (  # 3 s: room for the agent's import of its HTTP client (see above)
        "agent: traffic_agents:async_agent\ncases:\n"
        "  - {id: c, input: hi, timeout: 3, expect: {contains: [x]}}\n"
    )
    (agents.path / "eval_wait.yaml").write_text(suite)
    result = agents.runpytest(
        *RUN, "--agent-eval-rate-limit", "1/h"
    )  # the agent's second request waits an hour
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*not the agent's: agent did not answer within 3 s * while waiting for the run's rate*"]
    )
