# Sourced by run.sh and test.sh: create .venv and install requirement files,
# skipping pip when the files are unchanged since the last install.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
ensure_requirements() {
  local stamp=".venv/.installed-$(basename "$1")"
  local want; want=$(cat requirements*.txt | sha256sum)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -q -r "$1"
    echo "$want" > "$stamp"
  fi
}
ensure_requirements "$1"
# The checkout itself, editable and without dependencies: puts the `lb` client on PATH.
if [ ! -x .venv/bin/lb ]; then
  .venv/bin/python -m pip install -q --no-deps -e .
fi
# Bytecode for the project's own modules (pip compiles what it installs, not an editable checkout):
# a scoring process imports ~80 of them, 0.1 s of compiling each start where bytecode is not
# written (PYTHONDONTWRITEBYTECODE). Up-to-date files are skipped.
.venv/bin/python -m compileall -q -j 0 evaluation_workers leaderboard >/dev/null
