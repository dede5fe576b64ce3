"""The review API's one error: an HTTP status, a machine-readable code and a message for the page."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised anywhere below ``api.handle``, which turns it into a JSON error response."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra
