"""Streams and checkpoints: a run SIGKILLed mid-stream resumes to the uninterrupted result.

Finished streams are recorded in the checkpoint and reused; the stream that was cut off is fed
again from its first frame (an app's state cannot be resumed mid-stream), so the adapter sees
that stream start twice and every other stream once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, make_eval, read_json, run_cli
from resumekit import VOLATILE, checkpoint_records, find_checkpoint, normalized, run_until_signalled

from glasskit_eval.checkpoints.store import RECORDS_NAME

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    samples:
    - at: [0.5, 1.0]
      expect: {ok: true}
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.5]}
    events:
    - at: 0.3
      expect: boiling
    - at: 1.2
      expect: boiling
"""

#: Fires 2 frames after each onset frame (3 and 12 at 10 fps), a false alarm at frame 9; in the
#: marked case it stops at frame 10 (writes ``mark`` and waits to be killed) once ``hang`` exists.
ADAPTER = """
import os, time
HERE = os.path.dirname(os.path.abspath(__file__))

def log(line):
    with open(os.path.join(HERE, "calls.log"), "a") as f:
        f.write(line + "\\n")

class Streamer:
    def evaluate(self, sample, target):
        return {"ok": True}

    def start_stream(self, target, stream):
        self.case = stream.case
        log(f"start {stream.case} {target.id}")

    def on_frame(self, sample, target):
        if self.case == "b" and sample.frame_index == 10 and os.path.exists(os.path.join(HERE, "hang")):
            open(os.path.join(HERE, "mark"), "w").close()
            time.sleep(120)
        if sample.frame_index in (5, 14):
            return {"alert": "boiling", "frame": sample.frame_index}
        if sample.frame_index == 9:
            return {"alert": "boiling", "frame": sample.frame_index}
        return None

def create_evaluator(config):
    return Streamer()
"""

#: A stream run reports no batch latency: the other volatile keys.
STREAM_VOLATILE = VOLATILE - {"batch_call_latency"}


def stream_records(checkpoint: Path) -> list[list[Any]]:
    return [r["key"] for r in checkpoint_records(checkpoint) if r["key"][3] == "stream"]


def first_stream_durable(eval_dir: Path) -> bool:
    """Case b's stream has hung (``mark``) and case a's, finished before it began, is durable."""
    if not (eval_dir / "mark").exists():
        return False
    checkpoint = find_checkpoint(eval_dir)
    return checkpoint is not None and bool(stream_records(checkpoint))


def test_sigkill_mid_stream_then_resume_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    cases = {"a": CASE, "b": CASE}
    reference_dir = make_eval(tmp_path / "ref", cases, adapter=ADAPTER)
    reference = tmp_path / "reference.json"
    code, _out, err = run_cli("run", "--eval-dir", reference_dir, "--output-json", reference, "--repeat", "2")
    assert code == 0, err
    expected = read_json(reference)
    assert [(s["case"], s["trial"], s["metrics"]["detected"], s["metrics"]["false_alarms"])
            for s in expected["streams"]] == [("a", 1, 2, 1), ("b", 1, 2, 1), ("a", 2, 2, 1), ("b", 2, 2, 1)]

    eval_dir = make_eval(tmp_path / "crash", cases, adapter=ADAPTER)
    (eval_dir / "hang").touch()
    report = tmp_path / "crash.json"
    _code, _out, err = run_until_signalled(
        [sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir), "--output-json", str(report),
         "--repeat", "2"], lambda: first_stream_durable(eval_dir), cwd=ROOT, poll=0.02)
    assert (eval_dir / "mark").exists(), err
    checkpoint = next((eval_dir / "runs" / "checkpoints").iterdir())
    assert stream_records(checkpoint) == [[1, "a", "pan", "stream"]]
    before = (eval_dir / "calls.log").read_text().splitlines()
    assert before == ["start a pan", "start b pan"]

    (eval_dir / "hang").unlink()
    code, out, err = run_cli("run", "--resume", checkpoint)
    assert code == 0, out + err
    after = (eval_dir / "calls.log").read_text().splitlines()[len(before):]
    # Trial 1: a's stream is reused, b's is fed again from its start; trial 2 runs both.
    assert after == ["start b pan", "start a pan", "start b pan"]
    final = read_json(report)
    assert normalized(final, STREAM_VOLATILE) == normalized(expected, STREAM_VOLATILE)
    assert json.dumps(final["streams"]) == json.dumps(expected["streams"])


@pytest.mark.parametrize(("time", "message"), [
    ("0.4", "emissions[0].time is not an exact time"),
    # CRC-valid records whose times no frame of the 2 s video has: before it, or days after its end.
    ("-1/10", "emissions[0].time -0.1s is outside the video (0 to 2s)"),
    ("259200/1", "emissions[0].time 259200s is outside the video (0 to 2s)"),
])
def test_a_damaged_stream_record_stops_the_resume_naming_it(tmp_path: Path, time: str, message: str) -> None:
    from glasskit_eval.checkpoints.framing import encode_record

    eval_dir = make_eval(tmp_path, {"a": CASE}, adapter=ADAPTER)
    (eval_dir / "hang").touch()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", tmp_path / "r.json")
    assert code == 0, err
    checkpoint = next((eval_dir / "runs" / "checkpoints").iterdir())
    manifest = checkpoint / "manifest.json"
    data = json.loads(manifest.read_text())
    data["status"] = "in_progress"
    manifest.write_text(json.dumps(data))
    with open(checkpoint / RECORDS_NAME, "ab") as handle:
        handle.write(encode_record({"key": [1, "a", "pan", "stream"],
                                    "payload": {"emissions": [{"time": time, "value": 1}],
                                                "frames_delivered": 3, "frames_dropped": 0}}))
    code, out, err = run_cli("run", "--resume", checkpoint)
    assert code == 2, out + err
    assert "stream a/pan (trial 1) is damaged" in err and message in err, err
    assert "Traceback" not in err
