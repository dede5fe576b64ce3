"""``seed`` fills the ``expect`` of stream events that have none, from the emission in their window."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval, run_cli

from glasskit_eval.yamltext.source import load_yaml_file

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.4]}
    events:
    # the pan boils
    - at: 0.3
    - at: 1.0
      expect: smoke
    - at: 1.5
      comment: lid off
"""

#: Two emissions in the first window (frame 4 "steam", then frame 5 "boiling"): the first counts.
ADAPTER = """
def create_evaluator(config):
    return Streamer(config.config)

class Streamer:
    def __init__(self, plan):
        self.plan = plan

    def on_frame(self, sample, target):
        value = self.plan.get(str(sample.frame_index))
        return None if value is None else {"alert": value, "frame": sample.frame_index}
"""


def seeded_eval(tmp_path: Path, plan: str) -> Path:
    eval_dir = make_eval(tmp_path, {"c": CASE})
    (eval_dir / "adapter.py").write_text(ADAPTER)
    (eval_dir / "adapter.yaml").write_text(plan)
    return eval_dir


def test_seed_fills_draft_events_from_the_first_emission_in_their_window(tmp_path: Path) -> None:
    eval_dir = seeded_eval(tmp_path, '{"4": "steam", "5": "boiling", "11": "fire", "17": "lid"}')
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "event has no `expect`" in err, err  # drafts are refused by run
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0, out + err
    assert "Seeded c: 2 events filled" in out
    text = (eval_dir / "cases" / "c.yaml").read_text()
    assert "# the pan boils" in text  # the minimal-diff write keeps comments
    doc, problems = load_yaml_file(eval_dir / "cases" / "c.yaml")
    assert problems == []
    events = doc.value["targets"]["pan"]["events"]
    assert events == [{"at": 0.3, "expect": "steam"}, {"at": 1.0, "expect": "smoke"},
                      {"at": 1.5, "expect": "lid", "comment": "lid off"}]
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0, out + err
    # --replace proposes every event again; nothing to do without it.
    code, out, _err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0 and "Nothing to seed" in out


def test_an_event_with_nothing_in_its_window_leaves_the_case_unchanged(tmp_path: Path) -> None:
    eval_dir = seeded_eval(tmp_path, '{"4": "steam"}')
    before = (eval_dir / "cases" / "c.yaml").read_bytes()
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 1, out + err
    assert "c/pan event @ 1.5s: no emission in its window [1.5, 1.9]s" in out
    assert "case files were left unchanged" in out
    assert (eval_dir / "cases" / "c.yaml").read_bytes() == before
