"""End to end: `video-store` commands and eval commands against a real S3 server (SeaweedFS)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import s3server
from evalkit import ROOT, TESTS, VIDEOS, read_json, run_cli
from s3server import S3Server

from glasskit_eval.commands import video_store as commands
from glasskit_eval.store.transport import HttpRequest, HttpResponse, UrllibTransport

pytestmark = pytest.mark.e2e

s3_server = s3server.s3_server  # the shared session fixture

VIDEO = VIDEOS / "cfr_h264.mp4"
ID_VAR, SECRET_VAR = "GK_TEST_KEY_ID", "GK_TEST_SECRET"

ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

class Reader:
    def evaluate(self, sample, target):
        return {{"index": read_frame_index(sample.image), "video": sample.video_path}}
"""


@pytest.fixture
def env(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Credentials in the store's named variables, no AWS sources, a private cache dir."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv(ID_VAR, s3_server.access_key)
    monkeypatch.setenv(SECRET_VAR, s3_server.secret_key)
    cache = tmp_path / "cache"
    monkeypatch.setenv("GLASSKIT_EVAL_CACHE_DIR", str(cache))
    return cache


def make_eval(tmp_path: Path, server: S3Server, cases: dict[str, str] | None = None) -> Path:
    eval_dir = tmp_path / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    (eval_dir / "config.yaml").write_text(textwrap.dedent(f"""\
        video_stores:
          team:
            bucket: {server.private_bucket}
            endpoint_url: {server.endpoint}
            access_key_id_env: {ID_VAR}
            secret_access_key_env: {SECRET_VAR}
          pub:
            type: s3
            bucket: {server.public_bucket}
            region: us-east-1
            endpoint_url: {server.endpoint}
            public_base_url: {server.public_base_url}
            access_key_id_env: {ID_VAR}
            secret_access_key_env: {SECRET_VAR}
        """))
    (eval_dir / "adapter.py").write_text(ADAPTER)
    for name, text in (cases or {}).items():
        (eval_dir / "cases" / f"{name}.yaml").write_text(text)
    return eval_dir


def case_text(block: str, expect: str = "0") -> str:
    return block + f"targets:\n  frame:\n    samples:\n    - at: 0\n      field: index\n      expect: {expect}\n"


def unique_video(tmp_path: Path) -> Path:
    """The fixture video plus trailing bytes: still decodable, but a content key no other test uses."""
    path = tmp_path / "rec" / "task-01.mp4"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(VIDEO.read_bytes() + uuid.uuid4().bytes)
    return path


def upload(eval_dir: Path, video: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli("video-store", "upload", video, "--eval-dir", eval_dir, *extra)


def test_upload_prints_the_block_and_is_idempotent(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    block = f"video:\n  store: team\n  key: {sha}.mp4\n  sha256: {sha}\n"
    assert upload(eval_dir, video, "--store", "team") == (0, block, "")
    code, out, err = upload(eval_dir, video, "--store", "team")
    assert (code, err) == (0, "")
    assert out == "Object already exists with matching size and SHA-256.\n" + block
    head = s3_server.botocore_client().head_object(Bucket=s3_server.private_bucket, Key=f"{sha}.mp4")
    assert head["ContentLength"] == video.stat().st_size and head["Metadata"]["sha256"] == sha


def test_upload_never_overwrites_another_object(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    key = f"e2e/{uuid.uuid4()}/task one.mp4"
    first, second = unique_video(tmp_path), tmp_path / "other.mp4"
    second.write_bytes(first.read_bytes() + b"different")
    code, out, _ = upload(eval_dir, first, "--store", "team", "--key", key)
    assert code == 0 and f'  key: "{key}"\n' in out
    code, out, err = upload(eval_dir, second, "--store", "team", "--key", key)
    assert code == 2 and out == ""
    assert "refusing to overwrite the existing object" in err and key in err
    body = s3_server.botocore_client().get_object(Bucket=s3_server.private_bucket, Key=key)["Body"].read()
    assert body == first.read_bytes()


def test_upload_errors_are_clear_and_keep_secrets(env: Path, s3_server: S3Server, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, _, err = upload(eval_dir, video, "--store", "nosuch")
    assert code == 2 and "unknown video store 'nosuch' (pub, team)" in err
    code, _, err = upload(eval_dir, tmp_path / "notes.txt", "--store", "team")
    assert code == 2 and "does not exist" in err
    code, _, err = upload(eval_dir, video, "--store", "team", "--key", "clip.txt")
    assert code == 2 and "must end with a video suffix" in err
    monkeypatch.setenv(SECRET_VAR, "wrong-" + s3_server.secret_key)
    code, out, err = upload(eval_dir, video, "--store", "team")
    assert code == 2 and "rejected the request signature" in err and "clock" in err
    assert s3_server.secret_key not in out + err
    monkeypatch.delenv(ID_VAR)
    monkeypatch.delenv(SECRET_VAR)
    code, _, err = upload(eval_dir, video, "--store", "pub")
    assert code == 2 and f"needs credentials and none were found: set {ID_VAR} and {SECRET_VAR}" in err


def test_multipart_upload_through_the_core(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    big = tmp_path / "big.mkv"
    big.write_bytes(os.urandom(11 * 1024 * 1024))
    sha = hashlib.sha256(big.read_bytes()).hexdigest()
    out = io.StringIO()
    result = commands.upload(big, "team", None, eval_dir, out, multipart_threshold=6 * 1024 * 1024,
                             part_size=5 * 1024 * 1024)
    assert not result.existed and out.getvalue() == commands.video_block("team", f"{sha}.mkv", sha)
    again = commands.upload(big, "team", None, eval_dir, io.StringIO(), multipart_threshold=6 * 1024 * 1024)
    assert again.existed


def test_run_downloads_automatically_and_the_adapter_gets_the_cached_file(
        env: Path, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    assert code == 0
    (eval_dir / "cases" / "task-01.yaml").write_text(case_text(block))
    assert not env.exists()
    assert run_cli("list-samples", "--eval-dir", eval_dir)[0] == 0
    assert not env.exists()  # list-samples validates without downloading

    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 0, out + err
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    cached = env / "sha256" / sha[:2] / f"{sha}.mp4"
    assert cached.read_bytes() == video.read_bytes()
    assert read_json(report)["trials"][0]["results"][0]["observed"] == {"index": 0, "video": str(cached)}

    # Later commands reuse the cache without credentials.
    monkeypatch.delenv(SECRET_VAR)
    code, out, _ = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "task-01", "--at", "0.5")
    assert code == 0 and out.strip().endswith("at-0.5s.png")
    assert run_cli("validate", "--eval-dir", eval_dir)[0] == 0


def test_public_downloads_need_no_credentials(env: Path, s3_server: S3Server, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "pub", "--key", f"pub/{uuid.uuid4()} ü.mp4")
    assert code == 0
    (eval_dir / "cases" / "task-01.yaml").write_text(case_text(block))
    monkeypatch.delenv(ID_VAR)
    monkeypatch.delenv(SECRET_VAR)
    code, out, err = run_cli("video-store", "pull", "--eval-dir", eval_dir)
    assert code == 0, err
    assert Path(out.strip()).read_bytes() == video.read_bytes()
    assert "Downloading pub:pub/" in err
    code, out, err = run_cli("video-store", "pull", "--eval-dir", eval_dir, "--case", "task-01")
    assert (code, err) == (0, "")


def test_sha256_mismatch_is_an_error_naming_store_and_key(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    wrong = hashlib.sha256(b"something else").hexdigest()
    (eval_dir / "cases" / "bad.yaml").write_text(case_text(block.replace(f"sha256: {sha}", f"sha256: {wrong}")))
    code, out, err = run_cli("video-store", "pull", "--eval-dir", eval_dir)
    assert code == 2
    assert f"team:{sha}.mp4 has SHA-256 {sha}, but the case file declares {wrong}" in err
    assert not [p for p in env.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "bad.yaml" in err and "declares" in err


def test_missing_object_and_no_cloud_videos(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    missing = "ab" * 32
    eval_dir = make_eval(tmp_path, s3_server, {"gone": case_text(
        f"video:\n  store: team\n  key: gone/{uuid.uuid4()}.mp4\n  sha256: {missing}\n")})
    code, _, err = run_cli("video-store", "pull", "--eval-dir", eval_dir)
    assert code == 2 and "was not found (HTTP 404 NoSuchKey)" in err
    (eval_dir / "cases" / "gone.yaml").unlink()
    shutil.copy(VIDEO, eval_dir / "cases" / "local.mp4")
    (eval_dir / "cases" / "local.yaml").write_text(case_text("video: local.mp4\n"))
    assert run_cli("video-store", "pull", "--eval-dir", eval_dir) == \
        (0, "No selected case uses a cloud video; nothing to pull.\n", "")


class _Interrupting:
    """The real transport, but the first download dies after ``limit`` bytes (Ctrl+C)."""

    def __init__(self, limit: int) -> None:
        self.real = UrllibTransport()
        self.limit = limit
        self.requests: list[HttpRequest] = []

    def send(self, request: HttpRequest) -> HttpResponse:
        self.requests.append(request)
        response = self.real.send(request)
        if request.method == "GET" and self.limit:
            limit, self.limit = self.limit, 0
            inner = response.read_some

            def read_some(size: int = 1 << 20) -> bytes:
                if limit - read_some.sent <= 0:  # type: ignore[attr-defined]
                    raise KeyboardInterrupt
                data = inner(min(size or limit, limit - read_some.sent))  # type: ignore[attr-defined]
                read_some.sent += len(data)  # type: ignore[attr-defined]
                return data

            read_some.sent = 0  # type: ignore[attr-defined]
            response.read_some = read_some  # type: ignore[method-assign]
        return response


def test_interrupted_download_resumes_with_a_range_request(env: Path, s3_server: S3Server,
                                                           tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    (eval_dir / "cases" / "task-01.yaml").write_text(case_text(block))
    first = _Interrupting(limit=1000)
    with pytest.raises(KeyboardInterrupt):
        commands.pull(eval_dir, None, io.StringIO(), io.StringIO(), env=commands.StoreEnv(transport=first))
    partials = list(env.rglob("*.partial"))
    assert len(partials) == 1 and partials[0].stat().st_size == 1000

    second = _Interrupting(limit=0)
    paths = commands.pull(eval_dir, None, io.StringIO(), io.StringIO(), env=commands.StoreEnv(transport=second))
    assert paths[0].read_bytes() == video.read_bytes()
    assert [r.headers.get("range") for r in second.requests] == ["bytes=1000-"]
    assert not list(env.rglob("*.partial"))


def test_prune_cache_removes_stale_partials_then_everything(env: Path, s3_server: S3Server,
                                                            tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    (eval_dir / "cases" / "task-01.yaml").write_text(case_text(block))
    assert run_cli("video-store", "pull", "--eval-dir", eval_dir)[0] == 0
    stale = env / "sha256" / "ab" / f".{'ab' * 32}.mp4.partial"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"x" * 2048)
    assert run_cli("video-store", "prune-cache") == (0, f"Removed 1 cached files (2.0 KiB) from {env}\n", "")
    assert not stale.exists()
    code, out, _ = run_cli("video-store", "prune-cache", "--all")
    assert code == 0 and out.startswith("Removed 1 cached files (")
    assert not [p for p in env.rglob("*") if p.is_file()]
    assert run_cli("video-store", "pull", "--eval-dir", eval_dir)[0] == 0  # downloaded again when needed


def test_cached_bytes_replaced_with_same_size_and_mtime_are_downloaded_again(
        env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    (eval_dir / "cases" / "task-01.yaml").write_text(case_text(block))
    assert run_cli("video-store", "pull", "--eval-dir", eval_dir)[0] == 0
    cached = next(p for p in env.rglob("*.mp4") if not p.name.startswith("."))
    before = cached.stat()
    cached.write_bytes(b"\0" * before.st_size)
    os.utime(cached, ns=(before.st_atime_ns, before.st_mtime_ns))

    counting = _Interrupting(limit=0)
    paths = commands.pull(eval_dir, None, io.StringIO(), io.StringIO(), env=commands.StoreEnv(transport=counting))
    assert paths == [cached] and cached.read_bytes() == video.read_bytes()
    assert [r.method for r in counting.requests] == ["GET"]


def test_two_concurrent_pull_subprocesses(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, s3_server)
    big = tmp_path / "big.mp4"
    big.write_bytes(os.urandom(8 * 1024 * 1024))
    code, block, _ = upload(eval_dir, big, "--store", "team")
    (eval_dir / "cases" / "big.yaml").write_text(case_text(block))
    procs = [subprocess.Popen([sys.executable, "-m", "glasskit_eval", "video-store", "pull", "--eval-dir",
                               str(eval_dir)], cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]
    assert Path(outputs[0][0].strip()).read_bytes() == big.read_bytes()
    assert sum("Downloading" in err for _, err in outputs) == 1
    assert not list(env.rglob("*.partial"))


def test_video_block_quotes_only_what_yaml_would_misread() -> None:
    import yaml

    digits = "1" * 64
    block = commands.video_block("team", "a b/ü: x.mp4", digits)
    assert block == f'video:\n  store: team\n  key: "a b/ü: x.mp4"\n  sha256: "{digits}"\n'
    assert yaml.safe_load(block)["video"] == {"store": "team", "key": "a b/ü: x.mp4", "sha256": digits}
    assert commands.video_block("true", "k.mp4", "ab" * 32) == \
        f'video:\n  store: "true"\n  key: k.mp4\n  sha256: {"ab" * 32}\n'


def test_review_and_seed_download_cloud_videos(env: Path, s3_server: S3Server, tmp_path: Path) -> None:
    from glasskit_eval.cases.evaldir import load_cases, open_eval_dir
    from glasskit_eval.review import casedata

    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, block, _ = upload(eval_dir, video, "--store", "team")
    assert code == 0
    draft = block + "targets:\n  frame:\n    samples:\n    - at: [0, 1.0]\n      field: index\n"
    (eval_dir / "cases" / "task-01.yaml").write_text(draft)
    # seed fetches the video into the cache and writes the labels.
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:create_evaluator")
    assert code == 0, out + err
    assert "expect: 0" in (eval_dir / "cases" / "task-01.yaml").read_text()
    # The review page resolves the same cached file.
    ed = open_eval_dir(eval_dir)
    case = load_cases(ed, ed.case_paths, allow_empty=True)[0]
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    assert casedata.video_path(case) == env / "sha256" / sha[:2] / f"{sha}.mp4"


def test_store_credentials_arrive_through_an_env_file(env: Path, s3_server: S3Server, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ID_VAR)
    monkeypatch.delenv(SECRET_VAR)
    eval_dir = make_eval(tmp_path, s3_server)
    video = unique_video(tmp_path)
    code, _out, err = upload(eval_dir, video, "--store", "team")
    assert code == 2 and "needs credentials" in err
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"# team store\nexport {ID_VAR}={s3_server.access_key}\n{SECRET_VAR}='{s3_server.secret_key}'\n")
    code, out, err = run_cli("video-store", "upload", video, "--eval-dir", eval_dir, "--store", "team",
                             "--env-file", dotenv)
    assert code == 0, err
    assert s3_server.secret_key not in out + err
