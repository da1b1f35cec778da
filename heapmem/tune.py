"""Self-tuning from the store's own feedback log.

Every tracked recall logs what it showed (features, ages, the score without
usefulness); feedback logs which were used.  tune() replays those recalls
under other usefulness weights, with the links learned from the *other* folds
of the log only (grouped cross-validation: by namespace when there are enough
namespaces, else by recall), and deploys a new weight only if it ranks the
used memories higher than the current one with a paired bootstrap 95%
interval above zero.  Otherwise nothing changes.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import apsw
import numpy as np

from . import _native
from .config import ScoringConfig

if TYPE_CHECKING:  # pragma: no cover
    from .store import Memory

#: The usefulness weights tune() tries.
GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)
#: Fewer judged recalls than this and tune() does not try.
MIN_RECALLS = 30


@dataclass(frozen=True)
class TuneReport:
    """What tune() measured and what it did."""

    deployed: bool
    reason: str
    recalls: int                 # judged recalls replayed
    folds: str                   # "namespace" or "recall"
    current: dict[str, float]    # the weight in force, and its replay MRR
    best: dict[str, float]       # the best weight, its replay MRR
    gain: tuple[float, float, float]  # best - current: mean, CI low, CI high
    table: tuple[tuple[float, float], ...]  # (w_usefulness, replay MRR) for the grid

    def __str__(self) -> str:
        lines = [f"replayed {self.recalls} judged recalls, folds by {self.folds}"]
        for w, m in self.table:
            mark = " <- in force" if w == self.current["w_usefulness"] else ""
            lines.append(f"  w_usefulness={w:<5g} replay MRR {m:.4f}{mark}")
        g = self.gain
        lines.append(f"best w_usefulness={self.best['w_usefulness']:g}: "
                     f"{g[0]:+.4f} [{g[1]:+.4f}, {g[2]:+.4f}] over the weight in force")
        lines.append(("deployed: " if self.deployed else "not deployed: ") + self.reason)
        return "\n".join(lines)


def _rr(order_scores: np.ndarray, used: set[int]) -> float:
    order = np.argsort(-order_scores, kind="stable")
    for rank, i in enumerate(order, 1):
        if int(i) in used:
            return 1.0 / rank
    return 0.0


def tune(mem: "Memory", *, grid: Sequence[float] = GRID, boot: int = 2000, seed: int = 0,
         deploy: bool = True) -> TuneReport:
    c = mem.connection
    base = mem.config
    recalls: dict[int, dict[str, Any]] = {}
    for rid, ns, qt, ages, feats, rest in c.execute(
            "SELECT id, namespace, qtype, ages, features, rest FROM recalls WHERE id IN "
            "(SELECT recall_id FROM events WHERE used = 1)"):
        recalls[rid] = {"ns": ns, "qt": qt, "ages": json.loads(ages),
                        "feats": json.loads(feats), "rest": json.loads(rest), "used": set()}
    own: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    events = []
    for rid, ns, used, pos, deltas in c.execute(
            "SELECT recall_id, namespace, used, position, deltas FROM events"):
        d = json.loads(deltas)
        events.append((rid, ns, d))
        for f, da, db in d:
            own[ns][f][0] += da
            own[ns][f][1] += db
        if used and rid in recalls:
            recalls[rid]["used"].add(pos)
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

    fold_own: dict[int, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: [0.0, 0.0])))
    for rid, ns, d in events:
        if rid is None:
            continue
        fo = fold_of(rid, ns)
        for f, da, db in d:
            fold_own[fo][ns][f][0] += da
            fold_own[fo][ns][f][1] += db
    pooled: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for ns_counts in own.values():
        for f, (a, b) in ns_counts.items():
            pooled[f][0] += a
            pooled[f][1] += b

    scratch = apsw.Connection(":memory:")
    from .store import load
    load(scratch)
    scratch.execute("CREATE TABLE l(feature TEXT, oa REAL, ob REAL, pa REAL, pb REAL)")
    blobs: dict[tuple[int, str, str], bytes] = {}

    def blob(fo: int, ns: str, qt: str) -> bytes:
        key = (fo, ns, qt)
        if key not in blobs:
            held = fold_own[fo]
            held_pooled: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
            for counts in held.values():
                for f, (a, b) in counts.items():
                    held_pooled[f][0] += a
                    held_pooled[f][1] += b
            rows = []
            for f, (pa, pb) in pooled.items():
                q = f.split("/", 1)[0] if "/" in f else ""
                if q not in ("", qt):
                    continue
                oa, ob = own[ns].get(f, (0.0, 0.0)) if ns in own else (0.0, 0.0)
                ha, hb = held[ns].get(f, (0.0, 0.0)) if ns in held else (0.0, 0.0)
                hpa, hpb = held_pooled.get(f, (0.0, 0.0))
                rows.append((f, max(oa - ha, 0.0), max(ob - hb, 0.0), max(pa - hpa, 0.0),
                             max(pb - hpb, 0.0)))
            with scratch:
                scratch.execute("DELETE FROM l")
                scratch.executemany("INSERT INTO l VALUES (?, ?, ?, ?, ?)", rows)
            blobs[key] = bytes(scratch.execute(
                "SELECT heap_links(feature, oa, ob, pa, pb, ?) FROM l",
                (base.pooled_pseudocount,)).fetchall()[0][0])
        return blobs[key]

    ucfg = base.replace(w_usefulness=1.0)._c  # type: ignore[attr-defined]
    logu, rests, used_sets = [], [], []
    for rid in ids:
        r = recalls[rid]
        n = len(r["feats"])
        out = _native.score_batch(np.ones(n), np.array(r["ages"], dtype=np.float64), np.ones(n),
                                  np.zeros(n, dtype=np.intc), r["feats"], r["qt"],
                                  blob(fold_of(rid, r["ns"]), r["ns"], r["qt"]), ucfg)
        logu.append(np.log(out[:, 3]))
        rests.append(np.array(r["rest"], dtype=np.float64))
        used_sets.append(r["used"])
    grid = sorted(set(float(w) for w in grid) | {current_w})
    per_w = {}
    for w in grid:
        per_w[w] = np.array([_rr(np.log(np.maximum(rest, 1e-300)) + w * lu, u)
                             for rest, lu, u in zip(rests, logu, used_sets)])
    table = tuple((w, float(per_w[w].mean())) for w in grid)
    best_w = max(grid, key=lambda w: (round(per_w[w].mean(), 12), -abs(w - current_w)))
    diff = per_w[best_w] - per_w[current_w]
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
                        {"w_usefulness": current_w, "mrr": float(per_w[current_w].mean())},
                        {"w_usefulness": best_w, "mrr": float(per_w[best_w].mean())},
                        gain, table)
    if best_w == current_w:
        return _replace(report, reason="the weight in force is already the best")
    if lo <= 0:
        return _replace(report, reason="the gain's 95% interval includes 0: not significant")
    if not deploy:
        return _replace(report, reason="significant, but deploy=False")
    mem._set_tuned({"w_usefulness": best_w})
    return _replace(report, deployed=True,
                    reason=f"w_usefulness {current_w:g} -> {best_w:g}, saved in the store")


def _replace(r: TuneReport, **kw: Any) -> TuneReport:
    from dataclasses import replace
    return replace(r, **kw)
