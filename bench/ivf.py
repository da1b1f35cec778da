#!/usr/bin/env python
"""The vector index of a big namespace (csrc/vindex.c, issue 34): its recall@50
against the exact top 50, its vector top-50's time against an HNSW library's
query at the same recall, and hybrid recall's time, at 10k, 100k and 1M
memories in one namespace.

Corpus: bench/perf.py's single-namespace corpus (LoCoMo turns, replicated
with seeded names and numbers, all into namespace "solo"), so the vectors
are the store's own potion-base-8M int4 vectors of realistic text; the
questions are LoCoMo questions perturbed like a replica (perf.make_queries).

Per size:
  build       add_many batches of 2,000 into one store (cached under
              bench/out/ivf-<n>.db: the build runs once), its rate and the
              vector index it made (partitions)
  exact       heap_vector_top(q, 'solo', 50, 1): every vector scanned, the
              ground truth (ties at the 50th cosine count as found)
  indexed     heap_vector_top(q, 'solo', 50): the store's probe; recall@50
              and p50 time; below the threshold this is the exact scan
  hnsw        hnswlib (M=16, ef_construction=100, seeded) over the same
              vectors as float32 unit vectors, inner product; the smallest
              ef of 50, 100, 200, 400, 800 whose recall@50 reaches 0.95, its
              p50 query time (one thread)
  recall p50  Memory.recall(q, k=10, namespace='solo', track=False) (hybrid)
  RSS         the process's peak RSS after the recalls (the connection's
              vector cache holds the namespace)

Run:  python bench/ivf.py --sizes 10000,100000,1000000 [--queries 200] [--probe P]
The functions (build, vector_top, exact_top, recall_at, hnsw_column) are
importable: bench/scale.py can fold the index's column into its table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import perf  # noqa: E402  (the corpus)

import heapmem  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("LOCOMO", "/work/shared/data/locomo/locomo10.json")
NS = "solo"
N_TOP = 50
#: the CPU time (time.thread_time) of each vector_top call, in order: a busy
#: machine inflates it far less than wall time (bench/perf.py's reason too)
CPU: list[float] = []


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(n: int, path: str, seed: int = 0, batch: int = 2000) -> dict[str, Any]:
    """The store of n memories at path (made once; its figures kept beside it)."""
    side = path + ".json"
    if os.path.exists(path) and os.path.exists(side):
        with open(side) as fh:
            return dict(json.load(fh))
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(path + ext):
            os.remove(path + ext)
    base = perf.Base(DATA)
    timed = 0.0
    with heapmem.open(path) as m:
        for chunk in perf.batched(perf.iter_memories(base, n, "single", seed), batch):
            t0 = time.perf_counter()
            m.add_many(chunk)
            timed += time.perf_counter() - t0
        parts = m.connection.execute(
            "SELECT count(*) FROM vector_centroids WHERE namespace = ?", (NS,)).fetchall()[0][0]
    out = {"n": n, "add_many_per_s": n / timed, "partitions": parts,
           "file_mb": os.path.getsize(path) / 2**20}
    with open(side, "w") as fh:
        json.dump(out, fh)
    return out


def vector_top(conn: Any, q: str,
               probe: float | None = None) -> tuple[list[int], list[float], float]:
    """heap_vector_top's seqs and cosines, and its wall time in seconds (its
    CPU time appended to CPU)."""
    sql = ("SELECT heap_vector_top(?, ?, ?)" if probe is None
           else "SELECT heap_vector_top(?, ?, ?, ?)")
    args: tuple = (q, NS, N_TOP) if probe is None else (q, NS, N_TOP, probe)
    t0, c0 = time.perf_counter(), time.thread_time()
    out = conn.execute(sql, args).fetchall()[0][0]
    took, cpu = time.perf_counter() - t0, time.thread_time() - c0
    CPU.append(cpu)
    rows = json.loads(out)
    return [r[0] for r in rows], [r[1] for r in rows], took


def exact_top(conn: Any, q: str) -> tuple[list[int], list[float]]:
    seqs, cos, _ = vector_top(conn, q, 1.0)
    return seqs, cos


def recall_at(found: Sequence[int], cos_of: dict[int, float], exact_cos: Sequence[float]) -> float:
    """recall@len(exact): the share of found memories whose cosine reaches the
    exact list's last (a tie at the boundary counts as found)."""
    if not exact_cos:
        return 1.0
    kth = min(exact_cos) - 1e-9
    return sum(1 for s in found if cos_of.get(s, -2.0) >= kth) / len(exact_cos)


def store_vectors(conn: Any) -> tuple[np.ndarray, np.ndarray]:
    """The namespace's vectors as float32 unit rows and their seqs (int4 decoded)."""
    rows = conn.execute("SELECT v.seq, v.v FROM memories AS m JOIN vectors AS v ON v.seq = m.seq "
                        "WHERE m.namespace = ? ORDER BY m.seq", (NS,)).fetchall()
    seqs = np.array([r[0] for r in rows], np.int64)
    raw = np.frombuffer(b"".join(bytes(r[1])[4:] for r in rows), np.uint8).reshape(len(rows), -1)
    x = np.empty((len(rows), raw.shape[1] * 2), np.float32)
    x[:, 0::2] = (raw & 15).astype(np.float32) - 8
    x[:, 1::2] = (raw >> 4).astype(np.float32) - 8
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    return seqs, x


def hnsw_column(conn: Any, questions: Sequence[str], truth: list[tuple[list[int], list[float]]],
                cache: str | None = None) -> dict[str, Any]:
    """hnswlib over the store's vectors: the smallest ef reaching recall@50 0.95."""
    import hnswlib

    seqs, x = store_vectors(conn)
    index = hnswlib.Index(space="ip", dim=x.shape[1])
    t0 = time.perf_counter()
    if cache and os.path.exists(cache):
        index.load_index(cache, max_elements=len(x))
        built = None
    else:
        index.init_index(max_elements=len(x), ef_construction=100, M=16, random_seed=1)
        index.set_num_threads(2)
        index.add_items(x, seqs)
        built = time.perf_counter() - t0
        if cache:
            index.save_index(cache)
    index.set_num_threads(1)
    qv = np.stack([np.frombuffer(conn.execute("SELECT heap_embed(?, 'float32')", (q,))
                                 .fetchall()[0][0], np.float32) for q in questions])
    rows = {}
    for ef in (50, 100, 200, 400, 800):
        index.set_ef(ef)
        times, cpus, recs = [], [], []
        for i, v in enumerate(qv):
            t1, c1 = time.perf_counter(), time.thread_time()
            labels, _ = index.knn_query(v[None, :], k=N_TOP)
            times.append(time.perf_counter() - t1)
            cpus.append(time.thread_time() - c1)
            ex_seqs, ex_cos = truth[i]
            cos_of = dict(zip(ex_seqs, ex_cos))
            # cosines of what HNSW found, by the store's own scoring
            missing = [int(s) for s in labels[0] if int(s) not in cos_of]
            if missing:
                cos_of.update(_cosines(conn, questions[i], missing))
            recs.append(recall_at([int(s) for s in labels[0]], cos_of, ex_cos))
        rows[ef] = {"recall": statistics.mean(recs), "p50_ms": 1e3 * statistics.median(times),
                    "cpu_p50_ms": 1e3 * statistics.median(cpus)}
        if rows[ef]["recall"] >= 0.95:
            return {"ef": ef, **rows[ef], "build_s": built, "tried": rows}
    return {"ef": None, "build_s": built, "tried": rows}


def _cosines(conn: Any, q: str, seqs: list[int]) -> dict[int, float]:
    """The store's cosine of the question with each of seqs (heap_cosine over
    the question's int8 vector, as the cache ranks)."""
    out = {}
    qv = conn.execute("SELECT heap_embed(?, 'float32')", (q,)).fetchall()[0][0]
    for s in seqs:
        v = conn.execute("SELECT heap_cosine(?, v) FROM vectors WHERE seq = ?", (qv, s)).fetchall()
        out[s] = v[0][0] if v and v[0][0] is not None else -2.0
    return out


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    path = os.path.join(HERE, "out", f"ivf-{n}.db")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    log(f"{n:,}: building (or reusing) {path}")
    built = build(n, path)
    base = perf.Base(DATA)
    qs = [q for q, _ in perf.make_queries(base, n, "single", 0, args.queries, "ivf")["queries"]]
    out: dict[str, Any] = {"n": n, **built}
    with heapmem.open(path) as m:
        conn = m.connection
        if args.probe is not None:
            m.vectors.settings(probe=args.probe)
        out["settings"] = m.vectors.settings()
        t0 = time.perf_counter()
        vector_top(conn, qs[0])  # the connection's cache filled
        out["first_ms"] = 1e3 * (time.perf_counter() - t0)
        log(f"{n:,}: exact top 50 of {len(qs)} questions")
        truth, exact_ms = [], []
        CPU.clear()
        for q in qs:
            s, c, took = vector_top(conn, q, 1.0)
            truth.append((s, c))
            exact_ms.append(took)
        exact_cpu = list(CPU)
        log(f"{n:,}: indexed top 50")
        recs, ms = [], []
        CPU.clear()
        for i, q in enumerate(qs):
            s, c, took = vector_top(conn, q)
            ms.append(took)
            cos_of = dict(zip(s, c))
            recs.append(recall_at(s, cos_of, truth[i][1]))
        out.update(exact_p50_ms=1e3 * statistics.median(exact_ms),
                   exact_cpu_p50_ms=1e3 * statistics.median(exact_cpu),
                   indexed_p50_ms=1e3 * statistics.median(ms),
                   indexed_cpu_p50_ms=1e3 * statistics.median(CPU),
                   recall50=statistics.mean(recs), recall50_p5=float(np.percentile(recs, 5)))
        log(f"{n:,}: hybrid recall")
        rt, rc = [], []
        for q in qs:
            t0, c0 = time.perf_counter(), time.thread_time()
            m.recall(q, k=10, namespace=NS, track=False)
            rt.append(time.perf_counter() - t0)
            rc.append(time.thread_time() - c0)
        out["recall_p50_ms"] = 1e3 * statistics.median(rt)
        out["recall_cpu_p50_ms"] = 1e3 * statistics.median(rc)
        out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if not args.no_hnsw:
            log(f"{n:,}: hnswlib")
            out["hnsw"] = hnsw_column(conn, qs, truth, os.path.join(HERE, "out", f"hnsw-{n}.bin"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--probe", type=float, help="the probe setting to measure (a share)")
    ap.add_argument("--no-hnsw", action="store_true")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    rows = [measure(int(s), args) for s in args.sizes.split(",")]
    print("Times are p50 wall / CPU (thread_time) in ms.")
    print("| memories | partitions | add_many/s | exact top-50 | indexed top-50 | "
          "recall@50 (p5) | hnswlib ef, recall, time | indexed / hnsw (CPU) | hybrid recall | "
          "peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        h = r.get("hnsw") or {}
        hs = (f"{h['ef']}, {h['recall']:.3f}, {h['p50_ms']:.2f} / {h['cpu_p50_ms']:.2f}"
              if h.get("ef") else "-")
        ratio = f"{r['indexed_cpu_p50_ms'] / h['cpu_p50_ms']:.1f}x" if h.get("ef") else "-"
        print(f"| {r['n']:,} | {r['partitions']} | {r['add_many_per_s']:,.0f} | "
              f"{r['exact_p50_ms']:.2f} / {r['exact_cpu_p50_ms']:.2f} | "
              f"{r['indexed_p50_ms']:.2f} / {r['indexed_cpu_p50_ms']:.2f} | {r['recall50']:.3f} "
              f"({r['recall50_p5']:.2f}) | {hs} | {ratio} | {r['recall_p50_ms']:.2f} / "
              f"{r['recall_cpu_p50_ms']:.2f} | {r['rss_mb']:.0f} MB |")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
