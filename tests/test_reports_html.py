"""The HTML renderer as a pure function: escaping, CSP, contents, thumbnail budget, timelines."""

from __future__ import annotations

import base64
import hashlib
import html
import re

from htmlkit import page_data, result, summary_of

from glasskit_eval.reports.html import HtmlOptions, render_html, review_command
from glasskit_eval.reports.thumbnails import data_uri_size
from glasskit_eval.results import Gate, Status

HOSTILE = '<script>alert("x")</script> \'quoted\' "double" </style><!-- </script>'


def _hostile_summary() -> tuple[str, str]:
    bad = [result(index=0, status=Status.FAILED, observed=HOSTILE, reason=f"expected closed, observed {HOSTILE}"),
           result(index=1, t=1.0, status=Status.ERROR, observed=None, reason="adapter_error: " + HOSTILE),
           result(case="</style>case", target="<img src=x onerror=alert(1)>", label=HOSTILE, index=0,
                  status=Status.FAILED, observed={"k": HOSTILE})]
    summary = summary_of(bad, gates=(Gate("min_pass_rate", False, HOSTILE),))
    return render_html(summary), HOSTILE


def test_hostile_values_never_become_markup() -> None:
    page, hostile = _hostile_summary()
    # Exactly our two script elements and our one style element, whatever the values held.
    assert len(re.findall(r"<script\b", page)) == 2
    assert page.count("</script>") == 2
    assert len(re.findall(r"<style\b", page)) == 1 and page.count("</style>") == 1
    assert "<img src=x" not in page and "<!--" not in page
    # Server-rendered cells carry the escaped text ...
    assert html.escape(hostile, quote=True) in page
    # ... and the data block gives the script the exact original strings.
    data = page_data(page)
    observed = [row[8] for row in data["rows"]]
    assert hostile in observed
    assert data["cases"] == ["doors", "</style>case"]
    assert any(hostile in d for d in data["targetDisplay"])


def test_strict_csp_allows_exactly_the_inline_style_and_script() -> None:
    page, _ = _hostile_summary()
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1))
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert csp.startswith("default-src 'none'; img-src data:;")
    assert f"style-src {digest(style)};" in csp and f"script-src {digest(script)};" in csp
    assert "unsafe" not in csp and "http" not in csp
    # No external references of any kind.
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)


def test_header_tables_and_review_commands() -> None:
    t1 = [result(index=0, status=Status.PASSED), result(index=1, t=1.0, status=Status.FAILED, observed="open"),
          result(target="light", index=0, t=0.2, status=Status.IGNORED, observed=None, duration=None)]
    t2 = [result(index=0, status=Status.FAILED, observed="open"), result(index=1, t=1.0, status=Status.FAILED),
          result(target="light", index=0, t=0.2, status=Status.IGNORED, observed=None, duration=None)]
    summary = summary_of(t1, t2, gates=(Gate("max_failures", False, "3 failures > 1"),), eval_dir="/e v/x")
    page = render_html(summary)
    assert '<span class="verdict" id="verdict">FAILED</span>' in page
    assert "Trial 1: 3 failures &gt; 1" in page
    for section in ("gates", "trials", "targets", "cases", "latency", "stability", "timelines", "samples"):
        assert f'<section id="{section}"' in page
    # Stability: the flaky sample with its sequence.
    stability = page[page.index('<section id="stability">'):page.index('<section id="timelines">')]
    assert '<span class="q q-passed">P</span><span class="q q-failed">F</span>' in stability
    assert "1 consistently failed, 1 flaky" in stability
    rows = page_data(page)["rows"]
    commands = [r[11] for r in rows if r[11]]
    assert len(commands) == 3 and all(r[11] is None for r in rows if r[6] >= 2)
    assert review_command("/e v/x", t1[1]) == (
        "python -m glasskit_eval review --eval-dir '/e v/x' --case doors --target door --time 1.0")


def test_thumbnails_embed_until_the_budget_then_link_to_artifacts(tmp_path) -> None:
    jpeg = b"\xff\xd8" + bytes(3000) + b"\xff\xd9"
    size = data_uri_size(jpeg)
    failures = [result(index=i, t=i / 10, frame=i, status=Status.FAILED, observed="open",
                       artifact=str(tmp_path / "failures" / f"f{i}.jpg") if i != 3 else None) for i in range(4)]
    # A hostile report's artifact path stays a harmless relative link.
    failures.append(result(index=5, t=0.5, frame=5, status=Status.FAILED, artifact="javascript:alert(1)"))
    # The same frame failing for a second target shares the first one's picture.
    failures.append(result(target="other", index=0, t=0.0, frame=0, status=Status.FAILED, observed="open"))
    thumbs = {("doors", i): jpeg for i in range(4)}
    page = render_html(summary_of(failures), HtmlOptions(thumbnails=thumbs, budget_bytes=2 * size + 10,
                                                         over_budget={("doors", 5)}, output_dir=str(tmp_path)))
    data = page_data(page)
    assert len(data["thumbs"]) == 2
    by_frame = {(row[2], row[5]): row[10] for row in data["rows"]}
    target_door = data["targets"].index("door")
    target_other = data["targets"].index("other")
    assert by_frame[(target_door, 0)] == by_frame[(target_other, 0)] == 0
    assert by_frame[(target_door, 2)] == "failures/f2.jpg"  # relative to the page's folder
    assert by_frame[(target_door, 3)] is None
    assert not by_frame[(target_door, 5)].startswith("javascript") and "%3A" in by_frame[(target_door, 5)]
    assert "image budget is spent: 3 more failed frame(s) are not embedded; 2 link" in page
    assert "1 have none" in page


def test_timelines_have_marks_per_sample_and_bands_per_range() -> None:
    source = "range [0, 1)"
    results = [result(index=i, t=i / 4, source=source, status=Status.FAILED if i == 2 else Status.PASSED)
               for i in range(4)]
    results.append(result(index=4, t=1.5, source="at", status=Status.PASSED))
    data = page_data(render_html(summary_of(results), HtmlOptions(durations={"doors": 2.0})))
    (timeline,) = data["timelines"]
    assert timeline["duration"] == 2.0
    (strip,) = timeline["strips"]
    assert [m[0] for m in strip["marks"]] == [0.0, 0.25, 0.5, 0.75, 1.5]
    assert strip["marks"][2][1] == 1 and strip["marks"][2][2] == 2  # failed; jumps to row 2
    assert strip["bands"] == [[0.0, 1.0, 1]]


def test_long_values_are_clipped_in_the_page() -> None:
    page = render_html(summary_of([result(status=Status.FAILED, observed="x" * 5000)]))
    observed = page_data(page)["rows"][0][8]
    assert len(observed) < 2100 and observed.endswith("(3000 more characters in the JSON report)")


def test_baseline_changes_are_a_table_with_escaped_values() -> None:
    baseline = {"path": "main.json", "matched_samples": 3, "regressions": 1,
                "counts": {"pass_to_fail": 1, "observed_changed": 1, "added": 0},
                "changes": [{"kind": "pass_to_fail", "case": "doors", "target": "door", "timestamp_s": 0.5,
                             "baseline_status": "passed", "status": "failed", "baseline_observed": "closed",
                             "observed": HOSTILE},
                            {"kind": "observed_changed", "case": "doors", "target": "door", "timestamp_s": 1.0,
                             "baseline_status": "passed", "status": "passed", "baseline_observed": {"n": 1},
                             "observed": {"n": 2}}]}
    page = render_html(summary_of([result()]), HtmlOptions(baseline=baseline))
    section = page[page.index('<section id="baseline">'):]
    section = section[:section.index("</section>")]
    assert "3 samples matched; 1 pass to fail, 1 observed changed." in section
    assert section.count("<tr>") == 3  # head + two changes, regressions first as recorded
    assert "pass to fail" in section and html.escape(HOSTILE, quote=True) in section
    assert "<script>alert" not in section
    assert '<section id="baseline">' not in render_html(summary_of([result()]))


def test_latency_and_usage_come_from_the_summary() -> None:
    import dataclasses

    results = [dataclasses.replace(result(index=i, t=0.5 * i, duration=d), usage={"cost": 0.01, "input_tokens": 10.0})
               for i, d in enumerate([0.1, 0.2, 0.3, 0.4])]
    page = render_html(summary_of(results))
    section = page[page.index('<section id="latency"'):]
    section = section[:section.index("</section>")]
    assert "Latency and usage per target" in section
    assert [h for h in re.findall(r"<th>([^<]*)</th>", section)] == [
        "Target", "Timed", "Mean", "p50", "p90", "p95", "Max", "cost", "input_tokens"]
    assert "<td>250.0 ms</td>" in section and "<td>400.0 ms</td>" in section  # mean, max
    assert "<td>0.04</td>" in section and "<td>40</td>" in section


def test_the_baseline_section_lists_stream_event_changes() -> None:
    streams = {"counts": {"detected_to_missed": 1, "missed_to_detected": 0, "latency_changed": 1, "added": 0,
                          "removed": 0},
               "events": [{"at": 12.0, "baseline_detected": True, "baseline_latency_s": 0.0, "case": "room",
                           "detected": False, "kind": "detected_to_missed", "latency_change_s": None,
                           "latency_s": None, "target": "lights"},
                          {"at": 5.0, "baseline_detected": True, "baseline_latency_s": 0.0, "case": "room",
                           "detected": True, "kind": "latency_changed", "latency_change_s": 0.2, "latency_s": 0.2,
                           "target": "lights"}],
               "false_alarms": [{"baseline_false_alarms": 1.0, "case": "room", "change": 2.0, "false_alarms": 3.0,
                                 "target": "lights"}],
               "matched_events": 4, "regressions": 1}
    diff = {"path": "base.json", "matched_samples": 0, "counts": {}, "changes": [], "streams": streams}
    page = render_html(summary_of([result()]), HtmlOptions(baseline=diff))
    section = page[page.index('<section id="baseline">'):]
    section = section[:section.index("</section>")]
    assert "Streams: 4 events matched; 1 detected-&gt;missed, 1 latency changed." in section
    cells = re.findall(r"<td>(.*?)</td>", section)
    assert cells[:9] == ["detected-&gt;missed", "room", "lights", "12 s", "detected", "missed", "0 ms", "–", "–"]
    assert cells[9:18] == ["latency changed", "room", "lights", "5 s", "detected", "detected", "0 ms", "200 ms",
                           "+200 ms"]
    assert cells[18:] == ["room", "lights", "1", "3", "+2"]
    # A damaged report's values never break the page.
    streams["events"][0]["latency_s"] = "soon"
    assert "Streams: 4 events matched" in render_html(summary_of([result()]), HtmlOptions(baseline=diff))
