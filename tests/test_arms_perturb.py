"""Image perturbations of robustness arms: deterministic, measured, composable (arms.perturb)."""

from __future__ import annotations

import hashlib
import io
import math
from fractions import Fraction

import pytest
from PIL import Image, ImageStat

from glasskit_eval.arms.perturb import (
    KINDS,
    OCCLUDER_GREY,
    Perturbation,
    apply_chain,
    chain_spec,
    frame_seed,
    parse_mapping,
    parse_spec,
)
from glasskit_eval.errors import UsageError


def scene(width: int = 320, height: int = 180) -> Image.Image:
    """A deterministic frame with edges, gradients and mid tones (no pure black or white)."""
    image = Image.new("RGB", (width, height))
    pixels = [((x * 3 + y) % 200 + 28, (x // 8 * 37 + y // 8 * 11) % 200 + 28, (x ^ y) % 200 + 28)
              for y in range(height) for x in range(width)]
    image.putdata(pixels)
    return image


def digest(image: Image.Image) -> str:
    return hashlib.sha256(image.tobytes()).hexdigest()


def mean(image: Image.Image) -> float:
    return sum(ImageStat.Stat(image).mean) / 3


def one(spec: str, image: Image.Image, seed: int = 7) -> Image.Image:
    return apply_chain(image, [parse_spec(spec)], seed)


@pytest.mark.parametrize("spec", ["jpeg:30", "blur:2", "brightness:0.4", "contrast:1.5", "noise:8",
                                  "downscale:0.25", "occlude:0.3", "rotate:10"])
def test_every_kind_is_deterministic_and_changes_the_pixels(spec: str) -> None:
    image = scene()
    first, second = one(spec, image), one(spec, image)
    assert digest(first) == digest(second)  # a rerun, and every other arm, sees the same bytes
    assert first.size == image.size and first.mode == "RGB"
    assert digest(first) != digest(image)
    assert digest(image) == digest(scene())  # the input is left as it was


def test_random_choices_follow_the_frame_seed() -> None:
    image = scene()
    seeds = {frame_seed(0, "c", "t", Fraction(1, 2), "noise:8"), frame_seed(1, "c", "t", Fraction(1, 2), "noise:8"),
             frame_seed(0, "c", "t", Fraction(1), "noise:8"), frame_seed(0, "c", "u", Fraction(1, 2), "noise:8"),
             frame_seed(0, "c", "t", Fraction(1, 2), "noise:9")}
    assert len(seeds) == 5
    assert frame_seed(0, "c", "t", Fraction(1, 2), "a") == frame_seed(0, "c", "t", Fraction(2, 4), "a")
    noisy = {digest(one("noise:8", image, seed)) for seed in seeds}
    assert len(noisy) == 5
    placed = {digest(one("occlude:0.2", image, seed)) for seed in seeds}
    assert len(placed) == 5


def test_brightness_and_contrast_scale_as_documented() -> None:
    grey = Image.new("RGB", (64, 64), (100, 150, 200))
    assert mean(one("brightness:0.4", grey)) == pytest.approx(0.4 * 150, abs=1)
    image = scene()
    spread = ImageStat.Stat(image).stddev
    wider = ImageStat.Stat(one("contrast:1.5", image)).stddev
    flat = one("contrast:0", image)
    assert all(w > s * 1.3 for w, s in zip(wider, spread, strict=True))
    assert len(flat.getcolors(maxcolors=flat.width * flat.height) or []) == 1  # contrast 0: the mean grey


def test_jpeg_quality_shows_in_the_re_encoded_size() -> None:
    image = scene()

    def size(picture: Image.Image) -> int:
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        return len(buffer.getvalue())

    # Lower quality loses more detail: the lossless size of what is left shrinks with it.
    sizes = [size(one(f"jpeg:{q}", image)) for q in (90, 50, 10)]
    assert sizes[0] > sizes[1] > sizes[2]


def test_noise_has_the_standard_deviation_it_says() -> None:
    grey = Image.new("RGB", (400, 300), (128, 128, 128))
    for sigma in (4.0, 8.0, 20.0):
        noisy = one(f"noise:{sigma:g}", grey)
        stat = ImageStat.Stat(noisy)
        assert all(abs(m - 128) < 0.3 for m in stat.mean)
        assert all(s == pytest.approx(sigma, rel=0.02) for s in stat.stddev)


def test_blur_and_downscale_remove_detail() -> None:
    image = scene()

    def edges(picture: Image.Image) -> float:
        from PIL import ImageFilter

        return sum(ImageStat.Stat(picture.convert("L").filter(ImageFilter.FIND_EDGES)).mean)

    assert edges(one("blur:2", image)) < edges(one("blur:0.5", image)) < edges(image)
    assert edges(one("downscale:0.25", image)) < edges(one("downscale:0.75", image)) < edges(image)


def test_occlusion_covers_the_area_it_says() -> None:
    image = Image.new("RGB", (320, 180), (10, 20, 30))
    for fraction in (0.1, 0.3, 1.0):
        colours = dict((c, n) for n, c in one(f"occlude:{fraction:g}", image).getcolors(maxcolors=320 * 180) or [])
        covered = colours.get(OCCLUDER_GREY, 0)
        assert covered / (320 * 180) == pytest.approx(fraction, rel=0.03)


def test_rotation_turns_about_the_centre() -> None:
    image = Image.new("RGB", (100, 100), (0, 0, 0))
    image.paste((255, 255, 255), (60, 45, 100, 55))  # a bar to the right of the centre
    turned = one("rotate:90", image)  # counter-clockwise: the bar now points up
    assert turned.getpixel((50, 20)) == (255, 255, 255) and turned.getpixel((80, 50)) == (0, 0, 0)
    assert turned.size == image.size


def test_a_chain_applies_in_order() -> None:
    image = scene()
    dim_then_noise = apply_chain(image, [parse_spec("brightness:0.4"), parse_spec("noise:8")], 3)
    noise_then_dim = apply_chain(image, [parse_spec("noise:8"), parse_spec("brightness:0.4")], 3)
    assert digest(dim_then_noise) != digest(noise_then_dim)
    # Noise added after dimming keeps its full spread; dimmed afterwards it shrinks with the light.
    flat = Image.new("RGB", (200, 200), (150, 150, 150))
    after = ImageStat.Stat(apply_chain(flat, [parse_spec("brightness:0.4"), parse_spec("noise:8")], 3)).stddev
    before = ImageStat.Stat(apply_chain(flat, [parse_spec("noise:8"), parse_spec("brightness:0.4")], 3)).stddev
    assert all(a == pytest.approx(8, rel=0.05) and b == pytest.approx(3.2, rel=0.1)
               for a, b in zip(after, before, strict=True))
    assert chain_spec([parse_spec("brightness:0.4"), parse_spec("noise:8")]) == "brightness:0.4+noise:8"


def test_specs_and_mappings_parse_alike_and_refuse_what_is_wrong() -> None:
    assert parse_spec("jpeg:30") == parse_mapping({"jpeg": 30}, "arms.x.perturb[0]") == Perturbation("jpeg", 30.0)
    assert parse_spec("blur:1.5").spec == "blur:1.5"
    with pytest.raises(UsageError, match=r"unknown perturbation 'bluur'; did you mean 'blur'\?"):
        parse_spec("bluur:2")
    with pytest.raises(UsageError, match="write KIND:VALUE"):
        parse_spec("jpeg")
    with pytest.raises(UsageError, match="'x' is not a number"):
        parse_spec("jpeg:x")
    for bad in ("jpeg:0", "jpeg:30.5", "blur:0", "brightness:-1", "noise:0", "downscale:1", "occlude:0",
                "rotate:400", "noise:nan"):
        with pytest.raises(UsageError, match=bad.split(":")[0]):
            parse_spec(bad)
    with pytest.raises(UsageError, match=r"arms\.low\.perturb\[1\]: each perturbation is a mapping"):
        parse_mapping({"brightness": 0.4, "noise": 8}, "arms.low.perturb[1]")
    with pytest.raises(UsageError, match="brightness takes a brightness factor"):
        parse_mapping({"brightness": True}, "arms.low.perturb[0]")
    assert set(KINDS) == {"jpeg", "blur", "brightness", "contrast", "noise", "downscale", "occlude", "rotate"}
    assert not math.isnan(parse_spec("rotate:-90").value)


def test_blind_kinds_take_no_value_and_leave_nothing_of_the_picture() -> None:
    image = scene(64, 36)
    blank = parse_spec("blank")
    assert (blank.kind, blank.spec, blank.blind) == ("blank", "blank", True)
    assert apply_chain(image, [blank], 1).getextrema() == ((0, 0), (0, 0), (0, 0))
    mean = parse_mapping({"mean": True}, "config.yaml: arms.m.perturb[0]")
    flat = apply_chain(image, [mean], 1)
    expected = tuple(round(m) for m in ImageStat.Stat(image).mean)
    assert flat.size == image.size and flat.getextrema() == tuple((c, c) for c in expected)
    assert parse_mapping({"shuffle": None}, "x").spec == "shuffle" and not parse_spec("jpeg:30").blind
    assert chain_spec([parse_spec("brightness:0.5"), blank]) == "brightness:0.5+blank"
    with pytest.raises(UsageError, match="blank takes no value"):
        parse_spec("blank:3")
    with pytest.raises(UsageError, match="mean takes no value"):
        parse_mapping({"mean": 2}, "config.yaml")


def test_shuffle_takes_its_frame_from_elsewhere_chosen_by_the_seed() -> None:
    image = scene(64, 36)
    others = [Image.new("RGB", (32, 18), (i * 20, 0, 0)) for i in range(10)]
    chosen = []
    for seed in (5, 5, 6):
        out = apply_chain(image, [parse_spec("shuffle")], seed, lambda rng: others[rng.randrange(10)])
        assert out.size == image.size
        chosen.append(out.getpixel((0, 0)))
    assert chosen[0] == chosen[1]
    # Without a video at hand it paints the mean colour: still blind.
    alone = apply_chain(image, [parse_spec("shuffle")], 5)
    assert alone.getextrema() == apply_chain(image, [parse_spec("mean")], 5).getextrema()
