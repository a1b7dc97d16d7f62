"""A worker (or machine) that dies (SPEC §18): every case it had not finished is named as not run.

The reports name them: the JSON report's ``not_run`` (``{nodeid, file, line, reason}``), the HTML
page, the markdown and the terminal; the cases that finished plus those not run add up to the cases
collected.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from remote_support import copy_project, socket_servers, tx_args
from report_support import USAGE_AGENT


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _adds_up(report: dict[str, Any], collected: set[str]) -> dict[str, dict[str, Any]]:
    """The not-run entries by node id, checked apart from the finished cases and, with them, all.

    Together they are every case collected.
    """
    not_run = {entry["nodeid"]: entry for entry in report["not_run"]}
    assert len(not_run) == len(report["not_run"])  # each case once
    finished = {case["nodeid"] for case in report["cases"]} - set(not_run)
    assert finished | set(not_run) == collected and not finished & set(not_run)
    for entry in report["not_run"]:
        assert set(entry) == {"nodeid", "file", "line", "reason"}
        assert entry["file"] == entry["nodeid"].split("::")[0] and entry["reason"]
    return not_run


def test_a_worker_that_dies_names_its_case_as_not_run(pytester: pytest.Pytester) -> None:
    """An agent ends its worker (``os._exit``): xdist starts another and the run goes on.

    The case is an ``error`` in ``cases`` and, as it did not finish, in ``not_run``, with its line
    and the worker named.
    """
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    cases = "".join(f"  - {{id: ok{n}, input: hi, context: {{say: hello}}}}\n" for n in range(4))
    pytester.makefile(
        ".yaml",
        eval_w="agent: usage_agent:run\ncases:\n"
        f"{cases}  - {{id: dies, input: hi, context: {{crash: true}}}}\n",
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-n", "2", "--agent-eval-report", "r.json",
        "--agent-eval-markdown", "r.md", "--agent-eval-html", "r.html",
    )  # fmt: skip
    result.assert_outcomes(passed=4, failed=1)
    report = _load(pytester.path / "r.json")
    not_run = _adds_up(report, {*(f"eval_w.yaml::ok{n}" for n in range(4)), "eval_w.yaml::dies"})
    assert sorted(not_run) == ["eval_w.yaml::dies"]
    entry = not_run["eval_w.yaml::dies"]
    assert entry["line"] == 7
    assert (
        entry["reason"].startswith("the worker gw")
        and "died while it ran the case" in entry["reason"]
    )
    assert (
        next(c for c in report["cases"] if c["nodeid"] == "eval_w.yaml::dies")["outcome"] == "error"
    )
    result.stdout.fnmatch_lines(
        ["*agent eval summary*", "not run: 1 of 5 eval cases: eval_w.yaml::dies (the worker gw*"]
    )
    markdown = (pytester.path / "r.md").read_text()
    assert (
        "**Not run:** 1 of 5 eval cases did not finish: `eval_w.yaml::dies` (the worker gw"
        in markdown
    )
    html = (pytester.path / "r.html").read_text()
    assert (
        'id="not-run"' in html
        and "eval_w.yaml::dies" in html.split('id="not-run"')[1].split("</section>")[0]
    )


DYING_AGENT = '''
import os, pathlib, time

MARKS = pathlib.Path(os.environ["AGENT_EVAL_MARKS"])


def run(query, context):
    """`hold`: note the case in flight (with this process's id), then wait for the release \
(at most 20 s)."""
    if context.get("hold"):
        (MARKS / f"{context['hold']}.{os.getpid()}").write_text("")
        end = time.monotonic() + 20
        while time.monotonic() < end and not (MARKS / "release").exists():
            time.sleep(0.05)
    return "answer"
'''


def test_a_machine_that_dies_mid_run_leaves_every_case_it_had_named(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A socket-server worker killed with cases in flight: the reports name every unfinished case.

    Two socket-server workers at concurrency 4; one server process is killed while its cases are in
    flight, as a machine that goes away. xdist cannot replace it and ends the run: the reports name
    every case that did not finish, and the finished ones plus those add up to the cases collected.
    """
    pytest.importorskip("execnet")
    marks = tmp_path_factory.mktemp("marks")
    pytester.makepyfile(dying_agent=DYING_AGENT)
    pytester.makeini("[pytest]\n")
    cases = "".join(
        f"  - {{id: c{n:02}, input: hi, context: {{hold: c{n:02}}}}}\n" for n in range(16)
    )
    pytester.makefile(".yaml", eval_hold=f"agent: dying_agent:run\ncases:\n{cases}")
    collected = {f"eval_hold.yaml::c{n:02}" for n in range(16)}
    machines = [
        copy_project(pytester.path, tmp_path_factory.mktemp("machine") / "checkout")
        for _ in range(2)
    ]
    env = {**os.environ, "AGENT_EVAL_MARKS": str(marks)}
    with socket_servers(machines, env) as servers:
        args = [*tx_args(servers), "--agent-eval-concurrency", "4", "-p", "no:cacheprovider"]
        args += [
            "--agent-eval-report=r.json",
            "--agent-eval-markdown=r.md",
            "--agent-eval-html=r.html",
        ]
        controller = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            doomed = servers[1].process.pid
            deadline = time.monotonic() + 40
            while not list(marks.glob(f"*.{doomed}")) and time.monotonic() < deadline:
                time.sleep(0.05)
            in_flight = {
                f"eval_hold.yaml::{p.name.split('.')[0]}" for p in marks.glob(f"*.{doomed}")
            }
            assert in_flight, "no case ever ran on the second machine"
            servers[1].kill()  # the machine is gone, with the cases in flight on it
            (marks / "release").write_text("")  # the other machine's cases finish
            output, _ = controller.communicate(timeout=60)
        finally:
            if controller.poll() is None:
                controller.send_signal(signal.SIGKILL)
                controller.wait()
    report = _load(pytester.path / "r.json")
    not_run = _adds_up(report, collected)
    assert in_flight <= set(not_run), output
    for nodeid in in_flight:
        assert "gw1" in not_run[nodeid]["reason"], not_run[nodeid]
        assert not_run[nodeid]["line"] == 3 + int(nodeid[-2:])
    assert report["run"]["finished"] is False
    first = report["not_run"][0]["nodeid"]
    assert f"not run: {len(not_run)} of 16 eval cases: {first} (" in output
    markdown = (pytester.path / "r.md").read_text()
    assert f"of 16 eval cases finished; these did not: `{first}`" in markdown
    assert all(f"`{nodeid}`" in markdown for nodeid in not_run)
    page = (pytester.path / "r.html").read_text().split('id="not-run"')[1].split("</section>")[0]
    assert all(nodeid in page for nodeid in not_run)

    # the recovery: resume runs exactly the cases not run (here on this machine) and writes one
    # whole report
    resumed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA",
         "--agent-eval-resume=r.json", "--agent-eval-report=r.json"],
        cwd=pytester.path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    ran = {line.split()[1] for line in resumed.stdout.splitlines() if line.startswith("PASSED ")}
    assert resumed.returncode == 0 and ran == set(not_run), resumed.stdout
    whole = _load(pytester.path / "r.json")
    assert {c["nodeid"]: c["outcome"] for c in whole["cases"]} == dict.fromkeys(
        sorted(collected), "passed"
    )
    assert whole["not_run"] == [] and whole["run"]["finished"] is True
