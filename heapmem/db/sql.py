"""Every SQL statement heapmem runs on a store, by name.

Owns: the text of each statement (the recall pipeline, feedback, adding,
updating, listing, forgetting, checking, the logs, export and import).  The
modules that run them hold no SQL of their own; the DDL and the meta keys
live in heapmem.db.schema.  Named parameters (:name) everywhere; user text is
always bound, never formatted in.
"""
from __future__ import annotations

from ..db.schema import (
    META_LAST_RECALL,
    META_LAST_SEQ,
    META_VECTOR_INDEX,
    VECTOR_INDEX_DEFAULTS,
    ntok_sql,
)

# add(): the C core's heap_add (csrc/store.c) returns the new memory's id;
ADD = """SELECT heap_add(:text, :namespace, :kind, :source, :id, :created_at, :importance,
                :key, :metadata, :copy, :thread, :turn)"""
# add_many(): heap_add_many (csrc/store.c), heap_add for each item (JSON objects
# with heap_add's arguments as fields), the FTS index taken once at the end;
# the ids, a JSON array.  Then what they are, with their seq.
ADD_MANY = "SELECT heap_add_many(:items, :copy)"
# the oldest memory of the namespace with this text and key (memories_text)
SAME_TEXT = """SELECT id FROM memories WHERE namespace = :namespace
AND heap_text_hash(text) = heap_text_hash(:text) AND text = :text AND key IS :key
ORDER BY seq LIMIT 1"""
ADDED = "SELECT seq, features, turn FROM memories WHERE id = :id"

# -- the vector index of a big namespace (csrc/vindex.c; schema 10 describes it)

# What add_many's batch (its namespace's memories from :seq on) owes the index:
# its build past the threshold, the splits of partitions grown past twice the
# size (heap_add does the same for one memory, in C).
VECTOR_MAINTAIN = "SELECT heap_vector_maintain(:namespace, :seq)"
# One namespace's index built again from scratch (or dropped below the
# threshold): a JSON array of what was built.
VECTOR_INDEX = "SELECT heap_vector_index(:namespace)"
# The settings in force, and changed (a JSON object)
VECTOR_SETTINGS = "SELECT heap_vector_settings()"
SET_VECTOR_SETTINGS = "SELECT heap_vector_settings(:settings)"
# The namespaces past the threshold without an index (a store written before
# schema 10, or one whose threshold was lowered), with their memories
VECTOR_INDEX_DUE = f"""SELECT n.namespace, n.docs FROM namespaces AS n
WHERE n.docs >= coalesce((SELECT json_extract(value, '$.threshold') FROM heapmem_meta
                          WHERE key = '{META_VECTOR_INDEX}' AND json_valid(value)),
                         {VECTOR_INDEX_DEFAULTS["threshold"]})
  AND NOT EXISTS (SELECT 1 FROM vector_index AS x WHERE x.namespace = n.namespace)
ORDER BY n.namespace"""
# check(): vectors of an indexed namespace in no partition
VECTORS_UNPARTITIONED = """SELECT count(*) FROM vectors AS v
CROSS JOIN memories AS m ON m.seq = v.seq CROSS JOIN vector_index AS x ON x.namespace = m.namespace
WHERE NOT EXISTS (SELECT 1 FROM vector_parts AS p WHERE p.seq = v.seq)"""
# check(): partition rows of no vector, or of a partition not of the memory's namespace
PARTS_ASTRAY = """SELECT count(*) FROM vector_parts AS p
LEFT JOIN vectors AS v ON v.seq = p.seq LEFT JOIN memories AS m ON m.seq = p.seq
LEFT JOIN vector_centroids AS c ON c.part = p.part
WHERE v.seq IS NULL OR m.seq IS NULL OR c.part IS NULL OR c.namespace IS NOT m.namespace"""
# check(): each index's version and digest, with its centroids in id order
VECTOR_INDEXES = """SELECT x.namespace, x.version, x.digest,
  (SELECT json_group_array(json_array(part, hex(centroid))) FROM
    (SELECT part, centroid FROM vector_centroids AS c WHERE c.namespace = x.namespace
     ORDER BY part))
FROM vector_index AS x ORDER BY x.namespace"""
# check(): centroids of a namespace without an index row
CENTROIDS_ASTRAY = """SELECT count(*) FROM vector_centroids AS c
WHERE NOT EXISTS (SELECT 1 FROM vector_index AS x WHERE x.namespace = c.namespace)"""

# -- the pooled layer (the C core keeps it: csrc/feedback.c; schema 4 describes it)

# Work the pooled rows of :features (a JSON array; NULL: every feature) out
# afresh (pool.set, an import, a prior removed, the migration to schema 4).
REBUILD_POOL = "SELECT heap_rebuild_pool(:features)"

# recall(), on a file and on a server: heap_recall (csrc/recall.c) ranks in C
# (the namespace's own BM25, the superseded rule, the vector candidates, the
# pooled links, hm_score_batch) and returns the top :k with every factor; the
# link set it scored with comes on the first row (for explain()).  Untracked
# here: recall() logs it in a write transaction of its own (LOG_RECALL), so a
# read never takes the write lock; :tracked 1 says it will be logged (a
# tracked recall, explored when the config's explore > 0).
#: RECALL's columns, in its order: results.recalled reads each row by these
#: names, so a column added or moved here cannot shift another's meaning
RECALL_COLUMNS = (
    "rank", "id", "text", "score", "kind", "source", "key", "relevance", "recency",
    "importance", "usefulness", "rules", "bm25", "age_days", "superseded", "features",
    "created_at", "last_used_at", "metadata", "lexical", "cosine", "rest", "links", "context",
    "context_n", "explore", "lift", "thread", "turn", "thread_lift", "thread_from",
    "thread_offset", "time_lift", "time_window")
_RECALL_EXPRESSIONS = {"links": "CASE WHEN rank = 1 THEN links END AS links"}
RECALL = ("SELECT " + ", ".join(_RECALL_EXPRESSIONS.get(c, c) for c in RECALL_COLUMNS) + """
FROM heap_recall(:question, :namespace, :k, :now, :config, 0, :qvec, :tracked, :kinds, :since,
                 :until)""")

# recall() across several namespaces (namespace=[...]): heap_recall ranks
# them all on one scale (BM25 over the best BM25 among them) and gives each
# row's namespace, and each namespace's link set on its first row.
RECALL_ACROSS = ("SELECT namespace, " + ", ".join(RECALL_COLUMNS) + """
FROM heap_recall(:question, NULL, :k, :now, :config, 0, :qvec, :tracked, :kinds, :since,
                 :until, :namespaces)""")

# recall() as a raw SQL statement (Memory.recall_sql): id, text, score.
RECALL_SQL = """SELECT id, text, score
FROM heap_recall(:question, :namespace, :k, :now, :config, 0, NULL, NULL, :kinds, :since,
                 :until)"""

# The recall log: one row per tracked recall.  Its id is never one a
# forgotten recall had (the last_recall high-water mark).
# One tracked recall, logged only while every memory it showed is still a
# memory of its namespace: a forget that committed between the recall's read
# and this write (another process) must not leave the forgotten ids, and the
# query that found them, in the log.  RETURNING gives the new id, or no row.
LOG_RECALL = f"""
INSERT INTO recalls(id, namespace, query, qtype, created_at, shown, ages, features, rest)
SELECT 1 + max(coalesce((SELECT max(id) FROM recalls), 0),
               coalesce((SELECT CAST(value AS INTEGER) FROM heapmem_meta
                         WHERE key = '{META_LAST_RECALL}'), 0)),
       :namespace, :query, :qtype, :created_at, :shown, :ages, :features, :rest
WHERE NOT EXISTS (SELECT 1 FROM json_each(:shown) AS s
                  WHERE NOT EXISTS (SELECT 1 FROM memories AS m
                                    WHERE m.id = s.value AND m.namespace = :namespace))
RETURNING id
"""


#: GET_RECALL's and JUDGED_RECALLS' columns (heapmem.LoggedRecall's fields)
LOGGED_RECALL_COLUMNS = ("id", "namespace", "query", "qtype", "created_at", "shown", "ages",
                         "features", "rest")
_LOGGED = ", ".join(LOGGED_RECALL_COLUMNS)
GET_RECALL = f"""
SELECT {_LOGGED}
FROM recalls WHERE id = :id
"""


# The logged recalls, oldest first: all (:namespace NULL) or one namespace's
# (transfer.export_trajectories reads each with mem.log.get).
RECALL_IDS = """SELECT id FROM recalls WHERE :namespace IS NULL OR namespace = :namespace
ORDER BY id"""


# Recalls with at least one memory judged used (tune() replays them).
JUDGED_RECALLS = f"""
SELECT {_LOGGED} FROM recalls
WHERE id IN (SELECT recall_id FROM events WHERE used = 1) ORDER BY id
"""

# The newest :n of them, newest first (auto-tune's bounded replay): recalls
# read from the newest by rowid, each looked up in events by its recall_id
# (the UNIQUE(recall_id, position) index), until :n are found.
NEWEST_JUDGED_RECALLS = f"""
SELECT {_LOGGED} FROM recalls AS r
WHERE EXISTS (SELECT 1 FROM events AS e WHERE e.recall_id = r.id AND e.used = 1)
ORDER BY r.id DESC LIMIT :n
"""

# -- feedback ----------------------------------------------------------------------


# feedback() and feedback(answer=...): heap_feedback and heap_answer (the C
# core, csrc/feedback.c) do it all and return JSON.  :ignored NULL: every
# other shown memory counts as ignored.
# :tune 1: the feedback that brings the store's judged recalls to the
# next point of auto-tune's schedule runs heap_tune after it (the result's
# auto_tune); 0: it only keeps the count.
FEEDBACK = "SELECT heap_feedback(:rid, :used, :ignored, :now, :namespace, :config, :tune)"
ANSWER = "SELECT heap_answer(:rid, :answer, :now, :namespace, :config, :tune)"
RECALL_SHOWN = "SELECT shown FROM recalls WHERE id = :id"

# which shown memories :answer used (heap_attribute in C): one JSON array by
# position; a memory forgotten since the recall comes with a NULL text
# (bench/attribution.py runs it; heap_answer runs its own copy, csrc/feedback.c)
ATTRIBUTE = """SELECT heap_attribute(:answer, r.query, s.key, m.text, m.created_at)
FROM recalls AS r CROSS JOIN json_each(r.shown) AS s LEFT JOIN memories AS m ON m.id = s.value
WHERE r.id = :id"""

EVENTS = """SELECT id, recall_id, position, namespace, qtype, used, deltas FROM events
ORDER BY id"""

# The events of recalls from :first on (auto-tune's bounded replay: those of
# the recalls it replays and of the recalls between them), read through the
# UNIQUE(recall_id, position) index (SQLite's name for it), then put in EVENTS'
# order: without statistics the planner would rather scan every event than sort.
EVENTS_FROM = """SELECT id, recall_id, position, namespace, qtype, used, deltas
FROM events INDEXED BY sqlite_autoindex_events_1 WHERE recall_id >= :first ORDER BY id"""


# A link's evidence added to a layer (import, priors).
UPSERT_LINK = """
INSERT INTO links(namespace, feature, qtype, alpha, beta, n) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT(namespace, feature) DO UPDATE SET
  alpha = alpha + excluded.alpha, beta = beta + excluded.beta, n = n + excluded.n
"""

# The pooled rows as stored (heapmem.learning.pooled_rows puts the pending
# changes over them: POOL_NOW).
POOLED_ROWS = """SELECT feature, qtype, alpha, beta, n, support, low_rate, high_rate FROM links
WHERE namespace = '*'"""

# The pooled rows pending changes touch, as readers see them (csrc/feedback.c).
POOL_NOW = "SELECT heap_pool_now()"

# Fold the pending changes into the pooled rows now (csrc/feedback.c).
FOLD_POOL = "SELECT heap_fold_pool()"

# A namespace's own rows, with its share of each pooled row.
OWN_LINKS = """SELECT feature, alpha, beta, pool_alpha, pool_beta, n FROM links
WHERE namespace = :namespace"""

# The namespaces' own rows (the pooled ones: POOLED_ROWS).
OWN_ROWS = "SELECT namespace, feature, alpha, beta, n, support FROM links WHERE namespace != '*'"

# -- memories ----------------------------------------------------------------------

# The seq the next memory follows: never one a forgotten memory had.
LAST_SEQ = f"""
SELECT max(coalesce((SELECT max(seq) FROM memories), 0),
           coalesce((SELECT CAST(value AS INTEGER) FROM heapmem_meta
                     WHERE key = '{META_LAST_SEQ}'), 0))
"""

LAST_RECALL_ID = f"""
SELECT max(coalesce((SELECT max(id) FROM recalls), 0),
           coalesce((SELECT CAST(value AS INTEGER) FROM heapmem_meta
                     WHERE key = '{META_LAST_RECALL}'), 0))
"""

LAST_EVENT_ID = "SELECT coalesce(max(id), 0) FROM events"

ID_EXISTS = "SELECT 1 FROM memories WHERE id = :id"


#: GET_MEMORY's and LIST_MEMORIES' columns, in their order (results.item reads
#: each row by these names: they are heapmem.Item's fields)
ITEM_COLUMNS = ("id", "text", "namespace", "kind", "source", "key", "importance",
                "created_at", "last_used_at", "metadata", "features", "thread", "turn")
_ITEM_COLUMNS = ", ".join(ITEM_COLUMNS)

GET_MEMORY = f"SELECT {_ITEM_COLUMNS} FROM memories WHERE id = :id"
# add_many(): the memories made since the high-water mark :seq (heap_add_many's)
ADDED_SINCE = "SELECT id, seq, features, turn FROM memories WHERE seq > :seq"

# A namespace's memories, newest first.
LIST_MEMORIES = f"""
SELECT {_ITEM_COLUMNS} FROM memories WHERE namespace = :namespace
ORDER BY created_at DESC, seq DESC LIMIT :limit OFFSET :offset
"""

NAMESPACES = "SELECT DISTINCT namespace FROM memories ORDER BY namespace"

COUNT_MEMORIES = "SELECT count(*) FROM memories"

# A memory changed in place: its features and token count are worked out
# again by the C core; the triggers keep the FTS index and the namespace
# statistics current.
UPDATE_MEMORY = f"""
UPDATE memories SET text = :text, kind = :kind, source = :source, key = :key,
  importance = :importance, metadata = :metadata,
  features = heap_features(:text, :kind, :source),
  ntok = {ntok_sql("nstag", ":text")}
WHERE id = :id
RETURNING seq, features
"""


INSERT_VECTOR = "INSERT INTO vectors(seq, v) VALUES (?, ?)"

REPLACE_VECTOR = "INSERT OR REPLACE INTO vectors(seq, v) VALUES (:seq, :v)"

DELETE_VECTORS = "DELETE FROM vectors"

#: the library's own embedder (schema.BUILTIN_EMBEDDER): every memory without
#: a vector gets one from heap_embed, inside SQL
EMBED_UNEMBEDDED = """INSERT INTO vectors(seq, v)
SELECT m.seq, heap_embed(m.text) FROM memories AS m
WHERE NOT EXISTS (SELECT 1 FROM vectors AS v WHERE v.seq = m.seq) ORDER BY m.seq"""

UNEMBEDDED = """SELECT m.seq, m.text FROM memories AS m LEFT JOIN vectors AS v ON v.seq = m.seq
WHERE v.seq IS NULL"""

# -- forgetting --------------------------------------------------------------------

# copy the WAL into the file and empty it (forget: erased pages leave the WAL)
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"

# forget(): the C core's heap_forget and heap_forget_namespace (csrc/store.c)
# erase the memories, the recalls that showed them and their FTS terms, and
# return how many memories went.
FORGET = "SELECT heap_forget(:ids)"
FORGET_NAMESPACE = "SELECT heap_forget_namespace(:namespace)"

# -- the connection ----------------------------------------------------------------

# moves when another connection commits (the link cache's clock)
DATA_VERSION = "PRAGMA data_version"
# run at close: gathers the statistics the planner uses
OPTIMIZE = "PRAGMA optimize"
# read the schema, so that a connection opens the file's WAL (connect.release_wal_files;
# the checkpoint thread's connection, whose checkpoints find no WAL before it)
READ_SCHEMA = "SELECT 1 FROM sqlite_schema LIMIT 1"

# -- tuning ----------------------------------------------------------------------

# tune(): the C core's heap_tune (csrc/tune.c) replays, decides and deploys;
# :options is its JSON object of options, the report comes back as JSON.
TUNE = "SELECT heap_tune(:options)"
# set_config(save=True), and a restore's tuned weights: the C core's
# heap_save_config (csrc/tune.c), the one writer of meta 'tuned'
SAVE_CONFIG = "SELECT heap_save_config(:config)"

# -- checking ----------------------------------------------------------------------

INTEGRITY = "PRAGMA integrity_check"
SCHEMA_OBJECTS = "SELECT type, name, tbl_name, sql FROM sqlite_schema"
FTS_INTEGRITY = "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)"
# (read-only: the same rows in the index and the table)
FTS_ROWS_APART = """SELECT count(*) FROM memories AS m FULL JOIN memories_fts_docsize AS d
ON d.id = m.seq WHERE m.seq IS NULL OR d.id IS NULL"""
WRONG_NTOK = f"SELECT count(*) FROM memories WHERE ntok IS NOT {ntok_sql('nstag', 'text')}"
WRONG_NSTAG = "SELECT count(*) FROM memories WHERE nstag IS NOT heap_ns_tag(namespace)"
WRONG_NAMESPACE_STATS = """
SELECT count(*) FROM (SELECT namespace, count(*) AS docs, sum(ntok) AS tokens
                      FROM memories GROUP BY namespace) AS t
FULL JOIN namespaces AS s USING (namespace)
WHERE t.docs IS NOT s.docs OR t.tokens IS NOT s.tokens
"""
# bm25_terms' rows against the memories: a document count that differs, a
# bound a memory exceeds, a term no memory holds or one missing (schema 10)
WRONG_BM25_TERMS = """
SELECT count(*) FROM (SELECT m.namespace, t.term, count(*) AS docs, max(t.tf) AS maxtf,
                             min(m.ntok) AS minlen
                      FROM memories AS m, heap_terms(m.text) AS t GROUP BY 1, 2) AS t
FULL JOIN bm25_terms AS s USING (namespace, term)
WHERE t.docs IS NOT s.docs OR s.maxtf < t.maxtf OR s.minlen > t.minlen
"""
NTOK_OF = f"SELECT {ntok_sql(':nstag', ':text')}"
FEATURES_OF = "SELECT heap_features(:text, :kind, :source)"
# check(): every memory's fields as their bytes (each must be UTF-8, its names
# without NUL), and its stored features (each must be what its text, kind and
# source give now)
STORED_MEMORIES = """SELECT seq, CAST(id AS BLOB), CAST(namespace AS BLOB), CAST(kind AS BLOB),
CAST(source AS BLOB), CAST(key AS BLOB), CAST(text AS BLOB), CAST(metadata AS BLOB),
CAST(features AS BLOB) FROM memories ORDER BY seq"""

# -- stats -------------------------------------------------------------------------

STATS_BY_NAMESPACE = """
SELECT namespace, count(*), max(created_at), max(last_used_at) FROM memories
GROUP BY namespace ORDER BY namespace
"""
RECALLS_BY_NAMESPACE = "SELECT namespace, count(*) FROM recalls GROUP BY namespace"
EVENTS_BY_NAMESPACE = ("SELECT namespace, coalesce(sum(used), 0), count(*) FROM events "
                       "GROUP BY namespace")
COUNT_POOLED_LINKS = "SELECT count(*) FROM links WHERE namespace = '*'"
COUNT_LINKS = "SELECT count(*) FROM links"

# -- the report page (heapmem.io.report, through heapmem.learning) --------------------

# Feedback per UTC day (days since 1970-01-01) and per judged recall in it:
# its judgements, how many were used, and the position (rank - 1) of the best
# ranked used memory; an event whose recall was forgotten counts as a recall of
# its own.  :namespace NULL: every namespace.
LEARNING_BY_DAY = """
WITH judged AS (
  SELECT CAST(created_at / 86400 AS INTEGER) AS day, coalesce(recall_id, -id) AS rid,
         count(*) AS judged, sum(used) AS used,
         min(CASE WHEN used = 1 THEN position END) AS best,
         sum(CASE WHEN used = 1 THEN position + 1 END) AS used_ranks
  FROM events WHERE :namespace IS NULL OR namespace = :namespace
  GROUP BY day, rid)
SELECT day, sum(judged), sum(used), count(*), count(best),
       coalesce(sum(1.0 / (best + 1)), 0), coalesce(sum(used_ranks), 0)
FROM judged GROUP BY day ORDER BY day
"""

# The newest tracked recall's id: in the store, or in one namespace (an index seek).
NEWEST_RECALL = "SELECT max(id) FROM recalls"
NEWEST_RECALL_IN = "SELECT max(id) FROM recalls WHERE namespace = :namespace"

# -- Datasette (heapmem.adapters.datasette_plugin) ------------------------------------------

# The canned query "recall" on Datasette's page of a heapmem store: heap_recall
# with its arguments as hidden columns, untracked (Datasette reads through a
# read-only connection, where track is off anyway; track = 0 keeps a writable
# one from logging too).  An empty k is 5.
DATASETTE_RECALL = """SELECT rank, id, round(score, 3) AS score, text, explain
FROM heap_recall
WHERE query = :question AND namespace = :namespace
  AND k = CAST(coalesce(nullif(:k, ''), 5) AS INTEGER) AND track = 0"""

# -- export and import -------------------------------------------------------------


def select_all(table: str, cols: list[str], order: str) -> str:
    """Every row of one of heapmem's tables (schema.TABLES names them)."""
    return f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}"


def insert_row(table: str, cols: list[str]) -> str:
    """One row into one of heapmem's tables, its values bound in order."""
    return f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"


def count_rows(table: str) -> str:
    return f"SELECT count(*) FROM {table}"


# -- a store on a libSQL server (heapmem.remote) ------------------------------------
# What the client compares with its own library before it opens a store there.

LIBRARY_VERSION = "SELECT heap_version()"
LIBRARY_FUNCTIONS = """SELECT DISTINCT name FROM pragma_function_list
WHERE name LIKE 'heap\\_%' ESCAPE '\\' ORDER BY name"""
# A reading PRAGMA in its table-valued form, which a sqld replica serves
# itself (it forwards PRAGMA statements to the primary).  {name} and {args}
# come from heapmem's own statements (heapmem.remote), never from user text.
PRAGMA_AS_SELECT = "SELECT * FROM pragma_{name}({args})"

