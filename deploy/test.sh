#!/usr/bin/env bash
# Set up (venv + requirements-dev.txt) and run the whole test suite.
# Uses DATABASE_URL and REDIS_URL when set (CI: the machine's PostgreSQL and
# Redis); otherwise SQLite and a Redis that the tests start themselves.
# Extra arguments go to pytest, e.g. `bash deploy/test.sh -k sqa3d -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/venv.sh requirements-dev.txt
if [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null; then
  ensure_requirements requirements-local.txt
fi
# Browser tests drive the system's Chromium (never a downloaded browser).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing chromium for the browser tests..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
      || echo "Could not install chromium: browser tests will be skipped." >&2
  else
    echo "No chromium on PATH: browser tests will be skipped (install Debian's chromium package)." >&2
  fi
fi
# The compose file is validated by a compose client (Debian's docker-compose needs no daemon).
if ! command -v docker-compose >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing docker-compose to validate deploy/compose.yaml..." >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose; } >/dev/null 2>&1 \
    || echo "Could not install docker-compose: the compose test will be skipped." >&2
fi
# Lint and type checks first (seconds), then the tests.
.venv/bin/ruff check --quiet .
.venv/bin/mypy --no-error-summary
exec .venv/bin/python -m pytest "$@"
