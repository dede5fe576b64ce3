"""HTML report benchmark: what thumbnails cost a dense run, and how fast a 10,000-sample page loads.

Usage: python3 benchmarks/bench_html_report.py [--rounds 3] [--minutes 10] [--keep DIR]

thumbnails  The frame engine benchmark's ``dense`` scenario (N-minute 1280x720 30 fps video,
            2 targets, a sample every 0.5 s, trivial adapter) with 10% of the samples failing,
            on different frames per target. Each round runs, in its own subprocess, ``run``
            without and with ``--html``, interleaved; times are measured in the child around
            ``main`` (interpreter start-up excluded). The --html child also reports the time
            spent making thumbnails (inside the run loop) and rendering plus writing the page.
page-load   A synthetic 10,000-sample report (10% failed, with thumbnails) opened from file://
            in headless Chromium; the page records ``performance.now()`` when it is usable.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_frames import make_video, write_eval  # noqa: E402

FAILING_ADAPTER = """
def create_evaluator(config):
    return TenPercent()

class TenPercent:
    def evaluate(self, sample, target):
        # 10% of each target's samples fail, on different frames for the two targets.
        return {"ok": sample.sample_index % 10 != (3 if target.id == "a" else 7)}
"""


def child(video: Path, seconds: int, html: bool) -> dict[str, float]:
    import importlib
    import io
    import pkgutil

    import av  # noqa: F401  (imports are start-up, not work)

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    from glasskit_eval.reports import publish, thumbnails

    spent = {"thumbnails": 0.0, "page": 0.0}
    keep = thumbnails.ThumbnailStore.keep
    write = publish.write_html

    def timed_keep(self: thumbnails.ThumbnailStore, result: object, image: object) -> None:
        started = time.perf_counter()
        keep(self, result, image)  # type: ignore[arg-type]
        spent["thumbnails"] += time.perf_counter() - started

    def timed_write(*args: object, **kwargs: object) -> None:
        started = time.perf_counter()
        write(*args, **kwargs)  # type: ignore[arg-type]
        spent["page"] += time.perf_counter() - started

    thumbnails.ThumbnailStore.keep = timed_keep  # type: ignore[method-assign]
    publish.write_html = timed_write  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
        eval_dir = write_eval(Path(tmp), video, {"a": samples, "b": samples}, FAILING_ADAPTER, "0.5")
        argv = ["run", "--eval-dir", str(eval_dir)]
        page = Path(tmp) / "report.html"
        if html:
            argv += ["--html", str(page)]
        out = io.StringIO()
        started = time.perf_counter()
        code = main(argv, out=out, err=out)
        elapsed = time.perf_counter() - started
        if code not in (0, 1):
            raise SystemExit(f"run failed ({code}):\n{out.getvalue()}")
        size = page.stat().st_size if html else 0
    return {"elapsed": elapsed, "size_mb": size / 1e6, **spent}


def run_child(video: Path, seconds: int, html: bool) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [sys.executable, __file__, "--child", "--video", str(video), "--seconds", str(seconds)]
    proc = subprocess.run(argv + (["--html"] if html else []), capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{proc.stderr}")
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def page_load(folder: Path) -> tuple[float, float]:
    """(ms until usable, page MB) for a 10,000-sample report in headless Chromium."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from framecode import draw_frame
    from htmlkit import result, summary_of
    from playwright.sync_api import sync_playwright

    from glasskit_eval.reports.html import HtmlOptions, render_html
    from glasskit_eval.reports.thumbnails import make_thumbnail
    from glasskit_eval.results import Status

    rows = [result(case=f"case-{i // 2500}", target=("left", "right")[i % 2], index=i // 2, t=(i % 2500) / 5,
                   frame=i % 2500, status=Status.FAILED if i % 10 == 3 else Status.PASSED,
                   observed={"ok": i % 10 != 3}, source="range [0, 500)") for i in range(10_000)]
    thumbs = {(r.case, r.frame_index): make_thumbnail(draw_frame(r.frame_index or 0, 1280, 720))
              for r in rows if r.status is Status.FAILED}
    page = folder / "big.html"
    started = time.perf_counter()
    page.write_text(render_html(summary_of(rows), HtmlOptions(thumbnails=thumbs)), encoding="utf-8")
    print(f"rendered the 10,000-sample page in {time.perf_counter() - started:.2f}s")
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            for _ in range(3):
                tab = browser.new_page(viewport={"width": 1400, "height": 950})
                tab.goto(page.as_uri())
                tab.wait_for_selector("body[data-ready]")
                times.append(float(tab.get_attribute("body", "data-ready-ms") or "nan"))
                tab.close()
        finally:
            browser.close()
    return statistics.median(times), page.stat().st_size / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="folder for the generated videos (reused)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--html", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--video", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.video), args.seconds, args.html)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = folder / f"dense_{args.minutes}m_720p.mp4"  # bench_frames' name: --keep folders are shared
        if not video.exists():
            make_video(video, args.minutes * 60, 1280, 720)
        seconds = args.minutes * 60
        plain: list[float] = []
        html: list[dict[str, float]] = []
        for round_no in range(1, args.rounds + 1):
            plain.append(run_child(video, seconds, False)["elapsed"])
            html.append(run_child(video, seconds, True))
            print(f"round {round_no}: run {plain[-1]:.3f}s, run --html {html[-1]['elapsed']:.3f}s "
                  f"(thumbnails {html[-1]['thumbnails']:.3f}s, page {html[-1]['page']:.3f}s, "
                  f"{html[-1]['size_mb']:.1f} MB)", flush=True)
        load_ms, load_mb = page_load(Path(tmp))
    base = statistics.median(plain)
    with_html = statistics.median(h["elapsed"] for h in html)
    thumbs = statistics.median(h["thumbnails"] for h in html)
    page = statistics.median(h["page"] for h in html)
    samples = 2 * (seconds * 2 + 1)
    print(f"\nmedians of {args.rounds} rounds, dense {args.minutes} min 720p, {samples} samples, 10% failing")
    print(f"  run            {base:7.3f}s")
    print(f"  run --html     {with_html:7.3f}s  (+{(with_html - base) / base * 100:.1f}%)")
    print(f"  thumbnails     {thumbs:7.3f}s  = {thumbs / base * 100:.1f}% of the run "
          f"({thumbs / (samples / 10) * 1000:.2f} ms per failed sample)")
    print(f"  page           {page:7.3f}s  (render + write, {html[0]['size_mb']:.1f} MB)")
    print(f"\n10,000-sample page ({load_mb:.1f} MB): usable {load_ms:.0f} ms after navigation in Chromium "
          "(median of 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
