"""``--agent-eval-shard I/N`` (SPEC §18): this job runs a deterministic 1/N of the collected items.

The items left after ``-k``/``-m`` (and any other deselection) are ordered by a SHA-256 hash of
their node id and dealt out in turn: item k of that order goes to shard ``k mod N + 1``. Every job
that collects the same items (the same files, the same ``-k``/``-m``) therefore makes the same split
on any machine, Python version or ``PYTHONHASHSEED``, and the shards differ in size by one item at
most. Every item is sharded, eval items and plain tests alike (as pytest-split and pytest-shard do):
each item runs in exactly one job. The others are deselected, as ``-k`` deselects them. The report
records the shard and how many items it was cut from (``run.shard``), so that ``agent-eval merge``
can tell a shard that is missing.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.options import option_group

_OUTPUT = "agent_eval_shard"
"""The ``workeroutput`` key with which an xdist worker tells the controller how many items it
sharded.
"""


class ShardSpec:
    """Shard ``index`` of ``count`` (1-based).

    A plain class, not a dataclass (whose methods are compiled at every start, in every run: the
    option's type is read by a run of plain tests too), nor a named tuple (``index`` and ``count``
    are a tuple's methods).
    """

    __slots__ = ("count", "index")

    def __init__(self, index: int, count: int) -> None:
        self.index = index
        self.count = count

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardSpec):
            return NotImplemented
        return (self.index, self.count) == (other.index, other.count)

    def __hash__(self) -> int:
        return hash((self.index, self.count))

    def __repr__(self) -> str:
        return f"ShardSpec(index={self.index}, count={self.count})"


def parse_shard(text: str) -> ShardSpec:
    """``I/N`` with 1 <= I <= N; an ``argparse`` type.

    Anything else is a usage error naming the option.
    """
    index, slash, count = text.partition("/")
    try:
        spec = ShardSpec(int(index), int(count))
    except ValueError:
        spec = None
    if not slash or spec is None or spec.count < 1 or not 1 <= spec.index <= spec.count:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give I/N, this job's shard I of N shards, with 1 <= I <= N (e.g. 1/3)"
        )
    return spec


def _key(nodeid: str) -> bytes:
    return hashlib.sha256(nodeid.encode("utf-8", "surrogatepass")).digest()


def shard_items(nodeids: list[str], spec: ShardSpec) -> set[str]:
    """The node ids of shard ``spec`` among ``nodeids``."""
    ordered = sorted(dict.fromkeys(nodeids), key=lambda n: (_key(n), n))
    return {nodeid for k, nodeid in enumerate(ordered) if k % spec.count == spec.index - 1}


def deselect(
    config: pytest.Config, items: list[pytest.Item], keep: Callable[[pytest.Item], bool]
) -> int:
    """Deselect the items ``keep`` refuses, as ``-k`` does (``pytest_deselected``).

    Returns how many are left.
    """
    kept = [item for item in items if keep(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not keep(item)])
        items[:] = kept
    return len(kept)


class Shard:
    """A plugin object (every process): deselects the other shards' items.

    It does so after every other deselection.
    """

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec
        self.collected: int | None = None
        self.selected: int | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        mine = shard_items([item.nodeid for item in items], self.spec)
        self.collected = len(items)
        self.selected = deselect(config, items, lambda item: item.nodeid in mine)
        output = compat.worker_output(config)
        if output is not None:
            output[_OUTPUT] = [self.collected, self.selected]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """On the xdist controller, which collects nothing: the counts a worker sharded.

        Each worker's are the same.
        """
        counts = compat.node_output(node).get(_OUTPUT)
        if self.collected is None and isinstance(counts, list) and len(counts) == 2:
            self.collected, self.selected = counts

    def to_dict(self) -> dict[str, int | None]:
        """``run.shard`` of the JSON report.

        A count is ``None`` when no process told it: every worker crashed.
        """
        return {
            "index": self.spec.index,
            "count": self.spec.count,
            "collected": self.collected,
            "selected": self.selected,
        }


def pytest_addoption(parser: pytest.Parser) -> None:
    option_group(parser).addoption(
        "--agent-eval-shard",
        dest="agent_eval_shard",
        metavar="I/N",
        type=parse_shard,
        default=None,
        help="run shard I of N: a deterministic 1/N of the items (by node id), the others "
        "deselected",
    )


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("agent_eval_shard", None)
    if isinstance(spec, ShardSpec):
        config.pluginmanager.register(Shard(spec), "agent_eval_shard")
