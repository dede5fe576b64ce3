"""Secrets never leave: every value a run knows to be secret is cut from every output.

The attacks: a server echoing the Authorization header (in an error body and in a 200's
observation), an adapter URL carrying a password and a key, an adapter raising with a token in its
message, a header value that http.client would quote in its own exception, and a dotenv line that
used to be echoed in the error about it.
"""

from __future__ import annotations

import json
from pathlib import Path

import modelserver
import pytest
from evalkit import make_eval, run_cli
from modelserver import ModelServer

from glasskit_eval.support.secretvalues import REDACTED, SecretValues, secrets_scope

model_server = modelserver.model_server

TOKEN = "sk-env-file-secret-77"
PASSWORD = "url-password-55"
KEY = "query-key-66"
CASE = """
video: cfr_h264.mp4
targets:
  size:
    samples:
    - at: [0.0, 0.5]
      field: width
      expect: 128
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GK_SECRET_AUTH", "GK_ADAPTER_TOKEN", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")


def outputs(tmp_path: Path, eval_dir: Path, *argv: str | Path) -> tuple[int, str, str]:
    """A run writing every output there is, under ``tmp_path / 'out'``."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    summary = out_dir / "summary.md"
    summary.write_text("")
    env_file = tmp_path / "secrets.env"
    env_file.write_text(f"GK_SECRET_AUTH=Bearer {TOKEN}\nGK_ADAPTER_TOKEN={TOKEN}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        return run_cli("run", "--env-file", env_file, "--eval-dir", eval_dir, "--keep-going",
                       "--output-json", out_dir / "report.json", "--junit-xml", out_dir / "junit.xml",
                       "--html", out_dir / "report.html", "--annotations", "github", "--save-failures",
                       "--artifacts-dir", out_dir / "artifacts", "--checkpoint-dir", out_dir / "checkpoints",
                       *argv)


def assert_nowhere(tmp_path: Path, texts: tuple[str, ...], *secrets: str) -> list[Path]:
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert written
    for secret in secrets:
        for text in texts:
            assert secret not in text
        for path in written:
            assert secret.encode() not in path.read_bytes(), (secret, path)
    return written


def http_eval(tmp_path: Path, url: str) -> Path:
    eval_dir = make_eval(tmp_path, {"case": CASE})
    adapter = {"type": "http", "url": url, "headers_env": {"Authorization": "GK_SECRET_AUTH"},
               "response_field": "observation"}
    (eval_dir / "adapter.yaml").write_text(json.dumps({"adapter": adapter}))
    return eval_dir


@pytest.mark.parametrize("status", [401, 200])
def test_a_server_echoing_the_header_and_url_leaks_nothing(tmp_path: Path, model_server: ModelServer,
                                                           status: int) -> None:
    host = model_server.url.removeprefix("http://")
    eval_dir = http_eval(tmp_path, f"http://user:{PASSWORD}@{host}/echo/{status}?api_key={KEY}")
    code, out, err = outputs(tmp_path, eval_dir)
    assert code == (1 if status == 401 else 0), err  # errors fail a run; failures need a threshold
    # The server did get the secrets and put them in what it answered.
    assert model_server.requests("/echo")[0].headers["Authorization"] == f"Bearer {TOKEN}"
    written = assert_nowhere(tmp_path, (out, err), TOKEN, PASSWORD, KEY)
    assert {p.name for p in written} >= {"report.json", "junit.xml", "report.html", "summary.md"}
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    result = report["trials"][0]["results"][0]
    shown = result["reason"] if status == 401 else result["observed"]["width"]
    assert f"bad token '{REDACTED}' for /echo/{status}?{REDACTED}" in shown


def test_an_adapter_raising_with_a_secret_leaks_nothing(tmp_path: Path) -> None:
    adapter = """
        import os

        def create_evaluator(config):
            return Evaluator()

        class Evaluator:
            def evaluate(self, sample, target):
                if sample.timestamp_s == 0:
                    return {"width": os.environ["GK_ADAPTER_TOKEN"]}
                raise RuntimeError("auth failed with " + os.environ["GK_ADAPTER_TOKEN"])
    """
    eval_dir = make_eval(tmp_path, {"case": CASE}, adapter=adapter)
    code, out, err = outputs(tmp_path, eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:create_evaluator")
    assert code == 1, err
    # An adapter error remains, so the checkpoint is kept: its records are checked too.
    written = assert_nowhere(tmp_path, (out, err), TOKEN)
    assert "records.jsonl" in {p.name for p in written}
    assert f"auth failed with {REDACTED}" in out


@pytest.mark.parametrize("value", [f"Bearer {TOKEN}\n", f"Bearer {TOKEN}\r\nX-Evil: 1", f"Bearer {TOKEN}\u2603"])
def test_bad_header_values_are_refused_before_the_first_call(tmp_path: Path, model_server: ModelServer,
                                                             monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GK_SECRET_AUTH", value)
    eval_dir = http_eval(tmp_path, model_server.url + "/ok")
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "environment variable GK_SECRET_AUTH" in err and TOKEN not in err + out
    assert model_server.requests("/") == []


def test_dotenv_errors_name_the_file_and_line_only(tmp_path: Path) -> None:
    env_file = tmp_path / "bad.env"
    for text, message in ((f"OK=1\nKEY: {TOKEN}==\n", "line 2: the text before `=` is not a variable name"),
                          (f"A=1\nB={TOKEN}\0tail\n", "line 2: contains a NUL byte"),
                          (f"A='{TOKEN}\0'\n", "line 1: contains a NUL byte")):
        env_file.write_text(text)
        code, out, err = run_cli("validate", "--env-file", env_file, "--eval-dir", tmp_path / "nowhere")
        assert code == 2 and f"{env_file}: {message}" in err, err
        assert TOKEN not in out + err and "Traceback" not in err


def test_only_newlines_end_dotenv_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.support.dotenv import parse_dotenv

    # \v, \f, \x1c and U+2028 are text inside a value, not line ends (str.splitlines() splits on them).
    text = "A=one\vtwo\fthree\x1cfour\u2028five\rB=2\r\nC=3\n"
    assert parse_dotenv(text, "x.env", {}) == {"A": "one\vtwo\fthree\x1cfour\u2028five", "B": "2", "C": "3"}


def test_redaction_finds_every_form_and_is_scoped() -> None:
    values = SecretValues()
    values.add("Bearer s3cr3t/va+lue")
    text = "a 's3cr3t/va+lue' b s3cr3t%2Fva%2Blue c \"Bearer s3cr3t/va+lue\" d short"
    assert values.redact(text) == f"a '{REDACTED}' b {REDACTED} c \"{REDACTED}\" d short"
    values.add("tiny")  # too short to be told apart from ordinary words
    assert values.redact("tiny") == "tiny"
    from glasskit_eval.support.secretvalues import SECRETS, add_secret

    with secrets_scope():
        add_secret("scoped-secret-1")
        assert SECRETS.redact("x scoped-secret-1") == f"x {REDACTED}"
    assert SECRETS.redact("x scoped-secret-1") == "x scoped-secret-1"


def test_store_credentials_are_known_secrets(tmp_path: Path) -> None:
    from glasskit_eval.store.config import VideoStoreConfig
    from glasskit_eval.store.credentials import resolve_credentials
    from glasskit_eval.support.secretvalues import SECRETS

    store = VideoStoreConfig(name="aws", bucket="b")
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG",
           "AWS_SESSION_TOKEN": "session-token-99"}
    with secrets_scope():
        assert resolve_credentials(store, env, home=tmp_path) is not None
        said = SECRETS.redact("signature with wJalrXUtnFEMI/K7MDENG and session-token-99")
        assert said == f"signature with {REDACTED} and {REDACTED}"


def test_a_command_adapters_stderr_is_mirrored_redacted(tmp_path: Path) -> None:
    script = tmp_path / "adapter.py"
    script.write_text("import json, os, sys\n"
                      "for line in sys.stdin:\n"
                      "    msg = json.loads(line)\n"
                      "    print('token=' + os.environ['GK_ADAPTER_TOKEN'], file=sys.stderr, flush=True)\n"
                      "    method = msg.get('method')\n"
                      "    result = {'width': 128} if method == 'evaluate' else None\n"
                      "    if method == 'initialize':\n"
                      "        result = {'protocolVersion': 1, 'capabilities': {'evaluate': True}}\n"
                      "    print(json.dumps({'id': msg.get('id'), 'result': result}), flush=True)\n")
    eval_dir = make_eval(tmp_path, {"case": CASE})
    code, out, err = outputs(tmp_path, eval_dir, "--adapter-command", f"python3 {script}")
    assert code == 0, err
    assert "token=" + REDACTED in err
    assert_nowhere(tmp_path, (out, err), TOKEN)
