"""The package's folders stack in one order: each imports only those below it (SPEC §21, issue 37).

Every import counts: at module level, inside functions (deferred imports) and under
``TYPE_CHECKING``. The order is stated here once; a folder that imports one above it fails this test
with the file and line of the import.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest_agent_eval

PACKAGE = Path(pytest_agent_eval.__file__).parent

LEAVES = ("text", "faults", "secrets", "imports", "subset", "llm", "gc_policy", "compat", "version")
"""Single modules at the root that import nothing of the package: any floor may use them."""

ORDER = (
    # the shared words: case model, results, trial context, errors, documents with line positions
    "core",
    "traffic",  # the httpx hook: usage, cost, cassettes, pace, retries
    # OpenTelemetry in and out: the GenAI names, a trial's trace and span tree, trace files (SPEC
    # §23)
    "traces",
    "adapters",  # one module per framework behind the adapter protocol
    "checks",  # one module per family of checks
    "mocks",  # tool mocks: responses, recording, stand-ins, patching
    "conversation",  # simulated users, conversation scores and assertions
    "cases",  # reading eval files into cases: loaders, schema, dialects
    "run",  # one case without pytest: trials, turns, timeout -> a result
    "report",  # records, failure text and every report format
    "memory",  # the journal, the run store across runs and its viewer (SPEC §24)
    "plugin",  # the pytest layer
    "cli",  # agent-eval's commands
    "__init__",  # the public API, re-exported
)
"""The floors, bottom first: a floor imports the leaves and the floors below it, never one above."""

EXCEPTIONS: dict[tuple[str, str], str] = {}
"""``(importing module, imported floor) -> why``: deliberate upward imports (at most two)."""


def floor_of(module: str) -> str | None:
    """The floor (or leaf) of ``pytest_agent_eval.<x>...``; ``None`` outside the package."""
    parts = module.split(".")
    if parts[0] != "pytest_agent_eval":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(line, module)`` for each import of the package in ``path``, deferred and typing too."""
    module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package upward
                base = module.split(".")[: -node.level]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if "." in target:
                found.append((node.lineno, target))
            else:  # `from pytest_agent_eval import compat`: the names imported are the modules
                found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def upward_imports(package: Path = PACKAGE) -> list[str]:
    """Every import of a floor above the importing module's, as ``path:line: floor -> floor``."""
    rank = {name: i for i, name in enumerate(ORDER)}
    problems = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        own = rel.parts[0].removesuffix(".py")
        for line, target in imports_of(path, package):
            floor = floor_of(target)
            if floor is None or floor == own or floor in LEAVES:
                continue
            if own in LEAVES:
                problems.append(f"{rel}:{line}: the leaf module {own} imports {target}")
            elif floor not in rank:
                problems.append(
                    f"{rel}:{line}: {target} is in no floor of ORDER: add it to ORDER or LEAVES"
                )
            elif rank[floor] > rank[own] and (str(rel), floor) not in EXCEPTIONS:
                problems.append(f"{rel}:{line}: {own} imports {floor}, a floor above it ({target})")
    return problems


def test_every_folder_imports_only_the_floors_below_it() -> None:
    problems = upward_imports()
    assert not problems, "imports against the floors' order:\n" + "\n".join(problems)


def test_every_floor_of_the_package_is_named_in_the_order() -> None:
    names = {
        p.name.removesuffix(".py")
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert names == set(ORDER) | set(LEAVES)
    assert len(EXCEPTIONS) <= 2


def test_the_order_test_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: an import of ``plugin`` inside a function of ``core`` is found.

    The probe goes into a copy of the package: the real one is read by other tests at the same time.
    """
    copy = tmp_path / "pytest_agent_eval"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    probe = copy / "core" / "_architecture_probe.py"
    probe.write_text("def f():\n    from pytest_agent_eval.plugin import state\n", encoding="utf-8")
    problems = upward_imports(copy)
    assert problems == [
        "core/_architecture_probe.py:2: core imports plugin, a floor above it "
        "(pytest_agent_eval.plugin)"
    ]
