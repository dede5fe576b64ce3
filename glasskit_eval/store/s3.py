"""A small S3 client: HEAD, ranged GET, conditional PUT and multipart upload.

Requests are signed with SigV4 (payload hashes always signed, so plain-HTTP
endpoints are as safe as the transport allows), retried with jittered
exponential backoff on 5xx, throttling and dropped connections, and S3's XML
errors become `StoreError`s that say what to check next.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import mimetypes
import random
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from ..errors import PreconditionFailed, StoreError
from .config import VideoStoreConfig
from .sigv4 import EMPTY_SHA256, Credentials, SigningRequest, canonical_query, sign, uri_encode
from .transport import HttpRequest, HttpResponse, Stream, Transport, TransportError, UrllibTransport

SHA256_META = "x-amz-meta-sha256"
_RETRY_STATUSES = frozenset({500, 502, 503, 504, 429})
_RETRY_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout",
                          "InternalError", "ServiceUnavailable", "RequestLimitExceeded",
                          "ConditionalRequestConflict", "OperationAborted"})
_ERROR_BODY_LIMIT = 64 * 1024


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay_s: float = 0.25
    max_delay_s: float = 8.0

    def delay(self, attempt: int, rand: Callable[[], float]) -> float:
        # Full jitter: spreads out clients that failed together.
        return float(rand() * min(self.max_delay_s, self.base_delay_s * (2 ** attempt)))


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    etag: str | None
    #: The declared content SHA-256 (hex) from our metadata or a full-object checksum.
    sha256: str | None


@dataclass(frozen=True)
class Part:
    number: int
    etag: str
    checksum_sha256: str


@dataclass(frozen=True)
class S3ErrorReply:
    status: int
    code: str
    message: str


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def content_type_for(key: str) -> str:
    guessed, _ = mimetypes.guess_type("x" + Path(key).suffix.lower(), strict=False)
    return guessed or "application/octet-stream"


def b64_sha256(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


class FileSlice:
    """A read-only window of a file, sent as one request body."""

    def __init__(self, path: Path, offset: int, length: int) -> None:
        self._handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by the transport
        self._handle.seek(offset)
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._handle.read(size)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


class S3Client:
    def __init__(self, store: VideoStoreConfig, credentials: Credentials | None, *,
                 transport: Transport | None = None, clock: Callable[[], dt.datetime] = _utcnow,
                 sleep: Callable[[float], None] = time.sleep, retry: RetryPolicy | None = None,
                 rand: Callable[[], float] = random.random, timeout_s: float = 60.0) -> None:
        self.store = store
        self.credentials = credentials
        self.transport = transport or UrllibTransport()
        self.clock = clock
        self.sleep = sleep
        self.retry = retry or RetryPolicy()
        self.rand = rand
        self.timeout_s = timeout_s
        if store.endpoint_url:
            self.endpoint = store.endpoint_url.rstrip("/")
            self.virtual_host = False
        else:
            self.endpoint = f"https://s3.{store.region}.amazonaws.com"
            # Virtual-hosted style is AWS's default; names with dots break TLS host checks.
            self.virtual_host = "." not in store.bucket and store.bucket == store.bucket.lower()
        split = urlsplit(self.endpoint)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise StoreError(f"video store {store.name!r}: endpoint_url {self.endpoint!r} is not an "
                             "http(s) URL; use e.g. https://<ACCOUNT_ID>.r2.cloudflarestorage.com")

    # --- addressing ----------------------------------------------------------------

    def where(self) -> str:
        return f"video store {self.store.name!r} (bucket {self.store.bucket!r} at {self.endpoint})"

    def _target(self, key: str) -> tuple[str, str, str]:
        """(scheme://netloc, Host header, decoded path) for an object key ('' = bucket)."""
        split = urlsplit(self.endpoint)
        host = split.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        default_port = {"http": 80, "https": 443}[split.scheme]
        if split.port and split.port != default_port:
            host = f"{host}:{split.port}"
        base = split.path.rstrip("/")
        if self.virtual_host:
            host = f"{self.store.bucket}.{host}"
            path = f"{base}/{key}"
        else:
            path = f"{base}/{self.store.bucket}/{key}"
        return f"{split.scheme}://{host}", host, path

    def public_url(self, key: str) -> str:
        assert self.store.public_base_url
        return f"{self.store.public_base_url.rstrip('/')}/{uri_encode(key, keep_slash=True)}"

    # --- the request loop -----------------------------------------------------------

    def _send(self, method: str, key: str, *, op: str, query: Sequence[tuple[str, str]] = (),
              headers: dict[str, str] | None = None, body: Callable[[], Stream] | None = None,
              payload_sha256: str = EMPTY_SHA256, ok: Sequence[int] = (200,),
              public: bool = False) -> HttpResponse:
        """Send with retries; returns a response whose status is in ``ok`` or raises."""
        attempt = 0
        while True:
            try:
                request = self._build(method, key, query, dict(headers or {}), body, payload_sha256, public)
                response = self.transport.send(request)
            except TransportError as exc:
                if exc.retryable and attempt + 1 < self.retry.attempts:
                    self.sleep(self.retry.delay(attempt, self.rand))
                    attempt += 1
                    continue
                url = self.public_url(key) if public else self.endpoint
                raise StoreError(f"cannot reach {self.where()} at {url} to {op} {key!r}: {exc}; check "
                                 "endpoint_url / public_base_url and your network connection") from None
            if response.status in ok:
                return response
            error = read_error(response)
            if _retryable(error) and attempt + 1 < self.retry.attempts:
                self.sleep(self.retry.delay(attempt, self.rand))
                attempt += 1
                continue
            raise self.error_for(error, op=op, key=key, public=public)

    def _build(self, method: str, key: str, query: Sequence[tuple[str, str]], headers: dict[str, str],
               body: Callable[[], Stream] | None, payload_sha256: str, public: bool) -> HttpRequest:
        if public:
            return HttpRequest(method, self.public_url(key), headers, body, follow_redirects=True,
                               timeout=self.timeout_s)
        if self.credentials is None:
            raise StoreError(f"{self.where()}: no credentials for {method} {key!r}")
        origin, host, path = self._target(key)
        headers["host"] = host
        request = SigningRequest(method, path, tuple(query), tuple(headers.items()), payload_sha256)
        signed = sign(request, self.credentials, self.clock(), region=self.store.region)
        headers.update(signed.headers)
        qs = canonical_query(query)
        url = origin + uri_encode(path, keep_slash=True) + (f"?{qs}" if qs else "")
        return HttpRequest(method, url, headers, body, timeout=self.timeout_s)

    # --- error mapping --------------------------------------------------------------

    def error_for(self, error: S3ErrorReply, *, op: str, key: str, public: bool = False) -> StoreError:
        code, status = error.code, error.status
        obj = f"{key!r} in {self.where()}"
        creds = self.credentials.source if self.credentials else "no credentials"
        detail = f" (HTTP {status}{' ' + code if code else ''})"
        if public:
            where = f"{self.public_url(key)} (public_base_url of video store {self.store.name!r})"
            if status == 404:
                return StoreError(f"video {key!r} was not found at {where}{detail}; check the key, "
                                  "and that public_base_url points at the bucket's public address")
            return StoreError(f"cannot {op} {where}{detail}: {error.message or 'request refused'}; "
                              "check that the bucket allows public reads")
        if code == "PreconditionFailed" or status == 412:
            return PreconditionFailed(f"an object already exists at {obj}")
        if code == "NoSuchBucket":
            return StoreError(f"bucket {self.store.bucket!r} does not exist at {self.endpoint}{detail}; "
                              f"check bucket and endpoint_url of video store {self.store.name!r}")
        if code == "NoSuchKey" or (status == 404 and not code):
            return StoreError(f"video {obj} was not found{detail}; check the key in the case file, "
                              "or upload the video with `video-store upload`")
        if code in ("SignatureDoesNotMatch", "AuthorizationHeaderMalformed",
                    "AuthorizationQueryParametersError"):
            return StoreError(f"{self.where()} rejected the request signature to {op} {key!r}{detail}: "
                              f"check the secret access key ({creds}), that region "
                              f"{self.store.region!r} is the bucket's region, and that this "
                              "computer's clock is correct")
        if code == "RequestTimeTooSkewed":
            return StoreError(f"{self.where()} rejected the request time{detail}: this computer's "
                              "clock is off; synchronise it and retry")
        if code == "InvalidAccessKeyId":
            return StoreError(f"{self.where()} does not know the access key id ({creds}){detail}; "
                              "check the credentials and endpoint_url")
        if code in ("ExpiredToken", "InvalidToken", "TokenRefreshRequired"):
            return StoreError(f"the session token ({creds}) was rejected by {self.where()}{detail}; "
                              "refresh your temporary credentials")
        if code == "AccessDenied" or status == 403:
            hint = "" if code else "; if the key is right, check the secret key, region and clock too"
            return StoreError(f"access denied to {op} {obj}{detail}: check that the credentials "
                              f"({creds}) are allowed to {op} objects in this bucket{hint}")
        if code in ("BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"):
            return StoreError(f"{self.where()} received different bytes than were hashed for {key!r}"
                              f"{detail}; was the file modified during the upload? Retry")
        message = f": {error.message}" if error.message else ""
        return StoreError(f"cannot {op} {obj}{detail}{message}")

    # --- operations -------------------------------------------------------------------

    def head(self, key: str) -> ObjectInfo | None:
        """Object size and declared SHA-256, or None when there is no object at the key."""
        try:
            response = self._send("HEAD", key, op="read", headers={"x-amz-checksum-mode": "ENABLED"},
                                  ok=(200, 404))
        except PreconditionFailed:
            raise
        except StoreError as head_error:
            # HEAD errors have no body, so no error code: ask again with a one-byte GET,
            # whose XML body tells a wrong secret from a missing permission.
            try:
                self._send("GET", key, op="read", headers={"range": "bytes=0-0"}, ok=(200, 206, 416)).close()
            except StoreError as detailed:
                raise detailed from None
            raise head_error from None
        with response:
            if response.status == 404:
                return None
            return _object_info(response)

    def get(self, key: str, start: int = 0, *, public: bool = False) -> HttpResponse:
        """A streaming GET from byte ``start``: 200 (whole object), 206 (range) or 416 (past end)."""
        headers = {"range": f"bytes={start}-"} if start > 0 else {}
        return self._send("GET", key, op="download", headers=headers, ok=(200, 206, 416), public=public)

    def put_file(self, key: str, path: Path, size: int, sha256_hex: str) -> None:
        """Upload a whole file, refusing (``PreconditionFailed``) if the key already exists."""
        headers = {"content-type": content_type_for(key), "content-length": str(size),
                   "if-none-match": "*", "x-amz-checksum-sha256": b64_sha256(sha256_hex),
                   SHA256_META: sha256_hex}
        self._send("PUT", key, op="upload", headers=headers, payload_sha256=sha256_hex,
                   body=lambda: FileSlice(path, 0, size)).close()

    def create_multipart(self, key: str, sha256_hex: str) -> str:
        headers = {"content-type": content_type_for(key), "x-amz-checksum-algorithm": "SHA256",
                   SHA256_META: sha256_hex}
        with self._send("POST", key, op="upload", query=[("uploads", "")], headers=headers) as response:
            root = _xml(response.read(_ERROR_BODY_LIMIT))
        upload_id = _child_text(root, "UploadId") if root is not None else None
        if not upload_id:
            raise StoreError(f"{self.where()} did not return an upload id for {key!r}; "
                             "does the store support multipart uploads?")
        return upload_id

    def upload_part(self, key: str, upload_id: str, number: int, path: Path, offset: int, length: int,
                    sha256_hex: str) -> Part:
        checksum = b64_sha256(sha256_hex)
        headers = {"content-length": str(length), "x-amz-checksum-sha256": checksum}
        query = [("partNumber", str(number)), ("uploadId", upload_id)]
        with self._send("PUT", key, op="upload", query=query, headers=headers, payload_sha256=sha256_hex,
                        body=lambda: FileSlice(path, offset, length)) as response:
            etag = response.headers.get("etag")
        if not etag:
            raise StoreError(f"{self.where()} returned no ETag for part {number} of {key!r}")
        return Part(number, etag, checksum)

    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[Part]) -> None:
        xml = "".join(f"<Part><PartNumber>{p.number}</PartNumber><ETag>{_escape(p.etag)}</ETag>"
                      f"<ChecksumSHA256>{p.checksum_sha256}</ChecksumSHA256></Part>" for p in parts)
        payload = f"<CompleteMultipartUpload>{xml}</CompleteMultipartUpload>".encode()
        headers = {"content-type": "application/xml", "content-length": str(len(payload)),
                   "if-none-match": "*"}
        with self._send("POST", key, op="upload", query=[("uploadId", upload_id)], headers=headers,
                        payload_sha256=hashlib.sha256(payload).hexdigest(),
                        body=lambda: io.BytesIO(payload)) as response:
            body = response.read(_ERROR_BODY_LIMIT)
        # S3 may report a failed completion inside a 200 response.
        root = _xml(body)
        if root is not None and _local(root.tag) == "Error":
            error = S3ErrorReply(200, _child_text(root, "Code") or "", _child_text(root, "Message") or "")
            raise self.error_for(error, op="upload", key=key)

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self._send("DELETE", key, op="upload", query=[("uploadId", upload_id)], ok=(200, 204, 404)).close()


def read_error(response: HttpResponse) -> S3ErrorReply:
    with response:
        try:
            body = response.read(_ERROR_BODY_LIMIT)
        except TransportError:
            body = b""
    root = _xml(body)
    code = message = ""
    if root is not None and _local(root.tag) == "Error":
        code = _child_text(root, "Code") or ""
        message = _child_text(root, "Message") or ""
    # HEAD responses have no body; some stores put the code in a header instead.
    code = code or response.headers.get("x-amz-error-code", "")
    message = message or response.headers.get("x-amz-error-message", "")
    return S3ErrorReply(response.status, code, " ".join(message.split())[:300])


def _retryable(error: S3ErrorReply) -> bool:
    return error.status in _RETRY_STATUSES or error.code in _RETRY_CODES


def _object_info(response: HttpResponse) -> ObjectInfo:
    headers = response.headers
    try:
        size = int(headers.get("content-length", ""))
    except ValueError:
        size = -1
    sha = headers.get(SHA256_META, "").strip().lower() or None
    checksum = headers.get("x-amz-checksum-sha256", "")
    checksum_type = headers.get("x-amz-checksum-type", "FULL_OBJECT").upper()
    if sha is None and checksum and "-" not in checksum and checksum_type != "COMPOSITE":
        try:
            sha = base64.b64decode(checksum, validate=True).hex()
        except ValueError:
            sha = None
    return ObjectInfo(size, headers.get("etag"), sha)


def _xml(body: bytes) -> ET.Element | None:
    if not body.strip():
        return None
    try:
        return ET.fromstring(body)
    except ET.ParseError:
        return None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child_text(root: ET.Element, name: str) -> str | None:
    for child in root:
        if _local(child.tag) == name:
            return (child.text or "").strip()
    return None


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
