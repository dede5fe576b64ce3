"""``run --early-stop --cache`` through the real CLI: blocks the observation cache answers whole are read
before any call (no adapter call, no frame decoded), the rest in the seeded order, a resume reads the
same blocks, and a frame index entry pointing at other pixels is never believed.

The adapter judges the pixels alone (a grey level that is a multiple of 31 fails), so a cached
observation is what a call would say, and a full run is the truth to check decisions against."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from earlystopkit import calls, make_eval, make_video
from evalkit import interrupt_when_marked, read_json, run_cli

import glasskit_eval.video.frames as frames
from glasskit_eval.evaluation.observation_cache import PAGE_FRAMES, decode_identity
from glasskit_eval.evaluation.observation_store import ObservationStore, key_digest
from glasskit_eval.support.fsio import sha256_file

pytestmark = pytest.mark.e2e

PLANNED = 600

ADAPTER = """
import pathlib, time

def create_evaluator(config):
    log = pathlib.Path(config.config["log"])
    mark = config.config.get("mark")
    if mark is not None and pathlib.Path(mark).exists():
        mark = None  # a resume (or a warm-up run): the kill has happened
    made = []

    def evaluate(sample, target):
        with log.open("a") as f:
            f.write(f"{round(sample.timestamp_s * 10)}\\n")
        made.append(sample.sample_index)
        if mark is not None and len(made) >= config.config["mark_after"]:
            pathlib.Path(mark).touch()
            time.sleep(0.05)
        return {"ok": sample.image.getpixel((0, 0))[0] % 31 != 0}
    return evaluate
"""


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_video(tmp_path_factory.mktemp("video") / "long.mp4", PLANNED // 10)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Frames the engine decodes in this process (both of its decode paths, counted as they are yielded)."""
    count = [0]
    for name in ("decode_pieces", "decode_sequential"):
        real = getattr(frames, name)

        def counting(*args: Any, _real: Any = real, **kwargs: Any) -> Iterator[Any]:
            for item in _real(*args, **kwargs):
                count[0] += 1
                yield item

        monkeypatch.setattr(frames, name, counting)
    yield count


def pixel_eval(root: Path, video: Path, *, mark_after: int | None = None) -> Path:
    eval_dir = make_eval(root, video, [1] * PLANNED, mark_after=mark_after)
    (eval_dir / "adapter.py").write_text(ADAPTER)
    return eval_dir


def run(root: Path, eval_dir: Path, name: str, *extra: str | Path, early: bool = True) -> tuple[int, str, dict]:
    report = root / f"{name}.json"
    (root / "calls.log").unlink(missing_ok=True)
    args = ["--early-stop", "--early-stop-block", "0.5"] if early else []
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--cache", root / "cache", *args,
                             "--output-json", report, *extra)
    assert code in (0, 1), err
    return code, out, read_json(report)


def statuses(report: dict, trial: int = 0, arm: str | None = None) -> dict[int, str]:
    return {r["sample_index"]: r["status"] for r in report["trials"][trial]["results"]
            if r.get("arm") in (arm, None) or arm is None}


def test_a_warm_cache_decides_with_no_call_and_no_frame_decoded(tmp_path: Path, video: Path,
                                                               decoded: list[int]) -> None:
    eval_dir = pixel_eval(tmp_path, video)
    _code, _out, full = run(tmp_path, eval_dir, "full", early=False)
    assert decoded[0] >= PLANNED
    truth = statuses(full)
    passes = sum(1 for s in truth.values() if s == "passed")
    assert 0.9 < passes / PLANNED < 1

    decoded[0] = 0
    code, out, report = run(tmp_path, eval_dir, "early", "--html", tmp_path / "report.html")
    assert code == 0 and calls(tmp_path) == [] and decoded[0] == 0
    # The HTML report shows the samples read ahead (without pictures: no frame was decoded).
    assert f"<dt>Passed</dt><dd>{passes}<" in (tmp_path / "report.html").read_text()
    block = report["early_stop"]
    assert (block["samples_cached"], block["samples_evaluated"], block["samples_planned"]) == (PLANNED,) * 3
    (gate,) = block["gates"]
    assert (gate["verdict"], gate["low"], gate["high"], gate["cached"]) == (
        "pass", passes / PLANNED, passes / PLANNED, PLANNED)
    assert statuses(report) == truth
    results = report["trials"][0]["results"]
    assert all(r["cached"] for r in results)
    # The frame each result names is the one a decode gives its time (the grey ramp: frame = time * 10).
    assert all(r["frame_index"] == round(r["timestamp_s"] * 10) for r in results)
    assert "600 samples read from the cache before any call" in out
    assert report["observation_cache"]["hits"] == PLANNED


def test_a_partly_warm_cache_calls_only_what_it_lacks(tmp_path: Path, video: Path) -> None:
    eval_dir = pixel_eval(tmp_path, video)
    # A lax gate decides after a few blocks: the cache learns a few dozen of the video's greys.
    run(tmp_path, eval_dir, "first", "--seed", "1", "--min-pass-rate", "0.5")
    before = set(calls(tmp_path))
    assert 0 < len(before) < PLANNED
    code, out, report = run(tmp_path, eval_dir, "second")
    made = calls(tmp_path)
    block = report["early_stop"]
    assert code == 0 and 0 < block["samples_cached"] < block["samples_evaluated"]
    # A call only for pixels the cache lacks; never for a sample the first run called.
    assert not before & set(made) and len(made) == report["observation_cache"]["misses"]
    (gate,) = block["gates"]
    assert gate["cached"] == block["samples_cached"] and gate["verdict"] == "pass"
    if gate["early"]:
        assert f"{block['samples_cached']:,} of them cached" in out
    _code, _out, full = run(tmp_path, eval_dir, "full", early=False)
    truth = statuses(full)
    rate = sum(1 for s in truth.values() if s == "passed") / PLANNED
    assert gate["low"] <= rate <= gate["high"]
    got = statuses(report)
    assert {i: s for i, s in got.items() if s != "not_evaluated"} == {i: truth[i] for i in got
                                                                       if got[i] != "not_evaluated"}


def index_page(cache: Path, video: Path, frame: int) -> tuple[dict, Path]:
    """The frame index page holding ``frame``, and its file."""
    page = {"decoder": decode_identity(), "page": frame // PAGE_FRAMES, "video": sha256_file(video.resolve())}
    digest = key_digest({"frame_page": page})
    return page, cache / "v1" / digest[:2] / f"{digest}.json"


def test_a_tampered_frame_index_entry_is_never_served(tmp_path: Path, video: Path, decoded: list[int]) -> None:
    eval_dir = pixel_eval(tmp_path, video)
    _code, _out, full = run(tmp_path, eval_dir, "full", early=False)
    truth = statuses(full)
    passes = sum(1 for s in truth.values() if s == "passed")
    # Two frames of one page: `good` passes, `bad` fails.
    good = next(i for i, s in sorted(truth.items()) if s == "passed" and i > 300)
    bad = next(i for i, s in sorted(truth.items()) if s == "failed" and i // PAGE_FRAMES == good // PAGE_FRAMES)
    cache = tmp_path / "cache"
    page, path = index_page(cache, video, good)
    entry = read_json(path)
    pixels = entry["observation"]["pixels"]
    right = pixels[str(good)]
    # Frame `good` now claims the pixels of frame `bad`, whose cached observation fails.
    pixels[str(good)] = pixels[str(bad)]
    path.write_text(json.dumps(entry))
    store = ObservationStore(cache)
    assert store.frame_page(page) is None  # no run ever wrote (or witnessed) that page

    # A gate at exactly the true rate cannot be decided without the page's blocks: they are decoded.
    decoded[0] = 0
    code, _out, report = run(tmp_path, eval_dir, "early", "--min-pass-rate", repr(passes / PLANNED))
    assert code == 0 and calls(tmp_path) == [] and decoded[0] > 0
    (gate,) = report["early_stop"]["gates"]
    assert (gate["verdict"], gate["low"], gate["high"]) == ("pass", passes / PLANNED, passes / PLANNED)
    assert gate["cached"] <= PLANNED - PAGE_FRAMES and statuses(report) == truth
    # The decodes wrote the page again, with the right pixels.
    assert (store.frame_page(page) or {}).get(good) == right


def with_arm(root: Path, eval_dir: Path) -> None:
    """config.yaml declares arm `worse`: the same adapter with a config of its own (so entries of its own)."""
    arm = {"adapter_config": {"log": str(root / "worse.log")}}
    config = eval_dir / "config.yaml"
    config.write_text(config.read_text() + f"arms:\n  worse: {json.dumps(arm)}\n")


@pytest.mark.parametrize("arms", [False, True])
def test_sigkill_and_resume_read_the_same_blocks_ahead(tmp_path: Path, video: Path, arms: bool) -> None:
    """The interrupted attempt adds cache entries; the resume still reads only the blocks fixed at its start."""
    reports = {}
    extra = ["--arm", "worse"] if arms else []
    for name in ("whole", "killed"):
        root = tmp_path / name
        eval_dir = pixel_eval(root, video, mark_after=5)
        if arms:
            with_arm(root, eval_dir)
        (root / "mark").touch()  # the warm-up run goes at full speed
        run(root, eval_dir, "warm", "--seed", "1", "--min-pass-rate", "0.5", *extra)
        args = ["run", "--eval-dir", str(eval_dir), "--cache", str(root / "cache"), "--early-stop",
                "--early-stop-block", "0.5", "--output-json", str(root / "report.json"), *extra]
        if name == "whole":
            code, _out, err = run_cli(*args)
            assert code == 0, err
        else:
            (root / "mark").unlink()
            (root / "calls.log").unlink()
            code, err = interrupt_when_marked(args, root / "mark", signal.SIGKILL)
            assert code == -signal.SIGKILL, err
            killed = calls(root)
            worse = root / "worse.log"
            called = set(killed) | ({int(n) for n in worse.read_text().split()} if worse.exists() else set())
            (checkpoint,) = [c for c in (eval_dir / "runs" / "checkpoints").iterdir()
                             if read_json(c / "manifest.json")["status"] == "in_progress"]
            manifest = read_json(checkpoint / "manifest.json")
            assert sorted(manifest["read_ahead"]["1"]) == (["control", "worse"] if arms else [""])
            code, _out, err = run_cli("run", "--resume", checkpoint)
            assert code == 0, err
            # Only the call in flight when the kill came is made again.
            assert not set(killed[:-1]) & set(calls(root)[len(killed):])
        reports[name] = read_json(root / "report.json")
    whole, resumed = reports["whole"], reports["killed"]
    assert resumed["checkpoint"] is None or resumed["checkpoint"]["resumed"]
    assert resumed["early_stop"] == whole["early_stop"] and whole["early_stop"]["samples_cached"] > 0
    for report in (whole, resumed):
        for result in report["trials"][0]["results"]:
            result.pop("evaluation_duration_seconds", None)
    for mine, theirs in zip(resumed["trials"][0]["results"], whole["trials"][0]["results"], strict=True):
        if mine.get("cached") and not theirs.get("cached"):
            # The call in flight at the kill: its observation reached the cache before its result
            # reached the checkpoint, so the resume answers it from the cache.
            assert round(mine["timestamp_s"] * 10) in called
            del mine["cached"]
    assert resumed["trials"][0]["results"] == whole["trials"][0]["results"]


def test_each_arm_and_each_trial_reads_ahead_only_its_own_entries(tmp_path: Path, video: Path) -> None:
    """A plain run's entries answer the control arm and trial 1; the other arm and trial 2 key their own."""
    eval_dir = pixel_eval(tmp_path, video)
    run(tmp_path, eval_dir, "full", early=False)
    (tmp_path / "worse.json").write_text("[]")
    arm = {"adapter_config": {"outcomes": str(tmp_path / "worse.json"), "log": str(tmp_path / "worse.log")}}
    config = eval_dir / "config.yaml"
    config.write_text(config.read_text() + f"arms:\n  worse: {json.dumps(arm)}\n")
    code, _out, report = run(tmp_path, eval_dir, "arms", "--arm", "worse")
    assert code == 0 and calls(tmp_path) == [] and (tmp_path / "worse.log").exists()
    gates = {g["name"]: g for g in report["early_stop"]["gates"]}
    assert gates["control/eval_min_pass_rate"]["cached"] == PLANNED == report["early_stop"]["samples_cached"]
    assert gates["worse/eval_min_pass_rate"]["cached"] == 0
    assert gates["worse/eval_min_pass_rate"]["verdict"] == gates["control/eval_min_pass_rate"]["verdict"] == "pass"

    os.unlink(tmp_path / "worse.log")
    config.write_text(config.read_text().split("arms:")[0])
    code, _out, report = run(tmp_path, eval_dir, "repeat", "--repeat", "2")
    assert code == 0
    first, _second = report["trials"]
    assert all(r["cached"] for r in first["results"])
    # Trial 2 keys its own entries: none were there before it, so it read nothing ahead.
    assert [(g["trial"], g["cached"]) for g in report["early_stop"]["gates"]] == [(1, PLANNED), (2, 0)]
    assert report["early_stop"]["samples_cached"] == PLANNED
    assert len(calls(tmp_path)) == report["observation_cache"]["misses"] > 0


CLIP_ADAPTER = """
import pathlib

def create_evaluator(config):
    log = pathlib.Path(config.config["log"])

    def evaluate(sample, target):
        with log.open("a") as f:
            f.write(f"{round(sample.timestamp_s * 10)}\\n")
        greys = [f.image.getpixel((0, 0))[0] for f in sample.frames]
        return {"ok": len(greys) == 3 and greys[-1] % 31 != 0}
    return evaluate
"""


def test_clip_samples_are_read_ahead_too(tmp_path: Path, video: Path, decoded: list[int]) -> None:
    """Every frame of a clip comes from the frame index: a warm run decodes none of them."""
    eval_dir = pixel_eval(tmp_path, video)
    (eval_dir / "adapter.py").write_text(CLIP_ADAPTER)
    case = eval_dir / "cases" / "long.yaml"
    case.write_text(case.read_text().replace("      every_s: 0.1\n",
                                             "      every_s: 0.1\n      clip: {before_s: 0.2, every_s: 0.1}\n")
                    .replace("range: [0,", "range: [0.2,"))
    _code, _out, full = run(tmp_path, eval_dir, "full", early=False)
    assert calls(tmp_path)
    decoded[0] = 0
    code, _out, report = run(tmp_path, eval_dir, "early")
    assert code in (0, 1) and calls(tmp_path) == [] and decoded[0] == 0
    planned = len(full["trials"][0]["results"])
    assert report["early_stop"]["samples_cached"] == planned
    assert statuses(report) == statuses(full)
    assert all(r["clip"] == f["clip"] for r, f in zip(report["trials"][0]["results"], full["trials"][0]["results"]))
