"""One decode, every lane: a case's frames handed to each lane that evaluates them.

The case's frames (a clip sample's every frame too) are decoded (and oriented, and converted)
once, on one worker thread, by the generators a single lane uses; :class:`FrameTee` hands each
sample's frames to every lane that evaluates it through a small bounded queue per lane: plain
lanes share the images, a lane with perturbations gets its own perturbed copies made on that
thread, each frame seeded by the run's seed, the sample's case and target, the frame's requested
time and the arm. A slow lane holds the decoder back only once its queue is full, so the others
run ahead of it by at most that many frames. One lane without perturbations (a plain run, or a
resumed arm evaluating alone) takes the case's own decode: no tee, no copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from PIL import Image

from ..arms.perturb import Elsewhere, apply_chain, frame_seed
from ..arms.plan import Arm
from ..plan.schedule import ScheduledSample
from ..results import SampleResult
from ..video.frames import DecodedFrame, decode_at
from ..video.frametable import frame_table
from ._bridge import Handoff
from ._clipframes import ClipItems, HeldFrames
from ._judge import Judge
from ._ordering import DECLARATION
from .case import (
    FRAME_QUEUE_DEPTH,
    CaseWork,
    FrameKeeper,
    FrameSource,
    ResultSink,
    case_items,
    run_case,
)
from .failures import FailureSaver
from .lanes import Lane
from .options import TrialOptions

#: Frames waiting for one lane beyond its calls in flight.
ARM_QUEUE_DEPTH = FRAME_QUEUE_DEPTH + 2


def shared(held: HeldFrames, holders: int) -> list[HeldFrames]:
    """``holders`` handles on the same images, which are let go once every one of them is released."""
    if holders == 1:
        return [held]
    left = [holders]
    lock = threading.Lock()

    def release() -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            held.release()

    return [HeldFrames(held.frames, held.times, held.anchor, held.clip, release) for _ in range(holders)]


def perturbed(sample: ScheduledSample, held: HeldFrames, arm: Arm, seed: int, video: Path | None = None) -> HeldFrames:
    """The arm's own copy of every frame of ``held``, each seeded by its requested time (``held`` is kept).

    ``video`` is where ``shuffle`` takes its frames from (None: it paints the mean colour).
    """
    frames: list[DecodedFrame] = []
    shuffles = video is not None and any(p.kind == "shuffle" for p in arm.perturb)
    try:
        for frame, time_ in zip(held.frames, held.times):
            elsewhere = _elsewhere(video, frame.index) if shuffles and video is not None else None
            image = apply_chain(frame.image, arm.perturb,
                                frame_seed(seed, sample.case.name, sample.target.id, time_, arm.name), elsewhere)
            if image is frame.image:
                image = image.copy()  # never close the shared original
            frames.append(DecodedFrame(frame.index, frame.media_time, image))
    except BaseException:
        for made in frames:
            made.image.close()
        raise
    images = [f.image for f in frames]

    def release() -> None:
        for image in images:
            image.close()

    return HeldFrames(tuple(frames), held.times, held.anchor, held.clip, release)


def _elsewhere(video: Path, index: int) -> Elsewhere:
    """``shuffle``'s frame: one of the video's frames at least a quarter of them away from ``index``,
    chosen by the step's generator, decoded (display orientation) when asked for."""

    def pick(rng: random.Random) -> Image.Image:
        times = frame_table(video).times
        gap = max(1, len(times) // 4)
        far = [i for i in range(len(times)) if abs(i - index) >= gap] or [0]
        want = times[far[rng.randrange(len(far))]]
        for _time, frame in decode_at(video, [want]):
            return frame.image
        raise ValueError(f"{video}: no frame at {want}")

    return pick


def stream_perturbation(arm: Arm, seed: int, case: str) -> Callable[[Image.Image, str, Fraction], Image.Image] | None:
    """What a perturbation arm's adapter gets of a stream's frame: its own copy, seeded as a sample's frame is."""
    if not arm.perturb:
        return None

    def apply(image: Image.Image, target: str, time: Fraction) -> Image.Image:
        return apply_chain(image, arm.perturb, frame_seed(seed, case, target, time, arm.name))

    return apply


def handout(sample: ScheduledSample, held: HeldFrames, arms: Sequence[Arm | None], seed: int,
            video: Path | None = None) -> list[HeldFrames | None]:
    """Per arm, its frames of ``sample`` (None where the arm is None: it does not evaluate the sample).

    ``held`` is handed over: plain arms share it, perturbed ones get copies; it is released once
    nobody holds it.
    """
    out: list[HeldFrames | None] = [None] * len(arms)
    try:
        for i, arm in enumerate(arms):
            if arm is not None and arm.perturb:
                out[i] = perturbed(sample, held, arm, seed, video)
    except BaseException:
        for made in out:
            if made is not None:
                made.release()
        held.release()
        raise
    plain = [i for i, arm in enumerate(arms) if arm is not None and not arm.perturb]
    if not plain:
        held.release()
        return out
    for i, handle in zip(plain, shared(held, len(plain))):
        out[i] = handle
    return out


class FrameTee:
    """One decode's ``(sample, frames)`` items, delivered to every arm that wants them, exactly once.

    Plain arms get the same images (released when the last of them lets go: adapters must not
    change images in place); an arm with perturbations gets its own perturbed copies, made on
    the decoding thread. ``wants[i]`` is the sample indexes arm ``i`` still evaluates (a resumed
    arm may have fewer than the others).
    """

    def __init__(self, make_items: Callable[[], ClipItems], arms: Sequence[Arm], seed: int, depth: int,
                 wants: Sequence[frozenset[int]] | None = None, video: Path | None = None) -> None:
        self.make_items = make_items
        #: The case's video, where ``shuffle`` takes its frames from.
        self.video = video
        self.arms = arms
        self.seed = seed
        self.wants = wants
        self._handoff = Handoff(len(arms), depth)

    def start(self) -> None:
        self._handoff.start(self._produce)

    def source(self, index: int) -> FrameSource:
        """Arm ``index``'s frame stream, in the form :class:`~.case.CaseWork` takes (its factory is not used)."""

        def frames() -> AsyncGenerator[tuple[ScheduledSample, HeldFrames], None]:
            return self._handoff.items(index)

        return frames

    def _produce(self, handoff: Handoff) -> None:
        gen = self.make_items()
        try:
            for sample, held in gen:
                takers = [arm if self.wants is None or sample.sample_index in self.wants[i] else None
                          for i, arm in enumerate(self.arms)]
                frames = handout(sample, held, takers, self.seed, self.video)
                for position, mine in enumerate(frames):
                    if mine is None:
                        continue
                    if not handoff.put(position, (sample, mine)):
                        for rest in frames[position:]:
                            if rest is not None:
                                rest.release()
                        return
        finally:
            gen.close()

    async def close(self) -> None:
        """Stop the producer and release every frame no arm took."""
        await self._handoff.close()


@dataclass(frozen=True, slots=True)
class CaseRun:
    """What every lane's part of one case shares: the options, the judge and where results go."""

    options: TrialOptions
    judge: Judge
    trial: int
    sink: ResultSink
    seed: int = 0
    keep_frame: FrameKeeper | None = None
    saver: FailureSaver | None = None
    warn: Callable[[str], None] | None = None


async def evaluate_case(run: CaseRun, lanes: Sequence[tuple[Lane, Sequence[ScheduledSample]]], path: Path,
                        case_samples: Sequence[ScheduledSample]) -> list[list[SampleResult]]:
    """Each lane's samples of one case evaluated from one decode; each lane's results in declaration order.

    A lane is given with the samples it still evaluates. The first lane to stop the run (a
    fail-fast error) stops the others; the lanes' teardown abandons their calls.
    """
    options = run.options
    if len(lanes) == 1 and not lanes[0][0].arm.perturb:
        lane, samples = lanes[0]
        work = CaseWork(samples, path, run.judge, keep_frame=run.keep_frame, warn=run.warn, saver=run.saver,
                        trial=run.trial, arm=lane.name)
        return [await run_case(work, lane.caller, concurrency=options.concurrency, keep_going=options.keep_going,
                               sink=run.sink, order=options.order)]
    wants = [frozenset(s.sample_index for s in samples if not s.ignored) for _lane, samples in lanes]
    every = frozenset().union(*wants)
    wanted = [s for s in case_samples if s.sample_index in every]
    probe = CaseWork(wanted, path, run.judge, warn=run.warn, trial=run.trial)
    # One decode serves every lane, so all take frames in one order: a batch lane needs its
    # target's frames together (declaration order); time order is kept when no lane batches.
    order = DECLARATION if any(lane.caller.batch for lane, _s in lanes) else options.order
    tee = FrameTee(case_items(probe, wanted, order), [lane.arm for lane, _s in lanes], run.seed,
                   ARM_QUEUE_DEPTH + options.concurrency, wants, path)
    tee.start()
    tasks = []
    for position, (lane, samples) in enumerate(lanes):
        work = CaseWork(samples, path, run.judge, keep_frame=run.keep_frame, warn=run.warn, saver=run.saver,
                        trial=run.trial, arm=lane.name, frames=tee.source(position))
        tasks.append(asyncio.create_task(run_case(work, lane.caller, concurrency=options.concurrency,
                                                  keep_going=options.keep_going, sink=run.sink, order=order)))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
        if failed is not None:
            error = failed.exception()
            assert error is not None
            for lane, _samples in lanes:
                with contextlib.suppress(Exception):
                    await lane.caller.cancel_pending()
            raise error
        return [t.result() for t in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await tee.close()
