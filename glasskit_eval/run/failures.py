"""``--save-failures``: a JPEG of the exact frame and a JSON record per failed attempt.

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
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from ..results import SampleResult, Status
from ..support.fsio import write_bytes_atomic, write_text_atomic
from ..video.frames import decode_at

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

    def save_case(self, results: Sequence[SampleResult], trial: int, video_path: Path) -> list[SampleResult]:
        """Write artifacts for the failed and errored results of one case (one extra decode).

        Returns those results with their artifact paths.
        """
        failed = [r for r in results if r.status in (Status.FAILED, Status.ERROR)]
        if not failed:
            return []
        folder = self.base / f"trial-{trial:03d}"
        times = sorted({Fraction(repr(r.timestamp_s)) for r in failed})
        images: dict[Fraction, bytes] = {}
        for want, frame in decode_at(video_path, times):
            buffer = io.BytesIO()
            try:
                frame.image.save(buffer, format="JPEG", quality=90)
            finally:
                frame.image.close()
            images[want] = buffer.getvalue()
        saved = []
        for r in failed:
            stem = f"{_safe(r.case)}_{_safe(r.target)}_{r.sample_index:05d}_{r.timestamp_s:.3f}s"
            image_path = folder / f"{stem}.jpg"
            json_path = folder / f"{stem}.json"
            write_bytes_atomic(image_path, images[Fraction(repr(r.timestamp_s))])
            # The result as reported, plus its one-based trial (upstream's artifact format).
            record = r.to_json()
            record.update(artifact_image=None, artifact_json=None, trial=trial)
            write_text_atomic(json_path, json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
            saved.append(replace(r, artifact_image=str(image_path), artifact_json=str(json_path)))
        return saved
