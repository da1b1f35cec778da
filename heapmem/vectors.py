"""A store's vectors and the embedder that makes them: mem.vectors.

Owns: the embedder a store was opened with (the default choice, the check
of its name and dimension against the file's, re-embedding, the vectors a
Python embedder gives, checked), the embedder's name and dimension in the
file (meta 'embedder', 'embedding_dim': written here only), the vector index
of big namespaces (its settings, a rebuild now, the build on open of a store
written before schema 10: csrc/vindex.c does the work) and check()'s view of
that index.  The library's own embedder (potion-base-8M) embeds inside SQL:
then the schema's triggers keep every memory's vector, and Python writes none.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np

from . import embedders
from .db import schema, sql
from .errors import HeapmemError, ReadOnlyError
from .guard import guarded, locked
from .validate import check_namespace

if TYPE_CHECKING:
    from .store import Memory

#: a namespace's vector index built on open says so on stderr from this many
#: memories on (about a second's work)
VECTOR_INDEX_PROGRESS = 50_000


def is_builtin(embedder: Any) -> bool:
    """Whether embedder is the library's own (the store embeds in SQL)."""
    return (getattr(embedder, "builtin", False) is True
            and getattr(embedder, "name", None) == schema.BUILTIN_EMBEDDER)


class Vectors:
    """A store's vectors (mem.vectors): the embedder it was opened with, the
    name of the one its vectors were made with, and the vector index of its
    big namespaces."""

    _door = "vectors."

    def __init__(self, mem: Memory, lock: threading.RLock, embedder: Any, *, default: bool,
                 reembed: bool, remote: bool):
        """default: open() named no embedder (the library's own, unless the
        file holds another's vectors); reembed: embed every memory again when
        the file holds another embedder's vectors."""
        self._mem = mem
        self._lock = lock
        self._remote = remote
        #: the embedder recall and add use (None: lexical recall)
        self.embedder = self._default() if default else embedder
        #: whether the library embeds for this store, inside SQL (embedders.Potion)
        self.builtin = False
        self._dim = 0
        if self.embedder is not None:
            self._attach(reembed)
            self._index_due()

    @property
    def in_python(self) -> bool:
        """Whether Python embeds the texts (an embedder other than the
        library's own): add, update and recall pass the vectors it gives."""
        return self.embedder is not None and not self.builtin

    @property
    @guarded
    @locked
    def embedder_name(self) -> str | None:
        """The name of the embedder this store's vectors were made with."""
        return schema.meta_get(self._mem.connection, schema.META_EMBEDDER)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors of texts, one row each, checked: an
        embedder that fails or gives another shape, dimension, NaN or
        infinities raises HeapmemError."""
        try:
            out = self.embedder(list(texts))
        except Exception as e:
            raise HeapmemError(f"the embedder failed: {type(e).__name__}: {e}") from e
        try:
            v = np.asarray(out, dtype=np.float32)
        except (TypeError, ValueError):
            raise HeapmemError("the embedder must return a 2-D array of floats") from None
        if v.ndim != 2 or v.shape[0] != len(texts) or v.shape[1] < 1:
            raise HeapmemError(f"the embedder returned shape {v.shape} for {len(texts)} texts; "
                               "it must return one row per text")
        if self._dim and v.shape[1] != self._dim:
            raise HeapmemError(f"the embedder returned dimension {v.shape[1]}, the store holds "
                               f"{self._dim}")
        if not np.isfinite(v).all():
            raise HeapmemError("the embedder returned NaN or infinite values")
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(v / norms, dtype=np.float32)

    @guarded
    def index(self, namespace: str) -> list[dict[str, Any]]:
        """Build namespace's vector index again from scratch, now (seeded
        k-means: the same vectors give the same partitions), or drop it when
        the namespace holds fewer vectors than the threshold; what was built,
        as [{"namespace", "vectors", "partitions"}].  Adds keep an index
        current by themselves: this is for after a change of settings.  A
        store without the library's own embedder: HeapmemError."""
        namespace = check_namespace(namespace)
        with self._mem.transaction() as w:
            out = w.execute(sql.VECTOR_INDEX, {"namespace": namespace}).fetchall()[0][0]
        return list(json.loads(out))

    @guarded
    def settings(self, **settings: Any) -> dict[str, Any]:
        """The vector index's settings (threshold: vectors a namespace holds
        before it is indexed; size: vectors a partition holds; probe: the
        least share of an indexed namespace recall scans, more just past the
        threshold (its cube root of threshold / vectors); seed: k-means' seed),
        changed and saved first when any are given.  Bad names or values:
        ValueError, nothing written."""
        if not settings:
            with self._mem.snapshot() as c:
                return dict(json.loads(c.execute(sql.VECTOR_SETTINGS).fetchall()[0][0]))
        try:
            with self._mem.transaction() as w:
                out = w.execute(sql.SET_VECTOR_SETTINGS,
                                {"settings": json.dumps(settings)}).fetchall()[0][0]
        except apsw.SQLError as e:  # the C core's one sentence
            raise ValueError(str(e).removeprefix("SQLError: ")) from None
        return dict(json.loads(out))

    def _default(self) -> Any:
        """The embedder open() uses when none is named: the library's own
        (potion-base-8M) for a store without vectors or with its vectors;
        none (lexical recall, as before) for a store holding another
        embedder's vectors, or a read-only store without vectors."""
        held = schema.meta_get(self._mem.connection, schema.META_EMBEDDER)
        if held == schema.BUILTIN_EMBEDDER or (held is None and not self._mem.readonly):
            return embedders.Potion()
        return None

    def _attach(self, reembed: bool) -> None:
        """Check the embedder against the vectors the file holds, and record
        it (embedding what has no vector yet, or every memory again)."""
        e, mem = self.embedder, self._mem
        name = getattr(e, "name", None) or getattr(e, "model_name", None)
        if not isinstance(name, str) or not name:
            raise TypeError("the embedder needs a .name (a string naming its model), so the "
                            "store can tell its vectors from another model's")
        c = mem.connection
        held_name = schema.meta_get(c, schema.META_EMBEDDER)
        held_dim = schema.meta_get(c, schema.META_EMBEDDING_DIM)
        self.builtin = is_builtin(e)
        if self._remote and not self.builtin:
            raise HeapmemError("open(embedder=...): on a server store only the library's own "
                               "embedder (potion-base-8M, the default) embeds")
        dim = schema.BUILTIN_DIM if self.builtin else self.embed(["heapmem"]).shape[1]
        same = held_name == name and int(held_dim if held_dim is not None else dim) == dim
        # the library's own vectors can be made again at any time, for nothing
        if held_name is not None and not same and not reembed and \
                held_name != schema.BUILTIN_EMBEDDER:
            raise HeapmemError(
                f"{mem.path!r} holds vectors of embedder {held_name!r} (dimension "
                f"{held_dim}), not {name!r} (dimension {dim}); open it with "
                "that embedder, or pass reembed=True to embed every memory again with this one")
        self._dim = dim
        if mem.readonly:
            if not same:
                raise ReadOnlyError("a read-only store cannot take a new embedder")
            return
        if same and self.builtin:
            # the schema's triggers gave every memory since its vector: nothing
            # to write (a replica opens with its primary down)
            return
        with mem.transaction() as w:
            if not same:
                w.execute(sql.DELETE_VECTORS)
            schema.meta_set(w, schema.META_EMBEDDER, name)
            schema.meta_set(w, schema.META_EMBEDDING_DIM, str(dim))
            if self.builtin:  # the library embeds, inside SQL; and from now on, the triggers
                w.execute(sql.EMBED_UNEMBEDDED)
                return
            todo = w.execute(sql.UNEMBEDDED).fetchall()
            for i in range(0, len(todo), 256):
                chunk = todo[i:i + 256]
                vecs = self.embed([t for _, t in chunk])
                w.executemany(sql.INSERT_VECTOR,
                              [(seq, vecs[j].tobytes()) for j, (seq, _) in enumerate(chunk)])

    def _index_due(self) -> None:
        """On a writable open, build the vector index of each namespace past
        the threshold that has none (a store written before schema 10), one
        transaction each, with a line on stderr when one may take a second
        (VECTOR_INDEX_PROGRESS memories) and when it took longer."""
        if self._mem.readonly or self._remote or not self.builtin:
            return
        for ns, n in self._mem.connection.execute(sql.VECTOR_INDEX_DUE).fetchall():
            if n >= VECTOR_INDEX_PROGRESS:
                print(f"heapmem: building the vector index of namespace {ns!r} ({n:,} "
                      "memories), once", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            with self._mem.transaction() as w:
                w.execute(sql.VECTOR_INDEX, {"namespace": ns}).fetchall()
            took = time.monotonic() - t0
            if took > 1.0:
                print(f"heapmem: built the vector index of namespace {ns!r} in {took:.1f} s",
                      file=sys.stderr, flush=True)


def problems(c: schema.Connection) -> list[str]:
    """check(): every vector of an indexed namespace in exactly one partition
    of its namespace (vector_parts' key makes it at most one), no partition
    row astray, and each index's version and digest those of its centroids
    (csrc/vindex.c, hv_cents_digest)."""
    out = []
    for statement, what in ((sql.VECTORS_UNPARTITIONED,
                             "vectors of indexed namespaces are in no partition"),
                            (sql.PARTS_ASTRAY, "partition rows name no vector, or a partition "
                                               "of another namespace"),
                            (sql.CENTROIDS_ASTRAY, "centroids belong to no namespace's index")):
        odd = c.execute(statement).fetchall()[0][0]
        if odd:
            out.append(f"vector index: {odd} {what}")
    for ns, version, digest, cents in c.execute(sql.VECTOR_INDEXES).fetchall():
        parts = json.loads(cents)
        if not parts or version != parts[-1][0] or digest != _digest(parts):
            out.append(f"vector index of namespace {ns!r}: its version or digest is not that "
                       "of its centroids (heap_vector_index rebuilds it)")
    return out


def _digest(parts: list[list[Any]]) -> int:
    """FNV-1a 64 over each partition's id (8 bytes, little-endian) and
    centroid, in id order, as a signed integer (never 0): hv_cents_digest."""
    h = 1469598103934665603
    for part, hexc in parts:
        for b in int(part).to_bytes(8, "little", signed=True) + bytes.fromhex(hexc):
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    h = h or 1
    return h - (1 << 64) if h >= 1 << 63 else h
