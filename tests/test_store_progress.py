"""Download progress: the line's text, throttled redraws, and drawing only on a terminal."""

from __future__ import annotations

import io
import os

from glasskit_eval.store.progress import TerminalProgress, progress_line, terminal_progress

MIB = 1024 * 1024


def test_progress_line_says_done_total_percent_and_rate() -> None:
    assert progress_line("  s:clip", 45 * MIB, 120 * MIB, 10.5 * MIB) == \
        "  s:clip: 45.0 MiB of 120.0 MiB (37%), 10.5 MiB/s"
    assert progress_line("x", 2048, None, None) == "x: 2.0 KiB"
    assert progress_line("x", 10, 0, None) == "x: 10 B"  # an empty object: no division by zero


def test_redraws_are_throttled_but_the_last_state_is_always_drawn() -> None:
    now = [0.0]
    screen = io.StringIO()
    progress = TerminalProgress(screen, "v", interval_s=1.0, clock=lambda: now[0])
    for done in range(0, 10 * MIB, MIB):
        now[0] += 0.25
        progress.update(done, 10 * MIB)
    progress.close()
    frames = screen.getvalue().split("\r")[1:]
    assert 2 <= len(frames) <= 5  # 40 updates over 2.5 s at most one a second, plus the last
    assert frames[-1].startswith("v: 9.0 MiB of 10.0 MiB (90%)") and frames[-1].endswith("\n")
    progress.close()  # a second close draws nothing more
    assert screen.getvalue().count("\n") == 1


def test_a_shorter_line_blanks_what_the_longer_one_left() -> None:
    screen = io.StringIO()
    progress = TerminalProgress(screen, "v", interval_s=0, clock=lambda: 0.0)
    progress.update(1023, None)
    progress.update(1024, None)
    first, second = screen.getvalue().split("\r")[1:]
    assert first == "v: 1023 B" and second == "v: 1.0 KiB".ljust(len(first))


def test_resumed_bytes_do_not_inflate_the_rate() -> None:
    now = [0.0]
    screen = io.StringIO()
    progress = TerminalProgress(screen, "v", interval_s=0, clock=lambda: now[0])
    progress.update(100 * MIB, 101 * MIB)  # 100 MiB were on disk from an earlier run
    now[0] = 1.0
    progress.update(101 * MIB, 101 * MIB)
    assert screen.getvalue().split("\r")[-1].endswith(", 1.0 MiB/s")


def read_all(master: int) -> bytes:
    """Everything written to a pty whose other end is closed (one read may return only part)."""
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1024)
        except OSError:  # EIO: the other end is closed and nothing is left
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_progress_is_drawn_only_on_a_terminal() -> None:
    assert terminal_progress(io.StringIO(), "v") is None
    assert terminal_progress(None, "v") is None
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=True) as tty:
            progress = terminal_progress(tty, "v")
            assert isinstance(progress, TerminalProgress)
            progress.update(5, 10)
            progress.close()
            closed = tty
        assert terminal_progress(closed, "v") is None  # a closed stream is not a terminal
        shown = read_all(master).decode().replace("\r\n", "\n")
        assert shown == "\rv: 5 B of 10 B (50%)" * 2 + "\n"  # drawn, then drawn once more when closed
    finally:
        os.close(master)
