"""``run --html`` and ``report --html`` end to end: real videos, real adapters, thumbnails read back.

The fixture videos carry their frame index in their pixels, so each thumbnail in the page is
checked to be the exact (display-oriented) frame the adapter got, not a neighbour.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from evalkit import TESTS, make_eval, read_json, run_cli
from framecode import read_frame_index
from htmlkit import page_data, thumbnail_images
from reportkit import report_of, result_json

CASE = """
video: {video}
targets:
  door:
    label: Door
    samples:
    - range: [0.0, 1.0]
      every_s: 0.1
      expect: 0
  light:
    samples:
    - at: [0.2, 1.5]
      expect: 0
"""

#: Observes the frame index read from the pixels: every sample but frame 0 fails, light errors at 1.5 s.
ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

class Reader:
    def {{method}}:
        {{body}}

def observe(sample, target):
    if target.id == "light" and sample.timestamp_s > 1:
        raise RuntimeError("lamp unreachable")
    return read_frame_index(sample.image)
"""
INDIVIDUAL = ADAPTER.format(method="evaluate(self, sample, target)", body="return observe(sample, target)")
BATCH = ADAPTER.format(method="evaluate_many(self, samples, target)",
                       body="return [observe(s, target) for s in samples]")


def _eval(tmp_path: Path, adapter: str = INDIVIDUAL, video: str = "cfr_h264.mp4") -> Path:
    return make_eval(tmp_path, {"clip": CASE.format(video=video)}, adapter=adapter, videos=(video,))


def _check_thumbnails(page: str) -> int:
    """Every failed row's embedded thumbnail shows the row's frame; returns how many rows have one."""
    data = page_data(page)
    images = thumbnail_images(page)
    checked = 0
    for row in data["rows"]:
        if isinstance(row[10], int):
            assert read_frame_index(images[row[10]].convert("RGB")) == row[5]
            checked += 1
    return checked


def test_run_html_embeds_the_exact_failed_frames(tmp_path: Path) -> None:
    eval_dir = _eval(tmp_path, video="rotate90.mp4")
    page_path = tmp_path / "out" / "report.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--html", page_path,
                              "--output-json", tmp_path / "r.json")
    assert code == 1, err
    page = page_path.read_text()
    data = page_data(page)
    statuses = [row[6] for row in data["rows"]]
    assert statuses.count(0) == 1 and statuses.count(2) == 1  # one error, one pass (frame 0)
    # 9 failures of door + 1 of light + 1 error: each has its own frame, light's 0.2 s shares door's.
    assert _check_thumbnails(page) == 11
    assert len(data["thumbs"]) == 10
    assert data["timelines"][0]["duration"] == 2.0  # the clip's, not the last sample's
    # The JSON report is unchanged by --html.
    assert "html" not in json.dumps(read_json(tmp_path / "r.json")["summary"])


def test_batch_adapters_get_thumbnails_too(tmp_path: Path) -> None:
    eval_dir = _eval(tmp_path, BATCH)
    page_path = tmp_path / "report.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--html", page_path)
    assert code == 1, err
    # A failed evaluate_many call errors every sample of that target (light: 2).
    assert _check_thumbnails(page_path.read_text()) == 11


def test_report_from_json_uses_artifacts_or_the_videos(tmp_path: Path) -> None:
    eval_dir = _eval(tmp_path)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1, err

    bare = tmp_path / "bare.html"
    code, out, err = run_cli("report", report, "--html", bare)
    assert code == 0, err
    assert f"Wrote {bare} (failed run, 12 attempts)" in out
    assert page_data(bare.read_text())["thumbs"] == []
    assert "10 failed frame(s) have no thumbnail"  # door and light share frame 2 in bare.read_text()

    decoded = tmp_path / "decoded.html"
    code, _out, err = run_cli("report", report, "--html", decoded, "--eval-dir", eval_dir)
    assert code == 0, err
    assert _check_thumbnails(decoded.read_text()) == 11

    saved = tmp_path / "saved.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", saved,
                              "--save-failures")
    assert code == 1, err
    from_artifacts = tmp_path / "artifacts.html"
    code, _out, err = run_cli("report", saved, "--html", from_artifacts)
    assert code == 0, err
    assert _check_thumbnails(from_artifacts.read_text()) == 11


def test_over_budget_thumbnails_link_to_saved_failures(tmp_path: Path) -> None:
    eval_dir = _eval(tmp_path)
    page_path = tmp_path / "report.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--html", page_path,
                              "--save-failures", "--html-budget-mb", "0")
    assert code == 1, err
    page = page_path.read_text()
    data = page_data(page)
    assert data["thumbs"] == []
    links = [row[10] for row in data["rows"] if isinstance(row[10], str)]
    assert len(links) == 11 and all(link.startswith("eval/runs/failures/trial-001/") for link in links)
    assert all((tmp_path / link).is_file() for link in links)
    assert "The 0 MB image budget is spent" in page
    # The lightbox opens the same saved frame, at full resolution.
    assert [row[12] for row in data["rows"] if isinstance(row[10], str)] == links


def test_shards_merge_into_one_page(tmp_path: Path) -> None:
    eval_dir = _eval(tmp_path)
    # Failures alone fail no gate; light's adapter error does.
    for target, expected in (("door", 0), ("light", 1)):
        code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--target", target,
                                  "--output-json", tmp_path / f"{target}.json")
        assert code == expected, err
    page_path = tmp_path / "merged.html"
    code, out, err = run_cli("report", tmp_path / "door.json", tmp_path / "light.json", "--html", page_path)
    assert code == 0, err
    data = page_data(page_path.read_text())
    assert data["targets"] == ["door", "light"] and len(data["rows"]) == 12
    assert "door.json: " in page_path.read_text()  # gates name the shard they came from


def test_report_refuses_files_that_are_not_reports(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"trials": [\n  {"results": [1,]}\n]}\n')
    code, _out, err = run_cli("report", broken, "--html", tmp_path / "x.html")
    assert code == 2
    # The column is where Python's json module stops: 18 up to 3.12, 17 (the comma) from 3.13.
    assert re.search(rf"{re.escape(str(broken))}:2:1[78]: not valid JSON", err) and "Traceback" not in err
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    code, _out, err = run_cli("report", other, "--html", tmp_path / "x.html")
    assert code == 2 and "not a glasskit_eval run report" in err
    bad_result = tmp_path / "bad.json"
    damaged = report_of([result_json()])
    del damaged["trials"][0]["results"][0]["target"]
    bad_result.write_text(json.dumps(damaged))
    code, _out, err = run_cli("report", bad_result, "--html", tmp_path / "x.html")
    assert code == 2 and "trials[0].results[0]: lacks `target`" in err
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(report_of([result_json()])).replace('"timestamp_s": 0.5', '"timestamp_s": NaN'))
    code, _out, err = run_cli("report", nan, "--html", tmp_path / "x.html")
    assert code == 2 and "NaN is not valid JSON" in err
    code, _out, err = run_cli("report", tmp_path / "missing.json", "--html", tmp_path / "x.html")
    assert code == 2 and "no such report file" in err
    assert not (tmp_path / "x.html").exists()


def test_a_resumed_run_takes_reused_failures_thumbnails_from_their_artifacts(tmp_path: Path) -> None:
    import re

    eval_dir = _eval(tmp_path)
    page_path = tmp_path / "report.html"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--save-failures", "--html", page_path)
    assert code == 1, err
    assert _check_thumbnails(page_path.read_text()) == 11
    match = re.search(r"run --resume (\S+?)`", out + err)
    assert match is not None, out + err
    page_path.unlink()
    # The resume calls the adapter for the one errored sample only; the page is written again,
    # the reused failures' thumbnails made from their --save-failures JPEGs.
    code, out, err = run_cli("run", "--resume", match.group(1))
    assert code == 1, err
    page = page_path.read_text()
    assert page_data(page)["rows"] and _check_thumbnails(page) == 11
