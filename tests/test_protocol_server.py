"""The adapter side in Python: glasskit_eval/protocol_server.py, spoken to over pipes.

The server runs as a real process here, as users run it, including with only its own
file on a bare interpreter (no Pillow) and on older Python versions.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import glasskit_eval.protocol_server as protocol_server
from glasskit_eval.adapters._wire import encode_sample
from glasskit_eval.adapters.base import Sample
from glasskit_eval.video.png import encode_png

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "glasskit_eval" / "protocol_server.py"
ADAPTERS = ROOT / "fixtures" / "adapters" / "python"


def interpreter(version: str) -> str | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(root.glob(f"{version}.*/bin/python{version}")):
        return str(candidate)
    return shutil.which(f"python{version}")


def make_sample(index: int, size: tuple[int, int] = (20, 10)) -> Sample:
    width, height = size
    data = bytes((i * 13 + index * 7) % 256 for i in range(width * height * 3))
    return Sample(
        image=Image.frombytes("RGB", size, data),
        timestamp_s=index / 4,
        frame_index=index * 7,
        sample_index=index,
        video_path="/v/clip.mov",
        case_name="walk",
    )


def wire_sample(sample: Sample) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(encode_sample(sample))
    return decoded


TARGET = {"id": "door", "index": 1, "label": None, "config": {"threshold": 0.5}}


def initialize(request_id: int = 1, version: int = 1, **config: Any) -> dict[str, Any]:
    return {
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "config": {"evalDir": "/evals/e1", "config": config, "artifactsDir": None, "verbose": False},
        },
    }


def evaluate(request_id: int, sample: Sample, target: dict[str, Any] = TARGET) -> dict[str, Any]:
    return {
        "id": request_id,
        "method": "evaluate",
        "params": {"sample": wire_sample(sample), "target": target},
    }


def close(request_id: int) -> dict[str, Any]:
    return {"id": request_id, "method": "close", "params": {}}


class Result:
    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.returncode = proc.returncode
        self.stderr = proc.stderr.decode()
        # Every stdout line must be a protocol message.
        self.lines = [json.loads(line) for line in proc.stdout.splitlines()]
        self.by_id = {m["id"]: m for m in self.lines}

    def result(self, request_id: int) -> Any:
        message = self.by_id[request_id]
        assert "error" not in message, message
        return message["result"]

    def error(self, request_id: int) -> str:
        message = self.by_id[request_id]
        assert "result" not in message, message
        text: str = message["error"]["message"]
        return text


def converse(
    target: str,
    requests: list[dict[str, Any]],
    *,
    python: str = sys.executable,
    args: tuple[str, ...] = (),
    server: str | None = None,
    cwd: Path | None = None,
    raw: bytes = b"",
) -> Result:
    command = [python, *args]
    command += [server, target] if server else ["-m", "glasskit_eval.protocol_server", target]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in requests) + raw
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        command, input=data, capture_output=True, timeout=30, cwd=cwd or ROOT, env=env
    )
    return Result(proc)


def spawn_server(target: str) -> subprocess.Popen[bytes]:
    """The protocol server on ``target``'s create_evaluator, all three pipes open."""
    return subprocess.Popen(
        [sys.executable, "-m", "glasskit_eval.protocol_server", f"{target}:create_evaluator"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def write_adapter(tmp_path: Path, source: str, name: str = "adapter.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


# -- the happy path ---------------------------------------------------------------


def test_echo_adapter_end_to_end_over_pipes() -> None:
    sample = make_sample(3)
    result = converse(
        f"{ADAPTERS / 'echo_adapter.py'}:create_evaluator",
        [initialize(model="x"), evaluate(2, sample), close(3)],
    )
    assert result.returncode == 0, result.stderr
    assert result.result(1) == {
        "protocolVersion": 1,
        "capabilities": {"evaluate": True, "evaluateMany": False},
    }
    observation = result.result(2)
    assert observation["pixelsSha256"] == hashlib.sha256(sample.image.tobytes()).hexdigest()
    assert observation["context"] == {
        "evalDir": "/evals/e1",
        "config": {"model": "x"},
        "artifactsDir": None,
        "verbose": False,
    }
    assert observation["target"] == TARGET
    assert (observation["timestampS"], observation["frameIndex"]) == (0.75, 21)
    assert result.result(3) is None
    # print() in the adapter went to stderr; stdout held protocol messages only.
    assert "echo adapter ready" in result.stderr and "echo adapter closed" in result.stderr


def test_module_target_is_imported_from_the_current_directory(tmp_path: Path) -> None:
    package = tmp_path / "my_app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "eval.py").write_text(
        "class Factory:\n"
        "    class Nested:\n"
        "        @staticmethod\n"
        "        def create(config):\n"
        "            return Evaluator()\n"
        "class Evaluator:\n"
        "    def evaluate(self, sample, target):\n"
        "        return {'module': __name__, 'target': target.id}\n"
    )
    result = converse(
        "my_app.eval:Factory.Nested.create",
        [initialize(), evaluate(2, make_sample(0)), close(3)],
        cwd=tmp_path,
    )
    assert result.result(2) == {"module": "my_app.eval", "target": "door"}
    assert result.returncode == 0


@pytest.mark.parametrize(
    "source",
    [
        # sync factory, sync evaluator
        """
        class E:
            def evaluate(self, sample, target):
                return [sample.sample_index, target.config["threshold"]]
        def create_evaluator(config):
            return E()
        """,
        # async factory, async evaluator
        """
        import asyncio
        class E:
            async def evaluate(self, sample, target):
                await asyncio.sleep(0)
                return [sample.sample_index, target.config["threshold"]]
        async def create_evaluator(config):
            return E()
        """,
        # no-argument factory; a class is a factory too
        """
        class create_evaluator:
            def evaluate(self, sample, target):
                return [sample.sample_index, target.config["threshold"]]
        """,
        # simple function adapter (sample, target)
        """
        def create_evaluator(sample, target):
            return [sample.sample_index, target.config["threshold"]]
        """,
        # simple function adapter (image, target_id)
        """
        def create_evaluator(image, target_id):
            return [image.size[0] - 18, 0.5 if target_id == "door" else 0]
        """,
        # sync evaluate returning an awaitable
        """
        import asyncio
        class E:
            def evaluate(self, sample, target):
                async def later():
                    return [sample.sample_index, target.config["threshold"]]
                return later()
        def create_evaluator(config):
            return E()
        """,
        # a factory returning a simple function adapter (a closure)
        """
        def create_evaluator(config):
            threshold = 0.5
            return lambda sample, target: [sample.sample_index, threshold]
        """,
        """
        async def create_evaluator():
            async def judge(image, target_id):
                return [image.size[0] - 18, 0.5 if target_id == "door" else 0]
            return judge
        """,
    ],
    ids=["sync", "async", "class", "function-sample", "function-image", "awaitable", "factory-function-sample",
         "factory-function-image"],
)
def test_every_adapter_shape(tmp_path: Path, source: str) -> None:
    target = write_adapter(tmp_path, source) + ":create_evaluator"
    result = converse(target, [initialize(), evaluate(2, make_sample(2)), close(3)])
    assert result.returncode == 0, result.stderr
    assert result.result(2) == [2, 0.5]


def test_evaluate_many_gets_samples_in_order_and_wins(tmp_path: Path) -> None:
    target = write_adapter(
        tmp_path,
        """
        class E:
            def evaluate(self, sample, target):
                raise AssertionError("evaluate_many takes precedence")
            async def evaluate_many(self, samples, target):
                return tuple(s.sample_index for s in samples)
        def create_evaluator(config):
            return E()
        """,
    )
    samples = [wire_sample(make_sample(i)) for i in (4, 1, 7)]
    request = {"id": 2, "method": "evaluateMany", "params": {"samples": samples, "target": TARGET}}
    result = converse(f"{target}:create_evaluator", [initialize(), request, close(3)])
    assert result.result(1)["capabilities"] == {"evaluate": True, "evaluateMany": True}
    assert result.result(2) == [4, 1, 7]


def test_sample_image_matches_the_sent_frame_and_is_closed_afterwards(tmp_path: Path) -> None:
    target = write_adapter(
        tmp_path,
        """
        import hashlib
        kept = []
        def create_evaluator(sample, target):
            kept.append(sample)
            previous_closed = None
            if len(kept) > 1:
                try:
                    kept[0].image.tobytes()  # a new decode is fine...
                    previous_closed = getattr(kept[0]._image, "im", None) is None
                except ValueError:
                    previous_closed = True
            image = sample.image
            return {"mode": image.mode, "size": list(image.size),
                    "sha": hashlib.sha256(image.tobytes()).hexdigest(),
                    "png": hashlib.sha256(sample.png).hexdigest()}
        """,
    )
    sample = make_sample(5, (33, 17))
    result = converse(f"{target}:create_evaluator", [initialize(), evaluate(2, sample), close(3)])
    observation = result.result(2)
    assert observation == {
        "mode": "RGB",
        "size": [33, 17],
        "sha": hashlib.sha256(sample.image.tobytes()).hexdigest(),
        "png": hashlib.sha256(encode_png(sample.image)).hexdigest(),
    }


# -- errors --------------------------------------------------------------------------


def test_errors_are_answers_with_type_message_and_stack(tmp_path: Path) -> None:
    target = write_adapter(
        tmp_path,
        """
        def create_evaluator(sample, target):
            if sample.sample_index == 0:
                raise ValueError("no face found")
            return True
        """,
    )
    result = converse(
        f"{target}:create_evaluator",
        [initialize(), evaluate(2, make_sample(0)), evaluate(3, make_sample(1)), close(4)],
    )
    assert result.error(2) == "ValueError: no face found"
    assert "Traceback" in result.by_id[2]["error"]["stack"]
    assert result.result(3) is True
    assert result.returncode == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("float('nan')", "result.score is nan"),
        ("float('inf')", "result.score is inf"),
        ("{1, 2}", "result.score has type set"),
        ("{1: 'a'}", "result.score has a key 1 that is not a string"),
        ("b'bytes'", "result.score has type bytes"),
    ],
)
def test_non_json_results_are_refused_with_the_location(
    tmp_path: Path, value: str, expected: str
) -> None:
    target = write_adapter(
        tmp_path,
        f"""
        def create_evaluator(sample, target):
            return {{"score": {value}}}
        """,
    )
    result = converse(f"{target}:create_evaluator", [initialize(), evaluate(2, make_sample(0)), close(3)])
    assert expected in result.error(2) and "not JSON-like" in result.error(2)
    assert result.returncode == 0


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def create_evaluator(config):\n    raise RuntimeError('missing API key')\n",
         "RuntimeError: missing API key"),
        ("def create_evaluator(config):\n    return object()\n", "neither evaluate"),
        ("def create_evaluator(a, b, c):\n    pass\n", "3 required arguments"),
    ],
)
def test_initialize_errors(tmp_path: Path, source: str, expected: str) -> None:
    target = write_adapter(tmp_path, source)
    result = converse(f"{target}:create_evaluator", [initialize(), evaluate(2, make_sample(0)), close(3)])
    assert expected in result.error(1)
    assert "not initialized" in result.error(2)
    assert result.result(3) is None and result.returncode == 0


def test_other_protocol_versions_are_refused() -> None:
    result = converse(f"{ADAPTERS / 'echo_adapter.py'}:create_evaluator", [initialize(version=2), close(2)])
    assert "unsupported protocol version 2" in result.error(1)


def test_unknown_methods_get_an_error_answer() -> None:
    result = converse(
        f"{ADAPTERS / 'echo_adapter.py'}:create_evaluator",
        [initialize(), {"id": 2, "method": "describe", "params": {}}, close(3)],
    )
    assert "unknown method: 'describe'" in result.error(2)
    assert result.returncode == 0


def test_invalid_request_stops_with_status_1() -> None:
    result = converse(f"{ADAPTERS / 'echo_adapter.py'}:create_evaluator", [initialize()], raw=b"{oops\n")
    assert result.returncode == 1
    assert "invalid request" in result.stderr


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("no_colon", "must look like"),
        ("does_not_exist_mod:create", "ModuleNotFoundError"),
        ("missing/adapter.py:create", "adapter file not found"),
        (f"{ADAPTERS / 'echo_adapter.py'}:nope", "has no attribute 'nope'"),
    ],
)
def test_bad_targets_exit_with_status_2(target: str, expected: str) -> None:
    result = converse(target, [initialize()])
    assert result.returncode == 2
    assert expected in result.stderr and result.lines == []


def test_end_of_input_without_close_still_closes_the_evaluator() -> None:
    result = converse(f"{ADAPTERS / 'echo_adapter.py'}:create_evaluator", [initialize()])
    assert result.returncode == 0
    assert "echo adapter closed" in result.stderr


# -- stdout is protected -------------------------------------------------------------------


def test_prints_libraries_and_child_processes_cannot_pollute_stdout(tmp_path: Path) -> None:
    target = write_adapter(
        tmp_path,
        """
        import os, subprocess, sys
        def create_evaluator(config):
            print("factory print")
            os.write(1, b"raw fd 1 write\\n")
            subprocess.run([sys.executable, "-c", "print('child print')"], check=True)
            subprocess.run([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"],
                           check=True)
            return Evaluator()
        class Evaluator:
            def evaluate(self, sample, target):
                print("evaluate print", flush=True)
                return 1
        """,
    )
    result = converse(f"{target}:create_evaluator", [initialize(), evaluate(2, make_sample(0)), close(3)])
    # Result() parsed every stdout line as JSON, so nothing else got there.
    assert [m["id"] for m in result.lines] == [1, 2, 3]
    for text in ("factory print", "raw fd 1 write", "child print", "evaluate print"):
        assert text in result.stderr
    # The child read an empty stdin instead of the protocol's requests.
    assert "''" in result.stderr


# -- cancel and close --------------------------------------------------------------------


def test_cancel_aborts_an_async_call_and_close_waits_for_running_calls(tmp_path: Path) -> None:
    target = write_adapter(
        tmp_path,
        """
        import asyncio, sys
        class E:
            async def evaluate(self, sample, target):
                if target.config.get("hang"):
                    try:
                        await asyncio.sleep(60)
                    except asyncio.CancelledError:
                        print("evaluate cancelled", file=sys.stderr)
                        raise
                await asyncio.sleep(0.3)
                return "slow but done"
            async def close(self):
                print("closed after calls", file=sys.stderr)
        def create_evaluator(config):
            return E()
        """,
    )
    proc = spawn_server(target)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    try:
        send(initialize())
        assert json.loads(proc.stdout.readline())["id"] == 1
        hang_target = dict(TARGET, config={"hang": True})
        send(evaluate(2, make_sample(0), hang_target))
        time.sleep(0.2)
        send({"method": "cancel", "params": {"id": 2}})
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2 and "cancelled" in answer["error"]["message"]
        send(evaluate(3, make_sample(1)))
        send(close(4))
        # close waits for the running call, then answers.
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert answers == [{"id": 3, "result": "slow but done"}, {"id": 4, "result": None}]
        assert proc.wait(timeout=10) == 0
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert "evaluate cancelled" in stderr and "closed after calls" in stderr
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("ending", ["close", "end of input"])
def test_blocking_call_still_running_does_not_delay_exit(tmp_path: Path, ending: str) -> None:
    target = write_adapter(
        tmp_path,
        """
        import sys, time
        def create_evaluator(sample, target):
            print("blocking call started", file=sys.stderr, flush=True)
            time.sleep(30)
        """,
    )
    proc = spawn_server(target)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        requests = [initialize(), evaluate(2, make_sample(0))]
        proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        proc.stdin.flush()
        # Wait until the call really runs on a worker thread.
        assert b"blocking call started" in proc.stderr.readline()
        proc.stdin.write(json.dumps({"method": "cancel", "params": {"id": 2}}).encode() + b"\n")
        if ending == "close":
            proc.stdin.write(json.dumps(close(3)).encode() + b"\n")
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        answers = {m["id"]: m for m in map(json.loads, proc.stdout.read().splitlines())}
        assert "cancelled" in answers[2]["error"]["message"]
        if ending == "close":
            assert answers[3] == {"id": 3, "result": None}
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# -- standalone, bare interpreters ---------------------------------------------------------


def test_the_file_alone_on_a_bare_interpreter_without_pillow(tmp_path: Path) -> None:
    server = tmp_path / "protocol_server.py"
    shutil.copy(SERVER, server)
    sample = make_sample(1, (12, 8))
    adapter = write_adapter(
        tmp_path,
        """
        def uses_image(sample, target):
            return sample.image.size
        """,
        "needs_pillow.py",
    )
    # -S: no site-packages, so no Pillow, no PyYAML, no av, no glasskit_eval.
    result = converse(
        f"{ADAPTERS / 'png_only_adapter.py'}:evaluate",
        [initialize(), evaluate(2, sample), close(3)],
        args=("-I", "-S"),
        server=str(server),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.result(2)["pngSha256"] == hashlib.sha256(encode_png(sample.image)).hexdigest()
    assert (result.result(2)["width"], result.result(2)["height"]) == (12, 8)

    result = converse(
        f"{adapter}:uses_image",
        [initialize(), evaluate(2, sample), close(3)],
        args=("-I", "-S"),
        server=str(server),
        cwd=tmp_path,
    )
    assert "needs Pillow installed" in result.error(2) and "sample.png" in result.error(2)


@pytest.mark.parametrize("version", ["3.8", "3.10", "3.13"])
def test_other_python_versions(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    if python is None:
        pytest.skip(f"python{version} is not installed")
    server = tmp_path / "protocol_server.py"
    shutil.copy(SERVER, server)
    sample = make_sample(2)
    result = converse(
        f"{ADAPTERS / 'png_only_adapter.py'}:evaluate",
        [initialize(), evaluate(2, sample), close(3)],
        python=python,
        args=("-I", "-S"),
        server=str(server),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.result(2)["python"] == [int(part) for part in version.split(".")]
    assert result.result(2)["pngSha256"] == hashlib.sha256(encode_png(sample.image)).hexdigest()


def test_module_imports_nothing_else_from_the_package() -> None:
    source = SERVER.read_text()
    assert "from ." not in source and "import glasskit_eval" not in source
    assert protocol_server.PROTOCOL_VERSION == 1


def test_serve_on_given_streams_in_process() -> None:
    requests = b"".join(
        json.dumps(r).encode() + b"\n"
        for r in [initialize(), evaluate(2, make_sample(0)), close(3)]
    )
    out = io.BytesIO()

    class E:
        def evaluate(self, sample: Any, target: Any) -> Any:
            return {"case": sample.case_name, "w": sample.width}

    code = protocol_server.serve(lambda config: E(), stdin=io.BytesIO(requests), stdout=out)
    assert code == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[1] == {"id": 2, "result": {"case": "walk", "w": 20}}


def frame_request(request_id: int, sample: Sample, stream_id: str = "s1") -> dict[str, Any]:
    return {"id": request_id, "method": "frame",
            "params": {"stream": {"id": stream_id}, "sample": wire_sample(sample), "target": TARGET}}


def test_a_stream_over_the_protocol_reaches_on_frame_start_stream_and_end_stream() -> None:
    stream = {"id": "s1", "case": "walk", "video": "/v/clip.mov", "everyS": 0.5, "pace": None}
    requests = [initialize(),
                {"id": 2, "method": "startStream", "params": {"stream": stream, "target": TARGET}},
                frame_request(3, make_sample(0)), frame_request(4, make_sample(1)), frame_request(5, make_sample(2)),
                {"id": 6, "method": "endStream", "params": {"stream": {"id": "s1"}, "target": TARGET}}, close(7)]
    out = io.BytesIO()
    seen: list[Any] = []

    class Streamer:
        def start_stream(self, target: Any, stream: Any) -> None:
            seen.append((target.id, stream.case, stream.every_s, stream.pace, stream.id))

        async def on_frame(self, sample: Any, target: Any) -> Any:
            sample.report_usage(cost=0.5)
            return [None, ({"i": sample.sample_index}, sample.width), {"f": sample.frame_index}][sample.sample_index]

        def end_stream(self, target: Any) -> Any:
            return ["bye", target.id]

    data = io.BytesIO(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    assert protocol_server.serve(lambda config: Streamer(), stdin=data, stdout=out) == 0
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines())}
    assert answers[1]["result"]["capabilities"] == {"evaluate": False, "evaluateMany": False, "frame": True}
    assert seen == [("door", "walk", 0.5, None, "s1")]
    assert answers[2] == {"id": 2, "result": None}
    # None, a tuple (an array: a list of emissions) and one emission, with the usage beside each.
    assert [answers[i]["result"] for i in (3, 4, 5)] == [None, [{"i": 1}, 20], {"f": 14}]
    assert answers[4]["usage"] == {"cost": 0.5}
    assert answers[6] == {"id": 6, "result": ["bye", "door"]}


def test_stream_requests_to_an_adapter_without_on_frame_are_error_answers() -> None:
    out = io.BytesIO()

    class Plain:
        def evaluate(self, sample: Any, target: Any) -> Any:
            return 1

    data = io.BytesIO(b"".join(json.dumps(r).encode() + b"\n" for r in [initialize(), frame_request(2, make_sample(0)),
                                                                        close(3)]))
    assert protocol_server.serve(lambda config: Plain(), stdin=data, stdout=out) == 0
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines())}
    assert "frame" not in answers[1]["result"]["capabilities"]
    assert answers[2]["error"]["message"] == "TypeError: the adapter does not implement on_frame"
