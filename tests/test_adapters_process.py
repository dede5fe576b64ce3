"""Command adapters as real processes: good ones, and every way of misbehaving.

Each misbehaving adapter in fixtures/adapters/ must give a clear error within seconds
and leave no process behind. Python fixtures run with ``sys.executable``, Node ones
with ``node`` (skipped when it is not installed).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from PIL import Image

from glasskit_eval.adapters._process import CommandEvaluator, _live_group_members
from glasskit_eval.adapters._wire import encode_sample
from glasskit_eval.adapters.base import FactoryConfig, Sample, Target
from glasskit_eval.adapters.command import CommandAdapterSpec
from glasskit_eval.errors import AdapterError, ProtocolError
from glasskit_eval.video.png import encode_png

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "fixtures" / "adapters"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")
LANGS = ["python", pytest.param("node", marks=needs_node)]

T = TypeVar("T")


# -- helpers ---------------------------------------------------------------------


def misbehave(lang: str, mode: str, arg: str = "") -> str:
    if lang == "python":
        words = [sys.executable, str(ADAPTERS / "python" / "misbehave.py"), mode]
    else:
        words = ["node", str(ADAPTERS / "js" / "misbehave.mjs"), mode]
    if arg:
        words.append(arg)
    return shlex.join(words)


def node_echo(*flags: str) -> str:
    return shlex.join(["node", str(ADAPTERS / "js" / "echo_adapter.mjs"), *flags])


def python_echo() -> str:
    return shlex.join(
        [
            sys.executable,
            "-m",
            "glasskit_eval.protocol_server",
            f"{ADAPTERS / 'python' / 'echo_adapter.py'}:create_evaluator",
        ]
    )


def make_spec(command: str, **kwargs: Any) -> CommandAdapterSpec:
    kwargs.setdefault("grace_s", 1.0)
    kwargs.setdefault("terminate_grace_s", 0.5)
    kwargs.setdefault("stderr", io.StringIO())
    return CommandAdapterSpec(command, **kwargs)


def factory_config(tmp: Path | None = None, **config: Any) -> FactoryConfig:
    return FactoryConfig(
        eval_dir=Path("."),
        config=config,
        artifacts_dir=tmp,
        verbose=True,
    )


def make_image(seed: int, size: tuple[int, int] = (40, 30)) -> Image.Image:
    width, height = size
    data = bytes((i * 7 + seed * 31 + (i // 97)) % 256 for i in range(width * height * 3))
    return Image.frombytes("RGB", size, data)


def make_sample(index: int, size: tuple[int, int] = (40, 30)) -> Sample:
    return Sample(
        image=make_image(index, size),
        timestamp_s=index * 0.5,
        frame_index=index * 15,
        sample_index=index,
        video_path="/videos/clip.mp4",
        case_name="case_a",
    )


def target(**config: Any) -> Target:
    return Target(id="step_1", index=0, label="Step one", config=config)


def run(coro: Awaitable[T], limit_s: float = 60.0) -> T:
    """Run a test coroutine, with a generous guard so a hang fails instead of blocking CI."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, limit_s)

    return asyncio.run(bounded())


def pixels_sha(sample: Sample) -> str:
    return hashlib.sha256(sample.image.tobytes()).hexdigest()


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    # Orphans may linger as zombies when PID 1 does not reap; they are dead.
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def live_children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def importable_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m glasskit_eval.protocol_server`` must work from any directory."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    if Path("/proc").is_dir():
        deadline = time.monotonic() + 2
        while live_children() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert live_children() == []


async def closed(evaluator: CommandEvaluator) -> None:
    """Close, then check the whole process group is gone."""
    try:
        await evaluator.close()
    finally:
        assert not _live_group_members(evaluator.pid)


def mirrored(spec: CommandAdapterSpec) -> str:
    assert isinstance(spec.stderr, io.StringIO)
    return spec.stderr.getvalue()


# -- command lines ------------------------------------------------------------------


def test_command_is_split_like_a_posix_shell_without_a_shell() -> None:
    spec = CommandAdapterSpec("""node  'my dir/adapter.mjs' --name="a b" $HOME | cat""")
    assert spec.argv == ("node", "my dir/adapter.mjs", "--name=a b", "$HOME", "|", "cat")
    assert spec.describe() == """node  'my dir/adapter.mjs' --name="a b" $HOME | cat"""


@pytest.mark.parametrize("command", ["", "   ", "\t\n"])
def test_empty_command_is_refused(command: str) -> None:
    with pytest.raises(AdapterError, match="empty"):
        CommandAdapterSpec(command)


def test_unparseable_command_is_refused() -> None:
    with pytest.raises(AdapterError, match="cannot parse"):
        CommandAdapterSpec("node 'adapter.mjs")


def test_missing_executable_is_a_clear_error() -> None:
    spec = make_spec("no-such-adapter-binary-xyz --flag")
    with pytest.raises(AdapterError, match="'no-such-adapter-binary-xyz' was not found"):
        run(spec.create(factory_config()))


def test_non_executable_file_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "adapter.sh"
    script.write_text("#!/bin/sh\n")
    spec = make_spec(shlex.quote(str(script)))
    with pytest.raises(AdapterError, match="not executable"):
        run(spec.create(factory_config()))


# -- frames --------------------------------------------------------------------------


def test_encode_sample_is_the_wire_sample_with_a_lossless_png() -> None:
    import base64
    import json

    sample = make_sample(3, (17, 9))
    wire = json.loads(encode_sample(sample))
    image = wire.pop("image")
    assert wire == {
        "timestampS": 1.5,
        "frameIndex": 45,
        "sampleIndex": 3,
        "videoPath": "/videos/clip.mp4",
        "caseName": "case_a",
    }
    assert image["mimeType"] == "image/png"
    assert (image["width"], image["height"]) == (17, 9)
    png = base64.b64decode(image["dataBase64"])
    assert png == encode_png(sample.image)
    with Image.open(io.BytesIO(png)) as decoded:
        assert decoded.mode == "RGB" and decoded.tobytes() == sample.image.tobytes()


@pytest.mark.parametrize("level", range(10))
def test_png_is_lossless_at_every_level(level: int) -> None:
    image = Image.frombytes("RGB", (64, 48), random.Random(level).randbytes(64 * 48 * 3))
    png = encode_png(image, level)
    with Image.open(io.BytesIO(png)) as decoded:
        assert decoded.mode == "RGB" and decoded.size == (64, 48)
        assert decoded.tobytes() == image.tobytes()
    if level == 0:
        # Stored: the filtered scanlines plus framing, nothing compressed.
        assert len(png) > 64 * 48 * 3


@pytest.mark.parametrize("size", [(1, 1), (1, 9), (9, 1), (3, 7), (333, 2), (1920, 1080)])
def test_png_is_lossless_at_any_size(size: tuple[int, int]) -> None:
    image = make_image(size[0] + size[1], size)
    with Image.open(io.BytesIO(encode_png(image))) as decoded:
        decoded.load()
        assert decoded.tobytes() == image.tobytes()


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "I;16"])
def test_png_of_other_modes_falls_back_to_pillow(mode: str) -> None:
    image = make_image(1, (10, 6)).convert(mode)
    with Image.open(io.BytesIO(encode_png(image))) as decoded:
        assert decoded.mode == image.mode and decoded.tobytes() == image.tobytes()


def test_png_decodes_in_node_too() -> None:
    if NODE is None:
        pytest.skip("node is not installed")
    image = make_image(3, (37, 21))
    # The helper's own decoder (what a copied-alone Node adapter has), RGBA out.
    script = (
        "import { decodePng } from './glasskit_adapter.mjs';"
        "import { createHash } from 'node:crypto';"
        "const chunks = []; for await (const c of process.stdin) chunks.push(c);"
        "const { data } = decodePng(Buffer.concat(chunks));"
        "console.log(createHash('sha256').update(data).digest('hex'));"
    )
    proc = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        input=encode_png(image), capture_output=True, cwd=ROOT / "glasskit_eval" / "assets", timeout=30, check=True,
    )
    assert proc.stdout.decode().strip() == hashlib.sha256(image.convert("RGBA").tobytes()).hexdigest()


# -- good adapters ------------------------------------------------------------------


GOOD_EVALUATE = [
    pytest.param(python_echo(), id="python-protocol-server"),
    pytest.param(node_echo(), id="node-helper", marks=needs_node),
]


@pytest.mark.parametrize("command", GOOD_EVALUATE)
def test_evaluate_receives_exact_pixels_and_every_field(command: str, tmp_path: Path) -> None:
    spec = make_spec(command)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config(tmp_path, model="m1", nested={"k": [1, 2]}))
        assert not evaluator.batch
        try:
            sample = make_sample(2)
            observation = await evaluator.evaluate(sample, target(prompt="p", n=3))
            assert observation["strategy"] == "evaluate"
            assert observation["pixelsSha256"] == pixels_sha(sample)
            assert observation["firstPixel"] == list(sample.image.tobytes()[:3])
            assert (observation["width"], observation["height"]) == (40, 30)
            assert observation["timestampS"] == 1.0
            assert observation["frameIndex"] == 30
            assert observation["sampleIndex"] == 2
            assert observation["videoPath"] == "/videos/clip.mp4"
            assert observation["caseName"] == "case_a"
            assert observation["target"] == {
                "id": "step_1",
                "index": 0,
                "label": "Step one",
                "config": {"prompt": "p", "n": 3},
            }
            assert observation["context"] == {
                "evalDir": str(Path(".").resolve()),
                "config": {"model": "m1", "nested": {"k": [1, 2]}},
                "artifactsDir": str(tmp_path.resolve()),
                "verbose": True,
            }
        finally:
            await closed(evaluator)

    run(scenario())
    assert "echo adapter ready" in mirrored(spec)
    assert "echo adapter closed" in mirrored(spec)


@pytest.mark.parametrize("command", GOOD_EVALUATE)
def test_factory_error_fails_initialize_and_the_adapter_still_exits_cleanly(command: str) -> None:
    spec = make_spec(command)
    with pytest.raises(AdapterError) as info:
        run(spec.create(factory_config(failInit="no API key in MODEL_API_KEY")))
    assert type(info.value) is AdapterError
    assert "failed to initialize" in str(info.value)
    assert "no API key in MODEL_API_KEY" in str(info.value)


@pytest.mark.parametrize("command", GOOD_EVALUATE)
def test_concurrent_calls_get_their_own_answers(command: str) -> None:
    spec = make_spec(command)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        try:
            samples = [make_sample(i, (24 + i, 16)) for i in range(8)]
            observations = await asyncio.gather(
                *(evaluator.evaluate(sample, target()) for sample in samples)
            )
            assert [o["pixelsSha256"] for o in observations] == [pixels_sha(s) for s in samples]
            assert [o["width"] for o in observations] == [24 + i for i in range(8)]
        finally:
            await closed(evaluator)

    run(scenario())


@pytest.mark.parametrize(
    ("command", "config"),
    [
        pytest.param(python_echo(), {"many": True}, id="python-protocol-server"),
        pytest.param(node_echo("--many"), {}, id="node-helper", marks=needs_node),
        pytest.param(node_echo("--both"), {}, id="node-helper-both", marks=needs_node),
    ],
)
def test_evaluate_many_answers_in_order(command: str, config: dict[str, Any]) -> None:
    spec = make_spec(command)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config(**config))
        # evaluateMany takes precedence when both are reported.
        assert evaluator.batch
        try:
            samples = [make_sample(i) for i in range(5)]
            observations = await evaluator.evaluate_many(samples, target())
            assert [o["strategy"] for o in observations] == ["evaluateMany"] * 5
            assert [o["sampleIndex"] for o in observations] == list(range(5))
            assert [o["pixelsSha256"] for o in observations] == [pixels_sha(s) for s in samples]
        finally:
            await closed(evaluator)

    run(scenario())


@pytest.mark.parametrize("command", GOOD_EVALUATE)
def test_adapter_errors_become_adapter_errors_and_the_adapter_carries_on(command: str) -> None:
    spec = make_spec(command)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        try:
            with pytest.raises(AdapterError) as info:
                await evaluator.evaluate(make_sample(0), target(fail="quota exceeded"))
            assert type(info.value) is AdapterError
            assert "quota exceeded" in str(info.value)
            observation = await evaluator.evaluate(make_sample(1), target())
            assert observation["sampleIndex"] == 1
        finally:
            await closed(evaluator)

    run(scenario())


@pytest.mark.parametrize("command", GOOD_EVALUATE)
def test_cancelled_call_is_aborted_in_the_adapter(command: str) -> None:
    spec = make_spec(command)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        try:
            hanging = asyncio.ensure_future(evaluator.evaluate(make_sample(4), target(hang=True)))
            await asyncio.sleep(0.3)
            hanging.cancel()
            with pytest.raises(asyncio.CancelledError):
                await hanging
            # The adapter is still fine for other calls.
            observation = await evaluator.evaluate(make_sample(5), target())
            assert observation["sampleIndex"] == 5
        finally:
            await closed(evaluator)

    run(scenario())
    assert re.search(r"(aborted|cancelled) sample 4", mirrored(spec))


def test_large_frames_and_large_batches_flow(tmp_path: Path) -> None:
    spec = make_spec(python_echo())

    async def scenario() -> None:
        evaluator = await spec.create(factory_config(many=True))
        try:
            samples = [make_sample(i, (640, 360)) for i in range(6)]
            observations = await evaluator.evaluate_many(samples, target())
            assert [o["pixelsSha256"] for o in observations] == [pixels_sha(s) for s in samples]
        finally:
            await closed(evaluator)

    run(scenario())


def test_oversized_batch_is_refused_before_sending_with_advice() -> None:
    spec = make_spec(python_echo(), max_message_bytes=20_000)

    async def scenario() -> None:
        evaluator = await spec.create(factory_config(many=True))
        try:
            samples = [make_sample(i, (64, 64)) for i in range(12)]
            for i, sample in enumerate(samples):
                # Noise, so the PNGs cannot compress below the limit.
                sample.image = Image.frombytes("RGB", (64, 64), random.Random(i).randbytes(64 * 64 * 3))
            with pytest.raises(AdapterError) as info:
                await evaluator.evaluate_many(samples, target())
            message = str(info.value)
            assert "12 samples" in message and "Lower the batch" in message
            assert "implement evaluate" in message
            # Nothing was sent, so the adapter is still usable.
            [observation] = await evaluator.evaluate_many([make_sample(0, (8, 8))], target())
            assert observation["sampleIndex"] == 0
        finally:
            await closed(evaluator)

    run(scenario())


def test_stderr_is_mirrored_and_a_start_up_failure_points_at_it_instead_of_quoting_it_again() -> None:
    script = (
        "import sys\n"
        "for i in range(30): print(f'line {i}', file=sys.stderr)\n"
        "sys.exit(9)\n"
    )
    spec = make_spec(shlex.join([sys.executable, "-c", script]))
    with pytest.raises(AdapterError) as info:
        run(spec.create(factory_config()))
    message = str(info.value)
    assert "exited with status 9 before answering initialize" in message
    assert message.endswith("Its stderr is printed above; the line that tells why:\n  | line 29")
    assert "line 28" not in message
    assert mirrored(spec).splitlines() == [f"| line {i}" for i in range(30)]  # led by "| ": never a command


def test_close_twice_and_calls_after_close() -> None:
    spec = make_spec(python_echo())

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        await closed(evaluator)
        await evaluator.close()
        with pytest.raises(AdapterError, match="shutting down"):
            await evaluator.evaluate(make_sample(0), target())

    run(scenario())


# -- misbehaving adapters ---------------------------------------------------------------


def expect_create_error(command: str, **kwargs: Any) -> tuple[AdapterError, CommandAdapterSpec]:
    spec = make_spec(command, **kwargs)
    with pytest.raises(AdapterError) as info:
        run(spec.create(factory_config()))
    return info.value, spec


def expect_call_error(
    command: str,
    call: Callable[[CommandEvaluator], Awaitable[Any]] | None = None,
    *,
    close_fails: bool = False,
    **kwargs: Any,
) -> tuple[AdapterError, CommandAdapterSpec]:
    """Run one call that must fail; then closing must still end quickly."""
    spec = make_spec(command, **kwargs)

    async def default_call(evaluator: CommandEvaluator) -> Any:
        return await evaluator.evaluate(make_sample(0), target())

    async def scenario() -> AdapterError:
        evaluator = await spec.create(factory_config())
        try:
            with pytest.raises(AdapterError) as info:
                await (call or default_call)(evaluator)
            return info.value
        finally:
            if close_fails:
                with pytest.raises(AdapterError, match="did not close cleanly"):
                    await evaluator.close()
            else:
                await evaluator.close()
            assert not _live_group_members(evaluator.pid)

    error = run(scenario())
    return error, spec


@pytest.mark.parametrize("lang", LANGS)
def test_exits_before_initialize(lang: str) -> None:
    error, _ = expect_create_error(misbehave(lang, "exit-before-initialize"))
    message = str(error)
    assert "exited with status 3 before answering initialize" in message
    assert re.search(r"\(pid \d+\)", message)
    assert "fatal: cannot load the model" in message


@pytest.mark.parametrize("lang", LANGS)
def test_invalid_json(lang: str) -> None:
    error, _ = expect_call_error(misbehave(lang, "invalid-json"))
    assert isinstance(error, ProtocolError)
    assert "broke the protocol" in str(error) and "invalid JSON" in str(error)
    assert '{"ok": tru' in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_log_lines_on_stdout(lang: str) -> None:
    error, _ = expect_call_error(misbehave(lang, "stdout-log"))
    assert isinstance(error, ProtocolError)
    message = str(error)
    assert "Loading model weights" in message
    assert "write logs to stderr" in message


@pytest.mark.parametrize("lang", LANGS)
def test_unknown_id(lang: str) -> None:
    error, _ = expect_call_error(misbehave(lang, "unknown-id"))
    assert isinstance(error, ProtocolError) and "which was never sent" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_duplicate_id(lang: str) -> None:
    async def twice(evaluator: CommandEvaluator) -> Any:
        assert await evaluator.evaluate(make_sample(0), target()) is True
        return await evaluator.evaluate(make_sample(1), target())

    error, _ = expect_call_error(misbehave(lang, "duplicate-id"), twice)
    assert isinstance(error, ProtocolError) and "twice" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_never_answers_until_a_fail_fast_error_cancels_and_closes_it(lang: str) -> None:
    spec = make_spec(misbehave(lang, "never-answer"))

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        calls = [asyncio.ensure_future(evaluator.evaluate(make_sample(i), target())) for i in range(3)]
        await asyncio.sleep(0.3)
        assert not any(call.done() for call in calls)
        # A fail-fast error elsewhere: the runner cancels what is pending, then closes.
        await evaluator.cancel_pending()
        for call in calls:
            with pytest.raises(AdapterError, match="cancelled"):
                await call
        await closed(evaluator)

    run(scenario())
    assert re.findall(r"cancelled \d+", mirrored(spec)) == ["cancelled 2", "cancelled 3", "cancelled 4"]


@pytest.mark.parametrize("lang", LANGS)
def test_crash_mid_call_fails_every_pending_call(lang: str) -> None:
    spec = make_spec(misbehave(lang, "crash"))

    async def scenario() -> list[BaseException]:
        evaluator = await spec.create(factory_config())
        try:
            results = await asyncio.gather(
                *(evaluator.evaluate(make_sample(i), target()) for i in range(3)),
                return_exceptions=True,
            )
        finally:
            await closed(evaluator)
        return [r for r in results if isinstance(r, BaseException)]

    errors = run(scenario())
    assert len(errors) == 3
    message = str(errors[0])
    assert all(str(e) == message for e in errors)
    assert re.search(r"\(pid \d+\) exited with status 7 while \d calls? (was|were) pending", message)
    assert "model server connection refused" in message
    assert "Last lines of its stderr" in message


@pytest.mark.parametrize("lang", LANGS)
def test_wrong_number_of_batch_results(lang: str) -> None:
    async def batch(evaluator: CommandEvaluator) -> Any:
        assert evaluator.batch
        return await evaluator.evaluate_many([make_sample(0), make_sample(1)], target())

    error, _ = expect_call_error(misbehave(lang, "wrong-count"), batch)
    assert isinstance(error, ProtocolError)
    assert "sent 2 samples, got 3 results" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_non_json_values(lang: str) -> None:
    error, _ = expect_call_error(misbehave(lang, "nan"))
    assert isinstance(error, ProtocolError)
    assert "NaN" in str(error) and "not JSON" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_ignores_close_and_sigterm_with_a_child_process(lang: str) -> None:
    spec = make_spec(misbehave(lang, "ignore-term"), grace_s=0.5, terminate_grace_s=0.5)

    async def scenario() -> tuple[int, AdapterError]:
        evaluator = await spec.create(factory_config())
        for _ in range(100):
            if "child pid" in mirrored(spec):
                break
            await asyncio.sleep(0.02)
        with pytest.raises(AdapterError) as info:
            await evaluator.close()
        assert not _live_group_members(evaluator.pid)
        return evaluator.pid, info.value

    pid, error = run(scenario())
    child = int(re.search(r"child pid (\d+)", mirrored(spec)).group(1))  # type: ignore[union-attr]
    assert process_gone(pid) and process_gone(child)
    assert "did not answer close within 0.5s and was terminated" in str(error)
    assert "ignoring close" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_line_larger_than_the_limit(lang: str) -> None:
    error, _ = expect_call_error(
        misbehave(lang, "huge-line", "20000"), max_message_bytes=8192
    )
    assert isinstance(error, ProtocolError)
    assert "longer than the 8 KiB protocol message limit" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_no_capability(lang: str) -> None:
    error, _ = expect_create_error(misbehave(lang, "no-capabilities"))
    assert isinstance(error, ProtocolError)
    assert "failed to initialize" in str(error) and "none of the evaluate, evaluateMany and frame" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_another_protocol_version(lang: str) -> None:
    error, _ = expect_create_error(misbehave(lang, "protocol-v2"))
    assert isinstance(error, ProtocolError)
    assert "protocol version 2" in str(error) and "speaks version 1" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_error_answer(lang: str) -> None:
    error, _ = expect_call_error(misbehave(lang, "error"))
    assert type(error) is AdapterError and str(error) == "backend said no"


@pytest.mark.parametrize("lang", LANGS)
def test_close_answered_with_an_error(lang: str) -> None:
    async def ok(evaluator: CommandEvaluator) -> Any:
        assert await evaluator.evaluate(make_sample(0), target()) is True
        await evaluator.close()

    error, _ = expect_call_error(misbehave(lang, "close-error"), ok)
    assert "did not close cleanly: close failed: could not flush the cache" in str(error)


@pytest.mark.parametrize("lang", LANGS)
def test_bad_exit_status_after_close(lang: str) -> None:
    async def ok(evaluator: CommandEvaluator) -> Any:
        await evaluator.close()

    error, _ = expect_call_error(misbehave(lang, "bad-exit-after-close"), ok)
    assert "exited with status 4 after close" in str(error)


def test_exit_between_calls_is_reported_by_the_next_call_or_by_close() -> None:
    command = misbehave("python", "exit-after-initialize")

    async def next_call() -> None:
        evaluator = await make_spec(command).create(factory_config())
        await asyncio.sleep(0.8)
        with pytest.raises(AdapterError, match="exited with status 5 unexpectedly") as info:
            await evaluator.evaluate(make_sample(0), target())
        assert "worker pool died" in str(info.value)
        await closed(evaluator)  # already reported: close is quiet

    async def at_close() -> None:
        evaluator = await make_spec(command).create(factory_config())
        await asyncio.sleep(0.8)
        with pytest.raises(AdapterError, match="exited with status 5 unexpectedly"):
            await closed(evaluator)

    run(next_call())
    run(at_close())


def test_adapter_that_closes_stdout_but_keeps_running() -> None:
    error, _ = expect_call_error(misbehave("python", "close-stdout"), close_fails=True)
    assert "closed its stdout" in str(error)


def test_adapter_that_stops_reading_stdin() -> None:
    error, _ = expect_call_error(misbehave("python", "stop-reading"), close_fails=True)
    message = str(error)
    assert "stopped reading its stdin" in message or "closed its stdin" in message


def test_exit_is_reported_at_once_even_when_an_orphan_holds_stdout_open() -> None:
    # The orphan keeps the pipe open for 600 s: watching the pipe would wait that long
    # (run()'s 60 s guard would fail the test); watching the process reports the exit.
    error, _ = expect_call_error(misbehave("python", "crash-leaving-orphan"))
    assert re.search(r"\(pid \d+\) exited with status 7 while 1 call was pending", str(error))
    assert "backend died" in str(error)


def test_a_descendant_that_left_the_session_is_swept_at_close() -> None:
    spec = make_spec(misbehave("python", "daemon"))

    async def scenario() -> AdapterError:
        evaluator = await spec.create(factory_config())
        assert await evaluator.evaluate(make_sample(0), target()) is True
        with pytest.raises(AdapterError) as info:
            await closed(evaluator)
        return info.value

    error = run(scenario())
    daemon = int(re.search(r"daemon pid (\d+)", mirrored(spec)).group(1))  # type: ignore[union-attr]
    assert daemon != 0
    # It kept the adapter's stderr: named, as a helper left holding the pipes is.
    assert f"left 1 process holding its stdout or stderr: pid {daemon} (" in str(error)
    deadline = time.monotonic() + 2
    while not process_gone(daemon) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_gone(daemon)


@pytest.mark.parametrize("mode", ["leave-helper", "leave-helper-setsid"])
def test_a_helper_left_holding_the_pipes_after_close_is_named_and_fails_close(mode: str) -> None:
    spec = make_spec(misbehave("python", mode))

    async def scenario() -> AdapterError:
        evaluator = await spec.create(factory_config())
        assert await evaluator.evaluate(make_sample(0), target()) is True
        with pytest.raises(AdapterError) as info:
            await closed(evaluator)
        return info.value

    error = run(scenario())  # run() fails the test after 60 s: close does not wait for the helper's 600
    helper = int(re.search(r"helper pid (\d+)", mirrored(spec)).group(1))  # type: ignore[union-attr]
    assert re.search(r"\(pid \d+\) did not close cleanly: it exited but left 1 process holding its stdout or "
                     rf"stderr: pid {helper} \(sleep 600\); they were terminated", str(error)), str(error)
    assert process_gone(helper)


def test_cancelled_start_leaves_no_process() -> None:
    spec = make_spec(misbehave("python", "silent"))

    async def scenario() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(spec.create(factory_config()), 0.5)

    run(scenario())
    pid = int(re.search(r"pid (\d+)", mirrored(spec)).group(1))  # type: ignore[union-attr]
    deadline = time.monotonic() + 2
    while not process_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_gone(pid)


@needs_node
@pytest.mark.parametrize(
    ("give", "expected"),
    [
        ("nan", "the result.score is NaN, which JSON cannot represent"),
        ("map", "the result is a Map; return plain objects and arrays only"),
        ("bigint", "the result[0] is bigint, which is not JSON"),
    ],
)
def test_js_helper_refuses_values_json_would_silently_change(give: str, expected: str) -> None:
    spec = make_spec(node_echo())

    async def scenario() -> None:
        evaluator = await spec.create(factory_config())
        try:
            with pytest.raises(AdapterError) as info:
                await evaluator.evaluate(make_sample(0), target(give=give))
            assert expected in str(info.value)
            assert await evaluator.evaluate(make_sample(0), target(give="undefined")) is None
        finally:
            await closed(evaluator)

    run(scenario())
