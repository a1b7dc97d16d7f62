"""Checks of native fields that the JSON Schema cannot express.

Weight names and tool-mock response forms.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_agent_eval.checks import CheckRegistry
from pytest_agent_eval.core.conversation_schema import assertion_problem
from pytest_agent_eval.core.document import Document, PathKey
from pytest_agent_eval.core.errors import EvalFileError, did_you_mean

_TURN_CHECK = re.compile(r"^turn \d+: (.+)$")  # how the runner names a conversation turn's checks


def field_errors(doc: Document, registry: CheckRegistry) -> list[tuple[PathKey, EvalFileError]]:
    """Problems in the ``weights`` and ``tool_mocks`` of ``defaults`` and of each case.

    Each is located at its key.
    """
    data = doc.data
    if not isinstance(data, dict):
        return []
    places: list[tuple[PathKey, dict[str, Any]]] = []
    if isinstance(data.get("defaults"), dict):
        places.append((("defaults",), data["defaults"]))
    if isinstance(data.get("cases"), list):
        places.extend(
            (("cases", i), case) for i, case in enumerate(data["cases"]) if isinstance(case, dict)
        )
    out: list[tuple[PathKey, EvalFileError]] = []
    for key, fields in places:
        conversation = _conversation_problems(
            fields, data.get("defaults"), in_case=key[0] == "cases"
        )
        problems = [*_weight_problems(fields, registry), *_mock_problems(fields), *conversation]
        for sub, message in problems:
            where: PathKey = (*key, *sub)
            out.append((where, EvalFileError(doc.path, doc.line(where), message)))
    return out


def _weight_problems(fields: dict[str, Any], registry: CheckRegistry) -> list[tuple[PathKey, str]]:
    weights = fields.get("weights")
    if not isinstance(weights, dict):
        return []
    expect = fields.get("expect")
    near = [*(expect if isinstance(expect, dict) else ()), *registry.names()]
    out: list[tuple[PathKey, str]] = []
    for name in weights:
        turn = _TURN_CHECK.match(str(name))
        if (turn.group(1) if turn else name) in registry:
            continue
        hint = (
            did_you_mean(str(name), near)
            or f"; known checks: {', '.join(sorted(registry.names()))}"
        )
        out.append(
            (
                ("weights", name),
                f"weights: unknown check {name!r}{hint}; a weight names a check of `expect`",
            )
        )
    return out


def _mock_problems(fields: dict[str, Any]) -> list[tuple[PathKey, str]]:
    mocks = fields.get("tool_mocks")
    if not isinstance(mocks, dict) or not mocks:
        return []
    from pytest_agent_eval.mocks import (
        MockConfigError,
        compile_response,
    )  # only files with mocks pay its import

    out: list[tuple[PathKey, str]] = []
    for name, raw in mocks.items():
        try:
            compile_response(raw, f"tool_mocks.{name}", resolve=False)
        except MockConfigError as exc:
            out.append((("tool_mocks", name), str(exc)))
    return out


def _conversation_problems(
    fields: dict[str, Any], defaults: Any, in_case: bool
) -> list[tuple[PathKey, str]]:
    """Problems of a conversation's fields: ``assertions``, ``score`` and ``turns``.

    ``assertions`` of the right shape; in a case, ``assertions`` and ``score`` only with a
    ``simulated_user`` of its own or from the file's ``defaults``; no ``turns`` beside it.
    """
    out: list[tuple[PathKey, str]] = []
    assertions = fields.get("assertions")
    if isinstance(assertions, list):
        for n, raw in enumerate(assertions):
            problem = assertion_problem(raw) if isinstance(raw, dict) else None
            if problem:
                out.append((("assertions", n), f"assertions[{n}]: {problem}"))
    has_user = "simulated_user" in fields or (
        isinstance(defaults, dict) and "simulated_user" in defaults
    )
    for name in ("assertions", "score"):
        if in_case and name in fields and not has_user:
            out.append(
                (
                    (name,),
                    f"`{name}` belongs to a conversation with a `simulated_user`, "
                    "and this case has none",
                )
            )
    if "simulated_user" in fields and "turns" in fields:
        out.append(
            (
                ("turns",),
                "`turns` and `simulated_user` exclude each other: "
                "the simulated user writes the turns",
            )
        )
    return out
