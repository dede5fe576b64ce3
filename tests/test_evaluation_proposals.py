"""Seed's edit planning (glasskit_eval.evaluation.proposals): proposed values into block replacements."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval

from glasskit_eval.evaluation.proposals import plan_edits
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters

pytestmark = pytest.mark.frames

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    samples:
    - range: [0, 2]
      every_s: 0.5
      comment: keep me
  window:
    samples:
    - at: [0.25, 0.75, 1.25]
    - at: 1.75
      expect: false
"""


def edits_for(tmp_path: Path, values: dict[int, object]) -> list[tuple[str, int, list[dict[str, object]], bool]]:
    plan = build_plan(make_eval(tmp_path, {"c": CASE}), Filters(), allow_empty=True, allow_drafts=True,
                      check_videos=False)
    case_plan = plan.cases[0]
    edits = plan_edits(case_plan.case, case_plan.samples, values)
    return [(e.target_id, e.block_index, e.blocks, e.split) for e in edits.edits]


def test_equal_values_fill_the_block_in_place_keeping_its_keys(tmp_path: Path) -> None:
    assert edits_for(tmp_path, {0: True, 1: True, 2: True, 3: True}) == [
        ("door", 0, [{"range": [0, 2], "expect": True, "every_s": 0.5, "comment": "keep me"}], False)]


def test_a_range_splits_into_sub_ranges_of_equal_values(tmp_path: Path) -> None:
    (edit,) = edits_for(tmp_path, {0: True, 1: True, 2: False, 3: True})
    assert edit == ("door", 0, [
        {"range": [0, 1.0], "expect": True, "every_s": 0.5, "comment": "keep me"},
        {"range": [1.0, 1.5], "expect": False, "every_s": 0.5, "comment": "keep me"},
        {"range": [1.5, 2], "expect": True, "every_s": 0.5, "comment": "keep me"}], True)


def test_an_at_list_splits_by_value(tmp_path: Path) -> None:
    (edit,) = edits_for(tmp_path, {4: "a", 5: "a", 6: "b"})
    assert edit == ("window", 0, [{"at": [0.25, 0.75], "expect": "a"}, {"at": 1.25, "expect": "b"}], True)
