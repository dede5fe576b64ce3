"""``review``: a local browser page to check and correct labels against the exact eval frames.

``start_review`` validates the options and binds the server; ``server.run`` serves
until Ctrl+C. The API is pure (``api.handle``) and the transport is stdlib only.
"""

from __future__ import annotations

from .launch import ReviewOptions, start_review

__all__ = ["ReviewOptions", "start_review"]
