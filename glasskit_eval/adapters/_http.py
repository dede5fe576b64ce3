"""HTTP adapters: POST each sample to a model endpoint, no adapter code needed.

``--adapter-http URL`` or adapter.yaml's ``adapter: {type: http, ...}``. Each call POSTs the
command protocol's ``evaluate`` params as JSON (``{"sample": {..., "image": {"mimeType",
"width", "height", "dataBase64"}}, "target": {...}}``) and the response JSON, or its
``response_field``, is the observation. ``batch_url`` enables ``evaluate_many``
(``{"samples": [...], "target": ...}`` answered by a list). A stream target's stream is a POST
per event to ``url``: ``{"stream": {"id", "event": "start", "case", "video", "everyS", "pace"},
"target"}``, then ``{"stream": {"id", "event": "frame"}, "sample", "target"}`` per frame, answered
by its emissions (at ``response_field``), and ``{"stream": {"id", "event": "end"}, "target"}``,
answered by final emissions; the start's answer is not read, and an empty answer to the end has none.

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
import email.utils
import json
import math
import os
import secrets
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import AdapterError, HttpStatusError, UsageError
from ..support.outside import inline
from ..support.secretvalues import add_secret, add_url_secrets
from ._httpio import (
    BODY_EXCERPT,
    DEFAULT_MAX_RESPONSE_MB,
    Answer,
    Pool,
    not_json_error,
    post_json,
    safe_url,
)
from ._wire import StreamIds, json_frame, json_sample
from .base import Evaluator, FactoryConfig, Sample, StreamInfo, Target, add_usage, encoded

__all__ = ["DEFAULT_MAX_RESPONSE_MB", "Answer", "HttpAdapterSpec", "HttpConfig", "HttpEvaluator", "post_json"]

_KEYS: Final = {"type", "url", "batch_url", "headers", "headers_env", "timeout_s", "image_format",
                "jpeg_quality", "response_field", "usage_fields", "max_response_mb"}
#: Statuses worth retrying (``--retries``): request timeout, rate limited, server-side trouble.
TRANSIENT_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
#: The transient statuses that say the request was not acted on: a stream's call may be made again.
UNPROCESSED_STATUSES: Final = frozenset({408, 425, 429, 503})
_ENCODING: Final = "encoding frames for the HTTP request"
_DEFAULT_TIMEOUT_S: Final = 120.0


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


class HttpEvaluator:
    """One trial's HTTP adapter."""

    def __init__(self, config: HttpConfig, headers: Mapping[str, str]) -> None:
        self.config = config
        self._headers = dict(headers)
        self._pool = Pool(config.url, config.timeout_s)
        self._batch_pool = Pool(config.batch_url, config.timeout_s) if config.batch_url else None
        # Endpoints outlive runs and may serve several at once: ids carry a random token.
        self._stream_ids = StreamIds(f"{secrets.token_hex(6)}-")

    @property
    def batch(self) -> bool:
        return self.config.batch_url is not None

    @property
    def streams(self) -> bool:
        # Whether the endpoint takes streams shows only at the first POST.
        return True

    async def start_stream(self, target: Target, stream: StreamInfo) -> None:
        event = {"id": self._stream_ids.open(target), "event": "start", **stream.to_wire()}
        await self._post(self._pool, self.config.url, self._encode({"stream": event, "target": target.to_wire()}),
                         empty_ok=True)

    async def on_frame(self, sample: Sample, target: Target) -> Any:
        event = {"id": self._stream_ids.of(target), "event": "frame"}
        body = await encoded([sample], _ENCODING, lambda: self._encode(
            {"stream": event, "sample": json_frame(sample, self.config.image_format, self.config.jpeg_quality),
             "target": target.to_wire()}))
        response = await self._post(self._pool, self.config.url, body)
        self._usage([sample], response)
        return self._observation(response)

    async def end_stream(self, target: Target) -> Any:
        event = {"id": self._stream_ids.close(target), "event": "end"}
        response = await self._post(self._pool, self.config.url,
                                    self._encode({"stream": event, "target": target.to_wire()}), empty_ok=True)
        return None if response is None else self._observation(response)

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

    async def _post(self, pool: Pool, url: str, body: bytes, *, empty_ok: bool = False) -> Any:
        """The 2xx answer's JSON; ``empty_ok``: an empty body is None, not an error."""
        answer = await asyncio.to_thread(post_json, pool, url, body, self._headers,
                                         limit=self.config.max_response_bytes)
        status, response = answer.status, answer.body
        if not 200 <= status < 300:
            excerpt = response if isinstance(response, str) else json.dumps(response)
            excerpt = inline(excerpt[:BODY_EXCERPT])
            error = HttpStatusError(f"HTTP adapter: {safe_url(url)} answered {status}: {excerpt}", status,
                                    transient=status in TRANSIENT_STATUSES,
                                    retry_after=retry_after_seconds(answer.retry_after))
            error.maybe_processed = status not in UNPROCESSED_STATUSES
            raise error
        if empty_ok and answer.json and response is None:
            return None
        if not answer.json or response is None:
            raise not_json_error(url, answer)
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
        return f"HTTP {safe_url(self.config.url)}"

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        return HttpEvaluator(self.config, self.config.resolved_headers())
