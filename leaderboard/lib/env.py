"""Typed readers of environment variables that fail loudly (healthchecks' envbool)."""

from __future__ import annotations

import os

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


def envlist(name: str, default: str = "") -> list[str]:
    value = env(name, default) or ""
    return [item.strip() for item in value.split(",") if item.strip()]


def envfloat(name: str, default: float) -> float:
    value = env(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value!r}, expected a number") from None
