"""Cost of each image perturbation of a robustness arm, per 720p and 1080p frame.

    python benchmarks/bench_perturb.py [--rounds 20]

A deterministic textured frame (the same content for every kind) is perturbed ``--rounds``
times per kind; the median wall time per frame is printed beside the cost of what every arm
pays anyway: copying the frame (``Image.copy``), so the ratio says how much a perturbation adds
to handing a frame over.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import importable, interleave, median, timed

importable()

from PIL import Image  # noqa: E402

from glasskit_eval.arms.perturb import apply_chain, parse_spec  # noqa: E402

SPECS = ["jpeg:30", "blur:2", "brightness:0.4", "contrast:1.5", "noise:8", "downscale:0.5", "occlude:0.3",
         "rotate:10"]


def frame(width: int, height: int) -> Image.Image:
    # Textured like footage (JPEG and blur cost depends on content), built fast from a gradient.
    gradient = Image.linear_gradient("L").resize((width, height))
    noise = Image.effect_noise((width, height), 40)
    return Image.merge("RGB", (gradient, noise, gradient.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))


def median_ms(work: Callable[[], object], rounds: int) -> float:
    return median(interleave(rounds, [work], timed)[work], "wall") * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    for width, height in ((1280, 720), (1920, 1080)):
        image = frame(width, height)
        copy = median_ms(image.copy, args.rounds)
        print(f"{width}x{height}: copy {copy:.2f} ms per frame")
        for spec in SPECS:
            chain = [parse_spec(spec)]
            cost = median_ms(lambda image=image, chain=chain: apply_chain(image, chain, 7), args.rounds)
            print(f"  {spec:15} {cost:7.2f} ms per frame  ({cost / copy:5.1f}x a copy)")


if __name__ == "__main__":
    main()
