"""The conversation-evaluation job (SPEC §12) runs unchanged as two items, scored as at home."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
from dialect_support import run_evals, seed_file

# A job in the home project's format (the README example's shape), written for these tests.
OWN_JOB = """\
evaluator:
  name: Socrates
  voice: "You speak like a friendly, relaxed human"
  signoff: "So Long, and Thanks for All the Fish"
  temperature: 0.5
target:
  user: test-user
  chatbot: my-agent
aspirationalAverage: 3000  # milliseconds
greetings: [Hello, Hi, Hey]
tasks:
  - type: task
    task: "Ask the assistant to create a reminder for tomorrow at 9am"
    acceptanceCriteria: "A reminder entity is created with the correct date and time"
  - type: question
    task: "Ask what the capital of France is"
    acceptanceCriteria: "The assistant correctly answers Paris"
facts:
  - "The user's timezone is Australia/Sydney"
assertions:
  - expression: "objectContext.resources.size == 1"
    weight: 2
  - cypher: "MATCH (r:Reminder) RETURN count(r) AS count"
    expected: 1
    weight: 3
"""

# The agent keeps reminders in a file the graph stand-in reads; the first attempt at each message
# fails once.
AGENT = """
import json, pathlib

STORE = pathlib.Path(__file__).with_name("reminders.json")
ATTEMPTS = {}

def run(query, context):
    key = (query, len(context.get("history", [])))
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if query.startswith("Please create") and ATTEMPTS[key] % 2 == 1:
        raise ConnectionError("agent service hiccup")
    if query.startswith("Please create"):
        reminders = json.loads(STORE.read_text()) if STORE.exists() else []
        STORE.write_text(json.dumps(reminders + [{"at": "tomorrow 9am", \
"user": context["target"]["user"]}]))
        return "Done: reminder set for tomorrow at 9am."
    if "capital of France" in query:
        return "The capital of France is Paris."
    return "Hello! How can I help?"
"""

# Scripted LLM: the user pursues its tasks in order, then signs off; the scorer returns fixed task
# scores.
CONFTEST = """
import json, pathlib, re
import pytest

STORE = pathlib.Path(__file__).with_name("reminders.json")

@pytest.fixture(scope="session")
def agent_eval_llm():
    def llm(messages, **options):
        if messages[-1]["content"].startswith("You score a conversation"):
            return json.dumps({"tone": 0.9, "tasks": [
                {"scored": "Ask the assistant to create a reminder for tomorrow at \
9am", "score": 0.8},
                {"scored": "Ask what the capital of France is", "score": 0.6},
            ]})
        system = messages[0]["content"]
        tasks = re.findall(r"^\\d+\\. \\[\\w+\\] (.*)$", system, re.M)
        signoff = re.search(r'contains exactly: "(.*)"', system).group(1)
        said = sum(m["role"] == "assistant" for m in messages[1:]) - 1  # the greeting is the first
        if said == 0 and "reminder" in tasks[0]:
            return "Please create a reminder for tomorrow at 9am."
        if said == 1:
            return "What is the capital of France?"
        return "Great, " + signoff
    return llm

class Graph:
    \"\"\"A driver-shaped stand-in: Cypher counting reminders reads the agent's store.\"\"\"
    def session(self):
        return self
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def run(self, query):
        assert query == "MATCH (r:Reminder) RETURN count(r) AS count", query
        return [[len(json.loads(STORE.read_text())) if STORE.exists() else 0]]

@pytest.fixture(scope="session")
def agent_eval_neo4j():
    return Graph()
"""

HOOK = """

def pytest_agent_eval_evaluate_assertion(assertion, run, case):
    if assertion["expression"] == "objectContext.resources.size == 1":
        return any("reminder set" in m["content"] for m in run.history if m["role"] == "assistant")
    return None
"""


def home_composite(
    timing: float, tasks: list[float], assertions: list[tuple[bool, float]], failures: int
) -> float:
    """The home project's formula, written out."""
    task = sum(tasks) / len(tasks)
    assertion = sum(w for ok, w in assertions if ok) / sum(w for _, w in assertions)
    return max(0.0, (timing + task * 2 + assertion * 4) / 7 - min(failures * 0.3, 0.5))


def _job(pytester: pytest.Pytester, source: str, hook: bool = True) -> None:
    pytester.makepyfile(job_agent=AGENT)
    pytester.makeconftest(CONFTEST + (HOOK if hook else ""))
    pytester.syspathinsert()
    if source == "seed":
        shutil.copy(
            seed_file("embabel/readme-example-job.yml"), pytester.path / "readme-example-job.yml"
        )
    else:
        (pytester.path / "readme-example-job.yml").write_text(OWN_JOB)


@pytest.mark.parametrize("source", ["own", "seed"])
def test_a_job_runs_as_two_items_scored_with_the_home_formula(
    pytester: pytest.Pytester, source: str
) -> None:
    _job(pytester, source)
    xml = pytester.path / "junit.xml"
    report = pytester.path / "report.json"
    result = run_evals(
        pytester,
        "readme-example-job.yml",
        "--agent",
        "job_agent:run",
        f"--junitxml={xml}",
        f"--agent-eval-report={report}",
        "-v",
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "readme-example-job.yml::readme-example-job[without_facts] FAILED" in out
    assert "readme-example-job.yml::readme-example-job[with_facts] FAILED" in out
    # first conversation: one reminder in the graph, every assertion passes; the second adds a
    # second reminder
    first = home_composite(1.0, [0.8, 0.6], [(True, 2), (True, 3)], failures=1)
    second = home_composite(1.0, [0.8, 0.6], [(True, 2), (False, 3)], failures=1)
    assert round(first, 2) == 0.61 and round(second, 2) == 0.27
    result.stdout.fnmatch_lines(
        [
            "case readme-example-job?without_facts? failed: timing 1.00, tasks 0.70, assertions "
            f"1.00 (5/5 by weight), penalty 0.30 → {first:.2f} < 0.70",
            "*✗ penalty: 1 failed agent call, retried: penalty 0.30 (score 0.70)",
            "*agent call failed, retried (1/3): agent raised ConnectionError: agent service hiccup",
            "*✓ assertion 1: expression objectContext.resources.size == 1",
            "*✓ assertion 2: cypher MATCH (r:Reminder) RETURN count(r) AS count",
            "case readme-example-job?with_facts? failed: timing 1.00, tasks 0.70, assertions "
            f"0.40 (2/5 by weight), penalty 0.30 → {second:.2f} < 0.70",
            "*✗ assertion 2: cypher MATCH (r:Reminder) RETURN count(r) AS count: value "
            "differs (score 0.00)",
            "*expected: 1",
            "*actual:   2",
        ]
    )
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    }
    assert {name: float(p["score"]) for name, p in props.items()} == {
        "readme-example-job[without_facts]": round(first, 3),
        "readme-example-job[with_facts]": round(second, 3),
    }
    parts = ("timing", "tasks", "assertions", "penalty", "ended")
    with_facts = props["readme-example-job[with_facts]"]
    assert [with_facts[p] for p in parts] == ["1.000", "0.700", "0.400", "0.300", "signoff"]
    # the JSON report's record: the composite, its parts, and the transcript with each message's
    # latency
    records = {r["case_id"]: r for r in json.loads(report.read_text())["cases"]}
    record = records["readme-example-job[with_facts]"]
    assert (
        record["score"] == pytest.approx(second) and record["conversation"]["assertions"] == "0.400"
    )
    assert [m["role"] for m in record["transcript"]] == ["user", "assistant"] * 3 + ["user"]
    assert all(isinstance(m["latency_s"], float) for m in record["transcript"])


def test_the_greeting_comes_first_and_the_transcript_is_shown_with_latencies(
    pytester: pytest.Pytester,
) -> None:
    _job(pytester, "own")
    result = run_evals(pytester, "readme-example-job.yml", "--agent", "job_agent:run", "-v")
    out = result.stdout.str()
    transcript = out.split("Captured transcript call")[1]
    first = re.search(r"^\s+1\. user \(0\.000 s\): (\w+)$", transcript, re.M)
    assert first is not None and first.group(1) in ("Hello", "Hi", "Hey"), transcript
    assert re.search(
        r"^\s+2\. assistant \(\d+\.\d{3} s\): Hello! How can I help\?$", transcript, re.M
    ), transcript
    assert "So Long, and Thanks for All the Fish" in transcript


def test_an_expression_nothing_evaluates_is_not_scored_and_the_rest_scores(
    pytester: pytest.Pytester,
) -> None:
    _job(pytester, "own", hook=False)
    result = run_evals(
        pytester, "readme-example-job.yml", "--agent", "job_agent:run", "-k", "without_facts"
    )
    result.assert_outcomes(failed=1)
    expected = home_composite(1.0, [0.8, 0.6], [(True, 3)], failures=1)
    result.stdout.fnmatch_lines(
        [
            "*timing 1.00, tasks 0.70, assertions 1.00 (3/3 by weight), penalty 0.30 → "
            f"{expected:.2f} < 0.70",
            "*✓ assertion 1: expression objectContext.resources.size == 1 (not scored)",
            "*not scored: no plugin evaluates expressions; implement the hook "
            "pytest_agent_eval_evaluate_assertion(assertion, run, case) in conftest.py",
        ]
    )


def test_max_turns_counts_every_message_and_aborts_still_scored(pytester: pytest.Pytester) -> None:
    _job(pytester, "own")
    job = pytester.path / "readme-example-job.yml"
    job.write_text(job.read_text() + "maxTurns: 4\n")
    result = run_evals(pytester, str(job), "--agent", "job_agent:run", "-k", "without_facts", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*→ *< 0.70 (aborted at max_turns: 4 messages)"])
    transcript = result.stdout.str().split("Captured transcript call")[1]
    assert re.findall(r"^\s+(\d+)\. ", transcript, re.M) == ["1", "2", "3", "4"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "evaluator: {name: S}\naspirationalAverage: 3000\n",
            "eval_job.yaml:1: a conversation job needs `tasks:`*",
        ),
        (
            "evaluator: {name: S}\ntasks:\n  - {task: t, acceptanceCriteria: "
            "c}\nassertions:\n  - {weight: 2}\n",
            "eval_job.yaml:5: assertions[0]: an assertion needs either `cypher` (with "
            "`expected`) or `expression`",
        ),
        (
            "evaluator: {name: S, voise: x}\ntasks:\n  - {task: t, acceptanceCriteria: c}\n",
            "eval_job.yaml:1: unknown key 'voise' in evaluator (did you mean \"voice\"?)",
        ),
    ],
)
def test_a_bad_job_is_one_located_error_and_other_files_run(
    pytester: pytest.Pytester, text: str, message: str
) -> None:
    pytester.makepyfile(job_agent=AGENT)
    pytester.syspathinsert()
    pytester.makefile(".yaml", eval_job=text, eval_other="cases:\n  - {id: a, input: hi}\n")
    result = run_evals(pytester, "--agent", "job_agent:run")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([message])
