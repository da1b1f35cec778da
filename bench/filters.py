"""What recall's kind and time filters cost (issue 23).

    python bench/filters.py [--memories 100000] [--namespaces 1,20] [--queries 200]

A seeded synthetic store per namespace count (facts, preferences and
episodes over a made-up vocabulary, created over 300 days), hybrid recall
(the default, potion-base-8M) and lexical (embedder=None).  For each, the
p50 and p90 of recall(track=False) in milliseconds: unfiltered, with
kinds="preference" (a third of the memories), with since= the last 30 days
(a tenth), and both.  Prints a markdown table; figures go to bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import heapmem  # noqa: E402

NOW = 1_760_000_000.0
DAY = 86400.0
WORDS = ("flight lisbon hotel booked march dinner friend sister paris train seat window aisle "
         "beach book music film doctor visit garden coffee tea bike run gym office meeting "
         "project deadline birthday gift cake recipe pasta salad camera phone laptop").split()
KINDS = ("fact", "preference", "episode")
FILTERS = {
    "none": {},
    "kinds=preference": {"kinds": "preference"},
    "since 30 days": {"since": NOW - 30 * DAY},
    "both": {"kinds": "preference", "since": NOW - 30 * DAY},
}


def build(path: str, n: int, namespaces: int, embedder: object) -> None:
    rng = random.Random(0)
    rows = [{"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))),
             "kind": KINDS[i % 3], "namespace": f"user:{i % namespaces}",
             "created_at": NOW - 300 * DAY * rng.random()} for i in range(n)]
    with heapmem.open(path, clock=lambda: NOW, embedder=embedder) as m:
        for i in range(0, n, 5000):
            m.add_many(rows[i:i + 5000], copy=True)


def measure(path: str, queries: list[str], embedder: object) -> dict[str, tuple[float, float]]:
    out = {}
    with heapmem.open(path, clock=lambda: NOW, readonly=True, embedder=embedder) as m:
        for q in queries[:20]:
            m.recall(q, namespace="user:0", track=False)
        for name, kw in FILTERS.items():
            times = []
            for q in queries:
                t = time.perf_counter()
                m.recall(q, namespace="user:0", track=False, **kw)
                times.append((time.perf_counter() - t) * 1000)
            times.sort()
            out[name] = (statistics.median(times), times[int(0.9 * len(times))])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--namespaces", default="1,20")
    ap.add_argument("--queries", type=int, default=200)
    a = ap.parse_args(argv)
    rng = random.Random(1)
    queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(a.queries)]
    print(f"{a.memories:,} memories, {a.queries} queries in namespace user:0, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| namespaces | recall | " + " | ".join(FILTERS) + " |")
    print("|---" * (2 + len(FILTERS)) + "|")
    with tempfile.TemporaryDirectory() as d:
        for ns in (int(x) for x in a.namespaces.split(",")):
            for label, emb in (("hybrid", heapmem.DEFAULT_EMBEDDER), ("lexical", None)):
                path = os.path.join(d, f"{ns}-{label}.db")
                build(path, a.memories, ns, emb)
                r = measure(path, queries, emb)
                cells = [f"{p50:.1f} (p90 {p90:.1f})" for p50, p90 in r.values()]
                print(f"| {ns} | {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
