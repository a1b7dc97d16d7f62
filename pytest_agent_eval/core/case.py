"""The case model: one eval case, with all it takes to run and check it, and where it came from."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.core.model import model

if TYPE_CHECKING:
    from pytest_agent_eval.core.conversation import SimulatedUser


@model
class Turn:
    """One scripted user message of a conversation, with its own checks."""

    message: str
    expect: dict[str, Any] = field(default_factory=dict)
    line: int = 0


@model
class Case:
    """One eval case. ``expect`` maps registered check names to their arguments."""

    id: str
    path: Path
    line: int
    query: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    description: str | None = None
    turns: tuple[Turn, ...] = ()
    simulated_user: SimulatedUser | None = None
    """A conversation with an LLM playing the user (SPEC §9), its assertions and scores.

    Given instead of ``turns``.
    """
    expect: dict[str, Any] = field(default_factory=dict)
    expect_options: dict[str, Any] = field(default_factory=dict)
    """Keys of ``expect`` that tune checks rather than being checks (``case_sensitive``)."""
    tags: tuple[str, ...] = ()
    timeout: float | None = None
    repeat: int = 1
    """Trials of the case; with ``stop_when_decided``, at most this many."""
    stop_when_decided: bool = False
    """Whether the trials stop once the verdict of all ``repeat`` is known (SPEC §25).

    Set by ``repeat: {max: n, stop: decided}``.
    """
    min_pass_rate: float = 1.0
    min_score: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    tool_mocks: dict[str, Any] = field(default_factory=dict)
    inherited_mocks: tuple[str, ...] = ()
    """Names in ``tool_mocks`` that come only from the file's ``defaults``.

    These are spare mocks the case may leave unused.
    """
    unmocked_tools: str | None = None
    skip: str | None = None
    xfail: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reference: str | list[str] | None = None
    """A reference answer (or facts) the ``judge`` compares the answer with."""
    reference_any: bool = False
    """Whether a list ``reference`` lists alternative answers, any one of which is right.

    As inspect_ai's targets do, rather than facts the answer must all agree with.
    """
    agent: str | dict[str, Any] | None = None
    """The case's agent, as the file names it.

    ``module:attr``, an HTTP agent's URL or ``{url, ...}`` from the file, or ``None`` for
    ``--agent`` / the ``agent`` fixture.
    """
    agent_line: int | None = None
    own_agent: bool = False
    """Whether ``agent`` is the case's own (``agent:`` in the case), which a matrix keeps."""
    agent_name: str | None = None
    """The matrix agent this variant runs (``case[name]``); ``None`` outside a matrix."""
    tool_dispatch: str | None = None
    dialect: str = "native"
    stop_on_failure: bool = False
    inject: dict[str, Any] | None = None
    """The case's prompt-injection test (SPEC §26).

    ``inject: {tool, corpus, where, field, allowed_tools}``: the case runs once per payload of the
    corpus, each variant with the payload in the tool's mocked output.
    """
    expect_under_attack: dict[str, Any] | None = None
    """The checks of an injection variant (default: the case's own ``expect``)."""
    error: str | None = None
    """Set when the case itself is invalid: the item reports this instead of running."""

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


@model
class LoadedFile:
    """A loaded file: its cases (some may carry errors) and the format it was read as."""

    path: Path
    dialect: str
    cases: list[Case]
    name: str | None = None
    description: str | None = None
    agents: dict[str, tuple[str | dict[str, Any], int]] = field(default_factory=dict)
    """The file's matrix (``agents:``): name -> (``module:attr``, line)."""
    notes: list[str] = field(default_factory=list)
    """What a user may not expect but is no error, such as a dataset without its sidecar.

    Shown as a warning in pytest, a note in ``agent-eval validate``.
    """
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """The file's stand-in MCP servers (``mcp_servers:``).

    Name -> ``mocks.mcp_standin.StandinServer``.
    """
