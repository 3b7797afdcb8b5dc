"""Typed readers of environment variables that fail loudly (healthchecks' envbool)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env(name: str, default: str | None = None) -> str | None:
    """``NAME``, or the contents of the file named by ``NAME_FILE`` (for secrets)."""
    if name in os.environ:
        return os.environ[name]
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        with open(file_name) as f:
            return f.read().strip()
    return default


def envbool(name: str, default: bool) -> bool:
    value = env(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"Unexpected value {name}={value!r}, use 'true' or 'false'")


def envint(name: str, default: int) -> int:
    value = env(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value!r}, expected an integer") from None


def envmode(name: str, default: int) -> int:
    """A file mode in octal, as chmod takes it: ``FILE_MODE=0640``."""
    value = env(name)
    if value is None or value == "":
        return default
    try:
        mode = int(value, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise ImproperlyConfigured(f"Unexpected value {name}={value!r}, expected an octal file mode such as 0640")
    return mode


def envlist(name: str, default: str = "") -> list[str]:
    value = env(name, default) or ""
    return [item.strip() for item in value.split(",") if item.strip()]


def envpaths(name: str) -> list[Path]:
    """Absolute paths, comma-separated: ``LABELS_SOURCE_ROOTS=/srv/labels,/data/benchmarks``."""
    paths = [Path(item) for item in envlist(name)]
    if relative := [str(p) for p in paths if not p.is_absolute()]:
        raise ImproperlyConfigured(f"Unexpected value {name}={env(name)!r}: expected absolute paths, "
                                   f"but got {', '.join(relative)}")
    return paths


def envfloat(name: str, default: float) -> float:
    value = env(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value!r}, expected a number") from None


def generated_secret(path: Path) -> str:
    """The secret kept in ``path``, generated (random, mode 0600) the first time it is needed.

    Every process of the site (web, site worker, each ``manage.py`` command)
    reads the same file, so they agree on the key without anything exported.
    The file appears complete or not at all: it is written under a temporary
    name and hard-linked into place, and when two processes start at once the
    first link wins and the other reads the winner's key.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(50) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.link(staging, path)
        except FileExistsError:
            pass  # another process created it first; use theirs
        finally:
            staging.unlink(missing_ok=True)
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"{path} is empty: delete it to generate a new key, or set SECRET_KEY "
                                   f"(or SECRET_KEY_FILE)")
    return key
