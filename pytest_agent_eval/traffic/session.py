"""Starting the traffic hook for a session from its options, and stopping it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.traffic.hook import Traffic, TrafficSettings, install, uninstall
from pytest_agent_eval.traffic.limits import Budget
from pytest_agent_eval.traffic.pace import Pace
from pytest_agent_eval.traffic.store import open_store
from pytest_agent_eval.traffic.usage import Prices, parse_prices

if TYPE_CHECKING:
    from pytest_agent_eval.traffic.options import TrafficOptions


def start(
    options: TrafficOptions,
    root: Path,
    limits_folder: Path,
    send_back: bool = False,
    hook: bool = True,
) -> Traffic:
    """The session's hook, installed.

    ValueError / ImportError say which option is wrong or what to install. ``send_back`` (an xdist
    worker): recorded cassettes go to the controller, which writes them (``Traffic.finish``).
    ``hook=False`` (xdist's controller, which runs no case): the options are read, the store opened
    and the budgets written to it as for a run, but no HTTP client is hooked (nor imported).
    """
    prices = Prices(load_prices(options.prices, root) if options.prices else None)
    requests = (
        Budget.parse(options.rate_limit, "--agent-eval-rate-limit") if options.rate_limit else None
    )
    tokens = (
        Budget.parse(options.token_limit, "--agent-eval-token-limit")
        if options.token_limit
        else None
    )
    pace = None
    if options.pace or requests or tokens:
        name = "_".join(
            [
                "pace",
                *(
                    f"{kind}_{b.key}"
                    for kind, b in (("requests", requests), ("tokens", tokens))
                    if b
                ),
            ]
        )
        pace = Pace(open_store(limits_folder, options.rate_limit_url, name), requests, tokens)
    traffic = Traffic(
        TrafficSettings(
            root=root,
            mode=options.record,
            cassettes=options.cassettes,
            ignore=frozenset(options.match_ignore),
            retries=options.retries,
            prices=prices,
            pace=pace,
            watch=options.on,
            keep_calls=options.keep_calls,
            send_back=send_back,
        )
    )
    if hook:
        install(traffic)
    return traffic


def stop(traffic: Traffic) -> None:
    uninstall()
    if traffic.settings.pace is not None:
        traffic.settings.pace.close()


def load_prices(text: str, root: Path) -> dict[str, dict[str, float]]:
    """ini ``agent_eval_prices``: inline JSON, or a JSON file relative to the rootdir."""
    where = "ini agent_eval_prices"
    if not text.startswith("{"):
        path = root / text
        where = f"ini agent_eval_prices: {path}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{where}: cannot read it ({exc.strerror})") from None
    try:
        return parse_prices(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
