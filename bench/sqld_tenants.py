"""Tenant databases on one libSQL server (sqld --enable-namespaces) and
read-your-writes through a replica: what they cost.

    python bench/sqld_tenants.py              # ~2 minutes on 2 cores; prints markdown
    python bench/sqld_tenants.py --databases 1,20 --writes 50   # a quick look

1. Read-your-writes: an add through a replica, then get() of it through the
   same connection, --writes times: what a read cost (the replica waits for
   the write before it runs it), how many were sent again by the client
   (should the replica answer from before the write all the same), against
   the same loop on the primary, and how many reads would have missed the
   write without it (the connection's index forgotten before each get).
2. New stores through a fresh replica: create_database() on the primary's
   admin API, open() through the replica (the schema forwarded to the
   primary, read back once the replica has it), an add, a recall of it.
3. Many databases: untracked recall through the replica, round robin over D
   databases of --memories LoCoMo memories each (bench/perf.py's multi mode,
   one namespace), --rounds times and 150 recalls at least, each database's
   connection held open (sqld allows 128 connections at once:
   --max-concurrent-connections), then --cycle databases each opened,
   recalled once and closed, in turn (an app's LRU of open stores missing
   every time).  sqld keeps --max-active-namespaces
   (100 by default) databases open; past that, it opens again the ones it
   closed.

Servers run on loopback on free ports, in a temporary directory, and are
killed at the end (tests/_sqld.py).  Memories are read from
<repo>/../shared/data/locomo/locomo10.json (--data).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

from perf import DEFAULT_DATA, Base, iter_memories, make_queries, pct  # noqa: E402

import heapmem  # noqa: E402
from heapmem.remote import sqld  # noqa: E402

from _sqld import Cluster  # noqa: E402

SEED = 7


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.2f} ms"


class Counted:
    """Counts the Hrana requests a Memory's connection sends."""

    def __init__(self, mem: heapmem.Memory):
        self.n = 0
        client = mem.connection.client
        real = client.pipeline

        def pipeline(baton: Any, requests: Any) -> Any:
            self.n += 1
            return real(baton, requests)

        client.pipeline = pipeline


def bench_ryw(url: str, writes: int, tag: str, forget: bool = False) -> dict[str, Any]:
    """Each add followed at once by a get of it through the same connection
    (forget: with the connection's replication index forgotten first, as a
    client without read-your-writes would read)."""
    mem = heapmem.open(url, database="ryw")
    sent = Counted(mem)
    reads, again, missed = [], [], 0
    try:
        for i in range(writes):
            mid = f"{tag}-{i}"
            mem.add(f"Maya's read-your-writes probe number {i}", id=mid, namespace=tag)
            if forget:
                mem.connection._index = mem.connection._read_index = 0
            sent.n = 0
            t = time.perf_counter()
            got = mem.get(mid)
            reads.append(time.perf_counter() - t)
            missed += got is None
            again.append(sent.n - 1)
            time.sleep(random.uniform(0, 0.01))
    finally:
        mem.close()
    if missed and not forget:
        raise RuntimeError(f"{missed} writes were not read back through {url}")
    waited = [a for a in again if a]
    res = {"writes": writes, "reads_sent_again": len(waited), "missed": missed,
           "max_resends": max(again), "read_p50": pct(reads, 50), "read_p95": pct(reads, 95),
           "read_max": max(reads)}
    log(f"read-your-writes on the {tag}: {res}")
    return res


def bench_new_stores(cl: Cluster, n: int) -> dict[str, Any]:
    opens, found = [], 0
    for i in range(n):
        name = f"fresh-{i}"
        sqld.create_database(cl.primary.admin_url, name)
        t = time.perf_counter()
        mem = heapmem.open(cl.replicas[0].url, database=name)
        opens.append(time.perf_counter() - t)
        try:
            mem.add("Booked the flight: SFO to LIS, departs March 14", id="m1",
                    namespace="user:maya")
            found += mem.recall("When is my flight to Lisbon?", namespace="user:maya").ids == ["m1"]
        finally:
            mem.close()
    res = {"stores": n, "open_p50": pct(opens, 50), "open_max": max(opens), "found": found}
    log(f"new stores through a fresh replica: {res}")
    return res


def bench_many(cl: Cluster, base: Base, counts: list[int], cycle: int, memories: int,
               rounds: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = list(iter_memories(base, memories, "multi", SEED))
    qs = [q for q, _ in make_queries(base, memories, "multi", SEED, 200, "tenants")["queries_ns0"]]
    clock = lambda: base.now  # noqa: E731
    made: list[str] = []

    def make(d: int) -> None:
        while len(made) < d:
            name = f"tenant-{len(made):04d}"
            sqld.create_database(cl.primary.admin_url, name)
            with heapmem.open(cl.primary.url, database=name, clock=clock) as m:
                m.add_many(rows)
            made.append(name)
            if len(made) % 25 == 0:
                log(f"{len(made)} databases of {memories} memories")

    out = []
    for d in counts:
        make(d)
        mems = [heapmem.open(cl.replicas[0].url, database=name, clock=clock)
                for name in made[:d]]
        try:
            for m in mems:  # each has replicated its memories
                deadline = time.monotonic() + 60
                while m.count < memories:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the replica did not catch up in 60 s")
                    time.sleep(0.05)
            times = []
            rng = random.Random(f"{SEED}:{d}")
            for r in range(max(rounds, -(-150 // d)) + 1):  # 150 recalls at least
                for m in mems:
                    q = qs[rng.randrange(len(qs))]
                    t = time.perf_counter()
                    m.recall(q, namespace="tenant-0000", track=False)
                    if r:  # the first round opens each database's connection
                        times.append(time.perf_counter() - t)
        finally:
            for m in mems:
                m.close()
        res = {"databases": d, "recalls": len(times), "p50": pct(times, 50),
               "p95": pct(times, 95)}
        log(f"recall over {d} databases: {res}")
        out.append(res)
    make(cycle)
    times, errors = [], 0
    rng = random.Random(f"{SEED}:cycle")
    for _r in range(rounds):
        for name in made[:cycle]:
            t = time.perf_counter()
            try:
                with heapmem.open(cl.replicas[0].url, database=name, clock=clock) as m:
                    m.recall(qs[rng.randrange(len(qs))], namespace="tenant-0000", track=False)
            except heapmem.HeapmemError as e:
                errors += 1
                log(f"{name}: {e}")
            times.append(time.perf_counter() - t)
    cyc = {"databases": cycle, "rounds": rounds, "p50": pct(times, 50), "p95": pct(times, 95),
           "errors": errors}
    log(f"open, recall, close over {cycle} databases: {cyc}")
    return out, cyc


def report(res: dict[str, Any], cmd: str) -> str:
    lines = [f"Command: `{cmd}`  ", f"Date: {res['date']}  ",
             f"Machine: {res['machine']}; {res['sqld'].replace('sqld sqld', 'sqld')}; loopback, "
             "a primary with namespaces and one replica (on the same 2 cores as the client).",
             "", "Read-your-writes: an add through a connection, then get() of it through the "
             "same connection at once.", "",
             "| server | adds | reads that missed the write | reads the client sent again | "
             "read p50 | read p95 | read max |", "|---|---|---|---|---|---|---|"]
    for role, label in (("replica", "replica"), ("primary", "primary"),
                        ("forgot", "replica, index forgotten before each read")):
        r = res["ryw"][role]
        lines.append(f"| {label} | {r['writes']} | {r['missed']} | {r['reads_sent_again']} "
                     f"| {ms(r['read_p50'])} | {ms(r['read_p95'])} | {ms(r['read_max'])} |")
    n = res["new"]
    lines += ["", f"New stores through a fresh replica: {n['stores']} databases created on the "
              f"primary, each opened through the replica at once: open() p50 "
              f"{ms(n['open_p50'])}, max {ms(n['open_max'])}; the memory added was recalled "
              f"at once in {n['found']} of {n['stores']}.", "",
              f"Untracked recall through the replica, round robin over the databases "
              f"({res['memories']} memories each, one namespace), each database's connection "
              "held open; sqld keeps 100 databases open (--max-active-namespaces).", "",
              "| databases | recalls | p50 | p95 |", "|---|---|---|---|"]
    for r in res["many"]:
        lines.append(f"| {r['databases']} | {r['recalls']} | {ms(r['p50'])} | {ms(r['p95'])} |")
    c = res["cycle"]
    lines += ["", f"Open, recall, close through the replica, {c['databases']} databases in turn, "
              f"{c['rounds']} rounds: p50 {ms(c['p50'])}, p95 {ms(c['p95'])}; errors: "
              f"{c['errors']}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--new-stores", type=int, default=20)
    ap.add_argument("--databases", default="1,50,120")
    ap.add_argument("--cycle", type=int, default=150)
    ap.add_argument("--memories", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--date", default=dt.date.today().isoformat())
    a = ap.parse_args()
    random.seed(SEED)
    base = Base(a.data)
    work = tempfile.mkdtemp(prefix="heapmem-sqld-tenants-")
    res: dict[str, Any] = {"date": a.date, "sqld": sqld.version(sqld.binary()),
                           "memories": a.memories,
                           "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                                      f"Python {platform.python_version()}"}
    cl = Cluster(work, replicas=1, namespaces=True)
    try:
        sqld.create_database(cl.primary.admin_url, "ryw")
        res["ryw"] = {"replica": bench_ryw(cl.replicas[0].url, a.writes, "replica"),
                      "primary": bench_ryw(cl.primary.url, a.writes, "primary"),
                      "forgot": bench_ryw(cl.replicas[0].url, a.writes, "forgot", True)}
        res["new"] = bench_new_stores(cl, a.new_stores)
        res["many"], res["cycle"] = bench_many(cl, base,
                                               [int(d) for d in a.databases.split(",")],
                                               a.cycle, a.memories, a.rounds)
    finally:
        cl.stop()
        shutil.rmtree(work, ignore_errors=True)
    cmd = "python bench/sqld_tenants.py" + "".join(f" {x}" for x in sys.argv[1:])
    print(report(res, cmd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
