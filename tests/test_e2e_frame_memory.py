"""A frame too large for memory is a clear error (exit 2, its size named, no traceback) whatever
the adapter kind: caused for real with an address-space limit on an 8192x8192 video, and, for
the encoders the decode always outgrows, with the encoder's own MemoryError."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import av
import modelserver
import pytest
from evalkit import ROOT, make_eval, run_cli
from modelserver import ModelServer

import glasskit_eval.adapters._exec as exec_adapter
import glasskit_eval.adapters._http as http_adapter
import glasskit_eval.adapters._process as process_adapter

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

model_server = modelserver.model_server

CASE = "video: v.mp4\ntargets:\n  t:\n    samples:\n    - at: 0.5\n      expect: true\n"
SIDE = 8192
#: The address space left to the run beyond what it needs on a small video: room for the big
#: video's decoder, not for its frame's RGB image (256 MiB) beside the decoded frame.
HEADROOM_MIB = 250

PYTHON_ADAPTER = "def create_evaluator(config):\n    return lambda image, target_id: True\n"
EXEC_SCRIPT = "import json, sys\njson.load(sys.stdin)\nprint('true')\n"
ECHO = ROOT / "fixtures" / "adapters" / "python" / "echo_adapter.py"

#: Runs the CLI under an address-space limit (MiB, 0 for none); prints its peak virtual size.
LIMITED = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[1]) << 20
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from glasskit_eval.cli import main
    code = main(sys.argv[2:])
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmPeak:"))
    print(f"peak-kib {peak}", file=sys.stderr)
    sys.exit(code)
    """)


def make_video(path: Path, side: int) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=1)
        stream.width = stream.height = side
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast"}
        frame = av.VideoFrame(side, side, "yuv420p")
        for plane, value in zip(frame.planes, (90, 128, 128)):
            plane.update(bytes([value]) * (plane.line_size * plane.height))
        frame.pts = 0
        for packet in (*stream.encode(frame), *stream.encode()):
            container.mux(packet)


@pytest.fixture(scope="module")
def big_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "v.mp4"
    make_video(path, SIDE)
    return path


def limited_run(eval_dir: Path, adapter: list[str], limit_mib: int) -> tuple[int, str, int]:
    # Few malloc arenas: each reserves 64 MiB of address space when a thread first allocates, and
    # how many threads overlap varies from run to run; the limit must measure the frame, not them.
    done = subprocess.run([sys.executable, "-c", LIMITED, str(limit_mib), "run", "--eval-dir", str(eval_dir),
                           *adapter], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MALLOC_ARENA_MAX": "1"})
    peak = int(done.stderr.rsplit("peak-kib ", 1)[1]) >> 10 if "peak-kib " in done.stderr else 0
    return done.returncode, done.stdout + done.stderr, peak


def adapter_args(kind: str, eval_dir: Path, url: str) -> list[str]:
    if kind == "python":
        return []
    if kind == "command":
        return ["--adapter-command", shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                                                 f"{ECHO}:create_evaluator"])]
    if kind == "http":
        return ["--adapter-http", f"{url}/ok"]
    script = eval_dir / "judge.py"
    script.write_text(EXEC_SCRIPT)
    return ["--adapter-exec", shlex.join([sys.executable, str(script)])]


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak address space from /proc")
@pytest.mark.parametrize("kind", ["python", "command", "http", "exec"])
def test_a_frame_too_large_for_the_address_space_is_a_clear_error_on_every_adapter_kind(
        tmp_path: Path, big_video: Path, kind: str, model_server: ModelServer) -> None:
    small = make_eval(tmp_path / "small", {"c": CASE}, PYTHON_ADAPTER, videos=())
    (small / "cases" / "v.mp4").write_bytes((ROOT / "fixtures" / "videos" / "cfr_h264.mp4").read_bytes())
    code, output, peak = limited_run(small, adapter_args(kind, small, model_server.url), 0)
    assert code in (0, 1) and peak, output
    big = make_eval(tmp_path / "big", {"c": CASE}, PYTHON_ADAPTER, videos=())
    (big / "cases" / "v.mp4").symlink_to(big_video)
    code, output, _ = limited_run(big, adapter_args(kind, big, model_server.url), peak + HEADROOM_MIB)
    assert code == 2, output
    assert f"not enough memory to decode a {SIDE}x{SIDE} frame of" in output, output
    assert "(about 256 MiB as an RGB image)" in output and "ulimit -v" in output
    assert "Traceback" not in output and "MemoryError" not in output, output


def _no_memory(*args: object, **kwargs: object) -> object:
    raise MemoryError


@pytest.mark.parametrize(("kind", "encoder", "what"), [
    ("command", (process_adapter, "sample_parts"), "encoding the frame as PNG for the command adapter"),
    ("http", (http_adapter, "json_sample"), "encoding frames for the HTTP request"),
    ("exec", (exec_adapter, "_write_pngs"), "encoding the frames as PNG for the exec adapter"),
])
def test_running_out_of_memory_while_encoding_a_frame_names_the_frame(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_server: ModelServer, kind: str,
        encoder: tuple[object, str], what: str) -> None:
    # Decoding a frame always needs more than encoding it, so no limit makes the encoder the
    # first to fail: its MemoryError is raised here instead.
    monkeypatch.setattr(*encoder, _no_memory)
    eval_dir = make_eval(tmp_path, {"c": CASE.replace("v.mp4", "cfr_h264.mp4")})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, *adapter_args(kind, eval_dir, model_server.url))
    assert code == 2, out + err
    assert f"not enough memory for {what} (the frame of 128x72); free memory" in err, err
    assert "Traceback" not in out + err and "MemoryError" not in out + err


@pytest.mark.parametrize("failure", [MemoryError(), RuntimeError("can't start new thread")])
def test_any_other_lack_of_memory_exits_2_without_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException) -> None:
    import glasskit_eval.commands.run as run_command

    def out_of_memory(*args: object) -> bool:
        raise failure

    # Where else memory runs out cannot be chosen with a limit; the command raises it here.
    monkeypatch.setattr(run_command, "execute_run", out_of_memory)
    code, out, err = run_cli("run", "--eval-dir", make_eval(tmp_path, {"c": CASE.replace("v.mp4", "cfr_h264.mp4")}))
    assert code == 2
    assert err == ("error: out of memory; free memory or raise the process's memory limit (ulimit -v), "
                   "lower --concurrency, or use smaller videos\n")


def test_other_runtime_errors_are_not_taken_for_a_lack_of_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import glasskit_eval.commands.run as run_command

    def broken(*args: object) -> bool:
        raise RuntimeError("a bug")

    monkeypatch.setattr(run_command, "execute_run", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        run_cli("run", "--eval-dir", make_eval(tmp_path, {"c": CASE.replace("v.mp4", "cfr_h264.mp4")}))
