"""The converter writes a compact file that scores exactly like the official zip, with shared masks stored once."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from evaluation_workers.convert.openscan_compact import main
from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks.openscan import score


def test_it_converts_the_official_zip_to_an_equivalent_compact_file(tmp_path: Path) -> None:
    written = synthetic.generate(
        argparse.Namespace(
            out=tmp_path,
            scenes=3,
            points=3000,
            instances=(5, 9),
            masks=15,
            aspects=["material", "type"],
            format="official",
            semantic=True,
            missing=0,
            seed=11,
        )
    )
    dest = tmp_path / "converted.npz"
    assert main([str(written["official"]), str(dest), "--labels", str(written["labels"])]) == 0
    official, compact = score(written["labels"], written["official"]), score(written["labels"], dest)
    assert official["metrics"] == compact["metrics"] and official["breakdown"] == compact["breakdown"]
    assert official["details"]["per_class"] == compact["details"]["per_class"]
    with np.load(dest) as arrays:
        # both aspects use the same 15 proposals per scene: stored once
        assert arrays["proposal_offsets"][-1] <= 3 * 15
        assert len(arrays["material.proposal"]) == len(arrays["type.proposal"]) == 3 * 15
