"""Cloud video stores: S3-compatible object storage with a per-user download cache.

``sigv4`` signs, ``transport`` talks HTTP, ``s3`` is the client, ``credentials``
finds keys, ``cache`` downloads into the content-addressed cache and
``commands`` implements ``video-store pull/upload/prune-cache``.
"""

from __future__ import annotations

from ..errors import VideoError


class StoreError(VideoError):
    """A video store operation failed: config, credentials, transfer or verification.

    Messages name the store and key and say what to do next; they never
    contain credential values.
    """
