#!/usr/bin/env python
"""add_many's rate alone (issue 33: add_many through the C core's heap_add_many).

The LoCoMo turns ("Speaker: text", kind fact, source the speaker), repeated to
--memories, one namespace per 5,882 of them as bench/perf.py's multi-tenant
stores hold them, added to a new store in add_many batches of --batch; only the
add_many calls are timed.  Prints one line: memories per second in wall time
and in this process's CPU time (a shared machine inflates the first far more
than the second), with the embedder (--embedder potion, the default store, or
none: lexical).

    python bench/add_many.py --embedder none --memories 20000
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import heapmem

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                            "data", "locomo", "locomo10.json")


def turns(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = []
    for conv in data:
        for k, v in conv["conversation"].items():
            if k.startswith("session_") and isinstance(v, list):
                out += [(t["speaker"], f"{t['speaker']}: {t['text']}") for t in v]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--memories", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--embedder", choices=("potion", "none"), default="potion")
    a = ap.parse_args()
    base = turns(a.data)
    per_ns = len(base)
    rows = (base * (a.memories // per_ns + 1))[:a.memories]
    items = [{"text": t, "namespace": f"tenant-{i // per_ns:04d}", "kind": "fact", "source": s,
              "created_at": 1.7e9 + i} for i, (s, t) in enumerate(rows)]
    with tempfile.TemporaryDirectory() as d:
        mem = heapmem.open(os.path.join(d, "s.db"),
                           **({} if a.embedder == "potion" else {"embedder": None}))
        t0, c0 = time.perf_counter(), time.process_time()
        for at in range(0, len(items), a.batch):
            mem.add_many(items[at:at + a.batch])
        t1, c1 = time.perf_counter(), time.process_time()
        mem.close()
    print(f"add_many {a.embedder}: {len(items) / (t1 - t0):.0f}/s wall, "
          f"{len(items) / (c1 - c0):.0f}/s CPU ({len(items)} memories, batches of {a.batch})")


if __name__ == "__main__":
    main()
