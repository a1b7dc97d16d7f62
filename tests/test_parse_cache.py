"""The YAML parse cache: a second collection reads parsed data back; an edited file is re-parsed."""

from __future__ import annotations

import pytest

FILE = """\
agent: scripted:run
cases:
  - id: first
    input: x
    context: {say: ok}
  - id: second
    input: x
    expect: {contains: [missing]}
"""


def cache_entries(evals: pytest.Pytester) -> list[str]:
    folder = evals.path / ".pytest_cache" / "d" / "agent_eval_parsed"
    return sorted(p.name for p in folder.glob("*.marshal")) if folder.exists() else []


def test_second_collection_uses_the_cache_with_the_same_result(evals: pytest.Pytester) -> None:
    evals.makefile(".yaml", eval_cached=FILE)
    first = evals.runpytest()
    first.assert_outcomes(passed=1, failed=1)
    entries = cache_entries(evals)
    assert len(entries) == 1
    second = evals.runpytest()
    second.assert_outcomes(passed=1, failed=1)
    second.stdout.fnmatch_lines(["eval_cached.yaml:6: second"])  # line positions survive the cache
    assert cache_entries(evals) == entries


def test_changed_file_is_parsed_again(evals: pytest.Pytester) -> None:
    evals.makefile(".yaml", eval_cached=FILE)
    evals.runpytest().assert_outcomes(passed=1, failed=1)
    evals.makefile(
        ".yaml", eval_cached=FILE.replace("expect: {contains: [missing]}", "context: {say: ok}")
    )
    evals.runpytest().assert_outcomes(passed=2)
    assert len(cache_entries(evals)) == 2


def test_no_cache_without_the_cacheprovider(evals: pytest.Pytester) -> None:
    evals.makefile(".yaml", eval_cached=FILE)
    evals.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1, failed=1)
    assert cache_entries(evals) == []


def test_values_marshal_cannot_hold_are_parsed_each_time(evals: pytest.Pytester) -> None:
    evals.makefile(
        ".yaml",
        eval_dates=FILE.replace("context: {say: ok}", "context: {say: ok, day: 2026-11-22}"),
    )
    evals.runpytest().assert_outcomes(passed=1, failed=1)
    evals.runpytest().assert_outcomes(passed=1, failed=1)
    assert cache_entries(evals) == []


def test_positions_inside_a_case_survive_the_cache(evals: pytest.Pytester) -> None:
    deep = (
        "agent: scripted:run\ncases:\n  - id: typo\n    input: x\n    expect:\n      contans: [x]\n"
    )
    evals.makefile(".yaml", eval_deep=deep)
    for _ in range(2):  # parsed, then read from the cache
        result = evals.runpytest()
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*eval_deep.yaml:6: unknown check 'contans'*"])
    assert len(cache_entries(evals)) == 1
