"""A promptfoo Python provider, ``call_api(prompt, options, context)``: offline, deterministic."""

from __future__ import annotations

import json
from typing import Any

ANSWERS = {
    "What is the capital of France?": "Paris is the capital of France.",
    "What is the capital of Italy?": "Rome.",
    "What is the capital of Spain?": "Madrid.",
    "What is 2 + 2?": "4",
}


def call_api(prompt: str, options: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    question = context["vars"]["question"]
    if "weather" in question:
        calls = [
            {
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({"city": "Oslo"})},
            }
            for name in ("geocode", "get_weather")
        ]
        return {"output": {"tool_calls": calls, "city": "Oslo"}, "cost": 0.0001}
    return {
        "output": ANSWERS.get(question, "I don't know."),
        "tokenUsage": {"prompt": 12, "completion": 3},
    }
