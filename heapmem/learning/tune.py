"""Self-tuning from the store's own feedback log.

Owns: the choice of w_usefulness by replaying the logs (Memory.tune() calls
it).  It reads the logs through Memory's public methods (judged_recalls,
events), adds events up with heapmem.learning, scores every replay in C
(score_batch) and deploys through Memory.set_config.

Every tracked recall logs what it showed (features, ages, the score without
usefulness); feedback logs which were used.  tune() replays those recalls
under other usefulness weights, with the links learned from the *other* folds
of the log only (grouped cross-validation: by namespace when there are enough
namespaces, else by recall), and deploys a new weight only if it ranks the
used memories higher than the current one with a paired bootstrap 95%
interval above zero.  Otherwise nothing changes.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any, Sequence, cast

import apsw
import numpy as np

from ..db import _native, sql
from ..learning import links as learning
from ..results import TuneReport

#: The usefulness weights tune() tries.
GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)
#: Fewer judged recalls than this and tune() does not try.
MIN_RECALLS = 30


def _rr(order_scores: np.ndarray, used: set[int]) -> float:
    order = np.argsort(-order_scores, kind="stable")
    for rank, i in enumerate(order, 1):
        if int(i) in used:
            return 1.0 / rank
    return 0.0


def tune(mem: Any, *, grid: Sequence[float] = GRID, boot: int = 2000, seed: int = 0,
         deploy: bool = True) -> TuneReport:
    """Replay mem's (a heapmem.Memory) judged recalls under each weight of
    grid; deploy the best one if its gain is significant (see the module)."""
    base = mem.config
    recalls: dict[int, dict[str, Any]] = {
        r.id: {"ns": r.namespace, "qt": r.qtype, "ages": list(r.ages), "feats": list(r.features),
               "rest": list(r.rest), "used": set()} for r in mem.judged_recalls()}
    log = mem.events()
    own = learning.per_namespace((e.namespace, e.deltas) for e in log)
    for e in log:
        if e.used and e.recall_id in recalls:
            recalls[e.recall_id]["used"].add(e.position)
    ids = sorted(recalls)
    current_w = float(base.w_usefulness)
    empty = TuneReport(False, "", len(ids), "-", {"w_usefulness": current_w, "mrr": math.nan},
                       {"w_usefulness": current_w, "mrr": math.nan}, (0.0, 0.0, 0.0), ())
    if len(ids) < MIN_RECALLS:
        return _replace(empty, reason=f"only {len(ids)} judged recalls in the log; tune() needs "
                                      f"{MIN_RECALLS}")
    namespaces = sorted({recalls[r]["ns"] for r in ids})
    by_ns = len(namespaces) >= 5
    nfold = 5

    ns_index = {ns: i for i, ns in enumerate(namespaces)}

    def fold_of(rid: int, ns: str) -> int:
        return ns_index[ns] % nfold if by_ns else rid % nfold

    # each fold's own evidence, to hold out when replaying that fold
    by_fold: dict[int, list] = defaultdict(list)
    for e in log:
        if e.recall_id is not None:
            by_fold[fold_of(e.recall_id, e.namespace)].append((e.namespace, e.deltas))
    fold_own = {fo: learning.per_namespace(evs) for fo, evs in by_fold.items()}
    fold_pooled = {fo: learning.pooled(held) for fo, held in fold_own.items()}
    pooled = learning.pooled(own)

    scratch = apsw.Connection(":memory:")
    _native.load(scratch)
    scratch.execute(sql.TUNE_SCRATCH)
    blobs: dict[tuple[int, str, str], bytes] = {}

    def blob(fo: int, ns: str, qt: str) -> bytes:
        key = (fo, ns, qt)
        if key not in blobs:
            held = fold_own.get(fo, {})
            held_pooled = fold_pooled.get(fo, {})
            rows = []
            for f, (pa, pb) in pooled.items():
                if learning.feature_qtype(f) not in ("", qt):
                    continue
                oa, ob = own[ns].get(f, (0.0, 0.0)) if ns in own else (0.0, 0.0)
                ha, hb = held[ns].get(f, (0.0, 0.0)) if ns in held else (0.0, 0.0)
                hpa, hpb = held_pooled.get(f, (0.0, 0.0))
                rows.append((f, max(oa - ha, 0.0), max(ob - hb, 0.0), max(pa - hpa, 0.0),
                             max(pb - hpb, 0.0)))
            with scratch:
                scratch.execute(sql.TUNE_CLEAR)
                scratch.executemany(sql.TUNE_ROW, rows)
            # the heap_links() aggregate's blob
            blobs[key] = bytes(cast(bytes, scratch.execute(
                sql.TUNE_LINKS,
                (base.pooled_pseudocount,)).fetchall()[0][0]))
        return blobs[key]

    # Each replayed score is the C core's: score_batch with the logged score
    # without usefulness (rest, itself from C) as the only other factor, and
    # the weight tried, so a change to how C combines factors reaches tune.
    grid = sorted(set(float(w) for w in grid) | {current_w})
    cfgs = {w: base.replace(w_relevance=1.0, w_recency=0.0, w_importance=1.0,
                            w_usefulness=w).cdata for w in grid}
    per_w: dict[float, list[float]] = {w: [] for w in grid}
    for rid in ids:
        r = recalls[rid]
        n = len(r["feats"])
        links = blob(fold_of(rid, r["ns"]), r["ns"], r["qt"])
        rest = np.maximum(np.array(r["rest"], dtype=np.float64), 0.0)
        ages = np.array(r["ages"], dtype=np.float64)
        ones, zeros = np.ones(n), np.zeros(n, dtype=np.intc)
        for w in grid:
            out = _native.score_batch(rest, ages, ones, zeros, r["feats"], r["qt"], links, cfgs[w])
            per_w[w].append(_rr(out[:, 5], r["used"]))
    rrs = {w: np.array(v) for w, v in per_w.items()}
    table = tuple((w, float(rrs[w].mean())) for w in grid)
    best_w = max(grid, key=lambda w: (round(rrs[w].mean(), 12), -abs(w - current_w)))
    diff = rrs[best_w] - rrs[current_w]
    groups = [recalls[r]["ns"] if by_ns else r for r in ids]
    gkeys = sorted(set(groups))
    gidx = {g: i for i, g in enumerate(gkeys)}
    gsum = np.zeros(len(gkeys))
    gcnt = np.zeros(len(gkeys))
    for g, d in zip(groups, diff):
        gsum[gidx[g]] += d
        gcnt[gidx[g]] += 1
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(gkeys), size=(boot, len(gkeys)))
    means = gsum[picks].sum(axis=1) / np.maximum(gcnt[picks].sum(axis=1), 1)
    lo, hi = (float(x) for x in np.quantile(means, [0.025, 0.975]))
    gain = (float(diff.mean()), lo, hi)
    report = TuneReport(False, "", len(ids), "namespace" if by_ns else "recall",
                        {"w_usefulness": current_w, "mrr": float(rrs[current_w].mean())},
                        {"w_usefulness": best_w, "mrr": float(rrs[best_w].mean())},
                        gain, table)
    if best_w == current_w:
        return _replace(report, reason="the weight in force is already the best")
    if lo <= 0:
        return _replace(report, reason="the gain's 95% interval includes 0: not significant")
    if not deploy:
        return _replace(report, reason="significant, but deploy=False")
    mem.set_config(w_usefulness=best_w, save=True)
    return _replace(report, deployed=True,
                    reason=f"w_usefulness {current_w:g} -> {best_w:g}, saved in the store")


def _replace(r: TuneReport, **kw: Any) -> TuneReport:
    return replace(r, **kw)
