"""The review API as pure request handling: a Request in, a Response out.

No sockets here: ``server`` parses HTTP and streams what a Response names.
Security checks (host, session, CSRF) run here too, before routing, so every
route is covered by the same rules and the tests can reach them over real HTTP.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import EvalError, VideoError
from ..support import strictjson as sj
from ..support.timevalues import format_time, parse_cli_time
from . import casedata, edits, media
from .errors import ApiError, Denied, NotFound, ReviewError
from .pins import PinStatuses
from .security import Secrets, check_host, check_session, check_write

log = logging.getLogger(__name__)

STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}


@dataclass
class Request:
    method: str
    target: str
    headers: Mapping[str, str]
    #: Called at most once, after the write checks passed, with the declared length.
    read_body: Callable[[int], bytes] = lambda n: b""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query, keep_blank_values=True)


@dataclass(frozen=True)
class FileBody:
    """Part of a file to stream: the server copies it without loading it into memory."""

    path: Path
    start: int
    length: int


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | FileBody = b""

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Response:
        data = json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        return cls(status, [("Content-Type", "application/json; charset=utf-8"),
                            ("Cache-Control", "no-store")], data)

    @classmethod
    def error(cls, status: int, code: str, message: str, **extra: Any) -> Response:
        return cls.json({"code": code, "message": message, **extra}, status)


@dataclass
class ReviewState:
    """What one launch serves: the eval directory, the deep link and the report markers."""

    root: Path
    port: int
    secrets: Secrets = field(default_factory=Secrets)
    initial: dict[str, Any] = field(default_factory=dict)
    markers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Per case, the report's stream emissions and missed events (see ``report.load_overlay``).
    emissions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    report_path: str | None = None
    #: The report's arms, the control first (empty without arms): the page's arm selector.
    report_arms: list[str] = field(default_factory=list)
    #: ``--suspects``: the report's suspect labels, in its order; the page steps through them.
    suspects: list[dict[str, Any]] = field(default_factory=list)
    frames: media.FrameCache = field(default_factory=media.FrameCache)
    #: File states served or written: what undo and redo may restore.
    revisions: edits.Revisions = field(default_factory=edits.Revisions)
    #: Frame-lock statuses, decoded on the first /pins request for each state of a locked case.
    pins: PinStatuses = field(default_factory=PinStatuses)
    #: The login file `review` wrote (a ``file://`` URI), named on the page a browser without a session gets.
    login_file: str | None = None

    def detail(self, loaded: casedata.LoadedCase) -> dict[str, Any]:
        """The case as the page gets it, report markers annotated; remembers its revision."""
        self.revisions.add(loaded.revision, loaded.text)
        return casedata.case_detail(loaded, self.markers.get(loaded.id), self.emissions.get(loaded.id))


def handle(state: ReviewState, request: Request) -> Response:
    """Answer one request; never raises, never leaks a traceback."""
    try:
        return _handle(state, request)
    except ReviewError as exc:
        return Response.error(exc.status, exc.code, exc.message, **exc.extra)
    except VideoError as exc:
        return Response.error(422, "video_error", str(exc))
    except EvalError as exc:
        return Response.error(400, "bad_request", str(exc))
    except Exception:
        log.exception("review: internal error handling %s %s", request.method, request.path)
        return Response.error(500, "internal", "internal error; the terminal running `review` has details")


def _handle(state: ReviewState, request: Request) -> Response:
    check_host(request.headers, state.port)
    method = request.method.upper()
    path = request.path
    if method == "GET" and path == "/" and "token" in request.query:
        return _login(state, request)
    try:
        session = check_session(state.secrets, request.headers, state.port)
    except Denied:
        if method in ("GET", "HEAD") and path in ("/", "/index.html"):
            return _how_to_log_in(state)
        raise
    parts = [unquote(p) for p in path.split("/")[1:]]
    if method in ("GET", "HEAD"):
        response = _route_read(state, request, parts)
        if method == "HEAD" and not isinstance(response.body, FileBody):
            response.headers.append(("Content-Length", str(len(response.body))))
            response.body = b""
        return response
    write = _WRITES.get((method, _route_shape(parts)))
    if write is not None:
        length = check_write(state.secrets, request.headers, state.port, session)
        body = _json_body(request.read_body(length))
        written = write(state, parts, body)
        if written.reply is not None:
            return Response.json(_reply(state, written))
        return Response.json({**state.detail(written.loaded), "saved": written.saved})
    if method in ("POST", "PUT", "PATCH", "DELETE"):
        raise ApiError(404 if method in ("PUT", "DELETE") else 405,
                       "not_found" if method in ("PUT", "DELETE") else "method_not_allowed",
                       f"{method} {path} is not an API write")
    raise ApiError(405, "method_not_allowed", f"method {method} is not allowed")


def _reply(state: ReviewState, written: edits.Written) -> dict[str, Any]:
    """A write's small answer: the page applies the edit to the case it holds (see ``eventedits``)."""
    assert written.reply is not None
    # A state this server wrote: undo may restore it, and an edit the page makes on it may merge.
    state.revisions.add(written.loaded.revision, written.loaded.text)
    out = {**written.reply, "saved": written.saved}
    if written.saved.get("merged"):
        out["case"] = state.detail(written.loaded)  # the file changed elsewhere too: the page redraws it all
    return out


def _route_shape(parts: list[str]) -> tuple[str, ...]:
    """The route with its case and target ids blanked: ``api/cases/*/targets/*/samples``."""
    if parts[:2] != ["api", "cases"] or len(parts) < 3:
        return tuple(parts)
    return tuple("*" if i in (2, 4) and parts[i - 1] in ("cases", "targets") else p
                 for i, p in enumerate(parts))


def _save_samples(state: ReviewState, parts: list[str], body: Any) -> edits.Written:
    return edits.save_blocks(state.root, parts[2], parts[4], body, state.revisions)


def _save_events(state: ReviewState, parts: list[str], body: Any) -> edits.Written:
    return edits.save_events(state.root, parts[2], parts[4], body)


def _save_event(state: ReviewState, parts: list[str], body: Any) -> edits.Written:
    from .eventedits import save_event

    return save_event(state.root, parts[2], parts[4], body, state.revisions)


def _remove_target(state: ReviewState, parts: list[str], body: Any) -> edits.Written:
    return edits.remove_target(state.root, parts[2], parts[4], body)


def _restore(state: ReviewState, parts: list[str], body: Any) -> edits.Written:
    return edits.restore_text(state.root, parts[2], body, state.revisions)


_WRITES: dict[tuple[str, tuple[str, ...]], Callable[[ReviewState, list[str], Any], edits.Written]] = {
    ("PUT", ("api", "cases", "*", "targets", "*", "samples")): _save_samples,
    ("PUT", ("api", "cases", "*", "targets", "*", "events")): _save_events,
    ("PATCH", ("api", "cases", "*", "targets", "*", "events")): _save_event,
    ("DELETE", ("api", "cases", "*", "targets", "*")): _remove_target,
    ("PUT", ("api", "cases", "*", "restore")): _restore,
}


def _login(state: ReviewState, request: Request) -> Response:
    """Spend the one-time launch token: a session cookie, and the write key in the fragment."""
    secrets_ = state.secrets
    session = secrets_.redeem(request.query["token"][0])
    if session is None:
        if secrets_.session_of(request.headers.get("cookie"), state.port) is not None:
            # This browser is logged in already (a reload of a spent link): nothing to hand out.
            return Response(303, [("Location", "/"), ("Cache-Control", "no-store")])
        raise Denied(403, "bad_token", "this login link is wrong or was already used (each works "
                     "once); open the login file `review` printed, or restart `review`")
    # A page that moves on by itself, not a 303: a redirect continues the navigation that
    # brought the token, and when that came from the login file (file://, another site) the
    # SameSite=Strict cookie would not go with it. The refresh is this page's own navigation.
    # It takes the token out of the address bar; the write key rides in the fragment, which
    # is never sent to a server, and the page moves it into this tab's sessionStorage. The
    # empty icon keeps the browser from asking for /favicon.ico (a 404 in its console).
    target = f"/#write={secrets_.new_csrf_token(session)}"
    page = (f'<!doctype html>\n<html><head><meta charset="utf-8"><meta http-equiv="refresh" '
            f'content="0;url={target}"><link rel="icon" href="data:,"><title>glasskit review</title>'
            f'</head>\n<body><p><a href="{target}">Open the review page</a></p></body></html>\n')
    return Response(200, [("Content-Type", STATIC_TYPES[".html"]),
                          ("Set-Cookie", secrets_.session_cookie(session, state.port)),
                          ("Cache-Control", "no-store")], page.encode("utf-8"))


def _how_to_log_in(state: ReviewState) -> Response:
    """What a browser without a session sees at the review URL: a page saying how to get one.

    The URL `review` prints first is the plain address; opening it (or a bookmark of it) must
    tell a person what to do, not answer with the API's JSON 401.
    """
    from html import escape

    where = (f'open the login file <a href="{escape(state.login_file)}"><code>{escape(state.login_file)}</code></a> '
             "in this browser (paste its address into the address bar)" if state.login_file else
             "open the one-time login link `review` printed in the terminal")
    page = ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><title>glasskit review: log in</title>'
            '<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em}'
            "code{word-break:break-all}</style></head>\n<body><h1>Log in to this review server</h1>"
            f"<p>This browser has no review session yet. To log in, {where}. The login file holds a one-time "
            "link that only you can read; it is renewed after each use, so it also logs in a second browser.</p>"
            "<p>Or stop <code>review</code> and start it again with <code>--no-open</code>: it then prints the "
            "one-time link itself.</p></body></html>\n")
    return Response(401, [("Content-Type", STATIC_TYPES[".html"]), ("Cache-Control", "no-store")],
                    page.encode("utf-8"))


def _route_read(state: ReviewState, request: Request, parts: list[str]) -> Response:
    if parts == [""] or parts == ["index.html"]:
        return _index(state)
    if len(parts) == 2 and parts[0] == "static":
        return _static(parts[1])
    if parts[:1] != ["api"]:
        raise NotFound(f"no page at {request.path}")
    rest = parts[1:]
    if rest == ["session"]:
        return Response.json({"eval_dir": str(state.root), "initial": state.initial,
                              "report": state.report_path, "arms": state.report_arms, "suspects": state.suspects})
    if rest == ["cases"]:
        return Response.json({"cases": casedata.list_cases(state.root)})
    if len(rest) >= 2 and rest[0] == "cases":
        case_id = rest[1]
        if len(rest) == 2:
            return Response.json(state.detail(casedata.load(state.root, case_id)))
        if len(rest) == 3:
            handler = _CASE_READS.get(rest[2])
            if handler is not None:
                return handler(state, request, case_id)
    raise NotFound(f"no API route {request.path}")


def _index(state: ReviewState) -> Response:
    return Response(200, [("Content-Type", STATIC_TYPES[".html"]), ("Cache-Control", "no-store")],
                    _asset("index.html"))


_asset_cache: dict[str, bytes] = {}


def _static_names() -> set[str]:
    folder = resources.files(__package__).joinpath("static")
    return {entry.name for entry in folder.iterdir() if entry.is_file()}


def _asset(name: str) -> bytes:
    cached = _asset_cache.get(name)
    if cached is None:
        if name not in _static_names():
            raise NotFound(f"no static file {name!r}")
        cached = resources.files(__package__).joinpath("static").joinpath(name).read_bytes()
        _asset_cache[name] = cached
    return cached


def _static(name: str) -> Response:
    suffix = Path(name).suffix.lower()
    if name == "index.html" or suffix not in STATIC_TYPES:
        raise NotFound(f"no static file {name!r}")
    return Response(200, [("Content-Type", STATIC_TYPES[suffix]), ("Cache-Control", "no-cache")],
                    _asset(name))


def _json_body(data: bytes) -> Any:
    # The strict reader: a body nested 100,000 deep is a refusal, not a RecursionError.
    try:
        return sj.loads(data)
    except sj.LoadError as exc:
        raise ApiError(400, "bad_json", f"request body is not valid JSON: {exc}") from None


# --- per-case reads ------------------------------------------------------------------------


def _loaded_video(state: ReviewState, case_id: str) -> Path:
    loaded = casedata.load(state.root, case_id)
    if loaded.case is None:
        raise ApiError(422, "invalid_case", f"case {case_id!r} is invalid; fix it before viewing frames",
                       problems=[str(p) for p in loaded.problems])
    return casedata.video_path(loaded.case)


def _time_param(request: Request, name: str = "t") -> Fraction:
    values = request.query.get(name)
    if not values:
        raise ApiError(400, "bad_request", f"missing query parameter {name!r} (seconds)")
    return _parse_time(values[0], name)


def _parse_time(text: str, name: str) -> Fraction:
    if len(text) > 40:
        raise ApiError(400, "bad_request", f"{name} is too long to be a time")
    try:
        value = parse_cli_time(text)
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"{name}: {exc}") from None
    if value < 0:
        raise ApiError(400, "bad_request", f"{name} must be nonnegative, got {text}")
    return value


def _frame(state: ReviewState, request: Request, case_id: str) -> Response:
    from ..video.probe import probe

    path = _loaded_video(state, case_id)
    time = _time_param(request)
    probe(path).check_time(time, "time")
    frame = state.frames.frame(path, time)
    return Response(200, [
        ("Content-Type", "image/png"), ("Cache-Control", "no-store"),
        ("X-Frame-Index", str(frame.index)), ("X-Media-Time", format_time(frame.media_time)),
        ("X-Requested-Time", format_time(frame.requested)), ("X-Pixel-Hash", frame.pixel_hash),
        ("X-Frame-Size", f"{frame.width}x{frame.height}"),
    ], frame.png)


def _frames(state: ReviewState, request: Request, case_id: str) -> Response:
    path = _loaded_video(state, case_id)
    table = media.frame_table(path)
    return Response.json({"times": [float(t) for t in table], "count": len(table)})


def _thumbs(state: ReviewState, request: Request, case_id: str) -> Response:
    path = _loaded_video(state, case_id)
    raw = (request.query.get("t") or [""])[0]
    texts = [t for t in raw.split(",") if t]
    if not texts or len(texts) > media.MAX_THUMBS:
        raise ApiError(400, "bad_request", f"pass 1 to {media.MAX_THUMBS} comma-separated times in t")
    times = [_parse_time(t, "t") for t in texts]
    return Response.json({"thumbs": state.frames.thumbnails(path, times)})


def _video(state: ReviewState, request: Request, case_id: str) -> Response:
    path = _loaded_video(state, case_id)
    stamp = media.FileStamp.of(path)
    base = [("Accept-Ranges", "bytes"), ("ETag", stamp.etag), ("Cache-Control", "no-cache"),
            ("Content-Type", media.content_type(path))]
    inm = request.headers.get("if-none-match")
    if inm is not None and stamp.etag in [t.strip() for t in inm.split(",")]:
        return Response(304, base[:3])
    wanted = None
    if media.if_range_allows(request.headers.get("if-range"), stamp.etag):
        try:
            wanted = media.parse_range(request.headers.get("range"), stamp.size)
        except media.RangeNotSatisfiable:
            return Response(416, [*base[:3], ("Content-Range", f"bytes */{stamp.size}"),
                                  ("Content-Type", "application/json; charset=utf-8")],
                            json.dumps({"code": "range_not_satisfiable",
                                        "message": f"the video has {stamp.size} bytes"}).encode())
    if wanted is None:
        return Response(200, [*base, ("Content-Length", str(stamp.size))], FileBody(path, 0, stamp.size))
    first, last = wanted
    return Response(206, [*base, ("Content-Length", str(last - first + 1)),
                          ("Content-Range", f"bytes {first}-{last}/{stamp.size}")],
                    FileBody(path, first, last - first + 1))


def _clip(state: ReviewState, request: Request, case_id: str) -> Response:
    from .clips import clip_json

    loaded = casedata.load(state.root, case_id)
    path = _loaded_video(state, case_id)
    assert loaded.case is not None  # _loaded_video refuses an invalid case
    target = (request.query.get("target") or [""])[0]
    if not target:
        raise ApiError(400, "bad_request", "missing query parameter 'target'")
    return Response.json({"revision": loaded.revision,
                          **clip_json(loaded.case, path, target, _time_param(request))})


def _pins(state: ReviewState, request: Request, case_id: str) -> Response:
    loaded = casedata.load(state.root, case_id)
    return Response.json({"revision": loaded.revision, **state.pins.of(state.root, loaded)})


_CASE_READS: dict[str, Callable[[ReviewState, Request, str], Response]] = {
    "clip": _clip, "frame": _frame, "frames": _frames, "pins": _pins, "thumbs": _thumbs, "video": _video,
}
