#!/usr/bin/env python
"""How long `heapmem report` takes (issue 23): at the demo's size and at 100k memories.

Two stores:
  demo   examples/lisbon.py's agent.db (27 memories, 72 judgements), built in a temp folder
  100k   a synthetic store, seeded: --namespaces namespaces of --size / namespaces memories
         each (facts with a date and a time, preferences, price quotes, notes, over words
         drawn from a made-up vocabulary, said over the year before the first feedback),
         then --days days of feedback: each day --recalls tracked recalls in namespaces drawn
         at random, "When is my <thing>?" about one of its facts; the fact judged used if
         the recall showed it (the rest ignored), else every shown memory ignored
The 100k store is kept in --workdir (default bench/out/report) and reused when its
sidecar .json says it was built with the same parameters.

Figures (wall time, median and max of --runs runs each, on a warm page cache):
  cli        `heapmem report STORE -o FILE` as a new process (what a user waits for:
             Python's start and heapmem's import included)
  in process write_report(mem, FILE) on an open store, and its parts: the event log per
             day (learning.by_day), links(), the chosen recall (re-ranked), stats(), check()

Run:
  python bench/report.py                  # both stores (building 100k takes a minute or two)
  python bench/report.py --size 20000     # a smaller second store
Never put timing assertions in tests: these figures go to bench/RESULTS.md, section 12.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import perf  # noqa: E402  (bench/perf.py: removing a store's files)

import heapmem  # noqa: E402
from heapmem import learning  # noqa: E402
from heapmem.io import report  # noqa: E402

DAY = 86400.0
START = 1_767_225_600.0  # 2026-01-01 00:00 UTC: the first day of feedback
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]


def vocabulary(rng: random.Random, n: int) -> list[str]:
    syll = ["ka", "lo", "mi", "ter", "van", "su", "rel", "do", "pin", "gra", "bel", "tos",
            "ner", "ush", "ol", "ri", "cam", "fen", "zu", "ad"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syll) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def memory(rng: random.Random, words: list[str], ns: str, i: int) -> tuple[dict, tuple | None]:
    """One memory, and (namespace, thing, id) when it is a fact a question can ask about."""
    w = rng.sample(words, 3)
    age = rng.uniform(0, 365) * DAY
    mid = f"{ns}-{i}"
    kind = rng.random()
    if kind < 0.3:
        text = (f"Booked the {w[0]} {w[1]} for {rng.choice(MONTHS)} {rng.randint(1, 28)} at "
                f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}{rng.choice(['am', 'pm'])}")
        rec = {"text": text, "kind": "fact", "source": "user"}
        ask = (ns, f"{w[0]} {w[1]}", mid)
    elif kind < 0.55:
        rec = {"text": f"I'd love to try the {w[0]} {w[1]} {w[2]} someday",
               "kind": "preference", "source": "user"}
        ask = None
    elif kind < 0.8:
        rec = {"text": f"The {w[0]} {w[1]} costs around ${rng.randint(5, 900)}",
               "kind": "tool_result", "source": "tool"}
        ask = None
    else:
        rec = {"text": f"{rng.choice(NAMES)} said the {w[0]} {w[1]} is near the {w[2]}",
               "kind": "note", "source": "user"}
        ask = None
    rec.update(id=mid, namespace=ns, created_at=START - age)
    return rec, ask


def build(path: str, size: int, namespaces: int, days: int, recalls: int, seed: int) -> dict:
    perf.remove_sqlite(path)
    rng = random.Random(seed)
    words = vocabulary(rng, 3000)
    now = {"t": START}
    mem = heapmem.open(path, clock=lambda: now["t"])
    facts: dict[str, list[tuple]] = {}
    t0 = time.perf_counter()
    per_ns = size // namespaces
    for k in range(namespaces):
        ns = f"tenant-{k:03d}"
        batch = []
        for i in range(per_ns if k < namespaces - 1 else size - per_ns * (namespaces - 1)):
            rec, ask = memory(rng, words, ns, i)
            batch.append(rec)
            if ask:
                facts.setdefault(ns, []).append(ask)
            if len(batch) == 2000:
                mem.add_many(batch)
                batch = []
        if batch:
            mem.add_many(batch)
    t_add = time.perf_counter() - t0
    t0 = time.perf_counter()
    judged = 0
    names = sorted(facts)
    for d in range(days):
        for j in range(recalls):
            now["t"] = START + d * DAY + j * 30.0
            ns = rng.choice(names)
            _, thing, mid = rng.choice(facts[ns])
            res = mem.recall(f"When is my {thing}?", namespace=ns, k=5)
            if res.recall_id is None:
                continue
            if mid in res.ids:
                mem.feedback(used=[mid], recall_id=res.recall_id)
            else:
                mem.mark_ignored(res.ids, recall_id=res.recall_id)
            judged += 1
    t_fb = time.perf_counter() - t0
    st = mem.stats()
    mem.close()
    return {"size": size, "namespaces": namespaces, "days": days, "recalls": recalls,
            "seed": seed, "memories": st.memories, "judged_recalls": judged,
            "events": st.events, "used": st.used, "link_rows": st.link_rows,
            "build_s": round(t_add, 1), "feedback_s": round(t_fb, 1),
            "heapmem": heapmem.__version__}


def median_max(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.0f} ms (max {max(xs) * 1000:.0f})"


def measure(path: str, out: str, runs: int, now: str | None) -> dict:
    cli = [str(Path(sys.executable).with_name("heapmem"))]
    if not os.path.exists(cli[0]):
        cli = [sys.executable, "-m", "heapmem"]
    args = cli + ["report", path, "-o", out] + (["--now", now] if now else [])
    subprocess.run(args, check=True, capture_output=True)  # warm the page cache
    t_cli = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        t_cli.append(time.perf_counter() - t0)
    parts: dict[str, list[float]] = {k: [] for k in (
        "write_report", "by_day", "links", "recall", "stats", "check")}
    with heapmem.open(path, readonly=True) as mem:
        for _ in range(runs):
            t0 = time.perf_counter()
            report.write_report(mem, out)
            parts["write_report"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with mem.snapshot() as c:
                learning.by_day(c)
                rid = learning.newest_recall(c)
            parts["by_day"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mem.links()
            parts["links"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            if rid is not None:
                lr = mem.log.get(rid)
                r = mem.recall(lr.query, namespace=lr.namespace, k=len(lr.shown),
                               now=lr.created_at, track=False)
                [x.explain() for x in r]
            parts["recall"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mem.stats()
            parts["stats"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mem.check()
            parts["check"].append(time.perf_counter() - t0)
    return {"cli": median_max(t_cli), **{k: median_max(v) for k, v in parts.items()},
            "page_bytes": os.path.getsize(out),
            "file_mb": round(os.path.getsize(path) / 2**20, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--recalls", type=int, default=40, help="tracked recalls a day")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", default=str(ROOT / "bench" / "out" / "report"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    print(f"heapmem {heapmem.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")

    tmp = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                       check=True, capture_output=True)
        demo = measure(os.path.join(tmp, "agent.db"), os.path.join(tmp, "report.html"),
                       args.runs, "2025-03-14")
    finally:
        shutil.rmtree(tmp)
    print("demo (27 memories, 72 judgements):", json.dumps(demo, indent=1))

    params = {k: getattr(args, k) for k in ("size", "namespaces", "days", "recalls", "seed")}
    path = os.path.join(args.workdir, f"report-{args.size}.db")
    side = path + ".json"
    info = None
    if os.path.exists(path) and os.path.exists(side):
        with open(side) as f:
            info = json.load(f)
        if {k: info.get(k) for k in params} != params or info.get("heapmem") != \
                heapmem.__version__:
            info = None
        else:
            try:
                heapmem.open(path, readonly=True).close()
            except heapmem.HeapmemError:  # an older schema: build it again
                info = None
    if info is None:
        print(f"building {path} ...", flush=True)
        info = build(path, **params)
        with open(side, "w") as f:
            json.dump(info, f, indent=1)
    else:
        print(f"reusing {path}")
    print("store:", json.dumps(info))
    big = measure(path, os.path.join(args.workdir, "report.html"), args.runs, None)
    print(f"{args.size} memories:", json.dumps(big, indent=1))


if __name__ == "__main__":
    main()
