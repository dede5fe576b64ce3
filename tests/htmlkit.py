"""Helpers for HTML report tests: build summaries from plain results, read a page's data back."""

from __future__ import annotations

import base64
import io
import json
import re
from typing import Any

from glasskit_eval.results import Gate, SampleResult, Status, TimingMode, TrialResult
from glasskit_eval.summary import RunResult, RunSummary

DATA_BLOCK = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


def result(case: str = "doors", target: str = "door", index: int = 0, t: float = 0.5,
           status: Status = Status.PASSED, *, observed: Any = "closed", expected: Any = "closed",
           frame: int | None = None, reason: str = "matched", source: str = "at",
           duration: float | None = 0.01, artifact: str | None = None, label: str | None = None) -> SampleResult:
    return SampleResult(case=case, target=target, target_label=label, sample_index=index, timestamp_s=t,
                        source=source, status=status, expected=expected, field=None, compare_mode=None,
                        reason=reason, observed=observed, observed_value=observed,
                        evaluation_duration_seconds=duration, evaluation_timing_mode=TimingMode.INDIVIDUAL,
                        frame_index=frame if frame is not None else round(t * 10), media_timestamp_s=t,
                        artifact_image=artifact)


def summary_of(*trials: list[SampleResult], gates: tuple[Gate, ...] = (), eval_dir: str = "/evals/x",
               run_gates: tuple[Gate, ...] = ()) -> RunSummary:
    cases = tuple(dict.fromkeys(r.case for t in trials for r in t))
    run = RunResult(eval_dir=eval_dir, cases=cases, repeat=len(trials),
                    trials=tuple(TrialResult(trial=i + 1, results=tuple(t), gates=gates, duration_seconds=1.0,
                                             timing_mode=TimingMode.INDIVIDUAL) for i, t in enumerate(trials)),
                    gates=run_gates, duration_seconds=float(len(trials)))
    return RunSummary.of(run)


def page_data(page: str) -> dict[str, Any]:
    match = DATA_BLOCK.search(page)
    assert match is not None, "no data block"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def thumbnail_images(page: str) -> list[Any]:
    """The page's embedded thumbnails as PIL images."""
    from PIL import Image

    images = []
    for uri in page_data(page)["thumbs"]:
        prefix = "data:image/jpeg;base64,"
        assert uri.startswith(prefix)
        images.append(Image.open(io.BytesIO(base64.b64decode(uri[len(prefix):]))))
    return images
