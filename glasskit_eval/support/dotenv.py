"""``--env-file``: dotenv files read the way ``uv run --env-file`` reads them, without uv.

The syntax: ``KEY=VALUE`` lines, an optional ``export `` prefix, ``#`` comments (whole lines, or
after whitespace in an unquoted value), blank lines, ``'single'`` quotes (literal) and
``"double"`` quotes (``\\n``, ``\\t``, ``\\"``, ``\\\\`` and ``\\$`` escapes); quoted values may span
lines. ``$NAME`` and ``${NAME}`` in unquoted and double-quoted values expand to a variable set
earlier in the file or in the environment (empty when unset), as uv does; nothing is ever run.

Messages name the file and line but never a value: these files hold secrets.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path

from ..errors import DotenvError
from .secretvalues import add_secret

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_EXPANSION = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "\0DOLLAR\0"}


def parse_dotenv(text: str, where: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables ``text`` sets, in order; raises :class:`DotenvError` at the first bad line."""
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    # Only \n, \r\n and \r end lines, as in uv and POSIX shells; str.splitlines() would also
    # split on \v, \f, \x1c-\x1e, \x85 and U+2028/2029 inside a value.
    lines = re.split(r"\r\n|\r|\n", text)
    for number, raw in enumerate(lines, 1):
        if "\0" in raw:
            raise DotenvError(f"{where}: line {number}: contains a NUL byte, which no environment "
                              "variable can hold")
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export ") or line.startswith("export\t"):
            line = line[len("export"):].lstrip()
        key, sep, rest = line.partition("=")
        key = key.rstrip()
        if not sep:
            raise DotenvError(f"{where}: line {number}: expected KEY=VALUE")
        if not _KEY.fullmatch(key):
            # Not quoted: a line such as `KEY: secret==` would put the secret in the message.
            raise DotenvError(f"{where}: line {number}: the text before `=` is not a variable name "
                              "(letters, digits, `_` and `.`, not starting with a digit)")
        rest = rest.lstrip()

        def lookup(name: str) -> str:
            return values.get(name, env.get(name, ""))

        if rest[:1] in ("'", '"'):
            quote = rest[0]
            body, after, i = _quoted(rest[1:], quote, lines, i, where, number)
            tail = after.strip()
            if tail and not tail.startswith("#"):
                raise DotenvError(f"{where}: line {number}: unexpected text after the closing {quote}")
            values[key] = body if quote == "'" else _expand(_unescape(body), lookup)
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].rstrip()
            values[key] = _expand(value.replace("\\$", "\0DOLLAR\0"), lookup)
    return values


def _quoted(first: str, quote: str, lines: Sequence[str], i: int, where: str,
            number: int) -> tuple[str, str, int]:
    """The quoted body (may span lines), the text after the closing quote and the next line index."""
    parts = [first]
    while True:
        text = "\n".join(parts)
        end = _closing(text, quote)
        if end >= 0:
            return text[:end], text[end + 1:], i
        if i >= len(lines):
            raise DotenvError(f"{where}: line {number}: the {quote} quote is never closed")
        parts.append(lines[i])
        i += 1


def _closing(text: str, quote: str) -> int:
    j = 0
    while j < len(text):
        c = text[j]
        if c == "\\" and quote == '"':
            j += 2
            continue
        if c == quote:
            return j
        j += 1
    return -1


def _unescape(body: str) -> str:
    out = []
    j = 0
    while j < len(body):
        c = body[j]
        if c == "\\" and j + 1 < len(body):
            nxt = body[j + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            j += 2
        else:
            out.append(c)
            j += 1
    return "".join(out)


def _expand(value: str, lookup: Callable[[str], str]) -> str:
    # `$(command)` has no name after `$`, so it stays as text: nothing is ever run.
    expanded = _EXPANSION.sub(lambda m: str(lookup(m.group(1) or m.group(2))), value)
    return expanded.replace("\0DOLLAR\0", "$")


def load_env_files(paths: Sequence[str], *, override: bool = False,
                   environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Read ``paths`` in order into the environment; returns the names set.

    Later files win over earlier ones; variables already in the environment win over every
    file unless ``override``.
    """
    env = os.environ if environ is None else environ
    before = dict(env)
    merged: dict[str, str] = {}
    for name in paths:
        path = Path(name).expanduser()
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise DotenvError(f"--env-file {name}: no such file; create it or fix the path") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise DotenvError(f"--env-file {name}: cannot be read ({type(exc).__name__})") from None
        # Expansions see the environment as it will be: earlier files applied.
        view = {**before, **merged} if override else {**merged, **before}
        merged.update(parse_dotenv(text, str(name), view))
    for value in merged.values():
        add_secret(value)
    applied = []
    for key, value in merged.items():
        if override or key not in before:
            env[key] = value
            applied.append(key)
    return applied
