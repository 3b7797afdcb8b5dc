"""Synthetic labels and predictions with realistic structure, per track.

``python -m evaluation_workers.synthetic <track> --out DIR ...`` writes a
labels folder (official layout) and prediction files. Each track module here
defines ``add_arguments(parser)`` and ``generate(args) -> dict`` (the paths it
wrote). Used by the demo benchmark, the tests and the benchmarks.
"""

from __future__ import annotations

GENERATORS = {
    "sqa3d": "evaluation_workers.synthetic.sqa3d",
    "mmscan-vg": "evaluation_workers.synthetic.mmscan_vg",
    "openscan": "evaluation_workers.synthetic.openscan",
}
