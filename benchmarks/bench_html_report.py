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
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import importable, range_samples, timed_cli, write_eval

FAILING_ADAPTER = """
def create_evaluator(config):
    return TenPercent()

class TenPercent:
    def evaluate(self, sample, target):
        # 10% of each target's samples fail, on different frames for the two targets.
        return {"ok": sample.sample_index % 10 != (3 if target.id == "a" else 7)}
"""


def child(video: Path, seconds: int, html: bool) -> dict[str, float]:
    harness.load_engine()
    from glasskit_eval.commands import run as publish  # the name the run command calls
    from glasskit_eval.reports import thumbnails

    spent = {"thumbnails": 0.0, "page": 0.0}
    keep = thumbnails.ThumbnailStore.keep
    write = publish.write_html

    def timed_keep(self: thumbnails.ThumbnailStore, result: object, image: object, frames: object = ()) -> None:
        started = time.perf_counter()
        keep(self, result, image, frames)  # type: ignore[arg-type]
        spent["thumbnails"] += time.perf_counter() - started

    def timed_write(*args: object, **kwargs: object) -> None:
        started = time.perf_counter()
        write(*args, **kwargs)  # type: ignore[arg-type]
        spent["page"] += time.perf_counter() - started

    thumbnails.ThumbnailStore.keep = timed_keep  # type: ignore[method-assign]
    publish.write_html = timed_write  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        eval_dir = write_eval(Path(tmp), video, {"a": range_samples(seconds), "b": range_samples(seconds)},
                              FAILING_ADAPTER)
        argv = ["run", "--eval-dir", str(eval_dir)]
        page = Path(tmp) / "report.html"
        if html:
            argv += ["--html", str(page)]
        elapsed, _cpu = timed_cli(argv, ok=(0, 1))
        size = page.stat().st_size if html else 0
    return {"elapsed": elapsed, "size_mb": size / 1e6, **spent}


def page_load(folder: Path) -> tuple[float, float]:
    """(ms until usable, page MB) for a 10,000-sample report in headless Chromium."""
    importable(tests=True)
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
    harness.options(parser, minutes=10)
    args = parser.parse_args()
    if args.child:
        harness.report(child(args.video, args.seconds, args.child == "html"))
        return 0
    seconds = args.minutes * 60
    with harness.workdir(args.keep) as (folder, scratch):
        video = harness.main_video(folder, seconds)

        def line(kind: str, f: dict[str, float]) -> str:
            if kind == "plain":
                return f"run {f['elapsed']:.3f}s"
            return (f"run --html {f['elapsed']:.3f}s (thumbnails {f['thumbnails']:.3f}s, page {f['page']:.3f}s, "
                    f"{f['size_mb']:.1f} MB)")

        results = harness.interleave(args.rounds, ["plain", "html"],
                             lambda kind: harness.run_child(__file__, kind, video, seconds), line)
        load_ms, load_mb = page_load(scratch)
    html = results["html"]
    base = harness.median(results["plain"], "elapsed")
    with_html = harness.median(html, "elapsed")
    thumbs = harness.median(html, "thumbnails")
    page = harness.median(html, "page")
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
