"""A run's arms made ready before any adapter call: selected, resolved and each one checked.

Every selected arm is resolved to what the engine runs (an adapter spec, its config, its
perturbations) and checked here, so a typo in the third arm costs no paid call of the first:
its adapter file or command must exist and its config file must load. Problems are usage
errors (exit 2) naming the arm.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any, TextIO

from ..adapters.choose import adapter_spec, python_target, uses_python
from ..arms.plan import Arm, ArmPlan
from ..arms.spec import ArmSelection, ArmSpec, did_you_mean, select_arms
from ..cases.evaldir import EvalConfig, load_adapter_config
from ..errors import EvalError, UsageError
from .requests import RunRequest


def select(request: RunRequest, config: EvalConfig) -> ArmSelection | None:
    """The arms the request selects from config.yaml's declarations; None for a plain run."""
    if not request.arms.used:
        return None
    selection = select_arms(config.arms, request.arms.arms, request.arms.perturb, request.arms.control)
    assert selection is not None
    if request.arms.gate_arm is not None and request.arms.gate_arm not in selection.names:
        raise UsageError(f"--gate-arm {request.arms.gate_arm}: not a selected arm"
                         f"{did_you_mean(request.arms.gate_arm, selection.names)} (selected: {', '.join(selection.names)})")
    return selection


def prepare_arms(selection: ArmSelection, request: RunRequest, root: Path, stderr: TextIO) -> ArmPlan:
    """Each selected arm resolved against the run's adapter and checked; raises UsageError on the first bad one."""
    arms = []
    for spec in selection.arms:
        try:
            arms.append(_resolve(spec, request, root, stderr))
        except UsageError:
            raise
        except EvalError as exc:
            raise UsageError(f"arm {spec.name!r}: {exc}") from None
    given = request.arms
    plan = ArmPlan(tuple(arms), selection.control, given.seed, given.gate_arm, given.max_robustness_drop,
                   request.comparison.alpha, given.max_blind_pass_rate)
    if plan.max_blind_pass_rate is not None and not plan.blind:
        raise UsageError("--max-blind-pass-rate needs a blind arm to gate: add --perturb blank, --perturb mean "
                         "or --perturb shuffle")
    return plan


def _resolve(spec: ArmSpec, request: RunRequest, root: Path, stderr: TextIO) -> Arm:
    if spec.changes_adapter:
        kinds: tuple[str | None, ...] = (spec.adapter, spec.adapter_command, spec.adapter_http, spec.adapter_exec)
    else:
        kinds = (request.adapter, request.adapter_command, request.adapter_http, request.adapter_exec)
    adapter, command, http, exec_ = kinds
    config: dict[str, Any]
    if spec.adapter_config is not None:
        config = dict(spec.adapter_config)
    elif spec.adapter_config_path is not None:
        path = Path(spec.adapter_config_path)
        if not path.is_file():
            raise UsageError(f"arm {spec.name!r}: adapter config {path} does not exist")
        config = load_adapter_config(root, str(path))
    else:
        config = dict(request.adapter_config or {})
    if uses_python(adapter, command, http, exec_, config):
        adapter = python_target(adapter, root)
        _check_python(spec.name, adapter)
    for text, option in ((command, "adapter_command"), (exec_, "adapter_exec")):
        if text is not None:
            _check_program(spec.name, text, option)
    adapter_spec_ = adapter_spec(adapter, command, root, stderr, adapter_http=http, adapter_exec=exec_,
                                 adapter_config=config)
    return Arm(spec.name, adapter_spec_, config, spec.perturb, spec.to_json(), spec.is_perturbation)


def _check_python(name: str, target: str) -> None:
    module, _sep, _attr = target.rpartition(":")
    if (module.endswith(".py") or "/" in module) and not Path(module).is_file():
        raise UsageError(f"arm {name!r}: adapter file not found: {module}")


def _check_program(name: str, command: str, option: str) -> None:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"arm {name!r}: cannot parse {option} {command!r}: {exc}") from None
    if not argv:
        raise UsageError(f"arm {name!r}: {option} is empty")
    program = argv[0]
    if ("/" in program and not Path(program).exists()) or ("/" not in program and shutil.which(program) is None):
        raise UsageError(f"arm {name!r}: {option} program {program!r} not found")
