"""The store: one SQLite file holding memories, their FTS5 index, the recall
log, feedback events and learned links.  See heapmem.open()."""
from __future__ import annotations

import functools
import json
import math
import os
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

import apsw
import numpy as np

from . import _native
from ._version import __version__
from .config import KIND_IMPORTANCE, MAX_IMPORTANCE, ScoringConfig
from .tune import TuneReport
from .errors import DuplicateIdError, HeapmemError, NotAStoreError, ReadOnlyError, SchemaVersionError

#: Longest memory text accepted, in UTF-8 bytes.
MAX_TEXT_BYTES = 1 << 20
#: Longest id, namespace, kind, source or key, in characters.
MAX_NAME_CHARS = 256
#: Most memories one recall may return.
MAX_K = 1000
#: The schema version this heapmem writes (PRAGMA user_version).
SCHEMA_VERSION = 3
#: The namespace name of the pooled layer of links (reserved).
POOLED = "*"

Timestamp = Union[int, float, datetime]

_SCHEMA_V1 = """
CREATE TABLE heapmem_meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE memories(
  seq          INTEGER PRIMARY KEY,   -- the FTS5 rowid
  id           TEXT NOT NULL UNIQUE,
  namespace    TEXT NOT NULL,
  nstag        TEXT NOT NULL,         -- heap_ns_tag(namespace): filters MATCH
  text         TEXT NOT NULL,
  kind         TEXT NOT NULL,
  source       TEXT,
  key          TEXT,
  importance   REAL NOT NULL,
  features     TEXT NOT NULL,         -- heap_features(text, kind, source)
  created_at   REAL NOT NULL,
  last_used_at REAL,
  metadata     TEXT                   -- JSON object or NULL
);
CREATE INDEX memories_namespace ON memories(namespace);
CREATE INDEX memories_key ON memories(namespace, key, created_at) WHERE key IS NOT NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5(
  nstag, text, content='memories', content_rowid='seq',
  tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts(memories_fts, rank) VALUES('rank', 'bm25(0.0, 1.0)');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts(rowid, nstag, text) VALUES (new.seq, new.nstag, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memories_fts(memories_fts, rowid, nstag, text)
    VALUES ('delete', old.seq, old.nstag, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF nstag, text ON memories BEGIN
  INSERT INTO memories_fts(memories_fts, rowid, nstag, text)
    VALUES ('delete', old.seq, old.nstag, old.text);
  INSERT INTO memories_fts(rowid, nstag, text) VALUES (new.seq, new.nstag, new.text);
END;
CREATE TABLE recalls(
  id         INTEGER PRIMARY KEY,
  namespace  TEXT NOT NULL,
  query      TEXT NOT NULL,
  qtype      TEXT NOT NULL,
  created_at REAL NOT NULL,
  shown      TEXT NOT NULL,           -- JSON array of memory ids, in rank order
  ages       TEXT NOT NULL,           -- JSON array: each one's age in days at recall time
  features   TEXT NOT NULL,           -- JSON array: each one's features as scored
  rest       TEXT NOT NULL            -- JSON array: each one's score without usefulness
);
CREATE TABLE events(
  id         INTEGER PRIMARY KEY,
  recall_id  INTEGER,                 -- NULL once the recall is forgotten
  position   INTEGER NOT NULL,        -- rank - 1 of the judged memory
  namespace  TEXT NOT NULL,
  qtype      TEXT NOT NULL,
  used       INTEGER NOT NULL,        -- 1 used, 0 ignored
  deltas     TEXT NOT NULL,           -- JSON [[feature, d_alpha, d_beta], ...]: no text, no ids
  created_at REAL NOT NULL,
  UNIQUE(recall_id, position)
);
CREATE TABLE links(
  namespace TEXT NOT NULL,            -- '*' is the pooled layer
  feature   TEXT NOT NULL,
  qtype     TEXT NOT NULL,            -- '' for a shape feature, else its question type
  alpha     REAL NOT NULL,            -- success evidence (the prior is not stored)
  beta      REAL NOT NULL,            -- failure evidence
  n         INTEGER NOT NULL,         -- events that touched it
  PRIMARY KEY(namespace, feature)
) WITHOUT ROWID;
CREATE INDEX links_qtype ON links(namespace, qtype);
"""

# Version 2: embeddings for hybrid (BM25 + vector) candidates.
_SCHEMA_V2 = """
CREATE TABLE vectors(
  seq INTEGER PRIMARY KEY REFERENCES memories(seq) ON DELETE CASCADE,
  v   BLOB NOT NULL                   -- float32, unit length, the embedder's dimension
);
"""


def _ntok_sql(nstag: str, text: str) -> str:
    """SQL for a memory's FTS5 token count (memories.ntok), given SQL for its
    namespace tag and its text: the tokens of every indexed column, as
    %_docsize counts them."""
    return f"heap_ntokens({nstag}) + heap_ntokens({text})"


# Version 3: each namespace's own BM25 statistics (its memories and their FTS5
# tokens), kept by plain-SQL triggers, so that a namespace ranks (and costs) as
# if it were alone in the file.  ntok is _ntok_sql(nstag, text).
# And add_many() indexes its rows in one statement: FTS5 flushes its pending
# index at every statement boundary, and a trigger is one per row (4-5x slower
# to build).  Inside add_many()'s transaction the 'fts_deferred' meta row, never
# committed, turns the per-row trigger off; any other writer still gets it.
_SCHEMA_V3 = f"""
ALTER TABLE memories ADD COLUMN ntok INTEGER NOT NULL DEFAULT 0;
UPDATE memories SET ntok = {_ntok_sql("nstag", "text")};
CREATE TABLE namespaces(
  namespace TEXT PRIMARY KEY,
  docs      INTEGER NOT NULL,         -- memories in the namespace
  tokens    INTEGER NOT NULL          -- their FTS5 tokens, all columns
) WITHOUT ROWID;
INSERT INTO namespaces SELECT namespace, count(*), sum(ntok) FROM memories GROUP BY namespace;
DROP TRIGGER memories_ai;
CREATE TRIGGER memories_ai AFTER INSERT ON memories
  WHEN NOT EXISTS (SELECT 1 FROM heapmem_meta WHERE key = 'fts_deferred') BEGIN
  INSERT INTO memories_fts(rowid, nstag, text) VALUES (new.seq, new.nstag, new.text);
END;
CREATE TRIGGER namespaces_ai AFTER INSERT ON memories BEGIN
  INSERT INTO namespaces VALUES (new.namespace, 1, new.ntok)
    ON CONFLICT(namespace) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER namespaces_ad AFTER DELETE ON memories BEGIN
  UPDATE namespaces SET docs = docs - 1, tokens = tokens - old.ntok
    WHERE namespace = old.namespace;
  DELETE FROM namespaces WHERE namespace = old.namespace AND docs <= 0;
END;
CREATE TRIGGER namespaces_au AFTER UPDATE OF namespace, ntok ON memories BEGIN
  UPDATE namespaces SET docs = docs - 1, tokens = tokens - old.ntok
    WHERE namespace = old.namespace;
  INSERT INTO namespaces VALUES (new.namespace, 1, new.ntok)
    ON CONFLICT(namespace) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
  DELETE FROM namespaces WHERE namespace = old.namespace AND docs <= 0;
END;
"""

def _defer_fts(c: apsw.Connection) -> None:
    """Inside the current write transaction, switch off the per-row FTS
    trigger (see _SCHEMA_V3); _index_deferred() indexes the rows and turns it
    back on before the commit, so the switch is never seen outside."""
    c.execute("INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('fts_deferred', '1')")


def _index_deferred(c: apsw.Connection, first_seq: int) -> None:
    """Index, in one statement, the memories added since _defer_fts() (every
    seq >= first_seq), and switch the per-row trigger back on."""
    c.execute("INSERT INTO memories_fts(rowid, nstag, text) SELECT seq, nstag, text "
              "FROM memories WHERE seq >= ?", (first_seq,))
    c.execute("DELETE FROM heapmem_meta WHERE key = 'fts_deferred'")


# Numbered schema steps: _MIGRATIONS[v] takes a store from version v to v + 1.
_MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: _SCHEMA_V3}

# The learned links a namespace sees, as one link-set blob for heap_score().
# (Restricting to the question type's rows only skips rows it never reads.)
_LINKS_SQL = """
SELECT heap_links(p.feature, coalesce(o.alpha, 0), coalesce(o.beta, 0), p.alpha, p.beta,
                  :pseudocount)
FROM links AS p LEFT JOIN links AS o ON o.namespace = :namespace AND o.feature = p.feature
WHERE p.namespace = '*' AND p.qtype IN ('', :qtype)
"""

# One new memory; the C core works out its shape features, namespace tag and
# FTS5 token count.
_INSERT_SQL = f"""
INSERT INTO memories(seq, id, namespace, nstag, text, kind, source, key, importance, features,
                     created_at, metadata, ntok)
VALUES (:seq, :id, :namespace, heap_ns_tag(:namespace), :text, :kind, :source, :key, :importance,
        heap_features(:text, :kind, :source), :created_at, :metadata,
        {_ntok_sql("heap_ns_tag(:namespace)", ":text")})
RETURNING features
"""

# Feedback: the judged memories (:judged, JSON [[position, used, features,
# age_days], ...]) become events, each with the deltas heap_credit() gives it.
_EVENTS_SQL = """
INSERT INTO events(recall_id, position, namespace, qtype, used, deltas, created_at)
SELECT :rid, j.value ->> 0, :namespace, :qtype, j.value ->> 1,
       heap_credit(j.value ->> 2, :qtype, j.value ->> 3, j.value ->> 1, :links, :config), :now
FROM json_each(:judged) AS j
"""

# ... and fold into the links of their namespace and of the pooled layer
# ('*'): heap_fold() sums the same credits per feature, one row per feature
# and layer.  (It works the credits out again from :judged: summing the
# events' JSON back in SQL measured slower, 0.28 against 0.16 ms.)
_FOLD_SQL = """
INSERT INTO links(namespace, feature, qtype, alpha, beta, n)
SELECT layer.namespace, t.key,
       CASE WHEN instr(t.key, '/') > 0 THEN substr(t.key, 1, instr(t.key, '/') - 1) ELSE '' END,
       t.value ->> 0, t.value ->> 1, t.value ->> 2
FROM json_each((
       SELECT heap_fold(j.value ->> 2, :qtype, j.value ->> 3, j.value ->> 1, :links, :config)
       FROM json_each(:judged) AS j)) AS t,
     (SELECT :namespace AS namespace UNION ALL SELECT '*') AS layer
WHERE true
ON CONFLICT(namespace, feature) DO UPDATE SET
  alpha = alpha + excluded.alpha, beta = beta + excluded.beta, n = n + excluded.n
"""

# The BM25 top N of a question in a namespace, with the namespace's own
# statistics: heap_bm25_row() reads each matching row's term frequencies,
# heap_bm25_top() scores them with the namespace's document count and average
# length (and each term's document frequency over the match set), reading exact
# row lengths only for rows that can still reach the top, and returns the best
# N as JSON.  The same numbers as FTS5's bm25(memories_fts,
# 0.0, 1.0) in a store holding only this namespace, and no scan of the other
# namespaces' postings.  (LIMIT -1 keeps SQLite from flattening the inner
# query into the aggregate, where an FTS5 auxiliary function cannot run.)
_LEX_TOP = """SELECT json_extract(value, '$[0]') AS seq, json_extract(value, '$[1]') AS b
        FROM json_each((
          SELECT heap_bm25_top(hit.seq, hit.row,
                   (SELECT docs FROM namespaces WHERE namespace = :namespace),
                   (SELECT tokens FROM namespaces WHERE namespace = :namespace), :candidates,
                   'memories_fts')
          FROM (SELECT rowid AS seq, heap_bm25_row(memories_fts, 0.0, 1.0) AS row
                FROM memories_fts WHERE memories_fts MATCH heap_match(:question, :namespace)
                LIMIT -1) AS hit))"""

# Every input of a candidate's score, from memories m and its BM25 row lex
# (lex.b is NULL for a candidate only the vectors found).
_SCORE_INPUTS = """m.seq, m.importance,
         m.features || ' ' || heap_relate(:question, m.source) AS features, lex.b AS rank,
         (:now - coalesce(m.last_used_at, m.created_at)) / 86400.0 AS age_days,
         m.key IS NOT NULL AND EXISTS (
           SELECT 1 FROM memories AS n
           WHERE n.namespace = m.namespace AND n.key = m.key
             AND (n.created_at > m.created_at OR (n.created_at = m.created_at AND n.seq > m.seq))
         ) AS superseded"""

# The BM25 candidates with their score inputs; shared by recall() and RECALL_SQL.
_CAND_CTE = f"""
cand AS (
  SELECT {_SCORE_INPUTS}
  FROM ({_LEX_TOP}) AS lex
  JOIN memories AS m ON m.seq = lex.seq
  WHERE m.namespace = :namespace
)"""

# Hybrid candidates: the BM25 top N united with the vector top N of the
# namespace (:qvec, the question's embedding), each with its cosine.
_HYBRID_CTE = f"""
lex AS ({_LEX_TOP}),
vec AS (
  SELECT v.seq FROM vectors AS v JOIN memories AS m ON m.seq = v.seq
  WHERE m.namespace = :namespace
  ORDER BY heap_cosine(v.v, :qvec) DESC LIMIT :candidates
),
cand AS (
  SELECT {_SCORE_INPUTS},
         heap_cosine(vv.v, :qvec) AS cos
  FROM (SELECT seq FROM lex UNION SELECT seq FROM vec) AS u
  JOIN memories AS m ON m.seq = u.seq
  LEFT JOIN lex ON lex.seq = u.seq
  LEFT JOIN vectors AS vv ON vv.seq = u.seq
  WHERE m.namespace = :namespace
)"""

_HYBRID_SQL = "WITH" + _HYBRID_CTE + """
SELECT seq, rank, importance, age_days, superseded, features, cos FROM cand ORDER BY seq
"""

_CANDIDATES_SQL = "WITH" + _CAND_CTE + """
SELECT seq, rank, importance, age_days, superseded, features FROM cand ORDER BY rank, seq
"""

# What a result shows, fetched for the top k only (:seqs, a JSON array).
_SHOW_SQL = """SELECT seq, id, text, kind, source, key, created_at, last_used_at, metadata
FROM memories WHERE seq IN (SELECT value FROM json_each(:seqs))"""

# The whole ranking as one statement, for any SQLite client that loaded the
# library.  Named parameters: :question, :namespace, :now (unix seconds), :k,
# :candidates, :pseudocount and :config (ScoringConfig.to_sql()).
RECALL_SQL = "WITH" + _CAND_CTE + """,
learned AS (""" + _LINKS_SQL.replace(":qtype", "heap_qtype(:question)").rstrip() + """
)
SELECT m.id, m.text, top.score
FROM (SELECT seq, heap_score(rank / min(rank) OVER (), age_days, importance, superseded,
                             features, heap_qtype(:question), (SELECT * FROM learned),
                             :config) AS score
      FROM cand ORDER BY score DESC, seq LIMIT :k) AS top
JOIN memories AS m ON m.seq = top.seq
ORDER BY top.score DESC, top.seq
"""


def _now_from(x: Any, what: str) -> float:
    if isinstance(x, datetime):
        if x.tzinfo is None:
            x = x.replace(tzinfo=timezone.utc)
        return x.timestamp()
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{what} must be unix seconds (int or float) or a datetime, "
                        f"got {type(x).__name__}")
    try:
        v = float(x)
    except OverflowError:  # an int beyond float range
        v = math.inf
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number of unix seconds, got {x!r}")
    return v


def _check_name(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode (it holds a lone surrogate)") from None
    return value


def _check_namespace(ns: Any) -> str:
    ns = _check_name(ns, "namespace")
    if ns == POOLED:
        raise ValueError("namespace '*' is reserved for the pooled layer of learned links")
    return ns  # type: ignore[return-value]


def _check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text must not be empty or only whitespace")
    if "\x00" in text:
        raise ValueError("text must not contain a NUL character")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (it holds a lone surrogate)") from None
    if size > MAX_TEXT_BYTES:
        raise ValueError(f"text is {size} bytes of UTF-8; the limit is {MAX_TEXT_BYTES} (1 MiB)")
    return text


def _check_ids(ids: Any, what: str) -> list[str]:
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{what} must be a list of ids, not a single string; wrap it: {what}=[id]")
    try:
        out = list(ids)
    except TypeError:
        raise TypeError(f"{what} must be a list of ids, got {type(ids).__name__}") from None
    for i in out:
        if not isinstance(i, str):
            raise TypeError(f"{what} must hold string ids, got {type(i).__name__}")
    if len(set(out)) != len(out):
        raise ValueError(f"{what} lists the same id twice")
    return out


@dataclass(frozen=True)
class Item:
    """One stored memory."""

    id: str
    text: str
    namespace: str
    kind: str
    source: str | None
    key: str | None
    importance: float
    created_at: float
    last_used_at: float | None
    metadata: dict | None
    features: tuple[str, ...]


@dataclass
class Result:
    """One recalled memory with the factors of its score."""

    rank: int
    id: str
    text: str
    score: float
    kind: str
    source: str | None
    key: str | None
    relevance: float
    recency: float
    importance: float
    usefulness: float
    rules: float
    bm25: float
    age_days: float
    superseded: bool
    features: tuple[str, ...]
    created_at: float
    last_used_at: float | None
    metadata: dict | None
    #: hybrid recall: the BM25 and cosine parts of relevance (None otherwise)
    lexical: float | None = None
    cosine: float | None = None
    _recall: "Recall" = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def explain(self) -> str:
        """One line saying why this memory got its score: each factor, and the
        strongest learned links behind its usefulness."""
        r = self._recall
        nan = math.nan
        return _native.explain(self.relevance, self.age_days, self.importance, self.superseded,
                               " ".join(self.features), r.qtype, r._links, r.config._c,
                               nan if self.lexical is None else self.lexical,
                               nan if self.cosine is None else self.cosine)


class Recall(Sequence[Result]):
    """The ranked results of one recall; indexable and iterable."""

    def __init__(self, query: str, namespace: str, qtype: str, results: list[Result],
                 recall_id: int | None, config: ScoringConfig, links: bytes):
        self.query = query
        self.namespace = namespace
        self.qtype = qtype
        self.recall_id = recall_id
        self.config = config
        self._links = links
        self._results = results
        for r in results:
            r._recall = self

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self._results]

    def __getitem__(self, i):  # type: ignore[override]
        return self._results[i]

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __repr__(self) -> str:
        return (f"<Recall {self.query!r} in {self.namespace!r}: {len(self)} results, "
                f"recall_id={self.recall_id}>")


@dataclass(frozen=True)
class Feedback:
    """What one feedback call recorded."""

    recall_id: int
    used: tuple[str, ...]
    ignored: tuple[str, ...]
    features: int  # distinct features whose links changed


@dataclass(frozen=True)
class LinkRow:
    """A learned link as a namespace (or the pooled layer) sees it."""

    feature: str
    strength: float
    n: int
    alpha: float
    beta: float


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    problems: tuple[str, ...]
    memories: int
    events: int
    links: int


def load(conn: Any) -> None:
    """Load the heapmem SQL functions into an apsw or sqlite3 connection."""
    path = _native.loadable_path()
    if isinstance(conn, apsw.Connection):
        conn.enable_load_extension(True)
        try:
            conn.load_extension(path)
        finally:
            conn.enable_load_extension(False)
        return
    enable = getattr(conn, "enable_load_extension", None)
    if enable is None:
        raise TypeError("load() needs an apsw.Connection or a sqlite3.Connection built with "
                        "extension loading")
    enable(True)
    try:
        conn.load_extension(path)
    finally:
        enable(False)


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


class Memory:
    """A heapmem store: use heapmem.open() to make one.  A context manager."""

    def __init__(self, path: str, *, clock: Callable[[], Timestamp] = time.time,
                 config: ScoringConfig | None = None, readonly: bool = False,
                 embedder: Callable[[list[str]], Any] | None = None, reembed: bool = False,
                 durable: bool = False):
        if not isinstance(path, str):
            path = str(path)
        if not callable(clock):
            raise TypeError("clock must be a callable returning unix seconds or a datetime")
        if config is not None and not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        self.path = path
        self.readonly = bool(readonly)
        self.durable = bool(durable)
        self.config = config or ScoringConfig()
        self._clock = clock
        if embedder is not None and not callable(embedder):
            raise TypeError("embedder must be a callable from a list of texts to a 2-D array")
        self._embedder = embedder
        self._dim = 0
        self._lock = threading.RLock()
        self._links_cache: dict[tuple[str, str, float], bytes] = {}
        self._links_version: Any = None
        self._links_gen = 0  # bumped by every write of this connection to links
        flags = apsw.SQLITE_OPEN_READONLY if readonly else (
            apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        flags |= apsw.SQLITE_OPEN_URI
        try:
            self._conn = apsw.Connection(path, flags=flags)
        except apsw.CantOpenError as e:
            raise HeapmemError(f"cannot open {path!r}: {e}") from None
        try:
            self._configure()
        except apsw.CantOpenError as e:
            self._conn.close()
            wal = path + "-wal"
            if not readonly or path.startswith("file:") or (
                    os.path.exists(wal) and os.path.getsize(wal) > 0):
                raise HeapmemError(f"cannot open {path!r}: {e}") from None
            # a WAL-mode file on read-only media (an app bundle, a read-only
            # mount): SQLite cannot make its -shm file there, and with no -wal
            # file nothing is pending, so read the file as immutable
            uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
            self._conn = apsw.Connection(uri, flags=flags)
            try:
                self._configure()
            except BaseException:
                self._conn.close()
                raise
        except BaseException:
            self._conn.close()
            raise
        if config is None:
            # weights that tune() deployed in this store
            rows = self._conn.execute(
                "SELECT value FROM heapmem_meta WHERE key = 'tuned'").fetchall()
            if rows:
                self.config = ScoringConfig.from_dict(json.loads(rows[0][0]))
        if embedder is not None:
            try:
                self._attach_embedder(reembed)
            except BaseException:
                self._conn.close()
                raise

    # -- embeddings ----------------------------------------------------------------

    @property
    def embedder_name(self) -> str | None:
        """The name of the embedder this store's vectors were made with."""
        rows = self.connection.execute(
            "SELECT value FROM heapmem_meta WHERE key = 'embedder'").fetchall()
        return rows[0][0] if rows else None

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

    def _attach_embedder(self, reembed: bool) -> None:
        e = self._embedder
        name = getattr(e, "name", None) or getattr(e, "model_name", None)
        if not isinstance(name, str) or not name:
            raise TypeError("the embedder needs a .name (a string naming its model), so the "
                            "store can tell its vectors from another model's")
        c = self.connection
        meta = dict(c.execute("SELECT key, value FROM heapmem_meta "
                              "WHERE key IN ('embedder', 'embedding_dim')").fetchall())
        dim = self._embed(["heapmem"]).shape[1]
        same = meta.get("embedder") == name and int(meta.get("embedding_dim", dim)) == dim
        if meta.get("embedder") is not None and not same and not reembed:
            raise HeapmemError(
                f"{self.path!r} holds vectors of embedder {meta['embedder']!r} (dimension "
                f"{meta.get('embedding_dim')}), not {name!r} (dimension {dim}); open it with "
                "that embedder, or pass reembed=True to embed every memory again with this one")
        self._dim = dim
        if self.readonly:
            if not same:
                raise ReadOnlyError("a read-only store cannot take a new embedder")
            return
        with self._write() as w:
            if not same:
                w.execute("DELETE FROM vectors")
            w.execute("INSERT INTO heapmem_meta(key, value) VALUES ('embedder', ?), "
                      "('embedding_dim', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                      (name, str(dim)))
            todo = w.execute("SELECT m.seq, m.text FROM memories AS m LEFT JOIN vectors AS v "
                             "ON v.seq = m.seq WHERE v.seq IS NULL").fetchall()
            for i in range(0, len(todo), 256):
                chunk = todo[i:i + 256]
                vecs = self._embed([t for _, t in chunk])
                w.executemany("INSERT INTO vectors(seq, v) VALUES (?, ?)",
                              [(seq, vecs[j].tobytes()) for j, (seq, _) in enumerate(chunk)])

    # -- connection and schema -------------------------------------------------

    def _configure(self) -> None:
        c = self._conn
        c.setbusytimeout(10_000)
        for opt in (apsw.SQLITE_DBCONFIG_DQS_DML, apsw.SQLITE_DBCONFIG_DQS_DDL):
            c.config(opt, 0)
        # Plans that do not depend on bound values.  Once PRAGMA optimize has
        # gathered sqlite_stat4, SQLite otherwise re-prepares every statement
        # comparing an indexed column with a parameter (m.namespace =
        # :namespace, ...) each time the value changes: a fifth of a recall.
        c.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        load(c)
        try:
            # one statement, one snapshot: another process may be creating the
            # schema right now (two reads could see version 0 and its tables)
            objects = c.execute("SELECT (SELECT user_version FROM pragma_user_version), name "
                                "FROM (SELECT NULL AS name UNION ALL SELECT name "
                                "FROM sqlite_schema)").fetchall()
            version = objects[0][0]
            objects = [r for r in objects if r[1] is not None]
        except (apsw.NotADBError, apsw.CorruptError) as e:
            raise NotAStoreError(f"{self.path!r} is not a SQLite database ({e})") from None
        names = {r[1] for r in objects}
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.path!r} has schema version {version}, newer than this heapmem "
                f"({__version__}, schema {SCHEMA_VERSION}); upgrade heapmem to open it")
        if version == 0 and names:
            raise NotAStoreError(f"{self.path!r} is a SQLite database but not a heapmem store "
                                 "(it has tables of its own); it was not modified")
        if version > 0 and not self._is_store():
            raise NotAStoreError(f"{self.path!r} is a SQLite database but not a heapmem store; "
                                 "it was not modified")
        if version < SCHEMA_VERSION:
            if self.readonly:
                raise SchemaVersionError(
                    f"{self.path!r} has schema version {version}; open it once without "
                    f"readonly=True to upgrade it to {SCHEMA_VERSION}")
            self._migrate()
        if not self.readonly:
            c.execute("PRAGMA journal_mode=WAL")
        # WAL with synchronous=NORMAL: a commit survives the process dying at
        # any point (kill -9 included); only an OS crash or power cut can lose
        # the last commits, never corrupt the file.  durable=True syncs every
        # commit to disk as well (FULL), at a few milliseconds a commit.
        c.execute("PRAGMA synchronous=" + ("FULL" if self.durable else "NORMAL"))
        c.execute("PRAGMA foreign_keys=ON")
        c.execute("PRAGMA secure_delete=ON")

    def _is_store(self) -> bool:
        try:
            row = self._conn.execute(
                "SELECT value FROM heapmem_meta WHERE key = 'format'").fetchall()
        except apsw.SQLError:
            return False
        return bool(row) and row[0][0] == "heapmem"

    def _migrate(self) -> None:
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            # re-read under the write lock: another process may have migrated
            version = c.execute("PRAGMA user_version").fetchall()[0][0]
            if version == 0 and c.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0]:
                raise NotAStoreError(f"{self.path!r} is not a heapmem store; it was not modified")
            while version < SCHEMA_VERSION:
                c.execute(_MIGRATIONS[version])
                version += 1
                if version == 1:
                    c.execute("INSERT INTO heapmem_meta VALUES ('format', 'heapmem'), "
                              "('created_with', ?)", (__version__,))
            c.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    @contextmanager
    def _write(self) -> Iterator[apsw.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the write lock up front, so
        the busy timeout applies instead of a failed upgrade)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path!r} was opened with readonly=True; writes are refused")
        with self._lock:
            c = self.connection
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")

    @_locked
    def close(self) -> None:
        """Close the store (runs PRAGMA optimize first).  Safe to call twice."""
        conn = getattr(self, "_conn", None)
        if conn is None:
            return
        try:
            if not self.readonly:
                conn.execute("PRAGMA optimize")
        except apsw.Error:
            pass
        conn.close()
        self._conn = None  # type: ignore[assignment]

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def connection(self) -> apsw.Connection:
        """The underlying apsw connection, with the heap_* functions loaded."""
        if self._conn is None:
            raise HeapmemError("this store is closed")
        return self._conn

    def _now(self, now: Timestamp | None) -> float:
        if now is None:
            return _now_from(self._clock(), "clock()")
        return _now_from(now, "now")

    # -- facts ---------------------------------------------------------------------

    @property
    @_locked
    def schema_version(self) -> int:
        return self.connection.execute("PRAGMA user_version").fetchall()[0][0]

    @property
    @_locked
    def count(self) -> int:
        """Number of memories in all namespaces."""
        return self.connection.execute("SELECT count(*) FROM memories").fetchall()[0][0]

    @property
    @_locked
    def namespaces(self) -> list[str]:
        return [r[0] for r in self.connection.execute(
            "SELECT DISTINCT namespace FROM memories ORDER BY namespace")]

    # -- adding ------------------------------------------------------------------

    def _prepare(self, text: Any, *, kind: Any = "fact", source: Any = None, id: Any = None,
                 namespace: Any = "default", created_at: Any = None, importance: Any = None,
                 key: Any = None, metadata: Any = None) -> dict[str, Any]:
        text = _check_text(text)
        kind = _check_name(kind, "kind")
        source = _check_name(source, "source", optional=True)
        id = _check_name(id, "id", optional=True)
        namespace = _check_namespace(namespace)
        key = _check_name(key, "key", optional=True)
        created = self._now(created_at) if created_at is not None else self._now(None)
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
        return {"text": text, "kind": kind, "source": source, "id": id, "namespace": namespace,
                "created_at": created, "importance": importance, "key": key, "metadata": meta}

    def _insert(self, c: apsw.Connection, rows: list[dict[str, Any]]) -> list[Item]:
        given = [r["id"] for r in rows if r["id"] is not None]
        if len(set(given)) != len(given):
            raise DuplicateIdError("the same id is given twice")
        if given:
            taken = c.execute("SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?))"
                              " LIMIT 1", (json.dumps(given),)).fetchall()
            if taken:
                raise DuplicateIdError(f"a memory with id {taken[0][0]!r} already exists; "
                                       "it was not changed")
        # never reuse the seq (and so the automatic id) of a forgotten memory
        seq = c.execute("SELECT max(coalesce((SELECT max(seq) FROM memories), 0), coalesce(("
                        "SELECT CAST(value AS INTEGER) FROM heapmem_meta WHERE key = 'last_seq'"
                        "), 0))").fetchall()[0][0]
        auto = [r for r in rows if r["id"] is None]
        for r in rows:
            seq += 1
            r["seq"] = seq
        for r in auto:
            r["id"] = f"m{r['seq']}"
        # the shape features, the namespace tag and the token count are worked
        # out by the C core inside the INSERT; the FTS index takes the rows in
        # one statement afterwards (the 'fts_deferred' row never commits)
        _defer_fts(c)
        c.execute("SAVEPOINT heapmem_ids")
        try:
            feats = [f for (f,) in c.executemany(_INSERT_SQL, rows)]
        except apsw.ConstraintError:
            # an automatic id "m<seq>" is already some memory's explicit id:
            # give each automatic id a free name, checking one by one
            c.execute("ROLLBACK TO heapmem_ids")
            names = set(given)
            for r in auto:
                mid = f"m{r['seq']}"
                while mid in names or c.execute("SELECT 1 FROM memories WHERE id = ?",
                                                (mid,)).fetchall():
                    mid = f"m{r['seq']}-{len(names)}"
                    names.add(mid)
                r["id"] = mid
            feats = [f for (f,) in c.executemany(_INSERT_SQL, rows)]
        finally:
            c.execute("RELEASE heapmem_ids")
        _index_deferred(c, rows[0]["seq"])
        if self._embedder is not None:
            vecs = self._embed([r["text"] for r in rows])
            c.executemany("INSERT INTO vectors(seq, v) VALUES (?, ?)",
                          [(r["seq"], vecs[j].tobytes()) for j, r in enumerate(rows)])
        return [Item(r["id"], r["text"], r["namespace"], r["kind"], r["source"], r["key"],
                     r["importance"], r["created_at"], None,
                     json.loads(r["metadata"]) if r["metadata"] else None, tuple(f.split()))
                for r, f in zip(rows, feats)]

    def add(self, text: str, *, kind: str = "fact", source: str | None = None,
            id: str | None = None, namespace: str = "default",
            created_at: Timestamp | None = None, importance: float | None = None,
            key: str | None = None, metadata: Mapping[str, Any] | None = None) -> Item:
        """Store one memory and return it (with its id).

        kind sets the default importance (instruction 1.5, preference 1.3,
        summary 1.2, fact 1.0, note 1.0, episode 0.8, tool_result 0.6, other
        kinds 1.0); importance, if given, must lie in (0, 10].  A memory with a
        key supersedes older memories of the namespace with the same key.
        Bad input raises ValueError/TypeError; a duplicate id raises
        DuplicateIdError.  Nothing is written on error.
        """
        row = self._prepare(text, kind=kind, source=source, id=id, namespace=namespace,
                            created_at=created_at, importance=importance, key=key,
                            metadata=metadata)
        with self._write() as c:
            return self._insert(c, [row])[0]

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[Item]:
        """Store many memories in one transaction: all or none.  Each item is a
        dict with add()'s arguments ("text" required)."""
        if isinstance(items, (str, bytes, Mapping)):
            raise TypeError("add_many takes a list of dicts, one per memory")
        rows = []
        for n, it in enumerate(items):
            if not isinstance(it, Mapping):
                raise TypeError(f"add_many: item {n} must be a dict, got {type(it).__name__}")
            unknown = set(it) - {"text", "kind", "source", "id", "namespace", "created_at",
                                 "importance", "key", "metadata"}
            if unknown:
                raise ValueError(f"add_many: item {n} has unknown field(s) {sorted(unknown)}")
            if "text" not in it:
                raise ValueError(f"add_many: item {n} has no text")
            try:
                rows.append(self._prepare(**it))
            except (TypeError, ValueError) as e:
                raise type(e)(f"add_many: item {n}: {e}") from None
        if not rows:
            return []
        with self._write() as c:
            return self._insert(c, rows)

    @_locked
    def get(self, id: str) -> Item | None:
        """The memory with this id, or None."""
        _check_name(id, "id")
        rows = self.connection.execute(
            "SELECT id, text, namespace, kind, source, key, importance, created_at, last_used_at,"
            " metadata, features FROM memories WHERE id = ?", (id,)).fetchall()
        if not rows:
            return None
        r = rows[0]
        return Item(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
                    json.loads(r[9]) if r[9] else None, tuple(r[10].split()))

    # -- recall --------------------------------------------------------------------

    def _links(self, namespace: str, qt: str, config: ScoringConfig) -> bytes:
        """The link set a recall in namespace with question type qt sees
        (cached until the file's links change)."""
        c = self.connection
        # data_version moves when another connection commits; _links_gen when
        # this one writes links (its own recall-log inserts leave the cache be)
        version = (c.execute("PRAGMA data_version").fetchall()[0][0], self._links_gen)
        with self._lock:
            if version != self._links_version:
                self._links_cache.clear()
                self._links_version = version
            key = (namespace, qt, config.pooled_pseudocount)
            blob = self._links_cache.get(key)
            if blob is None:
                blob = bytes(c.execute(_LINKS_SQL, {
                    "namespace": namespace, "qtype": qt,
                    "pseudocount": float(config.pooled_pseudocount)}).fetchall()[0][0])
                self._links_cache[key] = blob
            return blob

    @_locked
    def recall(self, query: str, *, k: int = 5, namespace: str = "default",
               now: Timestamp | None = None, config: ScoringConfig | None = None,
               track: bool = True) -> Recall:
        """The k memories of the namespace most worth putting in the prompt for
        this query.

        Candidates are the FTS5 BM25 top `config.candidates` for the query's
        terms (stop words dropped; the query is always treated as text, never
        as FTS5 syntax); they are re-ranked by relevance x recency x importance
        x learned usefulness x rules in C.  A query with no searchable term
        ("" or only stop words) returns an empty Recall without scanning.
        track=True records the recall so feedback() can refer to it by
        recall_id; track=False records nothing.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an integer, got {type(k).__name__}")
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be from 1 to {MAX_K}, got {k}")
        namespace = _check_namespace(namespace)
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        t = self._now(now)
        if "\x00" in query:
            query = query.replace("\x00", " ")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("query is not valid Unicode (it holds a lone surrogate)") from None
        qt = _native.qtype(query)
        match = _native.match(query, namespace)
        c = self.connection
        hybrid = self._embedder is not None and config.lexical_weight < 1 and query.strip()
        if match is None and not hybrid:
            return Recall(query, namespace, qt, [], None, config, b"")
        params = {"question": query, "namespace": namespace, "now": t,
                  "candidates": config.candidates}
        if hybrid:
            params["qvec"] = self._embed([query])[0].tobytes()
        results: list[Result] = []
        # the links, the candidates and what the winners show: one snapshot
        c.execute("SAVEPOINT heapmem_recall")
        try:
            links = self._links(namespace, qt, config)
            rows = c.execute(_HYBRID_SQL if hybrid else _CANDIDATES_SQL, params).fetchall()
            if rows:
                # rows: seq, rank (BM25, lower is better; NULL: found by vectors only),
                # importance, age_days, superseded, features [, cos]
                rank = np.array([r[1] if r[1] is not None else 0.0 for r in rows],
                                dtype=np.float64)
                best = rank.min()
                lexical = rank / best if best < 0 else np.ones_like(rank)
                if hybrid:
                    lexical = np.where([r[1] is None for r in rows], 0.0, lexical)
                    cos = np.array([r[6] if r[6] is not None else 0.0 for r in rows])
                    top = cos.max()
                    cosn = np.clip(cos, 0.0, None) / top if top > 0 else np.zeros_like(cos)
                    a = config.lexical_weight
                    rel = a * lexical + (1 - a) * cosn
                else:
                    rel = lexical
                age = np.array([r[3] for r in rows], dtype=np.float64)
                imp = np.array([r[2] for r in rows], dtype=np.float64)
                sup = np.array([r[4] for r in rows], dtype=np.intc)
                feats = [r[5] for r in rows]
                out = _native.score_batch(rel, age, imp, sup, feats, qt, links, config._c)
                seq = np.array([r[0] for r in rows], dtype=np.int64)
                order = np.lexsort((seq, -out[:, 5]))[:k]
                shown = {s[0]: s for s in c.execute(
                    _SHOW_SQL, {"seqs": json.dumps([rows[i][0] for i in order])})}
        finally:
            c.execute("RELEASE heapmem_recall")
        if rows:
            for i in order:
                r = rows[i]
                m = shown.get(r[0])
                if m is None:  # cannot happen inside the snapshot; never a half result
                    continue
                f = out[i]
                results.append(Result(
                    rank=len(results) + 1, id=m[1], text=m[2], score=float(f[5]), kind=m[3],
                    source=m[4], key=m[5], relevance=float(f[0]), recency=float(f[1]),
                    importance=float(f[2]), usefulness=float(f[3]), rules=float(f[4]),
                    bm25=float(-rank[i]), age_days=float(age[i]), superseded=bool(r[4]),
                    features=tuple(feats[i].split()), created_at=m[6], last_used_at=m[7],
                    metadata=json.loads(m[8]) if m[8] else None,
                    lexical=float(lexical[i]) if hybrid else None,
                    cosine=float(cosn[i]) if hybrid else None))
        recall_id = None
        if track and results and not self.readonly:
            with self._write() as w:
                w.execute("INSERT INTO recalls(id, namespace, query, qtype, created_at, shown, ages,"
                          " features, rest) "
                          "VALUES (1 + max(coalesce((SELECT max(id) FROM recalls), 0), coalesce(("
                          "SELECT CAST(value AS INTEGER) FROM heapmem_meta WHERE key = "
                          "'last_recall'), 0)), ?, ?, ?, ?, ?, ?, ?, ?)",
                          (namespace, query, qt, t, json.dumps([r.id for r in results]),
                           json.dumps([r.age_days for r in results]),
                           json.dumps([" ".join(r.features) for r in results]),
                           json.dumps([r.relevance ** config.w_relevance
                                       * r.recency ** config.w_recency
                                       * r.importance ** config.w_importance * r.rules
                                       for r in results])))
                recall_id = w.last_insert_rowid()
        return Recall(query, namespace, qt, results, recall_id, config, links)

    def recall_sql(self, query: str, *, k: int = 5, namespace: str = "default",
                   now: Timestamp | None = None,
                   config: ScoringConfig | None = None) -> tuple[str, dict[str, Any]]:
        """The one SQL statement that ranks like recall(), and its parameters,
        for any SQLite client with the library loaded: run it as
        `conn.execute(sql, params)`.  It returns id, text, score.  It is the
        lexical recall: on a store opened with an embedder, recall() also
        unites vector candidates, which this statement leaves out."""
        config = config or self.config
        return RECALL_SQL, {"question": query, "namespace": _check_namespace(namespace),
                            "now": self._now(now), "k": k, "candidates": config.candidates,
                            "pseudocount": float(config.pooled_pseudocount),
                            "config": config.to_sql()}

    # -- feedback ----------------------------------------------------------------

    def _resolve_recall(self, c: apsw.Connection, recall_id: Any,
                        ids: list[str]
                        ) -> tuple[int, str, str, list[str], list[float], list[str]]:
        if recall_id is None:
            if not ids:
                raise ValueError("feedback needs a recall_id (or ids to find the recall by)")
            # the newest recall that showed every given id
            # (one JSON parameter: any number of ids, no SQL depth or variable limit)
            rows = c.execute("SELECT r.id FROM recalls AS r WHERE NOT EXISTS (SELECT 1 FROM "
                             "json_each(?) AS g WHERE g.value NOT IN (SELECT value FROM "
                             "json_each(r.shown))) ORDER BY r.id DESC LIMIT 1",
                             (json.dumps(ids),)).fetchall()
            if not rows:
                raise ValueError("no tracked recall showed all of these ids; pass recall_id")
            recall_id = rows[0][0]
        if isinstance(recall_id, str) and recall_id.strip().isdigit():
            recall_id = int(recall_id)
        if isinstance(recall_id, bool) or not isinstance(recall_id, int):
            raise TypeError(f"recall_id must be an integer, got {type(recall_id).__name__}")
        if not -(1 << 63) <= recall_id < (1 << 63):  # SQLite integers are 64-bit
            raise ValueError(f"unknown recall_id {recall_id} (never recorded, or forgotten)")
        rows = c.execute("SELECT namespace, qtype, shown, ages, features FROM recalls "
                         "WHERE id = ?", (recall_id,)).fetchall()
        if not rows:
            raise ValueError(f"unknown recall_id {recall_id} (never recorded, or forgotten)")
        ns, qt, shown, ages, feats = rows[0]
        return recall_id, ns, qt, json.loads(shown), json.loads(ages), json.loads(feats)

    def _judge(self, recall_id: Any, used: Any, ignored: Any, rest_ignored: bool,
               now: Timestamp | None) -> Feedback:
        used_ids = _check_ids(used, "used")
        ignored_ids = _check_ids(ignored, "ignored") if ignored is not None else []
        both = set(used_ids) & set(ignored_ids)
        if both:
            raise ValueError(f"ids both used and ignored: {sorted(both)}")
        t = self._now(now)
        config = self.config
        with self._write() as c:
            rid, ns, qt, shown, ages, shown_feats = self._resolve_recall(
                c, recall_id, used_ids + ignored_ids)
            pos = {mid: i for i, mid in enumerate(shown)}
            not_shown = [i for i in used_ids + ignored_ids if i not in pos]
            if not_shown:
                raise ValueError(f"recall {rid} did not show {not_shown}; feedback can only "
                                 "judge memories that recall returned")
            judged = {r[0] for r in c.execute("SELECT position FROM events WHERE recall_id = ?",
                                              (rid,))}
            again = [i for i in used_ids + ignored_ids if pos[i] in judged]
            if again:
                raise ValueError(f"recall {rid} already has feedback for {again}; "
                                 "each shown memory is judged once")
            if rest_ignored:
                ignored_ids = ignored_ids + [m for m in shown if m not in used_ids
                                             and m not in ignored_ids and pos[m] not in judged]
            alive = {r[0] for r in c.execute(
                "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(used_ids + ignored_ids),))}
            gone = [mid for mid in used_ids if mid not in alive]
            if gone:
                raise ValueError(f"memory {gone[0]!r} no longer exists (forgotten)")
            # as the recall scored them (an ignored memory forgotten since is skipped)
            feats = {mid: shown_feats[pos[mid]] for mid in used_ids + ignored_ids if mid in alive}
            used_set = set(used_ids)
            links = None
            if config.model == 0:  # the reference credit depends on current strengths
                links = bytes(c.execute(_LINKS_SQL, {
                    "namespace": ns, "qtype": qt,
                    "pseudocount": float(config.pooled_pseudocount)  # an int may exceed 64 bits
                }).fetchall()[0][0])
            # one statement writes the events (heap_credit works out each one's
            # deltas in C), one folds them into both layers of links
            judged_rows = [[pos[mid], int(mid in used_set), feats[mid], ages[pos[mid]]]
                           for mid in used_ids + ignored_ids if mid in feats]
            nfeatures = 0
            if judged_rows:
                params = {"rid": rid, "namespace": ns, "qtype": qt, "now": t,
                          "judged": json.dumps(judged_rows), "links": links,
                          "config": config.to_sql()}
                c.execute(_EVENTS_SQL, params)
                c.execute(_FOLD_SQL, params)
                nfeatures = c.changes() // 2
                self._links_gen += 1
            if used_ids:
                c.execute("UPDATE memories SET last_used_at = max(coalesce(last_used_at, 0), ?)"
                          " WHERE id IN (SELECT value FROM json_each(?))",
                          (t, json.dumps(used_ids)))
        return Feedback(rid, tuple(used_ids), tuple(m for m in ignored_ids if m in feats),
                        nfeatures)

    def feedback(self, used: Iterable[str] = (), *, recall_id: int | None = None,
                 ignored: Iterable[str] | None = None, now: Timestamp | None = None) -> Feedback:
        """Tell heapmem which memories of a recall the answer used.

        Every other memory the recall showed counts as ignored, unless
        `ignored` lists the ignored ones explicitly (the rest then stay
        unjudged).  Used memories confirm their features' links in proportion
        to each link's current strength; ignored ones count one failure per
        feature.  Each shown memory can be judged once: judging it again
        raises ValueError.  Without recall_id, the newest recall that showed
        all the given ids is meant.  Unknown ids or recall, ids the recall did
        not show, or a bare string for `used`: ValueError/TypeError, and
        nothing is written.
        """
        return self._judge(recall_id, used, ignored, ignored is None, now)

    def mark_used(self, ids: Iterable[str], *, recall_id: int | None = None,
                  now: Timestamp | None = None) -> Feedback:
        """Judge only these memories of a recall as used (others stay unjudged)."""
        return self._judge(recall_id, ids, [], False, now)

    def mark_ignored(self, ids: Iterable[str], *, recall_id: int | None = None,
                     now: Timestamp | None = None) -> Feedback:
        """Judge only these memories of a recall as ignored."""
        return self._judge(recall_id, [], ids, False, now)

    @_locked
    def explain_usefulness(self, namespace: str = POOLED, *,
                           config: ScoringConfig | None = None) -> list[LinkRow]:
        """The learned links as `namespace` sees them ('*': the pooled layer),
        strongest first: feature, strength (posterior mean), n (events)."""
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        if namespace != POOLED:
            namespace = _check_namespace(namespace)
        c = self.connection
        out: list[tuple[str, float, float, int]] = []
        if namespace == POOLED:
            out = c.execute("SELECT feature, alpha, beta, n FROM links WHERE namespace = '*'"
                            ).fetchall()
        else:
            rows = c.execute(
                "SELECT p.feature, coalesce(o.alpha, 0), coalesce(o.beta, 0), p.alpha, p.beta, "
                "coalesce(o.n, 0) FROM links AS p LEFT JOIN links AS o ON o.namespace = ? AND "
                "o.feature = p.feature WHERE p.namespace = '*'", (namespace,))
            for f, oa, ob, pa, pb, n in rows:
                a, b = _native.link_view(oa, ob, pa, pb, config.pooled_pseudocount)
                out.append((f, a, b, n))
        res = [LinkRow(f, (config.prior_alpha + a) / (config.prior_alpha + config.prior_beta + a + b),
                       n, a, b) for f, a, b, n in out]
        res.sort(key=lambda r: (-r.strength, r.feature))
        return res

    # -- forgetting ----------------------------------------------------------------

    def forget(self, ids: Iterable[str] | None = None, *, namespace: str | None = None) -> int:
        """Erase memories: the given ids, or a whole namespace.  Their text
        leaves the table and the FTS index (secure_delete overwrites freed
        pages), and recall log entries that showed them (or, for a namespace,
        all its recalls) are dropped with their query text.  What they taught
        the learned links stays: links hold feature statistics only, never text
        or ids.  Unknown ids raise ValueError and nothing is erased.  Returns the
        number of memories erased."""
        if (ids is None) == (namespace is None):
            raise ValueError("forget needs either ids or namespace=..., not both")
        with self._write() as c:
            # remember the highest seq and recall id, so that the id of a
            # forgotten memory or recall is never given to a new one
            c.execute("INSERT INTO heapmem_meta(key, value) VALUES "
                      "('last_seq', (SELECT coalesce(max(seq), 0) FROM memories)), "
                      "('last_recall', (SELECT coalesce(max(id), 0) FROM recalls)) "
                      "ON CONFLICT(key) DO UPDATE SET value ="
                      " max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))")
            if namespace is not None:
                namespace = _check_namespace(namespace)
                n = c.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                              (namespace,)).fetchall()[0][0]
                c.execute("DELETE FROM memories WHERE namespace = ?", (namespace,))
                c.execute("UPDATE events SET recall_id = NULL WHERE namespace = ?", (namespace,))
                c.execute("DELETE FROM recalls WHERE namespace = ?", (namespace,))
            else:
                id_list = _check_ids(ids, "ids")
                for i in id_list:
                    _check_name(i, "id")
                missing = [i for i in id_list if not c.execute(
                    "SELECT 1 FROM memories WHERE id = ?", (i,)).fetchall()]
                if missing:
                    raise ValueError(f"unknown memory ids {missing}; nothing was forgotten")
                c.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in id_list])
                gone = json.dumps(id_list)
                doomed = [r[0] for r in c.execute(
                    "SELECT DISTINCT r.id FROM recalls AS r, json_each(r.shown) AS s "
                    "WHERE s.value IN (SELECT value FROM json_each(?))", (gone,))]
                c.executemany("UPDATE events SET recall_id = NULL WHERE recall_id = ?",
                              [(r,) for r in doomed])
                c.executemany("DELETE FROM recalls WHERE id = ?", [(r,) for r in doomed])
                n = len(id_list)
            # FTS5 keeps a deleted row's terms in its old index segments until a
            # merge: merge them all now, so the terms leave the index (and
            # secure_delete zeroes the pages they held).  Its 'secure-delete'
            # option would be cheaper, but it moves the index to a format that
            # SQLite before 3.42 cannot read, and the file is meant for any client.
            if n:
                c.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        # the WAL still holds the old pages: copy the erased ones into the file
        # and empty the WAL.  A TRUNCATE checkpoint stalls every writer while it
        # waits for readers, so it waits 0.25 s at most; if other connections
        # are busy then, the old pages stay in the -wal file until a later
        # complete checkpoint (at the latest when the last connection closes)
        with self._lock:
            c = self.connection
            c.setbusytimeout(250)
            try:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.BusyError:
                pass
            finally:
                c.setbusytimeout(10_000)
        return n

    # -- tuning --------------------------------------------------------------------

    def tune(self, *, deploy: bool = True, seed: int = 0) -> "TuneReport":
        """Replay the logged recalls under other usefulness weights with
        grouped cross-validation, and deploy the best one only if it is
        significantly better than the weight in force (saved in the store,
        used by every later open without an explicit config).  Returns what it
        measured and why it did or did not deploy."""
        from .tune import tune
        return tune(self, deploy=deploy, seed=seed)

    def _set_tuned(self, changes: dict[str, float]) -> None:
        new = self.config.replace(**changes)
        with self._write() as c:
            c.execute("INSERT INTO heapmem_meta(key, value) VALUES ('tuned', ?) "
                      "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                      (json.dumps(new.to_dict(), sort_keys=True),))
        self.config = new

    # -- checking ------------------------------------------------------------------

    @_locked
    def check(self) -> CheckReport:
        """Check the store: SQLite's integrity_check, the FTS index against the
        memories table, each namespace's BM25 statistics against its memories,
        and the links against a replay of the event log."""
        c = self.connection
        problems = []
        ic = [r[0] for r in c.execute("PRAGMA integrity_check")]
        if ic != ["ok"]:
            problems += [f"integrity_check: {m}" for m in ic]
        if self.readonly:
            # FTS5's 'integrity-check' command is a write, refused here: check
            # only that the index and the table hold the same rows
            odd = c.execute("SELECT count(*) FROM memories AS m FULL JOIN memories_fts_docsize"
                            " AS d ON d.id = m.seq WHERE m.seq IS NULL OR d.id IS NULL"
                            ).fetchall()[0][0]
            if odd:
                problems.append(f"FTS index does not match the memories table: {odd} rows "
                                "are in only one of them")
        else:
            try:
                c.execute("INSERT INTO memories_fts(memories_fts, rank) "
                          "VALUES ('integrity-check', 1)")
            except apsw.Error as e:
                problems.append(f"FTS index does not match the memories table: {e}")
        if c.execute("SELECT 1 FROM heapmem_meta WHERE key = 'fts_deferred'").fetchall():
            problems.append("heapmem_meta holds 'fts_deferred': the FTS index trigger is off "
                            "for every writer (delete that row)")
        # each namespace's BM25 statistics against its memories
        odd = c.execute("SELECT count(*) FROM memories WHERE ntok IS NOT "
                        + _ntok_sql("nstag", "text")).fetchall()[0][0]
        if odd:
            problems.append(f"namespace statistics: {odd} memories have a wrong token count")
        odd = c.execute("SELECT count(*) FROM (SELECT namespace, count(*) AS docs, sum(ntok) AS "
                        "tokens FROM memories GROUP BY namespace) AS t FULL JOIN namespaces AS s "
                        "USING (namespace) WHERE t.docs IS NOT s.docs OR t.tokens IS NOT s.tokens"
                        ).fetchall()[0][0]
        if odd:
            problems.append(f"namespace statistics: {odd} namespaces disagree with their memories")
        replay: dict[tuple[str, str], list[float]] = {}
        nevents = 0
        for ns, deltas in c.execute("SELECT namespace, deltas FROM events ORDER BY id"):
            nevents += 1
            for f, da, db in json.loads(deltas):
                for layer in (ns, POOLED):
                    r = replay.setdefault((layer, f), [0.0, 0.0, 0])
                    r[0] += da
                    r[1] += db
                    r[2] += 1
        # pooled evidence merged from a links-only export (heapmem.transfer): no events
        prior = c.execute("SELECT value FROM heapmem_meta WHERE key = 'links_prior'").fetchall()
        for f, (a, b, n) in (json.loads(prior[0][0]) if prior else {}).items():
            r = replay.setdefault((POOLED, f), [0.0, 0.0, 0])
            r[0] += a
            r[1] += b
            r[2] += n
        stored = {(ns, f): (a, b, n) for ns, f, a, b, n in c.execute(
            "SELECT namespace, feature, alpha, beta, n FROM links")}
        for key, (a, b, n) in replay.items():
            s = stored.get(key)
            if s is None or abs(s[0] - a) > 1e-6 * max(1, a) or abs(s[1] - b) > 1e-6 * max(1, b) \
                    or s[2] != n:
                problems.append(f"link {key[0]}:{key[1]} is {s}, the event log gives "
                                f"({a:.6g}, {b:.6g}, {n})")
        for key in stored:
            if key not in replay:
                problems.append(f"link {key[0]}:{key[1]} has no events behind it")
        nmem = c.execute("SELECT count(*) FROM memories").fetchall()[0][0]
        return CheckReport(not problems, tuple(problems[:100]), nmem, nevents, len(stored))


def open(path: str, *, clock: Callable[[], Timestamp] = time.time,
         config: ScoringConfig | None = None, readonly: bool = False,
         embedder: Callable[[list[str]], Any] | None = None, reembed: bool = False,
         durable: bool = False) -> Memory:
    """Open (or create) the heapmem store at path.

    The connection runs in WAL mode with a busy timeout, and the schema is
    created or migrated in one transaction.  A SQLite file that is not a
    heapmem store raises NotAStoreError, one written by a newer heapmem raises
    SchemaVersionError; neither is modified.  clock() gives the time (unix
    seconds or a datetime) when a call has no now=; a fixed clock makes every
    output reproducible.  readonly=True opens without writing anything: recall
    works (nothing is tracked), writes raise ReadOnlyError.

    embedder (optional) turns recall hybrid: a callable from a list of texts
    to a 2-D float array, with a .name naming its model.  Vectors live in the
    file (float32); the model's name and dimension are recorded, and opening
    with another embedder raises HeapmemError unless reembed=True, which
    embeds every memory again.  Memories added without an embedder are
    embedded when the store is next opened with one.

    Commits survive the process dying at any point; durable=True also makes
    them survive an OS crash or power cut (synchronous=FULL), at the cost of
    a disk sync per commit.
    """
    return Memory(path, clock=clock, config=config, readonly=readonly, embedder=embedder,
                  reembed=reembed, durable=durable)
