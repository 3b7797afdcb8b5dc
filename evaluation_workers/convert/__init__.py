"""Converters that run where the researcher's own code runs (``convert``, ``lb convert``).

Each module converts one source format into a form the server accepts:

| track | ``--from`` | module | input | output |
|---|---|---|---|---|
| openscan | ``open3dis`` | ``open3dis`` | folder of Open3DIS ``.pth`` (``torch.save``) | official zip or compact |
| openscan | ``openmask3d`` | ``openmask3d`` | folder of OpenMask3D dumps (``np.savez``) | official zip or compact |
| mmscan-vg | ``embodiedscan-pkl`` | ``embodiedscan_pkl`` | challenge ``.pkl`` (``mmengine.dump``) | binary ``.npz`` |
| sqa3d | ``leo`` | ``leo`` | LEO ``results.json`` + questions file | answers JSON |

``mmscan_labels`` is the maintainer's labels converter (``convert-labels``).
The server reads no upload with this package: formats that need unpickling
are refused there (with ``refusal_hint``'s advice, ``evaluation_workers.unpickled``) and converted here.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from evaluation_workers.convert.common import ConvertError
from evaluation_workers.unpickled import NEEDS_CONVERTING, refusal_hint

__all__ = ["EXAMPLES", "FORMS", "NEEDS_CONVERTING", "ConvertError", "command", "convert", "forms", "refusal_hint"]

FORMS: dict[str, dict[str, str]] = {
    "openscan": {"open3dis": "evaluation_workers.convert.open3dis",
                 "openmask3d": "evaluation_workers.convert.openmask3d"},
    "mmscan-vg": {"embodiedscan-pkl": "evaluation_workers.convert.embodiedscan_pkl"},
    "sqa3d": {"leo": "evaluation_workers.convert.leo"},
}

# One command line per converter, as the docs and the format pages show it.
EXAMPLES: dict[tuple[str, str], str] = {
    ("openscan", "open3dis"): "lb convert --track openscan --from open3dis exp/final_result/ predictions.zip",
    ("openscan", "openmask3d"): "lb convert --track openscan --from openmask3d --to compact openscan_dump/ "
                                "predictions.npz",
    ("mmscan-vg", "embodiedscan-pkl"): "lb convert --track mmscan-vg --from embodiedscan-pkl --split test "
                                       "submission.pkl predictions.npz",
    ("sqa3d", "leo"): "lb convert --track sqa3d --from leo --questions v1_balanced_questions_test_scannetv2.json "
                      "results.json predictions.json",
}


def forms(track: str) -> list[str]:
    return list(FORMS.get(track, {}))


def convert(track: str, form: str, source: Path, dest: Path, manifest: dict[str, Any] | None,
            **options: Any) -> str:
    """Run one converter; returns its summary line. ``ConvertError`` on a bad input."""
    try:
        module = importlib.import_module(FORMS[track][form])
    except KeyError:
        known = ", ".join(f"{t}: {', '.join(f)}" for t, f in FORMS.items())
        raise ConvertError(f"Expected a source format of the track ({known}), but got {track} --from {form}") from None
    summary: str = module.convert(Path(source), Path(dest), manifest, **options)
    return summary


def command(track: str, form: str, source: str) -> str:
    """The exact command line that converts ``source`` (printed by ``lb submit``)."""
    out = Path(source).with_suffix(".npz" if track == "mmscan-vg" else ".zip" if track == "openscan" else ".json")
    return f"lb convert --track {track} --from {form} {source} {out.name}"
