"""A case's video as a local file: as written, or a cloud video downloaded into the cache.

Holds the video resolver that commands hand to planning and the one download every eval
command uses (``run``, ``seed``, ``validate``, ``export-frames``, ``report``, ``review`` and
``video-store pull``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import StoreError, UsageError

if TYPE_CHECKING:
    from ..cases.evaldir import EvalConfig
    from ..cases.model import Case, CloudVideo
    from ..store.config import VideoStoreConfig
    from ..store.s3 import S3Client
    from ..store.transport import Transport
    from ..store.video_cache import VideoCache
    from .planning import VideoResolver


@dataclass(frozen=True)
class StoreEnv:
    """What a command needs from the outside world; tests swap parts of it."""

    environ: Mapping[str, str] | None = None
    transport: Transport | None = None
    cache_dir: Path | None = None

    # The store's modules (urllib, ssl, certificates) load only when a cloud video is used:
    # `validate` and `run` of local videos must not pay for them at start-up.
    def cache(self) -> VideoCache:
        from ..store.video_cache import VideoCache, default_cache_dir

        return VideoCache(self.cache_dir or default_cache_dir(self.environ))

    def client(self, store: VideoStoreConfig, *, action: str | None) -> S3Client:
        """A client; with ``action`` set, credentials are required for it."""
        from ..store.credentials import require_credentials, resolve_credentials
        from ..store.s3 import S3Client

        creds = resolve_credentials(store, self.environ)
        if action is not None:
            creds = require_credentials(store, creds, action)
        return S3Client(store, creds, transport=self.transport)


def store_config(config: EvalConfig, name: str) -> VideoStoreConfig:
    store = config.video_stores.get(name)
    if store is None:
        known = ", ".join(sorted(config.video_stores)) or "none are configured"
        raise UsageError(f"unknown video store {name!r} ({known}); define it under video_stores in "
                         "<eval-dir>/config.yaml")
    return store


def download_video(video: CloudVideo, config: EvalConfig, *, env: StoreEnv | None = None,
                   notify: Callable[[str], None] | None = None, terminal: TextIO | None = None) -> Path:
    """The verified local copy of a cloud video, downloading it into the cache if needed.

    ``terminal`` gets a progress line redrawn in place, but only if it is a TTY.
    """
    env = env or StoreEnv()
    store = store_config(config, video.store)
    cache = env.cache()
    try:
        found = cache.lookup(video.sha256, video.key)
    except OSError as exc:
        raise StoreError(f"cannot read the video cache at {cache.root}: {exc.strerror or exc}; set "
                         "GLASSKIT_EVAL_CACHE_DIR to a readable directory") from None
    if found is not None:
        return found
    if store.public_base_url:
        client = env.client(store, action=None)
        public = True
    else:
        client = env.client(store, action="downloading from")
        public = False

    from ..store.progress import terminal_progress

    return cache.fetch(video.sha256, video.key, lambda start: client.get(video.key, start, public=public),
                       describe=video.describe(), notify=notify,
                       progress=terminal_progress(terminal, f"  {video.describe()}"))




def video_resolver(notify: Callable[[str], None], terminal: TextIO | None = None) -> VideoResolver:
    """Resolve a case's video, downloading a cloud one into the per-user cache.

    ``notify`` hears what is downloaded; a progress line is drawn on ``terminal`` (default:
    stderr) while it downloads, only when that is a TTY.
    """

    def resolve(case: Case, config: EvalConfig) -> Path:
        from ..cases.model import CloudVideo

        if isinstance(case.video, CloudVideo):
            return download_video(case.video, config, notify=notify,
                                  terminal=sys.stderr if terminal is None else terminal)
        return case.video.path

    return resolve
