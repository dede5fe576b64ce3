"""config.yaml ``arms:``: named arms, each a few changes to the run's adapter (see ``arms.spec``).

Checked like every config key (located problems, every one reported); a relative
``adapter_config`` path is taken relative to the eval directory. A declared arm is only run
when ``--arm`` selects it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..arms.perturb import Perturbation, parse_mapping
from ..arms.spec import ADAPTER_KEYS, ALL, ARM_KEYS, CONTROL, ArmSpec
from ..errors import UsageError
from ..support.outside import control_characters, inline
from .checks import Checker


def parse_arms(c: Checker, raw: Any, root: Path) -> dict[str, ArmSpec]:
    """The ``arms:`` mapping's arms by name (those with problems left out, the problems recorded)."""
    if raw is None:
        return {}
    mapping = c.mapping(raw, ("arms",), "arms")
    if mapping is None:
        return {}
    arms: dict[str, ArmSpec] = {}
    for key, value in mapping.items():
        name = str(key)
        path = ("arms", key)
        if name in (CONTROL, ALL) or not name.strip() or "=" in name:
            c.add(path, f"arm name {name!r} is reserved or invalid; `control` is the plain adapter and "
                  "`all` selects every arm (names may not contain '=')")
            continue
        if controls := control_characters(name):
            c.add(path, f"arm name {inline(name)!r} holds control characters ({controls}); arm names are "
                  "printed in logs, tables and CI annotations: use visible characters only")
            continue
        arm = _parse_arm(c, name, value, path, root)
        if arm is not None:
            arms[name] = arm
    return arms


def _parse_arm(c: Checker, name: str, value: Any, path: tuple[Any, ...], root: Path) -> ArmSpec | None:
    fields = c.section(value if value is not None else {}, path, f"arm {name!r}", set(ARM_KEYS))
    if fields is None:
        return None
    before = len(c.problems)
    values: dict[str, Any] = {}
    for key in ADAPTER_KEYS:
        if fields.get(key) is not None:
            values[key] = c.text(fields[key], (*path, key), key, nonempty=True)
    kinds = [key for key in ADAPTER_KEYS if key in values]
    if len(kinds) > 1:
        c.add(path, f"{' and '.join(kinds)} are mutually exclusive; an arm names one adapter")
    config = fields.get("adapter_config")
    if isinstance(config, str) and config.strip():
        values["adapter_config_path"] = str((root / Path(config).expanduser()).absolute())
    elif isinstance(config, dict):
        if c.json_like(config, (*path, "adapter_config"), "adapter_config"):
            values["adapter_config"] = config
    elif config is not None:
        c.add((*path, "adapter_config"), "adapter_config must be a mapping or the path of a YAML or JSON file")
    values["perturb"] = _parse_perturb(c, fields.get("perturb"), (*path, "perturb"))
    if len(c.problems) > before:
        return None
    if not values["perturb"] and not any(k in values for k in (*ADAPTER_KEYS, "adapter_config",
                                                               "adapter_config_path")):
        c.add(path, f"arm {name!r} changes nothing; give it an adapter, an adapter_config or a perturb list")
        return None
    return ArmSpec(name, **values)


def _parse_perturb(c: Checker, raw: Any, path: tuple[Any, ...]) -> tuple[Perturbation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        c.add(path, "perturb must be a non-empty list of {kind: value} items, e.g. [{brightness: 0.4}, {noise: 8}]")
        return ()
    chain = []
    for index, item in enumerate(raw):
        try:
            chain.append(parse_mapping(item, "perturb item"))
        except UsageError as exc:
            c.add((*path, index), str(exc))
    return tuple(chain)
