"""``agent-eval init [DIR]``: write a starting project that passes under ``pytest DIR``.

The project is an eval file with its schema, a ``conftest.py`` with an offline ``agent`` fixture,
the ini block and a GitHub Actions workflow.

Plain Python: never imports pytest. Existing files are never overwritten.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVAL_FILE = "evals/eval_example.yaml"
SCHEMA_FILE = "evals/agent-eval.schema.json"
CONFTEST = "evals/conftest.py"
INI_FILE = "pytest.ini"
WORKFLOW = ".github/workflows/agent-evals.yml"

DOCS = "https://github.com/pytest-agent-evalset/pytest-agent-evalset/blob/main/docs"

EVAL_TEXT = """\
# yaml-language-server: $schema=agent-eval.schema.json
# Eval cases of your agent: each case is one pytest item (`pytest evals/`, `pytest evals/ -k order`).
# Editors with the YAML language server complete and check this file against agent-eval.schema.json;
# after adding checks of your own, regenerate it: agent-eval schema > evals/agent-eval.schema.json
# The format: {docs}/guide/writing-cases.md
tags: [example]
defaults:
  timeout: 30                       # seconds per agent call
cases:
  - id: greeting
    input: Hello!
    expect:
      contains: [help]
      tools_not_called: [lookup_order]
  - id: order_status
    description: An order's status comes from the lookup tool
    input: Where is my order 1234?
    expect:
      tool_sequence: [lookup_order]
      tool_args: {{lookup_order: {{order_id: "1234"}}}}
      contains: [shipped]
      outcome: success
  - id: unknown_order
    input: What about order 9999?
    expect:
      tools_called: [lookup_order]
      outcome: failure              # the answer reads as a failure ("not found")
"""  # noqa: E501, RUF100 - a file's text for the user, kept as it is

CONFTEST_TEXT = '''\
"""The agent the eval cases in this folder run (written by `agent-eval init`).

`support_agent` is a stand-in, deterministic and offline, so the cases pass with no API key. Return your own
agent from the `agent` fixture instead: any callable `(query, context) -> str | dict`, an `async def`, an object
with `ainvoke`/`invoke`/`run`, or an agent as its framework builds it (OpenAI Agents SDK, pydantic-ai, LangGraph).
See {docs}/guide/agents.md
"""

from __future__ import annotations

import re
from typing import Any

import pytest

ORDERS = {{"1234": "shipped on Monday", "5678": "being packed"}}


def lookup_order(order_id: str) -> str:
    """A tool: the status of an order."""
    return ORDERS.get(order_id, "not found")


def support_agent(query: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Looks an order up when the query names one; greets otherwise. Returns the answer and the tools called."""
    number = re.search(r"\\b\\d{{4}}\\b", query)
    if number is None:
        return {{"output": "Hello! How can I help you with your order?", "tools_called": []}}
    order_id = number.group()
    status = lookup_order(order_id)
    answer = f"Order {{order_id}} was not found." if status == "not found" else f"Found order {{order_id}}: {{status}}."
    return {{"output": answer, "tools_called": [{{"name": "lookup_order", "args": {{"order_id": order_id}}}}]}}


@pytest.fixture(scope="session")
def agent() -> Any:
    return support_agent
'''  # noqa: E501, RUF100 - a file's text for the user, kept as it is

# The ini block: (key, value, comment). Values are strings, as pytest reads them from any
# configuration file.
INI_KEYS = (
    ("agent_eval_timeout", "60", "seconds per agent call, for cases without `timeout:`"),
    ("agent_eval_concurrency", "4", "agent calls in flight at once in each pytest process"),
)

WORKFLOW_TEXT = """\
# Agent evals (written by `agent-eval init`; {docs}/how-to/ci.md).
# Pull requests: the cases replay the LLM traffic recorded in the cassettes next to the eval files (no key, no
# network, deterministic). Under GitHub Actions each failed case is annotated at its line in the diff and the
# summary lands on the job page; one sticky comment on the pull request gives the regressions, fixes and cost
# against the last nightly run; the JSON and HTML reports are artifacts. Cases whose verdict cannot have changed
# (same case, agent source, models, judge, mocks, cassette) come from the verdict cache, in the run store
# (.agent-eval/runs.db) that actions/cache keeps.
# Nightly: every case runs against the live model with the secret key and records its cassettes anew; review the
# `cassettes` artifact and commit it, so that pull requests replay what the model answers today. Its spend stops
# at --agent-eval-max-cost.
# GitHub reads workflows only from the repository root's .github/workflows/.
name: agent evals

on:
  pull_request:
  schedule:
    - cron: "17 3 * * *"
  workflow_dispatch:

jobs:
  replay:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    permissions:
      contents: read
      actions: read
      pull-requests: write
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: install
        run: pip install 'pytest-agent-evalset[traffic,store]'   # and your agent's own dependencies
      - uses: actions/cache@v4   # the run store and its verdict cache: an unchanged case is reported, not run
        with:
          path: .agent-eval/runs.db
          key: agent-eval-${{{{ github.sha }}}}
          restore-keys: agent-eval-
      - name: evals (replayed)
        run: >-
          pytest {evals} --agent-eval-replay --agent-eval-changed
          --agent-eval-report report.json --agent-eval-html report.html
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: agent-eval-report
          path: |
            report.json
            report.html
      - name: baseline (the last nightly report)
        if: always()
        env:
          GH_TOKEN: ${{{{ github.token }}}}
        run: |
          last=$(gh run list --workflow agent-evals.yml --event schedule --status success --limit 1 \\
            --json databaseId --jq '.[0].databaseId' || true)
          if [ -n "$last" ]; then gh run download "$last" --name agent-eval-nightly --dir baseline || true; fi
      - name: pull-request comment (one, updated on every push)
        if: >-
          always() && hashFiles('report.json') != ''
          && github.event.pull_request.head.repo.full_name == github.repository
        env:
          GH_TOKEN: ${{{{ github.token }}}}
          PR: ${{{{ github.event.pull_request.number }}}}
        run: |
          if [ -f baseline/report.json ]; then base="--baseline baseline/report.json"; else base=""; fi
          agent-eval comment report.json $base > comment.md
          id=$(gh api "repos/$GITHUB_REPOSITORY/issues/$PR/comments" --paginate \\
            --jq '.[] | select(.body | startswith("<!-- agent-eval -->")) | .id' | head -n 1)
          if [ -n "$id" ]; then gh api -X PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F body=@comment.md
          else gh pr comment "$PR" --body-file comment.md; fi

  record:
    if: github.event_name == 'schedule' || github.event_name == 'workflow_dispatch'
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: install
        run: pip install 'pytest-agent-evalset[traffic]'   # and your agent's own dependencies
      - name: evals (live, recorded)
        env:
          # the key your agent reads; add it under the repository's Settings > Secrets and variables > Actions
          OPENAI_API_KEY: ${{{{ secrets.OPENAI_API_KEY }}}}
        run: >-
          pytest {evals} --agent-eval-record --agent-eval-rate-limit 300/min --agent-eval-max-cost 5
          --agent-eval-report report.json --agent-eval-html report.html
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: agent-eval-nightly
          path: |
            report.json
            report.html
      - uses: actions/upload-artifact@v4
        with:
          name: cassettes
          path: {evals}/cassettes
"""  # noqa: E501, RUF100 - a file's text for the user, kept as it is


class InitError(Exception):
    """``agent-eval init`` cannot go on; nothing was written.

    ``args[0]``: the lines that say why.
    """

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines)
        self.lines = lines


@dataclass(frozen=True)
class Plan:
    """What ``init`` writes, and the ini block it prints instead of writing.

    The files' paths are relative to the target folder.
    """

    files: dict[str, str]
    ini_note: str


def pytest_config(folder: Path) -> tuple[str, str] | None:
    """Where pytest is configured in ``folder`` already: ``(file, section)``, else ``None``.

    The files are looked for as pytest looks for them.
    """
    for name, section in (("pytest.ini", "pytest"), (".pytest.ini", "pytest")):
        if (folder / name).is_file():
            return name, section
    pyproject = folder / "pyproject.toml"
    if (
        pyproject.is_file()
    ):  # a table header is enough to tell (and needs no TOML parser on Python 3.10)
        found = re.search(
            r"^\s*\[tool\.pytest(\.ini_options)?\]", pyproject.read_text(errors="replace"), re.M
        )
        if found:
            return "pyproject.toml", found.group().strip().strip("[]")
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if (folder / name).is_file():
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read(folder / name, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                continue
            if parser.has_section(section):
                return name, section
    return None


def ini_block(toml: bool) -> str:
    """The plugin's ini keys, as lines for ``pytest.ini`` or ``[tool.pytest.ini_options]``."""
    quote = '"' if toml else ""
    return "".join(
        f"# {comment}\n{key} = {quote}{value}{quote}\n" for key, value, comment in INI_KEYS
    )


def plan(folder: Path, schema: dict[str, Any]) -> Plan:
    """The files to write into ``folder``, and the ini block to print.

    The ini block goes into a new ``pytest.ini`` unless pytest is configured there already, in which
    case it is only printed (a new ``pytest.ini`` would take over from that file).
    """
    files = {
        EVAL_FILE: EVAL_TEXT.format(docs=DOCS),
        SCHEMA_FILE: json.dumps(schema, indent=2) + "\n",
        CONFTEST: CONFTEST_TEXT.format(docs=DOCS),
    }
    note = ""
    existing = pytest_config(folder)
    if existing is None:
        files[INI_FILE] = "[pytest]\n" + ini_block(toml=False)
    else:
        name, section = existing
        note = (
            f"pytest is configured in {name}: add these lines under [{section}]:\n\n"
            + ini_block(toml=name == "pyproject.toml")
        )
    files[WORKFLOW] = WORKFLOW_TEXT.format(docs=DOCS, evals="evals")
    return Plan(files, note)


def _blocked(folder: Path, name: str) -> list[str]:
    """Why ``folder/name`` cannot be written as a new file, if it cannot.

    It exists (a dangling symlink too), or a folder on the way is a file or a symlink (never written
    through: it could lead outside ``folder``).
    """
    path = folder / name
    for parent in reversed(path.relative_to(folder).parents[:-1]):
        step = folder / parent
        if step.is_symlink():
            return [f"{step} is a symlink (never written through)"]
        if os.path.lexists(step) and not step.is_dir():
            return [f"{step} is a file, not a folder"]
    if path.is_symlink():
        return [f"{path} is a symlink (never written through)"]
    if os.path.lexists(path):
        return [f"{path} already exists"]
    return []


def write(folder: Path, schema: dict[str, Any]) -> tuple[list[Path], str]:
    """Write the starting project into ``folder``; ``(the files written, the ini note)``.

    Raises :class:`InitError`, having written nothing, when any of the files exists."""
    if folder.exists() and not folder.is_dir():
        raise InitError(
            [f"{folder} is a file, not a folder: name a folder (it is created when missing)"]
        )
    todo = plan(folder, schema)
    problems = [line for name in todo.files for line in _blocked(folder, name)]
    if problems:
        lines = list(dict.fromkeys(problems))
        raise InitError(
            [
                *lines,
                "nothing was written: move those files away, "
                "or name another folder (agent-eval init DIR)",
            ]
        )
    written: list[Path] = []
    made: list[Path] = []
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True)
            made.append(folder)
        for name, text in todo.files.items():
            path = folder / name
            for parent in reversed(path.relative_to(folder).parents[:-1]):
                if not (folder / parent).is_dir():
                    os.mkdir(folder / parent)
                    made.append(folder / parent)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as out:
                written.append(path)
                out.write(text)
    except (
        OSError
    ) as exc:  # a file that appeared meanwhile, a full disk: what was written is removed
        for path in reversed(written):
            path.unlink(missing_ok=True)
        for folder_made in reversed(made):
            with contextlib.suppress(OSError):
                folder_made.rmdir()
        raise InitError(
            [f"{exc.filename or folder}: {exc.strerror or exc}", "nothing was written"]
        ) from None
    return written, todo.ini_note
