"""How feedback events add up to learned links, in one place.

Owns: the replay of the event log (and any merged prior) into link counts per
(layer, feature), the comparison of those counts with stored links (one
tolerance), the pooled layer (how namespaces' links add up to it, robustly,
and keeping its rows current: rebuild_pool, fold_into_pool), the pooled sums
that tune() holds out per fold, and the split of a feature name into its
question type.  check(), import and tune() all go
through here, so they cannot disagree about what the events mean.  The
credit each judged memory gives (which features, how much) is the C core's
(hm_credit); this module only adds the deltas up.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable, Mapping

from . import schema, sql
from .validate import POOLED

#: A link's evidence: [alpha, beta, n] (n: events that touched it).
Counts = dict[tuple[str, str], list]
#: How far a stored link may lie from its replay, relative to max(1, |replay|).
TOLERANCE = 1e-6


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


def _order(row: tuple) -> tuple[float, str]:
    """Where a row (namespace, alpha, beta, ...) stands in its feature's order."""
    return _rate(row[1], row[2]), row[0]


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


def rebuild_pool(c: Any, features: Iterable[str] | None = None,
                 settings: Mapping[str, float] | None = None) -> None:
    """Work the pooled rows ('*') and every namespace's share of them out
    again, for these features (all when None), inside the caller's write
    transaction, with the store's pool settings (or these)."""
    settings = schema.pool_settings(c) if settings is None else settings
    prior = schema.prior(c)
    prior_support = schema.PRIOR_SUPPORT
    feats = None if features is None else sorted(set(features))
    if feats is None:
        rows = c.execute(sql.OWN_ROWS).fetchall()
        c.execute(sql.DELETE_POOLED)
        wanted: Iterable[str] = set(r[1] for r in rows) | set(prior)
    else:
        p = {"features": json.dumps(feats)}
        rows = c.execute(sql.OWN_ROWS_OF, p).fetchall()
        c.execute(sql.DELETE_POOLED_OF, p)
        wanted = feats
    by_feature: dict[str, list] = defaultdict(list)
    for ns, f, a, b, n, pa, pb in rows:
        by_feature[f].append((ns, a, b, n, pa, pb))
    shares_out, pooled_out = [], []
    for f in wanted:
        mine = by_feature.get(f, [])
        if not mine and f not in prior:
            continue
        shares, sa, sb, n, support, lo, hi = _pooled_row(mine, prior.get(f), settings,
                                                         prior_support)
        for ns, _, _, _, pa, pb in mine:
            if shares[ns] != (pa, pb):
                shares_out.append((shares[ns][0], shares[ns][1], ns, f))
        pooled_out.append((f, feature_qtype(f), sa, sb, n, support, lo, hi))
    c.executemany(sql.SET_SHARE, shares_out)
    c.executemany(sql.INSERT_POOLED, pooled_out)


def before_fold(c: Any, namespace: str, features: Iterable[str],
                settings: Mapping[str, float]) -> dict[str, tuple]:
    """What fold_into_pool needs to know before feedback folds into these
    features: {feature: (alpha, beta, pool_alpha, pool_beta, pooled row
    exists, low_rate, high_rate, namespaces that have it)}, alpha None for a
    feature new to the namespace (and the count of namespaces given only
    then, and only up to the number a feature needs to be pooled)."""
    return {r[0]: r[1:] for r in c.execute(sql.BEFORE_FOLD, {
        "namespace": namespace, "features": json.dumps(list(features)),
        "least": _params(settings)[2]})}


def fold_into_pool(c: Any, namespace: str, fold: Mapping[str, Iterable],
                   before: Mapping[str, tuple], settings: Mapping[str, float]) -> None:
    """After feedback added fold ({feature: (d_alpha, d_beta, n)}) to the
    namespace's own links (before: before_fold() until then), update the
    pooled rows.  Where the namespace's place among the others cannot have
    changed (its rate stays on the same side of the pooled row's lowest and
    highest kept rates, or exactly where it was), or too few namespaces back
    the feature to pool it, its share and the pooled row change in place.
    Elsewhere (a rate crossing a boundary, one namespace more behind a pooled
    feature) the pooled row is reworked from the rows around its trim
    boundaries (_rework), or worked out in full where that cannot be done (a
    feature whose pooled row is missing).  The shares that change go in one
    batch, and every pooled row's change in one statement."""
    cap, _, least = _params(settings)
    shares: list[tuple] = []  # (pool_alpha, pool_beta, namespace, feature)
    # feature: [d_alpha, d_beta, d_n, d_support, low_rate, high_rate]
    pooled: dict[str, list] = {}
    full = []
    for f, (da, db, dn) in fold.items():
        a0, b0, pa0, pb0, exists, lo, hi, k_before = before[f]
        if a0 is not None and not (_evidence(a0, b0) and _evidence(a0 + da, b0 + db)):
            full.append(f)  # a row without evidence joins or leaves the pool: work it out
            continue
        if a0 is None:  # the namespace is new to this feature: one more backs it
            if not exists and least > 1:  # no namespace had it: nothing pooled yet
                pooled[f] = [0.0, 0.0, dn, 1, None, None]
            elif exists and lo is None and k_before + 1 < least:  # still too few to pool
                pooled[f] = [0.0, 0.0, dn, 1, None, None]
            elif exists:
                _rework(c, namespace, f, dn, True, lo is not None, settings, shares, pooled, full)
            else:
                full.append(f)
            continue
        if not exists:
            full.append(f)
            continue
        if lo is None:  # nothing pooled yet for this feature: only n moves
            pooled[f] = [0.0, 0.0, dn, 0, None, None]
            continue
        c1 = cap_counts(a0 + da, b0 + db, cap)
        r0, r1 = _rate(a0, b0), _rate(a0 + da, b0 + db)
        if lo < r0 < hi and lo < r1 < hi:
            share = c1
        elif r0 < lo and r1 < lo:
            share = _at(*c1, lo)
        elif r0 > hi and r1 > hi:
            share = _at(*c1, hi)
        elif r0 == r1:  # on a boundary, and staying: its place is unchanged
            share = _at(*c1, r1) if (r1 == lo or r1 == hi) else c1
        else:
            _rework(c, namespace, f, dn, False, True, settings, shares, pooled, full)
            continue
        if share != (pa0, pb0):
            shares.append((share[0], share[1], namespace, f))
        pooled[f] = [share[0] - pa0, share[1] - pb0, dn, 0, lo, hi]
    # one primary-key update per row (an UPDATE ... FROM json_each is planned
    # as a scan of the namespace's links)
    c.executemany(sql.SET_SHARE, shares)
    if pooled:
        c.execute(sql.ADD_TO_POOLED, {"add": json.dumps(pooled)})
    if full:
        rebuild_pool(c, full, settings)


def _rework(c: Any, namespace: str, f: str, dn: int, new_row: bool, was_pooled: bool,
            settings: Mapping[str, float], shares: list[tuple], pooled: dict[str, list],
            full: list[str]) -> None:
    """Rework one pooled feature's row after namespace's own row changed, from
    the rows around its trim boundaries only (one indexed read, however many
    namespaces back it): the changed shares go into `shares` and the pooled
    row's change into `pooled`, as fold_into_pool keeps them (or the feature
    into `full`, should fewer namespaces back it than a pooled row needs).
    Only the `trim` lowest and highest rates have a share at a boundary rate;
    every other row's share is its capped counts.  One row moved, so every
    row that was among the `trim` lowest (highest) before is among the
    `trim` + 1 lowest (highest) now, or is that row: the rows read are all
    whose share can change.  Where the feature was not pooled before (it has
    just reached `min` namespaces), every row's share changes: all `min` of
    them are read, and their ends are the lowest and highest."""
    cap, trim, _ = _params(settings)
    p = {"feature": f, "m": trim + 1, "namespace": namespace}
    if was_pooled:
        edges = c.execute(sql.POOL_EDGES, p).fetchall()
        rows = {r[1]: r[1:] for r in edges}
        lowest = sorted((r[1:] for r in edges if r[0] == 0), key=_order)
        highest = sorted((r[1:] for r in edges if r[0] == 1), key=_order, reverse=True)
    else:
        rows = {r[0]: r for r in c.execute(sql.POOL_ALL_ROWS, p).fetchall()}
        lowest = sorted(rows.values(), key=_order)[:trim + 1]
        highest = sorted(rows.values(), key=_order, reverse=True)[:trim + 1]
    if any(not _evidence(r[1], r[2]) for r in lowest):
        # rows without evidence (a damaged file's) sort lowest and count
        # nothing: where the feature has any, it is worked out in full
        full.append(f)
        return
    if len(lowest) <= trim:  # too few rows for a pooled row (own rows are never deleted)
        full.append(f)
        return
    lo, hi = _rate(*lowest[trim][1:3]), _rate(*highest[trim][1:3])
    low_set = {r[0] for r in lowest[:trim]}
    high_set = {r[0] for r in highest[:trim]}
    da = db = 0.0
    for ns, a, b, pa, pb in rows.values():
        ca, cb = cap_counts(a, b, cap)
        if ns in low_set:
            ca, cb = _at(ca, cb, lo)
        elif ns in high_set:
            ca, cb = _at(ca, cb, hi)
        if (ca, cb) != (pa, pb):
            shares.append((ca, cb, ns, f))
            da += ca - pa
            db += cb - pb
    pooled[f] = [da, db, dn, int(new_row), lo, hi]


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


def per_namespace(events: Iterable[tuple[str, Iterable]]) -> dict[str, dict[str, list[float]]]:
    """{namespace: {feature: [alpha, beta]}}: each namespace's own evidence."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for (ns, f), (a, b, _) in replay(events).items():
        out[ns][f][0] += a
        out[ns][f][1] += b
    return out


def pooled(own: Mapping[str, Mapping[str, Iterable]]) -> dict[str, list[float]]:
    """{feature: [alpha, beta]}: the pooled layer as the sum of namespaces."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for counts in own.values():
        for f, (a, b) in counts.items():
            out[f][0] += a
            out[f][1] += b
    return out
