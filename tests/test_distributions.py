"""One repository, several distributions (README.md, "Distributions"), each needing what it imports and
no more: the scoring core alone (no Django, no Celery, no broker), the worker, the `lb` client alone,
the site, the ScanRefer plugin on the core by name and version range; every range pinned in
requirements*.txt. The README's offline install itself, in a fresh venv: ``test_offline_install.py``."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = {"core": ROOT / "distributions" / "core" / "pyproject.toml",
              "worker": ROOT / "distributions" / "worker" / "pyproject.toml",
              "cli": ROOT / "distributions" / "cli" / "pyproject.toml",
              "site": ROOT / "pyproject.toml",
              "scanrefer": ROOT / "plugins" / "scanrefer" / "pyproject.toml"}
OURS = re.compile(r"^scene-leaderboards")
# Import name -> distribution, where they differ.
DISTRIBUTION_OF = {"simdjson": "pysimdjson", "zlib_ng": "zlib-ng", "cupy": "cupy-cuda12x", "yaml": "PyYAML",
                   "prometheus_client": "prometheus-client", "array_api_compat": "array-api-compat"}


def project(name: str) -> dict:
    return tomllib.loads(PYPROJECTS[name].read_text(encoding="utf-8"))["project"]


def requirement_name(requirement: str) -> str:
    return re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1).lower().replace("_", "-")


def declared(name: str, extras: bool = False) -> dict[str, str]:
    meta = project(name)
    found = list(meta.get("dependencies", []))
    if extras:
        found += [r for group in meta.get("optional-dependencies", {}).values() for r in group]
    return {requirement_name(r): r for r in found}


def pinned() -> dict[str, str]:
    pins = {}
    for path in ROOT.glob("requirements*.txt"):
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                assert "==" in line and "[" not in line, f"{path.name}: {line!r} (a name and an == pin only: " \
                                                          "the file is also pip's constraints)"
                pins[requirement_name(line)] = line
    return pins


def test_pyproject_files_declare_ranges_that_requirements_pin_every_one_of():
    pins = pinned()
    for name in PYPROJECTS:
        for dist, requirement in declared(name, extras=True).items():
            assert "==" not in requirement, f"{name}: {requirement} (ranges here; == pins in requirements*.txt)"
            if not OURS.match(dist):
                assert dist in pins, f"{name} needs {requirement}, which no requirements*.txt pins"
    assert project("cli")["version"] == __import__("leaderboard_cli").__version__


def test_the_core_needs_numpy_and_four_small_libraries_and_declares_the_built_in_tracks():
    assert set(declared("core")) == {"numpy", "orjson", "array-api-compat", "threadpoolctl", "scipy"}
    extras = project("core")["optional-dependencies"]
    assert {requirement_name(r) for r in extras["fast"]} == {"pysimdjson", "zlib-ng"}
    assert {requirement_name(r) for r in extras["gpu"]} == {"cupy-cuda12x"}
    tracks = project("core")["entry-points"]["scene_leaderboards.tracks"]
    assert tracks == {n: f"evaluation_workers.tracks.{n.replace('-', '_')}:TRACK"
                      for n in ("sqa3d", "mmscan-vg", "openscan")}


def _third_party_imports(folder: Path, skip: str | None = None) -> set[str]:
    """The top-level names of what the files under ``folder`` import from outside the standard library
    and this repository (the folder's own package too)."""
    names = set()
    for path in folder.rglob("*.py"):
        if skip and skip in path.relative_to(folder).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            names |= {m.split(".")[0] for m in modules}
    return names - set(sys.stdlib_module_names) - {"evaluation_workers", "leaderboard_cli", folder.name}


def test_each_distribution_declares_what_its_code_imports():
    core = {DISTRIBUTION_OF.get(n, n) for n in _third_party_imports(ROOT / "evaluation_workers", skip="worker")}
    # boto3/botocore: the S3 stores, used by the worker only (its distribution needs them); torch: the
    # researcher's own, read by one converter, with a message saying to install it where it is missing.
    assert core - set(declared("core", extras=True)) == {"boto3", "botocore", "torch"}
    worker = {DISTRIBUTION_OF.get(n, n) for n in _third_party_imports(ROOT / "evaluation_workers" / "worker")}
    assert worker - {"numpy"} <= set(declared("worker")) and "boto3" in declared("worker")
    assert _third_party_imports(ROOT / "leaderboard_cli") == set(declared("cli")) == {"requests", "tqdm"}
    assert set(project("cli")["optional-dependencies"]["validate"]) == {"scene-leaderboards-core>=1.0,<2"}
    plugin = declared("scanrefer")
    assert plugin["scene-leaderboards-core"] == "scene-leaderboards-core>=1.0,<2" and "numpy" in plugin
    assert {DISTRIBUTION_OF.get(n, n) for n in _third_party_imports(ROOT / "plugins" / "scanrefer" / "scanrefer_track")
            } <= set(plugin)


# A finder that makes a package unimportable, as where it is not installed.
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED or name.startswith('evaluation_workers.worker'):
            raise ImportError(f'blocked: {name}')
sys.meta_path.insert(0, Block())
"""


def run_blocked(home: Path, blocked: set[str], code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(home)}  # caches go to HOME
    return subprocess.run([sys.executable, "-c", f"BLOCKED = {sorted(blocked)!r}\n" + BLOCK + code, *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_every_module_of_the_core_imports_with_its_own_dependencies_only(tmp_path):
    """Nothing of the site, the worker, the client or an extra: what a fresh venv with the core has."""
    core = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in (ROOT / "evaluation_workers").rglob("*.py")
                  if p.relative_to(ROOT / "evaluation_workers").parts[0] != "worker" and p.name != "__main__.py")
    others = {"django", "leaderboard", "leaderboard_cli", "celery", "kombu", "redis", "boto3", "botocore",
              "prometheus_client", "requests", "tqdm", "yaml", "simdjson", "zlib_ng", "cupy", "jsonschema", "torch"}
    result = run_blocked(tmp_path, others, "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in core))
    assert len(core) > 40 and result.returncode == 0, result.stderr


def test_without_the_fast_extra_the_scores_are_the_same(tmp_path):
    """No pysimdjson (MMScan's JSON to arrays), no zlib-ng (inflating): the general readers, same result."""
    code = ("import json, sys\nfrom pathlib import Path\nfrom evaluation_workers.tracks import get_track\n"
            "from evaluation_workers.tracks.base import no_progress\n"
            "track = get_track('mmscan-vg')\nlabels, predictions = track.write_demo(Path(sys.argv[1]), 'val')\n"
            "print(json.dumps(track.score(labels, predictions, no_progress), sort_keys=True))\n")
    fast = run_blocked(tmp_path / "fast", set(), code, str(tmp_path / "fast"))
    plain = run_blocked(tmp_path / "plain", {"simdjson", "zlib_ng"}, code + "assert 'simdjson' not in sys.modules\n",
                        str(tmp_path / "plain"))
    assert fast.returncode == 0 and plain.returncode == 0, fast.stderr + plain.stderr
    assert json.loads(plain.stdout)["metrics"] and json.loads(plain.stdout) == json.loads(fast.stdout)


def test_lb_runs_without_the_core_and_says_how_to_install_it_for_validate_and_convert(tmp_path):
    code = ("import sys\nfrom leaderboard_cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    blocked = {"evaluation_workers", "numpy", "django", "celery"}
    helped = run_blocked(tmp_path, blocked, code, "--help")
    assert helped.returncode == 0 and "validate" in helped.stdout, helped.stderr
    (tmp_path / "p.json").write_text("[]")
    for argv in (["validate", "--track", "sqa3d", str(tmp_path / "p.json")],
                 ["convert", "--track", "sqa3d", "--from", "leo", "a", "b"]):
        out = run_blocked(tmp_path, blocked, code, *argv)
        assert out.returncode == 1, out.stderr
        assert f"lb: {argv[0]} runs the scoring core's" in out.stderr
        assert '"./distributions/cli[validate]" ./distributions/core' in out.stderr


@pytest.mark.parametrize("name", ["core", "worker", "cli"])
def test_a_distribution_under_distributions_ships_its_code_from_the_root(name):
    """The build hook's settings name folders that exist, and the core leaves the worker out."""
    hook = tomllib.loads(PYPROJECTS[name].read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert hook["dev-mode-dirs"] == ["../.."] and hook["hooks"]["custom"]["path"] == "../checkout.py"
    for source, target in hook["hooks"]["custom"]["include"].items():
        assert (ROOT / source).is_dir() and source == target
    assert hook["hooks"]["custom"].get("exclude", []) == (["evaluation_workers/worker"] if name == "core" else [])
