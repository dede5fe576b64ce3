"""The one atomic writer (glasskit_eval.support.fsio): never renames over devices, pipes or links."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from evalkit import make_eval, run_cli

from glasskit_eval.errors import OutputError
from glasskit_eval.support.fsio import FileLock, replace_file, write_bytes_atomic, write_text_atomic

CASE = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5]\n      expect: true\n"
ADAPTER = "class E:\n    def evaluate(self, sample, target):\n        return True\n\ndef create_evaluator(config):\n    return E()\n"


def _fifo_reader(path: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as handle:
            got.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def test_a_new_file_and_a_replaced_one_keep_sensible_modes(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "report.json"
    write_text_atomic(target, "one")
    os.chmod(target, 0o640)
    write_text_atomic(target, "two")
    assert target.read_text() == "two" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]  # no temp file left


def test_a_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    shared = tmp_path / "shared.yaml"
    shared.write_text("old")
    link = tmp_path / "case.yaml"
    link.symlink_to(shared)
    replace_file(link, b"new")
    assert link.is_symlink() and shared.read_text() == "new"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = _fifo_reader(fifo)
    write_bytes_atomic(fifo, b"payload")
    thread.join(10)
    assert got == [b"payload"] and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_written_through_not_replaced(tmp_path: Path) -> None:
    # Our own null device: a regression must not be able to replace the machine's /dev/null.
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    write_text_atomic(null, "report")
    assert stat.S_ISCHR(null.stat().st_mode)
    full = tmp_path / "full"
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    with pytest.raises(OutputError, match="No space left"):
        write_text_atomic(full, "report")
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="directory"):
        write_text_atomic(tmp_path, "x")


def test_run_reports_into_a_fifo_and_zipapps_into_a_device(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, ADAPTER)
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    thread, got = _fifo_reader(fifo)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", fifo)
    thread.join(10)
    assert code == 0, out + err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and b'"report_type": "eval_run"' in got[0]
    if os.geteuid() == 0:
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        code, out, err = run_cli("build-zipapp", null)
        assert code == 0, out + err
        assert stat.S_ISCHR(null.stat().st_mode)


def test_file_lock_is_exclusive(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path / "l"), FileLock(tmp_path / "l")
    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)
    first.release()
    assert second.acquire(blocking=False)
    second.release(remove=True)
    assert not (tmp_path / "l").exists()
