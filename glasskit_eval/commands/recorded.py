"""How a request records its options: each field with its check, groups, and the flat manifest.

A request field is made by :func:`option` (its default and the check a recorded value must
pass), a group of them by :func:`group`; the manifest holds every option under its own name,
groups flattened (:func:`flat_values`, :func:`build`), and :func:`restore_fields` refuses a
recorded one that is unknown or fails its check. Nothing here knows which options exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, field, fields
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from ..arms.spec import parse_chain
from ..errors import CheckpointError, EvalError, UsageError
from ..plan.shard import parse_shard
from ..support.timevalues import MAX_PACE, MIN_PACE, parse_cli_time

Check = Callable[[Any], bool]
T = TypeVar("T")
G = TypeVar("G")


# -- value checks ---------------------------------------------------------------------------


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def one_of(choices: tuple[str, ...]) -> Check:
    return lambda value: value in choices


def is_str(value: object) -> bool:
    return isinstance(value, str)


def is_bool(value: object) -> bool:
    return isinstance(value, bool)


def positive_int(value: object) -> bool:
    return is_int(value) and value >= 1


def count(value: object) -> bool:
    return is_int(value) and value >= 0


def rate(value: object) -> bool:
    return is_number(value) and 0.0 <= value <= 1.0


def positive_number(value: object) -> bool:
    return is_number(value) and value > 0


def pace_ok(value: object) -> bool:
    """``--pace``'s range (a paced clock neither stalls nor spins)."""
    return is_number(value) and MIN_PACE <= value <= MAX_PACE


def nonnegative_number(value: object) -> bool:
    return is_number(value) and value >= 0


def open_fraction(value: object) -> bool:
    return is_number(value) and 0.0 < value < 1.0


def str_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def perturb_list(value: object) -> bool:
    """``--perturb`` texts that still parse (a hand-edited one is refused before planning)."""
    if not isinstance(value, (list, tuple)) or not str_list(value):
        return False
    try:
        for text in value:
            parse_chain(text)
    except EvalError:
        return False
    return True


def is_shard(value: object) -> bool:
    """``I/N`` with 1 <= I <= N (a resolved ``--shard``)."""
    if not isinstance(value, str):
        return False
    try:
        parse_shard(value)
    except UsageError:
        return False
    return True


def is_time(text: str) -> bool:
    try:
        return parse_cli_time(text) >= 0
    except ValueError:
        return False


opt_str = optional(is_str)


# -- fields, groups and the flat manifest ----------------------------------------------------


def option(default: Any, check: Check) -> Any:
    """A request field with its default and the check a recorded value must pass."""
    return field(default=default, metadata={"check": check})


def group(kind: type) -> Any:
    """A field holding one option group (a frozen dataclass of :func:`option` fields)."""
    return field(default_factory=kind, metadata={"group": kind})


def flat_fields(kind: type) -> Iterator[tuple[str | None, Field[Any]]]:
    """Every option of ``kind`` as (its group's attribute or None, its field), in declaration order."""
    for f in fields(kind):
        inner = f.metadata.get("group")
        if inner is None:
            yield None, f
        else:
            yield from ((f.name, g) for g in fields(inner))


def checks_of(kind: type) -> dict[str, Check]:
    """The manifest's check of each recorded option of a request class, by its flat name."""
    return {f.name: f.metadata["check"] for _g, f in flat_fields(kind)}


def flat_values(item: object) -> dict[str, Any]:
    """A request's (or a group's) options by their flat names, groups flattened."""
    values: dict[str, Any] = {}
    for f in fields(item):  # type: ignore[arg-type]
        value = getattr(item, f.name)
        if "group" in f.metadata:
            values |= flat_values(value)
        else:
            values[f.name] = value
    return values


def build(kind: type[T], values: Mapping[str, Any]) -> T:
    """A request from options by their flat names (lists become tuples); unknown names are a TypeError."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    known = {f.name: g for g, f in flat_fields(kind)}
    tuples = {f.name for _g, f in flat_fields(kind) if isinstance(f.default, tuple)}
    for name, value in values.items():
        if name not in known:
            raise TypeError(f"{kind.__name__} has no option {name!r}")
        if name in tuples:
            value = tuple(value or ())
        owner = known[name]
        (top if owner is None else grouped.setdefault(owner, {}))[name] = value
    for f in fields(kind):  # type: ignore[arg-type]
        if "group" in f.metadata:
            top[f.name] = f.metadata["group"](**grouped.get(f.name, {}))
    return kind(**top)


def group_of(kind: type[G], values: Mapping[str, Any]) -> G:
    """One group from a mapping of options by name; missing ones take the group's default."""
    return kind(**{f.name: values[f.name] for f in fields(kind) if f.name in values})  # type: ignore[arg-type]



def restore_fields(data: object, checks: Mapping[str, Check], where: Path, kind: str) -> dict[str, Any]:
    """A recorded invocation's fields, each checked; refuses unknown, missing-required or bad ones."""
    if not isinstance(data, Mapping) or not isinstance(data.get("eval_dir"), str):
        raise CheckpointError(f"{where}: the manifest's invocation is missing or damaged; start a new {kind}")
    unknown = sorted(set(data) - set(checks))
    if unknown:
        raise CheckpointError(f"{where}: the manifest records options this version does not know "
                              f"({', '.join(unknown)}); resume it with the glasskit_eval that wrote it")
    bad = sorted(name for name, value in data.items() if not checks[name](value))
    if bad:
        raise CheckpointError(f"{where}: the manifest's invocation has invalid values for "
                              f"{', '.join(bad)}; start a new {kind}")
    return dict(data)
