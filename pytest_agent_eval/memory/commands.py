"""The run store's commands: ``agent-eval report``, ``runs`` and ``import`` (SPEC §24).

``agent-eval report JOURNAL``, ``agent-eval runs`` and ``agent-eval import REPORT…``; no pytest.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, TextIO

from pytest_agent_eval.report.baseline import BaselineError, Comparison, load_report

_NO_LIBRARIES = (
    "the run store needs SQLAlchemy: pip install 'pytest-agent-evalset[store]' "
    "([postgres] for PostgreSQL)"
)


def report_command(
    journal: str,
    output: str | None,
    html: str | None,
    markdown: str | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """Rebuild a run's reports from its journal; 2 when it cannot be read or a file written.

    The reports: the JSON report (``output``), the HTML page, the markdown (appended, as
    ``--agent-eval-markdown`` appends).
    """
    from pytest_agent_eval.memory.journal import read_journal
    from pytest_agent_eval.report.atomic import append_text, write_text_atomically
    from pytest_agent_eval.report.schema import report_text

    try:
        document = read_journal(Path(journal))
    except BaselineError as exc:
        print(f"agent-eval report: {exc}", file=err)
        return 2
    if not (output or html or markdown):
        print("agent-eval report: give -o REPORT.json, --html PATH or --markdown PATH", file=err)
        return 2
    written = []
    try:
        if output:
            write_text_atomically(Path(output), report_text(document))
            written.append(output)
        if html:
            from pytest_agent_eval.report.html import write_html

            write_html(Path(html), document)
            written.append(html)
        if markdown:
            append_text(Path(markdown), "\n".join(_markdown(document)) + "\n\n")
            written.append(markdown)
    except OSError as exc:
        print(
            f"agent-eval report: {exc.filename or ''}: not written: {exc.strerror or exc}", file=err
        )
        return 2
    cases, not_run = len(document["cases"]), len(document["not_run"])
    state = "a finished run" if document["run"]["finished"] else "a run that did not finish"
    extra = f", {not_run} not run" if not_run else ""
    print(
        f"agent-eval report: {journal}: {state}, {cases} cases{extra}; wrote {', '.join(written)}",
        file=out,
    )
    return 0


def _markdown(document: dict[str, Any]) -> list[str]:
    from pytest_agent_eval.report.baseline import md_code, records_of
    from pytest_agent_eval.report.markdown_text import markdown_lines

    kept = document.get("baseline") or {}
    comparison = Comparison.from_dict(kept) if "tolerance" in kept else None
    stopped = None
    if not document["run"]["finished"]:
        names = ", ".join(md_code(e["nodeid"]) for e in document["not_run"][:10])
        stopped = "**The run did not finish** (rebuilt from its journal)" + (
            f": not run {names}" if names else ""
        )
    return markdown_lines(records_of(document["cases"]), comparison, stopped, document.get("flaky"))


def open_store(url: str | None, err: TextIO, command: str) -> Any:
    """The store at ``url``, opened; ``None`` (said on ``err``) when it cannot be.

    The default ``url`` is ``.agent-eval/runs.db`` here.
    """
    if importlib.util.find_spec("sqlalchemy") is None:
        print(f"agent-eval {command}: {_NO_LIBRARIES}", file=err)
        return None
    from pytest_agent_eval.memory.location import store_url
    from pytest_agent_eval.memory.store import Store, StoreError

    resolved = store_url(url, Path.cwd())
    if resolved is None:
        print(f"agent-eval {command}: --store off: no store to read", file=err)
        return None
    try:
        store = Store(resolved)
        store.open()
    except (StoreError, ImportError, OSError) as exc:
        print(f"agent-eval {command}: {exc}", file=err)
        return None
    return store


def runs_command(url: str | None, branch: str | None, limit: int, out: TextIO, err: TextIO) -> int:
    """List the store's runs, newest first; 2 when the store cannot be read."""
    from pytest_agent_eval.memory.store import StoreError
    from pytest_agent_eval.text import text_table

    store = open_store(url, err, "runs")
    if store is None:
        return 2
    try:
        runs = store.runs(branch, limit)
    except StoreError as exc:
        print(f"agent-eval runs: {exc}", file=err)
        return 2
    finally:
        store.close()
    if not runs:
        print(
            f"agent-eval runs: no run in {store}" + (f" on the branch {branch}" if branch else ""),
            file=out,
        )
        return 0
    rows: list[tuple[str, ...]] = [
        ("run", "started", "branch", "commit", "passed", "pass rate", "cost", "p95 s", "agents")
    ]
    for run in runs:
        commit = (run.git_commit or "-")[:8] + ("+" if run.git_dirty else "")
        rows.append(
            (
                run.id,
                run.started,
                run.git_branch or "-",
                commit,
                f"{run.passed}/{run.total}",
                "-" if run.pass_rate is None else f"{run.pass_rate:.0%}",
                "-" if run.cost is None else f"${run.cost:.4f}",
                "-" if run.p95_latency_s is None else f"{run.p95_latency_s:.2f}",
                ", ".join(run.agents) or "-",
            )
        )
    for line in text_table(rows, align_left=4):
        print(line, file=out)
    return 0


def import_command(
    url: str | None, reports: list[str], branch: str | None, out: TextIO, err: TextIO
) -> int:
    """Store saved reports (or journals), each as one run.

    2 when one cannot be read or stored (the others are stored).
    """
    from pytest_agent_eval.memory.journal import is_journal, read_journal
    from pytest_agent_eval.memory.store import StoreError, imported_id, run_row

    store = open_store(url, err, "import")
    if store is None:
        return 2
    code = 0
    try:
        for name in reports:
            path = Path(name)
            try:
                document = read_journal(path) if is_journal(path) else load_report(path)
                run_id = imported_id(path.read_text(encoding="utf-8"))
                if store.has_run(run_id):
                    print(f"agent-eval import: {name}: stored already (run {run_id})", file=out)
                    continue
                git = {"branch": branch} if branch else None
                store.save(
                    run_row(document, run_id, git, source=str(path.resolve())), document["cases"]
                )
            except (BaselineError, StoreError, OSError) as exc:
                print(f"agent-eval import: {exc}", file=err)
                code = 2
                continue
            print(
                f"agent-eval import: {name}: run {run_id}, {len(document['cases'])} cases "
                f"-> {store}",
                file=out,
            )
    finally:
        store.close()
    return code
