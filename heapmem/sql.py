"""Every SQL statement heapmem runs on a store, by name.

Owns: the text of each statement (the recall pipeline, feedback, adding,
updating, listing, forgetting, checking, the logs, export and import).  The
modules that run them hold no SQL of their own; the DDL and the meta keys
live in heapmem.schema.  Named parameters (:name) everywhere; user text is
always bound, never formatted in.
"""
from __future__ import annotations

from .schema import META_LAST_RECALL, META_LAST_SEQ, ntok_sql

# A namespace's own share of a pooled link (schema 4's pool_alpha, pool_beta).
_OWN_A, _OWN_B = "o.pool_alpha", "o.pool_beta"

# The learned links a namespace sees, as one link-set blob for heap_score():
# its own evidence in full, and the other namespaces' as the pooled row holds
# it (schema 4: a trimmed sum, empty until enough namespaces back a link)
# less the namespace's own share.  heap_links() takes (own, own + others)
# and scales others to :pseudocount observations.
# (Restricting to the question type's rows only skips rows it never reads.)
LINKS = f"""
SELECT heap_links(p.feature, coalesce(o.alpha, 0), coalesce(o.beta, 0),
                  coalesce(o.alpha, 0) + max(p.alpha - coalesce({_OWN_A}, 0), 0),
                  coalesce(o.beta, 0) + max(p.beta - coalesce({_OWN_B}, 0), 0), :pseudocount)
FROM links AS p LEFT JOIN links AS o ON o.namespace = :namespace AND o.feature = p.feature
WHERE p.namespace = '*' AND p.qtype IN ('', :qtype)
"""

# One new memory; the C core works out its shape features, namespace tag and
# FTS5 token count.
INSERT_MEMORY = f"""
INSERT INTO memories(seq, id, namespace, nstag, text, kind, source, key, importance, features,
                     created_at, metadata, ntok)
VALUES (:seq, :id, :namespace, heap_ns_tag(:namespace), :text, :kind, :source, :key, :importance,
        heap_features(:text, :kind, :source), :created_at, :metadata,
        {ntok_sql("heap_ns_tag(:namespace)", ":text")})
RETURNING features
"""

# Feedback: the judged memories (:judged, JSON [[position, used, features,
# age_days], ...]) become events, each with the deltas heap_credit() gives it.
INSERT_EVENTS = """
INSERT INTO events(recall_id, position, namespace, qtype, used, deltas, created_at)
SELECT :rid, j.value ->> 0, :namespace, :qtype, j.value ->> 1,
       heap_credit(j.value ->> 2, :qtype, j.value ->> 3, j.value ->> 1, :links, :config), :now
FROM json_each(:judged) AS j
"""

# ... and fold into the links: heap_fold() sums the same credits per feature
# ({feature: [d_alpha, d_beta, n]}, worked out again from :judged: summing
# the events' JSON back in SQL measured slower).
FOLD = """
SELECT heap_fold(j.value ->> 2, :qtype, j.value ->> 3, j.value ->> 1, :links, :config)
FROM json_each(:judged) AS j
"""

# ... and add them to the namespace's own links ...
FOLD_OWN = """
INSERT INTO links(namespace, feature, qtype, alpha, beta, n)
SELECT :namespace, t.key,
       CASE WHEN instr(t.key, '/') > 0 THEN substr(t.key, 1, instr(t.key, '/') - 1) ELSE '' END,
       t.value ->> 0, t.value ->> 1, t.value ->> 2
FROM json_each(:fold) AS t
WHERE true
ON CONFLICT(namespace, feature) DO UPDATE SET
  alpha = alpha + excluded.alpha, beta = beta + excluded.beta, n = n + excluded.n
"""

# (then heapmem.learning updates the touched features' pooled rows)

# -- the pooled layer (heapmem.learning keeps it; schema 4 describes it) ----------

_FEATURES = "feature IN (SELECT value FROM json_each(:features))"
OWN_ROWS = """SELECT namespace, feature, alpha, beta, n, pool_alpha, pool_beta FROM links
WHERE namespace != '*' ORDER BY feature, namespace"""
OWN_ROWS_OF = f"""SELECT namespace, feature, alpha, beta, n, pool_alpha, pool_beta FROM links
WHERE namespace != '*' AND {_FEATURES} ORDER BY feature, namespace"""
# What feedback needs before it folds: for each touched feature, the
# namespace's own row (NULL for a new one) and the pooled row's kept rates
# (NULL while nothing is pooled; no row at all for a new feature).
BEFORE_FOLD = """
SELECT t.value, o.alpha, o.beta, o.pool_alpha, o.pool_beta, p.feature IS NOT NULL,
       p.low_rate, p.high_rate,
       CASE WHEN o.feature IS NULL THEN  -- only a new row needs to know how many
         (SELECT count(*) FROM (  -- back it, and only up to :least
            SELECT 1 FROM links AS q WHERE q.feature = t.value AND q.namespace != '*'
            LIMIT :least))
       END
FROM json_each(:features) AS t
LEFT JOIN links AS o ON o.namespace = :namespace AND o.feature = t.value
LEFT JOIN links AS p ON p.namespace = '*' AND p.feature = t.value
"""
SET_SHARE = "UPDATE links SET pool_alpha = ?, pool_beta = ? WHERE namespace = ? AND feature = ?"
DELETE_POOLED = "DELETE FROM links WHERE namespace = '*'"
DELETE_POOLED_OF = f"DELETE FROM links WHERE namespace = '*' AND {_FEATURES}"
INSERT_POOLED = """INSERT INTO links(namespace, feature, qtype, alpha, beta, n, support, low_rate,
                   high_rate) VALUES ('*', ?, ?, ?, ?, ?, ?, ?, ?)"""
# What feedback changes in pooled rows, {feature: [d_alpha, d_beta, d_n,
# d_support, low_rate, high_rate]}, the kept rates as they are after it; a
# feature no namespace had gets its pooled row (nothing pooled yet: 0, 0, n,
# 1, NULL, NULL).
ADD_TO_POOLED = """
INSERT INTO links(namespace, feature, qtype, alpha, beta, n, support, low_rate, high_rate)
SELECT '*', t.key,
       CASE WHEN instr(t.key, '/') > 0 THEN substr(t.key, 1, instr(t.key, '/') - 1) ELSE '' END,
       t.value ->> 0, t.value ->> 1, t.value ->> 2, t.value ->> 3, t.value ->> 4, t.value ->> 5
FROM json_each(:add) AS t
WHERE true
ON CONFLICT(namespace, feature) DO UPDATE SET
  alpha = alpha + excluded.alpha, beta = beta + excluded.beta, n = n + excluded.n,
  support = support + excluded.support, low_rate = excluded.low_rate,
  high_rate = excluded.high_rate
"""
# One feature's rows around its trim boundaries, for feedback to rework a
# pooled row without reading every namespace's (links_rate holds them in this
# order): side 0, the :m lowest rates of use, ties by namespace, as
# learning.pool_feature sorts; side 1, the :m highest; side 2, :namespace's own
# row.  Each side's rows come in no set order.
_POOL_ROW_COLUMNS = "namespace, alpha, beta, pool_alpha, pool_beta"
_OWN_OF_FEATURE = "FROM links WHERE feature = :feature AND namespace != '*'"
_RATE = "alpha / (alpha + beta)"  # NULL for no evidence: lowest, as -inf in Python
POOL_EDGES = f"""
SELECT 0, * FROM (SELECT {_POOL_ROW_COLUMNS} {_OWN_OF_FEATURE}
                  ORDER BY {_RATE}, namespace LIMIT :m)
UNION ALL
SELECT 1, * FROM (SELECT {_POOL_ROW_COLUMNS} {_OWN_OF_FEATURE}
                  ORDER BY {_RATE} DESC, namespace DESC LIMIT :m)
UNION ALL
SELECT 2, {_POOL_ROW_COLUMNS} FROM links WHERE namespace = :namespace AND feature = :feature
"""
# every namespace's row of a feature (one that has just reached enough
# namespaces to be pooled: then there are `min` of them)
POOL_ALL_ROWS = f"SELECT {_POOL_ROW_COLUMNS} {_OWN_OF_FEATURE}"


# The BM25 top N of a question in a namespace, with the namespace's own
# statistics: heap_bm25_row() reads each matching row's term frequencies,
# heap_bm25_top() scores them with the namespace's document count and average
# length (and each term's document frequency over the match set), reading exact
# row lengths only for rows that can still reach the top, and returns the best
# N as JSON.  FTS5's bm25(memories_fts, 0.0, 1.0) in a store holding only this
# namespace, but with Lucene's IDF (never zero), and no scan of the other
# namespaces' postings.  (LIMIT -1 keeps SQLite from flattening the inner
# query into the aggregate, where an FTS5 auxiliary function cannot run.)
LEX_TOP = """SELECT json_extract(value, '$[0]') AS seq, json_extract(value, '$[1]') AS b
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
SCORE_INPUTS = """m.seq, m.importance,
         m.features || ' ' || heap_relate(:question, m.source) AS features, lex.b AS rank,
         (:now - coalesce(m.last_used_at, m.created_at)) / 86400.0 AS age_days,
         m.key IS NOT NULL AND EXISTS (
           SELECT 1 FROM memories AS n
           WHERE n.namespace = m.namespace AND n.key = m.key
             AND (n.created_at > m.created_at OR (n.created_at = m.created_at AND n.seq > m.seq))
         ) AS superseded"""

# The BM25 candidates with their score inputs; shared by recall() and RECALL_SQL.
# The joins are CROSS JOINs: SQLite then keeps the order written (the top N
# first, each memory by its rowid) whatever statistics the file has.  Without
# them, a store that was never closed (no sqlite_stat1 yet: PRAGMA optimize
# writes it at close) is planned from the namespace index instead, visiting
# every memory of the namespace for each of the top N: 14 times slower.
CAND_CTE = f"""
cand AS (
  SELECT {SCORE_INPUTS}
  FROM ({LEX_TOP}) AS lex
  CROSS JOIN memories AS m ON m.seq = lex.seq
  WHERE m.namespace = :namespace
)"""

# Hybrid candidates: the BM25 top N united with the vector top N of the
# namespace (:qvec, the question's embedding), each with its cosine.
HYBRID_CTE = f"""
lex AS ({LEX_TOP}),
vec AS (
  SELECT v.seq FROM memories AS m CROSS JOIN vectors AS v ON v.seq = m.seq
  WHERE m.namespace = :namespace
  ORDER BY heap_cosine(v.v, :qvec) DESC LIMIT :candidates
),
cand AS (
  SELECT {SCORE_INPUTS},
         heap_cosine(vv.v, :qvec) AS cos
  FROM (SELECT seq FROM lex UNION SELECT seq FROM vec) AS u
  CROSS JOIN memories AS m ON m.seq = u.seq
  LEFT JOIN lex ON lex.seq = u.seq
  LEFT JOIN vectors AS vv ON vv.seq = u.seq
  WHERE m.namespace = :namespace
)"""

HYBRID_CANDIDATES = "WITH" + HYBRID_CTE + """
SELECT seq, rank, importance, age_days, superseded, features, cos FROM cand ORDER BY seq
"""

CANDIDATES = "WITH" + CAND_CTE + """
SELECT seq, rank, importance, age_days, superseded, features FROM cand ORDER BY rank, seq
"""

# What a result shows, fetched for the top k only (:seqs, a JSON array).
SHOW = """SELECT seq, id, text, kind, source, key, created_at, last_used_at, metadata
FROM memories WHERE seq IN (SELECT value FROM json_each(:seqs))"""

# The whole ranking as one statement, for any SQLite client that loaded the
# library.  Named parameters: :question, :namespace, :now (unix seconds), :k,
# :candidates, :pseudocount and :config (ScoringConfig.to_sql()).
RECALL_SQL = "WITH" + CAND_CTE + """,
learned AS (""" + LINKS.replace(":qtype", "heap_qtype(:question)").rstrip() + """
)
SELECT m.id, m.text, top.score
FROM (SELECT seq, heap_score(rank / min(rank) OVER (), age_days, importance, superseded,
                             features, heap_qtype(:question), (SELECT * FROM learned),
                             :config) AS score
      FROM cand ORDER BY score DESC, seq LIMIT :k) AS top
JOIN memories AS m ON m.seq = top.seq
ORDER BY top.score DESC, top.seq
"""


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

# The newest recall that showed every id of :ids (a JSON array: any number of
# ids, no SQL depth or variable limit).
NEWEST_RECALL_SHOWING = """
SELECT r.id FROM recalls AS r
WHERE (:namespace IS NULL OR r.namespace = :namespace)
  AND NOT EXISTS (SELECT 1 FROM json_each(:ids) AS g
                  WHERE g.value NOT IN (SELECT value FROM json_each(r.shown)))
ORDER BY r.id DESC LIMIT 1
"""

GET_RECALL = """
SELECT id, namespace, query, qtype, created_at, shown, ages, features, rest
FROM recalls WHERE id = :id
"""

# What feedback needs of a recall (the columns it reads, no more)
RECALL_TO_JUDGE = "SELECT namespace, qtype, shown, ages, features FROM recalls WHERE id = :id"

# Recalls with at least one memory judged used (tune() replays them).
JUDGED_RECALLS = """
SELECT id, namespace, query, qtype, created_at, shown, ages, features, rest FROM recalls
WHERE id IN (SELECT recall_id FROM events WHERE used = 1) ORDER BY id
"""

# -- feedback ----------------------------------------------------------------------

JUDGED_POSITIONS = "SELECT position FROM events WHERE recall_id = :id"

# which shown memories :answer used (heap_attribute in C): one JSON array by
# position; a memory forgotten since the recall comes with a NULL text
ATTRIBUTE = """SELECT heap_attribute(:answer, r.query, s.key, m.text, m.created_at)
FROM recalls AS r CROSS JOIN json_each(r.shown) AS s LEFT JOIN memories AS m ON m.id = s.value
WHERE r.id = :id"""

EVENTS = """SELECT id, recall_id, position, namespace, qtype, used, deltas FROM events
ORDER BY id"""

MARK_USED = """
UPDATE memories SET last_used_at = max(coalesce(last_used_at, 0), :now)
WHERE id IN (SELECT value FROM json_each(:ids))
"""

# A link's evidence added to a layer (import, priors).
UPSERT_LINK = """
INSERT INTO links(namespace, feature, qtype, alpha, beta, n) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT(namespace, feature) DO UPDATE SET
  alpha = alpha + excluded.alpha, beta = beta + excluded.beta, n = n + excluded.n
"""

POOLED_LINKS = "SELECT feature, alpha, beta, n, support FROM links WHERE namespace = '*'"

# Each pooled link with the namespace's own share of it.
NAMESPACE_LINKS = f"""
SELECT p.feature, coalesce(o.alpha, 0), coalesce(o.beta, 0),
       coalesce(o.alpha, 0) + max(p.alpha - coalesce({_OWN_A}, 0), 0),
       coalesce(o.beta, 0) + max(p.beta - coalesce({_OWN_B}, 0), 0),
       coalesce(o.n, 0), p.support - (o.feature IS NOT NULL)
FROM links AS p LEFT JOIN links AS o ON o.namespace = :namespace AND o.feature = p.feature
WHERE p.namespace = '*'
"""

ALL_LINKS = "SELECT namespace, feature, alpha, beta, n, support FROM links"

EXPORT_LINKS = """SELECT feature, qtype, alpha, beta, n FROM links WHERE namespace = '*'
ORDER BY feature"""

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

TAKEN_IDS = "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(:ids)) LIMIT 1"

ID_EXISTS = "SELECT 1 FROM memories WHERE id = :id"

EXISTING_IDS = "SELECT id FROM memories WHERE id IN (SELECT value FROM json_each(:ids))"

_ITEM_COLUMNS = """id, text, namespace, kind, source, key, importance, created_at, last_used_at,
       metadata, features"""

GET_MEMORY = f"SELECT {_ITEM_COLUMNS} FROM memories WHERE id = :id"

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

UNEMBEDDED = """SELECT m.seq, m.text FROM memories AS m LEFT JOIN vectors AS v ON v.seq = m.seq
WHERE v.seq IS NULL"""

# -- forgetting --------------------------------------------------------------------

MAX_SEQ = "SELECT coalesce(max(seq), 0) FROM memories"
MAX_RECALL_ID = "SELECT coalesce(max(id), 0) FROM recalls"
# copy the WAL into the file and empty it (forget: erased pages leave the WAL)
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"

COUNT_NAMESPACE = "SELECT count(*) FROM memories WHERE namespace = :namespace"
FORGET_NAMESPACE = "DELETE FROM memories WHERE namespace = :namespace"
DETACH_NAMESPACE_EVENTS = "UPDATE events SET recall_id = NULL WHERE namespace = :namespace"
FORGET_NAMESPACE_RECALLS = "DELETE FROM recalls WHERE namespace = :namespace"
FORGET_MEMORY = "DELETE FROM memories WHERE id = ?"
# the recalls that showed any of :ids (a JSON array), looked for in the logs
# of their namespaces only (recalls_namespace)
RECALLS_SHOWING = """SELECT DISTINCT r.id FROM recalls AS r, json_each(r.shown) AS s
WHERE r.namespace IN (SELECT namespace FROM memories
                      WHERE id IN (SELECT value FROM json_each(:ids)))
  AND s.value IN (SELECT value FROM json_each(:ids))"""
DETACH_EVENTS = "UPDATE events SET recall_id = NULL WHERE recall_id = ?"
FORGET_RECALL = "DELETE FROM recalls WHERE id = ?"

# -- the connection ----------------------------------------------------------------

# moves when another connection commits (the link cache's clock)
DATA_VERSION = "PRAGMA data_version"
# run at close: gathers the statistics the planner uses
OPTIMIZE = "PRAGMA optimize"

# -- tune()'s scratch database (in memory, never the store) ------------------------

TUNE_SCRATCH = "CREATE TABLE l(feature TEXT, oa REAL, ob REAL, pa REAL, pb REAL)"
TUNE_CLEAR = "DELETE FROM l"
TUNE_ROW = "INSERT INTO l VALUES (?, ?, ?, ?, ?)"
TUNE_LINKS = "SELECT heap_links(feature, oa, ob, pa, pb, ?) FROM l"

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
NTOK_OF = f"SELECT {ntok_sql(':nstag', ':text')}"
FEATURES_OF = "SELECT heap_features(:text, :kind, :source)"

# -- stats -------------------------------------------------------------------------

STATS_BY_NAMESPACE = """
SELECT namespace, count(*), max(created_at), max(last_used_at) FROM memories
GROUP BY namespace ORDER BY namespace
"""
RECALLS_BY_NAMESPACE = "SELECT namespace, count(*) FROM recalls GROUP BY namespace"
EVENTS_BY_NAMESPACE = "SELECT namespace, coalesce(sum(used), 0), count(*) FROM events GROUP BY namespace"
COUNT_POOLED_LINKS = "SELECT count(*) FROM links WHERE namespace = '*'"
COUNT_LINKS = "SELECT count(*) FROM links"

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

# recall() on a server in one round trip and one snapshot: the candidates
# scored by heap_score() (the C that recall() calls through cffi), the top :k
# with their score inputs, their relevance and what they show, and on the
# first row the link set the namespace sees; the client works out each
# result's factors from them with the same C (heapmem.remote).  Parameters:
# CANDIDATES' and LINKS', :k and :config.
REMOTE_RECALL = "WITH" + CAND_CTE + """,
learned AS (""" + LINKS.rstrip() + """
),
lexed AS (
  SELECT *, CASE WHEN min(rank) OVER () < 0 THEN rank / min(rank) OVER () ELSE 1.0 END AS lexical
  FROM cand
),
top AS (
  SELECT *, heap_score(lexical, age_days, importance, superseded, features, :qtype,
                       (SELECT * FROM learned), :config) AS score
  FROM lexed ORDER BY score DESC, seq LIMIT :k
)
SELECT t.seq, t.rank, t.importance, t.age_days, t.superseded, t.features, t.lexical,
       m.id, m.text, m.kind, m.source, m.key, m.created_at, m.last_used_at, m.metadata,
       CASE WHEN row_number() OVER (ORDER BY t.score DESC, t.seq) = 1
            THEN (SELECT * FROM learned) END AS links
FROM top AS t CROSS JOIN memories AS m ON m.seq = t.seq
ORDER BY t.score DESC, t.seq
"""
