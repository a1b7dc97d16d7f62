"""Judges you can trust (SPEC §26): panels, calibration sets and a minimum kappa.

Judge panels (votes, each member's verdict and the agreement in the record and the reports),
calibration sets (items, per-judge figures with bootstrap intervals in every report) and
``--agent-eval-judge-min-kappa`` (an uncalibrated judge's verdicts are errors, never passes). The
statistics are checked against scikit-learn, scipy and statsmodels (dev extra only; the plugin
never imports them).
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.checks.agreement import (
    Confusion,
    accuracy,
    bootstrap,
    cohen_kappa,
    false_pass_rate,
    fleiss,
    item_agreement,
    spearman,
)
from pytest_agent_eval.checks.panel import decide

# -- the statistics
# ----------------------------------------------------------------------------------------------


def _labelled(seed: int, n: int = 40) -> list[tuple[bool, bool]]:
    rng = random.Random(seed)
    labels = [rng.random() < 0.5 for _ in range(n)]
    return [(lab if rng.random() < 0.8 else not lab, lab) for lab in labels]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accuracy_kappa_and_confusion_are_sklearns(seed: int) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    pairs = _labelled(seed)
    judged, labels = [j for j, _ in pairs], [lab for _, lab in pairs]
    assert accuracy(pairs) == pytest.approx(metrics.accuracy_score(labels, judged))
    assert cohen_kappa(pairs) == pytest.approx(metrics.cohen_kappa_score(labels, judged))
    (tn, fp), (fn, tp) = metrics.confusion_matrix(labels, judged, labels=[False, True])
    assert Confusion.of(pairs) == Confusion(
        true_pass=tp, false_pass=fp, true_fail=tn, false_fail=fn
    )
    assert false_pass_rate(pairs) == pytest.approx(fp / (fp + tn))


def test_spearman_is_scipys_with_ties() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(7)
    pairs = [(round(rng.random(), 1), round(rng.random(), 1)) for _ in range(30)]
    assert spearman(pairs) == pytest.approx(
        stats.spearmanr([a for a, _ in pairs], [b for _, b in pairs])[0]
    )
    assert spearman([(0.1, 0.2), (0.3, 0.4)]) is None  # fewer than 3 pairs
    assert spearman([(0.5, 0.1), (0.5, 0.2), (0.5, 0.3)]) is None  # a constant side


def test_fleiss_kappa_is_statsmodels() -> None:
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = random.Random(11)
    votes = [[rng.random() < 0.6 for _ in range(3)] for _ in range(25)]
    table, _ = inter_rater.aggregate_raters([[int(v) for v in item] for item in votes])
    found = fleiss(votes)
    assert found is not None and found.kappa == pytest.approx(
        inter_rater.fleiss_kappa(table, method="fleiss")
    )
    assert found.agreement == pytest.approx(sum(item_agreement(v) or 0 for v in votes) / 25)
    assert item_agreement([True, True, False]) == pytest.approx(1 / 3)
    assert fleiss([[True, True], [True, True]]) == fleiss([[True, True], [True, True]])
    # every vote the same: no kappa
    assert fleiss([[True, True]]).kappa is None  # type: ignore[union-attr]


def test_the_bootstrap_is_seeded_and_agrees_with_scipys_percentile_interval() -> None:
    stats = pytest.importorskip("scipy.stats")
    pairs = _labelled(5, 60)
    ours = bootstrap(pairs, accuracy)
    assert ours == bootstrap(pairs, accuracy)  # the same every time
    agree = [float(j == lab) for j, lab in pairs]
    theirs = stats.bootstrap((agree,), lambda x: sum(x) / len(x), method="percentile",
                             n_resamples=4000, random_state=0,
                             vectorized=False).confidence_interval  # fmt: skip
    assert ours is not None
    assert ours[0] == pytest.approx(theirs.low, abs=0.04) and ours[1] == pytest.approx(
        theirs.high, abs=0.04
    )
    assert (
        bootstrap([(True, True)] * 5, cohen_kappa) is None
    )  # undefined in every resample: no interval


@pytest.mark.parametrize(
    ("vote", "passes", "fails", "unknown", "expected"),
    [
        ("majority", 2, 1, 0, True),
        ("majority", 1, 1, 0, False),
        ("majority", 2, 0, 1, True),  # the third cannot swing it
        ("majority", 1, 1, 1, None),
        ("all", 2, 0, 1, None),
        ("all", 1, 1, 1, False),
        ("any", 1, 0, 2, True),
        ("any", 0, 2, 1, None),
    ],
)
def test_a_panel_decides_only_when_its_missing_votes_could_not_swing_it(
    vote: str, passes: int, fails: int, unknown: int, expected: bool | None
) -> None:
    assert decide(vote, passes, fails, unknown) is expected


# -- runs
# --------------------------------------------------------------------------------------------------

CONFTEST = '''
import json, re
import pytest

@pytest.fixture
def agent_eval_llm():
    """A judge that passes answers with "good" in them; model "contrarian" fails them, "broken" \
replies nonsense."""
    def llm(messages, model=None, **options):
        answer = re.search(r"Agent answer: (.*)", messages[-1]["content"]).group(1)
        if model == "broken":
            return "I cannot say."
        good = ("good" in answer) != (model == "contrarian")
        if model == "lenient":
            good = True
        return json.dumps({"score": 0.9 if good else 0.2, "reason": "good" if good else "bad"})
    return llm
'''
AGENT = (
    'def run(query, context):\n    return "a good reply" if "nice" in query else "a rude reply"\n'
)


@pytest.fixture
def judged(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(agent=AGENT)
    pytester.syspathinsert()
    return pytester


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / "r.json").read_text())


def test_a_panel_votes_and_records_each_members_verdict_and_the_agreement(
    judged: pytest.Pytester,
) -> None:
    judged.makefile(
        ".yaml",
        eval_panel="""
agent: agent:run
cases:
  - id: majority
    input: be nice
    expect:
      judge: {rubric: polite, panel: [{}, {model: contrarian}, {model: lenient}]}
  - id: all
    input: be nice
    expect:
      judge: {rubric: polite, panel: [{}, {model: contrarian}, {model: lenient}], vote: all}
  - id: any_rude
    input: be rude
    expect:
      judge: {rubric: polite, panel: [{}, {model: lenient}], vote: any}
  - id: undecided
    input: be nice
    expect:
      judge: {rubric: polite, panel: [{}, {model: contrarian}, {model: broken}]}
""",
    )
    result = judged.runpytest_inprocess(
        "-p", "no:cacheprovider", "--agent-eval-report=r.json", "-rA"
    )
    records = {r["case_id"]: r for r in _report(judged)["cases"]}
    assert {k: r["outcome"] for k, r in records.items()} == {
        "majority": "passed",
        "all": "failed",
        "any_rude": "passed",
        "undecided": "failed",
    }
    [check] = records["majority"]["checks"]
    members = check["actual"]["members"]
    assert [(m["model"], m["verdict"]) for m in members] == [
        ("agent_eval_llm", "pass"),
        ("contrarian", "fail"),
        ("lenient", "pass"),
    ]
    assert check["actual"]["agreement"] == pytest.approx(1 / 3)
    assert "judge panel (all) failed the answer: 2 pass, 1 fail" in result.stdout.str()
    assert (
        "judge panel (majority) has no verdict: 1 pass, 1 fail, 1 no verdict; member 3: "
        "judge reply unreadable" in (result.stdout.str())
    )
    panels = _report(judged)["panels"]
    three = next(p for p in panels.values() if len(p["members"]) == 3)
    assert three["cases"] == 2 and three["agreement"] == pytest.approx(
        1 / 3
    )  # majority and all: same votes
    assert "judge panels: agreement" in result.stdout.str()


def test_a_panel_member_with_a_model_needs_an_llm_that_takes_one(judged: pytest.Pytester) -> None:
    judged.makeconftest(
        "import pytest\n\n@pytest.fixture\ndef agent_eval_llm():\n"
        '    return lambda messages: \'{"score": 1, "reason": "ok"}\'\n'
    )
    judged.makefile(
        ".yaml",
        eval_panel="agent: agent:run\ncases:\n"
        "  - {id: p, input: nice, expect: {judge: {rubric: x, panel: [{}, {model: other}, "
        "{model: third}]}}}\n",
    )
    result = judged.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert (
        "the judge's model 'other' cannot be asked: the agent_eval_llm callable "
        "takes no `model` option" in (result.stdout.str())
    )


CALIBRATION = """
judge: {rubric: polite}
items:
  - {id: g1, input: hi, output: "a good answer", label: pass}
  - {id: g2, input: hi, output: "good again", label: pass}
  - {id: b1, input: hi, output: "a bad answer", label: fail}
  - {id: b2, input: hi, output: "bad again", label: 0.1}
  - {id: wrong, input: hi, output: "good but labelled fail", label: fail}
  - {id: odd, input: hi, output: "x", label: maybe}
"""


def test_calibration_items_run_the_judge_and_report_its_figures(judged: pytest.Pytester) -> None:
    (judged.path / "polite.calibration.yaml").write_text(CALIBRATION)
    (judged.path / "lenient.calibration.jsonl").write_text(
        '{"input": "hi", "output": "bad", "judge": {"rubric": "polite", "model": '
        '"lenient"}, "label": "fail"}\n'
        '{"input": "hi", "output": "good", "rubric": "polite", "label": "pass"}\n'
    )
    result = judged.runpytest_inprocess(
        "-p", "no:cacheprovider", "-rA", "--agent-eval-report=r.json", "--agent-eval-markdown=r.md",
        "--agent-eval-html=r.html",
    )  # fmt: skip
    out = result.stdout.str()
    assert "PASSED polite.calibration.yaml::g1" in out
    assert (
        "FAILED polite.calibration.yaml::wrong" in out
        and "the judge said pass (0.90: good); labelled fail" in out
    )
    assert (
        "ERROR polite.calibration.yaml::odd" in out
        and "polite.calibration.yaml:9: `label` must be pass, fail" in out
    )
    judges = _report(judged)["judges"]
    polite = next(
        j for j in judges.values() if j["items"] == 6
    )  # 5 of the YAML file, 1 of the JSON Lines file
    pairs = [
        (True, True),
        (True, True),
        (False, False),
        (False, False),
        (True, False),
        (True, True),
    ]
    assert polite["confusion"] == {"true_pass": 3, "false_pass": 1, "true_fail": 2, "false_fail": 0}
    assert polite["accuracy"]["value"] == pytest.approx(accuracy(pairs))
    assert polite["kappa"]["value"] == pytest.approx(cohen_kappa(pairs))
    assert polite["false_pass_rate"]["value"] == pytest.approx(1 / 3)
    low, high = bootstrap(pairs, cohen_kappa)  # type: ignore[misc]
    assert (polite["kappa"]["low"], polite["kappa"]["high"]) == (low, high)
    lenient = next(j for j in judges.values() if j["model"] == "lenient")
    assert lenient["false_pass_rate"]["value"] == 1.0 and lenient["items"] == 1
    assert "judge calibration (95% bootstrap intervals)" in out
    assert "**judge calibration (95% bootstrap intervals)**" in (judged.path / "r.md").read_text()
    assert "false-pass rate" in (judged.path / "r.html").read_text()
    stored = _stored_run(
        judged.path / ".agent-eval" / "runs.db"
    )  # the run store keeps them with the run
    assert stored["judges"] == judges
    result = judged.runpytest_inprocess("-p", "no:cacheprovider", "--co", "-q", "-m", "calibration")
    assert sum(line.endswith((".yaml::g1", ".jsonl::item-1")) for line in result.stdout.lines) == 2


def _stored_run(db: Path) -> dict[str, Any]:
    """The ``run`` metadata of the newest run in the SQLite run store ``db``."""
    with sqlite3.connect(db) as conn:
        (text,) = conn.execute("SELECT run FROM runs ORDER BY saved DESC LIMIT 1").fetchone()
    return json.loads(text)  # type: ignore[no-any-return]


def _min_kappa_files(pytester: pytest.Pytester, wrong_labels: int) -> None:
    items = [f'  - {{input: hi, output: "good {n}", label: pass}}' for n in range(4)]
    items += [
        f'  - {{input: hi, output: "bad {n}", label: {"pass" if n < wrong_labels else "fail"}}}'
        for n in range(4)
    ]
    (pytester.path / "polite.calibration.yaml").write_text(
        "judge: {rubric: polite}\nitems:\n" + "\n".join(items)
    )
    pytester.makefile(
        ".yaml",
        eval_judged="""
agent: agent:run
cases:
  - {id: gated, input: be nice, expect: {judge: polite}}
  - {id: unlabelled, input: be nice, expect: {judge: other rubric}}
  - {id: no_judge, input: be nice, expect: {contains: good}}
""",
    )


@pytest.mark.parametrize("mode", ["serial", "concurrency", "xdist"])
def test_an_uncalibrated_judge_gives_no_verdict(judged: pytest.Pytester, mode: str) -> None:
    _min_kappa_files(judged, wrong_labels=3)  # kappa 0.25 on 8 items
    args = ["-p", "no:cacheprovider", "-rA", "--agent-eval-judge-min-kappa", "0.6"]
    if mode == "xdist":
        result = judged.runpytest_subprocess(*args, "-n", "2")
    else:
        extra = ["--agent-eval-concurrency", "4"] if mode == "concurrency" else []
        result = judged.runpytest_inprocess(*args, *extra)
    out = result.stdout.str()
    assert "FAILED eval_judged.yaml::gated" in out and "PASSED eval_judged.yaml::no_judge" in out
    assert "is uncalibrated: Cohen's kappa 0.25 < 0.6 on 8 labelled items" in out
    assert (
        "FAILED eval_judged.yaml::unlabelled" in out
        and "no calibration item of this run labels it" in out
    )
    assert "PASSED eval_judged.yaml::gated" not in out


def test_no_agent_runs_for_a_calibration_item_not_even_started_early(
    judged: pytest.Pytester,
) -> None:
    _min_kappa_files(judged, wrong_labels=0)
    judged.makepyfile(
        boom="def run(query, context):\n    open(f'ran_{query}', 'w').close()\n    return 'good'\n"
    )
    judged.makeconftest(  # the cases first, so that they start the items after them early
        CONFTEST + "\n@pytest.hookimpl(trylast=True)\ndef pytest_collection_modifyitems(items):\n"
        "    items.sort(key=lambda item: 'calibration' in item.nodeid)\n"
    )
    result = judged.runpytest_inprocess(
        "-p", "no:cacheprovider", "--agent", "boom:run", "--agent-eval-concurrency", "4"
    )
    result.assert_outcomes(passed=11)
    assert (judged.path / "ran_be nice").exists() and not (judged.path / "ran_hi").exists()


def test_a_calibrated_judge_gives_its_verdicts(judged: pytest.Pytester) -> None:
    _min_kappa_files(judged, wrong_labels=0)  # kappa 1.0
    result = judged.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                        "--agent-eval-judge-min-kappa", "0.6", "eval_judged.yaml",
                                        "polite.calibration.yaml")  # fmt: skip
    out = result.stdout.str()
    assert "PASSED eval_judged.yaml::gated" in out and "FAILED eval_judged.yaml::unlabelled" in out
    assert out.index("polite.calibration.yaml::item-1") < out.index(
        "eval_judged.yaml::gated"
    )  # calibration first
    without = judged.runpytest_inprocess("-p", "no:cacheprovider", "-rA", "eval_judged.yaml")
    assert "PASSED eval_judged.yaml::unlabelled" in without.stdout.str()  # no option: no gate


def test_calibration_files_are_not_eval_files(tmp_path: Path) -> None:
    from pytest_agent_eval.core.files import DEFAULT_FILES, is_eval_file

    patterns = tuple(DEFAULT_FILES.split())
    assert not is_eval_file(tmp_path / "x.calibration.yaml", patterns, explicit=True)
    assert not is_eval_file(tmp_path / "eval_x.calibration.jsonl", patterns, explicit=False)
