"""The HTTP edge: one request in, one streaming response out, over urllib.

HTTP error statuses are responses, not exceptions; only network failures raise
(`TransportError`). Signed requests never follow redirects: a redirect would
carry a signature made for another host.
"""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

CHUNK_SIZE = 1024 * 1024
DEFAULT_TIMEOUT_S = 60.0


class Stream(Protocol):
    """A readable byte stream: request bodies and response bodies."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class TransportError(Exception):
    """The request did not produce an HTTP response (DNS, refused, reset, timeout...)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    #: A callable returning a fresh body stream, so a retried request can resend it.
    body: Callable[[], Stream] | None = None
    follow_redirects: bool = False
    timeout: float = DEFAULT_TIMEOUT_S


class HttpResponse:
    """Status, lowercased headers and a body read in chunks; close() when done."""

    def __init__(self, status: int, headers: Mapping[str, str], stream: Stream | None) -> None:
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self._stream = stream

    def read(self, limit: int | None = None) -> bytes:
        if self._stream is None:
            return b""
        try:
            return self._stream.read() if limit is None else self._stream.read(limit)
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"connection lost while reading the response: {_reason(exc)}",
                                 retryable=True) from None

    def read_some(self, size: int = CHUNK_SIZE) -> bytes:
        """Up to ``size`` bytes, returning as soon as any arrived (b"" at the end).

        ``read(size)`` waits until ``size`` bytes or the end, so a server trickling a byte
        every few seconds would hold it for days; this returns after one socket read, which
        the request timeout bounds, so the caller can notice a stalled transfer.
        """
        if self._stream is None:
            return b""
        read1 = getattr(self._stream, "read1", None)
        try:
            return read1(size) if read1 is not None else self._stream.read(size)
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"connection lost while reading the response: {_reason(exc)}",
                                 retryable=True) from None

    def iter_chunks(self, size: int = CHUNK_SIZE) -> Iterator[bytes]:
        """The body in pieces of at most ``size`` bytes, each yielded as soon as it arrives.

        A body that ends early without an error (the server closed the connection before
        its Content-Length) just ends: callers that know the length compare it.
        """
        while True:
            chunk = self.read_some(size)
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self) -> HttpResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transport(Protocol):
    def send(self, request: HttpRequest) -> HttpResponse: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class UrllibTransport:
    """The real transport. Proxies follow the usual ``*_proxy`` environment variables."""

    def __init__(self) -> None:
        self._plain = urllib.request.build_opener(_NoRedirect())
        self._redirecting = urllib.request.build_opener()

    def send(self, request: HttpRequest) -> HttpResponse:
        body = request.body() if request.body is not None else None
        req = urllib.request.Request(request.url, data=body, method=request.method,
                                     headers=dict(request.headers))
        opener = self._redirecting if request.follow_redirects else self._plain
        try:
            raw = opener.open(req, timeout=request.timeout)
        except urllib.error.HTTPError as exc:
            return HttpResponse(exc.code, dict(exc.headers.items()) if exc.headers else {}, exc)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise TransportError(_reason(exc), retryable=_retryable(exc)) from None
        finally:
            if body is not None:
                body.close()
        return HttpResponse(raw.status, dict(raw.headers.items()), raw)


def _unwrap(exc: BaseException) -> BaseException:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return exc.reason
    return exc


def _retryable(exc: BaseException) -> bool:
    inner = _unwrap(exc)
    if isinstance(inner, socket.gaierror):
        return False
    if isinstance(inner, ConnectionRefusedError):
        return False
    return isinstance(inner, (ConnectionError, TimeoutError, socket.timeout,
                              http.client.HTTPException, OSError))


def _reason(exc: BaseException) -> str:
    inner = _unwrap(exc)
    if isinstance(inner, socket.gaierror):
        return f"host name lookup failed ({inner.strerror or inner})"
    if isinstance(inner, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    text = str(inner) or type(inner).__name__
    return text
