"""Who may talk to the review server: pure checks, no sockets.

The page edits files on disk, so every request must come from the person who
started the server. Binding to loopback is not enough: any local user and any
web page (through DNS rebinding or plain cross-site requests) can reach
127.0.0.1. Three secrets, each with one job:

* the **launch token**, in the login URL, works once: exchanging it starts a
  session and spends it (a fresh one replaces it for the next browser). So a
  URL seen in a terminal scroll-back, a history entry or a process list is
  worthless once used; the browser is opened on a private file holding the
  URL, never with the URL on its command line (see ``server.LoginFile``);
* the **session cookie** (HttpOnly, SameSite=Strict, one name per port) lets
  the browser *read*: pages, case data, frames and the video. Cookies are not
  port-bound: every server on 127.0.0.1 the browser visits receives it, so it
  is treated as the weaker secret and never suffices to write;
* the **write key**, a MAC of the session id, goes to the page exactly once, in
  the fragment of the login redirect (fragments are never sent to a server),
  and lives in that tab's ``sessionStorage``, which is bound to the exact
  origin, port included. Writes need it in a header, bound to their own
  session, from this server's Origin and with a JSON content type (which a
  cross-site form cannot send). No page the cookie can fetch contains it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

from .errors import Denied

COOKIE_PREFIX = "glasskit_review_"
CSRF_HEADER = "x-csrf-token"
#: Request bodies are small JSON edits; a whole target's samples fit easily.
MAX_BODY_BYTES = 1 << 20
#: Live sessions per launch; a login past this drops the oldest (a loop of logins cannot grow memory).
MAX_SESSIONS = 64

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
           "check_write", "cookie_name"]


def _token() -> str:
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    """Per port: cookies ignore ports, so two reviews would otherwise overwrite each other's."""
    return f"{COOKIE_PREFIX}{port}"


@dataclass
class Secrets:
    """Per-launch secrets: the one-time launch token, the sessions and the write-key MAC key."""

    launch_token: str = field(default_factory=_token)
    csrf_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    #: Called with each new launch token after one was spent (the login file rewrites itself).
    on_new_token: Callable[[str], None] | None = None
    _sessions: dict[str, None] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def redeem(self, candidate: str) -> str | None:
        """Exchange the launch token for a new session id, spending it; None if it is not the token."""
        with self._lock:
            if not hmac.compare_digest(candidate.encode(), self.launch_token.encode()):
                return None
            self.launch_token = _token()
            session = self._open_session()
            # Under the lock, so two logins at once cannot leave the older token in the file.
            if self.on_new_token is not None:
                self.on_new_token(self.launch_token)
        return session

    def open_session(self) -> str:
        """A new session without a launch token (embedding and tests; the server never calls it)."""
        with self._lock:
            return self._open_session()

    def _open_session(self) -> str:
        session = _token()
        self._sessions[session] = None
        while len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        return session

    def session_cookie(self, session: str, port: int) -> str:
        return f"{cookie_name(port)}={session}; Path=/; HttpOnly; SameSite=Strict"

    def session_of(self, cookie_header: str | None, port: int) -> str | None:
        """The live session the Cookie header names for this port, or None."""
        if not cookie_header:
            return None
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie_header)
        except CookieError:
            return None
        morsel = jar.get(cookie_name(port))
        if morsel is None:
            return None
        value = morsel.value.encode()
        with self._lock:
            live = list(self._sessions)
        # Compare with every live session (there are few) so timing says nothing about which.
        found = None
        for session in live:
            if hmac.compare_digest(value, session.encode()):
                found = session
        return found

    def new_csrf_token(self, session: str) -> str:
        """The write key of ``session``: a nonce and a MAC of session and nonce, so nothing is stored."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac(session, nonce)}"

    def check_csrf_token(self, session: str, token: str | None) -> bool:
        if not token or token.count(".") != 1:
            return False
        nonce, mac = token.split(".")
        return hmac.compare_digest(mac.encode(), self._mac(session, nonce).encode())

    def _mac(self, session: str, nonce: str) -> str:
        return hmac.new(self.csrf_key, f"{session}\0{nonce}".encode(), hashlib.sha256).hexdigest()


def allowed_hosts(port: int) -> frozenset[str]:
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}"})


def check_host(headers: Mapping[str, str], port: int) -> None:
    """Refuse requests addressed to another name: DNS rebinding sends ours with theirs."""
    host = headers.get("host", "").strip().lower()
    if host not in allowed_hosts(port):
        raise Denied(421, "wrong_host", f"this server only answers to 127.0.0.1:{port}; "
                     "open the URL printed in the terminal")


def check_origin(headers: Mapping[str, str], port: int, *, required: bool = False) -> None:
    """Browsers send Origin on every fetch that writes; when present (or required) it must be us."""
    origin = headers.get("origin")
    if origin is None:
        if required:
            raise Denied(403, "wrong_origin", "writes must come from the review page (no Origin header)")
        return
    if origin.lower() not in {f"http://{h}" for h in allowed_hosts(port)}:
        raise Denied(403, "wrong_origin", "cross-origin requests are not allowed")
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise Denied(403, "wrong_origin", "cross-site requests are not allowed")


def check_session(secrets_: Secrets, headers: Mapping[str, str], port: int) -> str:
    """The request's session id; 401 without a live one."""
    session = secrets_.session_of(headers.get("cookie"), port)
    if session is None:
        raise Denied(401, "no_session", "no review session; open the one-time login link (or the login "
                     "file) that `review` printed in the terminal")
    return session


def check_write(secrets_: Secrets, headers: Mapping[str, str], port: int, session: str) -> int:
    """Checks for a request that changes files; returns the declared body length."""
    check_origin(headers, port, required=True)
    if not secrets_.check_csrf_token(session, headers.get(CSRF_HEADER)):
        raise Denied(403, "bad_csrf", "this tab has no valid write key for its session; open the login "
                     "file `review` printed again (a reload keeps the key, a new tab does not)")
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
