"""Baselines: every change kind against an upstream-format report, the gate, outputs, `compare`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cikit import ci_eval
from evalkit import read_json, run_cli

from glasskit_eval.evaluation.gates import baseline_gate
from glasskit_eval.reports.baseline import diff, outcomes

UPSTREAM = Path(__file__).parent / "data" / "baseline" / "upstream-report.json"

#: What the fixture eval (with lamp/idx/0 raising) changed against the upstream report.
EXPECTED_CHANGES = [
    {"kind": "pass_to_fail", "case": "door", "target": "idx", "timestamp_s": 1.0, "baseline_status": "passed",
     "status": "failed", "baseline_observed": 5, "observed": 10},
    {"kind": "new_error", "case": "lamp", "target": "idx", "timestamp_s": 0.0, "baseline_status": "passed",
     "status": "error", "baseline_observed": 0, "observed": None},
    {"kind": "fail_to_pass", "case": "door", "target": "idx", "timestamp_s": 0.5, "baseline_status": "failed",
     "status": "passed", "baseline_observed": 4, "observed": 5},
    {"kind": "error_fixed", "case": "door", "target": "size", "timestamp_s": 0.0, "baseline_status": "error",
     "status": "passed", "baseline_observed": None, "observed": [128, 72]},
    {"kind": "observed_changed", "case": "door", "target": "idx", "timestamp_s": 1.7,
     "baseline_status": "failed", "status": "failed", "baseline_observed": 16, "observed": 17},
    {"kind": "added", "case": "lamp", "target": "idx", "timestamp_s": 1.0, "baseline_status": None,
     "status": "passed", "baseline_observed": None, "observed": 10},
    {"kind": "removed", "case": "lamp", "target": "idx", "timestamp_s": 2.5, "baseline_status": "passed",
     "status": None, "baseline_observed": 15, "observed": None},
]
EXPECTED_COUNTS = {"pass_to_fail": 1, "new_error": 1, "relabelled": 0, "fail_to_pass": 1, "error_fixed": 1, "status_changed": 0,
                   "observed_changed": 1, "added": 1, "removed": 1}


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    shutil.copy(UPSTREAM, tmp_path / "previous.json")
    return tmp_path


def test_every_change_kind_against_an_upstream_report(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"lamp/idx/0": "raise"})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--baseline", "previous.json",
                             "--output-json", "r.json", "--junit-xml", "j.xml")
    assert code == 1, err  # the adapter error; without --fail-on-regression no baseline gate
    report = read_json(in_tmp / "r.json")
    baseline = report["baseline"]
    assert baseline["path"] == "previous.json"
    assert baseline["counts"] == EXPECTED_COUNTS
    assert baseline["regressions"] == 2 and baseline["matched_samples"] == 9
    assert [{k: c[k] for k in EXPECTED_CHANGES[0]} for c in baseline["changes"]] == EXPECTED_CHANGES
    assert all(g["name"] != "baseline_regressions" for g in report["gates"])
    assert ("Baseline previous.json: 9 samples matched; 1 pass to fail, 1 new error, 1 fail to pass, "
            "1 error fixed, 1 observed changed, 1 added, 1 removed") in out
    assert "pass_to_fail      door  idx       1s  passed  failed  5                10" in out
    junit = (in_tmp / "j.xml").read_text()
    assert '<property name="baseline.pass_to_fail" value="1" />' in junit
    assert '<property name="baseline.regressions" value="2" />' in junit


def test_fail_on_regression_adds_a_gate(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--baseline", "previous.json",
                              "--fail-on-regression", "--output-json", "r.json")
    assert code == 1, err
    gates = read_json(in_tmp / "r.json")["gates"]
    assert gates == [{"name": "baseline_regressions", "passed": False,
                      "message": "1 pass->fail, 0 new errors against the baseline"}]
    # Against itself nothing regressed: the gate passes and the run exits 0.
    shutil.copy(in_tmp / "r.json", in_tmp / "same.json")
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--baseline", "same.json", "--fail-on-regression",
                             "--output-json", "r2.json")
    assert code == 0, err
    assert read_json(in_tmp / "r2.json")["gates"][0]["passed"] is True
    assert "Baseline same.json: 10 samples matched; no changes" in out


def test_step_summary_has_the_baseline_section(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(in_tmp / "summary.md"))
    eval_dir = ci_eval(in_tmp)
    run_cli("run", "--eval-dir", eval_dir, "--baseline", "previous.json", "--annotations", "github")
    text = (in_tmp / "summary.md").read_text()
    section = text[text.index("### Baseline"):]
    assert section.startswith("### Baseline\n\nAgainst `previous.json`: 9 samples matched; 1 pass_to_fail, "
                              "1 fail_to_pass, 1 error_fixed, 1 observed_changed, 1 added, 1 removed.\n\n"
                              "Pass rate ")
    assert ("\n\n| Change | Case | Target | Time | Before | After | Observed before | Observed after |\n"
            in section)
    assert ": no significant drop  \n" in section
    assert "| pass_to_fail | `door` | `idx` | 1s | passed | failed | 5 | 10 |" in section


def test_compare_offline_exits_1_on_regressions(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp)
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "now.json")[0] == 0
    code, out, _err = run_cli("compare", "previous.json", "now.json", "--output-json", "diff.json")
    assert code == 1
    assert out.startswith("Baseline previous.json: 9 samples matched; 1 pass to fail")
    assert read_json(in_tmp / "diff.json")["counts"]["pass_to_fail"] == 1
    assert read_json(in_tmp / "diff.json")["regressions"] == 1
    code, out, _err = run_cli("compare", "now.json", "previous.json")
    assert code == 1  # the other way round, the fixed error and the fixed failure are regressions
    assert out.startswith("Baseline now.json: 9 samples matched; 1 pass to fail, 1 new error, 1 fail to pass")
    code, out, _err = run_cli("compare", "now.json", "now.json")
    assert code == 0 and out.startswith("Baseline now.json: 10 samples matched; no changes\n")
    assert "(+0.0 points, 95% CI" in out and out.splitlines()[1].endswith(": no significant drop")


def test_unreadable_baselines_are_usage_errors(in_tmp: Path) -> None:
    (in_tmp / "bad.json").write_text("{not json")
    (in_tmp / "other.json").write_text(json.dumps({"trials": [{"results": [{"case": "c"}]}]}))
    code, _out, err = run_cli("compare", "bad.json", "previous.json")
    assert code == 2 and err.startswith("error: bad.json:1:2: not valid JSON")
    code, _out, err = run_cli("compare", "other.json", "previous.json")
    assert (code, err) == (2, "error: other.json: the top level: lacks `report_type`, `schema_version`, "
                              "`summary`; pass the file written by `run --output-json`\n")
    code, _out, err = run_cli("compare", "missing.json", "previous.json")
    assert (code, err) == (2, "error: missing.json: no such report file; pass the path written by "
                              "`run --output-json`\n")
    eval_dir = ci_eval(in_tmp)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--fail-on-regression")
    assert (code, err) == (2, "error: --fail-on-regression needs --baseline PREVIOUS.json\n")


def _result(status: str, t: float = 1.0, observed: object = 1) -> dict[str, object]:
    return {"case": "c", "target": "t", "timestamp_s": t, "status": status, "observed_value": observed}


def test_repeats_take_the_worst_trial_and_times_match_to_nine_decimals() -> None:
    before = outcomes([_result("passed", 0.3), _result("passed", 0.3)])
    after = outcomes([_result("passed", 0.1 + 0.2), _result("failed", 0.30000000001)])
    found = diff(before, after, "b")
    assert [(c.kind, c.before.status if c.before else None) for c in found.changes] == [("pass_to_fail", "passed")]
    found = diff(outcomes([_result("passed")]), outcomes([_result("ignored")]), "b")
    assert [c.kind for c in found.changes] == ["status_changed"] and found.regressions == 0
    found = diff(outcomes([_result("failed")]), outcomes([_result("error"), _result("passed")]), "b")
    assert [c.kind for c in found.changes] == ["new_error"] and baseline_gate(found).passed is False


def test_a_sample_not_evaluated_is_one_the_run_does_not_have() -> None:
    """``run --early-stop`` leaves samples ``not_evaluated``: never a status change or a regression, out of
    the paired test; a trial that did evaluate the sample still speaks for it."""
    before = outcomes([_result("passed", 0.5), _result("passed", 1.0), _result("failed", 1.5)])
    after = outcomes([_result("passed", 0.5), _result("not_evaluated", 1.0), _result("not_evaluated", 1.5)])
    found = diff(before, after, "b")
    assert [(c.kind, c.timestamp_s) for c in found.changes] == [("removed", 1.0), ("removed", 1.5)]
    assert found.matched == 1 and found.regressions == 0 and baseline_gate(found).passed
    assert found.significance is not None and found.significance.overall is not None
    assert found.significance.overall.pairs == 1
    # Either way round, and with repeats: the trial that evaluated it is the sample's outcome.
    found = diff(outcomes([_result("not_evaluated"), _result("failed")]), outcomes([_result("passed")]), "b")
    assert [c.kind for c in found.changes] == ["fail_to_pass"]
    found = diff(outcomes([_result("passed")]), outcomes([_result("not_evaluated"), _result("passed")]), "b")
    assert found.changes == () and found.matched == 1


def test_the_html_report_shows_the_baseline_changes(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"lamp/idx/0": "raise"})
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--baseline", "previous.json",
                              "--output-json", "r.json", "--html", "r.html")
    assert code == 1, err
    page = (in_tmp / "r.html").read_text()
    assert '<section id="baseline">' in page and "9 samples matched; 1 pass to fail, 1 new error" in page
    # `report` renders the comparison the run recorded, without the adapter.
    code, _out, err = run_cli("report", "r.json", "--html", "again.html")
    assert code == 0, err
    assert "9 samples matched; 1 pass to fail, 1 new error" in (in_tmp / "again.html").read_text()


def test_the_significant_gate_decides_as_the_simulated_test_does() -> None:
    # The suite's calibration simulations call the statistics directly; here the same reports go
    # through outcomes, diff and the gate (trial by trial, as a report lists them) and must agree.
    import random

    from test_statistics_kit import repeated_side

    from glasskit_eval.statistics.paired import paired_regression_test, trial_noise

    def report_results(side: list[list[list[float]]]) -> list[dict[str, object]]:
        return [{"case": f"case{c}", "target": "t", "timestamp_s": i * 0.5,
                 "status": "passed" if trials[number] else "failed"}
                for number in range(len(side[0][0])) for c, samples in enumerate(side)
                for i, trials in enumerate(samples)]

    rng = random.Random(11)
    decisions = []
    for stretch in (False, True) * 6:
        base, cand = repeated_side(rng), repeated_side(rng, stretch)
        found = diff(outcomes(report_results(base)), outcomes(report_results(cand)), "b.json")
        series = [[(sum(b) / 3, sum(c) / 3) for b, c in zip(bs, cs)] for bs, cs in zip(base, cand)]
        test = paired_regression_test(series, noise=trial_noise([list(zip(bs, cs)) for bs, cs in zip(base, cand)]))
        assert test is not None and found.significance is not None and found.significance.overall is not None
        assert found.significance.overall.p_value == pytest.approx(test.p_value, rel=1e-12)
        assert found.significance.overall.noise_source == "repeats"
        assert baseline_gate(found, "significant").passed is not test.significant
        decisions.append(test.significant)
    assert any(decisions) and not all(decisions)
