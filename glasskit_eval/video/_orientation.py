"""Display orientation: turn a container's display matrix into pixel operations.

We follow what players do (FFmpeg's autorotate in ``ffmpeg``/``ffplay``): the
rotation angle decides a transpose or flip, and the matrix signs decide whether
a reflection comes with it. So a mirrored recording is un-mirrored, not turned
upside down.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

# PIL transpose names, applied in order.
_FLIP_H = "FLIP_LEFT_RIGHT"
_FLIP_V = "FLIP_TOP_BOTTOM"
_CW = "ROTATE_270"  # PIL rotates counter-clockwise
_CCW = "ROTATE_90"
_TRANSPOSE = "TRANSPOSE"
_TRANSVERSE = "TRANSVERSE"


@dataclass(frozen=True, slots=True)
class Orientation:
    """How to turn decoded pixels into what a player shows."""

    operations: tuple[str, ...] = ()
    rotation: int = 0  # clockwise degrees a player turns the picture: 0, 90, 180 or 270
    mirrored: bool = False

    def apply(self, image: Image.Image) -> Image.Image:
        from PIL import Image as PILImage

        for op in self.operations:
            transposed = image.transpose(getattr(PILImage.Transpose, op))
            image.close()
            image = transposed
        return image

    def describe(self) -> str:
        parts = []
        if self.rotation:
            parts.append(f"rotated {self.rotation} degrees clockwise for display")
        if self.mirrored:
            parts.append("mirrored")
        return ", ".join(parts) or "upright"


UPRIGHT = Orientation()


def parse_display_matrix(data: bytes) -> tuple[int, ...] | None:
    if len(data) != 36:
        return None
    return struct.unpack("=9i", data)


def orientation_from_matrix(matrix: tuple[int, ...] | None) -> Orientation:
    if matrix is None:
        return UPRIGHT
    a, b, _u, c, d, _v, _x, _y, _w = matrix
    scale0 = math.hypot(a, c)
    scale1 = math.hypot(b, d)
    if scale0 == 0 or scale1 == 0:
        return UPRIGHT
    # av_display_rotation_get() is counter-clockwise; players turn the picture the other way.
    ccw = -math.degrees(math.atan2(b / scale1, a / scale0))
    theta = (-ccw) % 360.0
    det_negative = (a * d - b * c) < 0
    if abs(theta - 90) < 1.0:
        ops: tuple[str, ...] = (_TRANSPOSE,) if c > 0 else (_CW,)
        return Orientation(ops, 90, det_negative)
    if abs(theta - 180) < 1.0:
        flips = tuple(op for op, neg in ((_FLIP_H, a < 0), (_FLIP_V, d < 0)) if neg)
        return Orientation(flips, 180 if len(flips) == 2 else 0, det_negative)
    if abs(theta - 270) < 1.0:
        ops = (_TRANSVERSE,) if c < 0 else (_CCW,)
        return Orientation(ops, 270, det_negative)
    if abs(theta) < 1.0 or abs(theta - 360) < 1.0:
        return Orientation((_FLIP_V,) if d < 0 else (), 0, det_negative)
    # Arbitrary angles are rare in recordings; keep the stored pixels rather than guess.
    return UPRIGHT


def orientation_from_side_data(side_data: object) -> Orientation:
    """Read the DISPLAYMATRIX entry of a PyAV frame's side data, if any."""
    try:
        items = list(side_data)  # type: ignore[call-overload]
    except TypeError:
        return UPRIGHT
    for item in items:
        # PyAV 19 made the container a mapping (iterating gives each entry's type); earlier
        # versions iterate over the entries themselves (and their values() is broken).
        entry = item if hasattr(item, "type") else side_data[item]  # type: ignore[index]
        if str(getattr(entry, "type", "")).endswith("DISPLAYMATRIX"):
            return orientation_from_matrix(parse_display_matrix(bytes(entry)))
    return UPRIGHT
