"""`agent-eval init [DIR]` (SPEC §21): a starting point that passes under `pytest DIR`, no API key.

Run as a user runs it — the command, then pytest, each in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

AGENT_EVAL = str(
    Path(sys.executable).with_name("agent-eval")
)  # the command of the venv that runs the tests
PYTEST = f"{sys.executable} -m pytest -p no:cacheprovider"
WRITTEN = [
    "evals/eval_example.yaml",
    "evals/agent-eval.schema.json",
    "evals/conftest.py",
    "pytest.ini",
    ".github/workflows/agent-evals.yml",
]


def init(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENT_EVAL, "init", *args], cwd=cwd, capture_output=True, text=True)


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def test_init_then_pytest_passes(tmp_path: Path) -> None:
    done = init(tmp_path, "project")
    assert done.returncode == 0, done.stderr
    project = tmp_path / "project"
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(
        WRITTEN
    )
    for name in WRITTEN:
        assert f"wrote {Path('project') / name}" in done.stdout
    ran = pytest_run(tmp_path, "project", "-v")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "3 passed" in ran.stdout
    assert "evals/eval_example.yaml::order_status PASSED" in ran.stdout


def test_the_eval_file_names_its_schema_and_is_valid(tmp_path: Path) -> None:
    assert init(tmp_path, ".").returncode == 0
    eval_file = tmp_path / "evals" / "eval_example.yaml"
    first = eval_file.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=agent-eval.schema.json"
    schema = json.loads((tmp_path / "evals" / "agent-eval.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(yaml.safe_load(eval_file.read_text(encoding="utf-8")), schema)
    checked = subprocess.run(
        [AGENT_EVAL, "validate", "evals"], cwd=tmp_path, capture_output=True, text=True
    )
    assert checked.stdout.splitlines()[0] == "evals/eval_example.yaml: native, 3 cases: ok"


def test_the_workflow_replays_on_pull_requests_and_records_nightly(tmp_path: Path) -> None:
    assert init(tmp_path, ".").returncode == 0
    workflow = yaml.safe_load(
        (tmp_path / ".github" / "workflows" / "agent-evals.yml").read_text(encoding="utf-8")
    )
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers and triggers["schedule"][0]["cron"]
    replay = " ".join(step.get("run", "") for step in workflow["jobs"]["replay"]["steps"])
    assert (
        "--agent-eval-replay" in replay
        and "agent-eval comment report.json $base > comment.md" in replay
    )
    assert "<!-- agent-eval -->" in replay  # the sticky comment is found by its marker
    uploads = [
        s for s in workflow["jobs"]["replay"]["steps"] if "upload-artifact" in s.get("uses", "")
    ]
    assert (
        uploads
        and "report.json" in uploads[0]["with"]["path"]
        and "report.html" in uploads[0]["with"]["path"]
    )
    record = workflow["jobs"]["record"]
    assert "schedule" in record["if"]
    assert any("--agent-eval-record" in step.get("run", "") for step in record["steps"])
    assert any("secrets." in str(step.get("env", "")) for step in record["steps"])
    # the pull-request command itself passes on the new project: a case that sends no request needs
    # no cassette
    command = next(
        s["run"] for s in workflow["jobs"]["replay"]["steps"] if s.get("name") == "evals (replayed)"
    )
    # under GitHub Actions: the summary goes to $GITHUB_STEP_SUMMARY without an option
    actions = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    ran = subprocess.run(
        ["bash", "-c", command.replace("pytest", PYTEST, 1)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=actions,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (tmp_path / "report.json").is_file() and (tmp_path / "report.html").is_file()
    assert "## agent eval summary" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    commented = subprocess.run(
        [AGENT_EVAL, "comment", "report.json"], cwd=tmp_path, capture_output=True, text=True
    )
    assert commented.returncode == 0 and commented.stdout.startswith(
        "<!-- agent-eval -->\n### ✅ agent eval: "
    )


def test_existing_files_are_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "conftest.py").write_text("# mine\n")
    done = init(tmp_path)
    assert done.returncode == 1
    assert "agent-eval init: evals/conftest.py already exists" in done.stderr
    assert "nothing was written" in done.stderr
    assert (tmp_path / "evals" / "conftest.py").read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["conftest.py", "evals"]


def test_a_project_that_configures_pytest_gets_the_ini_block_to_add(tmp_path: Path) -> None:
    pyproject = '[project]\nname = "mine"\n\n[tool.pytest.ini_options]\naddopts = "-ra"\n'
    (tmp_path / "pyproject.toml").write_text(pyproject)
    done = init(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pyproject.toml").read_text() == pyproject
    assert not (
        tmp_path / "pytest.ini"
    ).exists()  # it would take over from the project's own configuration
    assert (
        "pytest is configured in pyproject.toml: add these lines under [tool.pytest.ini_options]"
        in done.stdout
    )
    assert 'agent_eval_timeout = "60"' in done.stdout
    ran = pytest_run(tmp_path)
    assert ran.returncode == 0 and "3 passed" in ran.stdout, ran.stdout + ran.stderr
