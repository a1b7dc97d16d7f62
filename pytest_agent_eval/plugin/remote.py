"""What holds when xdist workers run on other machines (``--tx socket=…``/``ssh=…``, SPEC §18).

The run's pace (SPEC §14: the written budgets
``--agent-eval-rate-limit``/``--agent-eval-token-limit`` and the pace found from the provider's
answers, on by default) is shared through a store: a file in the run's cache directory, which every
process of one machine shares, or Redis (``--agent-eval-rate-limit-url``), which every machine
reaches. With workers on other machines and no Redis, each machine keeps its own: a budget is then
spent once per machine. That is said once, as a pytest warning, on the controller.

:func:`configure_controller` sets up the xdist controller's part: the crash triage (``crashes``),
the writing of the cassettes the workers record (``cassettes``), and that warning.
"""

from __future__ import annotations

import pytest

from pytest_agent_eval import compat
from pytest_agent_eval.traffic.options import TrafficOptions

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


def configure_controller(config: pytest.Config, options: TrafficOptions) -> None:
    """The xdist controller's plugin objects, and the warning about a pace kept per machine."""
    from pytest_agent_eval.plugin.crashes import CrashReporter

    config.pluginmanager.register(
        CrashReporter(), "agent_eval_crashes"
    )  # names the cases a crash hit
    if options.record in ("record", "new"):  # the cassettes the workers record are written here
        from pytest_agent_eval.plugin.cassettes import ReturnedCassettes

        config.pluginmanager.register(
            ReturnedCassettes(config, options.cassettes), "agent_eval_cassettes"
        )
    warn_unshared_pace(config, options)
