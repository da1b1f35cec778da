#!/usr/bin/env python
"""Speed at scale (issue 4): heapmem at 10k, 100k and 1M memories, against the bare
FTS5 floor and beside heapdb-memory and veramem.

Corpus. The 5,882 LoCoMo turns ("Speaker: text", kind "fact", source the speaker,
created at their session's date plus one second per turn) are replicated: one replica
of all ten conversations per namespace ("tenant-0000", "tenant-0001", ...), so a
namespace holds ~5,900 memories and the last one of a size is cut short (10k = one full
namespace + 4,118 memories of a second; 1M = 170 full namespaces + 60 memories
of a 171st). Each replica is lightly
perturbed with a seeded mapping of its own: the two speakers of every conversation get
other first names (whole words, in turns and questions alike) and every number is
replaced by another of the same digit count (the same number maps to the same number
within a replica). The single-namespace corpus puts 17 such replicas (100k) into the
one namespace "solo". The "namespace alone" store holds just tenant-0000's memories,
exactly as the multi-tenant stores hold them.

Queries are LoCoMo questions (all 1,986, adversarial ones included), perturbed like the
replica they are asked in, each asked in a namespace drawn at random (seeded) among the
full namespaces of the store. Recall is k=10 over the default 50 BM25 candidates, with
explain() called on every result, at a fixed `now` (one day after the last session).

Figures per store (each store is built in one subprocess and served from another, so
peak RSS does not mix sizes and build and serve figures stay apart):
  add_many/s      memories per second over the whole build, add_many batches of --batch
                  (only the add_many calls are timed, not making the dicts)
  add p50         one add() into an existing namespace (its own transaction)
  recall p50/p95  recall(track=False) + explain() on each result
  floor p50       the bare FTS5 query: heapmem.db.native.match(question, namespace), then
                  SELECT rowid, rank FROM memories_fts WHERE memories_fts MATCH ?
                  ORDER BY bm25() LIMIT 50 on mem.connection (only the SQL is timed)
  ratio           recall p50 / floor p50 (floor and recall passes alternate, twice);
                  also in CPU time (time.thread_time per call), which a busy machine
                  inflates far less than wall time: when the two ratios disagree, the
                  machine was shared (the "load" column is the 1-minute load average)
  tracked p50     recall(track=True) + explain(): what an agent that gives feedback pays
  feedback p50    feedback(used=[top result]) after each tracked recall (rest ignored)
  answer p50      feedback(recall_id, answer=...) after a tracked recall, the answer being
                  the top result's first 200 characters (heapmem attributes it itself)
  writes, FULL    tracked recall, feedback and add again with PRAGMA synchronous=FULL
                  (what durable=True sets: one fsync per commit), in their own table
  RSS build/serve ru_maxrss of the build / serve subprocess (the serve process imports
                  heapmem, reads its query file, opens the store and does all of the above)
  file MB         main file + -wal after PRAGMA wal_checkpoint(TRUNCATE), after the build
  open ms         heapmem.open() of the existing file, median of 5 (close not timed)
  forget p50      forget([id]) of one random memory (seeded), one call each, after all
                  of the above; then one forget() of as many memories at once (batch ms)

Peers (heapdb-memory 0.1.0, veramem 0.1.0) run the same corpus at 10k and 100k through
their public APIs, in subprocesses of --peer-python (default: this interpreter, if it can
import them): heapdb-memory in memory (add_many batches; its save() file is the file
size, loading it the open time; recall with explain=True); veramem in its SQLite file
(turns added as messages with infer=False, 256 per call, as bench/peers.py does; search
limit=10; feedback = +1 citing the top hit of a recorded search). No floor for peers.

Run:
  python bench/perf.py --quick                      # < 2 minutes
  python bench/perf.py --out bench/perf-full.json   # 10k, 100k, 1M, single 100k, peers
  python bench/perf.py --peer-python /path/to/venv/bin/python ...
  python bench/perf.py --only multi-10k --keep --workdir /tmp/hp --profile
Options: --sizes 10000,100000,1000000  --single 100000  --queries N  --seed S
  --workdir DIR (stores go there; a temp dir by default, removed unless --keep)
  --reuse (serve existing stores from an earlier --keep run instead of rebuilding; their
  build figures are read back from the sidecar .json; for iterating, not for RESULTS)
  --profile (cProfile the untracked recall pass of every heapmem store; top 25 printed)
  --no-peers.  --threads: heapmem's memories carry their thread (the replica's
  conversation session) and turn, so recall's thread step runs.  The data is read from
  <repo>/../shared/data/locomo/locomo10.json (--data) and never copied.
On a machine other jobs share, Linux autogroup scheduling ignores `nice` across
sessions; raise the benchmark's session instead (root): start it with setsid and
`echo -10 > /proc/<pid>/autogroup`. Never put timing assertions in tests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from typing import Any, Iterable, Iterator, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "locomo", "locomo10.json")
DAY = 86400.0
PEERS = ("heapdb-memory", "veramem")
_PEER_MODULE = {"heapdb-memory": "heapdb_memory", "veramem": "veramem"}
# The bare FTS5 top 50 at its fastest: bm25() with the weights spelled out gives the rank
# column's scores but computes them once (ORDER BY rank computes BM25's IDF twice).
FLOOR_SQL = ("SELECT rowid, bm25(memories_fts, 0.0, 1.0) AS b FROM memories_fts "
             "WHERE memories_fts MATCH ? ORDER BY b LIMIT 50")
K = 10

_T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def maxrss_mb() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


# ---------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------

_SESSION = re.compile(r"session_(\d+)")
_NUMBER = re.compile(r"\d+")
NAMES = (
    "Aaron Abigail Adam Adrian Aisha Alan Alice Amara Amir Ana Andre Anita Arjun Ava Beatriz "
    "Ben Bianca Boris Carla Carlos Chen Chloe Clara Daniel Dara Diego Dmitri Elena Eli Emma "
    "Erik Esther Farah Felix Fiona Gabriel Grace Hana Hassan Hugo Ines Ivan Jamal Jana Javier "
    "Julia Kai Karim Kenji Laila Lars Leah Leo Lina Lucas Maya Mateo Mei Mila Nadia Naomi "
    "Nico Nina Noah Olga Omar Oscar Paula Pedro Priya Quinn Rafael Rana Rosa Ruth Sara Selim "
    "Sofia Tariq Tess Theo Uma Vera Victor Wen Yara Yusuf Zoe Zora"
).split()


class Base:
    """The LoCoMo conversations: turns and questions, read once."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
        self.convs: list[dict[str, Any]] = []
        last = -math.inf
        for sample in raw:
            cv = sample["conversation"]
            sessions = sorted(int(m.group(1)) for k in cv if (m := _SESSION.fullmatch(k)))
            turns = []
            for s in sessions:
                t0 = dt.datetime.strptime(cv[f"session_{s}_date_time"].strip(),
                                          "%I:%M %p on %d %B, %Y")
                t0 = t0.replace(tzinfo=dt.timezone.utc).timestamp()
                last = max(last, t0)
                for i, turn in enumerate(cv[f"session_{s}"]):
                    turns.append((turn["speaker"], turn["text"], turn["dia_id"], t0 + i))
            speakers = (cv["speaker_a"], cv["speaker_b"])
            self.convs.append({
                "id": sample["sample_id"], "speakers": speakers, "turns": turns,
                "questions": [str(q["question"]) for q in sample["qa"]],
                "names": re.compile(r"\b(" + "|".join(map(re.escape, speakers)) + r")\b"),
            })
        self.per_replica = sum(len(c["turns"]) for c in self.convs)
        self.now = last + DAY
        self.questions = [(ci, q) for ci, c in enumerate(self.convs) for q in c["questions"]]


class Replica:
    """The perturbation of one replica: new speaker names per conversation, and a
    number -> number map, both seeded by (seed, replica)."""

    def __init__(self, base: Base, seed: int, r: int) -> None:
        self.r, self.seed = r, seed
        self.names = []
        for ci, c in enumerate(base.convs):
            rng = random.Random(f"{seed}:{r}:{ci}")
            a, b = rng.sample(NAMES, 2)
            self.names.append({c["speakers"][0]: a, c["speakers"][1]: b})

    def _num(self, m: re.Match) -> str:
        tok = m.group(0)
        h = zlib.crc32(f"{self.seed}:{self.r}:{tok}".encode())
        return str(h % 10 ** len(tok)).zfill(len(tok)) if len(tok) <= 9 else tok

    def apply(self, base: Base, ci: int, text: str) -> str:
        names = self.names[ci]
        text = base.convs[ci]["names"].sub(lambda m: names[m.group(0)], text)
        return _NUMBER.sub(self._num, text)


def iter_memories(base: Base, n: int, mode: str, seed: int,
                  threads: bool = False, start: int = 0) -> Iterator[dict[str, Any]]:
    """n memories, replica by replica. mode "multi": replica r is namespace
    tenant-{r:04d}; "single": every replica goes to namespace "solo".  threads:
    each memory's thread is its conversation's session (its replica's own), its
    turn its number there (heapmem's add(thread=, turn=), --threads).  start:
    memories start to n-1 only, the same ones the whole run yields there (those
    before start are skipped, never built)."""
    per = sum(len(c["turns"]) for c in base.convs)
    r = start // per
    done = r * per
    while done < n:
        rep = Replica(base, seed, r)
        ns = f"tenant-{r:04d}" if mode == "multi" else "solo"
        for ci, c in enumerate(base.convs):
            for speaker, text, dia, ts in c["turns"]:
                if done >= n:
                    return
                if done < start:
                    done += 1
                    continue
                who = rep.names[ci][speaker]
                m = {"text": f"{who}: {rep.apply(base, ci, text)}", "kind": "fact",
                     "source": who, "id": f"r{r}:{c['id']}:{dia}", "namespace": ns,
                     "created_at": ts}
                if threads:
                    session, turn = dia.split(":")
                    m.update(thread=f"r{r}:{c['id']}:{session}", turn=int(turn))
                yield m
                done += 1
        r += 1


def batched(it: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for x in it:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def make_queries(base: Base, n: int, mode: str, seed: int, count: int,
                 tag: str) -> dict[str, Any]:
    """Questions to ask a store of n memories: `queries` in random full namespaces,
    `queries_ns0` in tenant-0000 only (multi), and `adds` (texts for single add())."""
    rng = random.Random(f"{seed}:queries:{tag}")
    full = max(1, n // base.per_replica)
    reps: dict[int, Replica] = {}

    def ask(r: int) -> list[str]:
        rep = reps.setdefault(r, Replica(base, seed, r))
        ci, q = base.questions[rng.randrange(len(base.questions))]
        ns = "solo" if mode == "single" else f"tenant-{r:04d}"
        return [rep.apply(base, ci, q), ns]

    queries = [ask(rng.randrange(full)) for _ in range(count)]
    queries_ns0 = [ask(0) for _ in range(count)] if mode in ("multi", "alone") else []
    adds = []
    for i in range(2 * count):
        rep = Replica(base, seed, 100_000 + i)
        ci = rng.randrange(len(base.convs))
        speaker, text, _, ts = base.convs[ci]["turns"][rng.randrange(len(base.convs[ci]["turns"]))]
        r = rng.randrange(full)
        ns = "solo" if mode == "single" else f"tenant-{r:04d}"
        who = rep.names[ci][speaker]
        adds.append([f"{who}: {rep.apply(base, ci, text)}", ns, who, ts])
    return {"queries": queries, "queries_ns0": queries_ns0, "adds": adds, "now": base.now}


# ---------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------

def pct(xs: Sequence[float], p: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    i = min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))
    return s[i]


def ms_stats(xs: Sequence[float], cpu: Sequence[float] | None = None) -> dict[str, Any]:
    out = {"n": len(xs), "p50_ms": _ms(pct(xs, 50)), "p95_ms": _ms(pct(xs, 95)),
           "mean_ms": _ms(statistics.fmean(xs) if xs else None)}
    if cpu is not None:
        out["cpu_p50_ms"] = _ms(pct(cpu, 50))
        out["cpu_p95_ms"] = _ms(pct(cpu, 95))
    return out


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 4)


def file_mb(path: str) -> float:
    """Size of a store: the file and its -wal (or, for a directory store, all its files)."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, x)) for d, _, xs in os.walk(path)
                   for x in xs) / 1e6
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 1e6


# ---------------------------------------------------------------------------------------
# Jobs (each runs in its own subprocess)
# ---------------------------------------------------------------------------------------

def _embedder(job: dict[str, Any]) -> Any:
    """heapmem.open()'s default (hybrid, potion-base-8M), or None (lexical)."""
    import heapmem

    return None if job.get("lexical") else heapmem.DEFAULT_EMBEDDER


def job_build_heapmem(job: dict[str, Any]) -> dict[str, Any]:
    import heapmem

    base = Base(job["data"])
    rss0 = maxrss_mb()
    path = job["path"]
    now = base.now
    mem = heapmem.open(path, clock=lambda: now, embedder=_embedder(job))
    t_add, n = 0.0, 0
    for batch in batched(iter_memories(base, job["n"], job["mode"], job["seed"],
                                       job.get("threads", False)), job["batch"]):
        t = time.perf_counter()
        mem.add_many(batch)
        t_add += time.perf_counter() - t
        n += len(batch)
        if n % (10 * job["batch"]) == 0:
            log(f"  {job['tag']}: {n:,} memories, {n / t_add:,.0f}/s")
    mem.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    size = file_mb(path)
    namespaces = len(mem.namespaces)
    # the fresh store (issue 12): recall in the process that built it, before any
    # close (no sqlite_stat1 yet), as an agent that creates its store lives
    fresh = []
    if job.get("queries"):
        with open(job["queries"], encoding="utf-8") as fh:
            Q = json.load(fh)
        for q, ns in Q["queries"][:200]:
            t = time.perf_counter()
            mem.recall(q, k=K, namespace=ns, now=Q["now"], track=False)
            fresh.append(time.perf_counter() - t)
    mem.close()
    return {"memories": n, "namespaces": namespaces, "add_many_per_s": round(n / t_add, 1),
            "fresh_recall": ms_stats(fresh) if fresh else None,
            "build_s": round(t_add, 2), "file_mb": round(size, 2),
            "file_mb_after_close": round(file_mb(path), 2),
            "rss_build_mb": round(maxrss_mb(), 1), "rss_build_start_mb": round(rss0, 1)}


def job_serve_heapmem(job: dict[str, Any]) -> dict[str, Any]:
    import heapmem
    from heapmem.db import native

    rss_import = maxrss_mb()
    with open(job["queries"], encoding="utf-8") as fh:
        Q = json.load(fh)
    now = Q["now"]
    path = job["path"]
    t = time.perf_counter()
    mem = heapmem.open(path, clock=lambda: now, embedder=_embedder(job))
    open_first = time.perf_counter() - t
    conn = mem.connection
    queries = Q["queries"]
    # the first recall of a new connection: its namespace's vectors are read then
    t = time.perf_counter()
    mem.recall(queries[0][0], k=K, namespace=queries[0][1], now=now, track=False)
    first_recall = time.perf_counter() - t
    nrec = job["recalls"]

    cpu: dict[str, list[float]] = {"floor": [], "recall": []}

    def floor_pass(qs: Sequence[Sequence[str]], cpu_into: str | None = None) -> list[float]:
        out = []
        for q, ns in qs:
            m = native.match(q, ns)
            if m is None:
                continue
            c, t = time.thread_time(), time.perf_counter()
            conn.execute(FLOOR_SQL, (m,)).fetchall()
            out.append(time.perf_counter() - t)
            if cpu_into:
                cpu[cpu_into].append(time.thread_time() - c)
        return out

    def recall_pass(qs: Sequence[Sequence[str]], track: bool = False,
                    feedback: list[float] | None = None,
                    cpu_into: str | None = None) -> list[float]:
        out = []
        for q, ns in qs:
            if native.match(q, ns) is None:
                continue       # the same questions as the floor (none has no terms anyway)
            c, t = time.thread_time(), time.perf_counter()
            res = mem.recall(q, k=K, namespace=ns, now=now, track=track)
            for r in res:
                r.explain()
            out.append(time.perf_counter() - t)
            if cpu_into:
                cpu[cpu_into].append(time.thread_time() - c)
            if feedback is not None and len(res):
                t = time.perf_counter()
                mem.feedback([res[0].id], recall_id=res.recall_id, now=now)
                feedback.append(time.perf_counter() - t)
        return out

    # warm up (page cache, statement cache), then floor and recall alternate, twice
    floor_pass(queries[:30])
    recall_pass(queries[:30])
    floor, rec, hits = [], [], 0
    for _ in range(2):
        floor += floor_pass(queries[:nrec], "floor")
        if job.get("profile"):
            import cProfile
            import io
            import pstats
            prof = cProfile.Profile()
            prof.enable()
            rec += recall_pass(queries[:nrec], cpu_into="recall")
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
            print(f"--- cProfile, recall pass, {job['tag']} ---\n{s.getvalue()}", file=sys.stderr)
            job = dict(job, profile=False)
        else:
            rec += recall_pass(queries[:nrec], cpu_into="recall")
    for q, ns in queries[:nrec]:
        hits += len(mem.recall(q, k=K, namespace=ns, now=now, track=False))
    out: dict[str, Any] = {"floor": ms_stats(floor, cpu["floor"]),
                           "recall": ms_stats(rec, cpu["recall"]),
                           "mean_results": round(hits / max(1, nrec), 2)}
    if Q["queries_ns0"]:
        qs0 = Q["queries_ns0"][:nrec]
        recall_pass(qs0[:30])
        cpu["floor"], cpu["recall"] = [], []
        out["floor_ns0"] = ms_stats(floor_pass(qs0, "floor"), cpu["floor"])
        out["recall_ns0"] = ms_stats(recall_pass(qs0, cpu_into="recall"), cpu["recall"])
    fb: list[float] = []
    out["recall_tracked"] = ms_stats(recall_pass(queries[:job["tracked"]], True, fb))
    out["feedback"] = ms_stats(fb)
    # feedback from the answer text: the agent's answer quotes the top memory (its
    # first 200 characters), heapmem works out which of the 10 shown it used
    fa = []
    for q, ns in queries[job["tracked"]:2 * job["tracked"]]:
        res = mem.recall(q, k=K, namespace=ns, now=now, track=True)
        if len(res):
            t = time.perf_counter()
            mem.feedback(recall_id=res.recall_id, answer=res[0].text[:200], now=now)
            fa.append(time.perf_counter() - t)
    out["feedback_answer"] = ms_stats(fa)
    adds = []
    for _i, (text, ns, who, ts) in enumerate(Q["adds"][:job["adds"]]):
        t = time.perf_counter()
        mem.add(text, namespace=ns, source=who, created_at=ts)
        adds.append(time.perf_counter() - t)
    out["add"] = ms_stats(adds)
    # the same writes with PRAGMA synchronous=FULL, what heapmem.open(durable=True) sets:
    # one fsync per commit (the default, NORMAL in WAL mode, can lose the last commits
    # on power failure, never on a process crash)
    out["synchronous_default"] = conn.execute("PRAGMA synchronous").fetchall()[0][0]
    conn.execute("PRAGMA synchronous=FULL")
    fb = []
    out["recall_tracked_full"] = ms_stats(
        recall_pass(queries[nrec - job["tracked"]:nrec], True, fb))
    out["feedback_full"] = ms_stats(fb)
    adds = []
    for _i, (text, ns, who, ts) in enumerate(Q["adds"][job["adds"]:2 * job["adds"]]):
        t = time.perf_counter()
        mem.add(text, namespace=ns, source=who, created_at=ts)
        adds.append(time.perf_counter() - t)
    out["add_full"] = ms_stats(adds)
    # forget: one memory per call (its own transaction, FTS5 secure-delete, the
    # recalls that showed it dropped, the WAL checkpointed), then one call for
    # --forget memories at once; random memories (seeded), default durability
    conn.execute(f"PRAGMA synchronous={out['synchronous_default']}")
    rng = random.Random(job["seed"] + 7)
    top = conn.execute("SELECT max(seq) FROM memories").fetchall()[0][0]
    doomed = [r[0] for r in conn.execute(
        "SELECT id FROM memories WHERE seq IN (SELECT value FROM json_each(?))",
        (json.dumps(rng.sample(range(1, top + 1), 2 * job["forgets"])),))]
    rng.shuffle(doomed)
    one, many = doomed[:job["forgets"]], doomed[job["forgets"]:]
    fg = []
    for i in one:
        t = time.perf_counter()
        mem.forget([i])
        fg.append(time.perf_counter() - t)
    out["forget"] = ms_stats(fg)
    t = time.perf_counter()
    mem.forget(many)
    out["forget_batch"] = {"n": len(many), "ms": _ms(time.perf_counter() - t)}
    mem.close()
    opens = []
    for _ in range(5):
        t = time.perf_counter()
        m = heapmem.open(path, clock=lambda: now, embedder=_embedder(job))
        opens.append(time.perf_counter() - t)
        m.close()
    out["open_ms"] = _ms(statistics.median(opens))
    if not job.get("lexical"):  # a question's vector, from Python (the cffi call included)
        emb = []
        for q, _ in queries[:nrec]:
            t = time.perf_counter()
            native.embed([q])
            emb.append(time.perf_counter() - t)
        out["embed_query"] = ms_stats(emb)
    out["open_first_ms"] = _ms(open_first)
    out["first_recall_ms"] = _ms(first_recall)
    out["rss_serve_mb"] = round(maxrss_mb(), 1)
    out["rss_import_mb"] = round(rss_import, 1)
    return out


def remove_sqlite(path: str) -> None:
    """A store's file and its -wal, -shm and -journal, where they exist."""
    for p in (path, path + "-wal", path + "-shm", path + "-journal"):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)


def copy_sqlite(src: str, to: str, sync: bool = False) -> None:
    """A closed store's file and its -wal (where there is one) copied to
    `to`, whatever was there removed first; sync: each copy on disk before
    this returns."""
    remove_sqlite(to)
    for suffix in ("", "-wal"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, to + suffix)
            if sync:
                with open(to + suffix, "rb+") as fh:
                    os.fsync(fh.fileno())


def synced_copy(path: str) -> str:
    """A copy of a closed store beside it (path + ".copy", any older one
    removed), on disk before the caller's clock starts: the first
    checkpoint's fdatasync would otherwise flush the whole copy (~1 s at 1M)."""
    copy = path + ".copy"
    copy_sqlite(path, copy, sync=True)
    return copy


def _veramem_open(path: str) -> Any:
    from veramem import Config, Memory
    from veramem.providers import HashEmbedder, NoLLM

    cfg = Config(db_path=path, llm_provider="none", embed_provider="hash")
    return Memory(path, llm=NoLLM(), embedder=HashEmbedder(), config=cfg, ranking="contextual",
                  exploration="none", seed=0, vector_index="exact")


def job_build_peer(job: dict[str, Any]) -> dict[str, Any]:
    base = Base(job["data"])
    rss0 = maxrss_mb()
    path, now = job["path"], base.now
    remove_sqlite(path)
    t_add, n = 0.0, 0
    if job["system"] == "heapdb-memory":
        import heapdb_memory

        mem = heapdb_memory.Memory(None, clock=lambda: now)
        for batch in batched(iter_memories(base, job["n"], "multi", job["seed"]), job["batch"]):
            batch = [{k: v for k, v in m.items()} for m in batch]
            t = time.perf_counter()
            mem.add_many(batch)
            t_add += time.perf_counter() - t
            n += len(batch)
        t = time.perf_counter()
        mem.save(path)
        save_s = time.perf_counter() - t
        extra = {"save_s": round(save_s, 2)}
    else:
        mem = _veramem_open(path)
        chunk: list[dict[str, Any]] = []

        def flush() -> float:
            msgs = [{"role": "user", "content": m["text"], "timestamp": m["created_at"]}
                    for m in chunk]
            t = time.perf_counter()
            mem.add(msgs, user_id=chunk[0]["namespace"], infer=False,
                    timestamp=chunk[0]["created_at"])
            return time.perf_counter() - t

        for m in iter_memories(base, job["n"], "multi", job["seed"]):
            if chunk and (m["namespace"] != chunk[0]["namespace"] or len(chunk) >= 256):
                t_add += flush()
                n += len(chunk)
                chunk = []
                if n % 20_000 < 256:
                    log(f"  {job['tag']}: {n:,} memories, {n / t_add:,.0f}/s")
            chunk.append(m)
        if chunk:
            t_add += flush()
            n += len(chunk)
        mem.close()
        import sqlite3
        c = sqlite3.connect(path)
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.close()
        extra = {}
    return {"memories": n, "add_many_per_s": round(n / t_add, 1), "build_s": round(t_add, 2),
            "file_mb": round(file_mb(path), 2), "rss_build_mb": round(maxrss_mb(), 1),
            "rss_build_start_mb": round(rss0, 1), **extra}


def job_serve_peer(job: dict[str, Any]) -> dict[str, Any]:
    system = job["system"]
    if system == "heapdb-memory":
        import heapdb_memory
    else:
        import veramem  # noqa: F401
    rss_import = maxrss_mb()
    with open(job["queries"], encoding="utf-8") as fh:
        Q = json.load(fh)
    now, path = Q["now"], job["path"]
    queries = Q["queries"][:job["recalls"]]
    t = time.perf_counter()
    if system == "heapdb-memory":
        mem = heapdb_memory.Memory(path, clock=lambda: now)
    else:
        mem = _veramem_open(path)
    open_s = time.perf_counter() - t
    rec, tracked, fb, adds = [], [], [], []

    if system == "heapdb-memory":
        def recall(q: str, ns: str, track: bool) -> Any:
            res = mem.recall(q, k=K, namespace=ns, now=now, explain=True, track=track)
            for r in res:
                # evaluated on purpose: computing the explanation is part of what is timed
                _ = r.explain
            return res

        def feedback(res: Any) -> None:
            mem.feedback(used=[res.ids[0]], recall_id=res.recall_id, now=now)

        def add(text: str, ns: str, who: str, ts: float) -> None:
            mem.add(text, namespace=ns, source=who, created_at=ts)
    else:
        def recall(q: str, ns: str, track: bool) -> Any:
            res = mem.search(q, user_id=ns, limit=K, record=track)
            for h in res.hits:
                # evaluated on purpose: computing the signals is part of what is timed
                _ = h.signals
            return res

        def feedback(res: Any) -> None:
            mem.feedback(res.trace_id, 1.0, cited=[res.hits[0].memory.id])

        def add(text: str, ns: str, who: str, ts: float) -> None:
            mem.add([{"role": "user", "content": text, "timestamp": ts}], user_id=ns,
                    infer=False, timestamp=ts)

    for q, ns in queries[:10]:
        recall(q, ns, False)
    hits = 0
    for q, ns in queries:
        t = time.perf_counter()
        res = recall(q, ns, False)
        rec.append(time.perf_counter() - t)
        hits += len(res.ids) if system == "heapdb-memory" else len(res.hits)
    for q, ns in queries[:job["tracked"]]:
        t = time.perf_counter()
        res = recall(q, ns, True)
        tracked.append(time.perf_counter() - t)
        has = len(res.ids) if system == "heapdb-memory" else len(res.hits)
        if has:
            t = time.perf_counter()
            feedback(res)
            fb.append(time.perf_counter() - t)
    for text, ns, who, ts in Q["adds"][:job["adds"]]:
        t = time.perf_counter()
        add(text, ns, who, ts)
        adds.append(time.perf_counter() - t)
    if system != "heapdb-memory":
        mem.close()
    return {"recall": ms_stats(rec), "mean_results": round(hits / max(1, len(queries)), 2),
            "recall_tracked": ms_stats(tracked),
            "feedback": ms_stats(fb), "add": ms_stats(adds), "open_ms": _ms(open_s),
            "rss_serve_mb": round(maxrss_mb(), 1), "rss_import_mb": round(rss_import, 1)}


JOBS = {"build-heapmem": job_build_heapmem, "serve-heapmem": job_serve_heapmem,
        "build-peer": job_build_peer, "serve-peer": job_serve_peer}


def child(job_path: str, result_path: str, jobs: dict[str, Any]) -> int:
    """In a job's subprocess: run the job the file names (jobs[its kind]) and
    write what it returns (bench/scale.py's jobs run the same way)."""
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    res = jobs[job["kind"]](job)
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(res, fh)
    return 0


def run_job(python: str, job: dict[str, Any], workdir: str) -> dict[str, Any]:
    jpath = os.path.join(workdir, f"job-{job['kind']}-{job['tag']}.json")
    rpath = jpath[:-5] + ".result.json"
    with open(jpath, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (env.get("PYTHONPATH"), REPO) if x) \
        if python == sys.executable else env.get("PYTHONPATH", "")
    t = time.perf_counter()
    load0 = os.getloadavg()[0]
    p = subprocess.run([python, os.path.abspath(__file__), "--_job", jpath, "--_result", rpath],
                       env=env)
    if p.returncode != 0:
        raise RuntimeError(f"job {job['kind']} {job['tag']} failed (exit {p.returncode})")
    with open(rpath, encoding="utf-8") as fh:
        res = json.load(fh)
    # 1-minute load average around the job: on a 2-core machine anything well above 1
    # means other processes shared the CPUs and wall-clock figures are inflated
    res[f"load_{job['kind'].split('-')[0]}"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    log(f"{job['kind']} {job['tag']}: {time.perf_counter() - t:.1f}s")
    return res


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def f(x: Any, nd: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}" if isinstance(x, float) else f"{x:,}" if isinstance(x, int) else str(x)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| system | corpus | memories | ns | add_many/s | add p50 ms | recall p50 ms "
            "| recall p95 ms | floor p50 ms | recall/floor | tracked p50 ms | feedback p50 ms "
            "| RSS build MB | RSS serve MB | file MB | MB/100k | open ms | recall/floor CPU "
            "| load |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        rp, fp = r.get("recall", {}).get("p50_ms"), r.get("floor", {}).get("p50_ms")
        ratio = rp / fp if rp and fp else None
        mb100k = r["file_mb"] / r["memories"] * 100_000 if r.get("memories") else None
        out.append("| " + " | ".join([
            r["system"], r["corpus"], f(r.get("memories")), f(r.get("namespaces")),
            f(r.get("add_many_per_s"), 0), f(r.get("add", {}).get("p50_ms"), 3),
            f(rp, 3), f(r.get("recall", {}).get("p95_ms"), 3), f(fp, 3),
            f"{ratio:.2f}x" if ratio else "-",
            f(r.get("recall_tracked", {}).get("p50_ms"), 3),
            f(r.get("feedback", {}).get("p50_ms"), 3), f(r.get("rss_build_mb"), 0),
            f(r.get("rss_serve_mb"), 0), f(r.get("file_mb"), 1), f(mb100k, 1),
            f(r.get("open_ms"), 2), cpu_ratio(r),
            f(max(r.get("load_serve", [0]) + r.get("load_build", [0])), 1)]) + " |")
    return "\n".join(out)


def hybrid_costs(rows: list[dict[str, Any]]) -> str:
    """What hybrid recall (the default, potion-base-8M in C) costs over
    lexical, store by store, in the same run (issue 22's goals)."""
    hy = {r["corpus"]: r for r in rows if r["system"] == "heapmem"}
    lx = {r["corpus"]: r for r in rows if r["system"] == "heapmem-lexical"}
    out = ["| corpus | add_many/s hybrid / lexical | ratio | recall p50 ms hybrid / lexical "
           "| ratio | first recall of a connection ms hybrid / lexical "
           "| file MB hybrid / lexical | ratio "
           "| query embed p50 ms |", "|---|---|---|---|---|---|---|---|---|"]
    for tag in hy:
        if tag not in lx:
            continue
        h, x = hy[tag], lx[tag]
        ah, al = h.get("add_many_per_s"), x.get("add_many_per_s")
        rh, rl = h.get("recall", {}).get("p50_ms"), x.get("recall", {}).get("p50_ms")
        fh, fl = h.get("file_mb"), x.get("file_mb")
        out.append("| " + " | ".join([
            tag, f"{f(ah, 0)} / {f(al, 0)}", f"{ah / al:.2f}x" if ah and al else "-",
            f"{f(rh, 3)} / {f(rl, 3)}", f"{rh / rl:.2f}x" if rh and rl else "-",
            f"{f(h.get('first_recall_ms'), 2)} / {f(x.get('first_recall_ms'), 2)}",
            f"{f(fh, 1)} / {f(fl, 1)}", f"{fh / fl:.2f}x" if fh and fl else "-",
            f(h.get("embed_query", {}).get("p50_ms"), 4)]) + " |")
    return "\n".join(out)


def cpu_ratio(r: dict[str, Any]) -> str:
    a, b = r.get("recall", {}).get("cpu_p50_ms"), r.get("floor", {}).get("cpu_p50_ms")
    return f"{a / b:.2f}x" if a and b else "-"


def goals(rows: list[dict[str, Any]]) -> str:
    hm = {r["corpus"]: r for r in rows if r["system"] == "heapmem"}
    lines = ["| goal | target | measured | verdict |", "|---|---|---|---|"]

    def add(goal: str, target: float, got: float | None, unit: str, lower: bool = True) -> None:
        if got is None:
            lines.append(f"| {goal} | {target:g}{unit} | - | not measured |")
            return
        ok = got <= target if lower else got >= target
        how = got / target if lower else target / got
        verdict = "met" if ok else f"missed by {how:.2f}x"
        lines.append(f"| {goal} | {'<=' if lower else '>='} {target:g}{unit} | "
                     f"{got:.3g}{unit} | {verdict} |")

    for c, r in hm.items():
        if c.startswith("multi") or c.startswith("single"):
            rp, fp = r["recall"]["p50_ms"], r["floor"]["p50_ms"]
            add(f"recall/floor, {c}", 1.25, rp / fp if rp and fp else None, "x")
            rc, fc = r["recall"].get("cpu_p50_ms"), r["floor"].get("cpu_p50_ms")
            add(f"recall/floor in CPU time, {c}", 1.25, rc / fc if rc and fc else None, "x")
    alone = hm.get("alone")
    big = max((r for c, r in hm.items() if c.startswith("multi")), key=lambda r: r["memories"],
              default=None)
    if alone and big:
        a = alone["recall_ns0"]["p50_ms"]
        add(f"{big['corpus']} recall p50 / namespace alone (random namespaces)", 1.5,
            big["recall"]["p50_ms"] / a, "x")
        add(f"{big['corpus']} recall p50 / namespace alone (tenant-0000 in both)", 1.5,
            big["recall_ns0"]["p50_ms"] / a, "x")
        ac = alone["recall_ns0"].get("cpu_p50_ms")
        if ac and big["recall"].get("cpu_p50_ms"):
            add(f"{big['corpus']} recall / namespace alone, CPU time", 1.5,
                big["recall"]["cpu_p50_ms"] / ac, "x")
        add(f"{big['corpus']} recall p50 absolute", 3, big["recall"]["p50_ms"], " ms")
        add(f"{big['corpus']} recall p50 absolute, CPU time", 3, big["recall"].get("cpu_p50_ms"),
            " ms")
    for c, r in hm.items():
        fr = (r.get("fresh_recall") or {}).get("p50_ms")
        if fr and r["recall"]["p50_ms"]:
            add(f"{c} recall p50 before the first close / after reopening", 1.25,
                fr / r["recall"]["p50_ms"], "x")
    for c, r in hm.items():
        if c.startswith("single"):
            add(f"{c} recall p50", 15, r["recall"]["p50_ms"], " ms")
            add(f"{c} recall p50, CPU time", 15, r["recall"].get("cpu_p50_ms"), " ms")
    for c, r in hm.items():
        if c == "alone":
            continue
        add(f"add_many, {c}", 20_000, r["add_many_per_s"], "/s", lower=False)
        add(f"feedback p50, {c}", 0.3, r["feedback"]["p50_ms"], " ms")
        if r.get("feedback_answer", {}).get("p50_ms"):
            add(f"feedback(answer=...) p50, {c}", 1.0, r["feedback_answer"]["p50_ms"], " ms")
    for c, r in hm.items():
        if r.get("forget"):
            add(f"forget one memory p50, {c}", 50 if r["memories"] >= 1_000_000 else 20,
                r["forget"]["p50_ms"], " ms")
    if big:
        add(f"peak RSS serving {big['corpus']}", 150, big["rss_serve_mb"], " MB")
        add(f"peak RSS building {big['corpus']}", 150, big["rss_build_mb"], " MB")
    for c, r in hm.items():
        if c != "alone":
            add(f"file per 100k, {c}", 60, r["file_mb"] / r["memories"] * 100_000, " MB")
    return "\n".join(lines)


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 \
        else str(n)


def peer_python(args: argparse.Namespace) -> str | None:
    if args.no_peers:
        return None
    py = args.peer_python or sys.executable
    code = "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in %r) " \
           "else 1)" % (list(_PEER_MODULE.values()),)
    if subprocess.run([py, "-c", code]).returncode != 0:
        log(f"peers skipped: {py} cannot import {', '.join(PEERS)} "
            "(give --peer-python, or install the `bench` extra)")
        return None
    return py


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k multi-tenant + 20k single (< 2 min)")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--sizes",
                    help="multi-tenant sizes (default 10000,100000,1000000; quick 10000)")
    ap.add_argument("--single", type=int, help="single-namespace size (100000; quick 20000)")
    ap.add_argument("--peer-sizes", help="peer sizes (default 10000,100000; quick 10000)")
    ap.add_argument("--queries", type=int, help="recall queries per pass (1000; quick 200)")
    ap.add_argument("--batch", type=int, default=10_000, help="add_many batch size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true", help="keep the workdir and its stores")
    ap.add_argument("--reuse", action="store_true", help="serve stores left by a --keep run")
    ap.add_argument("--only", help="comma list of store tags to run (e.g. multi-1M,alone)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--peer-python")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--threads", action="store_true",
                    help="heapmem's memories carry their place: thread = their replica's "
                         "conversation session, turn = their number in it (schema 10)")
    ap.add_argument("--embedder", choices=("both", "potion", "none"), default="both",
                    help="heapmem's stores: hybrid (potion, heapmem.open()'s default), lexical "
                         "(none: embedder=None), or both side by side (default)")
    ap.add_argument("--_job", help=argparse.SUPPRESS)
    ap.add_argument("--_result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._job:
        return child(args._job, args._result, JOBS)

    if not os.path.exists(args.data):
        print(f"LoCoMo data not found at {args.data} (give --data)", file=sys.stderr)
        return 2
    quick = args.quick
    sizes = [int(x) for x in (args.sizes or ("10000" if quick else "10000,100000,1000000"))
             .split(",") if x]
    single = args.single if args.single is not None else (20_000 if quick else 100_000)
    peer_sizes = [int(x) for x in (args.peer_sizes or ("10000" if quick else "10000,100000"))
                  .split(",") if x]
    nq = args.queries or (200 if quick else 1000)
    workdir = args.workdir or tempfile.mkdtemp(prefix="heapmem-perf-")
    os.makedirs(workdir, exist_ok=True)
    base = Base(args.data)
    log(f"LoCoMo: {len(base.convs)} conversations, {base.per_replica} turns, "
        f"{len(base.questions)} questions; workdir {workdir}")

    stores = [(f"multi-{label(n)}", "multi", n) for n in sizes]
    if single:
        stores.append((f"single-{label(single)}", "single", single))
    stores.append(("alone", "alone", base.per_replica))
    variants = {"both": (False, True), "potion": (False,), "none": (True,)}[args.embedder]
    stores = [(tag, mode, n, lex) for tag, mode, n in stores for lex in variants]
    only = set(args.only.split(",")) if args.only else None
    counts = {"recalls": nq, "tracked": max(50, nq // 3), "adds": max(50, nq // 5),
              "forgets": max(20, nq // 10)}
    rows: list[dict[str, Any]] = []
    try:
        for tag, mode, n, lexical in stores:
            if only and tag not in only:
                continue
            system = ("heapmem-lexical" if lexical else "heapmem") + (
                "+threads" if args.threads else "")
            path = os.path.join(workdir, f"{system}-{tag}.db")
            qpath = os.path.join(workdir, f"queries-{tag}.json")
            with open(qpath, "w", encoding="utf-8") as fh:
                json.dump(make_queries(base, n, mode, args.seed, nq, tag), fh)
            common = {"tag": tag, "mode": "multi" if mode == "alone" else mode, "n": n,
                      "path": path, "data": os.path.abspath(args.data), "seed": args.seed,
                      "batch": args.batch, "lexical": lexical, "threads": args.threads}
            side = path + ".build.json"
            if args.reuse and os.path.exists(side) and os.path.exists(path):
                with open(side, encoding="utf-8") as fh:
                    built = json.load(fh)
                log(f"reusing {path}")
            try:
                if not (args.reuse and os.path.exists(side) and os.path.exists(path)):
                    remove_sqlite(path)
                    built = run_job(sys.executable, {"kind": "build-heapmem", **common,
                                                     "queries": qpath}, workdir)
                    with open(side, "w", encoding="utf-8") as fh:
                        json.dump(built, fh)
                served = run_job(sys.executable, {"kind": "serve-heapmem", **common,
                                                  "queries": qpath, "profile": args.profile,
                                                  **counts}, workdir)
            except RuntimeError as e:
                log(f"{e}; the row is left out")
                continue
            if mode == "alone":
                served["recall"], served["floor"] = served["recall_ns0"], served["floor_ns0"]
            rows.append({"system": system, "corpus": tag, **built, **served})
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
        py = peer_python(args)
        if py:
            for system in PEERS:
                for n in peer_sizes:
                    tag = f"multi-{label(n)}"
                    if only and f"{system}:{tag}" not in only and tag not in only:
                        continue
                    path = os.path.join(workdir, f"{system}-{tag}.db")
                    qpath = os.path.join(workdir, f"queries-{tag}.json")
                    if not os.path.exists(qpath):
                        with open(qpath, "w", encoding="utf-8") as fh:
                            json.dump(make_queries(base, n, "multi", args.seed, nq, tag), fh)
                    slow = system == "veramem" and n > 20_000
                    pc = {"recalls": min(nq, 60 if slow else 300),
                          "tracked": 20 if slow else 50, "adds": 20 if slow else 50}
                    common = {"tag": f"{system}-{tag}", "system": system, "n": n, "path": path,
                              "data": os.path.abspath(args.data), "seed": args.seed,
                              "batch": args.batch}
                    try:
                        built = run_job(py, {"kind": "build-peer", **common}, workdir)
                        served = run_job(py, {"kind": "serve-peer", **common, "queries": qpath,
                                              **pc}, workdir)
                    except RuntimeError as e:
                        log(f"{e}; the row is left out")
                        continue
                    built["namespaces"] = math.ceil(n / base.per_replica)
                    rows.append({"system": system, "corpus": tag, **built, **served})
                    print(table(rows[-1:]).splitlines()[-1], file=sys.stderr)
                    remove_sqlite(path)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    import apsw
    env = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.basename(sys.executable), "bench/perf.py"]
                               + list(argv if argv is not None else sys.argv[1:])),
           "python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "sqlite": apsw.sqlite_lib_version(),
           "apsw": apsw.apsw_version(), "seed": args.seed, "queries": nq, "k": K,
           "batch": args.batch}
    try:
        import heapmem
        env["heapmem"] = heapmem.__version__
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True)
        env["git"] = git.stdout.strip() or None
    except Exception:  # pragma: no cover
        pass
    print(f"\n## heapmem perf ({env['date']}, {env['command']})\n")
    print(f"SQLite {env['sqlite']}, apsw {env['apsw']}, Python {env['python']}, "
          f"{env['cpus']} CPUs; k={K}, 50 candidates, explain() on every result; "
          f"{nq} queries per recall pass\n")
    print(table(rows))
    print("\n### Goals (issue 4)\n")
    print(goals(rows))
    if any(r["system"] == "heapmem-lexical" for r in rows):
        print()
        print(hybrid_costs(rows))
    extra = [r for r in rows if r["system"] == "heapmem" and "recall_ns0" in r]
    if extra:
        print("\n### Cost follows the namespace: the same tenant-0000 questions in every store\n")
        print("| store | recall p50 ms | recall p95 ms | floor p50 ms |")
        print("|---|---|---|---|")
        for r in extra:
            print(f"| {r['corpus']} | {f(r['recall_ns0']['p50_ms'], 3)} | "
                  f"{f(r['recall_ns0']['p95_ms'], 3)} | {f(r['floor_ns0']['p50_ms'], 3)} |")
    sync = [r for r in rows if r["system"] == "heapmem" and "feedback_full" in r]
    if sync:
        names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        dflt = names.get(sync[0].get("synchronous_default"), "?")
        print(f"\n### Writes: the default (synchronous={dflt}) vs synchronous=FULL "
              "(durable=True: one fsync per commit)\n")
        print("| store | tracked recall p50 ms | feedback p50 ms | add p50 ms "
              "| tracked p50 ms FULL | feedback p50 ms FULL | add p50 ms FULL |")
        print("|---|---|---|---|---|---|---|")
        for r in sync:
            print(f"| {r['corpus']} | " + " | ".join(
                f(r[k]["p50_ms"], 3) for k in ("recall_tracked", "feedback", "add",
                                               "recall_tracked_full", "feedback_full",
                                               "add_full")) + " |")
    gone = [r for r in rows if r["system"] == "heapmem" and r.get("forget")]
    if gone:
        print("\n### Forget (FTS5 secure-delete; one memory per call, then a batch)\n")
        print("| store | memories | forget p50 ms | forget p95 ms | batch: memories | batch ms |")
        print("|---|---|---|---|---|---|")
        for r in gone:
            b = r.get("forget_batch", {})
            print(f"| {r['corpus']} | {f(r['memories'])} | {f(r['forget']['p50_ms'], 2)} | "
                  f"{f(r['forget']['p95_ms'], 2)} | {f(b.get('n'))} | {f(b.get('ms'), 1)} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"env": env, "rows": rows}, fh, indent=1)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
