"""Dataset exports (LangSmith, Langfuse, Braintrust, inspect_ai) run one case per row (SPEC §19).

Checks come from the sidecar ``<stem>.expect.yaml``, and the row's reference answer is used for
``matches_reference`` and the judge.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from dialect_support import answering, run_evals

ANSWERS = {"What is the capital of France?": ["Paris is the capital.", []], "2 + 2?": ["5", []]}

LANGSMITH = [  # a LangSmith example export (JSONL): inputs/outputs maps, UUIDs, bookkeeping fields
    {
        "id": "0f6a4c52-8a0e-4b7e-9a59-1f1f0a8c1b01",
        "name": "#0f6a",
        "created_at": "2026-11-01T10:00:00.000000+00:00",
        "modified_at": "2026-11-01T10:00:00.000000+00:00",
        "dataset_id": "7d1c2f8a-0000-4000-8000-000000000001",
        "source_run_id": None,
        "inputs": {"question": "What is the capital of France?"},
        "outputs": {"answer": "Paris"},
        "metadata": {"dataset_split": ["base"]},
    },
    {
        "id": "0f6a4c52-8a0e-4b7e-9a59-1f1f0a8c1b02",
        "dataset_id": "7d1c2f8a-0000-4000-8000-000000000001",
        "inputs": {"question": "2 + 2?"},
        "outputs": {"answer": "4"},
        "metadata": {},
    },
]
LANGFUSE = [  # Langfuse dataset items (JSON): input, expectedOutput, status, camelCase bookkeeping
    {
        "id": "capital-fr",
        "status": "ACTIVE",
        "input": {"query": "What is the capital of France?", "locale": "en"},
        "expectedOutput": "Paris",
        "metadata": {"source": "manual"},
        "sourceTraceId": None,
        "sourceObservationId": None,
        "datasetId": "ds-1",
        "datasetName": "capitals",
        "createdAt": "2026-11-01T10:00:00.000Z",
        "updatedAt": "2026-11-01T10:00:00.000Z",
    },
    {
        "id": "sum",
        "status": "ACTIVE",
        "input": "2 + 2?",
        "expectedOutput": {"answer": "4"},
        "datasetId": "ds-1",
    },
]
# Langfuse dataset items as the Python SDK gives them (DatasetItem.dict()): snake_case
LANGFUSE_SDK = [
    {
        "id": "capital-fr",
        "status": "ACTIVE",
        "input": {"query": "What is the capital of France?"},
        "expected_output": "Paris",
        "metadata": None,
        "source_trace_id": "trace-1",
        "source_observation_id": None,
        "dataset_id": "ds-1",
        "dataset_name": "capitals",
        "created_at": "2026-11-01T10:00:00Z",
        "updated_at": "2026-11-01T10:00:00Z",
    },
    {
        "id": "sum",
        "status": "ACTIVE",
        "input": "2 + 2?",
        "expected_output": "4",
        "dataset_id": "ds-1",
    },
]
BRAINTRUST = [  # Braintrust dataset records (JSON): input, expected, tags, _xact_id
    {
        "id": "b1",
        "_xact_id": "1000192656880881099",
        "created": "2026-11-01T10:00:00.000Z",
        "project_id": "p",
        "dataset_id": "d",
        "input": "What is the capital of France?",
        "expected": "Paris",
        "metadata": {"difficulty": "easy"},
        "tags": ["geo"],
    },
    {"id": "b2", "input": "2 + 2?", "expected": "4", "metadata": None, "tags": []},
]
INSPECT = [  # inspect_ai samples (JSONL): input (a string or a chat), target, id, metadata
    {"id": 1, "input": "What is the capital of France?", "target": "Paris",
     "metadata": {"topic": "geo"}},
    {"id": 2,
     "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}],
     "target": ["4"]},
]  # fmt: skip
SIDECAR = "expect:\n  matches_reference: contains\n"


def write_rows(pytester: pytest.Pytester, name: str, rows: list[dict[str, Any]]) -> None:
    path = pytester.path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        path.write_text(json.dumps(rows, indent=2))


@pytest.mark.parametrize(
    ("name", "rows", "ids"),
    [
        ("eval_langsmith.jsonl", LANGSMITH, [r["id"] for r in LANGSMITH]),
        ("eval_langfuse.json", LANGFUSE, ["capital-fr", "sum"]),
        ("eval_langfuse_sdk.json", LANGFUSE_SDK, ["capital-fr", "sum"]),
        ("eval_braintrust.json", BRAINTRUST, ["b1", "b2"]),
        ("eval_inspect.jsonl", INSPECT, ["1", "2"]),
    ],
)
def test_each_export_runs_a_case_per_row_against_its_reference(
    pytester: pytest.Pytester, name: str, rows: list[dict[str, Any]], ids: list[str]
) -> None:
    answering(pytester, ANSWERS)
    write_rows(pytester, name, rows)
    (
        pytester.path / name.replace(".jsonl", ".expect.yaml").replace(".json", ".expect.yaml")
    ).write_text(SIDECAR)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(
        passed=1, failed=1
    )  # Paris is in the answer; "5" is not the reference "4"
    text = result.stdout.str()
    assert f"PASSED {name}::{ids[0]}" in text
    assert f"FAILED {name}::{ids[1]}" in text
    assert "output does not contain the reference answer '4'" in text


def test_the_sidecar_gives_agent_defaults_and_tags(pytester: pytest.Pytester) -> None:
    answering(pytester, ANSWERS)
    write_rows(pytester, "eval_rows.json", BRAINTRUST)
    (pytester.path / "eval_rows.expect.yaml").write_text(
        "agent: table_agent:run\ntags: [smoke]\ndefaults:\n  timeout: 5\nexpect:\n"
        "  contains: [Paris]\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", "-m", "smoke and geo")
    result.assert_outcomes(
        passed=1, deselected=1
    )  # the agent from the sidecar; the row's tags are markers too


def test_the_judge_sees_the_reference_answer(pytester: pytest.Pytester) -> None:
    answering(pytester, ANSWERS)
    write_rows(pytester, "eval_rows.json", LANGFUSE[:1])
    (pytester.path / "eval_rows.expect.yaml").write_text(
        "expect:\n  judge: matches the reference answer\n"
    )
    pytester.makeconftest(
        """
        import json, pytest
        PROMPTS = []
        @pytest.fixture
        def agent_eval_llm():
            def llm(messages, **options):
                PROMPTS.append(messages[-1]["content"])
                ok = "Reference answer (the answer is correct when it agrees with it): Paris" in \
messages[-1]["content"]
                return json.dumps({"score": 1.0 if ok else 0.0, "reason": "compared"})
            return llm
        """
    )
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=1)


def test_a_golden_set_shaped_file_with_a_sidecar_is_a_dataset(pytester: pytest.Pytester) -> None:
    answering(pytester, ANSWERS)
    rows = [{"id": "fr", "input": "What is the capital of France?", "expected": "Paris"}]
    write_rows(pytester, "eval_rows.json", rows)
    without = run_evals(
        pytester, "-rA"
    )  # no sidecar: the golden set's reading (`expected` a list) errors
    without.assert_outcomes(errors=1)
    assert "[0].expected: expected a list of strings, got 'Paris'" in without.stdout.str()
    (pytester.path / "eval_rows.expect.yaml").write_text(SIDECAR)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=1)


def test_sidecar_problems_name_the_sidecar_and_row_problems_their_row(
    pytester: pytest.Pytester,
) -> None:
    answering(pytester, ANSWERS)
    write_rows(
        pytester, "eval_rows.jsonl", [*BRAINTRUST, {"id": "b3", "input": 42, "expected": "x"}]
    )
    (pytester.path / "eval_rows.expect.yaml").write_text(
        "expect:\n  matches_reference: contains\n  containz: [x]\n"
    )
    result = run_evals(pytester, "-rA")
    assert "eval_rows.expect.yaml:3:" in result.stdout.str()
    assert "unknown check 'containz' in expect" in result.stdout.str()
    (pytester.path / "eval_rows.expect.yaml").write_text(SIDECAR)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert (
        "eval_rows.jsonl:3: [2].input: expected a string, a mapping or a chat"
        in result.stdout.str()
    )


def test_the_sidecar_is_never_collected_as_an_eval_file(pytester: pytest.Pytester) -> None:
    answering(pytester, ANSWERS)
    write_rows(pytester, "eval_rows.json", BRAINTRUST)
    (pytester.path / "eval_rows.expect.yaml").write_text(SIDECAR)
    result = run_evals(pytester, "--collect-only", "-q")
    assert "eval_rows.expect.yaml" not in result.stdout.str()
    assert "eval_rows.json::b1" in result.stdout.str()


def test_validate_and_the_schema_know_datasets_and_sidecars(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema
    import yaml

    from pytest_agent_eval.cli import main

    write_rows(pytester, "eval_rows.jsonl", LANGSMITH)
    (pytester.path / "eval_rows.expect.yaml").write_text(SIDECAR)
    assert main(["validate", str(pytester.path)]) == 0
    assert "eval_rows.jsonl: dataset_rows, 2 cases: ok" in capsys.readouterr().out
    assert main(["schema", "--format", "sidecar"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.validate(yaml.safe_load(SIDECAR), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"expect": {"containz": ["x"]}}, schema)


def test_an_inspect_list_target_is_right_when_any_one_of_its_answers_is(
    pytester: pytest.Pytester,
) -> None:
    """inspect_ai's ``target: [...]``: for ``includes``/``match`` any target counts; judge told so.

    For its ``includes``/``match`` scorers any one target counts; the judge is told the answers are
    alternatives.
    """
    answering(
        pytester,
        {"Refund window?": ["You have thirty days.", []], "Exchange window?": ["A week.", []]},
    )
    rows = [
        {"id": "refund", "input": "Refund window?", "target": ["30 days", "thirty days"]},
        {"id": "exchange", "input": "Exchange window?", "target": ["14 days", "two weeks"]},
    ]
    write_rows(pytester, "eval_inspect.jsonl", rows)
    (pytester.path / "eval_inspect.expect.yaml").write_text(SIDECAR)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "PASSED eval_inspect.jsonl::refund" in text
    assert "output does not contain the reference answer '14 days' or 'two weeks'" in text
    from pytest_agent_eval.checks.judge import reference_text

    assert reference_text(["30 days", "thirty days"], any_of=True) == (
        "Reference answers (the answer is correct when it agrees with any one of them):\n"
        "  - 30 days\n  - thirty days\n"
    )


def test_a_misnamed_sidecar_is_an_error_naming_the_dataset_it_may_have_meant(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """``eval_refunds_rows.expect.yaml`` beside ``eval_refund_rows.jsonl`` is an error, not a pass.

    Its checks would never run; the rows would pass unchecked. The sidecar errors, and the dataset
    warns that it has none.
    """
    from pytest_agent_eval.cli import main

    answering(pytester, ANSWERS)
    write_rows(pytester, "eval_refund_rows.jsonl", LANGSMITH)
    (pytester.path / "eval_refunds_rows.expect.yaml").write_text("expect:\n  contains: [nowhere]\n")
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=1, warnings=1)
    text = " ".join(result.stdout.str().split())
    assert (
        "eval_refunds_rows.expect.yaml:1: a dataset sidecar with no dataset "
        "eval_refunds_rows.jsonl or "
        "eval_refunds_rows.json beside it (did you mean "
        '"eval_refund_rows.expect.yaml", the sidecar of '
        "eval_refund_rows.jsonl?); rename it"
    ) in text
    assert (
        "NoSidecarWarning: eval_refund_rows.jsonl: no sidecar eval_refund_rows.expect.yaml: its "
        "rows have no checks, each only has to be answered; eval_refunds_rows.expect.yaml is "
        "beside it: rename it eval_refund_rows.expect.yaml"
    ) in text
    assert main(["validate", str(pytester.path)]) == 1
    out = capsys.readouterr().out
    assert "eval_refunds_rows.expect.yaml: dataset sidecar: 1 problem" in out
    assert "eval_refund_rows.jsonl: dataset_rows, 2 cases: ok\n  note: " in out
    (pytester.path / "eval_refunds_rows.expect.yaml").rename(
        pytester.path / "eval_refund_rows.expect.yaml"
    )
    fixed = run_evals(pytester, "-rA")
    fixed.assert_outcomes(failed=2)  # the checks run now
    assert "NoSidecarWarning" not in fixed.stdout.str()


def test_a_sidecar_without_any_dataset_near_it_says_what_to_do(pytester: pytest.Pytester) -> None:
    (pytester.path / "eval_orphan.expect.yaml").write_text(SIDECAR)
    result = run_evals(pytester, "-rA")
    result.assert_outcomes(errors=1)
    assert (
        "eval_orphan.expect.yaml:1: a dataset sidecar with no dataset eval_orphan.jsonl or "
        "eval_orphan.json beside it; put the dataset beside it as eval_orphan.jsonl or "
        "eval_orphan.json, or rename the sidecar"
    ) in " ".join(result.stdout.str().split())
