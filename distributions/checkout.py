"""A hatchling build hook shared by the distributions under distributions/: the files each one ships
that lie at the repository's root, above the folder of its pyproject.toml (``evaluation_workers/``,
``leaderboard_cli/``, which stay where the service and its tests run them).

    [tool.hatch.build.targets.wheel.hooks.custom]
    path = "../checkout.py"
    include = {"evaluation_workers" = "evaluation_workers"}  # path in the checkout -> path in the wheel
    exclude = ["evaluation_workers/worker"]                  # paths in the checkout left out

A wheel gets a copy of each file (hatchling's force-include, file by file so that ``exclude`` holds);
an editable install gets none, and puts the checkout on ``sys.path`` instead (``dev-mode-dirs``), so
that an edit is seen without installing again. Build wheels (``pip install``, ``pip wheel``,
``python -m build --wheel``): an sdist of a folder under distributions/ would hold no code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SKIPPED = ("__pycache__", ".mypy_cache", ".pytest_cache")


class CheckoutFiles(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        checkout = Path(self.root).resolve().parents[1]  # distributions/<name>/ -> the repository
        excluded = [checkout / e for e in self.config.get("exclude", [])]
        for source, target in self.config["include"].items():
            base = checkout / source
            if not base.exists():
                raise FileNotFoundError(f"{base}: a distribution under distributions/ is built from its checkout")
            files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
            for path in files:
                if set(path.relative_to(checkout).parts) & set(SKIPPED) or path.suffix == ".pyc":
                    continue
                if any(path == e or e in path.parents for e in excluded):
                    continue
                inside = target if path == base else f"{target}/{path.relative_to(base).as_posix()}"
                build_data["force_include"][str(path)] = inside
