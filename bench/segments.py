#!/usr/bin/env python
"""The text index's segments after add_many, and what they cost (issue 34, RESULTS 28).

Builds one lexical namespace of --size memories with add_many in batches of
--batch (LoCoMo turns replicated as bench/scale.py does), prints FTS5's
segments level by level after every fifth of the build (schema.fts_levels:
a level's merge in progress, each segment's leaf pages), then:

  bm25 stage   heap_bm25_search(q, ns, 50) over --questions questions, thread
               CPU per question (mean over the questions, best of --reps passes
               after a warm-up pass)
  adds into    --more batches of --batch into a synced copy of the built
               store: adds a second (wall and process CPU), each batch's and
               their mean, and the segments after each

To compare two builds, run it once per checkout, each with its own store:
  python bench/segments.py --data ../shared/data/locomo/locomo10.json --size 1000000
  PYTHONPATH=../old python bench/segments.py --data ... --size 1000000 --store /tmp/old.db
Options: --size, --batch, --more, --questions, --reps, --seed, --store PATH (kept;
reused when it already holds --size memories).  Not in CI: 1M takes two minutes
to build.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf  # noqa: E402  (the corpus, the questions)

NS = "solo"


def _shape(c: Any) -> str:
    from heapmem.db import schema

    if not hasattr(schema, "fts_levels"):  # a build from before 28
        return "segments: not readable by this heapmem"
    levels = schema.fts_levels(c)
    n = sum(len(p) for _, p in levels)
    return f"{n} segments: " + "; ".join(
        f"L{i} {pages}" + (f" ({m} merging)" if m else "") for i, (m, pages) in enumerate(levels)
        if pages)


def _open(path: str, now: float) -> Any:
    import heapmem

    return heapmem.open(path, clock=lambda: now, embedder=None)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=perf.DEFAULT_DATA)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--more", type=int, default=10)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--store")
    args = ap.parse_args(argv)
    import heapmem
    from heapmem.db import native

    print(f"heapmem from {os.path.dirname(heapmem.__file__)}")
    base = perf.Base(args.data)
    path = args.store or f"/tmp/segments-{args.size}.db"
    mem = _open(path, base.now)
    have = mem.connection.execute("SELECT count(*) FROM memories").fetchall()[0][0]
    if have not in (0, args.size):
        print(f"{path} holds {have:,} memories, not 0 or {args.size:,}: remove it", file=sys.stderr)
        return 2
    if have == 0:
        t, done = time.perf_counter(), 0
        for b in perf.batched(perf.iter_memories(base, args.size, "single", args.seed),
                              args.batch):
            mem.add_many(b)
            done += len(b)
            if done % max(args.batch, args.size // 5) == 0 or done == args.size:
                print(f"built {done:,}: {done / (time.perf_counter() - t):,.0f} adds/s; "
                      f"{_shape(mem.connection)}", flush=True)
    else:
        print(f"reusing {path}: {_shape(mem.connection)}")
    Q = perf.make_queries(base, args.size, "single", args.seed, args.questions, "segments")
    qs = [q for q, _ in Q["queries"] if native.match(q, NS) is not None]
    c = mem.connection
    best = float("inf")
    for rep in range(args.reps + 1):
        t = time.thread_time()
        for q in qs:
            c.execute("SELECT heap_bm25_search(?, ?, 50)", (q, NS)).fetchall()
        if rep:  # the first pass warms the page cache
            best = min(best, (time.thread_time() - t) / len(qs))
    print(f"bm25 stage: {best * 1e3:.3f} ms CPU a question (mean of {len(qs)}, best of "
          f"{args.reps})")
    mem.close()

    copy = perf.synced_copy(path)
    mem = _open(copy, base.now)
    walls, cpus = [], []
    for b in perf.batched(list(perf.iter_memories(base, args.size + args.more * args.batch,
                                                  "single", args.seed, start=args.size)),
                          args.batch):
        t, p = time.perf_counter(), time.process_time()
        mem.add_many(b)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - p)
        print(f"into: {len(b) / walls[-1]:,.0f} adds/s wall, {len(b) / cpus[-1]:,.0f} CPU; "
              f"{_shape(mem.connection)}", flush=True)
    mem.close()
    n = args.more * args.batch
    print(f"adds into {args.size:,}: {n / sum(walls):,.0f}/s wall, {n / sum(cpus):,.0f}/s CPU "
          f"(slowest batch {args.batch / max(walls):,.0f}/s wall)")
    perf.remove_sqlite(copy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
