"""The Node helper on its own: a copied ``glasskit_adapter.mjs`` is all a Node adapter needs.

It decodes each frame to RGBA itself (node:zlib, no npm package), and started by hand it
says how it is run instead of waiting for protocol requests for ever.
"""

from __future__ import annotations

import hashlib
import os
import pty
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from evalkit import ROOT, make_eval, read_json, run_cli
from PIL import Image

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")]

HELPER = ROOT / "glasskit_eval" / "assets" / "glasskit_adapter.mjs"

#: Nothing but the copied helper: the observation is a digest of the decoded RGBA pixels.
ADAPTER = """\
import { createHash } from "node:crypto";
import { runGlassKitAdapter } from "./glasskit_adapter.mjs";

await runGlassKitAdapter(async () => ({
  async evaluate({ sample }) {
    const { rgba, width, height } = sample.image;
    let opaque = true;
    for (let i = 3; i < rgba.length; i += 4) opaque &&= rgba[i] === 255;
    return { size: [width, height, rgba.length], opaque,
             sha256: createHash("sha256").update(rgba).digest("hex") };
  },
}));
"""

CASE = """\
video: cfr_h264.mp4
targets:
  pixels:
    samples:
    - at: [0.0, 0.5, 1.3]
      expect: null
"""


def test_a_node_adapter_gets_rgba_pixels_from_the_copied_helper_alone(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    shutil.copy(HELPER, eval_dir / "glasskit_adapter.mjs")
    (eval_dir / "adapter.mjs").write_text(ADAPTER)
    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command",
                             f"node {eval_dir / 'adapter.mjs'}", "--output-json", report)
    assert code in (0, 1), out + err
    frames = tmp_path / "frames"
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "clip", "--at", "0", "--at", "0.5",
                             "--at", "1.3", "--output-dir", frames)
    assert code == 0, out + err
    results = {r["timestamp_s"]: r["observed"] for r in read_json(report)["trials"][0]["results"]}
    assert sorted(results) == [0.0, 0.5, 1.3]
    for time, observed in results.items():
        png = frames / f"at-{time:.1f}s.png"
        with Image.open(png) as image:
            rgba = image.convert("RGBA")
            expected = hashlib.sha256(rgba.tobytes()).hexdigest()
            size = [rgba.width, rgba.height, rgba.width * rgba.height * 4]
        assert observed == {"size": size, "opaque": True, "sha256": expected}, time


def test_started_by_hand_the_adapter_says_how_it_is_run(tmp_path: Path) -> None:
    shutil.copy(HELPER, tmp_path / "glasskit_adapter.mjs")
    (tmp_path / "adapter.mjs").write_text(ADAPTER)
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(["node", "adapter.mjs"], cwd=tmp_path, stdin=terminal, capture_output=True,
                              timeout=30)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 2
    assert proc.stderr.decode() == textwrap.dedent("""\
        This is a glasskit_eval command adapter: glasskit_eval starts it and talks to it over stdin.
        Run it with: python -m glasskit_eval run --adapter-command "node adapter.mjs"
        """)
