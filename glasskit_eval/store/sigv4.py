"""AWS Signature Version 4, as pure functions of (request, credentials, time).

Each stage of the algorithm is its own function so it can be checked against
the official test suite stage by stage: canonical request, string to sign,
signing key, signature and the ``Authorization`` header. Nothing here touches
the network, the clock or the environment.

Inputs are *decoded*: the path is the real object path (``/bucket/a b/ü.mp4``)
and query pairs are plain strings; encoding is part of canonicalisation.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"

# Hop-by-hop headers and ones proxies or clients may rewrite are never signed;
# the list matches botocore's so signatures agree byte for byte.
UNSIGNED_HEADERS = frozenset({
    "authorization", "connection", "expect", "keep-alive", "proxy-authenticate",
    "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "user-agent",
    "x-amzn-trace-id",
})


@dataclass(frozen=True)
class Credentials:
    """Access key, secret and optional session token; the secrets never appear in repr()."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    source: str = ""


@dataclass(frozen=True)
class SigningRequest:
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    payload_sha256: str = EMPTY_SHA256


@dataclass(frozen=True)
class Signed:
    """The stages of one signature, kept for tests and debugging (no secrets)."""

    canonical_request: str
    string_to_sign: str
    signature: str
    headers: Mapping[str, str]


def uri_encode(text: str, *, keep_slash: bool = False) -> str:
    """Percent-encode UTF-8 bytes except RFC 3986 unreserved characters (and ``/`` if asked)."""
    return quote(text, safe="-_.~" + ("/" if keep_slash else ""))


def amz_date(now: dt.datetime) -> str:
    if now.tzinfo is None:
        raise ValueError("signing time must be timezone-aware")
    return now.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def canonical_uri(path: str, *, normalize: bool = False) -> str:
    """S3 signs the path as is; other services remove dot segments and empty segments first."""
    if not path.startswith("/"):
        path = "/" + path
    if normalize:
        trailing = path.endswith("/") and path != "/"
        path = posixpath.normpath(path)
        path = "/" + "/".join(part for part in path.split("/") if part)
        if trailing and path != "/":
            path += "/"
    return uri_encode(path, keep_slash=True)


def canonical_query(query: Iterable[tuple[str, str]]) -> str:
    pairs = sorted((uri_encode(k), uri_encode(v)) for k, v in query)
    return "&".join(f"{k}={v}" for k, v in pairs)


def _trim(value: str) -> str:
    # Trimall: strip, and collapse runs of whitespace (folded lines included) to one space.
    return " ".join(value.split())


def signed_header_map(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lowercased signed headers; repeated names are joined with commas in order."""
    grouped: dict[str, list[str]] = {}
    for name, value in headers:
        lname = name.strip().lower()
        if lname not in UNSIGNED_HEADERS:
            grouped.setdefault(lname, []).append(_trim(value))
    return {name: ",".join(values) for name, values in sorted(grouped.items())}


def canonical_request(request: SigningRequest, *, normalize_path: bool = False) -> str:
    headers = signed_header_map(request.headers)
    if "host" not in headers:
        raise ValueError("the host header must be signed")
    return "\n".join([
        request.method.upper(),
        canonical_uri(request.path, normalize=normalize_path),
        canonical_query(request.query),
        "".join(f"{name}:{value}\n" for name, value in headers.items()),
        ";".join(headers),
        request.payload_sha256,
    ])


def credential_scope(timestamp: str, region: str, service: str) -> str:
    return f"{timestamp[:8]}/{region}/{service}/aws4_request"


def string_to_sign(canonical: str, timestamp: str, scope: str) -> str:
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{timestamp}\n{scope}\n{digest}"


def signing_key(secret_access_key: str, timestamp: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret_access_key).encode("utf-8")
    for part in (timestamp[:8], region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


def signature(key: bytes, to_sign: str) -> str:
    return hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()


def authorization(access_key_id: str, scope: str, signed_headers: str, sig: str) -> str:
    return (f"{ALGORITHM} Credential={access_key_id}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={sig}")


def sign(request: SigningRequest, credentials: Credentials, now: dt.datetime, *, region: str,
         service: str = "s3", normalize_path: bool = False,
         content_sha256_header: bool = True) -> Signed:
    """Sign ``request``; returns the headers to add (date, token, payload hash, authorization).

    ``x-amz-date``, ``x-amz-security-token`` and (for S3) ``x-amz-content-sha256`` are
    added before signing, replacing any the caller passed, so they are always signed.
    """
    timestamp = amz_date(now)
    replaced = {"x-amz-date", "authorization"}
    added: dict[str, str] = {"x-amz-date": timestamp}
    if credentials.session_token:
        replaced.add("x-amz-security-token")
        added["x-amz-security-token"] = credentials.session_token
    if content_sha256_header:
        replaced.add("x-amz-content-sha256")
        added["x-amz-content-sha256"] = request.payload_sha256
    headers = tuple((n, v) for n, v in request.headers if n.lower() not in replaced)
    headers += tuple(added.items())
    full = SigningRequest(request.method, request.path, request.query, headers, request.payload_sha256)
    canonical = canonical_request(full, normalize_path=normalize_path)
    scope = credential_scope(timestamp, region, service)
    to_sign = string_to_sign(canonical, timestamp, scope)
    sig = signature(signing_key(credentials.secret_access_key, timestamp, region, service), to_sign)
    signed_names = ";".join(signed_header_map(headers))
    added["authorization"] = authorization(credentials.access_key_id, scope, signed_names, sig)
    return Signed(canonical, to_sign, sig, added)
