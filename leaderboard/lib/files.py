"""Files the site keeps for itself and the scoring workers (uploads, labels): ``FILE_MODE``
files in ``DIR_MODE`` folders (0640 and 0750 by default: the site's user writes, the
workers' group reads, nobody else), whatever the process's umask."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from django.conf import settings


def _chmod(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except PermissionError:
        pass  # a folder of another user (a shared parent): its mode is theirs to set


def make_dirs(root: Path, folder: Path) -> None:
    """Create ``folder`` and give it, and every folder from ``root`` down to it, ``DIR_MODE``."""
    root, folder = Path(root), Path(folder)
    if not folder.is_relative_to(root):
        raise ValueError(f"Expected a folder under {root}, but got {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    for path in (folder, *folder.parents):
        _chmod(path, settings.DIR_MODE)
        if path == root:
            break


def open_private(path: Path) -> IO[bytes]:
    """``open(path, "wb")`` for a file created with ``FILE_MODE`` (never readable by others, even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, settings.FILE_MODE)
    os.fchmod(fd, settings.FILE_MODE)  # the umask may have removed bits that FILE_MODE asks for
    return os.fdopen(fd, "wb")


def restrict_tree(root: Path) -> None:
    """``DIR_MODE`` on ``root`` and every folder under it, ``FILE_MODE`` on every file (or on ``root``)."""
    if not Path(root).is_dir():
        _chmod(root, settings.FILE_MODE)
        return
    _chmod(root, settings.DIR_MODE)
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            _chmod(Path(folder, name), settings.DIR_MODE)
        for name in names:
            _chmod(Path(folder, name), settings.FILE_MODE)
