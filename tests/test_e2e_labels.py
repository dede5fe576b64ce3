"""Suspect labels end to end: a real run with arms and repeats, and the console, JSON and HTML agreeing.

The scenario (``labelkit``): three labels contradicted by every voting arm on every repeat, two
single-arm mistakes that stay a minority, and a perturbation arm whose failures do not vote.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from evalkit import ROOT, read_json, run_cli
from labelkit import RUN, SUSPECT_TIMES, labels_eval

pytestmark = pytest.mark.e2e


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return labels_eval(tmp_path)


def console_suspects(out: str) -> list[float]:
    section = out.split("Labels to check", 1)[1].split("\n\n", 1)[0]
    return [float(m) for m in re.findall(r"^clip\s+ok\s+([0-9.]+)s\s", section, re.MULTILINE)]


def test_console_json_and_html_list_the_same_suspects(eval_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, *RUN, "--output-json", "r.json", "--html", "r.html")
    assert code == 0, err
    assert "Labels to check: 3 suspect, 0 ambiguous of 20 samples" in out
    assert "Voting arms: control, b, c (dim perturbed: not voting)" in out
    assert console_suspects(out) == SUSPECT_TIMES
    report = read_json(tmp_path / "r.json")
    suspects = report["label_suspects"]
    assert [s["at"] for s in suspects] == SUSPECT_TIMES
    for s in suspects:
        # Three voting arms, two repeats: six votes, all for `true`.
        assert (s["case"], s["target"], s["expected"], s["consensus"]) == ("clip", "ok", False, True)
        assert (s["votes_against"], s["votes"]) == (6, 6)
    assert report["label_ambiguous"] == []
    check = report["label_check"]
    assert check["voting_arms"] == ["control", "b", "c"] and check["abstaining_arms"] == ["dim"]
    assert check["claimed"] and check["judged_samples"] == 20
    page = (tmp_path / "r.html").read_text()
    html_times = [float(t) for t in re.findall(r'class="flip label-suspect"[^>]*data-at="([0-9.]+)"', page)]
    assert html_times == SUSPECT_TIMES
    # The frames the votes were cast on are in the page (the failed votes' thumbnails).
    section = page.split('<section id="labels">', 1)[1].split("</section>", 1)[0]
    assert section.count('<img class="flip-img" src="data:image/jpeg;base64,') == 3
    command = re.search(r"^Review them: (.+)$", out, re.MULTILINE)
    assert command is not None and command.group(1) == "python -m glasskit_eval review --report r.json --suspects"
    assert command.group(1) in page
    # `report` renders the same section from the JSON report alone.
    code, _out, err = run_cli("report", "r.json", "--html", "again.html")
    assert code == 0, err
    again = (tmp_path / "again.html").read_text()
    assert [float(t) for t in re.findall(r'class="flip label-suspect"[^>]*data-at="([0-9.]+)"', again)] == SUSPECT_TIMES
    assert command.group(1) in again


def test_the_printed_review_command_opens_the_first_suspect(eval_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, *RUN, "--output-json", "r.json")
    assert code == 0, err
    command = re.search(r"^Review them: (.+)$", out, re.MULTILINE)
    assert command is not None
    words = shlex.split(command.group(1))
    assert words[:3] == ["python", "-m", "glasskit_eval"]
    with subprocess.Popen([sys.executable, *words[1:], "--no-open"], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
        finally:
            proc.terminate()
            _rest, stderr = proc.communicate(timeout=10)
    assert line.startswith("Review UI: http://127.0.0.1:"), line + stderr
    from glasskit_eval.commands.review import ReviewOptions, start_review

    server = start_review(ReviewOptions(eval_dir=eval_dir, report=tmp_path / "r.json", suspects=True))
    try:
        assert server.state.initial == {"case": "clip", "target": "ok", "time": 0.3}
        assert [s["at"] for s in server.state.suspects] == SUSPECT_TIMES
    finally:
        server.server_close()


def test_one_vote_per_sample_claims_nothing(eval_dir: Path, tmp_path: Path) -> None:
    # The control and a perturbation arm, no repeat: the control's one vote per sample.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "control", "--arm", "dim", "--output-json", "r.json")
    assert code == 0, err
    assert "Labels to check\n  one vote per sample: nothing is claimed about labels; run with --repeat 2" in out
    report = read_json(tmp_path / "r.json")
    assert report["label_suspects"] == [] and report["label_check"]["claimed"] is False
    assert "--repeat 2" in report["label_check"]["note"]
    code, _out, err = run_cli("review", "--eval-dir", eval_dir, "--report", "r.json", "--suspects", "--no-open")
    assert code == 2 and "has no label check: one vote per sample" in err, err
    # A plain run keeps upstream's report keys: no label blocks at all.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "plain.json")
    assert code == 0, err  # no gate configured: failures do not fail the run
    assert "Labels to check" not in out
    assert not any(key.startswith("label_") for key in read_json(tmp_path / "plain.json"))


def test_suspects_needs_a_report(eval_dir: Path) -> None:
    code, _out, err = run_cli("review", "--eval-dir", eval_dir, "--suspects", "--no-open")
    assert code == 2 and "--suspects needs --report" in err
