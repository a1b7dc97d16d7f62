"""At exit, a run that collected eval files leaves its live objects to the process's end (gc_policy)."""

from __future__ import annotations

import pytest

CONFTEST = """
import atexit, gc


class Cycle:
    def __init__(self):
        self.me = self

    def __del__(self):
        open("finalized.txt", "w").write("yes")


def _at_exit():  # registered before the plugin's handler, so it runs after it (atexit runs last-in first-out)
    open("frozen.txt", "w").write(str(gc.get_freeze_count()))


atexit.register(_at_exit)


def pytest_sessionfinish(session):
    Cycle()  # garbage in a cycle, left for the collector
"""


@pytest.mark.parametrize("with_evals", [True, False], ids=["eval-files", "plain-tests-only"])
def test_objects_left_at_exit_are_not_swept_and_garbage_is_still_finalized(
    pytester: pytest.Pytester, with_evals: bool
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    if with_evals:
        pytester.makefile(".yaml", eval_one="agent: ag:run\ncases:\n  - id: a\n    input: hello\n")
        pytester.makepyfile(ag="def run(query, context):\n    return query\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2 if with_evals else 1)
    frozen = int((pytester.path / "frozen.txt").read_text())
    assert (frozen > 0) is with_evals  # a run without eval files changes nothing about the interpreter's exit
    assert (pytester.path / "finalized.txt").read_text() == "yes"  # garbage was collected, finalizers ran
