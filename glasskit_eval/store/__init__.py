"""Cloud video stores: S3-compatible object storage with a per-user download cache.

``sigv4`` signs, ``transport`` talks HTTP, ``s3`` is the client, ``credentials``
finds keys, ``cache`` downloads into the content-addressed cache and
``commands`` implements ``video-store pull/upload/prune-cache``.
"""

