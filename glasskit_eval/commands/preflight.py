"""Checks a run makes before its first adapter call, so a mistake costs no paid call.

Each refuses what would otherwise fail or do harm only after the adapter has been called: a
``--cache`` folder that is not an observation cache (its pruning would delete files), a
``--baseline`` that is missing or not a run report, a ``GITHUB_STEP_SUMMARY`` that cannot be
appended to.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ..errors import OutputError
from ..evaluation.observation_store import ObservationStore
from ..reports.baseline import load_report, report_results
from .ci_outputs import annotations_on
from .requests import RunRequest


def preflight(request: RunRequest, environ: Mapping[str, str] | None = None) -> None:
    """Raise the :class:`~glasskit_eval.errors.EvalError` the first failing check finds."""
    env = os.environ if environ is None else environ
    if request.cache.cache_dir is not None:
        ObservationStore(Path(request.cache.cache_dir)).check_is_cache()
    if request.ci.baseline is not None and request.ci.shard is None:
        where = f"--baseline {request.ci.baseline}"
        report_results(load_report(Path(request.ci.baseline), where), where)

    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path and annotations_on(request.ci.annotations, env):
        try:
            # Opened as the summary will be (created if missing, as the runner does). Nothing is
            # written to a file; a device (/dev/full) takes a line end, which only a write can test.
            with open(summary_path, "a", encoding="utf-8") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    handle.write("\n")
                    handle.flush()
        except OSError as exc:
            raise OutputError(f"cannot append the job summary to GITHUB_STEP_SUMMARY ({summary_path}): "
                              f"{exc.strerror or exc}; fix it before the run calls the adapter") from None
