"""Progress while a case runs: a live line on a terminal, heartbeat lines in a log.

The text is made by pure functions (:func:`live_line`, :func:`heartbeat_line`); the
:class:`ProgressDisplay` decides when to write it. On a terminal (stderr is a TTY and
``TERM`` is not ``dumb``) one line on stderr is redrawn at most :data:`REDRAW_S` apart and
cleared before any other line is printed, so output never interleaves with it. Anywhere
else nothing is redrawn: a heartbeat line goes to the log at most every
:data:`HEARTBEAT_MIN_S` seconds while samples finish, and at least every
:data:`HEARTBEAT_MAX_S` seconds while a case is running at all (CI services kill jobs that
are silent for minutes).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from ..results import SampleResult, Status
from ..support.interrupts import note_open_line
from .tables import plural

#: Least time between two redraws of the live line (at most 10 a second).
REDRAW_S = 0.1
#: A heartbeat is printed no sooner than this after the last one when samples finished since.
HEARTBEAT_MIN_S = 10.0
#: ... and no later than this after the last one while a case runs, even if nothing finished.
HEARTBEAT_MAX_S = 30.0

_CLEAR = "\r\033[K"


@dataclass
class CaseProgress:
    """Counts of the case that is running now."""

    case: str
    #: One-based position of the case in the run, and the number of cases.
    number: int
    cases: int
    total: int
    trial: int
    trials: int
    started: float
    done: int = 0
    failed: int = 0
    errors: int = 0
    target: str | None = None
    #: Stream targets fed after the samples (their frames are counted once they start).
    streams: int = 0
    frames_fed: int = 0
    frames_total: int = 0
    #: When the first stream frame went out (None: the streams have not started).
    streams_started: float | None = None

    @property
    def streaming(self) -> bool:
        return self.streams_started is not None

    def fed(self, fed: int, total: int, now: float) -> None:
        if self.streams_started is None:
            self.streams_started = now
        self.frames_fed, self.frames_total = fed, total

    @property
    def work_done(self) -> int:
        """Samples finished plus frames fed: whether anything moved since a heartbeat."""
        return self.done + self.frames_fed

    def add(self, result: SampleResult) -> None:
        self.done += 1
        self.target = result.target
        if result.status is Status.FAILED:
            self.failed += 1
        elif result.status is Status.ERROR:
            self.errors += 1


def clock(seconds: float, *, wide: bool = False) -> str:
    """``m:ss`` (``mm:ss`` when ``wide``, so log lines align), or ``h:mm:ss`` from an hour on."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}" if wide else f"{minutes}:{secs:02d}"


def remaining(p: CaseProgress, now: float) -> float | None:
    """Seconds the case still needs at its pace so far (None before its first sample or frame).

    While its streams are fed, at the streams' own pace (frames go one at a time per stream,
    samples side by side: one pace says nothing of the other).
    """
    if p.streaming:
        assert p.streams_started is not None
        if p.frames_fed == 0:
            return None
        return (now - p.streams_started) / p.frames_fed * max(0, p.frames_total - p.frames_fed)
    if p.done == 0 or p.done >= p.total:
        return None if p.done == 0 else 0.0
    return (now - p.started) / p.done * (p.total - p.done)


def _samples_shown(p: CaseProgress) -> bool:
    return p.total > 0 or not p.streams


def _frames(p: CaseProgress) -> str:
    return f"{p.frames_fed}/{p.frames_total} stream frames" if p.streaming else "streams next"


def live_line(p: CaseProgress, elapsed: float, now: float, sep: str = " · ", width: int | None = None) -> str:
    """``case 2/5 walk · target lights · 187/442 samples · 3 failed · 0 errors · 0:14 elapsed · ~0:19 left``.

    A case with stream targets adds ``312/750 stream frames`` once they are fed (``streams next``
    before); its ETA then covers the frames left. While samples run, ``+ streams`` says the ETA does
    not yet count streams whose pace is unknown. Within ``width``, the least telling parts go first
    (the target, a zero error count, the failures), so the counts and the time left stay.
    """
    # (text, rank): a part of higher rank is dropped first when the line is too wide.
    parts: list[tuple[str, int]] = []
    if p.trials > 1:
        parts.append((f"trial {p.trial}/{p.trials}", 0))
    parts.append((f"case {p.number}/{p.cases} {p.case}", 0))
    if p.target is not None and not p.streaming:
        parts.append((f"target {p.target}", 4))
    if _samples_shown(p):
        # Once the streams run, the samples are done: their count gives way before the clock does.
        parts += [(f"{p.done}/{p.total} samples", 2 if p.streaming else 1), (f"{p.failed} failed", 2 if p.failed else 3),
                  (plural(p.errors, "error"), 2 if p.errors else 3)]
    if p.streams or p.streaming:
        parts.append((_frames(p), 0))
    parts.append((f"{clock(elapsed)} elapsed", 1))
    left = remaining(p, now)
    if left is not None:
        parts.append((f"~{clock(left)} left" + (" + streams" if p.streams and not p.streaming else ""), 0))
    line = sep.join(text for text, _rank in parts)
    for rank in (4, 3, 2, 1):
        if width is None or len(line) <= width:
            break
        parts = [(text, r) for text, r in parts if r != rank]
        line = sep.join(text for text, _rank in parts)
    return line


def heartbeat_line(p: CaseProgress, elapsed: float) -> str:
    """``[00:40] walkthrough: 187/442 samples, 3 failed`` (and the errors, when there are any; and the stream frames)."""
    trial = f" (trial {p.trial}/{p.trials})" if p.trials > 1 else ""
    errors = f", {plural(p.errors, 'error')}" if p.errors else ""
    parts = [f"{p.done}/{p.total} samples, {p.failed} failed{errors}"] if _samples_shown(p) else []
    if p.streaming:
        parts.append(_frames(p))
    return f"[{clock(elapsed, wide=True)}] {p.case}{trial}: {', '.join(parts)}"


def is_terminal(stream: TextIO) -> bool:
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def terminal_columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (80 when it does not say)."""
    return _columns(stream)


def _columns(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns if columns > 0 else 80  # a new pseudo-terminal reports 0


class ProgressDisplay:
    """When to show what; ``write_above`` prints one line of other output without a clash."""

    def __init__(self, out: TextIO, err: TextIO, *, live: bool | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.err = err
        self.live = is_terminal(err) if live is None else live
        self.now = now
        self.run_started = now()
        self.case: CaseProgress | None = None
        self._shown = ""
        self._drawn_at = float("-inf")
        self._beat_at = 0.0
        self._beat_done = 0
        encoding = (getattr(err, "encoding", None) or "").lower().replace("-", "")
        self._sep = " · " if encoding.startswith("utf") else " | "
        # A Python adapter prints from its worker threads (see adapter_output): one writer at a time.
        self._lock = threading.RLock()

    # -- events

    def case_started(self, case: str, number: int, cases: int, total: int, trial: int, trials: int,
                     streams: int = 0) -> None:
        now = self.now()
        self.case = CaseProgress(case, number, cases, total, trial, trials, started=now, streams=streams)
        self._beat_at = now
        self._beat_done = 0
        self._draw(force=True)

    def stream_fed(self, fed: int, total: int) -> None:
        """The running case's streams fed ``fed`` of ``total`` frames (see :meth:`case_started`)."""
        if self.case is None:
            return
        first = not self.case.streaming
        self.case.fed(fed, total, self.now())
        if first and self.live:
            self._draw(force=True)
        else:
            self.tick()

    def result(self, result: SampleResult) -> None:
        if self.case is None:
            return
        self.case.add(result)
        self.tick()

    def tick(self) -> None:
        """Called often (results, and a timer while calls run); writes only when it is time."""
        if self.case is None:
            return
        if self.live:
            self._draw()
            return
        now = self.now()
        since = now - self._beat_at
        if since >= HEARTBEAT_MAX_S or (since >= HEARTBEAT_MIN_S and self.case.work_done != self._beat_done):
            self._beat_at = now
            self._beat_done = self.case.work_done
            self._emit(heartbeat_line(self.case, now - self.run_started))

    def case_finished(self) -> None:
        self.case = None
        self.clear()

    # -- output

    def write_above(self, text: str, stream: TextIO | None = None) -> None:
        """Print ``text`` (one or more lines) to ``stream`` (default ``out``), above the live line if one is shown.

        The line comes back at once unless it was drawn less than :data:`REDRAW_S` ago; then
        the next tick brings it back, so a burst of lines (``--verbose``) costs no more redraws.
        """
        with self._lock:
            shown = self._shown
            if shown:
                self.clear()
            self._emit(text, stream or self.out)
            if shown:
                self._draw()

    def clear(self) -> None:
        with self._lock:
            if self._shown:
                self.err.write(_CLEAR)
                self.err.flush()
                self._shown = ""
                note_open_line(False)

    def _emit(self, text: str, stream: TextIO | None = None) -> None:
        print(text, file=stream or self.out, flush=True)

    def _draw(self, force: bool = False) -> None:
        if not self.live or self.case is None:
            return
        with self._lock:
            now = self.now()
            if not force and now - self._drawn_at < REDRAW_S:
                return
            width = max(1, _columns(self.err) - 1)
            line = live_line(self.case, now - self.run_started, now, self._sep, width)
            # A line wider than the terminal wraps, and \r then redraws only its last part.
            line = line[:width]
            # Ctrl+C's message must not be glued onto it (see support.interrupts). Said before the
            # line is written: a signal handled between the write and this (another thread may be
            # drawing) would otherwise see the line as closed; a newline too many is harmless.
            note_open_line(True)
            self.err.write(_CLEAR + line)
            self.err.flush()
            self._shown = line
            self._drawn_at = now
