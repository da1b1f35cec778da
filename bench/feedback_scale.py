"""Feedback's cost against the number of namespaces behind each pooled link.

The pooled layer is a winsorized sum over namespaces (RELIABILITY.md,
threats): when a feedback moves a namespace's rate of use across a feature's
trim boundary, that feature's pooled row is reworked.  Before schema 6 the
rework read and sorted every namespace's row of the feature; now it reads the
`trim + 1` lowest and highest rates through the links_rate index.  This bench
shows what that costs as namespaces multiply, in a synthetic store (no
LoCoMo needed): K namespaces of 12 short memories each, two feedbacks per
namespace to warm the links, then 300 recalls, each followed by a feedback
that cites the top result (the rest counted as ignored).  Seeded, with an
injected clock: the same store and the same feedbacks every run.

    python bench/feedback_scale.py                      # K = 18, 171, 1,700
    python bench/feedback_scale.py --namespaces 1700 --profile

--profile adds apsw's per-statement times (the SQL's share of a feedback).
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import perf  # noqa: E402  (bench/perf.py: removing a store's files)

import heapmem  # noqa: E402

WORDS = ("alpha beta gamma delta flight hotel lisbon train car boat market pizza code vault "
         "tuesday march 14 9:40am yesterday when where who").split()
NOW = 1.7e9


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(30)) for _ in range(n))


def _question(rng: random.Random, i: int) -> str:
    return ("when " if i % 2 else "who ") + _text(rng, 4)


def build(path: str, k: int, per: int = 12) -> float:
    """The store: k namespaces of `per` memories, two warm-up feedbacks each.
    Returns the seconds it took."""
    t = time.perf_counter()
    rng = random.Random(0)
    with heapmem.open(path, clock=lambda: NOW) as mem:
        mem.add_many([{"text": _text(rng, 12), "namespace": f"ns{i % k}",
                       "source": rng.choice(["user", "tool", "maya"]),
                       "created_at": 1.6e9 + i * 1000} for i in range(k * per)])
        for i in range(2 * k):
            res = mem.recall(_question(rng, i), namespace=f"ns{i % k}", k=10)
            if res.ids:
                mem.feedback([res.ids[0]], recall_id=res.recall_id)
    return time.perf_counter() - t


def measure(path: str, k: int, n: int = 300, profile: bool = False) -> dict:
    rng = random.Random(1)
    stmts: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()

    def hook(statement: str, ns: int) -> None:
        key = " ".join(statement.split())[:64]
        stmts[key] += ns / 1e6
        calls[key] += 1

    times = []
    with heapmem.open(path, clock=lambda: NOW) as mem:
        for i in range(n + 50):
            res = mem.recall(_question(rng, i), namespace=f"ns{rng.randrange(k)}", k=10)
            if not res.ids:
                continue
            if profile and i >= 50:
                mem.connection.setprofile(hook)
            t = time.perf_counter()
            mem.feedback([res.ids[0]], recall_id=res.recall_id)
            d = time.perf_counter() - t
            mem.connection.setprofile(None)
            if i >= 50:  # the first 50 warm the caches
                times.append(d)
    times.sort()
    out = {"namespaces": k, "feedbacks": len(times),
           "p50_ms": statistics.median(times) * 1e3,
           "p90_ms": times[int(len(times) * 0.9)] * 1e3}
    if profile:
        out["statements"] = [(v / len(times), calls[s] / len(times), s)
                             for s, v in sorted(stmts.items(), key=lambda x: -x[1])]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namespaces", default="18,171,1700",
                    help="comma list of namespace counts (default 18,171,1700)")
    ap.add_argument("--feedbacks", type=int, default=300)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="heapmem-fbscale-")
    print("| namespaces | memories | build s | feedback p50 ms | p90 ms |")
    print("|---|---|---|---|---|")
    for k in (int(x) for x in args.namespaces.split(",")):
        path = os.path.join(work, f"k{k}.db")
        perf.remove_sqlite(path)
        built = build(path, k)
        r = measure(path, k, args.feedbacks, args.profile)
        print(f"| {k:,} | {12 * k:,} | {built:.1f} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} |",
              flush=True)
        if args.profile:
            for ms, per, s in r["statements"][:14]:
                print(f"    {ms:7.3f} ms  {per:5.1f}/feedback  {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
