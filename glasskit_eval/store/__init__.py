"""Cloud video storage: an S3-compatible client and the per-user download cache.

What lives here: SigV4 signing (``sigv4``, sans-IO), the HTTP seam (``transport``), the client
(``s3``), credentials (``credentials``), store config and URLs (``config``, ``urls``), the
content-addressed download cache (``video_cache``) and its progress line (``progress``).

What it may not know: case files, evals or commands; ``plan/videos.py`` decides which video to
fetch and ``commands/video_store.py`` is the command.
"""
