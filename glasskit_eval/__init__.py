"""glasskit_eval: repeatable evals of image-deciding apps from recorded video.

Importing this package has no side effects and imports neither av nor PIL; the
command modules load those lazily when a command needs them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
