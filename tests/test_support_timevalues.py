"""Exact sample times (glasskit_eval.support.timevalues)."""

from __future__ import annotations

import re
import subprocess
import sys
from fractions import Fraction

import pytest

from glasskit_eval.support.timevalues import format_time, parse_cli_time, same_time_key, to_fraction


@pytest.mark.parametrize(("value", "expected"), [
    (0, Fraction(0)),
    (3, Fraction(3)),
    (0.1, Fraction(1, 10)),
    (2.9, Fraction(29, 10)),
    (7.25, Fraction(29, 4)),
    (0.30000000000000004, Fraction("0.30000000000000004")),
    (1e-9, Fraction(1, 10**9)),
    (1.0e9, Fraction(10**9)),
    (Fraction(1, 3), Fraction(1, 3)),
    (-0.5, Fraction(-1, 2)),
])
def test_to_fraction_is_the_decimal_as_written(value: object, expected: Fraction) -> None:
    assert to_fraction(value) == expected


@pytest.mark.parametrize("value", [True, False, None, "1.5", float("nan"), float("inf"), float("-inf"), [1]])
def test_to_fraction_refuses_what_is_not_a_finite_number(value: object) -> None:
    assert to_fraction(value) is None


def test_to_fraction_differs_from_the_binary_value() -> None:
    # Fraction(0.1) would be 3602879701896397/36028797018963968.
    assert to_fraction(0.1) != Fraction(0.1)
    tenth = to_fraction(0.1)
    assert tenth is not None and 3 * tenth == to_fraction(0.3)


def test_to_fraction_reads_every_float_as_fraction_reads_its_repr() -> None:
    import random
    import struct

    rng = random.Random(7)
    values = [0.0, -0.0, 1e16, 1e22, 1e-5, 5e-324, 1.7976931348623157e308, -2.5e-300, 123456.789, 1.9e-05]
    for _ in range(20_000):
        values.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])  # any bit pattern
        values.append(round(rng.uniform(-1e6, 1e6), rng.randrange(10)))
        values.append(rng.randrange(10**7) / 10 ** rng.randrange(12))
    for value in values:
        if value == value and abs(value) != float("inf"):
            exact = to_fraction(value)
            assert exact == Fraction(repr(value)) and type(exact) is Fraction, value


@pytest.mark.parametrize(("text", "expected"), [
    ("0.3", Fraction(3, 10)),
    (" 1 ", Fraction(1)),
    ("2.90", Fraction(29, 10)),
    ("1e-3", Fraction(1, 1000)),
    ("1E3", Fraction(1000)),
    ("-1", Fraction(-1)),
    ("1/4", Fraction(1, 4)),
    ("0.30000000000000004", Fraction("0.30000000000000004")),
])
def test_parse_cli_time(text: str, expected: Fraction) -> None:
    assert parse_cli_time(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("abc", "'abc' is not a number of seconds"),
    ("", "'' is not a number of seconds"),
    ("nan", "'nan' is not a finite number of seconds"),
    ("inf", "'inf' is not a finite number of seconds"),
    ("-inf", "'-inf' is not a finite number of seconds"),
    ("1/0", "'1/0' is not a number of seconds"),
])
def test_parse_cli_time_errors_are_readable(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        parse_cli_time(text)


@pytest.mark.parametrize(("value", "text"), [
    (Fraction(0), "0.0"),
    (Fraction(3, 10), "0.3"),
    (Fraction(2), "2.0"),
    (Fraction(29, 4), "7.25"),
    (Fraction(29, 10), "2.9"),
    (Fraction(1, 3), "0.333333"),
    (Fraction(123456789, 10**9), "0.123456789"),
])
def test_format_time_is_how_a_user_writes_it(value: Fraction, text: str) -> None:
    assert format_time(value) == text


def test_same_time_key_treats_times_equal_to_nine_decimals_as_one() -> None:
    assert same_time_key(Fraction("0.30000000000000004")) == same_time_key(Fraction(3, 10))
    assert same_time_key(Fraction("0.3000000004")) == same_time_key(Fraction(3, 10))
    assert same_time_key(Fraction("0.3000000006")) != same_time_key(Fraction(3, 10))
    assert same_time_key(Fraction("0.2999999991")) != same_time_key(Fraction(3, 10))
    assert same_time_key(Fraction(1, 3)) == Fraction(333333333, 10**9)


def test_times_beyond_float_range() -> None:
    with pytest.raises(ValueError, match="is not a finite number of seconds"):
        parse_cli_time("1e400")
    assert parse_cli_time("1e300") == Fraction(10**300)
    # Messages never crash on a value floats cannot hold.
    assert format_time(Fraction(10**400)) == "1" + "0" * 400


def test_durations_read_in_the_unit_that_fits() -> None:
    from glasskit_eval.support.timevalues import format_duration

    assert [format_duration(s) for s in (0, 1e-7, 8e-5, 0.0421, 0.3, 1, 12.345, 250)] == [
        "0 s", "0.1 µs", "80 µs", "42.1 ms", "300 ms", "1 s", "12.3 s", "250 s"]


@pytest.mark.parametrize("text", ["1e999999999", "-1E+999999999", "1e-999999999", "1_0e99_999_999",
                                  "0.5e\u0669" + "9" * 8])
def test_huge_exponents_are_refused_at_once(text: str) -> None:
    # Fraction(text) would first build 10**999999999 (minutes, gigabytes): run apart with a timeout,
    # so a regression fails instead of stalling the suite.
    code = ("from glasskit_eval.support.timevalues import parse_cli_time\n"
            f"try:\n    parse_cli_time({text!r})\nexcept ValueError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True)
    assert done.stdout == f"{text!r} is out of range: a time's exponent must be at most 1000\n"


def test_overlong_time_text_is_refused() -> None:
    with pytest.raises(ValueError, match=r"is too long to be a number of seconds"):
        parse_cli_time("0." + "1" * 5000)
    assert parse_cli_time("1e-1000") == Fraction(1, 10**1000)
