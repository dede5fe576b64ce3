"""review/security: who may talk to the review server, as pure checks on headers."""

from __future__ import annotations

import pytest

from glasskit_eval.review.errors import Denied, ReviewError
from glasskit_eval.review.security import (
    CSRF_HEADER,
    MAX_BODY_BYTES,
    MAX_SESSIONS,
    SECURITY_HEADERS,
    Secrets,
    allowed_hosts,
    body_length,
    check_host,
    check_origin,
    check_session,
    check_write,
    cookie_name,
)

PORT = 8123


def _refused(call: object, *args: object) -> Denied:
    with pytest.raises(Denied) as info:
        call(*args)  # type: ignore[operator]
    assert isinstance(info.value, ReviewError) and info.value.message
    return info.value


def test_each_launch_has_its_own_secrets() -> None:
    one, two = Secrets(), Secrets()
    assert one.launch_token != two.launch_token and one.open_session() != two.open_session()
    assert one.csrf_key != two.csrf_key
    assert len(one.launch_token) >= 40 and len(one.csrf_key) == 32


def test_launch_token_works_once_and_a_fresh_one_replaces_it() -> None:
    secrets = Secrets()
    issued: list[str] = []
    secrets.on_new_token = issued.append
    first = secrets.launch_token
    for wrong in ("", first[:-1], first + "x", Secrets().launch_token, "é"):
        assert secrets.redeem(wrong) is None
    assert issued == [] and secrets.launch_token == first  # failed guesses spend nothing
    session = secrets.redeem(first)
    assert session is not None
    assert secrets.redeem(first) is None  # spent
    assert issued == [secrets.launch_token] and secrets.launch_token != first
    other = secrets.redeem(secrets.launch_token)  # the next browser gets its own session
    assert other is not None and other != session
    port = 8123
    for live in (session, other):
        assert secrets.session_of(f"{cookie_name(port)}={live}", port) == live


def test_sessions_are_bounded() -> None:
    secrets = Secrets()
    first = secrets.open_session()
    for _ in range(MAX_SESSIONS):
        secrets.open_session()
    assert secrets.session_of(f"{cookie_name(1)}={first}", 1) is None


def test_session_cookie_is_strict_httponly_per_port_and_read_back() -> None:
    secrets = Secrets()
    session = secrets.open_session()
    cookie = secrets.session_cookie(session, PORT)
    assert cookie.startswith(f"{cookie_name(PORT)}={session};") and cookie_name(PORT) != cookie_name(PORT + 1)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http on loopback: a Secure cookie would never come back
    value = f"{cookie_name(PORT)}={session}"
    assert secrets.session_of(value, PORT) == session
    assert secrets.session_of(f"other=1; {value}; theme=dark", PORT) == session
    assert secrets.session_of(value, PORT + 1) is None  # another review's cookie name
    name = cookie_name(PORT)
    for header in (None, "", f"{name}=guess", f"{name}={session}x", f"x{name}={session}", 'a="unterminated',
                   f"{name}={Secrets().open_session()}"):
        assert secrets.session_of(header, PORT) is None, header


def test_write_keys_are_fresh_signed_and_bound_to_their_session() -> None:
    secrets = Secrets()
    session, other = secrets.open_session(), secrets.open_session()
    first, second = secrets.new_csrf_token(session), secrets.new_csrf_token(session)
    assert first != second
    assert secrets.check_csrf_token(session, first) and secrets.check_csrf_token(session, second)
    assert not secrets.check_csrf_token(other, first)  # another session's key opens nothing
    nonce, mac = first.split(".")
    stranger = Secrets()
    other_mac = stranger.new_csrf_token(session).split(".")[1]
    for wrong in (None, "", nonce, f"{nonce}.", f".{mac}", f"{nonce}.{other_mac}", f"{nonce}x.{mac}",
                  f"{nonce}.{mac}.{mac}", stranger.new_csrf_token(session)):
        assert not secrets.check_csrf_token(session, wrong), wrong


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
    session = secrets.open_session()
    assert check_session(secrets, {"cookie": f"{cookie_name(PORT)}={session}"}, PORT) == session
    error = _refused(check_session, secrets, {}, PORT)
    assert error.status == 401 and error.code == "no_session" and "login link" in error.message


def _write_headers(secrets: Secrets, session: str, **extra: str) -> dict[str, str]:
    headers = {"origin": f"http://127.0.0.1:{PORT}", CSRF_HEADER: secrets.new_csrf_token(session),
               "content-type": "application/json; charset=utf-8", "content-length": "12"}
    headers.update(extra)
    return headers


def test_write_needs_origin_a_key_of_its_session_json_and_a_length() -> None:
    secrets = Secrets()
    session, other = secrets.open_session(), secrets.open_session()
    assert check_write(secrets, _write_headers(secrets, session), PORT, session) == 12
    cases = [
        ({"origin": "http://evil.example"}, 403, "wrong_origin"),
        ({CSRF_HEADER: ""}, 403, "bad_csrf"),
        ({CSRF_HEADER: Secrets().new_csrf_token(session)}, 403, "bad_csrf"),
        ({CSRF_HEADER: secrets.new_csrf_token(other)}, 403, "bad_csrf"),  # the cookie of one, the key of another
        ({"content-type": "text/plain"}, 415, "unsupported_media_type"),
        ({"content-type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
        ({"content-type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"),
    ]
    for extra, status, code in cases:
        error = _refused(check_write, secrets, _write_headers(secrets, session, **extra), PORT, session)
        assert (error.status, error.code) == (status, code), extra
    headers = _write_headers(secrets, session)
    del headers[CSRF_HEADER]
    assert _refused(check_write, secrets, headers, PORT, session).code == "bad_csrf"
    headers = _write_headers(secrets, session)
    del headers["origin"]  # every browser sends Origin on a fetch that writes; curl with a cookie does not
    assert _refused(check_write, secrets, headers, PORT, session).code == "wrong_origin"


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
