"""A regression confined to one stretch of video, end to end: repeats let the test see it.

A deterministic Python adapter on a real video fails the samples listed in ``eval/failing.json``
(by sample time), every trial alike. Thirty samples; the candidate fails ten consecutive ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

pytestmark = pytest.mark.e2e

#: 30 samples, 0.05 s apart.
CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 1.5]
      every_s: 0.05
      field: ok
      expect: true
"""

ADAPTER = """
import json, os
HERE = os.path.dirname(os.path.abspath(__file__))

def create_evaluator(config):
    return Judge()

class Judge:
    def evaluate(self, sample, target):
        with open(os.path.join(HERE, "failing.json")) as handle:
            failing = json.load(handle)
        return {"ok": round(sample.timestamp_s * 20) not in failing}
"""

STRETCH = set(range(10, 20))


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER)


def run(eval_dir: Path, failing: set[int], report: str, *extra: str) -> tuple[int, str, str]:
    (eval_dir / "failing.json").write_text(json.dumps(sorted(failing)))
    return run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *extra)


def test_a_deterministic_stretch_is_significant_with_repeats(eval_dir: Path, tmp_path: Path) -> None:
    assert run(eval_dir, set(), "before.json", "--repeat", "3")[0] == 0
    code, out, _err = run(eval_dir, STRETCH, "after.json", "--repeat", "3", "--baseline", "before.json",
                          "--fail-on-regression", "significant")
    assert code == 1, out
    significance = read_json(tmp_path / "after.json")["baseline"]["significance"]
    assert significance["noise_source"] == "repeats" and significance["autocorrelation"] == 0.0
    assert significance["family_tests"] == 1 and significance["p_value"] == significance["p_value_raw"]
    assert significance["p_value"] == pytest.approx(0.5 ** 10 / 2)  # McNemar mid-p of b = 10, c = 0
    assert significance["verdict"] == "significant drop"
    assert "noise from the repeats): significant drop" in out
    code, out, _err = run_cli("compare", "before.json", "after.json", "--fail-on-regression", "significant",
                              "--output-json", "diff.json")
    assert code == 1, out
    assert read_json(tmp_path / "diff.json")["significance"]["significant"]


def test_without_repeats_the_inconclusive_verdict_names_the_stretch(eval_dir: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(eval_dir, set(), "before.json")[0] == 0
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, out, _err = run(eval_dir, STRETCH, "after.json", "--baseline", "before.json",
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
