"""Blocks of samples and the seeded random order ``run --early-stop`` evaluates them in.

A block is the consecutive samples of one (case, target) within ``block_s`` seconds of video: a
target's samples in time order, a new block starting at the first sample ``block_s`` or more after
the current block's first. Blocks are the unit of the random order, so the early-stop bound needs
no independence between neighbouring frames; inside a block the samples stay in time order, so
its frames are decoded in one forward run.

The order is a shuffle of the blocks (canonical order: cases as planned, targets as declared,
then time) by a ``random.Random`` seeded from ``--seed`` and the trial, so a rerun or a resume
repeats it and another seed gives another.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from .schedule import ScheduledSample

#: ``--early-stop-block`` default in seconds (see benchmarks/bench_early_stop.py).
DEFAULT_BLOCK_S = Fraction(1, 2)


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive samples of one target of one case, in time order."""

    case: str
    target: str
    samples: tuple[ScheduledSample, ...]

    @property
    def size(self) -> int:
        """The samples that count towards a pass rate (ignored ones do not)."""
        return sum(1 for s in self.samples if not s.ignored)


def make_blocks(cases: Sequence[Sequence[ScheduledSample]], block_s: Fraction) -> list[Block]:
    """Every case's samples cut into blocks, in canonical order."""
    if block_s <= 0:
        raise ValueError(f"block length must be positive, got {block_s}")
    blocks: list[Block] = []
    for samples in cases:
        by_target: dict[str, list[ScheduledSample]] = {}
        for sample in sorted(samples, key=lambda s: (s.target.index, s.time, s.sample_index)):
            by_target.setdefault(sample.target.id, []).append(sample)
        for target, mine in by_target.items():
            current: list[ScheduledSample] = []
            for sample in mine:
                if current and sample.time - current[0].time >= block_s:
                    blocks.append(Block(sample.case.name, target, tuple(current)))
                    current = []
                current.append(sample)
            if current:
                blocks.append(Block(mine[0].case.name, target, tuple(current)))
    return blocks


def shuffled(blocks: Sequence[Block], seed: int, trial: int = 1) -> list[Block]:
    """``blocks`` in the random order of ``seed`` and ``trial`` (the same on every machine)."""
    order = list(blocks)
    random.Random(f"early-stop/{seed}/{trial}").shuffle(order)
    return order
