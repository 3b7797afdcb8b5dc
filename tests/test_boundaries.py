"""The module boundaries of STYLE.md, checked in fresh interpreters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


# A finder that makes django and cupy unimportable, as on a CPU worker image
# without the site installed (kombu itself imports django.utils when it can).
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('django', 'cupy', 'leaderboard'):
            raise ImportError(f'blocked: {name}')
sys.meta_path.insert(0, Block())
"""


def test_the_worker_imports_and_scores_without_django_or_cupy(tmp_path):
    result = run(BLOCK + "import evaluation_workers.worker.tasks, evaluation_workers.cli\n"
                 "import evaluation_workers.tracks as t\n"
                 "[t.get_track(n) for n in t.names()]\n"
                 "from evaluation_workers._xp import backend; print(backend().__name__)")
    assert result.returncode == 0, result.stderr
    assert "numpy" in result.stdout


@pytest.mark.parametrize("module", ["contracts", "queues", "signing"])  # what the site imports of the core to talk to workers
def test_contracts_use_the_standard_library_only(module):
    result = run(f"import sys; before = set(sys.modules)\nimport evaluation_workers.{module}\n"
                 "extra = {m.split('.')[0] for m in set(sys.modules) - before} - {'evaluation_workers'}\n"
                 "assert not extra & {'numpy', 'celery', 'django'}, extra")
    assert result.returncode == 0, result.stderr


def test_the_scoring_core_never_imports_the_site():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "evaluation_workers").rglob("*.py")
                 if any(line.lstrip().startswith(("import django", "from django", "import leaderboard",
                                                  "from leaderboard"))
                        for line in p.read_text().splitlines())]
    assert offenders == []


def test_the_scoring_core_imports_neither_celery_nor_the_worker():
    """Everything outside ``evaluation_workers/worker/`` (the offline scorer, the tracks, the metrics,
    the converters) imports in an interpreter where Celery, kombu and the worker package cannot be
    imported: a researcher's checkout runs it without a broker. ``cli`` reaches the worker lazily."""
    core = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in (ROOT / "evaluation_workers").rglob("*.py")
                  if "worker" not in p.relative_to(ROOT / "evaluation_workers").parts[:1]
                  and p.name != "__main__.py")
    block = BLOCK.replace("('django', 'cupy', 'leaderboard')", "('django', 'cupy', 'leaderboard', 'celery', 'kombu')")
    block += ("class BlockWorker:\n    def find_spec(self, name, path=None, target=None):\n"
              "        if name.startswith('evaluation_workers.worker'):\n"
              "            raise ImportError(f'blocked: {name}')\n"
              "sys.meta_path.insert(0, BlockWorker())\n")
    result = run(block + "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in core))
    assert len(core) > 40 and result.returncode == 0, result.stderr
