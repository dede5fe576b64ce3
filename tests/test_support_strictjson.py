"""The one strict reader of files read back (glasskit_eval.support.strictjson): one test per attack."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from glasskit_eval.support import strictjson as sj


def refused(text: str | bytes, **kwargs: int) -> sj.LoadError:
    with pytest.raises(sj.LoadError) as caught:
        sj.loads(text, **kwargs)
    return caught.value


def test_what_our_writers_write_is_read() -> None:
    text = '{"a": [1, -2, 3.5e-3, true, null, "é\\u00e9"], "b": {"c": "\\ud83d\\ude00"}}'
    assert sj.loads(text) == {"a": [1, -2, 0.0035, True, None, "éé"], "b": {"c": "😀"}}
    assert sj.loads(b'[1e308, -1e-999]') == [1e308, -0.0]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant: str) -> None:
    assert f"{constant} is not valid JSON" in str(refused(f'{{"x": [{constant}]}}'))


@pytest.mark.parametrize("number", ["1e999999", "-1e999999", "1.5E400"])
def test_numbers_beyond_doubles_are_refused(number: str) -> None:
    assert "is out of range" in str(refused(f"[{number}]"))


def test_huge_integers_are_refused_before_they_are_expanded() -> None:
    assert sj.loads("9" * sj.MAX_INT_DIGITS) == int("9" * sj.MAX_INT_DIGITS)
    error = refused("[" + "9" * 100_000 + "]")
    assert str(error) == "an integer of 100000 digits is too long (at most 4300)"
    # Python 3.10 expands a long digit run in quadratic time: the check must come first. Run
    # apart so a regression fails on the timeout instead of stalling the suite.
    code = textwrap.dedent("""
        from glasskit_eval.support.strictjson import LoadError, loads
        try:
            loads("-" + "1" * 5_000_000)
        except LoadError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.startswith("an integer of 5000000 digits is too long")


def test_deep_nesting_is_refused_whatever_the_depth() -> None:
    assert sj.loads("[" * 10 + "]" * 10, max_depth=10) is not None
    error = refused('{"a": ' + "[" * 11 + "]" * 11 + "}", max_depth=10)
    assert str(error) == "a" + "[0]" * 9 + ": is nested more than 10 levels deep"
    # Past the interpreter's own recursion limit: still an error, not a crash.
    assert "is nested more than" in str(refused("[" * 200_000 + "]" * 200_000))


@pytest.mark.parametrize(("text", "where"), [
    ('{"a": ["ok", "\\ud800"]}', "a[1]: a string"), ('{"a": {"\\udfff": 1}}', "a: a key"),
    ('"x\\udc80"', "the top level: a string"),
])
def test_lone_surrogates_are_refused(text: str, where: str) -> None:
    assert str(refused(text)).startswith(f"{where} holds a lone surrogate")


def test_a_key_given_twice_is_damage_not_a_silent_choice() -> None:
    assert str(refused('{"a": [{"status": "passed", "status": "failed"}]}')) == 'a[0]: has the key "status" twice'
    assert str(refused('{"x": 1, "x": 1}')) == 'the top level: has the key "x" twice'


def test_syntax_errors_and_bad_bytes_name_the_line() -> None:
    error = refused('{\n  "a": [1,]\n}')
    # The column is where Python's json module stops, which moved between versions.
    assert error.line == 2 and error.located("r.json").startswith(f"r.json:2:{error.column}: not valid JSON")
    error = refused(b'{"a":\n"\xff"}')
    assert error.located("r.json") == "r.json:2: is not UTF-8 text (byte 7)"


def test_regular_files_are_read_within_their_limit(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(b"[1]")
    assert sj.read_file(path, 3) == b"[1]"
    assert sj.load(path, sj.REPORT) == [1]
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert sj.read_file(link, 3) == b"[1]"  # a link to a regular file is fine ...
    with pytest.raises(sj.NotRegular, match="is a symlink"):
        sj.read_file(link, 3, follow_symlinks=False)  # ... unless the kind says otherwise (cache entries)


def test_oversized_files_are_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"[1]")
    with pytest.raises(sj.TooLarge, match="is 3 bytes, over the 2 bytes limit"):
        sj.read_file(path, 2)
    with open(path, "r+b") as handle:  # sparse: a 1 GiB + 1 file costs nothing on disk
        handle.truncate(sj.REPORT.max_bytes + 1)
    with pytest.raises(sj.TooLarge, match="over the 1 GiB limit"):
        sj.load(path, sj.REPORT)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    # A separate process, so a regression (an open or read that blocks) fails on the timeout.
    code = textwrap.dedent(f"""
        from pathlib import Path
        from glasskit_eval.support import strictjson
        try:
            strictjson.load(Path({str(fifo)!r}), strictjson.REPORT)
        except strictjson.NotRegular as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout == "is a FIFO (named pipe), not a regular file\n"


def test_an_open_fifo_is_refused_after_fstat(tmp_path: Path) -> None:
    """The race: a regular file at stat time, a FIFO when opened. ``read_fd`` checks the open file."""
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(sj.NotRegular, match="FIFO"):
            sj.read_fd(fd, 100)
    finally:
        os.close(fd)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "r.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(sj.NotRegular, match="is a character device, not a regular file"):
        sj.load(link, sj.REPORT)
    with pytest.raises(sj.NotRegular, match="is a directory"):
        sj.read_file(tmp_path, 10)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(sj.NotRegular, match="symlink loop"):
        sj.read_file(loop, 10)
    with pytest.raises(sj.NotFound):
        sj.read_file(tmp_path / "missing.json", 10)


SHAPE = sj.Obj({"name": sj.Str(), "n": sj.Int(), "rate": sj.Num(0, 1), "kind": sj.Str(choices=("a", "b"))},
               {"items": sj.Arr(sj.Obj({"ok": sj.Bool()})), "usage": sj.MapOf(sj.Num()),
                "note": sj.Str(nullable=True)})


@pytest.mark.parametrize(("value", "message"), [
    ({"name": "x", "n": 1, "rate": 0.5}, "the top level: lacks `kind`"),
    ({"name": 3, "n": 1, "rate": 0.5, "kind": "a"}, "name: must be a string, not a number"),
    ({"name": "x", "n": True, "rate": 0.5, "kind": "a"}, "n: must be an integer, not a boolean"),
    ({"name": "x", "n": 1.5, "rate": 0.5, "kind": "a"}, "n: must be an integer, not a number"),
    ({"name": "x", "n": -1, "rate": 0.5, "kind": "a"}, "n: is -1, must be from 0 to 9223372036854775807"),
    ({"name": "x", "n": 2**63, "rate": 0.5, "kind": "a"}, "n: is 9223372036854775808, must be from 0 to"),
    ({"name": "x", "n": 1, "rate": 1.5, "kind": "a"}, "rate: is 1.5, must be from 0 to 1"),
    ({"name": "x", "n": 1, "rate": 1, "kind": "c"}, 'kind: is "c", not one of "a", "b"'),
    ({"name": "x", "n": 1, "rate": 1, "kind": "a", "items": [{"ok": True}, {"ok": 1}]},
     "items[1].ok: must be true or false, not a number"),
    ({"name": "x", "n": 1, "rate": 1, "kind": "a", "usage": {"cost": "1"}}, "usage.cost: must be a number"),
    ({"name": "x", "n": 1, "rate": 1, "kind": "a", "note": []}, "note: must be a string or null, not an array"),
    ([], "the top level: must be an object, not an array"),
])
def test_shapes_name_the_json_path_and_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(sj.LoadError) as caught:
        sj.check(value, SHAPE)
    assert str(caught.value).startswith(message)


def test_a_value_of_its_shape_passes_and_unknown_keys_are_kept() -> None:
    value = {"name": "x", "n": 0, "rate": 1, "kind": "b", "items": [], "note": None, "later": {"any": 1}}
    sj.check(value, SHAPE)


@pytest.mark.parametrize(("shape", "value", "message"), [
    (sj.Num(0), -1.5, "is -1.5, must be at least 0"),
    (sj.Num(None, 2.5), 3, "is 3, must be at most 2.5"),
    (sj.Num(), 10**400, "is an integer of 401 digits, out of range for a number (over 1.8e308)"),
    (sj.Seconds(), 1e308, "is 1e+308, must be from 0 to 1e+09"),
])
def test_a_number_out_of_bounds_is_worded_whichever_bound_is_missing(shape: sj.Shape, value: float,
                                                                     message: str) -> None:
    with pytest.raises(sj.LoadError) as caught:
        sj.check({"x": value}, sj.Obj({"x": shape}))
    assert message in str(caught.value)
