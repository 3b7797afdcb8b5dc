"""The public plugin API (``evaluation_workers.plugin``) is all a track imports of the scoring core: the
ScanRefer plugin, the example plugin of the tests and the built-in tracks alike."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import evaluation_workers.plugin as plugin

ROOT = Path(__file__).resolve().parents[1]
BUILT_IN = ("sqa3d", "mmscan_vg", "openscan")


def core_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of each module of ``evaluation_workers`` the file imports (``from m import x``: ``m.x``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.lineno, node.module if node.module == "evaluation_workers.plugin" else
                       f"{node.module}.{a.name}") for a in node.names]
    return [(line, m) for line, m in found if m == "evaluation_workers" or m.startswith("evaluation_workers.")]


def _allowed_for_built_in(track: str) -> tuple[str, ...]:
    # A built-in track's own package, and its demo data: the generator `python -m evaluation_workers.synthetic`
    # runs and the format page's samples, kept in synthetic/ beside the other generators.
    return (f"evaluation_workers.tracks.{track}", "evaluation_workers.synthetic.samples",
            f"evaluation_workers.synthetic.{track}")


def private_imports() -> list[str]:
    files = [(p, ()) for p in sorted((ROOT / "plugins").rglob("*.py"))]
    files += [(p, ()) for p in sorted((ROOT / "tests" / "fixtures" / "track_plugin").rglob("*.py"))]
    for track in BUILT_IN:
        files += [(p, _allowed_for_built_in(track))
                  for p in sorted((ROOT / "evaluation_workers" / "tracks" / track).rglob("*.py"))]
    bad = []
    for path, own in files:
        for line, module in core_imports(path):
            if module != "evaluation_workers.plugin" and not any(module == o or module.startswith(o + ".")
                                                                 for o in own):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    return bad


def test_no_plugin_and_no_built_in_track_imports_a_private_module_of_the_core():
    assert private_imports() == [], "import these from evaluation_workers.plugin instead"


def test_the_check_sees_a_private_import(tmp_path, monkeypatch):
    """The rule above can fail: a plugin file that reaches past the API is named with its line."""
    fake = tmp_path / "plugins" / "mine" / "mine_track"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("from evaluation_workers.plugin import Track\n"
                                      "from evaluation_workers.metrics import bootstrap\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "tests" / "fixtures" / "track_plugin").mkdir(parents=True)
    for track in BUILT_IN:
        (tmp_path / "evaluation_workers" / "tracks" / track).mkdir(parents=True)
    assert private_imports() == ["plugins/mine/mine_track/__init__.py:2: evaluation_workers.metrics.bootstrap"]


def test_every_name_resolves_and_the_type_checkers_see_the_same_names():
    """``_EXPORTS`` (what ``__getattr__`` loads) and the ``TYPE_CHECKING`` imports name the same objects."""
    tree = ast.parse(Path(plugin.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: re-exported as itself (`import x as x`)"
            typed[alias.name] = {f"{node.module}:{alias.name}", f"{node.module}.{alias.name}"}
    assert sorted(typed) == plugin.__all__
    for name in plugin.__all__:
        assert plugin._EXPORTS[name] in typed[name], name
        assert getattr(plugin, name) is not None


def test_names_load_when_used_and_an_unknown_one_says_where_the_names_are():
    code = ("import sys, evaluation_workers.plugin as p\n"
            "assert 'evaluation_workers.metrics.iou3d' not in sys.modules\n"
            "from evaluation_workers.plugin import indexed_iou3d\n"
            "assert 'evaluation_workers.metrics.iou3d' in sys.modules\n"
            "try:\n    p.nope\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "has no attribute 'nope'" in out.stdout and "docs/writing-a-track.md" in out.stdout


@pytest.mark.parametrize("loaded", ["file", "folder"])
def test_the_checksum_rule_is_sha256_tree_of_what_was_loaded_less_derived_files(tmp_path, loaded):
    """A prepared folder that copies a loaded folder and adds ``manifest.json`` and ``.cache`` hashes alike."""
    source = tmp_path / "labels"
    source.mkdir()
    (source / "a.json").write_text("[1]")
    (source / "sub").mkdir()
    (source / "sub" / "b.txt").write_text("b")
    if loaded == "file":
        assert plugin.labels_sha256(source / "a.json") == plugin.sha256_file(source / "a.json")
        return
    before = plugin.labels_sha256(source)
    (source / "manifest.json").write_text("{}")
    (source / ".cache").mkdir()
    (source / ".cache" / "x.npz").write_bytes(b"cache")
    assert plugin.labels_sha256(source) == before
    (source / "sub" / "b.txt").write_text("changed")
    assert plugin.labels_sha256(source) != before
