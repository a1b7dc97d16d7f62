"""The LLM judge (SPEC §8): what it is shown, how its reply is read; no reply ever reads as pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import ChatServer

from pytest_agent_eval.checks import CheckContext, CheckError, builtin_registry, evaluate
from pytest_agent_eval.checks.judge import judge, read_score
from pytest_agent_eval.core.case import Case
from pytest_agent_eval.core.results import RunRecord, ToolCall
from pytest_agent_eval.llm import default_llm


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 0.8, "reason": "complete"}', 0.8),
        ('```json\n{"score": 0.4, "reason": "misses the refund"}\n```', 0.4),
        ('Here is my grade: {"score": 1, "reason": "all good"}', 1.0),
        ("Poor answer. Score: 2/10", 0.2),
        ("I would rate it 7/10.", 0.7),
        ("70%", 0.7),
        ("score: 0.35 - the answer dodges the question", 0.35),
        ("Score: 7/10 (70%)", 0.7),  # two forms, one score
    ],
)
def test_readable_replies(reply: str, score: float) -> None:
    assert read_score(reply)[0] == pytest.approx(score)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Poor answer.", ""),
        ("Looks great to me, 10 out of 10!", ""),
        ("score: 7", "outside 0..1"),  # 7 of what?
        ('{"score": 1.5, "reason": "excellent"}', "outside 0..1"),
        ('{"verdict": "pass"}', "without a `score`"),
        ('{"score": true}', "not a number"),
        ("Score: 8/10, though only 30% of the steps are right", "several scores"),
        ("", ""),
    ],
)
def test_unreadable_replies_are_errors(reply: str, why: str) -> None:
    with pytest.raises(CheckError, match="judge reply unreadable") as info:
        read_score(reply)
    assert why in str(info.value)


def _ctx(llm: Any, tmp_path: Path | None = None, **case: Any) -> CheckContext:
    path = (tmp_path or Path("/nonexistent")) / "eval_x.yaml"
    return CheckContext(
        case=Case(id="c", path=path, line=3, query=case.pop("query", "Refund order 7"), **case),
        llm=llm,
    )


class Scripted:
    """An ``agent_eval_llm`` replying from a list; it records each prompt and its options."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []
        self.options: list[dict[str, Any]] = []

    def __call__(self, messages: list[dict[str, str]], **options: Any) -> str:
        self.prompts.append(messages[-1]["content"])
        self.options.append(options)
        return self.replies.pop(0)


RUN = RunRecord(output="Refunded.", tool_calls=[ToolCall("refund_order", {"order_id": 7})])


def test_a_prose_score_below_the_threshold_fails() -> None:
    result = judge(
        RUN, {"rubric": "helpful", "min_score": 0.7}, _ctx(Scripted("Poor answer. Score: 2/10"))
    )
    assert (result.passed, result.score) == (False, pytest.approx(0.2))
    assert result.message == "judge scored 0.20 < 0.7: Poor answer. Score: 2/10"


def test_an_unreadable_reply_errors_and_never_passes() -> None:
    [result] = evaluate(
        RUN, {"judge": "helpful"}, _ctx(Scripted("Looks fine.")), builtin_registry()
    )
    assert (result.passed, result.error, result.scored) == (False, True, False)
    assert result.message.startswith("judge reply unreadable: 'Looks fine.'")


def test_the_judge_sees_input_answer_tool_calls_and_asks_for_json() -> None:
    llm = Scripted('{"score": 0.9, "reason": "ok"}')
    result = judge(RUN, "refunds the right order", _ctx(llm))
    assert result.passed
    [prompt] = llm.prompts
    for shown in (
        "refunds the right order",
        "Refund order 7",
        "Refunded.",
        '"refund_order"',
        '"order_id": 7',
    ):
        assert shown in prompt
    assert llm.options == [{"response_format": {"type": "json_object"}}]


def test_the_judge_of_a_conversation_sees_the_transcript() -> None:
    llm = Scripted('{"score": 0.9, "reason": "ok"}')
    history = [
        {"role": "user", "content": "Hi, order 7"},
        {"role": "assistant", "content": "What about it?"},
    ]
    run = RunRecord(output="Refunded.", history=history)
    judge(run, "polite", _ctx(llm, query=""))
    assert "user: Hi, order 7\n  assistant: What about it?" in llm.prompts[0]


def test_an_llm_of_messages_alone_still_works() -> None:
    seen: list[str] = []

    def llm(messages: list[dict[str, str]]) -> str:
        seen.append(messages[-1]["content"])
        return '{"score": 0.2, "reason": "rude"}'

    result = judge(RUN, "polite", _ctx(llm))
    assert (result.passed, len(seen)) == (False, 1)


def test_a_failed_llm_call_is_shown_as_that_error() -> None:
    def llm(messages: list[dict[str, str]], **options: Any) -> str:
        raise ConnectionError("Connection error.")

    [result] = evaluate(RUN, {"judge": "helpful"}, _ctx(llm), builtin_registry())
    assert (result.passed, result.error) == (False, True)
    assert result.message == "judge LLM call failed: ConnectionError: Connection error."
    assert result.expected == "helpful" and result.actual == f"no verdict: {result.message}"


def test_samples_are_averaged_at_a_temperature_above_zero() -> None:
    llm = Scripted('{"score": 0.5}', '{"score": 0.7}', '{"score": 0.9}')
    result = judge(RUN, {"rubric": "helpful", "samples": 3}, _ctx(llm))
    assert (result.passed, result.score) == (True, pytest.approx(0.7))
    assert [o.get("temperature") for o in llm.options] == [1.0, 1.0, 1.0]


def test_one_unreadable_sample_is_no_verdict() -> None:
    with pytest.raises(CheckError, match="judge reply unreadable"):
        judge(RUN, {"rubric": "helpful", "samples": 2}, _ctx(Scripted('{"score": 0.9}', "great")))


def test_own_prompt_from_a_template_file(tmp_path: Path) -> None:
    (tmp_path / "judge.txt").write_text(
        'Grade {output!r} for {rubric}; calls {tool_calls}. JSON {{"score": x}}'
    )
    llm = Scripted('{"score": 1}')
    judge(RUN, {"rubric": "brevity", "prompt": "judge.txt"}, _ctx(llm, tmp_path))
    assert llm.prompts == [
        'Grade \'Refunded.\' for brevity; calls [{"tool": "refund_order", "args": {"order_id": '
        '7}}]. JSON {"score": x}'
    ]


def test_a_bad_template_names_its_fields(tmp_path: Path) -> None:
    (tmp_path / "judge.txt").write_text("Grade {answer}")
    with pytest.raises(
        CheckError,
        match=r"judge prompt .*judge.txt: bad template \(KeyError: 'answer'\); its fields",
    ):
        judge(RUN, {"rubric": "x", "prompt": "judge.txt"}, _ctx(Scripted(), tmp_path))


def test_own_prompt_from_a_function(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        my_prompts="def grade(run, case, rubric):\n"
        "    return f'{case.id}: {run.output} / {rubric}'\n"
    )
    pytester.syspathinsert()
    llm = Scripted('{"score": 1}')
    judge(RUN, {"rubric": "brevity", "prompt": "my_prompts:grade"}, _ctx(llm))
    assert llm.prompts == ["c: Refunded. / brevity"]


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    """A loopback endpoint whose every reply is a judge's JSON; the default client talks to it."""

    class JudgeServer(ChatServer):
        json_mode = True

        def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            self.requests.append(body)
            if "response_format" in body and not self.json_mode:
                return 400, {"error": {"message": "response_format is not supported"}}
            message = {"role": "assistant", "content": '{"score": 0.9, "reason": "fine"}'}
            return 200, {"id": "x", "object": "chat.completion", "created": 0,
                         "model": body["model"],
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "stop"}]}  # fmt: skip

    with JudgeServer(lambda prompt: None) as chat:
        monkeypatch.setenv("AGENT_EVAL_LLM_MODEL", "judge-model")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("OPENAI_BASE_URL", chat.base_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        yield chat


def test_the_default_llm_sends_the_options(judge_server: ChatServer) -> None:
    llm = default_llm()
    assert llm is not None
    result = judge(RUN, "helpful", _ctx(llm))
    assert (result.passed, result.score) == (True, 0.9)
    [body] = judge_server.requests
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}


def test_the_default_llm_drops_json_mode_where_the_endpoint_has_none(
    judge_server: ChatServer,
) -> None:
    judge_server.json_mode = False  # type: ignore[attr-defined]
    llm = default_llm()
    assert llm is not None
    assert judge(RUN, "helpful", _ctx(llm)).passed
    assert judge(RUN, "helpful", _ctx(llm)).passed
    sent = ["response_format" in body for body in judge_server.requests]
    assert sent == [True, False, False]  # rejected once, then no longer sent


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages, **options):
        if "DOWN" in messages[-1]["content"]:
            raise ConnectionError("Connection error.")
        return {replies!r}[messages[-1]["content"].split("Rubric: ")[1].split("\\n")[0]]
    return llm
"""


def test_judge_verdicts_as_a_user_sees_them(evals: pytest.Pytester) -> None:
    replies = {
        "polite": "Poor answer. Score: 2/10",
        "helpful": "Looks fine.",
        "kind": '{"score": 0.9}',
    }
    evals.makeconftest(CONFTEST.format(replies=replies))
    evals.makefile(
        ".yaml",
        eval_judged="""\
agent: scripted:run
cases:
  - {id: prose, input: q, context: {say: Refunded.}, expect: {judge: polite}}
  - id: unreadable
    input: q
    min_score: 0.5
    context: {say: Refunded.}
    expect: {contains: [refunded], judge: helpful}
  - {id: down, input: q, context: {say: Refunded.}, expect: {judge: DOWN}}
  - {id: good, input: q, context: {say: Refunded.}, expect: {judge: kind}}
""",
    )
    result = evals.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*✗ judge: judge scored 0.20 < 0.7: Poor answer. Score: 2/10 (score 0.20)",
            "case unreadable failed: * checks failed, 1 without a verdict (no score)",
            "  ✗ judge: judge reply unreadable: 'Looks fine.'; the judge must reply *score: 0.7)",
            "case down failed: 1 of 1 checks failed, 1 without a verdict (no score)",
            "  ✗ judge: judge LLM call failed: ConnectionError: Connection error.",
            "PASSED eval_judged.yaml::good",
        ]
    )
    assert "expected: None" not in result.stdout.str()


NO_LLM_FILE = """\
agent: scripted:run
cases:
  - {id: judged_only, input: q, context: {say: Refunded.}, expect: {judge: polite}}
  - {id: judged_and_checked, input: q, context: {say: Refunded.}, expect: {contains: [refunded], \
judge: polite}}
"""


def test_a_judge_without_an_llm_is_not_scored(
    evals: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_EVAL_LLM_MODEL", raising=False)
    evals.makefile(".yaml", eval_nollm=NO_LLM_FILE)
    result = evals.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(
        passed=1, skipped=1
    )  # never a failure, and never a pass with nothing scored
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1] eval_nollm.yaml:3: nothing scored (judge): not scored: no LLM *"]
    )


def test_require_llm_fails_a_judge_without_an_llm(
    evals: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_EVAL_LLM_MODEL", raising=False)
    evals.makefile(".yaml", eval_nollm=NO_LLM_FILE)
    result = evals.runpytest("-p", "no:cacheprovider", "--agent-eval-require-llm")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*✗ judge: needs an LLM (--agent-eval-require-llm): not scored: no LLM configured*"]
    )


def test_a_judge_inside_a_turn_gets_the_llm(evals: pytest.Pytester) -> None:
    evals.makeconftest(CONFTEST.format(replies={"kind": '{"score": 0.9}', "polite": "Score: 2/10"}))
    evals.makefile(
        ".yaml",
        eval_turns="""\
agent: scripted:run
cases:
  - id: talk
    context: {say: Refunded.}
    turns:
      - {input: hello, expect: {judge: kind}}
      - {input: refund please, expect: {judge: polite}}
""",
    )
    result = evals.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*✓ turn 1: judge*", "*✗ turn 2: judge: judge scored 0.20 < 0.7*"])


class Opaque:
    """A value JSON cannot hold, with Python's default repr (``<… Opaque object at 0x7f…>``)."""


def test_no_prompt_carries_a_memory_address() -> None:
    """A recorded judge request must match on replay (SPEC §17): an object's address may differ."""
    from pytest_agent_eval.checks.scorers import grounding

    run = RunRecord(
        output="Refunded.",
        tool_calls=[ToolCall("refund_order", {"order": Opaque()}, result=Opaque())],
    )
    llm = Scripted('{"score": 0.9, "reason": "ok"}', '{"score": 0.9, "reason": "ok"}')
    judge(run, "refunds the right order", _ctx(llm))
    grounding(run, {"contains": ["Refunded"]}, _ctx(llm))
    assert len(llm.prompts) == 2
    for prompt in llm.prompts:
        assert "Opaque object" in prompt and " at 0x" not in prompt


REFERENCE_CONFTEST = """
import re
import pytest

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages, **options):
        prompt = messages[-1]["content"]
        answer = prompt.split("Agent answer: ")[1].strip()
        single = re.search(r"^Reference answer \\(.*?\\): (.*)$", prompt, re.M)
        facts = [single.group(1)] if single else re.findall(r"^  - (.*)$", prompt, re.M)
        missing = [fact for fact in facts if fact.lower() not in answer.lower()]
        return '{"score": %d, "reason": "%s"}' % (0 if missing or not facts else 1, \
"; ".join(missing) or "agrees")
    return llm
"""


def test_the_judge_compares_the_answer_with_a_reference(evals: pytest.Pytester) -> None:
    """`judge: {rubric, reference}` and a case's `reference:` are shown to the judge.

    A fact list is shown as facts; the rubric may be left out when a reference is given.
    """
    evals.makeconftest(REFERENCE_CONFTEST)
    evals.makefile(
        ".yaml",
        eval_reference="""\
agent: scripted:run
cases:
  - {id: case_ref_pass, input: q, context: {say: Paris is the capital}, reference: Paris, \
expect: {judge: correct}}
  - {id: case_ref_fail, input: q, context: {say: Lyon is the capital}, reference: Paris, \
expect: {judge: correct}}
  - id: facts_pass
    input: q
    context: {say: 'Refund of 20 EUR within 5 days'}
    expect: {judge: {reference: [20 EUR, 5 days]}}
  - id: facts_fail
    input: q
    context: {say: 'Refund of 20 EUR'}
    expect: {judge: {rubric: states the refund terms, reference: [20 EUR, 5 days]}}
""",
    )
    result = evals.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "PASSED eval_reference.yaml::case_ref_pass",
            "PASSED eval_reference.yaml::facts_pass",
            "  ✗ judge: judge scored 0.00 < 0.7: Paris (score 0.00)",
            "      expected: score >= 0.7: correct (reference: Paris)",
            "  ✗ judge: judge scored 0.00 < 0.7: 5 days (score 0.00)",
            "      expected: score >= 0.7: states the refund terms (reference: 20 EUR; 5 days)",
        ]
    )
