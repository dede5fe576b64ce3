"""End-to-end `validate`, `list-samples`, `export-frames`, `--help` and `--version`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from evalkit import FRAMECODE_ADAPTER, ROOT, make_eval, read_json, run_cli
from framecode import read_frame_index
from PIL import Image

from glasskit_eval import __version__

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

CASE = """
video: cfr_h264.mp4
targets:
  ready:
    samples:
    - range: [0, 1]
      every_s: 0.25
      expect: true
      field: result.ok
    - at: 1.5
      expect: 0.5
      compare: {mode: numeric, tolerance: 0.1}
    - at: 1.8
      ignore: blurry
"""


def test_validate_passes_and_counts_samples(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE})
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0, out + err
    assert out.strip() == f"Validation passed: {eval_dir} (6 samples)"


def test_validate_verbose_describes_videos(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE.replace("cfr_h264.mp4", "rotate90.mp4")}, videos=("rotate90.mp4",))
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir, "--verbose")
    assert code == 0
    assert "20 frames" in out and "rotated 90 degrees clockwise" in out


def test_validate_reports_every_problem_with_file_path_and_line(tmp_path: Path) -> None:
    broken = """\
video: cfr_h264.mp4
targets:
  t:
    samples:
    - range: [2, 1]
      expect: true
    - at: 0.5
      expected: true
    - at: -1
      expect: true
"""
    eval_dir = make_eval(tmp_path, {"bad": broken})
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "Validation failed"
    path = eval_dir / "cases" / "bad.yaml"
    assert any(f"{path}:5: targets.t.samples[0].range" in line for line in lines)
    assert any(f"{path}:8: targets.t.samples[1].expected: unknown key 'expected' (did you mean 'expect'?)" in line
               for line in lines)
    assert any(f"{path}:9: targets.t.samples[2].at" in line and "nonnegative" in line for line in lines)


def test_validate_with_adapter_constructs_and_closes_it(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    adapter = f"""
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                raise AssertionError("validate must not evaluate")
            def close(self):
                open({str(marker)!r}, "w").close()
        """
    eval_dir = make_eval(tmp_path, {"a": CASE}, adapter)
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:create_evaluator")
    assert code == 0, out
    assert marker.exists()
    (eval_dir / "adapter.py").write_text("def create_evaluator(config):\n    raise RuntimeError('no key')\n")
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:create_evaluator")
    assert code == 1
    assert "adapter validation failed" in out and "RuntimeError: no key" in out


def test_validate_rejects_drafts_in_scope_only(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  done:\n    samples:\n    - at: 1\n      expect: true\n" \
           "  draft:\n    samples:\n    - at: 1\n"
    eval_dir = make_eval(tmp_path, {"a": case})
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and "draft" in out and "seed" in out
    assert run_cli("validate", "--eval-dir", eval_dir, "--target", "done")[0] == 0


def test_validate_missing_video_is_a_validation_failure(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE.replace("cfr_h264.mp4", "nope.mp4")})
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and "video not found" in out


def test_list_samples_table(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE})
    code, out, _ = run_cli("list-samples", "--eval-dir", eval_dir)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Samples: {eval_dir}"
    assert lines[1].split() == ["Case", "Target", "Time", "Expected", "Mode", "Field", "Ignored", "Source"]
    body = [line.split() for line in lines[3:]]
    assert [row[2] for row in body] == ["0.0s", "0.25s", "0.5s", "0.75s", "1.5s", "1.8s"]
    assert "result.ok" in lines[3] and "range [0.0, 1.0) every 0.25" in lines[3]
    assert "numeric ±0.1" in lines[7]
    assert "blurry" in lines[8]


def test_list_samples_shows_a_labelled_target_as_label_and_id(tmp_path: Path) -> None:
    case = ("video: cfr_h264.mp4\ntargets:\n  door:\n    label: Door open\n    samples:\n"
            "    - at: 0.5\n      expect: true\n  bare:\n    samples:\n    - at: 0.5\n      expect: 1\n")
    eval_dir = make_eval(tmp_path, {"a": case})
    code, out, err = run_cli("list-samples", "--eval-dir", eval_dir)
    assert code == 0, err
    body = out.splitlines()[3:]
    assert body[0].split()[:5] == ["a", "Door", "open", "(door)", "0.5s"]
    assert body[1].split()[:3] == ["a", "bare", "0.5s"]


def test_list_samples_filters(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE})
    code, out, _ = run_cli("list-samples", "--eval-dir", eval_dir, "--case", "a", "--from", "0.5", "--until", "1.5")
    assert code == 0
    assert [line.split()[2] for line in out.splitlines()[3:]] == ["0.5s", "0.75s"]
    code, _, err = run_cli("list-samples", "--eval-dir", eval_dir, "--case", "a", "--at", "0.3")
    assert code == 2 and "not a scheduled sample time" in err


def test_export_frames_writes_the_adapters_exact_frames(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE.replace("cfr_h264.mp4", "rotate90.mp4")},
                         FRAMECODE_ADAPTER, videos=("rotate90.mp4",))
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a",
                             "--at", "1.5", "--at", "0.25", "--at", "1.50", "--at", "1")
    assert code == 0, err
    paths = [Path(p) for p in out.splitlines()]
    folder = eval_dir / "runs" / "frames" / "a"
    # A repeated time is one file, written and printed once, in the order first requested.
    assert paths == [folder / "at-1.5s.png", folder / "at-0.25s.png", folder / "at-1.0s.png"]
    assert sorted(p.name for p in folder.iterdir()) == ["at-0.25s.png", "at-1.0s.png", "at-1.5s.png"]
    with Image.open(folder / "at-1.5s.png") as image:
        assert image.mode == "RGB" and image.size == (128, 72)
        assert read_frame_index(image) == 15
        exported = image.tobytes()
    # The adapter gets the same pixels for the same time.
    report = tmp_path / "r.json"
    grab = tmp_path / "grab.png"
    (eval_dir / "adapter.py").write_text(f"def check(image, target_id):\n"
                                         f"    image.save({str(grab)!r})\n    return True\n")
    case = "video: rotate90.mp4\ntargets:\n  t:\n    samples:\n    - at: 1.5\n      expect: true\n"
    (eval_dir / "cases" / "a.yaml").write_text(case)
    assert run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:check",
                   "--output-json", report)[0] == 0
    with Image.open(grab) as image:
        assert image.tobytes() == exported
    assert read_json(report)["trials"][0]["results"][0]["frame_index"] == 15


def test_export_frames_rejects_times_past_the_end(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE})
    code, _, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a", "--at", "9")
    assert code == 2 and "past the end" in err
    assert not (eval_dir / "runs").exists()
    # cfr_h264.mp4 lasts exactly 2 s: `run` would accept 2.01 (within its 0.05 s tolerance for
    # rounded durations), export-frames does not ("a time beyond the source video duration").
    code, _, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a", "--at", "2.01")
    assert code == 2 and "--at 2.01s is past the end" in err and "clip length 2.0s" in err, err
    assert not (eval_dir / "runs").exists()
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a", "--at", "2")
    assert code == 0, err
    with Image.open(out.strip()) as image:
        assert read_frame_index(image) == 19


def test_export_frames_custom_output_dir(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE})
    out_dir = tmp_path / "frames"
    code, out, _ = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a.yaml", "--at", "0",
                           "--output-dir", out_dir)
    assert code == 0
    assert out.strip() == str(out_dir / "at-0.0s.png")


@pytest.mark.parametrize("command", ["run", "validate", "list-samples", "export-frames"])
def test_help_for_every_command(command: str) -> None:
    code, out, _ = run_cli(command, "--help")
    assert code == 0
    assert "--eval-dir" in out


def test_version_and_module_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"glasskit_eval {__version__}"


def test_unknown_command_is_a_usage_error() -> None:
    code, _, err = run_cli("frobnicate")
    assert code == 2 and "invalid choice" in err


def test_written_files_get_the_umask_permissions_not_a_temp_files(tmp_path: Path) -> None:
    import os
    import stat

    eval_dir = make_eval(tmp_path, {"a": CASE})
    old = os.umask(0o022)
    try:
        code, out, _ = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "a", "--at", "0")
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE(Path(out.strip()).stat().st_mode) == 0o644


@pytest.mark.parametrize("command", ["validate", "list-samples", "run"])
@pytest.mark.parametrize("hostile", ["expect: " + "9" * 5000, 'expect: "\\ud800"'])
def test_hostile_scalars_are_located_errors_in_every_command(tmp_path: Path, command: str, hostile: str) -> None:
    case = f"video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: 0.5\n      {hostile}\n"
    eval_dir = make_eval(tmp_path, {"c": case}, "def create_evaluator(config):\n    raise SystemExit('never')\n")
    code, out, err = run_cli(command, "--eval-dir", eval_dir)
    assert code == (1 if command == "validate" else 2)
    assert "c.yaml:6: targets.t.samples[0].expect" in out + err and "Traceback" not in out + err


def _video_case(name: str) -> str:
    return f"video: {name}\ntargets:\n  t:\n    samples:\n    - at: 0.5\n      expect: true\n"


def test_a_fifo_or_a_symlink_loop_as_video_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    eval_dir = make_eval(tmp_path, {"loop": _video_case("loop.mp4"), "fifo": _video_case("fifo.mp4")})
    (eval_dir / "cases" / "loop.mp4").symlink_to("loop.mp4")
    os.mkfifo(eval_dir / "cases" / "fifo.mp4")
    code, out, _err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1
    assert "loop.yaml:1: video: video" in out and "is a symlink loop" in out
    assert "fifo.yaml:1: video: video" in out and "is a FIFO" in out
    # A subprocess with a deadline: opening a FIFO for reading would block for ever.
    for argv in (["run", "--case", "fifo"], ["export-frames", "--case", "fifo", "--at", "0.5"]):
        proc = subprocess.run([sys.executable, "-m", "glasskit_eval", *argv, "--eval-dir", str(eval_dir)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "is a FIFO" in proc.stderr and "Traceback" not in proc.stderr


def test_a_symlinked_video_is_judged_by_the_name_the_case_uses(tmp_path: Path) -> None:
    # DVC and git-annex keep the bytes in suffixless blobs behind links.
    eval_dir = make_eval(tmp_path, {"c": _video_case("clip.mp4")}, videos=())
    blob = tmp_path / "blob-5d41402abc"
    blob.write_bytes((ROOT / "fixtures" / "videos" / "cfr_h264.mp4").read_bytes())
    (eval_dir / "cases" / "clip.mp4").symlink_to(blob)
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0, out + err


def test_interrupts_map_to_exit_130_like_upstream() -> None:
    from glasskit_eval.errors import ExitCode, Interrupted, exit_code_for

    assert exit_code_for(Interrupted("SIGINT")) == ExitCode.INTERRUPTED == 130
    assert exit_code_for(KeyboardInterrupt()) == 130


@pytest.mark.parametrize("both", [False, True])
def test_config_yml_and_adapter_yml_are_not_ignored_silently(tmp_path: Path, both: bool) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE}, FRAMECODE_ADAPTER)
    # The gate in config.yml would fail this run; silently ignored, CI would pass without it.
    (eval_dir / "config.yml").write_text("thresholds:\n  min_pass_rate: 1.0\n")
    if both:
        (eval_dir / "config.yaml").write_text("thresholds: {}\n")
    todo = "merge it into config.yaml and delete it" if both else "rename it to config.yaml"
    message = f"{eval_dir / 'config.yml'}: found config.yml, but only config.yaml is read: {todo}"
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and f"- {message}" in out.splitlines(), out
    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and message in err, err
    assert not (eval_dir / "runs").exists()

    (eval_dir / "config.yml").unlink()
    (eval_dir / "adapter.yml").write_text("model: small\n")
    message = f"{eval_dir / 'adapter.yml'}: found adapter.yml, but only adapter.yaml is read: rename it to adapter.yaml"
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and f"- {message}" in out.splitlines(), out
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:create_evaluator")
    assert code == 1 and f"- {message}" in out.splitlines(), out
    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and message in err and "--adapter-config" in err, err
    # Named explicitly, it is an ordinary adapter config.
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-config", eval_dir / "adapter.yml")
    assert code in (0, 1), err


BROKEN_OTHER = """
video: missing.mp4
targets:
  other:
    samples:
    - range: [2, 1]
      expect: true
      bogus_key: 1
"""


@pytest.mark.parametrize("command", ["run", "list-samples", "validate", "seed"])
def test_target_filter_skips_unrelated_broken_case_files(tmp_path: Path, command: str) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE, "b-broken": BROKEN_OTHER}, FRAMECODE_ADAPTER)
    code, out, err = run_cli(command, "--eval-dir", eval_dir)
    assert code in (1, 2) and "b-broken.yaml" in out + err  # unfiltered, the broken file is reported
    code, out, err = run_cli(command, "--eval-dir", eval_dir, "--target", "ready")
    assert code == 0, out + err
    assert "b-broken" not in out + err
    if command == "list-samples":
        assert {line.split()[0] for line in out.splitlines()[3:]} == {"a"}
    # A broken file that does declare the target is still reported.
    code, out, err = run_cli(command, "--eval-dir", eval_dir, "--target", "other")
    assert code in (1, 2) and "b-broken.yaml" in out + err and "bogus_key" in out + err


@pytest.mark.parametrize("command", ["run", "list-samples", "seed"])
def test_unknown_target_lists_the_evals_targets_and_suggests_one(tmp_path: Path, command: str) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE, "b": CASE.replace("ready:", "door:")}, FRAMECODE_ADAPTER)
    code, out, err = run_cli(command, "--eval-dir", eval_dir, "--target", "raedy")
    assert code == 2, out + err
    assert "unknown target 'raedy' in the selected cases; targets: door, ready (did you mean 'ready'?)" \
        in out + err
    code, out, err = run_cli(command, "--eval-dir", eval_dir, "--case", "b", "--target", "ready")
    assert code == 2 and "unknown target 'ready' in case 'b'; targets: door" in out + err
