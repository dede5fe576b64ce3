"""Arms: the same decoded frames handed to several adapters or image conditions, side by side.

What lives here so far: the image perturbations an arm applies before its adapter sees a frame
(``perturb``: JPEG, blur, brightness, contrast, noise, downscale, occlusion, rotation, and the blind
kinds blank, mean and shuffle, whose frame from elsewhere the engine supplies), parsed from
``--perturb`` specs and ``config.yaml`` mappings, deterministic for a given seed; what an arm is
as declared (``spec``) and as the engine runs it, a plain run being one arm (``plan``); the arms
compared on samples (``compare``: per-arm summaries and paired tests, from the run's results) and
on stream targets' events (``streamcompare``); what ``--jitter-frames`` found (``jitter``).

What it may not know: the command line, the engine's scheduling, how results are made, gates or
reports. ``compare`` reads results and summary counts (rooms below it) and turns them into
figures; the gates made of those figures are ``evaluation.gates``'. Pure but for Pillow: an image and a seed in, an
image out.
"""
