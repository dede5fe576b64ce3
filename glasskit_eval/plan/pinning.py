"""Frame locks on disk: pin a plan's frames (``validate --pin``) and check them (run, validate).

The pure half (format, comparison, review status) is :mod:`.pins`; this module decodes the
frames, hashes them and reads and writes ``<eval-dir>/cases/<case>.frames.lock``. Without a
lock nothing is checked: pinning is opt-in per case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

from ..cases.model import Case
from ..errors import Problem, ValidationError
from ..support.fsio import write_text_atomic
from ..support.strictjson import LoadError
from .pinfiles import any_pinned, pin_file_path, read_pin_bytes
from .pins import (
    ClipFramePin,
    ClipPin,
    Decoder,
    Finding,
    FramePin,
    LockFormatError,
    PinFile,
    compare,
    parse_pin_file,
    review_status,
)
from .planning import CasePlan, Plan
from .schedule import ScheduledSample, expand_case


def current_decoder(codec: str) -> Decoder:
    import av

    ffmpeg = getattr(av, "ffmpeg_version_info", None)
    if not isinstance(ffmpeg, str):
        ffmpeg = "libavcodec " + ".".join(str(n) for n in av.library_versions.get("libavcodec", ()))
    return Decoder(av=str(av.__version__), ffmpeg=ffmpeg, codec=codec)


def read_pin_file(case: Case) -> PinFile | None:
    """The case's lock, None without one; a damaged lock is a validation error."""
    path = pin_file_path(case)
    try:
        data = read_pin_bytes(path)
    except LoadError as exc:
        raise ValidationError([Problem(str(path), "", f"cannot read the frame lock: it {exc}; run "
                                       "`validate --pin` to write it again")]) from None
    if data is None:
        return None
    try:
        return parse_pin_file(data, str(path))
    except LockFormatError as exc:
        raise ValidationError([Problem(str(path), "", str(exc).removeprefix(f"{path}: "))]) from None


def frame_pins(video_path: Path, samples: Sequence[ScheduledSample]) -> list[FramePin]:
    """Decode the samples' frames, clip frames included (once per distinct time), and pin each sample."""
    from ..video.fingerprint import perceptual_hash, pixel_sha256
    from ..video.frames import decode_at

    wanted: set[Fraction] = set()
    for sample in samples:
        wanted.add(sample.time)
        if sample.clip is not None:
            wanted.update(sample.clip.times)
    seen: dict[Fraction, _Seen] = {}
    hashed: dict[int, tuple[str, str]] = {}
    for want, frame in decode_at(video_path, sorted(wanted)):
        try:
            if frame.index not in hashed:
                # Several requested times of a clip grid may share a frame: hash it once.
                hashed[frame.index] = (pixel_sha256(frame.image), perceptual_hash(frame.image))
            sha, phash = hashed[frame.index]
            seen[want] = _Seen(frame.index, frame.media_time, frame.image.size, sha, phash)
        finally:
            frame.image.close()
    pins: list[FramePin] = []
    for sample in samples:
        got = seen[sample.time]
        clip = None
        if sample.clip is not None and sample.block.clip is not None:
            clip = ClipPin(sample.block.clip, tuple(
                ClipFramePin(time=t, frame_index=seen[t].frame_index, media_time=seen[t].media_time,
                             pixel_sha256=seen[t].sha, phash=seen[t].phash) for t in sample.clip.times))
        pins.append(FramePin(target=sample.target.id, sample_index=sample.sample_index, time=sample.time,
                             frame_index=got.frame_index, media_time=got.media_time,
                             display_size=(got.size[0], got.size[1]), pixel_sha256=got.sha, phash=got.phash,
                             clip=clip))
    return pins


class _Seen(NamedTuple):
    frame_index: int
    media_time: Fraction
    size: tuple[int, int]
    sha: str
    phash: str


def _codec(case_plan: CasePlan) -> str:
    return case_plan.video.codec if case_plan.video is not None else "unknown"


def _video_sha256(path: Path) -> str:
    from ..support.fsio import sha256_file

    return sha256_file(path)


@dataclass
class PinCheck:
    """What the frame locks say about a plan."""

    #: Problems first (as located case-file problems, for --strict-pins), then notes.
    findings: list[tuple[CasePlan, Finding]] = field(default_factory=list)
    locked_cases: int = 0

    @property
    def problems(self) -> list[Problem]:
        return [_problem(plan, f) for plan, f in self.findings if f.problem]

    def warning_lines(self) -> list[str]:
        return [f"{'warning' if f.problem else 'note'}: {pin_file_path(plan.case).name}: {f.message}"
                for plan, f in self.findings]


def _problem(plan: CasePlan, finding: Finding) -> Problem:
    sample = next(s for s in plan.samples
                  if s.target.id == finding.target and s.sample_index == finding.sample_index)
    return plan.case.document.problem(("targets", sample.target.id, "samples", sample.block.index),
                                      f"frame lock: {finding.message}")


def check_plan(plan: Plan) -> PinCheck:
    """Compare each locked case's selected samples with its lock (decodes those frames)."""
    check = PinCheck()
    if not any_pinned(c.case for c in plan.cases):
        return check
    for case_plan in plan.cases:
        lock = read_pin_file(case_plan.case)
        if lock is None or not case_plan.samples:
            continue
        check.locked_cases += 1
        current = frame_pins(case_plan.video_path, case_plan.samples)
        all_times = [(s.target.id, s.time) for s in expand_case(case_plan.case)]
        found = compare(lock, current, _video_sha256(case_plan.video_path), current_decoder(_codec(case_plan)),
                        all_times)
        check.findings += [(case_plan, f) for f in found]
    check.findings.sort(key=lambda item: not item[1].problem)
    return check


def raise_strict(check: PinCheck) -> None:
    problems = check.problems
    if problems:
        raise ValidationError(problems, hint="The frames labels were made on have changed. Check the "
                              "labels against the new frames (review), then run `validate --pin` to "
                              "accept them; without --strict-pins these are warnings.")


def pin_case(case_plan: CasePlan, samples: Iterable[ScheduledSample] | None = None) -> tuple[Path, list[Finding]]:
    """Write (or update) the case's lock for ``samples`` (default: the plan's selected samples).

    Returns the lock path and what changed against the previous lock. Entries of samples the
    selection left out are kept; entries of samples the case no longer has are dropped.
    """
    chosen = list(case_plan.samples if samples is None else samples)
    current = frame_pins(case_plan.video_path, chosen)
    sha = _video_sha256(case_plan.video_path)
    decoder = current_decoder(_codec(case_plan))
    everything = expand_case(case_plan.case)
    old = read_pin_file(case_plan.case)
    changes: list[Finding] = []
    if old is None:
        base = PinFile(case_plan.case.name, case_plan.video_path.name, sha, decoder, ())
    else:
        changes = compare(old, current, sha, decoder, [(s.target.id, s.time) for s in everything])
        base = PinFile(case_plan.case.name, case_plan.video_path.name, sha, decoder, old.pins)
    lock = base.updated(current, keep={(s.target.id, s.sample_index) for s in everything})
    path = pin_file_path(case_plan.case)
    write_text_atomic(path, lock.render())
    return path, changes


def repin_if_pinned(case_plan: CasePlan, samples: Iterable[ScheduledSample]) -> Path | None:
    """Keep an existing lock in step after an edit: pin ``samples`` again (seed, review)."""
    if read_pin_file(case_plan.case) is None:
        return None
    chosen = list(samples)
    if not chosen:
        return None
    path, _changes = pin_case(case_plan, chosen)
    return path


def case_pin_statuses(case_plan: CasePlan) -> dict[tuple[str, int], Mapping[str, Any]]:
    """Every selected sample's pin status (see :func:`.pins.review_status`), for the review page.

    Decodes the case's frames only when it has a lock; without one every sample is ``no_lock``.
    """
    lock = read_pin_file(case_plan.case)
    if lock is None:
        return {(s.target.id, s.sample_index): review_status(None, _unpinned(s), video_sha256="",
                                                             decoder=Decoder("", "", ""))
                for s in case_plan.samples}
    current = frame_pins(case_plan.video_path, case_plan.samples)
    sha = _video_sha256(case_plan.video_path)
    decoder = current_decoder(_codec(case_plan))
    all_times = [(s.target.id, s.time) for s in expand_case(case_plan.case)]
    return {(p.target, p.sample_index): review_status(lock, p, video_sha256=sha, decoder=decoder,
                                                      all_times=all_times) for p in current}


def _unpinned(sample: ScheduledSample) -> FramePin:
    return FramePin(sample.target.id, sample.sample_index, sample.time, -1, sample.time, (0, 0), "", "")
