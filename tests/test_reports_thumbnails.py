"""Thumbnails: size, exact pixels (frame codes survive), budget, and a keeper that never raises."""

from __future__ import annotations

import io
from pathlib import Path

from framecode import draw_frame, read_frame_index
from htmlkit import result
from PIL import Image, ImageEnhance, ImageStat

from glasskit_eval.reports.thumbnails import (
    ThumbnailStore,
    data_uri_size,
    make_thumbnail,
    pixel_key,
)
from glasskit_eval.results import Status


def test_longest_side_is_320_and_the_frame_stays_readable() -> None:
    frame = draw_frame(1234, 1280, 720)
    jpeg = make_thumbnail(frame)
    with Image.open(io.BytesIO(jpeg)) as thumb:
        assert thumb.format == "JPEG" and thumb.size == (320, 180)
        assert read_frame_index(thumb.convert("RGB")) == 1234
    portrait = make_thumbnail(draw_frame(7, 480, 1000))
    with Image.open(io.BytesIO(portrait)) as thumb:
        assert thumb.size == (154, 320)
    # Small frames are not enlarged, and the original is untouched.
    small = draw_frame(3, 128, 72)
    with Image.open(io.BytesIO(make_thumbnail(small))) as thumb:
        assert thumb.size == (128, 72)
    assert frame.size == (1280, 720) and read_frame_index(frame) == 1234


def test_keeper_keeps_failed_frames_once_and_stops_at_the_budget() -> None:
    one = data_uri_size(make_thumbnail(draw_frame(1, 640, 360)))
    store = ThumbnailStore(budget_bytes=int(one * 2.5))
    store.keep(result(frame=1, status=Status.PASSED), draw_frame(1, 640, 360))
    assert len(store) == 0
    for i in (1, 1, 2, 3, 4):
        store.keep(result(frame=i, status=Status.FAILED if i % 2 else Status.ERROR), draw_frame(i, 640, 360))
    assert sorted(store) == [("doors", 1), ("doors", 2)]
    assert store.over_budget == {("doors", 3), ("doors", 4)}
    assert store.used_bytes <= store.budget_bytes
    with Image.open(io.BytesIO(store["doors", 2])) as thumb:
        assert read_frame_index(thumb.convert("RGB")) == 2


def test_keeper_survives_an_image_the_adapter_closed() -> None:
    image = draw_frame(5, 640, 360)
    image.close()
    store = ThumbnailStore()
    store.keep(result(frame=5, status=Status.FAILED), image)
    assert len(store) == 0 and store.failed == {("doors", 5)}


def test_thumbnails_from_save_failures_artifacts(tmp_path: Path) -> None:
    artifact = tmp_path / "a.jpg"
    draw_frame(9, 1280, 720).save(artifact, format="JPEG", quality=90)
    store = ThumbnailStore()
    store.add_from_artifacts([result(frame=9, status=Status.FAILED, artifact=str(artifact)),
                              result(frame=8, status=Status.FAILED, artifact=str(tmp_path / "gone.jpg"))])
    assert list(store) == [("doors", 9)]
    with Image.open(io.BytesIO(store["doors", 9])) as thumb:
        assert thumb.size == (320, 180) and read_frame_index(thumb.convert("RGB")) == 9


def _armed(arm: str, frame: int, status: Status) -> object:
    from dataclasses import replace

    return replace(result(frame=frame, index=frame, t=frame / 10, status=status), arm=arm)


def test_with_perturbation_arms_each_arm_frame_is_kept_as_that_arm_saw_it_and_flips_keep_both() -> None:
    variants = {"control": "", "small": "", "dim": "brightness:0.5"}
    store = ThumbnailStore(variants=variants, arms=("control", "small", "dim"))

    def seen(arm: str, i: int) -> Image.Image:
        frame = draw_frame(i, 128, 72)
        return ImageEnhance.Brightness(frame).enhance(0.5) if arm == "dim" else frame

    # Frame 1: every arm passes (nothing kept); frame 2: dim fails, a flip (both pictures kept);
    # frame 3: small fails and the others pass (one plain picture serves control and small).
    for frame, statuses in ((1, "PPP"), (2, "PPF"), (3, "PFP")):
        for arm, letter in zip(("control", "small", "dim"), statuses):
            status = Status.PASSED if letter == "P" else Status.FAILED
            store.keep(_armed(arm, frame, status), seen(arm, frame))  # type: ignore[arg-type]
    assert sorted(store) == sorted([pixel_key("doors", 2), pixel_key("doors", 2, "brightness:0.5"),
                                    pixel_key("doors", 3), pixel_key("doors", 3, "brightness:0.5")])
    with Image.open(io.BytesIO(store[pixel_key("doors", 2)])) as plain, \
            Image.open(io.BytesIO(store[pixel_key("doors", 2, "brightness:0.5")])) as dim:
        assert read_frame_index(plain.convert("RGB")) == 2
        plain_mean = ImageStat.Stat(plain.convert("L")).mean[0]
        dim_mean = ImageStat.Stat(dim.convert("L")).mean[0]
        assert abs(dim_mean - plain_mean / 2) < 3


def test_arms_that_all_see_plain_pixels_keep_only_failed_frames() -> None:
    store = ThumbnailStore(variants={"control": "", "small": ""}, arms=("control", "small"))
    store.keep(_armed("control", 2, Status.PASSED), draw_frame(2, 128, 72))  # type: ignore[arg-type]
    store.keep(_armed("small", 2, Status.FAILED), draw_frame(2, 128, 72))  # type: ignore[arg-type]
    assert list(store) == [("doors", 2)]


def test_an_artifact_path_no_file_can_have_is_skipped(tmp_path: Path) -> None:
    # A report is anyone's to edit: a NUL in artifact_image (and so in its clip folder) is no file.
    store = ThumbnailStore()
    store.add_from_artifacts([result(frame=3, status=Status.FAILED, artifact=str(tmp_path / "a\x00b.jpg"))])
    assert len(store) == 0
