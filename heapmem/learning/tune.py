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

Auto-tune (Memory.feedback, unless the store was opened with auto_tune=False
or an explicit config): tune() runs by itself after the feedback that brings
the store's judged recalls to the next point of a doubling schedule (30, 60,
120, ...: schedule_point), seeded with AUTO_SEED; past AUTO_WINDOW judged
recalls it replays only the newest AUTO_WINDOW (with the links learned from
the events of the recalls from the oldest of them on), so one feedback never
replays more than that.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence, cast

import apsw
import numpy as np

from ..config import ScoringConfig
from ..db import _native, sql
from ..learning import links as learning
from ..results import TuneReport

#: The usefulness weights tune() tries.
GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)
#: Fewer judged recalls than this and tune() does not try.
MIN_RECALLS = 30
#: Auto-tune's seed (the bootstrap's draws), so that its runs repeat exactly.
AUTO_SEED = 0
#: What auto-tune measures a weight's gain against: the default w_usefulness
#: (deployed again when no weight is significantly better than it).  Against
#: the weight in force, a chance pass on a small early replay would stay
#: (later replays would need significant evidence to leave it), and on
#: LoCoMo's shuffled feedback some did (bench/RESULTS.md 17).
AUTO_AGAINST = ScoringConfig().w_usefulness
#: Auto-tune's interval: 99%, not tune()'s 95%.  It runs again at every point
#: of its schedule, each time choosing the best of GRID, so a 95% interval
#: would let chance through more often than 1 in 40 over a store's life (on
#: LoCoMo LOCO with shuffled feedback it did in 2 of 10 folds at 960 judged
#: recalls; bench/RESULTS.md 17).
AUTO_LEVEL = 0.99
#: The most judged recalls auto-tune replays (the newest): tune's replay is
#: linear in them; bench/RESULTS.md section 17 times the feedback that runs it.
AUTO_WINDOW = 2000


def schedule_point(judged: int) -> int:
    """The last point of auto-tune's schedule (MIN_RECALLS, then each doubling
    of it: 30, 60, 120, ...) at or below judged; 0 below MIN_RECALLS."""
    if judged < MIN_RECALLS:
        return 0
    point = MIN_RECALLS
    while point * 2 <= judged:
        point *= 2
    return point


def next_point(point: int) -> int:
    """The schedule's point after point (MIN_RECALLS after none)."""
    return MIN_RECALLS if point < MIN_RECALLS else 2 * point


def _rr(order_scores: np.ndarray, used: set[int]) -> float:
    order = np.argsort(-order_scores, kind="stable")
    for rank, i in enumerate(order, 1):
        if int(i) in used:
            return 1.0 / rank
    return 0.0


def tune(mem: Any, *, grid: Sequence[float] = GRID, boot: int = 2000, seed: int = 0,
         deploy: bool = True, newest: int | None = None, against: float | None = None,
         level: float = 0.95) -> TuneReport:
    """Replay mem's (a heapmem.Memory) judged recalls under each weight of
    grid; deploy the best one if its gain is significant (see the module).
    newest=N: only the newest N judged recalls, with the links learned from
    the events of the recalls from the oldest of them on.  against=W: the
    gain is measured against weight W rather than the weight in force, and
    where no weight is significantly better than W, W is deployed (auto-tune
    passes the default weight: each of its decisions then rests on all the
    recalls it replays, never on what an earlier, smaller replay deployed).
    level: the bootstrap interval's coverage (its low end must lie above 0)."""
    base = mem.config
    current_w = float(base.w_usefulness)
    ref_w = current_w if against is None else float(against)
    recalls, log = _judged(mem, newest)
    ids = sorted(recalls)
    if len(ids) < MIN_RECALLS:
        return _too_few(len(ids), current_w)
    folds = _Folds.of(recalls[r].namespace for r in ids)
    link_sets = _LinkSets(log, folds, base.pooled_pseudocount)
    weights = sorted(set(float(w) for w in grid) | {current_w, ref_w})
    rrs = _replay(recalls, ids, folds, link_sets, weights, base)
    best_w = max(weights, key=lambda w: (round(rrs[w].mean(), 12), -abs(w - ref_w)))
    diff = rrs[best_w] - rrs[ref_w]
    lo, hi = _bootstrap(diff, [folds.group(r, recalls[r].namespace) for r in ids], boot, seed,
                        level)
    report = TuneReport(False, "", len(ids), "namespace" if folds.by_namespace else "recall",
                        {"w_usefulness": current_w, "mrr": float(rrs[current_w].mean())},
                        {"w_usefulness": best_w, "mrr": float(rrs[best_w].mean())},
                        (float(diff.mean()), lo, hi),
                        tuple((w, float(rrs[w].mean())) for w in weights), current_w,
                        None if against is None else ref_w)
    return _decide(mem, report, deploy, level)


@dataclass
class _Judged:
    """One judged recall as the log keeps it: what it showed (features, ages,
    the score without usefulness, each a list by position) and the positions
    feedback said the answer used."""

    namespace: str
    qtype: str
    ages: list
    features: list
    rest: list
    used: set[int] = field(default_factory=set)


def _judged(mem: Any, newest: int | None = None) -> tuple[dict[int, _Judged], list]:
    """mem's judged recalls by id (all, or the newest), each with the
    positions its feedback marked used, and the event log: all of it
    (mem.events()), or from the oldest recall read on."""
    rows = mem.judged_recalls(newest=newest)
    recalls = {r.id: _Judged(r.namespace, r.qtype, list(r.ages), list(r.features), list(r.rest))
               for r in rows}
    if newest is None:
        log = mem.events()
    else:
        log = mem.events(first_recall=min(recalls)) if recalls else []
    for e in log:
        if e.used and e.recall_id in recalls:
            recalls[e.recall_id].used.add(e.position)
    return recalls, log


def _too_few(n: int, current_w: float) -> TuneReport:
    """The report when the log holds fewer than MIN_RECALLS judged recalls:
    nothing replayed, nothing changed."""
    return not_run(f"only {n} judged recalls in the log; tune() needs {MIN_RECALLS}", n,
                   current_w)


def not_run(reason: str, n: int, current_w: float) -> TuneReport:
    """The report of a tune that replayed nothing and changed nothing (too
    few recalls, or, from auto-tune, an error: reason says which)."""
    here = {"w_usefulness": current_w, "mrr": math.nan}
    return TuneReport(False, reason, n, "-", here, dict(here), (0.0, 0.0, 0.0), (), current_w)


@dataclass(frozen=True)
class _Folds:
    """The cross-validation folds: by namespace when the log has at least 5
    namespaces (a namespace is then held out whole), else by recall id."""

    by_namespace: bool
    index: dict[str, int]  # each namespace's place in sorted order
    n: int = 5

    @classmethod
    def of(cls, namespaces: Iterable[str]) -> _Folds:
        """The folds for judged recalls in these namespaces."""
        names = sorted(set(namespaces))
        return cls(len(names) >= 5, {ns: i for i, ns in enumerate(names)})

    def fold(self, recall_id: int, namespace: str) -> int:
        """The fold a recall (or an event of it) falls in."""
        return self.index[namespace] % self.n if self.by_namespace else recall_id % self.n

    def event_fold(self, recall_id: int | None, namespace: str) -> int | None:
        """The fold whose replay holds an event out, or None when every fold
        learns from it: an event of a forgotten recall, or, with folds by
        namespace, of a namespace no judged recall is replayed in (its
        recalls were only ignored, or older than the newest replayed)."""
        if recall_id is None or (self.by_namespace and namespace not in self.index):
            return None
        return self.fold(recall_id, namespace)

    def group(self, recall_id: int, namespace: str) -> Any:
        """The unit the bootstrap resamples a recall with: its namespace or
        itself, as the folds group it."""
        return namespace if self.by_namespace else recall_id


class _LinkSets:
    """The link set each fold learns: what the whole log taught less what that
    fold's own events taught, per namespace and pooled, as the heap_links()
    blob score_batch reads.  Built in a scratch in-memory database, once per
    (fold, namespace, question type)."""

    def __init__(self, log: list, folds: _Folds, pooled_pseudocount: float):
        self.own = learning.per_namespace((e.namespace, e.deltas) for e in log)
        # each fold's own evidence, to hold out when replaying that fold
        by_fold: dict[int, list] = defaultdict(list)
        for e in log:
            fold = folds.event_fold(e.recall_id, e.namespace)
            if fold is not None:
                by_fold[fold].append((e.namespace, e.deltas))
        self.fold_own = {fo: learning.per_namespace(evs) for fo, evs in by_fold.items()}
        self.fold_pooled = {fo: learning.pooled(held) for fo, held in self.fold_own.items()}
        self.pooled = learning.pooled(self.own)
        self.pseudocount = pooled_pseudocount
        self.scratch = apsw.Connection(":memory:")
        _native.load(self.scratch)
        self.scratch.execute(sql.TUNE_SCRATCH)
        self.blobs: dict[tuple[int, str, str], bytes] = {}

    def blob(self, fold: int, ns: str, qt: str) -> bytes:
        """The links a recall of namespace ns, question type qt, in fold sees
        when replayed: the plain features and those crossed with qt."""
        key = (fold, ns, qt)
        if key not in self.blobs:
            own = self.own
            held = self.fold_own.get(fold, {})
            held_pooled = self.fold_pooled.get(fold, {})
            rows = []
            for f, (pa, pb) in self.pooled.items():
                if learning.feature_qtype(f) not in ("", qt):
                    continue
                oa, ob = own[ns].get(f, (0.0, 0.0)) if ns in own else (0.0, 0.0)
                ha, hb = held[ns].get(f, (0.0, 0.0)) if ns in held else (0.0, 0.0)
                hpa, hpb = held_pooled.get(f, (0.0, 0.0))
                rows.append((f, max(oa - ha, 0.0), max(ob - hb, 0.0), max(pa - hpa, 0.0),
                             max(pb - hpb, 0.0)))
            with self.scratch:
                self.scratch.execute(sql.TUNE_CLEAR)
                self.scratch.executemany(sql.TUNE_ROW, rows)
            # the heap_links() aggregate's blob
            self.blobs[key] = bytes(cast(bytes, self.scratch.execute(
                sql.TUNE_LINKS, (self.pseudocount,)).fetchall()[0][0]))
        return self.blobs[key]


def _replay(recalls: dict[int, _Judged], ids: list[int], folds: _Folds, link_sets: _LinkSets,
            weights: list[float], base: Any) -> dict[float, np.ndarray]:
    """Each judged recall (in ids' order) scored again under every weight,
    with the link set its fold learns: {weight: the reciprocal rank of the
    first used memory, a recall each}.

    Each replayed score is the C core's: score_batch with the logged score
    without usefulness (rest, itself from C) as the only other factor, and
    the weight tried, so a change to how C combines factors reaches tune."""
    cfgs = {w: base.replace(w_relevance=1.0, w_recency=0.0, w_importance=1.0,
                            w_usefulness=w).cdata for w in weights}
    per_w: dict[float, list[float]] = {w: [] for w in weights}
    for rid in ids:
        r = recalls[rid]
        n = len(r.features)
        link_set = link_sets.blob(folds.fold(rid, r.namespace), r.namespace, r.qtype)
        rest = np.maximum(np.array(r.rest, dtype=np.float64), 0.0)
        ages = np.array(r.ages, dtype=np.float64)
        ones, zeros = np.ones(n), np.zeros(n, dtype=np.intc)
        for w in weights:
            out = _native.score_batch(rest, ages, ones, zeros, r.features, r.qtype, link_set,
                                      cfgs[w])
            per_w[w].append(_rr(out[:, _native.SCORE_COLUMN["score"]], r.used))
    return {w: np.array(v) for w, v in per_w.items()}


def _bootstrap(diff: np.ndarray, groups: list, boot: int, seed: int,
               level: float = 0.95) -> tuple[float, float]:
    """The paired bootstrap's interval (level: its coverage, 0.95 a 95%
    interval) for the mean of diff (a recall each), resampling whole groups
    (groups[i] is recall i's) boot times."""
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
    tail = (1.0 - level) / 2
    lo, hi = (float(x) for x in np.quantile(means, [tail, 1.0 - tail]))
    return lo, hi


def _decide(mem: Any, report: TuneReport, deploy: bool, level: float) -> TuneReport:
    """Deploy the best weight (saved in mem's store) only if its gain's
    interval (over the weight in force, or over report.against) lies above 0,
    else report.against if that is given; only what differs from the weight
    in force, and only if deploy is true.  The report, with why."""
    current_w, best_w = report.current["w_usefulness"], report.best["w_usefulness"]
    ref_w = current_w if report.against is None else report.against
    significant = best_w != ref_w and report.gain[1] > 0
    target = best_w if significant else ref_w
    if target == current_w:
        if best_w == current_w:
            why = "the weight in force is already the best"
            if significant:
                why += f", significantly better than w_usefulness={ref_w:g}"
        else:
            why = f"the gain's {level:.0%} interval includes 0: not significant"
        return _replace(report, reason=why)
    why = "" if significant else f" (no weight is significantly better than {ref_w:g})"
    if not deploy:
        return _replace(report, reason=("significant" if significant else
                                        f"back to {ref_w:g}{why}") + ", but deploy=False")
    mem.set_config(w_usefulness=target, save=True)
    return _replace(report, deployed=True, after=target, reason=(
        f"w_usefulness {current_w:g} -> {target:g}{why}, saved in the store"))


def _replace(r: TuneReport, **kw: Any) -> TuneReport:
    return replace(r, **kw)
