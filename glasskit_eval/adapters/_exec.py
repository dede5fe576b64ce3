"""``--adapter-exec "CMD ARGS"``: one process per sample, no protocol to speak.

The process gets one JSON request on stdin, ``{"sample": {..., "image": {"mimeType",
"width", "height", "path", "dataBase64"}}, "target": {...}}`` (``path`` is a PNG file that
exists for the duration of the call), and writes the observation as JSON on stdout. A non-zero
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
from typing import Any, Final

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
from .base import Evaluator, FactoryConfig, Sample, Target, frames_too_large

_OUTPUT_EXCERPT: Final = 200
#: An observation longer than this is an adapter error (the HTTP adapter's default bound too).
MAX_STDOUT_BYTES: Final = 64 * 1024 * 1024


class _Discard(io.StringIO):
    """A sink that keeps nothing: the mirror's own tail is all an error message needs."""

    def write(self, s: str) -> int:
        return len(s)


def _write_png(sample: Sample) -> tuple[str, bytes]:
    from ..video.png import encode_png

    png = encode_png(sample.image, 1)
    fd, path = tempfile.mkstemp(prefix="glasskit-frame-", suffix=".png")
    with os.fdopen(fd, "wb") as handle:
        handle.write(png)
    return path, png


class ExecEvaluator:
    def __init__(self, spec: ExecAdapterSpec, factory_config: FactoryConfig) -> None:
        self._spec = spec
        self._config = factory_config

    @property
    def batch(self) -> bool:
        return False

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        width, height = sample.image.size
        try:
            path, png = await asyncio.to_thread(_write_png, sample)
        except MemoryError:
            raise frames_too_large([sample], "encoding the frame as PNG for the exec adapter") from None
        try:
            try:
                request = {"sample": {**sample.wire_fields(), "image": {
                    "mimeType": "image/png", "width": width, "height": height, "path": path,
                    "dataBase64": base64.b64encode(png).decode("ascii")}},
                    "target": target.to_wire(), "config": dict(self._config.config)}
                del png
                data = json.dumps(request, separators=(",", ":")).encode("utf-8")
            except MemoryError:
                raise frames_too_large([sample], "the exec adapter's request") from None
            return await self._spec.run_once(data)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)

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
        try:
            proc.stdin.write(request)
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            async for chunk in read_chunks(proc.stdout):
                out += chunk
                if len(out) > MAX_STDOUT_BYTES:
                    too_long = True
                    break
            if not too_long:
                await proc.wait()
                await asyncio.wait({pump}, timeout=1.0)
        finally:
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
            del out
            raise AdapterError(f"{label} wrote more than {MAX_STDOUT_BYTES >> 20} MiB to stdout; write one "
                               f"observation as JSON.\n{stderr.render()}")
        if proc.returncode != 0:
            raise AdapterError(f"{label} {describe_returncode(proc.returncode)}.\n{stderr.render()}")
        text = out.decode("utf-8", errors="replace").strip()
        del out
        try:
            return json.loads(text)
        except ValueError:
            excerpt = text[:_OUTPUT_EXCERPT] or "nothing"
            raise AdapterError(f"{label} wrote {excerpt!r} to stdout, which is not JSON; write the "
                               f"observation as one JSON value.\n{stderr.render()}") from None
