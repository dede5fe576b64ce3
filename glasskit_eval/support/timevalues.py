"""Exact sample times.

Times are kept as :class:`fractions.Fraction` of the decimal the user wrote, so
``range: [0, 3]`` every ``0.1`` yields exactly 30 samples and a sample exactly
halfway between two frames is recognised as a tie, which binary floats miss.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

#: Longest time text read anywhere (CLI, lock files, review's ``t=``): Python's own limit on the
#: digits of an integer, which also holds on 3.10 where converting longer text is quadratic, and
#: far above the exact text (``str(Fraction)``) of any time written back.
MAX_TIME_TEXT = 4300
#: Largest decimal exponent accepted. Fraction("1e999999999") first builds 10**999999999, which
#: takes minutes and gigabytes; floats end at 1e308, so nothing real is lost.
MAX_TIME_EXPONENT = 1000
#: ``--pace`` bounds: a hundredth of real time feeds a minute of video in 100 minutes; past 1000
#: every frame is due at once anyway. 1e-300 would put the second frame 10^300 s away.
MIN_PACE = 0.01
MAX_PACE = 1000.0
# Fraction and float both take Unicode digits and underscores, so the exponent is read the same way.
_EXPONENT = re.compile(r"[eE]\s*[-+]?\s*(\d[\d_]*)")


def to_fraction(value: object) -> Fraction | None:
    """The exact decimal a YAML or CLI number stands for; None if it is not a finite number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        # repr() is the shortest decimal that round-trips, i.e. what the user typed.
        return _decimal(repr(value))
    if isinstance(value, Fraction):
        return value
    return None


def _decimal(text: str) -> Fraction:
    """``Fraction(text)`` for a float's repr (``-1.25``, ``1.9e-05``, ``1e+16``), without its text parser.

    Every onset of a 100,000-event stream target is read this way; Fraction's own parser (a
    regular expression) costs about three times as much.
    """
    mantissa, _, exponent = text.partition("e")
    whole, _, decimals = mantissa.partition(".")
    shift = (int(exponent) if exponent else 0) - len(decimals)
    digits = int(whole + decimals)
    if shift >= 0:
        return Fraction(digits * 10**shift)
    return Fraction(digits, _power_of_ten(-shift))


@functools.cache
def _power_of_ten(exponent: int) -> int:
    return int(10**exponent)  # int(): a type checker reads int ** int as Any


def parse_cli_time(text: str) -> Fraction:
    """Parse a time given as text (command line, lock file, review's ``t=``).

    Raises ValueError with a readable message, at once for any text: its length and exponent are
    checked before anything is expanded.
    """
    if len(text) > MAX_TIME_TEXT:
        raise ValueError(f"{text[:20]!r}... is too long to be a number of seconds")
    exponent = _EXPONENT.search(text)
    if exponent and int(exponent[1].replace("_", "") or "0") > MAX_TIME_EXPONENT:
        raise ValueError(f"{text!r} is out of range: a time's exponent must be at most {MAX_TIME_EXPONENT}")
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        try:
            as_float = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(as_float):
            raise ValueError(f"{text!r} is not a finite number of seconds") from None
        value = Fraction(repr(as_float))
    try:
        finite = math.isfinite(float(value))
    except OverflowError:
        finite = False
    if not finite:
        # Fraction("1e400") parses, but no video is that long and floats cannot hold it.
        raise ValueError(f"{text!r} is not a finite number of seconds")
    return value


def format_time(value: Fraction) -> str:
    """Render a time the way a user would write it (``0.3``, ``2.0``, ``7.25``)."""
    try:
        as_float = float(value)
    except OverflowError:
        return str(value)
    if Fraction(repr(as_float)) == value:
        return repr(as_float)
    # Times that are not short decimals (e.g. 1/3 from a CLI fraction) fall back to 6 places.
    return f"{as_float:.6f}"


def same_time_key(value: Fraction) -> Fraction:
    """Times equal to 9 decimal places are the same sample time.

    Declared duplicates and ``--at`` lookups use this, so ``--at 0.30000000000000004``
    (what ``0.1 + 0.2`` prints) finds the sample at 0.3, as upstream does.
    """
    if _NANO % value.denominator == 0:
        return value  # already exact to 9 decimals: skip the costly general rounding
    return round(value, 9)


_NANO = 10**9


def format_duration(seconds: float) -> str:
    """A duration as people read it: ``420 ms``, ``1.5 s``, ``80 µs`` (never ``1e-07s``)."""
    magnitude = abs(seconds)
    if magnitude >= 1 or magnitude == 0:
        return f"{seconds:.3g} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"
