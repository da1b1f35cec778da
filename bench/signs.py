#!/usr/bin/env python
"""How many rows a vector probe must score exactly when it reads signs first
(issue 34; csrc/embed.c, hv_sign_scan).

On a store bench/scale.py built (one namespace, "solo", with its vector
index), for each question: the partitions a probe scans (nearest centroid
first, until the share recall scans: the larger of 0.25 and the cube root of
20,000 / n), then, among their rows, the best R by an estimate, scored
exactly; the recall@50 of that top 50 against the exact top 50 of the whole
namespace, beside the probe scored exactly row by row.  Two estimates:

  plain     the question's dot product with the signs of the row's components
  residual  the centroid's cosine plus, for the row's residual from its
            centroid (unit vectors), the squared length over the components'
            sizes summed times the question's dot product with its signs
            (what the library keeps: 32 bytes and a factor a row)

numpy, float32; the question is scaled to at most 15 a component, as the
library's tables take it.  Ties among replicas (bench/perf.py's corpus
repeats each turn with names changed) move a mean by about 0.003 either way.

Run (after bench/scale.py has built the store; a few minutes at 1M):
  python bench/signs.py --data ../shared/data/locomo/locomo10.json \\
      --store bench/out/scale/hybrid-1M.db --size 1000000 --queries 60
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perf  # noqa: E402

SHORT = (250, 500, 1000, 2000, 4000)


def _store(path: str) -> dict[str, Any]:
    import apsw

    c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    rows = c.execute("SELECT v.v, coalesce(p.part, 0) FROM vectors AS v JOIN memories AS m "
                     "ON m.seq = v.seq LEFT JOIN vector_parts AS p ON p.seq = v.seq "
                     "WHERE m.namespace = 'solo' ORDER BY v.seq").fetchall()
    cents = c.execute("SELECT part, centroid FROM vector_centroids WHERE namespace = 'solo' "
                      "ORDER BY part").fetchall()
    c.close()
    part = np.array([p for _, p in rows])
    raw = np.frombuffer(b"".join(bytes(v)[4:] for v, _ in rows), np.uint8).reshape(len(rows), -1)
    del rows
    v = np.empty((len(raw), 2 * raw.shape[1]), np.int8)
    v[:, 0::2] = (raw & 15).astype(np.int8) - 8
    v[:, 1::2] = (raw >> 4).astype(np.int8) - 8
    inv = (1 / np.maximum(np.linalg.norm(v.astype(np.float32), axis=1), 1e-9)).astype(np.float32)
    ids = np.array([p for p, _ in cents])
    cm = np.array([np.frombuffer(bytes(b), np.int8) for _, b in cents]).astype(np.float32)
    cm /= np.linalg.norm(cm, axis=1)[:, None]
    where = np.searchsorted(ids, part)
    signs = np.empty(v.shape, np.int8)
    factor = np.empty(len(v), np.float32)
    for lo in range(0, len(v), 100_000):
        at = slice(lo, lo + 100_000)
        r = v[at].astype(np.float32) * inv[at, None] - cm[where[at]]
        signs[at] = np.where(r >= 0, 1, -1)
        factor[at] = (r * r).sum(1) / np.maximum(np.abs(r).sum(1), 1e-9)
    order = np.argsort(part, kind="stable")
    return {"v": v, "inv": inv, "cents": cm, "ids": ids, "where": where, "signs": signs,
            "plain": np.where(v >= 0, 1, -1).astype(np.int8), "factor": factor,
            "order": order, "start": np.searchsorted(part[order], ids),
            "end": np.searchsorted(part[order], ids, side="right")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="LoCoMo's locomo10.json")
    ap.add_argument("--store", required=True, help="a hybrid store bench/scale.py built")
    ap.add_argument("--size", type=int, required=True, help="its memories (for its questions)")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from heapmem.db import native

    s = _store(args.store)
    base = perf.Base(args.data)
    qs = [q for q, _ in perf.make_queries(base, args.size, "single", args.seed, args.queries,
                                          perf.label(args.size))["queries"]]
    qv = native.embed(qs).astype(np.float32)
    qv /= np.linalg.norm(qv, axis=1)[:, None]
    n = len(s["v"])
    share = max(0.25, (20_000 / n) ** (1 / 3))
    found: dict[str, list[float]] = {}
    for q in qv:
        cos = np.concatenate([(s["v"][lo:lo + 200_000] @ q) * s["inv"][lo:lo + 200_000]
                              for lo in range(0, n, 200_000)])
        exact = set(np.argpartition(-cos, 50)[:50])
        near = s["cents"] @ q
        probed, passed = [], 0
        for j in np.argsort(-near, kind="stable"):
            if passed >= share * n:
                break
            probed.append(s["order"][s["start"][j]:s["end"][j]])
            passed += s["end"][j] - s["start"][j]
        rows = np.concatenate(probed)
        best = rows[np.argpartition(-cos[rows], 50)[:50]]
        found.setdefault("probe, every row exact", []).append(len(set(best) & exact) / 50)
        qq = np.round(q / np.abs(q).max() * 15)
        est = {"plain": s["plain"][rows].astype(np.float32) @ qq,
               "residual": near[s["where"][rows]] +
               s["factor"][rows] * (s["signs"][rows].astype(np.float32) @ q)}
        for name, e in est.items():
            for r in SHORT:
                short = rows[np.argpartition(-e, r)[:r]]
                top = short[np.argpartition(-cos[short], 50)[:50]]
                found.setdefault(f"{name}, best {r} exact", []).append(len(set(top) & exact) / 50)
    print(f"{args.store}: {n:,} vectors, probe {share:.2f}, {len(qs)} questions; "
          "recall@50 against the exact top 50 (mean, lowest)")
    for k, got in found.items():
        print(f"  {k:<28} {np.mean(got):.4f}  {np.min(got):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
