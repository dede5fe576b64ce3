"""The run options added for the observation cache and frame locks, restored strictly."""

from __future__ import annotations

from pathlib import Path

import pytest

from glasskit_eval.commands.requests import RunRequest
from glasskit_eval.errors import CheckpointError


def test_cache_and_pin_options_round_trip() -> None:
    request = RunRequest.of(eval_dir="/e", cache_dir="/c", cache_mode="read", cache_max_mb=7, strict_pins=True)
    assert RunRequest.from_json(request.to_json(), Path("m")) == request
    # Manifests written before these options existed restore with the defaults.
    old = {k: v for k, v in RunRequest.of(eval_dir="/e").to_json().items()
           if k not in ("cache_dir", "cache_mode", "cache_max_mb", "strict_pins")}
    assert RunRequest.from_json(old, Path("m")) == RunRequest.of(eval_dir="/e")


@pytest.mark.parametrize("change", [{"cache_dir": 3}, {"cache_mode": "sometimes"}, {"cache_max_mb": 0},
                                    {"strict_pins": "yes"}, {"shard": "\u00b2/3"}, {"shard": "1/10001"},
                                    {"at": ["1e999999999"]}, {"until_s": "1e-999999999"}])
def test_bad_cache_and_pin_options_are_refused(tmp_path: Path, change: dict[str, object]) -> None:
    with pytest.raises(CheckpointError):
        RunRequest.from_json(RunRequest.of(eval_dir="/e").to_json() | change, tmp_path / "manifest.json")
