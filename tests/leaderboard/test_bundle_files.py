"""Files a bundle names are read only from its own folder or an allowed root (issue 37):
``LABELS_SOURCE_ROOTS``, symbolic links resolved first; a refused load leaves nothing behind."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from leaderboard.benchmarks.bundle_files import BundleFileRefused, read_bundle_text, resolve_bundle_path
from leaderboard.benchmarks.bundles import BUNDLES_DIR, BundleError, read_bundle
from leaderboard.benchmarks.models import Benchmark, LabelSet
from leaderboard.lib.env import envpaths
from leaderboard.moderation.models import AuditEntry

SQA3D = (BUNDLES_DIR / "sqa3d.yaml").read_text()
SYNTHETIC = "  labels:\n    synthetic: true\n"


def bundle_with(folder: Path, source: str, name: str = "sqa3d.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(SQA3D.replace(SYNTHETIC, f"  labels:\n    source: {source}\n"))
    return path


def refusal(path: Path, *args: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("load_benchmark", str(path), *args, stdout=io.StringIO())
    assert refused.value.returncode == 1
    return str(refused.value)


def nothing_left(labels_dir: Path) -> None:
    assert not Benchmark.objects.exists() and not LabelSet.objects.exists() and not AuditEntry.objects.exists()
    assert list(labels_dir.rglob("*")) == []


@pytest.fixture
def labels_dir(settings, tmp_path):
    """A labels store of the test's own, to see that nothing was left in it."""
    settings.LABELS_DIR = tmp_path / "store"
    settings.LABELS_DIR.mkdir()
    return settings.LABELS_DIR


def test_labels_from_outside_the_bundles_folder_are_refused_with_nothing_left_behind(db, settings, tmp_path,
                                                                                   sqa3d_files, labels_dir):
    """Before: /etc, ../../ and links were read (--dry-run hashed a 740 MB /usr/share)."""
    settings.LABELS_SOURCE_ROOTS = []
    outside = sqa3d_files["labels"]  # real labels, beside the test's folder rather than in it
    folder = tmp_path / "bundle"
    line = SQA3D.replace(SYNTHETIC, "  labels:\n    source: x\n").splitlines().index("    source: x") + 1
    rule = (f"outside the bundle's folder {folder} and the allowed roots (LABELS_SOURCE_ROOTS: none set); expected a "
            f"path inside one of them (the host may add a root to LABELS_SOURCE_ROOTS)")
    key = f"sqa3d.yaml:{line}: splits[0].labels.source:"
    path = bundle_with(folder, "/usr/share")
    for args in (("--dry-run",), ()):
        assert refusal(path, *args) == f"{key} /usr/share is {rule}"
    relative = os.path.relpath(outside, folder)
    assert relative.startswith("..")
    assert refusal(bundle_with(folder, relative)) == f"{key} {relative} (which resolves to {outside}) is {rule}"
    (folder / "labels").symlink_to(outside)
    assert refusal(bundle_with(folder, "labels")) == f"{key} labels (which resolves to {outside}) is {rule}"
    (folder / "labels").unlink()
    (folder / "labels").mkdir()
    [questions, answers] = sorted(outside.iterdir(), key=lambda p: "annotations" in p.name)
    shutil.copy(questions, folder / "labels")
    (folder / "labels" / answers.name).symlink_to(answers)  # one file of the folder is a link out of it
    assert refusal(path := bundle_with(folder, "labels")) == (
        f"{key} {folder / 'labels' / answers.name} (a link to {answers}) is {rule}")
    nothing_left(labels_dir)
    # The host lists a root: labels under it load, links included; the site's own stores never do.
    settings.LABELS_SOURCE_ROOTS = [outside.parent]
    call_command("load_benchmark", str(path), stdout=io.StringIO())
    assert LabelSet.objects.get().manifest["count"] == 300
    settings.LABELS_SOURCE_ROOTS = [outside.parent, settings.LABELS_DIR.parent]
    stored = next(settings.LABELS_DIR.glob("sqa3d/test/*"))
    with pytest.raises(BundleError, match=rf"splits\[0\].labels.source: {stored} is inside LABELS_DIR \("):
        read_bundle(bundle_with(tmp_path / "again", str(stored)))


def test_labels_the_track_refuses_leave_no_folder_no_rows_and_no_audit(db, settings, tmp_path, sqa3d_files,
                                                                       labels_dir):
    """Before: a refused load left an empty folder under LABELS_DIR. Here the first split's labels
    are good and stored before the second's are refused: neither stays."""
    folder = tmp_path / "bundle"
    shutil.copytree(sqa3d_files["labels"], folder / "good")
    (folder / "bad").mkdir()
    (folder / "bad" / "notes.txt").write_text("not SQA3D labels")
    path = bundle_with(folder, "good")
    path.write_text(path.read_text().replace("paper_rows:\n", "- name: val\n  labels:\n    source: bad\npaper_rows:\n"))
    message = refusal(path)
    assert message.startswith("sqa3d.yaml: splits[1].labels.source: "), message
    assert "\n" not in message
    nothing_left(labels_dir)


def test_the_shared_reader_of_a_bundles_files(settings, tmp_path):
    """``resolve_bundle_path`` and ``read_bundle_text``: the rule the other files of a bundle
    (participation terms, host pages) are read by."""
    settings.LABELS_SOURCE_ROOTS = []
    bundle = tmp_path / "b" / "bundle.yaml"
    bundle.parent.mkdir()
    (bundle.parent / "terms.md").write_text("# Terms\nBe kind. ✓\n")
    assert read_bundle_text(bundle, "terms.md", key="terms") == "# Terms\nBe kind. ✓\n"
    assert resolve_bundle_path(bundle, "./terms.md", key="terms") == (bundle.parent / "terms.md").resolve()
    (bundle.parent / "big.md").write_bytes(b"x" * (256 * 1024 + 1))
    (bundle.parent / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    os.mkfifo(bundle.parent / "fifo.md")  # reading it would wait forever
    cases = {"big.md": f"{bundle.parent / 'big.md'}: expected at most 256 KiB (262,144 bytes), but got 262,145 "
                       f"bytes",
             "latin1.md": f"{bundle.parent / 'latin1.md'}: expected UTF-8 text, but byte 3 is b'\\xe9'",
             "fifo.md": f"{bundle.parent / 'fifo.md'} is not a regular file or folder",
             "missing.md": f"{bundle.parent / 'missing.md'} does not exist",
             ".": f"{bundle.parent.resolve()} is a folder; expected a text file"}
    for name, reason in cases.items():
        with pytest.raises(BundleFileRefused) as refused:
            read_bundle_text(bundle, name, key="pages[0].file")
        assert (refused.value.reason, refused.value.problems) == (reason, [f"bundle.yaml: pages[0].file: {reason}"])
    assert read_bundle_text(bundle, "big.md", key="k", max_bytes=1 << 20).startswith("xxx")
    with pytest.raises(BundleError, match="bundle.yaml: terms: ../outside.md"):
        read_bundle_text(bundle, "../outside.md", key="terms")
    monkey_env = {"LABELS_SOURCE_ROOTS": "/srv/labels, relative/path"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in monkey_env.items():
            mp.setenv(k, v)
        with pytest.raises(ImproperlyConfigured, match="expected absolute paths, but got relative/path"):
            envpaths("LABELS_SOURCE_ROOTS")
        mp.setenv("LABELS_SOURCE_ROOTS", "/srv/labels,/data/b")
        assert envpaths("LABELS_SOURCE_ROOTS") == [Path("/srv/labels"), Path("/data/b")]
