"""``--save-failures``: a JPEG of the exact frame and a JSON record per failed attempt.

The paths are chosen before the result is made (it carries them from the start), and the
frame is the one the adapter got, saved while it is still in memory: no second decode. A
clip sample also saves every clip frame, in a folder beside its anchor frame's JPEG, named
by position, requested time and frame index. In a run with arms each arm's failures are its
own files (the arm is in the name), holding the pixels that arm got: perturbed, for a
perturbation arm.

A new run moves the artifacts of the previous one aside (``failures/previous/``, one
generation kept), so the trial directories only ever hold one run's failures; a resume
keeps them, since its reused results point at them.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..plan.schedule import ScheduledSample
from ..results import SampleResult
from ..support.fsio import write_bytes_atomic, write_text_atomic
from ..video.frames import DecodedFrame
from ._judge import Artifacts

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


#: Longest piece of a case or target name in an artifact file name (file systems allow 255 bytes).
_NAME_PART = 60


def _safe(text: str) -> str:
    safe = _UNSAFE.sub("_", text).strip("._") or "x"
    if len(safe) <= _NAME_PART:
        return safe
    # Cut, and keep names unique with a short hash of the whole name.
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[:_NAME_PART - 9]}-{digest}"


def _arm_part(arm: str) -> str:
    """An arm's name in file names; a name that had to be changed (``jpeg:30``) gets a short hash,
    so it never meets another arm's (``jpeg_30``)."""
    safe = _safe(arm)
    if safe == arm:
        return safe
    return f"{safe}-{hashlib.sha256(arm.encode('utf-8', 'surrogatepass')).hexdigest()[:6]}"


class FailureSaver:
    def __init__(self, base: Path) -> None:
        self.base = base / "failures"

    def rotate(self) -> list[Path]:
        """Move the last run's ``trial-NNN`` directories into ``previous/``, replacing what was there.

        Returns the directories moved (as they are now named).
        """
        if not self.base.is_dir():
            return []
        old = sorted(p for p in self.base.iterdir() if p.is_dir() and p.name.startswith("trial-"))
        if not old:
            return []
        previous = self.base / "previous"
        shutil.rmtree(previous, ignore_errors=True)
        previous.mkdir()
        moved = []
        for folder in old:
            target = previous / folder.name
            folder.rename(target)
            moved.append(target)
        return moved

    def artifacts(self, sample: ScheduledSample, trial: int, arm: str | None = None) -> Artifacts:
        """Where a failed result of ``sample`` in ``trial`` (by ``arm``, in a run with arms) keeps its frame and record."""
        stem = (f"{_safe(sample.case.name)}_{_safe(sample.target.id)}_{sample.sample_index:05d}_"
                f"{sample.timestamp_s:.3f}s")
        if arm is not None:
            stem += f"_arm-{_arm_part(arm)}"
        folder = self.base / f"trial-{trial:03d}"
        return Artifacts(image=str(folder / f"{stem}.jpg"), record=str(folder / f"{stem}.json"))

    def save(self, result: SampleResult, image: Any, trial: int, frames: Sequence[DecodedFrame] = ()) -> None:
        """Write the JPEG of the exact frame the adapter got and the result as reported.

        The record is upstream's artifact format: the result plus its one-based trial. A clip
        result's ``frames`` (one per clip entry) go where ``ClipFrames.artifact_path`` says.
        """
        assert result.artifact_image is not None and result.artifact_json is not None
        write_bytes_atomic(Path(result.artifact_image), _jpeg(image))
        if result.clip is not None:
            for position, frame in enumerate(frames):
                write_bytes_atomic(result.clip.artifact_path(result.artifact_image, position), _jpeg(frame.image))
        record = result.to_json()
        record.update(artifact_image=None, artifact_json=None, trial=trial)
        write_text_atomic(Path(result.artifact_json),
                          json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _jpeg(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()
