"""Adaptive trials (SPEC §25): ``repeat: {max: n, stop: decided}`` stops once the verdict is known.

It needs ⌈min_pass_rate · n⌉ passing trials and stops once that is reached or can no longer be; the
verdict is the one all n trials would give, the record has ``trials_used`` and ``trials_saved``,
the summary the saving.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from pytest_agent_eval.run.runner import in_waves, next_wave, passes_needed

AGENT = '''
import pathlib

def run(query, context):
    """Counts its calls per case in calls/<case>; answers `say`."""
    folder = pathlib.Path("calls")
    folder.mkdir(exist_ok=True)
    with open(folder / context["case"], "a") as f:
        f.write("x")
    return context["say"]
'''
CASES = """\
agent: adaptive_agent:run
cases:
  - id: always_passes
    input: hi
    repeat: {max: 10, stop: decided}
    min_pass_rate: 0.3
    context: {case: always_passes, say: ok}
    expect: {contains: [ok]}
  - id: always_fails
    input: hi
    repeat: {max: 10, stop: decided}
    min_pass_rate: 0.3
    context: {case: always_fails, say: nope}
    expect: {contains: [ok]}
  - id: all_must_pass
    input: hi
    repeat: {max: 4, stop: decided}
    context: {case: all_must_pass, say: ok}
    expect: {contains: [ok]}
  - id: fixed
    input: hi
    repeat: 3
    context: {case: fixed, say: ok}
    expect: {contains: [ok]}
"""


def _stop_point(outcomes: tuple[bool, ...], n: int, rate: float) -> int:
    """Trials a one-at-a-time run needs before the verdict is certain."""
    need = passes_needed(n, rate)
    passes = fails = 0
    for used, passed in enumerate(outcomes, 1):
        passes, fails = passes + passed, fails + (not passed)
        if passes >= need or fails > n - need:
            return used
    return n


@pytest.mark.parametrize("rate", [0.0, 0.3, 0.5, 0.7, 0.75, 0.9, 1.0])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_the_verdict_is_all_trials_verdict_with_no_trial_it_did_not_need(
    n: int, rate: float
) -> None:
    for outcomes in itertools.product([True, False], repeat=n):

        async def trial(k: int, outcomes: tuple[bool, ...] = outcomes) -> bool:
            return outcomes[k]

        def more(done: list[bool]) -> int:
            return next_wave(sum(done), len(done) - sum(done), n, rate)

        done = asyncio.run(in_waves(more, trial))
        assert done == list(outcomes[: len(done)])
        assert (sum(done) >= passes_needed(n, rate)) == (
            sum(outcomes) / n >= rate
        )  # the verdict of all n
        assert len(done) == max(1, _stop_point(outcomes, n, rate))  # not one trial more than needed


def test_three_of_ten() -> None:
    assert passes_needed(10, 0.3) == 3
    assert passes_needed(10, 0.7) == 7  # 0.7 * 10 is 7.000000000000001 as a float
    assert passes_needed(10, 1.0) == 10


@pytest.fixture
def adaptive(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(adaptive_agent=AGENT)
    pytester.makefile(".yaml", eval_adaptive=CASES)
    pytester.syspathinsert()
    return pytester


@pytest.mark.parametrize("traffic", [(), ("--agent-eval-replay",)], ids=["plain", "traffic-hook"])
def test_trials_stop_once_decided(adaptive: pytest.Pytester, traffic: tuple[str, ...]) -> None:
    markdown = adaptive.path / "summary.md"
    result = adaptive.runpytest(
        "-p",
        "no:cacheprovider",
        "--agent-eval-report",
        "r.json",
        f"--agent-eval-markdown={markdown}",
        *traffic,
    )
    result.assert_outcomes(passed=3, failed=1)
    cases = {c["case_id"]: c for c in json.loads((adaptive.path / "r.json").read_text())["cases"]}
    used = {
        name: (c["trials_used"], c["trials_saved"], len(c["trials"])) for name, c in cases.items()
    }
    assert used == {
        "always_passes": (3, 7, 3),
        "always_fails": (8, 2, 8),
        "all_must_pass": (4, 0, 4),
        "fixed": (None, None, 3),
    }
    calls = {p.name: len(p.read_text()) for p in Path(adaptive.path / "calls").iterdir()}
    assert calls == {
        "always_passes": 3,
        "always_fails": 8,
        "all_must_pass": 4,
        "fixed": 3,
    }  # the agent ran no more
    assert cases["always_fails"]["outcome"] == "failed"
    line = "adaptive trials (3 cases): 15/24 trials used, 9 saved (38%)"
    result.stdout.fnmatch_lines([line])
    assert line in markdown.read_text()


def test_a_failure_stops_a_case_that_needs_every_trial(adaptive: pytest.Pytester) -> None:
    failing = CASES.replace("{case: all_must_pass, say: ok}", "{case: all_must_pass, say: no}")
    adaptive.makefile(".yaml", eval_adaptive=failing)
    result = adaptive.runpytest(
        "-p", "no:cacheprovider", "-k", "all_must_pass", "--agent-eval-report", "r.json"
    )
    result.assert_outcomes(failed=1)
    (case,) = json.loads((adaptive.path / "r.json").read_text())["cases"]
    assert (case["trials_used"], case["trials_saved"]) == (1, 3)
    result.stdout.fnmatch_lines(["*1/4 trials used, 3 saved (75%)*"])


@pytest.mark.parametrize(
    "repeat",
    [
        "{max: 0, stop: decided}",
        "{max: 3, stop: never}",
        "{max: 3}",
        "{max: 3, stop: decided, min: 1}",
    ],
)
def test_a_bad_adaptive_repeat_names_the_case_and_line(
    adaptive: pytest.Pytester, repeat: str
) -> None:
    adaptive.makefile(
        ".yaml",
        eval_adaptive=(
            "agent: adaptive_agent:run\ncases:\n"
            "  - {id: good, input: hi, context: {case: good, say: ok}}\n"
            f"  - id: bad\n    input: hi\n    repeat: {repeat}\n"
        ),
    )
    result = adaptive.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*eval_adaptive.yaml:6*repeat*"])
