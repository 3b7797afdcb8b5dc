"""A track's ``validate`` run in a child process, under a memory cap and a time limit.

The site validates uploads at upload time (up to ``VALIDATE_AT_UPLOAD_MAX_BYTES``) in its web
process. The validators build Python objects for what they read: a legitimate 51 MiB MMScan JSON
object costs 627 MiB, and four such uploads at once would take a web process's memory (issue 26).
So ``validate`` runs the track's validator in a child forked from multiprocessing's forkserver
(one single-threaded process per web process that has imported the tracks once, so a child
starts in milliseconds and never inherits the web process's threads or connections). The child's
address space is capped at ``max_memory`` above what it holds after the fork (RLIMIT_AS: a hard
cap, counted on reservations, so resident growth stays below it), and it is killed past
``timeout``. The web process itself only receives the summary or the message.

A child that runs out of either raises ``OutOfBounds`` here: the file is not blamed, the worker
validates it again as it scores. Refusals (``SubmissionError``) come back as they were raised.
Stdlib only; no Django.
"""

from __future__ import annotations

import multiprocessing
import resource
import threading
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

from evaluation_workers import tracks
from evaluation_workers.errors import SubmissionError

DEFAULT_MAX_MEMORY = 256 * 2**20
DEFAULT_TIMEOUT = 60.0
# What the forkserver imports once, so that no child pays for numpy and the tracks.
_lock = threading.Lock()
_context: ForkServerContext | None = None


class OutOfBounds(Exception):
    """The validation needed more memory or time than it was given, or its process died."""


def validate(track: str, predictions: Path, manifest: Any, max_memory: int = DEFAULT_MAX_MEMORY,
             timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """``get_track(track).validate(predictions, manifest)`` in a capped child process.

    Args:
        max_memory: bytes of address space the child may add to what it has after the fork.
        timeout: seconds the child may take, from its start.

    Returns the validator's summary; raises what the validator raised for the file
    (``SubmissionError``), ``OutOfBounds`` otherwise.
    """
    context = _forkserver()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run, args=(send, track, str(predictions), manifest, max_memory), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(timeout):
            raise OutOfBounds(f"Validating took more than {timeout:g} s")
        try:
            kind, value = receive.recv()
        except EOFError:
            child.join(1)
            raise OutOfBounds(f"The validating process ended without an answer (exit code {child.exitcode})") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        child.close()
        receive.close()
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    if kind == "refused":
        raise value
    raise OutOfBounds(value)


def _forkserver() -> ForkServerContext:
    global _context
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            # What the forkserver imports once, so that no child pays for numpy and the tracks.
            context.set_forkserver_preload(tracks.modules())
            _context = context
        return _context


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _run(send: Connection, track: str, predictions: str, manifest: Any, max_memory: int) -> None:
    from evaluation_workers.tracks import get_track

    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = _address_space() + max_memory
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
        answer: tuple[str, Any] = ("ok", get_track(track).validate(Path(predictions), manifest))
    except SubmissionError as exc:
        answer = ("refused", exc)
    except MemoryError:
        answer = ("failed", f"Validating needed more than {max_memory / 2**20:g} MiB of memory")
    except Exception as exc:  # noqa: BLE001 - a validator's bug: the worker reports it as the platform's
        answer = ("failed", f"The validator failed: {type(exc).__name__}: {exc}"[:2000])
    send.send(answer)
    send.close()
