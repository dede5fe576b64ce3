"""An eval directory for ``run --early-stop`` simulations: a small synthetic video with a sample every
0.1 s, and a Python adapter that replays pre-drawn outcomes keyed by sample time and logs its calls."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

from fixturevideos import grey_ramp

FPS = 10

ADAPTER = """
import json, pathlib, time

def create_evaluator(config):
    outcomes = json.loads(pathlib.Path(config.config["outcomes"]).read_text())
    log = pathlib.Path(config.config["log"])
    cost = config.config.get("cost")
    mark = config.config.get("mark")
    if mark is not None and pathlib.Path(mark).exists():
        mark = None  # a resume: the kill has happened
    made = []

    def evaluate(sample, target):
        index = round(sample.timestamp_s * 10)
        with log.open("a") as f:
            f.write(f"{index}\\n")
        made.append(index)
        if mark is not None and len(made) >= config.config["mark_after"]:
            # Slow from here on, so a signal sent once the mark exists lands mid-run.
            pathlib.Path(mark).touch()
            time.sleep(0.05)
        if cost is not None:
            sample.report_usage(cost=cost)
        return {"ok": bool(outcomes[index])}
    return evaluate
"""


def make_video(path: Path, seconds: int) -> Path:
    """A 64x48 H.264 video at 10 fps, a keyframe every second, each frame a different grey."""
    return grey_ramp(path, seconds * FPS, FPS, FPS, 7)


def burst_outcomes(rng: random.Random, n: int, pass_rate: float, run: int = 20) -> list[int]:
    """Exactly ``round(n * (1 - pass_rate))`` failures, in runs of about ``run`` consecutive samples."""
    outcomes = [1] * n
    failures = round(n * (1 - pass_rate))
    placed = 0
    while placed < failures:
        length = min(failures - placed, 1 + int(rng.expovariate(1 / (run - 1))))
        begin = rng.randrange(n)
        for index in range(begin, min(n, begin + length)):
            if outcomes[index]:
                outcomes[index] = 0
                placed += 1
                if placed == failures:
                    break
    return outcomes


def iid_outcomes(rng: random.Random, n: int, pass_rate: float) -> list[int]:
    return [1 if rng.random() < pass_rate else 0 for _ in range(n)]


def make_eval(root: Path, video: Path, outcomes: list[int], *, min_pass_rate: float | None = 0.9,
              cost: float | None = None, mark_after: int | None = None) -> Path:
    """``root/eval`` with one case sampling ``video`` every 0.1 s; returns the eval directory."""
    eval_dir = root / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    (eval_dir / "cases" / "long.mp4").symlink_to(video)
    seconds = len(outcomes) / FPS
    (eval_dir / "cases" / "long.yaml").write_text(textwrap.dedent(f"""\
        video: long.mp4
        targets:
          ok:
            samples:
            - range: [0, {seconds:g}]
              every_s: 0.1
              field: ok
              expect: true
        """))
    (eval_dir / "adapter.py").write_text(ADAPTER)
    (root / "outcomes.json").write_text(json.dumps(outcomes))
    config: dict[str, object] = {"outcomes": str(root / "outcomes.json"), "log": str(root / "calls.log")}
    if cost is not None:
        config["cost"] = cost
    if mark_after is not None:
        config |= {"mark": str(root / "mark"), "mark_after": mark_after}
    (eval_dir / "adapter.yaml").write_text(json.dumps(config))
    if min_pass_rate is not None:
        (eval_dir / "config.yaml").write_text(f"thresholds:\n  min_pass_rate: {min_pass_rate}\n")
    return eval_dir


def calls(root: Path) -> list[int]:
    log = root / "calls.log"
    return [int(line) for line in log.read_text().split()] if log.exists() else []
