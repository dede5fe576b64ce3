"""Every file read back goes through the one strict loader: one attack per reader, through the CLI.

Readers: ``compare``, ``run --baseline``, ``report``, ``merge-reports``, ``review --report``,
``run --resume`` (checkpoints), ``run --cache`` (observation cache entries) and ``run`` with frame
locks. Attacks: NaN, Infinity, 1e999999, a huge integer, deep nesting, a lone surrogate, a key given
twice, a wrong field type, a missing key, an oversized file, a FIFO and a symlink to /dev/zero.
A damaged report, checkpoint or lock is exit 2 naming the file and what is wrong; a damaged cache
entry is a miss. FIFOs and devices run in a child process with a timeout, so a reader that blocks
fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cikit import ci_eval, set_overrides
from evalkit import ROOT, read_json, run_cli

from glasskit_eval.support import strictjson as sj

pytestmark = pytest.mark.e2e

SENTINEL = "@@ATTACK@@"
#: Value attacks: JSON text put where a value stood, and what the refusal says.
VALUES = {
    "nan": ("NaN", "NaN is not valid JSON"),
    "infinity": ("Infinity", "Infinity is not valid JSON"),
    "overflow": ("1e999999", "the number 1e999999 is out of range"),
    "huge_int": ("7" * 100_000, "an integer of 100000 digits is too long"),
    "deep": ("[" * 5000 + "]" * 5000, "levels deep"),
    "surrogate": ('"\\ud800"', "lone surrogate (U+D800)"),
    "duplicate_key": ('{"a": 1, "a": 2}', 'has the key "a" twice'),
}
FILES = ("oversized", "fifo", "devzero")
SCHEMA = ("wrong_type", "missing_key")
ATTACKS = (*VALUES, *SCHEMA, *FILES)


@dataclass
class World:
    eval_dir: Path
    report: Path
    shards: tuple[Path, Path]
    checkpoint: Path
    cache: Path
    cached_report: dict[str, Any]
    locked_eval: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("strict")
    eval_dir = ci_eval(base)
    report = base / "good.json"
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", report)[0] == 0
    shards = (base / "s1.json", base / "s2.json")
    for n, shard in enumerate(shards, 1):
        assert run_cli("run", "--eval-dir", eval_dir, "--shard", f"{n}/2", "--output-json", shard)[0] == 0
    # An adapter error with --keep-going keeps a resumable checkpoint.
    set_overrides(eval_dir, {"door/idx/0.5": "raise"})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    set_overrides(eval_dir, None)
    assert code == 1, err
    match = re.search(r"Checkpoint: (\S+)", err)
    assert match is not None, out + err
    checkpoint = Path(match.group(1))
    cache = base / "cache"
    assert run_cli("run", "--eval-dir", eval_dir, "--cache", cache)[0] == 0
    warm = base / "warm.json"
    assert run_cli("run", "--eval-dir", eval_dir, "--cache", cache, "--output-json", warm)[0] == 0
    locked = base / "locked"
    shutil.copytree(eval_dir, locked)
    shutil.rmtree(locked / "runs", ignore_errors=True)
    code, _out, err = run_cli("validate", "--eval-dir", locked, "--pin")
    assert code == 0, err
    return World(eval_dir, report, shards, checkpoint, cache, read_json(warm), locked)


def cli(*argv: str | Path, child: bool) -> tuple[int, str]:
    """Exit code and stderr; ``child`` runs it in a subprocess that must end within 60 s."""
    if not child:
        code, _out, err = run_cli(*argv)
        return code, err
    done = subprocess.run([sys.executable, "-m", "glasskit_eval", *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr


def damage_file(path: Path, attack: str, limit: int) -> None:
    """The file attacks: over ``limit`` (sparse), a FIFO, a symlink to /dev/zero."""
    if attack == "oversized":
        with open(path, "r+b") as handle:
            handle.truncate(limit + 1)
        return
    path.unlink()
    if attack == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


FILE_MESSAGES = {"oversized": "over the", "fifo": "is a FIFO (named pipe), not a regular file",
                 "devzero": "is a character device, not a regular file"}


def dumps_with(value: Any, attack: str) -> str:
    """``value`` as JSON with the sentinel string replaced by the attack's text."""
    text = json.dumps(value, indent=2)
    assert text.count(f'"{SENTINEL}"') == 1
    return text.replace(f'"{SENTINEL}"', VALUES[attack][0])


# --- reports ------------------------------------------------------------------------------------


def damaged_report(source: Path, into: Path, attack: str) -> Path:
    report = read_json(source)
    result = report["trials"][0]["results"][0]
    if attack in VALUES:
        result["observed"] = SENTINEL
        into.write_text(dumps_with(report, attack))
    elif attack == "wrong_type":
        result["sample_index"] = "0"
        into.write_text(json.dumps(report))
    elif attack == "missing_key":
        del report["summary"]["evaluated_attempts"]
        into.write_text(json.dumps(report))
    else:
        shutil.copy(source, into)
        damage_file(into, attack, sj.REPORT.max_bytes)
    return into


REPORT_MESSAGES = {**{k: m for k, (_t, m) in VALUES.items()}, **FILE_MESSAGES,
                   "wrong_type": "trials[0].results[0].sample_index: must be an integer, not a string",
                   "missing_key": "summary: lacks `evaluated_attempts`"}

Reader = Callable[[World, Path, Path, bool], tuple[int, str]]
REPORT_READERS: dict[str, Reader] = {
    "compare": lambda w, bad, tmp, child: cli("compare", bad, w.report, child=child),
    "baseline": lambda w, bad, tmp, child: cli("run", "--eval-dir", w.eval_dir, "--baseline", bad, child=child),
    "report": lambda w, bad, tmp, child: cli("report", bad, "--html", tmp / "page.html", child=child),
    "merge_reports": lambda w, bad, tmp, child: cli("merge-reports", bad, w.shards[1], child=child),
    # Refused before the server starts; in a child always, so a regression cannot serve forever.
    "review": lambda w, bad, tmp, child: cli("review", "--eval-dir", w.eval_dir, "--report", bad, "--no-open",
                                             child=True),
}


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("reader", REPORT_READERS)
def test_a_damaged_report_is_exit_2_naming_file_and_fault(world: World, tmp_path: Path, reader: str,
                                                          attack: str) -> None:
    source = world.shards[0] if reader == "merge_reports" else world.report
    bad = damaged_report(source, tmp_path / "bad.json", attack)
    checkpoints = sorted((world.eval_dir / "runs" / "checkpoints").iterdir())
    code, err = REPORT_READERS[reader](world, bad, tmp_path, attack in ("fifo", "devzero"))
    assert code == 2, err
    assert f"{bad}" in err and REPORT_MESSAGES[attack] in err, err
    assert "Traceback" not in err and not (tmp_path / "page.html").exists()
    # A bad --baseline is refused before the run starts (no checkpoint, so no adapter call).
    assert sorted((world.eval_dir / "runs" / "checkpoints").iterdir()) == checkpoints


#: Hostile numbers: valid JSON a float cannot hold, or times no run has; where they go and the refusal.
NUMBERS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "int_time": (lambda r: r["trials"][0]["results"][0].update(timestamp_s=10**400),
                 "timestamp_s: is an integer of 401 digits, out of range for a number"),
    "huge_durations": (lambda r: [x.update(evaluation_duration_seconds=1e308) for x in r["trials"][0]["results"]],
                       "evaluation_duration_seconds: is 1e+308, must be from 0 to 1e+09"),
    "negative_duration": (lambda r: r["summary"].update(duration_seconds=-1.0),
                          "summary.duration_seconds: is -1.0, must be from 0 to 1e+09"),
}


@pytest.mark.parametrize("attack", NUMBERS)
@pytest.mark.parametrize("reader", REPORT_READERS)
def test_a_report_with_hostile_numbers_is_exit_2_naming_the_field(world: World, tmp_path: Path, reader: str,
                                                                   attack: str) -> None:
    report = read_json(world.shards[0] if reader == "merge_reports" else world.report)
    change, message = NUMBERS[attack]
    change(report)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report))
    code, err = REPORT_READERS[reader](world, bad, tmp_path, False)
    assert code == 2, err
    assert f"{bad}" in err and message in err, err
    assert "Traceback" not in err and not (tmp_path / "page.html").exists()


# --- checkpoints ----------------------------------------------------------------------------------


def damaged_checkpoint(source: Path, into: Path, attack: str) -> Path:
    shutil.copytree(source, into)
    records = into / "records.jsonl"
    lines = records.read_bytes().split(b"\n")
    record = json.loads(lines[1].partition(b" ")[2])
    payload = record["payload"]
    if attack in FILES:
        damage_file(records, attack, sj.CHECKPOINT_RECORDS.max_bytes)
        return into
    if attack in VALUES:
        payload["observed"] = SENTINEL
        body = dumps_with(record, attack).replace("\n", "").encode()
    else:
        if attack == "wrong_type":
            payload["sample_index"] = "0"
        else:
            del payload["status"]
        body = json.dumps(record).encode()
    lines[1] = b"%08x %s" % (zlib.crc32(body), body)  # a valid checksum: edited, not torn
    records.write_bytes(b"\n".join(lines))
    return into


@pytest.mark.parametrize("attack", ATTACKS)
def test_resuming_a_damaged_checkpoint_is_exit_2_naming_the_file(world: World, tmp_path: Path, attack: str) -> None:
    copy = damaged_checkpoint(world.checkpoint, tmp_path / "checkpoint", attack)
    code, err = cli("run", "--resume", copy, child=attack in ("fifo", "devzero"))
    assert code == 2, err
    messages = {**FILE_MESSAGES, "wrong_type": "is damaged (sample_index: must be an integer, not a string)",
                "missing_key": "is damaged (the top level: lacks `status`)"}
    expected = messages.get(attack) or VALUES[attack][1]
    assert str(copy) in err and expected in err and "start a new run" in err, err
    assert "Traceback" not in err


def test_a_checkpoint_manifest_that_is_a_fifo_is_refused_without_blocking(world: World, tmp_path: Path) -> None:
    copy = tmp_path / "checkpoint"
    shutil.copytree(world.checkpoint, copy)
    damage_file(copy / "manifest.json", "fifo", 0)
    code, err = cli("run", "--resume", copy, child=True)
    assert code == 2 and f"checkpoint manifest {copy / 'manifest.json'}: is a FIFO" in err, err


# --- observation cache entries --------------------------------------------------------------------


def frame_index(entry: object) -> bool:
    return isinstance(entry, dict) and bool({"page", "file"} & entry.keys())


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_damaged_cache_entry_is_a_miss(world: World, tmp_path: Path, attack: str) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(world.cache, cache, symlinks=True)
    # An observation's entry (not one of the frame index's pages, witnesses or video hashes).
    entry = next(e for e in sorted((cache / "v1").glob("*/*.json")) if not frame_index(read_json(e)["observation"]))
    data = read_json(entry)
    if attack in VALUES:
        entry.write_text(dumps_with({"key": data["key"], "observation": SENTINEL}, attack))
    elif attack == "wrong_type":
        entry.write_text(json.dumps({"key": 5, "observation": data["observation"]}))
    elif attack == "missing_key":
        entry.write_text(json.dumps({"key": data["key"]}))
    else:
        damage_file(entry, attack, sj.CACHE_ENTRY.max_bytes)
    out = tmp_path / "r.json"
    code, err = cli("run", "--eval-dir", world.eval_dir, "--cache", cache, "--output-json", out,
                    child=attack in ("fifo", "devzero"))
    warm = world.cached_report
    assert code == 0 and "Traceback" not in err, err
    report = read_json(out)
    stats = report["observation_cache"]
    assert warm["observation_cache"]["misses"] == 0 and stats["misses"] >= 1
    assert stats["hits"] + stats["misses"] == warm["observation_cache"]["hits"]
    # The miss called the adapter again and gave the same outcome; the entry is whole again.
    assert report["summary"]["passed_attempts"] == warm["summary"]["passed_attempts"]
    assert entry.is_file() and not entry.is_symlink() and read_json(entry)["key"] == data["key"]


# --- frame locks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_damaged_frame_lock_is_exit_2_naming_the_lock(world: World, tmp_path: Path, attack: str) -> None:
    eval_dir = tmp_path / "eval"
    shutil.copytree(world.locked_eval, eval_dir)
    lock = eval_dir / "cases" / "door.frames.lock"
    lines = lock.read_text().split("\n")
    pin = json.loads(lines[1])
    if attack in VALUES:
        pin["frame_index"] = SENTINEL
        lines[1] = dumps_with(pin, attack).replace("\n", "")
    elif attack == "wrong_type":
        pin["time"] = 5
    elif attack == "missing_key":
        del pin["phash"]
    if attack not in VALUES and attack not in FILES:
        lines[1] = json.dumps(pin)
    lock.write_text("\n".join(lines))
    if attack in FILES:
        damage_file(lock, attack, sj.FRAME_LOCK.max_bytes)
    code, err = cli("run", "--eval-dir", eval_dir, child=attack in ("fifo", "devzero"))
    assert code == 2, err
    messages = {**FILE_MESSAGES, "wrong_type": "time: must be a string, not a number",
                "missing_key": "lacks `phash`"}
    expected = messages.get(attack) or VALUES[attack][1]
    assert str(lock) in err and expected in err and "Traceback" not in err, err
    assert not (eval_dir / "runs" / "checkpoints").exists() or not any((eval_dir / "runs" / "checkpoints").iterdir())


# --- artifact images --------------------------------------------------------------------------------


def _report_naming(world: World, tmp_path: Path, image: Path) -> Path:
    report = read_json(world.report)
    result = report["trials"][0]["results"][0]
    result.update(status="failed", frame_index=5, artifact_image=str(image))
    path = tmp_path / "named.json"
    path.write_text(json.dumps(report))
    return path


@pytest.mark.parametrize("attack", ["devzero", "fifo", "huge", "not_an_image", "control"])
def test_report_embeds_only_a_regular_image_under_the_limit(world: World, tmp_path: Path, attack: str) -> None:
    from PIL import Image

    from glasskit_eval.reports.thumbnails import MAX_ARTIFACT_BYTES

    image = tmp_path / "frame.jpg"
    Image.new("RGB", (64, 36), (200, 10, 10)).save(image, format="JPEG")
    if attack == "huge":
        with open(image, "r+b") as handle:
            handle.truncate(MAX_ARTIFACT_BYTES + 1)  # a valid JPEG start, then zeros: over the limit
    elif attack == "not_an_image":
        image.write_text("#!/bin/sh\necho not a picture\n")
    elif attack in ("devzero", "fifo"):
        damage_file(image, attack, 0)
    page = tmp_path / "page.html"
    code, err = cli("report", _report_naming(world, tmp_path, image), "--html", page, child=True)
    assert code == 0 and "Traceback" not in err, err
    embedded = page.read_text().count("data:image/jpeg;base64,")
    assert embedded == (1 if attack == "control" else 0)
