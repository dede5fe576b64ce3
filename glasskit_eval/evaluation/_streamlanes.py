"""One case's stream targets fed to every lane: each arm its own streams' state, from one decode.

On the replay clock every lane's streams take the same decoded frames side by side
(``streams.feed_together``); a perturbation arm's adapter gets its own perturbed copy of each
frame. A lane whose streams come from the observation cache, and every lane on the paced clock
(each arm its own device and clock), runs on its own decode, the lanes side by side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..results import StreamResult
from ._pacing import run_paced
from .lanes import Lane
from .streams import StreamWork, feed_together


async def run_lane_streams(works: Sequence[tuple[Lane, StreamWork]]) -> list[list[StreamResult]]:
    """Each lane's streams of one case fed and scored; each lane's results in declaration order."""
    out: list[list[StreamResult] | None] = [None] * len(works)
    together: list[int] = []
    alone: list[int] = []
    for i, (lane, work) in enumerate(works):
        (alone if lane.streams_cached is not None or work.pace is not None else together).append(i)

    async def one(i: int) -> None:
        lane, work = works[i]
        assert lane.stream_caller is not None
        if lane.streams_cached is not None:
            out[i] = await lane.streams_cached.run(work, lane.stream_caller)
        else:
            out[i] = await run_paced(work, lane.stream_caller)

    async def shared() -> None:
        if not together:
            return
        feeds = []
        for i in together:
            lane, work = works[i]
            assert lane.stream_caller is not None
            feeds.append((work, lane.stream_caller))
        for i, results in zip(together, await feed_together(feeds)):
            out[i] = results

    if len(works) == 1:
        await (one(0) if alone else shared())
    else:
        tasks = [asyncio.create_task(shared()), *(asyncio.create_task(one(i)) for i in alone)]
        try:
            await asyncio.gather(*tasks)
        finally:
            # The first lane to stop the run stops the others (their calls are abandoned by the teardown).
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return [results or [] for results in out]
