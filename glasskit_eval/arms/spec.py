"""What an arm is: the run's adapter with some things changed, and the arms a run selects.

An arm may name its own adapter (``adapter``, ``adapter_command``, ``adapter_http``,
``adapter_exec``: one of them replaces the run's adapter whatever its kind), its own adapter
config (a mapping, or a path to a YAML or JSON file, replacing the run's config as a whole) and
a list of image perturbations applied to every frame it gets. Arms are declared in
``config.yaml`` (``arms:``) and chosen on the command line (``--arm``, ``--perturb``); nothing
here reads a file or knows argparse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..support.outside import control_characters, inline
from ..support.secretvalues import redact_url
from .perturb import Perturbation, chain_spec, parse_spec

#: The arm the plain adapter runs as.
CONTROL = "control"
#: ``--arm all``: every declared arm.
ALL = "all"
#: The adapter-kind keys; at most one per arm.
ADAPTER_KEYS = ("adapter", "adapter_command", "adapter_http", "adapter_exec")
#: Every key an arm declaration may have.
ARM_KEYS = (*ADAPTER_KEYS, "adapter_config", "perturb")


@dataclass(frozen=True)
class ArmSpec:
    """One arm as declared; unset fields are the run's."""

    name: str
    adapter: str | None = None
    adapter_command: str | None = None
    adapter_http: str | None = None
    adapter_exec: str | None = None
    #: The adapter config as a mapping (config.yaml) ...
    adapter_config: Mapping[str, Any] | None = None
    #: ... or the absolute path of a YAML or JSON file holding it.
    adapter_config_path: str | None = None
    perturb: tuple[Perturbation, ...] = field(default=())

    @property
    def changes_adapter(self) -> bool:
        return any(getattr(self, key) is not None for key in ADAPTER_KEYS)

    @property
    def is_perturbation(self) -> bool:
        """Only image conditions change: the robustness gate compares these with the control."""
        return bool(self.perturb) and not self.changes_adapter and self.adapter_config is None \
            and self.adapter_config_path is None

    def to_json(self) -> dict[str, Any]:
        """The report's ``arms.<name>.spec``: what the arm changes (the plain adapter: nothing)."""
        data: dict[str, Any] = {key: getattr(self, key) for key in ADAPTER_KEYS if getattr(self, key) is not None}
        if self.adapter_http is not None:
            # A key in the URL's query or userinfo is the HTTP adapter's to send, never a report's to keep.
            data["adapter_http"] = redact_url(self.adapter_http)
        if self.adapter_config is not None:
            # A config holds what the adapter is told (tokens among it): a digest tells arms apart.
            data["adapter_config"] = config_digest(self.adapter_config)
        if self.adapter_config_path is not None:
            data["adapter_config"] = self.adapter_config_path
        if self.perturb:
            data["perturb"] = chain_spec(self.perturb)
        return data


def config_digest(config: Mapping[str, Any]) -> str:
    """``sha256:`` and 16 hex digits of the config's canonical JSON: equal configs, equal digests."""
    import hashlib
    import json

    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class ArmSelection:
    """The arms a run evaluates, in order (the control first), and which one the others are compared to."""

    arms: tuple[ArmSpec, ...]
    control: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(arm.name for arm in self.arms)


def did_you_mean(name: str, known: Sequence[str]) -> str:
    # Here: only a misspelt name pays for difflib.
    from difflib import get_close_matches

    close = get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_chain(text: str) -> tuple[Perturbation, ...]:
    """One ``--perturb`` value: ``kind:value`` perturbations chained with ``+``, in the order applied."""
    return tuple(parse_spec(part.strip()) for part in text.split("+"))


def select_arms(declared: Mapping[str, ArmSpec], arms: Sequence[str], perturbs: Sequence[str],
                control: str | None) -> ArmSelection | None:
    """The arms ``--arm``/``--perturb``/``--control`` select; None when none is asked for (a plain run).

    ``arms`` items are ``NAME`` (a declared arm, ``all`` or ``control``) or ``NAME=PATH`` (an arm
    whose adapter config is that file; the path already absolute). Raises UsageError naming the
    option for unknown or repeated names.
    """
    if not arms and not perturbs:
        # An option that needs arms given without any is refused by the command line, before planning.
        return None
    chosen: dict[str, ArmSpec] = {}
    plain_asked = False

    def add(arm: ArmSpec, option: str) -> None:
        if arm.name in chosen:
            raise UsageError(f"{option}: arm {arm.name!r} is selected twice")
        chosen[arm.name] = arm

    for text in arms:
        name, sep, path = text.partition("=")
        name = name.strip()
        if not name:
            raise UsageError(f"--arm {text!r}: give an arm name (NAME or NAME=ADAPTER_CONFIG.yaml)")
        if controls := control_characters(name):
            raise UsageError(f"--arm {inline(text)!r}: the arm name holds control characters ({controls}); "
                             "use visible characters only")
        if sep:
            if name in (CONTROL, ALL):
                raise UsageError(f"--arm {text}: {name!r} is reserved; pick another arm name")
            if not path:
                raise UsageError(f"--arm {text}: give the adapter config file after '='")
            add(ArmSpec(name, adapter_config_path=path), f"--arm {text}")
        elif name == CONTROL:
            plain_asked = True
        elif name == ALL:
            if not declared:
                raise UsageError("--arm all: config.yaml declares no arms (add an `arms:` mapping)")
            for arm in declared.values():
                if arm.name not in chosen:
                    chosen[arm.name] = arm
        elif name in declared:
            add(declared[name], f"--arm {text}")
        else:
            known = sorted(declared)
            listed = ", ".join(known) if known else "config.yaml declares none"
            raise UsageError(f"--arm {name}: unknown arm{did_you_mean(name, [*known, ALL, CONTROL])} "
                             f"(declared: {listed}; or NAME=ADAPTER_CONFIG.yaml)")
    for text in perturbs:
        chain = parse_chain(text)
        add(ArmSpec(chain_spec(chain), perturb=chain), f"--perturb {text}")
    if control is None or control == CONTROL:
        plain = ArmSpec(CONTROL)
        return ArmSelection((plain, *(a for a in chosen.values())), CONTROL)
    if control not in chosen and control in declared:
        raise UsageError(f"--control {control}: the arm is declared but not selected; add --arm {control}")
    if control not in chosen:
        raise UsageError(f"--control {control}: not a selected arm{did_you_mean(control, list(chosen))} "
                         f"(selected: {', '.join(chosen) or 'none'})")
    ordered = [chosen[control], *(a for n, a in chosen.items() if n != control)]
    if plain_asked:
        ordered.insert(1, ArmSpec(CONTROL))
    return ArmSelection(tuple(ordered), control)
