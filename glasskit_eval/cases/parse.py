"""Case files: parse and validate one ``cases/<name>.yaml`` into the frozen models of :mod:`.model`.

Validation collects every problem it can find in one pass; each names the
file, the YAML path and the line. Structural rules live here; rules that depend
on what a command selected (drafts, empty scopes) live in ``plan.schedule``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import Problem
from ..support.jsonvalues import type_name
from ..support.outside import control_characters, inline
from ..support.timevalues import format_time, same_time_key
from ..yamltext.source import PathKey, YamlDocument
from .checks import UNSET, Checker
from .model import (
    DEFAULT_EVERY_S,
    MAX_SAMPLES_PER_CASE,
    VIDEO_SUFFIXES,
    Case,
    CloudVideo,
    LocalVideo,
    SampleBlock,
    StreamGates,
    TargetSpec,
    Thresholds,
    VideoRef,
    block_count,
)
from .streams import STREAM_TARGET_KEYS, parse_stream, stream_keys_without_events

_CASE_KEYS = {"video", "description", "sampling", "sample_defaults", "workflow", "targets", "thresholds"}
_TARGET_KEYS = {"label", "config", "sample_defaults", "samples"} | STREAM_TARGET_KEYS
_BLOCK_KEYS = {"range", "at", "expect", "every_s", "field", "compare", "comment", "ignore", "clip"}
_CLOUD_VIDEO_KEYS = {"store", "key", "sha256"}
_THRESHOLD_KEYS = {"min_pass_rate", "max_failures", "per_target"}
#: Run-wide gates, so only in config.yaml (a case's latency or cost is not gated on its own).
_RUN_THRESHOLD_KEYS = {"max_p95_latency_s", "max_cost"}


def parse_thresholds(checker: Checker, value: Any, path: PathKey,
                     target_ids: set[str] | None) -> Thresholds | None:
    """Parse a ``thresholds`` mapping (case files and config.yaml share the shape)."""
    if value is None:
        return None
    run_wide = target_ids is None
    mapping = checker.section(value, path, "thresholds",
                              _THRESHOLD_KEYS | _RUN_THRESHOLD_KEYS if run_wide else _THRESHOLD_KEYS)
    if mapping is None:
        return None
    min_rate = _rate(checker, mapping, "min_pass_rate", path)
    limits = _limits(checker, mapping, sorted(_RUN_THRESHOLD_KEYS) if run_wide else (), path)
    max_failures = None
    if mapping.get("max_failures") is not None:
        raw = mapping["max_failures"]
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            checker.add((*path, "max_failures"), f"max_failures must be a nonnegative integer, got {raw!r}")
        else:
            max_failures = raw
    per_target: dict[str, float] = {}
    stream_gates: dict[str, StreamGates] = {}
    if "per_target" in mapping and mapping["per_target"] is not None:
        ppath = (*path, "per_target")
        targets = checker.mapping(mapping["per_target"], ppath, "per_target")
        for target_id, spec in (targets or {}).items():
            tpath = (*ppath, target_id)
            if target_ids is not None and target_id not in target_ids:
                checker.add(tpath, f"per_target names unknown target {target_id!r}; targets in this case: "
                            + ", ".join(sorted(target_ids)))
                continue
            tmap = checker.section(spec, tpath, f"per_target.{target_id}", {"min_pass_rate"} | _STREAM_GATE_KEYS)
            if tmap is None:
                continue
            rate = _rate(checker, tmap, "min_pass_rate", tpath)
            if rate is not None:
                per_target[target_id] = rate
            gates = _stream_gates(checker, tmap, tpath)
            if not gates.empty:
                stream_gates[target_id] = gates
    return Thresholds(min_pass_rate=min_rate, max_failures=max_failures, per_target=per_target or None,
                      stream_gates=stream_gates or None, **limits)


_STREAM_GATE_KEYS = {"min_recall", "max_false_alarms_per_min", "max_detection_latency_p95_s"}


def _stream_gates(checker: Checker, mapping: dict[str, Any], path: PathKey) -> StreamGates:
    """A stream target's gates in ``per_target.<t>``: a recall rate and two nonnegative limits."""
    limits = _limits(checker, mapping, ("max_false_alarms_per_min", "max_detection_latency_p95_s"), path)
    return StreamGates(min_recall=_rate(checker, mapping, "min_recall", path), **limits)


def _limits(checker: Checker, mapping: dict[str, Any], keys: Iterable[str], path: PathKey) -> dict[str, float]:
    """The nonnegative numbers ``mapping`` sets among ``keys``, each a problem where it is not one."""
    limits: dict[str, float] = {}
    for key in keys:
        raw = mapping.get(key)
        if raw is None:
            continue
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw < 0:
            checker.add((*path, key), f"{key} must be a nonnegative number, got {raw!r}")
        else:
            limits[key] = float(raw)
    return limits


def _rate(checker: Checker, mapping: dict[str, Any], key: str, path: PathKey) -> float | None:
    if key not in mapping or mapping[key] is None:
        return None
    raw = mapping[key]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not (0.0 <= raw <= 1.0):
        checker.add((*path, key), f"{key} must be a number from 0.0 to 1.0, got {raw!r}")
        return None
    return float(raw)


# --- case parsing ------------------------------------------------------------


def parse_case(doc: YamlDocument, path: Path, *,
               allow_empty: bool | Collection[str] = False) -> tuple[Case | None, list[Problem]]:
    """The case in ``doc`` and every problem found; ``allow_empty``: True, or the targets that may be empty."""
    c = Checker(doc)
    root = doc.value
    if root is None:
        c.add((), "case file is empty; it needs at least `video:` and `targets:`")
        return None, c.problems
    root = c.section(root, (), "a case file", _CASE_KEYS)
    if root is None:
        return None, c.problems

    video = _parse_video(c, root, path)
    description = None
    if root.get("description") is not None:
        description = c.text(root["description"], ("description",), "description")

    every_s = DEFAULT_EVERY_S
    if "sampling" in root and root["sampling"] is not None:
        sampling = c.mapping(root["sampling"], ("sampling",), "sampling")
        if sampling is not None:
            c.unknown_keys(sampling, {"every_s"}, ("sampling",))
            if sampling.get("every_s") is not None:
                parsed = c.positive_interval(sampling["every_s"], ("sampling", "every_s"))
                if parsed is not None:
                    every_s = parsed

    case_defaults = c.defaults(root.get("sample_defaults"), ("sample_defaults",))
    workflow = _parse_workflow(c, root.get("workflow"))

    targets: list[TargetSpec] = []
    raw_targets = root.get("targets", UNSET)
    if raw_targets is UNSET or raw_targets is None:
        c.add(("targets",), "a case needs `targets:`, a mapping of target id to target definition")
    else:
        mapping = c.mapping(raw_targets, ("targets",), "targets")
        if mapping is not None and not mapping:
            c.add(("targets",), "targets must contain at least one target")
        for index, (target_id, raw) in enumerate((mapping or {}).items()):
            may_be_empty = allow_empty if isinstance(allow_empty, bool) else str(target_id) in allow_empty
            target = _parse_target(c, str(target_id), index, raw, every_s, case_defaults,
                                   workflow.get(str(target_id), {}), may_be_empty)
            if target is not None:
                targets.append(target)

    _check_sample_cap(c, targets)
    # Declared ids, so a target that failed to parse is not also called unknown here.
    declared = {str(k) for k in raw_targets} if isinstance(raw_targets, dict) else set()
    thresholds = parse_thresholds(c, root.get("thresholds"), ("thresholds",), declared)

    # Checks run section by section; report them in the order a reader meets them.
    c.problems.sort(key=lambda problem: problem.line or 0)
    if c.problems or video is None:
        return None, c.problems
    case = Case(name=path.stem, path=path, video=video, description=description,
                targets=tuple(targets), thresholds=thresholds, document=doc)
    return case, c.problems


def _parse_video(c: Checker, root: dict[str, Any], path: Path) -> VideoRef | None:
    if "video" not in root or root["video"] is None:
        c.add(("video",), "a case needs `video:`, a path relative to the case file or a "
              "{store, key, sha256} cloud reference")
        return None
    raw = root["video"]
    if isinstance(raw, str):
        if not raw.strip():
            c.add(("video",), "video path must not be empty")
            return None
        # The suffix of the name as written: a DVC or git-annex link points at a suffixless blob.
        written = Path(raw)
        if written.suffix.lower() not in VIDEO_SUFFIXES:
            c.add(("video",), f"unsupported video suffix {written.suffix or '(none)'!r}; "
                  "supported: " + ", ".join(VIDEO_SUFFIXES))
            return None
        # realpath, not resolve(): a symlink loop must become a clear error later, not an exception.
        return LocalVideo(Path(os.path.realpath(path.parent / raw)))
    if not isinstance(raw, dict):
        c.add(("video",), f"video must be a path relative to the case file or a {{store, key, sha256}} "
              f"cloud reference, got {type_name(raw)}")
        return None
    mapping = raw
    c.unknown_keys(mapping, _CLOUD_VIDEO_KEYS, ("video",))
    values: dict[str, str] = {}
    for key in ("store", "key", "sha256"):
        if key not in mapping:
            c.add(("video", key), f"a cloud video reference needs `{key}`; copy the block printed by "
                  "`video-store upload`")
            continue
        text = c.text(mapping[key], ("video", key), key, nonempty=True)
        if text is not None:
            values[key] = text
    sha = values.get("sha256")
    if sha is not None:
        sha = values["sha256"] = sha.lower()
        if len(sha) != 64 or any(ch not in "0123456789abcdef" for ch in sha):
            c.add(("video", "sha256"), "sha256 must be a 64-character hexadecimal SHA-256 digest; copy "
                  "it as printed by `video-store upload`")
            return None
    object_key = values.get("key")
    if object_key is not None and Path(object_key).suffix.lower() not in VIDEO_SUFFIXES:
        c.add(("video", "key"), f"unsupported video suffix in key {object_key!r}; supported: "
              + ", ".join(VIDEO_SUFFIXES))
        return None
    if len(values) != 3:
        return None
    return CloudVideo(values["store"], values["key"], values["sha256"])


def _parse_workflow(c: Checker, raw: Any) -> dict[str, dict[str, Any]]:
    """Return workflow metadata per target id: {'label': ..., 'config': {...}}."""
    if raw is None:
        return {}
    mapping = c.mapping(raw, ("workflow",), "workflow")
    if mapping is None:
        return {}
    c.unknown_keys(mapping, {"targets"}, ("workflow",))
    entries = mapping.get("targets")
    if entries is None:
        return {}
    if not isinstance(entries, list):
        c.add(("workflow", "targets"), f"workflow.targets must be a list, got {type_name(entries)}")
        return {}
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(entries):
        path: PathKey = ("workflow", "targets", i)
        emap = c.mapping(entry, path, "a workflow target")
        if emap is None:
            continue
        target_id = emap.get("id")
        if not isinstance(target_id, str) or not target_id:
            c.add((*path, "id"), "each workflow target needs a string `id`")
            continue
        if target_id in out:
            c.add((*path, "id"), f"duplicate workflow target id {target_id!r}")
            continue
        label = emap.get("label")
        if label is not None and not isinstance(label, str):
            c.add((*path, "label"), f"label must be a string, got {type_name(label)}")
        meta = {k: v for k, v in emap.items() if k not in ("id", "label")}
        c.json_like(meta, path, "workflow target metadata")
        out[target_id] = {"label": label if isinstance(label, str) else None, "config": meta}
    return out


def _parse_target(c: Checker, target_id: str, index: int, raw: Any, every_s: Fraction,
                  case_defaults: dict[str, Any], workflow: dict[str, Any],
                  allow_empty: bool) -> TargetSpec | None:
    path: PathKey = ("targets", target_id)
    if not target_id.strip():
        c.add(path, "target ids must not be empty")
        return None
    if controls := control_characters(target_id):
        c.add(path, f"target id {inline(target_id)!r} holds control characters ({controls}); ids are printed "
              "in logs, tables and CI annotations: use visible characters only")
        return None
    mapping = c.section(raw, path, f"target {target_id!r}", _TARGET_KEYS)
    if mapping is None:
        return None
    label = workflow.get("label")
    if mapping.get("label") is not None:
        label = c.text(mapping["label"], (*path, "label"), "label")
    config: dict[str, Any] = dict(workflow.get("config", {}))
    if mapping.get("config") is not None:
        own = c.mapping(mapping["config"], (*path, "config"), "config")
        if own is not None and c.json_like(own, (*path, "config"), "config"):
            config.update(own)
    defaults = dict(case_defaults)
    defaults.update(c.defaults(mapping.get("sample_defaults"), (*path, "sample_defaults")))

    if "events" in mapping:
        stream = parse_stream(c, path, mapping, defaults, allow_empty)
        return TargetSpec(id=target_id, index=index, label=label, config=config, blocks=(), stream=stream)
    stream_keys_without_events(c, path, mapping)
    blocks: list[SampleBlock] = []
    samples = mapping.get("samples", UNSET)
    if samples is UNSET or samples is None:
        c.add((*path, "samples"), "a target needs `samples:`, a list of sample blocks")
    elif not isinstance(samples, list):
        c.add((*path, "samples"), f"samples must be a list, got {type_name(samples)}")
    else:
        if not samples and not allow_empty:
            c.add((*path, "samples"), "samples is empty; add a sample block or pass --allow-empty")
        for i, raw_block in enumerate(samples):
            block = _parse_block(c, target_id, i, raw_block, (*path, "samples", i), every_s, defaults)
            if block is not None:
                blocks.append(block)
        _check_overlaps(c, target_id, blocks, path)
    return TargetSpec(id=target_id, index=index, label=label, config=config, blocks=tuple(blocks))


def _parse_block(c: Checker, target_id: str, index: int, raw: Any, path: PathKey,
                 default_every: Fraction, defaults: dict[str, Any]) -> SampleBlock | None:
    mapping = c.mapping(raw, path, "a sample block")
    if mapping is None:
        return None
    before = len(c.problems)
    c.unknown_keys(mapping, _BLOCK_KEYS, path)
    has_range, has_at = "range" in mapping, "at" in mapping
    if has_range == has_at:
        c.add(path, "a sample block needs exactly one of `range: [start, end]` or `at:`")
        return None

    ignore = None
    if mapping.get("ignore") is not None:
        ignore = c.text(mapping["ignore"], (*path, "ignore"), "ignore", nonempty=True)
    comment = None
    if mapping.get("comment") is not None:
        comment = c.text(mapping["comment"], (*path, "comment"), "comment")

    every: Fraction | None = None
    rng: tuple[Fraction, Fraction] | None = None
    times: tuple[Fraction, ...] = ()
    if has_range:
        every = default_every
        if mapping.get("every_s") is not None:
            every = c.positive_interval(mapping["every_s"], (*path, "every_s"))
        raw_range = mapping["range"]
        rpath = (*path, "range")
        if not isinstance(raw_range, list) or len(raw_range) != 2:
            c.add(rpath, "range must be a two-element list [start, end] in seconds")
        else:
            start = c.time(raw_range[0], (*rpath, 0), "range start")
            end = c.time(raw_range[1], (*rpath, 1), "range end")
            if start is not None and end is not None:
                if end <= start:
                    c.add(rpath, f"range end must be greater than start, got [{raw_range[0]}, {raw_range[1]}]")
                else:
                    rng = (start, end)
    else:
        if mapping.get("every_s") is not None:
            c.add((*path, "every_s"), "every_s only applies to range blocks; remove it from this `at` block")
        raw_at = mapping["at"]
        apath = (*path, "at")
        values = raw_at if isinstance(raw_at, list) else [raw_at]
        if isinstance(raw_at, list) and not raw_at:
            c.add(apath, "at list must not be empty")
        parsed: list[Fraction] = []
        for i, item in enumerate(values):
            t = c.time(item, (*apath, i) if isinstance(raw_at, list) else apath, "at")
            if t is not None:
                parsed.append(t)
        seen: dict[Fraction, Fraction] = {}
        for t in parsed:
            key = same_time_key(t)
            if key in seen:
                c.add(apath, f"duplicate sample time {format_time(t)} in at list"
                      + ("" if seen[key] == t else f" (same as {format_time(seen[key])} to 9 decimals)"))
            else:
                seen[key] = t
        times = tuple(sorted(seen.values()))

    has_expect, expect = c.expectation(mapping, path)

    field = c.given(mapping, "field", c.field_path, path, defaults.get("field"))
    compare = c.given(mapping, "compare", c.compare, path, defaults.get("compare"))
    if has_expect and compare is not None:
        c.expect_fits(compare.mode, expect, (*path, "expect"))
    clip = c.given(mapping, "clip", c.clip, path, defaults.get("clip"))

    if len(c.problems) > before:
        return None
    return SampleBlock(target_id=target_id, index=index, times=times, range=rng, every_s=every,
                       has_expect=has_expect, expect=expect, field=field, compare=compare,
                       comment=comment, ignore=ignore, clip=clip)


def _check_sample_cap(c: Checker, targets: list[TargetSpec]) -> None:
    # Counted per block from the declaration, so a pathological range is refused
    # without ever materialising its samples.
    total = 0
    for target in targets:
        for block in target.blocks:
            total += block_count(block)
            if total > MAX_SAMPLES_PER_CASE:
                c.add(("targets", target.id, "samples", block.index),
                      f"this block would expand the case to {total} samples, more than the limit of "
                      f"{MAX_SAMPLES_PER_CASE} per case; use a larger every_s, a shorter range, "
                      "or split the case")
                return


def _check_overlaps(c: Checker, target_id: str, blocks: list[SampleBlock], path: PathKey) -> None:
    # Overlap is judged on what was declared (points and half-open intervals), not on
    # expanded samples, so two overlapping ranges are rejected even if their grids miss.
    # One sort and one sweep: a target with 10,000 declared times stays fast.
    spans: list[tuple[Fraction, int, Fraction | None, int]] = []
    for block in blocks:
        if block.range is not None:
            spans.append((block.range[0], 1, block.range[1], block.index))
        else:
            spans.extend((t, 0, None, block.index) for t in block.times)
    spans.sort(key=lambda s: (s[0], s[1], s[3]))
    cover_end: Fraction | None = None
    cover_block = -1
    last_point: Fraction | None = None
    last_point_block = -1
    reported: set[int] = set()
    for start, _kind, end, index in spans:
        other = None
        if cover_end is not None and start < cover_end and cover_block != index:
            other = cover_block
        elif (last_point is not None and last_point_block != index
              and same_time_key(last_point) == same_time_key(start)):
            other = last_point_block
        if other is not None:
            first, second = sorted((other, index))
            if second not in reported:
                reported.add(second)
                c.add((*path, "samples", second),
                      f"overlaps samples[{first}] of target {target_id!r} at {format_time(start)}s; each "
                      "time may be declared once per target (ranges are half-open: [start, end))")
        if end is None:
            last_point, last_point_block = start, index
        elif cover_end is None or end > cover_end:
            cover_end, cover_block = end, index
