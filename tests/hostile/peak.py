"""Run one call in a fresh interpreter and report its outcome and peak memory (VmHWM).

VmHWM is the process's high-water mark of resident memory, read from
/proc/self/status: it counts zlib's buffers and numpy's allocations alike,
which tracemalloc does not. A hostile file's cost is that peak minus the
peak of the same interpreter after imports (``baseline_kib``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_RUNNER = r"""
import importlib, json, sys
def vmhwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
module, function, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
func = getattr(importlib.import_module(module), function)
from evaluation_workers.errors import SubmissionError
baseline = vmhwm()
try:
    value = func(*args)
    out = {"outcome": "ok", "message": "", "value": repr(value)[:2000]}
except SubmissionError as exc:
    out = {"outcome": "rejected", "message": exc.message}
except BaseException as exc:
    out = {"outcome": "crashed", "message": f"{type(exc).__name__}: {exc}"[:2000]}
out["baseline_kib"] = baseline
out["peak_kib"] = vmhwm()
print("@@RESULT@@" + json.dumps(out))
"""


@dataclass
class Outcome:
    outcome: str  # "ok", "rejected" (a SubmissionError) or "crashed" (anything else)
    message: str
    peak_kib: int
    baseline_kib: int

    @property
    def extra_mib(self) -> float:
        """Peak resident memory above the interpreter's after imports, in MiB."""
        return (self.peak_kib - self.baseline_kib) / 1024


def run_isolated(module: str, function: str, *args: object, timeout: float = 120) -> Outcome:
    """Call ``module.function(*args)`` (JSON-able args) in a fresh Python; never raises for its failure."""
    proc = subprocess.run([sys.executable, "-c", _RUNNER, module, function, json.dumps(args, default=str)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
    if not marker:  # killed (e.g. by the OOM killer) or crashed in C
        return Outcome("crashed", f"exit {proc.returncode}: {proc.stderr[-2000:]}", 0, 0)
    data = json.loads(marker[-1][len("@@RESULT@@"):])
    return Outcome(data["outcome"], data["message"], data["peak_kib"], data["baseline_kib"])
