"""Run requests: option groups built from the face, recorded flat in the manifest, restored strictly."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest
from evalkit import run_cli

from glasskit_eval.cases.model import STREAM_GATE_NAMES
from glasskit_eval.cli import build_parser
from glasskit_eval.cli import options as options_face
from glasskit_eval.commands.ci_outputs import SHARED_OPTIONS
from glasskit_eval.commands.requests import (
    CallOptions,
    EarlyStop,
    Gates,
    Outputs,
    RunRequest,
    Trials,
)
from glasskit_eval.errors import CheckpointError
from glasskit_eval.evaluation.gates import GateOptions


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


# --- option groups: a gate option is declared once per place ------------------------------------

def _argparse_group(title: str, command: str = "run") -> dict[str, argparse.Action]:
    """The actions of one of a command's argparse groups, by dest."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    group = next(g for g in sub.choices[command]._action_groups if g.title and g.title.startswith(title))
    return {a.dest: a for a in group._group_actions}


def _gate_actions() -> dict[str, argparse.Action]:
    return _argparse_group("gates")


@pytest.mark.parametrize(("kind", "title", "command"), [
    (Gates, "gates", "run"), (Trials, "trials", "run"), (Outputs, "outputs", "run"),
    (CallOptions, "adapter calls", "run"), (CallOptions, "adapter calls", "seed"),
    (EarlyStop, "early stop", "run"),
])
def test_groups_the_face_builds_by_dest_are_its_argparse_groups(kind: type, title: str, command: str) -> None:
    assert set(_argparse_group(title, command)) == {f.name for f in fields(kind)}


def test_the_gates_group_is_the_engines_gate_options_flattened() -> None:
    engine = {f.name for f in fields(GateOptions) if f.name != "streams"} | set(STREAM_GATE_NAMES)
    assert {f.name for f in fields(Gates)} == engine
    # ... and the face's gates argparse group declares exactly them.
    assert set(_gate_actions()) == engine


@pytest.mark.parametrize("name", [f.name for f in fields(Gates)])
def test_every_gate_option_is_built_recorded_checked_and_shared_without_naming_it(name: str,
                                                                                  tmp_path: Path) -> None:
    action = _gate_actions()[name]
    assert callable(action.type)
    value = action.type("1")
    # The face builds the group from the option's dest.
    args = argparse.Namespace(**{f.name: None for f in fields(Gates)} | {name: value})
    gates = options_face.group(Gates, args)
    assert getattr(gates, name) == value
    # The engine gets it.
    engine = gates.options()
    assert getattr(engine.streams if name in STREAM_GATE_NAMES else engine, name) == value
    # The manifest records it flat under its own name, restores it, and refuses a bad value.
    request = RunRequest(eval_dir="/e", gates=gates)
    assert request.to_json()[name] == value
    assert RunRequest.from_json(request.to_json(), Path("m")) == request
    with pytest.raises(CheckpointError, match=f"invalid values for {name}; start a new run"):
        RunRequest.from_json(request.to_json() | {name: -1}, tmp_path / "manifest.json")
    # Shards carry it, so merge-reports applies it.
    assert name in SHARED_OPTIONS


def test_flat_names_build_and_replace_the_groups() -> None:
    request = RunRequest.of(eval_dir="/e", min_pass_rate=0.5, alpha=0.1, perturb=["jpeg:30"], repeat=2)
    assert request.gates.min_pass_rate == 0.5 and request.comparison.alpha == 0.1
    assert request.arms.perturb == ("jpeg:30",) and request.arms.used and request.trials.repeat == 2
    moved = request.replaced(output_json="/r.json", timeout_s=3.0)
    assert moved.outputs.output_json == "/r.json" and moved.calls.timeout_s == 3.0 and moved.gates == request.gates
    with pytest.raises(TypeError, match="no option 'min_pass_rat'"):
        RunRequest.of(eval_dir="/e", min_pass_rat=0.5)


@pytest.mark.parametrize(("change", "names"), [
    ({"perturb": ["jepg:30"]}, "perturb"),
    ({"perturb": ["jpeg:300"]}, "perturb"),
    ({"control": "small"}, "control"),
    ({"gate_arm": "small", "max_robustness_drop": 0.1}, "gate_arm, max_robustness_drop"),
])
def test_a_hand_edited_arms_group_is_a_checkpoint_error(tmp_path: Path, change: dict[str, object],
                                                        names: str) -> None:
    with pytest.raises(CheckpointError, match=f"invalid values for {names}; start a new run"):
        RunRequest.from_json(RunRequest.of(eval_dir="/e").to_json() | change, tmp_path / "manifest.json")


@pytest.mark.parametrize(("argv", "message"), [
    (["--perturb", "blurr:2"], "argument --perturb: blurr:2: unknown perturbation 'blurr'; did you mean 'blur'?"),
    (["--perturb", "jpeg:30+noise"], "argument --perturb: 'noise': write KIND:VALUE"),
    (["--control", "small"], "--control needs arms to compare: add --arm NAME or --perturb SPEC"),
    (["--max-robustness-drop", "0.1"], "--max-robustness-drop needs arms to compare"),
])
def test_arm_mistakes_exit_2_before_the_eval_directory_is_read(tmp_path: Path, argv: list[str],
                                                               message: str) -> None:
    # The eval directory does not exist: reading it (or probing a video) would be another error.
    code, _out, err = run_cli("run", "--eval-dir", tmp_path / "missing", *argv)
    assert code == 2 and message in err, err
    assert "eval directory does not exist" not in err
