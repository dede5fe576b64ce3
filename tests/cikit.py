"""A fixture eval for the CI-output tests (JUnit, annotations, baselines, shards)."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit import TESTS, make_eval

#: Blocks in block style after a comment, in flow style, an ignored one, and a second case.
DOOR = """\
video: cfr_h264.mp4
targets:
  idx:
    label: Index
    samples:
    # Frames carry their index in their pixels; 10 frames per second.
    - at: [0.5, 1.0]
      expect: 5
      field: index
    - {range: [1.5, 1.9], every_s: 0.2, expect: 15, field: index}
    - at: 0.3
      expect: 3
      ignore: "known bad: a 'quoted', 100% ignored frame"
  size:
    samples:
    - at: 0
      expect: [128, 72]
      field: size
"""

LAMP = """\
video: cfr_h264.mp4
targets:
  idx:
    samples:
    - range: [0, 2]
      every_s: 0.5
      field: index
      expect: 0
      compare: {mode: numeric, tolerance: 20}
"""

#: Reads the frame index from the pixels; eval/overrides.json maps "case/target/time" to a
#: replacement observation, or to "raise" for an adapter error.
ADAPTER = f"""
import json, os, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index
HERE = os.path.dirname(os.path.abspath(__file__))

def create_evaluator(config):
    return Reader()

class Reader:
    def evaluate(self, sample, target):
        try:
            with open(os.path.join(HERE, "overrides.json")) as handle:
                overrides = json.load(handle)
        except FileNotFoundError:
            overrides = {{}}
        key = f"{{sample.case_name}}/{{target.id}}/{{sample.timestamp_s:g}}"
        if overrides.get(key) == "raise":
            raise RuntimeError(f"boom: {{key}}")
        if key in overrides:
            return overrides[key]
        return {{"index": read_frame_index(sample.image), "size": list(sample.image.size)}}
"""


def ci_eval(tmp_path: Path, overrides: dict[str, object] | None = None) -> Path:
    eval_dir = make_eval(tmp_path, {"door": DOOR, "lamp": LAMP}, ADAPTER)
    set_overrides(eval_dir, overrides)
    return eval_dir


def set_overrides(eval_dir: Path, overrides: dict[str, object] | None) -> None:
    path = eval_dir / "overrides.json"
    if overrides is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps(overrides))
