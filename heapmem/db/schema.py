"""The file: its schema, its migrations, the check of a file on open, and
the heapmem_meta keys.

Owns: the DDL of every schema version and the numbered steps between them
(PRAGMA user_version), how every connection is configured, what makes a
SQLite file a heapmem store, the meta keys (each named once, below) with
typed get and set, the switch that defers FTS indexing inside one
transaction, and the table layout that export and import walk.  Nothing
else in heapmem runs DDL or names a meta key.
"""
from __future__ import annotations

import functools
import json
import time
from typing import Any, Callable, Iterable, Iterator, Protocol

import apsw

from .._version import __version__
from ..db import native
from ..errors import (
    CorruptStoreError,
    NotAStoreError,
    SchemaVersionError,
    UnsafeStoreError,
    from_sqlite,
)

#: The schema version this heapmem writes (PRAGMA user_version).
SCHEMA_VERSION = 10

#: How the pooled layer is built from the namespaces' own links (a new
#: store's defaults, kept in the file under META_POOL):
#: - cap: the most observations of a link one namespace weighs in the pool
#:   (its counts are scaled down beyond that, its rate kept);
#: - min: how many namespaces must back a link before any of their evidence
#:   is pooled;
#: - trim: how many namespaces with the highest, and how many with the lowest,
#:   rate of use are left out of each pooled link (a trimmed sum: one or two
#:   colluding tenants are always among the left out when they push a link
#:   further than every honest one).
POOL_DEFAULTS = {"cap": 300.0, "min": 5, "trim": 2}
#: How many namespaces a links-only prior counts as in a link's support.
PRIOR_SUPPORT = 3
#: The most observations a links-only prior may weigh for one link, in all.
PRIOR_MAX_WEIGHT = 100.0
#: How long opening may spend checking a file (seconds), before any migration.
OPEN_DEADLINE = 10.0
#: The most page cache one connection keeps, in KiB (PRAGMA cache_size): 64 MiB
#: where SQLite's default is 2 MiB; a small store never fills it.
CACHE_KIB = 65536

# -- heapmem_meta keys -------------------------------------------------------------

#: 'heapmem': marks the file as a store.
META_FORMAT = "format"
#: the heapmem version that created the file.
META_CREATED_WITH = "created_with"
#: the ScoringConfig that tune() deployed (JSON).
META_TUNED = "tuned"
#: the embedder's name and dimension (hybrid recall).
META_EMBEDDER = "embedder"
META_EMBEDDING_DIM = "embedding_dim"
#: the embedder the C core carries (csrc/embed.c): a store that names it
#: gets its vectors from the schema's own triggers (version 8), from any door
BUILTIN_EMBEDDER = "potion-base-8M"
BUILTIN_DIM = 256
#: the first 4 bytes of a vector in the library's int4 format (a float32 NaN,
#: so never the start of a float32 vector the store holds; csrc/embed.c), and
#: its length for BUILTIN_DIM components (two to a byte)
INT4_VECTOR_MAGIC = b"h\x04\xc8\x7f"
BUILTIN_VECTOR_BYTES = 4 + BUILTIN_DIM // 2
#: high-water marks: a forgotten memory's seq or recall's id is never reused.
META_LAST_SEQ = "last_seq"
META_LAST_RECALL = "last_recall"
#: pooled evidence merged from links-only files ({feature: [alpha, beta, n]}).
META_LINKS_PRIOR = "links_prior"
#: the SHA-256 of each links-only file merged (JSON list).
META_LINKS_PRIOR_FILES = "links_prior_files"
#: each links-only prior merged, by digest: its file's name, when, its links
#: (JSON object; heapmem.learning.priors keeps links_prior their bounded sum).
META_PRIORS = "prior_records"
#: present only inside heapmem's own write transactions (never committed).
META_FTS_DEFERRED = "fts_deferred"
#: how the pooled layer is built (JSON, see POOL_DEFAULTS).
META_POOL = "pool"
#: auto-tune's place on its schedule (JSON {"point": the last point of the
#: doubling schedule claimed, 0 for none; "judged": the judged recalls as
#: counted at the last feedback, null when unknown; and while the tune a point
#: claimed runs in steps, "tune": {"point", "judged", "events" and "recalls":
#: the log it reads, "epoch", "idle"}, AUTOTUNE_TUNE_KEYS}).  The C core keeps it:
#: heap_feedback and heap_answer count and claim points (csrc/tune.c),
#: heap_forget marks the count unknown; an import marks it unknown too
#: (autotune_recount, the same statement: AUTOTUNE_RECOUNT); autotune_state
#: reads it.
META_AUTOTUNE = "autotune"
#: auto-tune's count marked unknown, its point kept (csrc/schema.h has it as
#: HM_AUTOTUNE_RECOUNT, for heap_forget)
AUTOTUNE_RECOUNT = (f"UPDATE heapmem_meta SET value = json_set(value, '$.judged', json('null')) "
                    f"WHERE key = '{META_AUTOTUNE}' AND json_valid(value) "
                    f"AND json_type(value) = 'object'")

#: The keys of META_AUTOTUNE's "tune" (csrc/tune.c, ht_state_write).
AUTOTUNE_TUNE_KEYS = ("point", "judged", "events", "recalls", "epoch", "idle")

#: the vector index's settings (JSON, see VECTOR_INDEX_DEFAULTS; absent: the
#: defaults), written by heap_vector_settings (csrc/vindex.c)
META_VECTOR_INDEX = "vector_index"
#: the highest partition id the vector index has given (never reused, so a
#: connection's cache can keep a partition by its id)
META_LAST_PART = "last_part"
#: The vector index (csrc/vindex.c): a namespace of at least `threshold`
#: vectors gets partitions of about `size` vectors (k-means, seeded by
#: `seed`); recall scans the partitions nearest the question until it has
#: scanned the larger share of the namespace's n vectors of `probe` and
#: (threshold / n) ** (1/3), or `size` x 8 if more; a namespace below the
#: threshold is scanned whole, exactly.
VECTOR_INDEX_DEFAULTS = {"threshold": 20000, "size": 512, "probe": 0.25, "seed": 0}

#: Keys the file records about itself; never exported or imported.
META_OWN = (META_FORMAT, META_CREATED_WITH, META_AUTOTUNE, META_VECTOR_INDEX, META_LAST_PART)
#: Every key heapmem writes.
META_KEYS = (META_FORMAT, META_CREATED_WITH, META_TUNED, META_EMBEDDER, META_EMBEDDING_DIM,
             META_LAST_SEQ, META_LAST_RECALL, META_LINKS_PRIOR, META_LINKS_PRIOR_FILES,
             META_FTS_DEFERRED, META_POOL, META_PRIORS, META_AUTOTUNE, META_VECTOR_INDEX,
             META_LAST_PART)


class Cursor(Protocol):
    """The rows of a statement.  A row is a tuple of Any: its columns' types
    are the statement's (sql.py), which a type checker cannot read."""

    def __iter__(self) -> Iterator[tuple[Any, ...]]: ...
    def fetchall(self) -> list[tuple[Any, ...]]: ...
    def fetchone(self) -> tuple[Any, ...] | None: ...


class Connection(Protocol):
    """The connection a store runs on, as heapmem's modules use it: an
    apsw.Connection for a file, a remote.RemoteConnection for a store on a
    libSQL server (the same methods)."""

    def execute(self, statements: str, bindings: Any = None, /) -> Cursor: ...
    def executemany(self, statements: str, bindings: Iterable[Any], /) -> Cursor: ...
    def changes(self) -> int: ...
    def last_insert_rowid(self) -> int: ...
    def getautocommit(self) -> bool: ...
    def close(self) -> None: ...
    def setbusytimeout(self, ms: int, /) -> None: ...
    def setprogresshandler(self, handler: Callable[[], bool] | None, steps: int = ..., /
                           ) -> None: ...
    def config(self, op: int, value: int, /) -> int: ...
    def enable_load_extension(self, enable: bool, /) -> None: ...
    def load_extension(self, filename: str, /) -> None: ...


def meta_get(c: Connection, key: str) -> str | None:
    """The value of a meta key, or None."""
    rows = c.execute("SELECT value FROM heapmem_meta WHERE key = ?", (key,)).fetchall()
    return rows[0][0] if rows else None


def meta_int(c: Connection, key: str) -> int:
    """A meta key's integer value (0 when absent or not an integer)."""
    v = meta_get(c, key)
    try:
        return int(v) if v is not None else 0
    except (TypeError, ValueError):
        return 0


def meta_json(c: Connection, key: str, default: Any) -> Any:
    """A meta key's JSON value, or default when absent."""
    v = meta_get(c, key)
    return json.loads(v) if v is not None else default


def meta_set(c: Connection, key: str, value: str) -> None:
    """Set a meta key (inside the caller's write transaction)."""
    c.execute("INSERT INTO heapmem_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
              "SET value = excluded.value", (key, value))


def meta_raise_int(c: Connection, key: str, sql_value: str) -> None:
    """Raise an integer meta key to the value of the SQL expression sql_value,
    never lowering it (a high-water mark)."""
    c.execute(f"INSERT INTO heapmem_meta(key, value) VALUES (?, ({sql_value})) "
              "ON CONFLICT(key) DO UPDATE SET value ="
              " max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))", (key,))


def meta_problems(c: Connection) -> list[str]:
    """What is wrong with the file's meta rows (check()): keys heapmem does not
    write, and values of the wrong type (raw SQL writes can leave either)."""
    from ..config import ScoringConfig

    out = []
    for k, v in c.execute("SELECT key, value FROM heapmem_meta").fetchall():
        if k not in META_KEYS:
            out.append(f"unknown key {k!r}")
            continue
        try:
            if k in (META_LAST_SEQ, META_LAST_RECALL, META_EMBEDDING_DIM, META_LAST_PART):
                int(v)
            elif k == META_TUNED:
                ScoringConfig.from_dict(json.loads(v))
            elif k in (META_POOL, META_LINKS_PRIOR, META_PRIORS, META_VECTOR_INDEX):
                if not isinstance(json.loads(v), dict):
                    raise ValueError("not a JSON object")
            elif k == META_LINKS_PRIOR_FILES:
                if not isinstance(json.loads(v), list):
                    raise ValueError("not a JSON list")
            elif k == META_AUTOTUNE:
                _autotune_value(v)
        except (ValueError, TypeError, RecursionError, AttributeError) as e:
            out.append(f"{k!r} holds a value heapmem cannot use ({e})")
    return out


def meta_items(c: Connection) -> list[tuple[str, str]]:
    """Every meta key and value but the file's own (format, created_with)."""
    return c.execute(f"SELECT key, value FROM heapmem_meta WHERE key NOT IN "
                     f"({', '.join('?' * len(META_OWN))}) ORDER BY key", META_OWN).fetchall()


def _autotune_value(v: str) -> tuple[int, int | None]:
    """META_AUTOTUNE's value read: (point, judged or None); ValueError if it
    is not what heap_feedback writes (csrc/tune.c)."""
    d = json.loads(v)
    if not (isinstance(d, dict) and set(d) in ({"point", "judged"}, {"point", "judged", "tune"})):
        raise ValueError("not a JSON object of point and judged (and tune)")
    tune = d.get("tune", {k: 0 for k in AUTOTUNE_TUNE_KEYS})
    if not (isinstance(tune, dict) and set(tune) == set(AUTOTUNE_TUNE_KEYS)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                    for x in tune.values())):
        raise ValueError(f"tune must hold the whole numbers {', '.join(AUTOTUNE_TUNE_KEYS)}")
    point, judged = d["point"], d["judged"]
    if isinstance(point, bool) or not isinstance(point, int) or point < 0:
        raise ValueError(f"point must be a whole number, got {point!r}")
    if judged is not None and (isinstance(judged, bool) or not isinstance(judged, int)
                               or judged < 0):
        raise ValueError(f"judged must be a whole number or null, got {judged!r}")
    return point, judged


def autotune_state(c: Connection) -> tuple[int, int | None]:
    """Auto-tune's place on its schedule: (the last point claimed, 0 for
    none; the judged recalls as last counted, None when unknown: never
    counted, imported into, or a value heapmem cannot read, so that the next
    feedback counts again)."""
    v = meta_get(c, META_AUTOTUNE)
    if v is None:
        return 0, None
    try:
        return _autotune_value(v)
    except (ValueError, TypeError, RecursionError):
        return 0, None


def autotune_pending(c: Connection) -> dict[str, int] | None:
    """The tune under way in steps (META_AUTOTUNE's "tune": the point it
    tunes for, the count then, the newest event and recall of the log it
    reads, its epoch and the feedbacks since its owner's last step), or None."""
    v = meta_get(c, META_AUTOTUNE)
    try:
        _autotune_value(v or "")
        return dict(json.loads(v or "").get("tune")) if json.loads(v or "").get("tune") else None
    except (ValueError, TypeError, RecursionError):
        return None


def autotune_recount(c: Connection) -> None:
    """Mark auto-tune's count of judged recalls unknown (after an import,
    which adds judged recalls other than feedback's), keeping its point; the
    next feedback counts them all again (heap_forget does the same in C)."""
    c.execute(AUTOTUNE_RECOUNT)


# -- DDL ---------------------------------------------------------------------------

# The trigger that keeps the FTS index current when a memory's text or tag
# changes (version 1; version 7 drops it for a while and makes it again).
_MEMORIES_AU = """CREATE TRIGGER memories_au AFTER UPDATE OF nstag, text ON memories BEGIN
  INSERT INTO memories_fts(memories_fts, rowid, nstag, text)
    VALUES ('delete', old.seq, old.nstag, old.text);
  INSERT INTO memories_fts(rowid, nstag, text) VALUES (new.seq, new.nstag, new.text);
END;"""

_SCHEMA_V1 = f"""
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
{_MEMORIES_AU}
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


def ntok_sql(nstag: str, text: str) -> str:
    """SQL for a memory's FTS5 token count (memories.ntok), given SQL for its
    namespace tag and its text: the tokens of every indexed column, as
    %_docsize counts them."""
    return f"heap_ntokens({nstag}) + heap_ntokens({text})"


# Version 3: each namespace's own BM25 statistics (its memories and their FTS5
# tokens), kept by plain-SQL triggers, so that a namespace ranks (and costs) as
# if it were alone in the file.  ntok is ntok_sql(nstag, text).
# And add_many() indexes its rows in one statement: FTS5 flushes its pending
# index at every statement boundary, and a trigger is one per row (4-5x slower
# to build).  Inside add_many()'s transaction the 'fts_deferred' meta row, never
# committed, turns the per-row trigger off; any other writer still gets it.
_SCHEMA_V3 = f"""
ALTER TABLE memories ADD COLUMN ntok INTEGER NOT NULL DEFAULT 0;
UPDATE memories SET ntok = {ntok_sql("nstag", "text")};
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


def defer_fts(c: Connection) -> None:
    """Inside the current write transaction, switch off the per-row FTS
    trigger (see _SCHEMA_V3); index_deferred() indexes the rows and turns it
    back on before the commit, so the switch is never seen outside."""
    meta_set(c, META_FTS_DEFERRED, "1")


def index_deferred(c: Connection, first_seq: int) -> None:
    """Index, in one statement, the memories added since defer_fts() (every
    seq >= first_seq), add their terms to bm25_terms, and switch the per-row
    triggers back on."""
    c.execute("INSERT INTO memories_fts(rowid, nstag, text) SELECT seq, nstag, text "
              "FROM memories WHERE seq >= ?", (first_seq,))
    c.execute(BM25_TERMS_BUILD, (first_seq, 1 << 62))
    c.execute("DELETE FROM heapmem_meta WHERE key = ?", (META_FTS_DEFERRED,))


def fts_deferred(c: Connection) -> bool:
    """Whether the FTS switch is set outside heapmem's own transaction (a
    damaged file: every writer would skip indexing)."""
    return meta_get(c, META_FTS_DEFERRED) is not None


# Version 4: a pooled layer that no single tenant can hijack.  Each pooled
# row ('*') sums, per feature, what each namespace's own row contributes to
# it, kept on that row (pool_alpha, pool_beta): its counts capped at `cap`
# observations, nothing at all until `min` namespaces back the feature, and
# for the `trim` namespaces with the lowest and the `trim` with the highest
# rate of use, their weight at the nearest rate among the others (a
# winsorized sum: one or two tenants that push a link further than every
# honest one count as if they agreed with the nearest honest one).  A pooled
# row's support counts the namespaces behind it (a prior counts
# PRIOR_SUPPORT); low_rate and high_rate are the lowest and highest rates
# summed as they are (NULL while nothing is pooled), which let feedback
# update a pooled row in place.  heapmem.learning keeps these rows;
# links_feature made reading one feature's rows cheap (links_rate, version 6,
# replaces it).
_SCHEMA_V4 = f"""
ALTER TABLE links ADD COLUMN support INTEGER NOT NULL DEFAULT 0;
ALTER TABLE links ADD COLUMN pool_alpha REAL NOT NULL DEFAULT 0;
ALTER TABLE links ADD COLUMN pool_beta REAL NOT NULL DEFAULT 0;
ALTER TABLE links ADD COLUMN low_rate REAL;
ALTER TABLE links ADD COLUMN high_rate REAL;
CREATE INDEX links_feature ON links(feature);
INSERT INTO heapmem_meta(key, value) VALUES ('{META_POOL}', '{json.dumps(POOL_DEFAULTS)}')
  ON CONFLICT(key) DO NOTHING;
"""

# Version 5: erasing costs what the erased memory costs.  FTS5's secure-delete
# removes a deleted row's terms from the index pages that hold them, at once,
# instead of leaving them there until a merge of the whole index (which forget
# used to run: 0.25 s at 100k memories).  Its price is the index format: once
# a row was deleted this way, FTS5 marks the table version 5, and SQLite
# before 3.42 (2023-05) refuses to query memories_fts.  set_portable(c, True)
# turns it off again (and rebuilds the index in the old format).  The
# optimize step erases what updates under version 4 left in old segments;
# recalls_namespace lets forget look for the recalls that showed a memory in
# its namespace's log only.
_SCHEMA_V5 = """
INSERT INTO memories_fts(memories_fts, rank) VALUES('secure-delete', 1);
INSERT INTO memories_fts(memories_fts) VALUES('optimize');
CREATE INDEX recalls_namespace ON recalls(namespace);
"""

# Version 6: feedback reworks a pooled row from a few rows, however many
# namespaces back its feature.  links_rate keeps each feature's own rows in
# the order the trimming goes by (their rate of use, alpha / (alpha + beta),
# which capping does not change; ties by namespace), so the lowest and the
# highest rates are an index seek away, where they took a scan and a sort of
# every namespace's row (80 ms a feedback with 1,700 namespaces).  It also
# serves every lookup of a feature's own rows, which links_feature did.
_SCHEMA_V6 = """
CREATE INDEX links_rate ON links(feature, alpha / (alpha + beta), namespace)
  WHERE namespace != '*';
DROP INDEX links_feature;
"""

# Version 7: a namespace's tag in the FTS index is its name, spelled in
# digits (heap_ns_tag), where it was a 64-bit hash of it: a name chosen to
# share another tenant's hash shared its index too (its memories moved the
# other's BM25, and its scores told which words the other held).  The tags
# are written anew and the index rebuilt once, in one statement, with the
# per-row trigger off meanwhile (it would delete and insert every row).
# And each links-only prior is kept apart, with where it came from
# (META_PRIORS, heapmem.learning.priors), so that it can be listed and taken out: the
# priors a store merged before, summed as they came, become one record.
_SCHEMA_V7 = f"""
DROP TRIGGER memories_au;
UPDATE memories SET nstag = heap_ns_tag(namespace);
{_MEMORIES_AU}
INSERT INTO memories_fts(memories_fts) VALUES('rebuild');
INSERT INTO heapmem_meta(key, value)
SELECT '{META_PRIORS}', json_object('merged-before-schema-7', json_object(
         'name', NULL, 'merged_at', NULL, 'links', json(value)))
FROM heapmem_meta WHERE key = '{META_LINKS_PRIOR}' AND json_valid(value)
  AND json_type(value) = 'object' AND value != '{{}}'
ON CONFLICT(key) DO NOTHING;
"""

# Version 8: vectors that follow their memory from any door.  A store whose
# embedder is the one the C core carries (BUILTIN_EMBEDDER) gets a memory's
# vector from the insert itself, and a new one when its text changes, by
# plain-SQL triggers calling heap_embed (innocuous: it reads nothing but its
# argument), so the sqlite3 shell, heap_add, Python's batch insert and a
# server all embed alike; any store loses a memory's vector with the memory
# even where foreign keys are off (the sqlite3 shell's default).  And each
# namespace's vector_stamps row counts the vectors added to it and every
# other change (a vector replaced or deleted, a memory forgotten or moved),
# with the highest seq added: a connection's cache of the namespace's
# vectors (csrc/embed.c) reads only what is new when nothing else changed.
# And memories_text finds a memory by its text in its namespace: adding the
# same text (and key) again gives the memory that has it (Memory.add, copy=).
# And judged keeps, per memory, which tracked recalls judged it (used or
# ignored): kept from the events by their trigger, gone with the memory or
# the recall, for contextual utility (ScoringConfig.w_context).
_BUILTIN_IS = (f"(SELECT value FROM heapmem_meta WHERE key = '{META_EMBEDDER}') = "
               f"'{BUILTIN_EMBEDDER}'")
_SCHEMA_V8 = f"""
CREATE TABLE vector_stamps(
  namespace TEXT PRIMARY KEY,
  added     INTEGER NOT NULL,         -- vectors added
  changed   INTEGER NOT NULL,         -- vectors replaced or deleted, memories gone or moved
  last      INTEGER NOT NULL          -- the highest seq added
) WITHOUT ROWID;
INSERT INTO vector_stamps SELECT m.namespace, count(*), 0, max(v.seq)
  FROM vectors AS v JOIN memories AS m ON m.seq = v.seq GROUP BY m.namespace;
CREATE TRIGGER vectors_ai AFTER INSERT ON vectors BEGIN
  INSERT INTO vector_stamps(namespace, added, changed, last)
    SELECT namespace, 1, 0, new.seq FROM memories WHERE seq = new.seq
    ON CONFLICT(namespace) DO UPDATE SET added = added + 1,
      changed = changed + (excluded.last <= last), last = max(last, excluded.last);
END;
CREATE TRIGGER vectors_au AFTER UPDATE ON vectors BEGIN
  UPDATE vector_stamps SET changed = changed + 1
    WHERE namespace IN (SELECT namespace FROM memories WHERE seq IN (old.seq, new.seq));
END;
CREATE TRIGGER vectors_ad AFTER DELETE ON vectors BEGIN
  UPDATE vector_stamps SET changed = changed + 1
    WHERE namespace = (SELECT namespace FROM memories WHERE seq = old.seq);
END;
CREATE TRIGGER memories_vector_ad AFTER DELETE ON memories BEGIN
  DELETE FROM vectors WHERE seq = old.seq;
  UPDATE vector_stamps SET changed = changed + 1 WHERE namespace = old.namespace;
END;
CREATE TRIGGER memories_vector_move AFTER UPDATE OF namespace ON memories BEGIN
  UPDATE vector_stamps SET changed = changed + 1 WHERE namespace IN (old.namespace, new.namespace);
END;
CREATE INDEX memories_text ON memories(namespace, heap_text_hash(text));
CREATE TABLE judged(
  seq       INTEGER NOT NULL,         -- the memory judged
  recall_id INTEGER NOT NULL,         -- the recall that showed it
  used      INTEGER NOT NULL,         -- 1 used, 0 ignored
  PRIMARY KEY(seq, recall_id)
) WITHOUT ROWID;
INSERT OR REPLACE INTO judged(seq, recall_id, used)
  SELECT m.seq, r.id, e.used FROM events AS e CROSS JOIN recalls AS r ON r.id = e.recall_id
  CROSS JOIN memories AS m ON m.namespace = r.namespace
  AND m.id = json_extract(r.shown, '$[' || e.position || ']');
CREATE TRIGGER events_judged AFTER INSERT ON events WHEN new.recall_id IS NOT NULL BEGIN
  INSERT OR REPLACE INTO judged(seq, recall_id, used)
    SELECT m.seq, r.id, new.used FROM recalls AS r CROSS JOIN memories AS m
    ON m.namespace = r.namespace AND m.id = json_extract(r.shown, '$[' || new.position || ']')
    WHERE r.id = new.recall_id;
END;
CREATE TRIGGER memories_judged_ad AFTER DELETE ON memories BEGIN
  DELETE FROM judged WHERE seq = old.seq;
END;
CREATE TRIGGER recalls_judged_ad AFTER DELETE ON recalls BEGIN
  DELETE FROM judged WHERE recall_id = old.id;
END;
CREATE TRIGGER memories_embed AFTER INSERT ON memories WHEN {_BUILTIN_IS} BEGIN
  INSERT INTO vectors(seq, v) VALUES (new.seq, heap_embed(new.text));
END;
CREATE TRIGGER memories_reembed AFTER UPDATE OF text ON memories WHEN {_BUILTIN_IS} BEGIN
  UPDATE vectors SET v = heap_embed(new.text) WHERE seq = new.seq;
  INSERT INTO vectors(seq, v) SELECT new.seq, heap_embed(new.text)
    WHERE NOT EXISTS (SELECT 1 FROM vectors WHERE seq = new.seq);
END;
"""

# Version 9: recall's kind and time filters read each of a namespace's rows
# to build the vector search's mask (csrc/recall.c, hr_sql_allow): a covering
# index of (namespace, kind, created_at) reads them from the index alone, not
# from the rows with their text (bench/RESULTS.md 12.2).
_SCHEMA_V9 = """
CREATE INDEX memories_filter ON memories(namespace, kind, created_at);
"""

# Version 10, this round's one step, in four parts.
#
# A vector index for big namespaces (csrc/vindex.c).  A namespace
# of VECTOR_INDEX_DEFAULTS' threshold or more vectors is cut into partitions
# by seeded k-means: vector_centroids holds each partition's centroid (int8)
# under an id never given twice (META_LAST_PART), vector_parts each vector's
# partition, and vector_index per namespace the newest partition id
# (version: it moves when partitions are made) and a digest of the centroids,
# by which a connection keeps them; a partition's stamp moves when a vector
# leaves it (or joins it among older ones), so that a connection's cache reads
# that partition again, not the namespace.  The triggers put a new (or re-embedded,
# or moved) vector into its nearest partition (heap_vector_part, innocuous:
# it reads the centroids of the digest it is given) and take a deleted one
# out; splitting a partition grown past twice the size, and the first
# build, are heapmem's writes' (heap_add, add_many, open), never a trigger's.
_VECTOR_PART_OF = ("SELECT {seq}, heap_vector_part(x.namespace, x.digest, {v}) "
                   "FROM {src} CROSS JOIN vector_index AS x ON x.namespace = {ns} "
                   "WHERE {where}")
# the stamp of the partition holding seq moves (a connection's cache reads
# that partition again); on insert only when seq lands among older rows
_STAMP = ("UPDATE vector_centroids SET stamp = stamp + 1 "
          "WHERE part = (SELECT part FROM vector_parts WHERE seq = {seq})")
_STAMP_OUT_OF_ORDER = (_STAMP + " AND EXISTS (SELECT 1 FROM vector_parts AS o "
                       "WHERE o.part = vector_centroids.part AND o.seq > {seq})")
#
# A memory's place in a conversation.  thread names the conversation (or
# session, or document) a memory is a turn of, turn its order there (NULL both: a
# memory of no thread, as every memory before this step).  Recall lifts a candidate
# whose neighbours in its thread match the question, and brings in the neighbours
# of its best candidates (csrc/recall.c, hr_thread): memories_thread finds a turn's
# neighbours, and the next turn of a thread, with one seek; being partial, it costs
# nothing to a store whose memories have no thread.
#
# The pooled layer folded lazily (issue 34).  A feedback wrote the pooled row
# ('*') of each feature it touched (45 rows a feedback on LoCoMo); now what it
# adds to them goes into one row of pool_pending (csrc/pool.c: the blob's
# format), every eight such rows are folded into the pooled rows at once by
# the feedback that adds the eighth (a feature a batch touches written once),
# and every reader applies the pending rows to the stored ones (recall in C;
# Python through heap_pool_now), so it reads what an eager fold would have
# written.  heap_fold_pool() folds them at once.  A store of version 9 has none
# pending.
#
# A BM25 top N that reads what it must, not every row holding a query word
# (csrc/recall.c, hr_lexical).  bm25_terms holds, per namespace and FTS5 term
# of the text column (heap_terms: memories_fts's tokenizer), how many of its
# memories hold the term (exact: the term's IDF without reading its rows), the
# highest frequency and the shortest memory (FTS5 tokens, all columns) among
# them: BM25's part grows with the one and shrinks with the other, so the pair
# bounds what the term can add to any memory's score.  Deleting lowers docs,
# never the bounds (still bounds).  Plain-SQL triggers keep it from any door;
# inside add_many's transaction (the 'fts_deferred' switch, as for the FTS
# index) heap_add_many adds the batch's terms in one statement instead
# (BM25_TERMS_BUILD), a row per term rather than per term and memory.  A store
# made before it gets its rows on its first writable open (build_bm25_terms,
# with a progress line past a second).
_BM25_TERMS_IN = """INSERT INTO bm25_terms(namespace, term, docs, maxtf, minlen)
    SELECT {ns}, term, 1, tf, {ntok} FROM heap_terms({text}) WHERE true
    ON CONFLICT(namespace, term) DO UPDATE SET docs = docs + 1,
      maxtf = max(maxtf, excluded.maxtf), minlen = min(minlen, excluded.minlen);"""
_BM25_TERMS_OUT = """DELETE FROM bm25_terms WHERE namespace = {ns} AND docs <= 1
    AND term IN (SELECT term FROM heap_terms({text}));
  UPDATE bm25_terms SET docs = docs - 1 WHERE namespace = {ns}
    AND term IN (SELECT term FROM heap_terms({text}));"""
_SCHEMA_V10 = f"""
CREATE TABLE vector_index(
  namespace TEXT PRIMARY KEY,
  version   INTEGER NOT NULL,         -- its newest partition id: moves at a build or split
  digest    INTEGER NOT NULL          -- FNV-1a of its partitions' ids and centroids
) WITHOUT ROWID;
CREATE TABLE vector_centroids(
  part      INTEGER PRIMARY KEY,      -- never given twice (heapmem_meta last_part)
  namespace TEXT NOT NULL,
  centroid  BLOB NOT NULL,            -- int8, the vectors' dimension
  stamp     INTEGER NOT NULL DEFAULT 0 -- moves when a vector leaves it, or joins out of order
);
CREATE INDEX vector_centroids_namespace ON vector_centroids(namespace);
CREATE TABLE vector_parts(
  seq  INTEGER PRIMARY KEY,           -- the vector's memory
  part INTEGER NOT NULL               -- its partition (vector_centroids.part)
);
CREATE INDEX vector_parts_part ON vector_parts(part);
CREATE TRIGGER vectors_part_ai AFTER INSERT ON vectors BEGIN
  INSERT OR IGNORE INTO vector_parts(seq, part)
    {_VECTOR_PART_OF.format(seq="new.seq", v="new.v", src="memories AS m", ns="m.namespace",
                            where="m.seq = new.seq")};
  {_STAMP_OUT_OF_ORDER.format(seq="new.seq")};
END;
CREATE TRIGGER vectors_part_au AFTER UPDATE ON vectors BEGIN
  {_STAMP.format(seq="old.seq")};
  DELETE FROM vector_parts WHERE seq IN (old.seq, new.seq);
  INSERT OR IGNORE INTO vector_parts(seq, part)
    {_VECTOR_PART_OF.format(seq="new.seq", v="new.v", src="memories AS m", ns="m.namespace",
                            where="m.seq = new.seq")};
  {_STAMP.format(seq="new.seq")};
END;
CREATE TRIGGER vectors_part_ad AFTER DELETE ON vectors BEGIN
  {_STAMP.format(seq="old.seq")};
  DELETE FROM vector_parts WHERE seq = old.seq;
END;
CREATE TRIGGER memories_part_move AFTER UPDATE OF namespace ON memories BEGIN
  {_STAMP.format(seq="new.seq")};
  DELETE FROM vector_parts WHERE seq = new.seq;
  INSERT OR IGNORE INTO vector_parts(seq, part)
    {_VECTOR_PART_OF.format(seq="v.seq", v="v.v", src="vectors AS v", ns="new.namespace",
                            where="v.seq = new.seq")};
  {_STAMP.format(seq="new.seq")};
END;

ALTER TABLE memories ADD COLUMN thread TEXT;
ALTER TABLE memories ADD COLUMN turn INTEGER;
CREATE INDEX memories_thread ON memories(namespace, thread, turn) WHERE thread IS NOT NULL;

CREATE TABLE pool_pending(
  id  INTEGER PRIMARY KEY,
  ops BLOB NOT NULL                   -- what one feedback added to the pooled rows
);

CREATE TABLE bm25_terms(
  namespace TEXT NOT NULL,
  term      TEXT NOT NULL,            -- an FTS5 term of the text column (heap_terms)
  docs      INTEGER NOT NULL,         -- the namespace's memories holding it
  maxtf     INTEGER NOT NULL,         -- its highest frequency in one of them (never lowered)
  minlen    INTEGER NOT NULL,         -- the shortest of them, in FTS5 tokens (never raised)
  PRIMARY KEY(namespace, term)
) WITHOUT ROWID;
CREATE TRIGGER bm25_terms_ai AFTER INSERT ON memories
  WHEN NOT EXISTS (SELECT 1 FROM heapmem_meta WHERE key = '{META_FTS_DEFERRED}') BEGIN
  {_BM25_TERMS_IN.format(ns="new.namespace", ntok="new.ntok", text="new.text")}
END;
CREATE TRIGGER bm25_terms_ad AFTER DELETE ON memories BEGIN
  {_BM25_TERMS_OUT.format(ns="old.namespace", text="old.text")}
END;
CREATE TRIGGER bm25_terms_au AFTER UPDATE OF namespace, text ON memories BEGIN
  {_BM25_TERMS_OUT.format(ns="old.namespace", text="old.text")}
  {_BM25_TERMS_IN.format(ns="new.namespace", ntok="new.ntok", text="new.text")}
END;
"""

#: bm25_terms' rows for the memories of seq ?1 to ?2 (summed by the C core's
#: heap_bm25_terms), added to what it holds
BM25_TERMS_BUILD = """INSERT INTO bm25_terms(namespace, term, docs, maxtf, minlen)
SELECT namespace, term, docs, maxtf, minlen FROM heap_bm25_terms(?1, ?2) WHERE true
ON CONFLICT(namespace, term) DO UPDATE SET docs = docs + excluded.docs,
  maxtf = max(maxtf, excluded.maxtf), minlen = min(minlen, excluded.minlen)"""
#: how many memories build_bm25_terms reads per statement
BM25_TERMS_CHUNK = 50_000


def build_bm25_terms(c: Connection, path: str, *, err: Any = None,
                     clock: Callable[[], float] = time.monotonic) -> None:
    """Fill bm25_terms from the memories (in the caller's transaction): a
    store made before schema 10, on its first writable open.  Past a second
    (by clock) it says how far it is, one line on err (stderr) per chunk."""
    import sys

    err = err if err is not None else sys.stderr
    top, total = c.execute("SELECT coalesce(max(seq), 0), count(*) FROM memories").fetchall()[0]
    t0, done, shown = clock(), 0, False
    for lo in range(0, top + 1, BM25_TERMS_CHUNK):
        hi = lo + BM25_TERMS_CHUNK - 1
        c.execute(BM25_TERMS_BUILD, (lo, hi))
        done += c.execute("SELECT count(*) FROM memories WHERE seq BETWEEN ? AND ?",
                          (lo, hi)).fetchall()[0][0]
        if clock() - t0 > 1.0:
            shown = True
            print(f"heapmem: {path}: BM25 term statistics for {done:,} of {total:,} memories "
                  f"({clock() - t0:.0f} s)", file=err, flush=True)
    if shown:
        print(f"heapmem: {path}: BM25 term statistics built", file=err, flush=True)


# Numbered schema steps: MIGRATIONS[v] takes a store from version v to v + 1;
# MIGRATION_WORK[v], where there is one, fills what that step made from the
# rows already there (c, path).
MIGRATIONS: dict[int, str] = {0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: _SCHEMA_V3, 3: _SCHEMA_V4,
                              4: _SCHEMA_V5, 5: _SCHEMA_V6, 6: _SCHEMA_V7, 7: _SCHEMA_V8,
                              8: _SCHEMA_V9, 9: _SCHEMA_V10}
MIGRATION_WORK: dict[int, Callable[[Connection, str], None]] = {9: build_bm25_terms}

# -- how forget erases text from the FTS index ------------------------------------

_FTS_CONFIG = "SELECT v FROM memories_fts_config WHERE k = ?"


def erases_in_place(c: Connection) -> bool:
    """Whether FTS5's secure-delete is on: a deleted row's terms leave the
    index with the delete (else forget must merge the whole index)."""
    rows = c.execute(_FTS_CONFIG, ("secure-delete",)).fetchall()
    return bool(rows and rows[0][0])


def oldest_reader(c: Connection) -> str:
    """The oldest SQLite that can query this store's FTS index: "3.42" once
    a row was deleted with secure-delete on (FTS5 format 5), else "3.37"."""
    rows = c.execute(_FTS_CONFIG, ("version",)).fetchall()
    return "3.42" if rows and rows[0][0] == 5 else "3.37"


def set_portable(c: Connection, portable: bool) -> None:
    """portable=True: turn secure-delete off and, if the index is in format
    5, rebuild it in format 4, readable by SQLite 3.37 and later (a whole
    rebuild, once).  portable=False: turn secure-delete on.  Inside the
    caller's transaction."""
    c.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES('secure-delete', ?)",
              (0 if portable else 1,))
    if portable and oldest_reader(c) != "3.37":
        c.execute("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')")


def _varint(b: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint at b[i]: its value and the offset after it."""
    v = 0
    for k in range(9):
        byte = b[i]
        i += 1
        if k == 8:
            return (v << 8) | byte, i
        v = (v << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return v, i
    return v, i


def fts_levels(c: Connection) -> list[tuple[int, list[int]]]:
    """The FTS index's segments, level by level: (how many of the level's
    segments a merge in progress is taking, each segment's leaf pages).
    Read from FTS5's structure record (the %_data row of id 10); a
    diagnostic (bench/segments.py, tests/test_index_at_rest.py), never a
    rule of the store."""
    rows = c.execute("SELECT block FROM memories_fts_data WHERE id = 10").fetchall()
    if not rows or not isinstance(rows[0][0], bytes) or len(rows[0][0]) < 8:
        return []
    blob = rows[0][0]
    if blob[4:8] == b"\xff\x00\x00\x01":  # FTS5's second structure (tombstones): not ours
        raise ValueError("the FTS index's structure record is in a format this reader does not "
                         "know")
    i = 4  # after the cookie
    nlevel, i = _varint(blob, i)
    _, i = _varint(blob, i)  # segments in all
    _, i = _varint(blob, i)  # the write counter
    out = []
    for _ in range(nlevel):
        merging, i = _varint(blob, i)
        nseg, i = _varint(blob, i)
        pages = []
        for _ in range(nseg):
            _, i = _varint(blob, i)  # the segment's id
            first, i = _varint(blob, i)
            last, i = _varint(blob, i)
            pages.append(last - first + 1)
        out.append((merging, pages))
    if i != len(blob):
        raise ValueError("the FTS index's structure record is in a format this reader does not "
                         "know")
    return out


def merge_index(c: Connection) -> None:
    """Merge the whole FTS index into one segment: what erases a deleted
    row's terms when secure-delete is off."""
    c.execute("INSERT INTO memories_fts(memories_fts) VALUES('optimize')")

# -- the pooled layer's settings ---------------------------------------------------


def pool_settings(c: Connection) -> dict[str, Any]:
    """How this file's pool is built (POOL_DEFAULTS where it does not say)."""
    out = dict(POOL_DEFAULTS)
    try:
        got = meta_json(c, META_POOL, {})
    except (ValueError, RecursionError):
        got = {}
    if isinstance(got, dict):
        for k, v in got.items():
            if k in out and isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and v >= 0 and v == v and v != float("inf"):
                out[k] = type(POOL_DEFAULTS[k])(v)
    out["cap"] = out["cap"] or POOL_DEFAULTS["cap"]
    out["min"] = max(out["min"], 2 * out["trim"] + 1)
    return out


def prior(c: Connection) -> dict[str, list]:
    """The links-only prior merged into this store ({feature: [alpha, beta, n]})."""
    p = meta_json(c, META_LINKS_PRIOR, {})
    return p if isinstance(p, dict) else {}


# -- opening a file ----------------------------------------------------------------


#: how long a connection waits for another's lock before it gives up (ms)
BUSY_MS = 10_000


def wait_for_lock(c: Connection, ms: int) -> None:
    """How long a statement waits for another connection's lock (the write
    lock, mostly) before SQLITE_BUSY: ms, trying again every 50 microseconds
    at first and every 2 ms at most.  SQLite's own busy timeout sleeps 1, 2,
    5, 10, ... 100 ms between tries, so a feedback held up by another
    process's write of a millisecond could sleep 25 ms more (bench/RESULTS.md
    23).  A server's connection keeps its own rule (setbusytimeout)."""
    if not isinstance(c, apsw.Connection):
        c.setbusytimeout(ms)
        return
    start = [0.0]

    def busy(count: int) -> bool:
        now = time.monotonic()
        if count == 0:
            start[0] = now
        if (now - start[0]) * 1000 >= ms:
            return False
        time.sleep(_lock_pause(count))
        return True
    c.setbusyhandler(busy)


def _lock_pause(count: int) -> float:
    """Seconds to sleep before the count-th new try for another connection's
    lock: 50 microseconds more each time, 2 ms at most."""
    return min(0.00005 * (count + 1), 0.002)


def configure(c: Connection) -> None:
    """What every connection gets before it reads the file: a busy timeout, no
    double-quoted string literals, plans that do not depend on bound values,
    SQL in the file trusted with nothing (trusted_schema off: a view or
    trigger may call only innocuous functions), no way for SQL to corrupt the
    file on purpose (DEFENSIVE: no writable_schema, no writes to shadow
    tables), every page's cells checked as they are read, and the heap_*
    functions."""
    wait_for_lock(c, BUSY_MS)
    for opt in (apsw.SQLITE_DBCONFIG_DQS_DML, apsw.SQLITE_DBCONFIG_DQS_DDL,
                apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA):
        c.config(opt, 0)
    c.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    c.execute("PRAGMA cell_size_check=ON")
    # Plans that do not depend on bound values.  Once PRAGMA optimize has
    # gathered sqlite_stat4, SQLite otherwise re-prepares every statement
    # comparing an indexed column with a parameter (m.namespace =
    # :namespace, ...) each time the value changes: a fifth of a recall.
    c.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
    native.load(c)


# The tables FTS5 makes for memories_fts: their text is FTS5's (it may vary
# between SQLite versions), so only their kind and name are compared.
_FTS_SHADOWS = {"memories_fts_data", "memories_fts_idx", "memories_fts_docsize",
                "memories_fts_config", "memories_fts_content"}
# Tables SQLite itself makes: the planner's statistics (PRAGMA optimize).
_SQLITE_OWN = {("table", "sqlite_stat1"): "CREATE TABLE sqlite_stat1(tbl,idx,stat)",
               ("table", "sqlite_stat4"): "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)"}


def _norm(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.split())


@functools.lru_cache(maxsize=None)
def expected_objects(version: int) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Every schema object (type, name) -> (table, SQL) that heapmem's steps
    up to version create: what a store of that version holds, exactly."""
    c = apsw.Connection(":memory:")
    try:
        native.load(c)
        for v in range(version):
            c.execute(MIGRATIONS[v])
        return {(t, n): (tbl, _norm(sql)) for t, n, tbl, sql in
                c.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema")}
    finally:
        c.close()


def create_statements(version: int = SCHEMA_VERSION) -> list[tuple[str, str, str, str]]:
    """What a new store of this version holds, as the statements that make it
    at once: (type, name, table, SQL) of every object heapmem's steps create,
    in the order they leave them (FTS5's own tables, which it makes itself,
    left out).  The C core's heap_init runs these (csrc/schema.h, written by
    c_header())."""
    c = apsw.Connection(":memory:")
    try:
        native.load(c)
        for v in range(version):
            c.execute(MIGRATIONS[v])
        return [(t, n, tbl, sql) for t, n, tbl, sql in c.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE sql IS NOT NULL "
            "ORDER BY rowid") if not (t == "table" and n in _FTS_SHADOWS)]
    finally:
        c.close()


def c_header() -> str:
    """csrc/schema.h: the current schema for the C core (heap_init makes a
    store from it, and the heap_* entry points compare a file with it), the
    meta keys it reads, the pool's defaults and a prior's support: one source
    for both sides (the kinds and their importance are heapmem.h's HM_KINDS).  Regenerate with
    `python -c "from heapmem.db import schema; print(schema.c_header(), end='')" > csrc/schema.h`;
    tests/test_sql_loop.py checks it is current."""
    def lit(text: str) -> str:
        out = text.replace("\\", "\\\\").replace('"', '\\"').split("\n")
        return ("\n".join(f'    "{line}\\n"' for line in out[:-1])
                + ("\n" if len(out) > 1 else "") + f'    "{out[-1]}"')
    lines = ["/* schema.h: generated by heapmem.db.schema.c_header() from heapmem/db/schema.py's",
             " * migrations and constants; do not edit (tests/test_sql_loop.py checks it is",
             " * current). */",
             f"#define HM_SCHEMA_VERSION {SCHEMA_VERSION}",
             "#define HM_POOL_DEFAULTS " + json.dumps(json.dumps(POOL_DEFAULTS)),
             f"#define HM_POOL_CAP {POOL_DEFAULTS['cap']!r}",
             f"#define HM_POOL_MIN {POOL_DEFAULTS['min']}",
             f"#define HM_POOL_TRIM {POOL_DEFAULTS['trim']}",
             f"#define HM_PRIOR_SUPPORT {PRIOR_SUPPORT}"]
    for name in ("FORMAT", "CREATED_WITH", "TUNED", "LAST_SEQ", "LAST_RECALL", "LINKS_PRIOR",
                 "POOL", "EMBEDDER", "EMBEDDING_DIM", "AUTOTUNE", "VECTOR_INDEX", "LAST_PART",
                 "FTS_DEFERRED"):
        lines.append(f'#define HM_META_{name} "{globals()["META_" + name]}"')
    lines.append(f'#define HM_BUILTIN_EMBEDDER "{BUILTIN_EMBEDDER}"')
    for k, v in VECTOR_INDEX_DEFAULTS.items():
        lines.append(f"#define HM_VINDEX_{k.upper()} {v!r}")
    lines.append("#define HM_AUTOTUNE_RECOUNT " + json.dumps(AUTOTUNE_RECOUNT))
    # (heap_add_many's: the batch's terms into bm25_terms in one statement)
    lines.append("#define HM_SQL_BM25_TERMS_BUILD " + json.dumps(BM25_TERMS_BUILD))
    lines.append("static const struct {")
    lines.append("  const char *type, *name, *tbl, *sql;")
    lines.append("} hm_schema_objects[] = {")
    for t, n, tbl, sql in create_statements():
        lines.append(f'  {{"{t}", "{n}", "{tbl}",')
        lines.append(lit(sql) + "},")
    lines.append("};")
    return "\n".join(lines) + "\n"


def fingerprint(rows: list[tuple]) -> str:
    """A digest of a file's schema objects as foreign_objects() compares them
    (FTS5's shadow tables by kind and name, SQLite's statistics tables left
    out), for the fast path of the check on open."""
    import hashlib

    keep = sorted((t, n, tbl, None if (t == "table" and n in _FTS_SHADOWS) else _norm(sql))
                  for t, n, tbl, sql in rows
                  if not ((t, n) in _SQLITE_OWN and _norm(sql) == _SQLITE_OWN[(t, n)]))
    return hashlib.sha256(json.dumps(keep).encode()).hexdigest()


#: The fingerprint of each schema version as heapmem's steps create it
#: (tests/test_trust.py checks each against expected_objects()).  A file
#: that matches needs no object-by-object comparison, so the check costs
#: next to nothing on open; anything else is compared in full.
KNOWN_SCHEMAS = {
    1: "8d5b5fdb084c8cdda1aafb15e7c8901dd0614463323ee5a92c1b4bb661915380",
    2: "d292860cfe870d2775099a085d69f565691bb97fd09d267f774b914ceef203f8",
    3: "23932044cdca7c53e78efa771bc4e2add75998821b265661d0ac94b49a7448bb",
    4: "3003eba1a75504b3ccd8f9febf5509d8300e8b89fdb559f6bc606da61dcc6a95",
    5: "cf54a3970e193024437cc58839d20b2943de5f5b58f9e759ddbeb97492fde4d3",
    6: "12dc3f91101aa478d6d705433396ac4eb4302bb51b10548e25ce5e2704a2db91",
    7: "12dc3f91101aa478d6d705433396ac4eb4302bb51b10548e25ce5e2704a2db91",
    8: "3109c26dc44c733a160f3dbb3a2389b18bad00824898557e9a17c50687874ecd",
    9: "6286cf02f5b5e332081edae7c74949ed5d5c0fa68a882b6533e3f3fa01b98ef0",
    10: "cf6b940c4a5fd97d3a3f4a7cbc518a639ff99d9affd1fea3689fe933880238d1",
}


def foreign_objects(rows: list[tuple], version: int) -> list[str]:
    """What in a file's sqlite_schema (rows of type, name, tbl_name, sql)
    heapmem's schema version `version` does not define, or defines otherwise:
    one description per object, naming it."""
    if KNOWN_SCHEMAS.get(version) == fingerprint(rows):
        return []
    want = expected_objects(version)
    seen = set()
    out = []
    for t, n, tbl, sql in rows:
        seen.add((t, n))
        if (t, n) in _SQLITE_OWN and _norm(sql) == _SQLITE_OWN[(t, n)]:
            continue
        if (t, n) not in want:
            out.append(f"{t} {n!r} (on {tbl!r}) is not part of heapmem's schema {version}")
        elif n in _FTS_SHADOWS and t == "table":
            continue
        elif want[(t, n)] != (tbl, _norm(sql)):
            out.append(f"{t} {n!r} differs from heapmem's schema {version}")
    for t, n in sorted(set(want) - seen):
        if n != "memories_fts_content":
            out.append(f"{t} {n!r} of heapmem's schema {version} is missing")
    return out


def check_objects(c: Connection, path: str, version: int) -> None:
    """UnsafeStoreError unless the file holds exactly the objects of its
    schema version: an extra trigger or view, or one heapmem defines but with
    other SQL, would run its author's SQL on every open or write."""
    rows = c.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema").fetchall()
    _refuse_foreign(path, foreign_objects(rows, version))


def _refuse_foreign(path: str, bad: list[str]) -> None:
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UnsafeStoreError(f"{path!r} holds schema objects heapmem did not create: "
                               f"{'; '.join(bad[:3])}{more}; it was not opened and not modified")


def _is_store(c: Connection) -> bool:
    try:
        return meta_get(c, META_FORMAT) == "heapmem"
    except apsw.SQLError:
        return False


def open_file(c: Connection, path: str, *, readonly: bool, durable: bool,
              verify: bool = False, rebuild_pool: Any = None) -> None:
    """Check that the file behind c is a heapmem store this version can use
    (or an empty file), create or migrate its schema, and set the journal:
    NotAStoreError, SchemaVersionError or UnsafeStoreError, with the file
    untouched, if not.  Nothing from the file runs before its schema has
    been compared with heapmem's own, object by object; the checks run under
    a deadline (OPEN_DEADLINE).  verify=True also runs PRAGMA quick_check
    (CorruptStoreError), for files from elsewhere.  rebuild_pool(c), if
    given, runs inside the migration that reaches schema 4 (the pooled layer
    is heapmem.learning's to work out)."""
    deadline = time.monotonic() + OPEN_DEADLINE
    c.setprogresshandler(lambda: time.monotonic() > deadline, 100)
    try:
        _check_file(c, path, readonly=readonly, verify=verify)
    except apsw.InterruptError:
        raise UnsafeStoreError(f"checking {path!r} took longer than {OPEN_DEADLINE:g} s; "
                               "it was not opened") from None
    finally:
        c.setprogresshandler(None)
    version = user_version(c)
    if version < SCHEMA_VERSION:
        if readonly:
            raise SchemaVersionError(
                f"{path!r} has schema version {version}; open it once without "
                f"readonly=True to upgrade it to {SCHEMA_VERSION}")
        _migrate(c, path, rebuild_pool)
    if not readonly:
        _journal_wal(c, path)
    # WAL with synchronous=NORMAL: a commit survives the process dying at
    # any point (kill -9 included); only an OS crash or power cut can lose
    # the last commits, never corrupt the file.  durable=True syncs every
    # commit to disk as well (FULL), at a few milliseconds a commit.
    c.execute("PRAGMA synchronous=" + ("FULL" if durable else "NORMAL"))
    # a page cache of up to CACHE_KIB a connection (SQLite's default is 2 MiB),
    # taken as pages are read: a loop of recalls and feedback reads the same
    # links, logs and vectors again, and past 2 MiB each miss is a read call
    c.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    c.execute("PRAGMA foreign_keys=ON")
    c.execute("PRAGMA secure_delete=ON")


def _journal_wal(c: Connection, path: str) -> None:
    """PRAGMA journal_mode=WAL: the first open of a new file switches it,
    which takes the file's exclusive lock.  Opened by many processes at
    once, SQLite can answer BUSY there without calling the busy handler
    (another connection that opened the file in rollback mode still reading
    it), so the switch is tried again, for as long as the busy handler
    waits (BUSY_MS), and then refused in one sentence, never as apsw's
    error."""
    end = time.monotonic() + BUSY_MS / 1000
    count = 0
    while True:
        try:
            c.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except apsw.BusyError as e:
            if time.monotonic() >= end:
                raise from_sqlite(e, f"opening {path!r}") from None
            time.sleep(_lock_pause(count))
            count += 1


def _check_file(c: Connection, path: str, *, readonly: bool, verify: bool) -> None:
    try:
        # one statement, one snapshot: another process may be creating the
        # schema right now (two reads could see version 0 and its tables)
        rows = c.execute("SELECT (SELECT user_version FROM pragma_user_version), type, name, "
                         "tbl_name, sql FROM (SELECT NULL AS type, NULL AS name, NULL AS "
                         "tbl_name, NULL AS sql UNION ALL SELECT type, name, tbl_name, sql "
                         "FROM sqlite_schema)").fetchall()
    except (apsw.NotADBError, apsw.CorruptError) as e:
        raise NotAStoreError(f"{path!r} is not a SQLite database ({e})") from None
    version = rows[0][0]
    objects = [r[1:] for r in rows if r[2] is not None]
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path!r} has schema version {version}, newer than this heapmem "
            f"({__version__}, schema {SCHEMA_VERSION}); upgrade heapmem to open it")
    if version < 0:
        raise NotAStoreError(f"{path!r} has schema version {version}: not a heapmem store; "
                             "it was not modified")
    if version == 0:
        if objects:
            raise NotAStoreError(f"{path!r} is a SQLite database but not a heapmem store "
                                 "(it has tables of its own); it was not modified")
        return
    if not any(n == "heapmem_meta" for _, n, _, _ in objects):
        raise NotAStoreError(f"{path!r} is a SQLite database but not a heapmem store; "
                             "it was not modified")
    _refuse_foreign(path, foreign_objects(objects, version))
    if not _is_store(c):
        raise NotAStoreError(f"{path!r} is a SQLite database but not a heapmem store; "
                             "it was not modified")
    if verify:
        try:
            found = [r[0] for r in c.execute("PRAGMA quick_check")]
        except apsw.CorruptError as e:
            found = [str(e)]
        if found != ["ok"]:
            raise CorruptStoreError(f"{path!r} fails SQLite's quick_check: {found[0]}")


def _migrate(c: Connection, path: str, rebuild_pool: Any) -> None:
    c.execute("BEGIN IMMEDIATE")
    try:
        # re-read under the write lock: another process may have migrated
        version = c.execute("PRAGMA user_version").fetchall()[0][0]
        if version == 0 and c.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0]:
            raise NotAStoreError(f"{path!r} is not a heapmem store; it was not modified")
        check_objects(c, path, version)  # again, under the write lock
        if version == 0:  # a new store: the C core makes it (heap_init, csrc/schema.h)
            # (no embedder yet: heapmem.open() attaches the one it is given)
            c.execute("SELECT heap_init(0)").fetchall()
            version = SCHEMA_VERSION
        rebuild = False
        while version < SCHEMA_VERSION:
            c.execute(MIGRATIONS[version])
            if version in MIGRATION_WORK:
                MIGRATION_WORK[version](c, path)
            version += 1
            if version == 1:
                meta_set(c, META_FORMAT, "heapmem")
                meta_set(c, META_CREATED_WITH, __version__)
            rebuild |= version == 4 and rebuild_pool is not None
        c.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        if rebuild:  # the pool of schema 4, once the file is this schema (heap_rebuild_pool
            rebuild_pool(c)  # checks it, as every write of the C core does)
        c.execute("COMMIT")
    except BaseException:
        if not c.getautocommit():
            c.execute("ROLLBACK")
        raise


def user_version(c: Connection) -> int:
    return c.execute("PRAGMA user_version").fetchall()[0][0]


# -- the tables as export and import walk them -------------------------------------

#: (record type, table, ORDER BY) in the order an export lists them
TABLES = (("memory", "memories", "seq"), ("vector", "vectors", "seq"),
          ("recall", "recalls", "id"), ("event", "events", "id"),
          ("link", "links", "namespace, feature"))
#: columns holding JSON text, written to an export as JSON values
JSON_COLUMNS = {"memories": {"metadata"}, "recalls": {"shown", "ages", "features", "rest"},
                "events": {"deltas"}}
#: columns derived from others, recomputed on import
DERIVED = {"memories": {"nstag", "ntok"}}


def has_table(c: Connection, table: str) -> bool:
    return bool(c.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?",
                          (table,)).fetchall())


def columns(c: Connection, table: str) -> list[str]:
    """A table's columns, less the derived ones."""
    return [r[1] for r in c.execute("SELECT * FROM pragma_table_info(?)", (table,))
            if r[1] not in DERIVED.get(table, ())]
