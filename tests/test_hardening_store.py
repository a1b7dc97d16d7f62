"""The run's rate-limit store holds under faults (issue 27, items 11 and 12).

The JSON file (one machine) shared by two pytest processes, damaged, or locked by a stopped
process; Redis (across machines) unreachable, with a wrong password, killed or frozen mid-run. The
store's failure is never the agent's, and never hangs the run silently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer
from test_traffic import AGENTS, evals_file, point_at, redis_url  # noqa: F401 (a fixture)

pytest.importorskip("openai")

RUN = ("-p", "no:randomly")
STATE = Path(".pytest_cache", "d", "agent_eval_limits", "pace_requests_5_per_1000ms.json")
"""Where a run with ``--agent-eval-rate-limit 5/s`` keeps its pace (the run's cache directory)."""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(traffic_agents=AGENTS)
    pytester.makeini("[pytest]\n")
    pytester.syspathinsert()
    return pytester


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    with ChatServer(lambda prompt: None, max_requests=500) as chat:
        point_at(monkeypatch, chat.base_url)
        yield chat


def busiest_window(times: list[float], length: float) -> int:
    """The most requests the server saw in any window of ``length`` seconds."""
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u < t + length) for i, t in enumerate(times))


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    return {
        k: v
        for k, v in result.parseoutcomes().items()
        if k in ("passed", "failed", "errors", "error")
    }


# -- item 11: the file store
# ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_item11_two_pytest_processes_sharing_the_file_store_never_exceed_the_limit(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pytest runs of one project share ``--agent-eval-rate-limit 5/s``: the server sees no 429.

    The runs are on one machine, with one cache directory. The server, a token bucket of 5 a second
    (as OpenAI's and Anthropic's limits are), answers no 429 — each run keeping its own budget would
    send 10 a second. Counted as a sliding window, a second sees at most one more: arrivals jitter
    by more than the 2% guard (a new connection's set-up), see docs/guide/traffic.md.
    """
    project.makefile(".yaml", eval_a=evals_file("sync_agent", cases=12).replace("case_", "a_"))
    project.makefile(".yaml", eval_b=evals_file("sync_agent", cases=12).replace("case_", "b_"))
    with ChatServer(lambda prompt: None, max_requests=100, rate=5) as chat:
        point_at(monkeypatch, chat.base_url)
        monkeypatch.setenv("PYTHONPATH", str(project.path))
        common = [sys.executable, "-m", "pytest", *RUN, "--agent-eval-concurrency", "12"]
        common += ["--agent-eval-rate-limit", "5/s", "--agent-eval-retries", "0"]
        runs = [
            subprocess.Popen([*common, name], cwd=project.path, stdout=subprocess.PIPE, text=True)
            for name in ("eval_a.yaml", "eval_b.yaml")
        ]
        outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert all("12 passed" in out for out in outputs), outputs
    assert chat.limited == 0
    assert len(chat.log) == 24
    assert busiest_window(chat.log, 1.0) <= 5 + 1


DAMAGED = {
    "garbage": b"\x00\xff\xfe not json at all",
    "truncated": b'{"tat": 1700000000.5, "step": 0.2',
    "a list": b"[1, 2, 3]",
    "a string": b'"pace"',
    "wrong types": b'{"tat": "soon", "step": null, "at": "yesterday"}',
    "nested": b'{"tat": {"a": 1}, "step": [0.2]}',
    "not finite": b'{"tat": Infinity, "step": NaN, "at": 1e999}',
}


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
def test_item11_a_damaged_store_file_is_reset_with_a_warning(
    project: pytest.Pytester, server: ChatServer, content: bytes
) -> None:
    state = project.path / STATE
    state.parent.mkdir(parents=True)
    state.write_bytes(content)
    project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=3))
    result = project.runpytest(*RUN, "--agent-eval-rate-limit", "5/s")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=3, warnings=1)
    result.stdout.fnmatch_lines(
        [f"*the run's rate-limit state *{STATE} was unreadable*: started afresh*"]
    )
    assert json.loads(state.read_text())["step"] > 0  # written anew, whole


def test_item11_a_directory_in_place_of_the_store_file_is_one_clear_error(
    project: pytest.Pytester, server: ChatServer
) -> None:
    (project.path / STATE).mkdir(parents=True)
    project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=2))
    result = project.runpytest(*RUN, "--agent-eval-rate-limit", "5/s")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*the run's rate-limit state *{STATE} is a directory*remove it*"])
    assert server.log == []


def test_item11_a_broken_store_of_the_default_pace_leaves_the_run_unpaced_with_a_warning(
    project: pytest.Pytester, server: ChatServer
) -> None:
    """With no rate-limit option the pace is on; its store failing is a warning, cases still run.

    The store fails with a directory in its place; every case still runs and is judged.
    """
    state = project.path / STATE.with_name("pace.json")
    state.mkdir(parents=True)
    project.makefile(".yaml", eval_paced=evals_file("sync_agent", cases=2))
    result = project.runpytest(*RUN)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        ["*pace.json is a directory, not a file: remove it; the run is not paced*"]
    )


LOCKER = """
import fcntl, os, signal, sys
handle = open(sys.argv[1], "a+")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"""


def _stopped_locker(path: Path) -> subprocess.Popen[str]:
    """A process that takes the store's lock and is stopped holding it (a pytest in Ctrl-Z)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    return locker


def _end(process: subprocess.Popen[Any]) -> None:
    process.send_signal(signal.SIGCONT)
    process.kill()
    process.wait(timeout=10)


def test_item11_a_lock_held_by_a_stopped_process_at_start_is_one_clear_error(
    project: pytest.Pytester, server: ChatServer
) -> None:
    locker = _stopped_locker(project.path / STATE)
    try:
        project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=2))
        result = project.runpytest_subprocess(*RUN, "--agent-eval-rate-limit", "5/s", timeout=60)
    finally:
        _end(locker)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*the run's rate-limit state *{STATE} is locked by another process*"]
    )
    assert "end that process" in result.stderr.str()
    assert server.log == []


def test_item11_a_lock_held_by_a_stopped_process_mid_run_makes_the_rest_infrastructure_errors(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is taken (its holder stopped) while the first case's request is answered.

    The cases after it end as errors naming the lock file, none as the agent's failure, and the run
    ends.
    """
    lockers: list[subprocess.Popen[str]] = []

    def answer(body: dict[str, Any]) -> str:
        if not lockers:
            lockers.append(_stopped_locker(project.path / STATE))
        return "I can answer that without tools."

    project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=4))
    with ChatServer(lambda prompt: None, answer=answer) as chat:
        point_at(monkeypatch, chat.base_url)
        try:
            result = project.runpytest_subprocess(
                *RUN,
                "--agent-eval-rate-limit",
                "5/s",
                "--agent-eval-report",
                "report.json",
                timeout=120,
            )
        finally:
            for locker in lockers:
                _end(locker)
    outcomes = _outcomes(result)
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) >= 3, result.stdout.str()
    cases = json.loads((project.path / "report.json").read_text())["cases"]
    for case in cases:
        if case["outcome"] == "error":
            assert case["error"].startswith("infrastructure error (not the agent's): ")
            assert f"{STATE} is locked by another process" in case["error"]


# -- item 12: Redis
# ------------------------------------------------------------------------------------------


def test_item12_an_unreachable_redis_is_one_clear_message_at_start(
    project: pytest.Pytester, server: ChatServer
) -> None:
    pytest.importorskip("redis")
    project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=2))
    url = "redis://:hunter2-secret@127.0.0.1:9/0"
    result = project.runpytest(
        *RUN, "--agent-eval-rate-limit", "5/s", "--agent-eval-rate-limit-url", url
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert "hunter2-secret" not in output
    result.stderr.fnmatch_lines(
        ["*the rate-limit store redis://<scrubbed>@127.0.0.1:9/0 cannot be reached*"]
    )
    assert len([line for line in result.stderr.lines if line.strip()]) <= 3
    assert server.log == []


@pytest.mark.slow
def test_item12_a_wrong_redis_password_is_one_clear_message_at_start(
    project: pytest.Pytester,
    server: ChatServer,
    redis_url: str,  # noqa: F811
) -> None:
    import redis

    redis.Redis.from_url(redis_url).config_set("requirepass", "right-password")
    wrong = redis_url.replace("redis://", "redis://:wrong-password@")
    project.makefile(".yaml", eval_limited=evals_file("sync_agent", cases=2))
    result = project.runpytest(
        *RUN, "--agent-eval-rate-limit", "5/s", "--agent-eval-rate-limit-url", wrong
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "INTERNALERROR" not in output
        and "Traceback" not in output
        and "wrong-password" not in output
    )
    result.stderr.fnmatch_lines(
        ["*the rate-limit store redis://<scrubbed>@127.0.0.1:*refused the password*"]
    )
    assert server.log == []


def _redis_pid(url: str) -> int:
    import redis

    return int(redis.Redis.from_url(url).info("server")["process_id"])


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["killed", "frozen"])
def test_item12_redis_failing_mid_run_makes_the_rest_infrastructure_errors(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    redis_url: str,  # noqa: F811
) -> None:
    """Redis is killed (or frozen: SIGSTOP) while the first case's request is answered.

    The run ends (within the store's timeouts), every case after it an error naming the store, none
    the agent's failure.
    """
    pid = _redis_pid(redis_url)
    done: list[bool] = []

    def answer(body: dict[str, Any]) -> str:
        if not done:
            done.append(True)
            os.kill(pid, signal.SIGKILL if fault == "killed" else signal.SIGSTOP)
        return "I can answer that without tools."

    project.makefile(".yaml", eval_limited=evals_file("async_agent", cases=5))
    args = [
        "--agent-eval-rate-limit",
        "50/s",
        "--agent-eval-rate-limit-url",
        redis_url,
        "--agent-eval-timeout",
        "30",
    ]
    with ChatServer(lambda prompt: None, answer=answer) as chat:
        point_at(monkeypatch, chat.base_url)
        try:
            result = project.runpytest_subprocess(
                *RUN,
                *args,
                "--agent-eval-concurrency",
                "2",
                "--agent-eval-report",
                "report.json",
                timeout=120,
            )
        finally:
            if fault == "frozen":
                os.kill(pid, signal.SIGCONT)
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    outcomes = _outcomes(result)
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) >= 4, output
    for case in json.loads((project.path / "report.json").read_text())["cases"]:
        if case["outcome"] == "error":
            assert case["error"].startswith("infrastructure error (not the agent's): "), case[
                "error"
            ]
            assert "the rate-limit store redis://127.0.0.1:" in case["error"], case["error"]
