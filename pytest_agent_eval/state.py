"""Per-session state of the plugin, kept in ``config.stash``."""

from __future__ import annotations

from collections.abc import Collection, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_agent_eval.options import Settings

# The engine (formats, checks, the runner) loads with the first eval file: a session without any pays nothing.
if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

    from pytest_agent_eval.adapters import AdapterRegistry
    from pytest_agent_eval.cases.cache import ParseCache
    from pytest_agent_eval.cases.dialects import DialectRegistry
    from pytest_agent_eval.cases.model import Case
    from pytest_agent_eval.checks import CheckRegistry
    from pytest_agent_eval.crashes import InFlight
    from pytest_agent_eval.llm import LLM
    from pytest_agent_eval.runner import CaseResult, InlineLoop, LoopThread, RecorderFactory, RunSettings
    from pytest_agent_eval.scheduler import Scheduler
    from pytest_agent_eval.stalls import Stall
    from pytest_agent_eval.traffic.hook import Traffic


_UNSET: Any = object()
T = TypeVar("T")


class EvalSession:
    """Registries, settings, the runner's loop and agent instances for one pytest session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = Settings.from_config(config)
        self.agent_instances: dict[str, Any] = {}
        self._checks: CheckRegistry | None = None
        self._dialects: DialectRegistry | None = None
        self._adapters: AdapterRegistry | None = None
        self._loop: LoopThread | None = None
        self._runner: InlineLoop | LoopThread | None = None
        self._marks: dict[str, pytest.MarkDecorator] = {}
        self._parse_cache: ParseCache | None = None
        self._limit: asyncio.Semaphore | None = None
        self.scheduler: Scheduler | None = None
        """Starts upcoming cases early: registered at concurrency > 1 only (``prepare.register_scheduler``)."""
        self._inflight: Any = _UNSET
        self.blocked: dict[int, CaseResult] = {}
        """Cases whose agent blocked the background loop, by ``id(case)``: failed so, and never started again."""
        self.eval_items = 0
        """How many items the eval files collected so far made (the GC policy depends on it)."""
        self.traffic: Traffic | None = self._start_traffic() if self.settings.traffic.on else None
        """The HTTP traffic hook (SPEC §14), installed only when an option needs it, or for the run's pace alone
        (on by default) at the first case (a run without eval cases loads none of it)."""
        self._pace_pending = not self.settings.traffic.on and self.settings.traffic.pace

    def _start_traffic(self) -> Traffic:
        import hashlib
        import tempfile
        from pathlib import Path

        from pytest_agent_eval.traffic.session import start

        cache = getattr(self.config, "cache", None)
        if cache is not None:  # the run's cache directory, shared by every xdist worker
            folder = cache.mkdir("agent_eval_limits")
        else:
            digest = hashlib.sha256(str(self.config.rootpath).encode()).hexdigest()[:12]
            folder = Path(tempfile.gettempdir()) / f"pytest-agent-eval-limits-{digest}"
        try:
            return start(self.settings.traffic, self.config.rootpath, folder)
        except (ValueError, ImportError) as exc:
            raise pytest.UsageError(str(exc)) from None

    @property
    def checks(self) -> CheckRegistry:
        if self._checks is None:
            from pytest_agent_eval.checks import builtin_registry

            self._checks = builtin_registry()
            # historic: a conftest.py registered later (a sub-directory's) is called when it registers
            self.config.hook.pytest_agent_eval_register_checks.call_historic(kwargs={"registry": self._checks})
        return self._checks

    @property
    def dialects(self) -> DialectRegistry:
        if self._dialects is None:
            from pytest_agent_eval.cases.load import builtin_dialects

            self._dialects = builtin_dialects()
            self.config.hook.pytest_agent_eval_register_dialects.call_historic(kwargs={"registry": self._dialects})
        return self._dialects

    @property
    def adapters(self) -> AdapterRegistry:
        """The framework adapters: plugins' (``pytest_agent_eval_register_adapters``) first, then the built-in."""
        if self._adapters is None:
            from pytest_agent_eval.adapters import builtin_adapters

            self._adapters = builtin_adapters()
            self.config.hook.pytest_agent_eval_register_adapters.call_historic(kwargs={"registry": self._adapters})
        return self._adapters

    @property
    def parse_cache(self) -> ParseCache | None:
        """The YAML parse cache in pytest's cache directory (none under ``-p no:cacheprovider``)."""
        if self._parse_cache is None and getattr(self.config, "cache", None) is not None:
            from pytest_agent_eval.cases.cache import ParseCache

            self._parse_cache = ParseCache(self.config.cache.mkdir("agent_eval_parsed"))
        return self._parse_cache

    @property
    def inflight(self) -> InFlight | None:
        """On an xdist worker, where the cases in flight are noted for the controller (crashes)."""
        if self._inflight is _UNSET:
            from pytest_agent_eval import compat
            from pytest_agent_eval.crashes import KEY, InFlight

            shared = (compat.worker_input(self.config) or {}).get(KEY)
            worker = (compat.worker_input(self.config) or {}).get("workerid", "worker")
            self._inflight = InFlight(Path(shared), str(worker)) if shared else None
        return self._inflight  # type: ignore[no-any-return]

    @property
    def loop(self) -> LoopThread:
        if self._loop is None:
            from pytest_agent_eval.runner import LoopThread

            self._loop = LoopThread()
        return self._loop

    @property
    def runner(self) -> InlineLoop | LoopThread:
        """Where a case runs when its item's turn comes: in this thread at concurrency 1 (unless an event loop
        already runs here), else on the background loop, beside the cases started early."""
        if self._runner is None:
            import asyncio

            from pytest_agent_eval import compat
            from pytest_agent_eval.runner import InlineLoop

            if self.settings.concurrency == 1 and compat.running_loop() is None:
                self._runner, self._limit = InlineLoop(), asyncio.Semaphore(1)
            else:
                self._runner, self._limit = self.loop, self.loop.semaphore(self.settings.concurrency)
        return self._runner

    def leave_blocked_loop(self, stall: Stall) -> None:
        """The background loop is blocked: its culprit fails; upcoming cases start afresh on a new loop."""
        from pytest_agent_eval.runner import blocked_result

        culprit = stall.culprit
        if culprit is not None:
            limit = culprit.timeout if culprit.timeout is not None else self.settings.timeout
            self.blocked[id(culprit)] = blocked_result(culprit, stall, limit)
        if self.scheduler is not None:
            self.scheduler.forget()
        if self._loop is not None:
            self._loop.abandon()
            if self._runner is self._loop:
                self._runner = None  # made again, with its concurrency limit, on the new loop
            self._loop = None

    def marker(self, name: str) -> pytest.MarkDecorator:
        """The mark for tag ``name``, registered first (so ``--strict-markers`` accepts tags)."""
        mark = self._marks.get(name)
        if mark is None:
            registered = {line.split(":")[0].split("(")[0].strip() for line in self.config.getini("markers")}
            if name not in registered:
                self.config.addinivalue_line("markers", f"{name}: agent-eval tag")
            mark = self._marks[name] = getattr(pytest.mark, name)
        return mark

    def run_settings(self, case: Case, llm: LLM | None, recorder: RecorderFactory | None) -> RunSettings:
        """What running ``case`` needs: checks, timeout, the LLM, tool-mock recorder and the concurrency limit."""
        from pytest_agent_eval.runner import RunSettings

        runner = self.runner
        if self._pace_pending:
            self._pace_pending = False
            self.traffic = self._start_traffic()
        inline = runner is not self._loop
        # In this thread one case runs at a time: with one trial, there is nothing for the limit to hold back.
        alone = inline and (self.settings.repeat or case.repeat) == 1
        return RunSettings(
            checks=self.checks,
            default_timeout=self.settings.timeout,
            llm=llm,
            recorder=recorder,
            limit=None if alone else self._limit,
            repeat=self.settings.repeat,
            require_llm=self.settings.require_llm,
            inline=inline,
            traffic=self.traffic,
            assertion_hook=self.config.hook.pytest_agent_eval_evaluate_assertion,
        )

    def start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the background loop (a new one once a blocked one was left behind)."""
        return self.loop.submit(coro)

    def suspects(self) -> Collection[str]:
        """The node ids that run alone: they were in flight when an xdist worker crashed."""
        inflight = self.inflight
        return () if inflight is None else inflight.suspects()

    def thaw(self) -> None:
        """Give back to the cyclic GC what the session froze after collection (``gc_policy``)."""
        if self.eval_items:
            from pytest_agent_eval import gc_policy

            gc_policy.unfreeze(self)

    def close(self) -> None:
        if self.traffic is not None:
            from pytest_agent_eval.traffic.session import stop

            stop(self.traffic)
            self.traffic = None
        if self.scheduler is not None:
            self.scheduler.close()
            self.scheduler = None
        if self._runner is not None and self._runner is not self._loop:  # the inline loop
            self._runner.close()
        self._runner = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self.agent_instances.clear()  # the session's agents (and their copies with mocked tools) go with it


STATE = pytest.StashKey[EvalSession]()
EVAL_ITEM = pytest.StashKey[bool]()
"""Set on the items eval files make (cases, and an unreadable file's ``@file``): cheaper to ask than a marker."""


def get_state(config: pytest.Config) -> EvalSession:
    return config.stash[STATE]
