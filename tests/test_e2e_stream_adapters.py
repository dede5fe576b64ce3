"""Stream targets fed to every adapter kind that takes them: Python, command (protocol_server and
the Node helper) and HTTP give the same replay results, and what goes wrong on the way is a clear error.

The video carries each frame's index in its pixels (``framecode``); the in-process adapter reads it
and checks it against ``frame_index``. Every adapter kind answers the same emissions, each carrying a
digest of the frame's RGBA pixels and, at the end of the stream, a digest over every frame it was
fed: equal ``streams`` blocks mean every kind was fed the same pixels, in the same order.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shlex
import shutil
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, TESTS, make_eval, read_json, run_cli
from fixturevideos import MANIFEST
from PIL import Image

from glasskit_eval.adapters._wire import ENCODINGS

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

HELPER = ROOT / "glasskit_eval" / "assets" / "glasskit_adapter.mjs"
VIDEO = "bframes_h264.mp4"
#: Frames of each target answered with an emission (the first two of pan's are a detection and a repeat).
FIRE = {"pan": [12, 13, 31, 44], "door": [3, 25]}

CASE = f"""\
video: {VIDEO}
targets:
  pan:
    sample_defaults: {{field: alert}}
    stream: {{window: [0, 0.2]}}
    events:
      - at: 0.44
        expect: pan
      - at: 1.0
        expect: pan
  door:
    sample_defaults: {{field: alert}}
    events:
      - at: 0.1
        expect: door
"""

#: The script every kind follows: fire on FIRE's frames, digest every frame, sum up at the end.
PY_ADAPTER = f"""
import hashlib, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def digest(image):
    return hashlib.sha256(image.convert("RGBA").tobytes()).hexdigest()

class Streamer:
    def __init__(self, config):
        self.fire = config.config["fire"]
        self.state = {{}}

    def start_stream(self, target, stream):
        assert (stream.case, stream.every_s, stream.pace) == ("c", None, None), stream
        self.state[target.id] = {{"count": 0, "all": hashlib.sha256(), "last": -1}}

    def on_frame(self, sample, target):
        state = self.state[target.id]
        if hasattr(sample.image, "getpixel"):
            assert read_frame_index(sample.image) == sample.frame_index
        assert sample.frame_index > state["last"] and sample.sample_index == state["count"]
        state["last"] = sample.frame_index
        state["count"] += 1
        pixels = digest(sample.image)
        state["all"].update(pixels.encode())
        if sample.frame_index in self.fire[target.id]:
            return {{"alert": target.id, "frame": sample.frame_index, "t": sample.timestamp_s, "pixels": pixels}}
        return None

    def end_stream(self, target):
        state = self.state.pop(target.id)
        return [{{"alert": "done", "frames": state["count"], "all": state["all"].hexdigest()}}]

def create_evaluator(config):
    return Streamer(config)
"""

NODE_ADAPTER = """\
import { createHash } from "node:crypto";
import { runGlassKitAdapter } from "./glasskit_adapter.mjs";

const digest = (image) => createHash("sha256").update(image.rgba).digest("hex");

await runGlassKitAdapter(async (context) => {
  const state = new Map();
  return {
    async startStream({ target, stream }) {
      if (stream.case !== "c" || stream.everyS !== null || stream.pace !== null) throw new Error("bad stream");
      state.set(stream.id, { count: 0, all: createHash("sha256"), last: -1 });
    },
    async onFrame({ sample, target, stream }) {
      const s = state.get(stream.id);
      if (sample.frameIndex <= s.last || sample.sampleIndex !== s.count) throw new Error("out of order");
      s.last = sample.frameIndex;
      s.count += 1;
      const pixels = digest(sample.image);
      s.all.update(pixels);
      if (!context.config.fire[target.id].includes(sample.frameIndex)) return null;
      return { alert: target.id, frame: sample.frameIndex, t: sample.timestampS, pixels };
    },
    async endStream({ stream }) {
      const s = state.get(stream.id);
      state.delete(stream.id);
      return [{ alert: "done", frames: s.count, all: s.all.digest("hex") }];
    },
  };
});
"""


@dataclass
class StreamServer:
    """A real local endpoint following the same script, keyed by stream id; records each event."""

    url: str
    events: list[tuple[str, str, int | None]] = field(default_factory=list)
    #: (stream event, frame index) -> statuses to answer before answering for real.
    faults: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _pixels(image: dict[str, Any]) -> str:
    with Image.open(io.BytesIO(base64.b64decode(image["dataBase64"]))) as im:
        return hashlib.sha256(im.convert("RGBA").tobytes()).hexdigest()


@pytest.fixture
def stream_server() -> Iterator[StreamServer]:
    state: dict[str, dict[str, Any]] = {}
    holder: list[StreamServer] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server = holder[0]
            stream, target = body["stream"], body["target"]["id"]
            frame = body["sample"]["frameIndex"] if "sample" in body else None
            with server.lock:
                server.events.append((stream["event"], stream["id"], frame))
                fault = server.faults.get((stream["event"], frame if frame is not None else -1))
                status = fault.pop(0) if fault else 200
            if status != 200:
                return self.answer(status, {"error": "busy"})
            if stream["event"] == "start":
                state[stream["id"]] = {"count": 0, "all": hashlib.sha256(), "last": -1}
                return self.answer(204, None)
            s = state[stream["id"]]
            if stream["event"] == "end":
                del state[stream["id"]]
                return self.answer(200, {"emissions": [{"alert": "done", "frames": s["count"],
                                                         "all": s["all"].hexdigest()}]})
            sample = body["sample"]
            assert sample["frameIndex"] > s["last"] and sample["sampleIndex"] == s["count"]
            s["last"] = sample["frameIndex"]
            s["count"] += 1
            pixels = _pixels(sample["image"])
            s["all"].update(pixels.encode())
            emission = None
            if sample["frameIndex"] in FIRE[target]:
                emission = {"alert": target, "frame": sample["frameIndex"], "t": sample["timestampS"],
                            "pixels": pixels}
            self.answer(200, {"emissions": emission})

        def answer(self, status: int, payload: Any) -> None:
            data = b"" if status == 204 else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(StreamServer(f"http://127.0.0.1:{httpd.server_address[1]}/stream"))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def stream_eval(tmp_path: Path, adapter: str = PY_ADAPTER) -> Path:
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter, videos=(VIDEO,))
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": FIRE}))
    return eval_dir


def http_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "http.yaml"
    path.write_text(json.dumps({"adapter": {"type": "http", "url": url, "response_field": "emissions"}}))
    return path


def served(eval_dir: Path) -> str:
    return shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", f"{eval_dir / 'adapter.py'}:create_evaluator"])


def streams_of(eval_dir: Path, tmp_path: Path, name: str, *args: str | Path) -> list[dict[str, Any]]:
    report = tmp_path / f"{name}.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *args)
    assert code == 0, out + err
    streams: list[dict[str, Any]] = read_json(report)["streams"]
    return streams


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_every_adapter_kind_gives_the_same_replay_results(tmp_path: Path, stream_server: StreamServer) -> None:
    eval_dir = stream_eval(tmp_path)
    shutil.copy(HELPER, eval_dir / "glasskit_adapter.mjs")
    (eval_dir / "adapter.mjs").write_text(NODE_ADAPTER)
    encoded = ENCODINGS.made
    runs = {"protocol-server": streams_of(eval_dir, tmp_path, "served", "--adapter-command", served(eval_dir))}
    # Both targets' streams take each decoded frame: its PNG is made once for the two.
    assert ENCODINGS.made - encoded == len(MANIFEST[VIDEO]["frame_times"])
    runs |= {
        "python": streams_of(eval_dir, tmp_path, "python", "--adapter", f"{eval_dir / 'adapter.py'}:create_evaluator"),
        "node": streams_of(eval_dir, tmp_path, "node", "--adapter-command", f"node {eval_dir / 'adapter.mjs'}"),
        "http": streams_of(eval_dir, tmp_path, "http", "--adapter-config", http_config(tmp_path, stream_server.url)),
    }
    for kind, streams in runs.items():
        assert streams == runs["python"], kind
    pan, door = runs["python"]
    frames = len(MANIFEST[VIDEO]["frame_times"])
    assert (pan["target"], door["target"]) == ("pan", "door")
    assert pan["frames_delivered"] == door["frames_delivered"] == frames
    # Frames 12 and 13 (0.48 s, 0.52 s) fall in the first window: a detection 0.04 s late and a repeat.
    assert [e["status"] for e in pan["events"]] == ["detected", "missed"]
    assert pan["events"][0]["latency_s"] == pytest.approx(0.04)
    assert [r["value"]["frame"] for r in pan["repeats"]] == [13]
    assert [f["value"].get("frame") for f in pan["false_alarms"]] == [31, 44, None]
    done = pan["false_alarms"][-1]["value"]
    assert done["alert"] == "done" and done["frames"] == frames
    assert door["events"][0]["status"] == "detected" and door["events"][0]["emission"]["value"]["frame"] == 3
    # One stream per target, each with its own id, started before its frames and ended after them.
    ids = {stream_id for _event, stream_id, _frame in stream_server.events}
    assert len(ids) == 2
    for stream_id in ids:
        events = [(e, f) for e, s, f in stream_server.events if s == stream_id]
        assert events[0] == ("start", None) and events[-1] == ("end", None)
        assert [f for _e, f in events[1:-1]] == list(range(frames))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("kind", ["node", "protocol-server"])
def test_a_command_adapter_without_on_frame_stops_before_any_call(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "called"
    python = f"""
def create_evaluator(config):
    return Plain()

class Plain:
    def evaluate(self, sample, target):
        open({str(marker)!r}, "a").write("x")
        return 1
"""
    node = f"""import {{ appendFileSync }} from "node:fs";
import {{ runGlassKitAdapter }} from "./glasskit_adapter.mjs";
await runGlassKitAdapter(async () => ({{
  async evaluate() {{ appendFileSync({json.dumps(str(marker))}, "x"); return 1; }},
}}));
"""
    eval_dir = stream_eval(tmp_path, python)
    shutil.copy(HELPER, eval_dir / "glasskit_adapter.mjs")
    (eval_dir / "adapter.mjs").write_text(node)
    command = served(eval_dir) if kind == "protocol-server" else f"node {eval_dir / 'adapter.mjs'}"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", command)
    assert code == 2, err
    assert "target 'pan' of case 'c' (and 1 more) is a stream target" in err and "on_frame(sample, target)" in err
    assert "onFrame with the Node helper" in err
    assert "Traceback" not in err and not marker.exists()


def test_a_frame_answered_with_a_value_that_is_not_json_like_stops_the_run(tmp_path: Path) -> None:
    adapter = PY_ADAPTER.replace("        if sample.frame_index in self.fire[target.id]:",
                                 "        if sample.frame_index == 7:\n            return {'score': float('nan')}\n"
                                 "        if sample.frame_index in self.fire[target.id]:")
    eval_dir = stream_eval(tmp_path, adapter)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", served(eval_dir))
    assert code == 2, err
    assert "on_frame at frame 7 (0.28s) for stream c/" in err
    assert "the adapter returned a value that is not JSON-like: result.score is nan" in err
    assert "Traceback" not in err


RAW_NAN = """\
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        result = {"protocolVersion": 1, "capabilities": {"frame": True}}
    elif method == "frame" and request["params"]["sample"]["frameIndex"] == 4:
        sys.stdout.write('{"id": %d, "result": {"alert": NaN}}\\n' % rid)
        sys.stdout.flush()
        continue
    elif method == "close":
        print(json.dumps({"id": rid, "result": None}), flush=True)
        break
    else:
        result = None
    print(json.dumps({"id": rid, "result": result}), flush=True)
"""


def test_nan_written_by_an_adapter_of_our_own_is_a_protocol_error(tmp_path: Path) -> None:
    eval_dir = stream_eval(tmp_path)
    (eval_dir / "raw.py").write_text(RAW_NAN)
    command = shlex.join([sys.executable, str(eval_dir / "raw.py")])
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", command, "--target", "door")
    assert code == 2, err
    assert "on_frame at frame 4 (0.16s) for stream c/door failed" in err
    assert "the adapter's answer to frame contains NaN, which is not JSON" in err
    # With --keep-going the stream stops there and is scored on what it emitted.
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", command, "--target", "door",
                             "--keep-going", "--output-json", report)
    (stream,) = read_json(report)["streams"]
    assert code == 1 and stream["frames_delivered"] == 5 and "contains NaN" in stream["error"]
    # The stream's progress line, printed when it ends.
    assert "  stream door: 5 frames, 0/1 events detected, 0 repeats, 0 false alarms; stopped: on_frame at frame 4" in out


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_command_adapter_that_crashes_mid_stream_stops_the_run(tmp_path: Path, keep_going: bool) -> None:
    adapter = PY_ADAPTER.replace("        state = self.state[target.id]\n",
                                 "        state = self.state[target.id]\n"
                                 "        if sample.frame_index == 9:\n"
                                 "            print('giving up at frame 9', file=sys.stderr, flush=True)\n"
                                 "            import os; os._exit(3)\n")
    eval_dir = stream_eval(tmp_path, adapter)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", served(eval_dir),
                              *(["--keep-going"] if keep_going else []))
    assert code == 2, err
    assert "exited with status 3 while" in err and "giving up at frame 9" in err
    assert "on_frame at frame 9 (0.36s) for stream c/" in err and "Traceback" not in err


def test_http_frames_are_retried_only_when_the_endpoint_did_not_act_on_them(
        tmp_path: Path, stream_server: StreamServer) -> None:
    eval_dir = stream_eval(tmp_path)
    config = http_config(tmp_path, stream_server.url)
    clean = streams_of(eval_dir, tmp_path, "clean", "--adapter-config", config, "--target", "door")
    # A 503 says the frame was not taken: fed again, and the result is as if nothing happened.
    stream_server.events.clear()
    stream_server.faults[("frame", 5)] = [503]
    retried = streams_of(eval_dir, tmp_path, "retried", "--adapter-config", config, "--target", "door",
                         "--retries", "2", "--retry-backoff", "0")
    assert retried == clean
    assert [f for e, _s, f in stream_server.events if e == "frame"].count(5) == 2
    # A 500 may have been acted on: not retried, the run stops naming the frame.
    stream_server.events.clear()
    stream_server.faults[("frame", 5)] = [500]
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-config", config, "--target", "door",
                              "--retries", "2", "--retry-backoff", "0")
    assert code == 2, err
    assert "on_frame at frame 5 (0.2s) for stream c/door failed" in err and "answered 500" in err
    assert "not retried: the stream adapter may already have acted on this call" in err
    assert [f for e, _s, f in stream_server.events if e == "frame"].count(5) == 1


def test_a_frame_past_timeout_is_not_fed_again(tmp_path: Path) -> None:
    fed = tmp_path / "fed"
    adapter = PY_ADAPTER.replace("    def on_frame(self, sample, target):\n",
                                 "    async def on_frame(self, sample, target):\n"
                                 f"        with open({str(fed)!r}, 'a') as handle:\n"
                                 "            handle.write(str(sample.frame_index) + ' ')\n"
                                 "        if sample.frame_index == 6:\n"
                                 "            import asyncio; await asyncio.sleep(30)\n"
                                 "        return self.frame(sample, target)\n\n"
                                 "    def frame(self, sample, target):\n")
    eval_dir = stream_eval(tmp_path, adapter)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--target", "door", "--timeout", "0.2",
                              "--retries", "3", "--retry-backoff", "0")
    assert code == 2, err
    assert "on_frame at frame 6 (0.24s) for stream c/door failed: on_frame timed out after 0.2s" in err
    assert "(not retried" in err and "gave up after" not in err
    # Frame 6 was fed once, and nothing after it.
    assert fed.read_text().split() == [str(i) for i in range(7)]
