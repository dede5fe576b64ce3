"""Outside text cannot become commands or markup: what adapters, model servers and observations
say is printed inside our lines, control characters escaped, and stays in code spans in the job
summary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import modelserver
import pytest
from evalkit import make_eval, run_cli
from modelserver import ModelServer

from glasskit_eval.support.outside import guard_lines, inline, quoted_lines

model_server = modelserver.model_server

EVIL = "oops\n::error file=x.py::pwned\r\x1b[2J\x9b31m::add-mask::x\u2028::warning::y"
CASE = """
video: cfr_h264.mp4
targets:
  size:
    samples:
    - at: [0.0, 0.5]
      field: width
      expect: 128
"""


#: The log groups our own summary folds its tables into on GitHub (their titles are ours).
OUR_GROUPS = re.compile(r"^::(group::(By target|By trial|Failures \(.*\)|Unstable and failing samples|Streams|Unstable and missed events|Missed events and false alarms)|endgroup::)$")


def is_ours(line: str) -> bool:
    """A workflow command we write: an annotation, or a log group of our summary."""
    return line.startswith("::error") or bool(OUR_GROUPS.match(line))


def no_command_lines(*texts: str) -> None:
    for text in texts:
        for line in re.split(r"\r\n|\r|\n|\u2028", text):
            assert not line.lstrip().startswith("::"), line
        assert "\x1b" not in text, [line for line in text.split("\n") if "\x1b" in line]
        assert "\x1b" not in text and "\x9b" not in text and "\u2028" not in text


def run_everything(tmp_path: Path, eval_dir: Path, monkeypatch: pytest.MonkeyPatch,
                   *argv: str) -> tuple[int, str, str, str]:
    summary = tmp_path / "summary.md"
    summary.write_text("")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--verbose", "--annotations", "github",
                             *argv)
    return code, out, err, summary.read_text()


def test_a_python_adapter_cannot_print_commands_through_us(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = f"""
        def create_evaluator(config):
            return Evaluator()

        class Evaluator:
            def evaluate(self, sample, target):
                if sample.timestamp_s == 0:
                    return {{"width": {EVIL!r}}}
                raise RuntimeError({EVIL!r})
    """
    eval_dir = make_eval(tmp_path, {"case": CASE}, adapter=adapter)
    code, out, err, summary = run_everything(tmp_path, eval_dir, monkeypatch, "--adapter",
                                             f"{eval_dir / 'adapter.py'}:create_evaluator")
    assert code == 1, err
    # Our own ::error annotations are there; nothing the adapter said became one.
    ours = [line for line in out.split("\n") if line.startswith("::error")]
    assert len(ours) == 3  # the failed adapter_errors gate and the two samples
    no_command_lines(*(line for line in out.split("\n") if not is_ours(line)), err)
    assert "RuntimeError: oops\\n::error file=x.py::pwned\\r\\x1b[2J\\x9b31m" in out
    # The job summary keeps the reason in a code span (after the table's own escaping).
    failures = summary.split("### Failures", 1)[1]
    rows = [line for line in failures.split("\n") if line.startswith("| `case` ")]
    no_command_lines(summary)
    assert len(rows) == 2 and all(row.rstrip().endswith("` |") for row in rows), rows


def test_a_server_error_body_and_a_command_adapters_stderr(tmp_path: Path, model_server: ModelServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "adapter.py"
    script.write_text("import json, sys\n"
                      f"print({EVIL!r}, file=sys.stderr, flush=True)\n"
                      "for line in sys.stdin:\n"
                      "    msg = json.loads(line)\n"
                      f"    print({EVIL!r}, file=sys.stderr, flush=True)\n"
                      "    if msg.get('method') == 'evaluate':\n"
                      f"        print(json.dumps({{'id': msg['id'], 'error': {{'message': {EVIL!r}}}}}), flush=True)\n"
                      "    else:\n"
                      "        result = {'protocolVersion': 1, 'capabilities': {'evaluate': True}} if msg.get('method') == "
                      "'initialize' else None\n"
                      "        print(json.dumps({'id': msg.get('id'), 'result': result}), flush=True)\n")
    eval_dir = make_eval(tmp_path, {"case": CASE})
    code, out, err, _summary = run_everything(tmp_path, eval_dir, monkeypatch, "--adapter-command",
                                              f"python3 {script}")
    assert code == 1, err
    no_command_lines(*(line for line in out.split("\n") if not is_ours(line)), err)
    assert "| oops" in err  # mirrored, led by "| "
    # Without --keep-going the first error stops the run: its message is printed by the face.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", f"python3 {script}")
    assert code == 2
    no_command_lines(out, err)
    # An HTTP server answering 500 with commands in its body.
    (eval_dir / "adapter.yaml").write_text(json.dumps({"adapter": {"type": "http", "url": model_server.url + "/ok"}}))
    monkeypatch.setattr(modelserver, "_observe", lambda sample, headers: {"width": EVIL})
    code, out, err, _summary = run_everything(tmp_path, eval_dir, monkeypatch)
    no_command_lines(*(line for line in out.split("\n") if not is_ours(line)), err)


def test_helpers() -> None:
    assert inline("a\nb\x1b\x9b\u2028c") == "a\\nb\\x1b\\x9b\\u2028c"
    assert inline("plain ünïcode") == "plain ünïcode"
    assert quoted_lines("::x\n  ::y\n") == "| ::x\n|   ::y"
    assert guard_lines("error: body\n::error::x\n  ok\x1b") == "error: body\n| ::error::x\n  ok\\x1b"


# --- names: target ids and arm names -------------------------------------------------------------

NAMED_CASE = """\
video: cfr_h264.mp4
targets:
  {target}:
    samples:
    - at: [0.0, 0.5]
      field: ok
      expect: false
  {stream}:
    sample_defaults: {{field: alert}}
    stream: {{every_s: 0.5, window: [0, 0.5]}}
    events:
    - at: 0.5
      expect: boiling
"""
NAMED_ADAPTER = """
class Evaluator:
    def evaluate(self, sample, target):
        return {"ok": True}

    def on_frame(self, sample, target):
        return {"alert": "boiling"}

def create_evaluator(config):
    return Evaluator()
"""


@pytest.mark.parametrize(("where", "name", "found"), [
    ("target", '"a\\n::stop-commands::X"', "\\n"),
    ("target", '"b\\e[2Jc"', "\\x1b"),
    ("stream", '"s\\r::stop-commands::X"', "\\r"),
    ("arm", '"d\\n::stop-commands::Y"', "\\n"),
    ("arm", '"e\\x9b31m"', "\\x9b"),
])
def test_a_name_with_control_characters_is_refused_at_validation(tmp_path: Path, where: str, name: str,
                                                                 found: str) -> None:
    names = {"target": "ok", "stream": "pan", where: name}
    config = f"arms:\n  {name if where == 'arm' else 'dim'}: {{perturb: [{{brightness: 0.5}}]}}\n"
    eval_dir = make_eval(tmp_path, {"case": NAMED_CASE.format(**names)}, adapter=NAMED_ADAPTER, config=config)
    for argv in (("validate",), ("run", "--arm", "all")):
        code, out, err = run_cli(*argv, "--eval-dir", eval_dir)
        assert code == (1 if argv == ("validate",) else 2), out + err
        text = out + err
        file, line = ("config.yaml", 2) if where == "arm" else ("cases/case.yaml", 3 if where == "target" else 8)
        assert f"{eval_dir / file}:{line}: " in text, text
        assert f"holds control characters ({found})" in text and "use visible characters only" in text
        no_command_lines(out, err)
        assert "Traceback" not in text


def test_an_arm_name_on_the_command_line_with_control_characters_is_refused(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"case": CASE}, adapter=NAMED_ADAPTER)
    (tmp_path / "other.yaml").write_text("a: 1\n")
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", f"x\n::stop-commands::Y\x1b[2J={tmp_path / 'other.yaml'}")
    assert code == 2 and "the arm name holds control characters (\\n, \\x1b)" in err, err
    no_command_lines(out, err)


def test_names_that_start_with_two_colons_never_start_a_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    names = {"target": '"::stop-commands::X"', "stream": '"::stop-commands::S [link](http://x)"'}
    config = 'arms:\n  "::stop-commands::Y": {perturb: [{brightness: 0.5}]}\n'
    eval_dir = make_eval(tmp_path, {"case": NAMED_CASE.format(**names)}, adapter=NAMED_ADAPTER, config=config)
    code, out, err, summary = run_everything(tmp_path, eval_dir, monkeypatch)
    assert code in (0, 1), err
    assert "::stop-commands::X" in out and "::stop-commands::S" in out
    no_command_lines(*(line for line in out.split("\n") if not is_ours(line)), err)
    # Our own annotations still are commands; the names in them are escaped as properties.
    assert any(line.startswith("::error file=") for line in out.split("\n"))
    # Arms (on the sample target: arms do not take stream targets).
    code, arms_out, arms_err = run_cli("run", "--eval-dir", eval_dir, "--arm", "all", "--target", "::stop-commands::X",
                                       "--keep-going", "--verbose")
    assert code in (0, 1), arms_err
    assert "::stop-commands::Y" in arms_out
    no_command_lines(*(line for line in arms_out.split("\n") if not is_ours(line)), arms_err)
    # In the job summary a name is a code span: never a link, never a command.
    assert "| `::stop-commands::X` |" in summary and "| ::stop" not in summary
    no_command_lines(summary)


def test_a_table_cell_wrapped_at_two_colons_does_not_start_a_line_with_them() -> None:
    import io

    from glasskit_eval.reports.tables import table
    from glasskit_eval.support.outside import LineGuard, write_command

    text = table("T", ["Reason", "n"], [["x" * 70 + " ::stop-commands::Z " + "y" * 30, "1"]], width=60)
    sink = io.StringIO()
    guard = LineGuard(sink)
    print(text, file=guard)
    for chunk in ("ab\n", "  ", ":", ":x\r::y\r\n", "::z"):
        guard.write(chunk)
    write_command(guard, "::group::ours")
    lines = re.split(r"\r\n|\r|\n", sink.getvalue())
    assert [line for line in lines if line.lstrip().startswith("::")] == ["::group::ours"]
    assert "| ::y" in lines and "| ::z" in lines
