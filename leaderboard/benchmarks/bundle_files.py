"""The files a benchmark bundle names (labels, a public subset, Markdown pages): one rule for all.

A bundle may be written by a maintainer from another lab, and ``load_benchmark`` runs with the
site's rights, so a name in it is read only from the bundle's own folder or from under a root
the host lists in ``LABELS_SOURCE_ROOTS``. The path is resolved first (``..`` and symbolic
links included): a link inside the bundle's folder that points outside it is refused like the
path it points to, and so is a link inside a named folder. The site's own stores
(``LABELS_DIR``, ``UPLOADS_DIR``) are never a source, even under an allowed root.

Each refusal is a ``BundleError`` naming the file, the key and the reason.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from django.conf import settings

MAX_TEXT_BYTES = 256 * 1024  # a Markdown page named by a bundle


class BundleError(ValueError):
    """A bundle that cannot be loaded; ``problems`` are its lines, each ``file:line: key.path: what``."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class BundleFileRefused(BundleError):
    """A file named by a bundle that may not be read; ``reason`` without the file and key (for the
    caller that knows the key's line)."""

    def __init__(self, bundle_path: Path, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__([f"{Path(bundle_path).name}: {key}: {reason}"])


def size_text(n: int) -> str:
    """``1 MiB``, ``5.0 MiB``, ``256 KiB``, ``900 bytes``: a size as refusals say it."""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:,.0f} {unit}" if value == int(value) or value >= 100 else f"{value:,.1f} {unit}"
    return f"{n:,} bytes"


def size_refusal(limit: int, size: int, thing: str = "") -> str:
    """``expected [a bundle of ]at most 1 MiB, but got 4.8 MiB``; in bytes where the two would read alike."""
    if size_text(limit) == size_text(size):
        return f"expected {thing}at most {size_text(limit)} ({limit:,} bytes), but got {size:,} bytes"
    return f"expected {thing}at most {size_text(limit)}, but got {size_text(size)}"


def allowed_roots(bundle_path: Path) -> list[Path]:
    """Where a bundle's files may come from: its own folder, then ``LABELS_SOURCE_ROOTS``, resolved."""
    return [Path(bundle_path).parent.resolve()] + [Path(root).resolve() for root in settings.LABELS_SOURCE_ROOTS]


def _stores() -> list[tuple[str, Path]]:
    return [(name, Path(getattr(settings, name)).resolve()) for name in ("LABELS_DIR", "UPLOADS_DIR")]


def _place_refusal(bundle_path: Path, resolved: Path, shown: str) -> str | None:
    """Why ``resolved`` (what ``shown`` names) may not be read for this bundle, or None."""
    roots = allowed_roots(bundle_path)
    for name, store in _stores():
        if resolved.is_relative_to(store):
            return f"{shown} is inside {name} ({store}), the site's own store; a bundle's files never come from there"
    if any(resolved.is_relative_to(root) for root in roots):
        return None
    listed = ", ".join(str(r) for r in roots[1:]) or "none set"
    return (f"{shown} is outside the bundle's folder {roots[0]} and the allowed roots (LABELS_SOURCE_ROOTS: "
            f"{listed}); expected a path inside one of them (the host may add a root to LABELS_SOURCE_ROOTS)")


def _shown(name: str, given: Path, resolved: Path) -> str:
    return str(given) if given == resolved else f"{name} (which resolves to {resolved})"


def _check_tree(bundle_path: Path, folder: Path, key: str) -> None:
    """Every entry under a named folder: links that stay allowed, no special files (a FIFO would hang
    the checksum). Linked folders are followed (each once), after their link was checked."""
    seen: set[str] = set()
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        for entry in (*dirs, *files):
            path = Path(top, entry)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                target = path.resolve()
                if refusal := _place_refusal(bundle_path, target, f"{path} (a link to {target})"):
                    raise BundleFileRefused(bundle_path, key, refusal)
                if not target.exists():
                    raise BundleFileRefused(bundle_path, key, f"{path} is a link to {target}, which does not exist")
                mode = target.stat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BundleFileRefused(bundle_path, key, f"{path} is not a regular file or folder")


def _resolve(bundle_path: Path, name: str, key: str) -> Path:
    """The resolved ``name`` of the bundle, allowed and existing (a file or folder: not checked here)."""
    given = bundle_path.parent / name
    try:
        resolved = given.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise BundleFileRefused(bundle_path, key, f"{given} cannot be resolved: {exc}") from None
    if refusal := _place_refusal(bundle_path, resolved, _shown(name, given, resolved)):
        raise BundleFileRefused(bundle_path, key, refusal)
    if not resolved.exists():
        raise BundleFileRefused(bundle_path, key, f"{given} does not exist")
    return resolved


def resolve_bundle_path(bundle_path: Path, name: str, *, key: str) -> Path:
    """The resolved path of ``name`` (relative to the bundle's folder, or absolute), checked: inside
    the bundle's folder or an allowed root (``LABELS_SOURCE_ROOTS``), existing, a regular file or a
    folder whose entries obey the same rule. Else ``BundleFileRefused`` (a ``BundleError``) naming
    the bundle's file, ``key`` (``splits[0].labels.source``) and the reason."""
    bundle_path = Path(bundle_path)
    resolved = _resolve(bundle_path, name, key)
    mode = resolved.stat().st_mode
    if stat.S_ISDIR(mode):
        _check_tree(bundle_path, resolved, key)
    elif not stat.S_ISREG(mode):
        raise BundleFileRefused(bundle_path, key, f"{bundle_path.parent / name} is not a regular file or folder")
    return resolved


def read_limited(path: Path, max_bytes: int) -> bytes | int:
    """The bytes of the regular file ``path``, or its size when that is over ``max_bytes`` (then at
    most ``max_bytes + 1`` bytes were read: a file growing while read is caught too)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            return size
        data = f.read(max_bytes + 1)
    return len(data) if len(data) > max_bytes else data


def read_bundle_text(bundle_path: Path, name: str, *, key: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of the file ``name`` of a bundle (``resolve_bundle_path``'s rule), refused
    over ``max_bytes`` before it is read, or when it is a folder or not UTF-8."""
    bundle_path = Path(bundle_path)
    path = _resolve(bundle_path, name, key)
    if path.is_dir():
        raise BundleFileRefused(bundle_path, key, f"{path} is a folder; expected a text file")
    if not path.is_file():
        raise BundleFileRefused(bundle_path, key, f"{bundle_path.parent / name} is not a regular file or folder")
    try:
        data = read_limited(path, max_bytes)
    except OSError as exc:
        raise BundleFileRefused(bundle_path, key, f"{path} cannot be read: {exc.strerror}") from None
    if isinstance(data, int):
        raise BundleFileRefused(bundle_path, key, f"{path}: {size_refusal(max_bytes, data)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleFileRefused(bundle_path, key, f"{path}: expected UTF-8 text, but byte {exc.start} is "
                                                  f"{data[exc.start:exc.start + 1]!r}") from None
