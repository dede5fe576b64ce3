"""``run --cache``: observations reused by content, through the real CLI, adapters and videos."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, TESTS, VIDEOS, make_eval, read_json, run_cli
from PIL import Image
from reencode import reencode

from glasskit_eval.evaluation.observation_cache import command_identity, python_identity
from glasskit_eval.evaluation.observation_store import (
    ObservationStore,
    default_observation_dir,
    key_digest,
)
from glasskit_eval.results import SampleResult, Status

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  index:
    config: {detail: high}
    samples:
    - at: [0.0, 0.5, 1.0]
      field: index
      expect: 5
    - range: [1.2, 1.8]
      every_s: 0.2
      field: index
      expect: 14
  second:
    samples:
    - at: 0.5
      field: index
      expect: 5
"""

#: Reads the frame index from the pixels and logs each call, so tests count adapter calls.
ADAPTER = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

LOG = Path(__file__).parent / "calls.log"

def create_evaluator(config):
    return Reader(config.config.get("offset", 0))

class Reader:
    def __init__(self, offset):
        self.offset = offset

    def evaluate(self, sample, target):
        with LOG.open("a") as log:
            log.write(f"{{target.id}} {{sample.timestamp_s}}\\n")
        return {{"index": read_frame_index(sample.image) + self.offset}}
"""


def calls(eval_dir: Path) -> int:
    log = eval_dir / "calls.log"
    if not log.exists():
        return 0
    count = len(log.read_text().splitlines())
    log.unlink()
    return count


def run(eval_dir: Path, cache: Path, *extra: str | Path) -> tuple[list[dict[str, Any]], str]:
    report = eval_dir / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--cache", cache, "--keep-going",
                             "--output-json", report, *extra)
    assert code in (0, 1), err
    return read_json(report)["trials"][0]["results"], out


def comparable(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    skip = {"evaluation_duration_seconds", "call_duration_seconds", "cached"}
    return [{k: v for k, v in r.items() if k not in skip} for r in results]


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"clip": CASE}, ADAPTER)


def test_second_identical_run_calls_the_adapter_zero_times(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, out = run(eval_dir, cache)
    assert calls(eval_dir) == 7
    assert not any(r.get("cached") for r in first)
    assert "0 of 7 evaluated samples reused, 7 adapter calls, 7 stored" in out
    second, out = run(eval_dir, cache)
    assert calls(eval_dir) == 0
    assert all(r["cached"] is True for r in second)
    assert comparable(second) == comparable(first)
    assert [r["status"] for r in second] == ["failed", "passed", "failed", "failed", "passed", "failed",
                                              "passed"]
    assert "7 of 7 evaluated samples reused, 0 adapter calls" in out
    report = read_json(eval_dir / "report.json")
    assert report["observation_cache"]["hits"] == 7 and report["observation_cache"]["misses"] == 0


def test_changes_to_adapter_file_configs_and_video_miss(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    # The adapter's source changed: nothing it said before counts.
    adapter = eval_dir / "adapter.py"
    adapter.write_text(adapter.read_text() + "\n# tuned\n")
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    # Its config changed.
    (eval_dir / "adapter.yaml").write_text("offset: 0\n")
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    run(eval_dir, cache)
    assert calls(eval_dir) == 0
    # One target's config changed: only its samples miss.
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text().replace("{detail: high}", "{detail: low}"))
    results, _out = run(eval_dir, cache)
    assert calls(eval_dir) == 6
    assert [r["target"] for r in results if r.get("cached")] == ["second"]
    # The video was re-encoded: other pixels, other keys.
    reencode(VIDEOS / "cfr_h264.mp4", eval_dir / "cases" / "cfr_h264.mp4", crf=40)
    run(eval_dir, cache)
    assert calls(eval_dir) == 7


def test_changed_expect_is_rejudged_without_calls(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, _out = run(eval_dir, cache)
    assert calls(eval_dir) == 7
    assert first[0]["status"] == "failed"
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text().replace("expect: 5\n    - range", "expect: 0\n    - range"))
    second, _out = run(eval_dir, cache)
    assert calls(eval_dir) == 0
    assert [r["status"] for r in second[:3]] == ["passed", "failed", "failed"]
    assert second[0]["cached"] is True and second[0]["expected"] == 0


def test_cache_modes(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(eval_dir, cache, "--cache-mode", "read")
    assert calls(eval_dir) == 7
    assert not (cache / "v1").exists()
    run(eval_dir, cache, "--cache-mode", "write")
    assert calls(eval_dir) == 7
    run(eval_dir, cache, "--cache-mode", "write")
    assert calls(eval_dir) == 7  # write never reads
    run(eval_dir, cache, "--cache-mode", "read")
    assert calls(eval_dir) == 0


def test_no_cache_and_option_errors(eval_dir: Path, tmp_path: Path) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--no-cache", "--keep-going")
    assert code in (0, 1), err
    assert calls(eval_dir) == 7
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--cache-mode", "read")
    assert code == 2 and "--cache-mode and --cache-max-mb need --cache" in err
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--cache", tmp_path, "--no-cache")
    assert code == 2 and "not allowed with argument" in err


@pytest.mark.parametrize("selections", [(["--target", "index"], ["--target", "second"]), ([], [])],
                         ids=["disjoint", "same-keys"])
def test_two_concurrent_runs_on_one_cache_lose_nothing(eval_dir: Path, tmp_path: Path,
                                                       selections: tuple[list[str], list[str]]) -> None:
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir),
                               "--cache", str(cache), "--keep-going", *selection],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for selection in selections]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]  # both finish before any assert
    for proc, err in zip(procs, errors):
        assert proc.returncode in (0, 1), err
    assert 7 <= calls(eval_dir) <= 14
    results, _out = run(eval_dir, cache)
    assert calls(eval_dir) == 0
    assert all(r["cached"] for r in results)
    assert not list(cache.rglob("*.tmp"))


def test_command_adapter_needs_a_declared_version(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    adapter = eval_dir / "adapter.py"
    command = shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", f"{adapter}:create_evaluator"])
    _results, out = run(eval_dir, cache, "--adapter-command", command)
    assert "Observation cache: off (adapter command" in out and "adapterVersion" in out
    run(eval_dir, cache, "--adapter-command", command)
    assert calls(eval_dir) == 14
    adapter.write_text(adapter.read_text().replace("class Reader:", "class Reader:\n    adapter_version = '1'"))
    run(eval_dir, cache, "--adapter-command", command)
    assert calls(eval_dir) == 7
    results, _out = run(eval_dir, cache, "--adapter-command", command)
    assert calls(eval_dir) == 0
    assert all(r["cached"] for r in results)


def test_batch_adapters_are_asked_only_for_misses(tmp_path: Path) -> None:
    batch = ADAPTER.replace("    def evaluate(self, sample, target):", "    def evaluate_many(self, samples, target):\n"
                            "        return [self.one(s, target) for s in samples]\n\n"
                            "    def one(self, sample, target):")
    eval_dir = make_eval(tmp_path, {"clip": CASE}, batch)
    cache = tmp_path / "cache"
    first, _out = run(eval_dir, cache, "--target", "index")
    assert calls(eval_dir) == 6
    both, _out = run(eval_dir, cache)
    assert calls(eval_dir) == 1
    assert [r.get("cached", False) for r in both] == [True] * 6 + [False]
    assert comparable(both[:6]) == comparable(first)


def test_store_prunes_least_recently_used(tmp_path: Path) -> None:
    import os

    store = ObservationStore(tmp_path / "obs")
    names = [key_digest({"n": n}) for n in range(4)]
    for age, name in enumerate(names):
        assert store.put(name, {"n": age, "pad": "x" * 100})
        path = tmp_path / "obs" / "v1" / name[:2] / f"{name}.json"
        os.utime(path, (1000 + age, 1000 + age))
    assert store.get(names[0]) == (True, {"n": 0, "pad": "x" * 100})  # now the most recent
    one = store.size() // 4
    stats = store.prune(2 * one)
    assert stats.files == 2
    assert [store.get(n)[0] for n in names] == [True, False, False, True]
    assert store.prune(0).files == 2 and store.size() == 0


def test_unreadable_entries_are_misses(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path)
    name = key_digest({"a": 1})
    store.put(name, [1, 2])
    path = tmp_path / "v1" / name[:2] / f"{name}.json"
    path.write_text("{broken")
    assert store.get(name) == (False, None)
    path.write_text(json.dumps({"key": "other", "observation": 1}))
    assert store.get(name) == (False, None)


def test_prune_cache_observations_command(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    code, out, err = run_cli("video-store", "prune-cache", "--observations", "--cache", cache, "--all")
    assert code == 0, err
    # The 7 observations, and the frame index beside them: one page of the video's frames (the page and
    # its witness) and the video's content hash.
    assert "Removed 10 observation cache entries" in out
    run(eval_dir, cache)
    assert calls(eval_dir) == 7


def test_identities(tmp_path: Path) -> None:
    (tmp_path / "adapter.py").write_text("x = 1\n")
    (tmp_path / "helper.py").write_text("y = 1\n")
    before = python_identity(f"{tmp_path / 'adapter.py'}:make")
    (tmp_path / "helper.py").write_text("y = 2\n")
    after = python_identity(f"{tmp_path / 'adapter.py'}:make")
    assert before and after and before != after
    assert python_identity(f"{tmp_path / 'missing.py'}:make") is None
    assert python_identity("glasskit_eval.protocol_server:main", ) is not None
    assert command_identity("node a.mjs", {"protocolVersion": 1}) is None
    assert command_identity("node a.mjs", {"adapterVersion": "2"}) != command_identity("node a.mjs",
                                                                                      {"version": "3"})
    assert default_observation_dir({"GLASSKIT_EVAL_CACHE_DIR": str(tmp_path)}) == tmp_path / "observations"


def test_cached_flag_round_trips() -> None:
    base = dict(case="c", target="t", target_label=None, sample_index=0, timestamp_s=0.0, source="at",
                status=Status.PASSED, expected=1, field=None, compare_mode=None, reason="matched")
    hit = SampleResult(**base, cached=True)  # type: ignore[arg-type]
    assert hit.to_json()["cached"] is True
    assert SampleResult.from_json(hit.to_json()) == hit
    assert "cached" not in SampleResult(**base).to_json()  # type: ignore[arg-type]


def test_each_repeat_trial_keeps_its_own_observations(eval_dir: Path, tmp_path: Path) -> None:
    # Odd calls see the frame, even calls are off by one: trials disagree, as a flaky model's would.
    adapter = eval_dir / "adapter.py"
    adapter.write_text(adapter.read_text().replace(
        "        return {\"index\": read_frame_index(sample.image) + self.offset}",
        "        calls = len(LOG.read_text().splitlines())\n"
        "        return {\"index\": read_frame_index(sample.image) + (calls > 7)}"))
    cache = tmp_path / "cache"
    report = eval_dir / "report.json"

    def statuses(*extra: str) -> list[list[str]]:
        code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--cache", cache, "--keep-going", "--output-json",
                                  report, *extra)
        assert code in (0, 1), err
        return [[r["status"] for r in t["results"]] for t in read_json(report)["trials"]]

    first = statuses("--repeat", "2")
    assert calls(eval_dir) == 14 and first[0] != first[1]
    assert statuses("--repeat", "2") == first
    assert calls(eval_dir) == 0
    assert statuses() == first[:1]
    assert calls(eval_dir) == 0


def test_a_python_adapter_declared_version_is_part_of_its_identity(eval_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    # Same sources, but the weights behind them changed: the adapter says so with its version.
    (eval_dir / "version.txt").write_text("2")
    adapter = eval_dir / "adapter.py"
    adapter.write_text(adapter.read_text().replace(
        "class Reader:", "class Reader:\n    adapter_version = (Path(__file__).parent / 'version.txt').read_text()"))
    run(eval_dir, cache)
    assert calls(eval_dir) == 7
    run(eval_dir, cache)
    assert calls(eval_dir) == 0
    (eval_dir / "version.txt").write_text("3")
    run(eval_dir, cache)
    assert calls(eval_dir) == 7


def test_the_cache_keys_on_the_trials_own_adapter_and_marks_its_calls(tmp_path: Path) -> None:
    import asyncio
    import io

    from glasskit_eval.adapters.base import FactoryConfig, Sample, Target
    from glasskit_eval.adapters.calls import DirectCaller
    from glasskit_eval.adapters.python import PythonAdapterSpec
    from glasskit_eval.evaluation.observation_cache import CachingCaller, ObservationCache

    (tmp_path / "adapter.py").write_text("class E:\n    adapter_version = 'v1'\n    def evaluate(self, s, t):\n"
                                         "        return 1\n\ndef make(config):\n    return E()\n")
    spec = PythonAdapterSpec(f"{tmp_path / 'adapter.py'}:make")
    cache = ObservationCache(spec, ObservationStore(tmp_path / "c"), "readwrite", io.StringIO())

    async def go() -> list[Any]:
        evaluator = await spec.create(FactoryConfig(eval_dir=tmp_path))
        caller = cache.caller(DirectCaller(evaluator), evaluator, {}, trial=1)
        assert isinstance(caller, CachingCaller)
        sample = Sample(image=Image.new("RGB", (4, 4)), timestamp_s=0.0, frame_index=0, sample_index=0,
                        video_path=str(tmp_path / "none.mp4"), case_name="c")
        return [await caller.call(sample, Target(id="t", index=0, label=None, config={})) for _ in range(2)]

    first, second = asyncio.run(go())
    assert (first.observation, first.cached, second.observation, second.cached) == (1, False, 1, True)
    assert (cache.stats.hits, cache.stats.misses, cache.stats.writes, cache.stats.disabled) == (1, 1, 1, None)


def test_pruning_removes_only_entry_files_it_wrote_never_through_a_symlink(tmp_path: Path) -> None:
    root, outside = tmp_path / "obs", tmp_path / "outside"
    store = ObservationStore(root)
    digest = key_digest({"n": 0})
    assert store.put(digest, {"n": 0})
    shard = root / "v1" / digest[:2]
    elsewhere = "00" if digest[:2] != "00" else "01"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("mine")
    decoys = {
        shard / "notes.txt": "not an entry name",
        shard / f"{digest}.json.bak": "not an entry name either",
        shard / f"{elsewhere * 32}.json": "an entry name in the wrong shard",
        outside / f"{elsewhere * 32}.json": "named like an entry, behind a shard that is a symlink",
    }
    for path, text in decoys.items():
        path.write_text(text)
    linked = shard / f"{digest[:2]}{'1' * 62}.json"
    linked.symlink_to(victim)
    (root / "v1" / elsewhere).symlink_to(outside, target_is_directory=True)
    stats = store.prune(0)
    assert stats.files == 1
    assert store.get(digest) == (False, None)
    assert victim.read_text() == "mine" and linked.is_symlink()
    assert all(path.read_text() == text for path, text in decoys.items())


def test_pruning_never_follows_a_version_folder_symlink(tmp_path: Path) -> None:
    root, outside = tmp_path / "obs", tmp_path / "outside"
    store = ObservationStore(root)
    digest = key_digest({"n": 0})
    assert store.put(digest, 1)
    (outside / digest[:2]).mkdir(parents=True)
    (root / "v1" / digest[:2] / f"{digest}.json").rename(outside / digest[:2] / f"{digest}.json")
    (root / "v1" / digest[:2]).rmdir()
    (root / "v1").rmdir()
    (root / "v1").symlink_to(outside, target_is_directory=True)
    assert store.prune(0).files == 0
    assert (outside / digest[:2] / f"{digest}.json").exists()


def test_a_folder_that_is_not_a_cache_is_never_pruned(eval_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "documents"
    shard = folder / "v1" / "ab"
    shard.mkdir(parents=True)
    entry_like = shard / ("ab" * 32 + ".json")
    entry_like.write_text("{}")
    (folder / "thesis.txt").write_text("years of work")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    code, out, err = run_cli("video-store", "prune-cache", "--observations", "--cache", folder, "--all")
    assert code == 2 and "not an observation cache" in err and "thesis.txt" in err, (out, err)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--cache", folder, "--keep-going")
    assert code == 2 and f"--cache {folder}: not an observation cache" in err, err
    assert calls(eval_dir) == 0
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert (folder / "thesis.txt").read_text() == "years of work" and entry_like.exists()


def test_a_cache_written_before_the_tag_is_still_pruned_and_then_tagged(tmp_path: Path) -> None:
    root = tmp_path / "obs"
    store = ObservationStore(root)
    digest = key_digest({"n": 0})
    assert store.put(digest, 1)
    (root / "CACHEDIR.TAG").unlink()
    assert store.prune(0).files == 1
    assert ObservationStore(root).put(digest, 1) and (root / "CACHEDIR.TAG").read_text().startswith("Signature:")
    (root / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    with pytest.raises(Exception, match="not written by glasskit_eval"):
        store.prune(0)


def test_a_tag_another_run_is_still_writing_is_waited_for(tmp_path: Path) -> None:
    import threading

    from glasskit_eval.evaluation import observation_store as store

    (tmp_path / "CACHEDIR.TAG").write_text("")  # created by the other run, not yet filled
    filler = threading.Timer(0.2, (tmp_path / "CACHEDIR.TAG").write_text, args=(store._TAG_TEXT,))
    filler.start()
    try:
        assert store._not_a_cache(tmp_path) is None
    finally:
        filler.join()
    (tmp_path / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# another tool\n")
    assert store._not_a_cache(tmp_path) == "its CACHEDIR.TAG was not written by glasskit_eval"


def test_frame_index_pages_are_believed_only_with_their_witness(tmp_path: Path) -> None:
    store = ObservationStore(tmp_path / "cache")
    page = {"decoder": "d", "page": 0, "video": "v" * 64}
    store.put_frame_page(page, {3: "a" * 64, 4: "b" * 64})
    assert store.frame_page(page) == {3: "a" * 64, 4: "b" * 64}
    assert store.frame_page({**page, "page": 1}) is None
    name = key_digest({"frame_page": page})
    path = tmp_path / "cache" / "v1" / name[:2] / f"{name}.json"
    entry = json.loads(path.read_text())
    entry["observation"]["pixels"]["3"] = "b" * 64  # frame 3 pointed at frame 4's pixels
    path.write_text(json.dumps(entry))
    assert store.frame_page(page) is None
    store.put_frame_page(page, {3: "a" * 64, 4: "b" * 64})  # a decode writes it again
    assert store.frame_page(page) == {3: "a" * 64, 4: "b" * 64}


def test_a_video_is_named_by_its_content_hashed_once(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"one")
    store = ObservationStore(tmp_path / "cache")
    first = store.video_identity(str(video), remember=True)
    assert first == hashlib.sha256(b"one").hexdigest()
    assert store.size() > 0  # remembered by the file's stamp, for the next run
    again = ObservationStore(tmp_path / "cache")
    assert again.video_identity(str(video), remember=False) == first
    video.write_bytes(b"other")  # another stamp (size, times): hashed again
    assert again.video_identity(str(video), remember=False) == hashlib.sha256(b"other").hexdigest()
    assert store.video_identity(str(tmp_path / "missing.mp4"), remember=True) is None
