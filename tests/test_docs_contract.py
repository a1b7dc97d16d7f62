"""The documentation's reference pages against the code (SPEC §21).

The prompts the plugin sends and its default word lists appear verbatim, and every option, ini key,
fixture, hook, check, format and command is documented. (The docs' YAML, JSON and Python examples
are run by the sybil set-up in the root ``conftest.py``.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_agent_eval.cases.load import builtin_dialects
from pytest_agent_eval.checks import answers, builtin_registry, judge, outcome, scorers
from pytest_agent_eval.conversation import scoring, simulate

DOCS = Path(__file__).resolve().parents[1] / "docs"
PACKAGE = DOCS.parent / "pytest_agent_eval"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _sent(template: str) -> str:
    """A ``str.format`` template as the reader sees it: literal braces single."""
    return template.replace("{{", "{").replace("}}", "}")


@pytest.mark.parametrize(
    "text",
    [
        _sent(judge.PROMPT),
        _sent(scorers.GROUNDING_PROMPT),
        _sent(scorers.REASONING_PROMPT),
        simulate.SIMULATOR_PROMPT,
        simulate.FACTS_HEADER,
        simulate.NO_FACTS,
        scoring.SCORER_PROMPT,
        scoring.REPLY_SHAPE,
    ],
    ids=[
        "judge",
        "grounding",
        "reasoning",
        "simulator",
        "facts",
        "no-facts",
        "task-scorer",
        "task-reply",
    ],
)
def test_every_prompt_is_documented_verbatim(text: str) -> None:
    assert f"```text\n{text}\n" in page("reference/prompts.md")


@pytest.mark.parametrize(
    "words",
    [
        outcome.SUCCESS_WORDS,
        outcome.FAILURE_WORDS,
        answers.ALLOCATION_SUCCESS,
        answers.ALLOCATION_FAILURE,
    ],
    ids=["outcome-success", "outcome-failure", "allocation-success", "allocation-failure"],
)
def test_every_default_word_list_is_documented(words: tuple[str, ...]) -> None:
    assert ", ".join(f"`{w}`" for w in words) in page("reference/prompts.md")


def _source(name: str) -> str:
    return (PACKAGE / name).read_text(encoding="utf-8")


def test_every_option_and_ini_key_is_documented() -> None:
    from pytest_agent_eval.plugin import FEATURES

    sources = [_source("plugin/options.py")]  # the big table, and each feature module's own options
    sources += [
        _source(name.removeprefix("pytest_agent_eval.").replace(".", "/") + ".py")
        for name in FEATURES
    ]
    options = {o for text in sources for o in re.findall(r'"(--agent(?:-eval-[a-z-]+)?)"', text)}
    inis = set(re.findall(r'addini\(\s*"(agent_eval_\w+)"', _source("plugin/options.py")))
    inis |= set(
        re.findall(r'\("(agent_eval_\w+)",', _source("plugin/options.py"))
    )  # the thresholds' table
    text = page("reference/options.md")
    assert options and inis
    assert sorted(o for o in options if f"`{o}" not in text) == []
    assert sorted(i for i in inis if f"`{i}`" not in text) == []


def test_every_hook_is_documented() -> None:
    hooks = re.findall(r"^def (pytest_agent_eval_\w+)\(", _source("plugin/hookspecs.py"), re.M)
    assert "pytest_agent_eval_register_adapters" in hooks
    assert sorted(h for h in hooks if f"`{h}(" not in page("reference/hooks.md")) == []


def test_every_fixture_is_documented() -> None:
    fixtures = re.findall(r"@pytest\.fixture[^\n]*\ndef (\w+)\(", _source("plugin/fixtures.py"))
    assert fixtures
    assert sorted(f for f in fixtures if f"`{f}`" not in page("reference/fixtures.md")) == []


def test_every_check_is_documented() -> None:
    text = page("guide/checks.md") + page("reference/formats.md")
    assert sorted(c for c in builtin_registry().names() if f"`{c}" not in text) == []


def test_every_format_is_documented() -> None:
    assert (
        sorted(
            d for d in builtin_dialects().names() if f"`{d}`" not in page("reference/formats.md")
        )
        == []
    )


def test_every_command_is_documented() -> None:
    commands = re.findall(r'sub\.add_parser\(\s*"(\w+)"', _source("cli.py"))
    assert {"init", "validate", "schema", "compare", "html"} <= set(commands)
    assert sorted(c for c in commands if f"`agent-eval {c}" not in page("reference/cli.md")) == []


def test_the_scripted_llm_of_the_prompts_page_drives_a_judge_and_a_simulated_user(
    pytester: pytest.Pytester,
) -> None:
    """The page's scripted ``agent_eval_llm`` tells the plugin's calls apart as the page says.

    It passes a judged case and a simulated-user conversation end to end.
    """
    found = re.search(r"```python\n(# conftest\.py\n.*?)```", page("reference/prompts.md"), re.S)
    assert found is not None
    pytester.makeconftest(
        found.group(1) + "\n\n@pytest.fixture(scope='session')\ndef agent():\n"
        "    return lambda query, context=None: 'Your order shipped.'\n"
    )
    pytester.makefile(
        ".yaml",
        eval_llm="""cases:
  - id: judged
    input: where is my order?
    expect: {judge: The answer says where the order is}
  - id: talk
    simulated_user:
      persona: Dana
      tasks: [{task: Ask where the order is, acceptance_criteria: it shipped}]
""",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*eval_llm.yaml::judged PASSED*", "*eval_llm.yaml::talk PASSED*"])
