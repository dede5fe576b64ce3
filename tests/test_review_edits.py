"""review/edits: what each page write does to the case file's bytes, and what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evalkit import make_clip_case

from glasskit_eval.review import casedata
from glasskit_eval.review.edits import (
    Revisions,
    remove_target,
    restore_numbers,
    restore_text,
    save_blocks,
)
from glasskit_eval.review.errors import ApiError

CASE = """\
# Door and light, by hand.
video: clip.mp4
targets:
  door:
    samples:
      - at: [0.5, 1.5]   # two looks
        expect: closed
        comment: checked twice
      - range: [1.0, 1.4]
        every_s: 0.2
        expect: open
  light:
    samples:
      - at: 0.2
        expect: false
"""


def make(tmp_path: Path, text: str = CASE) -> tuple[Path, Path]:
    path = make_clip_case(tmp_path, text)
    return path.parent.parent, path


def revision(root: Path) -> str:
    return casedata.load(root, "clip").revision


def refused(call: Any, *args: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        call(*args)
    return info.value


def test_splitting_an_at_list_keeps_the_rest_of_the_block(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    # What the page sends for N on the 1.5 tick: JavaScript has no 1.0 vs 1, hence the plain numbers.
    blocks = [{"at": 0.5, "expect": "closed", "comment": "checked twice"},
              {"at": 1.5, "expect": False},
              {"range": [1, 1.4], "every_s": 0.2, "expect": "open"}]
    written = save_blocks(root, "clip", "door", {"revision": revision(root), "blocks": blocks})
    assert written.saved == {"fallback": False, "reason": None, "changed": True}
    assert path.read_text() == CASE.replace(
        "      - at: [0.5, 1.5]   # two looks\n        expect: closed\n        comment: checked twice\n",
        "      - at: 0.5   # two looks\n        expect: closed\n        comment: checked twice\n"
        "      - at: 1.5\n        expect: false\n")
    assert written.loaded.text == path.read_text() and written.loaded.revision == revision(root)


def test_deleting_one_timestamp_keeps_the_other(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    blocks = [{"at": 1.5, "expect": "closed", "comment": "checked twice"},
              {"range": [1, 1.4], "every_s": 0.2, "expect": "open"}]
    save_blocks(root, "clip", "door", {"revision": revision(root), "blocks": blocks})
    assert path.read_text() == CASE.replace("at: [0.5, 1.5]", "at: 1.5")


def test_a_target_is_never_emptied(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    error = refused(save_blocks, root, "clip", "light", {"revision": revision(root), "blocks": []})
    assert error.status == 422 and error.code == "invalid_edit"
    assert "targets.light.samples: samples is empty" in error.message
    assert path.read_text() == CASE


def test_targets_already_empty_do_not_block_other_edits(tmp_path: Path) -> None:
    skeleton = CASE.replace("      - at: 0.2\n        expect: false\n", "") .replace("samples:\n\n", "samples:\n")
    skeleton = skeleton.rstrip("\n") + " []\n"
    assert skeleton.endswith("  light:\n    samples: []\n")
    root, path = make(tmp_path, skeleton)
    blocks = [{"at": [0.5, 1.5], "expect": "ajar", "comment": "checked twice"},
              {"range": [1, 1.4], "every_s": 0.2, "expect": "open"}]
    save_blocks(root, "clip", "door", {"revision": revision(root), "blocks": blocks})
    assert path.read_text() == skeleton.replace("expect: closed", "expect: ajar")


@pytest.mark.parametrize(("blocks", "needle"), [
    ([{"at": 1.1, "expect": "x"}], "overlaps"),
    ([{"at": 0.2, "expect": 1, "compare": {"mode": "fuzzy"}}], "unknown comparison mode"),
    ([{"at": 3.0, "expect": "x"}], "past the end of the video clip.mp4 (2.0s from its first frame)"),
])
def test_what_validate_refuses_is_never_written(tmp_path: Path, blocks: list[Any], needle: str) -> None:
    root, path = make(tmp_path)
    door = [{"at": [0.5, 1.5], "expect": "closed", "comment": "checked twice"},
            {"range": [1, 1.4], "every_s": 0.2, "expect": "open"}]
    target = "door" if needle == "overlaps" else "light"
    new = [*door, *blocks] if target == "door" else blocks
    error = refused(save_blocks, root, "clip", target, {"revision": revision(root), "blocks": new})
    assert error.code == "invalid_edit" and needle in error.message
    assert path.read_bytes() == CASE.encode()


def test_a_stale_revision_is_a_conflict(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    stale = revision(root)
    path.write_text(CASE + "# edited elsewhere\n")
    error = refused(save_blocks, root, "clip", "light", {"revision": stale, "blocks": [{"at": 0.3, "expect": True}]})
    assert error.status == 409 and error.code == "conflict" and error.extra["revision"] == revision(root)
    assert path.read_text().endswith("# edited elsewhere\n")


def test_remove_target_is_a_minimal_edit(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    remove_target(root, "clip", "door", {"revision": revision(root)})
    assert path.read_text() == CASE.split("  door:")[0] + "  light:" + CASE.split("  light:")[1]
    error = refused(remove_target, root, "clip", "light", {"revision": revision(root)})
    assert "targets must contain at least one target" in error.message
    error = refused(remove_target, root, "clip", "nope", {"revision": revision(root)})
    assert error.status == 404


def test_restore_gives_back_the_exact_bytes_crlf_included(tmp_path: Path) -> None:
    original = CASE.replace("\n", "\r\n")
    root, path = make(tmp_path, original)
    seen = Revisions()
    seen.add(revision(root))
    written = save_blocks(root, "clip", "light", {"revision": revision(root), "blocks": [{"at": 0.2, "expect": True}]})
    assert b"expect: true\r\n" in path.read_bytes()
    restore_text(root, "clip", {"revision": written.loaded.revision, "text": original}, seen)
    assert path.read_bytes() == original.encode()


def test_restore_refuses_unseen_text_and_stale_revisions(tmp_path: Path) -> None:
    root, path = make(tmp_path)
    seen = Revisions()
    error = refused(restore_text, root, "clip", {"revision": revision(root), "text": CASE}, seen)
    assert error.code == "unknown_state"
    seen.add(revision(root))
    assert refused(restore_text, root, "clip", {"revision": "0" * 64, "text": CASE}, seen).status == 409
    assert refused(restore_text, root, "clip", {"revision": revision(root)}, seen).status == 400
    assert path.read_text() == CASE


@pytest.mark.parametrize("body", [None, [], {"blocks": []}, {"revision": "", "blocks": []},
                                  {"revision": "x"}, {"revision": "x", "blocks": {}}])
def test_bad_bodies(tmp_path: Path, body: Any) -> None:
    root, _ = make(tmp_path)
    assert refused(save_blocks, root, "clip", "door", body).status == 400


def test_restore_numbers_keeps_the_files_spelling() -> None:
    old = [{"at": [1.0, 6.0], "expect": 2.0}, {"range": [4.0, 12.0], "every_s": 1.0, "expect": True}]
    # One timestamp split off, the range split in two: every time keeps its `.0`.
    new: list[dict[str, Any]] = [{"at": 1, "expect": 2}, {"at": 6, "expect": 3}, {"range": [4, 8], "every_s": 1, "expect": True},
           {"range": [8, 12], "every_s": 1, "expect": False}]
    got = restore_numbers(new, old)
    assert got == new
    assert [repr(b["at"]) for b in got[:2]] == ["1.0", "6.0"]
    assert repr(got[0]["expect"]) == "2.0" and repr(got[1]["expect"]) == "3"
    assert [repr(v) for v in got[2]["range"]] == ["4.0", "8"] and repr(got[3]["range"][1]) == "12.0"
    assert repr(got[3]["every_s"]) == "1.0"
