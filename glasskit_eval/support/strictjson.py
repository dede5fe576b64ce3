"""The one strict reader of every file glasskit_eval reads back: reports, checkpoints, cache
entries, frame locks (and the regular-file check of saved images).

These files are ours, but they sit on disk where anything can replace them: a hand edit, a
truncated copy, a FIFO, a symlink to ``/dev/zero``. So a file is read only when it is a regular
file (checked with ``stat`` before opening and ``fstat`` after, opened with ``O_NONBLOCK`` so a
FIFO swapped in between cannot block), at most its kind's byte limit is read, and its JSON must be
what our writers write:

* no ``NaN``/``Infinity`` and no number that overflows a double (``1e999999``);
* integers of at most :data:`MAX_INT_DIGITS` digits, refused before Python expands them;
* containers nested at most the kind's depth;
* strings without lone surrogates (``"\\ud800"`` is valid JSON but cannot be written back);
* no object with the same key twice: a reader would silently keep one of them, so it is damage.

The checks of the values' meaning are declared with the shapes below (:class:`Obj`, :class:`Int`,
...) next to each format; :func:`check` says where (a JSON path) and what is wrong. Everything here
is pure but :func:`read_file` and :func:`load`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .jsonvalues import MAX_DEPTH, MAX_JSON_CHARS, path_step, type_name

#: Longest integer accepted, in digits: Python's own default limit of int-to-text conversions.
#: Longer digit runs are refused before ``int()`` sees them (it is quadratic on 3.10).
MAX_INT_DIGITS = 4300

_MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of file read back, with its bounds (documented in docs/reference.md, "Guarantees")."""

    name: str
    max_bytes: int
    #: Containers nested at most this deep (``[[1]]`` is 2).
    max_depth: int = MAX_DEPTH + 28


#: ``--output-json`` reports (``compare``, ``--baseline``, ``report``, ``merge-reports``, ``review --report``).
REPORT = Kind("run report", 1024 * _MiB)
CHECKPOINT_MANIFEST = Kind("checkpoint manifest", 64 * _MiB)
CHECKPOINT_RECORDS = Kind("checkpoint records file", 1024 * _MiB)
#: Room for the largest observation a run stores (MAX_JSON_CHARS characters, each at most 6 bytes
#: escaped); ``{"key", "observation"}`` adds one level to an observation's depth.
CACHE_ENTRY = Kind("observation cache entry", 6 * MAX_JSON_CHARS + _MiB, MAX_DEPTH + 1)
#: A whole stream's record: ``{"key", "observation": {"emissions": [{"value": ...}]}}`` nests an
#: emission four levels down.
STREAM_CACHE_ENTRY = Kind("stream cache entry", 6 * MAX_JSON_CHARS + _MiB, MAX_DEPTH + 4)
FRAME_LOCK = Kind("frame lock", 256 * _MiB)


class LoadError(ValueError):
    """A file or value refused; ``where`` is a JSON path or ``line N`` (empty: the whole file)."""

    def __init__(self, reason: str, where: str = "", *, line: int | None = None, column: int | None = None) -> None:
        if line is not None:
            where = f"line {line}" + (f" column {column}" if column is not None else "")
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.where = where
        self.line = line
        self.column = column

    def located(self, name: str) -> str:
        """The message led by the file's ``name``: ``name:L:C: reason`` or ``name: path: reason``."""
        if self.line is not None:
            return f"{name}:{self.line}:" + (f"{self.column}:" if self.column is not None else "") + f" {self.reason}"
        return f"{name}: {self}"


class NotFound(LoadError):
    """The file does not exist (callers often say something more helpful then)."""


class NotRegular(LoadError):
    """The path is a FIFO, a device, a directory or a socket (after following symlinks)."""


class TooLarge(LoadError):
    """The file is over its kind's byte limit."""


# --- files ----------------------------------------------------------------------------------


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def file_type(mode: int) -> str:
    """What a non-regular file is, for messages: ``a FIFO``, ``a character device``, ..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(st: os.stat_result, max_bytes: int) -> None:
    """Raise :class:`NotRegular` or :class:`TooLarge` for what :func:`read_file` would refuse."""
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"is {file_type(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise TooLarge(f"is {format_bytes(st.st_size)}, over the {format_bytes(max_bytes)} limit")


def stat_regular(path: Path, max_bytes: int, *, follow_symlinks: bool = True) -> os.stat_result:
    """``stat`` of a regular file no larger than ``max_bytes``; a :class:`LoadError` otherwise."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        raise NotFound("does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular("is a symlink loop") from None
        raise LoadError(f"cannot be read ({exc.strerror or exc})") from None
    if not follow_symlinks and stat.S_ISLNK(st.st_mode):
        raise NotRegular("is a symlink")
    check_regular(st, max_bytes)
    return st


def read_fd(fd: int, max_bytes: int) -> bytes:
    """Everything an open regular file holds, refusing it (after ``fstat``) as :func:`read_file` does.

    Reads at most ``max_bytes + 1`` bytes, so a file that grows while read is refused too.
    """
    check_regular(os.fstat(fd), max_bytes)
    chunks: list[bytes] = []
    size = 0
    offset = 0
    while True:
        chunk = os.pread(fd, min(max_bytes + 1 - size, 16 * _MiB), offset) if hasattr(os, "pread") else (
            os.read(fd, min(max_bytes + 1 - size, 16 * _MiB)))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        offset += len(chunk)
        if size > max_bytes:
            raise TooLarge(f"grew over the {format_bytes(max_bytes)} limit while it was read")
    return b"".join(chunks)


def read_file(path: Path, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; never blocks on a FIFO or a device.

    Raises :class:`NotFound`, :class:`NotRegular`, :class:`TooLarge` or :class:`LoadError`
    (whose message does not name the path: callers say which file it was).
    """
    stat_regular(path, max_bytes, follow_symlinks=follow_symlinks)
    flags = _OPEN_FLAGS | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise NotFound("does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular("is a symlink" if not follow_symlinks else "is a symlink loop") from None
        raise LoadError(f"cannot be read ({exc.strerror or exc})") from None
    try:
        return read_fd(fd, max_bytes)
    except OSError as exc:
        raise LoadError(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def load(path: Path, kind: Kind, *, follow_symlinks: bool = True) -> Any:
    """Read and parse one JSON file of ``kind`` (see :func:`read_file` and :func:`loads`)."""
    return loads(read_file(path, kind.max_bytes, follow_symlinks=follow_symlinks), max_depth=kind.max_depth)


def format_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"


# --- parsing --------------------------------------------------------------------------------


class _Refused(Exception):
    """Raised from inside the JSON parser's hooks; carries the reason."""


def _constant(text: str) -> Any:
    raise _Refused(f"{text} is not valid JSON (JSON numbers are finite)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {_clip(text)} is out of range (over 1.8e308)")
    return value


def _int(text: str) -> int:
    digits = len(text) - (text[:1] == "-")
    if digits > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {digits} digits is too long (at most {MAX_INT_DIGITS})")
    return int(text)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def loads_text(data: bytes) -> str:
    """``data`` as UTF-8 text; :class:`LoadError` naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LoadError(f"is not UTF-8 text (byte {exc.start})", line=line) from None


def loads(data: bytes | str, *, max_depth: int = REPORT.max_depth) -> Any:
    """Parse JSON text as our writers write it (see the module docstring); :class:`LoadError` otherwise.

    A syntax error names ``line L column C``; a refused value names its JSON path.
    """
    text = loads_text(data) if isinstance(data, bytes) else data
    repeated: dict[int, str] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            seen: set[str] = set()
            for key, _value in items:
                if key in seen:
                    repeated[id(obj)] = key
                    break
                seen.add(key)
        return obj

    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                           object_pairs_hook=pairs)
    except _Refused as exc:
        raise LoadError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise LoadError(f"not valid JSON ({exc.msg})", line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        raise LoadError(f"is nested more than {max_depth} levels deep") from None
    except ValueError as exc:  # int() of digits past the interpreter's own limit
        raise LoadError(f"not valid JSON ({exc})") from None
    _walk(value, max_depth, repeated)
    return value


def _walk(value: Any, max_depth: int, repeated: Mapping[int, str]) -> None:
    # Iterative (the depth bound is what it checks); paths are (key, parent) links, spelled out on refusal.
    if isinstance(value, str):
        _string(value, ())
    stack: list[tuple[Any, tuple[Any, Any] | None, int]] = [(value, None, 0)] if isinstance(value, (dict, list)) else []
    while stack:
        item, link, depth = stack.pop()
        if depth >= max_depth:
            raise LoadError(f"is nested more than {max_depth} levels deep", _path(_steps(link)))
        if isinstance(item, dict):
            if id(item) in repeated:
                raise LoadError(f"has the key {json.dumps(repeated[id(item)], ensure_ascii=False)} twice",
                                _path(_steps(link)) or "the top level")
            children: Any = item.items()
        else:
            children = enumerate(item)
        for key, child in children:
            if isinstance(key, str) and not key.isascii():
                _string(key, _steps(link), key=True)
            if isinstance(child, str):
                if not child.isascii():
                    _string(child, _steps((key, link)))
            elif isinstance(child, (dict, list)):
                stack.append((child, (key, link), depth + 1))


def _steps(link: tuple[Any, Any] | None) -> tuple[Any, ...]:
    steps: list[Any] = []
    while link is not None:
        key, link = link
        steps.append(key)
    return tuple(reversed(steps))


def _string(text: str, path: tuple[Any, ...], *, key: bool = False) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        what = "a key" if key else "a string"
        raise LoadError(f"{what} holds a lone surrogate (U+{ord(text[exc.start]):04X}), which is not text",
                        _path(path) or "the top level") from None


def _path(steps: tuple[Any, ...]) -> str:
    text = "".join(path_step(step, n == 0) for n, step in enumerate(steps))
    return text if len(text) <= 160 else text[:79] + "…" + text[-80:]


# --- shapes ---------------------------------------------------------------------------------


class Shape:
    """What a value must be; :meth:`problem` says why it is not (None: it is)."""

    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        raise NotImplementedError


def _type_name(value: Any) -> str:
    return type_name(value, array="an array", mapping="an object", other="an object")


def _must_be(what: str, nullable: bool, value: Any) -> str:
    return f"must be {what}{' or null' if nullable else ''}, not {_type_name(value)}"


def _first(problems: Iterable[tuple[tuple[Any, ...], str] | None]) -> tuple[tuple[Any, ...], str] | None:
    """The first problem of the parts, checking no part after it."""
    return next((found for found in problems if found is not None), None)


@dataclass(frozen=True)
class AnyValue(Shape):
    """Any JSON value (already bounded by the parser)."""

    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        return None


@dataclass(frozen=True)
class Str(Shape):
    nullable: bool = False
    choices: tuple[str, ...] = ()

    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        if value is None and self.nullable:
            return None
        if not isinstance(value, str):
            return path, _must_be("a string", self.nullable, value)
        if self.choices and value not in self.choices:
            listed = ", ".join(json.dumps(c) for c in self.choices)
            return path, f"is {_clip(json.dumps(value, ensure_ascii=False))}, not one of {listed}"
        return None


@dataclass(frozen=True)
class Bool(Shape):
    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        return None if isinstance(value, bool) else (path, f"must be true or false, not {_type_name(value)}")


@dataclass(frozen=True)
class Num(Shape):
    """A number in ``[low, high]`` (ints included); ``integer`` refuses fractions."""

    low: int | float | None = None
    high: int | float | None = None
    nullable: bool = False
    integer: bool = False

    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        if value is None and self.nullable:
            return None
        kinds = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            what = "an integer" if self.integer else "a number"
            return path, _must_be(what, self.nullable, value)
        if not self.integer and isinstance(value, int) and abs(value) > _FLOAT_MAX:
            # Every reader takes such a number as a float, which has no room for it.
            return path, f"is an integer of {len(str(abs(value)))} digits, out of range for a number (over 1.8e308)"
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            bounds = (f"at most {_bound(self.high)}" if self.low is None else f"at least {_bound(self.low)}"
                      if self.high is None else f"from {_bound(self.low)} to {_bound(self.high)}")
            return path, f"is {_clip(repr(value))}, must be {bounds}"
        return None


_FLOAT_MAX = int(sys.float_info.max)


def _bound(value: int | float | None) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


#: Times and durations in files read back, in seconds: about 31 years, far above any video or run,
#: and small enough that sums and squares of millions of them stay finite floats.
MAX_SECONDS = 1e9


def Seconds(*, nullable: bool = False) -> Num:
    """A duration or a time from the start of a video or run: 0 to :data:`MAX_SECONDS`."""
    return Num(0, MAX_SECONDS, nullable)


def Time(*, nullable: bool = False) -> Num:
    """A time that may precede a video's start (a media time): within :data:`MAX_SECONDS` of 0."""
    return Num(-MAX_SECONDS, MAX_SECONDS, nullable)


#: Counts, indexes, sizes: what a 64-bit integer holds.
INT64 = 2**63 - 1


def Int(low: int | None = 0, high: int | None = INT64, *, nullable: bool = False) -> Num:
    return Num(low, high, nullable, integer=True)


class _Container(Shape):
    """An array or object, or null where ``nullable``: its type is checked here, its parts by :meth:`parts`."""

    kind: ClassVar[type]
    what: ClassVar[str]
    nullable: bool

    def problem(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        if value is None and self.nullable:
            return None
        if not isinstance(value, self.kind):
            return path, _must_be(self.what, self.nullable, value)
        return self.parts(value, path)

    def parts(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Arr(_Container):
    kind: ClassVar[type] = list
    what: ClassVar[str] = "an array"
    item: Shape = field(default_factory=AnyValue)
    nullable: bool = False

    def parts(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        if isinstance(self.item, AnyValue):
            return None
        return _first(self.item.problem(item, (*path, index)) for index, item in enumerate(value))


@dataclass(frozen=True)
class Obj(_Container):
    """An object with ``required`` and ``optional`` keys; other keys hold anything (forward-compatible)."""

    kind: ClassVar[type] = dict
    what: ClassVar[str] = "an object"
    required: Mapping[str, Shape] = field(default_factory=dict)
    optional: Mapping[str, Shape] = field(default_factory=dict)
    nullable: bool = False

    def parts(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        missing = [key for key in self.required if key not in value]
        if missing:
            return path, f"lacks {', '.join(f'`{k}`' for k in missing)}"
        return _first(shape.problem(value[key], (*path, key))
                      for shapes in (self.required, self.optional) for key, shape in shapes.items() if key in value)


@dataclass(frozen=True)
class MapOf(_Container):
    """An object whose every value has one shape (``usage``: name -> number)."""

    kind: ClassVar[type] = dict
    what: ClassVar[str] = "an object"
    value: Shape
    nullable: bool = False

    def parts(self, value: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
        return _first(self.value.problem(item, (*path, key)) for key, item in value.items())


def check(value: Any, shape: Shape, base: tuple[Any, ...] = ()) -> None:
    """Raise :class:`LoadError` naming the JSON path of the first part of ``value`` not of ``shape``."""
    found = shape.problem(value, base)
    if found is not None:
        path, reason = found
        raise LoadError(reason, _path(path) or "the top level")


def json_path(*steps: str | int) -> str:
    """``json_path("trials", 0, "results")`` -> ``trials[0].results``."""
    return _path(steps)
