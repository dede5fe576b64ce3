"""URLs in messages: a store's endpoint may carry secrets, and no message may print them."""

from __future__ import annotations

from urllib.parse import urlsplit

from ..support.secretvalues import redact_url

__all__ = ["redact_url", "secret_parts"]


def secret_parts(url: str) -> list[str]:
    """The parts of ``url`` that can hold a secret (userinfo, query, fragment), by name."""
    try:
        split = urlsplit(url)
    except ValueError:
        return []
    parts = []
    if "@" in split.netloc:
        parts.append("a user name or password")
    if split.query:
        parts.append("a query string")
    if split.fragment:
        parts.append("a fragment")
    return parts
