import os
import sys

# BLAS on one thread unless told otherwise, set before NumPy loads OpenBLAS: the scorer's products are
# thin and its own threads (EVAL_THREADS) share the cores, while OpenBLAS's idle threads spin waiting
# for work (5 % of an OpenScan run's CPU in perf) and starting them costs 0.03-0.05 s of CPU at import.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
one_shot = sys.argv[1:2] != ["worker"]
if one_shot:
    # A one-shot command collects cyclic garbage every 50,000 new objects instead of 700: its imports
    # and readers make objects by the hundred thousand, almost none of them in cycles, and each
    # collection holds the GIL while the scoring threads wait (a run 0.02-0.05 s faster, alternated
    # with the default in fresh processes). The worker, a long-lived process, keeps the default.
    import gc

    gc.set_threshold(50_000, 10, 10)

# The allocator's settings before any thread starts: a thread's first allocation picks its arena, and
# one picked before ``allocator.tune`` kept heaps of its own (``cli.main`` tunes again: no harm).
from evaluation_workers import allocator  # noqa: E402

allocator.tune()

if sys.argv[1:2] == ["score"] and "--predictions" in sys.argv[:-1]:
    # The predictions' checksum starts before the scorer's imports (NumPy, SciPy: 0.1-0.2 s on one
    # core), on the core that would idle meanwhile; ``results.sha256_file`` picks it up. A spelling
    # argparse also accepts ("--predictions=F", "--pred F") only hashes the file later, as usual.
    from evaluation_workers.results import hash_ahead

    hash_ahead(sys.argv[sys.argv.index("--predictions") + 1])

from evaluation_workers.cli import main  # noqa: E402  # after the setting above


def run() -> int:
    """``main``, quiet when the reader of its output goes away (``score ... | head``): no traceback."""
    try:
        try:
            return main()
        finally:  # also after --help (SystemExit): a closed pipe shows here, not at the interpreter's exit
            sys.stdout.flush()
    except BrokenPipeError:
        # What is still buffered goes nowhere, so that no later flush tries the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a program killed by SIGPIPE: the shell's 128 + 13


code = run()
if one_shot:
    # A one-shot command (score, validate, ...) has written all it writes and joined its threads:
    # end without the interpreter's teardown, which frees every object and module one by one
    # (40-70 ms after a scoring run, most of it scipy's modules: benchmarks/mmscan_vg.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
