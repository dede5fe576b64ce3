"""HTTP transport for the review page: stdlib ``ThreadingHTTPServer`` on 127.0.0.1 only.

All decisions live in ``api.handle``; this module parses requests, applies the
security headers to every response and streams file bodies.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from .api import FileBody, Request, Response, ReviewState, handle
from .security import SECURITY_HEADERS

HOST = "127.0.0.1"
_CHUNK = 1 << 16


class _Handler(BaseHTTPRequestHandler):
    server: ReviewServer
    protocol_version = "HTTP/1.1"
    server_version = "glasskit-review"
    sys_version = ""

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


class ReviewServer(ThreadingHTTPServer):
    daemon_threads = True
    # A restarted review must not take over a port another process still answers on.
    allow_reuse_address = False

    def __init__(self, state: ReviewState, port: int = 0, *, verbose: bool = False) -> None:
        super().__init__((HOST, port), _Handler)
        self.verbose = verbose
        state.port = self.server_address[1]
        self.state = state

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def login_url(self) -> str:
        return f"http://{HOST}:{self.port}/?token={self.state.secrets.launch_token}"

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


def run(server: ReviewServer, out: TextIO, *, open_browser: bool,
        opener: Callable[[str], bool] | None = None) -> None:
    """Print the URL, open it unless told not to, and serve until Ctrl+C."""
    url = server.login_url
    print(f"Review UI: {url}", file=out)
    print("Open that URL (it carries this session's access token). Press Ctrl+C to stop.", file=out)
    out.flush()
    if open_browser:
        try:
            import webbrowser

            opened = (opener or webbrowser.open)(url)
        except Exception:
            opened = False
        if not opened:
            print("Could not open a browser; open the URL above yourself.", file=out)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
