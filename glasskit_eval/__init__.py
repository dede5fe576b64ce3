"""glasskit_eval: repeatable evals of image-deciding apps from recorded video.

Importing this package has no side effects and imports neither av nor PIL; the
command modules load those lazily when a command needs them.

Adapter authors can type-check against the public surface::

    from glasskit_eval import FactoryConfig, Sample, SampleEvaluator, Target

    def create_evaluator(config: FactoryConfig) -> SampleEvaluator: ...
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["BatchEvaluator", "FactoryConfig", "Sample", "SampleEvaluator", "Target", "TransientError",
           "__version__"]

# Annotations only: `--help` imports this package, and typing is a noticeable share of its start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .adapters.base import (
        BatchEvaluator,
        FactoryConfig,
        Sample,
        SampleEvaluator,
        Target,
        TransientError,
    )

_ADAPTER_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    # Loaded on first use, so `--help` (which imports this package) stays as fast as before.
    if name in _ADAPTER_API:
        from .adapters import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
