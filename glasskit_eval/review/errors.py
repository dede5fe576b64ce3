"""Errors of the review server, raised anywhere in ``review`` and answered by ``api.handle``.

Each carries the HTTP status, a stable ``code`` the page can branch on and a
message for people. This module imports nothing from the rest of ``review``, so
every review module can raise these without an import loop::

    ReviewError          status + code + message (+ JSON extras)
    ├── Denied           refused before routing: host, session, CSRF, body size
    └── ApiError         a request the API cannot answer as asked
        └── NotFound     a case, target, route or file that does not exist (404)
"""

from __future__ import annotations

from typing import Any


class ReviewError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


class Denied(ReviewError):
    """A request refused before it reaches the API (who may talk to the server at all)."""


class ApiError(ReviewError):
    """A request the API refuses or cannot answer; ``extra`` goes into the JSON error body."""


class NotFound(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(404, "not_found", message)
