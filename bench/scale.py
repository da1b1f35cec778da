#!/usr/bin/env python
"""Recall in ONE namespace of 10k, 100k and 1M memories (issue 34), beside a
search engine's top 50 and an HNSW library's on the same texts and vectors.

Corpus and questions are bench/perf.py's single-namespace ones: the 5,882 LoCoMo
turns, replica after replica (speakers renamed, numbers changed, seeded), all in
the namespace "solo"; LoCoMo questions perturbed like the replica they are asked
in.  Per size, in one run:

  hybrid          heapmem.open()'s default store (potion-base-8M vectors):
                  recall(q, k=10, namespace="solo", track=False)
  hybrid filtered the same with kinds="fact" and since= the median memory's
                  creation time (the filters apply inside both candidate stages)
  lexical         a store opened with embedder=None: the same recall (and filtered)
  bm25 stage      heap_bm25_search(q, "solo", 50): heapmem's BM25 candidate stage
                  alone (the exact, pruned top 50 recall takes)
  bm25 before     heap_bm25_top over the whole match set: the stage as it was
                  before issue 34 (same rows, same scores)
  fts5 top-50     the bare FTS5 query, bm25() ORDER BY ... LIMIT 50 (perf.py's floor)
  tantivy top-50  tantivy (PyPI) over the same texts, en_stem tokenizer, the
                  question's words OR-ed, searcher.search(query, 50)
  vector stage    heap_vector_top(q, "solo", 50): heapmem's vector top-N stage
                  alone, as recall runs it (the store's probe of its vector index
                  past the threshold, an exact scan below); its recall@50 against
                  the exact top 50
  hnsw            usearch (PyPI) over the same vectors (the store's int4 vectors,
                  decoded), cosine, default connectivity; its recall@50
  exact top 50    numpy over those vectors, float32: the recall@50 reference

Timings are per question, p50 and p95, in wall time and in CPU time of the
thread (a busy machine inflates wall time far more), over a second pass of the
questions; the first pass (the connection's first sight of each question: the
page cache, its statements, and in a big namespace the posting cache filling,
csrc/recall.c) is reported apart; the systems of one
process run question by question in turn, so a load that drifts hits them
alike.  Each store is built once with add_many (batches of 10,000) and cached
under --cache (bench/out/scale, git-ignored) with its build figures (add_many's
rate, peak RSS of the build, the file's size, what bm25_terms holds); later
runs reuse it, and the tantivy and usearch indexes.  add_many into the big
namespace is timed on a copy of the built store, every run: 4 batches of
10,000 new turns, each call's rate and the rate up to the store closed (its
last checkpoint done: heapmem checkpoints the WAL on a thread beside the
writer, so a call returns before its pages reach the main file).
Peak RSS is each serving process's (heapmem's before the other library is
loaded).  Goals (issue 34) are printed with the distance of any not met.

Run (not in CI: the first 1M build takes a quarter of an hour, later runs a few
minutes):
  python bench/scale.py --data ../shared/data/locomo/locomo10.json
  python bench/scale.py --sizes 10000,100000 --queries 200     # a few minutes
Options: --sizes, --queries (300), --seed, --cache DIR, --rebuild, --out FILE.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import perf  # noqa: E402  (the corpus, the questions and the statistics helpers)

DEFAULT_CACHE = os.path.join(HERE, "out", "scale")
NS = "solo"
K = 10
N = 50
BATCH = 10_000
INTO_BATCHES = 4  # add_many into the built store: batches of BATCH, timed each run
EXHAUSTIVE = ("SELECT heap_bm25_top(hit.seq, hit.row, "
              "(SELECT docs FROM namespaces WHERE namespace = ?2), "
              "(SELECT tokens FROM namespaces WHERE namespace = ?2), ?3, 'memories_fts') "
              "FROM (SELECT rowid AS seq, heap_bm25_row(memories_fts, 0.0, 1.0) AS row "
              "FROM memories_fts WHERE memories_fts MATCH heap_match(?1, ?2) LIMIT -1) AS hit")
log = perf.log


# ---------------------------------------------------------------------------------------
# What each process does
# ---------------------------------------------------------------------------------------

def _open(path: str, kind: str, now: float) -> Any:
    import heapmem

    return heapmem.open(path, clock=lambda: now,
                        embedder=None if kind == "lexical" else heapmem.DEFAULT_EMBEDDER)


def job_build(job: dict[str, Any]) -> dict[str, Any]:
    """A store of n memories in one namespace, built with add_many (the
    rate into the namespace is job_into's, timed every run)."""
    base = perf.Base(job["data"])
    mem = _open(job["path"], job["store"], base.now)
    t_add, n = 0.0, 0
    items = perf.iter_memories(base, job["n"], "single", job["seed"])
    for batch in perf.batched(items, BATCH):
        t = time.perf_counter()
        mem.add_many(batch)
        t_add += time.perf_counter() - t
        n += len(batch)
        if n % 100_000 == 0:
            log(f"  {job['tag']}: {n:,} memories, {n / t_add:,.0f}/s")
    c = mem.connection
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    terms = c.execute("SELECT count(*), coalesce(sum(pgsize), 0) FROM dbstat "
                      "WHERE name = 'bm25_terms'").fetchall()[0]
    rows = c.execute("SELECT count(*) FROM bm25_terms").fetchall()[0][0]
    mem.close()
    size = perf.file_mb(job["path"])
    return {"memories": n, "add_many_per_s": round(n / t_add, 1), "build_s": round(t_add, 1),
            "file_mb": round(size, 2),
            "bm25_terms_mb": round(terms[1] / 1e6, 2), "bm25_terms_rows": rows,
            "rss_build_mb": round(perf.maxrss_mb(), 1)}


def job_into(job: dict[str, Any]) -> dict[str, Any]:
    """add_many into the built namespace, on a synced copy of its store:
    INTO_BATCHES batches of new turns, each call timed, then close() (which
    waits for the last checkpoint)."""
    base = perf.Base(job["data"])
    extra = list(perf.iter_memories(base, job["n"] + INTO_BATCHES * BATCH, "single",
                                    job["seed"], start=job["n"]))
    copy = perf.synced_copy(job["path"])
    mem = _open(copy, job["store"], base.now)
    calls, t0, c0 = [], time.perf_counter(), time.process_time()
    for batch in perf.batched(extra, BATCH):
        t = time.perf_counter()
        mem.add_many(batch)
        calls.append(time.perf_counter() - t)
    mem.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    perf.remove_sqlite(copy)
    return {"batches": len(calls), "per_call_per_s": round(len(extra) / sum(calls), 1),
            "calls_per_s": [round(BATCH / x, 1) for x in calls],
            "until_closed_per_s": round(len(extra) / wall, 1),
            "cpu_per_s": round(len(extra) / cpu, 1)}


class Timer:
    """Per system: each question's wall and thread CPU seconds."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def time(self, name: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        c, t = time.thread_time(), time.perf_counter()
        out = fn(*args, **kw)
        self.wall.setdefault(name, []).append(time.perf_counter() - t)
        self.cpu.setdefault(name, []).append(time.thread_time() - c)
        return out

    def stats(self) -> dict[str, Any]:
        return {k: perf.ms_stats(self.wall[k], self.cpu[k]) for k in self.wall}


def _median_time(c: Any) -> float:
    """The filters' since: the median memory's creation time (half the store)."""
    return c.execute("SELECT created_at FROM memories ORDER BY created_at "
                     "LIMIT 1 OFFSET (SELECT count(*) / 2 FROM memories)").fetchall()[0][0]


def _rows(c: Any, sql: str, *params: Any) -> list[Any]:
    return c.execute(sql, params).fetchall()


def _same_top(got: str | None, want: str | None) -> bool:
    """Whether two BM25 top lists ([[seq, bm25], ...] as JSON) hold the same
    seqs in the same order and the same scores to 1e-9."""
    a, b = json.loads(got or "[]"), json.loads(want or "[]")
    return [r for r, _ in a] == [r for r, _ in b] and all(
        abs(x - y) <= 1e-9 * max(1.0, abs(y)) for (_, x), (_, y) in zip(a, b))


def _words(q: str) -> str:
    """The question's words as heapmem matches them (heap_match), for tantivy."""
    from heapmem.db import native

    m = native.match(q, None) or ""
    return " ".join(w for w in m.replace(" OR ", " ").split('"') if w.strip())


def _tantivy(job: dict[str, Any], texts: Callable[[], Sequence[str]]) -> Any:
    """The tantivy index of the store's texts (built once, cached)."""
    import tantivy

    where = job["tantivy"]
    if not os.path.exists(os.path.join(where, "done")):
        shutil.rmtree(where, ignore_errors=True)
        os.makedirs(where)
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("text", stored=False, tokenizer_name="en_stem")
        index = tantivy.Index(sb.build(), path=where)
        w = index.writer(heap_size=256_000_000, num_threads=1)
        t = time.perf_counter()
        for text in texts():
            w.add_document(tantivy.Document(text=text))
        w.commit()
        w.wait_merging_threads()
        log(f"  tantivy index of {job['tag']}: {time.perf_counter() - t:.0f} s")
        open(os.path.join(where, "done"), "w").close()
    index = tantivy.Index.open(where)
    index.reload()
    return index


def job_lexical(job: dict[str, Any]) -> dict[str, Any]:
    """The lexical store: recall, the BM25 stage (pruned, and as it was), the
    bare FTS5 top 50, then tantivy's top 50 question by question beside them."""
    from heapmem.db import native

    with open(job["queries"], encoding="utf-8") as fh:
        Q = json.load(fh)
    qs = [q for q, _ in Q["queries"] if native.match(q, NS) is not None]
    mem = _open(job["path"], "lexical", Q["now"])
    c = mem.connection
    since = _median_time(c)
    tm = Timer()

    exact = []  # per question: the pruned top 50 is the whole match set's

    def heapmem_pass(timer: Timer, check: bool = False) -> None:
        for q in qs:
            m = native.match(q, NS)
            timer.time("lexical", mem.recall, q, k=K, namespace=NS, track=False)
            timer.time("lexical filtered", mem.recall, q, k=K, namespace=NS, track=False,
                       kinds="fact", since=since)
            got = timer.time("bm25 stage", _rows, c, "SELECT heap_bm25_search(?, ?, ?)",
                             q, NS, N)
            want = timer.time("bm25 before", _rows, c, EXHAUSTIVE, q, NS, N)
            timer.time("fts5 top-50", _rows, c, perf.FLOOR_SQL, m)
            if check:
                exact.append(_same_top(got[0][0], want[0][0]))

    cold = Timer()  # the first pass: page cache, statements, the posting cache filling
    heapmem_pass(cold, check=True)
    heapmem_pass(tm)
    rss = perf.maxrss_mb()
    index = _tantivy(job, lambda: [t for t, in c.execute(
        "SELECT text FROM memories ORDER BY seq")])
    searcher = index.searcher()
    for q in qs[:30]:
        searcher.search(index.parse_query(_words(q), ["text"]), N)
    def tantivy_top(q: str) -> Any:
        return searcher.search(index.parse_query(_words(q), ["text"]), N)

    for q in qs:
        tm.time("tantivy top-50", tantivy_top, q)
        tm.time("bm25 stage, again", _rows, c, "SELECT heap_bm25_search(?, ?, ?)", q, NS, N)
    mem.close()
    return {"timings": tm.stats(), "cold": cold.stats(), "questions": len(qs),
            "rss_serve_mb": round(rss, 1), "rss_with_tantivy_mb": round(perf.maxrss_mb(), 1),
            "bm25_exact": sum(exact),
            "bm25_checked": len(exact)}


def _vectors(path: str) -> Any:
    """The store's vectors (int4, decoded) as unit float32 rows, and their seqs."""
    import apsw
    import numpy as np

    c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    rows = c.execute("SELECT v.seq, v.v FROM vectors AS v JOIN memories AS m ON m.seq = v.seq "
                     "WHERE m.namespace = ? ORDER BY v.seq", (NS,)).fetchall()
    c.close()
    seqs = np.array([s for s, _ in rows], dtype=np.int64)
    raw = np.frombuffer(b"".join(bytes(b)[4:] for _, b in rows), dtype=np.uint8)
    raw = raw.reshape(len(rows), -1)
    v = np.empty((len(rows), raw.shape[1] * 2), dtype=np.float32)
    v[:, 0::2] = (raw & 15).astype(np.float32) - 8
    v[:, 1::2] = (raw >> 4).astype(np.float32) - 8
    norm = np.linalg.norm(v, axis=1)
    v /= np.where(norm > 0, norm, 1)[:, None]
    return seqs, v


def job_truth(job: dict[str, Any]) -> dict[str, Any]:
    """The exact top 50 of every question by cosine over the store's vectors
    (numpy, float32), kept beside the store; the vectors too, for usearch."""
    import numpy as np

    from heapmem.db import native

    with open(job["queries"], encoding="utf-8") as fh:
        Q = json.load(fh)
    seqs, v = _vectors(job["path"])
    np.save(job["vectors"], v)
    np.save(job["seqs"], seqs)
    qv = native.embed([q for q, _ in Q["queries"]]).astype(np.float32)
    qv /= np.maximum(np.linalg.norm(qv, axis=1), 1e-12)[:, None]
    best = np.full((len(qv), N), -np.inf, dtype=np.float32)
    idx = np.zeros((len(qv), N), dtype=np.int64)
    for lo in range(0, len(v), 200_000):
        s = qv @ v[lo:lo + 200_000].T
        both = np.concatenate([best, s], axis=1)
        where = np.concatenate([idx, np.arange(lo, lo + s.shape[1])[None, :].repeat(len(qv), 0)],
                               axis=1)
        keep = np.argpartition(-both, N - 1, axis=1)[:, :N]
        best = np.take_along_axis(both, keep, axis=1)
        idx = np.take_along_axis(where, keep, axis=1)
    top = [[int(seqs[j]) for j in row[np.argsort(-b)]] for row, b in zip(idx, best)]
    with open(job["truth"], "w", encoding="utf-8") as fh:
        json.dump(top, fh)
    return {"vectors": len(v)}


def job_hybrid(job: dict[str, Any]) -> dict[str, Any]:
    """The hybrid store: recall, filtered recall, the vector stage and its
    recall@50, then usearch's top 50 question by question beside them."""
    import numpy as np

    from heapmem.db import native

    with open(job["queries"], encoding="utf-8") as fh:
        Q = json.load(fh)
    with open(job["truth"], encoding="utf-8") as fh:
        truth = json.load(fh)
    qs = [q for q, _ in Q["queries"]]
    mem = _open(job["path"], "hybrid", Q["now"])
    c = mem.connection
    since = _median_time(c)
    tm = Timer()
    found = []

    def heapmem_pass(timer: Timer, keep: bool) -> None:
        for i, q in enumerate(qs):
            timer.time("hybrid", mem.recall, q, k=K, namespace=NS, track=False)
            timer.time("hybrid filtered", mem.recall, q, k=K, namespace=NS, track=False,
                       kinds="fact", since=since)
            got = timer.time("vector stage", _rows, c, "SELECT heap_vector_top(?, ?, ?)",
                             q, NS, N)[0][0]
            if keep:
                seqs = {r[0] for r in json.loads(got)}
                found.append(len(seqs & set(truth[i])) / max(1, len(truth[i])))

    t = time.perf_counter()
    mem.recall(qs[0], k=K, namespace=NS, track=False)
    first = time.perf_counter() - t  # the connection's first recall reads the vectors
    cold = Timer()  # the first pass over the questions
    heapmem_pass(cold, False)
    heapmem_pass(tm, True)
    rss = perf.maxrss_mb()
    from usearch.index import Index

    seqs = np.load(job["seqs"])
    if not os.path.exists(job["usearch"]):
        v = np.load(job["vectors"])
        index = Index(ndim=v.shape[1], metric="cos", dtype="f32")
        t = time.perf_counter()
        index.add(np.arange(len(v)), v, threads=1)
        index.save(job["usearch"])
        log(f"  usearch index of {job['tag']}: {time.perf_counter() - t:.0f} s")
        del v
    index = Index.restore(job["usearch"])
    index.expansion_search = job["ef"]
    hnsw = []

    def search(q: str) -> Any:  # the question's vector, as heapmem's stage makes it, then HNSW
        return index.search(native.embed([q])[0].astype(np.float32), N, threads=1)

    for i, q in enumerate(qs):
        res = tm.time("hnsw", search, q)
        hnsw.append(len({int(seqs[k]) for k in res.keys} & set(truth[i])) / max(1, len(truth[i])))
        tm.time("vector stage, again", _rows, c, "SELECT heap_vector_top(?, ?, ?)", q, NS, N)
    mem.close()
    return {"timings": tm.stats(), "cold": cold.stats(), "questions": len(qs),
            "first_recall_ms": round(first * 1e3, 1),
            "vector_recall_at_50": round(statistics.fmean(found), 4),
            "hnsw_recall_at_50": round(statistics.fmean(hnsw), 4), "hnsw_ef": job["ef"],
            "since": since, "rss_serve_mb": round(rss, 1),
            "rss_with_usearch_mb": round(perf.maxrss_mb(), 1)}


JOBS = {"build": job_build, "into": job_into, "lexical": job_lexical, "truth": job_truth,
        "hybrid": job_hybrid}


def run_job(job: dict[str, Any], workdir: str) -> dict[str, Any]:
    jpath = os.path.join(workdir, f"job-{job['kind']}-{job['tag']}.json")
    rpath = jpath[:-5] + ".result.json"
    with open(jpath, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), REPO) if x)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_job", jpath,
                        "--_result", rpath], env=env)
    if p.returncode != 0:
        raise RuntimeError(f"job {job['kind']} {job['tag']} failed (exit {p.returncode})")
    with open(rpath, encoding="utf-8") as fh:
        res = json.load(fh)
    res["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    log(f"{job['kind']} {job['tag']}: {time.perf_counter() - t:.1f} s")
    return res


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def _p50(r: dict[str, Any], name: str, cpu: bool = False) -> float | None:
    s = r.get("timings", {}).get(name)
    return None if not s else s["cpu_p50_ms" if cpu else "p50_ms"]


def report(rows: dict[int, dict[str, Any]]) -> str:
    f, sizes = perf.f, sorted(rows)
    out = []
    names = ["hybrid", "hybrid filtered", "lexical", "lexical filtered", "bm25 stage",
             "bm25 before", "fts5 top-50", "tantivy top-50", "vector stage", "hnsw"]
    for cpu in (False, True):
        out.append(f"\n#### p50 ms per question, {'thread CPU time' if cpu else 'wall time'}\n")
        out.append("| memories | " + " | ".join(names) + " |")
        out.append("|---" * (len(names) + 1) + "|")
        for n in sizes:
            r = rows[n]
            out.append(f"| {f(n)} | " + " | ".join(
                f(_p50(r["lexical" if nm.startswith(("lexical", "bm25", "fts5", "tantivy"))
                         else "hybrid"], nm, cpu), 3) for nm in names) + " |")
    recall = ["hybrid", "hybrid filtered", "lexical", "lexical filtered"]
    out.append("\n#### Recall p95 ms per question, wall time (thread CPU time in brackets)\n")
    out.append("| memories | " + " | ".join(recall) + " |")
    out.append("|---" * (len(recall) + 1) + "|")
    for n in sizes:
        cells = []
        for nm in recall:
            s = rows[n]["lexical" if nm.startswith("lexical") else "hybrid"].get(
                "timings", {}).get(nm) or {}
            cpu95 = s.get("cpu_p95_ms")
            cells.append(f(s.get("p95_ms"), 3) + (f" ({cpu95:.3f})" if cpu95 is not None else ""))
        out.append(f"| {f(n)} | " + " | ".join(cells) + " |")
    small = rows[sizes[0]]
    out.append("\n#### Ratios (wall p50; CPU p50 in brackets)\n")
    out.append("| memories | hybrid / hybrid at smallest | lexical / lexical at smallest "
               "| bm25 stage / tantivy | bm25 before / bm25 stage | vector stage / hnsw "
               "| filtered / unfiltered hybrid | filtered / unfiltered lexical |")
    out.append("|---|---|---|---|---|---|---|---|")

    def ratio(a: dict[str, Any], an: str, b: dict[str, Any], bn: str) -> str:
        x, y = _p50(a, an), _p50(b, bn)
        xc, yc = _p50(a, an, True), _p50(b, bn, True)
        if not x or not y:
            return "-"
        return f"{x / y:.2f}x ({xc / yc:.2f}x)" if xc and yc else f"{x / y:.2f}x"

    for n in sizes:
        h, lx = rows[n]["hybrid"], rows[n]["lexical"]
        out.append(f"| {f(n)} | {ratio(h, 'hybrid', small['hybrid'], 'hybrid')} | "
                   f"{ratio(lx, 'lexical', small['lexical'], 'lexical')} | "
                   f"{ratio(lx, 'bm25 stage, again', lx, 'tantivy top-50')} | "
                   f"{ratio(lx, 'bm25 before', lx, 'bm25 stage')} | "
                   f"{ratio(h, 'vector stage, again', h, 'hnsw')} | "
                   f"{ratio(h, 'hybrid filtered', h, 'hybrid')} | "
                   f"{ratio(lx, 'lexical filtered', lx, 'lexical')} |")
    out.append("\n#### Recall@50 of the vector top 50 (against the exact top 50), builds, "
               "sizes\n")
    out.append("| memories | vector stage | hnsw (ef) | add_many/s (build) hybrid / lexical "
               "| add_many/s into the namespace, a call (until closed) hybrid / lexical "
               "| file MB hybrid / lexical "
               "| bm25_terms MB (rows) | peak RSS MB serving hybrid / lexical | first recall ms "
               "| load |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        h, lx, bh, bl, ih, il = (rows[n][k] for k in ("hybrid", "lexical", "build hybrid",
                                                      "build lexical", "into hybrid",
                                                      "into lexical"))
        out.append(
            f"| {f(n)} | {h['vector_recall_at_50']:.3f} | {h['hnsw_recall_at_50']:.3f} "
            f"({h['hnsw_ef']}) | {f(bh['add_many_per_s'], 0)} / {f(bl['add_many_per_s'], 0)} | "
            f"{f(ih['per_call_per_s'], 0)} ({f(ih['until_closed_per_s'], 0)}) / "
            f"{f(il['per_call_per_s'], 0)} ({f(il['until_closed_per_s'], 0)}) | "
            f"{f(bh['file_mb'], 1)} / {f(bl['file_mb'], 1)} | {f(bh['bm25_terms_mb'], 2)} "
            f"({f(bh['bm25_terms_rows'])}) | {f(h['rss_serve_mb'], 0)} / "
            f"{f(lx['rss_serve_mb'], 0)} | {f(h['first_recall_ms'], 1)} | "
            f"{max(h['load'] + lx['load'])} |")
    firsts = ["hybrid", "lexical", "bm25 stage"]
    out.append("\n#### The first pass over the questions, thread CPU ms p50 / p95 / mean "
               "(what the measured pass follows: page cache, statements, the posting cache "
               "filling)\n")
    out.append("| memories | " + " | ".join(firsts) + " |")
    out.append("|---" * (len(firsts) + 1) + "|")
    for n in sizes:
        cells = []
        for nm in firsts:
            s = rows[n]["hybrid" if nm == "hybrid" else "lexical"].get("cold", {}).get(nm) or {}
            cells.append(" / ".join(f(s.get(k), 3) for k in ("cpu_p50_ms", "cpu_p95_ms"))
                         + " / " + f(s.get("mean_ms"), 3))
        out.append(f"| {f(n)} | " + " | ".join(cells) + " |")
    out.append("\n#### Goals (issue 34)\n")
    out.append(goals(rows))
    return "\n".join(out)


def goals(rows: dict[int, dict[str, Any]]) -> str:
    sizes = sorted(rows)
    lines = ["| goal | target | measured (wall; CPU) | verdict |", "|---|---|---|---|"]

    def add(goal: str, target: float, got: float | None, cpu: float | None, unit: str,
            lower: bool = True) -> None:
        if got is None:
            lines.append(f"| {goal} | {target:g}{unit} | - | not measured |")
            return
        ok = got <= target if lower else got >= target
        how = got / target if lower else target / got
        both = f"{got:.3g}{unit}" + (f"; {cpu:.3g}{unit}" if cpu is not None else "")
        verdict = "met" if ok else f"missed by {how:.2f}x"
        lines.append(f"| {goal} | {'<=' if lower else '>='} {target:g}{unit} | {both} "
                     f"| {verdict} |")

    def r2(n: int, store: str, a: str, m: int, b: str, cpu: bool = False) -> float | None:
        x, y = _p50(rows[n][store], a, cpu), _p50(rows[m][store], b, cpu)
        return x / y if x and y else None

    small = sizes[0]
    for n in sizes[1:]:
        for store in ("lexical", "hybrid"):
            add(f"{store} recall p50 at {perf.label(n)} / at {perf.label(small)}", 2,
                r2(n, store, store, small, store), r2(n, store, store, small, store, True), "x")
    big = sizes[-1]
    for n in sizes:
        lx = rows[n]["lexical"]
        if "bm25_checked" in lx:
            same, of = lx["bm25_exact"], lx["bm25_checked"]
            lines.append(f"| the pruned top 50 at {perf.label(n)} is the whole match set's (same "
                         f"seqs in order, scores to 1e-9) | every question | {same} of {of} "
                         f"| {'met' if same == of else f'missed on {of - same}'} |")
    add(f"bm25 stage at {perf.label(big)} / tantivy top-50", 3,
        r2(big, "lexical", "bm25 stage, again", big, "tantivy top-50"),
        r2(big, "lexical", "bm25 stage, again", big, "tantivy top-50", True), "x")
    add(f"vector stage at {perf.label(big)} / hnsw (w34vec's)", 3,
        r2(big, "hybrid", "vector stage, again", big, "hnsw"),
        r2(big, "hybrid", "vector stage, again", big, "hnsw", True), "x")
    mid = 100_000 if 100_000 in rows else big
    add(f"filtered hybrid recall / unfiltered at {perf.label(mid)}", 1.5,
        r2(mid, "hybrid", "hybrid filtered", mid, "hybrid"),
        r2(mid, "hybrid", "hybrid filtered", mid, "hybrid", True), "x")
    add(f"(its lexical half: filtered lexical recall / unfiltered at {perf.label(mid)})", 1.5,
        r2(mid, "lexical", "lexical filtered", mid, "lexical"),
        r2(mid, "lexical", "lexical filtered", mid, "lexical", True), "x")
    for store in ("hybrid", "lexical"):
        b, i = rows[big][f"build {store}"], rows[big][f"into {store}"]
        add(f"add_many into the {perf.label(big)} namespace, {store} (a call)", 5000,
            i["per_call_per_s"], i["cpu_per_s"], "/s", lower=False)
        add("(the same, up to the store closed: its last checkpoint done)", 5000,
            i["until_closed_per_s"], None, "/s", lower=False)
        add(f"file growth from bm25_terms, {store} {perf.label(big)}", 15,
            100 * b["bm25_terms_mb"] / (b["file_mb"] - b["bm25_terms_mb"]), None, "%")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=perf.DEFAULT_DATA)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=DEFAULT_CACHE,
                    help="where the stores and indexes are kept between runs")
    ap.add_argument("--rebuild", action="store_true", help="build every store and index again")
    ap.add_argument("--ef", type=int, default=512,
                    help="usearch's expansion_search (512: recall@50 about 0.95 at 1M)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--_job", help=argparse.SUPPRESS)
    ap.add_argument("--_result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._job:
        return perf.child(args._job, args._result, JOBS)
    if not os.path.exists(args.data):
        print(f"LoCoMo data not found at {args.data} (give --data)", file=sys.stderr)
        return 2
    sizes = sorted(int(x) for x in args.sizes.split(",") if x)
    os.makedirs(args.cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix="heapmem-scale-")
    base = perf.Base(args.data)
    rows: dict[int, dict[str, Any]] = {}
    try:
        for n in sizes:
            tag = perf.label(n)
            qpath = os.path.join(work, f"queries-{tag}.json")
            with open(qpath, "w", encoding="utf-8") as fh:
                json.dump(perf.make_queries(base, n, "single", args.seed, args.queries, tag), fh)
            row: dict[str, Any] = {}
            paths = {}
            for store in ("hybrid", "lexical"):
                path = paths[store] = os.path.join(args.cache, f"{store}-{tag}.db")
                side = path + ".build.json"
                if args.rebuild or not (os.path.exists(side) and os.path.exists(path)):
                    perf.remove_sqlite(path)
                    built = run_job({"kind": "build", "tag": f"{store}-{tag}", "store": store,
                                     "n": n, "path": path, "data": os.path.abspath(args.data),
                                     "seed": args.seed}, work)
                    with open(side, "w", encoding="utf-8") as fh:
                        json.dump(built, fh)
                with open(side, encoding="utf-8") as fh:
                    row[f"build {store}"] = json.load(fh)
                row[f"into {store}"] = run_job(
                    {"kind": "into", "tag": f"{store}-{tag}", "store": store, "n": n,
                     "path": path, "data": os.path.abspath(args.data), "seed": args.seed}, work)
            cache = {k: os.path.join(args.cache, f"{k}-{tag}{ext}") for k, ext in
                     (("tantivy", ""), ("usearch", ".usearch"), ("vectors", ".npy"),
                      ("seqs", ".seqs.npy"))}
            if args.rebuild:
                shutil.rmtree(cache["tantivy"], ignore_errors=True)
                for k in ("usearch", "vectors", "seqs"):
                    if os.path.exists(cache[k]):
                        os.remove(cache[k])
            truth = os.path.join(work, f"truth-{tag}.json")
            common = {"tag": tag, "queries": qpath, "truth": truth, **cache, "ef": args.ef}
            row["lexical"] = run_job({"kind": "lexical", "path": paths["lexical"], **common},
                                     work)
            run_job({"kind": "truth", "path": paths["hybrid"], **common}, work)
            row["hybrid"] = run_job({"kind": "hybrid", "path": paths["hybrid"], **common}, work)
            rows[n] = row
            print(report({m: rows[m] for m in sorted(rows)}).split("#### Ratios")[0],
                  file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import apsw

    env = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(["python", "bench/scale.py"]
                               + list(argv if argv is not None else sys.argv[1:])),
           "python": platform.python_version(), "cpus": os.cpu_count(),
           "sqlite": apsw.sqlite_lib_version(), "queries": args.queries, "k": K, "n": N}
    git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    env["git"] = git.stdout.strip() or None
    print(f"\n### bench/scale.py ({env['date']}, `{env['command']}`, {env['git']})\n")
    print(f"SQLite {env['sqlite']}, Python {env['python']}, {env['cpus']} CPUs; "
          f"{args.queries} questions per size, recall k={K}, top {N} for the stages")
    print(report(rows))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"env": env, "rows": {str(n): r for n, r in rows.items()}}, fh, indent=1)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
