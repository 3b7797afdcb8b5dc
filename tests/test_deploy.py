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
