"""HTTP adapters: POST each sample to a model endpoint, no adapter code needed.

``--adapter-http URL`` or adapter.yaml's ``adapter: {type: http, ...}``. Each call POSTs the
command protocol's ``evaluate`` params as JSON (``{"sample": {..., "image": {"mimeType",
"width", "height", "dataBase64"}}, "target": {...}}``) and the response JSON, or its
``response_field``, is the observation. ``batch_url`` enables ``evaluate_many``
(``{"samples": [...], "target": ...}`` answered by a list).

Every answer is bounded: ``timeout_s`` is a deadline for the whole request (a server dripping
a byte at a time cannot hold a call forever), a body over ``max_response_mb`` is an adapter
error read no further, and a 2xx body that is not JSON is an adapter error, not an observation.

Only the stdlib: ``http.client`` connections, kept alive in a small pool and used from worker
threads, so ``--concurrency`` calls run at once. Secrets come only from environment variables
named in the config (``headers_env``); their values are never part of a message, a report or
a checkpoint (the config holds only the variable names).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http.client
import json
import math
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import AdapterError, HttpStatusError, UsageError
from ..support.outside import inline
from ..support.secretvalues import add_secret, add_url_secrets
from ._wire import json_sample
from .base import Evaluator, FactoryConfig, Sample, Target, add_usage, encoded

_KEYS: Final = {"type", "url", "batch_url", "headers", "headers_env", "timeout_s", "image_format",
                "jpeg_quality", "response_field", "usage_fields", "max_response_mb"}
#: Statuses worth retrying (``--retries``): request timeout, rate limited, server-side trouble.
TRANSIENT_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
_BODY_EXCERPT: Final = 300
_ENCODING: Final = "encoding frames for the HTTP request"
_DEFAULT_TIMEOUT_S: Final = 120.0
#: The default bound of a response body (``max_response_mb``), the same as an exec adapter's stdout.
DEFAULT_MAX_RESPONSE_MB: Final = 64
_READ_CHUNK: Final = 1 << 16


@dataclass(frozen=True)
class HttpConfig:
    url: str
    batch_url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Header name -> environment variable holding its value (``Authorization: MODEL_AUTH``).
    headers_env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = _DEFAULT_TIMEOUT_S
    image_format: str = "png"
    jpeg_quality: int = 90
    #: Dotted path of the observation in the response (default: the whole response).
    response_field: str | None = None
    #: Usage name -> dotted path in the response (``input_tokens: usage.prompt_tokens``).
    usage_fields: Mapping[str, str] = field(default_factory=dict)
    max_response_mb: float = DEFAULT_MAX_RESPONSE_MB

    @property
    def max_response_bytes(self) -> int:
        return int(self.max_response_mb * 1024 * 1024)

    @classmethod
    def parse(cls, section: Mapping[str, Any], url: str | None = None) -> HttpConfig:
        """From adapter.yaml's ``adapter:`` mapping (``url`` overrides its url); raises UsageError."""
        where = "adapter config `adapter:`"
        unknown = sorted(set(section) - _KEYS)
        if unknown:
            raise UsageError(f"{where} has unknown keys {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
        kind = section.get("type", "http")
        if kind != "http":
            raise UsageError(f"{where} type must be http, got {kind!r}")
        target = url or section.get("url")
        if not isinstance(target, str):
            raise UsageError(f"{where} needs url (or pass --adapter-http URL)")
        _check_url(target)
        add_url_secrets(target)
        batch_url = section.get("batch_url")
        if batch_url is not None:
            if not isinstance(batch_url, str):
                raise UsageError(f"{where} batch_url must be a URL")
            _check_url(batch_url)
            add_url_secrets(batch_url)
        headers = _str_map(section.get("headers"), f"{where} headers")
        headers_env = _str_map(section.get("headers_env"), f"{where} headers_env")
        timeout = section.get("timeout_s", _DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise UsageError(f"{where} timeout_s must be a number of seconds greater than zero")
        image_format = section.get("image_format", "png")
        if image_format not in ("png", "jpeg"):
            raise UsageError(f"{where} image_format must be png or jpeg, got {image_format!r}")
        quality = section.get("jpeg_quality", 90)
        if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
            raise UsageError(f"{where} jpeg_quality must be an integer from 1 to 100")
        limit = section.get("max_response_mb", DEFAULT_MAX_RESPONSE_MB)
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit <= 4096:
            raise UsageError(f"{where} max_response_mb must be a number of MiB above 0, at most 4096")
        response_field = section.get("response_field")
        if response_field is not None and not isinstance(response_field, str):
            raise UsageError(f"{where} response_field must be a dotted path such as choices.0.message")
        return cls(url=target, batch_url=batch_url, headers=headers, headers_env=headers_env,
                   timeout_s=float(timeout), image_format=image_format, jpeg_quality=quality,
                   response_field=response_field, max_response_mb=float(limit),
                   usage_fields=_str_map(section.get("usage_fields"), f"{where} usage_fields"))

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Every header, the secret ones read now; raises AdapterError naming a bad variable, never its value."""
        env = os.environ if environ is None else environ
        headers = dict(self.headers)
        for name, variable in self.headers_env.items():
            value = env.get(variable)
            if not value:
                raise AdapterError(f"the HTTP adapter's header {name} comes from environment variable "
                                   f"{variable}, which is not set; export it or pass --env-file")
            add_secret(value)
            problem = _header_value_problem(value)
            if problem:
                raise AdapterError(f"the HTTP adapter's header {name} comes from environment variable "
                                   f"{variable}, whose value {problem}; fix the variable (a trailing "
                                   "newline from a file is a common cause)")
            headers[name] = value
        for name, value in self.headers.items():
            problem = _header_value_problem(value)
            if problem:
                raise UsageError(f"the HTTP adapter's header {name} {problem}")
        return headers


def _header_value_problem(value: str) -> str | None:
    # http.client sends latin-1 and refuses CR/LF only when sending, in an exception that quotes
    # the value: a secret would end up in the error message.
    if any(c in value for c in "\r\n\0"):
        return "contains a line break or NUL character"
    if not all(ord(c) < 256 for c in value):
        return "has characters outside latin-1"
    return None


def http_section(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """adapter.yaml's ``adapter:`` mapping when it declares ``type: http``."""
    section = (config or {}).get("adapter")
    if isinstance(section, Mapping) and section.get("type") == "http":
        return section
    return None


def _check_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the HTTP adapter URL must be http:// or https:// with a host, got {url!r}")


def _str_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in value.items()):
        raise UsageError(f"{what} must map names to strings")
    return dict(value)


def dig(value: Any, path: str) -> Any:
    """``a.b.0.c`` into nested objects and lists; raises KeyError naming the missing step."""
    for step in path.split("."):
        if isinstance(value, list) and step.isascii() and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise KeyError(step)
    return value


def retry_after_seconds(header: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header (seconds or an HTTP date) in seconds, or None."""
    if not header:
        return None
    text = header.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def sample_body(sample: Sample, config: HttpConfig) -> dict[str, Any]:
    return json_sample(sample, config.image_format, config.jpeg_quality)


class _Pool:
    """Idle keep-alive connections to one origin, shared by the worker threads."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port
        self.timeout_s = timeout_s
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.opened = 0

    def take(self, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        """A connection and whether it was kept alive from an earlier request."""
        with self._lock:
            if self._idle and not fresh:
                return self._idle.pop(), True
            self.opened += 1
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.timeout_s), False

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


@dataclass(frozen=True)
class Answer:
    status: int
    #: The body parsed as JSON, else its text (``json`` says which).
    body: Any
    json: bool
    content_type: str
    retry_after: str | None


class _Deadline:
    """Ends a request at ``timeout_s`` from its start, however slowly the server drips bytes.

    A socket timeout bounds each read only; at the deadline the socket is shut down, which
    wakes a blocked read at once.
    """

    def __init__(self, timeout_s: float) -> None:
        self.expired = False
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conn = conn
        if self.expired:
            self._expire()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _read_body(response: http.client.HTTPResponse, limit: int, url: str) -> bytes:
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise _too_large(url, limit)
    data = bytearray()
    while True:
        chunk = response.read1(_READ_CHUNK)
        if not chunk:
            # read1 leaves a fully read response open, which would end its keep-alive connection.
            data += response.read()
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise _too_large(url, limit)


def _too_large(url: str, limit: int) -> AdapterError:
    return AdapterError(f"HTTP adapter: {_safe_url(url)} answered more than {limit / 1048576:g} MiB; "
                        "raise max_response_mb in the adapter config if that is expected")


def post_json(pool: _Pool, url: str, body: bytes, headers: Mapping[str, str], *,
              limit: int = DEFAULT_MAX_RESPONSE_MB << 20) -> Answer:
    """POST ``body`` within the pool's timeout for the whole exchange. Blocking: runs on a thread."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    send = {"Content-Type": "application/json", "Accept": "application/json", **headers}
    deadline = _Deadline(pool.timeout_s)
    try:
        # A kept-alive connection the server has since closed fails on first use: one fresh retry.
        for fresh in (False, True):
            conn, reused = pool.take(fresh)
            response: http.client.HTTPResponse | None = None
            try:
                if conn.sock is None:
                    conn.connect()
                deadline.watch(conn)
                conn.request("POST", path, body=body, headers=send)
                response = conn.getresponse()
                data = _read_body(response, limit, url)
            except AdapterError:
                _close(conn, response)
                raise
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                _close(conn, response)
                if reused and not deadline.expired:
                    continue
                raise _connection_error(url, TimeoutError() if deadline.expired else exc) from None
            except (OSError, http.client.HTTPException) as exc:
                _close(conn, response)
                raise _connection_error(url, TimeoutError() if deadline.expired else exc) from None
            if deadline.expired:
                _close(conn, response)
                raise _connection_error(url, TimeoutError())
            if response.will_close:
                conn.close()
            else:
                pool.give_back(conn)
            return _answer(response, data)
    finally:
        deadline.cancel()
    raise AssertionError("unreachable")


def _close(conn: http.client.HTTPConnection, response: http.client.HTTPResponse | None) -> None:
    # A response the connection has let go of (it said it would close) holds the socket itself.
    if response is not None:
        response.close()
    conn.close()


def _answer(response: http.client.HTTPResponse, data: bytes) -> Answer:
    text = data.decode("utf-8", errors="replace")
    content_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
    retry_after = response.getheader("Retry-After")
    try:
        return Answer(response.status, json.loads(text) if text.strip() else None, True, content_type,
                      retry_after)
    except ValueError:
        return Answer(response.status, text, False, content_type, retry_after)


def _not_json(url: str, answer: Answer) -> AdapterError:
    text = answer.body if isinstance(answer.body, str) else ""
    excerpt = inline(text[:_BODY_EXCERPT]) if text.strip() else "an empty body"
    error = AdapterError(f"HTTP adapter: {_safe_url(url)} answered {answer.status} with a body that is not "
                         f"JSON: {excerpt}")
    # An empty body or a page that does not claim to be JSON (a proxy's or gateway's) is the
    # path failing on the way, worth retrying; invalid JSON declared as JSON is the server's bug.
    error.transient = not text.strip() or "json" not in answer.content_type
    return error


def _connection_error(url: str, exc: BaseException) -> AdapterError:
    what = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
    error = AdapterError(f"HTTP adapter request to {_safe_url(url)} failed: {what}")
    error.transient = True
    return error


def _safe_url(url: str) -> str:
    """The URL without credentials or query (which may carry a key)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class HttpEvaluator:
    """One trial's HTTP adapter."""

    def __init__(self, config: HttpConfig, headers: Mapping[str, str]) -> None:
        self.config = config
        self._headers = dict(headers)
        self._pool = _Pool(config.url, config.timeout_s)
        self._batch_pool = _Pool(config.batch_url, config.timeout_s) if config.batch_url else None

    @property
    def batch(self) -> bool:
        return self.config.batch_url is not None

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        body = await encoded([sample], _ENCODING, lambda: self._encode(
            {"sample": sample_body(sample, self.config), "target": target.to_wire()}))
        response = await self._post(self._pool, self.config.url, body)
        self._usage([sample], response)
        return self._observation(response)

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        assert self._batch_pool is not None and self.config.batch_url is not None
        body = await encoded(samples, _ENCODING, lambda: self._encode(
            {"samples": [sample_body(s, self.config) for s in samples], "target": target.to_wire()}))
        response = await self._post(self._batch_pool, self.config.batch_url, body)
        observations = self._observation(response)
        if not isinstance(observations, list) or len(observations) != len(samples):
            raise AdapterError(f"the HTTP batch endpoint must answer a list of {len(samples)} observations")
        self._usage(samples, response)
        return observations

    async def cancel_pending(self) -> None:
        # Calls run on abandonable threads; the runner cancels their awaits.
        return None

    async def close(self) -> None:
        self._pool.close()
        if self._batch_pool is not None:
            self._batch_pool.close()

    @staticmethod
    def _encode(payload: dict[str, Any]) -> bytes:
        return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")

    async def _post(self, pool: _Pool, url: str, body: bytes) -> Any:
        answer = await asyncio.to_thread(post_json, pool, url, body, self._headers,
                                         limit=self.config.max_response_bytes)
        status, response = answer.status, answer.body
        if not 200 <= status < 300:
            excerpt = response if isinstance(response, str) else json.dumps(response)
            excerpt = inline(excerpt[:_BODY_EXCERPT])
            raise HttpStatusError(f"HTTP adapter: {_safe_url(url)} answered {status}: {excerpt}", status,
                                  transient=status in TRANSIENT_STATUSES,
                                  retry_after=retry_after_seconds(answer.retry_after))
        if not answer.json or response is None:
            raise _not_json(url, answer)
        return response

    def _observation(self, response: Any) -> Any:
        path = self.config.response_field
        if path is None:
            return response
        try:
            return dig(response, path)
        except KeyError as exc:
            raise AdapterError(f"the HTTP response has no {path!r} (response_field): no {exc.args[0]!r}") from None

    def _usage(self, samples: Sequence[Sample], response: Any) -> None:
        numbers: dict[str, float] = {}
        for name, path in self.config.usage_fields.items():
            try:
                value = dig(response, path)
            except KeyError:
                continue  # a response without usage (say, a cached answer) costs nothing
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                numbers[name] = value
        share = len(samples)
        for sample in samples:
            add_usage(sample.usage, numbers if share == 1 else {k: v / share for k, v in numbers.items()})


class HttpAdapterSpec:
    """Builds an :class:`HttpEvaluator` per trial; header secrets are read from the environment then."""

    def __init__(self, config: HttpConfig) -> None:
        self.config = config

    def describe(self) -> str:
        return f"HTTP {_safe_url(self.config.url)}"

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        return HttpEvaluator(self.config, self.config.resolved_headers())
