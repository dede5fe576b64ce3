"""Where each sample is declared: the case file and the line of its sample block (pure).

CI systems point at ``file:line``; a sample's line is the line its block starts on in the case
file (the YAML loader records every node's line), whatever style the block is written in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..cases.model import Case, block_count

#: (case, target, sample index), as :attr:`SampleResult.key`.
SampleKey = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class SampleLocation:
    path: Path
    line: int | None


Locations = Mapping[SampleKey, SampleLocation]


def sample_locations(cases: Iterable[Case]) -> dict[SampleKey, SampleLocation]:
    """Every sample of ``cases`` (selected or not), indexed as the schedule indexes them."""
    out: dict[SampleKey, SampleLocation] = {}
    for case in cases:
        index = 0
        for target in case.targets:
            for block in target.blocks:
                where = SampleLocation(case.path, case.document.line(("targets", target.id, "samples",
                                                                      block.index)))
                for _ in range(block_count(block)):
                    out[(case.name, target.id, index)] = where
                    index += 1
            for event in target.stream.events if target.stream is not None else ():
                out[event_key(case.name, target.id, event.index)] = SampleLocation(
                    case.path, case.document.line(("targets", target.id, "events", event.index)))
    return out


def event_key(case: str, target: str, event_index: int) -> SampleKey:
    """A stream event's key in :data:`Locations`: negative indexes, which no sample has."""
    return (case, target, -1 - event_index)


def relative_path(path: Path, base: str | Path) -> str:
    """``path`` relative to ``base`` with ``/`` separators (CI systems expect POSIX paths)."""
    try:
        text = os.path.relpath(path, base)
    except ValueError:  # another drive on Windows
        text = str(path)
    return text.replace(os.sep, "/")
