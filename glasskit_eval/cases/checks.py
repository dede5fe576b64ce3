"""Typed checks on loaded YAML values that record located problems.

Case files and config.yaml share these: each check either returns the parsed
value or adds a :class:`Problem` naming the YAML path (and so the line) and
returns None, so one pass over a file collects every problem it has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from ..compare.modes import MODES, CompareConfig
from ..errors import Problem
from ..support.jsonvalues import json_problem, type_name
from ..support.timevalues import to_fraction
from ..yamltext.source import PathKey, YamlDocument
from .model import CLIP_EDGES, MAX_CLIP_FRAMES, ClipSpec

T = TypeVar("T")

_DEFAULTS_KEYS = {"field", "compare", "clip"}
_COMPARE_KEYS = {"mode", "tolerance"}
_CLIP_KEYS = {"before_s", "after_s", "every_s", "edge"}


class _Unset:
    """Marks a key that was not written, as opposed to an explicit ``null``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Checker:
    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str) -> None:
        self.problems.append(self.doc.problem(path, message))

    def mapping(self, value: Any, path: PathKey, what: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(path, f"{what} must be a mapping, got {type_name(value)}")
            return None
        return value

    def section(self, value: Any, path: PathKey, what: str, allowed: set[str]) -> dict[str, Any] | None:
        """``value`` as a mapping whose keys are all ``allowed`` (unknown ones are problems), or None."""
        mapping = self.mapping(value, path, what)
        if mapping is not None:
            self.unknown_keys(mapping, allowed, path)
        return mapping

    def unknown_keys(self, value: dict[str, Any], allowed: set[str], path: PathKey) -> None:
        for key in value:
            if key not in allowed:
                hint = _suggest(str(key), allowed)
                self.add((*path, key), f"unknown key {key!r}{hint}; allowed keys: "
                         + ", ".join(sorted(allowed)))

    def time(self, value: Any, path: PathKey, what: str) -> Fraction | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add(path, f"{what} must be a number of seconds, got {type_name(value)}"
                     + _numeric_text_hint(value))
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.add(path, f"{what} must be finite, got {value}")
            return None
        if isinstance(value, int) and _beyond_float(value):
            # Such a time could never be reported or handed to an adapter as seconds.
            self.add(path, f"{what} must be finite, got an integer of {len(str(value))} digits")
            return None
        # The number's own sign is the exact time's (-0.0 is 0): no Fraction comparison per time.
        if value < 0:
            self.add(path, f"{what} must be nonnegative, got {value}")
            return None
        exact = to_fraction(value)
        assert exact is not None
        return exact

    def positive_interval(self, value: Any, path: PathKey) -> Fraction | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            self.add(path, f"every_s must be greater than 0, got {value}")
            return None
        return self.time(value, path, "every_s")

    def text(self, value: Any, path: PathKey, what: str, *, nonempty: bool = False) -> str | None:
        if not isinstance(value, str):
            self.add(path, f"{what} must be a string, got {type_name(value)}")
            return None
        if nonempty and not value.strip():
            self.add(path, f"{what} must not be empty")
            return None
        return value

    def json_like(self, value: Any, path: PathKey, what: str) -> bool:
        problem = json_problem(value)
        if problem is not None:
            self.add(path, f"{what} must be JSON-like (null, boolean, finite number, string, "
                     f"array, or object with string keys): {problem}")
            return False
        return True

    def field_path(self, value: Any, path: PathKey) -> str | None:
        if value is None:
            return None
        text = self.text(value, path, "field", nonempty=True)
        if text is not None and any(part == "" for part in text.split(".")):
            self.add(path, f"field {text!r} has an empty path part; use dot-separated names "
                     "like result.matches or detections.0.label")
            return None
        return text

    def compare(self, value: Any, path: PathKey) -> CompareConfig | None:
        if value is None:
            return None
        mapping = self.section(value, path, "compare", _COMPARE_KEYS)
        if mapping is None:
            return None
        mode = mapping.get("mode", UNSET)
        if mode is UNSET:
            self.add(path, "compare needs a mode: one of " + ", ".join(MODES))
            return None
        if mode not in MODES:
            self.add((*path, "mode"), f"unknown comparison mode {mode!r}{_suggest(str(mode), set(MODES))}; "
                     "use one of " + ", ".join(MODES))
            return None
        tolerance: float = 0.0
        if mapping.get("tolerance") is not None:
            raw = mapping["tolerance"]
            if (isinstance(raw, bool) or not isinstance(raw, (int, float))
                    or (isinstance(raw, int) and _beyond_float(raw)) or not math.isfinite(raw)):
                shown = raw if isinstance(raw, float) else type_name(raw)
                self.add((*path, "tolerance"), f"tolerance must be a finite number, got {shown}")
                return None
            if raw < 0:
                self.add((*path, "tolerance"), f"tolerance must be nonnegative, got {raw}")
                return None
            tolerance = float(raw)
        return CompareConfig(mode=str(mode), tolerance=tolerance)

    def clip(self, value: Any, path: PathKey) -> ClipSpec | None:
        """A ``clip`` setting (None for ``null``, which clears an inherited clip, or a problem)."""
        if value is None:
            return None
        mapping = self.section(value, path, "clip", _CLIP_KEYS)
        if mapping is None:
            return None
        before = len(self.problems)
        reach: dict[str, Fraction] = {}
        for key, side in (("before_s", "before"), ("after_s", "after")):
            raw = mapping.get(key, 0)
            if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw < 0:
                self.add((*path, key), f"clip {key} must be 0 or more (seconds of video {side} the sample "
                         f"time), got {raw}; write {key}: {-raw} or leave it out for 0")
                continue
            parsed = self.time(raw, (*path, key), f"clip {key}")
            if parsed is not None:
                reach[key] = parsed
        every: Fraction | None = None
        if mapping.get("every_s") is not None:
            raw = mapping["every_s"]
            if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw <= 0:
                self.add((*path, "every_s"), f"clip every_s must be greater than 0, got {raw}; leave it "
                         "out to take every decoded frame in the window")
            else:
                every = self.time(raw, (*path, "every_s"), "clip every_s")
        edge = mapping.get("edge", "error")
        if edge not in CLIP_EDGES:
            self.add((*path, "edge"), f"unknown clip edge {edge!r}{_suggest(str(edge), set(CLIP_EDGES))}; "
                     "use error (the default: a window reaching outside the video is refused) or clamp "
                     "(times outside the video are dropped)")
        if len(self.problems) > before:
            return None
        spec = ClipSpec(before_s=reach["before_s"], after_s=reach["after_s"], every_s=every, edge=str(edge))
        count = spec.grid_count
        if count is not None and count > MAX_CLIP_FRAMES:
            self.add(path, f"this clip asks for {count} frames ({spec.describe()}), more than the limit of "
                     f"{MAX_CLIP_FRAMES:,} per clip; use a larger every_s or a shorter before_s/after_s")
            return None
        return spec

    def given(self, mapping: dict[str, Any], key: str, parse: Callable[[Any, PathKey], T], path: PathKey,
              default: T | None = None) -> T | None:
        """``parse`` of ``mapping[key]`` where the key is given (null included), else ``default``."""
        return parse(mapping[key], (*path, key)) if key in mapping else default

    def expectation(self, mapping: dict[str, Any], path: PathKey) -> tuple[bool, Any]:
        """Whether ``expect`` is given, and its value (checked to be JSON-like)."""
        if "expect" not in mapping:
            return False, None
        self.json_like(mapping["expect"], (*path, "expect"), "expect")
        return True, mapping["expect"]

    def expect_fits(self, mode: str, expect: Any, path: PathKey) -> None:
        """``expect`` has what comparison ``mode`` compares: a number, or a list for the set modes."""
        if mode == "numeric" and (isinstance(expect, bool) or not isinstance(expect, (int, float))):
            self.add(path, f"numeric comparison needs a number in expect, got {type_name(expect)}")
        if mode.startswith("set_") and not isinstance(expect, list):
            self.add(path, f"{mode} comparison needs a list in expect, got {type_name(expect)}")

    def defaults(self, value: Any, path: PathKey) -> dict[str, Any]:
        """Parse a ``sample_defaults`` mapping into {'field': ..., 'compare': ..., 'clip': ...} (keys only if set)."""
        if value is None:
            return {}
        mapping = self.section(value, path, "sample_defaults", _DEFAULTS_KEYS)
        if mapping is None:
            return {}
        parsers: tuple[tuple[str, Callable[[Any, PathKey], Any]], ...] = (
            ("field", self.field_path), ("compare", self.compare), ("clip", self.clip))
        return {key: parse(mapping[key], (*path, key)) for key, parse in parsers if key in mapping}


def _beyond_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _numeric_text_hint(value: Any) -> str:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        # YAML 1.1 reads 1e9 (no dot, unsigned exponent) as text, not as a number.
        return f" ({value!r} is text in YAML; write it as a plain number such as 1.5 or 1.0e+9)"
    return ""


def _suggest(word: str, choices: set[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_target_problem(where: str | None, scope: str, name: str, known: set[str]) -> Problem:
    """``--target`` naming no target of the selection: list the targets there are, suggest the closest."""
    listed = ", ".join(sorted(known)) or "(none)"
    return Problem(where, "", f"unknown target {name!r} in {scope}; targets: {listed}{_suggest(name, known)}")
