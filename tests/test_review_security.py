"""review/security: who may talk to the review server, as pure checks on headers."""

from __future__ import annotations

import pytest

from glasskit_eval.review.errors import Denied, ReviewError
from glasskit_eval.review.security import (
    COOKIE_NAME,
    CSRF_HEADER,
    MAX_BODY_BYTES,
    SECURITY_HEADERS,
    Secrets,
    allowed_hosts,
    body_length,
    check_host,
    check_origin,
    check_session,
    check_write,
)

PORT = 8123


def _refused(call: object, *args: object) -> Denied:
    with pytest.raises(Denied) as info:
        call(*args)  # type: ignore[operator]
    assert isinstance(info.value, ReviewError) and info.value.message
    return info.value


def test_each_launch_has_its_own_secrets() -> None:
    one, two = Secrets(), Secrets()
    assert one.launch_token != two.launch_token and one.session != two.session
    assert one.csrf_key != two.csrf_key
    assert len(one.launch_token) >= 40 and len(one.csrf_key) == 32


def test_launch_token_matches_only_itself() -> None:
    secrets = Secrets()
    assert secrets.check_launch_token(secrets.launch_token)
    for wrong in ("", secrets.launch_token[:-1], secrets.launch_token + "x", Secrets().launch_token):
        assert not secrets.check_launch_token(wrong)


def test_session_cookie_is_strict_and_httponly_and_read_back() -> None:
    secrets = Secrets()
    cookie = secrets.session_cookie()
    assert cookie.startswith(f"{COOKIE_NAME}={secrets.session};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http on loopback: a Secure cookie would never come back
    value = f"{COOKIE_NAME}={secrets.session}"
    assert secrets.has_session(value)
    assert secrets.has_session(f"other=1; {value}; theme=dark")
    for header in (None, "", f"{COOKIE_NAME}=guess", f"{COOKIE_NAME}={secrets.session}x",
                   f"x{COOKIE_NAME}={secrets.session}", 'a="unterminated', f"{COOKIE_NAME}={Secrets().session}"):
        assert not secrets.has_session(header), header


def test_csrf_tokens_are_fresh_and_signed() -> None:
    secrets = Secrets()
    first, second = secrets.new_csrf_token(), secrets.new_csrf_token()
    assert first != second
    assert secrets.check_csrf_token(first) and secrets.check_csrf_token(second)
    nonce, mac = first.split(".")
    other_mac = Secrets().new_csrf_token().split(".")[1]
    for wrong in (None, "", nonce, f"{nonce}.", f".{mac}", f"{nonce}.{other_mac}", f"{nonce}x.{mac}",
                  f"{nonce}.{mac}.{mac}", Secrets().new_csrf_token()):
        assert not secrets.check_csrf_token(wrong), wrong


def test_host_must_name_this_server() -> None:
    assert allowed_hosts(PORT) == {f"127.0.0.1:{PORT}", f"localhost:{PORT}"}
    check_host({"host": f"127.0.0.1:{PORT}"}, PORT)
    check_host({"host": f" LOCALHOST:{PORT} "}, PORT)
    for host in ("", "127.0.0.1", f"127.0.0.1:{PORT + 1}", f"evil.example:{PORT}", f"127.0.0.2:{PORT}",
                 f"[::1]:{PORT}"):
        error = _refused(check_host, {"host": host}, PORT)
        assert error.status == 421 and error.code == "wrong_host"
    assert _refused(check_host, {}, PORT).status == 421


def test_origin_when_sent_must_be_this_server() -> None:
    check_origin({}, PORT)
    check_origin({"origin": f"http://127.0.0.1:{PORT}"}, PORT)
    check_origin({"origin": f"http://localhost:{PORT}", "sec-fetch-site": "same-origin"}, PORT)
    for headers in ({"origin": "http://evil.example"}, {"origin": f"https://127.0.0.1:{PORT}"},
                    {"origin": "null"}, {"origin": f"http://127.0.0.1:{PORT}", "sec-fetch-site": "cross-site"},
                    {"origin": f"http://127.0.0.1:{PORT}", "sec-fetch-site": "same-site"}):
        error = _refused(check_origin, headers, PORT)
        assert error.status == 403 and error.code == "wrong_origin"


def test_session_check() -> None:
    secrets = Secrets()
    check_session(secrets, {"cookie": f"{COOKIE_NAME}={secrets.session}"})
    error = _refused(check_session, secrets, {})
    assert error.status == 401 and error.code == "no_session" and "token" in error.message


def _write_headers(secrets: Secrets, **extra: str) -> dict[str, str]:
    headers = {"origin": f"http://127.0.0.1:{PORT}", CSRF_HEADER: secrets.new_csrf_token(),
               "content-type": "application/json; charset=utf-8", "content-length": "12"}
    headers.update(extra)
    return headers


def test_write_needs_origin_csrf_json_and_a_length() -> None:
    secrets = Secrets()
    assert check_write(secrets, _write_headers(secrets), PORT) == 12
    cases = [
        ({"origin": "http://evil.example"}, 403, "wrong_origin"),
        ({CSRF_HEADER: ""}, 403, "bad_csrf"),
        ({CSRF_HEADER: Secrets().new_csrf_token()}, 403, "bad_csrf"),
        ({"content-type": "text/plain"}, 415, "unsupported_media_type"),
        ({"content-type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
        ({"content-type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"),
    ]
    for extra, status, code in cases:
        error = _refused(check_write, secrets, _write_headers(secrets, **extra), PORT)
        assert (error.status, error.code) == (status, code), extra
    headers = _write_headers(secrets)
    del headers[CSRF_HEADER]
    assert _refused(check_write, secrets, headers, PORT).code == "bad_csrf"


def test_body_length_is_decided_from_the_headers_alone() -> None:
    assert body_length({"content-length": "0"}) == 0
    assert body_length({"content-length": str(MAX_BODY_BYTES)}) == MAX_BODY_BYTES
    cases = [
        ({}, 411, "length_required"),
        ({"transfer-encoding": "chunked", "content-length": "5"}, 411, "length_required"),
        ({"content-length": "ten"}, 400, "bad_request"),
        ({"content-length": "-1"}, 400, "bad_request"),
        ({"content-length": str(MAX_BODY_BYTES + 1)}, 413, "body_too_large"),
    ]
    for headers, status, code in cases:
        error = _refused(body_length, headers)
        assert (error.status, error.code) == (status, code), headers


def test_security_headers_forbid_inline_code_and_framing() -> None:
    headers = dict(SECURITY_HEADERS)
    csp = headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'none'"
    assert "unsafe" not in csp and "http:" not in csp and "*" not in csp
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
