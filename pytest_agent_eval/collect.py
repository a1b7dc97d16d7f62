"""Eval files as pytest collectors and eval cases as pytest items (``pytest.Function`` subclasses)."""

from __future__ import annotations

import fnmatch
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pytest_agent_eval.agents import Agent, as_agent, resolve
from pytest_agent_eval.cases.document import JSON_SUFFIXES, YAML_SUFFIXES
from pytest_agent_eval.cases.errors import EvalFileError, EvalFileErrors
from pytest_agent_eval.cases.load import load_file
from pytest_agent_eval.cases.model import Case
from pytest_agent_eval.fixtures import case_recorder
from pytest_agent_eval.imports import ImportRefError
from pytest_agent_eval.mocks import MockConfigError
from pytest_agent_eval.report.failure import PASSING
from pytest_agent_eval.runner import CaseResult, RecorderFactory, run_case, wait
from pytest_agent_eval.state import get_state

# Tags with these names would change how a case runs if they became markers; they stay keywords (-k).
RESERVED_TAGS = frozenset(
    {
        "skip", "skipif", "xfail", "usefixtures", "parametrize", "filterwarnings", "timeout", "flaky",
        "xdist_group", "asyncio", "anyio", "trio", "tryfirst", "trylast", "no_cover", "order", "dependency",
        "repeat", "django_db", "agent_eval",
    }
)  # fmt: skip


def is_eval_file(path: Path, patterns: tuple[str, ...], explicit: bool) -> bool:
    """Collected when the name matches an ``agent_eval_files`` pattern, or a YAML/JSON file is named on the CLI."""
    if path.suffix.lower() not in YAML_SUFFIXES + JSON_SUFFIXES:
        return False
    return explicit or any(fnmatch.fnmatch(path.name, p) for p in patterns)


class EvalFile(pytest.File):
    """A YAML or JSON file of eval cases."""

    def collect(self) -> Iterator[pytest.Item]:
        state = get_state(self.config)
        try:
            loaded = load_file(self.path, state.checks, state.dialects, cache=state.parse_cache)
        except (EvalFileError, EvalFileErrors) as exc:
            # Not a collection error: pytest would interrupt the whole run, and one bad file must not.
            errors = exc.errors if isinstance(exc, EvalFileErrors) else [exc]
            yield FileProblem.from_parent(self, name=FileProblem.NAME, errors=errors)
            return
        fixtureinfo = None
        for case in loaded.cases:
            # Every case of a file runs the same function under the same node: one fixture closure serves all,
            # as it does for a parametrized test.
            item = EvalItem.from_parent(self, name=case.id, case=case, fixtureinfo=fixtureinfo)
            fixtureinfo = item._fixtureinfo
            yield item


class FileProblem(pytest.Item):
    """Stands for a file that cannot be read as eval cases; errors at setup with the file's problems."""

    NAME = "@file"  # case ids never contain "@", so this cannot clash with a case

    def __init__(self, *, errors: list[EvalFileError], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors = errors
        self.add_marker("agent_eval")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, (self.errors[0].line or 1) - 1, "eval file error"

    def setup(self) -> None:
        message = "\n".join(e.format() for e in self.errors)
        # raised `from None`: called while handling the cause, whose own traceback would only add noise
        raise pytest.fail.Exception(_relative(message, self.config), pytrace=False) from None

    def runtest(self) -> None:  # never reached: setup fails
        raise AssertionError("unreachable")


def _relative(message: str, config: pytest.Config) -> str:
    """Messages name files relative to the rootdir, as pytest does."""
    return message.replace(f"{config.rootpath}/", "")


def agent_eval_case(request: pytest.FixtureRequest) -> None:
    """Runs one eval case (the test function behind every eval item)."""
    item = request.node
    assert isinstance(item, EvalItem)
    item.run_case(request)


class EvalItem(pytest.Function):
    """One eval case. A ``pytest.Function`` so that fixtures (autouse, conftest, any scope) apply."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(callobj=agent_eval_case, originalname="agent_eval_case", **kwargs)
        self.case = case
        state = get_state(self.config)
        self.add_marker(state.marker("agent_eval"))
        for tag in case.tags:
            if tag in RESERVED_TAGS:
                self.extra_keyword_matches.add(tag)
            else:
                self.add_marker(state.marker(tag))
        if case.skip:
            self.add_marker(pytest.mark.skip(reason=case.skip))
        if case.xfail:
            self.add_marker(pytest.mark.xfail(reason=case.xfail))
        if case.description:
            self.extra_keyword_matches.add(case.description)

    def reportinfo(self) -> tuple[Path, int, str]:
        return (
            self.path,
            self.case.line - 1,
            f"{self.case.id}" + (f": {self.case.description}" if self.case.description else ""),
        )

    def setup(self) -> None:
        if self.case.error:  # an invalid case errors at setup, so it reads as ERROR, not FAILED
            self._fail(self.case.error)
        super().setup()

    def _fail(self, message: str) -> NoReturn:
        """Fail with ``message`` alone: no traceback into the plugin."""
        pytest.fail(_relative(message, self.config), pytrace=False)

    def _agent(self, request: pytest.FixtureRequest) -> Agent:
        state = get_state(self.config)
        ref = state.settings.agent or self.case.agent
        if ref:
            line = None if state.settings.agent else self.case.agent_line
            try:
                return resolve(ref, state.agent_instances)
            except (ImportRefError, TypeError) as exc:
                source = "--agent" if state.settings.agent else f"{self.case.path}:{line}"
                self._fail(f"{source}: agent {ref!r}: {exc}")
        try:
            value = request.getfixturevalue("agent")
        except pytest.FixtureLookupError:
            self._fail(
                f"{self.case.location}: no agent for case {self.case.id}: set `agent: module:function` in the "
                "file, pass --agent module:function, or define an `agent` fixture in conftest.py"
            )
        try:
            return as_agent(value, "agent fixture")
        except TypeError as exc:
            self._fail(f"{self.case.location}: the `agent` fixture: {exc}")

    def run_case(self, request: pytest.FixtureRequest) -> None:
        state = get_state(self.config)
        scheduler = state.scheduler(self.session)
        if scheduler is None:
            result = state.runner.run(self._prepare(request))
        else:
            # started early, or now from this item's own fixtures; then the next cases start while this one runs
            future = scheduler.take(self) or state.loop.submit(self._prepare(request))
            scheduler.prefetch(self, state.run_settings)
            result = wait(future)
        self._record_properties(result)
        self.ihook.pytest_agent_eval_case_result(item=self, result=result)
        if result.passed and result.unscored:  # a pass with nothing scored would be a made-up verdict
            names = ", ".join(dict.fromkeys(c.name for c in result.unscored))
            reason = f"nothing scored ({names}): {result.unscored[0].message}"
            raise pytest.skip.Exception(reason, _use_item_location=True)  # reported at the case's line
        if not result.passed:
            explanations = self.ihook.pytest_assertrepr_compare(config=self.config, op="==", left=result, right=PASSING)
            lines = next((e for e in explanations if e), None) or [f"case {self.case.id} failed"]
            self._fail("\n".join(lines))

    def _prepare(self, request: pytest.FixtureRequest) -> Coroutine[Any, Any, CaseResult]:
        """The case's run, with its agent, LLM and tool mocks from this item's fixtures."""
        state = get_state(self.config)
        scheduler = state.scheduler(self.session)
        agent = self._agent(request)
        llm = None
        if state.checks.uses_llm(self.case.expect):
            llm = request.getfixturevalue("agent_eval_llm")
            if scheduler is not None:
                scheduler.llm = llm
        try:
            recorder: RecorderFactory | MockConfigError = case_recorder(request, self.case)
        except MockConfigError as exc:
            recorder = exc
        if isinstance(recorder, MockConfigError):  # failed outside `except`: no "During handling..." in the report
            self._fail(str(recorder))
        if scheduler is not None and not (state.settings.agent or self.case.agent):
            scheduler.remember_fixture_agent(self, agent)
        return run_case(self.case, agent, state.run_settings(self.case, llm, recorder))

    def _record_properties(self, result: CaseResult) -> None:
        run = result.first.run
        props = [
            ("score", f"{result.score:.3f}"),
            ("tools_called", ", ".join(run.tool_names)),
            ("latency_s", f"{run.latency_s:.3f}"),
            ("location", f"{self.location[0]}:{self.case.line}"),
        ]
        if len(result.trials) > 1:
            props.append(("passes", f"{result.passes}/{len(result.trials)}"))
        self.user_properties.extend(props)
