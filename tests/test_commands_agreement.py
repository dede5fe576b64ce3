"""``agreement`` through the CLI: two labellers' eval directories or case files, kappa against scikit-learn."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from evalkit import run_cli
from sklearn.metrics import cohen_kappa_score

DOORS_A = [True, True, False, False, True, True, True, False, True, False]
DOORS_B = [True, False, False, False, True, True, False, False, True, True]
COUNT_A = [1, 2, 2, 3, 5]
COUNT_B = [1, 2, 3, 3, 7]


def case_text(doors: list[bool], counts: list[int], *, tolerance: float = 0.0, skip: int | None = None) -> str:
    lines = ["video: walk.mp4", "targets:", "  door:", "    samples:"]
    for i, value in enumerate(doors):
        if i == skip:
            continue
        lines += [f"    - at: {i / 2:g}", f"      expect: {str(value).lower()}"]
    lines += ["  people:", "    samples:"]
    for i, value in enumerate(counts):
        lines += [f"    - at: {i:g}", f"      expect: {value}"]
        if tolerance:
            lines += ["      compare:", "        mode: numeric", f"        tolerance: {tolerance:g}"]
    lines += ["    - at: 9", "      ignore: blurred"]
    return "\n".join(lines) + "\n"


def make(tmp_path: Path, name: str, text: str) -> Path:
    root = tmp_path / name
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "walk.yaml").write_text(text)
    return root


def test_two_eval_dirs_agree_as_scikit_learn_computes(tmp_path: Path) -> None:
    a = make(tmp_path, "a", case_text(DOORS_A, COUNT_A))
    b = make(tmp_path, "b", case_text(DOORS_B, COUNT_B, tolerance=1))
    code, out, err = run_cli("agreement", a, b, "--output-json", tmp_path / "agree.json")
    assert code == 0, err
    report = json.loads((tmp_path / "agree.json").read_text())
    assert report["samples"] == 15 and report["variance"].startswith("Fleiss, Cohen & Everitt (1969)")
    door, people = report["targets"]
    assert door["target"] == "door" and people["target"] == "people"
    assert door["kappa"] == pytest.approx(cohen_kappa_score(DOORS_A, DOORS_B), abs=1e-9)
    assert door["percent_agreement"] == pytest.approx(70.0)
    assert people["kappa"] == pytest.approx(cohen_kappa_score(COUNT_A, COUNT_B), abs=1e-9)
    # Within the tolerance (1, the larger side's): 1-1, 2-2, 2-3, 3-3 agree; 5-7 does not.
    assert people["within_tolerance"] == {"tolerance": 1.0, "agreement": pytest.approx(0.8)}
    assert door["within_tolerance"] is None
    low, high = door["kappa_ci"]
    assert low < door["kappa"] < high
    pooled = cohen_kappa_score([f"door:{v}" for v in DOORS_A] + [f"people:{v}" for v in COUNT_A],
                               [f"door:{v}" for v in DOORS_B] + [f"people:{v}" for v in COUNT_B])
    assert report["overall"]["kappa"] == pytest.approx(pooled, abs=1e-9)
    assert len(report["disagreements"]) == 5
    assert "door" in out and "Overall" in out and "Fleiss, Cohen & Everitt" in out
    assert f"{cohen_kappa_score(DOORS_A, DOORS_B):.3f}" in out
    assert "80.0% (±1)" in out


def test_two_case_files_of_one_video(tmp_path: Path) -> None:
    a = make(tmp_path, "a", case_text(DOORS_A, COUNT_A)) / "cases" / "walk.yaml"
    b_dir = tmp_path / "b"
    b_dir.mkdir()
    b = b_dir / "walk_second_pass.yaml"
    b.write_text(case_text(DOORS_A, COUNT_A))
    code, out, err = run_cli("agreement", a, b)
    assert code == 0, err
    assert "15 samples labelled by both" in out
    assert re.search(r"^Overall\s+15\s+100.0%\s+1.000 ", out, re.MULTILINE) and "Disagreements" not in out


def test_differing_sample_sets_exit_2_naming_the_first_missing_sample(tmp_path: Path) -> None:
    a = make(tmp_path, "a", case_text(DOORS_A, COUNT_A))
    b = make(tmp_path, "b", case_text(DOORS_B, COUNT_B, skip=3))
    code, _out, err = run_cli("agreement", a, b)
    assert code == 2
    first = err.splitlines()[0]
    # The sample at 1.5 s (the fourth door sample) is on line 11 of A's file.
    assert first == (f"invalid eval: {a / 'cases' / 'walk.yaml'}:11: targets.door.samples[3]: sample walk / door "
                     f"at 1.5s is labelled here but not in {b}")
    assert "Both sides must label the same samples" in err


def test_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    a = make(tmp_path, "a", case_text(DOORS_A, COUNT_A))
    code, _out, err = run_cli("agreement", a, tmp_path / "nowhere")
    assert code == 2 and "no such eval directory or case file" in err


def test_a_directory_and_a_file_are_not_compared(tmp_path: Path) -> None:
    a = make(tmp_path, "a", case_text(DOORS_A, COUNT_A))
    code, _out, err = run_cli("agreement", a, a / "cases" / "walk.yaml")
    assert code == 2 and "not one of each" in err
