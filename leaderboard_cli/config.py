"""Where ``lb`` keeps the server URL and token: a JSON file, overridden by the environment.

``LB_SERVER`` and ``LB_TOKEN`` win over the file; ``LB_CONFIG`` names another
file (default ``$XDG_CONFIG_HOME/lb/config.json``). The file is written with
mode 600 because it holds a token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def config_path() -> Path:
    if os.environ.get("LB_CONFIG"):
        return Path(os.environ["LB_CONFIG"])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "lb" / "config.json"


def state_dir() -> Path:
    """Where resumable uploads and cached manifests are remembered (next to the config file)."""
    return config_path().parent


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise SystemExit(f"lb: {path} is not valid JSON ({exc}); fix or delete it.") from None
    return data if isinstance(data, dict) else {}


def load() -> dict[str, Any]:
    """``{"server": ..., "token": ...}`` from the file, then the environment."""
    config = _read(config_path())
    if os.environ.get("LB_SERVER"):
        config["server"] = os.environ["LB_SERVER"]
    if os.environ.get("LB_TOKEN"):
        config["token"] = os.environ["LB_TOKEN"]
    return config


def save(**values: Any) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {**_read(path), **values}
    tmp = path.with_suffix(".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(config, f, indent=2)
    os.replace(tmp, path)
    return path


def read_json(path: Path) -> dict[str, Any]:
    return _read(path)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)
