"""What auto-tune costs the feedbacks that run it (issues 24 and 34, bench/RESULTS.md 17, 23).

For each size N, a store (heapmem.open's defaults, 20 namespaces of 60
memories, k=5) gets N - 1 judged recalls with auto_tune=False (the count is
kept), is reopened with auto-tune on, and its next feedback, the Nth judged
recall, claims the schedule's point (its last at or below N: N itself when N
is one).  Since issue 34 the tune runs in steps (csrc/tune.c HT_STEP_WORK),
one after each feedback, so the feedbacks from the claim on are timed until
the one that returns the report: how many there were, their median and the
slowest.  The plain feedbacks (auto-tune off, on a copy of the store) give
the median a feedback costs without any tune.  Past auto-tune's window
(csrc/tune.c HT_AUTO_WINDOW, 2,000) judged recalls tune replays the newest
2,000, so the work stops growing.

    python bench/autotune.py                  # N = 30, 240, 1920, 3840, 7680
    python bench/autotune.py --sizes 30,240
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

import perf  # bench/perf.py: copying a store's files

import heapmem
from heapmem.learning import tune

NOW = 1_800_000_000.0
WORDS = ("flight lisbon hotel booked march dinner friend sister paris train dentist tuesday "
         "landlord rent gym yoga coffee meeting project deadline birthday gift").split()


def build(path: str, n: int, rng: random.Random) -> None:
    """A store with n judged recalls, auto-tune off (its count kept)."""
    with heapmem.open(path, clock=lambda: NOW, auto_tune=False) as mem:
        mem.add_many([{"text": " ".join(rng.sample(WORDS, 6)) + f" number {i}",
                       "namespace": f"ns{i % 20}", "kind": rng.choice(("fact", "note", "episode")),
                       "created_at": NOW - rng.random() * 90 * 86400} for i in range(1200)])
        for i in range(n):
            res = mem.recall(" ".join(rng.sample(WORDS, 3)), namespace=f"ns{i % 20}", k=5)
            mem.feedback(used=[rng.choice(list(res.ids))], recall_id=res.recall_id)


def measure(path: str, rng: random.Random) -> tuple[float, list[float], tune.TuneReport]:
    """(the median of 20 plain feedbacks, ms; each feedback from the claim to
    the report, ms; the report), the plain ones on a copy of the store so that
    the claiming one is the Nth."""
    copy = path + ".copy.db"
    perf.copy_sqlite(path, copy)
    plain = []
    with heapmem.open(copy, clock=lambda: NOW, auto_tune=False) as mem:
        for i in range(20):
            res = mem.recall(" ".join(rng.sample(WORDS, 3)), namespace=f"ns{i % 20}", k=5)
            t = time.perf_counter()
            mem.feedback(used=[res.ids[0]], recall_id=res.recall_id)
            plain.append((time.perf_counter() - t) * 1000)
    took = []
    with heapmem.open(path, clock=lambda: NOW) as mem:
        while True:
            res = mem.recall(" ".join(rng.sample(WORDS, 3)), namespace="ns0", k=5)
            t = time.perf_counter()
            fb = mem.feedback(used=[res.ids[0]], recall_id=res.recall_id)
            took.append((time.perf_counter() - t) * 1000)
            if fb.auto_tune is not None or len(took) > 100_000:
                break
    assert fb.auto_tune is not None, "auto-tune did not run"
    return statistics.median(plain), took, fb.auto_tune


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="30,240,1920,3840,7680",
                    help="comma-separated numbers of judged recalls at the triggering feedback")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="heapmem-autotune-")
    rows = ["| judged recalls | replayed | plain feedback p50 ms | feedbacks the tune took | "
            "their p50 ms | the slowest ms | all of them ms | deployed |",
            "|---|---|---|---|---|---|---|---|"]
    try:
        for n in (int(x) for x in a.sizes.split(",")):
            rng = random.Random(n)
            path = os.path.join(tmp, f"s{n}.db")
            build(path, n - 1, rng)
            plain, took, rep = measure(path, rng)
            rows.append(f"| {n} | {rep.recalls} | {plain:.2f} | {len(took)} | "
                        f"{statistics.median(took):.2f} | {max(took):.2f} | {sum(took):.0f} | "
                        f"{'yes' if rep.deployed else 'no'} |")
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
