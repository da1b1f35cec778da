"""How feedback events add up to learned links, in one place.

Owns: the replay of the event log (and any merged prior) into link counts per
(layer, feature), the comparison of those counts with stored links (one
tolerance), the rules of the pooled layer replayed in Python (how
namespaces' links add up to it, robustly: what check() and import compare the
stored rows with; the C core keeps the rows themselves, csrc/feedback.c),
the split of a feature name into its question type, the pooled rows as
readers see them (pooled_rows, link_rows: the stored rows with the pooled
layer's pending changes over them, csrc/pool.c), the links as one namespace
sees them (as_seen: what Memory.links() lists), and the event log summed
per day (by_day, with newest_recall: what the report page draws).
check() and import go through here, so they cannot disagree about what the
events mean; tune()'s replay of the log is the C core's (csrc/tune.c).  The
credit each judged memory gives (which features, how much) is the C core's
(hm_credit); this module only adds the deltas up.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ..db import native, sql
from ..guard import from_file
from ..results import LearningDay, LinkRow
from ..validate import POOLED

if TYPE_CHECKING:
    from ..config import ScoringConfig

#: A link's evidence: [alpha, beta, n] (n: events that touched it).
Counts = dict[tuple[str, str], list]
#: How far a stored link may lie from its replay, relative to max(1, |replay|).
TOLERANCE = 1e-6


#: A pooled row as readers see it: (feature, qtype, alpha, beta, n, support,
#: low_rate, high_rate).
PooledRow = tuple[str, str, float, float, int, int, "float | None", "float | None"]


def pooled_rows(c: Any) -> list[PooledRow]:
    """Every pooled row ('*') as readers see it, by feature: the stored rows
    with the pooled layer's pending changes put over them.  A feedback folds
    the pooled layer lazily (a batch at a time, csrc/feedback.c), so the
    links table's pooled rows may lag; heap_pool_now gives the rows the
    pending changes touch as an eager fold would have written them.  Inside
    the caller's snapshot."""
    rows = {r[0]: tuple(r) for r in c.execute(sql.POOLED_ROWS)}
    for f, (a, b, n, k, lo, hi) in json.loads(c.execute(sql.POOL_NOW).fetchall()[0][0]).items():
        rows[f] = (f, feature_qtype(f), a, b, n, k, lo, hi)
    return [rows[f] for f in sorted(rows)]


def link_rows(c: Any, cols: list[str]) -> list[tuple]:
    """Every row of the links table as readers see it (pooled_rows for the
    pooled ones), columns cols, in (namespace, feature) order: what an export
    writes."""
    at = {col: i for i, col in enumerate(cols)}
    out = [tuple(r) for r in c.execute(sql.select_all("links", cols, "namespace, feature"))
           if r[at["namespace"]] != POOLED]
    for f, qt, a, b, n, k, lo, hi in pooled_rows(c):
        row = {"namespace": POOLED, "feature": f, "qtype": qt, "alpha": a, "beta": b, "n": n,
               "support": k, "pool_alpha": 0.0, "pool_beta": 0.0, "low_rate": lo,
               "high_rate": hi}
        out.append(tuple(row[col] for col in cols))
    out.sort(key=lambda r: (r[at["namespace"]], r[at["feature"]]))
    return out


def feature_qtype(feature: str) -> str:
    """The question type a feature is crossed with ('when/date:1' -> 'when'),
    '' for a plain shape feature."""
    return feature.split("/", 1)[0] if "/" in feature else ""


def replay(events: Iterable[tuple[str, Iterable]]) -> Counts:
    """Each namespace's own link counts that events produce, {(namespace,
    feature): [alpha, beta, n]}.  events: (namespace, deltas) pairs, deltas
    [(feature, d_alpha, d_beta), ...].  (The pooled layer is pool()'s.)"""
    out: Counts = {}
    for ns, deltas in events:
        for f, da, db in deltas:
            r = out.setdefault((ns, f), [0.0, 0.0, 0])
            r[0] += da
            r[1] += db
            r[2] += 1
    return out


def cap_counts(a: float, b: float, cap: float) -> tuple[float, float]:
    """A namespace's (alpha, beta) as the pooled layer counts it: scaled down
    to cap observations in all, its rate kept."""
    s = cap / (a + b) if a + b > cap else 1.0
    return a * s, b * s


#: The rate of a row with no evidence (alpha + beta = 0, which only a damaged
#: file holds: every judgement credits one observation): below every rate, as
#: links_rate's NULL sorts first in SQL.  Such a row counts nothing in the pool.
NO_RATE = -1.0


def _evidence(a: float, b: float) -> bool:
    """Whether a row's counts hold any evidence (a rate)."""
    return a + b > 0


def _rate(a: float, b: float) -> float:
    """A namespace's rate of use, the order the trimming goes by: of its own
    counts (capping keeps it), computed as links_rate computes it in SQL
    (where no evidence at all is NULL, the lowest: NO_RATE)."""
    return a / (a + b) if _evidence(a, b) else NO_RATE


def _at(ca: float, cb: float, rate: float) -> tuple[float, float]:
    """A trimmed namespace's share: its weight at the nearest kept rate."""
    return (ca + cb) * rate, (ca + cb) * (1 - rate)


def _params(settings: Mapping[str, float]) -> tuple[float, int, int]:
    """cap, trim and the namespaces a link needs before any is pooled (never
    fewer than 2 x trim + 1, so that one is left when both ends are trimmed)."""
    trim = int(settings["trim"])
    return settings["cap"], trim, max(int(settings["min"]), 2 * trim + 1)


def pool_feature(rows: list[tuple[str, float, float]], settings: Mapping[str, float]
                 ) -> tuple[dict[str, tuple[float, float]], float, float, float | None,
                            float | None]:
    """One feature's pooled evidence from its namespaces' own counts, rows of
    (namespace, alpha, beta): each namespace's share {namespace: (alpha,
    beta)}, their sum (alpha, beta), and the lowest and highest rates summed
    as they are (None while nothing is pooled).  See schema's version 4:
    capped at `cap`, nothing until `min` namespaces, the `trim` lowest and
    highest rates counted at the nearest kept rate.  A row with no evidence
    (alpha + beta = 0) has no rate and counts nothing: its share is 0, and it
    is not one of the namespaces that `min` and `trim` count."""
    cap, trim, least = _params(settings)
    scored = sorted(((_rate(a, b), ns) + cap_counts(a, b, cap) for ns, a, b in rows
                     if _evidence(a, b)))
    k = len(scored)
    shares: dict[str, tuple[float, float]] = {ns: (0.0, 0.0) for ns, _, _ in rows}
    if k < least:
        return shares, 0.0, 0.0, None, None
    lo, hi = scored[trim][0], scored[k - 1 - trim][0]
    sa = sb = 0.0
    for i, (_, ns, ca, cb) in enumerate(scored):
        if i < trim:  # winsorized
            ca, cb = _at(ca, cb, lo)
        elif i >= k - trim:
            ca, cb = _at(ca, cb, hi)
        shares[ns] = (ca, cb)
        sa += ca
        sb += cb
    return shares, sa, sb, lo, hi


def pool(own: Counts, settings: Mapping[str, float], prior: Mapping[str, Iterable] | None = None,
         prior_support: int = 0) -> dict[tuple[str, str], list]:
    """Every link as the store holds it, from the namespaces' own counts
    (replay()): each namespace's row [alpha, beta, n] and
    the pooled rows [alpha, beta, n, support] (pool_feature per feature, plus
    a links-only prior's counts and prior_support).  What check() and import
    compare the stored links with."""
    by_feature: dict[str, list] = defaultdict(list)
    out: dict[tuple[str, str], list] = {}
    for (ns, f), (a, b, n) in own.items():
        if ns == POOLED:
            continue
        by_feature[f].append((ns, a, b, n))
        out[(ns, f)] = [a, b, n]
    prior = prior or {}
    for f in set(by_feature) | set(prior):
        _, sa, sb, n, support, _, _ = _pooled_row(by_feature.get(f, []), prior.get(f),
                                                  settings, prior_support)
        out[(POOLED, f)] = [sa, sb, n, support]
    return out


def _pooled_row(mine: list[tuple], prior: Iterable | None, settings: Mapping[str, float],
                prior_support: int) -> tuple:
    """One feature's pooled row from its namespaces' rows (namespace, alpha,
    beta, n, ...) and its prior (alpha, beta, n) or None: (shares, alpha,
    beta, n, support, low_rate, high_rate)."""
    shares, sa, sb, lo, hi = pool_feature([(r[0], r[1], r[2]) for r in mine], settings)
    n, support = sum(r[3] for r in mine), len(mine)
    if prior is not None:
        a, b, pn = prior
        sa, sb, n, support = sa + a, sb + b, n + pn, support + prior_support
    return shares, sa, sb, n, support, lo, hi


# -- keeping the pooled rows in the store -------------------------------------------


def rebuild_pool(c: Any, features: Iterable[str] | None = None) -> None:
    """Work the pooled rows ('*') and every namespace's share of them out
    again, for these features (all when None), inside the caller's write
    transaction, with the store's pool settings: the C core's
    heap_rebuild_pool (csrc/feedback.c, which also keeps the pool current
    at every feedback).  pool() below replays the same rules for check()."""
    feats = None if features is None else json.dumps(sorted(set(features)))
    c.execute(sql.REBUILD_POOL, {"features": feats}).fetchall()


def agrees(stored: Iterable, replayed: Iterable) -> bool:
    """Whether a stored link (alpha, beta, n[, support]) is what the replay
    gives."""
    a, b, *rest = stored
    ea, eb, *erest = replayed
    return (abs(a - ea) <= TOLERANCE * max(1.0, abs(ea))
            and abs(b - eb) <= TOLERANCE * max(1.0, abs(eb)) and rest == erest)


def mismatches(stored: Mapping[tuple[str, str], Iterable], replayed: Counts
               ) -> list[tuple[tuple[str, str], tuple | None, tuple | None]]:
    """The links where stored and replayed disagree, or that only one of them
    has: (key, stored or None, replayed or None), in key order."""
    out = []
    for key in sorted(set(stored) | set(replayed)):
        s, r = stored.get(key), replayed.get(key)
        if s is None or r is None or not agrees(s, r):
            out.append((key, None if s is None else tuple(s), None if r is None else tuple(r)))
    return out


# -- the event log over time (heapmem.io.report) ----------------------------------------


def by_day(c: Any, namespace: str | None = None) -> list[LearningDay]:
    """The feedback log summed per UTC day, oldest first, in one namespace
    (every namespace when None): one aggregate statement, so its cost does
    not grow with the number of memories, only with the events scanned."""
    rows = c.execute(sql.LEARNING_BY_DAY, {"namespace": namespace}).fetchall()
    return [LearningDay(int(d), int(j), int(u), int(r), int(a), float(rr), int(ur))
            for d, j, u, r, a, rr, ur in rows]


def newest_recall(c: Any, namespace: str | None = None) -> int | None:
    """The id of the newest tracked recall, in one namespace (every namespace
    when None); None when none is logged."""
    if namespace is None:
        rows = c.execute(sql.NEWEST_RECALL).fetchall()
    else:
        rows = c.execute(sql.NEWEST_RECALL_IN, {"namespace": namespace}).fetchall()
    return rows[0][0] if rows and rows[0][0] is not None else None


def as_seen(pooled: list[PooledRow], own: Mapping[str, tuple], namespace: str,
            config: ScoringConfig) -> list[LinkRow]:
    """The learned links as namespace sees them (POOLED: the pooled layer),
    strongest first, from the pooled rows and the namespace's own rows
    (sql.OWN_LINKS, by feature): each pooled link less the namespace's own
    share of it, as recall views it."""
    out: list[tuple[str, float, float, int, int]] = []
    if namespace == POOLED:
        out = [(f, a, b, n, k) for f, _, a, b, n, k, _, _ in pooled]
    else:
        with from_file("reading the learned links"):
            for f, _, pa, pb, _, support, _, _ in pooled:
                oa, ob, sa, sb, n = own.get(f, (0.0, 0.0, 0.0, 0.0, 0))
                a, b = native.link_view(oa, ob, oa + max(pa - sa, 0), ob + max(pb - sb, 0),
                                        config.pooled_pseudocount)
                out.append((f, a, b, n, support - (f in own)))
    pa, pb = config.prior_alpha, config.prior_beta
    with from_file("reading the learned links"):
        res = [LinkRow(f, (pa + a) / (pa + pb + a + b), n, a, b, k) for f, a, b, n, k in out]
        res.sort(key=lambda r: (-r.strength, r.feature))
    return res
