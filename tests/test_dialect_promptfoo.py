"""promptfoo configs run as pytest items with the verdicts promptfoo's docs give (SPEC §19).

Real promptfoo examples (``tests/promptfoo_examples/``, copied from promptfoo's ``examples/``, their
providers made deterministic), and configs written here for every supported assertion, ``not-``,
``weight``, ``threshold``, ``assert-set``, ``defaultTest``, CSV tests and a provider matrix;
model-graded ones against a loopback grader.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer

from pytest_agent_eval.cases.dialects.promptfoo_files import assertion_of_string

EXAMPLES = Path(__file__).with_name("promptfoo_examples")

PROVIDER = """
import json

def call_api(prompt, options, context):
    kind = context["vars"].get("kind")
    if kind == "tools":
        calls = [{"type": "function", "function": {"name": n, \
"arguments": json.dumps({"city": "Paris"})}}
                 for n in ("get_weather", "get_forecast")]
        return {"output": {"tool_calls": calls}, "cost": 0.0005}
    if kind == "json":
        return {"output": 'Here: {"city": "Paris", "population": 2100000}', "cost": 0.002}
    if kind == "error":
        return {"error": "upstream refused"}
    return {"output": {"greeting": "Hello world", "goodbye": "Goodbye world"}.get(kind, prompt), \
"cost": 0.0005}

def shouty(prompt, options, context):
    answer = call_api(prompt, options, context)
    return {**answer, "output": str(answer["output"]).upper()}
"""


def config(
    pytester: pytest.Pytester, text: str, name: str = "promptfooconfig.yaml", **files: str
) -> Path:
    for file_name, content in files.items():
        (pytester.path / file_name.replace("__", ".")).write_text(textwrap.dedent(content))
    path = pytester.path / name
    path.write_text(textwrap.dedent(text))
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", *args)
    assert "INTERNALERROR" not in result.stdout.str(), result.stdout.str()
    return result


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """``{node id: PASSED | FAILED | ERROR | SKIPPED}`` from ``-rA``'s short summary."""
    found: dict[str, str] = {}
    for line in result.stdout.lines:
        for word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            if line.startswith(word + " ") and "::" in line.split()[1]:
                found[line.split()[1].split("::", 1)[1]] = word
    return found


ASSERTIONS = """
    description: every deterministic assertion promptfoo documents, with its verdict
    prompts: ["Answer about {{city}}: {{kind}}"]
    providers: [file://provider.py]
    defaultTest:
      vars: {city: Paris}
    tests:
      - description: text assertions
        vars: {kind: greeting}
        assert:
          - {type: equals, value: Hello world}
          - {type: not-equals, value: Goodbye world}
          - {type: starts-with, value: Hello}
          - {type: regex, value: '^Hello\\s\\w+$'}
          - {type: contains, value: world}
          - {type: icontains, value: HELLO}
          - {type: not-contains, value: '{{city}}'}
          - {type: contains-any, value: [nope, world]}
          - {type: contains-all, value: 'Hello,world'}
          - {type: icontains-all, value: [hello, WORLD]}
          - {type: not-icontains-any, value: [bye, farewell]}
      - description: weighted below the threshold
        vars: {kind: goodbye}
        threshold: 0.5
        assert:
          - {type: equals, value: Hello world, weight: 2}
          - {type: contains, value: world, weight: 1}
      - description: weighted above the threshold
        vars: {kind: goodbye}
        threshold: 0.2
        assert:
          - {type: equals, value: Hello world, weight: 2}
          - {type: contains, value: world, weight: 1}
      - description: a failing assertion of weight 0 passes
        vars: {kind: goodbye}
        assert:
          - {type: equals, value: Hello world, weight: 0}
          - {type: contains, value: Goodbye}
      - description: one failure fails the test
        vars: {kind: goodbye}
        assert:
          - {type: contains, value: Goodbye}
          - {type: icontains, value: hello}
      - description: json and python
        vars: {kind: json}
        assert:
          - type: contains-json
            value: {type: object, required: [city, population], properties: {city: {type: string}}}
          - {type: not-is-json}
          - {type: python, value: "json.loads(output[output.index('{'):])['population'] > 1000000"}
          - type: python
            threshold: 0.5
            value: |
              data = json.loads(output[output.index('{'):])
              return 0.8 if data['city'] == context['vars']['city'] else 0.0
          - {type: python, value: file://check.py}
      - description: is-json with a schema fails on prose
        vars: {kind: json}
        assert:
          - {type: is-json, value: {type: object}}
      - description: an assert-set with a threshold is an or
        vars: {kind: greeting}
        assert:
          - type: assert-set
            threshold: 0.5
            assert:
              - {type: equals, value: nope}
              - {type: contains, value: world}
      - description: an assert-set without a threshold needs all
        vars: {kind: greeting}
        assert:
          - type: assert-set
            assert:
              - {type: equals, value: nope}
              - {type: contains, value: world}
      - description: tool trajectory
        vars: {kind: tools}
        assert:
          - {type: trajectory:tool-used, value: get_weather}
          - {type: trajectory:tool-used, value: {pattern: 'get_*', min: 2}}
          - {type: not-trajectory:tool-used, value: book_flight}
          - {type: trajectory:tool-sequence, value: [get_weather, get_forecast]}
          - {type: trajectory:tool-sequence, value: {mode: exact, steps: [get_weather, \
get_forecast]}}
          - {type: trajectory:step-count, value: {type: tool, max: 2}}
          - {type: tool-call-f1, value: [get_weather, get_forecast]}
          - {type: cost, threshold: 0.001}
          - {type: latency, threshold: 60000}
      - description: tool-call-f1 below its threshold
        vars: {kind: tools}
        assert:
          - {type: tool-call-f1, value: 'get_weather, book_flight'}
      - description: tool-call-f1 at a lower threshold
        vars: {kind: tools}
        assert:
          - {type: tool-call-f1, value: 'get_weather, book_flight', threshold: 0.5}
      - description: the tool sequence out of order
        vars: {kind: tools}
        assert:
          - {type: trajectory:tool-sequence, value: [get_forecast, get_weather]}
      - description: too expensive
        vars: {kind: json}
        assert:
          - {type: cost, threshold: 0.001}
"""
CHECK_PY = """
def get_assert(output, context):
    return {"pass": context["vars"]["city"] in output, "score": 1.0, "reason": "names the city"}
"""


def test_every_assertion_has_promptfoos_verdict(pytester: pytest.Pytester) -> None:
    config(pytester, ASSERTIONS, provider__py=PROVIDER, check__py=CHECK_PY)
    result = run(pytester)
    assert outcomes(result) == {
        "text_assertions": "PASSED",
        "weighted_below_the_threshold": "FAILED",
        "weighted_above_the_threshold": "PASSED",
        "a_failing_assertion_of_weight_0_passes": "PASSED",
        "one_failure_fails_the_test": "FAILED",
        "json_and_python": "PASSED",
        "is-json_with_a_schema_fails_on_prose": "FAILED",
        "an_assert-set_with_a_threshold_is_an_or": "PASSED",
        "an_assert-set_without_a_threshold_needs_all": "FAILED",
        "tool_trajectory": "PASSED",
        "tool-call-f1_below_its_threshold": "FAILED",
        "tool-call-f1_at_a_lower_threshold": "PASSED",
        "the_tool_sequence_out_of_order": "FAILED",
        "too_expensive": "FAILED",
    }
    text = result.stdout.str()
    # promptfoo's documented example: equals (weight 2) fails, contains (weight 1) passes: score
    # 0.33 < 0.5
    assert "score 0.33 < threshold 0.5" in text
    assert "✗ icontains 'hello' (line 43)" in text  # each assertion at its own line
    assert "F1 0.500 (precision 0.500, recall 0.500)" in text
    assert "cost 0.002, threshold 0.001" in text
    assert (
        "promptfooconfig.yaml:22: weighted_below_the_threshold" in text
    )  # each case at its own test's line


def test_default_test_merges_into_every_test(pytester: pytest.Pytester) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        defaultTest:
          vars: {kind: greeting}
          threshold: 0.5
          assert:
            - {type: not-icontains, value: goodbye}
        tests:
          - description: inherits everything
            assert: [{type: contains, value: nope}]
          - description: own vars and threshold
            vars: {kind: goodbye}
            threshold: 1
            assert: [{type: contains, value: world}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    # 1: (1 + 0) / 2 = 0.5 >= the default threshold 0.5; 2: (0 + 1) / 2 < its own threshold 1
    assert outcomes(result) == {"inherits_everything": "PASSED", "own_vars_and_threshold": "FAILED"}
    assert (
        "not-icontains 'goodbye' (line 8)" in result.stdout.str()
    )  # the default's assertion, at its own line


def test_csv_tests_and_a_chat_provider_from_promptfoos_simple_csv_example(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLES / "simple_csv", pytester.path, dirs_exist_ok=True)
    answers = {
        ("French", "Hello"): "Bonjour le monde",
        ("French", "hungry"): "J'ai faim",
        ("Pirate", "Hello"): "Ahoy, world!",
        ("Pirate", "hungry"): "Arr, me belly be empty",  # no "grub": the fourth row fails
    }

    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        return next(
            text for (lang, word), text in answers.items() if lang in prompt and word in prompt
        )

    with ChatServer(lambda prompt: None, answer=answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        result = run(pytester)
    # 4 rows × 2 prompts of prompts.txt (split at ---), one provider: no variant suffix
    assert outcomes(result) == {
        **{f"test-{n}-prompt1-{p}": "PASSED" for n in (1, 2, 3) for p in (1, 2)},
        **{f"test-4-prompt1-{p}": "FAILED" for p in (1, 2)},
    }
    assert len(server.requests) == 8
    first = server.requests[0]
    assert first["model"] == "gpt-3.5-turbo"
    assert (
        "- Tone: formal\n- Length: brief" in first["messages"][0]["content"]
    )  # the `load` filter, Nunjucks' way
    assert "icontains 'grub' (line 5)" in result.stdout.str()


@pytest.fixture
def grader(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    """A loopback grader behind the default judge (AGENT_EVAL_LLM_MODEL), passing as told."""

    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Expert answer:" in prompt:  # factuality
            return json.dumps(
                {
                    "choice": "D" if "Lyon" in prompt.split("Submitted answer:")[1] else "C",
                    "reason": "r",
                }
            )
        if "Criterion:" in prompt:  # model-graded-closedqa
            return json.dumps(
                {"answer": "Y" if "emoji" in prompt.split("Criterion:")[1] else "N", "reason": "r"}
            )
        rubric = prompt.split("Rubric:")[1].split("\n")[0]
        ok = "emoji" in rubric
        return json.dumps(
            {"pass": ok, "score": 0.9 if ok else 0.1, "reason": f"graded {rubric.strip()}"}
        )

    with ChatServer(lambda prompt: None, answer=answer) as server:
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "grader")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        yield server


def test_promptfoos_python_provider_example_with_llm_rubric(
    pytester: pytest.Pytester, grader: ChatServer
) -> None:
    shutil.copytree(EXAMPLES / "python_provider", pytester.path, dirs_exist_ok=True)
    result = run(pytester)
    assert outcomes(result) == {
        "test-1-prompt1": "PASSED",
        "test-1-prompt2": "PASSED",
        "test-2-prompt1": "PASSED",
        "test-2-prompt2": "PASSED",
        "test-3-prompt1": "FAILED",
        "test-3-prompt2": "FAILED",
    }
    assert "graded is funny" in result.stdout.str()
    assert len(grader.requests) == 4


def test_model_graded_assertions_and_their_negation(
    pytester: pytest.Pytester, grader: ChatServer
) -> None:
    config(
        pytester,
        """
        prompts: ["{{question}}"]
        providers: [file://provider.py]
        tests:
          - description: factual
            vars: {question: "Capital of France? Paris."}
            assert:
              - {type: factuality, value: Paris is the capital of France}
              - {type: model-graded-closedqa, value: has an emoji or not}
              - {type: not-llm-rubric, value: is rude}
          - description: not factual
            vars: {question: "Capital of France? Lyon."}
            assert:
              - {type: factuality, value: Paris is the capital of France}
          - description: closedqa says no
            vars: {question: hi}
            assert:
              - {type: model-graded-closedqa, value: is in French}
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {
        "factual": "PASSED",
        "not_factual": "FAILED",
        "closedqa_says_no": "FAILED",
    }
    prompts = [r["messages"][-1]["content"] for r in grader.requests]
    assert any(
        "Expert answer: Paris is the capital of France" in p and "Lyon" in p for p in prompts
    )


def test_a_model_graded_assertion_without_an_llm_is_not_scored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_EVAL_LLM_MODEL", raising=False)
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - description: decided without the grader
            vars: {kind: greeting}
            assert:
              - {type: llm-rubric, value: is polite}
              - {type: equals, value: nope}
          - description: undecided without the grader
            vars: {kind: greeting}
            assert:
              - {type: llm-rubric, value: is polite}
              - {type: equals, value: Hello world}
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert (
        outcomes(result)["decided_without_the_grader"] == "FAILED"
    )  # a failed deterministic assertion decides
    result.assert_outcomes(
        failed=1, skipped=1
    )  # the other is never a made-up pass: nothing scored, skipped
    assert (
        "promptfooconfig.yaml:10: nothing scored (promptfoo): not scored: llm-rubric"
        in result.stdout.str()
    )


def test_several_providers_are_a_matrix(pytester: pytest.Pytester) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers:
          - {id: file://provider.py, label: plain}
          - {id: 'python:provider.py:shouty', label: shouty}
        tests:
          - description: greets
            vars: {kind: greeting}
            assert: [{type: equals, value: Hello world}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester, "-k", "greets")
    assert outcomes(result) == {"greets[plain]": "PASSED", "greets[shouty]": "FAILED"}


def test_what_the_plugin_cannot_honour_errors_its_case_saying_what_to_write_instead(
    pytester: pytest.Pytester,
) -> None:
    path = config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - description: javascript
            vars: {kind: greeting}
            assert:
              - {type: javascript, value: output.length < 100}
          - description: similar
            vars: {kind: greeting}
            assert:
              - {type: similar, value: Hello}
          - description: fine
            vars: {kind: greeting}
            assert:
              - {type: equals, value: Hello world}
          - file://more.csv
          - description: tool args
            vars: {kind: tools}
            assert:
              - {type: 'trajectory:tool-args-match', value: {name: get_weather, \
args: {city: Paris}}}
          - description: goal
            vars: {kind: greeting}
            assert:
              - {type: 'trajectory:goal-success', value: greets the user}
          - description: transformed
            vars: {kind: greeting}
            assert: [{type: equals, value: HELLO WORLD, transform: output.toUpperCase()}]
        """,
        provider__py=PROVIDER,
        more__csv="kind,__expected\ngreeting,fn:output.length > 1\ngreeting,icontains:hello\n",
    )
    result = run(pytester)
    assert outcomes(result) == {
        "javascript": "ERROR",
        "similar": "ERROR",
        "fine": "PASSED",
        "test-4": "ERROR",
        "test-5": "PASSED",
        "tool_args": "ERROR",
        "goal": "ERROR",
        "transformed": "ERROR",
    }
    text = " ".join(result.stdout.str().split())
    docs = '(see docs/reference/formats.md, section "promptfoo assertions")'
    assert (
        f"{path.name}:8: not supported: assertion `javascript`; instead write a `python` "
        "assertion: the same expression in Python (`output.startswith('Ahoy')`), a body that "
        f"`return`s, or `file://x.py` with `get_assert(output, context)` {docs}"
    ) in text
    assert (
        f"{path.name}:12: not supported: assertion `similar`; instead write `factuality` with the "
        "expected text as its value, or an `llm-rubric` (`value: says the same as: <text>`)"
    ) in text
    assert (
        "more.csv:2: not supported: assertion `javascript`; instead write a `python` assertion"
        in text
    )
    assert (
        "not supported: assertion `trajectory:tool-args-match`; instead write a `python` "
        "assertion reading the calls' arguments from the output "
        "(`json.loads(output)['tool_calls']`); in a native eval file, the `tool_args` check"
    ) in text
    assert (
        "not supported: assertion `trajectory:goal-success`; instead write an `llm-rubric` "
        "whose value states it"
    ) in text
    assert (
        "not supported: assertion field transform (on `equals`); instead transform the output "
        "inside a `python` assertion"
    ) in text


def test_an_assertion_type_typo_says_did_you_mean_and_points_to_the_docs(
    pytester: pytest.Pytester,
) -> None:
    path = config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - description: typo
            vars: {kind: greeting}
            assert: [{type: contains-alll, value: [Hello, world]}]
          - description: negated typo
            vars: {kind: greeting}
            assert: [{type: not-icontain, value: bye}]
          - description: nothing like it
            vars: {kind: greeting}
            assert: [{type: zebra, value: x}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {
        "typo": "ERROR",
        "negated_typo": "ERROR",
        "nothing_like_it": "ERROR",
    }
    text = " ".join(result.stdout.str().split())
    docs = 'docs/reference/formats.md, section "promptfoo assertions"'
    assert (
        f'{path.name}:7: unknown assertion type `contains-alll` (did you mean "contains-all"?); '
        in text
    )
    assert f"promptfoo's types and what runs: {docs}" in text
    assert 'unknown assertion type `not-icontain` (did you mean "not-icontains"?)' in text
    assert "unknown assertion type `zebra`: not one of promptfoo's" in text
    # the section named exists
    page = (Path(__file__).parents[1] / "docs" / "reference" / "formats.md").read_text()
    assert "\n### promptfoo assertions\n" in page


def test_a_provider_it_cannot_call_errors_every_case_of_that_provider(
    pytester: pytest.Pytester,
) -> None:
    path = config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers:
          - {id: file://provider.py, label: mine}
          - {id: 'ollama:chat:llama3', label: ollama}
        tests:
          - description: greets
            vars: {kind: greeting}
            assert: [{type: equals, value: Hello world}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {"greets[mine]": "PASSED", "greets[ollama]": "ERROR"}
    assert f"{path.name}:5: not supported: provider ollama:chat:llama3" in result.stdout.str()


def test_a_provider_error_fails_its_case(pytester: pytest.Pytester) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - vars: {kind: error}
            assert: [{type: contains, value: x}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {"test-1": "FAILED"}
    assert "upstream refused" in result.stdout.str()


def test_any_yaml_with_promptfoos_shape_is_one_and_vars_lists_expand(
    pytester: pytest.Pytester,
) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}} in {{city}}"]
        providers: [file://provider.py]
        tests:
          - description: cities
            vars: {kind: x, city: [Paris, Rome]}
            assert: [{type: contains, value: '{{city}}'}]
        """,
        name="eval_migrated.yaml",
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {"cities-1": "PASSED", "cities-2": "PASSED"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris", {"type": "equals", "value": "Paris"}),
        ("icontains:bonjour", {"type": "icontains", "value": "bonjour"}),
        ("not-contains:error", {"type": "not-contains", "value": "error"}),
        ("contains-any:Paris,London", {"type": "contains-any", "value": "Paris,London"}),
        ("grade:is polite", {"type": "llm-rubric", "value": "is polite"}),
        (
            "python(0.5):len(output) / 100",
            {"type": "python", "value": "len(output) / 100", "threshold": 0.5},
        ),
        ("is-json", {"type": "is-json"}),
        ("fn:output.length", {"type": "javascript", "value": "output.length"}),
        ("http://x.y: not a type", {"type": "equals", "value": "http://x.y: not a type"}),
    ],
)
def test_csv_assertion_strings(text: str, expected: dict[str, Any]) -> None:
    assert assertion_of_string(text) == expected


def test_validate_and_the_schema_know_promptfoo_configs(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agent_eval.cli import main

    # simple_test has javascript and similar assertions, which the plugin does not run
    assert main(["validate", str(EXAMPLES / "simple_csv"), str(EXAMPLES / "python_provider")]) == 0
    assert "promptfoo, 8 cases: ok" in capsys.readouterr().out
    path = config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - vars: {kind: greeting}
            assert: [{type: javascript, value: "1"}]
        """,
        provider__py=PROVIDER,
    )
    assert main(["validate", str(path)]) == 1
    assert (
        f"{path}:6: not supported: assertion `javascript`; instead write a `python` assertion"
        in (capsys.readouterr().out)
    )
    assert main(["schema", "--format", "promptfoo"]) == 0
    schema = json.loads(capsys.readouterr().out)
    import jsonschema
    import yaml

    for example in [*EXAMPLES.glob("*/promptfooconfig*.yaml")]:
        if example.parent.name == "simple_test":
            continue  # its javascript and similar assertions are not in what runs
        jsonschema.validate(yaml.safe_load(example.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"providers": ["x"], "tests": [{"assert": [{"type": "javascript"}]}]}, schema
        )


CHAT_CONFIG = """
prompts: ["Say hello to {{name}}"]
providers: [openai:chat:gpt-test]
tests:
  - description: cheap enough
    vars: {name: Ada}
    assert: [{type: icontains, value: ada}, {type: cost, threshold: 0.02}]
  - description: too dear
    vars: {name: Bob}
    assert: [{type: cost, threshold: 0.01}]
"""


def test_an_openai_provider_goes_through_the_traffic_hook_record_and_replay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    config(pytester, CHAT_CONFIG)
    # 10 input and 5 output tokens a request (the loopback server's usage) at 1000 per million:
    # 0.015
    pytester.makeini(
        '[pytest]\nagent_eval_prices = {"gpt-test": {"input": 1000, "output": 1000}}\n'
    )
    with ChatServer(
        lambda prompt: None, answer=lambda body: "Hello " + body["messages"][-1]["content"][13:]
    ) as chat:
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        recorded = run(pytester, "--agent-eval-record")
        assert len(chat.requests) == 2
    expected = {"cheap_enough": "PASSED", "too_dear": "FAILED"}
    assert outcomes(recorded) == expected
    assert "cost 0.015, threshold 0.01" in recorded.stdout.str()  # the hook's measure, priced
    assert sorted(
        p.name for p in (pytester.path / "cassettes" / "promptfooconfig").glob("*.yaml")
    ) == [
        "cheap_enough.yaml",
        "too_dear.yaml",
    ]
    replayed = run(pytester, "--agent-eval-replay")  # the server is gone: nothing reaches a socket
    assert outcomes(replayed) == expected
    assert "cost 0.015, threshold 0.01" in replayed.stdout.str()


def test_an_anthropic_provider_sends_the_prompt_through_the_official_client(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("anthropic")
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen: list[dict[str, Any]] = []

    class Messages(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"path": self.path, **body})
            text = "Bonjour " + body["messages"][-1]["content"].split()[-1]
            reply = json.dumps({
                "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 7, "output_tokens": 3},
            }).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Messages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config(
            pytester,
            f"""
            prompts:
              - >-
                [{{"role": "system", "content": "Answer in French."}},
                {{"role": "user", "content": "Greet {{{{name}}}}"}}]
            providers:
              - id: anthropic:messages:claude-test
                config: {{apiBaseUrl: "http://127.0.0.1:{server.server_port}", max_tokens: 50}}
            tests:
              - vars: {{name: Ada}}
                assert: [{{type: equals, value: Bonjour Ada}}]
            """,
        )
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        result = run(pytester)
    finally:
        server.shutdown()
    assert outcomes(result) == {"test-1": "PASSED"}
    assert seen[0]["path"] == "/v1/messages"
    assert seen[0]["system"] == "Answer in French."
    assert seen[0]["messages"] == [{"role": "user", "content": "Greet Ada"}]
    assert seen[0]["max_tokens"] == 50


def test_options_that_change_what_runs_are_not_dropped(pytester: pytest.Pytester) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        defaultTest:
          options: {provider: openai:gpt-4o-mini}
        tests:
          - description: transformed
            vars: {kind: greeting}
            options: {transform: output.toUpperCase()}
            assert: [{type: equals, value: HELLO WORLD}]
          - description: transformed assertion
            vars: {kind: greeting}
            assert: [{type: equals, value: HELLO WORLD, transform: output.toUpperCase()}]
          - description: plain
            vars: {kind: greeting}
            assert: [{type: equals, value: Hello world}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {
        "transformed": "ERROR",
        "transformed_assertion": "ERROR",
        "plain": "PASSED",
    }
    text = result.stdout.str()
    assert "promptfooconfig.yaml:7: not supported: test option `transform`" in text
    assert "promptfooconfig.yaml:13: not supported: assertion field transform (on `equals`)" in text


def test_a_provider_that_does_not_load_fails_its_cases_naming_it(pytester: pytest.Pytester) -> None:
    config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        tests:
          - vars: {kind: greeting}
            assert: [{type: contains, value: x}]
        """,
        provider__py="def call_api(prompt, options, context):\n    return 1\n"
        "raise ImportError('no sdk')\n",
    )
    result = run(pytester)
    assert outcomes(result) == {"test-1": "FAILED"}
    assert (
        "promptfooconfig.yaml:3: agent 'file://provider.py': the Python provider"
        in result.stdout.str()
    )
    assert "could not be loaded: ImportError: no sdk" in result.stdout.str()


def test_a_test_without_assertions_passes_with_score_1_as_in_promptfoo(
    pytester: pytest.Pytester,
) -> None:
    config(pytester, 'prompts: ["{{kind}}"]\nproviders: [file://provider.py]\n'
                     "tests: [{vars: {kind: greeting}}]\n", provider__py=PROVIDER)  # fmt: skip
    result = run(pytester, "--agent-eval-report", "report.json")
    assert outcomes(result) == {"test-1": "PASSED"}
    (case,) = json.loads((pytester.path / "report.json").read_text())["cases"]
    assert case["score"] == 1.0


def pirate(body: dict[str, Any]) -> str:
    """The loopback model of promptfoo's simple-test example: a pirate (and its rubric's grader)."""
    prompt = body["messages"][-1]["content"]
    if "Rubric:" in prompt:
        return json.dumps({"pass": True, "score": 1.0, "reason": "spoken like a pirate"})
    said = prompt.rsplit(": ", 1)[1]
    answers = {
        "Yes": "Yarr",
        "I'm hungry": "Arr, I be needin' some grub",
        "Output the story of your life in JSON": '{"life": "at sea"}',
        "Hello world": "Ahoy, world",
        "The quick brown fox jumps over the lazy dog": "Arrr, the quick brown fox "
        "leaps o'er the lazy dog",
    }
    return answers.get(said, f"Arr? {said}")


@pytest.fixture
def simple_test(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    """promptfoo's own ``examples/simple-test`` (see tests/promptfoo_examples) vs the pirate."""
    shutil.copytree(EXAMPLES / "simple_test", pytester.path, dirs_exist_ok=True)
    with ChatServer(lambda prompt: None, answer=pirate) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "grader")
        yield server


def test_a_promptfoo_config_is_read_as_promptfoo_reads_yaml(
    pytester: pytest.Pytester, simple_test: ChatServer
) -> None:
    """js-yaml's YAML 1.2 core schema: ``body: Yes`` is the text "Yes" (PyYAML's 1.1: ``True``)."""
    result = run(pytester, "-k", "exact_match")
    assert outcomes(result) == {
        "check_for_exact_match-prompt1-1": "PASSED",
        "check_for_exact_match-prompt1-2": "PASSED",
    }
    sent = [r["messages"][-1]["content"] for r in simple_test.requests]
    assert "Rephrase this from English to Pirate: Yes" in sent
    # a native file keeps YAML 1.1's reading, as before
    (pytester.path / "eval_native.yaml").write_text(
        "cases:\n  - id: yes-no\n    input: x\n    metadata: {ok: Yes}\n"
    )
    from pytest_agent_eval.core.document import read_document

    assert read_document(pytester.path / "eval_native.yaml").data["cases"][0]["metadata"] == {
        "ok": True
    }
    core = read_document(pytester.path / "promptfooconfig.yaml", core=True)
    assert core.data["tests"][0]["vars"] == {"body": "Yes"}
    assert core.line(("tests", 0, "vars")) == 10  # lines kept


def test_yaml_core_schema_scalars_as_js_yaml_reads_them(tmp_path: Path) -> None:
    from pytest_agent_eval.core.document import read_document

    text = (
        "a: Yes\nb: on\nc: 0755\nd: 2024-01-02\ne: true\nf: ~\ng: 1_000\nh: 0x1F\ni: 0o17\nj: NO\n"
        "k: 12:30\nl: 1e3\n"
    )
    data = read_document(tmp_path / "promptfooconfig.yaml", text, core=True).data
    assert data == {
        "a": "Yes", "b": "on", "c": 755, "d": "2024-01-02", "e": True, "f": None, "g": 1000,
        "h": 31, "i": 15, "j": "NO", "k": "12:30", "l": 1000.0,
    }  # fmt: skip


def test_promptfoos_simple_test_example_runs_every_case_its_ref_resolved(
    pytester: pytest.Pytester, simple_test: ChatServer
) -> None:
    """``$ref: '#/assertionTemplates/…'`` refers inside the config: the test using it runs it."""
    result = run(pytester)
    found = outcomes(result)
    assert len(found) == 10  # 5 tests × the 2 prompts of prompts.txt
    assert {k: v for k, v in found.items() if v != "PASSED"} == {
        # javascript and similar: what to write instead
        "check_for_semantic_similarity-prompt1-1": "ERROR",
        "check_for_semantic_similarity-prompt1-2": "ERROR",
    }
    assert any(
        "Rubric: Is spoken like a pirate" in r["messages"][-1]["content"]
        for r in simple_test.requests
    )


def test_promptfoos_python_assert_example_gets_its_config(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """promptfoo's ``examples/python-assert``: ``config: {fruitList: …}`` reaches ``get_assert``.

    It arrives as ``context["config"]``.
    """
    shutil.copytree(EXAMPLES / "python_assert", pytester.path, dirs_exist_ok=True)
    (pytester.path / "promptfooconfig-external.yaml").rename(pytester.path / "promptfooconfig.yaml")
    with ChatServer(
        lambda prompt: None, answer=lambda body: "Passion fruit, banana, guava"
    ) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        result = run(pytester, "--agent-eval-report", "report.json")
    assert outcomes(result) == {"test-1": "PASSED"}
    (case,) = json.loads((pytester.path / "report.json").read_text())["cases"]
    assert case["score"] == 1.0


def test_a_ref_that_points_nowhere_errors_only_the_test_that_uses_it(
    pytester: pytest.Pytester,
) -> None:
    path = config(
        pytester,
        """
        prompts: ["{{kind}}"]
        providers: [file://provider.py]
        assertionTemplates:
          greets: {type: contains, value: Hello}
        tests:
          - description: uses a template
            vars: {kind: greeting}
            assert: [{$ref: '#/assertionTemplates/greets'}]
          - description: a typo in the reference
            vars: {kind: greeting}
            assert: [{$ref: '#/assertionTemplates/greet'}]
          - description: another file
            vars: {kind: greeting}
            assert: [{$ref: 'templates.yaml#/greets'}]
        """,
        provider__py=PROVIDER,
    )
    result = run(pytester)
    assert outcomes(result) == {
        "uses_a_template": "PASSED",
        "a_typo_in_the_reference": "ERROR",
        "another_file": "ERROR",
    }
    text = result.stdout.str()
    assert (
        f"{path.name}:12: $ref '#/assertionTemplates/greet': the config has nothing at that path"
        in text
    )
    assert (
        f"{path.name}:15: not supported: $ref 'templates.yaml#/greets' (only references inside"
        in text
    )


def test_the_formats_page_lists_every_promptfoo_assertion_type_with_its_status() -> None:
    """promptfoo's assertion types, each a row of the docs' table: whether it runs, else what to do.

    The types are its ``BaseAssertionTypesSchema`` and special types; what to write instead uses the
    same words as the error.
    """
    from pytest_agent_eval.checks.promptfoo import SUPPORTED
    from pytest_agent_eval.checks.promptfoo_types import ALIASES, ALL_TYPES, INSTEAD

    page = (Path(__file__).parents[1] / "docs" / "reference" / "formats.md").read_text()
    section = page.split("\n### promptfoo assertions\n", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            name, status, how = (cell.strip() for cell in line.strip("|").split(" | ", 2))
            rows[name.strip("`")] = (status, how)
    assert set(rows) == ALL_TYPES
    # promptfoo's src/types/index.ts, BaseAssertionTypesSchema + SpecialAssertionTypesSchema
    promptfoos = {
        "answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any",
        "contains-html", "contains-json", "contains-sql", "contains-xml", "context-faithfulness",
        "context-recall", "context-relevance", "conversation-relevance", "cost", "equals",
        "factuality", "finish-reason", "g-eval", "gleu", "guardrails", "icontains", "icontains-all",
        "icontains-any", "is-html", "is-json", "is-refusal", "is-sql", "is-valid-function-call",
        "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml", "javascript",
        "latency", "levenshtein", "llm-rubric", "pi", "meteor", "model-graded-closedqa",
        "model-graded-factuality", "moderation", "perplexity", "perplexity-score", "python",
        "regex", "rouge-n", "ruby", "similar", "similar:cosine", "similar:dot", "similar:euclidean",
        "starts-with", "tool-call-f1", "skill-used", "trajectory:goal-success",
        "trajectory:tool-args-match", "trajectory:step-count", "trajectory:tool-sequence",
        "trajectory:tool-used", "trace-error-spans", "trace-span-count", "trace-span-duration",
        "search-rubric", "webhook", "word-count", "select-best", "human", "max-score",
    }  # fmt: skip
    assert promptfoos | {"assert-set", "promptfoo:redteam:*"} == ALL_TYPES
    for name, (status, how) in rows.items():
        runs = name in SUPPORTED or name in ALIASES or name == "assert-set"
        assert status == ("runs" if runs else "not run: errors its case"), name
        if not runs:
            instead = INSTEAD[name].removeprefix("none: ")
            assert how.replace("\\|", "|").lower().endswith(instead.lower()), name


def test_factuality_reads_promptfoos_category_and_an_unreadable_reply_is_no_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """promptfoo's own grader replies ``{"category": "A", "reason": …}``; ``choice`` is read too.

    A reply with neither is no verdict (an error naming the reply), never a failure.
    """

    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Expert answer:" not in prompt:
            return prompt
        submitted = prompt.split("Submitted answer:")[1]
        if "Lyon" in submitted:
            return json.dumps({"category": "D", "reason": "disagrees"})
        if "Nice" in submitted:
            return "I think they are about the same."
        return json.dumps({"category": "C", "reason": "same details"})

    config(
        pytester,
        """
        prompts: ["{{answer}}"]
        providers: [openai:gpt-4.1-mini]
        tests:
          - description: agrees
            vars: {answer: Paris is the capital of France}
            assert: [{type: factuality, value: Paris is the capital of France}]
          - description: disagrees
            vars: {answer: Lyon is the capital of France}
            assert: [{type: factuality, value: Paris is the capital of France}]
          - description: unreadable grader
            vars: {answer: Nice is the capital of France}
            assert: [{type: factuality, value: Paris is the capital of France}]
        """,
    )
    with ChatServer(lambda prompt: None, answer=answer) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "grader")
        result = run(pytester)
    assert outcomes(result) == {
        "agrees": "PASSED",
        "disagrees": "FAILED",
        "unreadable_grader": "FAILED",
    }
    text = result.stdout.str()
    # a check without a verdict is never a pass; it has no score and says so, as the plugin's judge
    # does
    assert (
        "case unreadable_grader failed: 1 of 1 checks failed, 1 without a verdict (no score)"
        in text
    )
    assert (
        "no verdict: factuality 'Paris is the capital of France' (line 13): judge reply unreadable"
        in text
    )
    assert (
        "case disagrees failed: 1 of 1 checks failed (score 0.00)" in text
    )  # a verdict: D scores 0


def test_vars_reach_the_prompt_as_promptfoo_reads_them(pytester: pytest.Pytester) -> None:
    """``Yes``, ``on``, ``0755`` and a date, plain in the YAML: the prompt gets what js-yaml reads.

    That is text, 755 and the date as written, in the config and in a ``file://`` tests file alike.
    """
    config(
        pytester,
        """
        prompts: ["{{body}} {{flag}} {{mode}} {{day}}"]
        providers: [file://provider.py]
        tests:
          - description: inline
            vars: {body: Yes, flag: on, mode: 0755, day: 2024-01-02}
            assert: [{type: equals, value: Yes on 755 2024-01-02}]
          - file://more.yaml
        """,
        provider__py=PROVIDER,
        more__yaml="- description: from a file\n"
        "  vars: {body: No, flag: off, mode: 010, day: 2024-01-02}\n"
        "  assert: [{type: equals, value: No off 10 2024-01-02}]\n",
    )
    result = run(pytester)
    assert outcomes(result) == {"inline": "PASSED", "from_a_file": "PASSED"}


def test_a_key_yaml_1_1_reads_as_a_boolean_is_text_in_a_promptfoo_config(
    pytester: pytest.Pytester,
) -> None:
    """``on:`` and ``yes:`` as keys: YAML 1.1 booleans (an error), under promptfoo their text."""
    config(
        pytester,
        """
        prompts: ["{{on}} {{yes}}"]
        providers: [file://provider.py]
        tests:
          - vars: {on: go, yes: sir}
            assert: [{type: equals, value: go sir}]
        """,
        provider__py=PROVIDER,
    )
    assert outcomes(run(pytester)) == {"test-1": "PASSED"}
