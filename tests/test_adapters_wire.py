"""What a command adapter is sent: the sample in pieces that join into one JSON object."""

from __future__ import annotations

import base64
import json
import random

import pytest
from PIL import Image

from glasskit_eval.adapters._wire import base64_pieces, encode_sample, sample_parts
from glasskit_eval.adapters.base import Sample
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
