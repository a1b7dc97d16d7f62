"""At exit, a run that collected eval files leaves its live objects to the process's end."""

from __future__ import annotations

import gc

import pytest

from pytest_agent_eval.gc_policy import FREEZE_FROM

CONFTEST = """
import atexit, gc


class Cycle:
    def __init__(self):
        self.me = self

    def __del__(self):
        open("finalized.txt", "w").write("yes")


def _at_exit():  # registered before the plugin's handler, \
so it runs after it (atexit runs last-in first-out)
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
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(
        passed=2 if with_evals else 1
    )
    frozen = int((pytester.path / "frozen.txt").read_text())
    assert (
        frozen > 0
    ) is with_evals  # a run without eval files changes nothing about the interpreter's exit
    assert (
        pytester.path / "finalized.txt"
    ).read_text() == "yes"  # garbage was collected, finalizers ran


def test_a_stand_in_left_in_a_garbage_cycle_is_not_counted_as_mocked(
    pytester: pytest.Pytester,
) -> None:
    """Objects frozen while cases run are live: a dead stand-in in a cycle is collected first."""
    pytester.makepyfile(
        shop="def search(query):\n    return 'real'\n\ndef leftover():\n    return 'old'\n"
    )
    pytester.makeconftest(
        """
        import gc

        import pytest
        import shop
        from pytest_agent_eval import wrap

        gc.disable()  # the cycle below stays uncollected until something collects on purpose
        cycle = {"tool": wrap(shop.leftover)}
        cycle["self"] = cycle
        del cycle

        @pytest.fixture
        def agent(tool_mocks):
            search = tool_mocks.wrap(shop.search)
            return lambda query, context: search(query) if query == "q" else "answer"
        """
    )
    others = "".join(
        f"  - {{id: c{n}, input: hi}}\n" for n in range(FREEZE_FROM)
    )  # enough cases for the freeze
    refund = "  - id: refund\n    input: q\n    tool_mocks: {refund: ok}\n"
    pytester.makefile(".yaml", eval_left=f"cases:\n{refund}{others}")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=FREEZE_FROM)
    result.stdout.fnmatch_lines(
        ["*has no mocked tool of that name; mocked tools: search; the agent was not called*"]
    )


@pytest.mark.parametrize(("cases", "frozen"), [(FREEZE_FROM, True), (FREEZE_FROM - 1, False)])
def test_a_large_sessions_items_are_frozen_while_cases_run_and_given_back_after(
    pytester: pytest.Pytester, cases: int, frozen: bool
) -> None:
    # gc.get_freeze_count() walks every frozen object: asked by one case only
    pytester.makepyfile(
        ag="""
        import gc

        def run(query, context):
            return f"frozen {gc.get_freeze_count() > 0}" if query == "probe" else "ok"
        """
    )
    probe = f"  - {{id: probe, input: probe, expect: {{contains: [frozen {frozen}]}}}}\n"
    rows = "".join(f"  - {{id: c{n}, input: q}}\n" for n in range(cases - 1))
    pytester.makefile(".yaml", eval_many=f"agent: ag:run\ncases:\n{probe}{rows}")
    assert gc.get_freeze_count() == 0
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=cases)  # in this process
    assert gc.get_freeze_count() == 0  # the session's end gave its objects back to the collector
