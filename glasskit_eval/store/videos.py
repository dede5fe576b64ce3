"""The video resolver commands hand to planning: local files as written, cloud videos via the cache."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..cases.evaldir import EvalConfig
    from ..cases.model import Case
    from ..plan.planning import VideoResolver


def video_resolver(notify: Callable[[str], None], terminal: TextIO | None = None) -> VideoResolver:
    """Resolve a case's video, downloading a cloud one into the per-user cache.

    ``notify`` hears what is downloaded; a progress line is drawn on ``terminal`` (default:
    stderr) while it downloads, only when that is a TTY.
    """

    def resolve(case: Case, config: EvalConfig) -> Path:
        from ..cases.model import CloudVideo

        if isinstance(case.video, CloudVideo):
            from .commands import download_video

            return download_video(case.video, config, notify=notify,
                                  terminal=sys.stderr if terminal is None else terminal)
        return case.video.path

    return resolve
