"""Help that teaches: examples and exit codes after every command's options, suggestions for typos."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import run_cli

from glasskit_eval.cli import COMMAND_NAMES
from glasskit_eval.cli.options import suggestion


@pytest.mark.parametrize("command", COMMAND_NAMES)
def test_every_command_help_ends_with_examples_and_exit_codes(command: str) -> None:
    code, out, _err = run_cli(command, "--help")
    assert code == 0
    tail = out[out.index("examples:"):]
    examples = [line for line in tail.splitlines() if line.startswith(f"  python -m glasskit_eval {command}")]
    assert 2 <= len(examples) <= 3
    assert "exit codes:" in tail
    codes = tail[tail.index("exit codes:"):].splitlines()[1:]
    assert any(line.startswith("    2  usage error") for line in codes)
    # An interrupt is 130, never grouped under 2; only review ends with Ctrl+C as its success.
    assert not any("interrupt" in line for line in codes if line.lstrip().startswith("2 "))
    if command != "review":
        assert codes[-1].startswith("  130  interrupted (Ctrl+C")


def test_run_help_says_no_correctness_gate_is_on_by_default() -> None:
    _code, out, _err = run_cli("run", "--help")
    assert "No correctness gate is on by default" in " ".join(out.split())
    assert "  0  every gate passed" in out and "  1  a gate failed" in out


def test_examples_in_help_parse() -> None:
    import shlex

    from glasskit_eval.cli import build_parser
    from glasskit_eval.cli.helptext import _EXAMPLES

    for command, examples in _EXAMPLES.items():
        for text, _why in examples:
            words = shlex.split(text)[3:]
            assert words[0] == command
            build_parser(command).parse_args(words)  # raises on an option that does not exist


def test_unknown_command_suggests_the_nearest() -> None:
    code, _out, err = run_cli("rn")
    assert code == 2
    assert "did you mean 'run'?" in err
    _code, _out, err = run_cli("video-store", "pul")
    assert "did you mean 'pull'?" in err


def test_unknown_option_suggests_the_nearest_of_that_command() -> None:
    code, _out, err = run_cli("run", "--min-pas-rate", "0.5", "--verbse")
    assert code == 2
    assert "--min-pas-rate: did you mean --min-pass-rate?" in err
    assert "--verbse: did you mean --verbose?" in err


def test_no_suggestion_for_something_unlike_anything() -> None:
    assert suggestion("unrecognized arguments: --zzzzzzzz", ["--verbose"]) is None
    assert suggestion("argument <command>: invalid choice: 'qqq' (choose from 'run', 'seed')", []) is None
    assert suggestion("the following arguments are required: --case", ["--case"]) is None


def _readme_exit_codes() -> dict[str, set[int]]:
    """The Exit codes column of the reference's command table, as numbers per command."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "reference.md").read_text()
    table = text[text.index("| Command | What it does | Exit codes |"):]
    found = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        found[cells[0].strip("`")] = {int(n) for n in re.findall(r"(?:^|, )(\d+)", cells[-1])}
    return found


def test_exit_codes_agree_in_the_reference_every_help_and_the_code() -> None:
    from glasskit_eval.cli.helptext import exit_codes
    from glasskit_eval.errors import ExitCode

    readme = _readme_exit_codes()
    assert set(readme) == set(COMMAND_NAMES)
    for command in COMMAND_NAMES:
        assert readme[command] == {code for code, _why in exit_codes(command)}, command
        assert readme[command] <= {int(c) for c in ExitCode}
    assert ExitCode.INTERRUPTED == 130


def test_an_interrupt_exits_130_and_an_invalid_case_file_fails_validate_with_1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit import make_clip_case

    path = make_clip_case(tmp_path, "video: clip.mp4\ntargets: 5\n")
    code, out, _err = run_cli("validate", "--eval-dir", path.parent.parent)
    assert code == 1 and "targets must be a mapping" in out

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("glasskit_eval.commands.list_samples.execute_list_samples", interrupted)
    code, _out, err = run_cli("list-samples", "--eval-dir", path.parent.parent)
    assert code == 130 and "interrupted" in err
