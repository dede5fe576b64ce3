"""Trials (glasskit_eval.evaluation.trials): what a batch adapter is told about the memory its calls need."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval, run_cli

import glasskit_eval.evaluation.trials as trials

pytestmark = pytest.mark.frames

CASE = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0, 1.5]\n      expect: true\n"
BATCH = ("class E:\n    def evaluate_many(self, samples, target):\n        return [True for _ in samples]\n\n"
         "def create_evaluator(config):\n    return E()\n")


def test_a_batch_that_needs_more_frame_memory_than_the_budget_is_warned_about_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, BATCH)
    # Three distinct times of a 128x72 clip: 3 x 128 x 72 x 3 bytes.
    monkeypatch.setattr(trials, "BATCH_MEMORY_WARN_BYTES", 3 * 128 * 72 * 3 - 1)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "2")
    assert code == 0, out + err
    warning = "warning: evaluate_many for c/t gets 3 frames of 128x72 at once: about 0 MiB of RGB"
    assert out.count(warning) == 1, out
    monkeypatch.setattr(trials, "BATCH_MEMORY_WARN_BYTES", 3 * 128 * 72 * 3)
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0 and "evaluate_many for" not in out
