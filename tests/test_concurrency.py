"""Several processes, each with several threads, hammer one store file.

Each thread adds, add_many's, recalls (tracked and not), gives feedback,
marks used, forgets its own scratch memories and reads; some threads share
one Memory, one reopens its store now and then.  All workers start on a
fresh path at the same instant, so they also race to create the schema.
Afterwards: no call raised, every acknowledged add (not acknowledged as
forgotten) is present, every acknowledged forget is gone, every acknowledged
feedback is recorded, and mem.check() passes (integrity_check, FTS index,
links == a replay of the event log).

CI runs 3 processes x 3 threads x 80 calls (a number of calls, not a time,
so what the test covers does not depend on the machine's speed);
HEAPMEM_SOAK=1 runs the soak variant (HEAPMEM_SOAK_PROCS x
HEAPMEM_SOAK_THREADS for HEAPMEM_SOAK_SECONDS, default 4 x 4 x 60 s).
"""
import json
import os
import subprocess
import sys

import apsw
import pytest

import heapmem
import heapmem.errors

sys.path.insert(0, os.path.dirname(__file__))
from _workers import read_acks  # noqa: E402

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_workers.py")
SOAK = os.environ.get("HEAPMEM_SOAK") == "1"


def run_stress(tmp_path, procs, threads, seed, *, ops=0, seconds=0.0):
    """procs processes x threads threads, each making ops calls (or, with
    ops 0, calls for seconds), all starting together once every process
    has imported heapmem."""
    path = str(tmp_path / "shared.db")
    out = tmp_path / "out"
    out.mkdir()
    ps = [subprocess.Popen([sys.executable, WORKERS, "stress", path, str(out), str(p),
                            str(threads), str(ops), str(seconds), str(seed)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
          for p in range(procs)]
    for p in ps:  # every process has imported heapmem: start them all at once
        assert p.stdout.readline() == "ready\n", p.stderr.read()
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()
    stats = []
    for p in ps:
        so, se = p.communicate(timeout=seconds + 600)
        assert p.returncode == 0, se
        stats.append(json.loads(so.strip().splitlines()[-1]))
    errors = []
    for p in range(procs):
        errors += read_acks(str(out / f"errors-{p}.txt"))
    assert not errors, "calls raised:\n" + "\n".join(e[1] for e in errors[:5])

    added, forgotten, feedback = {}, set(), {}
    for p in range(procs):
        for t in range(threads):
            for rec in read_acks(str(out / f"acks-{p}-{t}.txt")):
                if rec[0] == "A":
                    added[rec[1]] = rec[2]
                elif rec[0] == "A*":
                    for i in rec[1]:
                        added[i] = rec[2]
                elif rec[0] == "X":
                    forgotten.update(rec[1])
                elif rec[0] == "F":
                    feedback[rec[1]] = len(rec[2]) + len(rec[3])
    total = {k: sum(s[k] for s in stats) for k in stats[0]}
    with heapmem.open(path) as mem:
        report = mem.check()
        assert report.ok, report.problems
        c = mem.connection
        present = {r[0]: r[1] for r in c.execute("SELECT id, namespace FROM memories")}
        lost = [i for i in added if i not in forgotten and i not in present]
        assert not lost, f"{len(lost)} acknowledged adds are missing: {lost[:10]}"
        assert all(present[i] == ns for i, ns in added.items() if i in present)
        back = [i for i in forgotten if i in present]
        assert not back, f"forgotten memories are still there: {back[:10]}"
        assert set(present) <= set(added), "memories nobody acknowledged adding"
        # every acknowledged feedback left one event per judged memory (the
        # recall itself may since have been dropped by a forget: events keep
        # their deltas with recall_id NULL, so count those recalls that remain)
        events = dict(c.execute("SELECT recall_id, count(*) FROM events "
                                "WHERE recall_id IS NOT NULL GROUP BY recall_id").fetchall())
        recalls = {r[0] for r in c.execute("SELECT id FROM recalls")}
        short = [rid for rid, n in feedback.items()
                 if rid in recalls and events.get(rid, 0) < n]
        assert not short, f"acknowledged feedback missing events: {short[:10]}"
        assert report.events >= sum(feedback.values())
    return total, len(added), len(forgotten), len(feedback)


def test_processes_and_threads_on_one_file(tmp_path):
    total, nadded, nforgot, nfb = run_stress(tmp_path, procs=3, threads=3, seed=1, ops=80)
    # the run did real work in every kind of call (the seeded mix of 720 calls)
    assert total["adds"] > 50 and total["recalls"] > 50 and total["feedbacks"] > 20, total
    assert total["forgets"] > 0, total
    print(f"\nstress: 3 processes x 3 threads x 80 calls: {total}; {nadded} adds acknowledged, "
          f"{nforgot} forgotten, {nfb} feedbacks, nothing lost")


@pytest.mark.soak
@pytest.mark.skipif(not SOAK, reason="soak test: set HEAPMEM_SOAK=1")
def test_soak_processes_and_threads(tmp_path):
    procs = int(os.environ.get("HEAPMEM_SOAK_PROCS", "4"))
    threads = int(os.environ.get("HEAPMEM_SOAK_THREADS", "4"))
    seconds = float(os.environ.get("HEAPMEM_SOAK_SECONDS", "60"))
    total, nadded, nforgot, nfb = run_stress(tmp_path, procs, threads, seed=2, seconds=seconds)
    print(f"\nsoak: {procs} processes x {threads} threads x {seconds:g} s: {total}; "
          f"{nadded} adds acknowledged, {nforgot} forgotten, {nfb} feedbacks, nothing lost")


def test_a_writer_waits_for_the_lock_in_short_tries_and_no_longer_than_it_may(tmp_path,
                                                                             monkeypatch):
    """A write held up by another connection's write lock tries again after
    sleeps of 50 microseconds at first and 2 ms at most (schema.wait_for_lock),
    not SQLite's 1, 2, 5, ... 100 ms: released while it waits, the lock is
    taken and the write done; held past the wait, the write fails with one
    sentence and nothing is written.  (The sleeps are counted, never timed.)"""
    import threading

    from heapmem.db import schema
    slept: list[float] = []
    real = schema.time.sleep
    monkeypatch.setattr(schema.time, "sleep", lambda s: (slept.append(s), real(s))[1])
    path = str(tmp_path / "a.db")
    with heapmem.open(path) as a, heapmem.open(path) as b:
        a.add("first")
        a.connection.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.05, lambda: a.connection.execute("ROLLBACK"))
        release.start()
        b.add("second")  # waited for a's lock, then wrote
        release.join()
        assert b.count == 2 and slept and slept[0] <= 0.0001 and max(slept) <= 0.002
        a.connection.execute("BEGIN IMMEDIATE")
        schema.wait_for_lock(b.connection, 30)
        with pytest.raises(heapmem.errors.StoreBusyError, match="another connection held"):
            b.add("third")
        a.connection.execute("ROLLBACK")
        assert b.count == 2


class _BusyAtTheSwitch:
    """A connection whose PRAGMA journal_mode=WAL answers BUSY `times` times
    (as SQLite can, without calling the busy handler, when many processes
    open a new file at once), then switches."""

    def __init__(self, times):
        self.times = times
        self.tries = 0

    def execute(self, statement):
        assert statement == "PRAGMA journal_mode=WAL"
        self.tries += 1
        if self.tries <= self.times:
            raise apsw.BusyError("database is locked")
        return self

    def fetchall(self):
        return [("wal",)]


def test_the_switch_to_wal_tries_again_and_then_says_busy_in_one_sentence(monkeypatch):
    """The fresh clone's CI once saw open() raise apsw's raw BusyError from
    PRAGMA journal_mode=WAL while processes opened one new file at once: the
    switch is tried again as long as the busy handler would wait, then
    refused with StoreBusyError (a virtual clock: no test waits)."""
    from heapmem.db import schema
    now = [0.0]
    monkeypatch.setattr(schema.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(schema.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    c = _BusyAtTheSwitch(times=5)
    schema._journal_wal(c, "shared.db")
    assert c.tries == 6
    c = _BusyAtTheSwitch(times=10**9)
    with pytest.raises(heapmem.errors.StoreBusyError) as e:
        schema._journal_wal(c, "shared.db")
    assert "\n" not in str(e.value) and "busy" in str(e.value)
    assert now[0] >= schema.BUSY_MS / 1000 and c.tries > 10
