"""HTTP transport for the review page: stdlib ``http.server`` on 127.0.0.1 only.

All decisions live in ``api.handle``; this module parses requests, applies the
security headers to every response and streams file bodies. Which connection is served
when, and for how long it may take, is ``connections``' business.
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, TextIO

from .api import FileBody, Request, Response, ReviewState, handle
from .connections import BufferedSocketReader, Connections, SocketWriter
from .security import SECURITY_HEADERS

HOST = "127.0.0.1"
_CHUNK = 1 << 16


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    protocol_version = "HTTP/1.1"
    server_version = "glasskit-review"
    sys_version = ""

    def __init__(self, sock: socket.socket, address: Any, server: ReviewServer, data: bytes) -> None:
        self._data = data
        super().__init__(sock, address, server)

    def setup(self) -> None:
        # The lobby already read the request head: reading goes on from those bytes.
        self.connection = self.request
        self.reader = BufferedSocketReader(self.request, self._data)
        self.rfile = self.reader
        self.wfile = SocketWriter(self.request)

    def handle(self) -> None:
        # One request per hand-over: a kept-alive connection waits for its next one in the lobby.
        self.close_connection = True
        self.handle_one_request()

    def finish(self) -> None:
        pass  # the socket belongs to the lobby again, or is closed by it

    def _serve(self) -> None:
        consumed = False

        def read_body(length: int) -> bytes:
            nonlocal consumed
            consumed = True
            return self.rfile.read(length) if length else b""

        headers = {k.lower(): v for k, v in self.headers.items()}
        request = Request(self.command, self.path, headers, read_body)
        response = handle(self.server.state, request)
        declared = headers.get("content-length", "0").strip()
        has_body = declared != "0" or "transfer-encoding" in headers
        if has_body and not consumed:
            # An unread body would be parsed as the next request.
            self.close_connection = True
        self._send(response)

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        for name, value in SECURITY_HEADERS:
            self.send_header(name, value)
        names = {name.lower() for name, _ in response.headers}
        for name, value in response.headers:
            self.send_header(name, value)
        body = response.body
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(body) if isinstance(body, bytes) else body.length))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if isinstance(body, FileBody):
            self._copy_file(body)
        elif body:
            self.wfile.write(body)

    def _copy_file(self, body: FileBody) -> None:
        try:
            with open(body.path, "rb") as handle_:
                handle_.seek(body.start)
                left = body.length
                while left > 0:
                    chunk = handle_.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            # Media elements routinely drop a range request halfway to seek elsewhere.
            self.close_connection = True

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class ReviewServer(HTTPServer):
    # A restarted review must not take over a port another process still answers on.
    allow_reuse_address = False
    # Connections past the lobby's reach wait in the kernel's queue rather than being refused.
    request_queue_size = 128

    def __init__(self, state: ReviewState, port: int = 0, *, verbose: bool = False) -> None:
        # Before binding: a port in use closes the server, and with it these threads, at once.
        self.connections = Connections(self._serve_one)
        super().__init__((HOST, port), _Handler)  # type: ignore[arg-type]
        self.verbose = verbose
        state.port = self.server_address[1]
        self.state = state

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request)

    def _serve_one(self, sock: socket.socket, data: bytes) -> tuple[bool, bytes]:
        try:
            address = sock.getpeername()
        except OSError:
            return False, b""
        handler = _Handler(sock, address, self, data)
        return not handler.close_connection, bytes(handler.reader.buffer)

    def server_close(self) -> None:
        super().server_close()
        self.connections.close()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    @property
    def login_url(self) -> str:
        """The current one-time login URL (each login spends it and makes the next)."""
        return self.token_url(self.state.secrets.launch_token)

    def token_url(self, token: str) -> str:
        return f"{self.url}?token={token}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Never a traceback on the console for a client that went away; real bugs are
        # already logged by api.handle.
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def serve_in_thread(server: ReviewServer) -> threading.Thread:
    """Run ``server`` in a background thread (tests and embedding); stop with ``shutdown``."""
    thread = threading.Thread(target=server.serve_forever, name="glasskit-review", daemon=True)
    thread.start()
    return thread


class LoginFile:
    """The current one-time login URL in a file only this user can read, for the browser to open.

    A URL on a command line is visible to every local user (``ps``, ``/proc/*/cmdline``),
    and that is how ``webbrowser`` starts a browser. So, as Jupyter does, the browser gets
    ``file://.../login.html``, a 0600 file in a private (0700) temporary directory that
    redirects to the token URL. The file is rewritten with the next token after each login,
    so it opens a session as often as needed while ``review`` runs, and removed at exit.
    """

    def __init__(self, parent: str | None = None) -> None:
        from ..errors import UsageError

        places = [parent] if parent is not None else [os.environ.get("XDG_RUNTIME_DIR"), None]
        problem: OSError | None = None
        for place in places:  # XDG_RUNTIME_DIR: per user, on tmpfs, gone at logout
            if place is not None and not os.path.isdir(place):
                continue
            try:
                self.directory = Path(tempfile.mkdtemp(prefix="glasskit-review-", dir=place))
                break
            except OSError as exc:
                problem = exc
        else:
            where = parent or tempfile.gettempdir()
            reason = problem.strerror if problem is not None and problem.strerror else "not a directory"
            raise UsageError(f"cannot create the private login file in {where}: {reason}; point TMPDIR "
                             "at a writable directory")
        self.path = self.directory / "login.html"

    @property
    def uri(self) -> str:
        return self.path.as_uri()

    def write(self, url: str) -> None:
        quoted = html.escape(url, quote=True)
        page = ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
                f"<meta http-equiv=\"refresh\" content=\"0;url={quoted}\">"
                "<meta name=\"referrer\" content=\"no-referrer\"><title>glasskit review</title></head>\n"
                f"<body><p><a href=\"{quoted}\">Open the review page</a> (a one-time login link).</p>"
                "</body></html>\n")
        tmp = self.directory / ".login.html.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
        os.replace(tmp, self.path)  # a browser reading it never sees half a file

    def attach(self, server: ReviewServer) -> None:
        """Hold ``server``'s current login URL from now on, renewed after every login."""
        self.write(server.login_url)

        def renew(token: str) -> None:
            # A full disk must not fail the login that spent the old token.
            with contextlib.suppress(OSError):
                self.write(server.token_url(token))

        server.state.secrets.on_new_token = renew

    def detach(self, server: ReviewServer) -> None:
        server.state.secrets.on_new_token = None
        shutil.rmtree(self.directory, ignore_errors=True)


def run(server: ReviewServer, out: TextIO, *, open_browser: bool,
        opener: Callable[[str], bool] | None = None, login_dir: str | None = None) -> None:
    """Print the URLs, open the browser on the login file unless told not to, serve until Ctrl+C."""
    try:
        login = LoginFile(login_dir)
    except BaseException:
        server.server_close()
        raise
    try:
        login.attach(server)
        server.state.login_file = login.uri
        if open_browser:
            print(f"Review UI: {server.url}", file=out)
            print(f"Opening your browser on {login.uri} (readable only by you; a one-time login link, "
                  "renewed after each use). Press Ctrl+C to stop.", file=out)
        else:
            print(f"Review UI: {server.login_url}", file=out)
            print(f"That link logs one browser in, once; for another, open {login.uri} (readable only "
                  "by you, renewed after each use). Press Ctrl+C to stop.", file=out)
        out.flush()
        if open_browser:
            try:
                import webbrowser

                # The file's name goes on the browser's command line; the token does not.
                opened = (opener or webbrowser.open)(login.uri)
            except Exception:
                opened = False
            if not opened:
                print(f"Could not open a browser; open {login.uri} yourself, or restart with --no-open "
                      "and open the one-time link it prints.", file=out)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever(poll_interval=0.2)
    finally:
        login.detach(server)
        server.server_close()
