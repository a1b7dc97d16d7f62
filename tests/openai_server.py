"""A loopback OpenAI-compatible ``/v1/chat/completions`` server with scripted replies (no network).

For tests. An ``answer`` callable, when given, may reply to a whole request with text (a simulated
user, a scorer) or with a whole assistant message (a dict, e.g. one with ``tool_calls``). Otherwise,
to a user message it replies with the tool call that ``route(prompt)`` picks (name and JSON
arguments); to tool results it replies with an answer quoting them. It serves on 127.0.0.1 (port 0)
in a daemon thread and stops itself at ``__exit__``, after ``max_requests`` requests, or
``lifetime_s`` seconds, whichever comes first. ``failures`` first requests are answered
``failure_status`` (with ``Retry-After: retry_after``); ``log`` holds the arrival time
(``time.time()``) of every request; ``delay_s`` delays every answer. ``usage``, when given, is the
``usage`` of every answer (cached tokens, say; in the shape of the API asked).

It also serves the Responses API (``/v1/responses``, as the OpenAI Agents SDK's
``OpenAIResponsesModel`` calls it): such a request is read as the chat-completions request it
amounts to (``requests`` holds that, with ``"api": "responses"``), answered the same way, and its
answer written back as a Responses API object; and Anthropic's messages (``/v1/messages``) with text
only. A subclass may override ``respond`` to answer from the whole request (the conversation so far
and the tools offered).

As a rate-limited provider: ``rate`` allows that many requests a second (a bucket of ``rate``,
refilled continuously) and answers 429 beyond, with ``retry-after-ms`` and OpenAI's
``x-ratelimit-*`` headers (on every answer); ``retry_after_ms`` (with ``failures``) is the cool-down
a failure asks for, and every request arriving within it is answered 429 as well; ``quota_spent``
makes the failures OpenAI's ``insufficient_quota``. ``limited`` counts the requests answered 429.
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
"""A whole request body -> the reply text or assistant message, or None to route as usual (e.g.

an LLM playing a simulated user).
"""
ANSWER_PREFIX = "Here is what I found: "
NO_TOOLS = "I can answer that without tools."


class _Server(ThreadingHTTPServer):
    request_queue_size = (
        128  # many clients at once (concurrency, -n): the default backlog of 5 refuses some
    )


class ChatServer:
    """``with ChatServer(route) as server:`` — point the client at ``server.base_url``.

    ``requests`` holds the bodies.
    """

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
        usage: dict[str, Any] | None = None,
        announce: bool = True,
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
        self.announce = announce
        """Whether ``rate`` is told in the headers (``False``: a provider that answers bare 429s).
        """
        self.limited = 0
        self._level = float(rate or 0)
        self._stamp = time.monotonic()
        self._closed_until = 0.0
        self.usage = usage
        self.log: list[float] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
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
            threading.Thread(
                target=self._httpd.shutdown, daemon=True
            ).start()  # never from the serving thread

    def reply(
        self, body: dict[str, Any], path: str = "/v1/chat/completions"
    ) -> tuple[int, dict[str, Any]]:
        """The status and JSON reply to a chat-completions (or Responses, or Anthropic) request."""
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
                    error = {
                        "message": "You exceeded your current quota",
                        "type": "insufficient_quota",
                    }
                    return self.failure_status, {"error": {**error, "code": "insufficient_quota"}}
                return self.failure_status, {
                    "error": {"message": f"loopback server: {self.failure_status} on purpose"}
                }
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
            return 503, {
                "error": {"message": f"loopback server: more than {self.max_requests} requests"}
            }
        if path.endswith("/messages"):
            return 200, _anthropic_message(n, body, self.usage)
        if path.endswith("/responses"):
            status, reply = self.respond(n, body)
            return status, (chat_as_response(reply, self.usage) if status == 200 else reply)
        return self.respond(n, body)

    def respond(self, n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON reply to the ``n``-th chat-completions request (``body``)."""
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
            reply = _completion(
                n, body, {"role": "assistant", "content": ANSWER_PREFIX + " | ".join(results)}
            )
            return 200, self._usage(reply)
        prompt = next(
            (str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        picked = self.route(prompt)
        if picked is None:
            return 200, self._usage(
                _completion(n, body, {"role": "assistant", "content": NO_TOOLS})
            )
        name, args = picked
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if name not in offered:
            return 400, {
                "error": {
                    "message": f"loopback server: tool {name!r} is not among the "
                    f"tools sent {offered}"
                }
            }
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        return 200, self._usage(
            _completion(n, body, {"role": "assistant", "content": None, "tool_calls": [call]})
        )

    def _usage(self, reply: dict[str, Any]) -> dict[str, Any]:
        if self.usage is not None:
            reply["usage"] = self.usage
        return reply

    def limit_headers(self, status: int) -> dict[str, str]:
        """The rate-limit headers of an answer.

        ``retry-after-ms`` on a 429, ``x-ratelimit-*`` when ``rate`` is set.
        """
        headers = {}
        with self._lock:
            if status == 429 and self.retry_after_ms:
                headers["retry-after-ms"] = str(self.retry_after_ms)
            if self.rate and self.announce:
                level = self._level
                headers["x-ratelimit-limit-requests"] = str(self.rate)
                headers["x-ratelimit-remaining-requests"] = str(int(level))
                headers["x-ratelimit-reset-requests"] = (
                    f"{(self.rate - level) / self.rate * 1000:.0f}ms"
                )
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


def responses_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API request as the chat-completions request it amounts to.

    ``instructions`` and ``input`` items become messages (function calls as assistant tool calls,
    their outputs as tool messages); the function tools become tools.
    """
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input") or []
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function"}
            call["function"] = {
                "name": item.get("name"),
                "arguments": item.get("arguments") or "{}",
            }
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": str(item.get("output")),
                }
            )
        elif kind == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
            messages.append({"role": item.get("role", "user"), "content": content})
    tools = [
        {"type": "function", "function": {"name": t.get("name"), "parameters": t.get("parameters")}}
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    return {
        "model": body.get("model", "loopback"),
        "messages": messages,
        "tools": tools,
        "api": "responses",
    }


def chat_as_response(
    completion: dict[str, Any], usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A chat completion as the Responses API object saying the same: message or function calls."""
    message = completion["choices"][0]["message"]
    n = completion["id"].removeprefix("chatcmpl-")
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{call['id']}",
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
            "status": "completed",
        }
        for call in message.get("tool_calls") or []
    ]
    if message.get("content") is not None:
        text = {
            "type": "output_text",
            "text": message["content"],
            "annotations": [],
            "logprobs": [],
        }
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    given = completion["usage"]
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 0,
        "model": completion["model"],
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage
        or {
            "input_tokens": given["prompt_tokens"],
            "output_tokens": given["completion_tokens"],
            "total_tokens": given["total_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _anthropic_message(
    n: int, body: dict[str, Any], usage: dict[str, Any] | None
) -> dict[str, Any]:
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
                status, reply = (
                    404,
                    {"error": {"message": f"loopback server: no route {self.path}"}},
                )
            elif path.endswith(
                "/chat/completions"
            ):  # as subclasses that answer chat completions only take it
                status, reply = server.reply(json.loads(self.rfile.read(length) or b"{}"))
            elif path.endswith("/responses"):
                status, reply = server.reply(
                    responses_as_chat(json.loads(self.rfile.read(length) or b"{}")), path
                )
            else:
                status, reply = server.reply(json.loads(self.rfile.read(length) or b"{}"), path)
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
