"""The label check in every report: the console's "Labels to check", the JSON blocks and the HTML section.

Rendered from one :class:`~glasskit_eval.labels.consensus.LabelCheck`; nothing here weighs votes.
The same suspects, in the same order, appear in all three, and the console and the page print the
``review --suspects`` command that steps through them.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..labels.consensus import LabelCheck, LabelFinding
from .html_images import data_uri
from .html_text import clip_time, esc, value_text
from .tables import compact, table, time_label
from .thumbnails import ThumbKey, pixel_key

#: Suspects the console lists; the JSON report has every one.
CONSOLE_ROWS = 10
#: Suspect cards the HTML page shows (each may carry a frame).
HTML_CARDS = 50


def review_suspects_command(eval_dir: str, report_path: str | None) -> str | None:
    """``review --report R.json --suspects``, runnable from the current directory; None without a JSON report."""
    if report_path is None:
        return None
    here = Path.cwd()

    def shown(path: Path) -> str:
        return str(path.relative_to(here) if path.is_absolute() and path.is_relative_to(here) else path)

    words = ["python", "-m", "glasskit_eval", "review"]
    if Path(eval_dir).resolve() != (here / "eval").resolve():
        words += ["--eval-dir", shown(Path(eval_dir))]
    words += ["--report", shown(Path(report_path)), "--suspects"]
    return " ".join(shlex.quote(w) for w in words)


def label_lines(check: LabelCheck, review: str | None) -> list[str]:
    """The console section: the rule's outcome, the strongest suspects, and how to review them."""
    if not check.claimed:
        return ["Labels to check", *textwrap.wrap(check.note or "", 78, initial_indent="  ", subsequent_indent="  ")]
    head = (f"Labels to check: {len(check.suspects)} suspect, {len(check.ambiguous)} ambiguous "
            f"of {check.judged} samples with 2+ votes")
    arms = _arms_text(check)
    if not check.suspects:
        return [head, "  No label is contradicted by a consensus of the votes.", *([arms] if arms else [])]
    rows = [[s.case, s.target, f"{time_label(s.at)}s", _short(s.expected), _short(s.consensus),
             f"{s.votes_against}/{s.votes}"] for s in check.suspects[:CONSOLE_ROWS]]
    lines = table(head, ["Case", "Target", "Time", "Label", "Consensus", "Against"], rows,
                  [False, False, True, False, False, True]).splitlines()
    more = len(check.suspects) - CONSOLE_ROWS
    if more > 0:
        lines.append(f"... and {more} more (JSON report: label_suspects)")
    if arms:
        lines.append(arms)
    if review is not None:
        lines.append(f"Review them: {review}")
    else:
        lines.append("Write the JSON report (--output-json) to step through them with review --suspects.")
    return lines


def print_labels(check: LabelCheck | None, out: TextIO, review: str | None) -> None:
    if check is None:
        return
    print(file=out)
    for line in label_lines(check, review):
        print(line, file=out)


def labels_json(check: LabelCheck | None) -> dict[str, Any]:
    """The report's ``label_check``, ``label_suspects`` and ``label_ambiguous`` (nothing for a plain run)."""
    if check is None:
        return {}
    return {"label_check": check.to_json(), "label_suspects": [s.to_json() for s in check.suspects],
            "label_ambiguous": [a.to_json() for a in check.ambiguous]}


def labels_section(check: LabelCheck | None, thumbnails: Mapping[ThumbKey, bytes], review: str | None) -> str:
    """The page's "Labels to check": one card per suspect with the frame the votes were cast on."""
    if check is None:
        return ""
    if not check.claimed:
        return f'<section id="labels"><h2>Labels to check</h2><p class="hint">{esc(check.note)}</p></section>'
    intro = (f'<p class="hint">{len(check.suspects)} suspect and {len(check.ambiguous)} ambiguous labels of '
             f"{check.judged} samples with {esc(_votes_text(check))}. {esc(check.rule())}.</p>")
    command = (f'<div class="cmd-box"><pre class="cmd" id="labels-cmd">{esc(review)}</pre></div>'
               if review is not None and check.suspects else "")
    cards = "".join(_card(s, thumbnails) for s in check.suspects[:HTML_CARDS])
    more = len(check.suspects) - HTML_CARDS
    rest = f'<p class="hint">… and {more} more (JSON report: <code>label_suspects</code>).</p>' if more > 0 else ""
    ambiguous = ""
    if check.ambiguous:
        items = "".join(f"<li>{esc(a.case)} / {esc(a.target)} at {esc(clip_time(a.at))}: "
                        f"{esc(_split(a))}</li>" for a in check.ambiguous[:HTML_CARDS])
        ambiguous = f'<details class="label-ambiguous"><summary>Ambiguous ({len(check.ambiguous)})</summary><ul>{items}</ul></details>'
    listing = f'<ol class="flip-list label-list">{cards}</ol>' if cards else ""
    return f'<section id="labels"><h2>Labels to check</h2>{intro}{command}{listing}{rest}{ambiguous}</section>'


def _card(s: LabelFinding, thumbnails: Mapping[ThumbKey, bytes]) -> str:
    jpeg = thumbnails.get(pixel_key(s.case, s.frame_index)) if s.frame_index is not None else None
    image = (f'<img class="flip-img" src="{data_uri(jpeg)}" alt="{esc(f"frame {s.frame_index}")}">'
             if jpeg is not None else '<div class="flip-img none">no frame kept</div>')
    where = f"{s.case} / {s.target} at {clip_time(s.at)}" + (f" (frame {s.frame_index})" if s.frame_index is not None else "")
    return (f'<li class="flip label-suspect" data-case="{esc(s.case)}" data-target="{esc(s.target)}" '
            f'data-at="{s.at!r}"><div class="flip-where">{esc(where)}</div><div class="flip-pair">'
            f'<figure class="flip-side">{image}<figcaption>'
            f'<div class="flip-value">label: <code>{esc(value_text(s.expected))}</code></div>'
            f'<div class="flip-value">consensus: <code>{esc(value_text(s.consensus))}</code> '
            f"({s.votes_against} of {s.votes} votes)</div></figcaption></figure></div></li>")


def _arms_text(check: LabelCheck) -> str:
    """Which arms voted ("" in a run without arms)."""
    if not check.voting_arms and not check.abstaining_arms:
        return ""
    skipped = f" ({', '.join(check.abstaining_arms)} perturbed: not voting)" if check.abstaining_arms else ""
    return f"Voting arms: {', '.join(check.voting_arms) or 'none'}{skipped}"


def _votes_text(check: LabelCheck) -> str:
    arms = _arms_text(check)
    return "2+ votes" + (f"; {arms[0].lower()}{arms[1:]}" if arms else "")


def _split(f: LabelFinding) -> str:
    return ", ".join(f"{compact(value)} x{count}" for value, count in f.values)


def _short(value: Any, width: int = 24) -> str:
    text = compact(value)
    return text if len(text) <= width else text[:width - 1] + "…"
