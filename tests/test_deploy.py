"""Deployment defaults: the web server listens on loopback unless told otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def gunicorn_bind(**env: str) -> str:
    """The bind address gunicorn itself reads from deploy/gunicorn.conf.py (``--print-config``)."""
    clean = {k: v for k, v in os.environ.items() if k not in {"BIND", "PORT"}}
    out = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "--print-config",
                          "leaderboard.wsgi"], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    [line] = [line for line in out.splitlines() if line.split("=")[0].strip() == "bind"]
    return line.split("=", 1)[1].strip()


@pytest.mark.parametrize("env, bind", [({}, "['127.0.0.1:8000']"), ({"PORT": "9001"}, "['127.0.0.1:9001']"),
                                       ({"BIND": "0.0.0.0:8080"}, "['0.0.0.0:8080']")])
def test_gunicorn_binds_loopback_by_default(env, bind):
    assert gunicorn_bind(**env) == bind


def compose_client() -> list[str] | None:
    import shutil

    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def test_the_compose_file_validates_with_every_process_and_a_gpu_reservation():
    client = compose_client()
    if client is None:
        pytest.skip("no compose client on PATH (Debian: apt-get install docker-compose; deploy/test.sh does it as root)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_", "SECRET_KEY", "MINIO_"))}

    def compose(*args: str) -> str:
        result = subprocess.run([*client, "-f", "deploy/compose.yaml", "config", *args], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert set(compose("--services").split()) == {"web", "site-worker", "beat", "worker-cpu", "worker-gpu",
                                                   "redis", "postgres", "minio"}
    resolved = compose()  # the file as the client understood it, variables filled in
    by_service: dict[str, str] = {}
    current = None
    for line in resolved.splitlines():  # a service's block: from "  name:" to the next such line
        if line and not line.startswith(" "):
            current = None
        elif line.startswith("  ") and not line.startswith("   ") and line.endswith(":"):
            current = line.strip()[:-1]
            by_service[current] = ""
        elif current:
            by_service[current] += line + "\n"
    assert all("healthcheck:" in by_service[s] for s in ("web", "site-worker", "beat", "worker-cpu",
                                                         "worker-gpu", "redis", "postgres", "minio"))
    assert "--appendonly yes" in by_service["redis"]
    gpu = by_service["worker-gpu"]
    assert "driver: nvidia" in gpu and "- gpu" in gpu and "EVAL_DEVICE: gpu" in gpu
    # Scoring workers get the broker and the buckets, never the database.
    for name in ("worker-cpu", "worker-gpu"):
        assert "DATABASE_URL" not in by_service[name] and "EVAL_LABELS_S3_BUCKET: labels" in by_service[name]


def test_the_image_installs_through_the_checkouts_requirements_files():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'source deploy/venv.sh ${REQUIREMENTS}' in dockerfile and "ARG REQUIREMENTS=requirements.txt" in dockerfile
    assert 'source deploy/venv.sh requirements-gpu.txt' in dockerfile
    assert "-r requirements.txt" in (ROOT / "requirements-gpu.txt").read_text()
