"""--save-failures with arms: each arm's failures are its own files, holding the pixels that arm got."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalkit import read_json, run_cli
from PIL import Image, ImageStat
from test_e2e_arms import FAILING, THREE, by_arm, eval_dir  # noqa: F401  (eval_dir is a fixture)

pytestmark = pytest.mark.e2e


def mean(path: str | Path) -> float:
    with Image.open(path) as image:
        return float(ImageStat.Stat(image.convert("L")).mean[0])


def test_saved_failures_are_named_by_arm_and_hold_the_perturbed_pixels(eval_dir: Path,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "r.json", "--save-failures",
                              "--artifacts-dir", "art", *THREE, "--arm", "dim")
    assert code == 0, err
    report = read_json(tmp_path / "r.json")
    results = by_arm(report)
    saved: dict[str, dict[int, str]] = {}
    for arm, mine in results.items():
        failed = [r for r in mine if r["status"] == "failed"]
        # dim halves the brightness: no frame code is readable, every sample fails.
        assert {r["frame_index"] for r in failed} == (FAILING[arm] if arm != "dim" else set(range(20)))
        for r in failed:
            image, record = Path(r["artifact_image"]), Path(r["artifact_json"])
            assert image.is_file() and record.is_file()
            assert image.parent == tmp_path / "art" / "failures" / "trial-001"
            assert image.stem.endswith(f"_arm-{arm}") and record.stem == image.stem
            assert json.loads(record.read_text())["arm"] == arm
            saved.setdefault(arm, {})[r["frame_index"]] = str(image)
    # One sample, one file per arm that failed it; the dimmed arm's file is the dimmed frame.
    assert saved["small"][3] != saved["cmd"][3] != saved["dim"][3]
    for index in (3, 7):
        assert mean(saved["dim"][index]) == pytest.approx(mean(saved["small"][index]) * 0.5, abs=2.0)
    files = sorted(p.name for p in (tmp_path / "art" / "failures" / "trial-001").glob("*.jpg"))
    assert len(files) == sum(len(v) for v in saved.values())


def test_an_arm_name_that_is_not_a_file_name_is_made_safe_and_kept_apart(eval_dir: Path,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "r.json", "--save-failures",
                              "--artifacts-dir", "art", "--arm", "small", "--perturb", "brightness:0.5")
    assert code == 0, err
    names = {Path(r["artifact_image"]).stem.rpartition("_arm-")[2]
             for r in read_json(tmp_path / "r.json")["trials"][0]["results"] if r.get("artifact_image")}
    assert "small" in names
    (perturbed,) = names - {"small", "control"}
    assert perturbed.startswith("brightness_0.5-") and len(perturbed) == len("brightness_0.5-") + 6
