"""How feedback events add up to learned links, in one place.

Owns: the replay of the event log (and any merged prior) into link counts per
(layer, feature), the comparison of those counts with stored links (one
tolerance), the pooled sums that tune() holds out per fold, and the split of
a feature name into its question type.  check(), import and tune() all go
through here, so they cannot disagree about what the events mean.  The
credit each judged memory gives (which features, how much) is the C core's
(hm_credit); this module only adds the deltas up.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from .validate import POOLED

#: A link's evidence: [alpha, beta, n] (n: events that touched it).
Counts = dict[tuple[str, str], list]
#: How far a stored link may lie from its replay, relative to max(1, |replay|).
TOLERANCE = 1e-6


def feature_qtype(feature: str) -> str:
    """The question type a feature is crossed with ('when/date:1' -> 'when'),
    '' for a plain shape feature."""
    return feature.split("/", 1)[0] if "/" in feature else ""


def replay(events: Iterable[tuple[str, Iterable]], prior: Mapping[str, Iterable] | None = None,
           *, layers: bool = True) -> Counts:
    """The link counts that events produce.

    events: (namespace, deltas) pairs, deltas [(feature, d_alpha, d_beta), ...].
    Each delta counts in its namespace's layer and, with layers=True, in the
    pooled layer ('*') as well.  prior: pooled evidence merged from
    links-only files, {feature: (alpha, beta, n)}, added to the pooled layer.
    """
    out: Counts = {}
    for ns, deltas in events:
        for f, da, db in deltas:
            for layer in ((ns, POOLED) if layers else (ns,)):
                r = out.setdefault((layer, f), [0.0, 0.0, 0])
                r[0] += da
                r[1] += db
                r[2] += 1
    for f, (a, b, n) in (prior or {}).items():
        r = out.setdefault((POOLED, f), [0.0, 0.0, 0])
        r[0] += a
        r[1] += b
        r[2] += n
    return out


def cap_counts(a: float, b: float, cap: float) -> tuple[float, float]:
    """A namespace's (alpha, beta) as the pooled layer counts it: scaled down
    to cap observations in all, its rate kept (schema.capped, in Python)."""
    s = cap / (a + b) if a + b > cap else 1.0
    return a * s, b * s


def pool(own: Counts, settings: Mapping[str, float], prior: Mapping[str, Iterable] | None = None,
         prior_support: int = 0) -> dict[tuple[str, str], list]:
    """Every link as the store holds it, from the namespaces' own counts
    (replay(..., layers=False)) and how the pool is built (schema.POOL_DEFAULTS:
    cap, min, trim): each namespace's row [alpha, beta, n, summed] (summed 1
    when the pool counts it), and the pooled rows [alpha, beta, n, support]:
    per feature, once at least `min` namespaces back it, the sum of their
    capped counts less the `trim` lowest and `trim` highest rates of use; a
    links-only prior adds its counts and prior_support.  The same rules as
    schema.rebuild_pool, in Python (each namespace's row: [alpha, beta, n])."""
    cap, least, trim = settings["cap"], settings["min"], settings["trim"]
    by_feature: dict[str, list] = defaultdict(list)
    out: dict[tuple[str, str], list] = {}
    for (ns, f), (a, b, n) in own.items():
        if ns == POOLED:
            continue
        ca, cb = cap_counts(a, b, cap)
        rate = ca / (ca + cb) if ca + cb else float("-inf")  # SQL: NULL sorts first
        by_feature[f].append((rate, ns, ca, cb, n))
        out[(ns, f)] = [a, b, n]
    least = max(least, 2 * trim + 1)
    for f, rows in by_feature.items():
        rows.sort(key=lambda r: (r[0], r[1]))
        k = len(rows)
        r = out.setdefault((POOLED, f), [0.0, 0.0, 0, 0])
        if k >= least:
            rlo, rhi = rows[trim][0], rows[k - 1 - trim][0]
            for i, (_, ns, ca, cb, _) in enumerate(rows):
                if i < trim:  # winsorized: its weight at the nearest kept rate
                    ca, cb = (ca + cb) * rlo, (ca + cb) * (1 - rlo)
                elif i >= k - trim:
                    ca, cb = (ca + cb) * rhi, (ca + cb) * (1 - rhi)
                r[0] += ca
                r[1] += cb
        r[2] = sum(x[4] for x in rows)
        r[3] = k
    for f, (a, b, n) in (prior or {}).items():
        r = out.setdefault((POOLED, f), [0.0, 0.0, 0, 0])
        r[0] += a
        r[1] += b
        r[2] += n
        r[3] += prior_support
    return out


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
    for (ns, f), (a, b, _) in replay(events, layers=False).items():
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
