"""Arms: the same decoded frames handed to several adapters or image conditions, side by side.

What lives here so far: the image perturbations an arm applies before its adapter sees a frame
(``perturb``: JPEG, blur, brightness, contrast, noise, downscale, occlusion, rotation, and the blind
kinds blank, mean and shuffle, whose frame from elsewhere the engine supplies), parsed from
``--perturb`` specs and ``config.yaml`` mappings, deterministic for a given seed; what an arm is
(``spec``); the arms compared (``compare``); what ``--jitter-frames`` found (``jitter``).

What it may not know: the command line, the engine's scheduling, results or reports. Pure but for
Pillow: an image and a seed in, an image out.
"""
