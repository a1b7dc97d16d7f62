"""The composition suite's parts (SPEC §17): LLM, HTTP agent, the plan, its files and readers.

The loopback travel LLM (agents, simulated user and scorer in one server), the HTTP agent service,
the pairwise plan of combinations, the eval files written from it, and the readers of what a run
printed and wrote (pytest's summary, JSON, junit, markdown, HTML).

Every case is one combination ``Row(agent, mocks, shape, mode, traffic)``; the cases of one (run
mode, traffic) pair run in one pytest run. A case's messages carry its own token (``trip T07``), so
the requests the server got are told apart by case (the token) and by agent kind (the model name
``travel-<kind>``).
"""

from __future__ import annotations

import json
import re
import threading
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from allpairspy import AllPairs
from openai_server import ANSWER_PREFIX, ChatServer, _completion
from otlp_support import read_traces

from tests import travel_desk

USER_MODEL = "travel-user"
"""The model of the simulated user and the scorer (``AGENT_EVAL_LLM_MODEL``)."""
TOKENS_PER_REQUEST = 15
"""What the loopback server reports as ``total_tokens`` for every answer."""

AGENTS = {
    "sync": "travel_desk:run",
    "async": "travel_desk:arun",
    "class": "travel_desk:TravelDesk",
    "sdk_chat": "travel_desk:SDK_CHAT",
    "sdk_responses": "travel_desk:SDK_RESPONSES",
    "sdk_handoff": "travel_desk:SDK_HANDOFF",
    "pydantic_ai": "travel_desk:PYDANTIC_AI",
    "lg_react": "travel_desk:LG_REACT",
    "lg_graph": "travel_desk:LG_GRAPH",
    "lc_agent": "travel_desk:LC_AGENT",
    "http": "{http}",
    "mcp": "travel_mcp:arun",
}
"""Agent kind -> the reference an eval file names (``{http}``: the HTTP agent service's URL)."""
NEEDS = {
    "sdk_chat": "agents",
    "sdk_responses": "agents",
    "sdk_handoff": "agents",
    "pydantic_ai": "pydantic_ai",
    "lg_react": "langgraph.prebuilt",
    "lg_graph": "langgraph.graph",
    "lc_agent": "langchain.agents",
    "mcp": "mcp.client.session",
}
"""The module a kind's framework needs (pydantic-ai is not installed on Python 3.10; ``mcp``: the
travel desk's tools served over MCP, ``tests/travel_mcp.py``).
"""
RAISES_TOOL_ERRORS = frozenset({"pydantic_ai", "lg_react", "lg_graph", "lc_agent"})
"""Kinds whose framework lets an exception a tool raises end the run (pydantic-ai; LangGraph's
``ToolNode`` handles only argument errors); the others hand it to the model as the tool's result
(the plain loop, the Agents SDK's ``failure_error_function``).
"""

BOOKED = "Booked: confirmation M0CK"
MOCKS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "literal": {
        "search_flights": "LH220 Paris-Rome EUR 80; AF100 Paris-Rome EUR 120",
        "book_flight": BOOKED,
    },
    "return": {
        "search_flights": {"return": {"flights": [{"flight": "KL550", "price": "EUR 60"}]}},
        "book_flight": {"return": BOOKED},
    },
    "sequence": {
        "search_flights": {"sequence": ["BA440 EUR 70; AF100 EUR 120"] * 2},
        "book_flight": BOOKED,
    },
    "raise": {
        "search_flights": "LH220 Paris-Rome EUR 80; AF100 Paris-Rome EUR 120",
        "book_flight": {"raise": "RuntimeError: flight sold out"},
    },
    "when": {
        "search_flights": {
            "when": [{"args": {"destination": "Rome"}, "return": "DL660 EUR 75; AF100 EUR 120"}],
            "default": "no flights",
        },
        "book_flight": BOOKED,
    },
    "call": {"search_flights": {"call": "travel_desk:canned_search"}, "book_flight": BOOKED},
}
"""A ``tool_mocks:`` form -> the case's mocks (``search_flights`` in the form, ``book_flight``
answering).
"""
SEARCH_RESULT: dict[str, Any] = {
    "none": travel_desk.search_flights("Paris", "Rome"),
    "literal": "LH220 Paris-Rome EUR 80; AF100 Paris-Rome EUR 120",
    "return": {"flights": [{"flight": "KL550", "price": "EUR 60"}]},
    "sequence": "BA440 EUR 70; AF100 EUR 120",
    "raise": "LH220 Paris-Rome EUR 80; AF100 Paris-Rome EUR 120",
    "when": "DL660 EUR 75; AF100 EUR 120",
    "call": travel_desk.canned_search("Paris", "Rome"),
}
CHEAPEST = {
    "none": "AZ310",
    "literal": "LH220",
    "return": "KL550",
    "sequence": "BA440",
    "raise": "LH220",
}
CHEAPEST.update(when="DL660", call="IB770")
SHAPES = ("single", "turns", "simulated", "repeat")
MODES = ("serial", "concurrency", "xdist", "xdist_concurrency")
TRAFFIC = ("off", "hook", "replay")
MODE_ARGS = {
    "serial": [],
    "concurrency": ["--agent-eval-concurrency", "4"],
    "xdist": ["-n", "2"],
    "xdist_concurrency": ["-n", "2", "--agent-eval-concurrency", "4"],
}
SEARCH = "Find flights from Paris to Rome"
BOOK = "Book the cheapest one"


@dataclass(frozen=True)
class Row:
    """One combination: a case of the eval file of its (mode, traffic) run."""

    agent: str
    mocks: str
    shape: str
    mode: str
    traffic: str
    number: int

    @property
    def token(self) -> str:
        return f"T{self.number:02d}"

    @property
    def case_id(self) -> str:
        return f"{self.token}-{self.agent}-{self.shape}-{self.mocks}".replace("_", "")

    def __str__(self) -> str:
        return (
            f"[{self.agent} × {self.shape} × mocks {self.mocks} × {self.mode} × "
            f"traffic {self.traffic}]"
        )

    @property
    def messages(self) -> tuple[str, str]:
        """The user's two requests (one message in the single and repeat shapes)."""
        return f"{SEARCH} (trip {self.token})", f"{BOOK} (trip {self.token})"

    def expected_calls(self) -> list[tuple[str, Any]]:
        """(name, arguments) of the calls the record must hold, in order."""
        calls: list[tuple[str, Any]] = [
            ("search_flights", {"origin": "Paris", "destination": "Rome"})
        ]
        if self.agent == "sdk_handoff":
            calls.append(("transfer_to_booking", {}))
        return [*calls, ("book_flight", {"flight": CHEAPEST[self.mocks]})]

    def expected_outcome(self) -> str:
        return "failed" if self.mocks == "raise" and self.agent in RAISES_TOOL_ERRORS else "passed"


def plan(kinds: list[str]) -> list[Row]:
    """Every pair of values of any two dimensions in at least one row (allpairspy), numbered.

    The HTTP agent's tools run inside its service, where no tool mock reaches them (README: An agent
    served over HTTP): a row that pairs it with mocks becomes two, the HTTP agent without mocks and
    the mocks with another agent (allpairspy's own filter loses pairs).
    """
    combos: list[tuple[Any, ...]] = []
    mockable = [kind for kind in kinds if kind != "http"]
    for n, (agent, mocks, *rest) in enumerate(
        AllPairs([kinds, list(MOCKS), list(SHAPES), list(MODES), list(TRAFFIC)])
    ):
        if agent == "http" and mocks != "none":
            combos += [(agent, "none", *rest), (mockable[n % len(mockable)], mocks, *rest)]
        else:
            combos.append((agent, mocks, *rest))
    unique = _balanced(list(dict.fromkeys(combos)))
    return [Row(*combo, number=n) for n, combo in enumerate(unique, 1)]


def _pairs(combo: tuple[Any, ...]) -> list[tuple[int, Any, int, Any]]:
    return [(i, combo[i], j, combo[j]) for i in range(len(combo)) for j in range(i + 1, len(combo))]


def _balanced(combos: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows moved from crowded (mode, traffic) runs to the emptiest, no pair losing its only row.

    allpairspy fills the rows it adds last with the first values, so one run would hold half the
    cases.
    """
    groups = [(m, t) for m in MODES for t in TRAFFIC]
    covered = Counter(p for combo in combos for p in _pairs(combo))
    for _ in range(len(combos) * len(groups)):
        load = Counter(combo[3:] for combo in combos)
        lightest = min(groups, key=lambda g: load[g])
        movable = [
            (k, combo)
            for k, combo in enumerate(combos)
            if load[combo[3:]] > load[lightest] + 1
            and all(
                covered[p] > 1 for p in set(_pairs(combo)) - set(_pairs((*combo[:3], *lightest)))
            )
        ]
        if not movable:
            return combos
        k, combo = max(movable, key=lambda item: load[item[1][3:]])
        moved = (*combo[:3], *lightest)
        covered.subtract(_pairs(combo))
        covered.update(_pairs(moved))
        combos[k] = moved
    return combos


def matrix_agents(kinds: list[str], group: int) -> tuple[str, str]:
    """The two agents of group ``group``'s matrix file: the kinds in turn, each in a matrix."""
    return kinds[(2 * group) % len(kinds)], kinds[(2 * group + 1) % len(kinds)]


# -- the eval files
# ----------------------------------------------------------------------------------------------


def case_yaml(row: Row, http_url: str) -> dict[str, Any]:
    """The case of one row (as data, written as JSON-compatible YAML)."""
    search, book = row.messages
    agent = AGENTS[row.agent].format(http=http_url)
    done = "sold out" if row.mocks == "raise" else "confirmation"
    tool_args = {name: args for name, args in row.expected_calls() if args}
    calls = [name for name, _ in row.expected_calls()]
    case: dict[str, Any] = {"id": row.case_id, "agent": agent}
    if row.shape in ("single", "repeat"):
        case["input"] = f"{search} and book the cheapest one (trip {row.token})"
        case["expect"] = {"tool_sequence": calls, "tool_args": tool_args, "contains": [done]}
        if row.shape == "repeat":
            case["repeat"] = 2
    elif row.shape == "turns":
        case["turns"] = [
            {"input": search, "expect": {"tools_called": ["search_flights"]}},
            {"input": book, "expect": {"tool_args": {"book_flight": tool_args["book_flight"]}}},
        ]
        case["expect"] = {"tool_sequence": calls, "contains": [done]}
    else:
        case["simulated_user"] = {
            "persona": {"name": "Ann", "voice": "terse"},
            "greetings": [f"Hi, this is trip {row.token}"],
            "tasks": [
                {"task": search, "acceptance_criteria": "the agent lists flights"},
                {"task": book, "acceptance_criteria": "the agent books the cheapest flight"},
            ],
            "signoff": "Thanks, bye",
            "max_turns": 10,
        }
        case["score"] = {"aspirational_latency_s": 60}
        case["expect"] = {"tool_sequence": calls, "tool_args": tool_args}
    if MOCKS[row.mocks] is not None:
        case["tool_mocks"] = MOCKS[row.mocks]
    else:  # the file's dispatcher is patched for every case: without mocks, the real tools answer
        case["unmocked_tools"] = "passthrough"
    return case


def eval_file(rows: list[Row], http_url: str, failing_token: str) -> str:
    """The run's main eval file: a case per row, and one case that fails on purpose.

    The failing case expects a tool no agent has, so that every report has a failure to agree on and
    the pass-rate threshold is missed.
    """
    wrong = {
        "id": "wrong",
        "agent": AGENTS["sync"],
        "input": f"{SEARCH} (trip {failing_token})",
        "expect": {"tools_called": ["cancel_flight"]},
        "unmocked_tools": "passthrough",
    }
    document = {
        "tool_dispatch": "travel_desk:dispatch_tool",
        "cases": [*(case_yaml(r, http_url) for r in rows), wrong],
    }
    return json.dumps(document, indent=1)


def matrix_file(agents: tuple[str, str], http_url: str, token: str, in_file: bool) -> str:
    """A matrix: one case run against both agents (named in the file's ``agents:``, else by CLI)."""
    case = {
        "id": "matrix",
        "input": f"{SEARCH} and book the cheapest one (trip {token})",
        "expect": {
            "tool_args": {"book_flight": {"flight": CHEAPEST["none"]}},
            "contains": ["confirmation"],
        },
    }
    # an MCP agent's calls reach its server (no mock), as a function tool's reach the function
    case["unmocked_tools"] = "passthrough"
    document: dict[str, Any] = {"cases": [case]}
    if in_file:
        document["agents"] = {kind: AGENTS[kind].format(http=http_url) for kind in agents}
    return json.dumps(document, indent=1)


# -- the loopback LLM
# ----------------------------------------------------------------------------------------------

_FLIGHT_OR_PRICE = re.compile(r"\b([A-Z]{2}\d{3})\b|EUR (\d+)")
_TASK = re.compile(r"^\d+\. \[\w+\] (.*)$", re.M)


def cheapest(text: str) -> str | None:
    """The cheapest flight a text lists (each flight number paired with the next price after it)."""
    best: tuple[int, str] | None = None
    pending = None
    for match in _FLIGHT_OR_PRICE.finditer(text):
        if match[1]:
            pending = match[1]
        elif pending is not None:
            if best is None or int(match[2]) < best[0]:
                best = (int(match[2]), pending)
            pending = None
    return best[1] if best else None


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


class TravelLLM(ChatServer):
    """The travel desk's LLM: it searches, books, answers, and plays the simulated user and scorer.

    It searches when asked for flights, books the cheapest flight of the conversation when asked to
    book (after a handoff where the agent can only hand off), then answers with the tools' results;
    as ``travel-user`` it plays the simulated user (its tasks in order, then its signoff) and the
    scorer.
    """

    def __init__(self) -> None:
        super().__init__(lambda prompt: None, max_requests=5000, lifetime_s=600)

    def close(self) -> None:
        """Stop answering and close the port (an open port of a stopped server hangs clients)."""
        self.stop()
        self._httpd.server_close()

    def respond(self, n: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages") or []
        if body.get("model") == USER_MODEL:
            return 200, _completion(
                n, body, {"role": "assistant", "content": self._user_or_scorer(messages)}
            )
        offered = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        return 200, _completion(n, body, self._agent(n, messages, offered))

    def _agent(self, n: int, messages: list[dict[str, Any]], offered: list[str]) -> dict[str, Any]:
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        asked = text_of(messages[last_user]) if last_user >= 0 else ""
        since = messages[last_user + 1 :]
        names = {c["id"]: c["function"]["name"] for m in since for c in m.get("tool_calls") or []}
        called = set(names.values())
        steps: list[tuple[str, dict[str, Any]]] = []
        wanted = re.search(r"flights from (\w+) to (\w+)", asked, re.I)
        if wanted:
            steps.append(("search_flights", {"origin": wanted[1], "destination": wanted[2]}))
        if re.search(r"\bbook\b", asked, re.I):
            flight = cheapest(" ".join(text_of(m) for m in messages))
            if flight is None and not steps:
                return {
                    "role": "assistant",
                    "content": "Which flight would you like to book? I know of none.",
                }
            steps.append(("book_flight", {"flight": flight}))
        for name, args in steps:
            if name in called:
                continue
            if name not in offered and "transfer_to_booking" in offered and name == "book_flight":
                name, args = "transfer_to_booking", {}
            if name == "book_flight" and args["flight"] is None:
                args = {"flight": cheapest(" ".join(text_of(m) for m in messages))}
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        results = [
            text_of(m)
            for m in since
            if m.get("role") == "tool"
            and not str(names.get(m.get("tool_call_id"), "")).startswith("transfer_")
        ]
        return {
            "role": "assistant",
            "content": ANSWER_PREFIX + " | ".join(results) if results else "How can I help?",
        }

    def _user_or_scorer(self, messages: list[dict[str, Any]]) -> str:
        prompt = text_of(messages[-1])
        if len(messages) == 1 and "Conversation:" in prompt:
            head, transcript = prompt.split("Conversation:", 1)
            tasks = re.findall(r"^\d+\. \[\w+\] (.*?) \(acceptance criteria:", head, re.M)
            done = "confirmation" in transcript or "sold out" in transcript
            return json.dumps(
                {
                    "tone": 0.8,
                    "tasks": [{"scored": t, "score": 1.0 if done else 0.2} for t in tasks],
                }
            )
        system = text_of(messages[0])
        tasks = _TASK.findall(system)
        signoff = re.search(r'contains exactly: "(.*)"', system)
        mine = [text_of(m) for m in messages[1:] if m.get("role") == "assistant"]
        pending = [t for t in tasks if t not in mine]
        return pending[0] if pending else (signoff[1] if signoff else "Bye")

    # -- what the server was asked
    # -------------------------------------------------------------------------------

    def of_case(self, token: str, model: str | None = None) -> list[list[dict[str, Any]]]:
        """The messages of each request naming the case's token (``trip T07``), one model or all."""
        found = []
        for body in list(self.requests):
            if model is not None and body.get("model") != model:
                continue
            if any(f"trip {token}" in text_of(m) for m in body.get("messages") or []):
                found.append(body.get("messages") or [])
        return found


def model_of(kind: str) -> str:
    return "travel-" + kind.replace("_", "-")


# -- the HTTP agent service
# ----------------------------------------------------------------------------------------


class TravelService(ThreadingHTTPServer):
    """The travel desk as an HTTP agent, ``POST /chat {message, session_id}``; loopback LLM."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ServiceHandler)
        self.sessions: dict[str, list[dict[str, Any]]] = {}
        self.calls = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/chat"

    def __enter__(self) -> TravelService:
        threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop answering and close the port."""
        self.shutdown()
        self.server_close()


class _ServiceHandler(BaseHTTPRequestHandler):
    server: TravelService

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls += 1
        try:
            status, reply = 200, travel_desk.serve_chat(self.server.sessions, body)
        except Exception as exc:  # shown to the plugin as the service's own failure
            status, reply = 500, {"error": f"{type(exc).__name__}: {exc}"}
        raw = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


# -- what a run wrote
# ------------------------------------------------------------------------------------------------

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?:\(cached\) )?(\S+)")
_WORD = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}
_WORD.update(XFAIL="xfailed", XPASS="xpassed")


@dataclass
class RunOutput:
    """One run: its exit status, output, and the reports it wrote (in ``path``, by ``prefix``)."""

    ret: int
    stdout: str
    path: Path
    prefix: str

    def pytest_outcomes(self) -> dict[str, str]:
        """node id -> outcome, from pytest's ``-rA`` short summary."""
        found = (_SUMMARY.match(line) for line in self.stdout.splitlines())
        return {m[2]: _WORD[m[1]] for m in found if m}

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(
            (self.path / f"{self.prefix}.json").read_text(encoding="utf-8")
        )
        return data

    def records(self) -> dict[str, dict[str, Any]]:
        return {c["nodeid"]: c for c in self.report()["cases"]}

    def spans(self) -> list[dict[str, Any]]:
        """Every span of the run's OTLP JSON lines file, its attributes as ``attrs``."""
        return read_traces(self.path / f"{self.prefix}.traces.jsonl")

    def junit(self) -> dict[str, dict[str, Any]]:
        """junit testcase (``file::name``) -> outcome and properties."""
        cases = {}
        for case in ET.parse(self.path / f"{self.prefix}.xml").getroot().iter("testcase"):
            outcome = "passed"
            for child, word in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                if case.find(child) is not None:
                    outcome = word
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            # a case that never ran (a setup error) has no properties: its file is the class name
            location = str(props.get("location", case.get("classname"))).rsplit(":", 1)[0]
            cases[f"{location}::{case.get('name')}"] = {"outcome": outcome, **props}
        return cases

    def markdown(self) -> str:
        return (self.path / f"{self.prefix}.md").read_text(encoding="utf-8")

    def html_cases(self) -> dict[str, dict[str, Any]]:
        page = (self.path / f"{self.prefix}.html").read_text(encoding="utf-8")
        found = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
        assert found, "the HTML report embeds no case data"
        return {c["nodeid"]: c for c in json.loads(found[1])}


def tool_calls(record: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["name"], c["args"]) for c in record.get("tool_calls") or []]


def total_tokens(record: dict[str, Any]) -> int | None:
    tokens = record.get("tokens")
    return None if tokens is None else tokens.get("total")


class Findings:
    """Soft assertions: every combination's problems, reported together at the end of a test."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def check(self, ok: bool, where: object, what: str) -> None:
        if not ok:
            self.problems.append(f"{where}: {what}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.problems)

    def assert_none(self, run: object) -> None:
        assert not self.problems, (
            f"{len(self.problems)} problems:\n" + "\n".join(self.problems) + f"\n\n{run}"
        )
