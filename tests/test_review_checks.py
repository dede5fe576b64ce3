"""review/checks: a candidate case file gets exactly the problems `validate` prints for it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from evalkit import make_clip_case

from glasskit_eval.cli import main
from glasskit_eval.review.checks import candidate_problems

HEAD = "video: clip.mp4\ntargets:\n  a:\n    samples:\n"

CANDIDATES = {
    "past the end": HEAD + "      - at: 3.0\n        expect: 1\n",
    "range past the end": HEAD + "      - range: [1.5, 3.0]\n        expect: 1\n",
    "empty target": HEAD + "      - at: 0.5\n        expect: 1\n  b:\n    samples: []\n",
    "overlap": HEAD + "      - range: [0.0, 1.0]\n        expect: 1\n      - at: 0.5\n        expect: 2\n",
    "duplicate time": HEAD + "      - at: [0.5, 0.5]\n        expect: 1\n",
    "bad mode": HEAD + "      - at: 0.5\n        expect: 1\n        compare: {mode: fuzzy}\n",
    "unknown key": HEAD + "      - at: 0.5\n        expect: 1\n        colour: red\n",
    "yaml syntax": HEAD + "      - at: [0.5\n",
    "no targets": "video: clip.mp4\ntargets: {}\n",
    "not a mapping": "- just a list\n",
}


def _validate(root: Path) -> list[str]:
    out = io.StringIO()
    code = main(["validate", "--eval-dir", str(root)], out=out, err=io.StringIO())
    lines = out.getvalue().splitlines()
    if code == 0:
        return []
    assert lines[0] == "Validation failed"
    return [line.removeprefix("- ") for line in lines[1:] if line.startswith("- ")]


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_candidate_problems_are_validates_own_words(tmp_path: Path, name: str) -> None:
    path = make_clip_case(tmp_path, CANDIDATES[name])
    root = path.parent.parent
    expected = _validate(root)
    assert expected, f"{name}: validate should refuse this file"
    assert [str(p) for p in candidate_problems(path, CANDIDATES[name], keep_empty=[])] == expected


def test_a_valid_file_has_no_problems_and_drafts_are_allowed(tmp_path: Path) -> None:
    text = HEAD + "      - at: 0.5\n        expect: 1\n"
    path = make_clip_case(tmp_path, text)
    root = path.parent.parent
    assert _validate(root) == [] and candidate_problems(path, text, keep_empty=[]) == []
    # A draft is a labelling state: validate refuses it for a run, the page may write it.
    draft = HEAD + "      - at: 0.5\n"
    path.write_text(draft)
    assert _validate(root) and candidate_problems(path, draft, keep_empty=[]) == []


def test_keep_empty_lets_only_the_named_targets_stay_empty(tmp_path: Path) -> None:
    path = tmp_path / "cases" / "clip.yaml"
    text = "video: clip.mp4\ntargets:\n  a:\n    samples: []\n  b:\n    samples: []\n"
    assert [p.path for p in candidate_problems(path, text, keep_empty=["a"])] == ["targets.b.samples"]
    assert candidate_problems(path, text, keep_empty=["a", "b"]) == []
    assert candidate_problems(path, text, keep_empty=None) == []
    assert len(candidate_problems(path, text, keep_empty=[])) == 2
