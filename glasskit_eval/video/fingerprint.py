"""Content fingerprints of the exact RGB pixels handed to adapters.

The exact hash names the bytes (the observation cache's key, a pin's proof). The perceptual
hash is a 64-bit difference hash of a 9x8 grey thumbnail: a decoder upgrade that moves a few
pixel values by one or two leaves it (nearly) unchanged, a different frame does not.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

#: Bits of the perceptual hash that may differ before pixels count as changed (of 64).
PERCEPTUAL_TOLERANCE = 6


def pixel_sha256(image: Image.Image) -> str:
    """SHA-256 of the mode, size and raw pixel bytes: equal only for identical images."""
    digest = hashlib.sha256(f"{image.mode} {image.width}x{image.height}\n".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def perceptual_hash(image: Image.Image) -> str:
    """A 64-bit difference hash, as 16 hex digits."""
    from PIL import Image as PILImage

    small = image.convert("L").resize((9, 8), PILImage.Resampling.BOX)
    values = small.tobytes()
    bits = 0
    for row in range(8):
        for col in range(8):
            bits = (bits << 1) | (values[row * 9 + col] > values[row * 9 + col + 1])
    return f"{bits:016x}"


def hash_distance(a: str, b: str) -> int:
    """Differing bits between two perceptual hashes (64 when one is not a hash)."""
    try:
        return bin(int(a, 16) ^ int(b, 16)).count("1")
    except ValueError:
        return 64
