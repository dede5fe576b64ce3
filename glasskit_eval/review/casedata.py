"""Case files as the review page sees them: listing, status and detail.

Case ids are file stems taken from the ``cases/`` listing at request time; a
request names an id and gets the listed path, so no request text ever becomes
part of a filesystem path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..cases.model import DEFAULT_WINDOW, Case, LocalVideo, SampleBlock, TargetSpec, block_times
from ..cases.parse import parse_case
from ..compare.values import infer_mode
from ..errors import Problem, VideoError
from ..plan.pinfiles import pin_file_path
from ..yamltext.source import YamlDocument, load_yaml_text
from .clips import spec_json
from .errors import NotFound
from .media import content_type


def list_case_paths(root: Path) -> dict[str, Path]:
    cases_dir = root / "cases"
    try:
        entries = sorted(cases_dir.iterdir())
    except OSError:
        return {}
    return {p.stem: p for p in entries if p.suffix == ".yaml" and p.is_file()}


def case_path(root: Path, case_id: str) -> Path:
    path = list_case_paths(root).get(case_id)
    if path is None:
        raise NotFound(f"no case {case_id!r} in {root / 'cases'}")
    return path


def revision_of(data: bytes) -> str:
    # The same hash casewrite checks before replacing the file.
    from ..cases.write import content_hash

    return content_hash(data)


@dataclass(frozen=True)
class LoadedCase:
    id: str
    path: Path
    text: str
    revision: str
    case: Case | None
    problems: tuple[Problem, ...]


def load(root: Path, case_id: str) -> LoadedCase:
    path = case_path(root, case_id)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NotFound(f"cannot read {path}: {exc.strerror or exc}") from None
    return loaded_from(case_id, path, data)


class _Parsed:
    """The latest parse of each case file, by content hash: a file of 100,000 events is parsed once.

    Keyed by the hash of the bytes just read, so a file changed by anyone (an editor, another
    server) is parsed afresh; the revision the page and the writer check is that same hash.
    The parsed case is shared read-only (writers build their data with ``plain``, a copy).
    """

    KEEP = 8

    def __init__(self) -> None:
        self._cases: dict[tuple[str, Path], LoadedCase] = {}
        self._lock = threading.Lock()
        #: Whole parses made (a test bounds the parses of a save).
        self.parses = 0

    def get(self, case_id: str, path: Path, revision: str) -> LoadedCase | None:
        with self._lock:
            hit = self._cases.get((case_id, path))
            return hit if hit is not None and hit.revision == revision else None

    def put(self, loaded: LoadedCase) -> LoadedCase:
        with self._lock:
            self._cases.pop((loaded.id, loaded.path), None)
            self._cases[(loaded.id, loaded.path)] = loaded
            while len(self._cases) > self.KEEP:
                del self._cases[next(iter(self._cases))]
        return loaded


PARSED = _Parsed()


def loaded_from(case_id: str, path: Path, data: bytes) -> LoadedCase:
    """The case as ``data`` says, for ``path``: text, revision and model all describe these bytes."""
    revision = revision_of(data)
    cached = PARSED.get(case_id, path, revision)
    if cached is not None:
        return cached
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return LoadedCase(case_id, path, "", revision, None, (Problem(str(path), "", "file is not UTF-8 text"),))
    # Empty targets load (a skeleton is labelled one target at a time); the badge flags them.
    PARSED.parses += 1
    doc, problems = load_yaml_text(text, str(path))
    case = None
    if not problems:
        case, problems = parse_case(doc, path, allow_empty=True)
    return PARSED.put(LoadedCase(case_id, path, text, revision, case, tuple(problems)))


def checked(case_id: str, path: Path, text: str, case: Case) -> LoadedCase:
    """``text``, already parsed and checked as ``case`` (a write's candidate): what the file now holds."""
    return PARSED.put(LoadedCase(case_id, path, text, revision_of(text.encode("utf-8")), case, ()))


def draft_count(case: Case) -> int:
    return sum(1 for t in case.targets for b in t.blocks if not b.has_expect and b.ignore is None)


def status_of(loaded: LoadedCase) -> dict[str, Any]:
    if loaded.case is None or loaded.problems:
        return {"status": "invalid", "drafts": 0, "empty_targets": [], "problems": [_problem_json(p) for p in loaded.problems]}

    drafts = draft_count(loaded.case)
    empty = empty_targets(loaded.case)
    # `validate` refuses both; the page may hold them while labelling, but never calls them ready.
    return {"status": "drafts" if drafts or empty else "ready", "drafts": drafts,
            "empty_targets": empty, "problems": []}


def _problem_json(problem: Problem) -> dict[str, Any]:
    return {"text": str(problem), **problem.to_json()}


def case_summary(loaded: LoadedCase) -> dict[str, Any]:
    case = loaded.case
    return {
        "id": loaded.id,
        "file_name": loaded.path.name,
        "description": case.description if case else None,
        "target_count": len(case.targets) if case else 0,
        "sample_count": sum(len(block_times(b)) for t in case.targets for b in t.blocks) if case else 0,
        **status_of(loaded),
    }


def list_cases(root: Path) -> list[dict[str, Any]]:
    out = []
    for case_id in list_case_paths(root):
        try:
            out.append(case_summary(load(root, case_id)))
        except NotFound:
            continue  # removed between listing and reading
    return out


def empty_targets(case: Case) -> list[str]:
    """Targets with nothing to evaluate: no sample blocks, or (a stream target) no events."""
    return [t.id for t in case.targets if (not t.stream.events if t.stream is not None else not t.blocks)]


def video_path(case: Case) -> Path:
    if isinstance(case.video, LocalVideo):
        return case.video.path
    # Cloud videos come from the per-user cache, downloaded on first use like `run` does.
    from ..cases.evaldir import load_eval_config
    from ..plan.videos import video_resolver

    eval_root = case.path.parent.parent
    config, problems = load_eval_config(eval_root / "config.yaml")
    if problems:
        raise VideoError("; ".join(str(p) for p in problems))
    import sys

    return video_resolver(lambda message: print(message, file=sys.stderr))(case, config)


def video_json(case_id: str, case: Case) -> dict[str, Any]:
    from ..video.probe import probe

    out: dict[str, Any] = {"url": f"/api/cases/{case_id}/video", "error": None}
    try:
        path = video_path(case)
        out.update(display_path=path.name, content_type=content_type(path))
        info = probe(path)
    except VideoError as exc:
        out["error"] = str(exc)
        return out
    out.update(
        width=info.width, height=info.height, frame_count=info.frame_count,
        duration_s=float(info.end_time), last_frame_s=float(info.last_frame_time),
        average_rate=float(info.average_rate) if info.average_rate else None,
        variable_rate=info.variable_rate, codec=info.codec, description=info.describe(),
    )
    return out


def _raw_block(doc: YamlDocument, target_id: str, index: int) -> Any:
    try:
        return doc.value["targets"][target_id]["samples"][index]
    except (KeyError, IndexError, TypeError):
        return None


def _num(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def block_json(doc: YamlDocument, block: SampleBlock) -> dict[str, Any]:
    raw = _raw_block(doc, block.target_id, block.index)
    mode = block.compare.mode if block.compare else (infer_mode(block.expect) if block.has_expect else None)
    return {
        "index": block.index,
        "kind": "range" if block.range is not None else "at",
        "raw": raw,
        "line": doc.lines.get(("targets", block.target_id, "samples", block.index)),
        "times": [float(t) for t in block_times(block)],
        "range": [float(block.range[0]), float(block.range[1])] if block.range else None,
        "every_s": _num(block.every_s),
        "has_expect": block.has_expect,
        "expect": block.expect,
        "field": block.field,
        "compare": {"mode": block.compare.mode, "tolerance": block.compare.tolerance} if block.compare else None,
        "effective_mode": mode,
        "comment": block.comment,
        "ignore": block.ignore,
        "draft": not block.has_expect and block.ignore is None,
        "source": block.source(),
        # Resolved (a default's clip too); the frames are computed per sample, on request.
        "clip": spec_json(block.clip),
    }


def _defaults_json(doc: YamlDocument, target_id: str) -> dict[str, Any]:
    root = doc.value if isinstance(doc.value, dict) else {}
    case_defaults = root.get("sample_defaults") or {}
    target = (root.get("targets") or {}).get(target_id) or {}
    own = target.get("sample_defaults") or {} if isinstance(target, dict) else {}
    merged = dict(case_defaults) if isinstance(case_defaults, dict) else {}
    merged.update(own if isinstance(own, dict) else {})
    return {"field": merged.get("field"), "compare": merged.get("compare")}


def stream_json(doc: YamlDocument, target: TargetSpec) -> dict[str, Any] | None:
    """A stream target's events (file order) and quiet spans.

    Each event is its mapping as written: the page works out windows from it and the
    target's ``window``, and a list of 100,000 events is sent (and read) several times
    sooner without a copy of each onset, window, line and expectation beside it.
    """
    stream = target.stream
    if stream is None:
        return None
    mapping = doc.value["targets"][target.id]
    raws = mapping.get("events") or []
    window = mapping.get("stream") or {}
    default = window.get("window") if isinstance(window, dict) else None
    return {
        "every_s": _num(stream.every_s),
        "window": default if isinstance(default, list) else [float(DEFAULT_WINDOW[0]), float(DEFAULT_WINDOW[1])],
        # A case with problems has no model, so every event parsed: one entry per raw event.
        "events": [{"raw": raw} for raw in raws],
        "quiet": [[float(a), float(b)] for a, b in stream.quiet or ()],
        "field": stream.field,
    }


def case_detail(loaded: LoadedCase, markers: list[dict[str, Any]] | None = None,
                emissions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    from .report import annotate, annotate_emissions

    out: dict[str, Any] = {
        **case_summary(loaded),
        "revision": loaded.revision,
        "source": loaded.text,
        "editable": loaded.case is not None and not loaded.problems,
        "targets": [],
        "video": None,
        "every_s": None,
        "markers": annotate(markers or [], loaded.case),
        # A report's stream emissions and missed events (``--report``), each marked ``changed``
        # when the case file no longer has the event or window the run scored.
        "emissions": annotate_emissions(emissions or [], loaded.case),
        # Only whether there is a lock (one stat): the statuses cost decoding, so the page
        # asks /pins for them, and only for a locked case.
        "frame_lock": None,
    }
    case = loaded.case
    if case is None:
        return out
    sampling = case.document.value.get("sampling") if isinstance(case.document.value, dict) else None
    every = sampling.get("every_s") if isinstance(sampling, dict) else None
    out["every_s"] = every if isinstance(every, (int, float)) and not isinstance(every, bool) else 0.5
    out["video"] = video_json(loaded.id, case)
    lock = pin_file_path(case)
    out["frame_lock"] = lock.name if lock.is_file() else None
    out["targets"] = [
        {"id": t.id, "label": t.label, "defaults": _defaults_json(case.document, t.id),
         "blocks": [block_json(case.document, b) for b in t.blocks], "stream": stream_json(case.document, t)}
        for t in case.targets
    ]
    return out
