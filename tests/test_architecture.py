"""The package's shape: the engine and the command-line tool import no pytest, and no module imports form a cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_agent_eval

PACKAGE = Path(pytest_agent_eval.__file__).parent
# The pytest layer: hooks, items, fixtures, options and session state in ``plugin/``; report files in ``report/``;
# private pytest API in ``compat.py``. Nothing else imports pytest.
PYTEST_LAYER = ("pytest_agent_eval.plugin", "pytest_agent_eval.report", "pytest_agent_eval.compat")
LOOSE_MODULES = 10
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _in_pytest_layer(name: str) -> bool:
    return any(name == layer or name.startswith(f"{layer}.") for layer in PYTEST_LAYER)


def _pytest_imports(path: Path) -> list[str]:
    """Where ``path`` imports pytest (or its private ``_pytest``), also inside functions and for type checking."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        found += [f"{path.name}:{node.lineno}" for n in names if n.split(".")[0] in ("pytest", "_pytest")]
    return found


def test_outside_the_pytest_layer_nothing_imports_pytest() -> None:
    outside = {name: path for name, path in _modules().items() if not _in_pytest_layer(name)}
    assert "pytest_agent_eval.cli" in outside and "pytest_agent_eval.run.runner" in outside
    assert {name: lines for name, path in outside.items() if (lines := _pytest_imports(path))} == {}
    engine = [name for name in outside if name != "pytest_agent_eval"]
    script = (
        "import importlib, sys\n"
        f"for name in {engine!r}:\n"
        "    importlib.import_module(name)\n"
        "    assert 'pytest' not in sys.modules and '_pytest' not in sys.modules, name\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_folder_rule_sees_a_deferred_pytest_import(tmp_path: Path) -> None:
    module = tmp_path / "late.py"
    module.write_text("def hook():\n    from _pytest.nodes import Item\n\nimport json\n")
    assert _pytest_imports(module) == ["late.py:2"]


def test_the_package_shows_its_layers() -> None:
    """At most ten loose modules at the package's top (the rest lives in its layer's folder), none over 450 lines."""
    loose = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(loose) <= LOOSE_MODULES, loose
    assert {"plugin", "run", "report", "cases", "checks"} <= {p.name for p in PACKAGE.iterdir() if p.is_dir()}
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _imports(name: str, path: Path, modules: dict[str, Path], deferred: bool = False, typing: bool = False) -> set[str]:
    """The package's modules that ``name`` imports when it loads; with ``deferred``, also those it imports inside
    functions (a lazy import still ties the two modules together); with ``typing``, also those it imports for type
    checking only (a knot all the same; the package itself, whose ``__init__`` imports only for type checking,
    is then left out as a target)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not typing:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not deferred:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:  # relative: from the package, up level - 1
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - sub.level + 1], base]).strip(".")
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in sub.names)
            elif isinstance(sub, ast.Import):
                found.update(alias.name for alias in sub.names)
    root = {name.partition(".")[0]} if typing else set()
    return {m for m in found if m in modules and m != name} - root


def _cycles(modules: dict[str, Path], deferred: bool, typing: bool = False) -> list[str]:
    """Every import cycle among ``modules``, as ``a -> b -> a``."""
    graph = {name: _imports(name, path, modules, deferred, typing) for name, path in modules.items()}
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_no_import_cycles() -> None:
    modules = _modules()
    assert _imports("pytest_agent_eval.plugin", modules["pytest_agent_eval.plugin"], modules), "the graph was read"
    assert _cycles(modules, deferred=False) == []
    assert _cycles(modules, deferred=True) == []
    assert _cycles(modules, deferred=True, typing=True) == []


def test_the_cycle_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    """The cycle issue 11 found (state -> scheduler -> case_mocks -> state) went through a lazy import."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "state.py").write_text("def scheduler():\n    from pkg.scheduler import Scheduler\n")
    (package / "scheduler.py").write_text("from pkg.case_mocks import recorder\n")
    (package / "case_mocks.py").write_text("from pkg.state import get_state\n")
    modules = {f"pkg.{p.stem}": p for p in package.glob("*.py") if p.stem != "__init__"}
    assert _cycles(modules, deferred=False) == []
    assert _cycles(modules, deferred=True) == ["pkg.case_mocks -> pkg.state -> pkg.scheduler -> pkg.case_mocks"]


def test_the_cycle_check_sees_imports_for_type_checking(tmp_path: Path) -> None:
    """The knot issue 25 untied: the runner imported the conversation trial, which imported the runner's types."""
    package = tmp_path / "pkg"
    package.mkdir()
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.runner import RunSettings\n"
    (package / "__init__.py").write_text(typing_only)
    (package / "runner.py").write_text("def trial():\n    from pkg.conversation import talk\n")
    (package / "conversation.py").write_text(typing_only)
    modules = {f"pkg.{p.stem}".removesuffix(".__init__"): p for p in package.glob("*.py")}
    assert _cycles(modules, deferred=True) == []
    assert _cycles(modules, deferred=True, typing=True) == ["pkg.runner -> pkg.conversation -> pkg.runner"]


def test_the_public_api_is_what_users_import() -> None:
    script = (
        "import sys, pytest_agent_eval as pae\n"
        "assert 'pytest_agent_eval.mocks' not in sys.modules and 'pytest_agent_eval.run.runner' not in sys.modules\n"
        "for name in pae.__all__:\n"
        "    getattr(pae, name)\n"
        "from pytest_agent_eval import ToolMocks, wrap, CaseResult, Adapter, AdapterRegistry\n"
        "assert ToolMocks.__module__ == 'pytest_agent_eval.mocks.fixture' and callable(wrap)\n"
        "assert Adapter.__module__ == 'pytest_agent_eval.adapters.base' and AdapterRegistry.register\n"
        "print(CaseResult.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "CaseResult"), done.stderr
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pytest_agent_eval.Nope  # noqa: B018


def test_nothing_but_the_public_api_is_re_exported() -> None:
    script = (
        "import types, pytest_agent_eval as pae\n"
        "names = [n for n, v in vars(pae).items() if not n.startswith('_') and not isinstance(v, types.ModuleType)]\n"
        "print(sorted(names))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    eager = sorted(set(pytest_agent_eval.__all__) - set(pytest_agent_eval._LAZY) - {"__version__"})
    assert done.stdout.strip() == str(eager), done.stderr


def test_every_hook_documents_each_parameter() -> None:
    import inspect

    from pytest_agent_eval.plugin import hookspecs

    hooks = [f for name, f in vars(hookspecs).items() if name.startswith("pytest_agent_eval_") and callable(f)]
    assert len(hooks) >= 5
    for hook in hooks:
        doc = inspect.getdoc(hook) or ""
        missing = [p for p in inspect.signature(hook).parameters if f":param {p}:" not in doc]
        assert missing == [], hook.__name__


@pytest.mark.parametrize("beside", [False, True], ids=["no-eval-files", "eval-file-beside"])
def test_a_run_without_eval_files_loads_no_engine(pytester: pytest.Pytester, beside: bool) -> None:
    """pytest imports the plugin for every run: a project's plain tests pay for the hooks, not the engine, also
    when the test file asked for sits beside eval files (pytest makes a node of each file in its directory)."""
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            names = sorted(m for m in sys.modules if m.startswith("pytest_agent_eval"))
            open("modules.txt", "w").write("\\n".join(names))
        """
    )
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    if beside:
        pytester.makefile(".yaml", eval_beside="agent: nowhere:run\ncases:\n  - {id: a, input: x}\n")
    pytester.runpytest_subprocess("test_plain.py", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    loaded = set((pytester.path / "modules.txt").read_text().split())
    assert "pytest_agent_eval.plugin" in loaded
    engine = {
        "pytest_agent_eval.checks", "pytest_agent_eval.cases.document", "pytest_agent_eval.cases.load",
        "pytest_agent_eval.run.runner", "pytest_agent_eval.adapters", "pytest_agent_eval.mocks",
        "pytest_agent_eval.report.failure", "pytest_agent_eval.report.attach", "pytest_agent_eval.plugin.collect",
        "pytest_agent_eval.run.results", "pytest_agent_eval.faults", "pytest_agent_eval.report.record",
        "pytest_agent_eval.report.stats",
    }  # fmt: skip
    if beside:  # the file beside gets its node (collect.py's class), which loads no more until it is collected
        engine.remove("pytest_agent_eval.plugin.collect")
    assert loaded & engine == set()
