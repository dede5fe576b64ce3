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

from test_review_server import VIDEOS, Client

from glasskit_eval.cases.write import content_hash
from glasskit_eval.commands.review import ReviewOptions, start_review
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
        assert answer["source_edit"] is None and answer["case"]["revision"] == answer["revision"]
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


def test_undo_and_redo_are_inverse_edits_onto_the_exact_state(tmp_path: Path) -> None:
    """What the page sends for undo and redo: the inverse edit (redo: the edit again) with merge false."""
    with served(tmp_path, case_text(600)) as (client, path):
        original = path.read_text()
        revision = client.get_json("/api/cases/clip")["revision"]
        old = events_of(original)
        steps = [(EDITS[0], {"op": "set", "index": 1, "event": old[1]}),
                 ({"op": "delete", "index": 5}, {"op": "add", "index": 5, "event": old[5]}),
                 ({"op": "add", "index": 9, "event": {"at": 0.00285, "expect": "w"}}, {"op": "delete", "index": 9})]
        states = [original]
        for edit, _inverse in steps:
            status, data = patch(client, revision, edit)
            assert status == 200, data
            revision = json.loads(data)["revision"]
            states.append(path.read_text())
        for (_edit, inverse), state in zip(reversed(steps), reversed(states[:-1])):
            status, data = patch(client, revision, {**inverse, "merge": False})
            assert status == 200, data
            revision = json.loads(data)["revision"]
            assert events_of(path.read_text()) == events_of(state)
        assert path.read_text() == original.replace("0.0003000", "0.0003").replace(
            "      - at: 0.0015000\n", "      - at: 0.0015\n")  # the events, in their values
        # Redo onto a file changed on disk since: a conflict, as a restore is; nothing written.
        path.write_text(path.read_text().replace("expect: closed", "expect: open"))
        before = path.read_bytes()
        status, data = patch(client, revision, {**steps[0][0], "merge": False})
        assert status == 409 and path.read_bytes() == before
