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
