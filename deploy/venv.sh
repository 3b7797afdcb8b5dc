# Sourced by run.sh and test.sh: create .venv and install requirement files,
# skipping pip when the files are unchanged since the last install.
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip "setuptools>=64"  # setuptools: the editable installs below build without isolation
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
# The checkout itself, editable and without dependencies: puts the `lb` client on PATH and declares
# the built-in tracks (entry points); then each track package under plugins/. Again when a
# pyproject.toml changes (a new entry point is only seen once installed).
projects=". $(ls -d plugins/*/ 2>/dev/null | tr '\n' ' ')"
want=$(cat pyproject.toml plugins/*/pyproject.toml 2>/dev/null | sha256sum)
if [ ! -x .venv/bin/lb ] || [ "$(cat .venv/.installed-projects 2>/dev/null)" != "$want" ]; then
  for project in $projects; do
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e "$project"
  done
  echo "$want" > .venv/.installed-projects
fi
# Bytecode for the project's own modules (pip compiles what it installs, not an editable checkout):
# a scoring process imports ~80 of them, 0.1 s of compiling each start where bytecode is not
# written (PYTHONDONTWRITEBYTECODE). Up-to-date files are skipped.
.venv/bin/python -m compileall -q -j 0 evaluation_workers leaderboard >/dev/null
