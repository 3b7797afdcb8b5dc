"""A PostgreSQL server of a test's own, on its own port and folder, to stop with SIGSTOP while the site uses it.

``initdb`` and ``pg_ctl`` of the newest ``/usr/lib/postgresql/*/bin`` run as the
``postgres`` user (``runuser``; as the current user when not root), in a folder
under the system's temporary directory (pytest's is private to root), with
``fsync`` off: the server is thrown away. ``hung()`` stops the postmaster and
every backend (SIGSTOP: connections stay open and the kernel acknowledges, but
nothing answers) and continues them when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import free_port


def binaries() -> Path | None:
    """The newest installed server's bin folder, or None."""
    found = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").is_file() and (p / "pg_ctl").is_file()]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, default=None)


class PrivatePostgres:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="lb-test-postgres-"))
        self.data = self.folder / "data"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.folder, "postgres")

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_postgres else []
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--no-sync")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.folder / "server.log"),
                  "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                        "-c synchronous_commit=off -c full_page_writes=off", "start")

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def connections(self, url: str) -> int:
        """How many connections are open to the database of ``url`` (a figure for the test to print)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                               [url.rsplit("/", 1)[1]]).fetchone()
        return int(row[0]) if row else 0

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, ...)."""
        main = int((self.data / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{main}/task/{main}/children").read_text().split()
        return [main, *map(int, children)]

    @contextlib.contextmanager
    def hung(self) -> Iterator[None]:
        """The whole server stopped (SIGSTOP) for the block, continued after it."""
        pids = self.pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            for pid in self.pids():  # a test that failed inside hung() left nothing stopped, but be sure
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        with contextlib.suppress(subprocess.SubprocessError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def private_postgres() -> Iterator[PrivatePostgres]:
    """A fixture's body (``yield from``): a started server, stopped and removed afterwards; skips
    the test where no PostgreSQL server is installed."""
    import pytest

    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server installed (/usr/lib/postgresql/*/bin)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running PostgreSQL as root needs runuser")
    server = PrivatePostgres(bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
