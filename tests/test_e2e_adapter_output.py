"""Adapter output never breaks the live line, and an adapter's mistakes say what to do about them.

On a real terminal (a pty): what a Python adapter prints (stdout and stderr) and what a Node
command adapter writes to stderr appear as whole lines named ``[adapter.py]``/``[adapter.mjs]``
above the live progress line, never glued onto it, and Ctrl+C's message starts on its own line.
In-process: a fail-fast error says what --keep-going would have done (and --verbose shows the
traceback), a `field` that matches no observation names the keys there are, a mistyped video name
suggests the file beside it, a wrong Node script path shows Node's stack once, and a Python
without av/PIL/yaml gets the pip command.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from evalkit import ROOT, make_eval, run_cli
from ptykit import run_in_pty

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    samples:
    - range: [0.0, 1.2]
      every_s: 0.2
      field: open
      expect: true
"""

#: Slow enough for the live line to be drawn between calls; prints on both streams, one line in
#: two writes (a partial line must wait for its end).
PRINTING_ADAPTER = """\
import sys, time

def create_evaluator(config):
    return Printer()

class Printer:
    def evaluate(self, sample, target):
        time.sleep(0.25)
        print(f"PYOUT {sample.sample_index}", end="")
        print(" done")
        print(f"PYERR {sample.sample_index}", file=sys.stderr)
        return {"open": True}
"""

NODE_ADAPTER = """\
import { runGlassKitAdapter } from "./glasskit_adapter.mjs";

await runGlassKitAdapter(async () => ({
  async evaluate({ sample }) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    console.error(`NODEERR ${sample.sampleIndex}`);
    process.stderr.write(`NODEPART ${sample.sampleIndex}`);
    process.stderr.write(" end\\n");
    console.log(`NODELOG ${sample.sampleIndex}`);
    return { open: true };
  },
}));
"""

LIVE = "samples · "  # a piece of the live line: `case 1/1 clip · target door · 2/6 samples · ...`


def assert_on_their_own_lines(text: str, name: str, words: list[str], count: int, quoted: bool = False) -> None:
    """Each adapter line is whole, named, and starts a terminal line (after a clear of the live line).

    ``quoted``: a command adapter's stderr, mirrored as quoted outside text (``| `` after the name).
    """
    for word in words:
        hits = [m.start() for m in re.finditer(re.escape(word), text)]
        assert len(hits) == count, (word, text)
        for at in hits:
            prefix = f"[{name}] " + ("| " if quoted else "")
            assert text[at - len(prefix):at] == prefix, text[max(0, at - 80):at + 20]
            before = text[:at - len(prefix)]
            # The line starts after a newline, or after the `\r\033[K` that cleared the live line.
            assert before.endswith(("\n", "\r\x1b[K")), repr(text[max(0, at - 80):at + 20])


def test_python_adapter_prints_land_above_the_live_line_on_a_terminal(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE}, PRINTING_ADAPTER)
    result = run_in_pty(["run", "--eval-dir", str(eval_dir)])
    text = result.text
    assert result.returncode == 0, text
    assert LIVE in text  # the live line was drawn while the adapter printed
    assert_on_their_own_lines(text, "adapter.py", ["PYOUT", "PYERR"], 6)
    for n in range(6):
        assert f"[adapter.py] PYOUT {n} done\r\n" in text


def test_node_adapter_stderr_lands_above_the_live_line_on_a_terminal(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    shutil.copy(ROOT / "glasskit_eval" / "assets" / "glasskit_adapter.mjs", eval_dir)
    (eval_dir / "adapter.mjs").write_text(NODE_ADAPTER)
    result = run_in_pty(["run", "--eval-dir", str(eval_dir), "--adapter-command",
                         f"node {eval_dir / 'adapter.mjs'}"])
    text = result.text
    assert result.returncode == 0, text
    assert LIVE in text
    assert_on_their_own_lines(text, "adapter.mjs", ["NODEERR", "NODEPART", "NODELOG"], 6, quoted=True)
    for n in range(6):
        assert f"[adapter.mjs] | NODEPART {n} end\r\n" in text


def test_ctrl_c_message_starts_on_its_own_line_and_exits_130(tmp_path: Path) -> None:
    slow = PRINTING_ADAPTER.replace("time.sleep(0.25)", "time.sleep(0.4)").replace(
        'print(f"PYERR {sample.sample_index}", file=sys.stderr)', "")
    eval_dir = make_eval(tmp_path, {"clip": CASE}, slow)

    def press_ctrl_c(output: bytes) -> bytes | None:
        # Once the live line is on screen with some samples done and more to come.
        tail = output.decode(errors="replace").rsplit("\n", 1)[-1]
        return b"\x03" if re.search(r"[1-5]/6 samples", tail) and "\x1b[K" in tail else None

    result = run_in_pty(["run", "--eval-dir", str(eval_dir)], when=press_ctrl_c)
    text = result.text
    assert result.returncode == 130, text
    at = text.index("SIGINT received: stopping")
    # What the terminal shows left of the message: nothing (not the live line, not its ^C echo).
    line = text[:at].rsplit("\n", 1)[-1]
    assert line.rsplit("\r", 1)[-1].replace("\x1b[K", "") == "", repr(text[max(0, at - 120):at + 40])
    assert LIVE in text[:at]  # the live line was on screen when Ctrl+C came
    assert "Eval interrupted" in text[at:]


# --- in-process ----------------------------------------------------------------------------------------

FAILING_ADAPTER = """\
def create_evaluator(config):
    return Failing()

class Failing:
    def evaluate(self, sample, target):
        if sample.timestamp_s >= 0.4:
            raise ValueError("backend said no")
        return {"result": {"opn": True, "score": 0.9}, "latency": 1}
"""


def test_a_fail_fast_error_says_what_keep_going_would_do_and_verbose_shows_the_traceback(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE.replace("field: open", "field: result.opn")}, FAILING_ADAPTER)
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "with --keep-going it would have been recorded and the other samples evaluated" in err
    assert "(--verbose prints the adapter's traceback)" in err and "Traceback" not in err
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--verbose")
    assert code == 2
    lines = err.splitlines()
    start = lines.index("    Traceback (most recent call last):")
    assert lines[start + 2].strip() == 'raise ValueError("backend said no")'
    assert lines[start + 3] == "    ValueError: backend said no"
    assert "with --keep-going" in lines[start + 4]


def test_a_field_missing_from_every_observation_names_the_keys_there_are(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE.replace("field: open", "field: result.open")}, FAILING_ADAPTER)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--case", "clip", "--until", "0.3")
    assert code == 0, out + err  # no gate is set
    assert ("warning: field `result.open` is missing from every observation of clip/door (2 samples): "
            "at `result` the observation has keys: opn, score") in out
    # A field that some observations have is a labelling question, not a wrong path: no warning.
    eval_dir = make_eval(tmp_path / "other", {"clip": CASE.replace("field: open", "field: result.opn")},
                         FAILING_ADAPTER)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert "is missing from every observation" not in out


def test_a_mistyped_video_name_suggests_the_file_beside_it(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE.replace("cfr_h264.mp4", "cfr-h264.mp4")}, FAILING_ADAPTER)
    for command in ("run", "validate"):
        code, out, err = run_cli(command, "--eval-dir", eval_dir)
        assert code in (1, 2)
        assert re.search(r"video not found: \S+/cfr-h264\.mp4; check the case file's `video:` path; "
                         r"did you mean cfr_h264\.mp4 \(in the same folder\)\?", out + err), out + err


def test_a_wrong_node_script_path_prints_nodes_stack_once(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", "node eval/adaptr.mjs")
    assert code == 2
    assert err.count("Cannot find module") == 2  # the stack, then the one line that tells why
    assert err.count("at Module._resolveFilename") == 1
    assert "[adaptr.mjs] | Error: Cannot find module" in err
    assert "The script in the adapter command was not found: check its path" in err


@pytest.mark.parametrize("blocked", [("av",), ("yaml", "PIL", "av")])
def test_without_its_dependencies_the_module_prints_the_pip_command(tmp_path: Path, blocked: tuple[str, ...]) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE}, FAILING_ADAPTER)
    script = textwrap.dedent(f"""\
        import runpy, sys
        for name in {blocked!r}:
            sys.modules[name] = None  # as if not installed
        sys.argv = ["glasskit_eval", "run", "--eval-dir", {str(eval_dir)!r}]
        runpy.run_module("glasskit_eval", run_name="__main__")
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    wanted = {"yaml": "pyyaml", "PIL": "pillow", "av": "av"}
    names = [wanted[n] for n in ("yaml", "PIL", "av") if n in blocked]
    assert proc.stderr.splitlines()[-1] == f"Install with: {shlex.quote(sys.executable)} -m pip install {' '.join(names)}"
