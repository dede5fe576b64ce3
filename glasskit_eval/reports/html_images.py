"""Which frames the HTML report embeds, within ``--html-budget-mb``, and where the rest link.

One budget covers everything embedded. Thumbnails come first, one per failed frame in the order
the page lists failures (errors, then failures; case, target, time), so every failure gets a
picture before any gets a large one. The filmstrips of failed clip samples come second (their
frames other than the anchor, in the same order), full-resolution frames for the lightbox third,
each from what the ones before left. A frame beyond the budget links to its ``--save-failures``
artifact (a JPEG at full resolution) when the run kept one; a strip frame beyond it is shown by
its time and frame index alone.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ..results import SampleResult
from .thumbnails import ThumbKey, data_uri_size, pixel_key, strip_positions


@dataclass
class Images:
    #: Embedded thumbnails and full frames (data URIs), in the order the rows point at them.
    thumbs: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    #: By attempt: a thumbnail's index, or an artifact link to show in its place.
    thumb_of: dict[int, int | str] = field(default_factory=dict)
    #: By attempt: a full frame's index, True when the thumbnail is the whole frame, or an artifact link.
    frame_of: dict[int, int | bool | str] = field(default_factory=dict)
    #: By attempt of a clip sample: its filmstrip, ``[time, frame index, thumbnail index or None, anchor]``
    #: per frame in time order (the anchor's thumbnail is ``thumb_of``'s).
    strip_of: dict[int, list[list[float | int | bool | None]]] = field(default_factory=dict)
    #: Thumbnails of ``extra`` frames (stream misses and false alarms) by key; missing: not embedded.
    extra_of: dict[ThumbKey, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def artifact_link(path: str, output_dir: str | None) -> str:
    from urllib.parse import quote

    if output_dir is not None:
        try:
            rel = os.path.relpath(path, output_dir)
        except ValueError:  # another drive (Windows)
            rel = path
        # Relative when the artifacts sit near the page (they travel together in a CI artifact).
        if not rel.startswith(".." + os.sep + ".." + os.sep + ".."):
            return quote(rel.replace(os.sep, "/"))
    return "file://" + quote(os.path.abspath(path).replace(os.sep, "/"))


def _plain_key(r: SampleResult) -> ThumbKey:
    return pixel_key(r.case, r.frame_index or 0)


def allocate(attempts: Sequence[SampleResult], failing: Sequence[int], *, thumbnails: Mapping[ThumbKey, bytes],
             frames: Mapping[ThumbKey, bytes], budget_bytes: int, over_budget: Collection[ThumbKey],
             output_dir: str | None, key_of: Callable[[SampleResult], ThumbKey] | None = None,
             extra: Sequence[ThumbKey] = ()) -> Images:
    """Spend the budget over ``failing`` (attempt indices, in page order, each with a frame index).

    ``key_of`` names the picture of an attempt (default: its case and frame; with arms, as its arm saw it).
    ``extra`` frames (the streams' misses and false alarms, in page order) get thumbnails after the
    failed samples' and before filmstrips and full-resolution frames; they have no artifacts to link to.
    """
    key_of = key_of or _plain_key
    out = Images()
    thumb_index: dict[ThumbKey, int] = {}
    counted: set[ThumbKey] = set()
    used = over = missing = linked = 0

    def embedded(key: ThumbKey) -> int | None:
        """The index of ``key``'s thumbnail on the page: embedded before, or now if the budget holds it."""
        nonlocal used
        jpeg = thumbnails.get(key)
        if key not in thumb_index and jpeg is not None and used + data_uri_size(jpeg) <= budget_bytes:
            used += data_uri_size(jpeg)
            thumb_index[key] = len(out.thumbs)
            out.thumbs.append(data_uri(jpeg))
        return thumb_index.get(key)

    for i in failing:
        r = attempts[i]
        key = key_of(r)
        index = embedded(key)
        if index is not None:
            out.thumb_of[i] = index
            continue
        # Each attempt links to its own artifact; the note counts frames, once each.
        first = key not in counted
        counted.add(key)
        if first and (thumbnails.get(key) is not None or key in over_budget):
            over += 1
        if r.artifact_image:
            out.thumb_of[i] = artifact_link(r.artifact_image, output_dir)
            linked += first
        else:
            missing += first
    for key in extra:
        index = embedded(key)
        if index is not None:
            out.extra_of[key] = index
        elif key not in counted and (thumbnails.get(key) is not None or key in over_budget):
            counted.add(key)
            over += 1
    strip_left = _strips(out, attempts, failing, thumbnails, thumb_index, budget_bytes - used)
    used = budget_bytes - strip_left[1]
    frame_index: dict[ThumbKey, int | bool] = {}
    late = 0
    for i in failing:
        r = attempts[i]
        key = key_of(r)
        if key not in frame_index:
            full = frames.get(key)
            if full is not None and key in thumb_index and full == thumbnails.get(key):
                frame_index[key] = True
            elif full is not None and used + data_uri_size(full) <= budget_bytes:
                used += data_uri_size(full)
                frame_index[key] = len(out.frames)
                out.frames.append(data_uri(full))
            else:
                late += full is not None
        if key in frame_index:
            out.frame_of[i] = frame_index[key]
        elif r.artifact_image:
            out.frame_of[i] = artifact_link(r.artifact_image, output_dir)
    mb = f"{budget_bytes / 1e6:g} MB"
    if over:
        out.notes.append(f"The {mb} image budget is spent: {over} more failed frame(s) are not embedded; "
                         f"{linked} link to their --save-failures artifact"
                         + (f", {missing} have none (run with --save-failures to keep them)." if missing else "."))
    elif missing:
        out.notes.append(f"{missing} failed frame(s) have no thumbnail (render from the run with --html, "
                         "keep --save-failures artifacts, or give report --eval-dir with the videos).")
    elif strip_left[0]:
        out.notes.append(f"The {mb} image budget is spent: {strip_left[0]} frame(s) of failed clips' filmstrips "
                         "are shown by time and frame index only (raise --html-budget-mb to embed them).")
    elif late:
        out.notes.append(f"{late} failed frame(s) are embedded as thumbnails only: full-resolution frames "
                         f"beyond the {mb} budget open their --save-failures artifact where the run kept one "
                         "(raise --html-budget-mb to embed them).")
    return out


def _strips(out: Images, attempts: Sequence[SampleResult], failing: Sequence[int],
            thumbnails: Mapping[ThumbKey, bytes], thumb_index: dict[ThumbKey, int], left: int) -> tuple[int, int]:
    """Each failed clip sample's filmstrip, its frames embedded while ``left`` bytes allow.

    A frame already embedded (an anchor, another strip's) is pointed at, not embedded again.
    Returns the frames left out (each once) and the bytes still left.
    """
    dropped: set[ThumbKey] = set()
    for i in failing:
        r = attempts[i]
        if r.clip is None or not r.clip.frame_indexes:  # an edited report may hold an empty clip
            continue
        anchor = r.clip.anchor_position(r.timestamp_s, r.frame_index)
        strip: list[list[float | int | bool | None]] = []
        for p in strip_positions(r):
            index = r.clip.frame_indexes[p]
            key = (r.case, index)
            if p == anchor:
                thumb = out.thumb_of.get(i)
                strip.append([r.clip.timestamps[p], index, thumb if isinstance(thumb, int) else None, True])
                continue
            if key not in thumb_index:
                jpeg = thumbnails.get(key)
                if jpeg is not None and data_uri_size(jpeg) <= left:
                    left -= data_uri_size(jpeg)
                    thumb_index[key] = len(out.thumbs)
                    out.thumbs.append(data_uri(jpeg))
                else:
                    dropped.add(key)
            strip.append([r.clip.timestamps[p], index, thumb_index.get(key), False])
        out.strip_of[i] = strip
    return len(dropped - set(thumb_index)), left
