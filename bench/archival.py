#!/usr/bin/env python
"""An archival rule on LoCoMo, measured only (issue 24): memories shown many times and
never used leave the candidates. Nothing of it is in heapmem's recall; this harness
emulates it.

The protocol is bench/locomo.py's within-conversation one (--protocol within), through
its own functions: per conversation, its questions less near-duplicates split in half
(seeded), feedback (oracle by default) from one half in that conversation's namespace in
a fresh copy of the base store, the other half evaluated with track=False. After the
feedback half, each memory of the namespace is counted from the store's trajectories
(heapmem.io.transfer.export_trajectories, which reads mem.log.get and
mem.log.events()): times shown by a tracked recall, times judged ignored, times judged
used. A rule archives a memory that was never judged used and was

  ignored >= N      judged ignored at least N times (only judged recalls count), or
  shown >= N        shown at least N times by any tracked recall, judged or not (with
                    oracle feedback a round is skipped when no gold turn is shown, so its
                    memories are shown and never judged)

and the evaluated half is ranked with the archived memories taken out of the results
(recall asked for k = 50 + their number, the archived dropped, the top 50 kept).
Emulation, not the rule itself: an archived memory still takes a place in recall's
candidate pool (ScoringConfig.candidates, 50), and relevance is still normalised by the
best candidate's BM25 and cosine even when that one is archived; the feedback half is
not replayed with the rule on (a memory archived mid-way would have stopped being shown,
and judged). In LOCO the held-out conversation gets no feedback, so no rule archives
anything there: only the within protocol can show an effect.

Per rule: the memories archived, the evaluated questions with a gold turn archived (and
with every gold turn archived: those the rule makes unanswerable), MRR, Hit@3, Hit@10,
and paired differences with 95% bootstrap CIs against the same feedback without the rule
and against no feedback.

Run:
  python bench/archival.py                              # oracle feedback, seed 0, < 1 min
  python bench/archival.py --condition answer --seeds 0,1,2
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import locomo  # noqa: E402  (bench/locomo.py)

RULES = ("ignored", "shown")
DEFAULT_THRESHOLDS = (2, 3, 5, 10)


def memory_counts(mem: Any, namespace: str) -> dict[str, dict[str, int]]:
    """Per memory of the namespace: shown (by tracked recalls), ignored, used, from the
    store's trajectories (heapmem.io.transfer.export_trajectories)."""
    from heapmem.io import transfer

    buf = io.StringIO()
    transfer.export_trajectories(mem, buf, namespace=namespace)
    counts: dict[str, dict[str, int]] = {}
    lines = buf.getvalue().splitlines()
    for line in lines[1:]:                      # the first is the header
        for s in json.loads(line)["shown"]:
            c = counts.setdefault(s["id"], {"shown": 0, "ignored": 0, "used": 0})
            c["shown"] += 1
            if s["judged"] is not None:
                c[s["judged"]] += 1
    return counts


def archived(counts: dict[str, dict[str, int]], rule: str, n: int) -> set[str]:
    """The memories the rule takes out: never judged used, and ignored (or shown) n times."""
    return {i for i, c in counts.items() if c["used"] == 0 and c[rule] >= n}


def evaluate_without(store: Any, questions: Sequence[locomo.Question], config: Any,
                     gone: set[str]) -> dict[str, Any]:
    """locomo.evaluate with the archived memories left out of every ranking."""
    k = min(1000, locomo.K_EVAL + len(gone))
    ranks = []
    for q in questions:
        ids, _ = store.recall(q.text, k=k, namespace=q.conv, now=q.ask_ts, config=config,
                              track=False)
        ranks.append(locomo.rank_of([i for i in ids if i not in gone], q.gold))
    return {"qids": [q.qid for q in questions], "ranks": ranks}


def run_seed(system: Any, base: str, plan: locomo.Plan, policy: str, rules: Sequence[str],
             thresholds: Sequence[int], workdir: str) -> dict[str, Any]:
    """One split: per conversation, no feedback, feedback, and feedback with each rule."""
    cfg = system.configs["defaults"]
    keys = [("none", 0)] + [(r, n) for r in rules for n in thresholds]
    groups: dict[Any, dict[str, list]] = {k: {"qids": [], "ranks": []} for k in keys}
    nofb = {"qids": [], "ranks": []}
    info: dict[Any, dict[str, int]] = {k: {"archived": 0, "gold_hit": 0, "gold_all": 0}
                                       for k in keys}
    for ci, (conv, (fb, ev)) in enumerate(plan.within.items()):
        store = system.fork(base, workdir, f"archival-{ci}")
        try:
            g = locomo.evaluate(store, ev, cfg)          # before any feedback
            nofb["qids"] += g["qids"]
            nofb["ranks"] += g["ranks"]
            locomo.feedback_phase(store, fb, cfg, policy,
                                  locomo.stream(plan.seed, "within", policy, conv))
            counts = memory_counts(store.mem, conv)
            for key in keys:
                gone = set() if key[0] == "none" else archived(counts, *key)
                g = evaluate_without(store, ev, cfg, gone)
                groups[key]["qids"] += g["qids"]
                groups[key]["ranks"] += g["ranks"]
                info[key]["archived"] += len(gone)
                info[key]["gold_hit"] += sum(bool(q.gold & gone) for q in ev)
                info[key]["gold_all"] += sum(q.gold <= gone for q in ev)
        finally:
            store.close()
    return {"groups": groups, "nofb": nofb, "info": info}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=locomo.DEFAULT_DATA)
    p.add_argument("--condition", default="oracle", choices=locomo.POLICIES,
                   help="the feedback given on each conversation's feedback half (default oracle)")
    p.add_argument("--rules", default=",".join(RULES),
                   help="which counts archive a memory: " + ", ".join(RULES) + " (default both)")
    p.add_argument("--thresholds", default=",".join(map(str, DEFAULT_THRESHOLDS)),
                   help="the N of each rule (default %(default)s)")
    p.add_argument("--seeds", default="0", help="within splits, comma-separated (default 0)")
    p.add_argument("--embedder", choices=["potion", "none"], default=None,
                   help="heapmem's recall: hybrid with its own potion-base-8M (default) or "
                        "lexical (none)")
    p.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--out", help="write the rows as .json")
    args = p.parse_args(argv)
    rules = [r for r in args.rules.split(",") if r]
    for r in rules:
        if r not in RULES:
            p.error(f"unknown rule {r!r}; choose from {', '.join(RULES)}")
    try:
        thresholds = [int(x) for x in args.thresholds.split(",") if x.strip()]
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        p.error("--thresholds and --seeds take comma-separated whole numbers")
    if not thresholds or min(thresholds) < 1 or not seeds or not rules:
        p.error("give at least one rule, one threshold >= 1 and one seed")
    if not os.path.exists(args.data):
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2

    convs, _ = locomo.load_locomo(args.data)
    system = locomo.HeapmemSystem(embedder=args.embedder)
    workdir = tempfile.mkdtemp(prefix="heapmem-archival-")
    t0 = time.time()
    runs = []
    try:
        clock = max(c.ask_ts for c in convs)
        base = system.build_base([m for c in convs for m in c.memories], workdir, clock)
        for seed in seeds:
            la = locomo.parse_args(["--data", args.data, "--systems", "heapmem",
                                    "--protocol", "within", "--conditions", args.condition,
                                    "--seed", str(seed)])
            plan = locomo.make_plan(convs, la)
            runs.append(run_seed(system, base, plan, args.condition, rules, thresholds,
                                 workdir))
            locomo.log(f"seed {seed}: done")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def row(key: Any) -> locomo.Row:
        return locomo.Row(system.name, "within", "defaults", args.condition,
                          [r["groups"][key] for r in runs])

    nofb = locomo.Row(system.name, "nofb", "defaults", "", [r["nofb"] for r in runs])
    plain = row(("none", 0))
    head = ("| rule | archived (memories) | eval questions with a gold turn archived "
            "| ... all gold turns archived | n | MRR | Hit@3 | Hit@10 "
            "| ΔMRR vs no rule [95% CI] | ΔHit@3 vs no rule [95% CI] "
            "| ΔMRR vs no feedback [95% CI] |")
    lines = [head, "|" + "---|" * 11]
    lines.append(f"| no feedback | — | — | — | {nofb.n} | {nofb.value('mrr'):.3f} "
                 f"| {nofb.value('hit3'):.3f} | {nofb.value('hit10'):.3f} | — | — | — |")
    keys = [("none", 0)] + [(r, n) for r in rules for n in thresholds]
    for key in keys:
        r = row(key)
        inf = {k: sum(run["info"][key][k] for run in runs) / len(runs)
               for k in ("archived", "gold_hit", "gold_all")}
        name = f"{args.condition} feedback, no rule" if key[0] == "none" else \
            f"{args.condition} + {key[0]} >= {key[1]}, never used"
        # paired per seed: the rule's ranks against the same seed's no-rule ranks
        d_rule = _paired(r, plain, "mrr", args.boot)
        d_rule3 = _paired(r, plain, "hit3", args.boot)
        d_nofb = _paired(r, nofb, "mrr", args.boot)
        lines.append(f"| {name} | {inf['archived']:.0f} | {inf['gold_hit']:.0f} "
                     f"| {inf['gold_all']:.0f} | {r.n} | {r.value('mrr'):.3f} "
                     f"| {r.value('hit3'):.3f} | {r.value('hit10'):.3f} "
                     f"| {'—' if key[0] == 'none' else locomo.fmt_delta(d_rule)} "
                     f"| {'—' if key[0] == 'none' else locomo.fmt_delta(d_rule3)} "
                     f"| {locomo.fmt_delta(d_nofb)} |")
    print(f"LoCoMo within a conversation, {args.condition} feedback on half, "
          f"{len(seeds)} split(s) (seeds {','.join(map(str, seeds))}); "
          f"means over splits; {time.time() - t0:.0f}s\n")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "runs": [
                {"nofb": r["nofb"],
                 "groups": {f"{k[0]}>={k[1]}": v for k, v in r["groups"].items()},
                 "info": {f"{k[0]}>={k[1]}": v for k, v in r["info"].items()}} for r in runs]},
                fh)
    return 0


def _paired(row: locomo.Row, base: locomo.Row, metric: str, boot: int
            ) -> tuple[float, float, float] | None:
    """row - base, paired over questions within each split (a seed), splits averaged:
    locomo.paired_delta, one split at a time (each split asks the same questions)."""
    f = locomo.METRICS[metric]
    rng = np.random.default_rng(0)
    means, reps = [], []
    for g, b in zip(row.groups, base.groups):
        lb = dict(zip(b["qids"], b["ranks"]))
        a = np.asarray([(r, lb[q]) for q, r in zip(g["qids"], g["ranks"])])
        d = f(a[:, 0]) - f(a[:, 1])
        means.append(d.mean())
        reps.append(d[rng.integers(0, len(d), size=(boot, len(d)))].mean(axis=1))
    rep = np.mean(reps, axis=0)
    lo, hi = np.percentile(rep, [2.5, 97.5])
    return float(np.mean(means)), float(lo), float(hi)


if __name__ == "__main__":
    sys.exit(main())
