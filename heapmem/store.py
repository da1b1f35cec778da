"""The store: Memory, one SQLite file holding memories, their FTS5 index,
the recall log, feedback events and learned links.  See heapmem.open().

Owns: the connection and its lock, every transaction (none is ever left
open), the verbs (add, update, get, list, recall, feedback, forget, links,
stats, check, tune, set_config), the learned-link cache, and the embedder.
Other modules reach the file only through Memory's public methods; the SQL
it runs is in heapmem.db.sql, the schema and meta keys in heapmem.db.schema.
"""
from __future__ import annotations

import builtins
import functools
import json
import math
import os
import re
import stat
import sys
import threading
import time
import urllib.parse
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping

import apsw
import numpy as np

from . import answers, embedders
from .config import DEFAULT_KIND, KIND_IMPORTANCE, MAX_IMPORTANCE, ScoringConfig
from .db import connect, native, schema, sql
from .db.sql import RECALL_SQL
from .errors import (
    AutoTuneWarning,
    CorruptStoreError,
    DuplicateIdError,
    HeapmemError,
    ReadOnlyError,
    from_sqlite,
)
from .learning import links as learning
from .learning import priors, tune
from .results import (
    CheckReport,
    Event,
    Feedback,
    Item,
    Judgement,
    LinkRow,
    LoggedRecall,
    NamespaceStats,
    Prior,
    Recall,
    Stats,
    TuneReport,
    log_params,
    recalled,
    recalled_across,
)
from .validate import (
    MAX_K,
    MAX_TEXT_BYTES,
    POOLED,
    Timestamp,
    check_answer,
    check_filters,
    check_ids,
    check_name,
    check_namespace,
    check_namespaces,
    check_recall_id,
    check_text,
    check_thread,
    python_text,
    seconds,
)

__all__ = ["Memory", "open", "RECALL_SQL", "MAX_K", "MAX_TEXT_BYTES", "POOLED"]

#: update()'s "leave this field as it is".
_KEEP: Any = object()


#: a row of _prepare's as heap_add's arguments, in heap_add's order (heap_add_many's items)
def _ADD_ARGS(r: Mapping[str, Any]) -> list[Any]:
    """A row as heap_add's arguments, in its order (copy's place null: the
    batch's)."""
    return [r["text"], r["namespace"], r["kind"], r["source"], r["id"], r["created_at"],
            r["importance"], r["key"], r["metadata"], None, r["thread"], r["turn"]]


def _item_sentence(e: BaseException, offset: int) -> str:
    """heap_add_many's sentence, its item numbered in the whole batch (the
    core numbers them in its call: item 3 of the call at offset 100_000 is
    item 100_003)."""
    text = _c_sentence(e)
    return re.sub(r"^item (\d+)", lambda m: f"item {int(m[1]) + offset}", text)


def _item(r: tuple) -> Item:
    """An Item from a row of sql.GET_MEMORY / sql.LIST_MEMORIES."""
    with _from_file("reading a memory"):
        row = dict(zip(sql.ITEM_COLUMNS, r))
        row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else None
        row["features"] = tuple(row["features"].split())
        return Item(**row)


def _same_text(c: Any, row: Mapping[str, Any]) -> Item | None:
    """The oldest memory of row's namespace with its text and key, or None:
    what an add without an id gives back (sql.SAME_TEXT, heap_add's rule)."""
    same = c.execute(sql.SAME_TEXT, row).fetchall()
    return _item(c.execute(sql.GET_MEMORY, {"id": same[0][0]}).fetchall()[0]) if same else None


def _logged_recall(r: tuple) -> LoggedRecall:
    """A LoggedRecall from a row of sql.GET_RECALL / sql.JUDGED_RECALLS."""
    with _from_file("reading the recall log"):
        row = dict(zip(sql.LOGGED_RECALL_COLUMNS, r))
        for name in ("shown", "ages", "features", "rest"):  # JSON arrays in the log
            row[name] = tuple(json.loads(row[name]))
        return LoggedRecall(**row)


def _locked(method: Callable) -> Callable:
    """Run a Memory method holding the store's lock: threads share one apsw
    connection, which refuses to run two statements at once
    (ThreadingViolationError), and a read must not see another thread's
    half-done write transaction."""
    @functools.wraps(method)
    def locked(self: "Memory", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


#: What SQLite can raise inside a verb; each reaches the caller as a
#: HeapmemError (errors.from_sqlite), never as itself.
_DAMAGE = (apsw.Error,)
#: a namespace's vector index built on open says so on stderr from this many
#: memories on (about a second's work)
VECTOR_INDEX_PROGRESS = 50_000
#: What decoding a value read from the file can raise when the value is
#: damaged (text where a number belongs, a log that is not JSON, a number past
#: int64): inside _from_file only, so that an argument's error stays a
#: ValueError/TypeError naming it and a bug in heapmem stays a bug.
_DECODING = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError,
             UnicodeError, AttributeError)


def _c_sentence(e: BaseException) -> str:
    """The sentence a heap_* function of the C core said, without apsw's and
    the function's prefixes ("SQLError: heap_forget: unknown ids ..." ->
    "unknown ids ...")."""
    return re.sub(r"^(\w+Error: )?heap_\w+: ", "", str(e))


@contextmanager
def _from_file(doing: str) -> Iterator[None]:
    """Decode values read from the file inside: what fails there is damage
    in the file (CorruptStoreError), said in one sentence."""
    try:
        yield
    except HeapmemError:
        raise
    except _DECODING as e:
        raise CorruptStoreError(f"{doing}: a value in the store is damaged "
                                f"({type(e).__name__}: {' '.join(str(e).split())})") from e


def _guarded(method: Callable) -> Callable:
    """Let SQLite's failures reach the caller as HeapmemError subclasses
    (errors.from_sqlite).  Bad arguments raise ValueError/TypeError before
    anything is read; damaged values are caught where they are decoded
    (_from_file); anything else is a bug in heapmem and surfaces as one."""
    @functools.wraps(method)
    def guarded(self: "Memory", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except HeapmemError:
            raise
        except _DAMAGE as e:
            raise from_sqlite(e, method.__name__) from e
    return guarded


def _check_path(path: Any) -> str:
    """open()'s path as a string (a PathLike or bytes decoded), refused when it
    is no path at all (None, a number, empty) or names no regular file."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        raise TypeError(f"path must be a file path or a server URL (a string), got "
                        f"{type(path).__name__}; heapmem.open(None) would make a file "
                        "named 'None'")
    if not path:
        raise ValueError("path is empty; give a file path, ':memory:' or a server URL")
    _refuse_special(path)
    return path


def _refuse_special(path: str) -> None:
    """HeapmemError unless path names a regular file or nothing yet: a
    directory, a FIFO (whose read would block forever), a device such as
    /dev/null or a socket is not a store, and SQLite's own error for it
    says nothing useful."""
    if connect.is_server(path) or path == ":memory:":
        return
    if path.startswith("file:"):  # a URI: its path part (none for an in-memory one)
        parts = urllib.parse.urlsplit(path)
        if "mode=memory" in parts.query or not parts.path:
            return
        path = urllib.parse.unquote(parts.path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return  # a new store
    except OSError as e:
        raise HeapmemError(f"cannot open {path!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise HeapmemError(f"cannot open {path!r}: it is a directory; give the path of a "
                           "store file inside it (for example "
                           f"{os.path.join(path, 'heapmem.db')!r})")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise HeapmemError(f"cannot open {path!r}: it is {what}, not a regular file; a store "
                           "is a file")


class _Default:
    """open()'s embedder when none is named: potion-base-8M, the embedder the
    library carries, unless the store holds another embedder's vectors."""

    def __repr__(self) -> str:
        return "heapmem.DEFAULT_EMBEDDER"


DEFAULT_EMBEDDER: Any = _Default()


class Memory:
    """A heapmem store: use heapmem.open() to make one.  A context manager."""

    def __init__(self, path: str, *, clock: Callable[[], Timestamp] = time.time,
                 config: ScoringConfig | None = None, readonly: bool = False,
                 embedder: Callable[[list[str]], Any] | None = DEFAULT_EMBEDDER,
                 reembed: bool = False,
                 durable: bool = False, verify: bool = False, auth_token: str | None = None,
                 database: str | None = None, auto_tune: bool = True, vfs: str | None = None):
        path = _check_path(path)
        if vfs is not None and not isinstance(vfs, str):
            raise TypeError(f"vfs must be the name of a SQLite VFS (a string), got "
                            f"{type(vfs).__name__}")
        self.vfs = vfs
        if not isinstance(auto_tune, bool):
            raise TypeError(f"auto_tune must be True or False, got {auto_tune!r}")
        if not callable(clock):
            raise TypeError("clock must be a callable returning unix seconds or a datetime")
        if config is not None and not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        self.path = path
        self.readonly = bool(readonly)
        self.durable = bool(durable)
        self.verify = bool(verify)
        self.config = config or ScoringConfig()
        self._clock = clock
        default = embedder is DEFAULT_EMBEDDER
        if default:
            embedder = None  # decided once the file is open (_default_embedder)
        if embedder is not None and not callable(embedder):
            raise TypeError("embedder must be a callable from a list of texts to a 2-D array")
        self._embedder = embedder
        self._builtin = False  # the library embeds for this store (embedders.Potion)
        self._dim = 0
        self._lock = threading.RLock()
        self._remote = False  # on a libSQL server (chosen at open: db.connect)
        self._release_wal = False  # close() takes away the -wal/-shm a reader made
        self._links_gen = 0  # bumped by every write of this connection to links
        self._prior_feats: frozenset[str] = frozenset()
        self._prior_version: Any = None
        #: reads what the core's write functions answer (a server's, checked)
        self._answers = answers.Reader(path)
        self._conn: schema.Connection
        self._connect(path, auth_token=auth_token, database=database,
                      embedder=None if _is_builtin(embedder) else embedder)
        if config is None:
            self._read_tuned()
        #: whether feedback runs tune() at the points of its schedule: open()'s
        #: auto_tune, never with an explicit config
        self.auto_tune = auto_tune and config is None
        if default:
            self._embedder = self._default_embedder()
        if self._embedder is not None:
            try:
                self._attach_embedder(reembed)
                self._index_vectors()
            except BaseException:
                self._conn.close()
                raise

    def _connect(self, path: str, *, auth_token: str | None, database: str | None,
                 embedder: Any) -> None:
        """Open the store's connection (a file, or a libSQL server: chosen once,
        by db.connect) and check the file; a WAL file on read-only media is
        read as immutable.  Closes what it opened on failure."""
        flags = apsw.SQLITE_OPEN_READONLY if self.readonly else (
            apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        flags |= apsw.SQLITE_OPEN_URI
        plain = path != ":memory:" and not path.startswith("file:") \
            and not connect.is_server(path)
        if self.readonly and plain and not os.path.exists(path):
            raise HeapmemError(f"cannot open {path!r} read-only: there is no such file "
                               "(readonly=True opens an existing store; without it, open() "
                               "creates one)")
        #: a reader that finds no -wal/-shm beside the file takes away those it makes
        self._release_wal = self.readonly and plain and not connect.wal_files(path)
        try:
            self._conn, self._remote = connect.connect(
                path, flags=flags, auth_token=auth_token, database=database,
                durable=self.durable, embedder=embedder, vfs=self.vfs)
        except apsw.CantOpenError as e:
            raise HeapmemError(f"cannot open {path!r}: {e}") from None
        try:
            self._open_file()
        except apsw.CantOpenError as e:
            self._conn.close()
            wal = path + "-wal"
            if not self.readonly or path.startswith("file:") or (
                    os.path.exists(wal) and os.path.getsize(wal) > 0):
                raise HeapmemError(f"cannot open {path!r}: {e}") from None
            # a WAL-mode file on read-only media (an app bundle, a read-only
            # mount): SQLite cannot make its -shm file there, and with no -wal
            # file nothing is pending, so read the file as immutable
            uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
            self._conn = connect.connect(uri, flags=flags, auth_token=None, database=None,
                                         durable=False, embedder=None, vfs=self.vfs)[0]
            try:
                self._open_file()
            except BaseException:
                self._conn.close()
                raise
        except BaseException:
            self._conn.close()
            raise

    def _read_tuned(self) -> None:
        """Take the weights tune() deployed in this store, if any, as self.config."""
        tuned = schema.meta_get(self._conn, schema.META_TUNED)
        if tuned is None:
            return
        try:
            self.config = ScoringConfig.from_dict(json.loads(tuned))
        except (ValueError, TypeError, RecursionError, AttributeError) as e:
            self._conn.close()
            raise CorruptStoreError(
                f"{self.path!r} holds tuned weights heapmem cannot read ({e}); open it with "
                "config=heapmem.ScoringConfig() to ignore them, then set_config(..., "
                "save=True) replaces them") from None

    def _index_vectors(self) -> None:
        """On a writable open, build the vector index of each namespace past
        the threshold that has none (a store written before schema 10), one
        transaction each, with a line on stderr when one may take a second
        (VECTOR_INDEX_PROGRESS memories) and when it took longer."""
        if self.readonly or self._remote or not self._builtin:
            return
        for ns, n in self.connection.execute(sql.VECTOR_INDEX_DUE).fetchall():
            if n >= VECTOR_INDEX_PROGRESS:
                print(f"heapmem: building the vector index of namespace {ns!r} ({n:,} "
                      "memories), once", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            with self._write() as w:
                w.execute(sql.VECTOR_INDEX, {"namespace": ns}).fetchall()
            took = time.monotonic() - t0
            if took > 1.0:
                print(f"heapmem: built the vector index of namespace {ns!r} in {took:.1f} s",
                      file=sys.stderr, flush=True)

    @_guarded
    def vector_index(self, namespace: str) -> list[dict[str, Any]]:
        """Build namespace's vector index again from scratch, now (seeded
        k-means: the same vectors give the same partitions), or drop it when
        the namespace holds fewer vectors than the threshold; what was built,
        as [{"namespace", "vectors", "partitions"}].  Adds keep an index
        current by themselves: this is for after a change of settings.  A
        store without the library's own embedder: HeapmemError."""
        namespace = check_namespace(namespace)
        with self._write() as w:
            out = w.execute(sql.VECTOR_INDEX, {"namespace": namespace}).fetchall()[0][0]
        return list(json.loads(out))

    @_guarded
    def vector_settings(self, **settings: Any) -> dict[str, Any]:
        """The vector index's settings (threshold: vectors a namespace holds
        before it is indexed; size: vectors a partition holds; probe: the
        share of an indexed namespace recall scans; seed: k-means' seed),
        changed and saved first when any are given.  Bad names or values:
        ValueError, nothing written."""
        if not settings:
            with self.snapshot() as c:
                return dict(json.loads(c.execute(sql.VECTOR_SETTINGS).fetchall()[0][0]))
        try:
            with self._write() as w:
                out = w.execute(sql.SET_VECTOR_SETTINGS,
                                {"settings": json.dumps(settings)}).fetchall()[0][0]
        except apsw.SQLError as e:  # the C core's one sentence
            raise ValueError(str(e).removeprefix("SQLError: ")) from None
        return dict(json.loads(out))

    # -- embeddings ----------------------------------------------------------------

    @property
    @_guarded
    @_locked
    def embedder_name(self) -> str | None:
        """The name of the embedder this store's vectors were made with."""
        return schema.meta_get(self.connection, schema.META_EMBEDDER)

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors of texts, checked."""
        try:
            out = self._embedder(list(texts))  # type: ignore[misc]
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

    def _default_embedder(self) -> Any:
        """The embedder open() uses when none is named: the library's own
        (potion-base-8M) for a store without vectors or with its vectors;
        none (lexical recall, as before) for a store holding another
        embedder's vectors, or a read-only store without vectors."""
        held = schema.meta_get(self.connection, schema.META_EMBEDDER)
        if held == schema.BUILTIN_EMBEDDER or (held is None and not self.readonly):
            return embedders.Potion()
        return None

    def _attach_embedder(self, reembed: bool) -> None:
        e = self._embedder
        name = getattr(e, "name", None) or getattr(e, "model_name", None)
        if not isinstance(name, str) or not name:
            raise TypeError("the embedder needs a .name (a string naming its model), so the "
                            "store can tell its vectors from another model's")
        c = self.connection
        held_name = schema.meta_get(c, schema.META_EMBEDDER)
        held_dim = schema.meta_get(c, schema.META_EMBEDDING_DIM)
        self._builtin = _is_builtin(e)
        if self._remote and not self._builtin:
            raise HeapmemError("open(embedder=...): on a server store only the library's own "
                               "embedder (potion-base-8M, the default) embeds")
        dim = schema.BUILTIN_DIM if self._builtin else self._embed(["heapmem"]).shape[1]
        same = held_name == name and int(held_dim if held_dim is not None else dim) == dim
        # the library's own vectors can be made again at any time, for nothing
        if held_name is not None and not same and not reembed and \
                held_name != schema.BUILTIN_EMBEDDER:
            raise HeapmemError(
                f"{self.path!r} holds vectors of embedder {held_name!r} (dimension "
                f"{held_dim}), not {name!r} (dimension {dim}); open it with "
                "that embedder, or pass reembed=True to embed every memory again with this one")
        self._dim = dim
        if self.readonly:
            if not same:
                raise ReadOnlyError("a read-only store cannot take a new embedder")
            return
        if same and self._builtin:
            # the schema's triggers gave every memory since its vector: nothing
            # to write (a replica opens with its primary down)
            return
        with self._write() as w:
            if not same:
                w.execute(sql.DELETE_VECTORS)
            schema.meta_set(w, schema.META_EMBEDDER, name)
            schema.meta_set(w, schema.META_EMBEDDING_DIM, str(dim))
            if self._builtin:  # the library embeds, inside SQL; and from now on, the triggers
                w.execute(sql.EMBED_UNEMBEDDED)
                return
            todo = w.execute(sql.UNEMBEDDED).fetchall()
            for i in range(0, len(todo), 256):
                chunk = todo[i:i + 256]
                vecs = self._embed([t for _, t in chunk])
                w.executemany(sql.INSERT_VECTOR,
                              [(seq, vecs[j].tobytes()) for j, (seq, _) in enumerate(chunk)])

    # -- connection and schema -------------------------------------------------

    def _open_file(self) -> None:
        schema.configure(self._conn)
        schema.open_file(self._conn, self.path, readonly=self.readonly, durable=self.durable,
                         verify=self.verify, rebuild_pool=learning.rebuild_pool)
        self._reread_pool(self._conn)

    def _reread_pool(self, c: schema.Connection) -> dict[str, Any]:
        """How the pooled layer is built, as the file says now (another
        process's set_pool changes it): read again by check() and by the
        pool property.  Recall and feedback read it in C, from the file, at
        every call (csrc/feedback.c)."""
        self._pool = schema.pool_settings(c)
        return self._pool

    @contextmanager
    def _write(self) -> Iterator[schema.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the write lock up front, so
        the busy timeout applies instead of a failed upgrade).  It is never
        left open: an error inside rolls it back, and so does a COMMIT that
        fails (a full disk, an I/O error), so the write lock is released and
        the next call starts clean."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path!r} was opened with readonly=True; writes are refused")
        with self._lock:
            c = self.connection
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                if not c.getautocommit():
                    try:
                        c.execute("ROLLBACK")
                    except apsw.Error:  # pragma: no cover - SQLite rolled back already
                        pass
                raise

    @contextmanager
    def transaction(self) -> Iterator[schema.Connection]:
        """A write transaction on the store's connection, for code that writes
        rows heapmem's own verbs do not (heapmem.io.transfer's import): all or
        nothing, holding the store's lock.  Learned links cached for recall are
        dropped afterwards, as the transaction may have changed them."""
        try:
            with self._write() as c:
                yield c
        finally:
            self._links_gen += 1

    @contextmanager
    def snapshot(self) -> Iterator[schema.Connection]:
        """A read transaction: one consistent view of the file while other
        processes keep writing, holding the store's lock."""
        with self._lock:
            c = self.connection
            c.execute("BEGIN")
            try:
                yield c
            finally:
                if not c.getautocommit():
                    c.execute("COMMIT")

    @_guarded
    @_locked
    def close(self) -> None:
        """Close the store (runs PRAGMA optimize first).  Safe to call twice.
        An auto-tune under way in steps (see finish_auto_tune) ends first, so
        that a connection that judged the point's recall and will judge no
        more (one opened per request) does not leave it to later feedback."""
        conn = getattr(self, "_conn", None)
        if conn is None:
            return
        try:
            if not self.readonly and not self._remote and self.auto_tune and \
                    schema.autotune_pending(conn) is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", AutoTuneWarning)  # (no one to tell)
                    self.finish_auto_tune()
        except (apsw.Error, HeapmemError):
            pass
        try:
            if not self.readonly:
                conn.execute(sql.OPTIMIZE)
        except apsw.Error:
            pass
        conn.close()
        self._conn = None  # type: ignore[assignment]  # closed: `connection` checks for None
        if self._release_wal:
            connect.release_wal_files(self.path)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def connection(self) -> schema.Connection:
        """The underlying apsw connection, with the heap_* functions loaded (on a
        libSQL server, heapmem.remote's connection, with the same methods)."""
        if self._conn is None:
            raise HeapmemError("this store is closed")
        return self._conn

    def now(self, now: Timestamp | None = None) -> float:
        """now as unix seconds, or the store's clock() when now is None."""
        if now is None:
            return seconds(self._clock(), "clock()")
        return seconds(now, "now")

    # -- facts ---------------------------------------------------------------------

    @property
    @_guarded
    @_locked
    def schema_version(self) -> int:
        return schema.user_version(self.connection)

    @property
    @_guarded
    @_locked
    def count(self) -> int:
        """Number of memories in all namespaces."""
        return self.connection.execute(sql.COUNT_MEMORIES).fetchall()[0][0]

    @property
    @_guarded
    @_locked
    def namespaces(self) -> list[str]:
        return [r[0] for r in self.connection.execute(sql.NAMESPACES)]

    # -- adding ------------------------------------------------------------------

    def _prepare(self, text: Any, *, kind: Any = DEFAULT_KIND, source: Any = None, id: Any = None,
                 namespace: Any = "default", created_at: Any = None, importance: Any = None,
                 key: Any = None, metadata: Any = None, thread: Any = None,
                 turn: Any = None, core: bool = False) -> dict[str, Any]:
        """One memory's fields as heap_add takes them.  core: the C core checks
        their values (heap_add, heap_add_many), so only what it cannot see is
        checked here: Python's types, lone surrogates, datetimes, the
        metadata's dict; else (update()'s UPDATE) every value here too."""
        if core:
            text = python_text(text, "text")
            kind = python_text(kind, "kind")
            source = python_text(source, "source", optional=True)
            id = python_text(id, "id", optional=True)
            namespace = python_text(namespace, "namespace")
            key = python_text(key, "key", optional=True)
        else:
            text = check_text(text)
            kind = check_name(kind, "kind")
            source = check_name(source, "source", optional=True)
            id = check_name(id, "id", optional=True)
            namespace = check_namespace(namespace)
            key = check_name(key, "key", optional=True)
        thread, turn = check_thread(thread, turn)
        created = seconds(created_at, "created_at") if created_at is not None else self.now(None)
        if importance is None:
            importance = KIND_IMPORTANCE.get(kind, 1.0)
        elif isinstance(importance, bool) or not isinstance(importance, (int, float)):
            raise TypeError(f"importance must be a number, got {type(importance).__name__}")
        try:
            importance = float(importance)
        except OverflowError:  # an int beyond float range
            importance = math.inf
        if not (math.isfinite(importance) and 0 < importance <= MAX_IMPORTANCE):
            raise ValueError(f"importance must be a number in (0, {MAX_IMPORTANCE:g}], "
                             f"got {importance!r}")
        meta = None
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
            try:
                meta = json.dumps(dict(metadata), allow_nan=False, ensure_ascii=False,
                                  sort_keys=True)
                meta.encode("utf-8")
            except (TypeError, ValueError, UnicodeEncodeError) as e:
                raise ValueError(f"metadata must be JSON-serialisable (no NaN): {e}") from None
            except RecursionError:
                raise ValueError("metadata is nested too deeply to store as JSON") from None
        return {"text": text, "kind": kind, "source": source, "id": id, "namespace": namespace,
                "created_at": created, "importance": importance, "key": key, "metadata": meta,
                "thread": thread, "turn": turn}

    def _insert(self, c: schema.Connection, rows: list[dict[str, Any]],
                copy: bool = False) -> list[Item]:
        """Add rows (checked by _prepare) through the C core's batch form of
        heap_add (heap_add_many, csrc/store.c): the same checks, ids, same-text
        rule and features as add(), the FTS index taken once at the end; at
        most MAX_IDS rows a call, so a longer batch is several calls in this
        one transaction.  Returns the Items in the rows' order: a row that is
        a memory the namespace held already (or an earlier row's) is that
        memory, as it is."""
        last = c.execute(sql.LAST_SEQ).fetchall()[0][0]
        step = int(native.LIMITS["MAX_IDS"])
        ids: list[str] = []
        for at in range(0, len(rows), step):
            # each row as heap_add's arguments, in its order
            items = json.dumps([_ADD_ARGS(r) for r in rows[at:at + step]], ensure_ascii=False,
                               separators=(",", ":"), check_circular=False)
            try:
                out = c.execute(sql.ADD_MANY, {"items": items, "copy": int(copy)}).fetchall()
            except apsw.ConstraintError as e:  # an id given that a memory has
                raise DuplicateIdError(_item_sentence(e, at)) from None
            except apsw.SQLError as e:  # the C core's sentence: a bad argument
                raise ValueError("add_many: " + _item_sentence(e, at)) from None
            ids += json.loads(out[0][0])
        # the rows the batch made, as they were given (with the core's features);
        # a row that is a memory held already is that memory, as it is
        made = {i: (seq, f, t) for i, seq, f, t in c.execute(sql.ADDED_SINCE, {"seq": last})}
        by_id: dict[str, Item] = {}
        for r, i in zip(rows, ids):
            if i in by_id:
                continue
            if i in made:
                by_id[i] = Item(i, r["text"], r["namespace"], r["kind"], r["source"], r["key"],
                                r["importance"], r["created_at"], None,
                                json.loads(r["metadata"]) if r["metadata"] else None,
                                tuple(made[i][1].split()), r["thread"], made[i][2])
            else:
                by_id[i] = _item(c.execute(sql.GET_MEMORY, {"id": i}).fetchall()[0])
        if self._embedder is not None and not self._builtin:
            new = sorted((seq, by_id[i].text) for i, (seq, _, _) in made.items())
            vecs = self._embed([t for _, t in new])
            c.executemany(sql.INSERT_VECTOR,
                          [(seq, vecs[j].tobytes()) for j, (seq, _) in enumerate(new)])
        return [by_id[i] for i in ids]

    @_guarded
    def add(self, text: str, *, kind: str = DEFAULT_KIND, source: str | None = None,
            id: str | None = None, namespace: str = "default",
            created_at: Timestamp | None = None, importance: float | None = None,
            key: str | None = None, metadata: Mapping[str, Any] | None = None,
            copy: bool = False, thread: str | None = None, turn: int | None = None) -> Item:
        """Store one memory and return it (with its id).

        kind sets the default importance (instruction 1.5, preference 1.3,
        summary 1.2, fact 1.0, note 1.0, episode 0.8, tool_result 0.6, other
        kinds 1.0); importance, if given, must lie in (0, 10].  A memory with a
        key supersedes older memories of the namespace with the same key.
        Adding, without an id, a text the namespace holds already (with the
        same key) stores nothing and returns that memory, as it is;
        copy=True stores a second one.  thread names the conversation (a chat,
        a session) this memory is a turn of, and turn its place there (a whole
        number; without one, the thread's next turn): recall then lifts a
        memory whose neighbours in the thread match the question, and brings
        in the neighbours of its best matches (ScoringConfig.w_thread).  A
        thread's turn is never taken for an earlier memory of the same text.
        Bad input raises ValueError/TypeError;
        a duplicate id raises DuplicateIdError.  Nothing is written on error.
        """
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be True or False, got {type(copy).__name__}")
        row = self._prepare(text, kind=kind, source=source, id=id, namespace=namespace,
                            created_at=created_at, importance=importance, key=key,
                            metadata=metadata, thread=thread, turn=turn, core=True)
        with self._write() as c:
            # the C core adds it (heap_add, csrc/store.c): its seq and id, its
            # shape features, namespace tag and token count, the FTS index
            if row["id"] is None and not copy and row["thread"] is None:
                # heap_add's own rule, asked first
                same = _same_text(c, row)
                if same is not None:  # the memory that holds this text already
                    return same
            try:
                added = c.execute(sql.ADD, {**row, "copy": 1}).fetchall()
            except apsw.ConstraintError:
                raise DuplicateIdError(f"a memory with id {row['id']!r} already exists; "
                                       "it was not changed") from None
            except apsw.SQLError as e:  # the C core's sentence: a bad argument
                raise ValueError(_c_sentence(e)) from None
            mid = self._answers.added(added)[0]
            mid, seq, feats, turn = self._answers.added(added, c.execute(sql.ADDED, {"id": mid})
                                                        .fetchall())
            if self._embedder is not None and not self._builtin:
                c.execute(sql.INSERT_VECTOR, (seq, self._embed([row["text"]])[0].tobytes()))
        return Item(mid, row["text"], row["namespace"], row["kind"], row["source"], row["key"],
                    row["importance"], row["created_at"], None,
                    json.loads(row["metadata"]) if row["metadata"] else None,
                    tuple(feats.split()), row["thread"], turn)

    @_guarded
    def add_many(self, items: Iterable[Mapping[str, Any]], *, copy: bool = False) -> list[Item]:
        """Store many memories in one transaction: all or none.  Each item is a
        dict with add()'s arguments ("text" required); one Item comes back for
        each, in order.  As add(), an item without an id whose text (and key)
        its namespace holds, or an earlier item of the batch holds, is that
        memory unless copy=True."""
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be True or False, got {type(copy).__name__}")
        if isinstance(items, (str, bytes, Mapping)):
            raise TypeError("add_many takes a list of dicts, one per memory")
        rows = []
        for n, it in enumerate(items):
            if not isinstance(it, Mapping):
                raise TypeError(f"add_many: item {n} must be a dict, got {type(it).__name__}")
            unknown = set(it) - {"text", "kind", "source", "id", "namespace", "created_at",
                                 "importance", "key", "metadata", "thread", "turn"}
            if unknown:
                raise ValueError(f"add_many: item {n} has unknown field(s) {sorted(unknown)}")
            if "text" not in it:
                raise ValueError(f"add_many: item {n} has no text")
            try:
                rows.append(self._prepare(**it, core=True))
            except (TypeError, ValueError) as e:
                raise type(e)(f"add_many: item {n}: {e}") from None
        if not rows:
            return []
        with self._write() as c:
            return self._insert(c, rows, copy)

    @_guarded
    @_locked
    def get(self, id: str) -> Item | None:
        """The memory with this id, or None."""
        check_name(id, "id")
        rows = self.connection.execute(sql.GET_MEMORY, {"id": id}).fetchall()
        return _item(rows[0]) if rows else None

    @_guarded
    def update(self, id: str, *, text: Any = _KEEP, kind: Any = _KEEP, source: Any = _KEEP,
               key: Any = _KEEP, importance: Any = _KEEP, metadata: Any = _KEEP) -> Item:
        """Change a memory in place and return it.  Only the fields given
        change (source=None, key=None or metadata=None clear them; importance
        None goes back to the kind's default).  Its id, namespace, creation
        time, thread and turn, recall log and what it taught the links stay.  Its shape
        features, FTS index entry, namespace statistics and (with an embedder)
        its vector follow the new text in the same transaction.  Unknown id:
        ValueError; bad values: ValueError/TypeError; nothing is written."""
        check_name(id, "id")
        with self._write() as c:
            rows = c.execute(sql.GET_MEMORY, {"id": id}).fetchall()
            if not rows:
                raise ValueError(f"unknown memory id {id!r}; nothing was updated")
            old = _item(rows[0])
            new_kind = old.kind if kind is _KEEP else kind
            imp = importance
            if imp is _KEEP:
                # a memory's default importance follows its kind
                imp = None if kind is not _KEEP and old.importance == KIND_IMPORTANCE.get(
                    old.kind, 1.0) else old.importance
            row = self._prepare(
                old.text if text is _KEEP else text, kind=new_kind,
                source=old.source if source is _KEEP else source, id=id,
                namespace=old.namespace, created_at=old.created_at, importance=imp,
                key=old.key if key is _KEEP else key,
                metadata=old.metadata if metadata is _KEEP else metadata)
            seq, feats = c.execute(sql.UPDATE_MEMORY, row).fetchall()[0]
            if self._embedder is not None and not self._builtin and row["text"] != old.text:
                c.execute(sql.REPLACE_VECTOR, {"seq": seq,
                                               "v": self._embed([row["text"]])[0].tobytes()})
            return Item(id, row["text"], old.namespace, row["kind"], row["source"], row["key"],
                        row["importance"], old.created_at, old.last_used_at,
                        json.loads(row["metadata"]) if row["metadata"] else None,
                        tuple(feats.split()), old.thread, old.turn)

    @_guarded
    @_locked
    def list(self, namespace: str = "default", *, limit: int | None = None,
             offset: int = 0) -> list[Item]:
        """The namespace's memories, newest first (by creation time): at most
        limit of them (all when None), after skipping offset."""
        namespace = check_namespace(namespace)
        for name, v in (("limit", limit), ("offset", offset)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
            if v is not None and not 0 <= v < 1 << 63:
                raise ValueError(f"{name} must be an integer >= 0 and below 2**63, got {v!r}")
        return [_item(r) for r in self.connection.execute(sql.LIST_MEMORIES, {
            "namespace": namespace, "limit": -1 if limit is None else limit, "offset": offset})]

    @_guarded
    @_locked
    def stats(self) -> Stats:
        """What the store holds: memories, recalls, judgements and learned
        links, in all and per namespace."""
        with self.snapshot() as c:
            per_ns = c.execute(sql.STATS_BY_NAMESPACE).fetchall()
            recalls = dict(c.execute(sql.RECALLS_BY_NAMESPACE).fetchall())
            ev = {ns: (u, t) for ns, u, t in c.execute(sql.EVENTS_BY_NAMESPACE)}
            nlinks = len(learning.pooled_rows(c))
            nrows = c.execute(sql.COUNT_LINKS).fetchall()[0][0] + nlinks - \
                c.execute(sql.COUNT_POOLED_LINKS).fetchall()[0][0]
            prior = schema.prior(c)
            version = schema.user_version(c)
            in_place, reader = schema.erases_in_place(c), schema.oldest_reader(c)
        by_ns = tuple(NamespaceStats(namespace=ns, memories=n, recalls=recalls.get(ns, 0),
                                     events=ev.get(ns, (0, 0))[1], last_added=last,
                                     last_used=lu)
                      for ns, n, last, lu in per_ns)
        return Stats(schema=version, memories=sum(s.memories for s in by_ns),
                     recalls=sum(recalls.values()), events=sum(t for _, t in ev.values()),
                     used=sum(u for u, _ in ev.values()), pooled_features=nlinks, link_rows=nrows,
                     prior_links=len(prior), by_namespace=by_ns, erases_in_place=in_place,
                     oldest_reader=reader)

    # -- recall --------------------------------------------------------------------

    @_guarded
    @_locked
    def recall(self, query: str, *, k: int = 5,
               namespace: str | builtins.list[str] | tuple[str, ...] = "default",
               now: Timestamp | None = None, config: ScoringConfig | None = None,
               track: bool = True, kinds: str | Iterable[str] | None = None,
               since: Timestamp | None = None, until: Timestamp | None = None) -> Recall:
        """The k memories of the namespace most worth putting in the prompt for
        this query.

        Candidates are the FTS5 BM25 top `config.candidates` for the query's
        terms (stop words dropped; the query is always treated as text, never
        as FTS5 syntax); they are re-ranked by relevance x recency x importance
        x learned usefulness x rules in C.  A query with no searchable term
        ("" or only stop words) returns an empty Recall without scanning.
        track=True records the recall so feedback() can refer to it by
        recall_id; track=False records nothing.  A recall that showed a
        memory another connection forgot meanwhile (after this recall read
        it) comes back untracked (recall_id None): the log never holds a
        forgotten id, nor the query that found it.  kinds (a kind or a list of
        them), since and until (memories created at or after since, and before
        until) filter inside the candidate searches: the BM25 and vector top
        N are the top N of the memories they let through.  A list of
        namespaces ranks across them on one scale (_recall_across).
        """
        filters = check_filters(kinds, since, until)
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an integer, got {type(k).__name__}")
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be from 1 to {MAX_K}, got {k}")
        spaces = None if isinstance(namespace, str) else check_namespaces(namespace)
        namespace = check_namespace(namespace) if spaces is None else spaces[0]
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        t = self.now(now)
        if "\x00" in query:
            query = query.replace("\x00", " ")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("query must be valid UTF-8 (it holds a lone surrogate)") from None
        qt = native.qtype(query)
        match = native.match(query, namespace)
        c = self.connection
        if self._embedder is None and config.lexical_weight < 1:
            # opened with embedder=None: lexical recall, even where the library
            # could embed the question itself
            config = config.replace(lexical_weight=1.0)
        hybrid = self._embedder is not None and config.lexical_weight < 1 and query.strip()
        if match is None and not hybrid:
            return Recall(query, spaces or namespace, qt, [], None, config, b"", parts=None
                          if spaces is None else {})
        # one statement, one snapshot, on a file or on a server (heap_recall in
        # C, which embeds the question itself for the library's own embedder)
        # tracked: heap_recall explores (config.explore) as for a recall it logs
        params = {"question": query, "namespace": namespace, "now": t, "k": k,
                  "config": config.to_sql(), "tracked": int(track and not self.readonly),
                  "qvec": self._embed([query])[0].tobytes() if hybrid and not self._builtin
                  else None, **filters}
        if spaces is not None:
            return self._recall_across(query, qt, spaces, params, config, track)
        rows = c.execute(sql.RECALL, params).fetchall()
        with _from_file("recall: reading what the memories show"):
            results, rest, links = recalled(rows)
        recall_id = None
        if track and results and not self.readonly:
            with self._write() as w:
                # no row: a memory it showed was forgotten since (not tracked)
                logged = w.execute(sql.LOG_RECALL,
                                   log_params(namespace, query, qt, t, results, rest)).fetchall()
                recall_id = logged[0][0] if logged else None
        # (on a server, explain() does not mark a prior's lift: that would be
        # one more round trip a recall)
        priors_in = frozenset() if self._remote else \
            self.prior_features
        return Recall(query, namespace, qt, results, recall_id, config, links, priors_in)

    def _recall_across(self, query: str, qt: str, spaces: tuple[str, ...],
                       params: dict[str, Any], config: ScoringConfig, track: bool) -> Recall:
        """recall() across namespaces: one ranking in C, all of them on one
        scale (BM25 over the best BM25 among them); the Recall's parts hold
        each namespace's results and recall_id (a tracked part is logged as a
        recall of its namespace), and each Result's namespace says whose it
        is."""
        params = {**params, "namespace": None, "namespaces": json.dumps(spaces)}
        rows = self.connection.execute(sql.RECALL_ACROSS, params).fetchall()
        with _from_file("recall: reading what the memories show"):
            read = recalled_across(rows)
        priors_in = frozenset() if self._remote else self.prior_features
        ids: dict[str, int | None] = dict.fromkeys(read)
        if track and read and not self.readonly:
            with self._write() as w:  # each part a recall of its namespace, in one write
                for ns, (results, rest, _) in read.items():
                    logged = w.execute(sql.LOG_RECALL, log_params(ns, query, qt, params["now"],
                                                                  results, rest)).fetchall()
                    ids[ns] = logged[0][0] if logged else None
        parts = {ns: Recall(query, ns, qt, results, ids[ns], config, links, priors_in)
                 for ns, (results, _, links) in read.items()}
        order = {ns: iter(part) for ns, part in parts.items()}
        ranked = [next(order[row[0]]) for row in rows]
        return Recall(query, spaces, qt, ranked, None, config, b"", priors_in, parts=parts)

    def recall_sql(self, query: str, *, k: int = 5, namespace: str = "default",
                   now: Timestamp | None = None, config: ScoringConfig | None = None,
                   kinds: str | Iterable[str] | None = None, since: Timestamp | None = None,
                   until: Timestamp | None = None) -> tuple[str, dict[str, Any]]:
        """The one SQL statement that ranks like recall(), and its parameters,
        for any SQLite client with the library loaded: run it as
        `conn.execute(sql, params)`.  It returns id, text, score (heap_recall,
        untracked; add more of heap_recall's columns as you like).  It is the
        lexical recall: on a store opened with an embedder, recall() also
        passes the question's vector (heap_recall's qvec).  kinds, since and
        until filter as recall()'s do."""
        config = config or self.config
        return sql.RECALL_SQL, {"question": query, "namespace": check_namespace(namespace),
                                "now": self.now(now), "k": k, "config": config.to_sql(),
                                **check_filters(kinds, since, until)}

    # -- feedback ----------------------------------------------------------------

    def _judge(self, recall_id: Any, used: Any, ignored: Any, rest_ignored: bool,
               now: Timestamp | None, answer: str | None = None,
               namespace: str | None = None) -> Feedback:
        """One feedback: the arguments checked here (the TypeErrors a Python
        caller expects), the rest in C (heap_feedback, heap_answer in
        csrc/feedback.c: the recall, the events, the fold, the pooled layer,
        in one savepoint), inside one write transaction."""
        used_ids = check_ids(used, "used")
        ignored_ids = check_ids(ignored, "ignored") if ignored is not None else []
        both = set(used_ids) & set(ignored_ids)
        if both:
            raise ValueError(f"ids both used and ignored: {sorted(both)}")
        t = self.now(now)
        if namespace is not None:
            namespace = check_namespace(namespace)
        recall_id = check_recall_id(recall_id)
        config = self.config.to_sql()
        with self._write() as c:
            try:
                autotune = 1 if self.auto_tune else 0
                if answer is not None:
                    row = c.execute(sql.ANSWER, {"rid": recall_id, "answer": answer, "now": t,
                                                 "namespace": namespace, "config": config,
                                                 "tune": autotune})
                else:
                    row = c.execute(sql.FEEDBACK, {
                        "rid": recall_id, "used": json.dumps(used_ids),
                        "ignored": None if rest_ignored else json.dumps(ignored_ids),
                        "now": t, "namespace": namespace, "config": config,
                        "tune": autotune})
                rows = row.fetchall()
            except apsw.SQLError as e:  # the C core's sentence: a bad argument
                raise ValueError(_c_sentence(e)) from None
            finally:
                self._links_gen += 1
            # read inside the transaction: an answer that is not the core's rolls it back
            function = "heap_feedback" if answer is None else "heap_answer"
            out = self._answers.feedback(rows, function)
            judgements: tuple[Judgement, ...] = ()
            if out["attribution"] is not None:
                shown = self._answers.shown(
                    c.execute(sql.RECALL_SHOWN, {"id": out["recall_id"]}).fetchall(), function)
                judgements = self._judgements(
                    self._answers.attribution(out["attribution"], len(shown), function), shown)
        ran = out["auto_tune"]
        if ran is None and out["claimed"] and self._remote:
            # a server's connections are not this store's to step a tune with
            # (csrc/tune.c): the tune this feedback claimed ends now
            ran = tune.finish(self)
        return Feedback(out["recall_id"], tuple(out["used"]), tuple(out["ignored"]),
                        out["links_updated"], judgements, self._auto_tune(ran) if ran else None)

    def _auto_tune(self, ran: dict[str, Any]) -> TuneReport:
        """The report of the auto-tune heap_feedback ran (csrc/tune.c: it kept the count
        of judged recalls in the feedback's own savepoint, claimed the schedule's point
        there, so that two processes never tune for one, and tuned after it in a
        savepoint of its own: seeded, against the default weight, 99% split among the
        grid's other weights, on the newest 2,000 judged recalls at most).  A deployed
        weight is in force here from now on.  A failed tune never undid the feedback:
        it becomes an AutoTuneWarning and the report's reason, the weights unchanged;
        the point stays claimed (the next point tries again, or call tune())."""
        if "error" in ran:
            what = " ".join(str(ran["error"]).split())
            warnings.warn(f"heapmem: auto-tune at {ran['point']} judged recalls failed ({what}); "
                          "the feedback was saved and the weights did not change; call tune() "
                          "to retry", AutoTuneWarning, stacklevel=4)
            return tune.not_run(f"auto-tune failed: {what}", 0, float(self.config.w_usefulness))
        report = tune.from_json(ran["report"])
        if report.deployed:
            self.config = self.config.replace(w_usefulness=report.after)
        return report

    @staticmethod
    def _judgements(rows: builtins.list, shown: builtins.list[str]) -> tuple[Judgement, ...]:
        """Each shown memory's judgement from heap_attribute's verdicts."""
        used = [i for i, r in enumerate(rows) if r["verdict"] == 1]
        close = [shown[i] for i, r in enumerate(rows) if r["candidate"]]  # reaching the bar
        out = []
        for mid, r in zip(shown, rows):
            verdict, share, words, dated = r["verdict"], r["share"], r["matched"], r["dated"]
            carried = ", ".join(words) if words else ""
            what = f"carries {share:.0%} of the answer's evidence" + (
                f" ({carried})" if carried else "") + (
                "; its time matches the answer's date" if dated else "")
            if verdict == 1:
                v, why = "used", what
            elif verdict == 0:
                v, why = "ignored", "carries none of the answer's words, nor its date"
            else:
                v = "unjudged"
                if not r["present"]:
                    why = "forgotten since the recall"
                elif used:
                    why = what + ": neither clearly used nor clearly unused"
                elif len(close) > 1:
                    why = what + f": a tie between {', '.join(close)}, so nothing was judged"
                else:
                    why = what + ": no memory carries enough of the answer's evidence to " \
                                 "count as used, so nothing was judged"
            out.append(Judgement(mid, v, float(share), tuple(words), bool(dated), why))
        return tuple(out)

    @_guarded
    def feedback(self, used: Iterable[str] = (), *, recall_id: int | None = None,
                 ignored: Iterable[str] | None = None, answer: str | None = None,
                 now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Tell heapmem which memories of a recall the answer used.

        Every other memory the recall showed counts as ignored, unless
        `ignored` lists the ignored ones explicitly (the rest then stay
        unjudged).  A used memory adds one success to the link of each of its
        active features (shape features, crossed with the question type), in
        its namespace and in the pooled layer; an ignored one adds one
        failure.  (With model=0, the reference design's learner, a use is
        instead split among the features in proportion to their current
        strength.)  Each shown memory can be judged once: judging it again
        raises ValueError.  Without recall_id, the newest recall that showed
        all the given ids is meant.  Unknown ids or recall, ids the recall did
        not show, or a bare string for `used`: ValueError/TypeError, and
        nothing is written.

        answer="...": heapmem judges from the answer text itself, against
        exactly the memories the recall showed (recall_id required).  A shown
        memory that carries the answer's distinctive content (its words, by
        their weight among the shown memories, numbers and names included, and
        its date matched against when the memory was stated) counts as used;
        those that carry none of it are ignored; the rest stay unjudged.  The
        question's own words never count.  When the answer singles out no
        memory (no overlap, or a tie) nothing is judged and nothing written.
        The result's `judgements` say, for each shown memory, what was decided
        and why.  Giving answer= with used= or ignored= is a ValueError.

        namespace="...": the recall must be one of that namespace's (checked
        in the same transaction as the write; a door serving one tenant
        passes it), and without recall_id only its recalls are looked at:
        another namespace's recall_id is unknown here, and nothing is written.

        Auto-tune (open()'s auto_tune, on by default unless config= was given):
        the feedback that brings the store's judged recalls to 30, 60, 120, ...
        runs tune() after it, in the same transaction (the C core's
        heap_feedback does both), and the result's `auto_tune` is its report
        (None when it did not run).  If tune fails, the feedback stays saved:
        an AutoTuneWarning says so and the report's reason says why.
        mark_used and mark_ignored do the same.
        """
        if answer is not None:
            answer = check_answer(answer)
            if ignored is not None or not isinstance(used, (list, tuple, set)) or used:
                raise ValueError("give either answer=... or used=/ignored=, not both")
            if recall_id is None:
                raise ValueError("feedback(answer=...) needs the recall_id of the recall the "
                                 "answer was written from")
            return self._judge(recall_id, [], [], False, now, answer, namespace)
        return self._judge(recall_id, used, ignored, ignored is None, now, None, namespace)

    @_guarded
    def mark_used(self, ids: Iterable[str], *, recall_id: int | None = None,
                  now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Judge only these memories of a recall as used (others stay
        unjudged); namespace as feedback() takes it."""
        return self._judge(recall_id, ids, [], False, now, None, namespace)

    @_guarded
    def mark_ignored(self, ids: Iterable[str], *, recall_id: int | None = None,
                     now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Judge only these memories of a recall as ignored."""
        return self._judge(recall_id, [], ids, False, now, None, namespace)

    @_guarded
    @_locked
    def links(self, namespace: str = POOLED, *,
              config: ScoringConfig | None = None) -> builtins.list[LinkRow]:
        """The learned links as `namespace` sees them ('*': the pooled layer),
        strongest first: feature, strength (posterior mean), n (events), and
        the alpha and beta behind the strength."""
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        if namespace != POOLED:
            namespace = check_namespace(namespace)
        out: list[tuple[str, float, float, int, int]] = []
        with self.snapshot() as c:
            pooled = learning.pooled_rows(c)
            own = {} if namespace == POOLED else {
                r[0]: r[1:] for r in c.execute(sql.OWN_LINKS, {"namespace": namespace})}
        if namespace == POOLED:
            out = [(f, a, b, n, k) for f, _, a, b, n, k, _, _ in pooled]
        else:
            with _from_file("reading the learned links"):
                # each pooled link less the namespace's own share of it, as recall views it
                for f, _, pa, pb, _, support, _, _ in pooled:
                    oa, ob, sa, sb, n = own.get(f, (0.0, 0.0, 0.0, 0.0, 0))
                    a, b = native.link_view(oa, ob, oa + max(pa - sa, 0), ob + max(pb - sb, 0),
                                             config.pooled_pseudocount)
                    out.append((f, a, b, n, support - (f in own)))
        pa, pb = config.prior_alpha, config.prior_beta
        with _from_file("reading the learned links"):
            res = [LinkRow(f, (pa + a) / (pa + pb + a + b), n, a, b, k) for f, a, b, n, k in out]
            res.sort(key=lambda r: (-r.strength, r.feature))
        return res

    @property
    @_locked
    def prior_features(self) -> frozenset[str]:
        """The features whose pooled links a merged prior adds to (what
        explain() marks), read again once the file's links change."""
        c = self.connection
        version = (c.execute(sql.DATA_VERSION).fetchall()[0][0], self._links_gen)
        if version != self._prior_version:
            with _from_file("reading the priors"):
                self._prior_feats = frozenset(schema.prior(c))
            self._prior_version = version
        return self._prior_feats

    @_guarded
    @_locked
    def priors(self) -> builtins.list[Prior]:
        """The links-only priors merged into this store (heapmem.io.transfer's
        import of a links file), oldest first: each one's digest, file name,
        when it was merged, and how much evidence it adds."""
        with _from_file("reading the priors"):
            recs = priors.records(self.connection)
            out = [Prior(d, r.get("name"), r.get("merged_at"), len(r["links"]),
                         float(sum(a + b for a, b, _ in r["links"].values())))
                   for d, r in recs.items()]
        out.sort(key=lambda p: (p.merged_at is not None, p.merged_at or 0.0, p.digest))
        return out

    @_guarded
    def remove_prior(self, digest: str) -> Prior:
        """Take a merged prior out again: its evidence leaves the pooled
        layer, so recall ranks exactly as if it had never been merged, and
        its file may be merged again later.  digest is the one priors()
        lists (or its first 8 or more characters).  Unknown digest:
        ValueError, and nothing changes."""
        if not isinstance(digest, str):
            raise TypeError(f"digest must be a string, got {type(digest).__name__}")
        before = {p.digest: p for p in self.priors()}
        with self.transaction() as c:
            d = priors.find(c, digest)  # ValueError: nothing changes
            with _from_file("removing a prior"):
                _, rec = priors.remove(c, d)
                learning.rebuild_pool(c, features=list(rec["links"]))
        return before[d]

    def explain_usefulness(self, namespace: str = POOLED, *,
                           config: ScoringConfig | None = None) -> builtins.list[LinkRow]:
        """links() under its older name."""
        return self.links(namespace, config=config)

    # -- forgetting ----------------------------------------------------------------

    @_guarded
    def forget(self, ids: Iterable[str] | None = None, *, namespace: str | None = None) -> int:
        """Erase memories: the given ids, or a whole namespace.  Their text
        leaves the table and the FTS index at once (FTS5's secure-delete takes
        their terms out of the index pages that hold them, and PRAGMA
        secure_delete overwrites freed pages; see set_portable for old SQLite
        readers), and recall log entries that showed them (or, for a namespace,
        all its recalls) are dropped with their query text.  What they taught
        the learned links stays: links hold feature statistics only, never text
        or ids.  Unknown ids raise ValueError and nothing is erased.  Returns the
        number of memories erased."""
        if (ids is None) == (namespace is None):
            raise ValueError("forget needs either ids or namespace=..., not both")
        if namespace is not None:
            namespace = check_namespace(namespace)
        else:
            id_list = check_ids(ids, "ids")
            for i in id_list:
                check_name(i, "id")
            if not id_list:
                return 0
        with self._write() as c:
            # the C core erases (heap_forget, csrc/store.c): the memories, the
            # recalls that showed them, their FTS terms (in place with FTS5's
            # secure-delete, else by merging the index), and it raises the
            # high-water marks so that no id is given out again
            try:
                if namespace is not None:
                    rows = c.execute(sql.FORGET_NAMESPACE, {"namespace": namespace}).fetchall()
                else:
                    rows = c.execute(sql.FORGET, {"ids": json.dumps(id_list)}).fetchall()
            except apsw.SQLError as e:  # the C core's sentence: a bad argument
                raise ValueError(_c_sentence(e)) from None
            n = self._answers.count(rows, "heap_forget")
        # the WAL still holds the old pages: copy the erased ones into the file
        # and empty the WAL.  A TRUNCATE checkpoint stalls every writer while it
        # waits for readers, so it waits 0.25 s at most; if other connections
        # are busy then, the old pages stay in the -wal file until a later
        # complete checkpoint (at the latest when the last connection closes)
        with self._lock:
            c = self.connection
            schema.wait_for_lock(c, 250)
            try:
                c.execute(sql.CHECKPOINT).fetchall()
            except apsw.BusyError:
                pass
            finally:
                schema.wait_for_lock(c, 10_000)
        return n

    def set_portable(self, portable: bool = True) -> None:
        """Whether the file must stay readable by SQLite 3.37 to 3.41.

        By default forget() and update() erase old text from the FTS index in
        place (FTS5's secure-delete): a forget costs what the memory costs.
        After the first such erasure, SQLite before 3.42 (2023-05) can no
        longer query the index (Debian 12's sqlite3 is 3.40).
        set_portable(True) turns secure-delete off and, if needed, rebuilds
        the index in the old format, once: from then on each forget merges
        the whole index instead (a quarter of a second at 100k memories), and
        old readers keep working.  set_portable(False) goes back.
        stats().oldest_reader says which SQLite the file needs now."""
        if not isinstance(portable, bool):
            raise TypeError("portable must be True or False")
        with self._write() as c:
            schema.set_portable(c, portable)

    # -- tuning --------------------------------------------------------------------

    @_guarded
    def tune(self, *, deploy: bool = True, seed: int = 0) -> TuneReport:
        """Replay the logged recalls under other usefulness weights with
        grouped cross-validation, and deploy the best one only if it is
        significantly better than the weight in force (saved in the store,
        used by every later open without an explicit config).  Returns what it
        measured and why it did or did not deploy.  Feedback runs it by itself
        at 30, 60, 120, ... judged recalls unless auto-tune is off (open()'s
        auto_tune).  It is the C core's heap_tune (`SELECT heap_tune()` from
        any SQLite client does the same).  On a read-only store deploy=True
        raises ReadOnlyError; deploy=False measures only."""
        with self._lock:  # one view of the logs while it replays them
            return tune.tune(self, deploy=deploy, seed=seed)

    @property
    @_guarded
    @_locked
    def pending_tune(self) -> int | None:
        """The point of auto-tune's schedule (judged recalls) whose tune is
        under way in steps, or None (see finish_auto_tune)."""
        pending = schema.autotune_pending(self.connection)
        return None if pending is None else int(pending["point"])

    @_guarded
    def finish_auto_tune(self) -> TuneReport | None:
        """End the auto-tune under way now.  A feedback that claims a point of
        auto-tune's schedule starts a tune that runs in steps, one after each
        feedback with auto-tune on (from any connection), so that no feedback
        waits for a whole tune; the feedback whose step ends it returns the
        report.  This runs its remaining work in one call (from the start of
        the log it pinned), deploys as auto-tune does, and returns the report,
        or None when no tune is under way.  The CLI calls it after a feedback
        that claimed a point.  On a read-only store: ReadOnlyError."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path!r} was opened with readonly=True; writes are refused")
        ran = tune.finish(self)
        return self._auto_tune(ran) if ran else None

    @_guarded
    def set_config(self, config: ScoringConfig | None = None, *, save: bool = False,
                   **changes: Any) -> ScoringConfig:
        """Change the config recall and feedback use: a whole ScoringConfig,
        or some of its fields by name (set_config(w_usefulness=0.5)).
        save=True also keeps it in the store, for every later open without an
        explicit config (as tune() does); auto-tune may then change its
        w_usefulness at its next point (open with auto_tune=False, or pass
        config=, to keep it).  Returns the config now in force.
        Unknown fields or bad values raise ValueError/TypeError and change
        nothing."""
        if config is not None and not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        new = (config or self.config).replace(**changes) if changes else (config or self.config)
        if save:
            with self._write() as c:
                c.execute(sql.SAVE_CONFIG, {"config": new.to_sql()})
        self.config = new
        return new

    @property
    @_locked
    def pool(self) -> dict[str, Any]:
        """How the pooled layer is built: cap (the most observations of a link
        one namespace weighs in it), min (namespaces that must back a link
        before any is pooled), trim (namespaces left out at each end), as the
        file says now (on a server: as of this connection's last feedback,
        check or set_pool, which re-read it, so a recall costs no extra round
        trip)."""
        c = self.connection
        if not self._remote:
            self._reread_pool(c)
        return dict(self._pool)

    @_guarded
    def set_pool(self, *, cap: float | None = None, min_namespaces: int | None = None,
                 trim: int | None = None) -> dict[str, Any]:
        """Change how the pooled layer is built and work it out again, in one
        transaction; returns the settings now in force.  A lower cap or a
        larger trim leaves any one tenant less say in what others borrow, at
        some cost to honest transfer (bench/RESULTS.md measures both).
        Bad values raise ValueError and change nothing."""
        new = dict(self.pool)
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not (
                    math.isfinite(cap) and cap > 0):
                raise ValueError(f"cap must be a positive number, got {cap!r}")
            new["cap"] = float(cap)
        for name, key, v in (("min_namespaces", "min", min_namespaces), ("trim", "trim", trim)):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1_000_000:
                    raise ValueError(f"{name} must be an integer from 0 to 1000000, got {v!r}")
                new[key] = v
        if new["min"] < 2 * new["trim"] + 1:
            raise ValueError(f"min_namespaces must be at least 2 x trim + 1 = "
                             f"{2 * new['trim'] + 1}, so some namespace is left to pool")
        with self.transaction() as c:
            schema.meta_set(c, schema.META_POOL, json.dumps(new, sort_keys=True))
            learning.rebuild_pool(c)  # by the settings just written
        self._pool = new
        return dict(new)

    # -- the logs ------------------------------------------------------------------

    @_guarded
    @_locked
    def logged_recall(self, recall_id: int) -> LoggedRecall | None:
        """A tracked recall as the log keeps it, or None (never tracked, or
        forgotten)."""
        if isinstance(recall_id, bool) or not isinstance(recall_id, int):
            raise TypeError(f"recall_id must be an integer, got {type(recall_id).__name__}")
        if not -(1 << 63) <= recall_id < (1 << 63):
            return None
        rows = self.connection.execute(sql.GET_RECALL, {"id": recall_id}).fetchall()
        return _logged_recall(rows[0]) if rows else None

    @_guarded
    @_locked
    def judged_recalls(self, *, newest: int | None = None) -> builtins.list[LoggedRecall]:
        """Every logged recall in which feedback judged some memory used,
        oldest first; newest=N: only the newest N of them (still oldest
        first).  newest must be a positive integer (TypeError/ValueError)."""
        if newest is None:
            return [_logged_recall(r) for r in self.connection.execute(sql.JUDGED_RECALLS)]
        if isinstance(newest, bool) or not isinstance(newest, int):
            raise TypeError(f"newest must be an integer, got {type(newest).__name__}")
        if not 0 < newest < (1 << 62):
            raise ValueError(f"newest must be a positive integer, got {newest}")
        rows = self.connection.execute(sql.NEWEST_JUDGED_RECALLS, {"n": newest}).fetchall()
        return [_logged_recall(r) for r in reversed(rows)]

    @_guarded
    @_locked
    def events(self, *, first_recall: int | None = None) -> builtins.list[Event]:
        """The feedback event log, oldest first: one Event per judged memory;
        first_recall=ID: only the events of recalls from that id on (none of
        forgotten recalls).  first_recall must be an integer (TypeError)."""
        if first_recall is None:
            rows = self.connection.execute(sql.EVENTS).fetchall()
        else:
            if isinstance(first_recall, bool) or not isinstance(first_recall, int):
                raise TypeError(f"first_recall must be an integer, got "
                                f"{type(first_recall).__name__}")
            first = max(min(first_recall, (1 << 63) - 1), -(1 << 63))
            rows = self.connection.execute(sql.EVENTS_FROM, {"first": first}).fetchall()
        with _from_file("reading the event log"):
            return [Event(i, rid, pos, ns, qt, bool(used),
                          tuple(tuple(d) for d in json.loads(deltas)))
                    for i, rid, pos, ns, qt, used, deltas in rows]

    # -- checking ------------------------------------------------------------------

    @_locked
    def check(self) -> CheckReport:
        """Check the store: SQLite's integrity_check, the schema against
        heapmem's own, the FTS index against the memories table, each
        namespace's BM25 statistics (and its terms') against its memories, and the links
        against a replay of the event log.  Damage is reported, never raised:
        a check that cannot finish says where it stopped."""
        problems: list[str] = []
        counts = (0, 0, 0)
        try:
            counts = self._check(problems)
        except _DAMAGE + _DECODING as e:
            problems.append(f"the check stopped early: {from_sqlite(e, 'check')}")
        return CheckReport(not problems, tuple(problems[:100]), *counts)

    def _check(self, problems: builtins.list[str]) -> tuple[int, int, int]:
        c = self.connection
        ic = [r[0] for r in c.execute(sql.INTEGRITY)]
        if ic != ["ok"]:
            problems += [f"integrity_check: {m}" for m in ic]
        if self.readonly:
            # FTS5's 'integrity-check' command is a write, refused here: check
            # only that the index and the table hold the same rows
            odd = c.execute(sql.FTS_ROWS_APART).fetchall()[0][0]
            if odd:
                problems.append(f"FTS index does not match the memories table: {odd} rows "
                                "are in only one of them")
        else:
            try:
                c.execute(sql.FTS_INTEGRITY)
            except apsw.Error as e:
                problems.append(f"FTS index does not match the memories table: {e}")
        if schema.fts_deferred(c):
            problems.append("heapmem_meta holds 'fts_deferred': the FTS index trigger is off "
                            "for every writer (delete that row)")
        problems += [f"heapmem_meta: {m}" for m in schema.meta_problems(c)]
        problems += [f"heapmem_meta: {m}" for m in priors.problems(c)]
        problems += _memory_problems(c)
        # each namespace's BM25 statistics against its memories (the C core's
        # functions refuse a value that is not UTF-8: said above, and here)
        for statement, said in ((sql.WRONG_NTOK, "namespace statistics: {} memories have a wrong "
                                 "token count"),
                                (sql.WRONG_NSTAG, "FTS index: {} memories carry another "
                                 "namespace's tag, so recall in their namespace cannot find them"),
                                (sql.WRONG_NAMESPACE_STATS, "namespace statistics: {} namespaces "
                                 "disagree with their memories"),
                                (sql.WRONG_BM25_TERMS, "BM25 term statistics: {} (namespace, "
                                 "term) rows of bm25_terms disagree with the memories")):
            try:
                odd = c.execute(statement).fetchall()[0][0]
            except apsw.SQLError as e:
                problems.append(said.split(":")[0] + f": cannot be checked ({_c_sentence(e)})")
                continue
            if odd:
                problems.append(said.format(odd))
        problems += _vector_index_problems(c)
        objects = c.execute(sql.SCHEMA_OBJECTS).fetchall()
        problems += [f"schema: {m}" for m in schema.foreign_objects(
            objects, schema.user_version(c))]
        events = [(ns, json.loads(d)) for _, _, _, ns, _, _, d in c.execute(sql.EVENTS)]
        # each namespace's links are what its events add up to; the pooled
        # layer is theirs, capped, plus any prior merged from a links-only
        # export (heapmem.io.transfer), which has no events
        prior = schema.prior(c)
        replayed: dict = learning.replay(events)
        replayed = learning.pool(replayed, self._reread_pool(c), prior, schema.PRIOR_SUPPORT)
        stored: dict[tuple[str, str], tuple] = {
            (ns, f): (a, b, n) for ns, f, a, b, n, _ in c.execute(sql.OWN_ROWS)}
        stored.update({(POOLED, f): (a, b, n, k) for f, _, a, b, n, k, _, _ in
                       learning.pooled_rows(c)})
        for (layer, f), s, r in learning.mismatches(stored, replayed):
            gives = "(" + ", ".join(f"{x:.6g}" for x in r) + ")" if r is not None else ""
            if s is None:
                problems.append(f"link {layer}:{f} is None, the event log gives {gives}")
            elif r is None:
                problems.append(f"link {layer}:{f} has no events behind it")
            else:
                problems.append(f"link {layer}:{f} is {s}, the event log gives {gives}")
        nevents = len(events)
        nmem = c.execute(sql.COUNT_MEMORIES).fetchall()[0][0]
        return nmem, nevents, len(stored)


#: check() names at most this many memories of one kind of problem, then counts the rest
_NAMED = 5


def _memory_problems(c: Any) -> list[str]:
    """What check() finds in the memories table itself: a field that is not
    UTF-8 (or a name holding a NUL byte), which heap_add refuses and only a
    raw write can leave; and stored shape features that are not what the C
    core gives the memory's text, kind and source now (a raw UPDATE of them
    leaves recall and learning with the old shape: issue 33)."""
    bad_text: list[str] = []
    stale: list[str] = []
    names = ("id", "namespace", "kind", "source", "key")
    for seq, *fields, meta, stored in c.execute(sql.STORED_MEMORIES):
        row = dict(zip((*names, "text"), fields))
        try:
            text = {k: None if v is None else bytes(v).decode("utf-8") for k, v in row.items()}
            if meta is not None:
                bytes(meta).decode("utf-8")
            shape = bytes(stored or b"").decode("utf-8")
            if any("\x00" in (text[k] or "") for k in names):
                raise UnicodeError
        except UnicodeError:
            bad_text.append(f"#{seq}")
            continue
        if text["text"] is None or text["kind"] is None:
            continue  # NOT NULL columns: integrity_check says it
        now = native.features(text["text"], text["kind"], text["source"])
        if now != shape:
            stale.append(repr(text["id"]))
    out = []
    for found, said in ((bad_text, "a field that is not valid UTF-8 (or a name with a NUL "
                         "byte), which heapmem never writes: memories"),
                        (stale, "stored features that are not what their text, kind and source "
                         "give now (a raw UPDATE changed them; recall and learning use the "
                         "stored ones; update() rewrites both): memories")):
        if found:
            more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
            out.append(f"{len(found)} memories hold {said} {', '.join(found[:_NAMED])}{more}")
    return out


def _is_builtin(embedder: Any) -> bool:
    """Whether embedder is the library's own (the store embeds in SQL)."""
    return (getattr(embedder, "builtin", False) is True
            and getattr(embedder, "name", None) == schema.BUILTIN_EMBEDDER)


def _vector_index_problems(c: schema.Connection) -> builtins.list[str]:
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
        if not parts or version != parts[-1][0] or digest != _vector_digest(parts):
            out.append(f"vector index of namespace {ns!r}: its version or digest is not that "
                       "of its centroids (heap_vector_index rebuilds it)")
    return out


def _vector_digest(parts: builtins.list[builtins.list[Any]]) -> int:
    """FNV-1a 64 over each partition's id (8 bytes, little-endian) and
    centroid, in id order, as a signed integer (never 0): hv_cents_digest."""
    h = 1469598103934665603
    for part, hexc in parts:
        for b in int(part).to_bytes(8, "little", signed=True) + bytes.fromhex(hexc):
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    h = h or 1
    return h - (1 << 64) if h >= 1 << 63 else h


def open(path: str, *, clock: Callable[[], Timestamp] = time.time,
         config: ScoringConfig | None = None, readonly: bool = False,
         embedder: Callable[[list[str]], Any] | None = DEFAULT_EMBEDDER, reembed: bool = False,
         durable: bool = False, verify: bool = False, auth_token: str | None = None,
         database: str | None = None, auto_tune: bool = True, vfs: str | None = None
         ) -> Memory:
    """Open (or create) the heapmem store at path.

    The connection runs in WAL mode with a busy timeout, and the schema is
    created or migrated in one transaction.  A SQLite file that is not a
    heapmem store raises NotAStoreError, one written by a newer heapmem raises
    SchemaVersionError; neither is modified.  clock() gives the time (unix
    seconds or a datetime) when a call has no now=; a fixed clock makes every
    output reproducible.  readonly=True opens without writing anything: recall
    works (nothing is tracked), writes raise ReadOnlyError.

    Recall is hybrid by default: BM25 candidates and the vector top N of the
    namespace, ranked together.  The vectors come from potion-base-8M
    (embedders.Potion: MinishLab, MIT licence, English), which the C library
    carries and runs inside SQL (about 4 microseconds a text), so every door
    (Python, the sqlite3 shell, a server) embeds alike; they live in the file
    at int8 (260 bytes a memory).  A store holding another embedder's vectors
    opens lexical unless that embedder is passed.  embedder=None: recall is
    lexical (the store's vectors, if any, stay and keep following their
    texts); a new store opened so holds no vectors.  Another embedder
    (embedders.E5Small: multilingual; MiniLM) is a callable from a list of
    texts to a 2-D float array, with a .name naming its model; its vectors
    are float32.  The model's name and dimension are recorded, and opening
    with another embedder raises HeapmemError unless reembed=True, which
    embeds every memory again.  Memories added without an embedder are
    embedded when the store is next opened with one.

    A file from elsewhere is checked before anything in it runs: its schema
    must be exactly heapmem's for its version (an extra trigger or view, or
    one of heapmem's with other SQL, raises UnsafeStoreError), and the
    connection trusts nothing in the file (trusted_schema off, DEFENSIVE).
    verify=True also runs SQLite's quick_check (CorruptStoreError).

    Commits survive the process dying at any point; durable=True also makes
    them survive an OS crash or power cut (synchronous=FULL), at the cost of
    a disk sync per commit.

    path may also be a libSQL server (sqld): "http://host:port", https://
    or libsql:// (heapmem.remote), with auth_token the JWT it checks.  The
    same verbs run there as SQL; the server must have loaded this heapmem's
    library (`heapmem sqld --primary DIR` starts one).  A replica serves
    recall and forwards writes to its primary; a connection reads its own
    writes through a replica too (it waits, briefly, for the replica to have
    them).

    database names one database of a server started with namespaces (sqld
    --enable-namespaces, `heapmem sqld --primary DIR --namespaces`): one
    database per tenant, each its own store, created first with
    heapmem.remote.sqld.create_database().  It is a lowercase DNS label ("acme",
    "tenant-42"); a database that does not exist raises
    heapmem.remote.DatabaseNotFoundError, database= on a server without
    namespaces ServerError, and nothing is written.  namespace= (of add,
    recall, ...) is another thing: tenants inside one store, which share its
    file, its write lock and its pooled layer of learned links; databases
    share nothing but the server (learning moves between them as links:
    heapmem.io.transfer.export_links and import_file).

    auto_tune (True or False, else TypeError before anything is opened):
    with True, the default, feedback runs tune() by itself once the store's
    judged recalls (recalls in which feedback marked a memory used) reach 30,
    then 60, 120, 240, ... (each point once per store, whichever process
    gets there: the point reached is kept in the file), seeded, on the newest
    2,000 judged recalls; Feedback.auto_tune is its report.  It deploys a
    usefulness weight only where the store's own feedback says it ranks
    better (Memory.tune()).  It does not run with auto_tune=False, nor when
    config= is given (the caller chose the weights; set_config(save=True)
    and tune() still work).  On a libSQL server it runs there, inside the
    feedback's own request (the server's heapmem library).

    vfs: a SQLite VFS registered in this process (an apsw.VFS) to open the file through (None:
    the default; tests/_faults.py's fails chosen I/O calls); unknown: HeapmemError."""
    return Memory(path, clock=clock, config=config, readonly=readonly, embedder=embedder,
                  reembed=reembed, durable=durable, verify=verify, auth_token=auth_token,
                  database=database, auto_tune=auto_tune, vfs=vfs)
