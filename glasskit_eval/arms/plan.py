"""What a run plays: its arms resolved to adapters, configs and perturbations (a plain run is one).

:class:`ArmPlan` is what the engine's one trial loop takes. A run with ``--arm``/``--perturb``
has one :class:`Arm` per selected arm; a plain run is :meth:`ArmPlan.single`, one arm that makes
results without an arm name (``arm = null``), so its reports, manifests and checkpoints are those of
a run that never heard of arms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..adapters.base import AdapterSpec
from .perturb import Perturbation, is_blind

#: The name a plain run's one arm goes by inside the engine (never on a result: those say None).
PLAIN = ""


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm as the engine runs it."""

    name: str
    spec: AdapterSpec
    adapter_config: Mapping[str, Any]
    perturb: tuple[Perturbation, ...] = ()
    #: What the arm changes, for the report (``arms.<name>.spec``).
    description: Mapping[str, Any] | None = None
    #: Only image conditions differ from the plain adapter (the robustness gate's arms).
    perturbation_only: bool = False


@dataclass(frozen=True, slots=True)
class ArmPlan:
    """The arms of a run, in order, the one the others are compared with, and who is gated."""

    arms: tuple[Arm, ...]
    control: str
    seed: int = 0
    #: ``--gate-arm``: only this arm's gates; None: every arm's.
    gate_arm: str | None = None
    #: ``--max-robustness-drop`` and the test's level.
    max_robustness_drop: float | None = None
    alpha: float = 0.05
    #: ``--max-blind-pass-rate``.
    max_blind_pass_rate: float | None = None
    #: A plain run: one arm whose results carry no arm name and whose gates keep their own names.
    plain: bool = False

    @classmethod
    def single(cls, spec: AdapterSpec, adapter_config: Mapping[str, Any]) -> ArmPlan:
        """A run without arms, as one arm: the run's adapter and config, no perturbations."""
        return cls((Arm(PLAIN, spec, adapter_config),), PLAIN, plain=True)

    @property
    def blind(self) -> tuple[str, ...]:
        """The arms whose frames show nothing of the sample (``blank``, ``mean``, ``shuffle``)."""
        return tuple(a.name for a in self.arms if is_blind(a.perturb) and a.name != self.control)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arms)

    def result_name(self, arm: Arm) -> str | None:
        """The name ``arm``'s results and records carry: None in a plain run."""
        return None if self.plain else arm.name

    def gated(self, name: str) -> bool:
        return self.gate_arm is None or self.gate_arm == name
