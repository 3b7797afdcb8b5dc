#!/usr/bin/env bash
# Set up (venv + requirements) and run the whole service with embedded defaults:
# SQLite and local files under $DATA_DIR (default ./data), a local Redis unless
# REDIS_URL is set, the demo benchmarks. Honours PORT (default 8000).
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/venv.sh requirements.txt
if [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null; then
  ensure_requirements requirements-local.txt
fi
exec .venv/bin/python deploy/run_local.py
