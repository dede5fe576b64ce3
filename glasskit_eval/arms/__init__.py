"""Arms: the same decoded frames handed to several adapters or image conditions, side by side.

What lives here so far: the image perturbations an arm applies before its adapter sees a frame
(``perturb``: JPEG, blur, brightness, contrast, noise, downscale, occlusion, rotation), parsed from
``--perturb`` specs and ``config.yaml`` mappings, deterministic for a given seed; what an arm is
(``spec``); the arms compared (``compare``: per-arm summaries and paired tests, from the run's
results); what ``--jitter-frames`` found (``jitter``).

What it may not know: the command line, the engine's scheduling, gates or reports. ``compare``
reads results and summary counts (rooms below it) and turns them into figures; the gates made
from those figures are ``evaluation.gates``'. Pure but for Pillow: an image and a seed in, an
image out.
"""
