"""The damage record and its one warning (pure)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from glasskit_eval.video import damage
from glasskit_eval.video.damage import Damage, nearest_was_lost, report

pytestmark = pytest.mark.frames


def test_nothing_lost_is_no_damage() -> None:
    assert not Damage()
    assert Damage().describe(Path("v.mp4")) == "v.mp4: the video is damaged or truncated"


def test_the_warning_counts_packets_and_names_lost_frames_and_affected_times() -> None:
    record = Damage()
    record.skip()
    record.skip()
    record.lose([Fraction(i, 10) for i in range(7)])
    record.affect(Fraction(3, 20))
    text = record.describe(Path("v.mp4"))
    assert "2 video packets could not be decoded and were skipped" in text
    assert "7 frames could not be decoded (at 0.0s, 0.1s, 0.2s, 0.3s, 0.4s and 2 more)" in text
    assert "sample time 0.15s got the nearest decodable frame instead of a lost one" in text
    record.numbering_guessed = True
    assert "numbered and timed as if it held one frame" in record.describe(Path("v.mp4"))


def test_a_lost_frame_wins_only_where_the_selection_rule_would_pick_it() -> None:
    lost = [Fraction(2)]
    assert nearest_was_lost(Fraction(19, 10), Fraction(1), lost)  # 2 is nearer than 1
    assert not nearest_was_lost(Fraction(11, 10), Fraction(1), lost)
    assert nearest_was_lost(Fraction(5, 2), Fraction(3), lost)  # a tie goes to the earlier, lost one
    assert not nearest_was_lost(Fraction(3, 2), Fraction(1), lost)  # a tie the kept frame wins


def test_damage_is_reported_once_per_video(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(damage, "_reported", set())
    video = tmp_path / "v.mp4"
    video.write_bytes(b"x")
    record = Damage()
    record.skip()
    messages: list[str] = []
    report(video, record, messages.append)
    report(video, record, messages.append)
    report(video, Damage(), messages.append)
    assert len(messages) == 1
