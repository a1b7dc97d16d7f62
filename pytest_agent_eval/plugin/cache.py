"""The verdict cache (SPEC §25): cases whose key is unchanged reported from the cache.

``--agent-eval-cache off|read|write|on`` (ini ``agent_eval_cache``; default off) and
``--agent-eval-changed`` (the cache read and written: only the cases whose key changed run, the rest
are reported from the cache).

With ``read``, an eval item whose key (``report.verdict_cache.KeyParts``) has a stored passed or
failed record is not run: its record is that one, marked ``cached``, and the item passes or fails as
it did. With ``write``, every passed or failed record of a case that ran is stored under its key.
Errors, skips and infrastructure failures are never stored. An agent from a fixture (no
``module:attr`` reference) is cached only with a declared ``agent_version`` (ini
``agent_eval_agent_version``): its source is not known.

The storage is an SQLite file, ``.agent-eval/cache.db`` under the rootdir, through the standard
library's ``sqlite3``: a stand-in until the run store of SPEC §24 holds the cache.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.plugin.options import option_group

if TYPE_CHECKING:
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.report.verdict_cache import VerdictCache

MODES = ("off", "read", "write", "on")
CACHED = pytest.StashKey[dict[str, Any]]()
"""On an item whose record comes from the cache: that record."""
CACHE_FILE = ".agent-eval/cache.db"


class Cache:
    """A plugin object in every process that runs cases: looks cases up, stores their records."""

    def __init__(self, config: pytest.Config, read: bool, write: bool) -> None:
        self.config = config
        self.read = read
        self.write = write
        self._store: VerdictCache | None = None
        self._fingerprints: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        """Node id -> key of the items this process looked up (to store what they did)."""
        self.reused = 0
        self.warned = False

    def store(self) -> VerdictCache:
        if self._store is None:
            from pytest_agent_eval.report.verdict_cache import VerdictCache

            self._store = VerdictCache(self.config.rootpath / CACHE_FILE)
        return self._store

    def key(self, item: pytest.Item, case: Case) -> str | None:
        """The item's cache key.

        ``None`` when its agent cannot be fingerprinted (a fixture's, no version).
        """
        from pytest_agent_eval.checks.judge import PROMPT, REFERENCE_RUBRIC
        from pytest_agent_eval.plugin.prepare import agent_ref, session_responses
        from pytest_agent_eval.plugin.state import get_state
        from pytest_agent_eval.report.case_input import content_hash
        from pytest_agent_eval.report.verdict_cache import KeyParts, agent_fingerprint

        settings = get_state(item.config).settings
        ref = agent_ref(case, settings)
        version = str(item.config.getini("agent_eval_agent_version") or "").strip() or None
        if ref is None and version is None:
            return None
        label = repr(ref)
        if label not in self._fingerprints:
            self._fingerprints[label] = agent_fingerprint(ref, item.config.rootpath, version)
        try:
            mocks = {
                name: repr(response) for name, response in session_responses(item.config).items()
            }
        except Exception:  # a bad responses file fails the case when it runs: not cached
            return None
        parts = KeyParts(
            content_hash=content_hash(case),
            agent=self._fingerprints[label],
            settings={
                "llm_model": os.environ.get("AGENT_EVAL_LLM_MODEL"),
                "repeat": settings.repeat,
                "require_llm": bool(item.config.getini("agent_eval_require_llm")),
                "agent_name": case.agent_name,
                "traffic": settings.traffic.record,
                "cassette": _cassette(item, case) if settings.traffic.record else None,
            },
            judge_model=os.environ.get("AGENT_EVAL_LLM_MODEL"),
            judge_prompt=PROMPT + REFERENCE_RUBRIC,
            mocks=mocks,
        )
        return parts.key()

    def lookup(self, item: pytest.Item, case: Case) -> dict[str, Any] | None:
        """The stored record to report instead of running the case; ``None``: run it."""
        key = self.key(item, case)
        if key is None:
            return None
        self.keys[item.nodeid] = key
        if not self.read:
            return None
        record = self.store().get(key)
        if record is None or record.get("outcome") not in ("passed", "failed"):
            return None
        self.reused += 1
        return record

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Store the record of a case that ran, passed or failed (on the process that ran it)."""
        from pytest_agent_eval.report.collector import ATTRIBUTE

        key = self.keys.get(report.nodeid)
        data = getattr(report, ATTRIBUTE, None)
        if not self.write or key is None or report.when != "call" or not isinstance(data, dict):
            return
        if data.get("cached") or data.get("outcome") not in ("passed", "failed"):
            return
        self.store().put(key, report.nodeid, data, time.time())

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        store = self._store
        if store is not None and store.problem:
            terminalreporter.write_line(f"agent eval cache: {store.problem}", yellow=True)

    def pytest_unconfigure(self) -> None:
        if self._store is not None:
            self._store.close()


def _cassette(item: pytest.Item, case: Case) -> str | None:
    """A hash of the case's cassette (what a replayed case is answered with).

    ``None`` when it has none.
    """
    import hashlib

    from pytest_agent_eval.plugin.state import get_state
    from pytest_agent_eval.traffic.cassette import cassette_path

    folder = get_state(item.config).settings.traffic.cassettes
    beside = folder is None
    path = cassette_path(
        folder or case.path.parent / "cassettes",
        case.path,
        case.id,
        None if beside else item.config.rootpath,
    )
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def lookup(item: pytest.Item, case: Case) -> dict[str, Any] | None:
    """The cached record of ``item`` (the cache read and a hit), else ``None``.

    Nothing without the cache.
    """
    cache = item.config.pluginmanager.get_plugin("agent_eval_cache_plugin")
    if not isinstance(cache, Cache):
        return None
    record = cache.lookup(item, case)
    if record is not None:
        item.stash[CACHED] = record
    return record


def pytest_addoption(parser: pytest.Parser) -> None:
    group = option_group(parser)
    group.addoption(
        "--agent-eval-cache",
        dest="agent_eval_cache",
        choices=MODES,
        default=None,
        help="the verdict cache: read (reuse a case's record when nothing it depends on changed), "
        "write, on (both), off (default; ini: agent_eval_cache)",
    )
    group.addoption(
        "--agent-eval-changed",
        dest="agent_eval_changed",
        action="store_true",
        default=False,
        help="run only the cases whose cache key changed; report the others from the verdict "
        "cache (cache on)",
    )
    parser.addini("agent_eval_cache", "the verdict cache: off, read, write or on", default="off")
    parser.addini(
        "agent_eval_agent_version", "the agent's version, for the verdict cache's key", default=""
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = (
        config.getoption("agent_eval_cache", None)
        or str(config.getini("agent_eval_cache") or "off").strip()
    )
    if config.getoption("agent_eval_changed", False):
        mode = "on"
    if mode not in MODES:
        raise pytest.UsageError(f"ini agent_eval_cache = {mode!r}: give one of {', '.join(MODES)}")
    if mode == "off":
        return
    cache = Cache(config, read=mode in ("read", "on"), write=mode in ("write", "on"))
    config.pluginmanager.register(cache, "agent_eval_cache_plugin")
