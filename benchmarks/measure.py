"""One measured child process for the benchmarks: wall, CPU (user + system; system alone too), peak RSS,
page faults and context switches of it alone; and what machine the figures come from (``machine``).

The figures come from a fresh parent process, so that the peak RSS (``ru_maxrss`` of the children, which
is a maximum over all children ever waited for) is this command's alone. ``steal`` is the CPU time the
hypervisor gave to other guests meanwhile (all CPUs, from /proc/stat; 0 elsewhere): on a shared virtual
machine a wall time with seconds of steal is the neighbours', not the command's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_PROBE = """
import json, os, resource, subprocess, sys, time
def steal():
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
start, stolen = time.perf_counter(), steal()
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime, "sys": usage.ru_stime,
                  "rss_mib": usage.ru_maxrss / 1024, "steal": steal() - stolen, "rc": out.returncode,
                  "faults": usage.ru_minflt, "switches": usage.ru_nvcsw + usage.ru_nivcsw,
                  "stdout": out.stdout, "stderr": out.stderr[-3000:]}))
"""


def measured(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """``{"wall", "cpu", "rss_mib", "stdout", ...}`` of ``cmd``; raises when it fails."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *cmd], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}, cwd=cwd)
    run: dict[str, Any] = json.loads(out.stdout)
    if run["rc"]:
        raise RuntimeError(f"{cmd} failed: {run['stderr']}")
    return run


def machine() -> str:
    """The CPU model, its count and the kernel: where a figure was measured (both AMD EPYC and Intel Xeon
    machines have run these benchmarks, and the balance of threads differs between them)."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu_flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
        flags = ", AVX-512" if "avx512f" in cpu_flags else ", AVX2" if "avx2" in cpu_flags else ""
    except OSError:
        pass
    return f"{model}{flags}, {len(os.sched_getaffinity(0))} CPUs, Linux {os.uname().release}"


def as_scored(result: dict[str, Any], metric: str) -> str:
    """What makes ``result`` "as scored": its intervals computed, not deferred nor dropped, as the site
    records them (``metric``'s shown); a loud "NOT as scored" when they are missing, so that no ratio
    passes for the work a submission gets when it did less."""
    bootstrap = result.get("bootstrap") or {}
    interval = (result.get("intervals") or {}).get(metric)
    if bootstrap.get("deferred") or interval is None:
        return (f"NOT as scored: {metric} has no interval ({'deferred' if bootstrap.get('deferred') else 'withheld'}"
                f": {' '.join(result.get('warnings') or [])})")
    return (f"as scored: {metric} [{interval[0]:.4f}, {interval[1]:.4f}], {bootstrap.get('resamples')} resamples "
            f"of {bootstrap.get('units', bootstrap.get('unit', '?'))}")


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f} on {len(os.sched_getaffinity(0))} CPUs"


def evict(paths: list[Path]) -> None:
    """Drop files from the page cache (a cold read), without privileges."""
    for path in paths:
        for p in [path] if path.is_file() else [q for q in path.rglob("*") if q.is_file()]:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def read_once(paths: list[Path]) -> None:
    """Read files through once, so that the next run finds them in the page cache (a warm read)."""
    for path in paths:
        for p in [path] if path.is_file() else [q for q in path.rglob("*") if q.is_file()]:
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass


@contextlib.contextmanager
def scratch_copy(folder: Path) -> Iterator[Path]:
    """A copy of ``folder`` (an official evaluator: caches left out) in a temporary folder, removed
    afterwards. The benchmarks run the official evaluators from such a copy, so that what they or Python
    write there (a rewritten ``constants.py``, bytecode) never lands in the folder they are given."""
    with tempfile.TemporaryDirectory(prefix="official_copy_") as scratch:
        copy = Path(scratch) / folder.name
        shutil.copytree(folder, copy, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git", ".pytest_cache"))
        yield copy
