"""What the engine needs to know about one run or seed, parsed once by the command's body.

:class:`TrialOptions` is all :func:`~glasskit_eval.evaluation.trials.run_trials` reads of the
command line: the engine never sees argparse or a command's request record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters.resilient import CallPolicy
from ..plan.schedule import Filters
from ._ordering import DECLARATION
from .earlystop import EarlyStopOptions
from .gates import GateOptions


@dataclass(frozen=True)
class TrialOptions:
    #: Sequential trials, each with a fresh evaluator (``--repeat``).
    repeat: int = 1
    #: Adapter calls in flight at once (``--concurrency``).
    concurrency: int = 1
    #: ``declaration`` (target by target) or ``time`` (``--order``).
    order: str = DECLARATION
    #: Adapter and comparison errors become results instead of stopping the run.
    keep_going: bool = False
    #: Timeouts, retries and the rate limit around each adapter call.
    call_policy: CallPolicy = field(default_factory=CallPolicy)
    gates: GateOptions = field(default_factory=GateOptions)
    #: The selection the plan was made with (undeclared per-target gates depend on it).
    filters: Filters = field(default_factory=Filters)
    #: Handed to the adapter's factory (``adapter.yaml`` or ``--adapter-config``).
    adapter_config: Mapping[str, Any] = field(default_factory=dict)
    artifacts_dir: Path | None = None
    verbose: bool = False
    #: ``--pace``: stream targets on the paced clock (None: replay).
    pace: float | None = None
    #: ``--early-stop``: blocks in a seeded random order until every gate is decided (None: off).
    early_stop: EarlyStopOptions | None = None
