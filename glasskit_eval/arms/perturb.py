"""Image perturbations for robustness arms: deterministic, composable, Pillow only.

A perturbation is a kind and one number, written ``kind:value`` on the command line
(``--perturb jpeg:30``) and ``{kind: value}`` in ``config.yaml``; an arm applies a list of them in
order, after orientation, to the RGB frame an adapter would get. Every random choice (the noise,
where the occluder goes) comes from a ``random.Random`` seeded by :func:`frame_seed`, so a rerun
and every other arm see identical pixels for the same frame.

Kinds (the value's meaning, and its range):

``jpeg:Q``          re-encode as JPEG at quality Q (1-95) and decode again
``blur:RADIUS``     Gaussian blur of RADIUS pixels (> 0, at most 10000)
``brightness:F``    multiply brightness by F (0 to 100; 0.4 is a dim room)
``contrast:F``      scale contrast around the mean grey by F (0 to 100)
``noise:SIGMA``     add Gaussian noise of standard deviation SIGMA in 0-255 units (> 0), per channel
``downscale:F``     shrink to F of the width and height (0 < F < 1) and back up to the size
``occlude:F``       cover F of the area (0 < F <= 1) with a grey rectangle of the frame's aspect
``rotate:DEG``      rotate by DEG degrees counter-clockwise about the centre, same size, black corners

Blind kinds take no value (``--perturb blank``; ``{blank: true}`` in ``config.yaml``): what is left
of the picture says nothing about the sample, so an adapter that still passes is not looking
(``--max-blind-pass-rate``):

``blank``           a black frame of the same size
``mean``            every pixel the frame's mean colour
``shuffle``         a frame from another time of the same video, chosen by the frame's seed (so by
                    ``--seed``): one at least a quarter of the video's frames away, where the engine
                    has the video at hand; elsewhere (no other frame known) the mean colour
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from ..errors import UsageError

# hashlib, random and statistics are imported where frames are perturbed: `validate` (and a run's
# planning) only parse and check an arm's kinds, and pays for nothing more (tests/test_startup.py).
if TYPE_CHECKING:
    import random

    from PIL import Image

#: The grey an occluder paints.
OCCLUDER_GREY = (128, 128, 128)


@functools.cache
def _noise_quantiles() -> tuple[float, ...]:
    """Noise is drawn from 256 equally likely Gaussian quantiles (one random byte each): exact to
    the byte, fast in Pillow, and a standard deviation within 1% of SIGMA."""
    from statistics import NormalDist

    return tuple(NormalDist().inv_cdf((level + 0.5) / 256) for level in range(256))


def _in(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Callable[[float], bool]:
    def check(value: float) -> bool:
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        return above and below

    return check


#: kind -> (what the value is, its check). Every range is closed above: Pillow refuses a blur radius
#: near 1e18 mid-run, and past these bounds an image is saturated or flat anyway.
KINDS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "jpeg": ("a JPEG quality from 1 to 95", lambda v: v == int(v) and 1 <= v <= 95),
    "blur": ("a blur radius in pixels greater than 0, at most 10000", _in(0, 10_000, low_open=True)),
    "brightness": ("a brightness factor from 0 to 100", _in(0, 100)),
    "contrast": ("a contrast factor from 0 to 100", _in(0, 100)),
    "noise": ("a noise standard deviation (0-255 units) greater than 0", _in(0, 255, low_open=True)),
    "downscale": ("a scale factor between 0 and 1 (exclusive)", _in(0, 1, low_open=True, high_open=True)),
    "occlude": ("an area fraction greater than 0, at most 1", _in(0, 1, low_open=True)),
    "rotate": ("an angle in degrees", _in(-360, 360)),
}


#: Blind kinds (no value): kind -> what the adapter gets instead of the frame.
BLIND_KINDS: dict[str, str] = {
    "blank": "a black frame",
    "mean": "every pixel the frame's mean colour",
    "shuffle": "a frame from another time of the same video",
}


@dataclass(frozen=True, slots=True)
class Perturbation:
    """One step of an arm's chain: a kind of :data:`KINDS` or :data:`BLIND_KINDS` and its value."""

    kind: str
    value: float

    @property
    def spec(self) -> str:
        """``kind:value`` (a blind kind alone), as ``--perturb`` takes it and arms are named."""
        return self.kind if self.kind in BLIND_KINDS else f"{self.kind}:{self.value:g}"

    @property
    def blind(self) -> bool:
        """Whether nothing of the sample's own picture survives (``--max-blind-pass-rate``)."""
        return self.kind in BLIND_KINDS

    def apply(self, image: Image.Image, rng: random.Random) -> Image.Image:
        """A new image; ``image`` is left as it was."""
        return _APPLY[self.kind](image, self.value, rng)


def perturbation(kind: str, value: object, where: str) -> Perturbation:
    """A checked perturbation; :class:`~glasskit_eval.errors.UsageError` naming ``where`` otherwise."""
    if kind in BLIND_KINDS:
        return blind_perturbation(kind, value, where)
    if kind not in KINDS:
        from difflib import get_close_matches

        close = get_close_matches(kind, KINDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"{where}: unknown perturbation {kind!r}{hint} (known: {', '.join([*KINDS, *BLIND_KINDS])})")
    meaning, check = KINDS[kind]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not check(value):
        raise UsageError(f"{where}: {kind} takes {meaning}, got {value!r}")
    return Perturbation(kind, float(value))


def parse_spec(text: str) -> Perturbation:
    """``kind:value`` (``--perturb jpeg:30``), or a blind kind alone (``--perturb blank``)."""
    if text.strip() in BLIND_KINDS:
        return blind_perturbation(text.strip(), None, f"--perturb {text}")
    kind, sep, number = text.partition(":")
    if not sep:
        raise UsageError(f"--perturb {text!r}: write KIND:VALUE, e.g. jpeg:30 or blur:2")
    try:
        value = float(number)
    except ValueError:
        raise UsageError(f"--perturb {text!r}: {number!r} is not a number") from None
    return perturbation(kind.strip(), value, f"--perturb {text}")


def parse_mapping(item: object, where: str) -> Perturbation:
    """One ``{kind: value}`` item of an arm's ``perturb`` list in config.yaml."""
    if not isinstance(item, Mapping) or len(item) != 1:
        raise UsageError(f"{where}: each perturbation is a mapping of one kind to its value, "
                         "e.g. {brightness: 0.4}")
    ((kind, value),) = item.items()
    return perturbation(str(kind), value, where)


def blind_perturbation(kind: str, value: object, where: str) -> Perturbation:
    """A blind kind; it takes no value (``true`` or nothing in ``config.yaml``)."""
    if value is not None and value is not True:
        raise UsageError(f"{where}: {kind} takes no value ({BLIND_KINDS[kind]}); write --perturb {kind} "
                         f"or {{{kind}: true}} in config.yaml, got {value!r}")
    return Perturbation(kind, 0.0)


def is_blind(chain: Sequence[Perturbation]) -> bool:
    """A chain that leaves nothing of the sample's own picture: any blind step does."""
    return any(p.blind for p in chain)


def chain_spec(chain: Sequence[Perturbation]) -> str:
    """``brightness:0.4+noise:8``: a chain's name, in the order it is applied."""
    return "+".join(p.spec for p in chain)


def frame_seed(seed: int, case: str, target: str, time: Fraction, arm: str) -> int:
    """The seed of one frame's random choices: the same for the same run seed, sample and arm."""
    import hashlib

    text = f"{seed}\0{case}\0{target}\0{time.numerator}/{time.denominator}\0{arm}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


#: ``shuffle``'s source of frames: given the step's generator, a frame from another time of the video.
Elsewhere = Callable[["random.Random"], "Image.Image"]


def apply_chain(image: Image.Image, chain: Sequence[Perturbation], seed: int,
                elsewhere: Elsewhere | None = None) -> Image.Image:
    """``image`` perturbed by each of ``chain`` in order; each step gets its own seeded generator.

    ``elsewhere`` gives ``shuffle`` its frame (resized to this one's size); without it ``shuffle``
    paints the mean colour.
    """
    import random

    out = image
    for step, item in enumerate(chain):
        rng = random.Random(seed * 31 + step)
        if item.kind == "shuffle" and elsewhere is not None:
            out = _shuffled(out, elsewhere(rng))
        else:
            out = item.apply(out, rng)
    return out


def _shuffled(image: Image.Image, other: Image.Image) -> Image.Image:
    rgb = other.convert("RGB")
    return rgb if rgb.size == image.size else rgb.resize(image.size)


def _blank(image: Image.Image, _value: float, _rng: random.Random) -> Image.Image:
    from PIL import Image

    return Image.new("RGB", image.size, (0, 0, 0))


def _mean_colour(image: Image.Image, _value: float, _rng: random.Random) -> Image.Image:
    from PIL import Image, ImageStat

    means = ImageStat.Stat(image.convert("RGB")).mean
    return Image.new("RGB", image.size, tuple(round(m) for m in means))


# -- the kinds ------------------------------------------------------------------------------


def _jpeg(image: Image.Image, quality: float, _rng: random.Random) -> Image.Image:
    from PIL import Image

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=int(quality))
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        rgb: Image.Image = decoded.convert("RGB")
    return rgb


def _blur(image: Image.Image, radius: float, _rng: random.Random) -> Image.Image:
    from PIL import ImageFilter

    return image.filter(ImageFilter.GaussianBlur(radius))


def _brightness(image: Image.Image, factor: float, _rng: random.Random) -> Image.Image:
    from PIL import ImageEnhance

    return ImageEnhance.Brightness(image).enhance(factor)


def _contrast(image: Image.Image, factor: float, _rng: random.Random) -> Image.Image:
    from PIL import ImageEnhance

    return ImageEnhance.Contrast(image).enhance(factor)


def _noise(image: Image.Image, sigma: float, rng: random.Random) -> Image.Image:
    from PIL import Image, ImageChops

    # Random bytes become Gaussian offsets through a lookup table, centred on 128 so that
    # ImageChops.add (which clips to 0-255) can subtract the centre again.
    table = [max(0, min(255, round(128 + sigma * q))) for q in _noise_quantiles()]
    noise = Image.frombytes("RGB", image.size, rng.randbytes(image.width * image.height * 3)).point(table * 3)
    return ImageChops.add(image.convert("RGB"), noise, scale=1.0, offset=-128)


def _downscale(image: Image.Image, factor: float, _rng: random.Random) -> Image.Image:
    from PIL import Image

    small = (max(1, round(image.width * factor)), max(1, round(image.height * factor)))
    return image.resize(small, Image.Resampling.BOX).resize(image.size, Image.Resampling.BILINEAR)


def _occlude(image: Image.Image, fraction: float, rng: random.Random) -> Image.Image:
    from PIL import ImageDraw

    scale = math.sqrt(fraction)
    width, height = max(1, round(image.width * scale)), max(1, round(image.height * scale))
    left, top = rng.randint(0, image.width - width), rng.randint(0, image.height - height)
    out = image.copy()
    ImageDraw.Draw(out).rectangle((left, top, left + width - 1, top + height - 1), fill=OCCLUDER_GREY)
    return out


def _rotate(image: Image.Image, degrees: float, _rng: random.Random) -> Image.Image:
    from PIL import Image

    return image.rotate(degrees, resample=Image.Resampling.BILINEAR, expand=False, fillcolor=(0, 0, 0))


_APPLY: dict[str, Callable[[Image.Image, float, random.Random], Image.Image]] = {
    "jpeg": _jpeg, "blur": _blur, "brightness": _brightness, "contrast": _contrast, "noise": _noise,
    "downscale": _downscale, "occlude": _occlude, "rotate": _rotate,
    "blank": _blank, "mean": _mean_colour, "shuffle": _mean_colour,
}
