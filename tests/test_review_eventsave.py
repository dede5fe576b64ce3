"""review over real HTTP: a one-event save answers with the edit, not the case, and undo is the inverse edit.

The page holds the case; an event save's answer is the new revision, the event as written, the
change to the file's text and the case's status, so its size does not grow with the list. These
tests read the answers' bodies (sizes are asserted, times never are) and the file on disk.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_review_server import VIDEOS, Client

from glasskit_eval.cases.write import content_hash
from glasskit_eval.commands.review import ReviewOptions, start_review
from glasskit_eval.review import casedata
from glasskit_eval.review.server import serve_in_thread
from glasskit_eval.yamltext.source import load_yaml_text

EVENTS = "/api/cases/clip/targets/pan/events"


def case_text(count: int, *, spacing: float = 0.0003) -> str:
    """``count`` events ``spacing`` apart on the 2 s clip, each line as long whatever the count."""
    lines = ["# a long stream", "video: clip.mp4", "targets:", "  door:", "    samples:", "      - at: 0.5",
             "        expect: closed", "  pan:", "    stream: {window: [0, 0.0001]}", "    events:"]
    for i in range(count):
        lines += [f"      - at: {i * spacing:.7f}" + ("   # the first" if i == 0 else ""), "        expect: x"]
    return "\n".join([*lines, "    quiet: [[1.99, 1.995]]"]) + "\n"


@contextmanager
def served(folder: Path, text: str) -> Iterator[tuple[Client, Path]]:
    cases = folder / "eval" / "cases"
    cases.mkdir(parents=True)
    shutil.copy(VIDEOS / "cfr_h264.mp4", cases / "clip.mp4")
    (cases / "clip.yaml").write_text(text)
    server = start_review(ReviewOptions(eval_dir=folder / "eval"))
    thread = serve_in_thread(server)
    client = Client(server)
    client.login()
    try:
        yield client, cases / "clip.yaml"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def patch(client: Client, revision: str, edit: dict[str, Any]) -> tuple[int, bytes]:
    status, _, data = client.request("PATCH", EVENTS, json.dumps({"revision": revision, **edit}).encode(), headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Origin": client.origin})
    return status, data


def spliced(text: str, edit: dict[str, Any]) -> str:
    """``text`` with the answer's ``source_edit`` applied as the page applies it (offsets in UTF-16 units)."""
    units = text.encode("utf-16-le")
    return (units[:2 * edit["start"]].decode("utf-16-le") + edit["text"]
            + units[2 * edit["end"]:].decode("utf-16-le"))


def events_of(text: str) -> list[Any]:
    doc, problems = load_yaml_text(text, "clip.yaml")
    assert problems == []
    return list(doc.value["targets"]["pan"]["events"])


#: The same three edits on any list of at least 3 events: the answers must not care how long it is.
EDITS = [{"op": "set", "index": 1, "event": {"at": 0.00035, "expect": "y", "comment": "checked"}},
         {"op": "add", "index": 2, "event": {"at": 0.00048, "expect": "z"}},
         {"op": "delete", "index": 2}]


def answers(folder: Path, count: int) -> list[bytes]:
    out = []
    with served(folder, case_text(count)) as (client, path):
        text = path.read_text()
        revision = client.get_json("/api/cases/clip")["revision"]
        for edit in EDITS:
            status, data = patch(client, revision, edit)
            assert status == 200, data
            answer = json.loads(data)
            # Everything the page needs, nothing it holds already.
            assert set(answer) == {"revision", "edit", "source_edit", "summary", "saved"}
            now = path.read_text()
            assert answer["revision"] == content_hash(now) and answer["saved"]["changed"] is True
            # The page's copy of the file, brought up to date by the answer, is the file byte for byte.
            assert spliced(text, answer["source_edit"]) == now
            assert answer["edit"] == {"target": "pan", "op": edit["op"], "index": edit["index"],
                                      "event": events_of(now)[edit["index"]] if edit["op"] != "delete" else None}
            assert answer["summary"] == {"status": "ready", "drafts": 0, "empty_targets": [], "problems": []}
            text, revision = now, answer["revision"]
            out.append(data)
    return out


def test_an_event_save_answers_with_the_edit_whatever_the_length_of_the_list(tmp_path: Path) -> None:
    # 3 events take the whole-file writer, 600 and 6,000 the splice; the answers are the same bytes
    # but for the revision (a hash: as long in each).
    short, long, longer = (answers(tmp_path / str(n), n) for n in (3, 600, 6000))
    for a, b, c in zip(short, long, longer):
        assert len(a) == len(b) == len(c) < 700
        same = [{k: v for k, v in json.loads(x).items() if k != "revision"} for x in (a, b, c)]
        assert same[0] == same[1] == same[2]


def test_the_whole_case_is_sent_only_after_a_merge(tmp_path: Path) -> None:
    with served(tmp_path, case_text(600)) as (client, path):
        revision = client.get_json("/api/cases/clip")["revision"]
        path.write_text(path.read_text().replace("expect: closed", "expect: open"))  # another target, on disk
        status, data = patch(client, revision, EDITS[0])
        assert status == 200
        answer = json.loads(data)
        # Undo goes back to the file as it was on disk: the page needs its revision, not its text.
        assert answer["saved"]["merged"] is True and set(answer["saved"]["before"]) == {"revision"}
        assert answer["case"]["revision"] == answer["revision"]
        assert answer["case"]["source"] == path.read_text() and "expect: open" in path.read_text()


def test_refusals_are_small_and_name_the_event_by_its_onset(tmp_path: Path) -> None:
    with served(tmp_path, case_text(600)) as (client, path):
        before = path.read_bytes()
        revision = client.get_json("/api/cases/clip")["revision"]
        status, data = patch(client, revision, {"op": "set", "index": 1, "event": {"at": 0.00065, "expect": "y"}})
        error = json.loads(data)
        assert status == 422 and error["code"] == "invalid_edit" and len(data) < 2000
        assert "targets.pan event @ 0.00065s" in error["message"] and "overlaps" in error["message"]
        assert "events[" not in error["message"]
        status, data = patch(client, "0" * 64, EDITS[0])
        assert status == 409 and json.loads(data)["code"] == "conflict" and len(data) < 1000
        status, data = patch(client, revision, {**EDITS[0], "merge": "no"})
        assert status == 400 and "merge" in json.loads(data)["message"]
        assert path.read_bytes() == before


def as_javascript(value: Any) -> Any:
    """``value`` as the page sends it: JavaScript writes the number 1.0 as 1."""
    if isinstance(value, dict):
        return {k: as_javascript(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_javascript(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def inverse_text(answer: dict[str, Any]) -> dict[str, Any]:
    """The text edit that takes the file back, as the page keeps it from an answer."""
    text = answer["source_edit"]
    return {"start": text["start"], "end": text["start"] + len(text["text"].encode("utf-16-le")) // 2,
            "text": text["old"]}


@pytest.mark.parametrize("count", [3, 600])
def test_undo_and_redo_are_inverse_edits_onto_the_exact_state_byte_for_byte(tmp_path: Path, count: int) -> None:
    """What the page sends for undo and redo: the inverse edit (redo: the edit again) with merge false,
    and its copy of the text the edit replaced, which the server writes back when it holds that edit."""
    with served(tmp_path, case_text(count).replace("expect: x", "expect: 'x'   # quoted")) as (client, path):
        original = path.read_text()
        revision = client.get_json("/api/cases/clip")["revision"]
        old = [as_javascript(e) for e in events_of(original)]  # the first onset, 0.0000000, is sent as 0
        steps = [(EDITS[0], {"op": "set", "index": 1, "event": old[1]}),
                 ({"op": "delete", "index": 0}, {"op": "add", "index": 0, "event": old[0]}),
                 ({"op": "add", "index": 1, "event": {"at": 0.00048, "expect": "w"}}, {"op": "delete", "index": 1})]
        states, texts = [original], []
        for edit, _inverse in steps:
            status, data = patch(client, revision, edit)
            assert status == 200, data
            revision = json.loads(data)["revision"]
            texts.append(inverse_text(json.loads(data)))
            states.append(path.read_text())
        # Undo, each onto the state the step left: the file as it was, comments and spellings too.
        for (_edit, inverse), text, state in zip(reversed(steps), reversed(texts), reversed(states[:-1])):
            status, data = patch(client, revision, {**inverse, "merge": False, "source_edit": text})
            assert status == 200, data
            revision = json.loads(data)["revision"]
            assert path.read_text() == state
            # What the server keeps of the state it wrote (its next save starts there) is the file read afresh.
            kept = casedata.load(path.parent.parent, "clip")
            fresh, _problems = load_yaml_text(path.read_text(), str(path))
            assert kept.case is not None and kept.revision == revision
            assert repr(kept.case.document.value) == repr(fresh.value)  # 0.0 is not 0 here
            assert kept.case.document.lines == fresh.lines
        # Redo: the edit again, onto the exact state.
        for (edit, _inverse), state in zip(steps, states[1:]):
            status, data = patch(client, revision, {**edit, "merge": False})
            assert status == 200, data
            revision = json.loads(data)["revision"]
            assert path.read_text() == state
        # Onto a file changed on disk since: a conflict, as a restore is; nothing written.
        path.write_text(path.read_text().replace("expect: closed", "expect: open"))
        before = path.read_bytes()
        status, data = patch(client, revision, {**steps[-1][1], "merge": False})
        assert status == 409 and path.read_bytes() == before


def test_without_the_text_or_with_one_that_does_not_hold_the_edit_the_writer_renders_the_event(tmp_path: Path) -> None:
    with served(tmp_path, case_text(600)) as (client, path):
        original = path.read_text()
        revision = client.get_json("/api/cases/clip")["revision"]
        old = events_of(original)
        status, data = patch(client, revision, {"op": "delete", "index": 5})
        answer = json.loads(data)
        # A text that says another value than the inverse edit: not taken; the event is rendered.
        forged = dict(inverse_text(answer), text=inverse_text(answer)["text"].replace("expect: x", "expect: forged"))
        status, data = patch(client, answer["revision"], {"op": "add", "index": 5, "event": old[5], "merge": False,
                                                          "source_edit": forged})
        assert status == 200 and "forged" not in path.read_text() and events_of(path.read_text()) == old
        assert path.read_text() == original.replace("      - at: 0.0015000\n", "      - at: 0.0015\n")
        now, before = json.loads(data)["revision"], path.read_bytes()
        for bad in ({"start": "0", "end": 1, "text": ""}, [0, 1, ""], {"start": 0, "end": 1}):
            status, data = patch(client, now, {"op": "delete", "index": 5, "merge": False, "source_edit": bad})
            assert status == 400 and "source_edit" in json.loads(data)["message"]
        assert path.read_bytes() == before


@pytest.mark.parametrize("count", [3, 600])
def test_offsets_count_utf16_units_as_the_page_does(tmp_path: Path, count: int) -> None:
    text = case_text(count).replace("# a long stream", "# a long stream 😀 über").replace(
        "expect: x", "expect: x   # ✓ 😀", 2)
    with served(tmp_path, text) as (client, path):
        revision = client.get_json("/api/cases/clip")["revision"]
        status, data = patch(client, revision, {"op": "delete", "index": 1})
        assert status == 200, data
        answer = json.loads(data)
        assert spliced(text, answer["source_edit"]) == path.read_text()
        assert "😀" in answer["source_edit"]["old"]  # the deleted event's own comment
        status, data = patch(client, answer["revision"], {"op": "add", "index": 1, "event": events_of(text)[1],
                                                          "merge": False, "source_edit": inverse_text(answer)})
        assert status == 200, data
        assert path.read_text() == text


def test_the_texts_kept_for_merging_are_bounded_in_characters_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.review.edits import Revisions

    monkeypatch.setattr(Revisions, "KEEP_CHARS", 10)
    seen = Revisions()
    for n in range(5):
        seen.add(f"r{n}", "abcd")
    # The newest texts within the budget, the newest always; every state stays restorable by hash.
    assert [seen.text(f"r{n}") for n in range(5)] == [None, None, None, "abcd", "abcd"]
    seen.add("big", "x" * 50)
    assert seen.text("big") == "x" * 50 and seen.text("r4") is None
    assert all(f"r{n}" in seen for n in range(5))
