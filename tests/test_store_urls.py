"""No store URL in a message carries a secret (glasskit_eval.store.urls and config validation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval, run_cli

from glasskit_eval.store.urls import redact_url, secret_parts

CASE = "video:\n  store: s\n  key: v.mp4\n  sha256: " + "a" * 64 + "\ntargets:\n  t:\n    samples:\n    - at: 0.5\n      expect: true\n"


def test_redaction() -> None:
    assert redact_url("https://user:pw@host:9000/b/k?X-Amz-Signature=abc#x") == "https://***@host:9000/b/k?***#***"
    assert redact_url("https://host/b") == "https://host/b"
    assert secret_parts("https://u@h/?q=1") == ["a user name or password", "a query string"]
    assert secret_parts("https://h/p") == []


@pytest.mark.parametrize("key", ["endpoint_url", "public_base_url"])
@pytest.mark.parametrize("url", ["https://user:hunter2@s3.example/", "https://s3.example/?token=hunter2"])
def test_credentials_in_a_store_url_are_refused_without_being_echoed(tmp_path: Path, key: str, url: str) -> None:
    config = f"video_stores:\n  s:\n    bucket: b\n    {key}: {url}\n"
    eval_dir = make_eval(tmp_path, {"c": CASE}, config=config)
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1
    assert f"video_stores.s.{key}: {key} must not contain" in out and "config.yaml:4" in out
    code2, out2, err2 = run_cli("video-store", "pull", "--eval-dir", eval_dir)
    assert code2 == 2
    for text in (out, err, out2, err2):
        assert "hunter2" not in text
