"""Frame locks as data (pure): ``<case>.frames.lock`` proves which frame each label was made on.

A lock is line-oriented JSON, one object a line with sorted keys, so a diff shows the samples
that changed: a header line (decoder versions, codec, video name and SHA-256), then one line per
pinned sample, sorted by target, time and sample index, each with the time, the frame it
resolved to (index, media timestamp, display size) and two hashes of the exact RGB pixels handed
to adapters: SHA-256 and a 64-bit perceptual hash. A clip sample's line also holds ``clip``: its
setting (exact text) and every clip frame (requested time, index, media timestamp, both hashes);
other samples' lines have no ``clip`` key, so locks written before clips read and write the same.

:func:`compare` says how the frames a case resolves to now differ from the lock and why (a
re-encoded video, a decoder upgrade, an edited time). Pixels whose exact hash differs while the
perceptual hash stays within ``PERCEPTUAL_TOLERANCE`` bits are a note (decoders move pixel values
a little between versions), never an error; a moved frame, an edited time that lands on another
frame, or pixels beyond the tolerance are findings (warnings; errors with ``--strict-pins``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ..cases.model import ClipSpec
from ..support import strictjson as sj
from ..support.timevalues import format_time, parse_cli_time, same_time_key
from ..video.fingerprint import PERCEPTUAL_TOLERANCE, hash_distance

LOCK_FORMAT = 1


class LockFormatError(ValueError):
    """A lock file that is not one this version writes; the message names the line."""


@dataclass(frozen=True)
class Decoder:
    av: str
    ffmpeg: str
    codec: str

    def describe(self) -> str:
        return f"PyAV {self.av}, FFmpeg {self.ffmpeg}, codec {self.codec}"


@dataclass(frozen=True)
class ClipFramePin:
    """One frame of a pinned clip: the time the clip asks for and the frame it resolved to."""

    time: Fraction
    frame_index: int
    media_time: Fraction
    pixel_sha256: str
    phash: str

    def to_json(self) -> dict[str, Any]:
        return {"frame_index": self.frame_index, "media_time": str(self.media_time), "phash": self.phash,
                "pixel_sha256": self.pixel_sha256, "time": str(self.time)}

    def frame_text(self) -> str:
        return f"frame {self.frame_index} at {format_time(self.media_time)}s"


@dataclass(frozen=True)
class ClipPin:
    """A clip sample's frames as pinned, with the setting that chose them."""

    spec: ClipSpec
    frames: tuple[ClipFramePin, ...]

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        return {"after_s": str(spec.after_s), "before_s": str(spec.before_s), "edge": spec.edge,
                "every_s": None if spec.every_s is None else str(spec.every_s),
                "frames": [f.to_json() for f in self.frames]}


@dataclass(frozen=True)
class FramePin:
    """One sample's frame: where its time resolved and what the pixels were."""

    target: str
    sample_index: int
    time: Fraction
    frame_index: int
    media_time: Fraction
    display_size: tuple[int, int]
    pixel_sha256: str
    phash: str
    #: None for a single-frame sample (its lock line has no ``clip`` key).
    clip: ClipPin | None = None

    @property
    def order(self) -> tuple[str, Fraction, int]:
        return (self.target, self.time, self.sample_index)

    def to_json(self) -> dict[str, Any]:
        line = {"display_size": list(self.display_size), "frame_index": self.frame_index,
                "media_time": str(self.media_time), "media_timestamp_s": float(self.media_time),
                "phash": self.phash, "pixel_sha256": self.pixel_sha256, "sample_index": self.sample_index,
                "target": self.target, "time": str(self.time), "timestamp_s": float(self.time)}
        if self.clip is not None:
            line["clip"] = self.clip.to_json()
        return line

    def frame_text(self) -> str:
        return f"frame {self.frame_index} at {format_time(self.media_time)}s"


@dataclass(frozen=True)
class PinFile:
    case: str
    video: str
    video_sha256: str
    decoder: Decoder
    pins: tuple[FramePin, ...]

    def render(self) -> str:
        header = {"case": self.case, "decoder": {"av": self.decoder.av, "codec": self.decoder.codec,
                                                 "ffmpeg": self.decoder.ffmpeg},
                  "frames_lock": LOCK_FORMAT, "video": self.video, "video_sha256": self.video_sha256}
        lines = [header, *(p.to_json() for p in sorted(self.pins, key=lambda p: p.order))]
        return "".join(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n" for line in lines)

    def updated(self, pins: Iterable[FramePin], *, keep: set[tuple[str, int]] | None = None) -> PinFile:
        """This lock with ``pins`` replacing the entries of their samples.

        ``keep``: the (target, sample index) of every sample the case still has; other
        entries are dropped (a removed sample's pin would only mislead).
        """
        fresh = {(p.target, p.sample_index): p for p in pins}
        old = [p for p in self.pins if (p.target, p.sample_index) not in fresh
               and (keep is None or (p.target, p.sample_index) in keep)]
        return replace(self, pins=tuple(sorted([*old, *fresh.values()], key=lambda p: p.order)))


_HEADER = sj.Obj({"frames_lock": sj.Int(), "case": sj.Str(), "video": sj.Str(), "video_sha256": sj.Str(),
                  "decoder": sj.Obj({"av": sj.Str(), "ffmpeg": sj.Str(), "codec": sj.Str()})})
_PIN = sj.Obj({"target": sj.Str(), "sample_index": sj.Int(), "time": sj.Str(), "frame_index": sj.Int(),
               "media_time": sj.Str(), "display_size": sj.Arr(sj.Int()), "pixel_sha256": sj.Str(),
               "phash": sj.Str()},
              {"clip": sj.Obj({"before_s": sj.Str(), "after_s": sj.Str(), "every_s": sj.Str(nullable=True),
                               "edge": sj.Str(choices=("error", "clamp")),
                               "frames": sj.Arr(sj.Obj({"time": sj.Str(), "frame_index": sj.Int(),
                                                        "media_time": sj.Str(), "pixel_sha256": sj.Str(),
                                                        "phash": sj.Str()}))})})


def parse_pin_file(data: bytes | str, where: str) -> PinFile:
    """Read a lock (each line through the strict loader); raises :class:`LockFormatError` naming ``where`` and the line."""
    again = "run `validate --pin` to write the lock again"
    if isinstance(data, bytes):
        try:
            data = sj.loads_text(data)
        except sj.LoadError as exc:
            raise LockFormatError(f"{exc.located(where)}; {again}") from None
    # Only "\n" ends a line: the writer writes it, and U+2028 may stand inside a target's name.
    lines = [(n, line) for n, line in enumerate(data.split("\n"), 1) if line.strip()]
    if not lines:
        raise LockFormatError(f"{where}: empty frame lock; {again}")
    values: list[tuple[int, Any]] = []
    for number, line in lines:
        value: Any = None
        try:
            value = sj.loads(line, max_depth=sj.FRAME_LOCK.max_depth)
            sj.check(value, _HEADER if not values else _PIN)
        except sj.LoadError as exc:
            if exc.line is not None:  # a syntax error: the column is the line's own
                raise LockFormatError(f"{where}:{number}:{exc.column}: {exc.reason}; {again}") from None
            if not values and isinstance(value, dict) and value.get("frames_lock") != LOCK_FORMAT:
                break  # said below: not a lock of this format
            raise LockFormatError(f"{where}:{number}: damaged frame lock entry ({exc}); {again}") from None
        values.append((number, value))
    number, head = lines[0][0], values[0][1] if values else None
    if head is None or head["frames_lock"] != LOCK_FORMAT:
        raise LockFormatError(f"{where}:{number}: not a frame lock of format {LOCK_FORMAT}; {again}")
    decoder = head["decoder"]
    lock = PinFile(case=head["case"], video=head["video"], video_sha256=head["video_sha256"],
                   decoder=Decoder(decoder["av"], decoder["ffmpeg"], decoder["codec"]), pins=())
    pins = []
    for number, item in values[1:]:
        try:
            if len(item["display_size"]) != 2:
                raise ValueError("display_size must be [width, height]")
            width, height = item["display_size"]
            pins.append(FramePin(target=item["target"], sample_index=item["sample_index"], time=_time(item["time"]),
                                 frame_index=item["frame_index"], media_time=_time(item["media_time"]),
                                 display_size=(width, height), pixel_sha256=item["pixel_sha256"],
                                 phash=item["phash"], clip=_clip(item["clip"]) if "clip" in item else None))
        except ValueError as exc:
            raise LockFormatError(f"{where}:{number}: damaged frame lock entry ({exc}); {again}") from None
    return replace(lock, pins=tuple(pins))


def _clip(value: Any) -> ClipPin:
    every = value["every_s"]
    spec = ClipSpec(before_s=_time(value["before_s"]), after_s=_time(value["after_s"]),
                    every_s=None if every is None else _time(every), edge=value["edge"])
    frames = tuple(ClipFramePin(time=_time(f["time"]), frame_index=f["frame_index"],
                                media_time=_time(f["media_time"]), pixel_sha256=f["pixel_sha256"],
                                phash=f["phash"]) for f in value["frames"])
    return ClipPin(spec, frames)


def _time(value: str) -> Fraction:
    # Locks hold times as exact text ("3/10"); parse_cli_time bounds it before expanding it.
    return parse_cli_time(value)


# -- comparison ------------------------------------------------------------------------------

#: Finding kinds. Problems (warnings; errors with --strict-pins): moved, pixels, time_edited.
MOVED, PIXELS, TIME_EDITED = "moved", "pixels_changed", "time_edited"
#: Notes, never errors: exact pixels differ within the perceptual tolerance; no pin yet.
SLIGHT, UNPINNED = "pixels_slightly_changed", "unpinned"
PROBLEM_KINDS = frozenset({MOVED, PIXELS, TIME_EDITED})


@dataclass(frozen=True)
class Finding:
    kind: str
    target: str
    sample_index: int
    time: Fraction
    message: str
    old: FramePin | None = None
    new: FramePin | None = None

    @property
    def problem(self) -> bool:
        return self.kind in PROBLEM_KINDS


def _cause(lock: PinFile, video_sha256: str, decoder: Decoder) -> str:
    if video_sha256 != lock.video_sha256:
        return "the video was re-encoded or replaced (its SHA-256 differs from the lock's)"
    if decoder != lock.decoder:
        return f"the decoder changed ({lock.decoder.describe()} -> {decoder.describe()})"
    return ("same video and decoder as when pinned: the lock was edited, or decoding is not "
            "deterministic here")


def compare_pin(old: FramePin, new: FramePin, cause: str) -> Finding | None:
    """How one sample's frame differs from its pin; None when it is the pinned frame."""
    where = f"{new.target} sample {new.sample_index} at {format_time(new.time)}s"
    if old.time != new.time:
        if (old.frame_index, old.media_time) == (new.frame_index, new.media_time):
            return None  # the time moved within the same frame: the label still sees it
        return Finding(TIME_EDITED, new.target, new.sample_index, new.time,
                       f"{where}: time edited from {format_time(old.time)}s; now {new.frame_text()} "
                       f"(pinned: {old.frame_text()})", old, new)
    if (old.frame_index, old.media_time) != (new.frame_index, new.media_time):
        return Finding(MOVED, new.target, new.sample_index, new.time,
                       f"{where}: now resolves to {new.frame_text()} (pinned: {old.frame_text()}); {cause}",
                       old, new)
    if old.display_size != new.display_size:
        return Finding(PIXELS, new.target, new.sample_index, new.time,
                       f"{where}: {new.frame_text()} is now {new.display_size[0]}x{new.display_size[1]} "
                       f"(pinned: {old.display_size[0]}x{old.display_size[1]}); {cause}", old, new)
    if old.pixel_sha256 == new.pixel_sha256:
        return None
    distance = hash_distance(old.phash, new.phash)
    kind = SLIGHT if distance <= PERCEPTUAL_TOLERANCE else PIXELS
    how = "slightly, within tolerance" if kind == SLIGHT else "beyond tolerance"
    return Finding(kind, new.target, new.sample_index, new.time,
                   f"{where}: pixels of {new.frame_text()} changed {how} (perceptual distance "
                   f"{distance}/64, tolerance {PERCEPTUAL_TOLERANCE}); {cause}", old, new)


def compare_clip(old: FramePin, new: FramePin, cause: str) -> Finding | None:
    """How a clip sample's clip frames differ from their pins; None when every one is as pinned.

    Frames are paired by position within clips of the same setting: an every-frame clip asks
    for the frames' own times, which move with the frames when the video changes.
    """
    if new.clip is None:
        return None  # a clip dropped from the sample: its anchor is compared on its own
    where = f"{new.target} sample {new.sample_index} at {format_time(new.time)}s"
    count = len(new.clip.frames)
    if old.clip is None:
        return Finding(UNPINNED, new.target, new.sample_index, new.time,
                       f"{where}: its clip of {count} frames is not pinned; run `validate --pin` to pin it",
                       old, new)
    before, now = old.clip.frames, new.clip.frames
    same_frames = [(f.frame_index, f.media_time) for f in before] == [(f.frame_index, f.media_time) for f in now]
    if old.clip.spec != new.clip.spec and not same_frames:
        return Finding(TIME_EDITED, new.target, new.sample_index, new.time,
                       f"{where}: clip edited from {old.clip.spec.describe()} to {new.clip.spec.describe()}; "
                       f"now {_frames_text(now)} (pinned: {_frames_text(before)})", old, new)
    if len(before) != len(now):
        return Finding(MOVED, new.target, new.sample_index, new.time,
                       f"{where}: its clip now holds {_frames_text(now)} (pinned: {_frames_text(before)}); "
                       f"{cause}", old, new)
    pairs = list(zip(before, now, strict=True))
    moved = [(a, b) for a, b in pairs if (a.frame_index, a.media_time) != (b.frame_index, b.media_time)]
    if moved:
        a, b = moved[0]
        return Finding(MOVED, new.target, new.sample_index, new.time,
                       f"{where}: clip frame at {format_time(b.time)}s now resolves to {b.frame_text()} "
                       f"(pinned: {a.frame_text()}); {len(moved)} of {count} clip frames moved; {cause}",
                       old, new)
    changed = [(a, b, hash_distance(a.phash, b.phash)) for a, b in pairs if a.pixel_sha256 != b.pixel_sha256]
    if not changed:
        return None
    a, b, distance = max(changed, key=lambda item: item[2])
    kind = SLIGHT if distance <= PERCEPTUAL_TOLERANCE else PIXELS
    how = "slightly, within tolerance" if kind == SLIGHT else "beyond tolerance"
    return Finding(kind, new.target, new.sample_index, new.time,
                   f"{where}: pixels of clip {b.frame_text()} changed {how} (perceptual distance "
                   f"{distance}/64, tolerance {PERCEPTUAL_TOLERANCE}; {len(changed)} of {count} clip frames "
                   f"changed); {cause}", old, new)


def _frames_text(frames: Sequence[ClipFramePin]) -> str:
    if not frames:
        return "no frames"
    first, last = frames[0], frames[-1]
    return (f"{len(frames)} frames, {first.frame_index}..{last.frame_index} "
            f"({format_time(first.media_time)}s..{format_time(last.media_time)}s)")


def match(lock: PinFile, target: str, sample_index: int, time: Fraction,
          times_in_use: set[tuple[str, Fraction]]) -> FramePin | None:
    """The pin of a sample: same target and time, else (an edited time) same target and index.

    ``times_in_use`` are the (target, time key) of the case's current samples: a pin whose time
    another sample still has belongs to that sample, not to an edit of this one.
    """
    key = same_time_key(time)
    by_time = [p for p in lock.pins if p.target == target and same_time_key(p.time) == key]
    if by_time:
        return next((p for p in by_time if p.sample_index == sample_index), by_time[0])
    for pin in lock.pins:
        if (pin.target == target and pin.sample_index == sample_index
                and (target, same_time_key(pin.time)) not in times_in_use):
            return pin
    return None


def compare(lock: PinFile, current: Sequence[FramePin], video_sha256: str, decoder: Decoder,
            all_times: Iterable[tuple[str, Fraction]] | None = None) -> list[Finding]:
    """Findings for each current sample whose frame differs from (or is missing in) the lock.

    ``all_times``: (target, time) of every sample of the case (default: ``current``'s), so a
    filtered selection still tells edited times from other samples' pins.
    """
    cause = _cause(lock, video_sha256, decoder)
    in_use = {(t, same_time_key(time)) for t, time in (all_times if all_times is not None
                                                         else ((p.target, p.time) for p in current))}
    findings = []
    for pin in sorted(current, key=lambda p: p.order):
        old = match(lock, pin.target, pin.sample_index, pin.time, in_use)
        if old is None:
            findings.append(Finding(UNPINNED, pin.target, pin.sample_index, pin.time,
                                    f"{pin.target} sample {pin.sample_index} at {format_time(pin.time)}s "
                                    "is not pinned; run `validate --pin` to pin it", None, pin))
            continue
        found = compare_pin(old, pin, cause)
        if found is not None:
            findings.append(found)
        if found is None or found.kind != TIME_EDITED:
            # An edited time moves the whole clip with it: one finding says so.
            in_clip = compare_clip(old, pin, cause)
            if in_clip is not None:
                findings.append(in_clip)
    return findings


def review_status(lock: PinFile | None, current: FramePin, *, video_sha256: str, decoder: Decoder,
                  all_times: Iterable[tuple[str, Fraction]] = ()) -> Mapping[str, Any]:
    """One sample's pin status for the review page: ``status`` and a ``message`` for people.

    ``status`` is ``no_lock``, ``ok``, ``moved``, ``pixels_changed``, ``pixels_slightly_changed``,
    ``time_edited`` or ``unpinned``; ``problem`` is True for what ``--strict-pins`` refuses.
    """
    if lock is None:
        return {"status": "no_lock", "problem": False, "message": "the case has no frame lock"}
    times = {(current.target, current.time), *all_times}
    findings = compare(lock, [current], video_sha256, decoder, times)
    if not findings:
        return {"status": "ok", "problem": False, "message": f"pinned: {current.frame_text()}"}
    first = next((f for f in findings if f.problem), findings[0])
    return {"status": first.kind, "problem": first.problem, "message": first.message}
