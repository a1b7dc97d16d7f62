"""xdist workers on other machines (SPEC §18): no shared disk assumed, cassettes come back.

Nothing the controller writes to its own disk is assumed on a worker, cassettes recorded on a
worker come back to the controller, and a budget kept per machine is warned about.

Other machines are simulated: a worker handed a path that does not exist where it runs, and
(``remote_workers``) execnet socket servers on loopback, each in a working directory of its own
holding a copy of the project, as a checkout on another machine would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from openai_server import ChatServer
from remote_support import copy_project, socket_servers, tx_args
from report_support import USAGE_AGENT
from test_traffic import redis_url  # noqa: F401 (a fixture: a redis-server on loopback)

MISSING_CRASH_DIR = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    node.workerinput["agent_eval_crash_dir"] = "/nonexistent/agent-eval-workers-elsewhere"
"""


def test_a_worker_without_the_controllers_crash_folder_runs_its_cases(
    pytester: pytest.Pytester,
) -> None:
    """A remote worker without the controller's crash-log folder runs without the crash triage.

    The folder does not exist where the remote worker runs: the worker does not fail (it did:
    FileNotFoundError in pytest_configure, and the controller hung).
    """
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makeconftest(MISSING_CRASH_DIR)
    cases = "".join(f"  - {{id: ok{n}, input: hi, context: {{say: hello}}}}\n" for n in range(4))
    pytester.makefile(".yaml", eval_w=f"agent: usage_agent:run\ncases:\n{cases}")
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "1",
        "--agent-eval-concurrency",
        "2",
        "--agent-eval-report=r.json",
        timeout=90,
    )
    result.assert_outcomes(passed=4)
    report = json.loads((pytester.path / "r.json").read_text())
    assert sorted(c["nodeid"] for c in report["cases"]) == [f"eval_w.yaml::ok{n}" for n in range(4)]
    assert not list(Path("/nonexistent").glob("*"))


# -- two socket-server workers, each in its own checkout: record, then replay
# ---------------------------------

REMOTE_AGENTS = """
import openai

MODEL = "loopback-model"


def sync_agent(query):
    client = openai.OpenAI(max_retries=0)
    reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content


async def async_agent(query):
    async with openai.AsyncOpenAI(max_retries=0) as client:
        reply = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", \
"content": query}])
    return reply.choices[0].message.content
"""


def point_at(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-secret-key")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def remote_evals(agent: str, cases: int, repeat: int = 1) -> str:
    lines = [f"agent: remote_agents:{agent}", "cases:"]
    for n in range(cases):
        lines += [f"  - id: case_{n}", f"    input: Question {n}", f"    repeat: {repeat}"]
        lines += ["    expect:", "      contains: [without tools]"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def remote_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytest.importorskip("openai")
    pytest.importorskip("execnet")
    pytester.makepyfile(remote_agents=REMOTE_AGENTS)
    pytester.makeini("[pytest]\n")
    pytester.makefile(".yaml", eval_async=remote_evals("async_agent", 6, repeat=2))
    pytester.makefile(".yaml", eval_sync=remote_evals("sync_agent", 4))
    return pytester


def cassettes_in(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.glob("cassettes/**/*.yaml"))
    }


def verdicts(result: pytest.RunResult) -> dict[str, tuple[str, str]]:
    """``{node id: (worker, outcome)}`` from ``-v`` lines.

    Such as ``[gw1] [ 50%] PASSED eval_sync.yaml::case_0``.
    """
    found = {}
    for line in result.outlines:
        match = re.match(r"\[(gw\d+)\] \[\s*\d+%\] (PASSED|FAILED|ERROR) (\S+)", line)
        if match:
            found[match.group(3)] = (match.group(1), match.group(2))
    return found


ALL_CASES = sorted(
    [
        *(f"eval_async.yaml::case_{n}" for n in range(6)),
        *(f"eval_sync.yaml::case_{n}" for n in range(4)),
    ]
)


def test_two_socket_workers_in_their_own_checkouts_record_then_replay(
    remote_project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The issue's done-when: record on two remote workers, replay with the LLM stopped.

    Two execnet socket-server workers on loopback, each in a working directory holding a copy of the
    project, at concurrency 4. Recording against the loopback LLM writes every cassette on the
    controller's project (none on the machines); with those cassettes in each checkout, replay with
    the LLM stopped passes every case, in one JSON report on the controller. A checkout without the
    cassettes fails its cases, naming the missing cassette.
    """
    project = remote_project.path
    machines = [
        copy_project(project, tmp_path_factory.mktemp("machine") / "checkout") for _ in range(2)
    ]
    run = ("-p", "no:cacheprovider", "-v", "--agent-eval-concurrency", "4")
    with ChatServer(lambda prompt: None, max_requests=100) as chat:
        point_at(monkeypatch, chat.base_url)
        with socket_servers(machines, dict(os.environ)) as servers:
            recorded = remote_project.runpytest(
                *run, *tx_args(servers), "--agent-eval-record", "--agent-eval-report=r.json"
            )
        recorded.assert_outcomes(passed=10)
        assert len(chat.requests) == 6 * 2 + 4
    assert {worker for worker, _ in verdicts(recorded).values()} == {
        "gw0",
        "gw1",
    }  # both machines ran cases
    cassettes = cassettes_in(project)
    assert sorted(cassettes) == sorted(
        f"cassettes/{n.replace('.yaml::', '/')}.yaml" for n in ALL_CASES
    )
    assert all(
        cassettes_in(machine) == {} for machine in machines
    )  # written once, by the controller
    async_case = yaml.safe_load(cassettes["cassettes/eval_async/case_0.yaml"])
    assert [i["trial"] for i in async_case["interactions"]] == [1, 2]
    assert all("sk-loopback" not in text for text in cassettes.values())

    for machine in machines:  # a commit and a checkout on each machine
        shutil.copytree(project / "cassettes", machine / "cassettes")
    with socket_servers(machines, dict(os.environ)) as servers:  # the LLM is stopped: replay only
        replayed = remote_project.runpytest(
            *run, *tx_args(servers), "--agent-eval-replay", "--agent-eval-report=r.json"
        )
    replayed.assert_outcomes(passed=10)
    report = json.loads((project / "r.json").read_text())
    assert sorted(c["nodeid"] for c in report["cases"]) == ALL_CASES
    assert {c["outcome"] for c in report["cases"]} == {"passed"}
    assert cassettes_in(project) == cassettes  # replay writes nothing

    shutil.rmtree(machines[1] / "cassettes")  # the second machine's checkout has no cassettes
    with socket_servers(machines, dict(os.environ)) as servers:
        missing = remote_project.runpytest(
            *run, *tx_args(servers), "--agent-eval-replay", "--agent-eval-report=r.json"
        )
    outcomes = verdicts(missing)
    assert sorted(outcomes) == ALL_CASES
    assert {outcome for worker, outcome in outcomes.values() if worker == "gw0"} <= {"PASSED"}
    on_second = [nodeid for nodeid, (worker, _) in outcomes.items() if worker == "gw1"]
    assert on_second and all(outcomes[nodeid][1] == "ERROR" for nodeid in on_second)
    for nodeid in on_second:
        cassette = f"cassettes/{nodeid.replace('.yaml::', '/')}.yaml"
        missing.stdout.fnmatch_lines(
            [f"*case {nodeid.rpartition(':')[2]}: infrastructure error*no cassette {cassette};*"]
        )
    report = json.loads((project / "r.json").read_text())
    assert sorted(c["nodeid"] for c in report["cases"]) == ALL_CASES


@pytest.mark.parametrize("folder", ["", "recorded"], ids=["beside-each-file", "ini-folder"])
def test_local_workers_record_the_same_cassettes_as_a_serial_run(
    remote_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    """Under ``-n`` the controller writes what the workers recorded, as serially.

    The same files in the same place as serially (beside each eval file, or ini
    ``agent_eval_cassettes``); ``=new`` keeps what is recorded.
    """
    if folder:
        remote_project.makeini(f"[pytest]\nagent_eval_cassettes = {folder}\n")
    root = remote_project.path / folder if folder else remote_project.path
    run = ("-p", "no:cacheprovider", "--agent-eval-concurrency", "2")
    with ChatServer(lambda prompt: None, max_requests=100) as chat:
        point_at(monkeypatch, chat.base_url)
        remote_project.runpytest(*run, "--agent-eval-record").assert_outcomes(passed=10)
        serial = cassettes_in(root) if not folder else _texts(root)
        shutil.rmtree(root if folder else root / "cassettes")
        remote_project.runpytest(*run, "-n", "2", "--agent-eval-record").assert_outcomes(passed=10)
        xdist = cassettes_in(root) if not folder else _texts(root)
        (root / ("eval_sync/case_0.yaml" if folder else "cassettes/eval_sync/case_0.yaml")).unlink()
        requests = len(chat.requests)
        remote_project.runpytest(*run, "-n", "2", "--agent-eval-record=new").assert_outcomes(
            passed=10
        )
        assert len(chat.requests) == requests + 1  # only the missing one went to the LLM
        again = cassettes_in(root) if not folder else _texts(root)
    assert (
        len(serial) == 10
        and _no_host(xdist) == _no_host(serial)
        and _no_host(again) == _no_host(serial)
    )


def _texts(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.yaml"))}


def _no_host(texts: dict[str, str]) -> dict[str, str]:
    """The cassettes without the answers' ids, which count the requests in an order that varies."""
    return {k: re.sub(r"chatcmpl-\d+", "", v) for k, v in texts.items()}


ESCAPING_CASSETTE = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_logreport(report):
    sent = getattr(report, "agent_eval_cassette", None)
    if sent is not None and report.nodeid.endswith("case_0"):
        sent["path"] = "../../escaped.yaml"  # what a worker must not make the controller write
    return (yield)
"""


def test_a_cassette_sent_outside_the_cassette_folder_is_not_written(
    remote_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller writes a worker's cassette only inside its cassette folder.

    A path that leaves it is named on the terminal and not written; the other cassettes are.
    """
    remote_project.makeconftest(ESCAPING_CASSETTE)
    with ChatServer(lambda prompt: None, max_requests=100) as chat:
        point_at(monkeypatch, chat.base_url)
        result = remote_project.runpytest(
            "-p", "no:cacheprovider", "-n", "1", "--agent-eval-record"
        )
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(
        [
            "*eval_*.yaml::case_0: its worker sent a cassette outside the cassette "
            "folder: ../../escaped.yaml"
        ]
    )
    assert not list(remote_project.path.parent.rglob("escaped.yaml"))
    assert len(cassettes_in(remote_project.path)) == 8  # each file's case_0 is left out


# -- a budget kept per machine
# --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "warned"),
    [
        (
            ["--agent-eval-rate-limit", "100/min"],
            "--agent-eval-rate-limit 100/min without a shared store while *",
        ),
        (
            ["--agent-eval-token-limit", "9000/min"],
            "--agent-eval-token-limit 9000/min without a shared store while *",
        ),
        ([], "the run's pace (--agent-eval-pace, on by default) has no shared store while *"),
        (["--agent-eval-rate-limit", "100/min", "--agent-eval-rate-limit-url", "REDIS"], None),
        (["--agent-eval-pace", "off"], None),
    ],
    ids=["rate-limit", "token-limit", "default-pace", "redis", "pace-off"],
)
def test_a_pace_without_a_shared_store_is_warned_about_while_workers_are_remote(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
    options: list[str],
    warned: str | None,
) -> None:
    """Each machine keeps its own file store: a budget without Redis is spent once per machine.

    One warning names the option and what to do; none with Redis or with the pace off.
    """
    pytest.importorskip("execnet")
    if "REDIS" in options:
        options = [request.getfixturevalue("redis_url") if o == "REDIS" else o for o in options]
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makeini("[pytest]\n")
    pytester.makefile(
        ".yaml",
        eval_w="agent: usage_agent:run\ncases:\n  - {id: ok, input: hi, context: {say: hi}}\n",
    )
    machine = copy_project(pytester.path, tmp_path_factory.mktemp("machine") / "checkout")
    with socket_servers([machine], dict(os.environ)) as servers:
        result = pytester.runpytest("-p", "no:cacheprovider", *tx_args(servers), *options)
    result.assert_outcomes(passed=1)
    lines = [line for line in result.outlines if "shared store while" in line]
    if warned is None:
        assert lines == []
        return
    assert len(lines) == 1
    result.stdout.fnmatch_lines(
        [
            f"*PytestConfigWarning: {warned}workers run on other machines (--tx "
            "socket=127.0.0.1:*//chdir=*): each machine *; give --agent-eval-rate-limit-url "
            "redis://HOST:6379/0 (a Redis server every machine reaches, extra "
            "'redis') to share it*"
        ]
    )


def test_local_workers_share_the_machines_store_without_a_warning(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.makefile(
        ".yaml",
        eval_w="agent: usage_agent:run\ncases:\n  - {id: ok, input: hi, context: {say: hi}}\n",
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-rate-limit", "100/min"
    )
    result.assert_outcomes(passed=1)
    assert "shared store" not in result.stdout.str()
