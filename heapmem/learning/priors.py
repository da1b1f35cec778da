"""Links-only priors merged into a store, each with where it came from.

Owns: the record of every prior merged (its digest, the file's name, when
it was merged, its links' counts), the bounded sum of them that the pooled
layer adds (heapmem.learning reads it as schema.prior()), and the list of
digests that refuses the same file twice, and a store's view of them
(Priors: mem.priors lists them, removes one, and says which features they
add to).  heapmem.io.transfer merges a prior through merge(); mem.priors
reads and undoes them.  Nothing else writes these meta keys.

The sum is worked out afresh from the records on every change, in digest
order, each link bounded to schema.PRIOR_MAX_WEIGHT observations in all
(its rate kept): so removing a prior leaves exactly what merging the others
alone would have left, and the rankings a store would have without it.
"""
from __future__ import annotations

import builtins
import hashlib
import json
import math
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..db import schema, sql
from ..guard import from_file, guarded, locked
from ..learning import links as learning
from ..results import Prior

if TYPE_CHECKING:
    from ..store import Memory

#: The record a store merged before schema 7, when priors were summed as
#: they came and not kept apart: all of them, as one, removable as one.
LEGACY = "merged-before-schema-7"


def records(c: Any) -> dict[str, dict[str, Any]]:
    """Every prior merged: {digest: {"name", "merged_at", "links": {feature:
    [alpha, beta, n]}}}; a damaged record (not an object) is left out."""
    got = schema.meta_json(c, schema.META_PRIORS, {})
    if not isinstance(got, dict):
        return {}
    return {d: r for d, r in got.items() if isinstance(r, dict)
            and isinstance(r.get("links"), dict)}


def _bounded(rows: Mapping[str, Any]) -> dict[str, list]:
    out = {}
    for f, (a, b, n) in rows.items():
        a, b = learning.cap_counts(float(a), float(b), schema.PRIOR_MAX_WEIGHT)
        out[f] = [a, b, int(n)]
    return out


def total(recs: Mapping[str, Mapping[str, Any]]) -> dict[str, list]:
    """The prior the pool adds: the records' links summed in digest order,
    each link bounded to PRIOR_MAX_WEIGHT observations."""
    out: dict[str, list] = {}
    for d in sorted(recs):
        for f, (a, b, n) in recs[d]["links"].items():
            p = out.setdefault(f, [0.0, 0.0, 0])
            p[0], p[1], p[2] = p[0] + a, p[1] + b, p[2] + n
    return _bounded(out)


def _write(c: Any, recs: dict[str, dict[str, Any]]) -> None:
    schema.meta_set(c, schema.META_PRIORS, json.dumps(recs, sort_keys=True, allow_nan=False))
    schema.meta_set(c, schema.META_LINKS_PRIOR,
                    json.dumps(total(recs), sort_keys=True, allow_nan=False))


def merged(c: Any) -> list[str]:
    """The digests of the prior files merged (and not removed)."""
    got = schema.meta_json(c, schema.META_LINKS_PRIOR_FILES, [])
    return [d for d in got if isinstance(d, str)] if isinstance(got, list) else []


def merge(c: Any, digest: str, name: str | None, rows: Mapping[str, Any],
          merged_at: float) -> None:
    """Record the prior rows (feature -> (alpha, beta, n), checked by the
    caller) under digest, and the sum anew, inside the caller's transaction;
    ValueError if that digest is merged already.  The caller rebuilds the
    pooled rows (learning.rebuild_pool)."""
    recs = records(c)
    files = merged(c)
    held = {_content(r["links"]) for r in recs.values()}  # what each record counts
    if digest in recs or digest in files or _content(_bounded(rows)) in held:
        raise ValueError(f"{name or 'this prior'} was already merged into this store as a "
                         "prior; merging it again would count its evidence twice")
    recs[digest] = {"name": name, "merged_at": merged_at, "links": _bounded(rows)}
    _write(c, recs)
    schema.meta_set(c, schema.META_LINKS_PRIOR_FILES, json.dumps(files + [digest]))


def digest_of(rows: Mapping[str, Any]) -> str:
    """A prior's digest: of its parsed links, so the same prior is the same
    digest however a file spells it (blank lines, key order, 1 or 1.0)."""
    return hashlib.sha256(json.dumps(sorted([f, float(a), float(b), int(k)] for f, (a, b, k)
                                            in rows.items())).encode()).hexdigest()


def _content(links: Mapping[str, Any]) -> str:
    """The digest of what a record counts (its links as stored, bounded)."""
    return digest_of(_bounded(links))


def adopt(c: Any, recs: Mapping[str, Mapping[str, Any]], source: str = "the file") -> int:
    """Take in another store's records (a full export's, checked by the
    caller), inside the caller's transaction: those this store has not
    merged yet.  Returns how many were new.

    A record's digest and name are the file's claims; its links are what it
    counts.  A record whose digest is not its links' own (digest_of) is
    filed under its links' digest instead, and its name says so: an import
    never files a prior under another file's digest or name, which would
    show a provenance it does not have and refuse that file as merged
    (issue 33).  A record of links this store counts already (merged here,
    or adopted before) is not taken again."""
    have = records(c)
    files = merged(c)
    held = {_content(r["links"]) for r in have.values()}
    new: dict[str, dict[str, Any]] = {}
    for d, r in recs.items():
        links = _bounded(r["links"])
        name = r.get("name")
        if d != LEGACY and d != digest_of(r["links"]) and d != digest_of(links):
            d = _content(links)
            name = (f"{name or 'a prior'} (as {source} names it: its digest did not match "
                    "its links, so it is filed under theirs)")
        if d in have or d in new or (d != LEGACY and _content(links) in held):
            continue
        new[d] = {"name": name, "merged_at": r.get("merged_at"), "links": links}
    if new:
        have.update(new)
        _write(c, have)
        schema.meta_set(c, schema.META_LINKS_PRIOR_FILES,
                        json.dumps(files + [d for d in sorted(new)
                                            if d != LEGACY and d not in files]))
    return len(new)


def find(c: Any, digest: str) -> str:
    """The digest of the one merged prior that digest names (whole, or its
    first 8 or more characters); ValueError otherwise."""
    if not isinstance(digest, str):
        raise TypeError(f"digest must be a string, got {type(digest).__name__}")
    recs = records(c)
    if digest in recs:
        return digest
    hits = [d for d in recs if len(digest) >= 8 and d.startswith(digest)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise ValueError(f"digest {digest!r} names {len(hits)} priors; give more of it")
    have = ", ".join(d[:12] for d in sorted(recs)) or "none"
    raise ValueError(f"no prior with digest {digest!r} was merged into this store "
                     f"(merged: {have}); nothing was removed")


def remove(c: Any, digest: str) -> tuple[str, dict[str, Any]]:
    """Take the prior digest names out, inside the caller's transaction:
    its record, its digest (so the file may be merged again later) and its
    part of the sum.  Returns its digest and record; the caller rebuilds the
    pooled rows of its features."""
    d = find(c, digest)
    recs = records(c)
    rec = recs.pop(d)
    _write(c, recs)
    files = [x for x in merged(c) if x != d]
    if d == LEGACY:
        files = [x for x in files if x in recs]
    schema.meta_set(c, schema.META_LINKS_PRIOR_FILES, json.dumps(files))
    return d, rec


def problems(c: Any) -> list[str]:
    """What check() reports: a stored sum that is not the records' sum."""
    stored = schema.prior(c)
    want = total(records(c))
    if set(stored) != set(want) or any(
            not (isinstance(stored[f], list) and len(stored[f]) == 3) or not all(
                isinstance(x, (int, float)) and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
                for x, y in zip(stored[f], want[f])) for f in want):
        return ["the links-only prior the pool adds is not the sum of the priors merged "
                "(mem.priors.list())"]
    return []


class Priors:
    """The links-only priors merged into a store (mem.priors): list(),
    remove(), and the features they add to."""

    _door = "priors."

    def __init__(self, mem: Memory, lock: threading.RLock, generation: Callable[[], int]):
        self._mem = mem
        self._lock = lock
        #: bumped by every write of the store's own connection to its links
        self._generation = generation
        self._features: frozenset[str] = frozenset()
        self._version: Any = None

    @property
    @locked
    def features(self) -> frozenset[str]:
        """The features whose pooled links a merged prior adds to (what
        explain() marks), read again once the file's links change."""
        c = self._mem.connection
        version = (c.execute(sql.DATA_VERSION).fetchall()[0][0], self._generation())
        if version != self._version:
            with from_file("reading the priors"):
                self._features = frozenset(schema.prior(c))
            self._version = version
        return self._features

    @guarded
    @locked
    def list(self) -> builtins.list[Prior]:
        """The links-only priors merged into this store (heapmem.io.transfer's
        import of a links file), oldest first: each one's digest, file name,
        when it was merged, and how much evidence it adds."""
        with from_file("reading the priors"):
            recs = records(self._mem.connection)
            out = [Prior(d, r.get("name"), r.get("merged_at"), len(r["links"]),
                         float(sum(a + b for a, b, _ in r["links"].values())))
                   for d, r in recs.items()]
        out.sort(key=lambda p: (p.merged_at is not None, p.merged_at or 0.0, p.digest))
        return out

    @guarded
    def remove(self, digest: str) -> Prior:
        """Take a merged prior out again: its evidence leaves the pooled
        layer, so recall ranks exactly as if it had never been merged, and
        its file may be merged again later.  digest is the one list() gives
        (or its first 8 or more characters).  Unknown digest: ValueError, and
        nothing changes."""
        if not isinstance(digest, str):
            raise TypeError(f"digest must be a string, got {type(digest).__name__}")
        before = {p.digest: p for p in self.list()}
        with self._mem.transaction() as c:
            d = find(c, digest)  # ValueError: nothing changes
            with from_file("removing a prior"):
                _, rec = remove(c, d)
                learning.rebuild_pool(c, features=[*rec["links"]])
        return before[d]
