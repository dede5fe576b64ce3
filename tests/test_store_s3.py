"""The S3 client: request shape (what servers do not check), retries, error mapping, and a real server."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import socket
from pathlib import Path

import pytest
import s3server
from s3server import S3Server

from glasskit_eval.commands.video_store import _multipart
from glasskit_eval.errors import StoreError
from glasskit_eval.store.config import VideoStoreConfig
from glasskit_eval.store.s3 import PreconditionFailed, RetryPolicy, S3Client, b64_sha256
from glasskit_eval.store.sigv4 import Credentials
from glasskit_eval.store.transport import HttpRequest, HttpResponse, TransportError

s3_server = s3server.s3_server  # the shared session fixture

SECRET = "Zm9vYmFy/secret+value="
CREDS = Credentials("AKIDUNIT", SECRET, None, source="environment variables A/B")
NOW = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


class Recorder:
    """Records requests (with their bodies) and answers from a script of responses."""

    def __init__(self, *responses: HttpResponse | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[tuple[HttpRequest, bytes]] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        body = b""
        if request.body is not None:
            stream = request.body()
            body = stream.read()
            stream.close()
        self.requests.append((request, body))
        answer = self.responses.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(status: int = 200, body: bytes = b"", **headers: str) -> HttpResponse:
    return HttpResponse(status, {k.replace("_", "-"): v for k, v in headers.items()}, io.BytesIO(body))


def error(status: int, code: str, message: str = "msg") -> HttpResponse:
    xml = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    return HttpResponse(status, {"content-type": "application/xml"}, io.BytesIO(xml.encode()))


def client(transport: Recorder, store: VideoStoreConfig | None = None, creds: Credentials | None = CREDS,
           sleeps: list[float] | None = None) -> S3Client:
    store = store or VideoStoreConfig(name="team", bucket="bkt", endpoint_url="http://127.0.0.1:9")
    sink = sleeps if sleeps is not None else []
    return S3Client(store, creds, transport=transport, clock=lambda: NOW, sleep=sink.append,
                    rand=lambda: 1.0, retry=RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=1.0))


def signed_headers(request: HttpRequest) -> list[str]:
    auth = request.headers["authorization"]
    return auth.split("SignedHeaders=")[1].split(",")[0].split(";")


# --- request shape: what a lenient server would not catch ---------------------------------


def test_put_sends_length_checksum_condition_and_payload_hash_all_signed(tmp_path: Path) -> None:
    video = tmp_path / "v.mp4"
    video.write_bytes(b"0123456789" * 100)
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    rec = Recorder(ok())
    client(rec).put_file("dir/a b+ü.mp4", video, 1000, sha)
    request, body = rec.requests[0]
    assert request.method == "PUT" and body == video.read_bytes()
    assert request.url == "http://127.0.0.1:9/bkt/dir/a%20b%2B%C3%BC.mp4"
    h = request.headers
    assert h["content-length"] == "1000"
    assert h["x-amz-content-sha256"] == sha
    assert h["x-amz-checksum-sha256"] == b64_sha256(sha)
    assert h["x-amz-meta-sha256"] == sha and h["if-none-match"] == "*" and h["content-type"] == "video/mp4"
    assert h["host"] == "127.0.0.1:9"
    assert set(signed_headers(request)) >= {"content-length", "host", "if-none-match", "x-amz-checksum-sha256",
                                            "x-amz-content-sha256", "x-amz-date", "x-amz-meta-sha256"}


def test_region_is_in_the_credential_scope_and_aws_uses_virtual_hosts() -> None:
    rec = Recorder(ok(content_length="5"), ok(content_length="5"), ok(content_length="5"))
    client(rec, VideoStoreConfig(name="s", bucket="bkt", region="eu-west-3")).head("k.mp4")
    client(rec, VideoStoreConfig(name="s", bucket="my.dotted.bucket", region="eu-west-3")).head("k.mp4")
    client(rec, VideoStoreConfig(name="s", bucket="b", region="auto",
                                 endpoint_url="https://acct.r2.cloudflarestorage.com/")).head("k.mp4")
    urls = [r.url for r, _ in rec.requests]
    assert urls == ["https://bkt.s3.eu-west-3.amazonaws.com/k.mp4",
                    "https://s3.eu-west-3.amazonaws.com/my.dotted.bucket/k.mp4",
                    "https://acct.r2.cloudflarestorage.com/b/k.mp4"]
    scopes = [r.headers["authorization"].split("Credential=")[1].split(",")[0] for r, _ in rec.requests]
    assert scopes == ["AKIDUNIT/20250102/eu-west-3/s3/aws4_request"] * 2 + ["AKIDUNIT/20250102/auto/s3/aws4_request"]
    assert rec.requests[0][0].headers["host"] == "bkt.s3.eu-west-3.amazonaws.com"


def test_get_and_head_sign_the_empty_payload_and_ranges() -> None:
    rec = Recorder(ok(206, b"x", content_range="bytes 10-10/11"))
    with client(rec).get("k.mp4", 10) as response:
        assert response.read() == b"x"
    request = rec.requests[0][0]
    assert request.headers["range"] == "bytes=10-"
    assert request.headers["x-amz-content-sha256"] == hashlib.sha256(b"").hexdigest()
    assert "range" in signed_headers(request)


def test_session_token_is_sent_and_signed() -> None:
    rec = Recorder(ok(content_length="1"))
    client(rec, creds=Credentials("AKID", "s", "the-token")).head("k.mp4")
    request = rec.requests[0][0]
    assert request.headers["x-amz-security-token"] == "the-token"
    assert "x-amz-security-token" in signed_headers(request)


def test_public_downloads_are_anonymous_and_follow_redirects() -> None:
    store = VideoStoreConfig(name="pub", bucket="b", public_base_url="https://cdn.example/videos/")
    rec = Recorder(ok(200, b"data"))
    client(rec, store, creds=None).get("a b/ü.mp4", public=True).close()
    request = rec.requests[0][0]
    assert request.url == "https://cdn.example/videos/a%20b/%C3%BC.mp4"
    assert "authorization" not in request.headers and request.follow_redirects


def test_multipart_parts_carry_their_own_checksums(tmp_path: Path) -> None:
    data = os.urandom(11 * 1024 * 1024)
    video = tmp_path / "big.mp4"
    video.write_bytes(data)
    create = b"<InitiateMultipartUploadResult><UploadId>up/1+</UploadId></InitiateMultipartUploadResult>"
    rec = Recorder(ok(200, create), ok(etag='"e1"'), ok(etag='"e2"'), ok(etag='"e3"'),
                   ok(200, b"<CompleteMultipartUploadResult/>"))
    _multipart(client(rec), "big.mp4", video, len(data), hashlib.sha256(data).hexdigest(), 4 * 1024 * 1024)
    created, *parts, completed = rec.requests
    assert created[0].url.endswith("/bkt/big.mp4?uploads=")
    assert created[0].headers["x-amz-checksum-algorithm"] == "SHA256"
    sizes = [5 * 1024 * 1024, 5 * 1024 * 1024, 1024 * 1024]  # parts never below S3's 5 MiB minimum
    offset = 0
    for (request, body), size, number in zip(parts, sizes, (1, 2, 3)):
        assert request.url.endswith(f"?partNumber={number}&uploadId=up%2F1%2B")
        chunk = data[offset:offset + size]
        offset += size
        assert body == chunk and request.headers["content-length"] == str(size)
        assert request.headers["x-amz-content-sha256"] == hashlib.sha256(chunk).hexdigest()
        assert request.headers["x-amz-checksum-sha256"] == b64_sha256(hashlib.sha256(chunk).hexdigest())
    assert completed[0].headers["if-none-match"] == "*"
    assert completed[1].count(b"<Part>") == 3 and b"<ETag>&quot;e2&quot;</ETag>" in completed[1]


def test_failed_multipart_is_aborted(tmp_path: Path) -> None:
    video = tmp_path / "big.mp4"
    video.write_bytes(b"x" * (6 * 1024 * 1024))
    create = b"<InitiateMultipartUploadResult><UploadId>u</UploadId></InitiateMultipartUploadResult>"
    rec = Recorder(ok(200, create), error(403, "AccessDenied"), ok(204))
    with pytest.raises(StoreError, match="access denied"):
        _multipart(client(rec), "big.mp4", video, 6 * 1024 * 1024, "00" * 32, 5 * 1024 * 1024)
    assert rec.requests[-1][0].method == "DELETE" and rec.requests[-1][0].url.endswith("?uploadId=u")


def test_complete_with_an_error_inside_a_200_is_an_error() -> None:
    rec = Recorder(ok(200, b"<Error><Code>InternalError</Code><Message>oops</Message></Error>"))
    with pytest.raises(StoreError, match="InternalError"):
        client(rec).complete_multipart("k.mp4", "u", [])


# --- retries -----------------------------------------------------------------------------------


def test_5xx_throttling_and_resets_are_retried_with_backoff_and_fresh_signatures() -> None:
    times = iter([NOW, NOW + dt.timedelta(seconds=1), NOW + dt.timedelta(seconds=2)])
    rec = Recorder(error(503, "SlowDown"), TransportError("connection reset", retryable=True),
                   ok(content_length="3"))
    sleeps: list[float] = []
    c = client(rec, sleeps=sleeps)
    c.clock = lambda: next(times)
    assert c.head("k.mp4") is not None
    assert sleeps == [0.5, 1.0]
    dates = [r.headers["x-amz-date"] for r, _ in rec.requests]
    assert len(set(dates)) == 3


def test_retries_give_up_with_the_last_error() -> None:
    rec = Recorder(error(500, "InternalError"), error(500, "InternalError"), error(500, "InternalError", "bad"))
    with pytest.raises(StoreError, match=r"HTTP 500 InternalError\): bad"):
        client(rec).get("k.mp4")
    assert len(rec.requests) == 3


def test_client_errors_are_not_retried() -> None:
    rec = Recorder(error(404, "NoSuchKey"))
    with pytest.raises(StoreError, match="was not found"):
        client(rec).get("k.mp4")
    assert len(rec.requests) == 1


# --- error messages --------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "code", "expect"), [
    (404, "NoSuchKey", "'k.mp4' in video store 'team' (bucket 'bkt' at http://127.0.0.1:9) was not found"),
    (404, "NoSuchBucket", "bucket 'bkt' does not exist"),
    (403, "AccessDenied", "access denied to download 'k.mp4'"),
    (403, "SignatureDoesNotMatch", "region 'us-east-1' is the bucket's region, and that this computer's clock"),
    (403, "RequestTimeTooSkewed", "clock is off"),
    (403, "InvalidAccessKeyId", "does not know the access key id (environment variables A/B)"),
    (400, "ExpiredToken", "refresh your temporary credentials"),
    (412, "PreconditionFailed", "an object already exists"),
    (400, "InvalidArgument", "HTTP 400 InvalidArgument): msg"),
])
def test_s3_errors_become_clear_messages_without_secrets(status: int, code: str, expect: str) -> None:
    with pytest.raises(StoreError) as info:
        client(Recorder(error(status, code))).get("k.mp4")
    assert expect in str(info.value)
    assert SECRET not in str(info.value) and "AKIDUNIT" not in str(info.value)


def test_head_errors_have_no_body_so_a_one_byte_get_finds_the_code() -> None:
    rec = Recorder(HttpResponse(403, {}, io.BytesIO(b"")), error(403, "SignatureDoesNotMatch"))
    with pytest.raises(StoreError, match="rejected the request signature"):
        client(rec).head("k.mp4")
    assert [(r.method, r.headers.get("range")) for r, _ in rec.requests] == [("HEAD", None), ("GET", "bytes=0-0")]
    rec = Recorder(HttpResponse(403, {}, io.BytesIO(b"")), HttpResponse(403, {}, io.BytesIO(b"")))
    with pytest.raises(StoreError, match="check the secret key, region and clock"):
        client(rec).head("k.mp4")
    assert client(Recorder(HttpResponse(404, {}, io.BytesIO(b"")))).head("k.mp4") is None


def test_bad_endpoint_is_a_config_error() -> None:
    with pytest.raises(StoreError, match="not an http"):
        S3Client(VideoStoreConfig(name="x", bucket="b", endpoint_url="s3.example.com"), CREDS)


# --- against a real S3 server (SeaweedFS) ------------------------------------------------------


def real(server: S3Server, *, bucket: str | None = None, secret: str | None = None,
         public: bool = False) -> S3Client:
    store = VideoStoreConfig(name="team", bucket=bucket or server.private_bucket, endpoint_url=server.endpoint,
                             public_base_url=server.public_base_url if public else None)
    return S3Client(store, Credentials(server.access_key, secret or server.secret_key, source="test vars"))


def test_real_put_head_get_range_and_refused_overwrite(s3_server: S3Server, tmp_path: Path) -> None:
    data = os.urandom(300_000)
    video = tmp_path / "v.mp4"
    video.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    key = f"s3 test/{sha[:8]} ünï+&=?#%.mp4"
    c = real(s3_server)
    assert c.head(key) is None
    c.put_file(key, video, len(data), sha)
    info = c.head(key)
    assert info is not None and (info.size, info.sha256) == (len(data), sha)
    with c.get(key) as response:
        assert response.status == 200 and response.read() == data
    with c.get(key, 1000) as response:
        assert response.status == 206 and response.read() == data[1000:]
        assert response.headers["content-range"] == f"bytes 1000-{len(data) - 1}/{len(data)}"
    with c.get(key, len(data)) as response:
        assert response.status == 416
    with pytest.raises(PreconditionFailed):
        c.put_file(key, video, len(data), sha)


def test_real_multipart_upload(s3_server: S3Server, tmp_path: Path) -> None:
    data = os.urandom(11 * 1024 * 1024 + 17)
    video = tmp_path / "big.mp4"
    video.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    c = real(s3_server)
    _multipart(c, f"multi/{sha}.mp4", video, len(data), sha, 5 * 1024 * 1024)
    info = c.head(f"multi/{sha}.mp4")
    assert info is not None and (info.size, info.sha256) == (len(data), sha)
    with c.get(f"multi/{sha}.mp4") as response:
        assert hashlib.sha256(response.read()).hexdigest() == sha
    with pytest.raises(PreconditionFailed):
        _multipart(c, f"multi/{sha}.mp4", video, len(data), sha, 5 * 1024 * 1024)


def test_real_server_rejects_a_wrong_secret_with_a_hint(s3_server: S3Server) -> None:
    bad = real(s3_server, secret="wrong-" + s3_server.secret_key)
    with pytest.raises(StoreError) as info:
        bad.get("anything.mp4")
    assert "rejected the request signature" in str(info.value) and "SignatureDoesNotMatch" in str(info.value)
    assert s3_server.secret_key not in str(info.value)


def test_real_public_and_private_anonymous_reads(s3_server: S3Server, tmp_path: Path) -> None:
    video = tmp_path / "p.mp4"
    video.write_bytes(b"public bytes")
    sha = hashlib.sha256(b"public bytes").hexdigest()
    real(s3_server, bucket=s3_server.public_bucket).put_file("pub/p q.mp4", video, 12, sha)
    anonymous = S3Client(VideoStoreConfig(name="pub", bucket=s3_server.public_bucket,
                                          public_base_url=s3_server.public_base_url), None)
    with anonymous.get("pub/p q.mp4", public=True) as response:
        assert response.read() == b"public bytes"
    with pytest.raises(StoreError, match="was not found at"):
        anonymous.get("pub/missing.mp4", public=True)
    private = S3Client(VideoStoreConfig(name="priv", bucket=s3_server.private_bucket,
                                        public_base_url=f"{s3_server.endpoint}/{s3_server.private_bucket}"), None)
    with pytest.raises(StoreError, match="HTTP 403 AccessDenied"):
        private.get("ready-probe", public=True)


def test_unreachable_endpoint_names_it() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = S3Client(VideoStoreConfig(name="team", bucket="b", endpoint_url=f"http://127.0.0.1:{port}"), CREDS)
    with pytest.raises(StoreError, match=f"cannot reach video store 'team'.*127.0.0.1:{port}"):
        c.head("k.mp4")
