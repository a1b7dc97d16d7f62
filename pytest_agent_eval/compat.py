"""Every touch of a private pytest, pytest-xdist, asyncio or CPython API, each with a fallback.

A fallback degrades, never fails.

The plugin works without any of these; they only make it faster (reusing a fixture closure, starting
upcoming cases early) or let a blocking call start its own event loop. When a newer release changes
one, its fallback is what runs: no prefetch, a fixture closure per item, and so on.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if (
    TYPE_CHECKING
):  # the engine's parts (blocking.py) use this module without pytest; asyncio loads with the runner
    import asyncio
    import threading

    import pytest


def fixtureinfo(item: pytest.Item) -> Any:
    """The item's fixture closure, so the next item of its file can reuse it.

    ``None``: each item computes its own.
    """
    return getattr(item, "_fixtureinfo", None)


@functools.cache
def item_keeps_request() -> bool:
    """Whether pytest keeps a test function's own ``FixtureRequest`` on the item.

    It keeps it as ``item._request`` (``Function._initrequest``).

    Then an eval item's function takes no argument: a ``request`` argument makes pytest build a
    fixture definition for it per item (about 20 us each). Fallback: the function takes ``request``.
    """
    import pytest

    return hasattr(pytest.Function, "_initrequest")


def item_request(item: pytest.Item) -> pytest.FixtureRequest:
    """The item's own fixture request (when :func:`item_keeps_request`)."""
    request = getattr(item, "_request", None)
    # pytest is loaded, an item runs: no import statement per item
    kind: type[pytest.FixtureRequest] = sys.modules["pytest"].FixtureRequest
    if not isinstance(request, kind):  # pragma: no cover - guarded by item_keeps_request
        raise TypeError(f"pytest kept no fixture request on {item.nodeid}")
    return request


def bracketed_node_id(item: pytest.Item) -> None:
    """Give an item named ``case[variant]`` the structured id pytest >= 9.2 reads from a saved id.

    pytest 9.2 keeps node ids as ``NodeId(path, names, params)`` and parses a saved id's ``[...]``
    as params (``--lf``, the xdist controller); an item built without a callspec gets
    ``params=None`` and the bracket in its name, so ``--lf`` never matched it. Fallback (older
    pytest, or the private names gone): nothing to do.
    """
    node_id = getattr(item, "_id", None)
    if node_id is None or "[" not in item.name or getattr(node_id, "params", "") is not None:
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pragma: no cover - pytest < 9.2 keeps string ids
        return
    if isinstance(node_id, NodeId):
        item._id = NodeId.parse(str(node_id))


def fixture_definition(item: pytest.Item, name: str) -> Any:
    """The definition of fixture ``name`` that applies to ``item``.

    ``None`` when it cannot be told.
    """
    manager = getattr(item.session, "_fixturemanager", None)
    if manager is None:
        return None
    try:
        definitions = manager.getfixturedefs(name, item)  # pytest >= 8.1: the node
    except (AttributeError, TypeError):
        try:
            definitions = manager.getfixturedefs(name, item.nodeid)  # pytest 8.0: the node id
        except Exception:
            return None
    except Exception:
        return None
    return definitions[-1] if definitions else None


def xdist_pending(config: pytest.Config) -> list[int] | None:
    """On an xdist worker, the indices of the items it was sent and has not started, in order.

    ``None`` when this is not a worker; an empty list when the worker's queue cannot be read (then
    only the next item, from ``pytest_runtest_protocol``, is known).
    """
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is None or not hasattr(plugin, "nextitem_index"):
            continue
        try:
            with _locked(queue) as pending:
                indices = [i for i in pending if isinstance(i, int)]
        except Exception:
            return []
        nxt = plugin.nextitem_index
        return ([nxt] if isinstance(nxt, int) else []) + indices
    return []


@contextlib.contextmanager
def _locked(queue: Any) -> Iterator[Any]:
    if hasattr(queue, "lock"):  # xdist >= 3.7: its own queue class
        with queue.lock() as pending:
            yield pending
    else:  # xdist < 3.7: a queue.Queue
        with queue.mutex:
            yield list(queue.queue)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any (public API).

    ``None`` when asyncio is not loaded: no loop runs then (and asyncio is not imported to say so).
    """
    module = sys.modules.get("asyncio")  # an import statement here cost ~1 us a call
    if module is None:
        return None
    get = getattr(module, "get_running_loop", None)
    if get is None:  # asyncio is being imported in another thread: wait for it
        import asyncio

        get = asyncio.get_running_loop
    try:
        return get()
    except RuntimeError:
        return None


def set_running_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Declare ``loop`` as this thread's running loop (``None``: none).

    Returns False when this Python cannot.
    """
    import asyncio

    setter = getattr(asyncio.events, "_set_running_loop", None)
    if setter is None:
        return False
    setter(loop)
    return True


def worker_input(config: pytest.Config) -> dict[str, Any] | None:
    """On an xdist worker, what the controller sent it (``config.workerinput``).

    ``None`` elsewhere.
    """
    value = getattr(config, "workerinput", None)
    return value if isinstance(value, dict) else None


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker.

    A worker's reports go to the controller, which reports.
    """
    return worker_input(config) is not None


def hands_out_cases(config: pytest.Config) -> bool:
    """Whether this process is xdist's controller, which hands every case to its workers.

    As xdist decides when it registers its ``DSession``: a distribution mode and workers to start
    (``-n N``, ``--tx``), not a worker, not ``--collect-only``. Such a process runs no case.
    """
    if not config.pluginmanager.hasplugin("xdist") or is_worker(config):
        return False
    try:
        return (
            config.getoption("dist", "no") != "no"
            and bool(config.getoption("tx", None))
            and not config.getoption("collectonly", False)
        )
    except (ValueError, TypeError):
        return False


def worker_output(config: pytest.Config) -> dict[str, Any] | None:
    """On an xdist worker, what it sends the controller when it finishes.

    That is ``config.workeroutput``; ``None`` elsewhere.
    """
    value = getattr(config, "workeroutput", None)
    return value if isinstance(value, dict) else None


def node_output(node: object) -> dict[str, Any]:
    """On the xdist controller, what a finished worker sent (``node.workeroutput``).

    Empty when it sent nothing (it crashed).
    """
    value = getattr(node, "workeroutput", None)
    return value if isinstance(value, dict) else {}


def remote_workers(config: pytest.Config) -> list[str]:
    """The ``--tx`` specs of the run's xdist workers that run elsewhere than this machine.

    That is ``socket=``, ``ssh=``, anything through a proxy (``via=``); not ``popen`` (``-n``), this
    machine's processes. Read from the options xdist leaves set (``tx``, ``dist``); empty without
    xdist, without distribution (``--dist no``), or when they cannot be read.
    """
    try:
        specs = [str(spec) for spec in config.getoption("tx", None) or []]
        distributed = config.getoption("dist", "no") != "no"
    except (ValueError, TypeError):
        return []
    remote = []
    for spec in specs if distributed else []:
        spec = (
            spec.partition("*")[2] if spec.partition("*")[0].isdigit() else spec
        )  # "2*socket=…": two workers
        keys = {part.partition("=")[0].strip() for part in spec.split("//")}
        if "popen" not in keys or "via" in keys:
            remote.append(spec)
    return remote


def crashed_worker(report: pytest.TestReport) -> str | None:
    """The id (``gw0``) of the worker an xdist crash report is about.

    ``None`` when it cannot be told.
    """
    node = getattr(report, "node", None)  # set by xdist's DSession.handle_crashitem
    gateway = getattr(node, "gateway", None)
    worker = getattr(gateway, "id", None)
    return worker if isinstance(worker, str) else None


def worker_id(node: Any) -> str:
    """The id (``gw0``) of an xdist worker controller (``node.gateway.id``).

    ``""`` when it cannot be told.
    """
    worker = getattr(getattr(node, "gateway", None), "id", None)
    return worker if isinstance(worker, str) else ""


def pending_on(node: Any) -> list[str]:
    """The node ids an xdist worker that went down had been sent and not finished.

    They are read from the controller's scheduler (``DSession.sched``: ``node2pending`` indices into
    ``collection`` for the load schedulers, ``assigned_work`` for the scope ones) before xdist hands
    them to other workers; empty when it cannot be told.
    """
    try:
        sched: Any = getattr(node.config.pluginmanager.get_plugin("dsession"), "sched", None)
        pending = getattr(sched, "node2pending", None)
        if isinstance(pending, dict) and node in pending:
            collection = getattr(sched, "collection", None) or sched.node2collection[node]
            return [str(collection[i]) for i in pending[node]]
        assigned = getattr(sched, "assigned_work", None)
        if isinstance(assigned, dict) and node in assigned:
            return [
                str(nodeid)
                for scope in assigned[node].values()
                for nodeid, done in scope.items()
                if not done
            ]
    except Exception:
        return []
    return []


def run_again(sched: Any, nodeid: str) -> bool:
    """Send a crashed item to run again (``sched.mark_test_pending``, xdist >= 2.2.1).

    Returns False when the scheduler cannot.
    """
    try:
        sched.mark_test_pending(nodeid)
    except Exception:
        return False
    return True


def is_worker_crash(report: pytest.TestReport) -> bool:
    """Whether ``report`` is pytest-xdist's stand-in for an item whose worker died running it.

    xdist makes it with ``when="???"``. ``False`` when that cannot be told, and the crashed case is
    then left out.
    """
    return report.failed and report.when not in ("setup", "call", "teardown", "collect")


def junit_failure_as_error(config: pytest.Config, report: pytest.TestReport) -> bool:
    """Turn the ``<failure>`` pytest's ``--junitxml`` just wrote for ``report`` into ``<error>``.

    The report is a failed call; the counts are changed too. ``False`` (the ``<failure>`` stays)
    when pytest's junitxml internals are not as expected.
    """
    try:
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is None:
            return False
        reporter = xml.node_reporter(report)
        failures = [node for node in reporter.nodes if node.tag == "failure"]
        if not failures or "error" not in xml.stats or xml.stats.get("failure", 0) < 1:
            return False
        failures[-1].tag = "error"
        xml.stats["failure"] -= 1
        xml.stats["error"] += 1
        return True
    except (ImportError, AttributeError, TypeError, KeyError):
        return False


def pydantic_ai_with_tools(agent: Any, wrap: Any) -> Any:
    """A shallow copy of a pydantic-ai ``Agent`` whose own tools are wrapped.

    Its own function toolset (``_function_toolset.tools``, private) holds ``wrap(tool)`` for each
    tool. Fallback (the attribute gone or another shape): ``None``, and the adapter says the agent's
    tools cannot be reached, so its cases' tool mocks fail before the agent runs.
    """
    toolset: Any = getattr(agent, "_function_toolset", None)
    tools = getattr(toolset, "tools", None)
    if not isinstance(tools, dict):
        return None
    clone_toolset = copy.copy(toolset)
    clone_toolset.tools = {name: wrap(tool) for name, tool in tools.items()}
    clone = copy.copy(agent)
    clone._function_toolset = clone_toolset
    return clone


def unset_tracer_provider() -> None:
    """Give OpenTelemetry's global TracerProvider back (unset), as before the run set its own.

    SPEC §23. ``opentelemetry.trace`` lets it be set once per process and has no public way back.
    """
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()


def leave_assertion_rewriting(package: str) -> bool:
    """Take ``package`` off pytest's list of modules whose asserts it rewrites (SPEC §27).

    pytest rewrites the asserts of every module of an installed plugin's distribution, and imports
    each through its own loader: for this package (no assert a user reads, a few type invariants)
    that cost a fifth of a one-case run's instructions. Its modules then load as Python loads any.
    Private (``AssertionRewritingHook._must_rewrite``); fallback: nothing changes (slower start).
    """
    for finder in sys.meta_path:
        if type(finder).__module__ != "_pytest.assertion.rewrite":
            continue
        marked = getattr(finder, "_must_rewrite", None)
        if not isinstance(marked, set) or package not in marked:
            return False
        marked.discard(package)
        cache = getattr(finder, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):  # its decisions already taken for the package's names
            for name in [n for n in cache if n == package or n.startswith(f"{package}.")]:
                del cache[name]
        return True
    return False


def keep_current_test_var() -> Callable[[], None]:
    """Keep ``PYTEST_CURRENT_TEST`` set between items while cases run in other threads.

    pytest removes it after each item's teardown; an agent in flight that reads the environment
    then (an HTTP client looking for proxies iterates ``os.environ``) finds a key listed and gone
    (``KeyError: 'PYTEST_CURRENT_TEST'``). Kept, it names the last item's teardown until the next
    item's setup replaces it. Returns the undo, which removes it once no item runs. Private
    (``_pytest.runner._update_current_test_var``); fallback: pytest removes it as before.
    """
    from _pytest import runner

    update = getattr(runner, "_update_current_test_var", None)
    if update is None:
        return lambda: None

    def keep(item: pytest.Item, when: str | None) -> None:
        if when is not None:
            update(item, when)

    runner._update_current_test_var = keep

    def undo() -> None:
        if runner._update_current_test_var is keep:
            runner._update_current_test_var = update
        os.environ.pop("PYTEST_CURRENT_TEST", None)

    return undo


def run_temp_dir(config: pytest.Config, prefix: str) -> Path:
    """A new private directory (0700) for this run, under pytest's base temporary directory.

    pytest removes old base directories itself (it keeps the newest three, or clears a given
    ``--basetemp`` at the next start): what a killed run leaves there does not pile up. Private
    (``Config._tmp_path_factory``, which xdist uses too); fallback: the system's temporary folder.
    """
    import tempfile

    factory = getattr(config, "_tmp_path_factory", None)
    try:
        base = None if factory is None else str(factory.getbasetemp())
    except Exception:  # a pytest whose factory changed, a base that cannot be made
        base = None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> bool:
    """Raise ``exc_type`` in ``thread`` when it next runs Python code; whether it was set.

    A thread spinning in Python (``while True: pass``) cannot be stopped otherwise; left running it
    meets the interpreter's finalization. CPython's ``PyThreadState_SetAsyncExc`` (C API, through
    ctypes); fallback (no ``ctypes.pythonapi``, as on PyPy): nothing, ``False``.
    """
    try:
        import ctypes

        set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    except (ImportError, AttributeError):
        return False
    if thread.ident is None or not thread.is_alive():
        return False
    changed = set_async(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type))
    if changed > 1:  # more than one thread had that id: undo, as the C API asks
        set_async(ctypes.c_ulong(thread.ident), None)
        return False
    return bool(changed == 1)
