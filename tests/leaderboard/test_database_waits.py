"""The deadline on every wait for PostgreSQL, and the limit on threads waiting at once (leaderboard.lib.postgres).

Against a real server of the session's own (``private_postgres``): a statement
that runs longer than the deadline (``pg_sleep``) is, to the client, a server
that does not answer. The whole site with the server stopped (SIGSTOP) is in
tests/faults/test_hung_database.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import utils as dbutils

from leaderboard.lib.postgres import waits
from leaderboard.ops import outages

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def policy():
    yield lambda timeout, waiters: waits.enable(timeout, waiters)
    waits.disable()


def sleep_on(url: str, seconds: float, results: list, index: int) -> None:
    try:
        with waits.DeadlineConnection.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_sleep(%s)", [seconds])
        results[index] = "answered"
    except Exception as exc:  # noqa: BLE001 - the test looks at which
        results[index] = exc


def test_it_closes_a_connection_whose_answer_is_late_and_raises_an_outage(private_postgres, policy):
    url = private_postgres.url()
    with waits.DeadlineConnection.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_sleep(0.6)")  # no policy (a worker, a migration): as long as it takes
        policy(0.3, 3)
        started = time.monotonic()
        with pytest.raises(waits.QueryDeadline, match=r"did not answer within 0\.3 s \(DATABASE_QUERY_TIMEOUT\)"):
            conn.execute("SELECT pg_sleep(5)")
        took = time.monotonic() - started
        assert 0.3 <= took < 1.5, took
        assert conn.closed
    # What Django makes of it (django.db.utils wraps the driver's error): a database outage, a 503.
    wrapped = dbutils.OperationalError(*waits.QueryDeadline("x").args)
    wrapped.__cause__ = waits.QueryDeadline("x")
    assert outages.outage(wrapped) == outages.DATABASE
    with waits.DeadlineConnection.connect(url, autocommit=True) as conn:  # the server itself is fine
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_at_most_the_limit_of_threads_wait_and_the_rest_are_refused_until_an_answer(private_postgres, policy):
    url = private_postgres.url()
    gate = policy(5, 2).gate
    probes: list[float] = []
    gate.probe = lambda: probes.append(time.monotonic()) or False  # the server does not answer a probe either
    results: list = [None] * 3
    slow = [threading.Thread(target=sleep_on, args=(url, 2.5, results, i)) for i in range(2)]
    for t in slow:
        t.start()
    deadline = time.monotonic() + 5
    while gate.waiting < 2:  # both connected and inside their statement
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)
    started = time.monotonic()
    sleep_on(url, 0, results, 2)  # a third thread: waits for a slot until the database has been silent for stall_after, refused
    assert isinstance(results[2], waits.DatabaseBusy), results[2]
    assert gate.stall_after - 0.5 <= time.monotonic() - started < gate.stall_after + 1
    assert len(probes) == 1
    started = time.monotonic()
    sleep_on(url, 0, results, 2)  # the database is known not to answer: refused at once
    assert isinstance(results[2], waits.DatabaseBusy) and time.monotonic() - started < 0.5
    for t in slow:
        t.join(10)
    assert results[:2] == ["answered", "answered"]
    assert not gate.stalled and gate.waiting == 0
    sleep_on(url, 0, results, 2)
    assert results[2] == "answered"


def test_a_busy_but_answering_database_refuses_no_one(private_postgres, policy):
    """More threads than slots, each with a short statement: the grace lets each have its turn."""
    url = private_postgres.url()
    policy(3, 2)
    results: list = [None] * 6
    threads = [threading.Thread(target=sleep_on, args=(url, 0.02, results, i)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == ["answered"] * 6


def test_a_database_that_answers_slowly_refuses_no_one(private_postgres, policy):
    """A loaded machine: every statement takes longer than a moment, and more threads want one than
    there are slots; a wait that is answered within the stall time is a slow database, not a hung one
    (seen in CI: twelve uploads and eight pollers on two cores, one upload answered 503)."""
    url = private_postgres.url()
    gate = policy(5, 2).gate
    results: list = [None] * 6
    threads = [threading.Thread(target=sleep_on, args=(url, 0.4, results, i)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == ["answered"] * 6
    assert not gate.stalled



def test_one_long_wait_beside_answered_ones_refuses_no_one(private_postgres, policy):
    """One statement that takes long (a lock held by another transaction, a slow report) while the
    process's other waits are answered: the database answers, so a thread that finds every slot taken
    waits its turn (seen in CI on a loaded two-core machine: twelve uploads and eight pollers, every
    upload answered 503 'the oldest unanswered for 1.1 s' while the other slot's statements came back)."""
    url = private_postgres.url()
    gate = policy(5, 2).gate
    results: list = [None] * 9
    slow = threading.Thread(target=sleep_on, args=(url, gate.stall_after * 2.5, results, 8))
    slow.start()
    deadline = time.monotonic() + 5
    while gate.waiting < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    quick = [threading.Thread(target=sleep_on, args=(url, 0.15, results, i)) for i in range(8)]
    for t in quick:
        t.start()
    for t in [*quick, slow]:
        t.join(20)
    assert results == ["answered"] * 9
    assert not gate.stalled

PROBE = """
import django, json
django.setup()
from django.conf import settings
from django.db import connection
from leaderboard.lib.postgres import waits
options = settings.DATABASES["default"]["OPTIONS"]
out = {"engine": settings.DATABASES["default"]["ENGINE"], "keepalives": options.get("keepalives"),
       "tcp_user_timeout": options.get("tcp_user_timeout"), "connect_timeout": options.get("connect_timeout")}
waits.enable(settings.DATABASE_QUERY_TIMEOUT, settings.WEB_THREADS - 1)
with connection.cursor() as cursor:
    cursor.execute("SHOW statement_timeout")
    out["statement_timeout"] = cursor.fetchone()[0]
out["connection"] = type(connection.connection).__name__
out["limit"] = waits.current().gate.limit
print(json.dumps(out))
"""


def test_the_settings_give_postgresql_the_deadline_backend_and_sqlite_its_own(private_postgres, tmp_path):
    import json

    env = {**{k: v for k, v in os.environ.items() if k != "DATABASE_URL"}, "DJANGO_SETTINGS_MODULE": "leaderboard.settings",
           "DATABASE_URL": private_postgres.url(), "DATABASE_QUERY_TIMEOUT": "3", "WEB_THREADS": "6",
           "SECRET_KEY": "x", "DATA_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out == {"engine": "leaderboard.lib.postgres", "keepalives": 1, "tcp_user_timeout": 30000,
                   "connect_timeout": 5, "statement_timeout": "2s",
                   "connection": "DeadlineConnection", "limit": 5}
    env.pop("DATABASE_URL")
    sqlite = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                             "print(settings.DATABASES['default']['ENGINE'])"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert sqlite.stdout.strip() == "django.db.backends.sqlite3", sqlite.stderr


def test_slow_statements_on_every_slot_of_a_server_that_answers_its_probe_refuse_no_one(private_postgres, policy):
    """Every slot waits on a statement longer than the silence (a lock convoy across the web processes
    looks like this to one of them); the server answers the probe, so a third thread waits its turn."""
    url = private_postgres.url()
    gate = policy(5, 2).gate
    results: list = [None] * 3
    slow = [threading.Thread(target=sleep_on, args=(url, gate.stall_after * 4, results, i)) for i in range(2)]
    for t in slow:
        t.start()
    deadline = time.monotonic() + 5
    while gate.waiting < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sleep_on(url, 0, results, 2)
    for t in slow:
        t.join(10)
    assert results == ["answered"] * 3
    assert not gate.stalled
    # The probe itself: a server that answers, and one that is not there.
    assert waits._probe() is True
    waits._probe_target = ("host=127.0.0.1 port=9 connect_timeout=2", {})
    assert waits._probe() is False


def test_a_transaction_holding_a_lock_is_not_held_back_by_the_threads_waiting_for_it(private_postgres, policy):
    """Seen with twelve concurrent uploads of one user: the threads in the slots waited on the user's row
    lock, and the thread holding it waited for a slot to finish its transaction, so nothing moved until
    the server's statement timeout (503s). A connection inside a transaction is let through."""
    url = private_postgres.url()
    with waits.DeadlineConnection.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE IF NOT EXISTS gate_lock (id int PRIMARY KEY)")
        setup.execute("INSERT INTO gate_lock VALUES (1) ON CONFLICT DO NOTHING")
    gate = policy(3, 1).gate
    results: list = [None]
    with waits.DeadlineConnection.connect(url) as holder:
        holder.execute("SELECT id FROM gate_lock WHERE id = 1 FOR UPDATE")  # the lock, in a transaction
        waiter = threading.Thread(target=lambda: results.__setitem__(0, lock_and_answer(url)))
        waiter.start()
        deadline = time.monotonic() + 5
        while gate.waiting < 1:  # the only slot: a wait on the lock the holder has
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(gate.stall_after * 2)  # silent long enough to ask the probe, which the server answers
        started = time.monotonic()
        holder.execute("SELECT 1")
        holder.commit()
        took = time.monotonic() - started
        waiter.join(10)
    assert results == ["answered"]
    assert took < 1, took  # not held until the server cancelled the waiting statement (2 s here)
    assert not gate.stalled


def lock_and_answer(url: str) -> str:
    try:
        with waits.DeadlineConnection.connect(url, autocommit=True) as conn:
            conn.execute("SELECT id FROM gate_lock WHERE id = 1 FOR UPDATE")
        return "answered"
    except Exception as exc:  # noqa: BLE001 - the test looks at which
        return repr(exc)
