"""Command adapters fed stream targets: the ``startStream`` / ``frame`` / ``endStream`` requests.

A stream gets an id when it starts; every request of it names the id and the target, so an
adapter may keep one state per stream. ``frame`` carries the sample as ``evaluate`` does (its PNG
made once for every stream fed the same frame) and is answered with the frame's emissions: null,
one JSON value, or a list of them; ``endStream`` may answer final emissions the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import AdapterError
from ._process import CommandEvaluator
from ._protocol import encode_params
from ._wire import StreamIds, frame_parts
from .base import Sample, StreamInfo, Target, add_usage, frames_too_large


class CommandStreamEvaluator(CommandEvaluator):
    """A command adapter that can also be fed streams, when it reports the ``frame`` capability."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stream_ids = StreamIds()

    @property
    def streams(self) -> bool:
        return self.capabilities.frame

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        if not self.capabilities.evaluate:
            # A stream-only adapter asked for a sample target's sample.
            raise AdapterError(f"{self._label} has no evaluate capability for target {target.id!r}, a sample "
                               "target; implement evaluate or give the target `events`")
        return await super().evaluate(sample, target)

    async def start_stream(self, target: Target, stream: StreamInfo) -> None:
        wire = {"stream": {"id": self._stream_ids.open(target), **stream.to_wire()}, "target": target.to_wire()}
        await self._request("startStream", encode_params(wire))

    async def on_frame(self, sample: Sample, target: Target) -> Any:
        self._check_usable()
        head = encode_params({"stream": {"id": self._stream_ids.of(target)}})
        try:
            parts = await asyncio.get_running_loop().run_in_executor(
                None, frame_parts, sample, self._spec.png_compress_level)
        except MemoryError:
            raise frames_too_large([sample], "encoding the frame as PNG for the command adapter") from None
        params = [head[:-1], b',"sample":', *parts, b',"target":', encode_params(target.to_wire()), b"}"]
        del parts
        reply = await self._request("frame", params)
        if reply.usage is not None:
            add_usage(sample.usage, reply.usage)
        return reply.result

    async def end_stream(self, target: Target) -> Any:
        wire = {"stream": {"id": self._stream_ids.close(target)}, "target": target.to_wire()}
        return (await self._request("endStream", encode_params(wire))).result
