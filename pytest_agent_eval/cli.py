"""The ``agent-eval`` command and its subcommands.

``init`` a project, ``validate`` eval files, print the native ``schema``, ``compare`` reports, write
their ``html`` page, ``merge`` shards' reports, ``gate`` a report and print its pull-request
``comment``; rebuild a killed run's ``report`` from its journal, list the stored ``runs``,
``import`` reports into the store, ``view`` it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import NamedTuple, TextIO

from pytest_agent_eval.adapters import AdapterRegistry, builtin_adapters
from pytest_agent_eval.cases import trust
from pytest_agent_eval.cases.dialects.native_schema import native_schema
from pytest_agent_eval.cases.load import DialectRegistry, builtin_dialects, finish, read_and_detect
from pytest_agent_eval.checks import CheckRegistry, builtin_registry
from pytest_agent_eval.core.errors import EvalFileError, EvalFileErrors, UnknownFormat
from pytest_agent_eval.core.files import DEFAULT_FILES, is_eval_file, orphan_sidecar, sidecar_stem
from pytest_agent_eval.imports import file_module
from pytest_agent_eval.report.baseline import (
    DEFAULT_SIGNIFICANCE,
    DEFAULT_TOLERANCE,
    BaselineError,
    Comparison,
    compare,
    load_records,
    load_report,
)
from pytest_agent_eval.report.schema import report_schema
from pytest_agent_eval.text import one_line


def load_plugin(ref: str) -> ModuleType:
    """A module by import name, or a ``.py`` file (e.g. a ``conftest.py``) by path."""
    path = Path(ref)
    if ref.endswith(".py"):
        if not path.is_file():
            raise SystemExit(f"agent-eval: -p {ref}: no such file")
        base = _package_root(path.resolve().parent)
        if str(base) not in sys.path:  # as pytest's default import mode does for a conftest.py
            sys.path.insert(0, str(base))
        try:
            return file_module(path, f"_agent_eval_plugin_{path.stem}_")
        except Exception as exc:
            raise SystemExit(f"agent-eval: {ref}: {type(exc).__name__}: {exc}") from None
    try:
        return importlib.import_module(ref)
    except ImportError as exc:
        raise SystemExit(f"agent-eval: -p {ref}: cannot import: {exc}") from None


def _package_root(folder: Path) -> Path:
    """The first folder up from ``folder`` that is not a package: where its imports start."""
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


HOOK_PREFIX = "pytest_agent_eval_register_"


def entry_point_plugins() -> list[str]:
    """Installed pytest plugins whose module implements a registration hook.

    The plugins are the ``pytest11`` entry points.

    A module's source is read, not imported, to tell: plugins that add nothing here are never
    loaded.
    """
    found = []
    for entry in importlib.metadata.entry_points(group="pytest11"):
        name = entry.module
        if name.split(".")[0] == __package__:
            continue
        path = _module_file(name)
        try:
            if path is not None and HOOK_PREFIX in path.read_text(encoding="utf-8"):
                found.append(name)
        except (OSError, UnicodeDecodeError):
            continue
    return found


def _module_file(name: str) -> Path | None:
    """The source file of module ``name``, found without importing it.

    It is looked up on ``sys.path``; neither the module nor its packages are imported.
    """
    relative = Path(*name.split("."))
    for base in sys.path:
        for candidate in (
            Path(base or ".") / f"{relative}.py",
            Path(base or ".") / relative / "__init__.py",
        ):
            if candidate.is_file():
                return candidate
    if "." not in name:  # e.g. an editable install's finder; a top-level lookup imports nothing
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        return Path(spec.origin) if spec is not None and spec.origin else None
    return None


def conftest_files(paths: list[str]) -> list[str]:
    """The ``conftest.py`` files pytest would load for ``paths``.

    They are looked for in each path's directory and its parents, up to the current directory.
    """
    here = Path.cwd().resolve()
    found: dict[Path, None] = {}
    for name in paths:
        start = Path(name).resolve()
        folder = start if start.is_dir() else start.parent
        chain = [folder, *folder.parents]
        chain = chain[: chain.index(here) + 1] if here in chain else chain[:1]
        found.update(
            (d / "conftest.py", None) for d in reversed(chain) if (d / "conftest.py").is_file()
        )
    return [str(p) for p in found]


class Registries(NamedTuple):
    checks: CheckRegistry
    dialects: DialectRegistry
    adapters: AdapterRegistry


def registries(plugins: list[str], paths: Sequence[str] = ()) -> Registries:
    """The checks, formats and adapters a command sees: the built-in ones and the added ones.

    The built-in ones come first, then those added through the registration hooks by installed
    pytest plugins, the ``conftest.py`` files of ``paths`` and the ``plugins`` named with ``-p``, in
    that order.
    """
    checks, dialects, adapters = builtin_registry(), builtin_dialects(), builtin_adapters()
    refs = [*entry_point_plugins(), *conftest_files(list(paths)), *plugins]
    unique = {
        str(Path(r).resolve()) if r.endswith(".py") else r: r for r in refs
    }  # each loaded once, in order
    for ref in unique.values():
        module = load_plugin(ref)
        if hasattr(module, "pytest_agent_eval_register_checks"):
            module.pytest_agent_eval_register_checks(registry=checks)
        if hasattr(module, "pytest_agent_eval_register_dialects"):
            module.pytest_agent_eval_register_dialects(registry=dialects)
        if hasattr(module, "pytest_agent_eval_register_adapters"):
            module.pytest_agent_eval_register_adapters(registry=adapters)
    return Registries(checks, dialects, adapters)


def eval_files(paths: list[str]) -> Iterator[Path]:
    """Files named on the command line and, under named directories, those pytest would collect."""
    patterns = tuple(DEFAULT_FILES.split())
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and (is_eval_file(p, patterns, False) or orphan_sidecar(p, patterns, False))
            )
        else:
            yield path


def validate_file(
    path: Path, checks: CheckRegistry, dialects: DialectRegistry
) -> tuple[str, list[str], list[str]]:
    """What one file is, with its problems and notes.

    Returns ``(what the file is, problems as "path:line: message", notes)``; a note is no problem: a
    dataset without its sidecar.
    """
    if not path.is_file():
        return "missing", [f"{path}: no such file"], []
    what = "unreadable"
    if sidecar_stem(path) is not None and orphan_sidecar(path, (), True):
        from pytest_agent_eval.cases.dialects.dataset_rows import orphan_error

        return "dataset sidecar", [orphan_error(path).format()], []
    try:
        # a duplicate key, or a key that is not a string, is one problem each
        doc, dialect = read_and_detect(path, dialects)
        what = dialect.name
        loaded = finish(doc, dialect.load(doc, checks))
    except UnknownFormat as exc:
        return "unknown format", [exc.format()], []
    except EvalFileError as exc:
        return what, [exc.format()], []
    except EvalFileErrors as exc:
        return what, [e.format() for e in exc.errors], []
    except Exception as exc:  # a file is data: whatever reading it raises is its problem
        return (
            what,
            [
                f"{path}:1: cannot be read: {type(exc).__name__}: {exc} (please report this as a "
                "bug)"
            ],
            [],
        )
    problems = [line for case in loaded.cases if case.error for line in case.error.splitlines()]
    return f"{dialect.name}, {_count(len(loaded.cases), 'case')}", problems, loaded.notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def validate(paths: list[str], plugins: list[str], out: TextIO, allow: Sequence[str] = ()) -> int:
    """Print each file's format and every problem; 1 when any file has a problem, else 0.

    Files read what lies under the working directory, the folders named (a file's own folder) and
    ``allow`` (SPEC §22).
    """
    roots = [
        Path.cwd(),
        *(Path(p) if Path(p).is_dir() else Path(p).parent for p in paths),
        *map(Path, allow),
    ]
    with trust.configured(roots):
        return _validate(paths, plugins, out)


def _validate(paths: list[str], plugins: list[str], out: TextIO) -> int:
    checks, dialects, _ = registries(plugins, paths)
    files = list(eval_files(paths))
    if not files:
        print(f"agent-eval validate: no eval files found under {' '.join(paths)}", file=out)
        return 1
    bad = total = 0
    for path in files:
        what, problems, notes = validate_file(path, checks, dialects)
        verdict = _count(len(problems), "problem") if problems else "ok"
        print(f"{path}: {what}: {verdict}", file=out)
        for note in notes:
            print(f"  note: {note}", file=out)
        for line in problems:
            print(line, file=out)
        bad += bool(problems)
        total += len(problems)
    print(f"{_count(len(files), 'file')} checked, {bad} with problems ({total} in all)", file=out)
    return 1 if bad else 0


def compare_reports(
    base: str, cand: str, tolerance: float, significance: float, fail: bool, markdown: bool = False
) -> int:
    """Print how ``cand`` differs from ``base``, as text or markdown.

    Returns 1 when a case regressed (or the two share no case) and ``fail``, 2 for an unreadable
    file.
    """
    try:
        before, after = load_records(Path(base)), load_records(Path(cand))
    except BaselineError as exc:
        print(one_line(f"agent-eval compare: {exc}"), file=sys.stderr)
        return 2
    result = compare(before, after, tolerance, significance)
    for line in result.markdown() if markdown else result.table():
        print(one_line(line))  # a report is data: an id's control characters are shown escaped
    return 1 if fail and result.failed else 0


def html_page(
    report: str,
    base: str | None,
    output: str,
    tolerance: float = DEFAULT_TOLERANCE,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> int:
    """Write the HTML page of ``report`` to ``output``; 2 for an unreadable report.

    It is compared with ``base`` as ``agent-eval compare`` compares; without it, with the comparison
    the report kept, if any.
    """
    from pytest_agent_eval.report.html import Baseline, write_html

    try:
        document = load_report(
            Path(report)
        )  # checked as a baseline is: one line naming the file and what is wrong
        records = load_records(Path(report))
        before = load_records(Path(base)) if base else None
    except BaselineError as exc:
        print(one_line(f"agent-eval html: {exc}"), file=sys.stderr)
        return 2
    baseline = None
    kept = document.get("baseline") or {}
    if before is not None and base is not None:
        baseline = Baseline(compare(before, records, tolerance, significance), before, base)
    elif "tolerance" in kept:  # the comparison the run made and the report kept
        baseline = Baseline(Comparison.from_dict(kept), None, str(kept.get("path", "")))
    try:
        write_html(Path(output), document, baseline)
    except OSError as exc:
        why = exc if exc.strerror is None else exc.strerror
        print(f"agent-eval html: {output} not written: {why}", file=sys.stderr)
        return 2
    print(f"agent-eval html: wrote {output} ({len(document.get('cases', []))} cases)")
    return 0


def init_project(folder: str, out: TextIO) -> int:
    """Write the starting project into ``folder``; 1 when a file exists.

    The project is :mod:`pytest_agent_eval.cases.scaffold`'s.
    """
    from pytest_agent_eval.cases import scaffold

    try:
        written, note = scaffold.write(Path(folder), native_schema(builtin_registry()))
    except scaffold.InitError as exc:
        for line in exc.lines:
            print(f"agent-eval init: {line}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}", file=out)
    if note:
        print(f"\n{note}", file=out)
    target = "" if folder in (".", "") else f" {folder}"
    print(
        "\n"
        f"next: pytest{target}   (the example agent is in {Path(folder) / scaffold.CONFTEST}: "
        "replace it with yours)",
        file=out,
    )
    return 0


def _report_command(args: argparse.Namespace) -> int:
    """``agent-eval merge``, ``gate`` and ``comment``, run by their report modules.

    ``gate`` is SPEC §18, ``comment`` SPEC §25.
    """
    if args.command == "comment":
        from pytest_agent_eval.report.comment import comment

        return comment(
            args.report, args.baseline, sys.stdout, sys.stderr, args.tolerance, args.significance
        )
    if args.command == "merge":
        from pytest_agent_eval.report.merge import merge_command

        return merge_command(args.reports, args.output, sys.stdout, sys.stderr)
    from pytest_agent_eval.report.gate import gate
    from pytest_agent_eval.report.limits import Thresholds

    limits = Thresholds(args.min_pass_rate, args.max_cost, args.max_p95_latency)
    return gate(
        args.report,
        args.baseline,
        limits,
        args.tolerance,
        args.significance,
        args.markdown,
        sys.stdout,
        sys.stderr,
    )


def _memory_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``report``, ``runs``, ``import`` and ``view`` (SPEC §24)."""
    store_help = (
        "the run store: a SQLite file (default .agent-eval/runs.db here) or postgresql://..."
    )
    rebuild = sub.add_parser(
        "report", help="rebuild a run's reports from its journal (what a killed run left)"
    )
    rebuild.add_argument("journal", metavar="JOURNAL", help="the run's journal (*.journal.jsonl)")
    rebuild.add_argument("-o", "--output", metavar="REPORT.json", help="the JSON report to write")
    rebuild.add_argument("--html", metavar="PATH", help="the HTML page to write")
    rebuild.add_argument("--markdown", metavar="PATH", help="the markdown summary to append")
    runs = sub.add_parser("runs", help="list the runs in the run store, newest first")
    runs.add_argument("--store", metavar="URL", help=store_help)
    runs.add_argument("--branch", metavar="NAME", help="only the runs of this git branch")
    runs.add_argument(
        "-n", "--limit", type=int, default=20, metavar="N", help="at most N runs (default 20)"
    )
    put = sub.add_parser(
        "import", help="save --agent-eval-report files (or journals) in the run store"
    )
    put.add_argument(
        "reports", nargs="+", metavar="REPORT", help="the reports to store, each one run"
    )
    put.add_argument("--store", metavar="URL", help=store_help)
    put.add_argument(
        "--branch", metavar="NAME", help="the git branch the reports' runs were made on"
    )
    view = sub.add_parser("view", help="serve a read-only web view of the run store on 127.0.0.1")
    view.add_argument("--store", metavar="URL", help=store_help)
    view.add_argument(
        "--port", type=int, default=8765, metavar="P", help="the port (default 8765; 0: any free)"
    )
    view.add_argument(
        "--host", default="127.0.0.1", metavar="ADDR", help="the address (default 127.0.0.1)"
    )
    view.add_argument(
        "--trace-url",
        metavar="TEMPLATE",
        help="link each case's trace: a URL with {trace_id} (default: the one each run was made "
        "with, if any)",
    )


def _memory_command(args: argparse.Namespace) -> int:
    """The commands of the run's memory, run by their module."""
    from pytest_agent_eval.memory import commands

    if args.command == "report":
        return commands.report_command(
            args.journal, args.output, args.html, args.markdown, sys.stdout, sys.stderr
        )
    if args.command == "runs":
        return commands.runs_command(args.store, args.branch, args.limit, sys.stdout, sys.stderr)
    if args.command == "import":
        return commands.import_command(
            args.store, args.reports, args.branch, sys.stdout, sys.stderr
        )
    from pytest_agent_eval.memory.viewer import view_command

    return view_command(args.store, args.host, args.port, sys.stdout, sys.stderr, args.trace_url)


def capture(trace: str, trace_id: str | None, output: str | None) -> int:
    """``agent-eval capture``: one trace made a native eval case (SPEC §23).

    Returns 2 with a message on bad input.
    """
    import yaml

    from pytest_agent_eval.traces.capture import CaptureError, case_of, pick_trace, read_export

    try:
        text = Path(trace).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(
            f"agent-eval capture: {trace}: cannot read it "
            f"({getattr(exc, 'strerror', None) or exc})",
            file=sys.stderr,
        )
        return 2
    try:
        document = case_of(pick_trace(read_export(text, trace), trace_id, trace), trace)
    except CaptureError as exc:
        print(f"agent-eval capture: {exc}", file=sys.stderr)
        return 2
    chosen = document["cases"][0]["metadata"]["captured_from"]["trace_id"]
    body = (
        f"# Captured from trace {chosen} of {trace} (agent-eval capture). Name the agent "
        "(`agent:` here, or\n"
        "# --agent) and the tool dispatcher its mocks patch (`tool_dispatch:`, or ini "
        "agent_eval_tool_dispatch).\n"
        + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    )
    if output is None:
        sys.stdout.write(body)
        return 0
    try:
        Path(output).write_text(body, encoding="utf-8")
    except OSError as exc:
        print(f"agent-eval capture: {output}: cannot write it ({exc.strerror})", file=sys.stderr)
        return 2
    print(f"agent-eval capture: wrote case {document['cases'][0]['id']} to {output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``agent-eval`` command.

    A reader that went away (``agent-eval compare … | head``) ends it quietly, as Unix tools end.
    """
    try:
        code = _command(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe is a message no one can catch
    except BrokenPipeError:
        _silence_stdout()
        return 1
    return code


def _silence_stdout() -> None:
    """Point standard output at the null device.

    What is still buffered for it is dropped at exit, not reported.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _command(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="agent-eval", description="pytest-agent-evalset tools")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser(
        "init", help="write a starting project: an eval file, conftest.py, ini block, CI workflow"
    )
    start.add_argument(
        "folder", nargs="?", default=".", metavar="DIR", help="where to write it (default: here)"
    )
    plugin_help = (
        "a module or .py file (e.g. conftest.py) whose pytest_agent_eval_register_* hooks add "
        "checks/formats"
    )
    check = sub.add_parser(
        "validate", help="check eval files: syntax, format, schema; print path:line: problem"
    )
    check.add_argument(
        "paths", nargs="+", metavar="PATH", help="eval files, or directories to search"
    )
    check.add_argument(
        "-p", dest="plugins", action="append", default=[], metavar="PLUGIN", help=plugin_help
    )
    check.add_argument(
        "--allow-path",
        dest="allow",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder outside the project that `file://` references may read (repeatable)",
    )
    schema = sub.add_parser("schema", help="print the JSON Schema of the native eval file format")
    schema.add_argument(
        "-p", dest="plugins", action="append", default=[], metavar="PLUGIN", help=plugin_help
    )
    schema.add_argument(
        "--report",
        action="store_true",
        help="print the schema of --agent-eval-report files instead",
    )
    schema.add_argument(
        "--format",
        choices=("native", "promptfoo", "sidecar"),
        default="native",
        help="the eval file format: native (default), promptfoo (the config subset it runs), "
        "sidecar (a dataset's <stem>.expect.yaml)",
    )
    cmp = sub.add_parser(
        "compare", help="compare two --agent-eval-report files: regressions, fixes, new, missing"
    )
    cmp.add_argument("base", metavar="BASE", help="the earlier report")
    cmp.add_argument("cand", metavar="CAND", help="the report to judge")
    cmp.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="score drop that regresses"
    )
    cmp.add_argument(
        "--significance", type=float, default=DEFAULT_SIGNIFICANCE, help="Fisher p that regresses"
    )
    cmp.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when a case regressed"
    )
    cmp.add_argument(
        "--markdown", action="store_true", help="print GitHub markdown (a table) instead of text"
    )
    page = sub.add_parser(
        "html", help="write the HTML page of an --agent-eval-report file (and its baseline)"
    )
    page.add_argument("report", metavar="REPORT", help="the report to show")
    page.add_argument(
        "base", metavar="BASE", nargs="?", help="an earlier report, compared side by side"
    )
    page.add_argument(
        "-o", "--output", required=True, metavar="PATH", help="the HTML file to write"
    )
    page.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="score drop that regresses"
    )
    page.add_argument(
        "--significance", type=float, default=DEFAULT_SIGNIFICANCE, help="Fisher p that regresses"
    )
    join = sub.add_parser(
        "merge", help="join --agent-eval-report files (a run's shards) into one report"
    )
    join.add_argument("reports", nargs="+", metavar="REPORT", help="the reports to join")
    join.add_argument(
        "-o", "--output", required=True, metavar="PATH", help="the merged report to write"
    )
    judge = sub.add_parser(
        "gate", help="judge a saved or merged report: regressions, thresholds, completeness"
    )
    judge.add_argument("report", metavar="REPORT", help="the report to judge")
    judge.add_argument(
        "--baseline", metavar="BASE", help="an earlier report: a regression against it fails"
    )
    judge.add_argument(
        "--min-pass-rate", type=float, metavar="X", help="share of decided cases that must pass"
    )
    judge.add_argument(
        "--max-cost",
        type=float,
        metavar="X",
        help="the report's total LLM cost may not exceed this",
    )
    judge.add_argument(
        "--max-p95-latency",
        type=float,
        metavar="S",
        help="p95 agent latency in seconds may not exceed",
    )
    judge.add_argument(
        "--markdown", metavar="PATH", help="append the markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    judge.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="score drop that regresses"
    )
    judge.add_argument(
        "--significance", type=float, default=DEFAULT_SIGNIFICANCE, help="Fisher p that regresses"
    )
    grab = sub.add_parser(
        "capture", help="turn one trace of an OTLP JSON / Phoenix / Jaeger export into an eval case"
    )
    grab.add_argument(
        "trace", metavar="TRACE", help="the trace export (OTLP JSON or JSON lines, Phoenix, Jaeger)"
    )
    grab.add_argument("--trace-id", metavar="ID", help="which trace, when the file holds several")
    grab.add_argument(
        "-o", "--output", metavar="FILE", help="the eval file to write (default: standard output)"
    )
    note = sub.add_parser(
        "comment",
        help="print a report's pull-request comment (one sticky comment: a hidden marker)",
    )
    note.add_argument("report", metavar="REPORT", help="the report to comment on")
    note.add_argument(
        "--baseline",
        metavar="BASE",
        help="an earlier report: regressions, fixes and cost against it",
    )
    note.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="score drop that regresses"
    )
    note.add_argument(
        "--significance", type=float, default=DEFAULT_SIGNIFICANCE, help="Fisher p that regresses"
    )
    _memory_parsers(sub)
    args = parser.parse_args(argv)
    if args.command == "capture":
        return capture(args.trace, args.trace_id, args.output)
    if args.command in ("report", "runs", "import", "view"):
        return _memory_command(args)
    if args.command in ("merge", "gate", "comment"):
        return _report_command(args)
    if args.command == "init":
        return init_project(args.folder, sys.stdout)
    if args.command == "html":
        return html_page(args.report, args.base, args.output, args.tolerance, args.significance)
    if args.command == "validate":
        return validate(args.paths, args.plugins, sys.stdout, args.allow)
    if args.command == "compare":
        return compare_reports(
            args.base,
            args.cand,
            args.tolerance,
            args.significance,
            args.fail_on_regression,
            args.markdown,
        )
    if args.report:
        print(json.dumps(report_schema(), indent=2))
        return 0
    if args.format == "promptfoo":
        from pytest_agent_eval.cases.dialects.promptfoo import config_schema

        print(json.dumps(config_schema(), indent=2))
        return 0
    checks = registries(args.plugins, ["."]).checks
    if args.format == "sidecar":
        from pytest_agent_eval.cases.dialects.dataset_rows import sidecar_schema

        print(json.dumps(sidecar_schema(checks), indent=2))
        return 0
    print(json.dumps(native_schema(checks), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
