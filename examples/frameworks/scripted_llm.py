"""A scripted OpenAI-compatible chat-completions server on a loopback port.

It lets the framework examples run offline. To a user message it answers with a tool call:
``lookup_order`` for a message naming an order (``A100``), or asking about "it" after an earlier
message of the conversation named one (so a follow-up question shows whether the agent was given
the conversation so far), else ``search_kb`` with the message as the query; to the tool results of
the latest message it answers with them. Real clients (the OpenAI SDK that every framework here
uses) talk to it as to any endpoint: point ``base_url`` at :func:`start`'s URL.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ORDER = re.compile(r"\b([A-Z]\d{3})\b")


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for one request."""
    messages = body.get("messages") or []
    said = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    latest = max((n for n, m in enumerate(messages) if m.get("role") == "user"), default=0)
    if messages and messages[-1].get("role") == "tool":
        results = [str(m.get("content")) for m in messages[latest:] if m.get("role") == "tool"]
        return {"role": "assistant", "content": "Here is what I found: " + " | ".join(results)}
    prompt = said[-1] if said else ""
    named = ORDER.findall(prompt) or (
        ORDER.findall(" ".join(said)) if re.search(r"\bit\b", prompt, re.I) else []
    )
    name, args = (
        ("lookup_order", {"order_id": named[-1]}) if named else ("search_kb", {"query": prompt})
    )
    call = {
        "id": f"call_{len(messages)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = reply(body)
        raw = json.dumps(
            {
                "id": "chatcmpl-example",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start() -> str:
    """Serve on 127.0.0.1 (a free port) in a daemon thread; the ``/v1`` base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
