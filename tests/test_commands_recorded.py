"""How a request records its options: a new field of a group is checked, recorded and restored
without a line anywhere but its declaration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from glasskit_eval.commands.recorded import (
    build,
    checks_of,
    count,
    flat_values,
    group,
    group_of,
    option,
    optional,
    perturb_list,
    rate,
    restore_fields,
)
from glasskit_eval.commands.requests import AdapterRequest, restore
from glasskit_eval.errors import CheckpointError


@dataclass(frozen=True, slots=True)
class NewGates:
    min_pass_rate: float | None = option(None, optional(rate))
    #: A gate added later: this line is all the manifest needs.
    max_new_failures: int | None = option(None, optional(count))


@dataclass(frozen=True, slots=True)
class Extras:
    tags: tuple[str, ...] = option((), lambda v: isinstance(v, list))


@dataclass(frozen=True, slots=True)
class Request(AdapterRequest):
    gates: NewGates = group(NewGates)
    extras: Extras = group(Extras)

    KIND: ClassVar[str] = "run"
    SPARSE: ClassVar[tuple[str, ...]] = ("extras",)


def test_a_new_group_field_is_checked_recorded_and_restored(tmp_path: Path) -> None:
    assert "max_new_failures" in checks_of(Request)
    request = Request.of(eval_dir="/e", max_new_failures=2, tags=["x"])
    assert request.gates == NewGates(max_new_failures=2) and request.extras.tags == ("x",)
    data = request.to_json()
    assert data["max_new_failures"] == 2 and data["tags"] == ["x"]
    assert restore(Request, data, tmp_path / "m.json") == request
    with pytest.raises(CheckpointError, match="invalid values for max_new_failures; start a new run"):
        restore(Request, data | {"max_new_failures": -1}, tmp_path / "m.json")
    with pytest.raises(CheckpointError, match=r"does not know \(max_old\)"):
        restore(Request, data | {"max_old": 1}, tmp_path / "m.json")


def test_sparse_groups_are_recorded_only_when_set() -> None:
    plain = Request.of(eval_dir="/e").to_json()
    assert "tags" not in plain and plain["max_new_failures"] is None
    assert flat_values(Request.of(eval_dir="/e", tags=("a",)))["tags"] == ("a",)


def test_a_group_from_a_mapping_takes_defaults_for_what_is_missing() -> None:
    assert group_of(NewGates, {"max_new_failures": 1, "unrelated": True}) == NewGates(None, 1)
    assert build(Request, {"eval_dir": "/e"}) == Request(eval_dir="/e")


def test_restore_refuses_what_is_not_an_invocation(tmp_path: Path) -> None:
    for data in (None, [], {"eval_dir": 3}):
        with pytest.raises(CheckpointError, match="missing or damaged; start a new run"):
            restore_fields(data, checks_of(Request), tmp_path / "m.json", "run")


def test_recorded_perturbations_must_still_parse() -> None:
    assert perturb_list(["jpeg:30", "brightness:0.4+noise:8"])
    assert not perturb_list(["jpeg:300"]) and not perturb_list("jpeg:30") and not perturb_list([3])
