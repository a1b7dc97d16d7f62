"""Issue 38: the weight of the plugin, the rows of the issue's table in one run.

Each row runs this checkout's package ("after"), a given revision's ("before", exported by ``git
archive``) and a plain pytest run without the plugin, alternating within each round, and prints the
medians (wall seconds; CPU seconds of the pytest processes) and the ratios against plain and against
before, with the machine's load. Never asserts. See benchmarks/README.md.

    python benchmarks/weight.py            # the issue's sizes, 5 rounds (≈ 10 minutes on 2 cores)
    python benchmarks/weight.py --short    # CI: small sizes, 1–3 rounds, < 60 s; not gated
    python benchmarks/weight.py --before 292e16a --row start-up --rounds 9
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import budget  # the rate-limited loopback provider and its openai agent
import run as bench  # the generated project's agents and baseline module

REPO = Path(__file__).resolve().parent.parent
FALLBACK_BEFORE = "d3036aa"  # the code the issue measured, when there is no release tag
DISABLED = (
    "randomly",
    "langsmith_plugin",
    "hypothesispytest",
    "benchmark",
    "anyio",
)  # as run.py and budget.py
LATENCY = 0.05
CONCURRENCY = 128
BUDGET_CONCURRENCY = 32
RATE = 20
TIMING_PLUGIN = '''\
"""Benchmark only (``-p bench_timing``): when this process started, and when it \
reached each phase."""

import json, os, time

def _started():
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rpartition(")")[2].split()[19])  # since boot
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / \
os.sysconf("SC_CLK_TCK"))

MARKS = {"process": _started(), "pytest imported": time.time()}

def _mark(name):
    MARKS.setdefault(name, time.time())

def pytest_configure(config):
    _mark("plugins configured")

def pytest_sessionstart(session):
    _mark("session started")

def pytest_collection_finish(session):
    _mark("collected")

def pytest_runtest_logstart(nodeid, location):
    _mark("first test")

def pytest_unconfigure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"timing-{worker}.json", "w") as out:
        json.dump(MARKS, out)
'''
TIMED_AGENT = f"""import bench_timing
bench_timing._mark("agent import starts")
{budget.AGENT}
bench_timing._mark("agent imported (openai)")
"""
PLAIN_OPENAI = '''\
"""The budget rows' plain run: the same calls as a parametrized test (the openai client's \
own retries)."""

import pytest

from bench_agent import run

@pytest.mark.parametrize("n", range(CASES))
def test_call(n):
    assert run(f"Question {n}") == "done"
'''


STARTUP_AGENT = """\
def run(query, context):
    return f"answer to {query}"
"""
STARTUP_TEST = """\
from startup_agent import run


def test_startup():
    assert "answer" in run("question 0", {})
"""
"""The start-up row's plain one-test file: it calls the agent the one eval case runs.

So both sides import the same agent module: the row weighs the plugin, not the agent.
"""


@dataclass
class Sizes:
    cases: int  # collect and run rows (zero latency)
    sleepers: int  # the 50 ms row
    budget: int  # the provider rows
    rounds: int
    startup_rounds: int


FULL = Sizes(cases=10_000, sleepers=2000, budget=300, rounds=5, startup_rounds=9)
SHORT = Sizes(cases=2000, sleepers=500, budget=40, rounds=1, startup_rounds=3)


@dataclass
class Sample:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    first_request: list[float] = field(default_factory=list)
    span: list[float] = field(default_factory=list)
    """The provider's first to last answered request: the pace's part of the wall time."""
    limited: list[int] = field(default_factory=list)
    """Requests the provider answered 429."""
    passed: list[int] = field(default_factory=list)
    switches: list[int] = field(default_factory=list)
    """Context switches of the pytest process (and its children), voluntary or not."""

    def median(self, what: str = "wall") -> float:
        values = getattr(self, what)
        return statistics.median(values) if values else math.nan


@dataclass
class Bench:
    root: Path
    before: Path
    sizes: Sizes
    provider: budget.Provider
    log: Callable[[str], None]

    def env(self, code: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
        }
        package = self.before if code == "before" else REPO
        env["PYTHONPATH"] = os.pathsep.join([str(package), str(self.root)])
        env["PYTHONPYCACHEPREFIX"] = str(
            self.root / "pycache"
        )  # compiled once, by the untimed warm-up
        env["OPENAI_API_KEY"] = "sk-bench"
        env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{self.provider.server_address[1]}/v1"
        env["NO_PROXY"] = "127.0.0.1"
        return env

    @staticmethod
    def command(code: str, args: list[str]) -> list[str]:
        """The pytest command of a run of ``code`` (``plain``: without the plugin)."""
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        command += [a for name in DISABLED for a in ("-p", f"no:{name}")]
        return command + (["-p", "no:agent_eval"] if code == "plain" else [])

    def pytest(self, code: str, args: list[str], sample: Sample | None) -> str:
        """One pytest run of ``code`` (``plain``: no plugin); its times go to ``sample``."""
        command = self.command(code, ["-p", "bench_timing", *args])
        for old in self.root.glob("timing-*.json"):
            old.unlink()
        self.provider.reset()
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start, clock = time.perf_counter(), time.monotonic()
        done = subprocess.run(
            command, cwd=self.root, env=self.env(code), capture_output=True, text=True, timeout=900
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = done.stdout + done.stderr
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{code} {' '.join(args)} exited {done.returncode}:\n{out[-3000:]}")
        if sample is not None:
            sample.wall.append(wall)
            sample.cpu.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
            sample.switches.append(
                after.ru_nvcsw + after.ru_nivcsw - used.ru_nvcsw - used.ru_nivcsw
            )
            if self.provider.first:
                sample.first_request.append(self.provider.first - clock)
                sample.span.append(self.provider.last - self.provider.first)
                sample.limited.append(self.provider.limited)
            sample.passed.append(budget._count(out, "passed"))
        return out

    def warm_up(self) -> None:
        """Untimed runs that fill the shared bytecode cache with every module the runs import.

        The modules are those of each code's package, pytest, xdist and openai.
        """
        for code in ("after", "before", "plain"):
            self.pytest(code, ["eval_one.json"] if code != "plain" else ["test_startup.py"], None)
            self.pytest(code, ["test_plain_budget.py", "--collect-only", "-n", "2"], None)

    def rounds(self, variants: dict[str, tuple[str, list[str]]], rounds: int) -> dict[str, Sample]:
        """Every variant once per round, in an order that alternates from round to round."""
        samples = {name: Sample() for name in variants}
        names = list(variants)
        for n in range(rounds):
            for name in names if n % 2 == 0 else names[::-1]:
                code, args = variants[name]
                self.pytest(code, args, samples[name])
                self.log(
                    f"  {name}: {samples[name].wall[-1]:.2f} s (load {os.getloadavg()[0]:.1f})"
                )
        return samples

    def timings(self) -> dict[str, dict[str, float]]:
        """The last run's phase times per process (``main``, ``gw0`` ...), from the timing files."""
        return {
            p.stem.removeprefix("timing-"): json.loads(p.read_text())
            for p in self.root.glob("timing-*.json")
        }


def write_project(root: Path, sizes: Sizes) -> None:
    files = {
        "pytest.ini": "[pytest]\n",
        "bench_timing.py": TIMING_PLUGIN,
        "bench_agent.py": bench.AGENT_MODULE,
        "budget_agent.py": TIMED_AGENT,
        # start-up: the same one-line agent, called once by the eval case and by the plain test
        "startup_agent.py": STARTUP_AGENT,
        "test_startup.py": STARTUP_TEST,
        "eval_one.json": bench.native_json("startup_agent:run", 1),
        "eval_zero.json": bench.native_json("bench_agent:run", sizes.cases),
        "test_plain.py": bench.baseline_module("eval_zero.json"),
        "eval_zero_sleepers.json": bench.native_json("bench_agent:run", sizes.sleepers),
        "test_plain_sleepers.py": bench.baseline_module("eval_zero_sleepers.json"),
        "eval_sleepers.json": bench.native_json("bench_agent:sleep_50ms_sync", sizes.sleepers),
        "test_plain_budget.py": PLAIN_OPENAI.replace("bench_agent", "budget_agent").replace(
            "CASES", str(sizes.budget)
        ),
    }
    cases = [{"id": f"case_{n}", "input": f"Question {n}"} for n in range(sizes.budget)]
    files["eval_budget.json"] = json.dumps({"agent": "budget_agent:run", "cases": cases}) + "\n"
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")


Row = list[str]


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b and not math.isnan(a) and not math.isnan(b) else "n/a"


def compared(
    bench_: Bench, name: str, plugin: list[str], plain: list[str], target: str, rounds: int
) -> list[Row]:
    """A row measured three ways: after, before, plain."""
    bench_.log(f"{name}:")
    s = bench_.rounds(
        {"after": ("after", plugin), "before": ("before", plugin), "plain": ("plain", plain)},
        rounds,
    )
    after, before, base = (s[k].median() for k in ("after", "before", "plain"))
    cpu = "/".join(f"{s[k].median('cpu'):.2f}" for k in ("after", "before", "plain"))
    cells = [
        f"{after:.2f}",
        f"{before:.2f}",
        f"{base:.2f}",
        ratio(after, base),
        ratio(before, base),
    ]
    return [[name, *cells, ratio(after, before), cpu, target]]


def sleepers_row(bench_: Bench) -> tuple[list[Row], list[str]]:
    """The 50 ms row, and the same with ``--capture=sys`` on both sides; their context switches.

    pytest's default ``--capture=fd`` makes 18 system calls an item (12 ``dup2``, 6 ``fstat``),
    each of which lets go of the GIL: with 128 threads waking from their sleeps,
    each such call wakes one of them for nothing. ``--capture=sys`` makes none of them.
    """
    n = bench_.sizes.sleepers
    plugin = ["eval_sleepers.json", "--agent-eval-concurrency", str(CONCURRENCY)]
    plain = ["test_plain_sleepers.py"]
    sys_capture = ["--capture=sys"]
    bench_.log(f"{n} × 50 ms sync at C={CONCURRENCY}:")
    variants = {
        "after": ("after", plugin),
        "before": ("before", plugin),
        "T0": ("plain", plain),
        "after, sys": ("after", [*plugin, *sys_capture]),
        "T0, sys": ("plain", [*plain, *sys_capture]),
    }
    s = bench_.rounds(variants, bench_.sizes.rounds)
    rows = []
    for name, keys in (
        (f"{n} × 50 ms sync at C={CONCURRENCY}", ("after", "before", "T0")),
        ("the same, `--capture=sys` (after and T₀)", ("after, sys", None, "T0, sys")),
    ):
        after, before, t0 = (s[k].median() if k else math.nan for k in keys)
        bound = (t0 + math.ceil(n / CONCURRENCY) * LATENCY) * 1.1
        cpu = "/".join(f"{s[k].median('cpu'):.2f}" if k else "-" for k in keys)
        cells = [
            f"{after:.2f}",
            f"{before:.2f}" if keys[1] else "-",
            f"{t0:.2f} (T₀)",
            ratio(after, t0),
            ratio(before, t0),
        ]
        rows.append([name, *cells, ratio(after, before), cpu, f"≤ {bound:.2f} s"])
    switches = ", ".join(f"{k} {s[k].median('switches'):.0f}" for k in variants)
    note = f"Context switches of the {n} × 50 ms runs (medians): {switches}."
    return rows, [note]


def instructions(bench_: Bench, code: str, args: list[str]) -> float:
    """Instructions the pytest process of one run executes, in millions (valgrind's cachegrind).

    Counted, not timed: the same on a loaded machine as on a quiet one (child processes, such as
    the run memory's ``git status``, are not counted).
    """
    valgrind = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
    ]
    command = valgrind + bench_.command(code, args)
    done = subprocess.run(
        command, cwd=bench_.root, env=bench_.env(code), capture_output=True, text=True, timeout=900
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    return int(found[1].replace(",", "")) / 1e6 if found else math.nan


def instructions_row(bench_: Bench) -> list[Row]:
    """The start-up row counted in instructions (one run each: the count does not vary)."""
    if shutil.which("valgrind") is None:
        bench_.log("instructions: valgrind is not installed, row left out")
        return []
    bench_.log("start-up in instructions (valgrind):")
    counts = {
        code: instructions(
            bench_, code, ["test_startup.py"] if code == "plain" else ["eval_one.json"]
        )
        for code in ("after", "before", "plain")
    }
    after, before, plain = counts["after"], counts["before"], counts["plain"]
    cells = [f"{after:.0f} M", f"{before:.0f} M", f"{plain:.0f} M", ratio(after, plain)]
    cells += [ratio(before, plain), ratio(after, before), "-"]
    return [["start-up in instructions (millions; one run each)", *cells, "≤ 1.1×"]]


def cache_row(bench_: Bench) -> list[Row]:
    """The verdict cache's lookup (SPEC §25, §27): every case looked up and missed, vs no cache.

    Both runs are this code (an earlier release may have no cache): the "plain" cells hold the run
    without ``--agent-eval-cache``, so "after / plain" is what the lookups add.
    """
    n = bench_.sizes.cases
    bench_.log(f"cache lookup, {n} zero-latency cases:")
    run = ["eval_zero.json"]
    s = bench_.rounds(
        {"lookup": ("after", [*run, "--agent-eval-cache", "read"]), "off": ("after", run)},
        bench_.sizes.rounds,
    )
    lookup, off = s["lookup"].median(), s["off"].median()
    cpu = f"{s['lookup'].median('cpu'):.2f}/-/{s['off'].median('cpu'):.2f}"
    name = f"run {n} cases, --agent-eval-cache read (all misses) vs no cache"
    cells = [f"{lookup:.2f}", "-", f"{off:.2f} (no cache)", ratio(lookup, off), "-", "-"]
    return [[name, *cells, cpu, "≤ 1.05×"]]


def budget_rows(bench_: Bench, workers: bool) -> tuple[list[Row], list[str]]:
    """Provider rows: no option and a written budget, -n 2 or one process; ideal: cases / rate."""
    n = bench_.sizes.budget
    ideal = n / RATE
    where = ["-n", "2"] if workers else []
    rows, notes = [], []
    written = ["--agent-eval-rate-limit", f"{RATE}/s"]
    for label, extra, target in (
        ("no option", [], "≤ 1.25×" if workers else "—"),
        (f"`--agent-eval-rate-limit {RATE}/s`", written, "≤ 1.15×" if workers else "—"),
    ):
        plugin = [
            "eval_budget.json",
            "--agent-eval-concurrency",
            str(BUDGET_CONCURRENCY),
            *where,
            *extra,
        ]
        name = (
            f"{n} one-call cases, {RATE} req/s, C={BUDGET_CONCURRENCY}, "
            f"{'-n 2' if workers else 'one process'}"
        )
        bench_.log(f"{name}, {label}:")
        variants = {"after": ("after", plugin), "before": ("before", plugin)}
        # a plain run: the same calls, parametrized, xdist alone (its rate is the provider's
        # problem)
        if not extra:
            variants["plain"] = ("plain", ["test_plain_budget.py", *where])
        s = bench_.rounds(variants, bench_.sizes.rounds)
        after, before = s["after"].median(), s["before"].median()
        base = s["plain"].median() if "plain" in s else math.nan
        plain_cell = f"{base:.2f} ({s['plain'].passed[-1]}/{n} passed)" if "plain" in s else "—"
        first = "/".join(f"{s[k].median('first_request'):.2f}" for k in ("after", "before"))
        span = "/".join(ratio(s[k].median("span"), ideal) for k in ("after", "before"))
        limited = "/".join(f"{s[k].median('limited'):g}" for k in ("after", "before"))
        cpu = "/".join(f"{s[k].median('cpu'):.2f}" for k in s)
        cells = [
            f"{after:.2f}",
            f"{before:.2f}",
            plain_cell,
            ratio(after, base),
            ratio(before, base),
        ]
        rows.append(
            [
                f"{name}, {label}",
                *cells,
                ratio(after, before),
                cpu,
                f"{target} of ideal {ideal:g} s",
            ]
        )
        notes.append(
            f"* {name}, {label}: wall / ideal {ratio(after, ideal)} after, {ratio(before, ideal)} "
            f"before; start → first request {first} s, first → last answer / ideal {span}, "
            f"answered 429 {limited} (after/before)"
        )
    if workers:
        notes += phases(bench_)
    return rows, notes


def phases(bench_: Bench) -> list[str]:
    """Where the seconds before the first request go under -n 2.

    One more run of each code, read per process.
    """
    notes = []
    n = bench_.sizes.budget
    for code in ("after", "before", "plain"):
        start = time.time()
        args = ["eval_budget.json", "--agent-eval-concurrency", str(BUDGET_CONCURRENCY), "-n", "2"]
        bench_.pytest(
            code,
            ["test_plain_budget.py", "-n", "2"] if code == "plain" else args,
            sample := Sample(),
        )
        wall_first = start + sample.first_request[0] if sample.first_request else math.nan
        parts = []
        for process, marks in sorted(bench_.timings().items()):
            steps = ", ".join(f"{k} +{v - start:.2f}" for k, v in marks.items())
            parts.append(f"{process}: {steps}")
        notes.append(
            f"* {code}, {n} cases `-n 2`, seconds from the launch: {'; '.join(parts)}; first "
            f"request +{wall_first - start:.2f}"
        )
    return notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", default=None, help="git revision of 'before' (default: last tag, else d3036aa)"
    )
    parser.add_argument("--short", action="store_true", help="small sizes, few rounds (CI; < 60 s)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--startup-rounds", type=int, default=None)
    parser.add_argument("--row", action="append", default=[],
                        help="only rows whose key contains this: start-up, instructions (valgrind),"
                        " sleepers, collect, run, cache, budget-n2, budget-one")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no per-run lines on stderr")
    args = parser.parse_args()
    sizes = SHORT if args.short else FULL
    if args.rounds:
        sizes.rounds = sizes.startup_rounds = args.rounds
    if args.startup_rounds:
        sizes.startup_rounds = args.startup_rounds
    tag = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0"], cwd=REPO, capture_output=True, text=True
    )
    revision = args.before or (tag.stdout.strip() if tag.returncode == 0 else FALLBACK_BEFORE)

    def log(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    def wanted(key: str) -> bool:
        return not args.row or any(part in key for part in args.row)

    load = [f"{x:.2f}" for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="weight-bench-") as tmp:
        root = Path(tmp)
        before = root / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "archive", revision, "pytest_agent_eval"], cwd=REPO, capture_output=True
        )
        if archive.returncode != 0:
            print(f"git archive {revision}: {archive.stderr.decode().strip()}", file=sys.stderr)
            return 2
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        project = root / "project"
        project.mkdir()
        write_project(project, sizes)
        provider = budget.Provider(RATE)
        threading.Thread(target=provider.serve_forever, daemon=True).start()
        b = Bench(project, before, sizes, provider, log)
        started = time.perf_counter()
        b.warm_up()
        rows: list[Row] = []
        notes: list[str] = []
        if wanted("start-up"):
            one, plain = ["eval_one.json"], ["test_startup.py"]
            name = "start-up: one case vs a plain one-test file"
            rows += compared(b, name, one, plain, "≤ 1.1×", sizes.startup_rounds)
        if wanted("instructions") and (not args.short or args.row):  # ~1 min: not in CI's
            rows += instructions_row(b)
        if wanted("sleepers"):
            more, said = sleepers_row(b)
            rows += more
            notes += said
        if wanted("collect"):
            plugin, plain = (
                ["eval_zero.json", "--collect-only"],
                ["test_plain.py", "--collect-only"],
            )
            rows += compared(b, f"collect {sizes.cases} JSON cases vs plain parametrize", plugin,
                             plain, "≤ 1.0×", sizes.rounds)  # fmt: skip
        if wanted("run"):
            rows += compared(b, f"run {sizes.cases} zero-latency cases vs plain",
                             ["eval_zero.json"], ["test_plain.py"], "≤ 1.3×",
                             sizes.rounds)  # fmt: skip
        if wanted("cache"):
            rows += cache_row(b)
        for key, workers in (("budget-n2", True), ("budget-one", False)):
            if wanted(key) and (
                workers or not args.short or args.row
            ):  # --short: the -n 2 rows only
                more, said = budget_rows(b, workers)
                rows += more
                notes += said
        provider.shutdown()
        shutil.rmtree(before, ignore_errors=True)
    head = ["what", "after s", f"before ({revision}) s", "plain s", "after / plain",
            "before / plain", "after / before", "CPU s (after/before/plain)", "target"]  # fmt: skip
    took = time.perf_counter() - started
    lines = [
        f"Load average at the start: {' '.join(load)}; at the end: {os.getloadavg()[0]:.2f}. "
        f"Medians of {sizes.rounds} rounds ({sizes.startup_rounds} for start-up), codes "
        f"alternating; {took:.0f} s.",
        "",
        *bench.markdown_table(head, rows),
    ]
    if notes:
        lines += ["", *notes]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
