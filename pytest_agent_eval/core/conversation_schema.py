"""The shape of a native conversation's fields: the JSON Schemas and the checks beyond them.

Apart from the conversation's parts (``core.conversation``, dataclasses): every native file is
checked against these, while only one with a ``simulated_user`` builds the parts.
"""

from __future__ import annotations

from typing import Any


def user_schema() -> dict[str, Any]:
    """The JSON Schema of ``simulated_user:``."""
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "description": "an LLM plays the user (needs agent_eval_llm)",
        "properties": {
            "persona": {
                "type": ["string", "object"],
                "properties": {"name": {"type": "string"}, "voice": {"type": "string"}},
                "additionalProperties": False,
            },
            "greetings": {"type": ["string", "array"], "items": {"type": "string"}, "minItems": 1},
            "tasks": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": ["string", "object"],
                    "properties": {
                        "task": {"type": "string"},
                        "acceptance_criteria": {"type": "string"},
                        "type": {"enum": ["task", "question"]},
                    },
                    "required": ["task"],
                    "additionalProperties": False,
                },
            },
            "facts": strings,
            "signoff": {"type": "string", "minLength": 1},
            "max_turns": {"type": "integer", "minimum": 2},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "retries": {"type": "integer", "minimum": 0},
        },
        "required": ["tasks"],
        "additionalProperties": False,
    }


def score_schema() -> dict[str, Any]:
    """The JSON Schema of ``score:``."""
    weight = {"type": "number", "minimum": 0}
    return {
        "type": "object",
        "description": "how a conversation is scored: timing target and the composite's weights",
        "properties": {
            "aspirational_latency_s": {"type": "number", "exclusiveMinimum": 0},
            "weights": {
                "type": "object",
                "properties": {"timing": weight, "tasks": weight, "assertions": weight},
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }


def assertions_schema(check_properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of ``assertions:``.

    Each item is a native check, ``cypher`` + ``expected`` or ``expression``, each with an optional
    ``weight``.
    """
    return {
        "type": "array",
        "description": "post-conversation checks of what the agent did",
        "items": {
            "type": "object",
            "properties": {
                **check_properties,
                "cypher": {"type": "string"},
                "expected": {},
                "expression": {"type": "string"},
                "weight": {"type": "number", "minimum": 0},
            },
            "additionalProperties": False,
        },
    }


def assertion_problem(raw: dict[str, Any]) -> str | None:
    """What is wrong with an assertion's shape that the schema cannot say, or ``None``."""
    keys = [k for k in raw if k not in ("weight", "expected")]
    if not keys:
        return (
            "an assertion needs `cypher` (with `expected`), `expression`, "
            "or one check (e.g. `contains`)"
        )
    if len(keys) > 1:
        return (
            "an assertion is one of `cypher`, `expression` or a check; "
            f"this one has {', '.join(keys)}"
        )
    if "expected" in raw and keys[0] != "cypher":
        return "`expected` belongs to a `cypher` assertion"
    if keys[0] == "cypher" and "expected" not in raw:
        return "a `cypher` assertion needs `expected` (the single value the query returns)"
    return None
