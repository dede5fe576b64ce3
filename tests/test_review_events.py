"""review: a stream target's events on the page (detail, report emissions) and their writes (review/edits.save_events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import load_case, make_clip_case
from reportkit import report_of

from glasskit_eval.review import casedata
from glasskit_eval.review.edits import Revisions, restore_text, save_events
from glasskit_eval.review.errors import ApiError
from glasskit_eval.review.report import annotate_emissions, load_emissions

CASE = """\
video: clip.mp4
targets:
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.5]}
    events:
      - at: 0.3   # the first boil
        expect: boiling
      - at: 1.0
        expect: boiling
        window: [-0.1, 0.3]
    quiet: [[0, 0.2]]
  door:
    samples:
      - at: 0.5
        expect: closed
"""


def make(tmp_path: Path, text: str = CASE) -> tuple[Path, Path]:
    path = make_clip_case(tmp_path, text)
    return path.parent.parent, path


def revision(root: Path) -> str:
    return casedata.load(root, "clip").revision


def save(root: Path, events: list[dict[str, Any]], target: str = "pan") -> Any:
    return save_events(root, "clip", target, {"revision": revision(root), "events": events})


def refused(root: Path, events: list[Any], target: str = "pan", rev: str | None = None) -> ApiError:
    with pytest.raises(ApiError) as info:
        save_events(root, "clip", target, {"revision": rev or revision(root), "events": events})
    return info.value


def test_detail_lists_events_with_windows_and_quiet_spans(tmp_path: Path) -> None:
    root, _path = make(tmp_path)
    detail = casedata.case_detail(casedata.load(root, "clip"))
    assert detail["status"] == "ready"
    pan = next(t for t in detail["targets"] if t["id"] == "pan")
    assert pan["blocks"] == [] and pan["stream"]["quiet"] == [[0.0, 0.2]]
    # Each event as written (the page derives its window from it and the target's): nothing else per event.
    assert pan["stream"]["window"] == [0, 0.5]
    assert pan["stream"]["events"] == [{"raw": {"at": 0.3, "expect": "boiling"}},
                                       {"raw": {"at": 1.0, "expect": "boiling", "window": [-0.1, 0.3]}}]
    door = next(t for t in detail["targets"] if t["id"] == "door")
    assert door["stream"] is None


def test_add_move_and_delete_events_keep_every_other_byte(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    # Add: JavaScript sends 1 for 1.0; the file keeps its own spelling of unchanged numbers.
    save(root, [{"at": 0.3, "expect": "boiling"}, {"at": 1, "expect": "boiling", "window": [-0.1, 0.3]},
                {"at": 1.6, "expect": "boiling"}])
    added = CASE.replace("        window: [-0.1, 0.3]\n", "        window: [-0.1, 0.3]\n      - at: 1.6\n"
                         "        expect: boiling\n")
    assert path.read_text() == added
    # Move the first event: only its `at` changes, its comment stays.
    save(root, [{"at": 0.35, "expect": "boiling"}, {"at": 1, "expect": "boiling", "window": [-0.1, 0.3]},
                {"at": 1.6, "expect": "boiling"}])
    assert path.read_text() == added.replace("at: 0.3   # the first boil", "at: 0.35   # the first boil")
    # Delete the second.
    save(root, [{"at": 0.35, "expect": "boiling"}, {"at": 1.6, "expect": "boiling"}])
    text = path.read_text()
    assert "at: 1.0" not in text and "window: [-0.1, 0.3]" not in text and "at: 1.6" in text
    case, problems = load_case(path)
    assert problems == [] and case is not None
    pan = case.target("pan")
    assert pan is not None and pan.stream is not None
    assert [float(e.at) for e in pan.stream.events] == [0.35, 1.6]


def test_refusals_are_located_and_write_nothing(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    before = path.read_bytes()
    overlap = refused(root, [{"at": 0.3, "expect": "boiling"}, {"at": 0.7, "expect": "boiling"}])
    # The page names an event by its onset, as it shows it, not by its place in the list.
    assert overlap.status == 422 and "targets.pan event @ 0.7s" in overlap.message and "overlaps" in overlap.message
    assert "events[" not in overlap.message
    quiet = refused(root, [{"at": 0.1, "expect": "boiling"}])
    assert quiet.status == 422 and "quiet" in quiet.message
    past = refused(root, [{"at": 30, "expect": "boiling"}])
    assert past.status == 422 and "past the end" in past.message and "event @ 30s.at" in past.message
    empty = refused(root, [])
    assert empty.status == 422 and "events is empty" in empty.message
    samples = refused(root, [{"at": 0.5}], target="door")
    assert samples.status == 422 and "has samples, not events" in samples.message
    assert refused(root, ["x"]).status == 422
    assert path.read_bytes() == before


def test_a_file_changed_on_disk_is_never_overwritten_and_undo_restores(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    seen = revision(root)
    path.write_text(CASE.replace("the first boil", "edited elsewhere"))
    conflict = refused(root, [{"at": 0.35, "expect": "boiling"}], rev=seen)
    assert conflict.status == 409 and "edited elsewhere" in path.read_text()
    # Undo is a restore of a state this server served, through the same check.
    revisions = Revisions()
    before = casedata.load(root, "clip")
    revisions.add(before.revision, before.text)
    written = save(root, [{"at": 0.35, "expect": "boiling"}, {"at": 1.0, "expect": "boiling", "window": [-0.1, 0.3]}])
    assert "at: 0.35" in path.read_text()
    restore_text(root, "clip", {"revision": written.loaded.revision, "text": before.text}, revisions)
    assert path.read_text() == before.text


def test_report_emissions_overlay_the_events_and_go_stale_when_an_event_moves(tmp_path: Path) -> None:
    root, _path = make(tmp_path)
    report = report_of([])
    report["streams"] = [{
        "case": "clip", "target": "pan", "trial": 1,
        "events": [{"index": 0, "at": 0.3, "window_s": [0.3, 0.8], "status": "detected", "latency_s": 0.2,
                    "expect": "boiling", "emission": {"time_s": 0.5, "value": {"alert": "boiling"}}},
                   {"index": 1, "at": 1.0, "window_s": [0.9, 1.3], "status": "missed", "latency_s": None,
                    "expect": "boiling", "emission": None}],
        "repeats": [{"time_s": 0.6, "value": {"alert": "boiling"}}],
        "false_alarms": [{"time_s": 0.1, "value": {"alert": "boiling"}}],
        "metrics": {"events": 2, "detected": 1, "missed": 1, "repeats": 1, "false_alarms": 1, "recall": 0.5,
                    "precision": 0.5, "false_alarms_per_min": None, "latency_p50_s": 0.2, "latency_p95_s": 0.2,
                    "latency_max_s": 0.2}}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    emissions = load_emissions(path)
    marks = annotate_emissions(emissions["clip"], casedata.load(root, "clip").case)
    assert [(m["kind"], m["time_s"], m["changed"]) for m in marks] == [
        ("hit", 0.5, False), ("missed", 1.0, False), ("repeat", 0.6, False), ("false_alarm", 0.1, False)]
    save(root, [{"at": 0.35, "expect": "boiling"}, {"at": 1.0, "expect": "boiling", "window": [-0.1, 0.3]}])
    marks = annotate_emissions(emissions["clip"], casedata.load(root, "clip").case)
    assert [m["changed"] for m in marks] == [True, False, False, False]


# --- one event at a time (what the page sends) ---------------------------------------------------


def edit(root: Path, op: str, index: int, event: dict[str, Any] | None = None, rev: str | None = None,
         seen: Revisions | None = None) -> Any:
    from glasskit_eval.review.eventedits import save_event

    return save_event(root, "clip", "pan", {"revision": rev or revision(root), "op": op, "index": index,
                                            "event": event}, seen)


def test_one_event_is_added_changed_and_deleted_keeping_every_other_byte(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    edit(root, "add", 2, {"at": 1.6, "expect": "boiling"})
    added = CASE.replace("        window: [-0.1, 0.3]\n", "        window: [-0.1, 0.3]\n      - at: 1.6\n"
                         "        expect: boiling\n")
    assert path.read_text() == added
    # The inspector's fields: a comment and a window of its own, in the spec's key order.
    edit(root, "set", 0, {"at": 0.3, "expect": "boiling", "comment": "steam first", "window": [0, 0.4]})
    text = path.read_text()
    assert "      - at: 0.3   # the first boil\n        window: [0, 0.4]\n        expect: boiling\n" \
           "        comment: steam first\n" in text
    # JavaScript sends 1 for 1.0: an unchanged number keeps its spelling.
    edit(root, "set", 1, {"at": 1, "expect": "steam", "window": [-0.1, 0.3]})
    assert "      - at: 1.0\n        expect: steam\n        window: [-0.1, 0.3]\n" in path.read_text()
    edit(root, "delete", 2)
    assert "at: 1.6" not in path.read_text()
    case, problems = load_case(path)
    assert problems == [] and case is not None


def test_one_event_edits_are_refused_by_name_and_write_nothing(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    before = path.read_bytes()
    with pytest.raises(ApiError) as info:
        edit(root, "set", 1, {"at": 0.5, "expect": "boiling"})
    assert info.value.status == 422 and "event @ 0.5s" in info.value.message
    assert "events[" not in info.value.message
    for op, index, event, status in (("set", 5, {"at": 1}, 409), ("move", 0, {"at": 1}, 400),
                                     ("set", -1, {"at": 1}, 400), ("add", 0, None, 422)):
        with pytest.raises(ApiError) as info:
            edit(root, op, index, event)
        assert info.value.status == status
    assert path.read_bytes() == before


def test_an_event_edit_merges_onto_a_file_changed_elsewhere_and_conflicts_on_the_same_event(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    seen = Revisions()
    loaded = casedata.load(root, "clip")
    seen.add(loaded.revision, loaded.text)
    # Someone edits the door target on disk: the page's event edit still lands, merged.
    path.write_text(CASE.replace("expect: closed", "expect: open"))
    written = edit(root, "set", 0, {"at": 0.35, "expect": "boiling"}, rev=loaded.revision, seen=seen)
    assert written.saved.get("merged") is True
    assert "expect: open" in path.read_text() and "at: 0.35   # the first boil" in path.read_text()
    # The same event changed on disk since the page saw it: a conflict, nothing written.
    page = casedata.load(root, "clip")
    seen.add(page.revision, page.text)
    path.write_text(page.text.replace("at: 0.35", "at: 0.38"))
    with pytest.raises(ApiError) as info:
        edit(root, "set", 0, {"at": 0.45, "expect": "boiling"}, rev=page.revision, seen=seen)
    assert info.value.status == 409 and "at: 0.38 " in path.read_text()


def test_a_target_longer_than_a_whole_list_write_allows_takes_one_event_edits(tmp_path: Path) -> None:
    """Past MAX_BLOCKS events the whole list may not be sent at all; the page's one-event edit still saves.

    (100,000 events work the same way; this length keeps the test short.)
    """
    from glasskit_eval.review.edits import MAX_BLOCKS

    count = MAX_BLOCKS + 2000
    lines = ["video: clip.mp4", "targets:", "  pan:", "    stream: {window: [0, 0.000001]}", "    events:"]
    lines += [f"      - at: {i / count:.6f}\n        expect: x" for i in range(count)]
    root, path = make(tmp_path, "\n".join(lines) + "\n")
    middle = count // 2
    assert refused(root, [{"at": i / count, "expect": "x"} for i in range(count)]).status == 400
    edit(root, "set", middle, {"at": middle / count + 1e-7, "expect": "y", "comment": "checked"})
    text = path.read_text()
    assert f"      - at: {middle / count + 1e-7}\n        expect: y\n        comment: checked\n" in text
    assert text.count("expect: x") == count - 1
