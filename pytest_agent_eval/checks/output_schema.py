"""The ``output_schema`` check: the output, parsed as JSON, validates against a JSON Schema."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry, CheckResult
from pytest_agent_eval.record import RunRecord


def _parse_json(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):  # a fenced block: drop the fence and its language tag
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return json.loads(body)


def _retrieve_nothing(uri: str) -> NoReturn:
    raise LookupError(f"{uri} is outside the schema")


def output_schema(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The output parsed as JSON validates against the JSON Schema."""
    try:
        data = _parse_json(run.output)
    except json.JSONDecodeError as exc:
        return CheckResult.of(
            "output_schema",
            False,
            expected="JSON output",
            actual=run.output[:200],
            message=f"output is not JSON: {exc}",
        )
    import jsonschema  # imported when an output_schema check first runs (it costs start-up time)
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    # Only references inside the schema resolve: an eval file never makes the run fetch a URL or read a file.
    validator = jsonschema.validators.validator_for(spec)(spec, registry=Registry(retrieve=_retrieve_nothing))  # type: ignore[call-arg]
    try:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        ref = getattr(exc, "ref", "") or str(exc)
        return CheckResult.of(
            "output_schema",
            False,
            expected="output matching the schema",
            actual=data,
            message=f"$ref {ref!r} is not inside the schema: only references within it (`#/...`) resolve, "
            "nothing is fetched or read; put the referenced schema under `$defs`",
        )
    detail = [f"at ${''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}" for e in errors]
    return CheckResult.of(
        "output_schema",
        not errors,
        expected="output matching the schema",
        actual=data,
        message=f"{len(errors)} schema error(s)" if errors else "",
        detail=detail,
    )


def register(registry: CheckRegistry) -> None:
    registry.register("output_schema", output_schema, {"type": "object"}, "the JSON output validates", blocking=False)
