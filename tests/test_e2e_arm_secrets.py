"""Secrets through arms: an arm's adapter URL and its adapter config never reach an output.

An arm may name an HTTP adapter whose URL carries a key (in its query or its userinfo) and an
inline adapter config holding literal values; the run's console, JSON report, JUnit file, HTML
page, job summary and checkpoint records must not hold either (a hash identifies the config).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli
from modelserver import json_endpoint

pytestmark = pytest.mark.e2e

KEY = "QUERYKEY0123456789"
PASSWORD = "USERPASS0123456789"
LITERAL = "CONFIGLITERAL0123456789"

CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 0.5]
      every_s: 0.25
      field: ok
      expect: true
"""

ADAPTER = """
def create_evaluator(config):
    def evaluate(sample, target):
        return {"ok": True}
    return evaluate
"""


@pytest.fixture
def endpoint() -> Iterator[str]:
    with json_endpoint(lambda _body: {"ok": True}) as port:
        yield f"127.0.0.1:{port}"


def test_an_arms_url_key_and_config_values_reach_no_output(tmp_path: Path, endpoint: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    config = (f"arms:\n"
              f"  web: {{adapter_http: 'http://probe:{PASSWORD}@{endpoint}/judge?api_key={KEY}'}}\n"
              f"  tuned: {{adapter_config: {{token: {LITERAL}, depth: 3}}}}\n")
    eval_dir = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=config)
    outputs = tmp_path / "out"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "web", "--arm", "tuned",
                             "--output-json", outputs / "report.json", "--junit-xml", outputs / "junit.xml",
                             "--html", outputs / "report.html", "--checkpoint-dir", outputs / "checkpoints",
                             "--annotations", "github", "--verbose")
    assert code == 0, err
    arms = read_json(outputs / "report.json")["arms"]
    web, tuned = arms["web"]["spec"], arms["tuned"]["spec"]
    assert web["adapter_http"] == f"http://***@{endpoint}/judge?***"
    # The config is identified, not copied: a stable digest of its canonical JSON.
    assert tuned["adapter_config"].startswith("sha256:") and len(tuned["adapter_config"]) == len("sha256:") + 16
    texts = {"stdout": out, "stderr": err, "summary": summary.read_text()}
    texts |= {str(p): p.read_bytes().decode("utf-8", "replace") for p in outputs.rglob("*") if p.is_file()
              }
    for where, text in texts.items():
        for secret in (KEY, PASSWORD, LITERAL):
            assert secret not in text, (secret, where)


def test_a_config_digest_tells_arms_apart_and_is_stable() -> None:
    from glasskit_eval.arms.spec import ArmSpec

    one = ArmSpec("a", adapter_config={"token": LITERAL, "depth": 3}).to_json()
    same = ArmSpec("b", adapter_config={"depth": 3, "token": LITERAL}).to_json()
    other = ArmSpec("c", adapter_config={"token": LITERAL, "depth": 4}).to_json()
    assert one == same != other
    assert LITERAL not in json.dumps(one)
