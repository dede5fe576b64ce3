"""Values a run knows to be secret, and their removal from every text that leaves the process.

Secrets are recorded where they are read (``headers_env`` values, ``--env-file`` values, store
credentials, an adapter URL's userinfo and query) and replaced by :data:`REDACTED` wherever text
is made from what a run saw: results (and so every report and checkpoint record made from them)
and the console. Redaction works on the text, not on its producer, so an http.client exception
quoting a header, a server echoing it or an adapter printing it are all covered.
"""

from __future__ import annotations

import _thread
import contextlib
import re
from collections.abc import Iterator, Mapping

# The command line's face imports this module before `--help`: typing, threading and urllib.parse
# (with ipaddress) are a noticeable share of that start, so they are imported where they are used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

REDACTED = "[redacted]"
#: Shorter values are not secrets worth the name (``1``, ``true``, ``prod``), and replacing them
#: would garble ordinary text.
MIN_SECRET_LENGTH = 6


class SecretValues:
    """A set of secret values and one compiled pattern that finds any of them (thread-safe)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = _thread.allocate_lock()

    def add(self, value: str) -> None:
        """Record ``value`` and the forms it takes when quoted (repr, JSON, URL encoding)."""
        import json
        import urllib.parse

        # "Bearer abc…": a server echoing only the token leaks it as well.
        bases = {value, value.strip(), *value.split()[-1:]}
        forms = {form for base in bases for form in (base, repr(base)[1:-1], json.dumps(base)[1:-1],
                                                     urllib.parse.quote(base, safe=""),
                                                     urllib.parse.quote_plus(base))}
        kept = {f for f in forms if len(f) >= MIN_SECRET_LENGTH}
        with self._lock:
            if kept - self._values:
                self._values |= kept
                ordered = sorted(self._values, key=len, reverse=True)  # longest first: no partial leftovers
                self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def redact(self, text: str) -> str:
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(REDACTED, text)

    def redact_data(self, value: Any) -> Any:
        """``value`` (plain JSON data) with every string in it redacted; the same object when clean."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_data(v) for v in value]
        if isinstance(value, Mapping):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_data(v) for k, v in value.items()}
        return value

    def snapshot(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._values)

    def restore(self, values: frozenset[str]) -> None:
        with self._lock:
            self._values = set(values)
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None


#: The process's secrets: adapters, stores and reporters run in threads and subprocess readers
#: that share nothing else, and each of them must find every secret.
SECRETS = SecretValues()


def add_secret(value: str) -> None:
    SECRETS.add(value)


def redact(text: str) -> str:
    return SECRETS.redact(text)


def add_url_secrets(url: str) -> None:
    """An adapter URL's userinfo and query (a key in ``?key=…``), which messages must not show."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if parts.password:
        add_secret(parts.password)
    if parts.username and "@" in parts.netloc:
        add_secret(parts.netloc.rpartition("@")[0])
    if parts.query:
        add_secret(parts.query)
        for _name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
            add_secret(value)


@contextlib.contextmanager
def secrets_scope() -> Iterator[None]:
    """Secrets recorded inside are forgotten at exit: one command line's secrets are its own."""
    saved = SECRETS.snapshot()
    try:
        yield
    finally:
        SECRETS.restore(saved)


class RedactingStream:
    """A text stream that redacts every write; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @classmethod
    def around(cls, stream: TextIO) -> TextIO:
        """``stream`` wrapped, as the text stream it stands in for (without ``typing.cast``, which
        would import typing at start-up)."""
        wrapped: TextIO = cls(stream)  # type: ignore[assignment]  # a TextIO by delegation
        return wrapped

    def write(self, text: str) -> int:
        self._stream.write(SECRETS.redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redact_url(url: str) -> str:
    """``url`` without userinfo, query and fragment (each replaced by a marker), for messages and reports."""
    import urllib.parse

    try:
        split = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    host = split.netloc.rpartition("@")[2]
    netloc = f"***@{host}" if "@" in split.netloc else host
    return urllib.parse.urlunsplit((split.scheme, netloc, split.path, "***" if split.query else "",
                       "***" if split.fragment else ""))
