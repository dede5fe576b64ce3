"""Review page benchmark: loading a case whose stream target has 100,000 events, server side and in a browser.

Usage: python3 benchmarks/bench_review.py [--events 100000] [--rounds 3] [--page]

The case is the one ``tests/test_review_eventsplice.py`` edits (``big_case``): a stream target
of ``--events`` events (a block mapping of ``at`` and ``expect`` each, 40 bytes a line pair),
two sample targets and a quiet span, beside the 2 s test clip. In this process, ``--rounds``
times (the parse cache emptied each time), wall and CPU seconds of:

  yaml nodes     ``load_yaml_text`` through PyYAML's composer and the node walker (the baseline)
  yaml events    ``load_yaml_text`` as the page loads it (straight from the parser's events)
  parse_case     the case checks (``cases.parse``) on the loaded document
  load           ``casedata.load``: read, hash, YAML and checks (what the page's first request costs)
  case_detail    the page's case JSON as Python values (video probe included)
  json           ``json.dumps`` of it (the bytes sent are printed)

``--page`` also opens the review page in headless Chromium (``tests/chromiumkit``) once and
prints the seconds from starting the server until the timeline draws the events; the page's
share after the case's answer arrived (until the events appear, until the opening's last drawing
of the timeline), the timeline's drawings and the seconds the page's main thread was busy
(Chromium's TaskDuration) once the first frame shows; and the seconds until a click on an event
opens it in the inspector. On a busy machine read CPU seconds; the load average is printed at the
start and the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import importable, print_table, timed


def measure(root: Path, rounds: int) -> tuple[dict[str, list[harness.Figures]], int]:
    from glasskit_eval.cases.parse import parse_case
    from glasskit_eval.review import casedata
    from glasskit_eval.yamltext import source

    path = root / "cases" / "clip.yaml"
    text = path.read_text(encoding="utf-8")

    def node_path() -> object:
        from_events = source._from_events
        source._from_events = lambda text: None  # type: ignore[assignment]
        try:
            return source.load_yaml_text(text, str(path))
        finally:
            source._from_events = from_events  # type: ignore[assignment]

    doc, problems = source.load_yaml_text(text, str(path))
    assert problems == [], problems
    loaded = casedata.load(root, "clip")
    assert loaded.problems == (), loaded.problems
    steps: list[tuple[str, Callable[[], object]]] = [
        ("yaml nodes", node_path),
        ("yaml events", lambda: source.load_yaml_text(text, str(path))),
        ("parse_case", lambda: parse_case(doc, path, allow_empty=True)),
        ("load", lambda: (casedata.PARSED._cases.clear(), casedata.load(root, "clip"))),
        ("case_detail", lambda: casedata.case_detail(loaded)),
    ]
    detail = casedata.case_detail(loaded)
    steps.append(("json", lambda: json.dumps(detail)))
    figures: dict[str, list[harness.Figures]] = {name: [] for name, _ in steps}
    for _ in range(rounds):
        for name, work in steps:
            figures[name].append(timed(work))
    return figures, len(json.dumps(detail).encode())


# In the page from its start: when the events first appear and when the timeline was last drawn
# (its children replaced), on the page's own clock, not this process's polling.
WATCH = """new MutationObserver((changes) => {
    if (changes.some((c) => c.target.id === 'timeline')) window.timelineDrawnAt = performance.now();
    if (!window.eventsDrawnAt && document.querySelector(".tl-row[data-target='pan'] .tl-event")) {
        window.eventsDrawnAt = performance.now(); }
}).observe(document, { childList: true, subtree: true });"""

# Once the opening has settled (two frames after the first frame shows): seconds after the case's
# answer arrived until the events appeared and until the last drawing of the opening.
SETTLED = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
    const answer = performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/cases/clip'));
    done([(window.eventsDrawnAt - answer.responseEnd) / 1000, (window.timelineDrawnAt - answer.responseEnd) / 1000,
          Number(document.getElementById('timeline').dataset.draws ?? NaN)]);
})))"""


def page(root: Path) -> dict[str, float]:
    """Seconds from starting the review server until the timeline shows events, one is selected, a frame shows."""
    importable(tests=True)
    from chromiumkit import VIEWPORT, launched

    from glasskit_eval.commands.review import ReviewOptions, start_review
    from glasskit_eval.review import casedata
    from glasskit_eval.review.server import serve_in_thread

    casedata.PARSED._cases.clear()
    out: dict[str, float] = {}
    with launched() as browser:
        tab = browser.new_context(viewport=VIEWPORT).new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.add_init_script(WATCH)
        cdp = tab.context.new_cdp_session(tab)
        cdp.send("Performance.enable")
        started = time.perf_counter()
        server = start_review(ReviewOptions(eval_dir=root))
        thread = serve_in_thread(server)
        try:
            tab.goto(server.login_url)
            row = ".tl-row[data-target='pan']"
            tab.wait_for_selector(f"{row} .tl-event", timeout=120_000)
            out["timeline drawn"] = time.perf_counter() - started
            tab.wait_for_selector("#frame-label[data-index]", timeout=120_000)
            first, last, draws = tab.evaluate(SETTLED)
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            out |= {"events shown": first, "last drawing": last, "drawings": draws, "main thread": metrics["TaskDuration"]}
            # The last tick drawn is on top of its neighbours (a long list is drawn a few pixels apart).
            tab.locator(f"{row} .tl-event").last.click()
            tab.wait_for_selector("#event-form:not([hidden])", timeout=120_000)
            out["event selected"] = time.perf_counter() - started
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
    if errors:
        raise SystemExit(f"the page failed: {errors}")
    return out


WHAT = {
    "timeline drawn": "s after the server started",
    "events shown": "s after the case's answer arrived (the page's share)",
    "last drawing": "s after the case's answer arrived: the opening's last drawing of the timeline",
    "drawings": " drawings of the timeline while the case opened (the page's count; nan: none kept)",
    "main thread": "s the page's main thread was busy until then (scripts, layout, parsing; from its start)",
    "event selected": "s after the server started: a click on an event opened it in the inspector",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--page", action="store_true", help="also time the page in headless Chromium")
    args = parser.parse_args()
    importable(tests=True)
    from evalkit import make_clip_case
    from test_review_eventsplice import big_case

    harness.load_average("at start")
    with tempfile.TemporaryDirectory() as tmp:
        path = make_clip_case(Path(tmp), big_case(args.events))
        root = path.parent.parent
        print(f"case: {args.events:,} events, {path.stat().st_size / 1e6:.1f} MB")
        figures, sent = measure(root, args.rounds)
        rows: list[list[Any]] = []
        for name, runs in figures.items():
            rows.append([name, f"{statistics.median(r['wall'] for r in runs):.3f}s",
                         f"{statistics.median(r['cpu'] for r in runs):.3f}s"])
        print(f"\nmedians of {args.rounds} rounds")
        print_table(["step", "wall", "cpu"], rows)
        print(f"case JSON sent to the page: {sent / 1e6:.1f} MB")
        if args.page:
            print()
            for name, value in page(root).items():
                print(f"{name:15s} {value:.3g}{WHAT[name]}" if name == "drawings" else f"{name:15s} {value:.2f}{WHAT[name]}")
    harness.load_average("at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
