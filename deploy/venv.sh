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
# This checkout's distributions, editable, held to requirements.txt's pins (-c; tests/test_distributions.py
# checks that each dependency they declare is pinned): the scoring core (with the built-in tracks, as
# entry points), the worker, the `lb` client, the site, then each track package under plugins/.
# Again when a pyproject.toml changes (a new entry point is only seen once installed); built with
# hatchling in pip's isolated build environment.
projects="distributions/core distributions/worker distributions/cli . $(ls -d plugins/*/ 2>/dev/null | tr '\n' ' ')"
want=$(cat distributions/checkout.py distributions/*/pyproject.toml pyproject.toml plugins/*/pyproject.toml 2>/dev/null | sha256sum)
if [ ! -x .venv/bin/lb ] || [ "$(cat .venv/.installed-projects 2>/dev/null)" != "$want" ]; then
  editable=()
  for project in $projects; do editable+=(-e "$project"); done
  .venv/bin/python -m pip install -q -c requirements.txt "${editable[@]}"
  echo "$want" > .venv/.installed-projects
fi
# Bytecode for the project's own modules (pip compiles what it installs, not an editable checkout):
# a scoring process imports ~80 of them, 0.1 s of compiling each start where bytecode is not
# written (PYTHONDONTWRITEBYTECODE). Up-to-date files are skipped.
.venv/bin/python -m compileall -q -j 0 evaluation_workers leaderboard >/dev/null
