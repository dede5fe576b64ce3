"""review: one event edit of a long list is a splice of its lines (review/eventsplice), and the file is parsed once.

Parses are counted, not timed: a whole-file parse of 100,000 events is what made a load and a save slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from evalkit import make_clip_case

from glasskit_eval.review import casedata, eventsplice
from glasskit_eval.review.edits import Revisions
from glasskit_eval.review.errors import ApiError
from glasskit_eval.review.eventedits import save_event
from glasskit_eval.yamltext import source as yamlsource
from glasskit_eval.yamltext.source import load_yaml_text

COUNT = 100_000


def big_case(count: int) -> str:
    lines = ["# a long stream", "video: clip.mp4", "targets:", "  door:", "    samples:", "      - at: 0.5",
             "        expect: closed", "  pan:", "    stream: {window: [0, 0.000001]}", "    events:"]
    for i in range(count):
        lines.append(f"      - at: {i * 1.9 / count:.7f}" + ("   # the first" if i == 0 else ""))
        lines.append("        expect: x")
    lines += ["    quiet: [[1.95, 1.96]]", "  z:", "    samples:", "      - at: 0.1", "        expect: q"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def whole_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every document of more than 100,000 characters loaded, from parser events or composed as nodes."""
    sizes: list[int] = []
    original = yaml.composer.Composer.get_single_node
    from_events = yamlsource._from_events

    def counted(self: Any) -> Any:
        node = original(self)
        if node is not None and node.end_mark.index > 100_000:
            sizes.append(node.end_mark.index)
        return node

    def counted_events(text: str) -> Any:
        built = from_events(text)
        if built is not None and len(text) > 100_000:
            sizes.append(len(text))
        return built

    monkeypatch.setattr(yaml.composer.Composer, "get_single_node", counted)
    monkeypatch.setattr(yamlsource, "_from_events", counted_events)
    return sizes


def edit(root: Path, op: str, index: int, event: dict[str, Any] | None = None, rev: str | None = None,
         seen: Revisions | None = None) -> Any:
    revision = rev or casedata.load(root, "clip").revision
    return save_event(root, "clip", "pan", {"revision": revision, "op": op, "index": index, "event": event}, seen)


def test_a_hundred_thousand_events_load_with_one_parse_and_each_edit_with_none(
        tmp_path: Path, whole_parses: list[int]) -> None:
    path = make_clip_case(tmp_path, big_case(COUNT))
    root = path.parent.parent
    loaded = casedata.load(root, "clip")
    assert loaded.problems == () and len(whole_parses) == 1
    detail = casedata.case_detail(loaded)
    assert len(next(t for t in detail["targets"] if t["id"] == "pan")["stream"]["events"]) == COUNT
    middle = COUNT // 2
    at = middle * 1.9 / COUNT
    edit(root, "set", middle, {"at": at + 1e-7, "expect": "y", "comment": "checked"})
    edit(root, "add", middle + 1, {"at": at + 5e-6, "expect": "z"})
    edit(root, "delete", 1)
    edit(root, "set", 0, {"at": 0.0, "expect": "first"})
    # The page's next load is the state just written: served from the parse cache.
    after = casedata.load(root, "clip")
    assert len(whole_parses) == 1
    # What the splice wrote is what the page shows: the whole file parsed afresh agrees, value and lines.
    text = path.read_text()
    fresh, problems = load_yaml_text(text, str(path))
    assert problems == [] and after.case is not None
    assert fresh.value == after.case.document.value and fresh.lines == after.case.document.lines
    assert f"      - at: {at + 1e-7}\n        expect: y\n        comment: checked\n      - at: {at + 5e-6}\n" \
           "        expect: z\n" in text
    assert text.startswith("# a long stream\n") and "      - at: 0.0000000   # the first\n        expect: first\n" in text
    assert text.count("expect: x") == COUNT - 3 and text.endswith("    quiet: [[1.95, 1.96]]\n  z:\n    samples:\n"
                                                                  "      - at: 0.1\n        expect: q\n")


def test_a_spliced_edit_is_refused_by_name_and_located_as_a_whole_file_edit_is_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = eventsplice.MIN_EVENTS * 2
    path = make_clip_case(tmp_path, big_case(count))
    root = path.parent.parent
    before = path.read_bytes()
    second = 1.9 / count
    refusals = []
    for shortest in (count + 1, eventsplice.MIN_EVENTS):  # the whole-file path, then spliced
        monkeypatch.setattr(eventsplice, "MIN_EVENTS", shortest)
        with pytest.raises(ApiError) as info:
            edit(root, "set", 700, {"at": second, "expect": "y"})  # onto event 1's window
        refusals.append(info.value)
    assert refusals[0].message == refusals[1].message and refusals[0].extra == refusals[1].extra
    assert refusals[0].status == 422 and f"event @ {second:g}s" in refusals[0].message
    assert "line 13)" in refusals[0].message  # event 1 is on line 13 of the file
    with pytest.raises(ApiError) as info:
        edit(root, "set", 5, {"at": 5.0, "expect": "y"})  # past the 2 s clip's end
    assert info.value.status == 422
    with pytest.raises(ApiError) as info:
        edit(root, "set", 5, {"at": 0.005, "expect": "y"}, rev="0" * 64)
    assert info.value.status == 409
    assert path.read_bytes() == before


def test_a_file_changed_elsewhere_is_merged_or_a_conflict_as_for_short_lists(tmp_path: Path) -> None:
    count = eventsplice.MIN_EVENTS * 2
    path = make_clip_case(tmp_path, big_case(count))
    root = path.parent.parent
    seen = Revisions()
    page = casedata.load(root, "clip")
    seen.add(page.revision, page.text)
    path.write_text(page.text.replace("expect: closed", "expect: open"))
    written = edit(root, "set", 10, {"at": 0.0191, "expect": "y"}, rev=page.revision, seen=seen)
    assert written.saved.get("merged") is True and "expect: open" in path.read_text()
    now = casedata.load(root, "clip")
    seen.add(now.revision, now.text)
    path.write_text(now.text.replace("at: 0.0191", "at: 0.0192"))
    with pytest.raises(ApiError) as info:
        edit(root, "set", 10, {"at": 0.0193, "expect": "y"}, rev=now.revision, seen=seen)
    assert info.value.status == 409 and "at: 0.0192" in path.read_text()


def test_a_flow_list_of_events_takes_the_whole_file_path(tmp_path: Path) -> None:
    count = eventsplice.MIN_EVENTS * 2
    events = ", ".join(f"{{at: {i * 1.9 / count:.7f}, expect: x}}" for i in range(count))
    path = make_clip_case(tmp_path, "video: clip.mp4\ntargets:\n  pan:\n    stream: {window: [0, 0.000001]}\n"
                          f"    events: [{events}]\n")
    root = path.parent.parent
    loaded = casedata.load(root, "clip")
    assert loaded.case is not None
    raw = loaded.case.document.value["targets"]["pan"]["events"]
    assert eventsplice.splice(loaded, "pan", raw, raw[:3] + raw[4:], 3, []) is None
    edit(root, "delete", 3)
    assert "{at: 0.0057000, expect: x}" not in path.read_text() and "{at: 0.0076000, expect: x}" in path.read_text()
