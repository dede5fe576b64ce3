"""Clip samples end to end: every adapter kind gets the clip's exact frames, and results say which.

The videos carry each frame's index in their pixels (``framecode``), so an adapter can tell
which frame it got without trusting any counter; the clip's frames are checked against the
rule written independently here from the manifest's frame times (nearest frame to each
requested time, ties to the earlier one). A Python adapter in process, the same adapter
served by ``protocol_server``, a Node adapter built on the copied helper, an HTTP endpoint
and an exec command all report a digest of every frame's RGBA pixels: equal digests prove
they got the same pixels, and the Python ones read the index from them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shlex
import shutil
import sys
import textwrap
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, TESTS, make_eval, read_json, run_cli
from fixturevideos import MANIFEST
from framecode import read_frame_index
from modelserver import json_endpoint
from PIL import Image

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

HELPER = ROOT / "glasskit_eval" / "assets" / "glasskit_adapter.mjs"
F = Fraction

#: Reports, per frame: [frame index, requested time, digest of the RGBA pixels, index read from them].
PY_ADAPTER = f"""
import hashlib, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

def digest(image):
    return hashlib.sha256(image.convert("RGBA").tobytes()).hexdigest()

class Reader:
    def evaluate(self, sample, target):
        frames = [[f.frame_index, f.timestamp_s, digest(f.image), read_frame_index(f.image)] for f in sample.frames]
        return {{"frames": frames, "anchor": [sample.frame_index, digest(sample.image)], "clip": sample.is_clip,
                 "media": [f.media_timestamp_s for f in sample.frames]}}
"""

NODE_ADAPTER = """\
import { createHash } from "node:crypto";
import { runGlassKitAdapter } from "./glasskit_adapter.mjs";

const digest = (image) => createHash("sha256").update(image.rgba).digest("hex");

await runGlassKitAdapter(async () => ({
  async evaluate({ sample }) {
    const frames = sample.frames.map((f) => [f.frameIndex, f.timestampS, digest(f.image)]);
    const media = sample.frames.map((f) => f.mediaTimestampS);
    return { frames, anchor: [sample.frameIndex, digest(sample.image)], clip: sample.isClip, media };
  },
}));
"""

EXEC_ADAPTER = """\
import base64, hashlib, io, json, sys
from PIL import Image

def digest(image):
    with Image.open(io.BytesIO(base64.b64decode(image["dataBase64"]))) as im:
        with open(image["path"], "rb") as handle:
            assert handle.read() == base64.b64decode(image["dataBase64"])
        return hashlib.sha256(im.convert("RGBA").tobytes()).hexdigest()

sample = json.load(sys.stdin)["sample"]
frames = [[f["frameIndex"], f["timestampS"], digest(f["image"])] for f in sample.get("frames", [])]
print(json.dumps({"frames": frames, "anchor": [sample["frameIndex"], digest(sample["image"])],
                  "clip": "frames" in sample, "media": [f["mediaTimestampS"] for f in sample.get("frames", [])]}))
"""


def case_text(video: str, clip: str, times: str, single: str | None = None) -> str:
    """One target whose samples at ``times`` have ``clip``, and a sample at ``single`` without one."""
    extra = f"    - at: {single}\n      clip: null\n      expect: null\n" if single is not None else ""
    return textwrap.dedent(f"""\
        video: {video}
        targets:
          motion:
            sample_defaults:
              clip: {clip}
            samples:
            - at: {times}
              expect: null
        """) + extra


def rule_indexes(video: str, anchor: Fraction, before: Fraction, every: Fraction | None,
                 after: Fraction = Fraction(0)) -> list[int]:
    """The clip's frame indexes by the issue's words, from the manifest's frame times."""
    times = [Fraction(t) for t in MANIFEST[video]["frame_times"]]

    def nearest(want: Fraction) -> int:
        return min(range(len(times)), key=lambda i: (abs(times[i] - want), i))

    if every is None:
        inside = [i for i, t in enumerate(times) if anchor - before <= t <= anchor + after]
        return sorted(set(inside) | {nearest(anchor)})
    steps = range(-int(before / every) - 1, int(after / every) + 2)
    return [nearest(anchor + j * every) for j in steps if -before <= j * every <= after]


def run_report(eval_dir: Path, tmp_path: Path, name: str, *args: str | Path) -> list[dict[str, Any]]:
    report = tmp_path / f"{name}.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--concurrency", "3", *args)
    assert code == 0, out + err
    results: list[dict[str, Any]] = read_json(report)["trials"][0]["results"]
    return results


@pytest.fixture
def http_adapter() -> Iterator[str]:
    """A real local endpoint that answers what the exec adapter answers, from the JSON it is posted."""

    def digest(image: dict[str, Any]) -> str:
        with Image.open(io.BytesIO(base64.b64decode(image["dataBase64"]))) as im:
            return hashlib.sha256(im.convert("RGBA").tobytes()).hexdigest()

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        sample = body["sample"]
        frames = [[f["frameIndex"], f["timestampS"], digest(f["image"])] for f in sample.get("frames", [])]
        return {"frames": frames, "anchor": [sample["frameIndex"], digest(sample["image"])],
                "clip": "frames" in sample, "media": [f["mediaTimestampS"] for f in sample.get("frames", [])]}

    with json_endpoint(answer) as port:
        yield f"http://127.0.0.1:{port}/judge"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_every_adapter_kind_gets_the_same_exact_clip_frames(tmp_path: Path, http_adapter: str) -> None:
    video = "bframes_h264.mp4"
    # A grid coarser than the video (0.12 s at 25 fps) on a B-frame video, plus a single-frame sample.
    text = case_text(video, "{before_s: 0.48, every_s: 0.12}", "[0.6, 1.0, 1.96]", single="0.3")
    eval_dir = make_eval(tmp_path, {"c": text}, PY_ADAPTER, videos=(video,))
    shutil.copy(HELPER, eval_dir / "glasskit_adapter.mjs")
    (eval_dir / "adapter.mjs").write_text(NODE_ADAPTER)
    (eval_dir / "judge.py").write_text(EXEC_ADAPTER)
    served = shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", f"{eval_dir / 'adapter.py'}:create_evaluator"])
    runs = {
        "python": run_report(eval_dir, tmp_path, "python"),
        "protocol-server": run_report(eval_dir, tmp_path, "served", "--adapter-command", served),
        "node": run_report(eval_dir, tmp_path, "node", "--adapter-command", f"node {eval_dir / 'adapter.mjs'}"),
        "http": run_report(eval_dir, tmp_path, "http", "--adapter-http", http_adapter),
        "exec": run_report(eval_dir, tmp_path, "exec", "--adapter-exec",
                           shlex.join([sys.executable, str(eval_dir / "judge.py")])),
    }
    python = runs["python"]
    assert [r["timestamp_s"] for r in python] == [0.6, 1.0, 1.96, 0.3]
    *clips, single = python
    # A sample without a clip: frames is the anchor alone, and its result has no clip key.
    assert "clip" not in single and single["observed"]["clip"] is False
    assert [f[0] for f in single["observed"]["frames"]] == [single["frame_index"]] == [read_index(single)]
    for result in clips:
        anchor = F(str(result["timestamp_s"]))
        expected = rule_indexes(video, anchor, F("0.48"), F("0.12"))
        times = [float(anchor + j * F("0.12")) for j in range(-4, 1)]
        assert result["clip"] == {"timestamps": times, "frame_indexes": expected}
        frames = result["observed"]["frames"]
        # The pixels carry the index the rule names, upright.
        assert [f[0] for f in frames] == [f[3] for f in frames] == expected
        assert [f[1] for f in frames] == times
        assert result["observed"]["anchor"] == [expected[-1], frames[-1][2]] == [result["frame_index"], frames[-1][2]]
    seen = {kind: [(r["observed"]["clip"], [f[:3] for f in r["observed"]["frames"]] if r["observed"]["clip"]
                    else [], r["observed"]["anchor"]) for r in results] for kind, results in runs.items()}
    for kind, got in seen.items():
        assert got == seen["python"], kind
    for kind, results in runs.items():
        assert [r.get("clip") for r in results] == [r.get("clip") for r in python], kind
        # Each clip frame's own presentation time, the same for every kind and the manifest's.
        frame_times = MANIFEST[video]["frame_times"]
        for result in results[:-1]:
            assert result["observed"]["media"] == [float(F(frame_times[i])) for i in result["clip"]["frame_indexes"]]


def read_index(result: dict[str, Any]) -> int:
    index: int = result["observed"]["frames"][0][3]
    return index


@pytest.mark.parametrize(("video", "clip", "anchors", "before", "every", "after"), [
    # Variable frame rate, a grid finer than the video: frames repeat, one entry per time.
    ("vfr_h264.mp4", "{before_s: 0.3, every_s: 0.05}", [F("0.5"), F("0.9")], F("0.3"), F("0.05"), F(0)),
    # Every decoded frame in the window, on B-frames with an open GOP.
    ("open_gop_h264.mp4", "{before_s: 0.2, after_s: 0.1}", [F("0.5"), F("1.0")], F("0.2"), None, F("0.1")),
    # Rotation with mirroring, and rotation alone: read_frame_index refuses a frame not upright.
    ("mirror_rotate90.mp4", "{before_s: 0.4, every_s: 0.2}", [F("0.8"), F("1.5")], F("0.4"), F("0.2"), F(0)),
    ("rotate270.m4v", "{before_s: 0.3}", [F("1.2")], F("0.3"), None, F(0)),
    ("hevc_bframes.mp4", "{before_s: 0.5, after_s: 0.2, every_s: 0.1}", [F("0.6")], F("0.5"), F("0.1"), F("0.2")),
])
def test_clip_frames_carry_the_index_the_rule_names(tmp_path: Path, video: str, clip: str, anchors: list[Fraction],
                                                    before: Fraction, every: Fraction | None, after: Fraction) -> None:
    times = "[" + ", ".join(str(float(a)) for a in anchors) + "]"
    eval_dir = make_eval(tmp_path, {"c": case_text(video, clip, times)}, PY_ADAPTER, videos=(video,))
    for result, anchor in zip(run_report(eval_dir, tmp_path, "r"), anchors):
        expected = rule_indexes(video, anchor, before, every, after)
        frames = result["observed"]["frames"]
        assert [f[3] for f in frames] == [f[0] for f in frames] == expected, (video, anchor)
        assert result["clip"]["frame_indexes"] == expected
        assert read_frame_index_of(frames, result) == result["frame_index"]


def read_frame_index_of(frames: list[list[Any]], result: dict[str, Any]) -> int:
    """The index read from the anchor's pixels (the anchor is the frame whose digest it shares)."""
    anchor_digest = result["observed"]["anchor"][1]
    index: int = next(f[3] for f in frames if f[2] == anchor_digest)
    return index


def test_a_function_adapter_taking_only_an_image_is_refused_before_any_call(tmp_path: Path) -> None:
    marker = tmp_path / "called"
    adapter = f"""
    def judge(image, target_id):
        open({str(marker)!r}, "w").close()
        return None
    """
    eval_dir = make_eval(tmp_path, {"c": case_text("cfr_h264.mp4", "{before_s: 0.5}", "[1.0]")})
    (eval_dir / "adapter.py").write_text(textwrap.dedent(adapter))
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:judge")
    assert code == 2, out + err
    assert "target 'motion'" in err and "`image, target_id`" in err and "sample.frames" in err
    assert "Traceback" not in err and not marker.exists()


def test_clip_results_in_junit_and_saved_failures(tmp_path: Path) -> None:
    text = case_text("cfr_h264.mp4", "{before_s: 0.3, every_s: 0.1}", "[1.0]").replace("expect: null",
                                                                                      "expect: 0\n      field: n")
    adapter = "def judge(sample, target):\n    return {'n': len(sample.frames)}\n"
    eval_dir = make_eval(tmp_path, {"c": text}, adapter)
    junit = tmp_path / "junit.xml"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:judge",
                             "--junit-xml", junit, "--save-failures", "--output-json", tmp_path / "r.json",
                             "--min-pass-rate", "1")
    assert code == 1, out + err
    assert "clip frames: 7, 8, 9, 10 (4 frames, 0.7s to 1s)" in junit.read_text()
    result = read_json(tmp_path / "r.json")["trials"][0]["results"][0]
    assert result["observed"] == {"n": 4}
    anchor = Path(result["artifact_image"])
    assert anchor.is_file()
    folder = anchor.with_name(anchor.stem + "_clip")
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["0_0.700s_frame7.jpg", "1_0.800s_frame8.jpg", "2_0.900s_frame9.jpg", "3_1.000s_frame10.jpg"]
    for name in names:
        with Image.open(folder / name) as image:
            assert read_frame_index(image) == int(name.rsplit("frame", 1)[1].split(".")[0])
    record = json.loads(Path(result["artifact_json"]).read_text())
    assert record["clip"] == {"timestamps": [0.7, 0.8, 0.9, 1.0], "frame_indexes": [7, 8, 9, 10]}


def test_the_observation_cache_keys_on_every_clip_frame(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    adapter = f"""
    def create_evaluator(config):
        return Counter()

    class Counter:
        def evaluate(self, sample, target):
            with open({str(calls)!r}, "a") as handle:
                handle.write(f"{{sample.timestamp_s}}\\n")
            return {{"frames": [f.frame_index for f in sample.frames]}}
    """
    text = case_text("cfr_h264.mp4", "{before_s: 0.2, every_s: 0.1}", "[0.5, 1.0]")
    eval_dir = make_eval(tmp_path, {"c": text}, adapter)

    def run(name: str) -> list[dict[str, Any]]:
        return run_report(eval_dir, tmp_path, name, "--cache")

    first = run("first")
    assert [r.get("cached", False) for r in first] == [False, False]
    second = run("second")
    assert [r.get("cached", False) for r in second] == [True, True]
    assert [r["observed"] for r in second] == [r["observed"] for r in first]
    assert sorted(calls.read_text().split()) == ["0.5", "1.0"]  # concurrent calls log in any order
    # A wider clip names other frames: a miss, though the anchor's pixels are the same.
    (eval_dir / "cases" / "c.yaml").write_text(text.replace("before_s: 0.2", "before_s: 0.3"))
    third = run("third")
    assert [r.get("cached", False) for r in third] == [False, False]
    assert [r["observed"]["frames"] for r in third] == [[2, 3, 4, 5], [7, 8, 9, 10]]


EDGES_CASE = """\
video: bframes_h264.mp4
sample_defaults:
  clip: {before_s: 0.2, every_s: 0.08}
targets:
  motion:
    samples:
    - at: 1.0
      expect: null
    - at: 0.1
      clip: {before_s: 0.5, every_s: 0.1, edge: clamp}
      expect: null
    - at: 1.9
      clip: {after_s: 1.0, edge: clamp}
      expect: null
    - at: 0.5
      clip: null
      expect: null
  grid:
    samples:
    - at: 1.9
      clip: {after_s: 0.3, every_s: 0.05, edge: clamp}
      expect: null
"""

#: (requested time, frame index, media time) per sample of EDGES_CASE on the 25 fps B-frame video.
EDGES: list[list[tuple[float, int, float | None]]] = [
    # Inherited from the case: t-0.16, t-0.08, t.
    [(0.84, 21, 0.84), (0.92, 23, 0.92), (1.0, 25, 1.0)],
    # Clamped at the start: -0.4 ... -0.1 dropped; 0.1 ties 0.08 and 0.12 and takes the earlier.
    [(0.0, 0, 0.0), (0.1, 2, 0.08)],
    # Every frame of [1.9, 2.9], clamped at the end; the anchor (1.9 ties 1.88 and 1.92) keeps its time.
    [(1.9, 47, 1.88), (1.92, 48, 1.92), (1.96, 49, 1.96)],
    # Cleared: the anchor alone.
    [(0.5, 12, 0.48)],
    # A grid past the last frame (1.96 s; the video ends at 2.0 s, 0.05 s of tolerance): kept to 2.05.
    [(1.9, 47, 1.88), (1.95, 49, 1.96), (2.0, 49, 1.96), (2.05, 49, 1.96)],
]

MANY_PY = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Many()

class Many:
    def evaluate_many(self, samples, target):
        return [{{"frames": [[f.timestamp_s, f.frame_index, f.media_timestamp_s, read_frame_index(f.image)]
                             for f in s.frames], "clip": s.is_clip,
                  "anchor": [s.frame_index, read_frame_index(s.image)]}} for s in samples]

    def evaluate(self, sample, target):
        return self.evaluate_many([sample], target)[0]
"""

MANY_NODE = """\
import { runGlassKitAdapter } from "./glasskit_adapter.mjs";

await runGlassKitAdapter(async () => ({
  async evaluateMany({ samples }) {
    return samples.map((s) => ({
      frames: s.frames.map((f) => [f.timestampS, f.frameIndex, f.mediaTimestampS]),
      clip: s.isClip,
      anchor: [s.frameIndex, s.image.width, s.image.height],
    }));
  },
}));
"""


@pytest.mark.parametrize("kind", ["python-batch", "protocol-server-batch", "node-batch"])
def test_clamped_inherited_overridden_and_cleared_clips_reach_every_adapter(tmp_path: Path, kind: str) -> None:
    if kind == "node-batch" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    eval_dir = make_eval(tmp_path, {"c": EDGES_CASE}, MANY_PY, videos=("bframes_h264.mp4",))
    shutil.copy(HELPER, eval_dir / "glasskit_adapter.mjs")
    (eval_dir / "adapter.mjs").write_text(MANY_NODE)
    args: list[str | Path] = []
    if kind == "protocol-server-batch":
        args = ["--adapter-command", shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                                                 f"{eval_dir / 'adapter.py'}:create_evaluator"])]
    elif kind == "node-batch":
        args = ["--adapter-command", f"node {eval_dir / 'adapter.mjs'}"]
    results = run_report(eval_dir, tmp_path, kind, *args)
    assert len(results) == len(EDGES)
    for result, expected in zip(results, EDGES):
        frames = result["observed"]["frames"]
        if kind != "python-batch" and len(expected) == 1:
            # The wire sample of a sample without a clip has no frames: its one frame's media time is unknown.
            expected = [(0.5, 12, None)]
        assert [tuple(f[:3]) for f in frames] == expected, (kind, result["timestamp_s"])
        if kind != "node-batch":
            assert [f[3] for f in frames] == [index for _t, index, _m in expected], "the pixels name the frame"
        clip = len(expected) > 1 or result["timestamp_s"] != 0.5
        assert result["observed"]["clip"] is clip
        assert result["observed"]["anchor"][0] == result["frame_index"]
        if clip:
            assert result["clip"] == {"timestamps": [t for t, _i, _m in expected],
                                      "frame_indexes": [i for _t, i, _m in expected]}
        else:
            assert "clip" not in result


BAD_CLIPS = [
    # (clip value, YAML path under the block, words of the message)
    ("{before_s: -0.5}", "targets.motion.samples[0].clip.before_s", "clip before_s must be 0 or more"),
    ("{every_s: 0}", "targets.motion.samples[0].clip.every_s", "clip every_s must be greater than 0"),
    ("{before_s: 0.2, edge: wrap}", "targets.motion.samples[0].clip.edge", "unknown clip edge 'wrap'"),
    ("{before_s: 0.2, step_s: 0.1}", "targets.motion.samples[0].clip.step_s", "unknown key 'step_s'"),
    ("{before_s: 0.6, every_s: 0.0005}", "targets.motion.samples[0].clip", "more than the limit of 1,024"),
    ("{before_s: 1.5}", "targets.motion.samples[0]", "before the video's first frame"),
    ("{after_s: 1.5, every_s: 0.5}", "targets.motion.samples[0]", "past the end of the video"),
]


@pytest.mark.parametrize(("clip", "where", "words"), BAD_CLIPS)
def test_run_refuses_each_bad_clip_at_its_line_before_any_call(tmp_path: Path, clip: str, where: str,
                                                               words: str) -> None:
    marker = tmp_path / "called"
    adapter = f"def judge(sample, target):\n    open({str(marker)!r}, 'w').close()\n"
    text = f"video: cfr_h264.mp4\ntargets:\n  motion:\n    samples:\n    - at: 1.0\n      expect: 1\n      clip: {clip}\n"
    eval_dir = make_eval(tmp_path, {"c": text}, adapter)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:judge",
                             "--output-json", report)
    assert code == 2, out + err
    line = 7 if where.endswith("clip") or ".clip." in where else 5
    assert f"{eval_dir / 'cases' / 'c.yaml'}:{line}: {where}" in err, err
    assert words in err and "Traceback" not in err
    assert not marker.exists() and not report.exists()
    # validate says the same, located the same way.
    code, out, _err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and f"c.yaml:{line}: {where}" in out and words in out
