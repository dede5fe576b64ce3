"""The ``report`` command: JSON run reports (shards merge) rendered as one HTML page, without the adapter."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ..errors import EvalError
from ..plan.planning import build_plan, clip_durations
from ..plan.schedule import Filters
from ..plan.videos import video_resolver
from ..reports.html import HtmlOptions
from ..reports.labels import review_suspects_command
from ..reports.loading import arms_of_reports, load_report_file, run_from_reports
from ..reports.publish import shown_eval_dir, write_html
from ..reports.thumbnails import DEFAULT_BUDGET_BYTES, ThumbnailStore, arm_variants, wants_thumbnail
from ..results import SampleResult
from ..summary import RunSummary
from .labelling import merged_label_check


def execute_report(paths: Sequence[Path], html: Path, out: TextIO, err: TextIO, *, eval_dir: Path | None,
                   budget_bytes: int = DEFAULT_BUDGET_BYTES) -> RunSummary:
    """``report``: read JSON reports, collect thumbnails, write the page; returns what it rendered."""

    loaded = [(p, load_report_file(p)) for p in paths]
    run = run_from_reports(loaded)
    # A run made with --baseline recorded its comparison; one report's is shown as it was.
    baselines = [data["baseline"] for _p, data in loaded if isinstance(data.get("baseline"), dict)]
    arms = arms_of_reports(loaded, run)
    # Arms are never pooled: the headline is the control's, every arm's figures are in the arms table.
    summary = RunSummary.of(run, control=arms.control if arms is not None else None)
    results = [r for t in run.trials for r in t.results]
    store = ThumbnailStore(budget_bytes, variants=arm_variants(arms.specs) if arms is not None else None)
    store.add_from_artifacts(results)
    # A flip shows both arms' frames: the passing side's too, where the video can give it (plain pixels).
    flipped = {(f.case, f.target, f.timestamp_s) for c in (arms.comparisons if arms is not None else ())
               for f in c.flips}

    def pictured(r: SampleResult) -> bool:
        return wants_thumbnail(r) or (r.frame_index is not None and (r.case, r.target, r.timestamp_s) in flipped)

    notes: list[str] = []
    durations: Mapping[str, float] = {}
    if eval_dir is not None:
        durations, more = _from_videos(eval_dir, run.cases, results, store,
                                       lambda line: print(line, file=err), pictured)
        notes += more
    shown = shown_eval_dir(run.eval_dir, str(eval_dir) if eval_dir is not None else None)

    labels = merged_label_check(run, arms.specs if arms is not None else None)
    # `review --suspects` reads one report; shards merged here have none that lists them all.
    review = review_suspects_command(shown, str(paths[0])) if len(paths) == 1 else None
    write_html(html, summary, HtmlOptions(thumbnails=store, frames=store.frames, budget_bytes=budget_bytes,
                                          over_budget=store.over_budget, durations=durations,
                                          sources=tuple(str(p) for p in paths), notes=tuple(notes),
                                          baseline=baselines[0] if len(baselines) == 1 else None, eval_dir=shown,
                                          arms=arms, labels=labels, labels_review=review))
    print(f"Wrote {html} ({'passed' if summary.success else 'failed'} run, "
          f"{summary.total.evaluated + summary.total.ignored} attempts)", file=out)
    return summary


def _from_videos(eval_dir: Path, cases: Sequence[str], results: Sequence[object], store: ThumbnailStore,
                 notify: Callable[[str], None],
                 pictured: Callable[[SampleResult], bool] = wants_thumbnail) -> tuple[dict[str, float], list[str]]:
    try:
        plan = build_plan(eval_dir, Filters(), allow_empty=True, resolve_video=video_resolver(notify),
                          allow_drafts=True)
    except EvalError as exc:
        return {}, [f"Frames were not read from {eval_dir}: {exc}"]
    wanted: dict[str, tuple[Path, list[SampleResult]]] = {}
    for c in plan.cases:
        if c.case.name in cases:
            mine = [r for r in results if isinstance(r, SampleResult) and r.case == c.case.name]
            wanted[c.case.name] = (c.video_path, mine)
    missing = [name for name in cases if name not in wanted]
    notes = store.add_from_videos(wanted, pictured)
    if missing:
        notes.append(f"Cases not found in {eval_dir}: {', '.join(missing)} (no frames or clip durations).")
    return clip_durations(plan), notes
