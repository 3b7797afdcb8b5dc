"""The broker over TLS as deploy/README.md writes it: one ``rediss://`` URL with a password and the
certificate check, read alike by Celery (kombu) and by redis-py (the attempt keys, the site's broker
helpers), against a real Redis serving TLS only."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery

from tests.conftest import free_port

pytestmark = pytest.mark.live


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(folder: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=folder)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A Redis with a password that speaks TLS only, its certificate signed by a CA of this test."""
    if not (shutil.which("openssl") and shutil.which("redis-server")):
        pytest.skip("needs openssl and a redis-server built with TLS")
    make_ca(tmp_path, "ca")
    make_ca(tmp_path, "other-ca")
    (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr", cwd=tmp_path)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-extfile", "san.ext", "-out", "server.pem", cwd=tmp_path)
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                             "--tls-cert-file", "server.pem", "--tls-key-file", "server.key",
                             "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no", "--requirepass", "s3cret-pw",
                             "--save", "", "--appendonly", "no"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("this redis-server does not serve TLS")
                time.sleep(0.1)
        url = f"rediss://:s3cret-pw@127.0.0.1:{port}/{{db}}?ssl_cert_reqs=required&ssl_ca_certs={tmp_path}/{{ca}}"
        # Another database number for the wrong CA: kombu shares a pool between two URLs that differ
        # in their TLS options only (the process's first connection would be reused, unchecked).
        yield {"url": url.format(db=0, ca="ca.pem"), "wrong_ca": url.format(db=1, ca="other-ca.pem")}
    finally:
        proc.terminate()
        proc.wait(10)


def send(url: str, queue: str) -> None:
    app = Celery(f"tls-{uuid.uuid4().hex[:6]}", broker=url, set_as_current=False)
    app.conf.broker_connection_timeout = 3
    try:
        app.send_task("submissions.record_progress", kwargs={"submission_id": 1}, queue=queue, retry=False)
    finally:
        app.close()


def test_the_documented_rediss_url_carries_messages_and_checks_the_certificate(tls_redis):
    from evaluation_workers.worker import attempts
    from leaderboard.submissions import broker

    queue = f"tls-{uuid.uuid4().hex[:8]}"
    send(tls_redis["url"], queue)
    client = redis.Redis.from_url(tls_redis["url"])
    assert client.llen(queue) == 1
    assert attempts._client(tls_redis["url"]).ping() and broker._client(tls_redis["url"]).ping()

    with pytest.raises(redis.exceptions.ConnectionError, match="certificate verify failed"):
        redis.Redis.from_url(tls_redis["wrong_ca"]).ping()
    with pytest.raises(Exception, match="certificate verify failed"):  # kombu wraps it in its own error
        send(tls_redis["wrong_ca"], queue)
    assert client.llen(queue) == 1
