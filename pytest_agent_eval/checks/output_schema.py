"""The ``output_schema`` check: the output, parsed as JSON, validates against a JSON Schema.

The JSON is the whole output, or a fenced block in it: models often write a sentence and then the
JSON in a
```` ```json ```` block.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, NoReturn

from pytest_agent_eval.checks.base import CheckContext, CheckRegistry
from pytest_agent_eval.core.results import CheckResult, RunRecord


class Fence(NamedTuple):
    """A fenced block of the output: its language tag, its body, and its opening fence's line."""

    language: str
    body: str
    line: int


_OPENING = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)")


def fenced_blocks(text: str) -> list[Fence]:
    """The fenced blocks of markdown ``text`` in order (```` ```json ```` … ```` ``` ````).

    An unclosed last one runs to the end.
    """
    blocks: list[Fence] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _OPENING.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, start = opening.group(1), i
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence[0] * len(fence)):
            i += 1
        blocks.append(Fence(opening.group(2).lower(), "\n".join(lines[start + 1 : i]), start + 1))
        i += 1
    return blocks


class NotJSON(ValueError):
    """The output holds no JSON to check; the message says what was tried."""


def find_json(output: str) -> tuple[Any, str]:
    """The JSON the output gives, and where it was found (``""``: the whole output).

    The whole output when it parses; else the first ```` ```json ```` block; else the first fenced
    block whose body parses. :class:`NotJSON` when there is none, or the ```` ```json ```` block
    does not parse.
    """
    try:
        return json.loads(output), ""
    except json.JSONDecodeError as exc:
        whole = exc
    blocks = fenced_blocks(output)

    def where(n: int, what: str) -> str:
        return f"{what} at line {blocks[n].line} of the output" + (
            f" (fenced block {n + 1} of {len(blocks)})" if len(blocks) > 1 else ""
        )

    tagged = [n for n, block in enumerate(blocks) if block.language == "json"]
    if tagged:
        checked = where(
            tagged[0], "the first ```json block" if len(tagged) > 1 else "the ```json block"
        )
        try:
            return json.loads(blocks[tagged[0]].body), checked
        except json.JSONDecodeError as exc:
            raise NotJSON(f"{checked} is not JSON: {exc}") from None
    for n, block in enumerate(blocks):
        try:
            data = json.loads(block.body)
        except json.JSONDecodeError:
            continue
        return data, where(
            n, f"the ```{block.language} block" if block.language else "the fenced block"
        )
    if blocks:
        raise NotJSON(
            f"output is not JSON and none of its {len(blocks)} fenced block(s) is: {whole}"
        )
    raise NotJSON(f"output is not JSON and holds no fenced block of JSON: {whole}")


def _retrieve_nothing(uri: str) -> NoReturn:
    raise LookupError(f"{uri} is outside the schema")


def output_schema(run: RunRecord, spec: Any, ctx: CheckContext) -> CheckResult:
    """The output parsed as JSON validates against the JSON Schema."""
    try:
        data, where = find_json(run.output)
    except NotJSON as exc:
        return CheckResult.of(
            "output_schema",
            False,
            expected="JSON output",
            actual=run.output[:200],
            message=str(exc),
        )
    import jsonschema  # imported when an output_schema check first runs (it costs start-up time)
    from referencing import Registry
    from referencing.exceptions import Unresolvable

    # Only references inside the schema resolve: an eval file never makes the run fetch a URL or
    # read a file.
    registry: Registry[Any] = Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]
    validator = jsonschema.validators.validator_for(spec)(spec, registry=registry)
    try:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        ref = getattr(exc, "ref", "") or str(exc)
        return CheckResult.of(
            "output_schema",
            False,
            expected="output matching the schema",
            actual=data,
            message=f"$ref {ref!r} is not inside the schema: "
            "only references within it (`#/...`) resolve, "
            "nothing is fetched or read; put the referenced schema under `$defs`",
        )
    detail = [f"at ${''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}" for e in errors]
    return CheckResult.of(
        "output_schema",
        not errors,
        expected="output matching the schema",
        actual=data,
        message=f"{len(errors)} schema error(s){' in ' + where if where else ''}" if errors else "",
        detail=detail,
    )


def register(registry: CheckRegistry) -> None:
    registry.register(
        "output_schema",
        output_schema,
        {"type": "object"},
        "the JSON output validates",
        blocking=False,
    )
