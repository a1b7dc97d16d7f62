"""The traffic hook's pytest glue (SPEC §14, §18): its options, its start, and the xdist parts.

The hook on the agent's HTTP traffic (usage, cost, record/replay, budgets, retries, the run's pace)
starts at configure when an option asks for it; the run's pace alone (on by default) starts at the
first case that runs with ``httpx`` or ``httpx2`` loaded (``EvalSession.run_settings``).

The run's pace (the written budgets ``--agent-eval-rate-limit``/``--agent-eval-token-limit`` and the
pace found from the provider's answers) is shared through a store: a file in the run's cache
directory, which every process of one machine shares, or Redis (``--agent-eval-rate-limit-url``),
which every machine reaches. With workers on other machines (``--tx socket=…``/``ssh=…``) and no
Redis, each machine keeps its own: a budget is then spent once per machine. That is said once, as a
pytest warning, on the controller.

Cassettes recorded on xdist workers are written by the controller: a worker may run on another
machine, whose disk the controller never sees. So a worker writes no cassette: it sends the one its
case recorded on the case's test report (``report.agent_eval_cassette``: the cassette's path in its
cassette folder, and its text), and the controller writes it, atomically, into its own project: the
``cassettes/`` folder beside the eval file, or ini ``agent_eval_cassettes``. Local workers (``-n``)
send theirs the same way, so every cassette has one writer, the controller. Replay reads the
cassettes of the checkout each worker runs in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.plugin.options import option_group, positive_int
from pytest_agent_eval.traffic.options import TrafficOptions

if TYPE_CHECKING:
    from pytest_agent_eval.traffic.hook import Traffic


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options of the hook on the agent's HTTP traffic: usage, record/replay, budgets."""
    group = option_group(parser)
    group.addoption(
        "--agent-eval-traffic",
        dest="agent_eval_traffic",
        action="store_true",
        default=None,
        help="watch each case's HTTP traffic (httpx): token usage and cost per case, retries of "
        "429/5xx (ini: agent_eval_traffic; on by itself with any option below)",
    )
    group.addoption(
        "--agent-eval-record",
        dest="agent_eval_record",
        nargs="?",
        const="all",
        choices=("all", "new"),
        default=None,
        help="record each case's HTTP traffic into cassettes/<file stem>/<case id>.yaml "
        "(=new: keep recorded answers, record only what is missing)",
    )
    group.addoption(
        "--agent-eval-replay",
        dest="agent_eval_replay",
        action="store_true",
        default=False,
        help="answer each case's HTTP requests from its cassette, never the network (a request "
        "not recorded errors its case)",
    )
    group.addoption(
        "--agent-eval-retries",
        dest="agent_eval_retries",
        metavar="N",
        type=int,
        default=None,
        help="retry an LLM request answered 429 or 5xx up to N times, honouring Retry-After (ini: "
        "agent_eval_retries; default 3)",
    )
    group.addoption(
        "--agent-eval-rate-limit",
        dest="agent_eval_rate_limit",
        metavar="N/s|N/min|N/h",
        default=None,
        help="request budget for the whole run, shared by every worker (ini: "
        "agent_eval_rate_limit)",
    )
    group.addoption(
        "--agent-eval-token-limit",
        dest="agent_eval_token_limit",
        metavar="N/s|N/min|N/h",
        default=None,
        help="token budget for the whole run, debited from each response's usage (ini: "
        "agent_eval_token_limit)",
    )
    group.addoption(
        "--agent-eval-rate-limit-url",
        dest="agent_eval_rate_limit_url",
        metavar="redis://HOST:PORT/DB",
        default=None,
        help="keep the budgets in Redis, shared across machines (ini: agent_eval_rate_limit_url; "
        "extra 'redis')",
    )
    group.addoption(
        "--agent-eval-pace",
        dest="agent_eval_pace",
        choices=("on", "off"),
        default=None,
        help="one pace for the run's LLM requests: a 429's cool-down and the rate the provider "
        "announces slow every worker together, so that no case is lost to a rate limit (ini: "
        "agent_eval_pace; default on)",
    )
    parser.addini(
        "agent_eval_traffic", "watch each case's HTTP traffic: usage, cost, retries", type="bool"
    )
    parser.addini(
        "agent_eval_pace", "one pace for the run's LLM requests: on (default) or off", default="on"
    )
    parser.addini(
        "agent_eval_retries", "retries of an LLM request answered 429 or 5xx", default="3"
    )
    parser.addini(
        "agent_eval_rate_limit", "request budget for the whole run (N/s, N/min, N/h)", default=""
    )
    parser.addini(
        "agent_eval_token_limit", "token budget for the whole run (N/s, N/min, N/h)", default=""
    )
    parser.addini(
        "agent_eval_rate_limit_url", "redis:// URL where the budgets are kept", default=""
    )
    parser.addini(
        "agent_eval_cassettes",
        "folder of the cassettes (relative to the rootdir); default: cassettes/ beside each eval "
        "file",
        default="",
    )
    parser.addini(
        "agent_eval_match_ignore",
        "JSON fields of request bodies left out when matching recorded requests",
        type="args",
        default=[],
    )
    parser.addini(
        "agent_eval_prices",
        "LLM prices, $ per million tokens: JSON {model: {input, output}} or a JSON file "
        "(relative to the rootdir); merged over the built-in table",
        default="",
    )


def read_options(config: pytest.Config) -> TrafficOptions:
    """The traffic hook's options, from the command line and the ini file."""

    def value(name: str) -> str | None:
        given = config.getoption(name)
        return str(given) if given is not None else (str(config.getini(name)).strip() or None)

    record = config.getoption("agent_eval_record")
    if record is not None and config.getoption("agent_eval_replay"):
        raise pytest.UsageError("--agent-eval-record and --agent-eval-replay: choose one")
    replay = "replay" if config.getoption("agent_eval_replay") else None
    mode = {"all": "record", "new": "new"}.get(record or "") or replay
    retries = config.getoption("agent_eval_retries")
    if retries is None:
        retries = positive_int(
            str(config.getini("agent_eval_retries")), "ini agent_eval_retries", minimum=0
        )
    elif retries < 0:
        raise pytest.UsageError(f"--agent-eval-retries must be at least 0, got {retries}")
    cassettes = str(config.getini("agent_eval_cassettes")).strip()
    options = TrafficOptions(
        record=mode,
        retries=retries,
        rate_limit=value("agent_eval_rate_limit"),
        token_limit=value("agent_eval_token_limit"),
        rate_limit_url=value("agent_eval_rate_limit_url"),
        cassettes=config.rootpath / cassettes if cassettes else None,
        match_ignore=tuple(config.getini("agent_eval_match_ignore")),
        prices=str(config.getini("agent_eval_prices")).strip(),
        pace=(
            config.getoption("agent_eval_pace")
            or str(config.getini("agent_eval_pace")).strip()
            or "on"
        )
        != "off",
    )
    # the trace options (plugin/traces.py) turn the hook on: a chat span for every LLM request
    traced = any(
        config.getoption(f"agent_eval_{name}", None) is not None for name in ("traces", "otlp")
    )
    wanted = (
        traced
        or config.getoption("agent_eval_traffic")
        or config.getini("agent_eval_traffic")
        or config.getoption("agent_eval_retries") is not None
        or mode
        or options.rate_limit
        or options.token_limit
        or options.prices
    )
    return options._replace(on=bool(wanted), keep_calls=traced)


def start(config: pytest.Config, options: TrafficOptions) -> Traffic:
    """Install the traffic hook for this process; a usage error says what to do if it cannot."""
    import warnings

    from pytest_agent_eval.plugin.state import limits_folder
    from pytest_agent_eval.traffic.session import start as start_session
    from pytest_agent_eval.traffic.store import StoreError, StoreWarning

    worker = compat.is_worker(config)  # its recorded cassettes go to the controller
    try:
        # at configure time pytest shows only the warnings given to it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StoreWarning)
            traffic = start_session(
                options,
                config.rootpath,
                limits_folder(config),
                send_back=worker,
                # xdist's controller runs no case: its options and store are checked, as every
                # process's, but it hooks no client (httpx's import held the workers' start back)
                hook=not compat.hands_out_cases(config),
            )
    except (ValueError, ImportError, StoreError) as exc:  # the store's: one message, what to do
        raise pytest.UsageError(str(exc)) from None
    for warning in caught:
        config.issue_config_time_warning(warning.message, stacklevel=2)  # type: ignore[arg-type]
    return traffic


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Start the hook when an option asks for it; on the xdist controller, the workers' part."""
    from pytest_agent_eval.plugin.state import get_state

    state = get_state(config)
    options = state.settings.traffic
    if options.on:
        state.traffic = start(config, options)
    if config.pluginmanager.hasplugin("xdist") and not compat.is_worker(config):
        if options.record in ("record", "new"):  # the cassettes the workers record are written here
            config.pluginmanager.register(
                ReturnedCassettes(config, options.cassettes), "agent_eval_cassettes"
            )
        warn_unshared_pace(config, options)


_SHARE = (
    "give --agent-eval-rate-limit-url redis://HOST:6379/0 (a Redis server every machine reaches, "
    "extra 'redis')"
)


def unshared_pace(options: TrafficOptions, remote: list[str]) -> str | None:
    """Why the run's pace is not shared by its ``remote`` workers (``--tx`` specs).

    ``None`` when it is, or there is none.
    """
    if not remote or options.rate_limit_url:
        return None
    where = f"workers run on other machines (--tx {remote[0]}{' …' if len(remote) > 1 else ''})"
    written = [
        f"{option} {value}"
        for option, value in (
            ("--agent-eval-rate-limit", options.rate_limit),
            ("--agent-eval-token-limit", options.token_limit),
        )
        if value
    ]
    if written:
        return (
            f"{' and '.join(written)} without a shared store while {where}: each machine keeps "
            "the budget in its own cache directory, so the run may spend it once per machine; "
            f"{_SHARE} to share it"
        )
    if options.pace:
        return (
            "the run's pace (--agent-eval-pace, on by default) has no shared store while "
            f"{where}: each machine slows down for the provider's rate limit on its own, not "
            f"together; {_SHARE} to share it, or --agent-eval-pace off"
        )
    return None


def warn_unshared_pace(config: pytest.Config, options: TrafficOptions) -> None:
    """On the controller: one pytest warning when a remote worker's pace is not shared.

    See the module.
    """
    why = unshared_pace(options, compat.remote_workers(config))
    if why is not None:
        config.issue_config_time_warning(pytest.PytestConfigWarning(why), stacklevel=2)


class ReturnedCassettes:
    """A plugin object on the xdist controller of a recording run.

    It writes the cassettes the workers sent.
    """

    def __init__(self, config: pytest.Config, folder: Path | None) -> None:
        self.config = config
        self.folder = folder
        """ini ``agent_eval_cassettes`` (this project's); ``None``: the folder beside each eval
        file.
        """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from pytest_agent_eval.report.atomic import tell
        from pytest_agent_eval.report.collector import CASSETTE
        from pytest_agent_eval.traffic.cassette import sent_cassette_path, write_cassette

        sent: Any = getattr(report, CASSETTE, None)
        if sent is None:
            return
        delattr(report, CASSETTE)  # the terminal keeps the report to the end: not its cassette
        if (
            not isinstance(sent, dict)
            or not isinstance(sent.get("path"), str)
            or not isinstance(sent.get("text"), str)
        ):
            tell(
                self.config,
                f"{report.nodeid}: the cassette its worker sent is not readable; not written",
            )
            return
        file = Path(report.nodeid.split("::")[0])
        folder = (
            self.folder
            if self.folder is not None
            else self.config.rootpath / file.parent / "cassettes"
        )
        target = sent_cassette_path(folder, sent["path"])
        if target is None:
            tell(
                self.config,
                f"{report.nodeid}: its worker sent a cassette outside the cassette folder: "
                f"{sent['path']}",
            )
            return
        try:
            write_cassette(target, sent["text"])
        except OSError as exc:
            tell(
                self.config,
                f"{report.nodeid}: cassette {target} not written: {exc.strerror or exc}",
            )
