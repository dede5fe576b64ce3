"""Sample locations: the line each sample's block starts on, in every YAML style."""

from __future__ import annotations

from pathlib import Path

from evalkit import make_eval

from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters
from glasskit_eval.reports.locations import relative_path, sample_locations

TEXT = """\
video: v.mp4
targets:
  a:
    samples: [{at: [0, 1], expect: 1}, {at: 2, expect: 1}]
  b:
    samples:

    # two comments
    # before the block
    - range: [0, 1]
      every_s: 0.5
      expect: 1
    -
      at: 3
      expect: 1
"""


def test_lines_of_flow_block_and_commented_blocks(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": TEXT}, videos=())
    case = build_plan(eval_dir, Filters(), allow_empty=False, check_videos=False).cases[0].case
    found = {key: where.line for key, where in sample_locations([case]).items()}
    # Indexes as the schedule assigns them: targets, then blocks, then times.
    assert found == {("c", "a", 0): 4, ("c", "a", 1): 4, ("c", "a", 2): 4,
                     ("c", "b", 3): 10, ("c", "b", 4): 10, ("c", "b", 5): 14}
    assert {where.path for where in sample_locations([case]).values()} == {eval_dir / "cases" / "c.yaml"}


def test_relative_paths_use_forward_slashes(tmp_path: Path) -> None:
    assert relative_path(tmp_path / "eval" / "cases" / "a.yaml", tmp_path) == "eval/cases/a.yaml"
    assert relative_path(tmp_path / "a.yaml", tmp_path / "sub") == "../a.yaml"
