"""URLs in messages: a store's endpoint may carry secrets, and no message may print them."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


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


def redact_url(url: str) -> str:
    """``url`` without userinfo, query and fragment (each replaced by a marker), for messages."""
    try:
        split = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    host = split.netloc.rpartition("@")[2]
    netloc = f"***@{host}" if "@" in split.netloc else host
    return urlunsplit((split.scheme, netloc, split.path, "***" if split.query else "",
                       "***" if split.fragment else ""))
