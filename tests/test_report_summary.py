"""The "agent eval summary" terminal section (SPEC §10), as users see it, with and without -n 2."""

from __future__ import annotations

import re

import pytest
from report_support import BROKEN, SUITE, UNREADABLE, USAGE_AGENT

from pytest_agent_eval.report.stats import percentile


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_suite=SUITE, eval_broken=BROKEN, eval_unreadable=UNREADABLE)
    return pytester


def _section(output: list[str]) -> list[str]:
    start = next(n for n, line in enumerate(output) if "agent eval summary" in line)
    end = next(n for n in range(start + 1, len(output)) if output[n].startswith("=="))
    return output[start + 1 : end]


def _table(section: list[str]) -> dict[str, list[str]]:
    rows = {}
    for line in section[1 : section.index("") if "" in section else None]:
        if line.startswith("repeated cases ("):  # the line under the table
            continue
        name, cells = re.split(r"\s{2,}", line, maxsplit=1)
        rows[name] = re.split(r"\s{2,}", cells)
    return rows


def test_the_summary_gives_each_figure_per_file_and_tag(suite: pytest.Pytester) -> None:
    result = suite.runpytest("-p", "no:cacheprovider")
    section = _section(result.outlines)
    assert section[0].split() == [
        "passed", "score", "mean", "score", "min", "repeat", "pass", "latency", "p50", "latency",
        "p95", "tool", "acc", "tokens", "cost",
    ]  # fmt: skip
    table = _table(section)
    assert list(table) == [
        "all",
        "eval_broken.yaml",
        "eval_suite.yaml",
        "eval_unreadable.yaml",
        "tag kb",
        "tag routing",
    ]
    # scores: ok 1, bad 0, partial 0.5, rep 1, flaky 0.75, boom 0, known_bug 0, fixed_bug 1 -> 4.25
    # / 8
    # repeated: rep 3/3, flaky 3/4 -> 6/7; tool checks: ok 1, bad 0, partial 0; tokens 15 + 7; cost
    # 0.25
    stable = {
        name: cells[:4] + cells[6:] for name, cells in table.items()
    }  # latency apart: measured
    assert stable["all"] == ["5/11", "0.53", "0.00", "86%", "33%", "22", "0.2500"]
    assert stable["eval_suite.yaml"] == ["5/9", "0.53", "0.00", "86%", "33%", "22", "0.2500"]
    assert stable["eval_broken.yaml"] == ["0/1", "-", "-", "-", "-", "-", "-"]
    assert stable["tag kb"] == ["0/1", "0.00", "0.00", "-", "0%", "7", "-"]
    assert table["eval_broken.yaml"][4:6] == ["-", "-"]
    # pass@k, pass^k (k = the trials): rep 3/3 -> 1, 1; flaky 3/4 -> 1, 0
    assert section[section.index("") - 1] == (
        "repeated cases (2): pass@k 1.00, pass^k 0.50 (means; k = each case's trials: 3, 4)"
    )
    assert section[section.index("") + 1 :] == [
        "passed partially (2):",
        "  eval_suite.yaml::flaky (score 0.75)",
        "    3/4 trials passed (min_pass_rate 0.7)",
        "    contains: output lacks 'hello'",
        "  eval_suite.yaml::partial (score 0.50)",
        "    tools_called: not called: search",
    ]


def _masked(section: list[str]) -> list[str]:
    return [re.sub(r"\d+\.\d\d s", "<t> s", line) for line in section]


def test_the_summary_is_the_same_with_and_without_xdist(suite: pytest.Pytester) -> None:
    serial = suite.runpytest("-p", "no:cacheprovider")
    parallel = suite.runpytest("-p", "no:cacheprovider", "-n", "2")
    assert _masked(_section(parallel.outlines)) == _masked(_section(serial.outlines))
    assert "eval_suite.yaml::flaky (score 0.75)" in "\n".join(_section(parallel.outlines))


def test_latency_percentiles_are_the_agents_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(usage_agent=USAGE_AGENT)
    cases = "".join(
        f"  - {{id: c{n}, input: hi, context: {{sleep: {s}}}}}\n"
        for n, s in enumerate((0.1, 0.2, 0.4))
    )
    pytester.makefile(".yaml", eval_slow=f"agent: usage_agent:run\ncases:\n{cases}")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    p50, p95 = (
        float(cell.removesuffix(" s")) for cell in _table(_section(result.outlines))["all"][4:6]
    )
    assert 0.2 <= p50 < 0.3  # nearest rank: the 2nd of 3
    assert 0.4 <= p95 < 0.5


def test_quiet_quiet_gives_one_line(suite: pytest.Pytester) -> None:
    result = suite.runpytest("-p", "no:cacheprovider", "-qq")
    assert "agent eval summary" not in result.stdout.str()
    lines = [line for line in result.outlines if line.startswith("agent eval:")]
    assert len(lines) == 1
    assert re.fullmatch(
        r"agent eval: 5/11 passed, mean score 0\.53, latency p95 \d+\.\d\d s, 2 passed partially",
        lines[0],
    )


def test_no_summary_without_eval_items(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "agent eval" not in result.stdout.str()


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 101)], 0.95) == 95.0
    assert percentile([7.0], 0.95) == 7.0
