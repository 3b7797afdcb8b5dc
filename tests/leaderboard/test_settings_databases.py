"""Database settings that two test runs on one server depend on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = "from leaderboard import settings; print(settings.DATABASES['default']['TEST']['NAME'])"


def _test_name(url: str) -> str:
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "x"}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, env=env,
                          check=True).stdout.strip()


def test_each_run_on_a_postgres_server_gets_its_own_test_database() -> None:
    """Two suites against one PostgreSQL (two checkouts, two CI jobs) must not share "test_<name>":
    one would drop or fill the other's tables mid-run."""
    first, second = (_test_name("postgres://postgres@127.0.0.1:5432/test") for _ in range(2))
    assert first.startswith("test_test_") and second.startswith("test_test_")
    assert first != second
