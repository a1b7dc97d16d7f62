"""The "Extending" page's examples (docs/extending.md), run as written.

Each section's files go into a fresh directory, and a user's run there shows what the page says it
does.
"""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest

PAGE = Path(__file__).parent.parent / "docs" / "extending.md"
AGENT = '''
def run(query):
    """Answers the quiz; otherwise repeats the request."""
    return {"What is 2 + 2?": "It is 4."}.get(query, f"Sure: {query}")
'''


def _section(title: str) -> str:
    """The text of the page's ``## title`` section."""
    text = PAGE.read_text(encoding="utf-8")
    parts = {p.split("\n", 1)[0].strip(): p for p in text.split("\n## ")[1:]}
    return parts[title]


def _files(title: str) -> dict[str, str]:
    """The subsection's fenced blocks whose first line names their file (``# conftest.py``)."""
    found = {}
    for block in re.findall(r"```\w+\n(.*?)```", _section(title), re.S):
        first, _, _ = block.partition("\n")
        if re.fullmatch(r"# [\w.]+\.(py|yaml|json)", first):
            found[first[2:]] = block
    return found


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(agent=AGENT)
    pytester.syspathinsert()
    return pytester


def _write(pytester: pytest.Pytester, title: str) -> None:
    files = _files(title)
    assert files, f"no example files under {title!r}"
    for name, text in files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")


def _validate(pytester: pytest.Pytester, name: str) -> str:
    done = subprocess.run(
        ["agent-eval", "validate", name], cwd=pytester.path, capture_output=True, text=True
    )
    return done.stdout


def test_a_check(example: pytest.Pytester) -> None:
    _write(example, "A check")
    result = example.runpytest("--agent", "agent:run", "-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ polite: failed*",
            "*expected: says please: True",
            "*actual:   Sure: Book a room",
            "PASSED *::asks_nicely",
        ]
    )
    assert _validate(example, "eval_polite.yaml").startswith(
        "eval_polite.yaml: native, 2 cases: ok"
    )


def test_a_file_format(example: pytest.Pytester) -> None:
    _write(example, "A file format (dialect)")
    result = example.runpytest("--agent", "agent:run", "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["eval_qa.yaml::q1 PASSED*"])
    assert _validate(example, "eval_qa.yaml").startswith("eval_qa.yaml: qa, 1 case: ok")


def test_a_report_format_only_with_its_option_and_alike_under_xdist(
    example: pytest.Pytester,
) -> None:
    _write(example, "A report format")
    example.makefile(".yaml", eval_two="cases:\n  - {id: a, input: hi, expect: {contains: [hi]}}\n"
                     "  - {id: b, input: hi, expect: {contains: [bye]}}\n")  # fmt: skip
    example.runpytest("--agent", "agent:run", "-p", "no:cacheprovider").assert_outcomes(
        passed=1, failed=1
    )
    assert not list(example.path.glob("*.csv"))  # no option, no report
    rows = {}
    for name, args in {"serial": (), "n2": ("-n", "2")}.items():
        result = example.runpytest_subprocess("--agent", "agent:run", "-p", "no:cacheprovider",
                                              "--csv-report", f"{name}.csv", *args)  # fmt: skip
        result.assert_outcomes(passed=1, failed=1)
        with open(example.path / f"{name}.csv", newline="") as f:
            rows[name] = list(csv.reader(f))
    assert rows["serial"] == [
        ["case", "outcome", "score"],
        ["a", "passed", "1.0"],
        ["b", "failed", "0.0"],
    ]
    assert rows["n2"] == rows["serial"]


def test_a_framework_adapter(example: pytest.Pytester) -> None:
    _write(example, "A framework adapter")
    assert "pytest_agent_eval/adapters/" in _section("A framework adapter")
    result = example.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(
        passed=1
    )  # the real tool raises: the mock answered, through the adapter's copy
    result.stdout.fnmatch_lines(["eval_weather.yaml::sunny PASSED*"])
    (example.path / "eval_weather.yaml").write_text(
        _files("A framework adapter")["eval_weather.yaml"].replace(
            "tools_called: [weather]", "tools_called: [map]"
        )
    )
    result = example.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✗ tools_called: not called: map*",
            "*1. weather(text='weather in Oslo?') -> 'sunny, 21 C'",
        ]
    )
