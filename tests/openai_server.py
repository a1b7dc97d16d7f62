"""A loopback OpenAI-compatible ``/v1/chat/completions`` server with scripted replies, for tests (no network).

An ``answer`` callable, when given, may reply to a whole request with text (a simulated user, a scorer) or with a
whole assistant message (a dict, e.g. one with ``tool_calls``).
Otherwise, to a user message it replies with the tool call that ``route(prompt)`` picks (name and JSON
arguments); to tool results it replies with an answer quoting them. It serves on 127.0.0.1 (port 0) in a
daemon thread and stops itself at ``__exit__``, after ``max_requests`` requests, or ``lifetime_s`` seconds,
whichever comes first. ``failures`` first requests are answered ``failure_status`` (with ``Retry-After:
retry_after``); ``log`` holds the arrival time (``time.time()``) of every request; ``delay_s`` delays every answer.
``usage``, when given, is the ``usage`` of every answer (cached tokens, say). Beside chat completions it answers
the Responses API (``/v1/responses``) and Anthropic's messages (``/v1/messages``) with text only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[str], "tuple[str, dict[str, Any]] | None"]
"""User prompt -> (tool name, arguments) to call, or None to answer without tools."""
Answer = Callable[[dict[str, Any]], "str | dict[str, Any] | None"]
"""A whole request body -> the reply text or assistant message, or None to route as usual (e.g. an LLM playing a
simulated user)."""
ANSWER_PREFIX = "Here is what I found: "
NO_TOOLS = "I can answer that without tools."


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many clients at once (concurrency, -n): the default backlog of 5 refuses some


class ChatServer:
    """``with ChatServer(route) as server:`` — point the client at ``server.base_url``; ``requests`` holds bodies."""

    def __init__(
        self,
        route: Route,
        *,
        answer: Answer | None = None,
        max_requests: int = 50,
        lifetime_s: float = 120.0,
        failures: int = 0,
        failure_status: int = 429,
        retry_after: str | None = "0",
        delay_s: float = 0.0,
        port: int = 0,
        usage: dict[str, Any] | None = None,
    ) -> None:
        self.route = route
        self.answer = answer
        self.max_requests = max_requests
        self.failures = failures
        self.failure_status = failure_status
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.usage = usage
        self.log: list[float] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True
        self._stopped = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._thread.join(timeout=5)
        self._httpd.server_close()

    def stop(self) -> None:
        if not self._stopped.is_set():
            self._stopped.set()
            self._timer.cancel()
            threading.Thread(target=self._httpd.shutdown, daemon=True).start()  # never from the serving thread

    def reply(self, body: dict[str, Any], path: str = "/v1/chat/completions") -> tuple[int, dict[str, Any]]:
        """The status and JSON reply to one chat-completions (or Responses, or Anthropic messages) request."""
        with self._lock:
            self.log.append(time.time())
            if self.failures > 0:
                self.failures -= 1
                return self.failure_status, {"error": {"message": f"loopback server: {self.failure_status} on purpose"}}
            self.requests.append(body)
            n = len(self.requests)
        if n > self.max_requests:
            self.stop()
            return 503, {"error": {"message": f"loopback server: more than {self.max_requests} requests"}}
        if path.endswith("/responses"):
            return 200, _response(n, body, self.usage)
        if path.endswith("/messages"):
            return 200, _anthropic_message(n, body, self.usage)
        messages = body.get("messages") or []
        text = self.answer(body) if self.answer is not None else None
        if isinstance(text, dict):
            return 200, _completion(n, body, text)
        if text is not None:
            return 200, self._usage(_completion(n, body, {"role": "assistant", "content": text}))
        if messages and messages[-1].get("role") == "tool":
            results = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                results.insert(0, str(message.get("content")))
            reply = _completion(n, body, {"role": "assistant", "content": ANSWER_PREFIX + " | ".join(results)})
            return 200, self._usage(reply)
        prompt = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        picked = self.route(prompt)
        if picked is None:
            return 200, self._usage(_completion(n, body, {"role": "assistant", "content": NO_TOOLS}))
        name, args = picked
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if name not in offered:
            return 400, {"error": {"message": f"loopback server: tool {name!r} is not among the tools sent {offered}"}}
        call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return 200, self._usage(_completion(n, body, {"role": "assistant", "content": None, "tool_calls": [call]}))

    def _usage(self, reply: dict[str, Any]) -> dict[str, Any]:
        if self.usage is not None:
            reply["usage"] = self.usage
        return reply


def _completion(n: int, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "loopback"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _response(n: int, body: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    """A Responses API answer (``/v1/responses``) with one text message."""
    text = {"type": "output_text", "text": NO_TOOLS, "annotations": []}
    message = {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed", "content": [text]}
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", "loopback"),
        "output": [message],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage
        or {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def _anthropic_message(n: int, body: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    """An Anthropic messages answer (``/v1/messages``) with one text block."""
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "loopback"),
        "content": [{"type": "text", "text": NO_TOOLS}],
        "stop_reason": "end_turn",
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            path = self.path.rstrip("/")
            if not path.endswith(("/chat/completions", "/responses", "/messages")):
                status, reply = 404, {"error": {"message": f"loopback server: no route {self.path}"}}
            elif path.endswith("/chat/completions"):  # as subclasses that answer chat completions only take it
                status, reply = server.reply(json.loads(self.rfile.read(length) or b"{}"))
            else:
                status, reply = server.reply(json.loads(self.rfile.read(length) or b"{}"), path)
            if server.delay_s:
                time.sleep(server.delay_s)
            data = json.dumps(reply).encode()
            self.send_response(status)
            if status == server.failure_status and server.retry_after is not None:
                self.send_header("Retry-After", server.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler
