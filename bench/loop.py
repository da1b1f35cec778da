#!/usr/bin/env python
"""The loop's cost (issue 34): tracked recall + feedback per second on the LoCoMo file,
from 1, 2 and 4 processes, with each call's latency.

The store is LoCoMo's 5,882 turns in their 10 conversations' namespaces (the memories
bench/locomo.py makes: "Speaker: text", kind "fact", created at their session's date),
opened with heapmem.open()'s defaults (hybrid recall with the carried embedder,
auto-tune on).  One round is what an agent that gives feedback does per turn:
recall(question, k=10, track=True) in the question's conversation, then
feedback(used=[the first gold turn shown, else the top result]) on it (the rest
ignored).  Questions are LoCoMo's 1,986, in a seeded order of their own per process.

Each run starts from a fresh copy of the built store (no feedback yet: auto-tune's
points 30, 60, 120 ... fall inside the run), the processes start together (a barrier)
and run for --seconds (or --rounds each: the same work on any machine); a round counts
when both of its calls returned.  Reported per process count: rounds per second over
all processes together, and each call's latency p50 / p99 / p99.9 / max over every
round of every process.  Then the same rounds from
one process with auto-tune on, the feedbacks that ran it named.

    python bench/loop.py                       # 1, 2 and 4 processes, 20 s each
    python bench/loop.py --procs 1 --seconds 10
    python bench/loop.py --profile             # cProfile of one process's rounds
    python bench/loop.py --memories 100000     # feedback against recall at 100k (below)
    valgrind --tool=callgrind python bench/loop.py --procs 1 --rounds 1500 --no-auto-tune
        # instructions a call: callgrind_annotate --inclusive=yes, heap_recall's hr_filter
        # and heap_feedback's hf_sql, each over the rounds (1,500 whatever the speed)

--memories N (N > 5,882) builds instead a multi-tenant store of N memories as
bench/perf.py does (one perturbed LoCoMo replica per namespace, perf.py's own code),
and runs the rounds there, one process, questions drawn among its namespaces: the
ratio of feedback p50 to recall p50 at that size, in one run.
--features adds a table of feedback latency against the number of features it
touched (links_updated), to show whether it grows with them; --sweep-k 3,10,40
runs one process's rounds at each k (more memories shown and judged, more
features touched) and prints feedback p50 against the features a feedback
touched.
--history N prints the first process's recall and feedback CPU p50 per block of N
rounds, in the order they ran: how much more a round costs after 8,000 rounds of
feedback than after 1,000 (`--procs 1 --rounds 8000 --history 1000`; a recall reads at
most 32 judgements a candidate, so the growth stops once the windows are full).
--checkpoint between turns the store's WAL checkpoints off in every process
(PRAGMA wal_autocheckpoint=0 takes the checkpoint thread's WAL hook away) and
checkpoints between rounds, untimed (PRAGMA wal_checkpoint(PASSIVE) every 50
rounds).  The default, auto, is the store's own: a thread of each process
checkpoints beside its calls (db.connect.Checkpointer), where SQLite's
autocheckpoint put the copy and the disk's fsync on whichever call's commit
filled the WAL.

Timings depend on the machine: on a shared one, say so beside the figures.  Each
call is also timed in CPU time (time.thread_time: what it computed, without the
time it waited for a processor, the disk's fsync or another process's lock),
which a busy machine inflates far less than wall time: a second table.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if REPO not in sys.path:
    sys.path.append(REPO)

import perf  # noqa: E402  (bench/perf.py: the multi-tenant corpus, removing a store's files)

DEFAULT_DATA = next((p for p in (os.path.join(REPO, *up, "shared", "data", "locomo",
                                              "locomo10.json") for up in ((".."), ("..", "..")))
                     if os.path.exists(p)), os.path.join(REPO, "..", "shared", "data", "locomo",
                                                         "locomo10.json"))
K = 10


def pct(xs: Sequence[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    at = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[at]


def stats_ms(xs: Sequence[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50": pct(xs, 50) * 1e3, "p99": pct(xs, 99) * 1e3,
            "p99.9": pct(xs, 99.9) * 1e3, "max": (max(xs) if xs else float("nan")) * 1e3,
            "mean": (statistics.fmean(xs) if xs else float("nan")) * 1e3}


def load_rounds(data: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """LoCoMo's memories and questions (as bench/locomo.py reads them), and the time
    questions are asked (a day after the last session of any conversation)."""
    import locomo
    convs, _ = locomo.load_locomo(data)
    memories = [m for c in convs for m in c.memories]
    questions = [{"q": q.text, "ns": c.id, "gold": sorted(q.gold)}
                 for c in convs for q in c.questions]
    return memories, questions, max(c.ask_ts for c in convs)


def build_locomo(path: str, memories: list[dict[str, Any]], now: float) -> None:
    import heapmem
    with heapmem.open(path, clock=lambda: now) as mem:
        mem.add_many([dict(m) for m in memories])


def build_multi(path: str, data: str, n: int, seed: int, now_out: list[float],
                ) -> list[dict[str, Any]]:
    """bench/perf.py's multi-tenant store of n memories; its questions as rounds."""
    import heapmem
    base = perf.Base(data)
    with heapmem.open(path, clock=lambda: base.now) as mem:
        for batch in perf.batched(perf.iter_memories(base, n, "multi", seed), 10_000):
            mem.add_many(batch)
    now_out.append(base.now)
    qs = perf.make_queries(base, n, "multi", seed, 4000, "loop")["queries"]
    return [{"q": q, "ns": ns, "gold": []} for q, ns in qs]


def worker(args: tuple[Any, ...]) -> dict[str, Any]:
    path, rounds, now, seed, seconds, barrier, profile, auto_tune, k, checkpoint, limit = args
    import heapmem
    mem = heapmem.open(path, clock=lambda: now, auto_tune=auto_tune)
    if checkpoint == "between":
        mem.connection.execute("PRAGMA wal_autocheckpoint=0")
    rng = random.Random(seed)
    order = list(range(len(rounds)))
    rng.shuffle(order)
    rec, fb, feats, tuned = [], [], [], []
    rec_cpu: list[float] = []
    fb_cpu: list[float] = []
    # warm the connection (statements, the namespaces' vectors) on untracked recalls
    for ns in sorted({r["ns"] for r in rounds}):
        mem.recall("what did they say", k=K, namespace=ns, track=False)
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
    if barrier is not None:
        barrier.wait()
    t_end = time.perf_counter() + seconds
    i = 0
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    paused = 0.0
    while len(fb) < limit if limit else time.perf_counter() < t_end + paused:
        r = rounds[order[i % len(order)]]
        i += 1
        if checkpoint == "between" and i % 50 == 0:
            t = time.perf_counter()
            mem.connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            paused += time.perf_counter() - t
        t, c = time.perf_counter(), time.thread_time()
        res = mem.recall(r["q"], k=k, namespace=r["ns"], track=True)
        t1, c1 = time.perf_counter(), time.thread_time()
        if not len(res) or res.recall_id is None:
            continue
        gold = [m for m in res.ids if m in r["gold"]]
        out = mem.feedback(gold[:1] or [res.ids[0]], recall_id=res.recall_id)
        t2, c2 = time.perf_counter(), time.thread_time()
        rec.append(t1 - t)
        fb.append(t2 - t1)
        rec_cpu.append(c1 - c)
        fb_cpu.append(c2 - c1)
        feats.append(out.links_updated)
        if out.auto_tune is not None:
            tuned.append({"round": len(fb), "ms": (t2 - t1) * 1e3,
                          "recalls": out.auto_tune.recalls})
    wall = time.perf_counter() - t0 - paused
    if prof:
        prof.disable()
        import io
        import pstats
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
        print(s.getvalue(), file=sys.stderr)
    mem.close()
    return {"rec": rec, "fb": fb, "rec_cpu": rec_cpu, "fb_cpu": fb_cpu, "feats": feats,
            "tuned": tuned, "wall": wall}


def run(path_base: str, workdir: str, rounds: list[dict[str, Any]], now: float, procs: int,
        seconds: float, seed: int, profile: bool = False, auto_tune: bool = True, k: int = K,
        checkpoint: str = "auto", limit: int = 0, history: int = 0) -> dict[str, Any]:
    path = os.path.join(workdir, f"run-{procs}.db")
    perf.copy_sqlite(path_base, path)
    ctx = mp.get_context("spawn")
    if procs == 1:
        outs = [worker((path, rounds, now, seed, seconds, None, profile, auto_tune, k,
                        checkpoint, limit))]
    else:
        with ctx.Manager() as mgr:
            barrier = mgr.Barrier(procs)
            with ctx.Pool(procs) as pool:
                outs = pool.map(worker, [(path, rounds, now, seed + p, seconds, barrier, False,
                                          auto_tune, k, checkpoint, limit)
                                         for p in range(procs)])
    import heapmem
    with heapmem.open(path) as mem:
        check = mem.check()
    n = sum(len(o["fb"]) for o in outs)
    wall = max(o["wall"] for o in outs)
    rec = [x for o in outs for x in o["rec"]]
    fb = [x for o in outs for x in o["fb"]]
    feats = [x for o in outs for x in o["feats"]]
    return {"procs": procs, "k": k, "rounds": n, "seconds": wall, "per_second": n / wall,
            "per_process": [round(len(o["fb"]) / o["wall"], 1) for o in outs],
            "features_p50": pct(feats, 50) if feats else 0,
            "recall": stats_ms(rec), "feedback": stats_ms(fb),
            "recall_cpu": stats_ms([x for o in outs for x in o["rec_cpu"]]),
            "feedback_cpu": stats_ms([x for o in outs for x in o["fb_cpu"]]),
            "tuned": [t for o in outs for t in o["tuned"]], "check_ok": check.ok,
            "by_features": by_features(fb, feats),
            "by_history": by_history(outs[0]["rec_cpu"], outs[0]["fb_cpu"], history)}


def by_history(rec: Sequence[float], fb: Sequence[float], block: int) -> list[dict[str, Any]]:
    """The first process's recall and feedback CPU p50 per block of `block`
    rounds, in the order they ran: whether a round costs more as the store's
    feedback piles up (none when block is 0)."""
    if block <= 0:
        return []
    return [{"rounds": f"{i + 1}-{i + block}", "recall_p50": pct(rec[i:i + block], 50) * 1e3,
             "feedback_p50": pct(fb[i:i + block], 50) * 1e3}
            for i in range(0, len(fb) - block + 1, block)]


def by_features(fb: Sequence[float], feats: Sequence[int]) -> list[dict[str, Any]]:
    """Feedback p50 per band of links_updated (the features it touched)."""
    bands = [(0, 60), (60, 100), (100, 140), (140, 180), (180, 100000)]
    out = []
    for lo, hi in bands:
        xs = [t for t, f in zip(fb, feats) if lo <= f < hi]
        if xs:
            out.append({"features": f"{lo}-{hi if hi < 100000 else ''}", "n": len(xs),
                        "p50": pct(xs, 50) * 1e3, "p99": pct(xs, 99) * 1e3})
    return out


def fmt(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def spread(d: dict[str, float]) -> str:
    """A call's p50 / p99 / p99.9 / max, in ms."""
    return " / ".join(fmt(d[k]) for k in ("p50", "p99", "p99.9", "max"))


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| processes | rounds | rounds/s | recall p50 / p99 / p99.9 / max ms | "
             "feedback p50 / p99 / p99.9 / max ms | feedback p50 / recall p50 | "
             "feedback p99.9 / p50 | check |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        rc, fb = r["recall"], r["feedback"]
        lines.append(
            f"| {r['procs']} | {r['rounds']} | {r['per_second']:.0f} | {spread(rc)} | "
            f"{spread(fb)} | {fb['p50'] / rc['p50']:.2f} | {fb['p99.9'] / fb['p50']:.1f} | "
            f"{'ok' if r['check_ok'] else 'FAILED'} |")
    return "\n".join(lines)


def cpu_table(results: list[dict[str, Any]]) -> str:
    """The same calls in CPU time (time.thread_time: what a call computed, without the
    time it waited for the processor, the disk or another process's lock)."""
    lines = ["| processes | recall CPU p50 / p99 / p99.9 / max ms | feedback CPU p50 / p99 / "
             "p99.9 / max ms | feedback / recall (p50) | feedback p99.9 / p50 |",
             "|---|---|---|---|---|"]
    for r in results:
        rc, fb = r["recall_cpu"], r["feedback_cpu"]
        lines.append(
            f"| {r['procs']} | {spread(rc)} | {spread(fb)} | {fb['p50'] / rc['p50']:.2f} | "
            f"{fb['p99.9'] / fb['p50']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--procs", default="1,2,4", help="process counts, comma-separated")
    ap.add_argument("--seconds", type=float, default=20.0, help="each run's length")
    ap.add_argument("--rounds", type=int, default=0,
                    help="instead of --seconds, this many rounds a process (the same work "
                         "whatever the machine's speed: for callgrind, and builds compared)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memories", type=int, default=0,
                    help="a bench/perf.py multi-tenant store of this many memories instead")
    ap.add_argument("--profile", action="store_true", help="cProfile one process's rounds")
    ap.add_argument("--features", action="store_true",
                    help="feedback p50 by the number of features it touched")
    ap.add_argument("--history", type=int, default=0, metavar="N",
                    help="recall and feedback CPU p50 per block of N rounds of the first "
                         "process, in order: whether a round grows with the feedback taken")
    ap.add_argument("--sweep-k", help="one process's rounds at each of these k instead")
    ap.add_argument("--no-auto-tune", action="store_true",
                    help="open the stores with auto_tune=False (the count kept, nothing tuned)")
    ap.add_argument("--checkpoint", choices=("auto", "between"), default="auto",
                    help="auto: the store's own (a thread beside the calls); between: "
                         "untimed, between rounds")
    ap.add_argument("--workdir")
    ap.add_argument("--store", help="reuse this built store (copied for each run)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="heapmem-loop-")
    os.makedirs(workdir, exist_ok=True)
    memories, rounds, now = load_rounds(args.data)
    base = args.store or os.path.join(workdir, "base.db")
    t = time.perf_counter()
    if args.memories:
        box: list[float] = []
        rounds = build_multi(base, args.data, args.memories, args.seed, box) \
            if not args.store else json.load(open(base + ".rounds.json"))
        if not args.store:
            json.dump(rounds, open(base + ".rounds.json", "w"))
            json.dump(box, open(base + ".now.json", "w"))
        now = json.load(open(base + ".now.json"))[0] if args.store else box[0]
    elif not args.store:
        build_locomo(base, memories, now)
    import apsw
    c = apsw.Connection(base)  # (not heapmem.open: a store of an older schema stays as it is)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    count = c.execute("SELECT count(*) FROM memories").fetchall()[0][0]
    c.close()
    print(f"store: {count} memories, built in {time.perf_counter() - t:.1f} s "
          f"({base})", file=sys.stderr)
    results = []
    length = (f"{args.rounds:,} rounds a process" if args.rounds else
              f"{args.seconds:g} s a run")
    if args.sweep_k:
        sweep = []
        for k in [int(x) for x in args.sweep_k.split(",")]:
            r = run(base, workdir, rounds, now, 1, args.seconds, args.seed, k=k,
                    checkpoint=args.checkpoint, limit=args.rounds)
            sweep.append(r)
            print(f"k {k}: {r['rounds']} rounds, features touched p50 {r['features_p50']}, "
                  f"feedback p50 {r['feedback']['p50']:.2f} ms", file=sys.stderr)
        print(f"\n{count} memories, {length}, checkpoint {args.checkpoint}, "
              f"load average {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M %Z')}\n")
        print("| k | rounds | features a feedback touched (p50) | feedback p50 / p99 ms | "
              "feedback CPU p50 ms | recall p50 ms |\n|---|---|---|---|---|---|")
        for r in sweep:
            print(f"| {r['k']} | {r['rounds']} | {r['features_p50']} | "
                  f"{fmt(r['feedback']['p50'])} / {fmt(r['feedback']['p99'])} | "
                  f"{fmt(r['feedback_cpu']['p50'])} | {fmt(r['recall']['p50'])} |")
        return 0
    for p in [int(x) for x in args.procs.split(",")]:
        r = run(base, workdir, rounds, now, p, args.seconds, args.seed, args.profile and p == 1,
                auto_tune=not args.no_auto_tune, checkpoint=args.checkpoint, limit=args.rounds,
                history=args.history)
        results.append(r)
        print(table([r]).splitlines()[-1], file=sys.stderr)
        for tt in r["tuned"]:
            print(f"  auto-tune at {tt['recalls']} judged recalls: that feedback took "
                  f"{tt['ms']:.1f} ms", file=sys.stderr)
    load = os.getloadavg()[0]
    print(f"\n{count} memories, {length}, checkpoint {args.checkpoint}, load "
          f"average {load:.2f}, {time.strftime('%Y-%m-%d %H:%M %Z')}\n")
    print(table(results))
    print("\nIn CPU time:\n")
    print(cpu_table(results))
    for r in results:
        if args.features:
            print(f"\nfeedback by features touched ({r['procs']} processes):")
            print("\n".join(f"  {b['features']:>8}: n {b['n']:5d}  p50 {b['p50']:.2f} ms  "
                            f"p99 {b['p99']:.2f} ms" for b in r["by_features"]))
        if args.history:
            print(f"\nCPU p50 by rounds run, the first of {r['procs']} processes:")
            print("\n".join(f"  rounds {b['rounds']:>11}: recall {b['recall_p50']:.2f} ms  "
                            f"feedback {b['feedback_p50']:.2f} ms" for b in r["by_history"]))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"memories": count, "seconds": args.seconds, "rounds": args.rounds,
                       "load": load,
                       "results": results}, fh, indent=1)
    if not args.workdir and not args.store:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
