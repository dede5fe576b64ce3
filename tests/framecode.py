"""Frame codes: video frames that carry their own index (and orientation) in their pixels.

The fixture videos in ``fixtures/videos`` are generated from :func:`draw_frame` (see
``fixtures/videos/make_videos.py``), so a test can decode any frame and ask
:func:`read_frame_index` *which* frame it got, and whether it is displayed the right way
up, without trusting timestamps or frame counters.

Layout (display orientation), an 8 x 4 grid of equal cells covering the whole frame::

        col: 0    1    2    3    4    5    6    7
    row 0: [RED] d0   d1   d2   d3   d4   d5  [BLUE]
    row 1:  d6   d7   d8   d9   d10  d11  d12  d13
    row 2:  c0   c1   c2   c3   c4   c5   c6   c7
    row 3: [GRN] c8   c9   c10  c11  c12  c13 [YEL]

* ``d0..d13`` are the 14 bits of the index, most significant bit first
  (white = 1, black = 0), so indices 0..16383 are representable.
* ``c0..c13`` hold the complement of ``d0..d13`` (``ci = not di``).  A bit is read by
  comparing the brightness of ``di`` with ``ci``, so the read is immune to global
  brightness/contrast shifts (e.g. limited- vs full-range YUV mix-ups), and every single
  misread cell is detected.
* The four corners are saturated orientation markers: red top-left, blue top-right,
  green bottom-left, yellow bottom-right.  Any rotation (90/180/270) or mirror moves at
  least one of them to another corner, so a frame that is not in display orientation is
  rejected with :class:`ValueError`.

Cells are large (16x18 px at 128x72) and only the central half of each cell is averaged,
which keeps the code readable after lossy h264/vp9/mpeg4 compression with 4:2:0 chroma.
Cell boundaries are computed from the image size, so any frame size works.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image, ImageDraw

GRID_COLS = 8
GRID_ROWS = 4
INDEX_BITS = 14
MAX_INDEX = (1 << INDEX_BITS) - 1

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
# corner -> (cell, colour)
MARKERS: dict[str, tuple[tuple[int, int], tuple[int, int, int]]] = {
    "top-left (red)": ((0, 0), (255, 0, 0)),
    "top-right (blue)": ((0, GRID_COLS - 1), (0, 0, 255)),
    "bottom-left (green)": ((GRID_ROWS - 1, 0), (0, 255, 0)),
    "bottom-right (yellow)": ((GRID_ROWS - 1, GRID_COLS - 1), (255, 255, 0)),
}
_MARKER_CELLS = {cell for cell, _ in MARKERS.values()}
_FREE_CELLS = [
    (r, c) for r in range(GRID_ROWS) for c in range(GRID_COLS) if (r, c) not in _MARKER_CELLS
]
#: (row, col) of the data cell for bit i (i = 0 is the most significant bit).
DATA_CELLS: list[tuple[int, int]] = _FREE_CELLS[:INDEX_BITS]
#: (row, col) of the complement cell for bit i.
CHECK_CELLS: list[tuple[int, int]] = _FREE_CELLS[INDEX_BITS : 2 * INDEX_BITS]
assert len(CHECK_CELLS) == INDEX_BITS

#: Minimum brightness difference (0..255) between a data cell and its complement cell.
MIN_CONTRAST = 64.0
#: A marker channel must be at least this far from mid-grey (128) to count as on/off.
MARKER_MARGIN = 48.0

#: The seven non-identity orientation changes, as PIL transpose operation names.
TRANSPOSE_NAMES: tuple[str, ...] = (
    "FLIP_LEFT_RIGHT",
    "FLIP_TOP_BOTTOM",
    "ROTATE_90",
    "ROTATE_180",
    "ROTATE_270",
    "TRANSPOSE",
    "TRANSVERSE",
)


def _cell_box(row: int, col: int, width: int, height: int) -> tuple[int, int, int, int]:
    """Full pixel box (left, top, right, bottom) of a grid cell."""
    return (
        round(col * width / GRID_COLS),
        round(row * height / GRID_ROWS),
        round((col + 1) * width / GRID_COLS),
        round((row + 1) * height / GRID_ROWS),
    )


def _sample_box(row: int, col: int, width: int, height: int) -> tuple[int, int, int, int]:
    """Central half of a cell (at least one pixel), the area that is averaged on read."""
    x0, y0, x1, y1 = _cell_box(row, col, width, height)
    dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
    x0, y0, x1, y1 = x0 + dx, y0 + dy, x1 - dx, y1 - dy
    return x0, y0, max(x1, x0 + 1), max(y1, y0 + 1)


def draw_frame(index: int, width: int, height: int) -> Image.Image:
    """Draw the upright (display-orientation) RGB frame that encodes ``index``."""
    if not 0 <= index <= MAX_INDEX:
        raise ValueError(f"index {index} out of range 0..{MAX_INDEX}")
    if width < GRID_COLS * 2 or height < GRID_ROWS * 2:
        raise ValueError(f"frame {width}x{height} too small for the frame code")
    image = Image.new("RGB", (width, height), BLACK)
    draw = ImageDraw.Draw(image)

    def fill(cell: tuple[int, int], colour: tuple[int, int, int]) -> None:
        x0, y0, x1, y1 = _cell_box(cell[0], cell[1], width, height)
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=colour)

    for cell, colour in MARKERS.values():
        fill(cell, colour)
    for i, (data_cell, check_cell) in enumerate(zip(DATA_CELLS, CHECK_CELLS, strict=True)):
        bit = (index >> (INDEX_BITS - 1 - i)) & 1
        fill(data_cell, WHITE if bit else BLACK)
        fill(check_cell, BLACK if bit else WHITE)
    return image


def _mean_rgb(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[float, float, float]:
    # A box-filtered resize to 1x1 is the (rounded) mean and much faster than ImageStat.
    pixel = image.resize((1, 1), Image.Resampling.BOX, box=box).getpixel((0, 0))
    assert isinstance(pixel, tuple)
    return float(pixel[0]), float(pixel[1]), float(pixel[2])


def _luma(rgb: Sequence[float]) -> float:
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def _marker_problems(image: Image.Image) -> list[str]:
    width, height = image.size
    problems = []
    for name, ((row, col), colour) in MARKERS.items():
        mean = _mean_rgb(image, _sample_box(row, col, width, height))
        ok = all(
            (value >= 128 + MARKER_MARGIN) if want else (value <= 128 - MARKER_MARGIN)
            for value, want in zip(mean, colour, strict=True)
        )
        if not ok:
            got = "(" + ", ".join(f"{v:.0f}" for v in mean) + ")"
            problems.append(f"{name} marker missing, mean RGB {got}")
    return problems


def _decode_bits(image: Image.Image) -> int:
    width, height = image.size
    index = 0
    for i, (data_cell, check_cell) in enumerate(zip(DATA_CELLS, CHECK_CELLS, strict=True)):
        data = _luma(_mean_rgb(image, _sample_box(*data_cell, width, height)))
        check = _luma(_mean_rgb(image, _sample_box(*check_cell, width, height)))
        if abs(data - check) < MIN_CONTRAST:
            raise ValueError(
                f"bit {i}: data cell {data_cell} luma {data:.0f} and complement cell "
                f"{check_cell} luma {check:.0f} are too similar"
            )
        index = (index << 1) | int(data > check)
    return index


def _try_read(image: Image.Image) -> int | None:
    if _marker_problems(image):
        return None
    try:
        return _decode_bits(image)
    except ValueError:
        return None


def find_orientation_fix(image: Image.Image) -> str | None:
    """Return the PIL transpose name that makes ``image`` readable, "" if it already is.

    ``None`` means no orientation change helps (the frame is not a frame code or is
    damaged).  Intended for diagnostics.
    """
    image = image.convert("RGB")
    if _try_read(image) is not None:
        return ""
    for name in TRANSPOSE_NAMES:
        if _try_read(image.transpose(Image.Transpose[name])) is not None:
            return name
    return None


def read_frame_index(image: Image.Image) -> int:
    """Read the index from a display-oriented frame drawn by :func:`draw_frame`.

    Raises :class:`ValueError` if the orientation markers are not where they belong (the
    frame is rotated, flipped or mirrored, or is not a frame code) or if any bit cell is
    ambiguous.
    """
    image = image.convert("RGB")
    problems = _marker_problems(image)
    if problems:
        fix = find_orientation_fix(image)
        hint = ""
        if fix:
            hint = f"; the frame reads correctly after Image.transpose({fix})"
        raise ValueError(
            f"frame {image.size[0]}x{image.size[1]} is not in display orientation: "
            + "; ".join(problems)
            + hint
        )
    return _decode_bits(image)
