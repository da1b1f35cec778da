"""Export and import a heapmem store as JSON Lines.

Owns: the JSON Lines formats (a full export, a links-only export, the
trajectories) and the checks of every record read from one.  It reaches the
store only through Memory.snapshot() and Memory.transaction(), with
statements from heapmem.db.sql and the layout and meta keys of heapmem.db.schema,
and through Memory's public methods (log.get, log.events, get).

A full export is lossless: importing it into a new file reproduces every
memory (id, text, every field, its place in the FTS index), the recall log,
the feedback events and the learned links exactly, so check() passes and
recall() returns the same ids, order and scores.

    {"heapmem": "export", "format": 1, "schema": 3, "version": "0.1.0", "counts": {...}, ...}
    {"type": "meta", "key": "last_seq", "value": "12"}
    {"type": "memory", "seq": 1, "id": "m1", "namespace": "user:maya", "text": "...", ...}
    {"type": "vector", "seq": 1, "v": "<base64 float32>"}
    {"type": "recall", "id": 1, "namespace": "user:maya", "query": "...", "shown": [...], ...}
    {"type": "event", "id": 1, "recall_id": 1, "used": 1, "deltas": [[f, da, db], ...], ...}
    {"type": "link", "namespace": "*", "feature": "kind:fact", "alpha": 3.0, "beta": 1.0, ...}

Each record holds its row's columns (JSON text as JSON, BLOBs as base64;
memories.nstag is left out and recomputed).  Records come in that order; the
header's counts let import detect a cut-off file.  Importing into a store that
already holds data merges: memory ids must not collide (else nothing is
imported; with remap_ids=True an automatic id the store holds moves to a
free one, and the file's recalls follow it), sequence numbers and recall ids
are shifted past the store's own, and links add up (the events come along,
so check() still agrees).

A links-only export (`export_links`) holds the pooled layer of learned links
and nothing else: no text, no memory ids, no namespaces, no queries:

    {"heapmem": "links", "format": 1, "version": "0.1.0", "exported_at": ..., "count": 40}
    {"feature": "when/clock", "qtype": "when", "alpha": 1.9, "beta": 4.2, "n": 18}

Importing it merges it as a prior: each row's alpha, beta and n are added to
the pooled layer ('*') of the target store, which every namespace borrows from
(up to ScoringConfig.pooled_pseudocount observations' worth).  Each prior is
kept apart, with its digest (of its links), its file's name and when it was
merged (heapmem.learning.priors), so mem.priors.list() lists it and
mem.priors.remove() takes it out again; their bounded sum is what the pool
adds, and check() tells it from evidence that events produced.  Merging the same
prior twice is refused.

Trajectories (`export_trajectories`, docs/TRAJECTORIES.md) are training data,
not a copy: one record per tracked recall, what it showed in rank order, how
feedback judged each, and an outcome; import does not read them:

    {"heapmem": "trajectories", "format": 1, "version": "0.1.0", "exported_at": ..., ...}
    {"recall_id": 1, "namespace": "user:maya", "question": "...", "qtype": "when", ...}

Every import runs in one transaction: any bad record, a wrong header, a
truncated file or a colliding id raises ValueError and nothing is written.
What a record may hold is what heapmem itself writes: a feature is one the C
core makes (FEATURES, at most 480 of them); a recall shows each memory once,
each a memory of the recall's own namespace (in the file or already in the
store), with one age, one set of shape features and one score per memory
shown; an event judges a memory its recall showed, in its namespace, and
each of its deltas credits one observation (d_alpha + d_beta = 1), so a
namespace's link always holds evidence.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterator, Union, cast

import apsw

from .._version import __version__
from ..config import MAX_IMPORTANCE, ScoringConfig
from ..db import native, schema, sql
from ..db.schema import META_LINKS_PRIOR, META_LINKS_PRIOR_FILES, SCHEMA_VERSION
from ..errors import HeapmemError, from_sqlite
from ..learning import links as learning
from ..learning import priors
from ..results import ImportReport
from ..store import Memory
from ..validate import (
    MAX_K,
    MAX_TIME,
    MIN_TIME,
    POOLED,
    check_name,
    check_namespace,
    check_text,
    check_thread,
)

#: Version of the JSON Lines layout written by export().
FORMAT = 1
#: heapmem_meta key holding the pooled evidence merged from links-only files.
PRIOR_KEY = META_LINKS_PRIOR
#: heapmem_meta key holding the SHA-256 of each links-only file merged.
PRIOR_FILES_KEY = META_LINKS_PRIOR_FILES

#: progress(done, total): total is None when unknown.
Progress = Callable[[int, Union[int, None]], None]
PathOrFile = Union[str, "os.PathLike[str]", IO[Any]]

_ORDER = {"meta": 0, "memory": 1, "vector": 2, "recall": 3, "event": 4, "link": 5}
_PLURAL = {"meta": "meta", "memory": "memories", "vector": "vectors", "recall": "recalls",
           "event": "events", "link": "links"}
#: meta keys that name the embedder the vectors were made with
_EMBEDDER_KEYS = (schema.META_EMBEDDER, schema.META_EMBEDDING_DIM)


class ProgressBar:
    """A one-line progress bar on a stream (stderr by default), for
    export(..., progress=ProgressBar()).  It draws only on a terminal (or
    with force=True), and only once a run has lasted `delay` seconds, so short
    runs print nothing."""

    def __init__(self, label: str, stream: IO[str] | None = None, *, force: bool = False,
                 delay: float = 0.5, width: int = 30):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or bool(getattr(self.stream, "isatty", lambda: False)())
        self.delay = 0.0 if force else delay
        self.width = width
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        finished = total is not None and done >= total
        if now - self._start < self.delay or (now - self._last < 0.1 and not finished):
            return
        self._last = now
        if total:
            frac = min(1.0, done / total)
            fill = int(frac * self.width)
            line = (f"\r{self.label} [{'#' * fill}{'.' * (self.width - fill)}] "
                    f"{frac * 100:3.0f}%")
        else:
            line = f"\r{self.label} {done:,}"
        self.stream.write(line)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


# -- export --------------------------------------------------------------------------


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@dataclass
class _Sink:
    """Where an export goes: a path (written to a temporary file, then
    renamed, so a failed export leaves nothing) or an open text file."""

    target: PathOrFile

    def __enter__(self) -> IO[str]:
        if hasattr(self.target, "write"):
            self._fp: IO[str] = cast("IO[str]", self.target)  # an open file: it writes
            self._tmp: str | None = None
            return self._fp
        path = os.fspath(self.target)
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ValueError(f"cannot write {path!r}: the folder {folder!r} does not exist")
        fd, self._tmp = tempfile.mkstemp(prefix=".heapmem-export-", dir=folder)
        self._path = path
        self._fp = io.open(fd, "w", encoding="utf-8", newline="\n")
        return self._fp

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if self._tmp is None:
            return
        self._fp.close()
        if exc_type is None:
            os.replace(self._tmp, self._path)
        else:
            os.unlink(self._tmp)


def _has_vectors(c: Any) -> bool:
    return schema.has_table(c, "vectors")


def _counts(c: Any) -> dict[str, int]:
    out = {"meta": len(schema.meta_items(c))}
    for _, table, _ in schema.TABLES:
        out[table] = (c.execute(sql.count_rows(table)).fetchall()[0][0]
                      if table != "vectors" or _has_vectors(c) else 0)
    out["links"] = len(learning.link_rows(c, ["namespace", "feature"]))
    return out


def _out(table: str, col: str, v: Any) -> Any:
    if isinstance(v, (bytes, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if v is not None and col in schema.JSON_COLUMNS.get(table, ()):
        return json.loads(v)
    return v


def _records(c: Any) -> Iterator[dict[str, Any]]:
    """Every row of the store, table by table, each column as a field (JSON
    text as JSON, BLOBs as base64)."""
    for k, v in schema.meta_items(c):
        yield {"type": "meta", "key": k, "value": v}
    for typ, table, order in schema.TABLES:
        if table == "vectors" and not _has_vectors(c):
            continue
        cols = schema.columns(c, table)
        rows = learning.link_rows(c, cols) if table == "links" else \
            c.execute(sql.select_all(table, cols, order))
        for row in rows:
            rec = {"type": typ}
            for col, v in zip(cols, row):
                rec[col] = _out(table, col, v)
            yield rec


def _from_store(fn: Callable) -> Callable:
    """An export reads only the store: whatever fails in it (SQLite, or a
    damaged value that will not encode) is a HeapmemError."""
    import functools

    @functools.wraps(fn)
    def guarded(mem: Memory, target: PathOrFile, **kw: Any) -> Any:
        try:
            return fn(mem, target, **kw)
        except HeapmemError:
            raise
        except (apsw.Error, ValueError, TypeError, OverflowError, RecursionError) as e:
            if isinstance(e, ValueError) and str(e).startswith("cannot write"):
                raise  # the target folder: the caller's argument
            raise from_sqlite(e, fn.__name__) from e
    return guarded


@_from_store
def export(mem: Memory, target: PathOrFile, *, progress: Progress | None = None) -> dict[str, int]:
    """Write the whole store to target (a path, or an open text file) as JSON
    Lines; returns the counts written.  A path is written to a temporary file
    first and renamed at the end, so a failed export leaves no partial file."""
    with mem.snapshot() as c:
        counts = _counts(c)
        total = sum(counts.values())
        header = {"heapmem": "export", "format": FORMAT, "schema": SCHEMA_VERSION,
                  "version": __version__, "exported_at": mem.now(), "counts": counts}
        with _Sink(target) as fp:
            fp.write(_dump(header) + "\n")
            done = 0
            for rec in _records(c):
                fp.write(_dump(rec) + "\n")
                done += 1
                if progress is not None and (done % 500 == 0 or done == total):
                    progress(done, total)
            if progress is not None and total == 0:
                progress(0, 0)
    return counts


@_from_store
def export_links(mem: Memory, target: PathOrFile) -> int:
    """Write the pooled layer of learned links (feature, qtype, alpha, beta, n)
    to target as JSON Lines: no text, no memory ids, no namespaces, no
    queries.  Returns the number of links written."""
    with mem.snapshot() as c:
        rows = [(f, qt, a, b, n) for f, qt, a, b, n, _, _, _ in learning.pooled_rows(c)]
        header = {"heapmem": "links", "format": FORMAT, "version": __version__,
                  "exported_at": mem.now(), "count": len(rows)}
        with _Sink(target) as fp:
            fp.write(_dump(header) + "\n")
            for f, qt, a, b, n in rows:
                fp.write(_dump({"feature": f, "qtype": qt, "alpha": a, "beta": b, "n": n}) + "\n")
    return len(rows)


#: Version of the layout export_trajectories() writes.
TRAJECTORIES_FORMAT = 1


def export_trajectories(mem: Memory, target: PathOrFile, *,
                        namespace: str | None = None) -> int:
    """Write every tracked recall (of one namespace, or all) to target (a
    path, or an open text file) as JSON Lines: a header, then one record per
    recall, oldest first: its question, question type and time, the memories
    it showed in rank order (id, text, features, age and score without
    usefulness, how feedback judged it) and an outcome (None while unjudged).
    docs/TRAJECTORIES.md describes every field and how to train a write
    policy from them.  Returns the number of records.

    A forgotten memory leaves nothing: forget() drops the recalls that showed
    it, so its text, id and their questions are in no record.  Bad arguments
    (not a Memory, a namespace the store does not hold, a folder, a missing
    folder) raise TypeError or ValueError before anything is written; a path
    is written to a temporary file and renamed at the end, so a failed export
    leaves no file."""
    if not isinstance(mem, Memory):
        raise TypeError(f"export_trajectories needs a heapmem Memory (heapmem.open(...)), got "
                        f"{type(mem).__name__}")
    if namespace is not None:
        namespace = check_namespace(namespace)
        if namespace not in mem.namespaces:
            raise ValueError(f"the store has no namespace {namespace!r}; give one it holds "
                             "(heapmem stats lists them) or none for every namespace")
    if not hasattr(target, "write"):
        if isinstance(target, bool) or not isinstance(target, (str, os.PathLike)):
            raise TypeError(f"target must be a path or an open text file, got "
                            f"{type(target).__name__}")
        if os.path.isdir(target):
            raise ValueError(f"cannot write {os.fspath(target)!r}: it is a folder; give a file "
                             "name")
    return _write_trajectories(mem, target, namespace=namespace)


@_from_store
def _write_trajectories(mem: Memory, target: PathOrFile, *, namespace: str | None) -> int:
    with mem.snapshot() as c:  # one view: the recalls, their events, their memories
        ids = [r[0] for r in c.execute(sql.RECALL_IDS, {"namespace": namespace})]
        judged: dict[int, dict[int, bool]] = {}
        for e in mem.log.events():  # Memory owns the event log
            if e.recall_id is not None:
                judged.setdefault(e.recall_id, {})[e.position] = e.used
        header = {"heapmem": "trajectories", "format": TRAJECTORIES_FORMAT,
                  "version": __version__, "exported_at": mem.now(), "namespace": namespace,
                  "count": len(ids)}
        items: dict[str, Any] = {}
        with _Sink(target) as fp:
            fp.write(_dump(header) + "\n")
            for rid in ids:
                rec = mem.log.get(rid)
                if rec is not None:
                    fp.write(_dump(_trajectory(mem, rec, judged.get(rid, {}), items)) + "\n")
    return len(ids)


def _trajectory(mem: Memory, rec: Any, verdicts: dict[int, bool],
                items: dict[str, Any]) -> dict[str, Any]:
    """One recall's record: what it showed, how each was judged, the outcome."""
    shown = []
    for pos, mid in enumerate(rec.shown):
        if mid not in items:
            items[mid] = mem.get(mid)
        item = items[mid]
        v = verdicts.get(pos)
        shown.append({"id": mid, "rank": pos + 1,
                      "text": item.text if item is not None else None,
                      "importance": item.importance if item is not None else None,
                      "age_days": rec.ages[pos], "rest": rec.rest[pos],
                      "features": rec.features[pos].split(),
                      "judged": None if v is None else ("used" if v else "ignored")})
    outcome = None
    if verdicts:
        used = sorted(p for p, u in verdicts.items() if u)
        outcome = {"used": len(used), "ignored": len(verdicts) - len(used),
                   "first_used_rank": used[0] + 1 if used else None,
                   "reciprocal_rank": 1.0 / (used[0] + 1) if used else 0.0}
    return {"recall_id": rec.id, "namespace": rec.namespace, "question": rec.query,
            "qtype": rec.qtype, "time": rec.created_at, "shown": shown, "outcome": outcome}


# -- import --------------------------------------------------------------------------


class _Lines:
    """Numbered, decoded lines of a path or an open (text or binary) file, with
    the bytes read so far for a progress bar and the SHA-256 of the whole."""

    def __init__(self, source: PathOrFile):
        self._own = not hasattr(source, "read")
        if self._own:
            path = os.fspath(source)  # type: ignore[arg-type]
            if os.path.isdir(path):
                raise ValueError(f"{path!r} is a folder, not a JSON Lines file")
            try:
                self.fp: IO[Any] = io.open(path, "rb")
            except FileNotFoundError:
                raise ValueError(f"no file at {path!r}") from None
            self.name = path
        else:
            self.fp = source  # type: ignore[assignment]
            self.name = getattr(source, "name", "the input")
        self.total: int | None = None
        try:
            self.total = os.fstat(self.fp.fileno()).st_size - self.fp.tell()
            if self.total <= 0:
                self.total = None
        except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
            self.total = None
        self.read = 0
        self.sha = hashlib.sha256()

    def __iter__(self) -> Iterator[tuple[int, str]]:
        for n, raw in enumerate(self.fp, 1):
            if isinstance(raw, str):
                raw = raw.encode("utf-8", "surrogatepass")
            self.read += len(raw)
            self.sha.update(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"line {n} of {self.name} is not valid UTF-8") from None
            yield n, line

    def close(self) -> None:
        if self._own:
            self.fp.close()


#: The largest count (alpha, beta) a file may carry for one link.
MAX_COUNT = 1e12


def _num(rec: dict, name: str, where: str, *, optional: bool = False, lo: float | None = None,
         hi: float | None = None, integer: bool = False) -> Any:
    v = rec.get(name)
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            integer and not isinstance(v, int)):
        raise ValueError(f"{where}: {name} must be {'an integer' if integer else 'a number'}, "
                         f"got {v!r}")
    if isinstance(v, int) and not -(1 << 62) < v < (1 << 62):
        raise ValueError(f"{where}: {name} is out of range")
    if not math.isfinite(v):
        raise ValueError(f"{where}: {name} must be finite, got {v!r}")
    if lo is not None and v < lo:
        raise ValueError(f"{where}: {name} must be at least {lo:g}, got {v!r}")
    if hi is not None and v > hi:
        raise ValueError(f"{where}: {name} must be at most {hi:g}, got {v!r}")
    return v


def _finite(x: Any) -> bool:
    if isinstance(x, int):
        return abs(x) < (1 << 62)
    return isinstance(x, float) and math.isfinite(x)


# -- the feature grammar: every feature heapmem itself can make ----------------------
#
# The C core makes them (csrc/heapmem.c): hm_features gives a memory one value
# in every shape slot, hm_relate adds srcq, a recall adds ctx:1 to a memory
# judged used for a question like its own (csrc/recall.c hr_context), hm_active
# adds "base" and the age bucket and then each of those crossed with the
# question type (hm_qtype's names).  The lists below are built from
# csrc/heapmem.h's tables (the grammar), read through db.native; the test
# tests/test_doors_from_elsewhere.py holds them to what C makes both ways (everything
# C makes is here, everything here C makes).  A file's link,
# prior, delta or logged feature outside them is refused: no made-up feature
# reaches the links, so the links table holds at most len(FEATURES) features
# per namespace.

_V = native.VOCABULARY
#: The question types, as hm_qtype names them.
QTYPES = _V.qtypes
#: Each shape slot's values: hm_features' kind, src, len and yes/no slots, and
#: hm_relate's srcq.
_SLOTS: dict[str, tuple[str, ...]] = {
    "kind": (*_V.kinds, _V.other_value),
    "src": (_V.no_source, *_V.source_roles, _V.other_value),
    "len": _V.len_buckets,
    **{slot: ("0", "1") for slot in (*_V.flag_slots, _V.relate_slot)}}
#: hm_active's age buckets.
_AGES = _V.age_buckets
#: The feature a recall adds to a memory judged used for a question like its own
#: (csrc/heapmem.h HM_CTX_FEATURE).
CONTEXT_FEATURE = _V.ctx_feature
#: The features a recall logs for each memory it shows (its shape, srcq and ctx:1).
SHAPE_FEATURES = frozenset({f"{slot}:{v}" for slot, vs in _SLOTS.items() for v in vs}
                           | {CONTEXT_FEATURE})
_OWN = SHAPE_FEATURES | {_V.base_feature} | {f"age:{a}" for a in _AGES}
#: Every feature a link, a prior or an event's delta can name: 480.
FEATURES = frozenset(_OWN | {f"{q}/{f}" for q in QTYPES for f in _OWN})


def _shown(v: Any) -> str:
    """v for an error message, cut short."""
    r = repr(v)
    return r if len(r) <= 80 else r[:76] + "...'"


def _feature_name(f: Any, where: str) -> str:
    """f, after checking it is a feature heapmem makes (FEATURES)."""
    if not isinstance(f, str) or f not in FEATURES:
        raise ValueError(f"{where}: {_shown(f)} is not a feature heapmem makes (a shape "
                         "feature such as 'date:1' or 'kind:fact', 'base' or an age such as "
                         "'age:week', alone or after a question type, as in 'when/date:1')")
    return f


def _qtype(rec: dict, where: str) -> str:
    qt = _str(rec, "qtype", where)
    if qt not in QTYPES:
        raise ValueError(f"{where}: qtype {_shown(qt)} is not a question type heapmem makes "
                         f"({', '.join(QTYPES)})")
    return qt


def _counts_of(v: Any, where: str, what: str) -> tuple[float, float, int]:
    """[alpha, beta, n]: finite, >= 0, bounded."""
    if not (isinstance(v, list) and len(v) == 3):
        raise ValueError(f"{where}: {what} must be [alpha, beta, n], got {v!r}")
    rec = dict(zip(("alpha", "beta", "n"), v))
    return (_num(rec, "alpha", where, lo=0, hi=MAX_COUNT),
            _num(rec, "beta", where, lo=0, hi=MAX_COUNT), _num(rec, "n", where, lo=0, integer=True))


def _meta_value(k: str, v: str, where: str) -> Any:
    """A meta record's value, checked: only the keys an export writes, each
    of its own type.  Returns the parsed value."""
    def parsed() -> Any:
        try:
            return json.loads(v)
        except (ValueError, RecursionError):
            raise ValueError(f"{where}: meta {k!r} is not valid JSON") from None

    if k in (schema.META_LAST_SEQ, schema.META_LAST_RECALL):
        if not (v.isascii() and v.isdigit() and len(v) <= 18):
            raise ValueError(f"{where}: meta {k!r} must be a whole number, got {v!r}")
        return int(v)
    if k == schema.META_EMBEDDER:
        return _named(check_name, v, k, where)
    if k == schema.META_EMBEDDING_DIM:
        if not (v.isascii() and v.isdigit() and 0 < int(v) <= 65536):
            raise ValueError(f"{where}: meta {k!r} must be a dimension from 1 to 65536")
        return int(v)
    if k == schema.META_POOL:
        d = parsed()
        if not (isinstance(d, dict) and set(d) <= set(schema.POOL_DEFAULTS) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and _finite(x) and x >= 0
                for x in d.values())):
            raise ValueError(f"{where}: meta {k!r} must be a JSON object of the pool's "
                             f"settings {sorted(schema.POOL_DEFAULTS)}")
        return d
    if k == PRIOR_KEY:
        d = parsed()
        if not isinstance(d, dict):
            raise ValueError(f"{where}: meta {PRIOR_KEY} is not a JSON object of [alpha, beta, n]")
        return {_feature_name(f, where): _counts_of(x, where, f"meta {PRIOR_KEY}[{f!r}]")
                for f, x in d.items()}
    if k == schema.META_PRIORS:
        d = parsed()
        if not isinstance(d, dict):
            raise ValueError(f"{where}: meta {k!r} is not a JSON object of priors by digest")
        out = {}
        for dg, r in d.items():
            what = f"meta {k!r}[{dg!r}]"
            if not (dg == priors.LEGACY or (len(dg) == 64 and all(
                    ch in "0123456789abcdef" for ch in dg))):
                raise ValueError(f"{where}: {what} is not named by a SHA-256 digest")
            if not (isinstance(r, dict) and set(r) == {"name", "merged_at", "links"}
                    and isinstance(r["links"], dict)):
                raise ValueError(f"{where}: {what} must hold name, merged_at and links")
            if not (r["name"] is None or (isinstance(r["name"], str) and len(r["name"]) < 4096)):
                raise ValueError(f"{where}: {what}: name must be a string or null")
            t = r["merged_at"]
            if not (t is None or (isinstance(t, (int, float)) and not isinstance(t, bool)
                                  and _finite(t))):
                raise ValueError(f"{where}: {what}: merged_at must be unix seconds or null")
            out[dg] = {"name": r["name"], "merged_at": t, "links": {
                _feature_name(f, where): _counts_of(x, where, f"{what}[{f!r}]")
                for f, x in r["links"].items()}}
        return out
    if k == PRIOR_FILES_KEY:
        d = parsed()
        if not (isinstance(d, list) and all(isinstance(x, str) and len(x) == 64 for x in d)):
            raise ValueError(f"{where}: meta {k!r} must be a list of SHA-256 digests")
        return d
    if k == schema.META_TUNED:
        d = parsed()
        if not isinstance(d, dict):
            raise ValueError(f"{where}: meta {k!r} must be a ScoringConfig as a JSON object")
        try:
            return ScoringConfig.from_dict(d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: meta {k!r} is not a valid ScoringConfig ({e})") from None
    if k == schema.META_FTS_DEFERRED:
        raise ValueError(f"{where}: meta key {k!r} is heapmem's own and cannot be imported")
    raise ValueError(f"{where}: unknown meta key {k!r}; nothing was imported")


def _str(rec: dict, name: str, where: str, *, optional: bool = False, empty: bool = False) -> Any:
    v = rec.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{where}: {name} must be a string, got {v!r}")
    if "\x00" in v:
        raise ValueError(f"{where}: {name} must not contain a NUL character")
    if not empty and not v.strip():
        raise ValueError(f"{where}: {name} must not be empty")
    return v


def _named(check: Callable, value: Any, what: str, where: str) -> Any:
    try:
        return check(value, what) if check is check_name else check(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None


def _deltas(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise ValueError(f"{where}: deltas must be a list of [feature, d_alpha, d_beta]")
    if len(v) > native.MAX_FEATURES:
        raise ValueError(f"{where}: an event credits at most {native.MAX_FEATURES} features")
    for d in v:
        # one judged memory gives each feature at most one observation
        if not (isinstance(d, list) and len(d) == 3 and isinstance(d[0], str) and d[0]
                and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                        and _finite(x) and 0 <= x <= 1 for x in d[1:])):
            raise ValueError(f"{where}: each delta must be [feature, d_alpha, d_beta] with "
                             f"credits from 0 to 1, got {_shown(d)}")
        _feature_name(d[0], where)
        if abs(d[1] + d[2] - 1) > 1e-9:  # (credits of nothing would make links of no evidence)
            raise ValueError(f"{where}: the delta {_shown(d)} credits {d[1] + d[2]:g} "
                             "observations, where a judged memory credits each of its features "
                             "exactly one (d_alpha + d_beta = 1)")
    if not v:
        raise ValueError(f"{where}: the event credits no feature, where a judged memory credits "
                         "at least 'base'")
    return v


def _read_header(lines: Iterator[tuple[int, str]], name: str) -> dict:
    for _, line in lines:
        if not line.strip():
            continue
        try:
            h = json.loads(line)
        except (ValueError, RecursionError):
            h = None
        if isinstance(h, dict) and h.get("heapmem") == "trajectories":
            raise ValueError(f"{name} holds trajectories (export --trajectories), training "
                             "data that import does not read; import a full or a links-only "
                             "export")
        if not isinstance(h, dict) or h.get("heapmem") not in ("export", "links"):
            raise ValueError(f"{name} is not a heapmem export (its first line is not a heapmem "
                             "header)")
        fmt = h.get("format")
        if fmt != FORMAT:
            raise ValueError(f"{name} has export format {fmt!r}; this heapmem ({__version__}) "
                             f"reads format {FORMAT}")
        if h["heapmem"] == "export" and not (isinstance(h.get("schema"), int)
                                             and 1 <= h["schema"] <= SCHEMA_VERSION):
            raise ValueError(f"{name} was exported from schema {h.get('schema')!r}, newer than "
                             f"this heapmem's ({SCHEMA_VERSION}); upgrade heapmem to import it")
        return h
    raise ValueError(f"{name} is empty")


def import_file(mem: Memory, source: PathOrFile, *, progress: Progress | None = None,
                remap_ids: bool = False) -> ImportReport:
    """Import a JSON Lines file written by export() or export_links() (told
    apart by its header).  All or nothing: on any problem ValueError is raised
    and the store is unchanged.

    A memory of the file whose id the store already holds is an error, unless
    remap_ids is True and the id is an automatic one (m<seq> or m<seq>-<n>,
    of its seq in the file): it then gets a free automatic id of its new seq,
    as add() would give it, and the recalls of the file that show it show the
    new id (ImportReport.remapped lists each change).  An id given by hand
    never changes: it still refuses to collide."""
    if not isinstance(remap_ids, bool):
        raise TypeError("remap_ids must be True or False")
    lines = _Lines(source)
    try:
        it = iter(lines)
        header = _read_header(it, lines.name)
        if header["heapmem"] == "links":
            return _import_links(mem, it, lines, header, progress)
        return _import_export(mem, it, lines, header, progress, _Ids(remap_ids))
    except apsw.Error as e:  # the disk, not the file: a failed read, write or sync
        raise from_sqlite(e, "import") from e
    finally:
        lines.close()


def _parse(n: int, line: str, name: str) -> dict | None:
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except ValueError as e:
        raise ValueError(f"line {n} of {name} is not valid JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"line {n} of {name} nests JSON too deeply") from None
    if not isinstance(rec, dict):
        raise ValueError(f"line {n} of {name} is not a JSON object")
    return rec


def _import_links(mem: Memory, it: Iterator[tuple[int, str]], lines: _Lines, header: dict,
                  progress: Progress | None) -> ImportReport:
    rows: dict[str, list] = {}
    for n, line in it:
        rec = _parse(n, line, lines.name)
        if rec is None:
            continue
        where = f"line {n} of {lines.name}"
        unknown = set(rec) - {"feature", "qtype", "alpha", "beta", "n"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} in a link")
        f = _feature_name(_str(rec, "feature", where), where)
        qt = _str(rec, "qtype", where, empty=True)
        if qt != learning.feature_qtype(f):
            raise ValueError(f"{where}: qtype {qt!r} does not match feature {f!r}")
        if f in rows:
            raise ValueError(f"{where}: feature {f!r} is listed twice")
        # any size (bounded when merged: schema.PRIOR_MAX_WEIGHT)
        rows[f] = [_num(rec, "alpha", where, lo=0, hi=1e300), _num(rec, "beta", where, lo=0,
                                                                   hi=1e300),
                   _num(rec, "n", where, lo=0, integer=True)]
        if progress is not None and n % 500 == 0:
            progress(lines.read, lines.total)
    if isinstance(header.get("count"), int) and header["count"] != len(rows):
        raise ValueError(f"{lines.name} is incomplete: its header promises {header['count']} "
                         f"links, it holds {len(rows)}; nothing was imported")
    if not rows:
        raise ValueError(f"{lines.name} holds no links; nothing was imported")
    with mem.transaction() as c:
        # kept apart with where it came from: mem.priors.list(), mem.priors.remove()
        priors.merge(c, priors.digest_of(rows), os.path.basename(lines.name), rows, mem.now())
        learning.rebuild_pool(c)
    if progress is not None:
        progress(lines.total or lines.read, lines.total or lines.read)
    return ImportReport("links", link_rows=len(rows))


@dataclass
class _Ids:
    """The file's memory ids as they land in the store.  remap: an automatic
    id the store holds (its own memory's, or one this import gave another
    memory of the file) moves to a free automatic id of the memory's new seq."""

    remap: bool
    moved: dict[str, str] = field(default_factory=dict)  # file id -> id in the store
    given: dict[str, str] = field(default_factory=dict)  # and back

    def place(self, c: Any, mid: str, seq: int, new_seq: int, where: str) -> str:
        """The id the file's memory mid (seq in the file, new_seq in the store) gets."""
        auto = _AUTO_ID.fullmatch(mid)
        automatic = auto is not None and int(auto.group(1)) == seq
        if mid in self.given and not automatic:
            raise ValueError(f"{where}: memory id {mid!r} (given by hand) is the id the remap "
                             f"gave the file's memory {self.given[mid]!r}; nothing was "
                             "imported")
        if mid not in self.given and not c.execute(sql.ID_EXISTS, {"id": mid}).fetchall():
            return mid
        if not self.remap or not automatic:
            how = ("; import with remap_ids=True (heapmem import --remap-ids) to give it a "
                   "free automatic id" if automatic else
                   " (an id given by hand, which a remap never changes)" if self.remap else "")
            raise ValueError(f"{where}: a memory with id {mid!r} is already in the store"
                             f"{how}; nothing was imported")
        new, n = f"m{new_seq}", 0
        while new in self.given or c.execute(sql.ID_EXISTS, {"id": new}).fetchall():
            new, n = f"m{new_seq}-{n}", n + 1
        self.moved[mid], self.given[new] = new, mid
        return new


#: An automatic memory id, as add() and heap_add make them: m<seq>, or m<seq>-<n>.
_AUTO_ID = re.compile(r"m([1-9][0-9]*)(?:-(?:0|[1-9][0-9]*))?")


@dataclass
class _Import:
    """One import of an export, as its records are read: the store's
    connection and offsets, and what the file has shown so far (its ids, its
    memories' namespaces, its events and links, checked against each other
    once all are read)."""

    c: Any
    name: str
    header: dict
    ids: _Ids
    seq_off: int
    rec_off: int
    ev_off: int
    columns: dict[str, list[str]]
    counts: dict[str, int] = field(default_factory=lambda: {
        "meta": 0, "memories": 0, "vectors": 0, "recalls": 0, "events": 0, "links": 0})
    meta_in: dict[str, str] = field(default_factory=dict)
    file_events: list[tuple[str, list]] = field(default_factory=list)
    file_links: dict[tuple[str, str], tuple] = field(default_factory=dict)
    file_prior: dict[str, list] = field(default_factory=dict)
    file_priors: dict[str, dict] = field(default_factory=dict)
    seqs: set[int] = field(default_factory=set)
    recall_ids: set[int] = field(default_factory=set)
    event_ids: set[int] = field(default_factory=set)
    mem_ids: set[str] = field(default_factory=set)
    file_ns: dict[str, str] = field(default_factory=dict)  # the file's memories' namespaces
    # the file's recalls: namespace, memories shown
    recall_ns: dict[int, tuple[str, int]] = field(default_factory=dict)


def _import_export(mem: Memory, it: Iterator[tuple[int, str]], lines: _Lines, header: dict,
                   progress: Progress | None, ids: _Ids) -> ImportReport:
    name = lines.name
    stage = 0
    with mem.transaction() as c:
        fresh = c.execute(sql.COUNT_MEMORIES).fetchall()[0][0] == 0 and \
            c.execute(sql.COUNT_LINKS).fetchall()[0][0] == 0
        seq_off = c.execute(sql.LAST_SEQ).fetchall()[0][0]
        rec_off = c.execute(sql.LAST_RECALL_ID).fetchall()[0][0]
        ev_off = c.execute(sql.LAST_EVENT_ID).fetchall()[0][0]
        # index the imported memories in one statement at the end (see
        # schema._SCHEMA_V3: the per-row trigger flushes FTS5 at every row)
        schema.defer_fts(c)
        columns = {t: schema.columns(c, t) for _, t, _ in schema.TABLES
                   if t != "vectors" or _has_vectors(c)}
        st = _Import(c, name, header, ids, seq_off, rec_off, ev_off, columns)
        for n, line in it:
            rec = _parse(n, line, name)
            if rec is None:
                continue
            where = f"line {n} of {name}"
            typ = rec.get("type")
            if typ not in _ORDER:
                raise ValueError(f"{where}: unknown record type {typ!r}")
            if _ORDER[typ] < stage:
                raise ValueError(f"{where}: a {typ} record after the "
                                 f"{[k for k, v in _ORDER.items() if v == stage][0]} records; "
                                 "an export lists meta, memories, recalls, events, links in order")
            if stage == 0 and _ORDER[typ] > 0 and any(k in st.meta_in for k in _EMBEDDER_KEYS):
                _check_embedder(c, st.meta_in, name)  # before any memory: the clearer error
            stage = _ORDER[typ]
            st.counts[_PLURAL[typ]] += 1
            _IMPORTERS[typ](st, rec, where)
            if progress is not None and n % 500 == 0:
                progress(lines.read, lines.total)
        _check_whole(st)
        if any(k in st.meta_in for k in _EMBEDDER_KEYS):
            _check_embedder(c, st.meta_in, name)
        schema.index_deferred(c, seq_off + 1)
        notes = _apply_meta(st, mem, fresh)
        if st.counts["events"]:
            schema.autotune_recount(c)  # judged recalls came in: the next feedback counts
        learning.rebuild_pool(c)
    if progress is not None:
        progress(lines.total or lines.read, lines.total or lines.read)
    return ImportReport("export", st.counts["memories"], st.counts["recalls"],
                        st.counts["events"], st.counts["links"], seq_off, rec_off, tuple(notes),
                        tuple(ids.moved.items()))


def _import_meta(st: _Import, rec: dict, where: str) -> None:
    k = _str(rec, "key", where)
    v = _str(rec, "value", where, empty=True)
    if k in st.meta_in:
        raise ValueError(f"{where}: meta key {k!r} is listed twice")
    st.meta_in[k] = v
    parsed = _meta_value(k, v, where)
    if k == PRIOR_KEY:
        st.file_prior = parsed
    elif k == schema.META_PRIORS:
        st.file_priors = parsed


def _import_memory(st: _Import, rec: dict, where: str) -> None:
    row = _memory_row(st.c, rec, where, st.seqs, st.mem_ids)
    st.file_ns[row["id"]] = row["namespace"]
    row["id"] = st.ids.place(st.c, row["id"], row["seq"], row["seq"] + st.seq_off, where)
    row["seq"] += st.seq_off
    _insert(st.c, "memories", row, rec, where, st.columns)


def _import_vector(st: _Import, rec: dict, where: str) -> None:
    c, meta_in = st.c, st.meta_in
    if st.counts["vectors"] == 1:
        _check_embedder(c, meta_in, st.name)
    seq = _num(rec, "seq", where, lo=1, integer=True)
    if seq not in st.seqs:
        raise ValueError(f"{where}: the vector's memory (seq {seq}) is not in the file")
    try:
        v = base64.b64decode(_str(rec, "v", where), validate=True)
    except ValueError:
        raise ValueError(f"{where}: v must be base64 float32 data") from None
    dim = int(meta_in.get(schema.META_EMBEDDING_DIM) or 0)
    if meta_in.get(schema.META_EMBEDDER) == schema.BUILTIN_EMBEDDER:
        if len(v) != schema.BUILTIN_VECTOR_BYTES or \
                v[:4] != schema.INT4_VECTOR_MAGIC:
            raise ValueError(f"{where}: the vector is not one of "
                             f"{schema.BUILTIN_EMBEDDER}'s (heap_embed's int4 "
                             f"format, {schema.BUILTIN_VECTOR_BYTES} bytes)")
    elif not v or len(v) % 4 or (dim and len(v) != 4 * dim):
        raise ValueError(f"{where}: the vector has {len(v)} bytes, not "
                         f"{dim or 'a whole number of'} float32 values")
    if schema.meta_get(c, schema.META_EMBEDDER) == schema.BUILTIN_EMBEDDER:
        return  # the store made it from the memory's text as it came in
    _insert(c, "vectors", {"seq": seq + st.seq_off, "v": v}, rec, where, st.columns)


def _shown_lists(rec: dict, where: str) -> list[str]:
    """A recall record's shown ids, after checking shown, ages, features and
    rest, one for each shown memory (feedback on the recall reads them)."""
    shown, ages, feats = rec.get("shown"), rec.get("ages"), rec.get("features")
    if not (isinstance(shown, list) and isinstance(ages, list)
            and isinstance(feats, list) and len(shown) == len(ages) == len(feats)
            and all(isinstance(s, str) for s in shown)
            and all(isinstance(s, str) for s in feats)
            and all(isinstance(a, (int, float)) and not isinstance(a, bool)
                    for a in ages)):
        raise ValueError(f"{where}: shown, ages and features must be lists of the "
                         "same length (ids, numbers, strings)")
    if len(shown) > MAX_K or not all(_finite(a) for a in ages):
        raise ValueError(f"{where}: a recall shows at most {MAX_K} memories, each "
                         "with a finite age")
    rest = rec.get("rest")
    if not (isinstance(rest, list) and len(rest) == len(shown) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and _finite(x)
            for x in rest)):
        raise ValueError(f"{where}: rest must be a list of finite numbers, one for "
                         "each shown memory")
    for fs in feats:  # feedback on this recall will read them: they must parse
        try:
            native.active(fs, QTYPES[0], 0.0)
        except (ValueError, HeapmemError) as e:
            raise ValueError(f"{where}: a shown memory's features do not parse "
                             f"({e})") from None
        bad = [f for f in fs.split() if f not in SHAPE_FEATURES]
        if bad:
            raise ValueError(f"{where}: a shown memory's feature {_shown(bad[0])} "
                             "is not a shape feature heapmem makes")
    return shown


def _import_recall(st: _Import, rec: dict, where: str) -> None:
    rid = _num(rec, "id", where, lo=1, integer=True)
    if rid in st.recall_ids:
        raise ValueError(f"{where}: recall id {rid} is listed twice")
    st.recall_ids.add(rid)
    shown = _shown_lists(rec, where)
    ns = _named(check_namespace, rec.get("namespace"), "namespace", where)
    # what a recall shows is memories of its own namespace, each
    # once: the file's, or the store's (feedback on the recall
    # reads their words and marks them used)
    if len(set(shown)) != len(shown):
        twice = next(m for i, m in enumerate(shown) if m in shown[:i])
        raise ValueError(f"{where}: the recall shows {_shown(twice)} twice; a "
                         "recall shows each memory once")
    for mid in shown:
        held = st.file_ns.get(mid)
        if held is None:
            found = st.c.execute(sql.GET_MEMORY, {"id": mid}).fetchall()
            held = found[0][2] if found else None
        if held != ns:
            raise ValueError(f"{where}: the recall shows {_shown(mid)}, which is not "
                             f"a memory of its namespace {_shown(ns)} in the file or "
                             "the store; nothing was imported")
    st.recall_ns[rid] = (ns, len(shown))
    row = {"id": rid + st.rec_off, "namespace": ns,
           "query": _str(rec, "query", where, empty=True),
           "qtype": _qtype(rec, where),
           "created_at": _num(rec, "created_at", where, lo=MIN_TIME,
                              hi=MAX_TIME)}
    moved = st.ids.moved
    if any(m in moved and m in st.file_ns for m in shown):  # (a remapped memory)
        row["shown"] = json.dumps([moved.get(m, m) if m in st.file_ns else m
                                   for m in shown], allow_nan=False)
    _insert(st.c, "recalls", row, rec, where, st.columns)


def _import_event(st: _Import, rec: dict, where: str) -> None:
    eid = _num(rec, "id", where, lo=1, integer=True)
    if eid in st.event_ids:
        raise ValueError(f"{where}: event id {eid} is listed twice")
    st.event_ids.add(eid)
    rid = _num(rec, "recall_id", where, optional=True, lo=1, integer=True)
    if rid is not None and rid not in st.recall_ids:
        raise ValueError(f"{where}: the event's recall {rid} is not in the file")
    ns = _named(check_namespace, rec.get("namespace"), "namespace", where)
    position = _num(rec, "position", where, lo=0, integer=True)
    if rid is not None and (st.recall_ns[rid][0] != ns or position >= st.recall_ns[rid][1]):
        raise ValueError(f"{where}: the event judges position {position} of recall "
                         f"{rid}, which is not a memory that recall of namespace "
                         f"{_shown(ns)} showed")
    used = rec.get("used")
    if used not in (0, 1) or isinstance(used, bool):
        raise ValueError(f"{where}: used must be 0 or 1, got {used!r}")
    deltas = _deltas(rec.get("deltas"), where)
    st.file_events.append((ns, deltas))
    row = {"id": eid + st.ev_off, "recall_id": None if rid is None else rid + st.rec_off,
           "position": position, "namespace": ns, "qtype": _qtype(rec, where),
           "used": used,
           "created_at": _num(rec, "created_at", where, lo=MIN_TIME, hi=MAX_TIME)}
    _insert(st.c, "events", row, rec, where, st.columns)


def _import_link(st: _Import, rec: dict, where: str) -> None:
    ns = _str(rec, "namespace", where)
    if ns != POOLED:
        _named(check_namespace, ns, "namespace", where)
    f = _str(rec, "feature", where)
    qt = _str(rec, "qtype", where, empty=True)
    if qt != learning.feature_qtype(f):
        raise ValueError(f"{where}: qtype {qt!r} does not match feature {f!r}")
    _feature_name(f, where)
    if (ns, f) in st.file_links:
        raise ValueError(f"{where}: link {ns}:{f} is listed twice")
    extra = set(rec) - {"type", "namespace", "feature", "qtype", "alpha", "beta", "n",
                        "support", "pool_alpha", "pool_beta", "low_rate", "high_rate"}
    if extra:
        raise ValueError(f"{where}: unknown field(s) {sorted(extra)} in a link")
    row: tuple = (_num(rec, "alpha", where, lo=0, hi=MAX_COUNT),
                  _num(rec, "beta", where, lo=0, hi=MAX_COUNT),
                  _num(rec, "n", where, lo=0, integer=True))
    if ns == POOLED:  # checked against the namespaces' links, then worked out anew
        row += (_num(rec, "support", where, lo=0, integer=True),) \
            if st.header["schema"] >= 4 else ()
    else:
        if not row[0] + row[1] > 0:  # (the pooled layer has no rate for it)
            raise ValueError(f"{where}: link {ns}:{f} has no evidence (alpha and "
                             "beta are 0), where a namespace's link holds what its "
                             "events credited")
        st.c.execute(sql.UPSERT_LINK, (ns, f, qt) + row)
    st.file_links[(ns, f)] = row


#: How each record type of an export is checked and written, in _ORDER's order.
_IMPORTERS: dict[str, Callable[[_Import, dict, str], None]] = {
    "meta": _import_meta, "memory": _import_memory, "vector": _import_vector,
    "recall": _import_recall, "event": _import_event, "link": _import_link}


def _check_whole(st: _Import) -> None:
    """What holds only for the file as a whole: the counts its header
    promises, and its links equal to what its events add up to."""
    name = st.name
    want = st.header.get("counts")
    if isinstance(want, dict):
        for k, v in st.counts.items():
            if k in want and want[k] != v:
                raise ValueError(f"{name} is incomplete or altered: its header promises "
                                 f"{want[k]} {k}, it holds {v}; nothing was imported")
    # the file's own links must be what its events add up to (its pooled
    # rows are derived, like nstag: the store works its own out below)
    expect = learning.replay(st.file_events)
    file_links = {key: v for key, v in st.file_links.items() if key[0] != POOLED}
    bad = learning.mismatches(file_links, expect)
    if bad:
        (layer, f), _, _ = bad[0]
        raise ValueError(f"in {name}, link {layer}:{f} does not match the file's "
                         "events; nothing was imported")


def _apply_meta(st: _Import, mem: Memory, fresh: bool) -> list[str]:
    """The file's meta keys taken into the store (each as it should be: a
    high-water mark, a merge, a choice kept); returns notes on what was not."""
    c, name, meta_in = st.c, st.name, st.meta_in
    notes = []
    for k, v in meta_in.items():
        if k == schema.META_LAST_SEQ:
            schema.meta_set(c, k, str(max(schema.meta_int(c, k), st.seq_off + int(v))))
        elif k == schema.META_LAST_RECALL:
            schema.meta_set(c, k, str(max(schema.meta_int(c, k), st.rec_off + int(v))))
        elif k == schema.META_PRIORS:
            priors.adopt(c, st.file_priors, os.path.basename(name))
        elif k == PRIOR_KEY and schema.META_PRIORS not in meta_in:
            # an export from before schema 7: its priors summed as one
            d = priors.digest_of(st.file_prior)
            if st.file_prior and d not in priors.records(c) and d not in priors.merged(c):
                priors.merge(c, d, f"{os.path.basename(name)} (the prior of an export from "
                             "before schema 7)", st.file_prior, mem.now())
        elif k in _EMBEDDER_KEYS:
            schema.meta_set(c, k, v)  # checked against the store's above
        elif k == PRIOR_FILES_KEY:
            pass  # adopt() lists the digests of the records it takes: a list alone is a
            # claim without content, which would refuse a file never merged (issue 33)
        elif k == schema.META_TUNED:
            # a restore into a new store takes the file's tuned weights; a
            # merge never changes the weights of a store in use
            if fresh and schema.meta_get(c, k) is None:
                c.execute(sql.SAVE_CONFIG, {"config": ScoringConfig.from_dict(
                    json.loads(v)).to_sql()})
            else:
                notes.append("the file's tuned weights were not applied (this store was not "
                             "empty); tune() or set_config(save=True) sets them")
        # META_POOL: the store keeps its own settings (the pool is worked out below)
    return notes


def _check_embedder(c: Any, meta_in: dict[str, str], name: str) -> None:
    """The file's vectors and the store's must come from one embedder."""
    mine = {k: v for k in _EMBEDDER_KEYS if (v := schema.meta_get(c, k)) is not None}
    theirs = {k: meta_in[k] for k in _EMBEDDER_KEYS if k in meta_in}
    if not theirs.get(schema.META_EMBEDDER):
        raise ValueError(f"{name} holds vectors but does not name their embedder")
    if mine.get(schema.META_EMBEDDER) and [mine.get(k) for k in _EMBEDDER_KEYS] != [
            theirs.get(k) for k in _EMBEDDER_KEYS]:
        held = c.execute(sql.count_rows("vectors")).fetchall()[0][0]
        if held:
            raise ValueError(f"{name} holds vectors of embedder "
                             f"{theirs.get(schema.META_EMBEDDER)!r}, this store holds vectors of "
                             f"{mine.get(schema.META_EMBEDDER)!r}; nothing was imported")
        if mine.get(schema.META_EMBEDDER) == schema.BUILTIN_EMBEDDER:
            # a store of the library's own embedder, with no vectors yet, takes the
            # file's embedder before its memories arrive (its triggers would embed them)
            for k in _EMBEDDER_KEYS:
                if k in theirs:
                    schema.meta_set(c, k, theirs[k])


def _insert(c: Any, table: str, row: dict[str, Any], rec: dict, where: str,
            columns: dict[str, list[str]]) -> None:
    """Insert one record: the checked values in row, and the record's other
    fields as they are (JSON text columns re-encoded, base64 BLOBs decoded).
    A field the table lacks, or a required column the record lacks, is an
    error."""
    if table not in columns:
        raise ValueError(f"{where}: this store has no {table} table")
    cols = columns[table]
    unknown = set(rec) - set(cols) - {"type"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} in a record of {table}")
    full = dict(row)
    for col in cols:
        if col in full or col not in rec:
            continue
        v = rec[col]
        if col in schema.JSON_COLUMNS.get(table, ()):
            v = None if v is None else json.dumps(v, allow_nan=False)
        elif isinstance(v, (dict, list)):
            raise ValueError(f"{where}: {col} must be a plain value, got {v!r}")
        full[col] = v
    names = list(full)
    try:
        c.execute(sql.insert_row(table, names), [full[k] for k in names])
    except apsw.ConstraintError as e:
        raise ValueError(f"{where}: the {table} record does not fit this store ({e}); "
                         "nothing was imported") from None


def _memory_row(c: Any, rec: dict, where: str, seqs: set, ids: set) -> dict[str, Any]:
    seq = _num(rec, "seq", where, lo=1, integer=True)
    if seq in seqs:
        raise ValueError(f"{where}: seq {seq} is listed twice")
    seqs.add(seq)
    mid = _named(check_name, rec.get("id"), "id", where)
    if mid in ids:
        raise ValueError(f"{where}: memory id {mid!r} is listed twice")
    ids.add(mid)
    ns = _named(check_namespace, rec.get("namespace"), "namespace", where)
    imp = _num(rec, "importance", where)
    if not 0 < imp <= MAX_IMPORTANCE:
        raise ValueError(f"{where}: importance must be in (0, {MAX_IMPORTANCE:g}], got {imp!r}")
    used = _num(rec, "last_used_at", where, optional=True, lo=MIN_TIME, hi=MAX_TIME)
    meta = rec.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise ValueError(f"{where}: metadata must be a JSON object or null")
    text = _named(check_text, rec.get("text"), "text", where)
    try:
        thread, turn = check_thread(rec.get("thread"), rec.get("turn"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    if thread is not None and turn is None:
        raise ValueError(f"{where}: a memory of thread {thread!r} needs its turn")
    nstag = native.ns_tag(ns)
    row = {
        "seq": seq, "id": mid, "namespace": ns, "nstag": nstag, "text": text,
        "ntok": c.execute(sql.NTOK_OF, {"nstag": nstag, "text": text}).fetchall()[0][0],
        "kind": _named(check_name, rec.get("kind"), "kind", where),
        "source": None if rec.get("source") is None else _named(check_name, rec["source"],
                                                                  "source", where),
        "key": None if rec.get("key") is None else _named(check_name, rec["key"], "key", where),
        "importance": float(imp),
        "created_at": float(_num(rec, "created_at", where, lo=MIN_TIME, hi=MAX_TIME)),
        "last_used_at": None if used is None else float(used),
        "metadata": None if meta is None else json.dumps(meta, allow_nan=False,
                                                         ensure_ascii=False, sort_keys=True),
        "thread": thread, "turn": turn}
    # a memory's shape is worked out from its text here, never taken from the file
    _str(rec, "features", where, empty=True)
    row["features"] = c.execute(sql.FEATURES_OF, row).fetchall()[0][0]
    return row
