"""A checkpoint's records file, framed (pure): ``<crc32 hex> <json>`` a line.

A line whose checksum fails is torn (an interrupted write) when only bad lines follow it; a line
that passes its checksum is read through the strict loader, so one that is not JSON as we write
it was edited and is damage, never silently skipped.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CheckpointError
from ..support import strictjson

__all__ = ["Decoded", "decode_records", "encode_record"]


def encode_record(record: Mapping[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return b"%08x %s\n" % (zlib.crc32(body), body)


class _Refused(Exception):
    """A line that passes its checksum but is not JSON as we write it: damage, not a torn tail."""


def _decode_line(line: bytes) -> dict[str, Any] | None:
    """The record on ``line``; None when its checksum fails (torn), :class:`_Refused` when it is damaged."""
    crc, sep, body = line.partition(b" ")
    if not sep or len(crc) != 8:
        return None
    try:
        if int(crc, 16) != zlib.crc32(body):
            return None
    except ValueError:
        return None
    try:
        value = strictjson.loads(body, max_depth=strictjson.CHECKPOINT_RECORDS.max_depth)
    except strictjson.LoadError as exc:
        raise _Refused(str(exc)) from None
    if not isinstance(value, dict):
        raise _Refused("is not a JSON object")
    return value


@dataclass
class Decoded:
    header: dict[str, Any] | None
    records: list[dict[str, Any]]
    #: Byte length of the intact prefix; anything after it is a torn tail.
    good_bytes: int
    torn: bool


def decode_records(data: bytes, where: Path) -> Decoded:
    """Split a records file into intact records, ignoring a torn tail.

    A bad line followed only by bad lines is a torn tail (an interrupted write);
    a bad line followed by a good one is damage we refuse to guess around.
    """
    records: list[dict[str, Any]] = []
    header: dict[str, Any] | None = None
    offset = 0
    first_bad: int | None = None
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            first_bad = offset if first_bad is None else first_bad
            break
        try:
            record = _decode_line(data[offset:end])
        except _Refused as exc:
            line = data.count(b"\n", 0, offset) + 1
            raise CheckpointError(f"{where}: record {line} passes its checksum but is not a record this program "
                                  f"writes ({exc}); it cannot be resumed safely, start a new run") from None
        if record is None:
            if first_bad is None:
                first_bad = offset
        elif first_bad is not None:
            line = data.count(b"\n", 0, first_bad) + 1
            raise CheckpointError(f"{where} is damaged at line {line} (a record failed its checksum but "
                                  "later ones are intact); it cannot be resumed safely, start a new run")
        elif header is None:
            header = record
        else:
            records.append(record)
        offset = end + 1
    good = first_bad if first_bad is not None else len(data)
    return Decoded(header, records, good, good < len(data))
