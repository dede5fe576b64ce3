"""Completed checkpoints beyond the most recent N are pruned when a run ends."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit import make_eval, run_cli

from glasskit_eval.checkpoints.prune import prune_completed
from glasskit_eval.checkpoints.store import MANIFEST_NAME, checkpoints_root

CASE = """
video: cfr_h264.mp4
targets:
  lights:
    samples:
    - at: 0.5
      expect: true
"""
ADAPTER = "def create_evaluator(config):\n    return E()\n\nclass E:\n    def evaluate(self, s, t):\n        return True\n"


def fake(root: Path, name: str, kind: str, status: str, updated: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / MANIFEST_NAME).write_text(json.dumps({
        "format": "glasskit_eval-checkpoint", "format_version": 1, "id": name, "kind": kind, "eval_dir": "x",
        "invocation": {}, "fingerprints": {}, "total": 1, "status": status, "created_at": updated,
        "updated_at": updated}))
    return folder


def test_prune_keeps_the_newest_complete_ones_and_everything_unfinished(tmp_path: Path) -> None:
    root = checkpoints_root(tmp_path)
    old = [fake(root, f"run-{i}", "run", "complete", f"2026-01-0{i}T00:00:00.000000Z") for i in range(1, 6)]
    unfinished = fake(root, "run-open", "run", "in_progress", "2025-01-01T00:00:00.000000Z")
    seed = fake(root, "seed-1", "seed", "complete", "2025-01-01T00:00:00.000000Z")
    (root / "junk").mkdir()
    removed = prune_completed(tmp_path, "run", 2, current=old[0])
    assert sorted(removed) == old[1:3]
    assert all(p.exists() for p in (old[0], old[3], old[4], unfinished, seed, root / "junk"))
    assert prune_completed(tmp_path, "run", 0) == []


def test_runs_keep_the_configured_number_of_checkpoints(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, ADAPTER)
    for _ in range(3):
        code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-checkpoints", "2")
        assert code == 0, err
    assert len(list(checkpoints_root(eval_dir).iterdir())) == 2
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-checkpoints", "0")
    assert code == 0, err
    assert len(list(checkpoints_root(eval_dir).iterdir())) == 3
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0, err
    assert len(list(checkpoints_root(eval_dir).iterdir())) == 4  # the default keeps 10
