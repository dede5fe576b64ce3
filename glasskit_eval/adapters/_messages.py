"""The JSON side of protocol v1 (pure): encoding requests, reading numbers, checking values.

:mod:`._protocol` holds the connection's state; these helpers know nothing of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import AdapterError

_PREVIEW_CHARS = 120


class NonFinite(Exception):
    """Raised inside the JSON parser when it meets NaN or an infinity."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def reject_constant(text: str) -> Any:
    raise NonFinite(text)


def parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        # "1e999" is valid JSON syntax, but Python would read it as inf.
        raise NonFinite(text)
    return value


def format_size(size: int) -> str:
    """``268435456`` -> ``256 MiB``; small sizes stay in bytes (tests use tiny limits)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size} bytes"


def preview(line: bytes) -> str:
    text = line[: _PREVIEW_CHARS * 4].decode("utf-8", errors="replace").strip()
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 1] + "…"
    return repr(text)


def encode_params(params: Mapping[str, Any]) -> bytes:
    """Serialize request params as compact JSON, refusing values JSON cannot carry."""
    try:
        text = json.dumps(params, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise AdapterError(f"cannot send request parameters to the adapter as JSON: {exc}") from exc
    # ensure_ascii (the default) makes the text pure ASCII, so this cannot fail.
    return text.encode("ascii")


def oversized_request_error(method: str, size: int, limit: int, count: int | None) -> AdapterError:
    """The error for a request too large to send, with the fix the user can apply."""
    if method == "evaluateMany":
        return AdapterError(
            f"the evaluateMany request for {count} samples is {format_size(size)}, over the "
            f"{format_size(limit)} protocol message limit. Lower the batch: evaluate fewer "
            "samples of this target per run (--case, --at, --from, --until), or implement "
            "evaluate instead of evaluateMany in the adapter so frames are sent one at a time."
        )
    return AdapterError(
        f"the {method} request is {format_size(size)}, over the {format_size(limit)} "
        "protocol message limit"
    )


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def usage_problem(usage: object, batch: int | None) -> str | None:
    """Why a ``usage`` value is not usable, or None."""
    if batch is not None and isinstance(usage, list):
        if len(usage) != batch:
            return f"must have one entry per sample ({batch}), got {len(usage)}"
        for item in usage:
            problem = None if item is None else usage_problem(item, None)
            if problem is not None:
                return problem
        return None
    if not isinstance(usage, dict):
        return "must be an object of numbers such as {\"input_tokens\": 812, \"cost\": 0.0021}"
    for key, value in usage.items():
        if not is_number(value):
            return f"must hold finite numbers only; {key!r} is {value!r}"
    return None
