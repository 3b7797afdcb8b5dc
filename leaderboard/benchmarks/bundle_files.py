"""Files a benchmark bundle names (its terms, later its pages): found inside the bundle's folder,
symlinks resolved, and read up to a size bound. A refusal is a ``BundleError`` naming the
bundle, the key, the file and the reason.

A stand-in until issue 37's module lands (same signatures; that one also admits files under
``LABELS_SOURCE_ROOTS``).
"""

from __future__ import annotations

from pathlib import Path

from leaderboard.benchmarks.bundles import BundleError

MAX_BYTES = 256 * 1024


def _refuse(bundle_path: Path, name: str, key: str, reason: str) -> BundleError:
    return BundleError([f"{bundle_path.name}: {key}: {name}: {reason}"])


def resolve_bundle_path(bundle_path: Path, name: str, *, key: str) -> Path:
    """The file ``name`` (relative to the bundle's folder), resolved; refused outside that folder."""
    base = Path(bundle_path).resolve().parent
    target = (base / name).resolve()
    if not target.is_relative_to(base):
        raise _refuse(bundle_path, name, key, f"outside the bundle's folder {base} (symlinks resolved); "
                                              "expected a file beside the bundle")
    if not target.exists():
        raise _refuse(bundle_path, name, key, f"{target} does not exist")
    if not target.is_file():
        raise _refuse(bundle_path, name, key, f"{target} is not a file")
    return target


def read_bundle_text(bundle_path: Path, name: str, *, key: str, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the file ``name`` beside the bundle, at most ``max_bytes`` long."""
    target = resolve_bundle_path(bundle_path, name, key=key)
    try:
        with open(target, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise _refuse(bundle_path, name, key, f"cannot be read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise _refuse(bundle_path, name, key, f"larger than {max_bytes // 1024} KiB; expected at most "
                                              f"{max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(bundle_path, name, key, f"not UTF-8 text (byte {exc.start})") from None
