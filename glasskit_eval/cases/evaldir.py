"""The eval directory: ``cases/``, ``config.yaml`` and ``adapter.yaml``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem, UsageError, ValidationError
from ..support.jsonvalues import json_problem
from ..yamltext.source import load_yaml_file
from .checks import Checker, unknown_target_problem
from .model import Case, Thresholds
from .parse import parse_case, parse_thresholds

if TYPE_CHECKING:
    from ..arms.spec import ArmSpec
    from ..store.config import VideoStoreConfig

_CONFIG_KEYS = {"thresholds", "video_stores", "run", "arms"}
#: config.yaml ``run:`` defaults, used when the command line does not give the option.
_RUN_KEYS = {"timeout_s"}
_STORE_KEYS = {"type", "bucket", "region", "endpoint_url", "public_base_url",
               "access_key_id_env", "secret_access_key_env", "session_token_env"}


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """config.yaml: eval-level thresholds, video stores, the call timeout and declared arms."""

    thresholds: Thresholds | None = None
    video_stores: Mapping[str, VideoStoreConfig] = field(default_factory=dict)
    #: ``run: timeout_s``: the per-call timeout when ``--timeout`` is not given.
    run_timeout_s: float | None = None
    #: The config.yaml line of each ``thresholds.per_target`` entry, for messages about it.
    per_target_lines: Mapping[str, int] = field(default_factory=dict)
    #: The config.yaml line of ``thresholds:`` (where a failed eval-level gate is annotated).
    thresholds_line: int | None = None
    #: ``arms:``: declared arms by name (run only when ``--arm`` selects them).
    arms: Mapping[str, ArmSpec] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalDir:
    """An eval directory: its root, its config.yaml and its case files."""

    root: Path
    config: EvalConfig
    case_paths: tuple[Path, ...]

    @property
    def cases_dir(self) -> Path:
        return self.root / "cases"

    def select_case_paths(self, case: str | None) -> tuple[Path, ...]:
        if case is None:
            return self.case_paths
        # ValidationError rather than UsageError: like upstream, `validate --case nosuch`
        # reports "Validation failed" (exit 1) while run and list-samples exit 2.
        if "/" in case or "\\" in case:
            raise ValidationError([Problem(str(self.cases_dir), "", f"--case takes a case filename or "
                                           f"stem under cases/, not a path: {case!r}")])
        stem = case[:-5] if case.endswith(".yaml") else case
        for path in self.case_paths:
            if path.stem == stem:
                return (path,)
        known = ", ".join(p.stem for p in self.case_paths) or "(none)"
        raise ValidationError([Problem(str(self.cases_dir), "", f"unknown case {case!r}; cases: {known}")])


def open_eval_dir(path: str | Path) -> EvalDir:
    """Locate cases and load ``config.yaml``; raises ValidationError listing every problem."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise ValidationError([Problem(str(root), "", "eval directory does not exist")],
                              hint="Pass --eval-dir pointing at the directory that holds cases/.")
    cases_dir = root / "cases"
    if not cases_dir.is_dir():
        raise ValidationError([Problem(str(cases_dir), "", "cases/ directory is missing")],
                              hint="Create <eval-dir>/cases/ and put one .yaml case file per video in it.")
    problems: list[Problem] = []
    case_paths: list[Path] = []
    for entry in sorted(cases_dir.iterdir()):
        if not entry.is_file() or entry.suffix.lower() not in (".yaml", ".yml"):
            continue  # subdirectories, videos and notes are not case files
        if entry.suffix == ".yaml":
            case_paths.append(entry)
        else:
            # Refused rather than skipped: a silently ignored case would let CI pass untested.
            problems.append(Problem(str(entry), "", "case files must use the lowercase .yaml suffix; "
                                    f"rename it to {entry.stem}.yaml"))
    problems.extend(misnamed_yml_problems(root, "config"))
    config, config_problems = load_eval_config(root / "config.yaml")
    problems.extend(config_problems)
    if problems:
        raise ValidationError(problems)
    return EvalDir(root=root, config=config, case_paths=tuple(case_paths))


def misnamed_yml_problems(root: Path, stem: str) -> list[Problem]:
    """``<stem>.yml`` next to ``<stem>.yaml``: refused, since only ``.yaml`` is read.

    Ignoring it silently would drop its gates or adapter config without a word, and CI
    would pass with checks nobody ran.
    """
    stray = root / f"{stem}.yml"
    if not stray.is_file():
        return []
    if (root / f"{stem}.yaml").exists():
        todo = f"merge it into {stem}.yaml and delete it"
    else:
        todo = f"rename it to {stem}.yaml"
    return [Problem(str(stray), "", f"found {stem}.yml, but only {stem}.yaml is read: {todo}")]


def load_eval_config(path: Path) -> tuple[EvalConfig, list[Problem]]:
    if not path.exists():
        return EvalConfig(), []
    doc, problems = load_yaml_file(path)
    if problems:
        return EvalConfig(), problems
    if doc.value is None:
        return EvalConfig(), []
    c = Checker(doc)
    root = c.section(doc.value, (), "config.yaml", _CONFIG_KEYS)
    if root is None:
        return EvalConfig(), c.problems
    thresholds = parse_thresholds(c, root.get("thresholds"), ("thresholds",), None)
    stores: dict[str, VideoStoreConfig] = {}
    raw_stores = root.get("video_stores")
    if raw_stores is not None:
        mapping = c.mapping(raw_stores, ("video_stores",), "video_stores")
        for name, raw in (mapping or {}).items():
            store = _parse_store(c, str(name), raw)
            if store is not None:
                stores[str(name)] = store
    run_timeout = _parse_run(c, root.get("run"))
    from .armdecl import parse_arms

    arms = parse_arms(c, root.get("arms"), path.parent)
    c.problems.sort(key=lambda problem: problem.line or 0)
    lines = {target: doc.line(("thresholds", "per_target", target)) or 0
             for target in ((thresholds.per_target or {}) if thresholds is not None else {})}
    return EvalConfig(thresholds=thresholds, video_stores=stores, run_timeout_s=run_timeout,
                      per_target_lines=lines, thresholds_line=doc.lines.get(("thresholds",)), arms=arms), c.problems


def _parse_run(c: Checker, raw: Any) -> float | None:
    if raw is None:
        return None
    mapping = c.mapping(raw, ("run",), "run")
    if mapping is None:
        return None
    c.unknown_keys(mapping, _RUN_KEYS, ("run",))
    value = mapping.get("timeout_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        c.add(("run", "timeout_s"), f"timeout_s must be a number of seconds greater than zero, got {value!r}")
        return None
    return float(value)


def _parse_store(c: Checker, name: str, raw: Any) -> VideoStoreConfig | None:
    # Here: most evals keep their videos on disk and declare no store.
    from ..store.config import VideoStoreConfig
    from ..store.urls import secret_parts

    path = ("video_stores", name)
    mapping = c.mapping(raw, path, f"video store {name!r}")
    if mapping is None:
        return None
    before = len(c.problems)
    c.unknown_keys(mapping, _STORE_KEYS, path)
    values: dict[str, str] = {}
    for key, raw in mapping.items():
        if key in _STORE_KEYS and raw is not None:
            text = c.text(raw, (*path, key), key, nonempty=True)
            if text is not None:
                values[key] = text
    if values.get("type", "s3") != "s3":
        c.add((*path, "type"), f"unsupported store type {values['type']!r}; only s3 is supported")
    if mapping.get("bucket") is None:
        c.add((*path, "bucket"), "a video store needs `bucket`")
    for key in ("endpoint_url", "public_base_url"):
        secret = secret_parts(values.get(key, ""))
        if secret:
            # The value is never echoed: it may hold a password or a signed token.
            c.add((*path, key), f"{key} must not contain {' or '.join(secret)}; give the bare URL and put "
                  "credentials in access_key_id_env / secret_access_key_env")
    if ("access_key_id_env" in values) != ("secret_access_key_env" in values):
        c.add(path, "access_key_id_env and secret_access_key_env must be set together")
    if len(c.problems) > before:
        return None
    return VideoStoreConfig(name=name, **values)


def load_cases(eval_dir: EvalDir, paths: tuple[Path, ...], *, allow_empty: bool,
               targets: tuple[str, ...] = ()) -> list[Case]:
    """Load the given case files, raising one ValidationError with every problem found.

    With ``targets`` (``--target``), a file whose ``targets:`` mapping declares none of them
    is skipped before its schema is checked, as upstream does: a broken case about other
    targets does not stop work on these.
    """
    cases: list[Case] = []
    problems: list[Problem] = []
    # Every target the files name, skipped files included: an unknown --target lists them.
    declared: set[str] = set()
    for path in paths:
        doc, yaml_problems = load_yaml_file(path)
        if yaml_problems:
            problems.extend(yaml_problems)
            continue
        declared.update(_declared_targets(doc.value))
        if targets and not _may_declare(doc.value, targets):
            continue
        case, case_problems = parse_case(doc, path, allow_empty=allow_empty)
        problems.extend(case_problems)
        if case is not None:
            problems.extend(_check_store_reference(case, eval_dir.config))
            cases.append(case)
    if not paths and not allow_empty:
        problems.append(Problem(str(eval_dir.cases_dir), "", "no case files (*.yaml) found; add one "
                                "or pass --allow-empty"))
    if problems:
        raise ValidationError(problems)
    missing = [t for t in targets if t not in declared]
    if missing:
        scope = f"case {paths[0].stem!r}" if len(paths) == 1 else "the selected cases"
        raise ValidationError([unknown_target_problem(str(eval_dir.cases_dir), scope, missing[0], declared)])
    return cases


def _declared_targets(root: Any) -> list[str]:
    declared = root.get("targets") if isinstance(root, dict) else None
    return [str(key) for key in declared] if isinstance(declared, dict) else []


def _may_declare(root: Any, targets: tuple[str, ...]) -> bool:
    """False only when the file clearly declares none of ``targets`` (its targets are a mapping)."""
    declared = root.get("targets") if isinstance(root, dict) else None
    if not isinstance(declared, dict):
        return True  # cannot tell: load it and let its problems be reported
    return any(str(key) in targets for key in declared)


def _check_store_reference(case: Case, config: EvalConfig) -> list[Problem]:
    from .model import CloudVideo

    if isinstance(case.video, CloudVideo) and case.video.store not in config.video_stores:
        known = ", ".join(sorted(config.video_stores)) or "none are configured"
        return [case.document.problem(("video", "store"),
                                      f"unknown video store {case.video.store!r} ({known}); define it "
                                      "under video_stores in <eval-dir>/config.yaml")]
    return []


def load_adapter_config(eval_dir: Path, explicit: str | None) -> dict[str, Any]:
    """``--adapter-config`` (YAML or JSON object) or the discovered ``adapter.yaml``, else {}."""
    path = Path(explicit).expanduser() if explicit else eval_dir / "adapter.yaml"
    if explicit is None:
        stray = misnamed_yml_problems(eval_dir, "adapter")
        if stray:
            raise ValidationError(stray, hint="Or pass it explicitly with --adapter-config.")
        if not path.exists():
            return {}
    if path.is_dir():
        raise UsageError(f"adapter config {path} is a directory; it must be a YAML or JSON file")
    if not path.is_file():
        raise UsageError(f"adapter config {path} does not exist; check --adapter-config")
    if path.suffix.lower() == ".json":
        import json

        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValidationError([Problem(str(path), "", f"invalid JSON: {exc}")]) from None
    else:
        doc, problems = load_yaml_file(path)
        if problems:
            raise ValidationError(problems)
        value = doc.value
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError([Problem(str(path), "", "adapter config must be a mapping (YAML or JSON object)")])
    problem = json_problem(value)
    if problem is not None:
        raise ValidationError([Problem(str(path), "", f"adapter config must be JSON-like: {problem}")])
    return value
