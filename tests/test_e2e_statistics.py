"""Pass-rate intervals, the paired regression test and the latency gate, end to end.

Runs use a real video whose frames carry their index and a Python adapter that fails the frames
listed in ``eval/failing.json``, so every outcome is known and each figure can be recomputed
here from the outcomes with the statistics module (itself checked against scipy/statsmodels).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval, read_json, run_cli
from reportkit import report_of, result_json

from glasskit_eval.statistics.bootstrap import median_latency_change
from glasskit_eval.statistics.intervals import pass_rate_interval
from glasskit_eval.statistics.paired import regression_family

pytestmark = pytest.mark.e2e

#: 20 samples, one per frame (the fixture has 10 frames a second, 2 s).
CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 2]
      every_s: 0.1
      field: ok
      expect: true
"""

ADAPTER = f"""
import json, os, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index
HERE = os.path.dirname(os.path.abspath(__file__))

def create_evaluator(config):
    return Judge()

class Judge:
    def evaluate(self, sample, target):
        with open(os.path.join(HERE, "failing.json")) as handle:
            failing = json.load(handle)
        return {{"ok": read_frame_index(sample.image) not in failing}}
"""


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER)


def run(eval_dir: Path, failing: set[int], report: str, *extra: str) -> tuple[int, str, str]:
    (eval_dir / "failing.json").write_text(json.dumps(sorted(failing)))
    return run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *extra)


def outcomes(failing: set[int]) -> list[float]:
    return [0.0 if frame in failing else 1.0 for frame in range(20)]


def test_every_pass_rate_has_its_interval_in_every_output(eval_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    failing = {3, 4, 5, 12}
    code, out, _err = run(eval_dir, failing, "run.json", "--junit-xml", "run.xml", "--html", "run.html",
                          "--annotations", "github")
    assert code == 0
    expected = pass_rate_interval([outcomes(failing)])
    assert expected is not None and expected.samples == 20 and expected.effective_samples < 20
    report = read_json(tmp_path / "run.json")
    assert report["summary"]["pass_rate_ci"] == expected.to_json()
    assert report["by_target"]["ok"]["pass_rate_ci"] == expected.to_json()
    assert report["by_case"]["clip"]["pass_rate_ci"] == expected.to_json()
    assert report["trials"][0]["summary"]["pass_rate_ci"] == expected.to_json()
    assert report["summary"]["pass_rate_ci"]["level"] == 0.95
    assert report["summary"]["minimum_detectable_drop"]["power"] == 0.8
    line = (f"Pass rate: 80.0% (95% CI {expected.low * 100:.1f}-{expected.high * 100:.1f}%; "
            f"{expected.effective_samples:.0f} effective of 20 samples)")
    assert line in out.splitlines()
    assert "Smallest detectable drop: " in out
    xml = (tmp_path / "run.xml").read_text()
    assert f'<property name="pass_rate_ci.low" value="{expected.low:.6f}" />' in xml
    assert line.removeprefix("Pass rate: 80.0%") in (tmp_path / "summary.md").read_text()
    html = (tmp_path / "run.html").read_text()
    bounds = f"{expected.low * 100:.1f}% – {expected.high * 100:.1f}%"
    # The run's interval in the header, and each target's, case's and trial's in its table.
    assert html.count(bounds) == 4


def test_confidence_sets_every_interval(eval_dir: Path, tmp_path: Path) -> None:
    code, out, _err = run(eval_dir, {3, 4}, "run.json", "--confidence", "0.8")
    assert code == 0 and "(80% CI " in out
    narrow = pass_rate_interval([outcomes({3, 4})], 0.8)
    assert narrow is not None and read_json(tmp_path / "run.json")["summary"]["pass_rate_ci"] == narrow.to_json()
    for bad in ("1", "0", "1.5", "nan"):
        code, _out, err = run(eval_dir, {3}, "x.json", "--confidence", bad)
        assert code == 2 and "--confidence" in err


def test_with_repeat_the_outcome_is_each_samples_pass_fraction(eval_dir: Path, tmp_path: Path) -> None:
    code, out, _err = run(eval_dir, {3, 4, 5}, "run.json", "--repeat", "2")
    assert code == 0
    expected = pass_rate_interval([outcomes({3, 4, 5})])
    report = read_json(tmp_path / "run.json")
    assert expected is not None and report["summary"]["pass_rate_ci"] == expected.to_json()
    assert [t["summary"]["pass_rate_ci"] for t in report["trials"]] == [expected.to_json()] * 2
    assert "each sample's pass fraction over the trials" in out


def test_one_flipped_sample_fails_any_but_not_significant(eval_dir: Path, tmp_path: Path) -> None:
    assert run(eval_dir, {3}, "before.json")[0] == 0
    code, out, _err = run(eval_dir, {3, 9}, "any.json", "--baseline", "before.json", "--fail-on-regression")
    assert code == 1
    gates = {g["name"]: g["passed"] for g in read_json(tmp_path / "any.json")["gates"]}
    assert gates == {"baseline_regressions": False}
    code, out, _err = run(eval_dir, {3, 9}, "significant.json", "--baseline", "before.json",
                          "--fail-on-regression", "significant")
    assert code == 0
    report = read_json(tmp_path / "significant.json")
    assert [(g["name"], g["passed"]) for g in report["gates"]] == [("baseline_significant_regression", True)]
    family = regression_family({"ok": [list(zip(outcomes({3}), outcomes({3, 9}), strict=True))]})
    assert family.overall is not None
    significance = report["baseline"]["significance"]
    assert {k: significance[k] for k in family.overall.to_json()} == family.overall.to_json()
    assert report["baseline"]["by_target"]["ok"]["significance"]["p_value_raw"] == family.overall.p_value_raw
    assert significance["delta_pass_rate"] == pytest.approx(-0.05) and not significance["significant"]
    # 20 samples cannot see a 5-point drop: the comparison says so instead of "no drop".
    assert significance["verdict"].startswith("inconclusive: this eval cannot see drops under ")
    assert "): inconclusive: this eval cannot see drops under " in out


def test_a_real_drop_fails_significant(eval_dir: Path, tmp_path: Path) -> None:
    assert run(eval_dir, set(), "before.json")[0] == 0
    failing = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19}
    code, out, _err = run(eval_dir, failing, "after.json", "--baseline", "before.json",
                          "--fail-on-regression", "significant", "--junit-xml", "after.xml", "--html", "after.html")
    assert code == 1
    xml = (tmp_path / "after.xml").read_text()
    assert '<property name="baseline.significance.verdict" value="significant drop" />' in xml
    assert "<p class=\"meta\" id=\"significance\">significant drop: pass rate -50.0 points" in (
        tmp_path / "after.html").read_text()
    report = read_json(tmp_path / "after.json")
    (gate,) = report["gates"]
    assert (gate["name"], gate["passed"]) == ("baseline_significant_regression", False)
    assert gate["message"].startswith("significant drop: 100.0% -> 50.0% (-50.0 points")
    assert report["baseline"]["significance"]["significant"]
    assert report["baseline"]["significance"]["p_value"] < 0.05
    assert "): significant drop" in out


def test_alpha_is_checked_and_baseline_gates_need_a_baseline(eval_dir: Path) -> None:
    for option, value in (("--alpha", "0"), ("--alpha", "1"), ("--fail-on-regression", "some")):
        code, _out, err = run(eval_dir, set(), "x.json", option, value)
        assert code == 2 and option in err
    code, _out, err = run(eval_dir, set(), "x.json", "--fail-on-latency-regression", "0.1")
    assert (code, err.strip()) == (2, "error: --fail-on-latency-regression needs --baseline PREVIOUS.json")


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    return report_of(results)


def result(time: float, status: str, expected: Any = True, duration: float = 0.1) -> dict[str, Any]:
    return result_json(time, status, case="c", target="t", index=round(time * 2), expected=expected,
                       observed_value=status == "passed", evaluation_duration_seconds=duration)


def test_a_relabelled_sample_is_its_own_kind_and_left_out_of_the_test(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = [result(t / 2, "passed") for t in range(10)]
    after = [result(t / 2, "passed") for t in range(10)]
    after[4] = result(2.0, "failed", expected=False)  # the label changed, and the sample now fails
    Path("a.json").write_text(json.dumps(report(before)))
    Path("b.json").write_text(json.dumps(report(after)))
    code, out, _err = run_cli("compare", "a.json", "b.json", "--output-json", "diff.json")
    assert code == 0 and "1 relabelled" in out
    diff = read_json(tmp_path / "diff.json")
    assert diff["regressions"] == 0 and diff["counts"]["relabelled"] == 1
    (change,) = diff["changes"]
    assert (change["kind"], change["baseline_expected"], change["expected"]) == ("relabelled", True, False)
    assert (change["baseline_status"], change["status"]) == ("passed", "failed")
    # Nine pairs were tested, none of them changed.
    family = regression_family({"t": [[(1.0, 1.0)] * 9]})
    assert family.overall is not None
    assert diff["significance"]["delta_pass_rate"] == 0.0
    assert diff["significance"]["p_value_raw"] == family.overall.p_value_raw


def test_the_latency_gate_fails_only_on_a_sure_increase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    base = [0.1 + 0.01 * (t % 3) for t in range(30)]
    slow = [b + 0.2 for b in base]
    Path("a.json").write_text(json.dumps(report([result(t / 2, "passed", duration=d) for t, d in enumerate(base)])))
    Path("b.json").write_text(json.dumps(report([result(t / 2, "passed", duration=d) for t, d in enumerate(slow)])))
    expected = median_latency_change([list(zip(base, slow, strict=True))])
    assert expected is not None
    code, out, _err = run_cli("compare", "a.json", "b.json", "--fail-on-latency-regression", "0.1",
                              "--output-json", "diff.json")
    assert code == 1 and "Gate baseline_latency_regression failed: median latency change +200.0ms" in out
    diff = read_json(tmp_path / "diff.json")
    assert diff["latency"] == expected.to_json()
    assert [(g["name"], g["passed"]) for g in diff["gates"]] == [("baseline_regressions", True),
                                                                  ("baseline_latency_regression", False)]
    assert run_cli("compare", "a.json", "b.json", "--fail-on-latency-regression", "0.5")[0] == 0
    # Faster is never a latency regression.
    assert run_cli("compare", "b.json", "a.json", "--fail-on-latency-regression", "0")[0] == 0


#: 30 samples, 0.05 s apart on the 10 fps fixture: two samples a frame (a tie goes to the earlier).
THIRTY = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 1.5]
      every_s: 0.05
      field: ok
      expect: true
"""
#: Frames 5-9: the ten consecutive samples from 0.5 s to 0.95 s, failing in every trial alike.
STRETCH_FRAMES = set(range(5, 10))


@pytest.fixture
def thirty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A deterministic adapter, 30 samples: a regression confined to one stretch of video."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return make_eval(tmp_path, {"clip": THIRTY}, adapter=ADAPTER)


def test_a_deterministic_stretch_is_significant_with_repeats(thirty: Path, tmp_path: Path) -> None:
    assert run(thirty, set(), "before.json", "--repeat", "3")[0] == 0
    code, out, _err = run(thirty, STRETCH_FRAMES, "after.json", "--repeat", "3", "--baseline", "before.json",
                          "--fail-on-regression", "significant")
    assert code == 1, out
    significance = read_json(tmp_path / "after.json")["baseline"]["significance"]
    assert significance["noise_source"] == "repeats" and significance["autocorrelation"] == 0.0
    assert significance["method"] == "one-sided McNemar mid-p, counts scaled to the null variance the repeats estimate"
    assert significance["family_tests"] == 1 and significance["p_value"] == significance["p_value_raw"]
    assert significance["p_value"] == pytest.approx(0.5 ** 10 / 2)  # McNemar mid-p of b = 10, c = 0
    assert significance["verdict"] == "significant drop"
    assert "noise from the repeats): significant drop" in out
    code, out, _err = run_cli("compare", "before.json", "after.json", "--fail-on-regression", "significant",
                              "--output-json", "diff.json")
    assert code == 1, out
    assert read_json(tmp_path / "diff.json")["significance"]["significant"]


def test_without_repeats_the_inconclusive_verdict_names_the_stretch(thirty: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(thirty, set(), "before.json")[0] == 0
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, out, _err = run(thirty, STRETCH_FRAMES, "after.json", "--baseline", "before.json",
                          "--fail-on-regression", "significant", "--annotations", "github", "--html", "after.html")
    assert code == 0, out
    significance = read_json(tmp_path / "after.json")["baseline"]["significance"]
    assert significance["noise_source"] == "differences"
    assert significance["verdict"].startswith("inconclusive")
    assert significance["inconclusive_stretch"] == {"case": "clip", "target": "ok", "from_s": 0.5, "to_s": 0.95,
                                                    "samples": 10, "suggested_repeat": 2}
    assert 0.0 < significance["p_value"] < 0.5  # ten drops and no gains: never "p = 1"
    line = ("why inconclusive: 10 consecutive pass->fail samples in case clip, target ok, 0.5s to 0.95s; "
            "without repeats")
    assert line in out and "--repeat 2" in out and "p = 1 " not in out
    assert line in (tmp_path / "summary.md").read_text()
    html = (tmp_path / "after.html").read_text()
    assert "longest pass-&gt;fail stretch: 10 samples of clip/ok, 0.5s to 0.95s; rerun with --repeat 2" in html
    assert ", one-sided; " in html  # one target: tested once, no Holm
