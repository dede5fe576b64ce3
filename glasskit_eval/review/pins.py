"""Frame locks on the review page: each sample's pin status, and the lock kept in step with edits.

A case without ``<case>.frames.lock`` costs one ``stat`` here: nothing is decoded and the
pinning modules are not even imported. With a lock, the statuses are those of
:func:`..plan.pinning.case_pin_statuses` (the pure :func:`..plan.pins.review_status` of each
sample's decoded frame), cached per state of the case file, the lock and the video, with the
decoded frames kept per state of the video, so reopening a case, redrawing after a refused edit
or saving an edit does not decode the whole case again.

After the page writes a locked case (a save, an undo, a redo), the blocks the write changed are
pinned again, so the lock follows the edits the reviewer made while looking at the frames. The
other samples keep their pins exactly (a re-encoded video stays reported for them); only their
sample index follows the edit, because indexes count samples across the whole case and an
inserted or deleted block shifts the ones after it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cases.model import Case, ClipSpec, block_times
from ..errors import EvalError
from ..plan.pinfiles import pin_file_path, read_pin_bytes
from ..support.strictjson import LoadError
from ..support.timevalues import format_time

if TYPE_CHECKING:
    from ..plan.pins import FramePin
    from ..plan.planning import CasePlan
    from ..plan.schedule import ScheduledSample
    from .casedata import LoadedCase

#: Short words for each status, as the page shows them.
LABELS = {"ok": "pin ok", "moved": "moved", "pixels_changed": "pixels changed",
          "pixels_slightly_changed": "pixels slightly changed", "time_edited": "time edited",
          "unpinned": "unpinned", "no_lock": "no lock"}


def lock_file(case: Case | None) -> Path | None:
    """The case's lock when it has one (one stat; no decoding, no pinning imports)."""
    if case is None:
        return None
    path = pin_file_path(case)
    return path if path.is_file() else None


def _case_plan(root: Path, case_id: str) -> CasePlan:
    from ..plan.planning import build_plan
    from ..plan.schedule import Filters
    from .casedata import video_path

    # The review page's own video lookup, so cloud videos come from the same cache as frames.
    plan = build_plan(root, Filters(case=case_id), allow_empty=True, allow_drafts=True,
                      resolve_video=lambda case, _config: video_path(case))
    if not plan.cases:
        raise EvalError(f"case {case_id!r} has no samples to check against its frame lock")
    return plan.cases[0]


def _state_key(loaded: LoadedCase, lock: Path) -> tuple[str, str, tuple[int, int, int]]:
    from .casedata import video_path
    from .media import FileStamp

    assert loaded.case is not None
    stamp = FileStamp.of(video_path(loaded.case))
    try:
        data = read_pin_bytes(lock)
    except LoadError as exc:
        raise EvalError(f"{lock} {exc}") from None
    if data is None:
        raise EvalError(f"{lock} was removed while reading it")
    return (loaded.revision, hashlib.sha256(data).hexdigest(),
            (stamp.size, stamp.mtime_ns, stamp.inode))


class _VideoState:
    """What one state of a video file says: its SHA-256, and the pins of the times decoded so far."""

    def __init__(self, stamp: object) -> None:
        self.stamp = stamp
        self.sha256: str | None = None
        self.by_time: dict[tuple[Fraction, ClipSpec | None], FramePin] = {}


class PinStatuses:
    """Pin statuses per case, computed on first request for each state of case, lock and video.

    The frames' pins are kept per video state, so after an edit only the times the edit
    introduced are decoded again, and the video is hashed once, not on every save.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[object, dict[str, Any]]] = {}
        self._videos: dict[Path, _VideoState] = {}
        self._lock = threading.Lock()

    def of(self, root: Path, loaded: LoadedCase) -> dict[str, Any]:
        lock = lock_file(loaded.case)
        if loaded.case is None or lock is None:
            return {"locked": False, "lock_file": None, "error": None, "samples": []}
        try:
            key: object = _state_key(loaded, lock)
        except (OSError, EvalError) as exc:
            return _failed(lock, str(exc))
        with self._lock:
            cached = self._cache.get(loaded.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            case_plan = _case_plan(root, loaded.id)
            body = statuses_json(case_plan, self._statuses(case_plan), lock)
        except EvalError as exc:
            # A damaged lock or a missing video: the page says so instead of a status per sample.
            return _failed(lock, str(exc))
        with self._lock:
            self._cache[loaded.id] = (key, body)
        return body

    def _video(self, path: Path) -> _VideoState:
        from .media import FileStamp

        stamp = FileStamp.of(path)
        with self._lock:
            video = self._videos.get(path)
            if video is None or video.stamp != stamp:
                video = self._videos[path] = _VideoState(stamp)
            return video

    def _statuses(self, case_plan: CasePlan) -> dict[tuple[str, int], Mapping[str, Any]]:
        """As :func:`..plan.pinning.case_pin_statuses` says, with this server's decoded frames reused."""
        from dataclasses import replace

        from ..plan.pinning import current_decoder, frame_pins, read_pin_file
        from ..plan.pins import review_status
        from ..plan.schedule import expand_case
        from ..support.fsio import sha256_file

        lock = read_pin_file(case_plan.case)
        if lock is None:
            raise EvalError(f"{pin_file_path(case_plan.case)} was removed while reading it")
        video = self._video(case_plan.video_path)
        missing = list({_frames_key(s): s for s in case_plan.samples
                        if _frames_key(s) not in video.by_time}.values())
        # Decoded outside the lock: two requests may decode the same frame, never disagree on it.
        for sample, found in zip(missing, frame_pins(case_plan.video_path, missing), strict=True):
            video.by_time[_frames_key(sample)] = found
        if video.sha256 is None:
            video.sha256 = sha256_file(case_plan.video_path)
        decoder = current_decoder(case_plan.video.codec if case_plan.video is not None else "unknown")
        all_times = [(s.target.id, s.time) for s in expand_case(case_plan.case)]
        return {(s.target.id, s.sample_index):
                review_status(lock, replace(video.by_time[_frames_key(s)], target=s.target.id,
                                            sample_index=s.sample_index),
                              video_sha256=video.sha256, decoder=decoder, all_times=all_times)
                for s in case_plan.samples}


def _frames_key(sample: ScheduledSample) -> tuple[Fraction, ClipSpec | None]:
    """What a sample's pin depends on besides the video: its time, and its clip's setting."""
    return sample.time, sample.block.clip if sample.clip is not None else None


def _failed(lock: Path, message: str) -> dict[str, Any]:
    return {"locked": True, "lock_file": lock.name, "error": message, "samples": []}


def statuses_json(case_plan: CasePlan, statuses: Mapping[tuple[str, int], Mapping[str, Any]],
                  lock: Path) -> dict[str, Any]:
    samples = []
    for sample in case_plan.samples:
        status = statuses[(sample.target.id, sample.sample_index)]
        samples.append({"target": sample.target.id, "block": sample.block.index,
                        "sample_index": sample.sample_index, "time": format_time(sample.time),
                        "time_s": float(sample.time), "status": status["status"],
                        "label": LABELS.get(str(status["status"]), str(status["status"])),
                        "problem": bool(status["problem"]), "message": status["message"]})
    counts: dict[str, int] = {}
    for item in samples:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    return {"locked": True, "lock_file": lock.name, "error": None, "samples": samples, "counts": counts,
            "problems": sum(1 for s in samples if s["problem"])}


# --- keeping the lock in step with the page's writes ---------------------------------------------


def _raw_key(case: Case, target_id: str, index: int, times: tuple[object, ...]) -> str:
    doc = case.document.value
    try:
        raw = doc["targets"][target_id]["samples"][index]
    except (KeyError, IndexError, TypeError):
        raw = None
    return json.dumps([raw, [str(t) for t in times]], sort_keys=True, default=str)


def _blocks(case: Case) -> dict[str, list[tuple[int, str]]]:
    return {t.id: [(b.index, _raw_key(case, t.id, b.index, tuple(block_times(b)))) for b in t.blocks]
            for t in case.targets}


def _pairs(before: Case, after: Case) -> tuple[set[tuple[str, int]], list[tuple[tuple[str, int], tuple[str, int]]]]:
    """The blocks a write added or changed, and each unchanged block with its earlier self.

    Blocks are (target, block index). A block is unchanged when the earlier file has a block of
    the same target with the same text and the same times (anywhere: inserting a block shifts
    the others); each earlier block stands for one later block at most.
    """
    old = _blocks(before)
    edited: set[tuple[str, int]] = set()
    same: list[tuple[tuple[str, int], tuple[str, int]]] = []
    for target_id, blocks in _blocks(after).items():
        unused = list(old.get(target_id, []))
        for index, key in blocks:
            at = next((i for i, (_old, k) in enumerate(unused) if k == key), None)
            if at is None:
                edited.add((target_id, index))
            else:
                same.append(((target_id, unused.pop(at)[0]), (target_id, index)))
    return edited, same


def edited_blocks(before: Case, after: Case) -> set[tuple[str, int]]:
    """(target, block index in ``after``) of each block the write added or changed."""
    return _pairs(before, after)[0]


def keep_in_step(root: Path, before: LoadedCase, after: LoadedCase) -> dict[str, Any] | None:
    """After a write of a locked case: pin the edited blocks again; None without a lock.

    Returns what the page is told: how many samples were pinned again, or why not (the file
    is saved either way; `validate --pin` pins the case from the command line).
    """
    if before.case is None or after.case is None or lock_file(after.case) is None:
        return None
    try:
        return {"repinned": _repin(root, before.case, after), "error": None}
    except (OSError, EvalError) as exc:
        return {"repinned": 0, "error": f"the frame lock was not updated: {exc}"}


def _repin(root: Path, before: Case, after: LoadedCase) -> int:
    from dataclasses import replace

    from ..plan.pinning import frame_pins, read_pin_file
    from ..plan.pins import match
    from ..plan.schedule import expand_case
    from ..support.fsio import write_text_atomic
    from ..support.timevalues import same_time_key

    case_plan = _case_plan(root, after.id)
    case = case_plan.case
    lock = read_pin_file(case)
    if lock is None:
        return 0
    edited, same = _pairs(before, case)
    old_samples, new_samples = _by_block(before), _by_block(case)
    old_in_use = {(s.target.id, same_time_key(s.time)) for s in expand_case(before)}
    kept: list[FramePin] = []
    for old_block, new_block in same:
        for old, new in zip(old_samples.get(old_block, []), new_samples.get(new_block, []), strict=True):
            pin = match(lock, old.target.id, old.sample_index, old.time, old_in_use)
            if pin is not None:
                kept.append(replace(pin, sample_index=new.sample_index))
    # The plan's samples carry their clips; the expanded schedule does not.
    planned = {(s.target.id, s.sample_index): s for s in case_plan.samples}
    fresh = [planned.get((s.target.id, s.sample_index), s) for block in sorted(edited)
             for s in new_samples.get(block, [])]
    pinned = frame_pins(case_plan.video_path, fresh) if fresh else []
    # The header (video hash, decoder) stays the pinned one: the causes reported for samples
    # the edit did not touch must stay true.
    updated = replace(lock, pins=()).updated([*kept, *pinned])
    if updated.render() != lock.render():
        write_text_atomic(pin_file_path(case), updated.render())
    return len(pinned)


def _by_block(case: Case) -> dict[tuple[str, int], list[ScheduledSample]]:
    from ..plan.schedule import expand_case

    grouped: dict[tuple[str, int], list[ScheduledSample]] = {}
    for sample in expand_case(case):
        grouped.setdefault((sample.target.id, sample.block.index), []).append(sample)
    return grouped
