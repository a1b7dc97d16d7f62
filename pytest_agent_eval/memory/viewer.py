"""``agent-eval view``: a read-only local web view of the run store (SPEC §24).

On 127.0.0.1 by default. Served by the standard library's ``http.server`` (threads, GET only) and
rendered on the server: every page is one HTML document with its CSS inline and its charts as inline
SVG, so nothing is fetched from the network, there is nothing to build, and its
Content-Security-Policy forbids any other request. Pages: runs over time (pass rate, cost, p50/p95
latency; filters by branch, agent, tag, file), one run, one case's history (where it flipped), two
runs side by side (outputs diffed) and the flaky cases. A case with a trace id links its trace
(SPEC §23): through ``--trace-url TEMPLATE``, else the template its run was made with
(``run.trace_url``).
"""

from __future__ import annotations

import difflib
import html
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO
from urllib.parse import parse_qs, quote, urlsplit

from pytest_agent_eval.memory.store import CASES, Store, StoreError
from pytest_agent_eval.report.stats import percentile

_RUNS_SHOWN = 50
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "base-uri 'none'"
)
_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 2em 2em;color:#222}
nav{padding:.6em 0;border-bottom:1px solid #ccc;margin-bottom:1em}nav a{margin-right:1.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.2em .5em;\
text-align:left;
vertical-align:top}th{background:#f4f4f4}.passed,.xpassed{color:#1a7f37}.failed,.error{color:#c62828}
.skipped,.xfailed{color:#888}pre{white-space:pre-wrap;max-width:60em;margin:0}.flaky{background:#fff3cd;
padding:0 .3em;border-radius:3px}.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}
.add{background:#e6ffec}.del{background:#ffebe9}form.filters input{width:10em}
"""
_COLOURS = {"passed": "#1a7f37", "xpassed": "#1a7f37", "failed": "#c62828", "error": "#c62828"}


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def trace_link(trace_id: Any, template: Any, label: str = "trace") -> str:
    """A case's trace as HTML: a link through ``template``, else the bare id, else nothing.

    A link to ``template`` with ``{trace_id}`` filled in (an http(s) one only: the template is
    data), the bare id without one, nothing without an id.
    """
    if not isinstance(trace_id, str) or not trace_id:
        return ""
    if (
        isinstance(template, str)
        and "{trace_id}" in template
        and template.startswith(("http://", "https://"))
    ):
        href = template.replace("{trace_id}", quote(trace_id, safe=""))
        return f'<a class="trace" href="{esc(href)}" rel="noreferrer">{esc(label)}</a>'
    return f'<code class="trace">{esc(trace_id)}</code>'


def trace_links(record: Any, template: Any) -> str:
    """Every trial's trace of a case (``trial 1``, ``trial 2``, …), or the case's one trace."""
    trials = record.get("trials") if isinstance(record, dict) else None
    ids = [t.get("trace_id") for t in trials or [] if isinstance(t, dict)]
    ids = [i for k, i in enumerate(ids) if isinstance(i, str) and i and i not in ids[:k]]
    if len(ids) < 2:
        return trace_link(record.get("trace_id") if isinstance(record, dict) else None, template)
    return " ".join(trace_link(i, template, f"trial {k}") for k, i in enumerate(ids, 1))


def _page(title: str, body: str) -> str:
    nav = '<nav><a href="/">runs over time</a><a href="/flaky">flaky cases</a></nav>'
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)} · agent eval</title>"
        f"<style>{_STYLE}</style></head><body>{nav}<h1>{esc(title)}</h1>{body}</body></html>"
    )


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _chart(
    title: str, points: list[tuple[str, dict[str, float | None]]], fmt: str, scale: float = 0.0
) -> str:
    """A line chart as inline SVG: one line per series, a point per run (oldest left).

    Each point is a link to its run; the axis runs from 0 to ``scale`` (1 for a rate), or to the
    largest value.
    """
    width, height, pad = 420, 160, 30
    series = sorted({name for _, values in points for name in values})
    values = [v for _, vals in points for v in vals.values() if v is not None]
    svg = (
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    )
    if not values:
        text = f'<text x="{pad}" y="{height // 2}" font-size="12">no data in these runs</text>'
        return f"<figure><figcaption>{esc(title)}</figcaption>{svg}{text}</svg></figure>"
    top = max(scale, *values) or 1.0
    step = (width - 2 * pad) / max(1, len(points) - 1)
    parts = [f'<text x="4" y="12" font-size="10">{esc(format(top, fmt))}</text>']
    parts.append(
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#999"/>'
    )
    for k, name in enumerate(series):
        colour = ("#1f77b4", "#ff7f0e", "#2ca02c")[k % 3]
        xy = []
        for i, (run_id, vals) in enumerate(points):
            value = vals.get(name)
            if value is None:
                continue
            x, y = pad + i * step, height - pad - (height - 2 * pad) * value / top
            xy.append(f"{x:.1f},{y:.1f}")
            label = f"{name} {format(value, fmt)} (run {run_id})"
            parts.append(
                f'<a href="/run/{quote(run_id)}">'
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                f"<title>{esc(label)}</title></circle></a>"
            )
        parts.append(f'<polyline fill="none" stroke="{colour}" points="{" ".join(xy)}"/>')
        parts.append(
            f'<text x="{pad + 70 * k}" y="{height - 8}" font-size="10" fill="{colour}">'
            f"{esc(name)}</text>"
        )
    return f"<figure><figcaption>{esc(title)}</figcaption>{svg}{''.join(parts)}</svg></figure>"


class Viewer:
    """The pages, read from one store."""

    def __init__(self, store: Store, trace_url: str | None = None) -> None:
        self.store = store
        self.trace_url = trace_url
        """``--trace-url``: the trace link of every run's cases.

        ``None``: each run's own (``run.trace_url``).
        """

    def route(self, path: str, query: dict[str, str]) -> tuple[int, str]:
        if path == "/":
            return 200, self.runs(query)
        if path.startswith("/run/"):
            return self.run(path[len("/run/") :])
        if path == "/case":
            return 200, self.case(query.get("nodeid", ""))
        if path == "/compare":
            return self.compare(query.get("a", ""), query.get("b", ""))
        if path == "/flaky":
            return 200, self.flaky()
        return 404, _page("Not found", f"<p>No page {esc(path)}.</p>")

    def _case_rows(self, run_ids: list[str]) -> list[Any]:
        import sqlalchemy as sa

        query = sa.select(
            CASES.c.run_id, CASES.c.nodeid, CASES.c.file, CASES.c.agent, CASES.c.tags,
            CASES.c.outcome, CASES.c.cost, CASES.c.latency_s, CASES.c.content_hash,
        ).where(CASES.c.run_id.in_(run_ids))  # fmt: skip
        with self.store.engine.connect() as conn:
            return list(conn.execute(query))

    def runs(self, query: dict[str, str]) -> str:
        branch = query.get("branch") or None
        runs = list(reversed(self.store.runs(branch, _RUNS_SHOWN)))  # oldest first
        rows = self._case_rows([r.id for r in runs])
        agent, tag, file = query.get("agent"), query.get("tag"), query.get("file")

        def wanted(row: Any) -> bool:
            return (
                (not agent or row.agent == agent)
                and (not tag or tag in json.loads(row.tags or "[]"))
                and (not file or row.file == file)
            )

        by_run: dict[str, list[Any]] = {}
        for row in rows:
            if wanted(row):
                by_run.setdefault(row.run_id, []).append(row)
        rate, cost, latency, table = [], [], [], []
        for run in runs:
            cases = by_run.get(run.id, [])
            decided = [c for c in cases if c.outcome in ("passed", "xpassed", "failed", "error")]
            passed = sum(c.outcome in ("passed", "xpassed") for c in decided)
            costs = [c.cost for c in cases if c.cost is not None]
            lat = [c.latency_s for c in cases if c.latency_s is not None]
            figures = {
                "pass rate": passed / len(decided) if decided else None,
                "cost": sum(costs) if costs else None,
                "p50": percentile(lat, 0.5) if lat else None,
                "p95": percentile(lat, 0.95) if lat else None,
            }
            rate.append((run.id, {"pass rate": figures["pass rate"]}))
            cost.append((run.id, {"cost": figures["cost"]}))
            latency.append((run.id, {"p50": figures["p50"], "p95": figures["p95"]}))
            table.append((run, len(cases), passed, figures))
        charts = (
            '<div class="charts">'
            + _chart("pass rate", rate, ".0%", scale=1.0)
            + _chart("cost (USD)", cost, ".4f")
            + _chart("latency p50 / p95 (s)", latency, ".2f")
            + "</div>"
        )
        every = self._case_rows([r.id for r in runs])
        options = {
            "branch": sorted({r.git_branch for r in runs if r.git_branch}),
            "agent": sorted({r.agent for r in every if r.agent}),
            "tag": sorted({t for r in every for t in json.loads(r.tags or "[]")}),
            "file": sorted({r.file for r in every}),
        }
        fields = "".join(
            f'<label>{name} <select name="{name}"><option value="">all</option>'
            + "".join(
                f"<option{' selected' if query.get(name) == v else ''}>{esc(v)}</option>"
                for v in values
            )
            + "</select></label> "
            for name, values in options.items()
        )
        filters = (
            f'<form class="filters" method="get" action="/">{fields}<button>filter</button></form>'
        )
        lines = [
            "<tr><th>run</th><th>started</th><th>branch</th><th>commit</th><th>passed</th>"
            "<th>pass rate</th><th>cost</th><th>p95 s</th><th>shard</th></tr>"
        ]
        for run, total, passed, figures in reversed(table):
            commit = (run.git_commit or "-")[:8] + ("+" if run.git_dirty else "")
            lines.append(
                f'<tr><td><a href="/run/{quote(run.id)}">{esc(run.id)}</a></td>'
                f"<td>{esc(run.started)}</td>"
                f"<td>{esc(run.git_branch or '-')}</td><td>{esc(commit)}</td>"
                f"<td>{passed}/{total}</td>"
                f"<td>{_num(figures['pass rate'], '.0%')}</td>"
                f"<td>{_num(figures['cost'], '.4f')}</td>"
                f"<td>{_num(figures['p95'], '.2f')}</td><td>{esc(run.shard or '')}</td></tr>"
            )
        ids = [r.id for r in reversed(runs)]
        picks = "".join(f"<option>{esc(i)}</option>" for i in ids)
        compare = (
            f'<form method="get" action="/compare">compare <select name="a">{picks}</select> with '
            f'<select name="b">{picks}</select> <button>side by side</button></form>'
        )
        summary = (
            f"<p>{len(runs)} runs of {esc(self.store)}{' on ' + esc(branch) if branch else ''}.</p>"
        )
        return _page(
            "Runs over time",
            summary + filters + charts + compare + f'<table id="runs">{"".join(lines)}</table>',
        )

    def run(self, run_id: str) -> tuple[int, str]:
        run = self.store.run(run_id)
        if run is None:
            return 404, _page("Not found", f"<p>No run {esc(run_id)} in the store.</p>")
        cases = self.store.cases(run_id)
        flaky = self.store.flaky(nodeids=[c["nodeid"] for c in cases])
        head = (
            f"<p>started {esc(run['started'])} · branch {esc(run['git_branch'] or '-')} · "
            f"commit {esc(run['git_commit'] or '-')}{' (dirty)' if run['git_dirty'] else ''} · "
            f"{run['passed']}/{run['total']} passed · cost {_num(run['cost'], '.4f')} · "
            f"agents {esc(', '.join(run['agents']) or '-')} · shard {esc(run['shard'] or '-')}</p>"
            f"<p>options <code>{esc(json.dumps(run['options']))}</code></p>"
        )
        template = self.trace_url or (run["run"] or {}).get("trace_url")
        rows = [
            "<tr><th>case</th><th>outcome</th><th>score</th><th>cost</th><th>latency s</th>"
            "<th>trace</th><th>details</th></tr>"
        ]
        for case in cases:
            badge = ' <span class="flaky">flaky</span>' if case["nodeid"] in flaky else ""
            rows.append(
                f'<tr><td><a href="/case?nodeid={quote(case["nodeid"])}">{esc(case["nodeid"])}</a>'
                f"{badge}</td>"
                f'<td class="{esc(case["outcome"])}">{esc(case["outcome"])}{_cached(case)}</td>'
                f"<td>{_num(case.get('score'), '.2f')}</td><td>{_num(case.get('cost'), '.4f')}</td>"
                f"<td>{_num(case.get('latency_s'), '.2f')}</td>"
                f"<td>{trace_links(case, template)}</td>"
                f"<td>{_details(case)}</td></tr>"
            )
        return 200, _page(f"Run {run_id}", head + f'<table id="cases">{"".join(rows)}</table>')

    def case(self, nodeid: str) -> str:
        history = list(reversed(self.store.history(nodeid)))  # oldest first
        if not history:
            return _page(f"Case {nodeid}", "<p>This case is in no stored run.</p>")
        strip = []
        for k, row in enumerate(history):
            colour = _COLOURS.get(row["outcome"], "#999")
            strip.append(
                f'<a href="/run/{quote(row["run_id"])}">'
                f'<rect x="{k * 14}" y="0" width="12" height="20" fill="{colour}">'
                f"<title>{esc(row['outcome'])} in run {esc(row['run_id'])}</title></rect></a>"
            )
        svg = f'<svg class="strip" width="{14 * len(history)}" height="20">{"".join(strip)}</svg>'
        rows = ["<tr><th>run</th><th>started</th><th>branch</th><th>outcome</th><th>score</th>"
                "<th>cost</th><th>content hash</th><th>trace</th><th></th></tr>"]  # fmt: skip
        before = None
        for row in history:
            note = ""
            if before is not None and _decided(before["outcome"]) != _decided(row["outcome"]):
                same = before["content_hash"] == row["content_hash"]
                note = "flipped here" + (" (case unchanged)" if same else " (case edited)")
            rows.append(
                f'<tr><td><a href="/run/{quote(row["run_id"])}">{esc(row["run_id"])}</a></td>'
                f"<td>{esc(row['started'])}</td><td>{esc(row['git_branch'] or '-')}</td>"
                f'<td class="{esc(row["outcome"])}">{esc(row["outcome"])}</td>'
                f"<td>{_num(row['score'], '.2f')}</td>"
                f"<td>{_num(row['cost'], '.4f')}</td><td>{esc(row['content_hash'] or '-')}</td>"
                f"<td>{trace_links(row['record'], self.trace_url or row['trace_url'])}</td>"
                f"<td>{esc(note)}</td></tr>"
            )
            before = row
        return _page(f"Case {nodeid}", svg + f'<table id="history">{"".join(rows)}</table>')

    def compare(self, a: str, b: str) -> tuple[int, str]:
        left, right = self.store.run(a), self.store.run(b)
        if left is None or right is None:
            return 404, _page("Not found", "<p>Pick two runs of the store to compare.</p>")
        before = {c["nodeid"]: c for c in self.store.cases(a)}
        after = {c["nodeid"]: c for c in self.store.cases(b)}
        rows = [f"<tr><th>case</th><th>{esc(a)}</th><th>{esc(b)}</th><th>output diff</th></tr>"]
        for nodeid in sorted(before.keys() | after.keys()):
            old, new = before.get(nodeid), after.get(nodeid)
            rows.append(
                f'<tr><td><a href="/case?nodeid={quote(nodeid)}">{esc(nodeid)}</a></td>'
                f"{_outcome(old)}{_outcome(new)}<td><pre>{_diff(old, new)}</pre></td></tr>"
            )
        return 200, _page(
            f"{a} and {b} side by side", f'<table id="compare">{"".join(rows)}</table>'
        )

    def flaky(self) -> str:
        found = self.store.flaky(last=_RUNS_SHOWN)
        if not found:
            return _page("Flaky cases", f"<p>No case changed outcome with its content unchanged "
                         f"in the last {_RUNS_SHOWN} runs.</p>")  # fmt: skip
        rows = ["<tr><th>case</th><th>outcomes (oldest first)</th></tr>"]
        rows += [
            f'<tr><td><a href="/case?nodeid={quote(n)}">{esc(n)}</a>'
            ' <span class="flaky">flaky</span></td>'
            f"<td>{esc(' '.join(o))}</td></tr>"
            for n, o in sorted(found.items())
        ]
        return _page("Flaky cases", f'<table id="flaky">{"".join(rows)}</table>')


def _decided(outcome: str) -> str | None:
    return (
        "pass"
        if outcome in ("passed", "xpassed")
        else "fail"
        if outcome in ("failed", "error")
        else None
    )


def _outcome(case: dict[str, Any] | None) -> str:
    if case is None:
        return "<td>-</td>"
    return f'<td class="{esc(case["outcome"])}">{esc(case["outcome"])}</td>'


def _diff(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    a = str((old or {}).get("output") or "").splitlines()
    b = str((new or {}).get("output") or "").splitlines()
    out = []
    for line in difflib.ndiff(a, b):
        if line.startswith("?"):
            continue
        cls = {"+": "add", "-": "del"}.get(line[:1], "")
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return "\n".join(out)


def _cached(case: dict[str, Any]) -> str:
    """`` (cached from RUN)`` for a record from the verdict cache, linking the run that made it."""
    if case.get("cached") is not True:
        return ""
    origin = case.get("run_id")
    if not isinstance(origin, str):
        return " (cached)"
    return f' (cached from <a href="/run/{quote(origin)}">{esc(origin)}</a>)'


def _details(case: dict[str, Any]) -> str:
    """The failure text, then output, transcript, tool calls and spans behind a ``<details>``."""
    failing = [
        c for c in case.get("checks") or [] if isinstance(c, dict) and not c.get("passed", True)
    ]
    why = case.get("error") or "; ".join(f"{c.get('name')}: {c.get('message')}" for c in failing)
    parts = [f"<pre>{esc(why)}</pre>"] if why else []
    more = {
        "output": case.get("output"),
        "transcript": case.get("transcript"),
        "tool calls": case.get("tool_calls"),
        "spans": case.get("spans"),
    }
    body = "".join(
        f"<h4>{name}</h4><pre>"
        f"{esc(v if isinstance(v, str) else json.dumps(v, indent=1, ensure_ascii=False))}</pre>"
        for name, v in more.items()
        if v
    )
    if body:
        parts.append(f"<details><summary>output, transcript, tool calls</summary>{body}</details>")
    return "".join(parts)


def serve(store: Store, host: str, port: int, trace_url: str | None = None) -> ThreadingHTTPServer:
    """A server of the store's pages, bound (not yet serving): call ``serve_forever`` on it."""
    viewer = Viewer(store, trace_url)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            try:
                status, body = viewer.route(parts.path, query)
            except StoreError as exc:
                status, body = 500, _page("The store cannot be read", f"<p>{esc(exc)}</p>")
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", _CSP)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return ThreadingHTTPServer((host, port), Handler)


def view_command(
    url: str | None, host: str, port: int, out: TextIO, err: TextIO, trace_url: str | None = None
) -> int:
    """Serve the store until interrupted; 2 when it cannot be served.

    2 when the store cannot be opened, the port is taken or ``trace_url`` (the trace link template)
    has no ``{trace_id}``.
    """
    from pytest_agent_eval.memory.commands import open_store

    if trace_url is not None and "{trace_id}" not in trace_url:
        print(
            f"agent-eval view: --trace-url {trace_url!r}: put {{trace_id}} where the trace id goes",
            file=err,
        )
        return 2
    store = open_store(url, err, "view")
    if store is None:
        return 2
    try:
        server = serve(store, host, port, trace_url)
    except OSError as exc:
        print(f"agent-eval view: cannot listen on {host}:{port}: {exc.strerror or exc}", file=err)
        return 2
    print(
        f"agent-eval view: {store} on http://{host}:{server.server_address[1]}/ (Ctrl-C to stop)",
        file=out,
    )
    out.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        store.close()
    return 0


def background(
    store: Store, host: str = "127.0.0.1", port: int = 0, trace_url: str | None = None
) -> tuple[ThreadingHTTPServer, Callable[[], None]]:
    """A server running in a thread (for tests and screenshots) and the function that stops it."""
    server = serve(store, host, port, trace_url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return server, stop
