"""``--adapter-exec "CMD ARGS"``: one process per sample, no protocol to speak.

The process gets one JSON request on stdin, ``{"sample": {..., "image": {"mimeType",
"width", "height", "path", "dataBase64"}}, "target": {...}}`` (``path`` is a PNG file that
exists for the duration of the call; a clip sample also has ``frames``, each with such an image), and writes the observation as JSON on stdout. A non-zero
exit, output that is not JSON or longer than :data:`MAX_STDOUT_BYTES`, or a timeout
(``--timeout``) is an adapter error quoting the tail of its stderr, of which only the last lines
are kept. When the call ends, however it ends, its process group and every process carrying its
tag (descendants that left the group with ``setsid``) are killed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import AdapterError, UsageError
from ._procio import (
    TAG_VARIABLE,
    GroupReaper,
    StderrMirror,
    describe_returncode,
    new_tag,
    read_chunks,
    track_group,
)
from ._wire import ENCODINGS
from .base import Evaluator, FactoryConfig, Sample, Target, frames_too_large

if TYPE_CHECKING:
    from PIL import Image

_OUTPUT_EXCERPT: Final = 200
#: An observation longer than this is an adapter error (the HTTP adapter's default bound too).
MAX_STDOUT_BYTES: Final = 64 * 1024 * 1024
#: How long stdout and stderr are read after the process exits: what it wrote is in the pipes
#: already; a descendant still holding them must not stretch the call to its own life.
EXIT_GRACE_S: Final = 0.25


class _Discard(io.StringIO):
    """A sink that keeps nothing: the mirror's own tail is all an error message needs."""

    def write(self, s: str) -> int:
        return len(s)


def _write_pngs(images: Sequence[Image.Image], shared: bool) -> dict[int, tuple[str, bytes]]:
    """A temporary PNG file per image (by object id), and its bytes; ``shared``: clip frames, encoded once."""
    from ..video.png import encode_png

    written: dict[int, tuple[str, bytes]] = {}
    try:
        for image in images:
            png = ENCODINGS.text(image, "png-bytes1", lambda im: encode_png(im, 1)) if shared else encode_png(image, 1)
            fd, path = tempfile.mkstemp(prefix="glasskit-frame-", suffix=".png")
            written[id(image)] = (path, png)
            with os.fdopen(fd, "wb") as handle:
                handle.write(png)
    except BaseException:
        _remove(written)
        raise
    return written


def _remove(written: dict[int, tuple[str, bytes]]) -> None:
    for path, _png in written.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


class ExecEvaluator:
    def __init__(self, spec: ExecAdapterSpec, factory_config: FactoryConfig) -> None:
        self._spec = spec
        self._config = factory_config

    @property
    def batch(self) -> bool:
        return False

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        images = list({id(f.image): f.image for f in sample.frames}.values()) if sample.is_clip else [sample.image]
        try:
            written = await asyncio.to_thread(_write_pngs, images, sample.is_clip)
        except MemoryError:
            raise frames_too_large([sample], "encoding the frames as PNG for the exec adapter") from None

        def image_object(image: Image.Image) -> dict[str, Any]:
            width, height = image.size
            path, png = written[id(image)]
            return {"mimeType": "image/png", "width": width, "height": height, "path": path,
                    "dataBase64": base64.b64encode(png).decode("ascii")}

        try:
            try:
                body = dict(sample.wire_fields())
                if sample.is_clip:
                    body["frames"] = [{**f.wire_fields(), "image": image_object(f.image)} for f in sample.frames]
                body["image"] = image_object(sample.image)
                request = {"sample": body, "target": target.to_wire(), "config": dict(self._config.config)}
                data = json.dumps(request, separators=(",", ":")).encode("utf-8")
            except MemoryError:
                raise frames_too_large([sample], "the exec adapter's request") from None
            del request, body
            return await self._spec.run_once(data)
        finally:
            _remove(written)

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        raise AdapterError("--adapter-exec evaluates one sample per process")

    async def cancel_pending(self) -> None:
        # Each call kills its own process when its task is cancelled.
        return None

    async def close(self) -> None:
        return None


class ExecAdapterSpec:
    def __init__(self, command: str) -> None:
        try:
            argv = shlex.split(command, posix=True)
        except ValueError as exc:
            raise UsageError(f"cannot parse --adapter-exec {command!r}: {exc}") from None
        if not argv:
            raise UsageError('--adapter-exec is empty; give a command such as --adapter-exec "python judge.py"')
        self.command = command
        self.argv = tuple(argv)

    def describe(self) -> str:
        return self.command

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        return ExecEvaluator(self, factory_config)

    async def run_once(self, request: bytes) -> Any:
        label = f"--adapter-exec `{self.command}`"
        tag = new_tag()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, env={**os.environ, TAG_VARIABLE: tag})
        except OSError as exc:
            raise AdapterError(f"cannot start {label}: {exc}") from None
        track_group(proc.pid, tag)
        reaper = GroupReaper(proc, tag, lambda: proc.returncode is not None)
        # Kept for error messages only: one process per sample would flood the console.
        stderr = StderrMirror(_Discard())
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        pump = asyncio.ensure_future(stderr.pump(proc.stderr))
        out = bytearray()
        too_long = False

        async def collect(stdout: asyncio.StreamReader) -> None:
            nonlocal too_long
            async for chunk in read_chunks(stdout):
                out.extend(chunk)
                if len(out) > MAX_STDOUT_BYTES:
                    too_long = True
                    return

        async def exit_of() -> None:
            # Not proc.wait(): asyncio wakes it only once every pipe is closed, which a descendant
            # holding stdout delays to its own end. The return code is set when the process ends.
            while proc.returncode is None:
                await asyncio.sleep(0.02)

        reader = asyncio.ensure_future(collect(proc.stdout))
        exited = asyncio.ensure_future(exit_of())
        try:
            proc.stdin.write(request)
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            await asyncio.wait({reader, exited}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not too_long:
                await exited
            elif not reader.done():
                # The process ended, and a descendant (one that left its group with setsid) still
                # holds stdout: what the process wrote is in the pipe, so the call ends now.
                await asyncio.wait({reader}, timeout=EXIT_GRACE_S)
            if not too_long:
                await asyncio.wait({pump}, timeout=EXIT_GRACE_S)
        finally:
            for task in (reader, exited):
                task.cancel()
            # Normal end, timeout or interrupt: nothing it started may outlive the call.
            reaper.kill_now()
            if proc.returncode is None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 2.0)
            if not pump.done():
                pump.cancel()
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
        if too_long:
            out.clear()
            raise AdapterError(f"{label} wrote more than {MAX_STDOUT_BYTES >> 20} MiB to stdout; write one "
                               f"observation as JSON.\n{stderr.render()}")
        if proc.returncode != 0:
            raise AdapterError(f"{label} {describe_returncode(proc.returncode)}.\n{stderr.render()}")
        text = out.decode("utf-8", errors="replace").strip()
        out.clear()
        try:
            return json.loads(text)
        except ValueError:
            excerpt = text[:_OUTPUT_EXCERPT] or "nothing"
            raise AdapterError(f"{label} wrote {excerpt!r} to stdout, which is not JSON; write the "
                               f"observation as one JSON value.\n{stderr.render()}") from None
