"""Calibration sets as pytest items and ``--agent-eval-judge-min-kappa`` (SPEC §26).

Files named ``*.calibration.yaml`` / ``.yml`` / ``.json`` / ``.jsonl`` are collected here (never as
eval files): one item per labelled answer, tagged ``calibration``, that asks its judge and passes
when the verdict is the label's. They run first, so that the judges' figures are at hand when the
cases' judges are gated. With ``--agent-eval-judge-min-kappa X`` a judge whose Cohen's kappa on this
run's items is below X, or that no item labels, is uncalibrated: its verdicts are no verdict
(errors), never passes. The engine is ``checks.calibration``; it loads with the first calibration
file or with the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.core.files import CALIBRATION_SUFFIXES as SUFFIXES
from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    # - Gate: the stash key's type
    from pytest_agent_eval.checks.calibration import Gate, Labelled  # noqa: F401
    from pytest_agent_eval.core.case import Case

GATE = pytest.StashKey["Gate"]()
MARKER = "calibration: a labelled answer of a judge's calibration set (pytest-agent-eval, SPEC §26)"


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--agent-eval-judge-min-kappa",
        dest="agent_eval_judge_min_kappa",
        metavar="X",
        type=float,
        default=None,
        help="a judge whose Cohen's kappa on this run's calibration items (*.calibration.yaml) is "
        "below X, or that no item labels, is uncalibrated: its verdicts are errors (no verdict), "
        "never passes",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    minimum = config.getoption("agent_eval_judge_min_kappa", None)
    if minimum is None:
        return
    from pytest_agent_eval.checks import judge
    from pytest_agent_eval.checks.calibration import Gate

    gate = config.stash[GATE] = Gate(minimum)
    judge.UNCALIBRATED = gate.why

    def reset() -> None:
        judge.UNCALIBRATED = None

    config.add_cleanup(reset)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.File | None:
    if file_path.name.lower().endswith(SUFFIXES):
        return CalibrationFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Calibration items first (a stable sort): the gate finds their verdicts asked already."""
    items.sort(key=lambda item: not isinstance(item, CalibrationItem))


class CalibrationFile(pytest.File):
    """A calibration set: one item per labelled answer."""

    def collect(self) -> list[pytest.Item]:
        from pytest_agent_eval.checks.calibration import load
        from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors
        from pytest_agent_eval.plugin.collect import FileProblem

        try:
            loaded = load(self.path)
        except (EvalFileError, EvalFileErrors) as exc:
            errors = exc.errors if isinstance(exc, EvalFileErrors) else [exc]
            return [FileProblem.from_parent(self, name=FileProblem.NAME, errors=errors)]
        gate = self.config.stash.get(GATE, None)
        if gate is not None:
            gate.add(loaded.items)
        items: list[pytest.Item] = [
            CalibrationItem.from_parent(self, name=item.case.id, case=item.case, labelled=item)
            for item in loaded.items
        ]
        items += [
            CalibrationItem.from_parent(self, name=case.id, case=case, labelled=None)
            for case in loaded.broken
        ]
        items.sort(key=lambda item: item.case.line)  # type: ignore[attr-defined]
        return items


class CalibrationItem(pytest.Function):
    """One labelled answer: asks its judge and compares with the label.

    The judge is the ``agent_eval_llm`` fixture.
    """

    runs_no_agent = True
    """No agent runs for it: the scheduler never starts it early."""

    def __init__(self, *, case: Case, labelled: Labelled | None, **kwargs: Any) -> None:
        super().__init__(callobj=self.calibrate, **kwargs)
        from pytest_agent_eval.plugin.state import EVAL_ITEM, get_state

        self.case = case
        self.labelled = labelled
        state = get_state(self.config)
        self.add_marker(state.marker("agent_eval"))
        self.add_marker(state.marker("calibration"))
        self.stash[EVAL_ITEM] = True

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.case.id} (calibration)"

    def setup(self) -> None:
        if self.case.error:
            from pytest_agent_eval.plugin.skipping import fail_item

            fail_item(self, self.case.error)
        super().setup()

    def calibrate(self, agent_eval_llm: Any) -> None:
        """The test function: the judge's verdict on the item, recorded like a case's."""
        from pytest_agent_eval.checks.base import CheckError
        from pytest_agent_eval.checks.calibration import ask, result
        from pytest_agent_eval.plugin.skipping import fail_item, skip_at_item
        from pytest_agent_eval.report.attach import note_result

        item = self.labelled
        assert item is not None
        gate = self.config.stash.get(GATE, None)
        found: Any = None
        if agent_eval_llm is not None:
            try:
                found = (
                    gate.verdict(item, agent_eval_llm)
                    if gate is not None
                    else ask(item, agent_eval_llm)
                )
            except CheckError as exc:
                found = exc
        outcome = result(item, found)
        note_result(self, outcome)
        self.ihook.pytest_agent_eval_case_result(item=self, result=outcome)
        if outcome.unscored and found is None:
            skip_at_item(self, outcome.unscored[0].message)
        if not outcome.passed:
            lines = self.ihook.pytest_agent_eval_failure_lines(
                item=self, result=outcome, verbose=self.config.get_verbosity()
            )
            fail_item(self, "\n".join(lines or [f"calibration item {self.case.id} failed"]))
