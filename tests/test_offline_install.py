"""README.md, "Score offline", run as written in a fresh virtual environment: its install commands give
a scorer of ScanRefer equal to the service's, with none of Django, Celery or the site importable, ``pip
check`` clean, and the track contract runnable there. (pip fetches from the machine's cache and
indexes; a build of each distribution runs in its own isolated environment.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.base import no_progress

ROOT = Path(__file__).resolve().parents[1]


def offline_block() -> list[str]:
    """The first code block of the README's "Score offline" section, line by line."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Score offline\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None, "the section starts with a bash block"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def run(venv: Path, line: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A README line in the venv: its `python` is the venv's; nothing of this checkout is on the path."""
    words = shlex.split(line)
    assert words[0] == "python", line
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run([str(venv / "bin" / "python"), *words[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the README's install commands run in it, from the repository's root."""
    lines = offline_block()
    assert lines[0].startswith("python3 -m venv ") and "bin/activate" in lines[0]
    installs = [line for line in lines if line.startswith("python -m pip install ")]
    assert installs and all("--no-deps" not in line for line in installs)
    assert all(w.startswith("./") for line in installs for w in shlex.split(line)[4:] if not w.startswith("-")
               and w != "requirements.txt"), "paths relative to the repository's root"
    folder = tmp_path_factory.mktemp("offline") / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=120)
    for line in installs:
        out = run(folder, line, ROOT)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    seconds = time.monotonic() - started
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"\nfresh venv with the README's install: {seconds:.1f} s, {size / 2**20:.0f} MiB")  # figures, not asserted
    return folder


def test_the_readmes_commands_score_scanrefer_as_the_service_does(venv: Path, tmp_path: Path) -> None:
    track = get_track("scanrefer")
    labels, predictions = track.write_demo(tmp_path / "demo", "val")
    service = track.score(labels, predictions, no_progress)
    score = next(line for line in offline_block() if line.startswith("python -m evaluation_workers score "))
    words = shlex.split(score)
    words[words.index("--labels") + 1], words[words.index("--predictions") + 1] = str(labels), str(predictions)
    out = run(venv, shlex.join(words), tmp_path)  # outside the checkout: the installed core, not this one
    assert out.returncode == 0, out.stderr
    offline = json.loads(out.stdout)
    assert offline == json.loads(json.dumps(service)) and offline["metrics"]["Acc@0.25"] is not None


def test_the_venv_has_the_core_and_the_plugin_and_nothing_of_the_service(venv: Path, tmp_path: Path) -> None:
    probe = ("import importlib.util, evaluation_workers, scanrefer_track\n"
             "print([m for m in ('django', 'celery', 'kombu', 'redis', 'boto3', 'leaderboard', 'leaderboard_cli',"
             " 'evaluation_workers.worker') if importlib.util.find_spec(m)])\n"
             "print(evaluation_workers.__file__)\n")
    out = run(venv, f"python -c {shlex.quote(probe)}", tmp_path)
    assert out.returncode == 0, out.stderr
    found, where = out.stdout.splitlines()
    assert found == "[]" and str(venv) in where
    check = run(venv, "python -m pip check", tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    contract = run(venv, "python -m evaluation_workers check-track scanrefer", tmp_path)
    assert contract.returncode == 0 and "0 failed" in contract.stdout, contract.stdout + contract.stderr
    worker = run(venv, "python -m evaluation_workers worker", tmp_path)
    assert worker.returncode == 2 and "scene-leaderboards-worker" in worker.stderr
    left = sorted(str(p.relative_to(ROOT)) for d in ("distributions", "plugins") for p in (ROOT / d).rglob("*")
                  if p.name in ("build", "dist") or p.name.endswith(".egg-info"))
    assert left == [], "the install left build output in the checkout"
