"""``--agent-eval-resume REPORT`` (SPEC §18): run the eval cases REPORT did not finish.

Run exactly the eval cases REPORT has no final record of, and write one report of both runs. REPORT
may be a run's journal (``*.jsonl``, SPEC §24): what a killed run left.

A case has a final record when REPORT's ``cases`` hold it and its ``not_run`` list (the cases a dead
worker had not finished) does not name it. Every other collected eval case runs; the finished ones
and every plain test are deselected (the report does not know plain tests). The controller reads
REPORT and sends the finished node ids to xdist workers, so a worker needs no copy of it. The run's
records start from REPORT's final ones: a rerun case's new record replaces the old, and every report
of the run (JSON, HTML, markdown, the summary, the baseline gate and the thresholds) covers both
runs. A shard's report resumes with the same ``--agent-eval-shard``.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.shards import deselect
from pytest_agent_eval.plugin.state import EVAL_ITEM
from pytest_agent_eval.report.baseline import BaselineError, load_report
from pytest_agent_eval.report.formats import run_records, withdraw

_INPUT = "agent_eval_resume"
"""The ``workerinput`` key of the node ids that have a final record."""


def final_records(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A report's records that are final: every case but those its ``not_run`` list names."""
    not_run = {
        entry.get("nodeid") for entry in document.get("not_run") or [] if isinstance(entry, dict)
    }
    return {case["nodeid"]: case for case in document["cases"] if case["nodeid"] not in not_run}


def _read(
    config: pytest.Config, path: Path
) -> tuple[dict[str, dict[str, Any]], set[str], set[str]]:
    """REPORT's final records, every node id it names, and its files (relative to the rootdir)."""
    from pytest_agent_eval.memory.journal import is_journal, read_journal

    try:
        document = read_journal(path) if is_journal(path) else load_report(path)
    except BaselineError as exc:
        withdraw(config)  # a usage error: no report written over the given one
        raise pytest.UsageError(f"--agent-eval-resume: {exc}") from None
    shard = (document.get("run") or {}).get("shard")
    spec = config.getoption("agent_eval_shard", None)
    if isinstance(shard, dict):
        wanted = f"{shard.get('index')}/{shard.get('count')}"
        given = None if spec is None else f"{spec.index}/{spec.count}"
        if given != wanted:
            raise pytest.UsageError(
                f"--agent-eval-resume: {path} is the report of shard {wanted}: resume it with "
                f"--agent-eval-shard {wanted}" + (f" (not {given})" if given else "")
            )
    named = {
        str(entry.get("nodeid"))
        for entry in document.get("not_run") or []
        if isinstance(entry, dict)
    }
    files = {str(case["file"]) for case in document["cases"] if isinstance(case.get("file"), str)}
    return (
        final_records(document),
        named | {str(case["nodeid"]) for case in document["cases"]},
        files,
    )


class Resume:
    """A plugin object (every process): deselects what REPORT finished.

    On the controller, it starts the run's records from REPORT's final ones.
    """

    def __init__(
        self, path: Path, done: set[str], kept: int | None, known: set[str] | None = None
    ) -> None:
        self.path = path
        self.done = done
        self.kept = kept
        self.known = known if known is not None else done
        """Every node id REPORT names (its cases and ``not_run``): one must be collected, or it is
        another suite's.
        """
        self.left: int | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_INPUT] = sorted(self.done)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None]:
        evals = [item.nodeid for item in items if item.stash.get(EVAL_ITEM, False)]
        if (
            self.known and evals and self.known.isdisjoint(evals)
        ):  # before -k, -m and the shard deselect
            some = ", ".join(sorted(self.known)[:2])
            withdraw(
                config
            )  # no report written: the one given (often the same path) stays as it is
            raise pytest.UsageError(
                f"--agent-eval-resume: {self.path} is the report of another suite: none of its "
                f"cases ({some}, ...) is collected here; resume with the report of this suite's "
                "run"
            )
        # after every other deselection (-k, -m, the shard): the cases REPORT's run would have run
        yield
        self.left = deselect(config, items, self._left)

    def _left(self, item: pytest.Item) -> bool:
        """Whether ``item`` is a case without a final record.

        Plain tests are not in the report: left out.
        """
        return item.stash.get(EVAL_ITEM, False) and item.nodeid not in self.done

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.left = len(ids)  # on the controller, which collects nothing

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.left == 0 and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = (
                pytest.ExitCode.OK
            )  # nothing was left to run: the report is whole, not empty

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.left == 0:
            terminalreporter.write_line(
                f"agent eval resume: every case of {self.path.name} has a final record: nothing "
                "to run"
            )
        elif self.left is not None:
            terminalreporter.write_line(
                f"agent eval resume: ran {self.left} cases {self.path.name} has no final record "
                f"of; kept its {self.kept} final records"
            )

    def to_dict(self) -> dict[str, Any]:
        """``run.resumed_from`` of the JSON report."""
        return {"report": str(self.path), "kept": self.kept}


def configure(config: pytest.Config) -> None:
    """Register the plugin when ``--agent-eval-resume`` is given.

    A usage error when REPORT cannot be read.
    """
    given = config.getoption("agent_eval_resume", None)
    if not given:
        return
    sent = compat.worker_input(config)
    if sent is not None:  # an xdist worker: the controller read REPORT
        done = set(
            sent.get(_INPUT) or ()
        )  # the controller checked REPORT is this suite's (as far as it can)
        config.pluginmanager.register(Resume(Path(given), done, None, set()), "agent_eval_resume")
        return
    path = Path(given)
    final, known, files = _read(config, path)
    if files and not any((config.rootpath / name).is_file() for name in files):
        withdraw(config)  # no report written: the one given (often the same path) stays as it is
        raise pytest.UsageError(
            f"--agent-eval-resume: {path} is the report of another suite: none of its files "
            f"({sorted(files)[0]}, ...) is under the rootdir {config.rootpath}; resume with the "
            "report of this suite's run"
        )
    run_records(config).carry(final)
    config.pluginmanager.register(Resume(path, set(final), len(final), known), "agent_eval_resume")
