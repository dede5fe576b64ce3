"""Sample locations: the line each sample's block starts on, in every YAML style."""

from __future__ import annotations

from pathlib import Path

from glasskit_eval.cases.model import parse_case
from glasskit_eval.reports.locations import relative_path, sample_locations
from glasskit_eval.yamltext.source import load_yaml_text

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
    doc, problems = load_yaml_text(TEXT, str(tmp_path / "c.yaml"))
    case, problems = parse_case(doc, tmp_path / "c.yaml")
    assert case is not None and not problems
    found = {key: where.line for key, where in sample_locations([case]).items()}
    # Indexes as the schedule assigns them: targets, then blocks, then times.
    assert found == {("c", "a", 0): 4, ("c", "a", 1): 4, ("c", "a", 2): 4,
                     ("c", "b", 3): 10, ("c", "b", 4): 10, ("c", "b", 5): 14}
    assert {where.path for where in sample_locations([case]).values()} == {tmp_path / "c.yaml"}


def test_relative_paths_use_forward_slashes(tmp_path: Path) -> None:
    assert relative_path(tmp_path / "eval" / "cases" / "a.yaml", tmp_path) == "eval/cases/a.yaml"
    assert relative_path(tmp_path / "a.yaml", tmp_path / "sub") == "../a.yaml"
