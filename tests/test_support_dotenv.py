"""--env-file: dotenv syntax as uv reads it, precedence, and errors that never show a value."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.errors import DotenvError
from glasskit_eval.support.dotenv import load_env_files, parse_dotenv


def test_every_syntax_form() -> None:
    text = """
# a comment

PLAIN=value
export EXPORTED=yes
SPACED = padded value   # trailing comment
HASH=a#b
EMPTY=
SINGLE='literal $PLAIN \\n # not a comment'
DOUBLE="line\\nnext \\"quoted\\" $PLAIN ${EXPORTED} \\$PLAIN"
MULTI="first
second"
EXPANDED=${PLAIN}-$HOME_SET
NOEXEC=$(rm -rf /)
dotted.name=1
"""
    values = parse_dotenv(text, ".env", {"HOME_SET": "h"})
    assert values == {
        "PLAIN": "value", "EXPORTED": "yes", "SPACED": "padded value", "HASH": "a#b", "EMPTY": "",
        "SINGLE": "literal $PLAIN \\n # not a comment",
        "DOUBLE": 'line\nnext "quoted" value yes $PLAIN',
        "MULTI": "first\nsecond", "EXPANDED": "value-h", "NOEXEC": "$(rm -rf /)", "dotted.name": "1",
    }


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("OK=1\nsecret-value-without-equals\n", 2, "expected KEY=VALUE"),
    ("1BAD=hunter2\n", 1, "is not a variable name"),
    ("A=1\nB='hunter2\n", 2, "never closed"),
    ('B="hunter2" trailing\n', 1, "unexpected text"),
])
def test_malformed_lines_are_named_by_number_without_their_value(text: str, line: int, problem: str) -> None:
    with pytest.raises(DotenvError) as info:
        parse_dotenv(text, "conf/.env")
    message = str(info.value)
    assert message.startswith(f"conf/.env: line {line}: ") and problem in message
    assert "hunter2" not in message and "secret-value" not in message


def test_precedence_environment_wins_unless_override(tmp_path: Path) -> None:
    first = tmp_path / "a.env"
    second = tmp_path / "b.env"
    first.write_text("KEY=from-a\nONLY_A=a\nSET=from-a\n")
    second.write_text("KEY=from-b\nREF=${ONLY_A}\n")
    env = {"SET": "from-env"}
    assert sorted(load_env_files([str(first), str(second)], environ=env)) == ["KEY", "ONLY_A", "REF"]
    assert env == {"SET": "from-env", "KEY": "from-b", "ONLY_A": "a", "REF": "a"}
    env = {"SET": "from-env"}
    load_env_files([str(first)], override=True, environ=env)
    assert env["SET"] == "from-a"


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DotenvError, match="no such file"):
        load_env_files([str(tmp_path / "nope.env")], environ={})


ADAPTER = """
import hashlib, os

class Keyed:
    def __init__(self):
        self.key = os.environ["MODEL_API_KEY"]

    def evaluate(self, sample, target):
        return {"key_sha": hashlib.sha256(self.key.encode()).hexdigest()[:8]}

def create_evaluator(config):
    return Keyed()
"""

CASE = """
video: cfr_h264.mp4
targets:
  t:
    samples:
    - at: 0
      field: key_sha
      expect: "{sha}"
"""


def test_adapter_key_arrives_through_env_file_on_every_command(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    monkeypatch.delenv("MODEL_API_KEY", raising=False)
    secret = "sk-test-0123456789"
    sha = hashlib.sha256(secret.encode()).hexdigest()[:8]
    eval_dir = make_eval(tmp_path, {"case": CASE.format(sha=sha)}, adapter=ADAPTER)
    dotenv = tmp_path / ".env"
    dotenv.write_text(f'MODEL_API_KEY="{secret}"\n')
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--env-file", dotenv, "--output-json", report)
    assert code == 0, err
    assert secret not in out + err + report.read_text()
    assert read_json(report)["success"] is True
    # Before the command name, too; and validate constructs the adapter with it.
    monkeypatch.delenv("MODEL_API_KEY")
    code, _out, err = run_cli("--env-file", dotenv, "validate", "--eval-dir", eval_dir, "--adapter",
                              f"{eval_dir / 'adapter.py'}:create_evaluator")
    assert code == 0, err


def test_cli_errors_name_the_file_and_line_only(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("GOOD=1\nhunter2\n")
    code, _out, err = run_cli("list-samples", "--eval-dir", tmp_path, "--env-file", dotenv)
    assert code == 2 and "line 2" in err and "hunter2" not in err
    code, _out, err = run_cli("list-samples", "--env-file", tmp_path / "missing.env")
    assert code == 2 and "missing.env" in err
    code, _out, err = run_cli("list-samples", "--env-file-override")
    assert code == 2 and "needs --env-file" in err
