"""Help that teaches: examples and exit codes after every command's options, suggestions for typos."""

from __future__ import annotations

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
    assert tail.rstrip().splitlines()[-1].startswith("  2  usage error")


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
