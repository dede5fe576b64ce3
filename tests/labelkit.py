"""A run whose votes contradict three labels: the fixture video read by a real Python adapter (the arms
scenario's: ``ok`` unless its config lists the frame), three voting arms.

Every frame's truth is ``ok: true`` (the adapter reads the frame index from the pixels); the case
labels frames 3, 7 and 12 ``false``, so those three are the suspects. Arm ``b`` fails frame 5 and
arm ``c`` frame 15 (a minority: not suspects), and the perturbation arm ``dim`` fails nearly
everything but does not vote.
"""

from __future__ import annotations

from pathlib import Path

from evalkit import make_eval
from test_e2e_arms import ADAPTER

CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - at: [0, 0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0, 1.1, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9]
      field: ok
      expect: true
    - at: 0.3
      field: ok
      expect: false
    - at: [0.7, 1.2]
      field: ok
      expect: false
"""

CONFIG = """\
arms:
  b: {adapter_config: {fail: [5]}}
  c: {adapter_config: {fail: [15]}}
  dim: {perturb: [{brightness: 0.3}]}
"""

#: The arguments of the run that finds them: three voting arms, one perturbed, two repeats.
RUN = ("--arm", "control", "--arm", "b", "--arm", "c", "--arm", "dim", "--repeat", "2")
SUSPECT_TIMES = [0.3, 0.7, 1.2]


def labels_eval(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=CONFIG)
