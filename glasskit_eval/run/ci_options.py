"""The CI options' manifest checks (issue 18), kept apart so run requests only add them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..checkpoints.lifecycle import is_bool, opt_str

ANNOTATION_MODES = ("auto", "github", "none")


def is_annotation_mode(value: object) -> bool:
    return value in ANNOTATION_MODES


def is_shard(value: object) -> bool:
    """``I/N`` with 1 <= I <= N, or None (a resolved ``--shard``)."""
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    index, _, total = value.partition("/")
    return index.isdigit() and total.isdigit() and 1 <= int(index) <= int(total)


CHECKS: dict[str, Callable[[Any], bool]] = {
    "junit_xml": opt_str, "annotations": is_annotation_mode, "baseline": opt_str,
    "fail_on_regression": is_bool, "shard": is_shard,
}
