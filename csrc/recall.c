/*
 * recall.c: heap_recall, recall as a table-valued function (an eponymous
 * virtual table, as FTS5's vocabulary tables and sqlite-vec's tables are).
 * Included by heapmem.c, after the scoring core it calls.
 *
 *   SELECT id, score, text FROM heap_recall('When is my flight to Lisbon?', 'user:maya');
 *
 * Arguments (hidden columns, in this order): query, namespace ('default'),
 * k (5), now (unix seconds; the current time), config (a config string as
 * ScoringConfig.to_sql() writes it; the store's tuned config, else the
 * defaults), track (1: log the recall so heap_feedback can judge it; 0 on a
 * read-only connection), qvec (the question's vector: hybrid candidates
 * when the store holds vectors), tracked (1: a tracked recall, explored
 * when the config's explore > 0; by default track's value: Memory.recall
 * passes track 0 and tracked 1, as it logs the recall itself), kinds (a
 * kind, or a JSON array of kinds: only memories of those kinds), since and
 * until (unix seconds: only memories created at or after since, and before
 * until), namespaces (a JSON array of namespaces, in place of namespace: one
 * ranking across them, hr_run_across).  The filters apply inside the
 * candidate searches (the BM25 top N and the vector top N are the top N of
 * the memories they let through), not to the k ranked.  Columns are named after heapmem.Result's fields, plus
 * explain (the one-line reason), recall_id (the logged recall's id, NULL
 * untracked), qtype, rest (the score without its usefulness factor), links
 * (the link set it scored with, for explain), context, context_n and explore
 * (contextual utility's and exploration's factors) and lift (every learned
 * factor on the score together, within max_lift: score = relevance^w x
 * recency^w x importance^w x lift x rules); the namespace column reads back
 * each row's namespace.
 *
 * It is the one ranking: Memory.recall, on a file and on a server, runs it
 * (heapmem/db/sql.py's RECALL).  The namespace's BM25 top N (hr_lexical: an
 * exact, pruned search over FTS5, or over the postings a big namespace's
 * connection holds, hr_pc; also heap_bm25_search), the candidate
 * statement (the superseded rule, the vector top N), the link set the namespace
 * sees (its own links and the pooled layer's), hm_score_batch, then score
 * order with ties by seq; in a tracked recall with explore > 0, each score
 * times the factor exploration puts on it (hr_explore).  Every statement
 * it runs is prepared once per connection and kept by the table (call.c's
 * hm_conn keeps the other units' statements while the table is connected);
 * its errors are its call's (hc_fail on t->call, the first one wins).
 * Relies on: text.c (hm_qtype, hm_match, hm_fnv64), sample.c
 * (hm_splitmix64), score.c (hm_config_parse, hm_score_batch, hm_explain,
 * hm_explore), sqlfuncs.c (hq_is_number, hm_repr,
 * hq_json_string), bm25.c (hb_bm25_rank, hm_bm25_bound, hm_bm25_guess,
 * hb_bm25_formula, hm_bm25, hm_bm25_part, hm_docsize, the ranking's heaps; heap_bm25_tail and heap_bm25_top run inside its
 * statements), heap_links and heap_relate (sqlfuncs.c) too.  store.c's hs_check_store is
 * declared here, ahead of its definition.
 */

#pragma region heap_recall

enum {
  HR_RANK, HR_ID, HR_TEXT, HR_SCORE, HR_KIND, HR_SOURCE, HR_KEY, HR_RELEVANCE, HR_RECENCY,
  HR_IMPORTANCE, HR_USEFULNESS, HR_RULES, HR_BM25, HR_AGE_DAYS, HR_SUPERSEDED, HR_FEATURES,
  HR_CREATED_AT, HR_LAST_USED_AT, HR_METADATA, HR_LEXICAL, HR_COSINE, HR_EXPLAIN, HR_RECALL_ID,
  HR_QTYPE, HR_REST, HR_LINKS, HR_CONTEXT, HR_CONTEXT_N, HR_EXPLORE, HR_THREAD, HR_TURN,
  HR_THREAD_LIFT, HR_THREAD_FROM, HR_THREAD_OFFSET, HR_TIME_LIFT, HR_TIME_WINDOW, HR_LIFT,
  /* the arguments */
  HR_QUERY, HR_NAMESPACE, HR_K, HR_NOW, HR_CONFIG, HR_TRACK, HR_QVEC, HR_TRACKED, HR_KINDS,
  HR_SINCE, HR_UNTIL, HR_NAMESPACES, HR_NCOL
};
#define HR_NARGS (HR_NCOL - HR_QUERY)

static const char hr_schema[] =
    "CREATE TABLE x(rank INTEGER, id TEXT, text TEXT, score REAL, kind TEXT, source TEXT, "
    "key TEXT, relevance REAL, recency REAL, importance REAL, usefulness REAL, rules REAL, "
    "bm25 REAL, age_days REAL, superseded INTEGER, features TEXT, created_at REAL, "
    "last_used_at REAL, metadata TEXT, lexical REAL, cosine REAL, \"explain\" TEXT, "
    "recall_id INTEGER, qtype TEXT, rest REAL, links BLOB, context REAL, context_n REAL, "
    "explore REAL, thread TEXT, turn INTEGER, thread_lift REAL, thread_from TEXT, "
    "thread_offset INTEGER, time_lift REAL, time_window TEXT, lift REAL, "
    "query HIDDEN, namespace HIDDEN, k HIDDEN, "
    "now HIDDEN, config HIDDEN, track HIDDEN, qvec HIDDEN, tracked HIDDEN, kinds HIDDEN, "
    "since HIDDEN, until HIDDEN, namespaces HIDDEN)";

/* The statements heap_recall runs (heap_statement gives their text: tests/
 * test_plans.py checks their query plans).  hr_sql_log logs a recall as
 * heapmem/db/sql.py's LOG_RECALL does (tests/test_sql_loop.py compares them). */
/* the filters (?6 kinds, a JSON array, ?7 since, ?8 until; NULL: none) on memories AS M */
#define HR_FILTER(M)                                                                           \
  "(?6 IS NULL OR " M ".kind IN (SELECT value FROM json_each(?6))) AND (?7 IS NULL OR " M    \
  ".created_at >= ?7) AND (?8 IS NULL OR " M ".created_at < ?8)"
/* the memory of seq SEQ passes the filters (looked up only when there are any) */
#define HR_FILTERED(SEQ)                                                                       \
  "(?6 IS NULL AND ?7 IS NULL AND ?8 IS NULL OR EXISTS (SELECT 1 FROM memories AS f WHERE "   \
  "f.seq = " SEQ " AND " HR_FILTER("f") "))"
/* the lexical candidates, ?9: the namespace's BM25 top N as hr_lexical gives it */
#define HR_LEX_TOP                                                                             \
  "SELECT json_extract(value, '$[0]') AS seq, json_extract(value, '$[1]') AS b "              \
  "FROM json_each(?9)"
#define HR_SCORE_INPUTS HR_SCORE_INPUTS_OF("lex.b")
#define HR_SCORE_INPUTS_OF(RANK)                                                               \
  "m.seq, m.importance, m.features || ' ' || heap_relate(?1, m.source) AS features, "         \
  RANK " AS rank, (?3 - coalesce(m.last_used_at, m.created_at)) / 86400.0 AS age_days, "      \
  "m.key IS NOT NULL AND EXISTS (SELECT 1 FROM memories AS n WHERE n.namespace = m.namespace " \
  "AND n.key = m.key AND (n.created_at > m.created_at OR (n.created_at = m.created_at AND "     \
  "n.seq > m.seq))) AS superseded"

/* ?1 question, ?2 namespace, ?3 now, ?4 candidates [, ?5 qvec], ?6-?8 the filters,
 * ?9 the BM25 top N (JSON, hr_lexical) */
static const char hr_sql_cand[] =
    "WITH cand AS (SELECT " HR_SCORE_INPUTS " FROM (" HR_LEX_TOP ") AS lex "
    "CROSS JOIN memories AS m ON m.seq = lex.seq WHERE m.namespace = ?2) "
    "SELECT seq, rank, importance, age_days, superseded, features, NULL FROM cand "
    "ORDER BY rank, seq";
static const char hr_sql_hybrid[] =
    "WITH lex AS MATERIALIZED (" HR_LEX_TOP "), "
    "vec AS (SELECT v.seq FROM memories AS m CROSS JOIN vectors AS v ON v.seq = m.seq "
    "WHERE m.namespace = ?2 AND " HR_FILTERED("m.seq") " ORDER BY heap_cosine(v.v, ?5) DESC "
    "LIMIT ?4), "
    "cand AS (SELECT " HR_SCORE_INPUTS ", heap_cosine(vv.v, ?5) AS cos "
    "FROM (SELECT seq FROM lex UNION SELECT seq FROM vec) AS u "
    "CROSS JOIN memories AS m ON m.seq = u.seq LEFT JOIN lex ON lex.seq = u.seq "
    "LEFT JOIN vectors AS vv ON vv.seq = u.seq WHERE m.namespace = ?2) "
    "SELECT seq, rank, importance, age_days, superseded, features, cos FROM cand ORDER BY seq";
/* the carried embedder's hybrid: the lexical candidates (hr_sql_cand), then
 * the vector top N that BM25 did not find: ?4 their seqs (a JSON array from
 * the connection's cache); their cosines are worked out in C */
static const char hr_sql_vrows[] =
    "WITH cand AS (SELECT " HR_SCORE_INPUTS_OF("NULL") " FROM json_each(?4) AS j "
    "CROSS JOIN memories AS m ON m.seq = j.value WHERE m.namespace = ?2) "
    "SELECT seq, rank, importance, age_days, superseded, features, NULL FROM cand";
/* ?1 seq, ?6-?8 the filters: whether its memory passes them (a row of the
 * vector cache whose kind it does not keep: embed.c, HV_KIND_OTHER) */
static const char hr_sql_allow[] =
    "SELECT 1 FROM memories AS m WHERE m.seq = ?1 AND " HR_FILTER("m");
/* ?1 a JSON array of kinds: each one */
static const char hr_sql_kindlist[] = "SELECT value FROM json_each(?1)";
/* ?1 kinds as given: a JSON array of text (1), else 0 */
static const char hr_sql_kinds[] =
    "SELECT CASE WHEN json_valid(?1) THEN json_type(?1) = 'array' AND json_array_length(?1) > 0 "
    "AND NOT EXISTS (SELECT 1 FROM json_each(?1) WHERE type <> 'text') ELSE 0 END";
/* ?1 kinds (a JSON array of text): each kind */
static const char hr_sql_kind_each[] = "SELECT value FROM json_each(?1)";
/* ?1 namespaces (a JSON array of text): each, in sorted order, and whether
 * it repeats the one before it */
static const char hr_sql_space_each[] =
    "SELECT value, value IS lag(value) OVER (ORDER BY value) FROM json_each(?1) ORDER BY value";
/* A candidate's most recent judgements, the record contextual utility reads
 * of it: a window, so that a recall costs the same after a memory's
 * thousandth judgement as after its fortieth (bench/RESULTS.md 32). */
#define HR_CTX_RECENT 32
#define HR_STR_(x) #x
#define HR_STR(x) HR_STR_(x)
/* ?1 the candidates' seqs (JSON): each one's place in it, and its
 * HR_CTX_RECENT latest judgements (used, and the recall that showed it) */
static const char hr_sql_judged[] =
    "SELECT c.key, j.used, j.recall_id FROM json_each(?1) AS c CROSS JOIN judged AS j "
    "ON j.seq = c.value AND j.recall_id >= coalesce((SELECT recall_id FROM judged "
    "WHERE seq = c.value ORDER BY recall_id DESC LIMIT 1 OFFSET " HR_STR(HR_CTX_RECENT) " - 1), 0)";
/* ?1 a recall: its question */
static const char hr_sql_question[] = "SELECT query FROM recalls WHERE id = ?1";
/* ?1 namespace: the store's embedder, its dimension, the namespace's stamps,
 * its vector index's version (0: none) and how much recall probes of it */
static const char hr_sql_vstate[] =
    "SELECT (SELECT value FROM heapmem_meta WHERE key = '" HM_META_EMBEDDER "'), "
    "(SELECT value FROM heapmem_meta WHERE key = '" HM_META_EMBEDDING_DIM "'), "
    "(SELECT added FROM vector_stamps WHERE namespace = ?1), "
    "(SELECT changed FROM vector_stamps WHERE namespace = ?1), "
    "coalesce((SELECT version FROM vector_index WHERE namespace = ?1), 0)";
/* ?1 namespace, ?2 after this seq: the namespace's vectors in seq order, with
 * their memories' kinds and times and their partitions */
static const char hr_sql_vload[] =
    "SELECT v.seq, v.v, m.kind, m.created_at, p.part FROM memories AS m CROSS JOIN vectors "
    "AS v ON v.seq = m.seq LEFT JOIN vector_parts AS p ON p.seq = v.seq "
    "WHERE m.namespace = ?1 AND m.seq > ?2 ORDER BY m.seq";
/* ?1 a partition, ?2 its namespace: its vectors in seq order, as hr_sql_vload */
static const char hr_sql_vpart[] =
    "SELECT v.seq, v.v, m.kind, m.created_at, p.part FROM vector_parts AS p CROSS JOIN "
    "vectors AS v ON v.seq = p.seq CROSS JOIN memories AS m ON m.seq = p.seq "
    "WHERE p.part = ?1 AND m.namespace = ?2 ORDER BY p.seq";
/* ?1 seq: its vector's partition */
static const char hr_sql_vpart_of[] = "SELECT part FROM vector_parts WHERE seq = ?1";
/* ?1 qtype, ?2 namespace: the pooled rows the namespace sees (the plain
 * features and those crossed with the question type) with its own row of
 * each (hr_link_set makes the link set of them) */
static const char hr_sql_links[] =
    "SELECT p.feature, p.alpha, p.beta, o.alpha, o.beta, o.pool_alpha, o.pool_beta "
    "FROM links AS p LEFT JOIN links AS o ON o.namespace = ?2 AND o.feature = p.feature "
    "WHERE p.namespace = '*' AND p.qtype IN ('', ?1)";
/* ?1 namespace, ?2 feature: its own row (a pooled row the pending changes made) */
static const char hr_sql_own[] =
    "SELECT alpha, beta, pool_alpha, pool_beta FROM links WHERE namespace = ?1 AND feature = ?2";
/* the pooled layer's pending changes (csrc/pool.c), oldest first */
static const char hr_sql_pending[] = "SELECT id, ops FROM pool_pending ORDER BY id";
static const char hr_sql_show[] =
    "SELECT id, text, kind, source, key, created_at, last_used_at, metadata, thread, turn "
    "FROM memories WHERE seq = ?1";
/* a candidate's place (place.c below): ?1 namespace: whether a memory of it
 * has a thread (memories_thread) */
static const char hr_sql_threads[] =
    "SELECT EXISTS (SELECT 1 FROM memories WHERE namespace = ?1 AND thread IS NOT NULL)";
/* ?1 seqs (JSON): each one's time and place in its thread (its id, with one) */
static const char hr_sql_place[] =
    "SELECT m.seq, m.created_at, m.thread, m.turn, CASE WHEN m.thread IS NOT NULL THEN m.id "
    "END FROM json_each(?1) AS j CROSS JOIN memories AS m ON m.seq = j.value";
/* ?1 seqs (JSON), ?2 turns either side, ?6-?8 the filters: the memories of
 * their threads that many turns around them */
static const char hr_sql_neighbours[] =
    "SELECT DISTINCT m.seq FROM json_each(?1) AS j CROSS JOIN memories AS o ON o.seq = j.value "
    "CROSS JOIN memories AS m ON m.namespace = o.namespace AND m.thread = o.thread "
    "AND m.turn BETWEEN o.turn - ?2 AND o.turn + ?2 WHERE o.thread IS NOT NULL AND "
    HR_FILTER("m");
/* ?1 question, ?2 namespace, ?3 now, ?4 seqs (JSON), ?5 the question's
 * vector: the score inputs of neighbours brought in, with their cosines */
static const char hr_sql_nrows[] =
    "WITH cand AS (SELECT " HR_SCORE_INPUTS_OF("NULL") ", (SELECT heap_cosine(v.v, ?5) "
    "FROM vectors AS v WHERE v.seq = m.seq) AS cos FROM json_each(?4) AS j "
    "CROSS JOIN memories AS m ON m.seq = j.value WHERE m.namespace = ?2) "
    "SELECT seq, rank, importance, age_days, superseded, features, cos FROM cand";
/* the store's tuned config (hr_tuned_read): whether it is a JSON object, then
 * each of its keys with its JSON type and value (no row: none saved) */
static const char hr_sql_tuned[] =
    "SELECT o.ok, j.key, j.type, j.value FROM (SELECT CASE WHEN json_valid(value) THEN "
    "json_type(value) = 'object' ELSE 0 END AS ok, value FROM heapmem_meta WHERE key = '"
    HM_META_TUNED "') AS o LEFT JOIN json_each(CASE WHEN o.ok THEN o.value END) AS j";
/* ?1 namespace: how many recalls it has logged (its own count: another
 * namespace's recalls never move its draws) */
static const char hr_sql_logged[] = "SELECT count(*) FROM recalls WHERE namespace = ?1";
/* ?1 namespace, ?2 query, ?3 qtype, ?4 now, ?5 shown, ?6 ages, ?7 features, ?8 rest:
 * logged only while every memory shown is still one of the namespace's */
static const char hr_sql_log[] =
    "INSERT INTO recalls(id, namespace, query, qtype, created_at, shown, ages, features, rest) "
    "SELECT 1 + max(coalesce((SELECT max(id) FROM recalls), 0), "
    "coalesce((SELECT CAST(value AS INTEGER) FROM heapmem_meta WHERE key = '"
    HM_META_LAST_RECALL "'), 0)), "
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 "
    "WHERE NOT EXISTS (SELECT 1 FROM json_each(?5) AS s WHERE NOT EXISTS (SELECT 1 FROM "
    "memories AS m WHERE m.id = s.value AND m.namespace = ?1)) RETURNING id";

enum { HR_ST_CAND, HR_ST_HYBRID, HR_ST_LINKS, HR_ST_SHOW, HR_ST_TUNED, HR_ST_LOG,
       HR_ST_VROWS, HR_ST_VSTATE, HR_ST_VLOAD, HR_ST_JUDGED, HR_ST_ALLOW, HR_ST_KINDS,
       HR_ST_LOGGED, HR_ST_VPART, HR_ST_VPART_OF, HR_ST_VCENTS, HR_ST_KINDLIST, HR_ST_THREADS,
       HR_ST_PLACE, HR_ST_NEIGHBOURS, HR_ST_NROWS, HR_ST_KIND_EACH, HR_ST_OWN, HR_ST_PENDING,
       HR_ST_LEX_NS, HR_ST_LEX_TERM, HR_ST_LEX_MATCH, HR_ST_LEX_PASS, HR_ST_LEX_KINDS,
       HR_ST_SPACE_EACH, HR_ST_QUESTION, HR_ST_PC_STAMP, HR_ST_PC_LENS, HR_ST_PC_LENS_OF,
       HR_ST_PC_FILTERS, HR_NST };
/* The lexical search's (hr_lexical).  ?1 namespace: its documents and FTS5
 * tokens, and whether it is alone in the file (no memory of another
 * namespace: then the FTS5 tag filters nothing and is left out) */
static const char hr_sql_lex_ns[] =
    "SELECT docs, tokens, NOT EXISTS (SELECT 1 FROM memories WHERE namespace < ?1) AND "
    "NOT EXISTS (SELECT 1 FROM memories WHERE namespace > ?1) "
    "FROM namespaces WHERE namespace = ?1";
/* ?1 namespace, ?2 an FTS5 term: the rows holding it, its highest frequency
 * and the shortest of those rows (schema 10) */
static const char hr_sql_lex_term[] =
    "SELECT docs, maxtf, minlen FROM bm25_terms WHERE namespace = ?1 AND term = ?2";
/* ?1 a MATCH expression, ?2 how many of its phrases are the question's words
 * (its last ones): the rows it matches, with their BM25 inputs for those words */
static const char hr_sql_lex_match[] =
    "SELECT rowid, heap_bm25_tail(memories_fts, ?2, 0.0, 1.0) FROM memories_fts "
    "WHERE memories_fts MATCH ?1";
/* ?1 a memory's seq: what the filters look at (asked of the rows that could
 * still rank, best first, never of every row matched; hr_lex_pass) */
static const char hr_sql_lex_pass[] = "SELECT kind, created_at FROM memories WHERE seq = ?1";
/* ?1 the kinds filter (a JSON array of text, checked): its kinds */
static const char hr_sql_lex_kinds[] = "SELECT value FROM json_each(?1)";
/* The posting cache's (hr_pc).  memories_fts's structure record: FTS5
 * writes it again whenever the index changes (a row added, deleted or
 * merged), so while it reads the same, what the cache took from the index
 * is still what the index holds */
static const char hr_sql_pc_stamp[] = "SELECT block FROM memories_fts_data WHERE id = 10";
/* every row's lengths (FTS5's %_docsize: a varint a column), in seq order:
 * a namespace alone in the file */
static const char hr_sql_pc_lens[] = "SELECT id, sz FROM memories_fts_docsize ORDER BY id";
/* ?1 namespace: its memories' kinds and times, from memories_filter alone
 * (what recall's filters ask, held beside the lengths) */
static const char hr_sql_pc_filters[] =
    "SELECT seq, kind, created_at FROM memories INDEXED BY memories_filter WHERE namespace = ?1";
/* ?1 namespace: its rows' lengths, in seq order */
static const char hr_sql_pc_lens_of[] =
    "SELECT m.seq, d.sz FROM memories AS m CROSS JOIN memories_fts_docsize AS d "
    "ON d.id = m.seq WHERE m.namespace = ?1 ORDER BY m.seq";

static const char *const hr_sql[HR_NST] = {
    hr_sql_cand,    hr_sql_hybrid,     hr_sql_links,  hr_sql_show,     hr_sql_tuned,
    hr_sql_log,     hr_sql_vrows,      hr_sql_vstate, hr_sql_vload,    hr_sql_judged,
    hr_sql_allow,   hr_sql_kinds,      hr_sql_logged, hr_sql_vpart,    hr_sql_vpart_of,
    hv_sql_cents,   hr_sql_kindlist,   hr_sql_threads, hr_sql_place,   hr_sql_neighbours,
    hr_sql_nrows,   hr_sql_kind_each,  hr_sql_own,    hr_sql_pending,  hr_sql_lex_ns,
    hr_sql_lex_term, hr_sql_lex_match, hr_sql_lex_pass, hr_sql_lex_kinds,
    hr_sql_space_each, hr_sql_question, hr_sql_pc_stamp, hr_sql_pc_lens, hr_sql_pc_lens_of,
    hr_sql_pc_filters};

/* The carried model's unit vectors of logged questions, by their text
 * (contextual utility compares each candidate's judged questions with the
 * new one, and the same questions come back recall after recall): HR_QSETS
 * sets of HR_QWAYS entries, a set per hash of the text, the least recently
 * used entry of its set making room for a new one.  The text is kept to
 * compare, so that two texts of one hash never share a vector.  4,096
 * entries (4.3 MB, allocated at the first recall that needs one) hold the
 * questions of a few thousand recalls; 512 direct-mapped slots re-embedded
 * most of them again at 2,000 (bench/RESULTS.md 29). */
#define HR_QWAYS 4
#define HR_QSETS 1024
#define HR_QCACHE (HR_QWAYS * HR_QSETS)
struct hr_qvec {
  char *text;  /* NULL: an empty entry */
  u64 hash;    /* hm_fnv64 of the text */
  u64 used;    /* the connection's count of lookups at its last use */
  int len, ok; /* ok 0: the model knows none of its words */
  float v[HM_EMBED_DIM];
};

static void hr_pc_free(hr_pc *pc); /* (the posting cache, below) */

/* the module's client data goes with the connection */
static void hr_conn_free(void *p) {
  hm_conn *conn = p;
  if (!conn) return;
  sqlite3_api = conn->api;
  hv_free(conn->vc);
  hr_pc_free(conn->pc);
  for (int i = 0; conn->qc && i < HR_QCACHE; i++) sqlite3_free(conn->qc[i].text);
  sqlite3_free(conn->qc);
  ht_job_free(conn->job);
  ha_stemmer_free(conn->stem);
  sqlite3_free(conn);
}

struct hr_vtab {
  sqlite3_vtab base;
  const sqlite3_api_routines *api; /* every method sets sqlite3_api to it first */
  sqlite3 *db;
  hm_conn *conn;
  sqlite3_stmt *st[HR_NST];
  hc_ctx call; /* the call under way (xFilter's): its first error becomes zErrMsg */
};

typedef struct {
  i64 seq;
  double rank;        /* BM25 (lower is better); has_rank 0: found by vectors only */
  int has_rank;
  double importance, age_days, cos;
  int superseded;
  char *features;
  double f[HM_SCORE_COLUMNS];
  double lexical, cosn;
  double ctx, ctx_n; /* contextual utility: its factor and the weighted judgements behind it */
  double xf;         /* exploration's factor on the score (1: none) */
  /* its place (hr_place): read only when the recall needs it */
  double created;    /* created_at */
  char *thread;      /* its thread (sqlite3_malloc'd), NULL: none or not read */
  char *mid;         /* its id, when it has a thread (a neighbour's explain names it) */
  i64 turn;
  double thr;        /* the thread's factor on the score (1: none) */
  const char *from;  /* the id of the neighbour that lifted it (another row's mid) */
  i64 from_off;      /* that neighbour's turn less its own */
  double tf;         /* the question's time window's factor on the score (1: none) */
  sqlite3_value *shown[10]; /* id, text, kind, source, key, created_at, last_used_at,
                             * metadata, thread, turn */
} hr_row;
#define HR_SHOWN 10

typedef struct hr_cursor {
  sqlite3_vtab_cursor base;
  hr_row *rows;
  int n, k, i;
  int hybrid; /* 0 lexical, 1 a float32 qvec over the vectors (heap_cosine), 2 the
               * carried embedder's vectors through the connection's cache */
  float qf[HM_MAX_DIM]; /* hybrid 2: the question's unit vector */
  int qdim;
  i64 recall_id;
  const char *qtype;
  unsigned char *links;
  int linkslen;
  hm_config cfg;
  int window;           /* the question names a window of time: [wlo, whi) */
  double wlo, whi;
  char wtext[128];      /* the window, as explain shows it */
  double scale;         /* BM25 (negated, as rank) that counts as lexical relevance 1 when it
                         * beats the candidates' best (0: their best): a recall across
                         * namespaces puts them all on the scale of the best among them */
  char *space;          /* the namespace ranked (sqlite3_malloc'd): the namespace column */
  /* a recall across namespaces: one cursor per namespace, and the top k of
   * all their rows as (namespace's cursor, its row) pairs, best first */
  struct hr_cursor **sub;
  int nsub, npick;
  int *pick;
} hr_cursor;

/* store.c: 0 when the database is a heapmem store of this schema, else an
 * error code with *err one sentence (sqlite3_malloc'ed). */
static int hs_check_store(sqlite3 *db, hm_conn *conn, char **err);

/* vindex.c: the vector index's settings in force (the defaults where the
 * file says nothing usable), as the index's builder reads them: the least
 * share a recall scans, the partitions' size, the threshold. */
static int hx_scan_settings(hc_ctx *x, double *probe, i64 *size, i64 *threshold);

static int hr_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err) {
  (void)argc; (void)argv; (void)err;
  hm_conn *conn = aux;
  sqlite3_api = conn->api;
  int rc = sqlite3_declare_vtab(db, hr_schema);
  if (rc != SQLITE_OK) return rc;
  hr_vtab *t = sqlite3_malloc64(sizeof *t);
  if (!t) return SQLITE_NOMEM;
  memset(t, 0, sizeof *t);
  t->api = conn->api;
  t->db = db;
  t->conn = aux;
  if (t->conn) t->conn->vt = t;
  /* a file's views and triggers never run it (it writes the recall log) */
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  *out = &t->base;
  return SQLITE_OK;
}

static int hr_disconnect(sqlite3_vtab *vt) {
  hr_vtab *t = (hr_vtab *)vt;
  sqlite3_api = t->api;
  for (int i = 0; i < HR_NST; i++) sqlite3_finalize(t->st[i]);
  sqlite3_free(t->call.err);
  if (t->conn && t->conn->vt == t) {
    for (int i = 0; i < HC_KEPT; i++) sqlite3_finalize(t->conn->kept[i].st);
    memset(t->conn->kept, 0, sizeof t->conn->kept);
    t->conn->vt = NULL;
  }
  sqlite3_free(t);
  return SQLITE_OK;
}

/* Each argument given is an equality constraint on its hidden column; idxNum
 * has bit j set for argument j, and argv lists them in argument order. */
static int hr_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  sqlite3_api = ((hr_vtab *)vt)->api;
  int where[HR_NARGS];
  for (int j = 0; j < HR_NARGS; j++) where[j] = -1;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn < HR_QUERY) continue;
    if (!c->usable) return SQLITE_CONSTRAINT; /* wait until the argument is known */
    if (c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    where[c->iColumn - HR_QUERY] = i;
  }
  int mask = 0, n = 0;
  for (int j = 0; j < HR_NARGS; j++) {
    if (where[j] < 0) continue;
    mask |= 1 << j;
    info->aConstraintUsage[where[j]].argvIndex = ++n;
    info->aConstraintUsage[where[j]].omit = 1;
  }
  if (!(mask & 1)) {
    /* no question: refused in xFilter with a sentence, not "no query solution" */
    info->estimatedCost = 1e12;
  } else {
    info->estimatedCost = 1000;
  }
  info->idxNum = mask;
  info->estimatedRows = 5;
  return SQLITE_OK;
}

static int hr_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  sqlite3_api = ((hr_vtab *)vt)->api;
  hr_cursor *c = sqlite3_malloc64(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static void hr_clear(hr_cursor *c) {
  for (int i = 0; i < c->n; i++) {
    sqlite3_free(c->rows[i].features);
    sqlite3_free(c->rows[i].thread);
    sqlite3_free(c->rows[i].mid);
    for (int j = 0; j < HR_SHOWN; j++) sqlite3_value_free(c->rows[i].shown[j]);
  }
  sqlite3_free(c->rows);
  sqlite3_free(c->links);
  sqlite3_free(c->space);
  for (int i = 0; i < c->nsub; i++) {
    if (c->sub[i]) hr_clear(c->sub[i]);
    sqlite3_free(c->sub[i]);
  }
  sqlite3_free(c->sub);
  sqlite3_free(c->pick);
  c->rows = NULL;
  c->links = NULL;
  c->space = NULL;
  c->sub = NULL;
  c->pick = NULL;
  c->n = c->k = c->i = c->nsub = c->npick = 0;
  c->recall_id = 0;
  c->scale = 0;
}

/* the routines of the library a cursor's connection belongs to */
#define HR_CURSOR_API(cur) (sqlite3_api = ((hr_vtab *)(cur)->pVtab)->api)

static int hr_close(sqlite3_vtab_cursor *cur) {
  HR_CURSOR_API(cur);
  hr_clear((hr_cursor *)cur);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* The statement st of the table, prepared once (reset and unbound here). */
static int hr_stmt(hr_vtab *t, int which, sqlite3_stmt **out) {
  if (!t->st[which]) {
    int rc = sqlite3_prepare_v3(t->db, hr_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
                                &t->st[which], NULL);
    if (rc != SQLITE_OK) return rc;
  }
  sqlite3_reset(t->st[which]);
  sqlite3_clear_bindings(t->st[which]);
  *out = t->st[which];
  return SQLITE_OK;
}

/* The current time, unix seconds, from the VFS (as SQLite's 'now'). */
static double hr_now(sqlite3 *db) {
  sqlite3_vfs *vfs = NULL;
  sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs);
  if (!vfs) vfs = sqlite3_vfs_find(NULL);
  sqlite3_int64 ms = 0;
  if (vfs && vfs->iVersion >= 2 && vfs->xCurrentTimeInt64) vfs->xCurrentTimeInt64(vfs, &ms);
  return (double)ms / 1000.0 - 210866760000.0; /* julian milliseconds -> unix seconds */
}

static int hr_cmp(const void *x, const void *y) {
  const hr_row *a = x, *b = y;
  double sa = a->f[5], sb = b->f[5];
  if (sa > sb) return -1;
  if (sa < sb) return 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The log's JSON arrays of the top k: shown ids, ages, features, rest.
 * query, ns, now: the recall's question, namespace and time. */
static int hr_log(hr_vtab *t, hr_cursor *c, const char *query, const char *ns, double now) {
  sqlite3_str *js[4];
  for (int j = 0; j < 4; j++) {
    js[j] = sqlite3_str_new(t->db);
    sqlite3_str_appendchar(js[j], 1, '[');
  }
  char num[32];
  for (int i = 0; i < c->k; i++) {
    hr_row *r = &c->rows[i];
    for (int j = 0; j < 4; j++)
      if (i) sqlite3_str_appendchar(js[j], 1, ',');
    hq_json_string(js[0], (const char *)sqlite3_value_text(r->shown[0]),
                   sqlite3_value_bytes(r->shown[0]));
    hm_repr(r->age_days, num);
    sqlite3_str_appendall(js[1], num);
    hq_json_string(js[2], r->features, (int)strlen(r->features));
    hm_repr(r->f[6], num);
    sqlite3_str_appendall(js[3], num);
  }
  char *text[4];
  int rc = SQLITE_OK;
  for (int j = 0; j < 4; j++) {
    sqlite3_str_appendchar(js[j], 1, ']');
    if (sqlite3_str_errcode(js[j])) rc = SQLITE_NOMEM;
    text[j] = sqlite3_str_finish(js[j]);
  }
  sqlite3_stmt *st = NULL;
  if (rc == SQLITE_OK) rc = hr_stmt(t, HR_ST_LOG, &st);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, query, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, c->qtype, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 4, now);
    for (int j = 0; j < 4; j++) sqlite3_bind_text(st, 5 + j, text[j], -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      c->recall_id = sqlite3_column_int64(st, 0);
      rc = sqlite3_step(st);
    }
    rc = rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(&t->call, rc);
    sqlite3_reset(st);
  }
  for (int j = 0; j < 4; j++) sqlite3_free(text[j]);
  return rc;
}

/* The store's tuned config into c, from hr_sql_tuned's rows (st, stepped
 * here, reset by the caller): the defaults, each field the JSON object
 * names set to its number.  The row is read from the file, so it is taken
 * apart, never spliced into config text: a key that is not one config
 * field, a value that is not a JSON number or a field out of its bounds is
 * damage (SQLITE_CORRUPT, why set), as Python's open() finds it. */
static int hr_tuned_read(sqlite3_stmt *st, hm_config *c, char *why, int whylen) {
  int rc;
  hm_config_default(c);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!sqlite3_column_int(st, 0)) {
      hm_errf(why, whylen, "it is not a JSON object");
      return SQLITE_CORRUPT;
    }
    const char *key = (const char *)sqlite3_column_text(st, 1);
    const char *type = (const char *)sqlite3_column_text(st, 2);
    if (!key) continue; /* an empty object */
    double *slot = NULL;
    for (int i = 0; i < HM_NCONFIG && !slot; i++)
      if (!strcmp(key, hm_config_fields[i].name)) slot = hm_config_slot(c, i);
    if (!slot || (int)strlen(key) != sqlite3_column_bytes(st, 1)) {
      hm_errf(why, whylen, "'%.60s' is not a config field", key);
      return SQLITE_CORRUPT;
    }
    if (!type || (strcmp(type, "integer") && strcmp(type, "real"))) {
      hm_errf(why, whylen, "%s is not a number", key);
      return SQLITE_CORRUPT;
    }
    *slot = sqlite3_column_double(st, 3);
  }
  if (rc != SQLITE_DONE) return rc;
  return hm_config_check(c, why, whylen) ? SQLITE_CORRUPT : SQLITE_OK;
}

/* The arguments of one heap_recall, read and checked. */
typedef struct {
  const char *query, *ns;
  char *query_copy; /* the question with its NUL bytes made spaces (sqlite3_malloc'd), or NULL */
  double now;
  int track, tracked; /* tracked: explored (config explore > 0) */
  const void *qvec; /* NULL: none */
  int qbytes;
  char *kinds; /* the kinds filter as a JSON array (sqlite3_malloc'd), NULL: none */
  double since, until;
  int has_since, has_until;
  const char *spaces; /* namespaces: a JSON array of 1 to MAX_NAMESPACES names, NULL: none */
  int nspaces;
} hr_args;

/* Bind the filters of a to ?6-?8 of st. */
static void hr_bind_filters(sqlite3_stmt *st, const hr_args *a) {
  if (a->kinds) sqlite3_bind_text(st, 6, a->kinds, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, 6);
  if (a->has_since) sqlite3_bind_double(st, 7, a->since);
  else sqlite3_bind_null(st, 7);
  if (a->has_until) sqlite3_bind_double(st, 8, a->until);
  else sqlite3_bind_null(st, 8);
}

#pragma region the lexical candidates: an exact, pruned BM25 top N

/*
 * hr_lexical: the namespace's BM25 top N for a question, the rows heap_bm25_top
 * would rank first over the whole match set, found without scoring most of
 * them (bm25.c's "the pruned top n").  A round asks FTS5 for the rows the
 * formula for a threshold t lets through, AND-ed with every phrase of the
 * question (that part matches any row the formula does, and makes FTS5 report
 * each phrase the row holds, moving each phrase's iterator only to those
 * rows), and ranks them exactly; when n of them score t or more, they are the
 * top n.  Otherwise the next round lowers t to the n-th best score found (the
 * last round: those n rows are found again), or, with fewer than n rows
 * found, to a quarter, then to nothing (the whole match set).  IDF, bounds
 * and the namespace's size come from bm25_terms and namespaces, kept by
 * triggers.  The whole match set is scored as before when the question has a
 * phrase of several tokens (or the namespace's tag), when the namespace's
 * statistics are missing, or when its words are rare enough that reading
 * every row they match costs less than a round (HR_LEX_SMALL postings).
 * A namespace alone in the file needs no tag in the MATCH expression: every
 * row is its own.  The filters apply in every round (rows they refuse never
 * count toward n); a word's IDF is the namespace's, filters or not.
 */

/* below this many postings in all, the whole match set is read */
#define HR_LEX_SMALL 2048
/* the first threshold: where about this many times n rows are expected */
#define HR_LEX_WANT 2.0
/* the most phrases a round's formula names (m: the question's) */
#define HR_LEX_REFS(m) (4 * (m) + 16)

typedef struct {
  sqlite3 *db;
  hr_vtab *vt;              /* keeps the statements; NULL: prepared for this call */
  sqlite3_stmt *own[HR_NST];
  hm_stemmer *stem;         /* porter over unicode61, as memories_fts tokenizes */
  const hr_args *a;         /* the question, the namespace and the filters */
  int n;                    /* how many rows: the candidates */
  double small;             /* postings below which the whole match set is read */
  double cache_from;        /* postings from which the connection's posting cache answers */
  hr_pc **pc;               /* the connection's posting cache (NULL: none to keep) */
  char term[HM_MAX_QUERY_TERMS][HM_MAX_WORD * 4 + 1]; /* each phrase's FTS5 term (hr_lex_phrases) */
  char *err;                /* what failed, one sentence (sqlite3_malloc'd) */
  sqlite3_blob *blob;       /* %_docsize, for exact lengths */
  hm_bm25_acc acc;          /* one round's rows */
  i64 fcap;                 /* room in acc.freq, in doubles */
  sqlite3_stmt *pass;       /* a memory's kind and time, for the filters (NULL: none) */
  char **kinds;             /* the kinds filter's kinds (nkinds; NULL: none) */
  int nkinds;
} hr_lex;

static int hr_lex_stmt(hr_lex *x, int which, sqlite3_stmt **st) {
  if (x->vt) return hr_stmt(x->vt, which, st);
  if (!x->own[which]) {
    int rc = sqlite3_prepare_v2(x->db, hr_sql[which], -1, &x->own[which], NULL);
    if (rc != SQLITE_OK) return rc;
  }
  sqlite3_reset(x->own[which]);
  sqlite3_clear_bindings(x->own[which]);
  *st = x->own[which];
  return SQLITE_OK;
}

/* rc, with the connection's words for it as x's error when it has none */
static int hr_lex_sqlfail(hr_lex *x, int rc) {
  if (!x->err && rc != SQLITE_NOMEM)
    x->err = sqlite3_mprintf("%s", sqlite3_errmsg(x->db));
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_ERROR : rc;
}

/* The question's words, as heap_match quotes them, pointing into buf.
 * query: the question; buf, buflen: the quoted terms; word, len: each word's
 * start and bytes. */
static int hr_lex_words(const char *query, char *buf, int buflen, const char **word, int *len) {
  int nw = 0;
  if (hm_match(query, NULL, buf, buflen) <= 0) return 0;
  for (char *p = buf; nw < HM_MAX_QUERY_TERMS;) {
    char *q = strchr(p, '"');
    char *e = q ? strchr(q + 1, '"') : NULL;
    if (!e) break;
    word[nw] = q + 1;
    len[nw++] = (int)(e - q - 1);
    p = e + 1;
  }
  return nw;
}

typedef struct {
  int n;
  char tok[HM_MAX_WORD * 4 + 1];
} hr_lex_tok;

static int hr_lex_token(void *p, int flags, const char *t, int n, int start, int end) {
  hr_lex_tok *x = p;
  (void)flags; (void)start; (void)end;
  if (x->n++ == 0 && n >= 0 && n < (int)sizeof x->tok) {
    memcpy(x->tok, t, (size_t)n);
    x->tok[n] = 0;
  } else if (x->n == 1) {
    x->n = 2; /* too long to keep: not one term the search can look up */
  }
  return SQLITE_OK;
}

/* Whether a memory created at `at` (NaN: no time) falls in a's window: at or
 * after since and before until, where they are given (HR_FILTER's). */
static int hr_in_window(const hr_args *a, double at) {
  return (!a->has_since || at >= a->since) && (!a->has_until || at < a->until);
}

/* Whether the filters let the memory of seq through (hm_bm25_pass): as
 * HR_FILTER says, its kind among the kinds, created at or after since and
 * before until. */
static int hr_lex_pass(void *ctx, i64 seq, int *ok) {
  HM_API_HERE; /* (once a row that could still rank) */
  hr_lex *x = ctx;
  const hr_args *a = x->a;
  sqlite3_bind_int64(x->pass, 1, seq);
  int rc = sqlite3_step(x->pass);
  *ok = 0;
  if (rc == SQLITE_ROW) {
    const char *kind = (const char *)sqlite3_column_text(x->pass, 0);
    double at = sqlite3_column_double(x->pass, 1);
    int in = !x->kinds;
    for (int i = 0; kind && !in && i < x->nkinds; i++) in = !strcmp(kind, x->kinds[i]);
    *ok = in && hr_in_window(a, sqlite3_column_type(x->pass, 1) != SQLITE_NULL ? at : NAN);
  }
  sqlite3_reset(x->pass);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : hr_lex_sqlfail(x, rc);
}

/* The filters, read for hr_lex_pass: its statement, and the kinds as strings. */
static int hr_lex_filters(hr_lex *x) {
  int rc = hr_lex_stmt(x, HR_ST_LEX_PASS, &x->pass);
  if (rc != SQLITE_OK || !x->a->kinds) return rc == SQLITE_OK ? rc : hr_lex_sqlfail(x, rc);
  sqlite3_stmt *st = NULL;
  if ((rc = hr_lex_stmt(x, HR_ST_LEX_KINDS, &st)) != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  sqlite3_bind_text(st, 1, x->a->kinds, -1, SQLITE_STATIC);
  int cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (x->nkinds == cap) {
      cap = cap ? 2 * cap : 8;
      char **k = sqlite3_realloc64(x->kinds, (sqlite3_uint64)cap * sizeof *k);
      if (!k) { rc = SQLITE_NOMEM; break; }
      x->kinds = k;
    }
    const char *v = (const char *)sqlite3_column_text(st, 0);
    if (!(x->kinds[x->nkinds] = sqlite3_mprintf("%s", v ? v : ""))) { rc = SQLITE_NOMEM; break; }
    x->nkinds++;
  }
  sqlite3_reset(st);
  if (!x->kinds && rc == SQLITE_DONE) x->kinds = sqlite3_malloc(sizeof *x->kinds); /* none */
  if (rc == SQLITE_NOMEM || (rc == SQLITE_DONE && !x->kinds)) return SQLITE_NOMEM;
  return rc == SQLITE_DONE ? SQLITE_OK : hr_lex_sqlfail(x, rc);
}

/* Read a round's rows from st (stepped here): each row's BM25 inputs for the
 * np phrases of its blob (the question's words) and the rows holding each. */
static int hr_lex_rows(hr_lex *x, sqlite3_stmt *st, int np) {
  HM_API_HERE; /* (its loop steps once a matched row) */
  hm_bm25_acc *acc = &x->acc;
  int rc;
  acc->n = 0;
  acc->nphrase = np;
  memset(acc->nhit, 0, sizeof(i64) * HM_MAX_QUERY_TERMS);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *b = sqlite3_column_blob(st, 1);
    int len = sqlite3_column_bytes(st, 1);
    u32 all = 0;
    if (len >= 16) memcpy(&all, b + 4, 4);
    if (len < 16 || all < (u32)np || all > HM_BM25_MAX_PHRASES ||
        len != HM_BM25_ROW_SIZE((int)all)) {
      x->err = sqlite3_mprintf("the FTS index answered a row that is not heap_bm25_row's");
      return SQLITE_CORRUPT;
    }
    if (acc->n == acc->cap) {
      i64 cap = acc->cap ? 2 * acc->cap : 256;
      i64 *r = sqlite3_realloc64(acc->rowid, (sqlite3_uint64)cap * sizeof(i64));
      if (r) acc->rowid = r;
      double *d = sqlite3_realloc64(acc->lower, (sqlite3_uint64)cap * sizeof(double));
      if (d) acc->lower = d;
      if (!r || !d) return SQLITE_NOMEM;
      acc->cap = cap;
    }
    if ((acc->n + 1) * np > x->fcap) {
      i64 fcap = 2 * (acc->n + 1) * np;
      double *f = sqlite3_realloc64(acc->freq, (sqlite3_uint64)fcap * sizeof(double));
      if (!f) return SQLITE_NOMEM;
      acc->freq = f;
      x->fcap = fcap;
    }
    i64 k = acc->n++;
    int off = (int)all - np;
    acc->rowid[k] = sqlite3_column_int64(st, 0);
    memcpy(&acc->lower[k], b + 8, 8);
    memcpy(&acc->freq[k * np], b + 16 + (size_t)off * sizeof(double), (size_t)np * sizeof(double));
    for (int i = 0; i < np; i++) acc->nhit[i] += b[16 + all * sizeof(double) + off + i] != 0;
  }
  return rc == SQLITE_DONE ? SQLITE_OK : hr_lex_sqlfail(x, rc);
}

/* The whole match set, ranked as heap_bm25_top ranks it (the namespace's
 * statistics, or the rows' own where they are missing), only the rows the
 * filters let through: the top into top (room for x->n), its size *size.
 * nw: the question's words; alone: the namespace is alone in the file (no tag);
 * docs, tokens: its statistics. */
static int hr_lex_full(hr_lex *x, int nw, int alone, double docs, double tokens,
                       hm_scored *top, i64 *size) {
  char match[HM_MATCH_LEN];
  sqlite3_stmt *st = NULL;
  if (hm_match(x->a->query, alone ? NULL : x->a->ns, match, sizeof match) <= 0) return SQLITE_OK;
  int rc = hr_lex_stmt(x, HR_ST_LEX_MATCH, &st);
  if (rc != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  sqlite3_bind_text(st, 1, match, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, nw);
  rc = hr_lex_rows(x, st, nw);
  sqlite3_reset(st);
  if (rc != SQLITE_OK) return rc;
  x->acc.docs = docs;
  x->acc.tokens = tokens;
  x->acc.limit = x->n;
  return hm_bm25_top_of(x->db, &x->acc, x->pass ? hr_lex_pass : NULL, x, &x->blob, top, size);
}

/* One round at threshold t over the phrases p (m of them, in the question's
 * order, as probe names them: the MATCH expression's part naming them all;
 * ps: the same, highest bound first): the rows the formula lets through,
 * ranked, into top and *size.
 * tag: the namespace's FTS5 tag (NULL: alone); avgdl: the namespace's mean
 * length. */
static int hr_lex_round(hr_lex *x, const hm_bm25_phrase *p, const hm_bm25_phrase *ps, int m,
                        const char *tag, const char *probe, double avgdl, double t,
                        hm_scored *top, i64 *size) {
  double rest[HM_MAX_QUERY_TERMS + 1], idf[HM_MAX_QUERY_TERMS];
  rest[m] = 0.0;
  for (int i = m - 1; i >= 0; i--) rest[i] = rest[i + 1] + ps[i].ub;
  /* the formula exact if it names few enough phrases, else cut shallower */
  int budget = HR_LEX_REFS(m), r = 0;
  char *match = NULL;
  for (int depth = m; depth >= 0; depth = depth > 3 ? 3 : depth - 1) {
    sqlite3_str *f = sqlite3_str_new(x->db);
    if (tag) sqlite3_str_appendf(f, "nstag : \"%s\" AND (", tag);
    else sqlite3_str_appendchar(f, 1, '(');
    int refs = 0;
    r = hb_bm25_formula(ps, rest, m, 0, t * (1.0 - 1e-9), depth, budget, &refs, f);
    sqlite3_str_appendf(f, ") AND (%s)", probe);
    int err = sqlite3_str_errcode(f);
    sqlite3_free(match);
    match = sqlite3_str_finish(f);
    if (r < 0 || err || !match) { sqlite3_free(match); return SQLITE_NOMEM; }
    if (r != 3 && refs <= budget) break;
  }
  *size = 0;
  x->acc.n = 0;
  if (r == 0) { sqlite3_free(match); return SQLITE_OK; } /* no row can reach t */
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, HR_ST_LEX_MATCH, &st);
  if (rc != SQLITE_OK) { sqlite3_free(match); return hr_lex_sqlfail(x, rc); }
  sqlite3_bind_text(st, 1, match, -1, sqlite3_free);
  sqlite3_bind_int(st, 2, m);
  rc = hr_lex_rows(x, st, m);
  sqlite3_reset(st);
  if (rc != SQLITE_OK) return rc;
  for (int i = 0; i < m; i++) idf[i] = p[i].idf;
  return hb_bm25_rank(x->db, "memories_fts", &x->blob, x->acc.n, m, x->acc.rowid,
                      x->acc.lower, 0, x->acc.freq, idf, avgdl, x->pass ? hr_lex_pass : NULL,
                      x, x->n, top, size);
}

static int hr_lex_by_ub(const void *x, const void *y) {
  const hm_bm25_phrase *a = x, *b = y;
  return a->ub > b->ub ? -1 : a->ub < b->ub ? 1 : 0;
}

/* The pruned search over the phrases p (m, in the question's order, each one
 * FTS5 term the namespace holds; nw: the question's words in all): rounds
 * until n rows reach the round's threshold, else the whole match set.
 * tag: the namespace's FTS5 tag (NULL: alone); docs, tokens: its statistics;
 * top, *size: the rows kept. */
static int hr_lex_pruned(hr_lex *x, const hm_bm25_phrase *p, int m, int nw, const char *tag,
                         double docs, double tokens, hm_scored *top, i64 *size) {
  double avgdl = tokens / docs;
  hm_bm25_phrase ps[HM_MAX_QUERY_TERMS]; /* the formula names them by bound, highest first */
  memcpy(ps, p, (size_t)m * sizeof *p);
  qsort(ps, (size_t)m, sizeof *ps, hr_lex_by_ub);
  sqlite3_str *pr = sqlite3_str_new(x->db);
  for (int i = 0; i < m; i++)
    sqlite3_str_appendf(pr, "%s\"%.*s\"", i ? " OR " : "", p[i].len, p[i].word);
  int err = sqlite3_str_errcode(pr);
  char *probe = sqlite3_str_finish(pr);
  if (err || !probe) { sqlite3_free(probe); return SQLITE_NOMEM; }
  int rc = SQLITE_OK;
  double t = hm_bm25_guess(m, ps, docs, HR_LEX_WANT * x->n);
  for (int round = 0; rc == SQLITE_OK; round++) {
    if (!(t > ps[m - 1].ub) || round == 3) { /* the formula would let every row through */
      sqlite3_free(probe);
      return hr_lex_full(x, nw, !tag, docs, tokens, top, size);
    }
    rc = hr_lex_round(x, p, ps, m, tag, probe, avgdl, t, top, size);
    if (rc != SQLITE_OK) break;
    if (*size == x->n && -top[x->n - 1].score >= t) break; /* the top n */
    t = *size == x->n ? -top[x->n - 1].score : round == 0 ? t / 4 : 0.0;
  }
  sqlite3_free(probe);
  return rc;
}

/*
 * The posting cache (hr_pc, one per connection): a big namespace's BM25 top
 * N from each question term's postings held in memory, read from FTS5 once.
 * The rounds above walk FTS5's doclists again for every question, and at a
 * million memories that walk is most of a recall (bench/RESULTS.md 27.3,
 * 33): FTS5 decodes every posting it passes and skips only page by page.
 * Here a term's postings (each row holding it, its weighted frequency there,
 * as heap_bm25_tail counts it, and the row's exact length from %_docsize)
 * are read the first time a question of the namespace names the term, and a
 * search is MaxScore over arrays: the terms sorted by their bound, the rows
 * of the terms that can still lift a row into the top n walked, the others
 * only looked up (a galloping search) for those rows, each row scored
 * exactly (hm_bm25, with the question's IDF and the namespace's mean
 * length, as every other path).  The rows that can reach the top are ranked
 * by hb_bm25_rank as the rounds rank theirs: the same rows, the same scores.
 *
 * What the cache took is good while the index is as it was: memories_fts's
 * structure record reads the same (FTS5 writes it again whenever it flushes
 * rows added or changed; a row deleted in place, FTS5's secure-delete, may
 * leave it as it was) and so do the namespace's memories and tokens (a
 * delete moves them).  Any change empties the cache, and it is built again
 * only once HR_PC_SETTLE searches in a row found the index unchanged: a
 * namespace written between its recalls is searched by the rounds, as
 * before, rather than read again each time.  The cache holds one
 * namespace's at a time.  It answers only a question whose postings reach
 * HR_PC_FROM (below that the rounds cost little), outside a transaction
 * that has written (whose changes FTS5 may still hold unflushed), and
 * within HR_PC_BYTES: a bigger namespace or question is searched by the
 * rounds.
 */

#define HR_PC_FROM 2048             /* a question's postings from which the cache answers */
#define HR_PC_BYTES ((i64)96 << 20) /* the most the cache holds, lengths and postings */
#define HR_PC_SLACK 1e-9            /* a bound below the threshold by this much prunes */
#define HR_PC_SETTLE 3              /* unchanged searches in a row before the cache is built */

typedef struct {
  char *term;        /* NULL: an empty slot (every entry is the namespace the cache holds) */
  i64 n;             /* its postings, in seq order: */
  u32 *at;           /* the row's place among the namespace's lengths (so in seq order) */
  float *freq;       /* weighted frequency (heap_bm25_tail's, the text column) */
  float maxtf, minlen;
  u64 used;          /* the cache's clock at its last search */
} hr_pc_term;

/* a posting's bytes, a length's */
#define HR_PC_POSTING ((i64)(sizeof(u32) + sizeof(float)))
#define HR_PC_LENGTH ((i64)(sizeof(i64) + sizeof(float)))
#define HR_PC_FILTER ((i64)(sizeof(uint16_t) + sizeof(double)))

struct hr_pc {
  unsigned char *stamp; /* the structure record it was read under (nstamp bytes), */
  int nstamp;
  char *sns;            /* for this namespace, */
  double sdocs, stokens; /* of these memories and tokens */
  int settled;          /* searches in a row that found them so */
  hr_pc_term *t;        /* nt slots */
  int nt;
  i64 bytes;            /* held in all */
  u64 clock;            /* searches so far */
  int lread;            /* 1: the namespace's lengths are read (the entries point into them) */
  i64 nlen;
  i64 *lseq;            /* its rows, in seq order, */
  float *llen;          /* and their lengths, all columns (exact); */
  int lfilt;            /* 1: and their kinds and times, read at a first filtered search */
  uint16_t *lkind;      /* (kn's index) */
  double *lat;          /* (created_at; NaN: none) */
  char **kn;            /* the kinds named (nkn) */
  int nkn;
};

static void hr_pc_term_free(hr_pc *pc, hr_pc_term *e) {
  pc->bytes -= e->n * HR_PC_POSTING;
  sqlite3_free(e->term);
  sqlite3_free(e->at);
  sqlite3_free(e->freq);
  memset(e, 0, sizeof *e);
}

static void hr_pc_filters_free(hr_pc *pc) {
  if (pc->lfilt == 1) pc->bytes -= pc->nlen * HR_PC_FILTER;
  sqlite3_free(pc->lkind);
  sqlite3_free(pc->lat);
  for (int i = 0; i < pc->nkn; i++) sqlite3_free(pc->kn[i]);
  sqlite3_free(pc->kn);
  pc->lkind = NULL;
  pc->lat = NULL;
  pc->kn = NULL;
  pc->nkn = 0;
  pc->lfilt = 0;
}

static void hr_pc_lens_free(hr_pc *pc) {
  hr_pc_filters_free(pc);
  pc->bytes -= pc->nlen * HR_PC_LENGTH;
  sqlite3_free(pc->lseq);
  sqlite3_free(pc->llen);
  pc->lread = 0;
  pc->lseq = NULL;
  pc->llen = NULL;
  pc->nlen = 0;
}

/* Everything the cache holds let go (it stays, empty). */
static void hr_pc_clear(hr_pc *pc) {
  for (int i = 0; i < pc->nt; i++) hr_pc_term_free(pc, &pc->t[i]);
  sqlite3_free(pc->t);
  pc->t = NULL;
  pc->nt = 0;
  hr_pc_lens_free(pc);
  sqlite3_free(pc->stamp);
  sqlite3_free(pc->sns);
  pc->stamp = NULL;
  pc->sns = NULL;
  pc->nstamp = 0;
  pc->settled = 0;
  pc->bytes = 0;
}

static void hr_pc_free(hr_pc *pc) {
  if (!pc) return;
  hr_pc_clear(pc);
  sqlite3_free(pc);
}

/* The cache, emptied if the index changed since it read it (or it holds
 * another namespace's): *pc (made when missing), *ready when it may answer
 * (settle: the unchanged searches in a row it waits for).  0 or an SQLite
 * code.
 * docs, tokens: the namespace's statistics now; ready: whether it may
 * answer. */
static int hr_pc_fresh(hr_lex *x, hr_pc **pc, double docs, double tokens, int settle,
                       int *ready) {
  *ready = 0;
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, HR_ST_PC_STAMP, &st);
  if (rc != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  if (!*pc) {
    if (!(*pc = sqlite3_malloc64(sizeof **pc))) { sqlite3_reset(st); return SQLITE_NOMEM; }
    memset(*pc, 0, sizeof **pc);
  }
  hr_pc *c = *pc;
  rc = sqlite3_step(st);
  const void *b = rc == SQLITE_ROW ? sqlite3_column_blob(st, 0) : NULL;
  int nb = rc == SQLITE_ROW ? sqlite3_column_bytes(st, 0) : 0;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    sqlite3_reset(st);
    return hr_lex_sqlfail(x, rc);
  }
  if (!c->stamp || c->nstamp != nb || (nb && memcmp(c->stamp, b, (size_t)nb)) ||
      strcmp(c->sns, x->a->ns) || c->sdocs != docs || c->stokens != tokens) {
    hr_pc_clear(c);
    c->stamp = sqlite3_malloc64((sqlite3_uint64)nb + 1);
    c->sns = sqlite3_mprintf("%s", x->a->ns);
    if (!c->stamp || !c->sns) {
      hr_pc_clear(c);
      rc = SQLITE_NOMEM;
    } else {
      if (nb) memcpy(c->stamp, b, (size_t)nb);
      c->nstamp = nb;
      c->sdocs = docs;
      c->stokens = tokens;
    }
  } else if (c->settled < settle) {
    c->settled++;
  }
  sqlite3_reset(st);
  if (rc == SQLITE_NOMEM) return rc;
  *ready = c->settled >= settle;
  return SQLITE_OK;
}

/* The exact length of every row of the namespace, read once into the cache
 * (alone: the namespace alone in the file). */
static int hr_pc_lens(hr_lex *x, hr_pc *pc, int alone) {
  if (pc->lread) return SQLITE_OK;
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, alone ? HR_ST_PC_LENS : HR_ST_PC_LENS_OF, &st);
  if (rc != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  if (!alone) sqlite3_bind_text(st, 1, x->a->ns, -1, SQLITE_TRANSIENT);
  i64 n = 0, cap = 0;
  i64 *seq = NULL;
  float *len = NULL;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      i64 *s = sqlite3_realloc64(seq, (sqlite3_uint64)cap * sizeof *s);
      if (s) seq = s;
      float *l = sqlite3_realloc64(len, (sqlite3_uint64)cap * sizeof *l);
      if (l) len = l;
      if (!s || !l) { rc = SQLITE_NOMEM; break; }
      if (cap > (i64)UINT32_MAX) { rc = SQLITE_TOOBIG; break; } /* (HR_PC_BYTES first) */
    }
    double total = 0.0;
    if (!hm_docsize(sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1), &total)) {
      rc = SQLITE_CORRUPT;
      break;
    }
    seq[n] = sqlite3_column_int64(st, 0);
    len[n++] = (float)total;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    sqlite3_free(seq);
    sqlite3_free(len);
    if (rc == SQLITE_CORRUPT)
      x->err = sqlite3_mprintf("the FTS index's row lengths are damaged");
    return rc == SQLITE_NOMEM || rc == SQLITE_CORRUPT || rc == SQLITE_TOOBIG
               ? rc : hr_lex_sqlfail(x, rc);
  }
  pc->lseq = seq;
  pc->llen = len;
  pc->nlen = n;
  pc->lread = 1;
  pc->bytes += n * HR_PC_LENGTH;
  return SQLITE_OK;
}

/* The first index at or after i of the ascending array a (n of them) whose
 * value is at least s (n: none), by galloping from i: a word's rows are a
 * few of the namespace's, and the rows a search looks up in a word are a
 * few of the word's. */
#define HR_GALLOP(name, type)                                                                 \
  static i64 name(const type *a, i64 n, i64 i, type s) {                                     \
    if (i >= n || a[i] >= s) return i;                                                       \
    i64 step = 1, lo = i, hi = i + 1;                                                        \
    while (hi < n && a[hi] < s) {                                                            \
      lo = hi;                                                                               \
      step *= 2;                                                                             \
      hi = lo + step;                                                                        \
    }                                                                                        \
    if (hi > n) hi = n;                                                                      \
    while (lo + 1 < hi) { /* a[lo] < s, a[hi] >= s (or hi == n) */                           \
      i64 mid = lo + (hi - lo) / 2;                                                          \
      if (a[mid] < s) lo = mid;                                                              \
      else hi = mid;                                                                         \
    }                                                                                        \
    return hi;                                                                               \
  }
HR_GALLOP(hr_gallop_seq, i64) /* a namespace's rows, by seq */
HR_GALLOP(hr_gallop_at, u32)  /* a word's postings, by their rows' places */

/* The namespace's memories' kinds and times beside their lengths (read once,
 * at a first filtered search): pc->lfilt 1, or -1 where they cannot be held
 * (past 65,535 kinds, or HR_PC_BYTES): then the filters are asked row by row. */
static int hr_pc_filters(hr_lex *x, hr_pc *pc) {
  if (pc->lfilt) return SQLITE_OK;
  if (pc->bytes + pc->nlen * HR_PC_FILTER > HR_PC_BYTES) { pc->lfilt = -1; return SQLITE_OK; }
  pc->lkind = sqlite3_malloc64((sqlite3_uint64)(pc->nlen ? pc->nlen : 1) * sizeof(uint16_t));
  pc->lat = sqlite3_malloc64((sqlite3_uint64)(pc->nlen ? pc->nlen : 1) * sizeof(double));
  if (!pc->lkind || !pc->lat) { hr_pc_filters_free(pc); return SQLITE_NOMEM; }
  for (i64 j = 0; j < pc->nlen; j++) { pc->lkind[j] = 0; pc->lat[j] = NAN; }
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, HR_ST_PC_FILTERS, &st);
  if (rc != SQLITE_OK) { hr_pc_filters_free(pc); return hr_lex_sqlfail(x, rc); }
  sqlite3_bind_text(st, 1, x->a->ns, -1, SQLITE_TRANSIENT);
  int over = 0;
  while (!over && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    i64 s = sqlite3_column_int64(st, 0);
    i64 lo = hr_gallop_seq(pc->lseq, pc->nlen, 0, s); /* a memory without an FTS5 row has none */
    if (lo >= pc->nlen || pc->lseq[lo] != s) continue;
    const char *kind = (const char *)sqlite3_column_text(st, 1);
    if (!kind) kind = "";
    int k = pc->nkn - 1;
    while (k >= 0 && strcmp(pc->kn[k], kind)) k--;
    if (k < 0) {
      if (pc->nkn >= 65535) { over = 1; break; }
      char **kn = sqlite3_realloc64(pc->kn, (sqlite3_uint64)(pc->nkn + 1) * sizeof *kn);
      if (!kn) { rc = SQLITE_NOMEM; break; }
      pc->kn = kn;
      if (!(kn[pc->nkn] = sqlite3_mprintf("%s", kind))) { rc = SQLITE_NOMEM; break; }
      k = pc->nkn++;
    }
    pc->lkind[lo] = (uint16_t)k;
    pc->lat[lo] = sqlite3_column_type(st, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 2);
  }
  sqlite3_reset(st);
  if (over) { hr_pc_filters_free(pc); pc->lfilt = -1; return SQLITE_OK; }
  if (rc != SQLITE_DONE) {
    hr_pc_filters_free(pc);
    return rc == SQLITE_NOMEM ? rc : hr_lex_sqlfail(x, rc);
  }
  pc->lfilt = 1;
  pc->bytes += pc->nlen * HR_PC_FILTER;
  return SQLITE_OK;
}

#if defined(__GNUC__) || defined(__clang__)
#define HR_PREFETCH(p) __builtin_prefetch(p)
#else
#define HR_PREFETCH(p) ((void)(p))
#endif

/* The cache's entry for term in the namespace: found, or read from FTS5
 * (each row the phrase p matches, with its frequency, and its length from
 * the lengths held), its slot into *out (a slot, not a pointer: reading
 * another term may move the slots).  Room is made by letting go of the
 * entries least recently searched, never one this search uses (clock).
 * pc: the cache; tag: the namespace's FTS5 tag (NULL: alone); term: p's
 * FTS5 term; out: the entry's slot. */
static int hr_pc_term_of(hr_lex *x, hr_pc *pc, const hm_bm25_phrase *p, const char *tag,
                         const char *term, int *out) {
  int free_slot = -1;
  for (int i = 0; i < pc->nt; i++) {
    hr_pc_term *e = &pc->t[i];
    if (!e->term) { if (free_slot < 0) free_slot = i; continue; }
    if (!strcmp(e->term, term)) {
      e->used = pc->clock;
      *out = i;
      return SQLITE_OK;
    }
  }
  /* room for its postings (p->df of them: bm25_terms counts them exactly) */
  i64 need = (i64)p->df * HR_PC_POSTING;
  while (pc->bytes + need > HR_PC_BYTES) {
    hr_pc_term *old = NULL;
    for (int i = 0; i < pc->nt; i++)
      if (pc->t[i].term && pc->t[i].used != pc->clock && (!old || pc->t[i].used < old->used))
        old = &pc->t[i];
    if (!old) break; /* this search's own: let it have what it needs */
    hr_pc_term_free(pc, old);
  }
  char match[HM_MAX_WORD * 4 + HM_NS_TAG_LEN + 32];
  if (tag) sqlite3_snprintf(sizeof match, match, "nstag : \"%s\" AND \"%.*s\"", tag, p->len,
                            p->word);
  else sqlite3_snprintf(sizeof match, match, "\"%.*s\"", p->len, p->word);
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, HR_ST_LEX_MATCH, &st);
  if (rc != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  sqlite3_bind_text(st, 1, match, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, 1);
  rc = hr_lex_rows(x, st, 1);
  sqlite3_reset(st);
  if (rc != SQLITE_OK) return rc;
  i64 n = x->acc.n;
  hr_pc_term e = {.n = n, .used = pc->clock, .minlen = INFINITY};
  e.term = sqlite3_mprintf("%s", term);
  e.at = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof(u32));
  e.freq = sqlite3_malloc64((sqlite3_uint64)(n ? n : 1) * sizeof(float));
  pc->bytes += n * HR_PC_POSTING;
  if (!e.term || !e.at || !e.freq) {
    hr_pc_term_free(pc, &e);
    return SQLITE_NOMEM;
  }
  /* FTS5 gives the rows in seq order, as the lengths are held: each row's
   * place found by galloping on from the last one's (a word's rows are a
   * few of the namespace's: walking every length between them cost more
   * than the search) */
  i64 j = 0;
  for (i64 i = 0; i < n; i++) {
    i64 s = x->acc.rowid[i];
    j = hr_gallop_seq(pc->lseq, pc->nlen, j, s);
    if (j >= pc->nlen || pc->lseq[j] != s || (i && j <= e.at[i - 1])) {
      hr_pc_term_free(pc, &e);
      x->err = sqlite3_mprintf("the FTS index holds a row without its length");
      return SQLITE_CORRUPT;
    }
    e.at[i] = (u32)j;
    e.freq[i] = (float)x->acc.freq[i];
    if (e.freq[i] > e.maxtf) e.maxtf = e.freq[i];
    if (pc->llen[j] < e.minlen) e.minlen = pc->llen[j];
  }
  if (free_slot < 0) {
    hr_pc_term *t = sqlite3_realloc64(pc->t, (sqlite3_uint64)(pc->nt + 1) * sizeof *t);
    if (!t) { hr_pc_term_free(pc, &e); return SQLITE_NOMEM; }
    pc->t = t;
    free_slot = pc->nt++;
  }
  pc->t[free_slot] = e;
  *out = free_slot;
  return SQLITE_OK;
}

typedef struct {
  i64 n, cap;
  i64 *rowid;
  double *len, *freq; /* freq: n x m */
  double *score;      /* hm_bm25's (negative: lower is better) */
  unsigned char *ok;  /* the filters: 0 not asked yet, 1 let it through */
  i64 *at;            /* the row's place among the namespace's lengths */
  int inmem;          /* the filters asked of the kinds and times the cache holds, */
  const unsigned char *allow; /* a kind (its index) let through (NULL: any kind) */
} hr_pc_rows;

/* Whether the filters let the row at place j through, asked of the kinds
 * and times the cache holds (as hr_lex_pass asks the memories table).
 * pc: the cache; r: the search's rows (the kinds let through); j: the place. */
static int hr_pc_let(const hr_pc *pc, const hr_pc_rows *r, const hr_args *a, i64 j) {
  return (!r->allow || r->allow[pc->lkind[j]]) && hr_in_window(a, pc->lat[j]);
}

/* With filters: rows are asked of them in batches of this many, best first */
#define HR_PC_ASK(n) (4 * (n) + 64)

/* The rows of r not yet asked of the filters, asked best first, each one
 * that passes into the heap of the n best (heap, *held: the worst at its
 * root), until none left can enter it; then r keeps only the rows that
 * passed.  0 or an SQLite code.
 * r: the rows (m frequencies each); heap, held: the n best that passed so
 * far. */
static int hr_pc_ask(hr_lex *x, hr_pc_rows *r, int m, hm_scored *heap, i64 *held) {
  i64 nask = 0;
  for (i64 k = 0; k < r->n; k++) nask += !r->ok[k];
  hm_scored *ask = sqlite3_malloc64((sqlite3_uint64)(nask ? nask : 1) * sizeof *ask);
  if (!ask) return SQLITE_NOMEM;
  nask = 0;
  for (i64 k = 0; k < r->n; k++)
    if (!r->ok[k]) ask[nask++] = (hm_scored){.score = r->score[k], .rowid = r->rowid[k], .k = k};
  qsort(ask, (size_t)nask, sizeof *ask, hm_scored_cmp);
  int rc = SQLITE_OK;
  for (i64 i = 0; i < nask && rc == SQLITE_OK; i++) {
    if (*held == x->n && !hm_scored_before(&ask[i], &heap[0])) break; /* none after enters */
    int ok = 0;
    if (r->inmem) ok = hr_pc_let(*x->pc, r, x->a, r->at[ask[i].k]);
    else if ((rc = hr_lex_pass(x, ask[i].rowid, &ok)) != SQLITE_OK) continue;
    if (!ok) continue;
    r->ok[ask[i].k] = 1;
    if (*held < x->n) {
      heap[(*held)++] = ask[i];
      hm_heap_up(heap, *held - 1, 1);
    } else {
      heap[0] = ask[i];
      hm_heap_down(heap, *held, 0, 1);
    }
  }
  sqlite3_free(ask);
  i64 kept = 0; /* the rows that passed, in their order */
  for (i64 k = 0; k < r->n && rc == SQLITE_OK; k++) {
    if (!r->ok[k]) continue;
    r->rowid[kept] = r->rowid[k];
    r->len[kept] = r->len[k];
    r->score[kept] = r->score[k];
    r->at[kept] = r->at[k];
    r->ok[kept] = 1;
    memmove(&r->freq[kept * m], &r->freq[k * m], (size_t)m * sizeof(double));
    kept++;
  }
  if (rc == SQLITE_OK) r->n = kept;
  return rc;
}

/* The filters asked of the kinds and times the cache holds, where it holds
 * them: r->inmem, and r->allow (*allow, to free) each kind it names. */
static int hr_pc_allow(hr_lex *x, const hr_pc *pc, hr_pc_rows *r, unsigned char **allow) {
  if (!x->pass || pc->lfilt != 1) return SQLITE_OK;
  r->inmem = 1;
  if (!x->kinds) return SQLITE_OK;
  if (!(*allow = sqlite3_malloc64((sqlite3_uint64)pc->nkn + 1))) return SQLITE_NOMEM;
  for (int k = 0; k < pc->nkn; k++) {
    (*allow)[k] = 0;
    for (int i = 0; i < x->nkinds && !(*allow)[k]; i++) (*allow)[k] = !strcmp(pc->kn[k], x->kinds[i]);
  }
  r->allow = *allow;
  return SQLITE_OK;
}

/* MaxScore over the m phrases' entries e (p's order), into top and *size:
 * the rows that can still reach the top n collected, then ranked by
 * hb_bm25_rank.  With filters, a row counts toward the threshold only once
 * they let it through, and they are asked of the rows best first, a batch
 * at a time (hr_pc_ask), not of every row in seq order.
 * p: the phrases (their IDF); e: their entries; m: how many; avgdl: the
 * namespace's mean length; top, size: as hr_lex_round's. */
static int hr_pc_search(hr_lex *x, const hm_bm25_phrase *p, hr_pc_term *const *e, int m,
                        double avgdl, hm_scored *top, i64 *size) {
  const hr_pc *pc = *x->pc;
  int o[HM_MAX_QUERY_TERMS];         /* the phrases by bound, lowest first */
  double ub[HM_MAX_QUERY_TERMS], pre[HM_MAX_QUERY_TERMS + 1], idf[HM_MAX_QUERY_TERMS];
  i64 cur[HM_MAX_QUERY_TERMS];
  for (int i = 0; i < m; i++) {
    idf[i] = p[i].idf;
    cur[i] = 0;
    ub[i] = e[i]->n ? hm_bm25_bound(p[i].idf, e[i]->maxtf, e[i]->minlen, avgdl) : 0.0;
    int k = i;
    while (k > 0 && ub[o[k - 1]] > ub[i]) { o[k] = o[k - 1]; k--; }
    o[k] = i;
  }
  pre[0] = 0.0;
  for (int k = 0; k < m; k++) pre[k + 1] = pre[k] + ub[o[k]];
  hm_scored *heap = sqlite3_malloc64((sqlite3_uint64)x->n * sizeof *heap);
  hr_pc_rows r = {0};
  unsigned char *allow = NULL; /* the kinds filter, by the cache's kind indexes */
  if (!heap || hr_pc_allow(x, pc, &r, &allow) != SQLITE_OK) {
    sqlite3_free(heap);
    return SQLITE_NOMEM;
  }
  i64 held = 0, asked = 0; /* asked: rows the filters have not seen yet */
  double theta = 0.0; /* the n-th best score so far, once n rows are held (positive) */
  int ess = 0;        /* phrases o[0..ess) are not essential: their bounds sum below theta */
  int rc = SQLITE_OK;
  double f[HM_MAX_QUERY_TERMS];
  for (;;) {
    double lo = theta * (1.0 - HR_PC_SLACK) - 1e-12;
    if (held == x->n)
      while (ess < m && pre[ess + 1] < lo) ess++;
    if (ess == m) break;
    i64 d = INT64_MAX; /* the next row, by its place */
    for (int k = ess; k < m; k++)
      if (cur[o[k]] < e[o[k]]->n && e[o[k]]->at[cur[o[k]]] < d) d = e[o[k]]->at[cur[o[k]]];
    if (d == INT64_MAX) break;
    double s = 0.0, len = pc->llen[d];
    for (int i = 0; i < m; i++) f[i] = 0.0;
    for (int k = ess; k < m; k++) {
      int i = o[k];
      if (cur[i] < e[i]->n && e[i]->at[cur[i]] == d) {
        f[i] = e[i]->freq[cur[i]];
        s += hm_bm25_part(idf[i], f[i], len, avgdl);
        /* the term's next row: its length is read from far away (a cache
         * miss that cost a fifth of the search), so ask for it now */
        if (++cur[i] < e[i]->n) HR_PREFETCH(&pc->llen[e[i]->at[cur[i]]]);
      }
    }
    if (held == x->n && s + pre[ess] < lo) continue;
    int skip = 0;
    for (int k = ess - 1; k >= 0 && !skip; k--) {
      int i = o[k];
      cur[i] = hr_gallop_at(e[i]->at, e[i]->n, cur[i], (u32)d);
      if (cur[i] < e[i]->n && e[i]->at[cur[i]] == d) {
        f[i] = e[i]->freq[cur[i]];
        s += hm_bm25_part(idf[i], f[i], len, avgdl);
      }
      skip = held == x->n && s + pre[k] < lo;
    }
    if (skip) continue;
    i64 rowid = pc->lseq[d];
    hm_scored sc = {.score = hm_bm25(m, f, idf, len, avgdl), .rowid = rowid};
    if (held == x->n && -sc.score < lo) continue;
    if (r.n == r.cap) {
      i64 cap = r.cap ? 2 * r.cap : 256;
      i64 *ri = sqlite3_realloc64(r.rowid, (sqlite3_uint64)cap * sizeof(i64));
      if (ri) r.rowid = ri;
      double *rl = sqlite3_realloc64(r.len, (sqlite3_uint64)cap * sizeof(double));
      if (rl) r.len = rl;
      double *rf = sqlite3_realloc64(r.freq, (sqlite3_uint64)(cap * m) * sizeof(double));
      if (rf) r.freq = rf;
      double *rs = sqlite3_realloc64(r.score, (sqlite3_uint64)cap * sizeof(double));
      if (rs) r.score = rs;
      unsigned char *ro = sqlite3_realloc64(r.ok, (sqlite3_uint64)cap);
      if (ro) r.ok = ro;
      i64 *ra = sqlite3_realloc64(r.at, (sqlite3_uint64)cap * sizeof(i64));
      if (ra) r.at = ra;
      if (!ri || !rl || !rf || !rs || !ro || !ra) { rc = SQLITE_NOMEM; break; }
      r.cap = cap;
    }
    r.rowid[r.n] = rowid;
    r.len[r.n] = len;
    r.score[r.n] = sc.score;
    r.at[r.n] = d;
    r.ok[r.n] = !x->pass;
    memcpy(&r.freq[r.n * m], f, (size_t)m * sizeof(double));
    r.n++;
    if (x->pass) { /* counted once the filters let it through */
      if (++asked < HR_PC_ASK(x->n)) continue;
      asked = 0;
      if ((rc = hr_pc_ask(x, &r, m, heap, &held)) != SQLITE_OK) break;
      if (held == x->n) theta = -heap[0].score;
      continue;
    }
    if (held < x->n) {
      heap[held++] = sc;
      hm_heap_up(heap, held - 1, 1);
    } else if (hm_scored_before(&sc, &heap[0])) {
      heap[0] = sc;
      hm_heap_down(heap, held, 0, 1);
    }
    if (held == x->n) theta = -heap[0].score;
  }
  if (rc == SQLITE_OK && x->pass) rc = hr_pc_ask(x, &r, m, heap, &held);
  if (rc == SQLITE_OK)
    rc = hb_bm25_rank(x->db, "memories_fts", &x->blob, r.n, m, r.rowid, r.len, 1, r.freq, idf,
                      avgdl, NULL, NULL, x->n, top, size);
  sqlite3_free(heap);
  sqlite3_free(r.rowid);
  sqlite3_free(r.len);
  sqlite3_free(r.freq);
  sqlite3_free(r.score);
  sqlite3_free(r.ok);
  sqlite3_free(r.at);
  sqlite3_free(allow);
  return rc;
}

/* The search through the cache, when it can take it: 0 with *done 1 and the
 * top in top and *size; 0 with *done 0 when the rounds must search (a
 * namespace or question too big for it, a write under way).
 * p, m: the phrases; tag: the namespace's FTS5 tag (NULL: alone); docs,
 * tokens: its statistics; postings: the phrases' rows in all; done: whether
 * it searched. */
static int hr_pc_try(hr_lex *x, const hm_bm25_phrase *p, int m, const char *tag, double docs,
                     double tokens, double postings, hm_scored *top, i64 *size, int *done) {
  double avgdl = tokens / docs;
  *done = 0;
  if (!x->pc || !(postings >= x->cache_from) ||
      sqlite3_txn_state(x->db, "main") == SQLITE_TXN_WRITE ||
      docs * HR_PC_LENGTH + postings * HR_PC_POSTING > (double)HR_PC_BYTES)
    return SQLITE_OK;
  int ready = 0;
  int rc = hr_pc_fresh(x, x->pc, docs, tokens, x->cache_from > 0 ? HR_PC_SETTLE : 0,
                       &ready);
  if (rc != SQLITE_OK || !ready) return rc;
  hr_pc *pc = *x->pc;
  pc->clock++;
  if ((rc = hr_pc_lens(x, pc, !tag)) != SQLITE_OK) return rc;
  if (x->pass && (rc = hr_pc_filters(x, pc)) != SQLITE_OK) return rc;
  hr_pc_term *e[HM_MAX_QUERY_TERMS];
  int slot[HM_MAX_QUERY_TERMS];
  for (int i = 0; i < m; i++)
    if ((rc = hr_pc_term_of(x, pc, &p[i], tag, x->term[i], &slot[i])) != SQLITE_OK) return rc;
  for (int i = 0; i < m; i++) e[i] = &pc->t[slot[i]];
  *done = 1;
  return hr_pc_search(x, p, e, m, avgdl, top, size);
}

/* The phrases of the question's words nw, looked up in bm25_terms into p
 * (those the namespace holds, in order; *m of them, each one's FTS5 term in
 * x->term, *postings their rows in all).  0, or 1 when the pruned search cannot take the question: a word of
 * several FTS5 tokens (or none), or the namespace's own tag.
 * word, wlen: each word and its bytes; docs, avgdl: the namespace's statistics;
 * *rc: an SQLite error. */
static int hr_lex_phrases(hr_lex *x, const char **word, const int *wlen, int nw, const char *tag,
                          double docs, double avgdl, hm_bm25_phrase *p, int *m,
                          double *postings, int *rc) {
  sqlite3_stmt *st = NULL;
  *m = 0;
  *postings = 0;
  for (int i = 0; i < nw; i++) {
    hr_lex_tok tk = {0};
    *rc = x->stem->tok.xTokenize(x->stem->inst, &tk, FTS5_TOKENIZE_QUERY, word[i], wlen[i],
                                 hr_lex_token);
    if (*rc != SQLITE_OK) return 0;
    if (tk.n != 1 || !strcmp(tk.tok, tag)) return 1;
    if ((*rc = hr_lex_stmt(x, HR_ST_LEX_TERM, &st)) != SQLITE_OK) {
      *rc = hr_lex_sqlfail(x, *rc);
      return 0;
    }
    sqlite3_bind_text(st, 1, x->a->ns, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, tk.tok, -1, SQLITE_TRANSIENT);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW && sqlite3_column_double(st, 0) >= 1) {
      memcpy(x->term[*m], tk.tok, sizeof tk.tok);
      hm_bm25_phrase *q = &p[(*m)++];
      q->word = word[i];
      q->len = wlen[i];
      q->df = sqlite3_column_double(st, 0);
      q->idf = hm_bm25_idf(docs, q->df);
      q->ub = hm_bm25_bound(q->idf, sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
                            avgdl);
      q->w = q->idf; /* its part at frequency 1 and the average length is 1 */
      *postings += q->df;
    }
    sqlite3_reset(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
      *rc = hr_lex_sqlfail(x, step);
      return 0;
    }
  }
  return 0;
}

/* The namespace's BM25 top x->n for the question, into top and *size. */
static int hr_lex_search(hr_lex *x, hm_scored *top, i64 *size) {
  const char *word[HM_MAX_QUERY_TERMS];
  int wlen[HM_MAX_QUERY_TERMS];
  char wbuf[HM_MATCH_LEN], tag[HM_NS_TAG_LEN];
  *size = 0;
  int nw = hr_lex_words(x->a->query, wbuf, sizeof wbuf, word, wlen);
  if (nw <= 0) return SQLITE_OK;
  if (hm_ns_tag(x->a->ns, tag, sizeof tag) < 0) {
    x->err = sqlite3_mprintf("the namespace is too long to search");
    return SQLITE_ERROR;
  }
  sqlite3_stmt *st = NULL;
  int rc = hr_lex_stmt(x, HR_ST_LEX_NS, &st);
  if (rc != SQLITE_OK) return hr_lex_sqlfail(x, rc);
  sqlite3_bind_text(st, 1, x->a->ns, -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st);
  int stats = rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER &&
              sqlite3_column_type(st, 1) == SQLITE_INTEGER;
  double docs = rc == SQLITE_ROW ? sqlite3_column_double(st, 0) : 0.0;
  double tokens = rc == SQLITE_ROW ? sqlite3_column_double(st, 1) : 0.0;
  int alone = rc == SQLITE_ROW && sqlite3_column_int(st, 2);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return hr_lex_sqlfail(x, rc);
  x->acc.table = (char *)"memories_fts";
  x->acc.nhit = sqlite3_malloc64(sizeof(i64) * HM_MAX_QUERY_TERMS);
  if (!x->acc.nhit) return SQLITE_NOMEM;
  if ((x->a->kinds || x->a->has_since || x->a->has_until) &&
      (rc = hr_lex_filters(x)) != SQLITE_OK)
    return rc;
  if (!stats || !(docs >= 1) || !(tokens > 0)) /* statistics missing: as heap_bm25_top */
    return hr_lex_full(x, nw, 0, stats ? docs : 0.0, stats ? tokens : 0.0, top, size);
  hm_bm25_phrase p[HM_MAX_QUERY_TERMS];
  int m = 0;
  double postings = 0;
  rc = SQLITE_OK;
  if (hr_lex_phrases(x, word, wlen, nw, tag, docs, tokens / docs, p, &m, &postings, &rc))
    return hr_lex_full(x, nw, alone, docs, tokens, top, size);
  if (rc != SQLITE_OK) return rc;
  if (m == 0 || postings <= x->small) /* (m 0: no word in bm25_terms; FTS5 says so at once) */
    return hr_lex_full(x, nw, alone, docs, tokens, top, size);
  int done = 0;
  rc = hr_pc_try(x, p, m, alone ? NULL : tag, docs, tokens, postings, top, size, &done);
  if (rc != SQLITE_OK || done) return rc;
  return hr_lex_pruned(x, p, m, nw, alone ? NULL : tag, docs, tokens, top, size);
}

/* The namespace's BM25 top n for a's question, as JSON ([[seq, bm25], ...],
 * best first: heap_bm25_top's) into *json, or an SQLite code with *err one
 * sentence.  vt keeps the statements (NULL: prepared for this call); below
 * `small` postings the whole match set is read (HR_LEX_SMALL); from
 * `cache_from` the connection's posting cache *pc answers (HR_PC_FROM).
 * stem: the FTS5 tokenizer's stemmer; pc: the connection's cache (NULL:
 * none). */
static int hr_lexical(sqlite3 *db, hr_vtab *vt, hm_stemmer *stem, const hr_args *a, int n,
                      double small, double cache_from, hr_pc **pc, char **json, char **err) {
  hr_lex x = {.db = db, .vt = vt, .stem = stem, .a = a, .n = n, .small = small,
              .cache_from = cache_from, .pc = pc};
  hm_scored *top = sqlite3_malloc64((sqlite3_uint64)n * sizeof *top);
  i64 size = 0;
  int rc = top ? hr_lex_search(&x, top, &size) : SQLITE_NOMEM;
  *json = NULL;
  if (rc == SQLITE_OK && !(*json = hb_bm25_json(top, size))) rc = SQLITE_NOMEM;
  if (x.blob) sqlite3_blob_close(x.blob);
  for (int i = 0; i < HR_NST; i++) sqlite3_finalize(x.own[i]);
  sqlite3_free(x.acc.rowid);
  sqlite3_free(x.acc.lower);
  sqlite3_free(x.acc.freq);
  sqlite3_free(x.acc.nhit);
  for (int i = 0; i < x.nkinds; i++) sqlite3_free(x.kinds[i]);
  sqlite3_free(x.kinds);
  sqlite3_free(top);
  *err = x.err;
  if (rc != SQLITE_OK && !*err)
    *err = sqlite3_mprintf("%s", rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errstr(rc));
  return rc;
}

/* heap_bm25_search(question, namespace, n [, small [, cache]]) -> JSON
 * [[seq, bm25], ...]: the namespace's BM25 top n (1 to 1000) for the
 * question, best first, ties by seq, as heap_recall takes its lexical
 * candidates (without filters): the same rows and scores heap_bm25_top
 * gives over the whole match set.  small: the question's postings (rows
 * holding one of its words, summed over its words) at or below which the
 * whole match set is read rather than pruned (2048, heap_recall's; 0:
 * always pruned, where the question allows).  cache: the postings from
 * which the connection's posting cache answers (2048, heap_recall's; 0:
 * wherever it can). */
static void heap_bm25_search(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hm_conn *conn = hq_user_data(ctx);
  hr_args a = {0};
  double small = HR_LEX_SMALL, cache_from = HR_PC_FROM;
  char bad[HM_ERRLEN];
  if (hq_arg_text(argv[0], "question", HM_ARG_NUL_OK, hm_limits.MAX_TEXT_BYTES, &a.query, bad,
                  sizeof bad) ||
      hq_arg_text(argv[1], "namespace", HM_ARG_NAME, 0, &a.ns, bad, sizeof bad)) {
    hq_result_err(ctx, "heap_bm25_search", bad);
    return;
  }
  if (!strcmp(a.ns, "*")) {
    hq_result_err(ctx, "heap_bm25_search", "namespace '*' is reserved for the pooled layer of "
                                           "learned links");
    return;
  }
  if (sqlite3_value_type(argv[2]) != SQLITE_INTEGER || sqlite3_value_int64(argv[2]) < 1 ||
      (double)sqlite3_value_int64(argv[2]) > hm_limits.MAX_K) {
    hq_result_err(ctx, "heap_bm25_search", "n must be an integer from 1 to 1000");
    return;
  }
  if (argc > 3) {
    if (sqlite3_value_type(argv[3]) != SQLITE_INTEGER || sqlite3_value_int64(argv[3]) < 0) {
      hq_result_err(ctx, "heap_bm25_search", "small must be an integer >= 0 (postings)");
      return;
    }
    small = sqlite3_value_double(argv[3]);
  }
  if (argc > 4) {
    if (sqlite3_value_type(argv[4]) != SQLITE_INTEGER || sqlite3_value_int64(argv[4]) < 0) {
      hq_result_err(ctx, "heap_bm25_search", "cache must be an integer >= 0 (postings)");
      return;
    }
    cache_from = sqlite3_value_double(argv[4]);
  }
  if (!conn || !conn->stem) {
    hq_result_err(ctx, "heap_bm25_search", "the library was not loaded with FTS5");
    return;
  }
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  char *why = NULL, *need = NULL;
  if (hs_check_store(db, conn, &need) != SQLITE_OK) {
    hq_result_err(ctx, "heap_bm25_search", need ? need : "out of memory");
    sqlite3_free(need);
    return;
  }
  char *json = NULL;
  int rc = hr_lexical(db, conn->vt, conn->stem, &a, sqlite3_value_int(argv[2]), small,
                      cache_from, &conn->pc, &json, &why);
  if (rc == SQLITE_OK) sqlite3_result_text(ctx, json, -1, sqlite3_free);
  else if (rc == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
  else hq_result_err(ctx, "heap_bm25_search", why);
  sqlite3_free(why);
}

#pragma endregion

/* A 0-or-1 argument (track, tracked), read and checked into *out; NULL (or
 * not given) leaves *out as it is. */
static int hr_read_flag(hr_vtab *t, sqlite3_value *v, const char *name, int *out) {
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(v) != SQLITE_INTEGER ||
      (sqlite3_value_int64(v) != 0 && sqlite3_value_int64(v) != 1))
    return hc_fail(&t->call, SQLITE_ERROR, "%s must be 0 or 1", name);
  *out = sqlite3_value_int(v);
  return SQLITE_OK;
}

/* A time (now, since, until), read and checked into *out; *has: given.
 * v: the argument; name: its name. */
static int hr_read_time(hr_vtab *t, sqlite3_value *v, const char *name, double *out, int *has) {
  *has = 0;
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  double x = sqlite3_value_double(v);
  if (!hq_is_number(v) || !(x >= hm_limits.MIN_TIME && x <= hm_limits.MAX_TIME)) {
    char why[HM_ERRLEN];
    hm_errf(why, sizeof why, "%s must be unix seconds from %.0f to %.0f (1970 to the year 9999)",
            name, hm_limits.MIN_TIME, hm_limits.MAX_TIME);
    return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  }
  *out = x;
  *has = 1;
  return SQLITE_OK;
}

/* The filters (kinds, since, until), read and checked into a. */
static int hr_read_filters(hr_vtab *t, sqlite3_value **arg, hr_args *a) {
  int rc;
  if ((rc = hr_read_time(t, arg[HR_SINCE - HR_QUERY], "since", &a->since, &a->has_since)) ||
      (rc = hr_read_time(t, arg[HR_UNTIL - HR_QUERY], "until", &a->until, &a->has_until)))
    return rc;
  if (a->has_since && a->has_until && !(a->since < a->until))
    return hc_fail(&t->call, SQLITE_ERROR, "since must be before until (memories created at "
                                           "or after since, and before until)");
  sqlite3_value *v = arg[HR_KINDS - HR_QUERY];
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  const char *kinds = NULL;
  char why[HM_ERRLEN];
  int len = sqlite3_value_bytes(v);
  if (sqlite3_value_type(v) != SQLITE_TEXT || !len)
    return hc_fail(&t->call, SQLITE_ERROR, "kinds must be a kind ('fact') or a JSON array of kinds "
                                           "('[\"fact\", \"preference\"]')");
  if (hq_arg_text(v, "kinds", 0, hm_limits.MAX_TEXT_BYTES, &kinds, why, sizeof why))
    return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  if (kinds[0] != '[') { /* one kind */
    if (hq_arg_text(v, "a kind", HM_ARG_NAME, 0, &kinds, why, sizeof why))
      return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
    sqlite3_str *js = sqlite3_str_new(t->db);
    sqlite3_str_appendchar(js, 1, '[');
    hq_json_string(js, kinds, len);
    sqlite3_str_appendchar(js, 1, ']');
    a->kinds = sqlite3_str_finish(js);
    return a->kinds ? SQLITE_OK : SQLITE_NOMEM;
  }
  sqlite3_stmt *st = NULL;
  if ((rc = hr_stmt(t, HR_ST_KINDS, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, kinds, len, SQLITE_TRANSIENT);
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  int ok = sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  if (!ok)
    return hc_fail(&t->call, SQLITE_ERROR, "kinds must be a kind or a JSON array of one or "
                                           "more kinds (text), such as '[\"fact\", "
                                           "\"preference\"]'");
  if (hm_json_nul(kinds, len))
    return hc_fail(&t->call, SQLITE_ERROR, "a kind in kinds must be valid UTF-8 without NUL "
                                           "bytes");
  /* each kind a name, and not more of them than a recall returns memories */
  if ((rc = hr_stmt(t, HR_ST_KIND_EACH, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, kinds, len, SQLITE_TRANSIENT);
  int nkinds = 0;
  while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (++nkinds > hm_limits.MAX_K) {
      hm_errf(why, sizeof why, "kinds lists more than %.0f kinds", hm_limits.MAX_K);
      ok = 0;
    } else if (hm_check_text(sqlite3_column_type(st, 0), sqlite3_column_text(st, 0),
                             sqlite3_column_bytes(st, 0), "a kind in kinds", HM_ARG_NAME, 0, why,
                             sizeof why)) {
      ok = 0;
    }
  }
  sqlite3_reset(st);
  if (!ok) return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  a->kinds = sqlite3_mprintf("%.*s", len, kinds);
  return a->kinds ? SQLITE_OK : SQLITE_NOMEM;
}

/* namespaces (a recall across them), read and checked into a: a JSON array
 * of 1 to MAX_NAMESPACES distinct names, none of them '*'. */
static int hr_read_spaces(hr_vtab *t, sqlite3_value *v, hr_args *a) {
  const char *js = NULL;
  char why[HM_ERRLEN];
  int rc, len = sqlite3_value_bytes(v), ok = 1, n = 0;
  if (sqlite3_value_type(v) != SQLITE_TEXT || !len ||
      hq_arg_text(v, "namespaces", 0, hm_limits.MAX_TEXT_BYTES, &js, why, sizeof why) ||
      js[0] != '[')
    return hc_fail(&t->call, SQLITE_ERROR, "namespaces must be a JSON array of one or more "
                                           "namespaces, such as '[\"user:maya\", \"team\"]'");
  sqlite3_stmt *st = NULL;
  if ((rc = hr_stmt(t, HR_ST_KINDS, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, js, len, SQLITE_TRANSIENT); /* an array of text, not empty */
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  ok = sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  if (!ok)
    return hc_fail(&t->call, SQLITE_ERROR, "namespaces must be a JSON array of one or more "
                                           "namespaces (text), such as '[\"user:maya\", "
                                           "\"team\"]'");
  if (hm_json_nul(js, len))
    return hc_fail(&t->call, SQLITE_ERROR, "a namespace in namespaces must be valid UTF-8 "
                                           "without NUL bytes");
  if ((rc = hr_stmt(t, HR_ST_SPACE_EACH, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, js, len, SQLITE_TRANSIENT);
  while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *name = sqlite3_column_text(st, 0);
    if (++n > hm_limits.MAX_NAMESPACES) {
      hm_errf(why, sizeof why, "namespaces lists more than %.0f namespaces",
              hm_limits.MAX_NAMESPACES);
      ok = 0;
    } else if (hm_check_text(sqlite3_column_type(st, 0), name, sqlite3_column_bytes(st, 0),
                             "a namespace in namespaces", HM_ARG_NAME, 0, why, sizeof why)) {
      ok = 0;
    } else if (!strcmp((const char *)name, "*")) {
      hm_errf(why, sizeof why, "'*' is not a namespace ('*' names the pooled layer)");
      ok = 0;
    } else if (sqlite3_column_int(st, 1)) {
      hm_errf(why, sizeof why, "namespaces names %s twice", name);
      ok = 0;
    }
  }
  sqlite3_reset(st);
  if (!ok) return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  a->spaces = js;
  a->nspaces = n;
  return SQLITE_OK;
}

/* Read and check the arguments given (idxNum: which, as hr_best_index set
 * it) into *a, c->k and c->cfg: the tuned config when none is given. */
static int hr_read_args(hr_vtab *t, hr_cursor *c, int idxNum, int argc, sqlite3_value **argv,
                        hr_args *a) {
  sqlite3_value *arg[HR_NARGS] = {0};
  for (int j = 0, used = 0; j < HR_NARGS; j++)
    if (idxNum & (1 << j) && used < argc) arg[j] = argv[used++];
  sqlite3_value *q = arg[HR_QUERY - HR_QUERY];
  char why[HM_ERRLEN];
  if (!q || sqlite3_value_type(q) != SQLITE_TEXT)
    return hc_fail(&t->call, SQLITE_ERROR, "the question must be text, as the first argument: "
                                           "heap_recall('When is my flight?', 'user:maya')");
  const char *query, *ns = "default";
  if (hq_arg_text(q, "the question", HM_ARG_NUL_OK, hm_limits.MAX_TEXT_BYTES, &query, why,
                  sizeof why))
    return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  int qlen = sqlite3_value_bytes(q);
  if ((int)strlen(query) != qlen) { /* a NUL inside is a space, as Memory.recall reads it */
    if (!(a->query_copy = sqlite3_malloc(qlen + 1))) return SQLITE_NOMEM;
    for (int i = 0; i < qlen; i++) a->query_copy[i] = query[i] ? query[i] : ' ';
    a->query_copy[qlen] = 0;
    query = a->query_copy;
  }
  sqlite3_value *v = arg[HR_NAMESPACE - HR_QUERY];
  if (v && sqlite3_value_type(v) != SQLITE_NULL &&
      hq_arg_text(v, "namespace", HM_ARG_NAME, 0, &ns, why, sizeof why))
    return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
  if (!strcmp(ns, "*"))
    return hc_fail(&t->call, SQLITE_ERROR, "'%s' is not a namespace ('*' names the pooled "
                                           "layer)", ns);
  v = arg[HR_NAMESPACES - HR_QUERY];
  if (v && sqlite3_value_type(v) != SQLITE_NULL) {
    if (arg[HR_NAMESPACE - HR_QUERY] && sqlite3_value_type(arg[HR_NAMESPACE - HR_QUERY]) !=
                                            SQLITE_NULL)
      return hc_fail(&t->call, SQLITE_ERROR, "give namespace (one) or namespaces (a JSON array "
                                             "of them), not both");
    int rc = hr_read_spaces(t, v, a);
    if (rc != SQLITE_OK) return rc;
  }
  c->k = 5;
  v = arg[HR_K - HR_QUERY];
  if (v && sqlite3_value_type(v) != SQLITE_NULL) {
    if (sqlite3_value_type(v) != SQLITE_INTEGER || sqlite3_value_int64(v) < 1 ||
        sqlite3_value_int64(v) > hm_limits.MAX_K) {
      hm_errf(why, sizeof why, "k must be an integer from 1 to %.0f", hm_limits.MAX_K);
      return hc_fail(&t->call, SQLITE_ERROR, "%s", why);
    }
    c->k = sqlite3_value_int(v);
  }
  double now;
  int has_now, rc;
  if ((rc = hr_read_time(t, arg[HR_NOW - HR_QUERY], "now", &now, &has_now))) return rc;
  if (!has_now) now = hr_now(t->db);
  char err[HM_ERRLEN];
  sqlite3_stmt *st = NULL;
  v = arg[HR_CONFIG - HR_QUERY];
  if (v && sqlite3_value_type(v) != SQLITE_NULL) {
    if (sqlite3_value_type(v) != SQLITE_TEXT)
      return hc_fail(&t->call, SQLITE_ERROR, "config must be text such as 'w_usefulness=0.5'");
    if (hm_config_parse((const char *)sqlite3_value_text(v), &c->cfg, err, sizeof err) != HM_OK)
      return hc_fail(&t->call, SQLITE_ERROR, "%s", err);
  } else {
    /* the store's tuned weights, as Memory opens with them */
    if ((rc = hr_stmt(t, HR_ST_TUNED, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
    rc = hr_tuned_read(st, &c->cfg, err, sizeof err);
    if (rc == SQLITE_CORRUPT) {
      sqlite3_reset(st);
      return hc_fail(&t->call, SQLITE_CORRUPT, "the store's tuned config is damaged (%s)", err);
    }
    if (rc != SQLITE_OK) return hc_sqlfail(&t->call, rc);
    sqlite3_reset(st);
  }
  int track = !sqlite3_db_readonly(t->db, "main");
  if ((rc = hr_read_flag(t, arg[HR_TRACK - HR_QUERY], "track", &track))) return rc;
  int tracked = track;
  if ((rc = hr_read_flag(t, arg[HR_TRACKED - HR_QUERY], "tracked", &tracked))) return rc;
  v = arg[HR_QVEC - HR_QUERY];
  const void *qvec = NULL;
  int qbytes = 0;
  if (v && sqlite3_value_type(v) != SQLITE_NULL) {
    if (sqlite3_value_type(v) != SQLITE_BLOB || sqlite3_value_bytes(v) % 4 ||
        !sqlite3_value_bytes(v))
      return hc_fail(&t->call, SQLITE_ERROR, "qvec must be the question's vector, a blob of "
                                             "float32");
    qvec = sqlite3_value_blob(v);
    qbytes = sqlite3_value_bytes(v);
  }
  a->query = query;
  a->ns = ns;
  a->now = now;
  a->track = track;
  a->tracked = tracked;
  a->qvec = qvec;
  a->qbytes = qbytes;
  return hr_read_filters(t, arg, a);
}

/* One link of a namespace's set: its own counts (oa, ob), its share of the
 * pooled row (sa, sb) and the pooled row as pending changes leave it
 * (pa, pb), viewed as heap_links views them (the pooled row less the
 * namespace's share, borrowed up to pseudocount), its feature hashed as
 * heap_links hashes it (up to a NUL).  0, or -1 for what heap_links would
 * refuse (a damaged row): counts not finite and >= 0, a feature name that
 * is not UTF-8.
 * f, flen: the feature; *l: the link. */
static int hr_link(const char *f, int flen, double oa, double ob, double sa, double sb, double pa,
                   double pb, double pseudocount, hm_link *l) {
  double x[4] = {oa, ob, oa + (pa - sa > 0 ? pa - sa : 0), ob + (pb - sb > 0 ? pb - sb : 0)};
  i64 chars;
  for (int i = 0; i < 4; i++)
    if (!isfinite(x[i]) || x[i] < 0) return -1;
  if (!hm_utf8_ok((const unsigned char *)f, flen, 1, &chars)) return -1;
  const char *nul = memchr(f, 0, (size_t)flen);
  l->h = hm_fnv64(f, nul ? (size_t)(nul - f) : (size_t)flen);
  hm_link_view(x[0], x[1], x[2], x[3], pseudocount, &l->a, &l->b);
  return 0;
}

/* The link set namespace ns sees for question type qt: every pooled row of
 * the plain features and those crossed with qt, with the pooled layer's
 * pending changes (ops) applied and the namespace's own row (links: the
 * statement hr_sql_links, own: hr_sql_own, both prepared by the caller),
 * as heap_links() makes it: *blob (sqlite3_malloc'ed), *len.  SQLITE_CORRUPT
 * for a row heap_links would refuse (hr_link).
 * pseudocount: how many observations another namespace's evidence counts at
 * most. */
static int hr_link_set(sqlite3_stmt *links, sqlite3_stmt *own, const hp_ops *ops,
                       const char *qt, const char *ns, double pseudocount, unsigned char **blob,
                       int *len) {
  HM_API_HERE; /* sqlite3_* calls for every pooled row, as heap_links_step had */
  hm_link *v = NULL;
  i64 n = 0, cap = 0;
  unsigned char *seen = ops->nslot ? sqlite3_malloc64((sqlite3_uint64)ops->nslot) : NULL;
  int rc = SQLITE_OK;
  if (ops->nslot && !seen) return SQLITE_NOMEM;
  if (seen) memset(seen, 0, (size_t)ops->nslot);
  sqlite3_bind_text(links, 1, qt, -1, SQLITE_STATIC);
  sqlite3_bind_text(links, 2, ns, -1, SQLITE_STATIC);
  for (int pass = 0; pass < 2 && !rc; pass++) {
    /* pass 0: the stored pooled rows; 1: those only pending changes made */
    for (int k = 0; !rc; k++) {
      hp_row p = {.exists = 1};
      double o[4] = {0, 0, 0, 0};
      const char *f;
      int flen;
      if (pass == 0) {
        int step = sqlite3_step(links);
        if (step != SQLITE_ROW) {
          rc = step == SQLITE_DONE ? SQLITE_OK : step;
          break;
        }
        f = (const char *)sqlite3_column_text(links, 0);
        flen = sqlite3_column_bytes(links, 0);
        if (!f) { rc = SQLITE_NOMEM; break; }
        p.a = sqlite3_column_double(links, 1);
        p.b = sqlite3_column_double(links, 2);
        for (int i = 0; i < 4; i++) o[i] = sqlite3_column_double(links, 3 + i);
        int slot = hp_slot(ops, f, flen);
        if (slot >= 0) seen[slot] = 1, hp_apply(ops, f, flen, &p);
      } else {
        if (k >= ops->nslot) break;
        if (ops->first[k] < 0 || seen[k]) continue;
        const hp_op *op = &ops->v[ops->first[k]];
        const char *slash = memchr(op->f, '/', (size_t)op->flen);
        int qlen = slash ? (int)(slash - op->f) : 0;
        if (qlen && ((int)strlen(qt) != qlen || memcmp(op->f, qt, (size_t)qlen))) continue;
        f = op->f, flen = op->flen, p.exists = 0;
        hp_apply(ops, f, flen, &p);
        sqlite3_reset(own);
        sqlite3_bind_text(own, 1, ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(own, 2, f, flen, SQLITE_STATIC);
        if ((rc = sqlite3_step(own)) == SQLITE_ROW)
          for (int i = 0; i < 4; i++) o[i] = sqlite3_column_double(own, i);
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
        sqlite3_reset(own);
        if (rc) break;
      }
      if (n == cap) {
        cap = cap ? 2 * cap : 256;
        hm_link *g = sqlite3_realloc64(v, (sqlite3_uint64)cap * sizeof *g);
        if (!g) { rc = SQLITE_NOMEM; break; }
        v = g;
      }
      if (hr_link(f, flen, o[0], o[1], o[2], o[3], p.a, p.b, pseudocount, &v[n]))
        rc = SQLITE_CORRUPT;
      else n++;
    }
  }
  sqlite3_reset(links);
  sqlite3_free(seen);
  if (!rc && !(*blob = hq_links_blob(v, n, len))) rc = SQLITE_NOMEM;
  sqlite3_free(v);
  return rc;
}

/* The link set the namespace sees, into c->links. */
static int hr_read_links(hr_vtab *t, hr_cursor *c, const char *ns) {
  sqlite3_stmt *st = NULL, *own = NULL, *pending = NULL;
  hp_ops ops = {0};
  i64 maxid;
  int rc;
  if ((rc = hr_stmt(t, HR_ST_PENDING, &pending)) || (rc = hp_read(pending, &ops, &maxid)) ||
      (rc = hr_stmt(t, HR_ST_LINKS, &st)) || (rc = hr_stmt(t, HR_ST_OWN, &own)) ||
      (rc = hr_link_set(st, own, &ops, c->qtype, ns, c->cfg.pooled_pseudocount, &c->links,
                        &c->linkslen))) {
    hp_free(&ops);
    if (rc == SQLITE_CORRUPT) {
      return hc_fail(&t->call, rc, "the learned links are damaged (a pooled row or a pending "
                                   "change of one holds counts that are not finite and >= 0, or "
                                   "a feature name that is not UTF-8)");
    }
    return hc_sqlfail(&t->call, rc);
  }
  hp_free(&ops);
  return SQLITE_OK;
}

/* v (HM_EMBED_DIM floats) scaled to unit length; 0 (v unchanged) when it is
 * all zeros: no word the model knows. */
static int hr_unit(float *v) {
  double ss = 0;
  for (int d = 0; d < HM_EMBED_DIM; d++) ss += (double)v[d] * v[d];
  if (!(ss > 0)) return 0;
  for (int d = 0; d < HM_EMBED_DIM; d++) v[d] = (float)(v[d] / sqrt(ss));
  return 1;
}

/* What the file says of a namespace's vectors, read in the recall's
 * snapshot: its stamps, its vector index's version, how much to probe (the
 * index's settings, as vindex.c reads them: hx_scan_settings). */
typedef struct {
  i64 added, changed, version;
  double probe;    /* the least share of the namespace recall scans, with an index */
  i64 size;        /* its partitions' size */
  i64 threshold;   /* the size from which a namespace is indexed */
} hr_vstate;

/* How many of an indexed namespace's `rows` vectors a recall scans: the
 * share max(probe, cbrt(threshold / rows)) of them, and 8 partitions at
 * least.  The cube root is 1 at the threshold, where the exact scan gave
 * way to the index, and falls as the namespace grows: the partitions
 * nearest a question hold its nearest memories more often in a big
 * namespace than in a small one (LoCoMo turns, RESULTS 28.4: recall@50 0.84
 * at 100k and 0.96 at 1M with a quarter scanned), so a fixed share lost a
 * sixth of the exact top 50 just past the threshold. */
static i64 hr_scan_budget(const hr_vstate *vs, i64 rows) {
  double share = vs->probe;
  if (rows > 0 && vs->threshold > 0) {
    double lift = cbrt((double)vs->threshold / (double)rows);
    if (lift > share) share = lift;
  }
  if (share > 1) share = 1;
  i64 budget = (i64)ceil(share * (double)rows);
  return budget < 8 * vs->size ? 8 * vs->size : budget;
}

/* Which vectors this recall uses, into c->hybrid and (for the carried
 * embedder) c->qf: the store's embedder and the namespace's stamps, read in
 * the recall's snapshot.  A store whose embedder is the one this library
 * carries embeds the question here unless qvec is given; another embedder's
 * store is hybrid only with a qvec, as before. */
static int hr_vectors(hr_vtab *t, hr_cursor *c, const hr_args *a, hr_vstate *vs) {
  sqlite3_stmt *st = NULL;
  int rc;
  c->hybrid = 0;
  if ((rc = hr_stmt(t, HR_ST_VSTATE, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, a->ns, -1, SQLITE_TRANSIENT);
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  const char *name = (const char *)sqlite3_column_text(st, 0);
  int builtin = name && !strcmp(name, HM_BUILTIN_EMBEDDER) &&
                sqlite3_column_int(st, 1) == HM_EMBED_DIM;
  vs->added = sqlite3_column_int64(st, 2);
  vs->changed = sqlite3_column_int64(st, 3);
  vs->version = sqlite3_column_int64(st, 4);
  sqlite3_reset(st);
  if (!builtin) {
    c->hybrid = a->qvec ? 1 : 0;
    return SQLITE_OK;
  }
  if ((rc = hx_scan_settings(&t->call, &vs->probe, &vs->size, &vs->threshold))) return rc;
  char err[HM_ERRLEN];
  int dim = 0;
  if (a->qvec) {
    if (hv_floats(a->qvec, a->qbytes, c->qf, &dim) || dim != HM_EMBED_DIM)
      return hc_fail(&t->call, SQLITE_ERROR, "qvec must be a vector of this store's embedder (256 "
                                             "dimensions, float32 or heap_embed's)");
  } else if (hm_embed(a->query, -1, c->qf, HM_EMBED_DIM, err, sizeof err) < 0) {
    return hc_fail(&t->call, SQLITE_ERROR, "%s", err);
  }
  if (!hr_unit(c->qf)) return SQLITE_OK; /* no word the model knows: lexical recall */
  c->qdim = HM_EMBED_DIM;
  c->hybrid = 2;
  return SQLITE_OK;
}

/* The rows of a statement of hr_sql_vload's shape into e's buckets (by their
 * partition; unless all, not a row of a partition read fresh): 0, 2 (an int4 entry met
 * another format: read it again as int8), or an error set.
 * vc: the connection's cache; st: the statement, bound. */
static int hr_vrows(hr_vtab *t, hv_cache *vc, hv_ns *e, sqlite3_stmt *st, int all) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    i64 seq = sqlite3_column_int64(st, 0);
    hv_bucket *b = hv_bucket_of(e, sqlite3_column_int64(st, 4));
    if (!b) b = &e->b[0]; /* a partition the entry does not know: scanned always */
    if (!all && b->n && b->seq[b->n - 1] >= seq) continue; /* its partition read fresh */
    int got = hv_put(vc, e, b, seq, sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1),
                     (const char *)sqlite3_column_text(st, 2), sqlite3_column_double(st, 3));
    if (got == 2 || got == SQLITE_NOMEM) { sqlite3_reset(st); return got; }
    if (got == 1) {
      sqlite3_reset(st);
      return hc_fail(&t->call, SQLITE_CORRUPT, "a memory's vector is damaged (not a vector of "
                                               "this store's embedder)");
    }
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(&t->call, rc);
}

/* e's partitions made those of the namespace's index now: their centroids
 * read, the buckets of partitions still there kept, the new ones read (when
 * read_new).
 * vc: the connection's cache; ns: the namespace. */
static int hr_vparts(hr_vtab *t, hv_cache *vc, hv_ns *e, const char *ns, int read_new) {
  sqlite3_stmt *st = NULL;
  int rc, n;
  i64 *ids, *stamps;
  int8_t *cent;
  float *cinv;
  if ((rc = hr_stmt(t, HR_ST_VCENTS, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
  rc = hv_cents_read(st, e->dim, &n, &ids, &cent, &cinv, &stamps);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return rc == SQLITE_NOMEM ? rc : hc_sqlfail(&t->call, rc);
  hv_bucket *nb = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof *nb);
  unsigned char *fresh = sqlite3_malloc64((sqlite3_uint64)(n + 1));
  if (!nb || !fresh) {
    sqlite3_free(nb);
    sqlite3_free(fresh);
    sqlite3_free(ids);
    sqlite3_free(stamps);
    sqlite3_free(cent);
    sqlite3_free(cinv);
    return SQLITE_NOMEM;
  }
  memset(nb, 0, (size_t)(n + 1) * sizeof *nb);
  if (e->nb) nb[0] = e->b[0];
  for (int i = 0; i < n; i++) {
    hv_bucket *old = hv_bucket_of(e, ids[i]);
    if (old && old->stamp != stamps[i]) old = NULL; /* a vector left it: read again */
    fresh[i + 1] = !old;
    if (old) { nb[i + 1] = *old; memset(old, 0, sizeof *old); }
    nb[i + 1].id = ids[i];
    nb[i + 1].stamp = stamps[i];
  }
  for (int i = 1; i < e->nb; i++)
    if (e->b[i].cap) hv_bucket_release(vc, e, &e->b[i]); /* partitions gone */
  sqlite3_free(e->b);
  sqlite3_free(e->cent);
  sqlite3_free(e->cinv);
  sqlite3_free(ids);
  sqlite3_free(stamps);
  e->b = nb;
  e->nb = n + 1;
  e->cent = cent;
  e->cinv = cinv;
  rc = SQLITE_OK;
  for (int i = 1; i <= n && rc == SQLITE_OK; i++) {
    if (!fresh[i] || !read_new) continue;
    if ((rc = hr_stmt(t, HR_ST_VPART, &st)) != SQLITE_OK) { rc = hc_sqlfail(&t->call, rc); break; }
    sqlite3_bind_int64(st, 1, e->b[i].id);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_TRANSIENT);
    rc = hr_vrows(t, vc, e, st, 1);
  }
  sqlite3_free(fresh);
  return rc;
}

/* The connection's cache of the namespace's vectors, brought up to the
 * stamps (embed.c's vector cache says when it reads what).
 * ns: the namespace; dim: the vectors' dimension; vs: the stamps read; *out:
 * its entry. */
static int hr_vsync(hr_vtab *t, const char *ns, int dim, const hr_vstate *vs, hv_ns **out) {
  hm_conn *conn = t->conn;
  if (!conn) return hc_fail(&t->call, SQLITE_ERROR, "the library was not loaded into this "
                                                    "connection");
  if (!conn->vc) {
    conn->vc = sqlite3_malloc64(sizeof *conn->vc);
    if (!conn->vc) return SQLITE_NOMEM;
    memset(conn->vc, 0, sizeof *conn->vc);
  }
  hv_cache *vc = conn->vc;
  hv_ns *e = hv_entry(vc, ns, dim);
  if (!e) return SQLITE_NOMEM;
  *out = e;
  if (e->keep && e->changed == vs->changed && e->added == vs->added &&
      e->version == vs->version)
    return SQLITE_OK;
  int rc = SQLITE_OK, fmt = dim % 2 == 0 ? 4 : 8;
  /* a change other than an add, in an indexed namespace with no vector
   * outside its partitions: read partition by partition (their stamps) */
  int by_part = e->keep && e->nb && e->changed != vs->changed && vs->version &&
                e->b[0].n == 0;
  int whole = !(e->keep && e->nb && (e->changed == vs->changed || by_part));
  for (int pass = 0; pass < 2; pass++) {
    if (whole) {
      hv_clear(vc, e);
      e->fmt = fmt;
      e->stride = fmt == 4 ? dim / 2 : dim;
      e->b = sqlite3_malloc64(sizeof *e->b);
      if (!e->b) { rc = SQLITE_NOMEM; break; }
      memset(e->b, 0, sizeof *e->b);
      e->nb = 1;
    }
    e->keep = 0;
    i64 after = e->last;
    if (whole || by_part || e->version != vs->version)
      rc = vs->version ? hr_vparts(t, vc, e, ns, !whole) : 0;
    sqlite3_stmt *st = NULL;
    if (rc == SQLITE_OK && (rc = hr_stmt(t, HR_ST_VLOAD, &st)) != SQLITE_OK)
      rc = hc_sqlfail(&t->call, rc);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 2, after);
      rc = hr_vrows(t, vc, e, st, 0);
    }
    if (rc != 2) break;
    whole = 1; /* a vector of another format than int4: the whole namespace as int8 */
    fmt = 8;
    rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    hv_clear(vc, e);
    e->added = e->changed = e->version = -1;
    return rc;
  }
  e->added = vs->added;
  e->changed = vs->changed;
  e->version = vs->version;
  /* rows read inside a write transaction could be rolled back: used once */
  e->keep = sqlite3_txn_state(t->db, "main") != SQLITE_TXN_WRITE;
  return SQLITE_OK;
}

/* hv_filter's look-up for a row of a kind the cache does not keep */
static int hr_allow_other(void *ctx, i64 seq) {
  void **p = ctx; /* the vtab, the args */
  hr_vtab *t = p[0];
  sqlite3_stmt *st = NULL;
  if (hr_stmt(t, HR_ST_ALLOW, &st) != SQLITE_OK) return 0;
  sqlite3_bind_int64(st, 1, seq);
  hr_bind_filters(st, p[1]);
  int ok = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_reset(st);
  return ok;
}

/* The filters of a as the cache applies them, into *f (*kinds: the flags of
 * e's kinds, sqlite3_malloc'ed, NULL without a kinds filter; *ctx: the
 * filter's state, hr_allow_other's). */
static int hr_vector_filter(hr_vtab *t, const hr_args *a, const hv_ns *e, hv_filter *f,
                            unsigned char **kinds, void **ctx) {
  memset(f, 0, sizeof *f);
  *kinds = NULL;
  f->has_since = a->has_since;
  f->since = a->since;
  f->has_until = a->has_until;
  f->until = a->until;
  if (!a->kinds) return SQLITE_OK;
  unsigned char *k = sqlite3_malloc64((sqlite3_uint64)e->nkinds + 1);
  if (!k) return SQLITE_NOMEM;
  memset(k, 0, (size_t)e->nkinds + 1);
  sqlite3_stmt *st = NULL;
  int rc = hr_stmt(t, HR_ST_KINDLIST, &st);
  if (rc != SQLITE_OK) { sqlite3_free(k); return hc_sqlfail(&t->call, rc); }
  sqlite3_bind_text(st, 1, a->kinds, -1, SQLITE_TRANSIENT);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *kind = (const char *)sqlite3_column_text(st, 0);
    for (int i = 0; kind && i < e->nkinds; i++)
      if (!strcmp(e->kinds[i], kind)) k[i] = 1;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) { sqlite3_free(k); return hc_sqlfail(&t->call, rc); }
  *kinds = k;
  f->kinds = k;
  ctx[0] = t;
  ctx[1] = (void *)a;
  f->other = hr_allow_other;
  f->ctx = ctx;
  return SQLITE_OK;
}

/* The cache's top N for the question (of the rows the filters let through)
 * that are not among the candidates read already, as the JSON array
 * hr_sql_vrows takes ("[]": none).
 * e: the namespace's cache; f: the filters; vs: the namespace's vector state. */
static char *hr_vector_top(hr_vtab *t, hr_cursor *c, const hv_ns *e, const hv_filter *f,
                           const hr_vstate *vs) {
  unsigned char q8[4 + HM_MAX_DIM];
  hv_to_int8(c->qf, c->qdim, q8);
  int want = (int)c->cfg.candidates;
  i64 *top = sqlite3_malloc64((sqlite3_uint64)(want > 0 ? want : 1) * sizeof *top);
  if (!top) return NULL;
  i64 budget = hr_scan_budget(vs, hv_rows(e)); /* with an index */
  /* the threshold on the exact cosine, less a margin for int8's rounding */
  int n = hv_top(e, (const int8_t *)(q8 + 4), want, c->cfg.min_cosine - 0.05, f, budget, top);
  sqlite3_str *js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  for (int i = 0, w = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < c->n && !seen; j++) seen = c->rows[j].seq == top[i];
    if (!seen) sqlite3_str_appendf(js, w++ ? ",%lld" : "%lld", (long long)top[i]);
  }
  sqlite3_str_appendchar(js, 1, ']');
  sqlite3_free(top);
  if (n < 0) { sqlite3_free(sqlite3_str_finish(js)); return NULL; }
  return sqlite3_str_finish(js);
}

/* The cosine of the memory of seq with the unit vector qf, from the cache
 * (0 without a vector), into *cos: its row found in bucket 0, else in its
 * partition's (vector_parts says which).
 * e: the namespace's cache. */
static int hr_cos_of(hr_vtab *t, hv_ns *e, i64 seq, const float *qf, double *cos) {
  int found = 0;
  *cos = e->nb ? hv_cos(e, &e->b[0], seq, qf, &found) : 0.0;
  if (found || e->nb < 2) return SQLITE_OK;
  sqlite3_stmt *st = NULL;
  int rc = hr_stmt(t, HR_ST_VPART_OF, &st);
  if (rc != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_int64(st, 1, seq);
  rc = sqlite3_step(st);
  i64 part = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return hc_sqlfail(&t->call, rc);
  if (part) *cos = hv_cos(e, hv_bucket_of(e, part), seq, qf, &found);
  return SQLITE_OK;
}

/* Each candidate's cosine with the question, from the cache. */
static int hr_vector_cos(hr_vtab *t, hr_cursor *c, hv_ns *e) {
  for (int i = 0; i < c->n; i++) {
    int rc = hr_cos_of(t, e, c->rows[i].seq, c->qf, &c->rows[i].cos);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* heap_vector_top(question, namespace, n [, probe]): the vector stage of a
 * hybrid recall alone, in a store of the library's own embedder: the n
 * memories whose vectors are nearest the question (the int8 cosine the
 * search ranks by), best first, as a JSON array of [seq, cosine]; with
 * probe (a share, 0 to 1), that share of an indexed namespace scanned
 * instead of the store's setting (1: every vector, the exact top n).  For
 * the benchmarks and the tests: heap_recall runs the same search. */
static void heap_vector_top(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hr_vtab *t = sqlite3_malloc64(sizeof *t);
  hr_cursor *c = sqlite3_malloc64(sizeof *c);
  char *out = NULL, *why = NULL;
  int rc = SQLITE_NOMEM;
  if (!t || !c) goto done;
  memset(t, 0, sizeof *t);
  memset(c, 0, sizeof *c);
  t->db = sqlite3_context_db_handle(ctx);
  t->conn = hq_user_data(ctx);
  t->call = (hc_ctx){.db = t->db, .conn = t->conn};
  hr_args a = {0};
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT || sqlite3_value_type(argv[1]) != SQLITE_TEXT ||
      sqlite3_value_type(argv[2]) != SQLITE_INTEGER || sqlite3_value_int64(argv[2]) < 1 ||
      sqlite3_value_int64(argv[2]) > 1000) {
    rc = hc_fail(&t->call, SQLITE_ERROR, "give the question (text), the namespace (text) and n "
                                         "(an integer from 1 to 1000)");
    goto done;
  }
  double probe = -1;
  if (argc > 3) {
    probe = sqlite3_value_double(argv[3]);
    if (!hq_is_number(argv[3]) || !(probe > 0 && probe <= 1)) {
      rc = hc_fail(&t->call, SQLITE_ERROR, "probe must be a number above 0 and at most 1");
      goto done;
    }
  }
  char bad[HM_ERRLEN];
  if (hq_arg_text(argv[0], "question", HM_ARG_NUL_OK, hm_limits.MAX_TEXT_BYTES, &a.query, bad,
                  sizeof bad) ||
      hq_arg_text(argv[1], "namespace", HM_ARG_NAME, 0, &a.ns, bad, sizeof bad)) {
    rc = hc_fail(&t->call, SQLITE_ERROR, "%s", bad);
    goto done;
  }
  if ((rc = hs_check_store(t->db, t->conn, &why)) != SQLITE_OK) {
    hc_fail(&t->call, SQLITE_ERROR, "%s", why ? why : "out of memory");
    goto done;
  }
  hr_vstate vs = {0};
  hv_ns *e = NULL;
  if ((rc = hr_vectors(t, c, &a, &vs)) != SQLITE_OK) goto done;
  sqlite3_str *js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  if (c->hybrid == 2 && (rc = hr_vsync(t, a.ns, c->qdim, &vs, &e)) == SQLITE_OK) {
    int want = sqlite3_value_int(argv[2]);
    i64 *top = sqlite3_malloc64((sqlite3_uint64)want * (sizeof(i64) + sizeof(float)));
    unsigned char q8[4 + HM_MAX_DIM];
    hv_to_int8(c->qf, c->qdim, q8);
    i64 rows = hv_rows(e);
    i64 budget = probe > 0 ? (i64)ceil(probe * (double)rows) : hr_scan_budget(&vs, rows);
    int n = top ? hv_top(e, (const int8_t *)(q8 + 4), want, -2.0, NULL, budget, top) : -1;
    for (int i = 0; i < n && rc == SQLITE_OK; i++) {
      double cs = 0;
      rc = hr_cos_of(t, e, top[i], c->qf, &cs);
      sqlite3_str_appendf(js, "%s[%lld, %.17g]", i ? ", " : "", (long long)top[i], cs);
    }
    if (n < 0) rc = SQLITE_NOMEM;
    sqlite3_free(top);
  }
  sqlite3_str_appendchar(js, 1, ']');
  out = sqlite3_str_finish(js);
done:
  if (t) {
    for (int i = 0; i < HR_NST; i++) sqlite3_finalize(t->st[i]);
    if (rc == SQLITE_OK && out) sqlite3_result_text(ctx, out, -1, sqlite3_free);
    else {
      sqlite3_free(out);
      if (rc == SQLITE_NOMEM || !t->call.err) sqlite3_result_error_nomem(ctx);
      else hc_result_fail(ctx, &t->call, "heap_vector_top", rc);
    }
    sqlite3_free(t->call.err);
  } else {
    sqlite3_result_error_nomem(ctx);
  }
  sqlite3_free(why);
  sqlite3_free(t);
  sqlite3_free(c);
}

/* The rows of a candidate statement, added to c->rows. */
static int hr_take_rows(hr_vtab *t, hr_cursor *c, sqlite3_stmt *st, int *cap) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (c->n == *cap) {
      *cap = *cap ? 2 * *cap : 64;
      hr_row *grown = sqlite3_realloc64(c->rows, (sqlite3_uint64)*cap * sizeof *grown);
      if (!grown) { sqlite3_reset(st); return SQLITE_NOMEM; }
      c->rows = grown;
    }
    hr_row *r = &c->rows[c->n];
    memset(r, 0, sizeof *r);
    r->seq = sqlite3_column_int64(st, 0);
    r->has_rank = sqlite3_column_type(st, 1) != SQLITE_NULL;
    r->rank = r->has_rank ? sqlite3_column_double(st, 1) : 0.0;
    r->importance = sqlite3_column_double(st, 2);
    r->age_days = sqlite3_column_double(st, 3);
    r->superseded = sqlite3_column_int(st, 4);
    r->cos = sqlite3_column_type(st, 6) == SQLITE_NULL ? 0.0 : sqlite3_column_double(st, 6);
    const char *f = (const char *)sqlite3_column_text(st, 5);
    int damaged = sqlite3_column_type(st, 2) == SQLITE_TEXT || sqlite3_column_type(st, 2) ==
                  SQLITE_BLOB || sqlite3_column_type(st, 3) == SQLITE_NULL;
    r->features = sqlite3_mprintf("%s", f ? f : "");
    c->n++;
    if (!r->features) { sqlite3_reset(st); return SQLITE_NOMEM; }
    if (damaged) {
      sqlite3_reset(st);
      return hc_fail(&t->call, SQLITE_CORRUPT, "a memory's stored values are damaged "
                                               "(importance or times that are not numbers)");
    }
  }
  if (rc != SQLITE_DONE) return hc_sqlfail(&t->call, rc);
  sqlite3_reset(st);
  return SQLITE_OK;
}

/* The candidates with their score inputs, into c->rows: BM25's, and the
 * vectors' (hybrid 1: in one statement over the vectors table; hybrid 2:
 * from the connection's cache, those BM25 did not find). */
static int hr_read_candidates(hr_vtab *t, hr_cursor *c, const hr_args *a,
                              const hr_vstate *vs) {
  sqlite3_stmt *st = NULL;
  hv_ns *e = NULL;
  int rc, cap = 0;
  if (c->hybrid == 2 && (rc = hr_vsync(t, a->ns, c->qdim, vs, &e)) != SQLITE_OK)
    return rc;
  char *lex = NULL, *why = NULL;
  if (!t->conn || !t->conn->stem)
    return hc_fail(&t->call, SQLITE_ERROR, "the library was not loaded into this connection with "
                                           "FTS5");
  if ((rc = hr_lexical(t->db, t, t->conn->stem, a, (int)c->cfg.candidates, HR_LEX_SMALL,
                       HR_PC_FROM, &t->conn->pc, &lex,
                       &why))) {
    if (rc != SQLITE_NOMEM) hc_fail(&t->call, SQLITE_ERROR, "%s", why);
    sqlite3_free(why);
    return rc;
  }
  if ((rc = hr_stmt(t, c->hybrid == 1 ? HR_ST_HYBRID : HR_ST_CAND, &st)) != SQLITE_OK) {
    sqlite3_free(lex);
    return hc_sqlfail(&t->call, rc);
  }
  sqlite3_bind_text(st, 9, lex, -1, sqlite3_free);
  sqlite3_bind_text(st, 1, a->query, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, a->ns, -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, a->now);
  sqlite3_bind_int(st, 4, (int)c->cfg.candidates);
  if (c->hybrid == 1) sqlite3_bind_blob(st, 5, a->qvec, a->qbytes, SQLITE_TRANSIENT);
  hr_bind_filters(st, a);
  if ((rc = hr_take_rows(t, c, st, &cap)) != SQLITE_OK) return rc;
  if (c->hybrid == 2) {
    unsigned char *kinds = NULL;
    hv_filter f;
    void *ctx[2];
    if ((rc = hr_vector_filter(t, a, e, &f, &kinds, ctx)) != SQLITE_OK) return rc;
    int filtered = a->kinds || a->has_since || a->has_until;
    char *top = hr_vector_top(t, c, e, filtered ? &f : NULL, vs);
    sqlite3_free(kinds);
    if (!top) return SQLITE_NOMEM;
    if (strcmp(top, "[]")) {
      if ((rc = hr_stmt(t, HR_ST_VROWS, &st)) != SQLITE_OK) {
        sqlite3_free(top);
        return hc_sqlfail(&t->call, rc);
      }
      sqlite3_bind_text(st, 1, a->query, -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, a->ns, -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(st, 3, a->now);
      sqlite3_bind_text(st, 4, top, -1, sqlite3_free);
      if ((rc = hr_take_rows(t, c, st, &cap)) != SQLITE_OK) return rc;
    } else {
      sqlite3_free(top);
    }
    if ((rc = hr_vector_cos(t, c, e)) != SQLITE_OK) return rc;
  }
  /* a candidate only the library's vectors found must be close enough to
   * count (the threshold is potion-base-8M's: another model's cosines lie
   * on another scale) */
  int kept = 0;
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    if (c->hybrid == 2 && !r->has_rank && !(r->cos >= c->cfg.min_cosine)) {
      sqlite3_free(r->features);
      continue;
    }
    c->rows[kept++] = *r;
  }
  c->n = kept;
  return SQLITE_OK;
}

/* The question's unit vector by the carried model, into out: c->qf when the
 * recall embedded it already (the carried embedder's hybrid), else embedded
 * here (a lexical store, or another embedder's: the model still says how
 * alike two questions are).  0 when the model knows none of its words. */
static int hr_question_vector(const hr_cursor *c, const char *query, float *out) {
  if (c->hybrid == 2) {
    memcpy(out, c->qf, sizeof(float) * HM_EMBED_DIM);
    return 1;
  }
  char err[HM_ERRLEN];
  return hm_embed(query, -1, out, HM_EMBED_DIM, err, sizeof err) > 0 && hr_unit(out);
}

/* Contextual utility (w_context > 0): each candidate's own judgements in
 * this namespace, each weighted by how close its question was to this one
 * (the carried model's cosine over context_min_sim, rescaled to 0..1, in
 * every store: its vectors or none), as evidence against the namespace's
 * base rate of use (a Beta of weight context_prior around it) with a gate
 * of context_z standard errors: the factor (g / p)^w_context within
 * max_lift, or 1 when it cannot beat chance.
 *
 * A candidate judged used for a question closer than context_min_sim also
 * shows the feature HM_CTX_FEATURE (score.c: "ctx:1") to this recall: a shape (it
 * helped a question like this one), never a word or an id.  Feedback credits
 * it like any feature, so its link, pooled across namespaces like any other,
 * says whether such memories are used more often than the rest, and the
 * per-memory factor counts only once that link passes the links' own gate
 * (hm_link_ratio > 1).  Until then a record can move a memory only through
 * the feature's learned usefulness, which feedback that tells nothing
 * (shuffled) never lets through (bench/RESULTS.md 18). */
/* A logged question's unit vector by the carried model, from the
 * connection's cache or embedded (and kept) now; NULL when the model knows
 * none of its words.  Without a cache (out of memory) it is embedded into
 * a buffer of the thread's, good until the next call. */
static const float *hr_logged_vector(hm_conn *conn, const char *q, int len) {
  static __thread float spare[HM_EMBED_DIM];
  char err[HM_ERRLEN];
  if (conn && !conn->qc) {
    conn->qc = sqlite3_malloc64((sqlite3_uint64)HR_QCACHE * sizeof *conn->qc);
    if (conn->qc) memset(conn->qc, 0, (size_t)HR_QCACHE * sizeof *conn->qc);
  }
  u64 h = hm_fnv64(q, (size_t)len);
  hr_qvec *e = NULL;
  if (conn && conn->qc) {
    hr_qvec *set = &conn->qc[(h % HR_QSETS) * HR_QWAYS];
    u64 now = ++conn->qc_clock;
    e = &set[0];
    for (int w = 0; w < HR_QWAYS; w++) {
      hr_qvec *c = &set[w];
      if (c->text && c->hash == h && c->len == len && !memcmp(c->text, q, (size_t)len)) {
        c->used = now;
        return c->ok ? c->v : NULL;
      }
      if (e->text && (!c->text || c->used < e->used)) e = c; /* empty, else least recent */
    }
    e->used = now;
  }
  float *v = e ? e->v : spare;
  int ok = hm_embed(q, len, v, HM_EMBED_DIM, err, sizeof err) > 0;
  if (e) {
    sqlite3_free(e->text);
    e->text = sqlite3_malloc64((sqlite3_uint64)len + 1);
    if (e->text) memcpy(e->text, q, (size_t)len), e->text[len] = 0;
    e->hash = h;
    e->len = len;
    e->ok = ok;
  }
  return ok ? v : NULL;
}

/* The dot product of two of the carried model's vectors, in double, four
 * sums at a time (a fixed order: the same inputs give the same bits). */
static double hr_dot(const float *a, const float *b) {
  double s[4] = {0, 0, 0, 0};
  for (int d = 0; d < HM_EMBED_DIM; d += 4)
    for (int k = 0; k < 4; k++) s[k] += (double)a[d + k] * b[d + k];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* A logged recall's cosine with this recall's question, as one call of
 * hr_context computes it once per recall: id 0 marks an empty slot (heapmem
 * numbers recalls from 1). */
typedef struct {
  i64 id;
  double sim;
} hr_sim;

/* The cosine of logged recall `id`'s question with qv into *sim (-1 when the
 * model knows none of its words, or the recall is gone), from memo (nmemo
 * slots, a power of two) or computed and kept there.  *qs: the question's
 * statement, prepared at the first miss. */
static int hr_recall_sim(hr_vtab *t, hr_sim *memo, i64 nmemo, i64 id, const float *qv,
                         sqlite3_stmt **qs, double *sim) {
  u64 h = (u64)id * 0x9E3779B97F4A7C15ull;
  i64 slot = (i64)(h >> 32) & (nmemo - 1);
  for (i64 probe = 0; probe < nmemo; probe++, slot = (slot + 1) & (nmemo - 1)) {
    if (memo[slot].id == id && id != 0) { /* (an id of 0, written by hand, is never kept) */
      *sim = memo[slot].sim;
      return SQLITE_OK;
    }
    if (memo[slot].id == 0) break;
  }
  int rc = *qs ? SQLITE_OK : hr_stmt(t, HR_ST_QUESTION, qs);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_int64(*qs, 1, id);
  rc = sqlite3_step(*qs);
  const char *q = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(*qs, 0) : NULL;
  const float *v = q ? hr_logged_vector(t->conn, q, sqlite3_column_bytes(*qs, 0)) : NULL;
  *sim = v ? hr_dot(v, qv) : -1.0;
  sqlite3_reset(*qs);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return rc;
  if (memo[slot].id == 0) memo[slot].id = id, memo[slot].sim = *sim; /* (else full: not kept) */
  return SQLITE_OK;
}

static int hr_context(hr_vtab *t, hr_cursor *c, const char *query) {
  for (int i = 0; i < c->n; i++) c->rows[i].ctx = 1.0, c->rows[i].ctx_n = 0.0;
  float qv[HM_EMBED_DIM];
  if (!(c->cfg.w_context > 0) || c->n == 0 || !hr_question_vector(c, query, qv))
    return SQLITE_OK;
  sqlite3_str *js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  for (int i = 0; i < c->n; i++) sqlite3_str_appendf(js, i ? ",%lld" : "%lld", c->rows[i].seq);
  sqlite3_str_appendchar(js, 1, ']');
  char *seqs = sqlite3_str_finish(js);
  if (!seqs) return SQLITE_NOMEM;
  sqlite3_stmt *st = NULL, *qs = NULL;
  int rc = hr_stmt(t, HR_ST_JUDGED, &st);
  if (rc != SQLITE_OK) { sqlite3_free(seqs); return hc_sqlfail(&t->call, rc); }
  sqlite3_bind_text(st, 1, seqs, -1, sqlite3_free);
  /* per candidate: weighted judgements used, ignored, and the best cosine
   * of a question it was judged used for; then each recall's cosine, once
   * (a recall judged several of the candidates) */
  double *ua = sqlite3_malloc64((sqlite3_uint64)c->n * 3 * sizeof *ua);
  if (!ua) { sqlite3_reset(st); return SQLITE_NOMEM; }
  double *ub = ua + c->n, *best = ub + c->n;
  for (int i = 0; i < 3 * c->n; i++) ua[i] = i < 2 * c->n ? 0 : -1;
  hr_sim *memo = NULL; /* made at the first judgement: a store without any pays nothing */
  i64 nmemo = 1;
  while (nmemo < 2 * (i64)c->n * HR_CTX_RECENT) nmemo *= 2;
  double lo = c->cfg.context_min_sim;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!memo) {
      if (!(memo = sqlite3_malloc64((sqlite3_uint64)nmemo * sizeof *memo))) {
        rc = SQLITE_NOMEM;
        break;
      }
      memset(memo, 0, (size_t)nmemo * sizeof *memo);
    }
    i64 i = sqlite3_column_int64(st, 0);
    int used = sqlite3_column_int(st, 1) != 0;
    double sim;
    rc = hr_recall_sim(t, memo, nmemo, sqlite3_column_int64(st, 2), qv, &qs, &sim);
    if (rc != SQLITE_OK) break;
    if (i < 0 || i >= c->n || !(sim > lo)) continue;
    double w = lo < 1 ? (sim - lo) / (1 - lo) : 1.0;
    if (used) ua[i] += w;
    else ub[i] += w;
    if (used && sim > best[i]) best[i] = sim;
  }
  sqlite3_free(memo);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) { sqlite3_free(ua); return hc_sqlfail(&t->call, rc); }
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    r->ctx_n = ua[i] + ub[i];
    if (!(best[i] > lo)) continue;
    char *nf = sqlite3_mprintf("%s " HM_CTX_FEATURE, r->features);
    if (!nf) { sqlite3_free(ua); return SQLITE_NOMEM; }
    sqlite3_free(r->features);
    r->features = nf;
  }
  /* p: the base rate of use, as hm_usefulness takes it from the link set */
  double p;
  if (!(hm_link_ratio(c->links, hm_links_count(c->links, c->linkslen), HM_CTX_FEATURE,
                      (int)sizeof HM_CTX_FEATURE - 1, &c->cfg, &p) > 1.0)) {
    sqlite3_free(ua); /* the store has not shown that such records predict use */
    return SQLITE_OK;
  }
  double k0 = c->cfg.context_prior; /* the memory's own record: its prior's weight */
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    if (!(r->ctx_n > 0)) continue; /* (the gate passed: p lies in (0, 1)) */
    double m = (p * k0 + ua[i]) / (k0 + r->ctx_n);
    double se = sqrt(m * (1.0 - m) / (k0 + r->ctx_n + 1.0));
    /* a boost only: a memory shown and ignored for similar questions is not
     * pushed down (in LoCoMo the penalty cost more than the boost gained:
     * bench/RESULTS.md 13.4) */
    double g = p;
    if (m - c->cfg.context_z * se > p) g = m - c->cfg.context_z * se;
    double f = pow(g / p, c->cfg.w_context);
    double cap = c->cfg.max_lift;
    r->ctx = f > cap ? cap : f < 1 / cap ? 1 / cap : f;
  }
  sqlite3_free(ua);
  return SQLITE_OK;
}

/* The seed of a recall's exploration, from its inputs: the question, the
 * namespace, now and how many recalls the namespace had logged before it (so
 * that asking again explores again; its own count, so that another tenant's
 * recalls never change its draws), mixed with splitmix64.  Never the
 * clock or rand(): the same inputs draw the same samples. */
static u64 hr_seed(const char *query, const char *ns, double now, i64 logged) {
  u64 bits, s = 0;
  memcpy(&bits, &now, sizeof bits);
  const u64 part[4] = {hm_fnv64(query, strlen(query)), hm_fnv64(ns, strlen(ns)), bits,
                       (u64)logged};
  for (int i = 0; i < 4; i++) {
    s ^= part[i];
    s = hm_splitmix64(&s);
  }
  return s;
}

/* Exploration (config explore > 0, tracked recalls only): each candidate's
 * factor on its score (hm_explore: its usefulness with every link's
 * posterior sampled), into r->xf; 1 everywhere otherwise, so an untracked
 * recall ranks exactly as it would with explore 0. */
static int hr_explore(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  for (int i = 0; i < c->n; i++) c->rows[i].xf = 1.0;
  if (!(c->cfg.explore > 0) || !a->tracked || !(c->cfg.w_usefulness > 0)) return SQLITE_OK;
  sqlite3_stmt *st = NULL;
  int rc = hr_stmt(t, HR_ST_LOGGED, &st);
  if (rc != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, a->ns, -1, SQLITE_TRANSIENT);
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
  i64 logged = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  /* the factors, the ages, then hm_explore's room (2n), and the features */
  double *buf = sqlite3_malloc64((sqlite3_uint64)c->n * (4 * sizeof(double) + sizeof(char *)));
  if (!buf) return SQLITE_NOMEM;
  double *xf = buf, *age = buf + c->n, *work = age + c->n;
  const char **feats = (const char **)(void *)(work + 2 * c->n);
  for (int i = 0; i < c->n; i++) {
    age[i] = c->rows[i].age_days;
    feats[i] = c->rows[i].features;
  }
  char err[HM_ERRLEN];
  int bad;
  rc = hm_explore(c->n, feats, age, c->qtype, c->links, c->linkslen, &c->cfg,
                  hr_seed(a->query, a->ns, a->now, logged), xf, work, &bad, err, sizeof err);
  if (rc == HM_OK)
    for (int i = 0; i < c->n; i++) c->rows[i].xf = xf[i];
  sqlite3_free(buf);
  if (rc != HM_OK) {
    return hc_fail(&t->call, SQLITE_CORRUPT, "a memory's stored values are damaged (%s)", err);
  }
  return SQLITE_OK;
}

/* Each candidate's relevance into rel[c->n]: BM25 over the best candidate's,
 * blended with the cosine (over the best cosine) in hybrid recall; each
 * row's parts into its lexical and cosn. */
static void hr_relevance(hr_cursor *c, double *rel) {
  double best = 0, top = 0;
  for (int i = 0; i < c->n; i++) {
    if (i == 0 || c->rows[i].rank < best) best = c->rows[i].rank;
    if (i == 0 || c->rows[i].cos > top) top = c->rows[i].cos;
  }
  if (c->scale < best) best = c->scale; /* across namespaces: the best among them */
  double a = c->cfg.lexical_weight;
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    r->lexical = best < 0 ? r->rank / best : 1.0;
    if (c->hybrid) {
      if (!r->has_rank) r->lexical = 0.0;
      r->cosn = top > 0 ? (r->cos > 0 ? r->cos : 0.0) / top : 0.0;
      rel[i] = a * r->lexical + (1 - a) * r->cosn;
    } else {
      rel[i] = r->lexical;
    }
  }
}

static int hr_place_factors(hr_cursor *c, const double *rel);

/* Each candidate's relevance and score, the rows in score order, k cut to
 * their number. */
static int hr_score(hr_vtab *t, hr_cursor *c) {
  char err[HM_ERRLEN];
  int rc;
  double *rel = sqlite3_malloc64((sqlite3_uint64)c->n * (3 * sizeof(double) + sizeof(int) +
                                                          sizeof(char *)));
  if (!rel) return SQLITE_NOMEM;
  double *age = rel + c->n, *imp = age + c->n;
  /* the pointers before the ints, so that each array is aligned for its type */
  const char **feats = (const char **)(void *)(imp + c->n);
  int *sup = (int *)(void *)(feats + c->n);
  hr_relevance(c, rel);
  /* the thread's and the time window's factors */
  if ((rc = hr_place_factors(c, rel)) != SQLITE_OK) { sqlite3_free(rel); return rc; }
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    age[i] = r->age_days;
    imp[i] = r->importance;
    sup[i] = r->superseded;
    feats[i] = r->features;
  }
  double *out = sqlite3_malloc64((sqlite3_uint64)c->n * HM_SCORE_COLUMNS * sizeof(double));
  if (!out) { sqlite3_free(rel); return SQLITE_NOMEM; }
  int bad = 0;
  rc = hm_score_batch(c->n, rel, age, imp, sup, feats, c->qtype, c->links, c->linkslen,
                      &c->cfg, out, &bad, err, sizeof err);
  sqlite3_free(rel);
  if (rc != HM_OK) {
    sqlite3_free(out);
    return hc_fail(&t->call, SQLITE_CORRUPT, "a memory's stored values are damaged (%s)", err);
  }
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    memcpy(r->f, out + (size_t)i * HM_SCORE_COLUMNS, sizeof r->f);
    /* the learned factors on the score, together within max_lift (hm_learned):
     * usefulness's lift, contextual utility's, exploration's; the place's
     * factors (a thread's neighbour, the question's window of time: place.c)
     * are the day-one ones, beside relevance, never bounded */
    r->f[7] = hm_learned(r->f[7], r->ctx, r->xf, &c->cfg);
    r->f[6] *= r->thr * r->tf;
    r->f[5] = r->f[6] * r->f[7];
    r->f[6] *= r->ctx; /* the score without usefulness, as tune replays it */
  }
  sqlite3_free(out);
  qsort(c->rows, (size_t)c->n, sizeof *c->rows, hr_cmp);
  if (c->k > c->n) c->k = c->n;
  return SQLITE_OK;
}

/* What the top k show: their rows of memories, kept as values. */
static int hr_show(hr_vtab *t, hr_cursor *c) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = hr_stmt(t, HR_ST_SHOW, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  for (int i = 0; i < c->k; i++) {
    sqlite3_bind_int64(st, 1, c->rows[i].seq);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) return hc_sqlfail(&t->call, rc == SQLITE_DONE ? SQLITE_ERROR : rc);
    for (int j = 0; j < HR_SHOWN; j++) {
      c->rows[i].shown[j] = sqlite3_value_dup(sqlite3_column_value(st, j));
      if (!c->rows[i].shown[j]) { sqlite3_reset(st); return SQLITE_NOMEM; }
    }
    sqlite3_reset(st);
  }
  return SQLITE_OK;
}

static int hr_run(hr_vtab *t, hr_cursor *c, const hr_args *a);
static int hr_run_across(hr_vtab *t, hr_cursor *c, const hr_args *a);
/* place.c: each candidate's place in its thread and in time, the neighbours
 * of the best brought in (after the candidates are read) */
static int hr_place(hr_vtab *t, hr_cursor *c, const hr_args *a);
static void hr_place_input(const hr_cursor *c, const hr_row *r, hm_input *in);

static int hr_filter(sqlite3_vtab_cursor *cur, int idxNum, const char *idxStr, int argc,
                     sqlite3_value **argv) {
  (void)idxStr;
  HR_CURSOR_API(cur);
  hr_cursor *c = (hr_cursor *)cur;
  hr_vtab *t = (hr_vtab *)cur->pVtab;
  hr_clear(c);
  sqlite3_free(t->call.err);
  t->call = (hc_ctx){.db = t->db, .conn = t->conn};
  char *why = NULL;
  if (hs_check_store(t->db, t->conn, &why) != SQLITE_OK) {
    hc_fail(&t->call, SQLITE_ERROR, "%s", why ? why : "out of memory");
    sqlite3_free(why);
    return hc_vtab_fail(&t->base, &t->call, "heap_recall", SQLITE_ERROR);
  }
  hr_args a = {0};
  int rc = hr_read_args(t, c, idxNum, argc, argv, &a);
  if (rc == SQLITE_OK) rc = a.spaces ? hr_run_across(t, c, &a) : hr_run(t, c, &a);
  sqlite3_free(a.kinds);
  sqlite3_free(a.query_copy);
  return rc == SQLITE_OK ? SQLITE_OK : hc_vtab_fail(&t->base, &t->call, "heap_recall", rc);
}

/* One recall's candidates, read and placed (hr_score then ranks them):
 * SQLITE_OK with c->n 0 when there are none. */
static int hr_gather(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  int rc;
  const char *query = a->query, *ns = a->ns;
  c->qtype = hm_qtype(query);
  if (!c->space && !(c->space = sqlite3_mprintf("%s", ns))) return SQLITE_NOMEM;
  char match[HM_MATCH_LEN];
  int nterms = hm_match(query, ns, match, sizeof match);
  int blank = 1;
  for (const char *p = query; *p; p++)
    if (!isspace((unsigned char)*p)) blank = 0;
  hr_vstate vs = {0};
  c->hybrid = 0;
  if (c->cfg.lexical_weight < 1 && !blank && (rc = hr_vectors(t, c, a, &vs)) != SQLITE_OK)
    return rc;
  if (nterms <= 0 && !c->hybrid) return SQLITE_OK; /* nothing searchable: no rows */
  if ((rc = hr_read_links(t, c, ns)) != SQLITE_OK) return rc;
  if ((rc = hr_read_candidates(t, c, a, &vs)) != SQLITE_OK) return rc;
  if (c->n == 0) return SQLITE_OK;
  if ((rc = hr_place(t, c, a)) != SQLITE_OK) return rc; /* threads and time: place.c */
  if ((rc = hr_context(t, c, query)) != SQLITE_OK) return rc;
  return hr_explore(t, c, a);
}

/* One recall, its arguments read: the candidates, scored, shown, logged. */
static int hr_run(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  int rc;
  if ((rc = hr_gather(t, c, a)) != SQLITE_OK || c->n == 0) return rc;
  if ((rc = hr_score(t, c)) != SQLITE_OK) return rc;
  if ((rc = hr_show(t, c)) != SQLITE_OK) return rc;
  if (a->track) return hr_log(t, c, a->query, a->ns, a->now);
  return SQLITE_OK;
}

/* Whether row j of namespace cursor x ranks after row k of y in a recall
 * across namespaces: by score, then namespace, then its rank there. */
static int hr_after(const hr_cursor *x, int j, const hr_cursor *y, int k) {
  double a = x->rows[j].f[5], b = y->rows[k].f[5];
  if (a != b) return a < b;
  int by = strcmp(x->space, y->space);
  return by ? by > 0 : j > k;
}

/* A recall across namespaces (a->spaces): each namespace's candidates, all
 * on one scale (the lexical part of relevance is BM25 over the best BM25
 * among them, as hr_relevance takes c->scale), scored, the top k of all of
 * them picked, and each namespace's part shown and, tracked, logged as a
 * recall of that namespace. */
static int hr_run_across(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  int rc;
  if (!(c->sub = sqlite3_malloc64((sqlite3_uint64)a->nspaces * sizeof *c->sub)))
    return SQLITE_NOMEM;
  memset(c->sub, 0, (size_t)a->nspaces * sizeof *c->sub);
  sqlite3_stmt *st = NULL;
  if ((rc = hr_stmt(t, HR_ST_SPACE_EACH, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
  sqlite3_bind_text(st, 1, a->spaces, -1, SQLITE_TRANSIENT);
  while (c->nsub < a->nspaces && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    hr_cursor *x = sqlite3_malloc64(sizeof *x);
    if (!x) { sqlite3_reset(st); return SQLITE_NOMEM; }
    memset(x, 0, sizeof *x);
    c->sub[c->nsub++] = x;
    x->cfg = c->cfg;
    x->k = c->k;
    if (!(x->space = sqlite3_mprintf("%s", sqlite3_column_text(st, 0)))) {
      sqlite3_reset(st);
      return SQLITE_NOMEM;
    }
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return hc_sqlfail(&t->call, rc);
  double best = 0; /* the best BM25 (lowest rank) among all the namespaces' candidates */
  for (int i = 0; i < c->nsub; i++) {
    hr_cursor *x = c->sub[i];
    hr_args one = *a;
    one.ns = x->space;
    if ((rc = hr_gather(t, x, &one)) != SQLITE_OK) return rc;
    c->qtype = x->qtype;
    for (int j = 0; j < x->n; j++)
      if (x->rows[j].has_rank && x->rows[j].rank < best) best = x->rows[j].rank;
  }
  int total = 0;
  for (int i = 0; i < c->nsub; i++) {
    hr_cursor *x = c->sub[i];
    x->scale = best;
    if (!x->n) x->k = 0;
    else if ((rc = hr_score(t, x)) != SQLITE_OK) return rc; /* its own top k, best first */
    total += x->k;
  }
  /* the top k of all: each namespace's rows are in score order, so a merge */
  int k = c->k < total ? c->k : total;
  if (!(c->pick = sqlite3_malloc64((sqlite3_uint64)(k ? k : 1) * 2 * sizeof(int))))
    return SQLITE_NOMEM;
  int *next = sqlite3_malloc64((sqlite3_uint64)c->nsub * sizeof(int));
  if (!next) return SQLITE_NOMEM;
  memset(next, 0, (size_t)c->nsub * sizeof(int));
  for (c->npick = 0; c->npick < k; c->npick++) {
    int w = -1;
    for (int i = 0; i < c->nsub; i++)
      if (next[i] < c->sub[i]->k &&
          (w < 0 || hr_after(c->sub[w], next[w], c->sub[i], next[i])))
        w = i;
    c->pick[2 * c->npick] = w;
    c->pick[2 * c->npick + 1] = next[w]++;
  }
  for (int i = 0; i < c->nsub; i++) {
    hr_cursor *x = c->sub[i];
    x->k = next[i]; /* what the top k show of it */
    if (!x->k) continue;
    if ((rc = hr_show(t, x)) != SQLITE_OK) break;
    if (a->track && (rc = hr_log(t, x, a->query, x->space, a->now)) != SQLITE_OK) break;
  }
  sqlite3_free(next);
  return rc;
}

static int hr_next(sqlite3_vtab_cursor *cur) {
  ((hr_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int hr_eof(sqlite3_vtab_cursor *cur) {
  hr_cursor *c = (hr_cursor *)cur;
  if (c->sub) return c->i >= c->npick;
  return c->i >= c->k || c->i >= c->n; /* k is cut to n once the rows are scored */
}

/* Column col of row j of namespace cursor c, ranked rank: links only on
 * the namespace's first row when first is 0 (a recall across namespaces
 * gives each namespace's link set once). */
static int hr_value(hr_cursor *c, int j, int rank, int first, sqlite3_context *ctx, int col) {
  hr_row *r = &c->rows[j];
  switch (col) {
  case HR_RANK: sqlite3_result_int(ctx, rank); break;
  case HR_NAMESPACE: sqlite3_result_text(ctx, c->space, -1, SQLITE_TRANSIENT); break;
  case HR_ID: sqlite3_result_value(ctx, r->shown[0]); break;
  case HR_TEXT: sqlite3_result_value(ctx, r->shown[1]); break;
  case HR_KIND: sqlite3_result_value(ctx, r->shown[2]); break;
  case HR_SOURCE: sqlite3_result_value(ctx, r->shown[3]); break;
  case HR_KEY: sqlite3_result_value(ctx, r->shown[4]); break;
  case HR_CREATED_AT: sqlite3_result_value(ctx, r->shown[5]); break;
  case HR_LAST_USED_AT: sqlite3_result_value(ctx, r->shown[6]); break;
  case HR_METADATA: sqlite3_result_value(ctx, r->shown[7]); break;
  case HR_SCORE: sqlite3_result_double(ctx, r->f[5]); break;
  case HR_RELEVANCE: sqlite3_result_double(ctx, r->f[0]); break;
  case HR_RECENCY: sqlite3_result_double(ctx, r->f[1]); break;
  case HR_IMPORTANCE: sqlite3_result_double(ctx, r->f[2]); break;
  case HR_USEFULNESS: sqlite3_result_double(ctx, r->f[3]); break;
  case HR_RULES: sqlite3_result_double(ctx, r->f[4]); break;
  case HR_REST: sqlite3_result_double(ctx, r->f[6]); break;
  case HR_BM25: sqlite3_result_double(ctx, -r->rank); break;
  case HR_AGE_DAYS: sqlite3_result_double(ctx, r->age_days); break;
  case HR_SUPERSEDED: sqlite3_result_int(ctx, r->superseded != 0); break;
  case HR_FEATURES: sqlite3_result_text(ctx, r->features, -1, SQLITE_TRANSIENT); break;
  case HR_LEXICAL:
    if (c->hybrid) sqlite3_result_double(ctx, r->lexical);
    break;
  case HR_COSINE:
    if (c->hybrid) sqlite3_result_double(ctx, r->cosn);
    break;
  case HR_QTYPE: sqlite3_result_text(ctx, c->qtype, -1, SQLITE_STATIC); break;
  case HR_LINKS:
    if (first || j == 0) sqlite3_result_blob(ctx, c->links, c->linkslen, SQLITE_TRANSIENT);
    break;
  case HR_CONTEXT: sqlite3_result_double(ctx, r->ctx); break;
  case HR_CONTEXT_N: sqlite3_result_double(ctx, r->ctx_n); break;
  case HR_EXPLORE: sqlite3_result_double(ctx, r->xf); break;
  case HR_THREAD: sqlite3_result_value(ctx, r->shown[8]); break;
  case HR_TURN: sqlite3_result_value(ctx, r->shown[9]); break;
  case HR_THREAD_LIFT: sqlite3_result_double(ctx, r->thr); break;
  case HR_THREAD_FROM:
    if (r->from) sqlite3_result_text(ctx, r->from, -1, SQLITE_TRANSIENT);
    break;
  case HR_THREAD_OFFSET:
    if (r->from) sqlite3_result_int64(ctx, r->from_off);
    break;
  case HR_TIME_LIFT: sqlite3_result_double(ctx, r->tf); break;
  case HR_TIME_WINDOW:
    if (c->window) sqlite3_result_text(ctx, c->wtext, -1, SQLITE_TRANSIENT);
    break;
  case HR_LIFT: sqlite3_result_double(ctx, r->f[7]); break;
  case HR_RECALL_ID:
    if (c->recall_id) sqlite3_result_int64(ctx, c->recall_id);
    break;
  case HR_EXPLAIN: {
    hm_input in = {.relevance = r->f[0], .age_days = r->age_days, .importance = r->f[2],
                   .superseded = r->superseded, .features = r->features,
                   .bm25_part = c->hybrid ? r->lexical : NAN,
                   .cos_part = c->hybrid ? r->cosn : NAN, .context = r->ctx,
                   .context_n = r->ctx_n, .explore = r->xf};
    hr_place_input(c, r, &in); /* the thread's and the time's factors, and their words */
    char line[HM_EXPLAIN_LEN], err[HM_ERRLEN];
    if (hm_explain(&in, c->qtype, c->links, c->linkslen, &c->cfg, line, sizeof line, err,
                   sizeof err) != HM_OK) {
      sqlite3_result_error(ctx, err, -1);
      return SQLITE_ERROR;
    }
    sqlite3_result_text(ctx, line, -1, SQLITE_TRANSIENT);
    break;
  }
  default: break; /* the other arguments read back as NULL */
  }
  return SQLITE_OK;
}

static int hr_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  HR_CURSOR_API(cur);
  hr_cursor *c = (hr_cursor *)cur;
  if (!c->sub) return hr_value(c, c->i, c->i + 1, 1, ctx, col);
  const int *p = &c->pick[2 * c->i];
  return hr_value(c->sub[p[0]], p[1], c->i + 1, 0, ctx, col);
}

static int hr_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
  *rowid = ((hr_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static sqlite3_module hr_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE */
    .xConnect = hr_connect,
    .xBestIndex = hr_best_index,
    .xDisconnect = hr_disconnect,
    .xDestroy = hr_disconnect,
    .xOpen = hr_open,
    .xClose = hr_close,
    .xFilter = hr_filter,
    .xNext = hr_next,
    .xEof = hr_eof,
    .xColumn = hr_column,
    .xRowid = hr_rowid,
};

#pragma endregion
