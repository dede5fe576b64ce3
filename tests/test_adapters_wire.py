"""What a command adapter is sent: the sample in pieces that join into one JSON object."""

from __future__ import annotations

import base64
import gc
import json
import random

import pytest
from PIL import Image

from glasskit_eval.adapters._wire import ENCODINGS, base64_pieces, encode_sample, sample_parts
from glasskit_eval.adapters.base import Frame, Sample
from glasskit_eval.video.png import encode_png


def test_base64_pieces_are_the_base64_of_the_whole_whatever_the_cuts() -> None:
    rng = random.Random(5)
    for _ in range(500):
        pieces = [rng.randbytes(rng.randrange(0, 10)) for _ in range(rng.randrange(0, 7))]
        assert b"".join(base64_pieces(pieces)) == base64.b64encode(b"".join(pieces))


@pytest.mark.parametrize("size", [(1, 1), (17, 9), (64, 130)])
def test_sample_parts_join_into_the_wire_sample(size: tuple[int, int]) -> None:
    width, height = size
    image = Image.frombytes("RGB", size, random.Random(width).randbytes(width * height * 3))
    sample = Sample(image=image, timestamp_s=0.5, frame_index=15, sample_index=2,
                    video_path="/v/clip.mp4", case_name="walk")
    parts = sample_parts(sample)
    assert len(parts) > 3  # the frame's text is not copied into one string before the line is built
    joined = b"".join(parts)
    assert joined == encode_sample(sample)
    wire = json.loads(joined)
    assert wire["image"]["mimeType"] == "image/png"
    assert base64.b64decode(wire["image"]["dataBase64"]) == encode_png(image)


def _clip_sample(images: list[Image.Image], first_index: int, sample_index: int) -> Sample:
    frames = tuple(Frame(image, 0.1 * (first_index + i), 0.1 * (first_index + i), first_index + i)
                   for i, image in enumerate(images))
    return Sample(image=images[-1], timestamp_s=frames[-1].timestamp_s, frame_index=frames[-1].frame_index,
                  sample_index=sample_index, video_path="/v/clip.mp4", case_name="walk", frames=frames, is_clip=True)


def test_a_clip_sample_carries_its_frames_and_each_shared_frame_is_encoded_once() -> None:
    images = [Image.frombytes("RGB", (9, 5), random.Random(i).randbytes(9 * 5 * 3)) for i in range(4)]
    # Two overlapping clips in flight share frames 1 and 2 (the same image objects).
    first, second = _clip_sample(images[:3], 0, 0), _clip_sample(images[1:], 1, 1)
    made = ENCODINGS.made
    wires = [json.loads(encode_sample(first)), json.loads(encode_sample(second))]
    assert ENCODINGS.made - made == 4
    for wire, sample in zip(wires, (first, second)):
        assert [f["frameIndex"] for f in wire["frames"]] == [f.frame_index for f in sample.frames]
        assert [f["timestampS"] for f in wire["frames"]] == [f.timestamp_s for f in sample.frames]
        assert [f["mediaTimestampS"] for f in wire["frames"]] == [f.media_timestamp_s for f in sample.frames]
        for frame, sent in zip(sample.frames, wire["frames"]):
            assert sent["image"] == {"mimeType": "image/png", "width": 9, "height": 5,
                                     "dataBase64": base64.b64encode(encode_png(frame.image, 1)).decode()}
        assert wire["image"] == wire["frames"][-1]["image"]
        assert list(wire) == ["timestampS", "frameIndex", "sampleIndex", "videoPath", "caseName", "frames", "image"]
    # The text goes with the image object: nothing is kept for frames no longer in flight.
    before = len(ENCODINGS)
    del first, second, images, frame, sample
    gc.collect()
    assert len(ENCODINGS) == before - 4


def test_a_sample_without_a_clip_has_its_anchor_as_frames_and_no_frames_on_the_wire() -> None:
    image = Image.new("RGB", (3, 2))
    sample = Sample(image=image, timestamp_s=0.5, frame_index=15, sample_index=2, video_path="/v/clip.mp4",
                    case_name="walk")
    assert sample.frames == (Frame(image, 0.5, 0.5, 15),) and not sample.is_clip
    assert "frames" not in json.loads(encode_sample(sample))


def test_an_image_collected_while_the_encodings_lock_is_held_does_not_deadlock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The collector runs finalizers at any allocation, so an image's ``_forget`` can run on the
    # thread that is inside ``text`` holding the lock (a stream adapter encoding its next frame).
    import threading

    from glasskit_eval.adapters import _wire

    class CollectingEncoding(_wire._Encoding):
        def __init__(self) -> None:
            gc.collect()  # what an allocation inside the lock may set off
            super().__init__()

    encodings = _wire.FrameEncodings()
    doomed = Image.new("RGB", (4, 4))
    cycle: list[object] = [doomed]
    cycle.append(cycle)  # only the cyclic collector frees it
    encodings.text(doomed, "png", lambda image: b"first")
    del doomed, cycle
    monkeypatch.setattr(_wire, "_Encoding", CollectingEncoding)
    done = threading.Event()

    def encode_another() -> None:
        encodings.text(Image.new("RGB", (4, 4)), "png", lambda image: b"second")
        done.set()

    threading.Thread(target=encode_another, daemon=True).start()
    assert done.wait(10), "the encodings lock deadlocked on a finalizer"
    assert encodings.made == 2
