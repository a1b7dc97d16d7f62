"""Per-session state of the plugin, kept in ``config.stash``."""

from __future__ import annotations

import sys
from collections.abc import Collection, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_agent_eval.plugin.options import Settings

# The engine (formats, checks, the runner) loads with the first eval file: a session without any
# pays nothing.
if TYPE_CHECKING:
    import concurrent.futures

    from pytest_agent_eval.adapters import AdapterRegistry
    from pytest_agent_eval.cases.dialects import DialectRegistry
    from pytest_agent_eval.checks import CheckRegistry
    from pytest_agent_eval.core.case import Case
    from pytest_agent_eval.core.parse_cache import ParseCache
    from pytest_agent_eval.llm import LLM
    from pytest_agent_eval.plugin.crashes import InFlight
    from pytest_agent_eval.plugin.scheduler import Scheduler
    from pytest_agent_eval.run.loops import Loops
    from pytest_agent_eval.run.settings import RecorderFactory, RunSettings
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
        self._loops: Loops | None = None
        self._run_settings: type[RunSettings] | None = None
        """``run.settings.RunSettings``, loaded with the first case (not imported per case)."""
        self._marks: dict[str, pytest.MarkDecorator] = {}
        self._parse_cache: ParseCache | None = None
        self._no_parse_cache = False
        self.scheduler: Scheduler | None = None
        """Starts upcoming cases early: registered at concurrency > 1 only
        (``prepare.register_scheduler``).
        """
        self._inflight: Any = _UNSET
        self.eval_items = 0
        """How many items the eval files collected so far made (the GC policy depends on it)."""
        self.traffic: Traffic | None = None
        """The HTTP traffic hook (SPEC §14), installed at configure when an option needs it
        (``plugin.traffic``), or for the run's pace alone (on by default) at the first case that
        starts with ``httpx`` or ``httpx2`` loaded: a run whose agents load neither (nothing the
        pace could hook) loads none of it.
        """
        self._pace_pending = not self.settings.traffic.on and self.settings.traffic.pace

    @property
    def checks(self) -> CheckRegistry:
        if self._checks is None:
            from pytest_agent_eval.checks import builtin_registry

            self._checks = builtin_registry()
            # historic: a conftest.py registered later (a sub-directory's) is called when it
            # registers
            self.config.hook.pytest_agent_eval_register_checks.call_historic(
                kwargs={"registry": self._checks}
            )
        return self._checks

    @property
    def dialects(self) -> DialectRegistry:
        if self._dialects is None:
            from pytest_agent_eval.cases.load import builtin_dialects

            self._dialects = builtin_dialects()
            self.config.hook.pytest_agent_eval_register_dialects.call_historic(
                kwargs={"registry": self._dialects}
            )
        return self._dialects

    @property
    def adapters(self) -> AdapterRegistry:
        """The framework adapters.

        Plugins' (``pytest_agent_eval_register_adapters``) first, then the built-in.
        """
        if self._adapters is None:
            from pytest_agent_eval.adapters import builtin_adapters

            self._adapters = builtin_adapters()
            self.config.hook.pytest_agent_eval_register_adapters.call_historic(
                kwargs={"registry": self._adapters}
            )
        return self._adapters

    @property
    def parse_cache(self) -> ParseCache | None:
        """The YAML parse cache in pytest's cache directory (none under ``-p no:cacheprovider``)."""
        if (
            self._parse_cache is None
            and not self._no_parse_cache
            and getattr(self.config, "cache", None) is not None
        ):
            from pytest_agent_eval.core.parse_cache import ParseCache

            try:
                self._parse_cache = ParseCache(self.config.cache.mkdir("agent_eval_parsed"))
            # a cache directory that cannot be written only costs speed: files are parsed each time
            except OSError:
                self._no_parse_cache = True
        return self._parse_cache

    @property
    def inflight(self) -> InFlight | None:
        """On an xdist worker, where the cases in flight are noted for the controller.

        For crashes. ``None`` where the controller's folder for them is not (a worker on another
        machine).
        """
        if self._inflight is _UNSET:
            from pytest_agent_eval import compat
            from pytest_agent_eval.plugin.crashes import KEY, InFlight

            shared = (compat.worker_input(self.config) or {}).get(KEY)
            worker = (compat.worker_input(self.config) or {}).get("workerid", "worker")
            self._inflight = InFlight.open(Path(shared), str(worker)) if shared else None
        return self._inflight  # type: ignore[no-any-return]

    @property
    def loops(self) -> Loops:
        """Where the cases run, and what a blocked background loop means (``run.loops.Loops``)."""
        if self._loops is None:
            from pytest_agent_eval.run.loops import Loops

            self._loops = Loops(self.settings.concurrency, self.settings.timeout)
        return self._loops

    def marker(self, name: str) -> pytest.MarkDecorator:
        """The mark for tag ``name``, registered first (so ``--strict-markers`` accepts tags)."""
        mark = self._marks.get(name)
        if mark is None:
            registered = {
                line.split(":")[0].split("(")[0].strip() for line in self.config.getini("markers")
            }
            if name not in registered:
                self.config.addinivalue_line("markers", f"{name}: agent-eval tag")
            mark = self._marks[name] = getattr(pytest.mark, name)
        return mark

    def run_settings(
        self, case: Case, llm: LLM | None, recorder: RecorderFactory | None
    ) -> RunSettings:
        """What running ``case`` needs.

        Checks, timeout, the LLM, tool-mock recorder and the concurrency limit.
        """
        make = self._run_settings
        if make is None:
            from pytest_agent_eval.run.settings import RunSettings

            make = self._run_settings = RunSettings
        if (
            self._pace_pending and _http_client_loaded()
        ):  # the pace hooks httpx/httpx2 only: none, nothing to pace
            self._pace_pending = False
            try:
                from pytest_agent_eval.plugin.traffic import start

                self.traffic = start(self.config, self.settings.traffic)
            except (
                pytest.UsageError
            ) as exc:  # the default pace's store failed: the run goes on unpaced, saying why
                import warnings

                from pytest_agent_eval.traffic.store import StoreWarning

                warnings.warn(
                    StoreWarning(f"{exc}; the run is not paced (--agent-eval-pace off: not tried)"),
                    stacklevel=1,
                )
        inline = self.loops.inline
        # In this thread one case runs at a time: with one trial, there is nothing for the limit to
        # hold back.
        alone = inline and (self.settings.repeat or case.repeat) == 1
        return make(
            checks=self.checks,
            default_timeout=self.settings.timeout,
            llm=llm,
            recorder=recorder,
            limit=None if alone else self.loops.limit,
            repeat=self.settings.repeat,
            require_llm=self.settings.require_llm,
            inline=inline,
            traffic=self.traffic,
            tracing=self._tracing(),
            assertion_hook=self.config.hook.pytest_agent_eval_evaluate_assertion,
        )

    def _tracing(self) -> Any:
        """The run's tracing when a trace option is given (``plugin.traces``), else ``None``."""
        traces = self.config.pluginmanager.get_plugin("agent_eval_traces_run")
        return traces.tracing if traces is not None else None

    def start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the background loop (a new one once a blocked one was left behind)."""
        return self.loops.submit(coro)

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
        if self._loops is not None:
            self._loops.close()
            self._loops = None
        # the session's agents (and their copies with mocked tools) go with it
        self.agent_instances.clear()


STATE = pytest.StashKey[EvalSession]()
EVAL_ITEM = pytest.StashKey[bool]()
"""Set on the items eval files make (cases, and an unreadable file's ``@file``): cheaper to ask than
a marker.
"""


def limits_folder(config: pytest.Config) -> Path:
    """Where the run's shared budgets live (the pace, the spend).

    The run's cache directory, shared by every xdist worker; without a writable cache, a folder by
    rootdir in the user's private folder (SPEC §22: made 0700, checked to be the user's, never a
    symlink), never a predictable shared path another local user could plant.
    """
    import hashlib

    from pytest_agent_eval.traffic import private

    cache = getattr(config, "cache", None)
    try:
        folder = cache.mkdir("agent_eval_limits") if cache is not None else None
    except OSError:  # not writable: the folder below, as without a cache
        folder = None
    if folder is None:
        digest = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:12]
        try:
            folder = private.folder(f"limits-{digest}")
        except private.PrivateDirError as exc:
            raise pytest.UsageError(f"the run's rate-limit state: {exc}") from None
    return folder


def get_state(config: pytest.Config) -> EvalSession:
    return config.stash[STATE]


def _http_client_loaded() -> bool:
    """Whether an HTTP client the pace hooks (``traffic.hook.adopt``) is loaded.

    One dict look-up per case.
    """
    return "httpx" in sys.modules or "httpx2" in sys.modules
