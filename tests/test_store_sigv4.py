"""SigV4 signing: stage by stage against the official AWS test suite, byte for byte against botocore."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from glasskit_eval.store import sigv4
from glasskit_eval.store.sigv4 import Credentials, SigningRequest

SUITE = Path(__file__).parent / "data" / "sigv4" / "aws4_testsuite"
SUITE_CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TIME = dt.datetime(2015, 8, 30, 12, 36, 0, tzinfo=dt.timezone.utc)


def _suite_cases() -> list[str]:
    return sorted(str(p.parent.relative_to(SUITE)) for p in SUITE.rglob("*.req"))


def _read(case: str, ext: str) -> str:
    path = SUITE / case / f"{Path(case).name}.{ext}"
    return path.read_text(encoding="utf-8").replace("\r\n", "\n")


def _parse_raw_request(raw: str) -> SigningRequest:
    head, _, body = raw.partition("\n\n")
    lines = head.split("\n")
    words = lines[0].split(" ")
    method, target = words[0], " ".join(words[1:-1])
    path, _, query_text = target.partition("?")
    query = tuple((unquote(k), unquote(v)) for k, _, v in
                  (pair.partition("=") for pair in query_text.split("&") if pair))
    headers: list[list[str]] = []
    for line in lines[1:]:
        if not line:
            continue
        if line[:1] in (" ", "\t"):
            headers[-1][1] += "\n" + line  # obsolete line folding
        else:
            name, _, value = line.partition(":")
            headers.append([name, value])
    return SigningRequest(method, unquote(path), query, tuple((n, v) for n, v in headers),
                          hashlib.sha256(body.encode("utf-8")).hexdigest())


@pytest.mark.parametrize("case", _suite_cases())
def test_official_suite_stage_by_stage(case: str) -> None:
    request = _parse_raw_request(_read(case, "req"))
    creq = _read(case, "creq")
    # As in botocore's runner: the token is signed when the canonical request has it
    # (post-sts-header-after adds it to the request only after signing).
    match = re.search(r"^x-amz-security-token:(.*)$", creq, re.MULTILINE)
    token = match.group(1) if match else None
    unsigned = tuple((n, v) for n, v in request.headers if n.lower() != "x-amz-security-token")
    with_token = unsigned + ((("X-Amz-Security-Token", token),) if token else ())
    stage_request = SigningRequest(request.method, request.path, request.query, with_token,
                                   request.payload_sha256)

    assert sigv4.canonical_request(stage_request, normalize_path=True) == creq
    scope = sigv4.credential_scope("20150830T123600Z", "us-east-1", "service")
    assert sigv4.string_to_sign(creq, "20150830T123600Z", scope) == _read(case, "sts")
    creds = Credentials(SUITE_CREDS.access_key_id, SUITE_CREDS.secret_access_key, token)
    signed = sigv4.sign(SigningRequest(request.method, request.path, request.query, unsigned,
                                       request.payload_sha256),
                        creds, SUITE_TIME, region="us-east-1", service="service",
                        normalize_path=True, content_sha256_header=False)
    assert signed.canonical_request == creq
    assert signed.string_to_sign == _read(case, "sts")
    assert signed.headers["authorization"] == _read(case, "authz")


def test_suite_is_complete() -> None:
    assert len(_suite_cases()) == 34
    assert (SUITE / "LICENSE").is_file() and (SUITE / "NOTICE").is_file()


def test_signing_key_matches_the_aws_documentation_example() -> None:
    key = sigv4.signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215T000000Z", "us-east-1", "iam")
    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"


def test_s3_paths_are_not_normalized_and_encoded_once() -> None:
    assert sigv4.canonical_uri("/b/a//./../x y+ü.mp4") == "/b/a//./../x%20y%2B%C3%BC.mp4"
    assert sigv4.canonical_uri("/b/~-_.") == "/b/~-_."
    assert sigv4.canonical_uri("/b/%41") == "/b/%2541"


def test_canonical_query_sorts_encoded_pairs_and_keeps_empty_values() -> None:
    assert sigv4.canonical_query([("uploads", "")]) == "uploads="
    assert sigv4.canonical_query([("b", "2"), ("a", "x y"), ("a", "1"), ("A", "+")]) == \
        "A=%2B&a=1&a=x%20y&b=2"


def test_sign_requires_an_aware_time_and_a_host() -> None:
    request = SigningRequest("GET", "/", headers=(("host", "h"),))
    with pytest.raises(ValueError):
        sigv4.sign(request, SUITE_CREDS, dt.datetime(2020, 1, 1), region="us-east-1")
    with pytest.raises(ValueError, match="host"):
        sigv4.canonical_request(SigningRequest("GET", "/"))


def test_credentials_repr_hides_secrets() -> None:
    creds = Credentials("AKIDX", "very-secret", "token-secret", source="env")
    assert "very-secret" not in repr(creds) and "token-secret" not in repr(creds)


def test_headers_added_by_signing_replace_callers_and_are_signed() -> None:
    creds = Credentials("AKID", "secret", "TOKEN")
    request = SigningRequest("GET", "/b/k", headers=(("Host", "h"), ("X-Amz-Date", "stale"),
                                                     ("x-amz-security-token", "old")))
    signed = sigv4.sign(request, creds, SUITE_TIME, region="eu-west-3")
    assert signed.headers["x-amz-date"] == "20150830T123600Z"
    assert signed.headers["x-amz-security-token"] == "TOKEN"
    assert "x-amz-date:20150830T123600Z\n" in signed.canonical_request
    assert "x-amz-security-token:TOKEN\n" in signed.canonical_request
    assert "stale" not in signed.canonical_request and ":old" not in signed.canonical_request
    assert "/20150830/eu-west-3/s3/aws4_request" in signed.headers["authorization"]
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token," in \
        signed.headers["authorization"]


# --- byte for byte against botocore's S3SigV4Auth -------------------------------------

KEYS = [
    "plain.mp4",
    "dir one/file with  spaces.mp4",
    "ünïcødé/日本語 ビデオ.mov",
    "reserved !#$&'()*+,;=:@[]%?.mkv",
    "tilde~dash-under_score.dot.webm",
    "/leading//double//slashes/.//x.m4v",
    "emoji 🎥 clip.mp4",
]
QUERIES: list[tuple[tuple[str, str], ...]] = [
    (),
    (("uploads", ""),),
    (("partNumber", "3"), ("uploadId", "abc/DEF+ghi=="),),
    (("list-type", "2"), ("prefix", "a b/ü"), ("delimiter", "/")),
]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: "&".join(k for k, _ in q) or "none")
@pytest.mark.parametrize("token", [None, "FQoGZXIvYXdzEJr//////////wEaDAbc+/="])
def test_byte_for_byte_with_botocore(key: str, query: tuple[tuple[str, str], ...], token: str | None,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    botocore_auth = pytest.importorskip("botocore.auth")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    now = dt.datetime(2024, 2, 29, 23, 59, 58, tzinfo=dt.timezone.utc)
    monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda *a, **k: now.replace(tzinfo=None))
    body = b"video bytes \x00\xff" * 7
    path = f"/my-bucket/{key}"
    headers = {"Host": "s3.eu-central-1.amazonaws.com", "Content-Type": "video/mp4",
               "Range": "bytes=5-", "If-None-Match": "*", "x-amz-meta-sha256": "ab" * 32,
               "x-amz-checksum-sha256": "q83vEjRWeJA=", "Content-Length": str(len(body)),
               "User-Agent": "not signed"}
    payload = hashlib.sha256(body).hexdigest()

    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    mine = sigv4.sign(SigningRequest("PUT", path, query, tuple(headers.items()), payload), creds, now,
                      region="eu-central-1")

    url = "https://s3.eu-central-1.amazonaws.com" + sigv4.uri_encode(path, keep_slash=True)
    theirs = AWSRequest(method="PUT", url=url, headers=dict(headers), data=body, params=list(query))
    auth = botocore_auth.S3SigV4Auth(BotoCredentials("AKIDEXAMPLE", creds.secret_access_key, token),
                                     "s3", "eu-central-1")
    auth.add_auth(theirs)
    assert mine.headers["authorization"] == theirs.headers["Authorization"]
    del theirs.headers["Authorization"]  # botocore's canonical form would include it
    assert mine.canonical_request == auth.canonical_request(theirs)
    assert mine.headers["x-amz-date"] == theirs.headers["X-Amz-Date"]
    assert mine.headers["x-amz-content-sha256"] == theirs.headers["X-Amz-Content-SHA256"]
    assert mine.headers.get("x-amz-security-token") == theirs.headers.get("X-Amz-Security-Token")
    assert re.search(r"Signature=[0-9a-f]{64}$", mine.headers["authorization"])
