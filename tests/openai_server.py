"""A loopback OpenAI-compatible ``/v1/chat/completions`` server with scripted replies, for tests (no network).

An ``answer`` callable, when given, may reply to a whole request with text (a simulated user, a scorer).
Otherwise, to a user message it replies with the tool call that ``route(prompt)`` picks (name and JSON
arguments); to tool results it replies with an answer quoting them. It serves on 127.0.0.1 (port 0) in a
daemon thread and stops itself at ``__exit__``, after ``max_requests`` requests, or ``lifetime_s`` seconds,
whichever comes first. ``failures`` first requests are answered ``failure_status`` (with ``Retry-After:
retry_after``); ``log`` holds the arrival time (``time.time()``) of every request; ``delay_s`` delays every answer.

As a rate-limited provider: ``rate`` allows that many requests a second (a bucket of ``rate``, refilled
continuously) and answers 429 beyond, with ``retry-after-ms`` and OpenAI's ``x-ratelimit-*`` headers (on every
answer); ``retry_after_ms`` (with ``failures``) is the cool-down a failure asks for, and every request arriving
within it is answered 429 as well; ``quota_spent`` makes the failures OpenAI's ``insufficient_quota``. ``limited``
counts the requests answered 429.
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
Answer = Callable[[dict[str, Any]], "str | None"]
"""A whole request body -> the reply text, or None to route as usual (e.g. an LLM playing a simulated user)."""
ANSWER_PREFIX = "Here is what I found: "


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
        rate: int | None = None,
        retry_after_ms: int | None = None,
        quota_spent: bool = False,
    ) -> None:
        self.route = route
        self.answer = answer
        self.max_requests = max_requests
        self.failures = failures
        self.failure_status = failure_status
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.rate = rate
        self.retry_after_ms = retry_after_ms
        self.quota_spent = quota_spent
        self.limited = 0
        self._level = float(rate or 0)
        self._stamp = time.monotonic()
        self._closed_until = 0.0
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

    def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON reply to one chat-completions request."""
        with self._lock:
            self.log.append(time.time())
            now = time.monotonic()
            if now < self._closed_until:  # within the cool-down it asked for
                self.limited += 1
                return 429, {"error": {"message": "loopback server: within the retry-after"}}
            if self.failures > 0:
                self.failures -= 1
                self.limited += self.failure_status == 429
                if self.retry_after_ms:
                    self._closed_until = now + self.retry_after_ms / 1000
                if self.quota_spent:
                    error = {"message": "You exceeded your current quota", "type": "insufficient_quota"}
                    return self.failure_status, {"error": {**error, "code": "insufficient_quota"}}
                return self.failure_status, {"error": {"message": f"loopback server: {self.failure_status} on purpose"}}
            if self.rate:
                self._level = min(self.rate, self._level + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._level < 1.0:
                    self.limited += 1
                    return 429, {"error": {"message": "loopback server: rate limit reached"}}
                self._level -= 1.0
            self.requests.append(body)
            n = len(self.requests)
        if n > self.max_requests:
            self.stop()
            return 503, {"error": {"message": f"loopback server: more than {self.max_requests} requests"}}
        messages = body.get("messages") or []
        text = self.answer(body) if self.answer is not None else None
        if text is not None:
            return 200, _completion(n, body, {"role": "assistant", "content": text})
        if messages and messages[-1].get("role") == "tool":
            results = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                results.insert(0, str(message.get("content")))
            return 200, _completion(n, body, {"role": "assistant", "content": ANSWER_PREFIX + " | ".join(results)})
        prompt = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        picked = self.route(prompt)
        if picked is None:
            return 200, _completion(n, body, {"role": "assistant", "content": "I can answer that without tools."})
        name, args = picked
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if name not in offered:
            return 400, {"error": {"message": f"loopback server: tool {name!r} is not among the tools sent {offered}"}}
        call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return 200, _completion(n, body, {"role": "assistant", "content": None, "tool_calls": [call]})

    def limit_headers(self, status: int) -> dict[str, str]:
        """The rate-limit headers of an answer: ``retry-after-ms`` on a 429, ``x-ratelimit-*`` when ``rate``."""
        headers = {}
        with self._lock:
            if status == 429 and self.retry_after_ms:
                headers["retry-after-ms"] = str(self.retry_after_ms)
            if self.rate:
                level = self._level
                headers["x-ratelimit-limit-requests"] = str(self.rate)
                headers["x-ratelimit-remaining-requests"] = str(int(level))
                headers["x-ratelimit-reset-requests"] = f"{(self.rate - level) / self.rate * 1000:.0f}ms"
                if status == 429:
                    headers["retry-after-ms"] = f"{(1.0 - level) / self.rate * 1000:.0f}"
        return headers


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


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                status, reply = 404, {"error": {"message": f"loopback server: no route {self.path}"}}
            else:
                status, reply = server.reply(json.loads(self.rfile.read(length) or b"{}"))
            if server.delay_s:
                time.sleep(server.delay_s)
            data = json.dumps(reply).encode()
            self.send_response(status)
            if status == server.failure_status and server.retry_after is not None:
                self.send_header("Retry-After", server.retry_after)
            for name, value in server.limit_headers(status).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler
