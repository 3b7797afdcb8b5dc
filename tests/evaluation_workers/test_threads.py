"""Reading ahead in a thread, and the mask scan it overlaps with scoring."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from evaluation_workers.threads import read_ahead, threads
from evaluation_workers.tracks.openscan.common import flat_nonzero


@pytest.mark.parametrize("pool", [None, "pool"])
def test_read_ahead_yields_in_order_one_read_at_a_time_and_raises_at_the_item(pool) -> None:
    in_flight, seen = [0], []

    def read(item: int) -> int:
        in_flight[0] += 1
        assert in_flight[0] == 1  # never two reads at once
        seen.append(item)
        in_flight[0] -= 1
        if item == 3:
            raise ValueError("bad item 3")
        return item * 10

    with ThreadPoolExecutor(2) as executor:
        got = []
        with pytest.raises(ValueError, match="bad item 3"):
            for item, value in read_ahead(executor if pool else None, read, [0, 1, 2, 3, 4]):
                got.append((item, value))
    assert got == [(0, 0), (1, 10), (2, 20)]  # items before the bad one were all delivered
    assert seen[:4] == [0, 1, 2, 3]


def test_eval_threads_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_THREADS", "3")
    assert threads() == 3
    monkeypatch.setenv("EVAL_THREADS", "many")
    with pytest.raises(ValueError, match="EVAL_THREADS"):
        threads()


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("density", [0.0, 0.003, 0.3, 1.0])
def test_flat_nonzero_equals_numpy_on_masks_of_any_type_and_size(dtype, density: float) -> None:
    rng = np.random.default_rng(int(density * 1000))
    for shape in [(1, 1), (7, 3), (1503, 101), (64, 8)]:
        on = rng.random(shape) < density
        masks = on.astype(dtype)
        if dtype in (np.int8, np.int32):
            masks[on] = -7  # any non-zero value is in
        if dtype == np.float32 and on.size > 1:
            masks.reshape(-1)[1] = np.nan  # NaN != 0: in, as the official `!= 0` has it
        assert np.array_equal(flat_nonzero(masks), np.flatnonzero(masks))


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32])
def test_flat_nonzero_equals_numpy_on_masks_at_any_address(dtype) -> None:
    """A stored zip member's masks start at any byte of the archive: every offset reads the same."""
    rng = np.random.default_rng(5)
    masks = (rng.random((301, 13)) < 0.05).astype(dtype)
    masks[0, 0] = masks[-1, -1] = 1  # the first and last bytes: the head and tail around the words
    raw = masks.tobytes()
    for offset in range(8):
        buffer = np.zeros(len(raw) + 8, dtype=np.uint8)
        buffer[offset : offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        view = buffer[offset : offset + len(raw)].view(dtype).reshape(masks.shape)
        assert np.array_equal(flat_nonzero(view), np.flatnonzero(masks)), offset
    assert np.array_equal(flat_nonzero(np.ones(5, dtype=np.uint8)[1:]), np.arange(4))


@pytest.mark.parametrize("block_words", [1, 3, 64])
def test_flat_nonzero_joins_its_blocks_of_words_in_order(block_words: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scene's masks are scanned in blocks of words (8 MiB each by default, more than the tests' masks
    hold): with small blocks, every block boundary, head and tail, the result is NumPy's."""
    from evaluation_workers.tracks.openscan import common

    monkeypatch.setattr(common, "_BLOCK_WORDS", block_words)
    rng = np.random.default_rng(block_words)
    for dtype in (np.bool_, np.uint8, np.int32):
        masks = (rng.random((517, 9)) < 0.1).astype(dtype)
        masks[0, 0] = masks[-1, -1] = 1
        raw = masks.tobytes()
        for offset in (0, 3):
            buffer = np.zeros(len(raw) + 8, dtype=np.uint8)
            buffer[offset : offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            view = buffer[offset : offset + len(raw)].view(dtype).reshape(masks.shape)
            assert np.array_equal(flat_nonzero(view), np.flatnonzero(masks)), (dtype, offset)


def test_flat_nonzero_reads_bool_bytes_other_than_one_as_in() -> None:
    raw = np.frombuffer(bytes([0, 2, 0, 1, 0, 0, 0, 0, 255, 0, 9]), dtype=np.bool_)
    assert flat_nonzero(raw).tolist() == [1, 3, 8, 10]


def test_the_default_shares_the_cpus_among_the_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("EVAL_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setenv("EVAL_CONCURRENCY", "2")
    assert threads() == 4
    monkeypatch.setenv("EVAL_CONCURRENCY", "16")
    assert threads() == 1


def test_read_ahead_keeps_the_order_with_several_reads_in_flight() -> None:
    import threading
    import time

    lock, in_flight, most = threading.Lock(), [0], [0]

    def read(item: int) -> int:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.002 * (5 - item % 5))  # later items may finish first
        with lock:
            in_flight[0] -= 1
        return item * item

    with ThreadPoolExecutor(3) as executor:
        got = list(read_ahead(executor, read, list(range(20)), depth=3))
    assert got == [(i, i * i) for i in range(20)] and 1 < most[0] <= 3


def test_the_default_counts_the_machines_cpus_where_the_system_has_no_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS has no ``os.sched_getaffinity``: a researcher's scorer there uses every CPU."""
    import os

    monkeypatch.delenv("EVAL_THREADS", raising=False)
    monkeypatch.delenv("EVAL_CONCURRENCY", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert threads() == 6


def test_reading_ahead_leaves_a_core_to_a_side_job_and_takes_it_back_after() -> None:
    """While a side job (the predictions' checksum) holds a core, the caller reads the next item itself:
    never more busy threads than cores; once it is done, the pool reads ahead again."""
    import threading

    from evaluation_workers.threads import side_job

    caller, readers = threading.get_ident(), []

    def read(item: int) -> int:
        readers.append((item, threading.get_ident()))
        return item

    job = side_job()
    job.__enter__()
    with ThreadPoolExecutor(1) as executor:
        got = []
        for item, value in read_ahead(executor, read, range(6), depth=1):
            got.append(value)
            if item == 2:
                job.__exit__(None, None, None)  # the side job ends while item 2 is worked on
    assert got == list(range(6))
    by = dict(readers)
    assert all(by[i] == caller for i in (0, 1, 2)), readers
    assert all(by[i] != caller for i in (3, 4, 5)), readers


def test_openscan_reads_one_scene_fewer_ahead_while_the_checksum_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On two threads the checksum's thread and two reading threads took turns on two cores (issue 28:
    slower than one thread on an Intel Xeon; on AMD, 4.46 -> 3.72 s for a 5.7 GB stored zip of eight
    aspects). While the checksum runs, one scene at most is read ahead; the result is the same as on one
    thread."""
    import argparse
    import threading
    import time

    from evaluation_workers import results
    from evaluation_workers.synthetic import openscan as synthetic
    from evaluation_workers.tracks.openscan import official_zip, score

    data = synthetic.generate(argparse.Namespace(
        out=tmp_path, scenes=6, points=2000, instances=(3, 5), masks=8, aspects=["material"],
        format="official", semantic=False, missing=0, seed=3))
    monkeypatch.setenv("EVAL_THREADS", "1")
    one_thread = score(data["labels"], data["official"])

    hashing, three_read, lock = threading.Event(), threading.Event(), threading.Lock()
    state = {"holding": False, "in_flight": 0, "most_while_hashing": 0, "reads": 0}
    real_give_back, real_read = results.give_back, official_zip.OfficialReader.read

    def give_back(mapped, start, end):  # type: ignore[no-untyped-def]
        state["holding"] = True
        hashing.set()
        three_read.wait(10)  # the checksum holds its core until three scenes are read
        state["holding"] = False
        real_give_back(mapped, start, end)

    def read(self, scene):  # type: ignore[no-untyped-def]
        with lock:
            state["in_flight"] += 1
            if state["holding"]:
                state["most_while_hashing"] = max(state["most_while_hashing"], state["in_flight"])
        time.sleep(0.02)  # reads in flight together overlap
        try:
            return real_read(self, scene)
        finally:
            with lock:
                state["in_flight"] -= 1
                state["reads"] += 1
                if state["reads"] == 3:
                    three_read.set()

    monkeypatch.setattr(results, "give_back", give_back)
    monkeypatch.setattr(official_zip.OfficialReader, "read", read)
    monkeypatch.setenv("EVAL_THREADS", "2")
    results.hash_ahead(data["official"])  # as the command line does, before scoring
    try:
        assert hashing.wait(10)
        two_threads = score(data["labels"], data["official"])
    finally:
        results.forget_ahead(data["official"])
    assert {k: two_threads[k] for k in ("metrics", "breakdown", "details")} == \
        {k: one_thread[k] for k in ("metrics", "breakdown", "details")}
    assert state["reads"] == 6 and state["most_while_hashing"] == 1, state
