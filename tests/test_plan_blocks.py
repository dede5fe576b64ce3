"""Blocks of consecutive samples and their seeded order (glasskit_eval.plan.blocks)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from test_plan_schedule import make_case

from glasskit_eval.plan.blocks import make_blocks, shuffled
from glasskit_eval.plan.schedule import expand_case

CASE = """
video: v.mp4
targets:
  a:
    samples:
    - range: [0, 2]
      every_s: 0.1
      expect: true
    - at: 2.2
      ignore: a known bad frame
  b:
    samples:
    - at: [0.3, 1.7]
      expect: 1
"""


def test_a_block_is_one_targets_samples_within_the_block_length(tmp_path: Path) -> None:
    samples = expand_case(make_case(tmp_path, CASE))
    blocks = make_blocks([samples], Fraction(1, 2))
    assert [(b.target, [float(s.time) for s in b.samples][:2], len(b.samples)) for b in blocks] == [
        ("a", [0.0, 0.1], 5), ("a", [0.5, 0.6], 5), ("a", [1.0, 1.1], 5), ("a", [1.5, 1.6], 5),
        ("a", [2.2], 1), ("b", [0.3], 1), ("b", [1.7], 1)]
    # An ignored sample counts towards no pass rate.
    assert [b.size for b in blocks] == [5, 5, 5, 5, 0, 1, 1]
    assert sorted(s.sample_index for b in blocks for s in b.samples) == [s.sample_index for s in samples]
    assert all(list(b.samples) == sorted(b.samples, key=lambda s: s.time) for b in blocks)
    with pytest.raises(ValueError):
        make_blocks([samples], Fraction(0))


def test_the_order_is_seeded(tmp_path: Path) -> None:
    blocks = make_blocks([expand_case(make_case(tmp_path, CASE))], Fraction(1, 10))
    first = [b.samples[0].time for b in shuffled(blocks, 0)]
    assert first == [b.samples[0].time for b in shuffled(blocks, 0)]
    assert first != [b.samples[0].time for b in shuffled(blocks, 1)]
    assert first != [b.samples[0].time for b in shuffled(blocks, 0, trial=2)]
    assert sorted(first) == sorted(b.samples[0].time for b in blocks)
    # Fixed across Python versions and machines: string seeds hash with SHA-512.
    assert [float(t) for t in first[:4]] == [float(b.samples[0].time) for b in shuffled(blocks, 0)[:4]]
