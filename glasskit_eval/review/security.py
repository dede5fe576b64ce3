"""Who may talk to the review server: pure checks, no sockets.

The page edits files on disk, so every request must come from the person who
started the server. Binding to loopback is not enough: any local user and any
web page (through DNS rebinding or plain cross-site requests) can reach
127.0.0.1. So the server prints a URL with a per-launch secret; opening it sets
an HttpOnly, SameSite=Strict session cookie that every other request must carry.
Writes also need a CSRF token that only our own page can read, and a JSON
content type, which a cross-site form cannot send.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

from .errors import Denied

COOKIE_NAME = "glasskit_review_session"
CSRF_HEADER = "x-csrf-token"
#: Request bodies are small JSON edits; a whole target's samples fit easily.
MAX_BODY_BYTES = 1 << 20

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self'; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)

__all__ = ["Denied", "Secrets", "body_length", "check_host", "check_origin", "check_session",
           "check_write"]


@dataclass
class Secrets:
    """Per-launch secrets: the URL token, the session cookie value and the CSRF key."""

    launch_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def check_launch_token(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self.launch_token.encode())

    def session_cookie(self) -> str:
        return f"{COOKIE_NAME}={self.session}; Path=/; HttpOnly; SameSite=Strict"

    def has_session(self, cookie_header: str | None) -> bool:
        if not cookie_header:
            return False
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie_header)
        except CookieError:
            return False
        morsel = jar.get(COOKIE_NAME)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self.session.encode())

    def new_csrf_token(self) -> str:
        """A fresh token for one page load: a nonce and its MAC, so nothing is stored."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac(nonce)}"

    def check_csrf_token(self, token: str | None) -> bool:
        if not token or token.count(".") != 1:
            return False
        nonce, mac = token.split(".")
        return hmac.compare_digest(mac.encode(), self._mac(nonce).encode())

    def _mac(self, nonce: str) -> str:
        return hmac.new(self.csrf_key, nonce.encode(), hashlib.sha256).hexdigest()


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def check_host(headers: Mapping[str, str], port: int) -> None:
    """Refuse requests addressed to another name: DNS rebinding sends ours with theirs."""
    host = headers.get("host", "").strip().lower()
    if host not in allowed_hosts(port):
        raise Denied(421, "wrong_host", f"this server only answers to 127.0.0.1:{port}; "
                     "open the URL printed in the terminal")


def check_origin(headers: Mapping[str, str], port: int) -> None:
    """Browsers send Origin on writes; when present it must be this server."""
    origin = headers.get("origin")
    if origin is None:
        return
    if origin.lower() not in {f"http://{h}" for h in allowed_hosts(port)}:
        raise Denied(403, "wrong_origin", "cross-origin requests are not allowed")
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise Denied(403, "wrong_origin", "cross-site requests are not allowed")


def check_session(secrets_: Secrets, headers: Mapping[str, str]) -> None:
    if not secrets_.has_session(headers.get("cookie")):
        raise Denied(401, "no_session", "no review session; open the URL with the token that "
                     "`review` printed in the terminal")


def check_write(secrets_: Secrets, headers: Mapping[str, str], port: int) -> int:
    """Checks for a request that changes files; returns the declared body length."""
    check_origin(headers, port)
    if not secrets_.check_csrf_token(headers.get(CSRF_HEADER)):
        raise Denied(403, "bad_csrf", "missing or wrong CSRF token; reload the page")
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise Denied(415, "unsupported_media_type", "request body must be application/json")
    return body_length(headers)


def body_length(headers: Mapping[str, str]) -> int:
    """The declared body size, refused before a byte of the body is read."""
    if "transfer-encoding" in headers:
        raise Denied(411, "length_required", "chunked request bodies are not accepted; send Content-Length")
    raw = headers.get("content-length")
    if raw is None:
        raise Denied(411, "length_required", "a request body needs a Content-Length header")
    try:
        length = int(raw)
    except ValueError:
        raise Denied(400, "bad_request", "Content-Length is not a number") from None
    if length < 0:
        raise Denied(400, "bad_request", "Content-Length is negative")
    if length > MAX_BODY_BYTES:
        raise Denied(413, "body_too_large", f"request body of {length} bytes is over the "
                     f"{MAX_BODY_BYTES}-byte limit")
    return length
