/*
 * store.c: a store from SQL alone: making one, checking a file is one, adding
 * and forgetting memories.
 * Relies on: call.c (hm_conn, hc_ctx, hc_fail, hc_prepare,
 * hc_keep_statements, ...), recall.c (hr_now), feedback.c (hf_ids,
 * hf_namespace, hf_pylist), sqlfuncs.c (hq_is_number);
 * heap_ns_tag and heap_features (sqlfuncs.c) and heap_ntokens (bm25.c) run
 * inside its insert.
 *
 *   SELECT heap_init();                        -- an empty database becomes a store
 *   SELECT heap_add(text, namespace [, kind [, source [, id [, created_at
 *                   [, importance [, key [, metadata [, copy
 *                   [, thread [, turn]]]]]]]]]]);                          -- its id
 *     (without an id or a thread, the same text and key in the namespace is
 *     the memory that has them: its id, nothing written, unless copy is 1;
 *     thread names the conversation the memory is a turn of, turn its place
 *     there: the thread's next turn when not given)
 *   SELECT heap_forget(ids_json);              -- the number of memories erased
 *   SELECT heap_forget_namespace(namespace);
 *
 * The schema is heapmem/db/schema.py's, written into csrc/schema.h by
 * schema.c_header().  Every heap_* entry point that reads or writes the
 * store's tables (heap_recall, heap_feedback, heap_answer, heap_add,
 * heap_forget) first compares the file's schema with it, object by object,
 * as Python's open() does (once per change of the file's schema cookie): a
 * file whose schema heapmem did not make is refused in one sentence, before
 * any of its triggers could run.
 */

#pragma region a store from SQL

/* text with its runs of white space made one space, as schema._norm does */
static char *hs_norm(const char *s) {
  size_t n = strlen(s);
  char *out = sqlite3_malloc64(n + 1);
  if (!out) return NULL;
  size_t j = 0;
  int space = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v') {
      space = j > 0;
      continue;
    }
    if (space) out[j++] = ' ';
    space = 0;
    out[j++] = (char)ch;
  }
  out[j] = 0;
  return out;
}

static int hs_is_fts_shadow(const char *name) {
  static const char *const shadows[] = {"memories_fts_data", "memories_fts_idx",
                                        "memories_fts_docsize", "memories_fts_config",
                                        "memories_fts_content"};
  for (size_t i = 0; i < sizeof shadows / sizeof shadows[0]; i++)
    if (!strcmp(name, shadows[i])) return 1;
  return 0;
}

#define HS_NOBJ ((int)(sizeof hm_schema_objects / sizeof hm_schema_objects[0]))

/* Whether the database is a heapmem store of this schema, exactly: 0 yes, else
 * the error set in x (one sentence naming what is wrong).  Checked again only
 * when the file's schema cookie moves. */
static int hs_check(hc_ctx *x) {
  sqlite3 *db = x->db;
  hm_conn *conn = x->conn;
  sqlite3_stmt *st = NULL;
  /* every recall and feedback asks this: a statement the connection keeps */
  int rc = hc_prepare(x, "SELECT (SELECT schema_version FROM pragma_schema_version), "
                         "(SELECT user_version FROM pragma_user_version)", &st);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_step(st);
  i64 cookie = sqlite3_column_int64(st, 0), version = sqlite3_column_int64(st, 1);
  hc_done(x, st);
  if (rc != SQLITE_ROW) return hc_sqlfail(x, rc);
  if (version != HM_SCHEMA_VERSION) {
    if (version == 0)
      return hc_fail(x, SQLITE_ERROR, "this database is not a heapmem store (run SELECT "
                                      "heap_init() in an empty database to make one)");
    if (version < HM_SCHEMA_VERSION)
      return hc_fail(x, SQLITE_ERROR, "this store has schema %lld; open it once with heapmem "
                                      "(Python) to upgrade it to %d", (long long)version,
                     HM_SCHEMA_VERSION);
    return hc_fail(x, SQLITE_ERROR, "this store has schema %lld, newer than this library's "
                                    "(%d); load a newer heapmem", (long long)version,
                   HM_SCHEMA_VERSION);
  }
  if (conn && conn->checked && conn->cookie == cookie) return SQLITE_OK;
  int seen[HS_NOBJ];
  memset(seen, 0, sizeof seen);
  rc = sqlite3_prepare_v2(db, "SELECT type, name, tbl_name, sql FROM sqlite_schema", -1, &st,
                          NULL);
  if (rc != SQLITE_OK) return hc_sqlfail(x, rc);
  char *bad = NULL;
  while (!bad && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    const char *n = (const char *)sqlite3_column_text(st, 1);
    const char *tbl = (const char *)sqlite3_column_text(st, 2);
    const char *sql = (const char *)sqlite3_column_text(st, 3);
    if (!t || !n || !tbl) continue;
    if (!sql) continue; /* an automatic index */
    if (!strcmp(t, "table") && (hs_is_fts_shadow(n) || !strcmp(n, "sqlite_stat1") ||
                                !strcmp(n, "sqlite_stat4")))
      continue;
    char *mine = hs_norm(sql);
    if (!mine) { sqlite3_finalize(st); return hc_fail(x, SQLITE_NOMEM, "out of memory"); }
    int found = -1;
    for (int i = 0; i < HS_NOBJ && found < 0; i++)
      if (!strcmp(hm_schema_objects[i].type, t) && !strcmp(hm_schema_objects[i].name, n))
        found = i;
    if (found < 0) {
      bad = sqlite3_mprintf("%s '%s' (on '%s') is not part of heapmem's schema %d", t, n, tbl,
                            HM_SCHEMA_VERSION);
    } else {
      char *want = hs_norm(hm_schema_objects[found].sql);
      if (!want) { sqlite3_free(mine); sqlite3_finalize(st); return hc_fail(x, SQLITE_NOMEM, "out of memory"); }
      if (strcmp(want, mine) || strcmp(hm_schema_objects[found].tbl, tbl))
        bad = sqlite3_mprintf("%s '%s' differs from heapmem's schema %d", t, n,
                              HM_SCHEMA_VERSION);
      seen[found] = 1;
      sqlite3_free(want);
    }
    sqlite3_free(mine);
  }
  sqlite3_finalize(st);
  if (!bad && rc != SQLITE_DONE) return hc_sqlfail(x, rc);
  for (int i = 0; i < HS_NOBJ && !bad; i++)
    if (!seen[i])
      bad = sqlite3_mprintf("%s '%s' of heapmem's schema %d is missing",
                            hm_schema_objects[i].type, hm_schema_objects[i].name,
                            HM_SCHEMA_VERSION);
  if (bad) {
    rc = hc_fail(x, SQLITE_ERROR, "this file holds schema objects heapmem did not create (%s); "
                                  "it is refused, and nothing in it ran", bad);
    sqlite3_free(bad);
    return rc;
  }
  if (conn) {
    conn->checked = 1;
    conn->cookie = cookie;
  }
  return SQLITE_OK;
}

static int hs_check_store(sqlite3 *db, hm_conn *conn, char **err) {
  hc_ctx x = {.db = db, .conn = conn};
  int rc = hs_check(&x);
  *err = x.err;
  return rc;
}

/* heap_init([embed]): make the empty database a heapmem store (its whole
 * schema, the file's meta rows), or say so when it is one already.  Its
 * vectors come from the library's own embedder unless embed is 0 (lexical
 * recall only; heapmem.open(embedder=None) makes a store so). */
static void heap_init(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  int embed = 1;
  if (argc > 0) {
    if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER ||
        (sqlite3_value_int64(argv[0]) != 0 && sqlite3_value_int64(argv[0]) != 1)) {
      sqlite3_result_error(ctx, "heap_init: embed must be 1 (vectors from the library's own "
                                "embedder, the default) or 0 (lexical recall only)", -1);
      return;
    }
    embed = sqlite3_value_int(argv[0]);
  }
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  sqlite3 *db = x.db;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM sqlite_schema), (SELECT "
                                  "user_version FROM pragma_user_version)", -1, &st, NULL);
  i64 objects = 0, version = 0;
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    objects = sqlite3_column_int64(st, 0);
    version = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  if (objects || version) {
    if (hs_check(&x) == SQLITE_OK) {
      sqlite3_result_text(ctx, sqlite3_mprintf("a heapmem store already (schema %d)",
                                               HM_SCHEMA_VERSION), -1, sqlite3_free);
    } else {
      /* x.err says what the database is (a store of another schema) or, for
       * any other database, that it is no store: one sentence either way */
      char *m = version ? sqlite3_mprintf("heap_init: %s", x.err)
                        : sqlite3_mprintf("heap_init: this database already holds tables of "
                                          "its own; heap_init makes a store only in an empty "
                                          "database");
      sqlite3_result_error(ctx, m, -1);
      sqlite3_free(m);
    }
    sqlite3_free(x.err);
    return;
  }
  rc = sqlite3_exec(db, "SAVEPOINT heap_init", NULL, NULL, NULL);
  for (int i = 0; i < HS_NOBJ && rc == SQLITE_OK; i++)
    rc = sqlite3_exec(db, hm_schema_objects[i].sql, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, "INSERT INTO memories_fts(memories_fts, rank) VALUES('rank', "
                          "'bm25(0.0, 1.0)')", NULL, NULL, NULL);
  /* forget erases in place (FTS5's secure-delete) where this SQLite has it;
   * an older one keeps the store portable and merges the index instead */
  if (rc == SQLITE_OK && sqlite3_libversion_number() >= 3042000)
    rc = sqlite3_exec(db, "INSERT INTO memories_fts(memories_fts, rank) VALUES("
                          "'secure-delete', 1)", NULL, NULL, NULL);
  if (rc == SQLITE_OK) {
    char *meta = sqlite3_mprintf(
        "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_FORMAT "', 'heapmem'), ('"
        HM_META_CREATED_WITH "', %Q), ('" HM_META_POOL "', %Q); PRAGMA user_version = %d",
        HEAPMEM_VERSION, HM_POOL_DEFAULTS, HM_SCHEMA_VERSION);
    /* hybrid from the start, as heapmem.open(): the library's own embedder */
    if (meta && embed && he_get())
      meta = sqlite3_mprintf("%z; INSERT INTO heapmem_meta(key, value) VALUES ('"
                             HM_META_EMBEDDER "', '" HM_BUILTIN_EMBEDDER "'), ('"
                             HM_META_EMBEDDING_DIM "', '%d')", meta, HM_EMBED_DIM);
    rc = meta ? sqlite3_exec(db, meta, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(meta);
  }
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "RELEASE heap_init", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    char *m = sqlite3_mprintf("heap_init: %s", sqlite3_errmsg(db));
    sqlite3_exec(db, "ROLLBACK TO heap_init", NULL, NULL, NULL);
    sqlite3_exec(db, "RELEASE heap_init", NULL, NULL, NULL);
    sqlite3_result_error(ctx, m, -1);
    sqlite3_free(m);
    return;
  }
  char *ok = sqlite3_mprintf("a new heapmem store (schema %d)", HM_SCHEMA_VERSION);
  sqlite3_result_text(ctx, ok, -1, sqlite3_free);
}

/* -- adding ------------------------------------------------------------------------- */

/* The importance a kind gives by default (heapmem.h's HM_KINDS; another kind 1). */
static double hs_kind_importance(const char *kind) {
  static const struct { const char *kind; double importance; } kinds[] = {
#define HM_KIND_ROW(k, importance) {#k, importance},
      HM_KINDS(HM_KIND_ROW)
#undef HM_KIND_ROW
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(kind, kinds[i].kind)) return kinds[i].importance;
  return 1.0;
}

/* Optional metadata (a value of heap_add): a JSON object as text, at most
 * MAX_METADATA_BYTES, nesting at most MAX_JSON_DEPTH deep. */
static int hs_metadata(hc_ctx *x, sqlite3_value *v, const char **out) {
  char why[HM_ERRLEN];
  *out = NULL;
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(v) != SQLITE_TEXT)
    return hc_fail(x, SQLITE_ERROR, "metadata must be a JSON object as text");
  if (hq_arg_text(v, "metadata", 0, hm_limits.MAX_METADATA_BYTES, out, why, sizeof why))
    return hc_fail(x, SQLITE_ERROR, "%s", why);
  if (hm_json_depth(*out, sqlite3_value_bytes(v)) > hm_limits.MAX_JSON_DEPTH)
    return hc_fail(x, SQLITE_ERROR, "metadata nests deeper than %.0f levels",
                   hm_limits.MAX_JSON_DEPTH);
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT json_valid(?1) AND json_type(?1) = 'object'", &st);
  if (rc) return rc;
  sqlite3_bind_value(st, 1, v);
  int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0);
  hc_done(x, st);
  return ok ? SQLITE_OK : hc_fail(x, SQLITE_ERROR, "metadata must be a JSON object");
}

static const char hs_sql_last_seq[] =
    "SELECT max(coalesce((SELECT max(seq) FROM memories), 0), coalesce((SELECT CAST(value AS "
    "INTEGER) FROM heapmem_meta WHERE key = '" HM_META_LAST_SEQ "'), 0))";
static const char hs_sql_id_taken[] = "SELECT 1 FROM memories WHERE id = ?1";
/* ?1 namespace, ?2 text, ?3 key: the oldest memory with that text and key */
static const char hs_sql_same[] =
    "SELECT id FROM memories WHERE namespace = ?1 AND heap_text_hash(text) = heap_text_hash(?2) "
    "AND text = ?2 AND key IS ?3 ORDER BY seq LIMIT 1";
/* A memory's turn as SQL, from the SQL of its namespace, thread and turn as
 * given: the turn given, else (with a thread) one past the thread's last turn
 * so far (memories_thread: one seek), else NULL. */
#define HM_NEXT_TURN(NS, THREAD, TURN)                                                         \
  "coalesce(" TURN ", CASE WHEN " THREAD " IS NOT NULL THEN (SELECT coalesce(max(t.turn) + 1, " \
  "0) FROM memories AS t WHERE t.namespace = " NS " AND t.thread = " THREAD ") END)"
/* ?11 the namespace's tag (hm_ns_tag), ?12 the shape features (hm_features):
 * worked out in C from the values checked, as heap_ns_tag and heap_features
 * give them; ?13 thread, ?14 turn: a thread's memory without a turn is its
 * next turn (heapmem/db/sql.py's INSERT_MEMORY says the same) */
static const char hs_sql_insert[] =
    "INSERT INTO memories(seq, id, namespace, nstag, text, kind, source, key, importance, "
    "features, created_at, metadata, ntok, thread, turn) VALUES (?1, ?2, ?3, ?11, ?4, ?5, ?6, "
    "?7, ?8, ?12, ?9, ?10, heap_ntokens(?11) + heap_ntokens(?4), ?13, "
    HM_NEXT_TURN("?3", "?13", "?14") ")";

/* Whether a memory has id mid. */
static int hs_id_taken(hc_ctx *x, const char *mid, int *taken) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hs_sql_id_taken, &st);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, mid, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  *taken = rc == SQLITE_ROW;
  hc_done(x, st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* The new memory's row (hs_sql_insert's values after seq and id: ?3 ...),
 * inserted with seq and its id, into *out: id when given (refused when a
 * memory has it), else m<seq>, or the first of m<seq>-0, m<seq>-1, ... that
 * nobody has (as Python).  The id's UNIQUE constraint finds a taken one, so
 * a free id costs no lookup. */
typedef struct {
  const char *ns, *text, *kind, *source, *key, *meta, *thread;
  double importance, created;
  i64 turn; /* -1: the thread's next (or none, without a thread) */
  char tag[HM_NS_TAG_LEN], features[HM_FEATURES_LEN];
} hs_row;

#define HS_ROW_ARGS 12 /* hs_bind's parameters: hs_sql_insert's ?1 to ?12 */

/* Memory r's values bound into st as hs_sql_insert's ?1 to ?12 take them,
 * from parameter p on (p + k - 1 for ?k: hs_batch_sql's rows use the same
 * layout): its seq, its id mid, and its tag and features (worked out by the
 * caller, copied). */
static void hs_bind(sqlite3_stmt *st, int p, i64 seq, const char *mid, const hs_row *r,
                    const char *tag, const char *features) {
  sqlite3_bind_int64(st, p, seq);
  sqlite3_bind_text(st, p + 1, mid, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, p + 2, r->ns, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, p + 3, r->text, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, p + 4, r->kind, -1, SQLITE_STATIC);
  if (r->source) sqlite3_bind_text(st, p + 5, r->source, -1, SQLITE_STATIC);
  if (r->key) sqlite3_bind_text(st, p + 6, r->key, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, p + 7, r->importance);
  sqlite3_bind_double(st, p + 8, r->created);
  if (r->meta) sqlite3_bind_text(st, p + 9, r->meta, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, p + 10, tag, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, p + 11, features, -1, SQLITE_TRANSIENT);
}

/* Memory r inserted with seq (a new one) and id (NULL: m<seq>): *out its id
 * (sqlite3_malloc'd). */
static int hs_insert(hc_ctx *x, i64 seq, const char *id, hs_row *r, char **out) {
  if (hm_ns_tag(r->ns, r->tag, sizeof r->tag) < 0 ||
      hm_features(r->text, r->kind, r->source, r->features, sizeof r->features) != HM_OK)
    return hc_fail(x, SQLITE_ERROR, "namespace is longer than %d bytes", HM_MAX_NS_BYTES);
  char *mid = id ? sqlite3_mprintf("%s", id) : sqlite3_mprintf("m%lld", (long long)seq);
  *out = NULL;
  for (int n = 0;; n++) {
    sqlite3_stmt *st = NULL;
    int rc, taken = 0;
    if (!mid) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    if ((rc = hc_prepare(x, hs_sql_insert, &st))) { sqlite3_free(mid); return rc; }
    hs_bind(st, 1, seq, mid, r, r->tag, r->features);
    if (r->thread) sqlite3_bind_text(st, 13, r->thread, -1, SQLITE_STATIC);
    if (r->turn >= 0) sqlite3_bind_int64(st, 14, r->turn);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    }
    if (rc == SQLITE_DONE) {
      hc_done(x, st);
      *out = mid;
      return SQLITE_OK;
    }
    int unique = sqlite3_extended_errcode(x->db) == SQLITE_CONSTRAINT_UNIQUE;
    if (!unique) rc = hc_sqlfail(x, rc); /* its words, before the reset */
    hc_done(x, st);
    if (unique && !(rc = hs_id_taken(x, mid, &taken)) && !taken)
      rc = hc_fail(x, SQLITE_CONSTRAINT, "the memory breaks a uniqueness rule of the store");
    if (rc) {
      sqlite3_free(mid);
      return rc;
    }
    if (id) {
      rc = hc_fail(x, SQLITE_CONSTRAINT, "a memory with id '%s' already exists; it was not "
                                         "changed", id);
      sqlite3_free(mid);
      return rc;
    }
    sqlite3_free(mid); /* an automatic id some memory holds as its own: the next name */
    mid = sqlite3_mprintf("m%lld-%d", (long long)seq, n);
  }
}

/* The last seq given out (never one a forgotten memory had), into *last: read
 * from the file, so a number, and one that has a next (never 2^63 - 1). */
static int hs_last_seq(hc_ctx *x, i64 *last) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hs_sql_last_seq, &st);
  if (rc) return rc;
  rc = sqlite3_step(st);
  int type = sqlite3_column_type(st, 0);
  *last = sqlite3_column_int64(st, 0);
  hc_done(x, st);
  if (rc != SQLITE_ROW) return hc_sqlfail(x, rc);
  if (type != SQLITE_INTEGER || *last < 0 || *last >= INT64_MAX - 1)
    return hc_fail(x, SQLITE_CORRUPT, "the store's last memory number (%lld) is damaged or "
                                      "spent; nothing was added", (long long)*last);
  return SQLITE_OK;
}

/* vindex.c: what an add owes the namespace's vector index */
static int hx_maintain(hc_ctx *x, const char *ns, i64 seq);

/* A memory's place in a conversation (heap_add's thread and turn), checked:
 * thread a name or NULL, turn a whole number from 0 to HM_MAX_TURN or NULL
 * (*turn -1), and a turn only with a thread.  Returns 0, or the error set.
 * thread_v, turn_v: the arguments. */
static int hs_thread(hc_ctx *x, sqlite3_value *thread_v, sqlite3_value *turn_v,
                     const char **thread, i64 *turn) {
  int rc;
  if ((rc = hf_name(x, thread_v, "thread", 1, thread))) return rc;
  *turn = -1;
  if (!turn_v || sqlite3_value_type(turn_v) == SQLITE_NULL) return SQLITE_OK;
  double v = sqlite3_value_double(turn_v);
  if (!hq_is_number(turn_v) || !(v >= 0 && v <= HM_MAX_TURN) || v != floor(v))
    return hc_fail(x, SQLITE_ERROR, "turn must be a whole number from 0 to %lld (the memory's "
                                    "place in its thread)", (long long)HM_MAX_TURN);
  if (!*thread)
    return hc_fail(x, SQLITE_ERROR, "turn needs a thread: name the conversation the memory "
                                    "is a turn of");
  *turn = (i64)v;
  return SQLITE_OK;
}

/* heap_add's arguments (argv, argc of them) checked into r's values (the text
 * of argv's values: kept while they are), *id (NULL: none given) and *copy.
 * Returns 0, or the error set. */
static int hs_args(hc_ctx *x, int argc, sqlite3_value **argv, hs_row *r, const char **id,
                   int *copy) {
  int rc;
  sqlite3_value *a[12] = {0};
  for (int i = 0; i < argc && i < 12; i++) a[i] = argv[i];
  char why[HM_ERRLEN];
  r->kind = HM_DEFAULT_KIND, r->meta = NULL;
  if (!a[0] || sqlite3_value_type(a[0]) != SQLITE_TEXT)
    return hc_fail(x, SQLITE_ERROR, "text must be text: heap_add('Booked the flight', "
                                    "'user:maya')");
  if (hq_arg_text(a[0], "text", HM_ARG_NOTBLANK, hm_limits.MAX_TEXT_BYTES, &r->text, why,
                  sizeof why))
    return hc_fail(x, SQLITE_ERROR, "%s", why);
  if ((rc = hf_namespace(x, a[1], 1, &r->ns))) return rc;
  if (a[2] && sqlite3_value_type(a[2]) != SQLITE_NULL) {
    if ((rc = hf_name(x, a[2], "kind", 0, &r->kind))) return rc;
  }
  if ((rc = hf_name(x, a[3], "source", 1, &r->source))) return rc;
  if ((rc = hf_name(x, a[4], "id", 1, id))) return rc;
  if (a[5] && sqlite3_value_type(a[5]) != SQLITE_NULL) {
    r->created = sqlite3_value_double(a[5]);
    if (!hq_is_number(a[5]) ||
        !(r->created >= hm_limits.MIN_TIME && r->created <= hm_limits.MAX_TIME))
      return hc_fail(x, SQLITE_ERROR, "created_at must be unix seconds from %.0f to %.0f (1970 "
                                      "to the year 9999)", hm_limits.MIN_TIME, hm_limits.MAX_TIME);
  } else {
    r->created = hr_now(x->db);
  }
  r->importance = hs_kind_importance(r->kind);
  if (a[6] && sqlite3_value_type(a[6]) != SQLITE_NULL) {
    r->importance = sqlite3_value_double(a[6]);
    if (!hq_is_number(a[6]) ||
        !(r->importance > 0 && r->importance <= hm_limits.MAX_IMPORTANCE))
      return hc_fail(x, SQLITE_ERROR, "importance must be a number in (0, %g]",
                     hm_limits.MAX_IMPORTANCE);
  }
  if ((rc = hf_name(x, a[7], "key", 1, &r->key))) return rc;
  if ((rc = hs_metadata(x, a[8], &r->meta))) return rc;
  *copy = 0;
  if (a[9] && sqlite3_value_type(a[9]) != SQLITE_NULL) {
    if (sqlite3_value_type(a[9]) != SQLITE_INTEGER ||
        (sqlite3_value_int64(a[9]) != 0 && sqlite3_value_int64(a[9]) != 1))
      return hc_fail(x, SQLITE_ERROR, "copy must be 0 (the same text again is the memory "
                                      "that has it) or 1 (a second memory)");
    *copy = sqlite3_value_int(a[9]);
  }
  return hs_thread(x, a[10], a[11], &r->thread, &r->turn);
}

/* The oldest memory of r's namespace with r's text and key: its id into *same
 * (sqlite3_malloc'd), or NULL. */
static int hs_same(hc_ctx *x, const hs_row *r, char **same) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hs_sql_same, &st);
  *same = NULL;
  if (rc) return rc;
  sqlite3_bind_text(st, 1, r->ns, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, r->text, -1, SQLITE_STATIC);
  if (r->key) sqlite3_bind_text(st, 3, r->key, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && !(*same = sqlite3_mprintf("%s", sqlite3_column_text(st, 0))))
    rc = SQLITE_NOMEM;
  hc_done(x, st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* The next seq after *last: never one a forgotten memory had. */
static int hs_next_seq(hc_ctx *x, i64 last, i64 *seq) {
  if (last >= INT64_MAX - 1)
    return hc_fail(x, SQLITE_CORRUPT, "the store's last memory number (%lld) is damaged or "
                                      "spent; nothing was added", (long long)last);
  *seq = last + 1;
  return SQLITE_OK;
}

/* One heap_add: its arguments checked, the memory inserted with seq *last + 1
 * (*last: hs_last_seq's, then the seq given; a batch reads it once), or,
 * unless copy, the namespace's memory of the same text and key found; its id
 * into *id_out.  maintain: the namespace's vector index is kept too (a new
 * memory's partition split when the add grew it past twice the size, or the
 * index built when the namespace passed the threshold: vindex.c); a batch
 * does that once at its end. */
static int hs_add(hc_ctx *x, int argc, sqlite3_value **argv, int maintain, i64 *last,
                  char **id_out) {
  static __thread hs_row row; /* its tag and features are 4 KiB: not on the stack */
  const char *id = NULL;
  int rc, copy;
  i64 seq = 0;
  if ((rc = hs_args(x, argc, argv, &row, &id, &copy))) return rc;
  /* the same text (and key) in the namespace: that memory; never for a
   * thread's turn, which is its own utterance wherever its words repeat */
  if (!id && !copy && !row.thread) {
    char *same = NULL;
    if ((rc = hs_same(x, &row, &same))) return rc;
    if (same) {
      *id_out = same;
      return SQLITE_OK;
    }
  }
  if ((rc = hs_next_seq(x, *last, &seq))) return rc;
  char *mid = NULL;
  if ((rc = hs_insert(x, seq, id, &row, &mid))) return rc;
  *last = seq;
  if (maintain && (rc = hx_maintain(x, row.ns, seq))) { sqlite3_free(mid); return rc; }
  *id_out = mid;
  return SQLITE_OK;
}

/* -- forgetting --------------------------------------------------------------------- */

/* ?1 the ids forgotten (a JSON array): the recalls of their namespaces that
 * showed one of them (the list read once, as an index: linear in the
 * namespaces' recalls) */
#define HS_SHOWING                                                                             \
  "SELECT r.id FROM recalls AS r WHERE r.namespace IN (SELECT m.namespace FROM memories AS m " \
  "WHERE m.id IN (SELECT value FROM json_each(?1))) AND EXISTS (SELECT 1 FROM "                \
  "json_each(r.shown) AS s JOIN memories AS m ON m.id = s.value WHERE m.namespace = "          \
  "r.namespace AND s.value IN (SELECT value FROM json_each(?1)))"

/* ?1 the ids forgotten: a recall of their namespaces whose shown is not JSON */
static const char hs_sql_log_not_json[] =
    "SELECT 1 FROM recalls AS r WHERE r.namespace IN (SELECT m.namespace FROM memories AS m "
    "WHERE m.id IN (SELECT value FROM json_each(?1))) AND NOT json_valid(r.shown) LIMIT 1";

static int hs_forget(hc_ctx *x, sqlite3_value *ids_v, sqlite3_value *ns_v, i64 *erased) {
  sqlite3 *db = x->db;
  int rc;
  char **ids = NULL;
  int n = 0;
  const char *ns = NULL;
  if (ns_v) {
    if ((rc = hf_namespace(x, ns_v, 0, &ns))) return rc;
  } else {
    if ((n = hf_ids(x, ids_v, "ids", hm_limits.MAX_IDS, &ids)) < 0) return x->code;
    if (n == 0) return hc_fail(x, SQLITE_ERROR, "heap_forget needs the ids to erase, such as "
                                                "'[\"m3\"]'");
  }
  /* the highest seq and recall id, so that neither is given out again */
  rc = sqlite3_exec(db,
                    "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_LAST_SEQ "', "
                    "(SELECT coalesce(max(seq), 0) FROM memories)) ON CONFLICT(key) DO UPDATE "
                    "SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)); "
                    "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_LAST_RECALL "', "
                    "(SELECT coalesce(max(id), 0) FROM recalls)) ON CONFLICT(key) DO UPDATE "
                    "SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)); "
                    /* judged recalls may go: auto-tune's next feedback counts them again */
                    HM_AUTOTUNE_RECOUNT,
                    NULL, NULL, NULL);
  if (rc) goto fail;
  sqlite3_stmt *st = NULL;
  if (ns) {
    const char *steps[] = {
        "SELECT count(*) FROM memories WHERE namespace = ?1",
        "DELETE FROM memories WHERE namespace = ?1",
        "UPDATE events SET recall_id = NULL WHERE namespace = ?1",
        "DELETE FROM recalls WHERE namespace = ?1",
        /* its vector index (the centroids are means of its vectors) */
        "DELETE FROM vector_centroids WHERE namespace = ?1",
        "DELETE FROM vector_index WHERE namespace = ?1",
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !rc; i++) {
      if ((rc = hc_prepare(x, steps[i], &st))) goto done;
      sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
      if (i == 0) {
        if (sqlite3_step(st) == SQLITE_ROW) *erased = sqlite3_column_int64(st, 0);
        hc_done(x, st);
        if (*erased == 0) goto done; /* nothing to erase: 0 */
        continue;
      }
      rc = hc_exec(x, st);
      hc_done(x, st);
    }
  } else {
    /* every id must exist, or nothing is erased */
    if ((rc = hc_prepare(x, hs_sql_id_taken, &st))) goto done;
    char **missing = sqlite3_malloc64((sqlite3_uint64)n * sizeof(char *));
    int nm = 0;
    if (!missing) { hc_done(x, st); rc = hc_fail(x, SQLITE_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < n; i++) {
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) != SQLITE_ROW) missing[nm++] = ids[i];
    }
    hc_done(x, st);
    if (nm) {
      char *list = hf_pylist(missing, nm);
      rc = hc_fail(x, SQLITE_ERROR, "unknown memory ids %s; nothing was forgotten", list);
      sqlite3_free(list);
      sqlite3_free(missing);
      goto done;
    }
    sqlite3_free(missing);
    /* their namespaces' recalls are read as JSON below: a log that is not is damage */
    if ((rc = hc_prepare(x, hs_sql_log_not_json, &st))) goto done;
    sqlite3_bind_value(st, 1, ids_v);
    rc = sqlite3_step(st);
    rc = rc == SQLITE_ROW ? hc_damaged_json(x) : rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
    hc_done(x, st);
    if (rc) goto done;
    /* the recalls that showed them, with their events detached, then the
     * memories: three statements over the whole list */
    const char *steps[] = {
        "UPDATE events SET recall_id = NULL WHERE recall_id IN (" HS_SHOWING ")",
        "DELETE FROM recalls WHERE id IN (" HS_SHOWING ")",
        "DELETE FROM memories WHERE id IN (SELECT value FROM json_each(?1))",
    };
    for (size_t k = 0; k < sizeof steps / sizeof steps[0] && !rc; k++) {
      if ((rc = hc_prepare(x, steps[k], &st))) goto done;
      sqlite3_bind_value(st, 1, ids_v);
      rc = hc_exec(x, st);
      hc_done(x, st);
    }
    *erased = n;
  }
  /* secure-delete took the terms out of the index in place; else merge it */
  if (!rc) {
    if ((rc = hc_prepare(x, "SELECT coalesce((SELECT v FROM memories_fts_config WHERE k = "
                            "'secure-delete'), 0)", &st)))
      goto done;
    int in_place = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0);
    hc_done(x, st);
    if (!in_place)
      rc = sqlite3_exec(db, "INSERT INTO memories_fts(memories_fts) VALUES('optimize')", NULL,
                        NULL, NULL);
    if (rc) goto fail;
  }
done:
  hf_free_ids(ids, n);
  return rc;
fail:
  hf_free_ids(ids, n);
  return hc_sqlfail(x, rc);
}

/* -- a batch of adds ------------------------------------------------------------------ */

/* ?1 the items (a JSON array): each item's place and type, and each of its
 * fields (none for an item that is neither an object nor an array) */
static const char hs_sql_items[] =
    "SELECT j.key, j.type, f.key, f.value, f.type FROM json_each(?1) AS j LEFT JOIN "
    "json_each(CASE WHEN j.type IN ('object', 'array') THEN j.value END) AS f";
/* an item's fields: heap_add's arguments, in its order, but copy (the
 * batch's): its place HS_COPY in an item given as an array */
static const char *const hs_fields[] = {"text",       "namespace",  "kind", "source",
                                        "id",         "created_at", "importance", "key",
                                        "metadata",   "thread",     "turn"};
#define HS_NFIELDS ((int)(sizeof hs_fields / sizeof hs_fields[0]))
#define HS_COPY 9

/* The error said in x names item at first ("item 3: ..."); returns rc. */
static int hs_item_error(hc_ctx *x, i64 at, int rc) {
  char *m = x->err ? sqlite3_mprintf("item %lld: %s", (long long)at, x->err) : NULL;
  if (m) sqlite3_free(x->err), x->err = m;
  return rc;
}

/* -- a batch's rows, inserted many to a statement ------------------------------------ */

/* heap_add_many holds up to HS_BATCH items and inserts their rows HS_GROUP
 * to a statement.  Inside the call's savepoint every statement that writes
 * copies each page it changes to the sub-journal first (a file: two writes a
 * page), so a statement a row copied every page a row touches (memories and
 * its indexes, vectors, vector_parts, namespaces) for every row: 600 MB for
 * 10,000 rows into a namespace of 1M.  A statement of many rows copies each
 * page once (250 MB).  The rows are the ones heap_add would insert, with the
 * same seqs, ids, values and triggers, in the same order: an item is checked
 * and the same-text rule asked as it comes (of the file, then of the rows
 * held, which are newer); a statement that fails is undone by SQLite and its
 * rows inserted one by one instead (hs_insert: the next free m<seq>-n, or the
 * error naming the item), and an item of a thread (its turn is read from the
 * rows before it) or an item refused has the rows before it inserted first. */
#define HS_BATCH 512
#define HS_GROUP 64      /* rows a statement */

typedef struct {
  sqlite3_value *v[HS_NFIELDS]; /* the item's fields, owned: r's text points into them */
  hs_row *r;                    /* its values (tag and features unused); NULL: an earlier row's */
  const char *id;               /* the id given, or NULL */
  i64 at, seq;                  /* its index in the items; its seq (a row inserted) */
  int to;                       /* -1, or the held item whose row it is (the same text) */
  char *mid;                    /* its id, sqlite3_malloc'd: the memory it is */
} hs_held;
typedef struct {
  hs_held it[HS_BATCH];
  int n;               /* items held */
  sqlite3_stmt *group; /* the INSERT of HS_GROUP rows, prepared once a call */
} hs_batch;

/* The held items let go of. */
static void hs_batch_clear(hs_batch *b) {
  for (int i = 0; i < b->n; i++) {
    for (int f = 0; f < HS_NFIELDS; f++) sqlite3_value_free(b->it[i].v[f]);
    sqlite3_free(b->it[i].r);
    sqlite3_free(b->it[i].mid);
  }
  memset(b->it, 0, sizeof b->it[0] * (size_t)b->n);
  b->n = 0;
}

/* The INSERT of n rows: hs_sql_insert's, without a thread. */
static char *hs_batch_sql(int n) {
  sqlite3_str *q = sqlite3_str_new(NULL);
  sqlite3_str_appendall(q, "INSERT INTO memories(seq, id, namespace, nstag, text, kind, source, "
                           "key, importance, features, created_at, metadata, ntok, thread, "
                           "turn) VALUES ");
  for (int i = 0, p = 1; i < n; i++, p += HS_ROW_ARGS) /* ?k of hs_sql_insert: ?(p + k - 1) */
    sqlite3_str_appendf(q, "%s(?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, ?%d, "
                           "heap_ntokens(?%d) + heap_ntokens(?%d), NULL, NULL)",
                        i ? ", " : "", p, p + 1, p + 2, p + 10, p + 3, p + 4, p + 5, p + 6,
                        p + 7, p + 11, p + 8, p + 9, p + 10, p + 3);
  return sqlite3_str_finish(q);
}

/* Row h's values bound from parameter p on (its tag and features worked out
 * into row); nonzero: its namespace has no tag (hs_insert says why). */
static int hs_batch_bind(sqlite3_stmt *st, int p, const hs_held *h, hs_row *row) {
  const hs_row *r = h->r;
  if (hm_ns_tag(r->ns, row->tag, sizeof row->tag) < 0 ||
      hm_features(r->text, r->kind, r->source, row->features, sizeof row->features) != HM_OK)
    return 1;
  hs_bind(st, p, h->seq, h->mid, r, row->tag, row->features);
  return 0;
}

/* The rows held from it[*at] on, HS_GROUP of them (or the rest), inserted in
 * one statement, each with its id given or m<seq>; *at moves past them and
 * *done says whether they were (if not, nothing was written: the caller
 * inserts them one by one).  Returns 0, or an error that is not the rows'
 * (out of memory, I/O: the first row's item named). */
static int hs_batch_insert(hc_ctx *x, hs_batch *b, int *at, int *done) {
  static __thread hs_row row;
  int from = *at, k = 0, rc = SQLITE_OK, p = 1;
  for (; *at < b->n && k < HS_GROUP; (*at)++) {
    hs_held *h = &b->it[*at];
    if (!h->r) continue;
    k++;
    h->mid = h->id ? sqlite3_mprintf("%s", h->id) : sqlite3_mprintf("m%lld", (long long)h->seq);
    if (!h->mid) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  *done = 0;
  if (k < 2) return SQLITE_OK;
  sqlite3_stmt *st = k == HS_GROUP ? b->group : NULL; /* a group's, prepared once a call */
  if (!st) {
    char *sql = hs_batch_sql(k);
    if (!sql) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    rc = sqlite3_prepare_v3(x->db, sql, -1, 0, &st, NULL);
    sqlite3_free(sql);
    if (k == HS_GROUP && rc == SQLITE_OK) b->group = st;
  }
  for (int i = from; rc == SQLITE_OK && i < *at; i++) {
    if (!b->it[i].r) continue;
    if (hs_batch_bind(st, p, &b->it[i], &row)) rc = SQLITE_ERROR;
    p += HS_ROW_ARGS;
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(st); /* a statement that failed is undone */
  int code = rc & 0xff;
  /* a rule of the store (an id taken) or a value refused: the rows one by
   * one find it and name its item; any other failure (I/O, a full disk, out
   * of memory) may have ended the transaction: the call fails here */
  if (rc != SQLITE_DONE && code != SQLITE_CONSTRAINT && code != SQLITE_ERROR &&
      code != SQLITE_RANGE && code != SQLITE_TOOBIG) {
    hs_item_error(x, b->it[from].at, hc_sqlfail(x, rc));
    rc = x->code;
  } else {
    *done = rc == SQLITE_DONE;
    rc = SQLITE_OK;
  }
  if (st && st == b->group) sqlite3_reset(st), sqlite3_clear_bindings(st);
  else sqlite3_finalize(st);
  return rc;
}

/* The held items added: their rows inserted (a group to a statement, or one
 * by one: an error names its item), their ids appended to ids in order, the
 * batch emptied. */
static int hs_batch_flush(hc_ctx *x, hs_batch *b, sqlite3_str *ids) {
  static __thread hs_row row;
  int rc = SQLITE_OK, done = 0;
  for (int at = 0, from = 0; at < b->n; from = at) {
    if ((rc = hs_batch_insert(x, b, &at, &done))) goto cleanup;
    for (int i = from; !done && i < at; i++) {
      hs_held *h = &b->it[i];
      if (!h->r) continue;
      sqlite3_free(h->mid), h->mid = NULL;
      row.ns = h->r->ns, row.text = h->r->text, row.kind = h->r->kind;
      row.source = h->r->source, row.key = h->r->key, row.meta = h->r->meta;
      row.importance = h->r->importance, row.created = h->r->created;
      row.thread = NULL, row.turn = -1;
      if ((rc = hs_insert(x, h->seq, h->id, &row, &h->mid))) {
        hs_item_error(x, h->at, rc);
        goto cleanup;
      }
    }
  }
  for (int i = 0; i < b->n; i++) {
    const char *id = b->it[i].to >= 0 ? b->it[b->it[i].to].mid : b->it[i].mid;
    if (b->it[i].at) sqlite3_str_appendchar(ids, 1, ',');
    hq_json_string(ids, id, (int)strlen(id));
  }
cleanup:
  hs_batch_clear(b);
  return rc;
}

/* The held row with r's namespace, text and key (its index), or -1. */
static int hs_batch_same(const hs_batch *b, const hs_row *r) {
  for (int i = 0; i < b->n; i++) {
    const hs_row *o = b->it[i].r;
    if (o && !strcmp(o->text, r->text) && !strcmp(o->ns, r->ns) &&
        (o->key ? r->key && !strcmp(o->key, r->key) : !r->key))
      return i;
  }
  return -1;
}

/* Item at (its fields in v, taken when held; copy the batch's) checked and
 * held in b: *held 0 when it is an item of a thread (added by hs_add_item).
 * *last: the last seq given out. */
static int hs_batch_hold(hc_ctx *x, hs_batch *b, i64 at, sqlite3_value **v,
                         sqlite3_value *copy, i64 *last, int *held) {
  sqlite3_value *argv[HS_NFIELDS + 1];
  for (int i = 0, j = 0; i <= HS_NFIELDS; i++) argv[i] = i == HS_COPY ? copy : v[j++];
  hs_held *h = &b->it[b->n];
  int rc, cp;
  *held = 0;
  if (!(h->r = sqlite3_malloc64(offsetof(hs_row, tag))))
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if ((rc = hs_args(x, HS_NFIELDS + 1, argv, h->r, &h->id, &cp)) || h->r->thread) {
    sqlite3_free(h->r), h->r = NULL;
    return rc ? hs_item_error(x, at, rc) : SQLITE_OK;
  }
  h->at = at, h->to = -1;
  if (!h->id && !cp) { /* the same text: a memory of the file (older), or a row held */
    if ((rc = hs_same(x, h->r, &h->mid)) == SQLITE_OK && !h->mid) h->to = hs_batch_same(b, h->r);
    if (rc || h->mid || h->to >= 0) sqlite3_free(h->r), h->r = NULL;
  }
  if (!rc && h->r && !(rc = hs_next_seq(x, *last, &h->seq))) *last = h->seq;
  if (rc) {
    sqlite3_free(h->r), h->r = NULL, sqlite3_free(h->mid), h->mid = NULL;
    return hs_item_error(x, at, rc);
  }
  for (int f = 0; f < HS_NFIELDS; f++) h->v[f] = v[f], v[f] = NULL;
  b->n++;
  *held = 1;
  return SQLITE_OK;
}

/* The rows held inserted before an error of a later item (rc, said in x) is
 * given: an error of theirs is an earlier item's, and wins.  Returns the
 * error given. */
static int hs_batch_before(hc_ctx *x, hs_batch *b, sqlite3_str *ids, int rc) {
  char *err = x->err;
  int code = x->code, frc;
  x->err = NULL;
  if ((frc = hs_batch_flush(x, b, ids))) {
    sqlite3_free(err);
    return frc;
  }
  x->err = err, x->code = code;
  return rc;
}

/* One item of a batch added (its fields in v, sqlite3_value_dup'ed; copy the
 * batch's): held in b, or (an item of a thread) added alone after the rows
 * held, its id appended to ids; an error names the item.
 * at: the item's index; *last: the last seq given out. */
static int hs_add_item(hc_ctx *x, hs_batch *b, i64 at, sqlite3_value **v, sqlite3_value *copy,
                       i64 *last, sqlite3_str *ids) {
  sqlite3_value *argv[HS_NFIELDS + 1]; /* heap_add's, copy in its place */
  int held = 0, rc = hs_batch_hold(x, b, at, v, copy, last, &held);
  if (held) return b->n == HS_BATCH ? hs_batch_flush(x, b, ids) : SQLITE_OK;
  if (rc) return hs_batch_before(x, b, ids, rc);
  if ((rc = hs_batch_flush(x, b, ids))) return rc;
  for (int i = 0, j = 0; i <= HS_NFIELDS; i++) argv[i] = i == HS_COPY ? copy : v[j++];
  char *id = NULL;
  rc = hs_add(x, HS_NFIELDS + 1, argv, 0, last, &id);
  if (!rc) {
    if (at) sqlite3_str_appendchar(ids, 1, ',');
    hq_json_string(ids, id, (int)strlen(id));
  }
  sqlite3_free(id);
  return rc ? hs_item_error(x, at, rc) : SQLITE_OK; /* which item, before its sentence */
}

/* Each item of ?1 (hs_sql_items' rows, stepped here) added in order.
 * b: the rows held (hs_batch); st: hs_sql_items, bound; copy: the batch's; *last: the last seq given out;
 * ids: the ids' JSON. */
static int hs_add_items(hc_ctx *x, hs_batch *b, sqlite3_stmt *st, sqlite3_value *copy,
                        i64 *last, sqlite3_str *ids) {
  sqlite3_value *v[HS_NFIELDS] = {0};
  i64 at = -1;
  int rc = SQLITE_OK, step;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    i64 item = sqlite3_column_int64(st, 0);
    if (item != at) { /* a new item: the one before is complete */
      if (at >= 0 && (rc = hs_add_item(x, b, at, v, copy, last, ids))) break;
      for (int i = 0; i < HS_NFIELDS; i++) sqlite3_value_free(v[i]), v[i] = NULL;
      at = item;
      const char *type = (const char *)sqlite3_column_text(st, 1);
      if (!type || (strcmp(type, "object") && strcmp(type, "array"))) {
        rc = hc_fail(x, SQLITE_ERROR, "item %lld must be a JSON object with the memory's text, "
                                      "such as {\"text\": \"Booked the flight\"}, or an array "
                                      "of heap_add's arguments", (long long)at);
        break;
      }
    }
    int ftype = sqlite3_column_type(st, 2);
    const char *key = (const char *)sqlite3_column_text(st, 2);
    const char *type = (const char *)sqlite3_column_text(st, 4);
    if (!key) continue; /* an empty object */
    int f = 0;
    if (ftype == SQLITE_INTEGER) { /* an array's place: heap_add's argument */
      i64 place = sqlite3_column_int64(st, 2);
      if (place == HS_COPY && sqlite3_column_type(st, 3) == SQLITE_NULL) continue;
      f = place >= 0 && place < HS_COPY ? (int)place
          : place > HS_COPY && place <= HS_NFIELDS ? (int)place - 1 : HS_NFIELDS;
      key = f < HS_NFIELDS ? hs_fields[f] : key;
    } else {
      while (f < HS_NFIELDS && strcmp(key, hs_fields[f])) f++;
    }
    if (f == HS_NFIELDS) {
      rc = hc_fail(x, SQLITE_ERROR, "item %lld has an unknown field '%.60s'; an item's fields "
                                    "are heap_add's arguments: text, namespace, kind, source, "
                                    "id, created_at, importance, key, metadata, thread, turn "
                                    "(copy is the batch's)", (long long)at,
                   key);
      break;
    }
    if (type && (!strcmp(type, "true") || !strcmp(type, "false"))) {
      rc = hc_fail(x, SQLITE_ERROR, "item %lld: %s must not be true or false", (long long)at,
                   key);
      break;
    }
    sqlite3_value_free(v[f]);
    if (!(v[f] = sqlite3_value_dup(sqlite3_column_value(st, 3))))
      rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  if (!rc && step != SQLITE_DONE) rc = hc_sqlfail(x, step);
  if (!rc && at >= 0) rc = hs_add_item(x, b, at, v, copy, last, ids);
  rc = rc ? hs_batch_before(x, b, ids, rc) : hs_batch_flush(x, b, ids);
  for (int i = 0; i < HS_NFIELDS; i++) sqlite3_value_free(v[i]);
  return rc;
}

/* The vector index of each namespace the batch (seq first on) added to, kept
 * (hx_maintain), once per namespace, in the namespaces' order.  NOT INDEXED:
 * the batch's rows by their seq (the planner took the covering index on
 * namespace, a scan of every memory in the file). */
static int hs_maintain_batch(hc_ctx *x, i64 first) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT DISTINCT namespace FROM memories NOT INDEXED WHERE seq >= ?1 "
                         "ORDER BY namespace", &st);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, first);
  char **ns = NULL;
  int n = 0, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **m = sqlite3_realloc64(ns, (sqlite3_uint64)cap * sizeof *m);
      if (!m) break;
      ns = m;
    }
    if (!(ns[n] = sqlite3_mprintf("%s", sqlite3_column_text(st, 0)))) break;
    n++;
  }
  int stepped = rc;
  hc_done(x, st);
  rc = stepped == SQLITE_DONE ? SQLITE_OK
       : stepped == SQLITE_ROW ? hc_fail(x, SQLITE_NOMEM, "out of memory") : hc_sqlfail(x, stepped);
  for (int i = 0; i < n && !rc; i++) rc = hx_maintain(x, ns[i], first);
  for (int i = 0; i < n; i++) sqlite3_free(ns[i]);
  sqlite3_free(ns);
  return rc;
}

/* The merge work (FTS5 leaf pages written) heap_add_many owes the text index:
 * a page a row added, and a floor; an index at rest after a batch needs
 * about 0.03 pages a row times its levels (LoCoMo turns), so a big batch
 * ends with no merge in progress, and a small one never pays for a whole
 * level's merge at once. */
#define HS_MERGE_PER_ROW 1
#define HS_MERGE_MIN 64

/* heap_add_many(items [, copy]): each item (a JSON object with heap_add's
 * arguments as fields: text, namespace, kind, source, id, created_at,
 * importance, key, metadata (an object, or its text), thread, turn; or an
 * array of them in heap_add's order, copy's place NULL) added as heap_add adds
 * it (hs_add: its checks, its id, the same-text rule, its features), in one
 * savepoint, with the FTS index and bm25_terms taken in one statement each at
 * the end (the 'fts_deferred' meta row, never committed, turns the per-row trigger off
 * meanwhile).  *out: the ids, a JSON array in the items' order. */
static int hs_add_many(hc_ctx *x, sqlite3_value *items, sqlite3_value *copy, char **out) {
  char why[HM_ERRLEN];
  const char *json;
  static const char bad[] = "items must be a JSON array of objects, one per memory, such as "
                            "'[{\"text\": \"Booked the flight\"}]'";
  if (hq_arg_text(items, "items", 0, 0, &json, why, sizeof why))
    return hc_fail(x, SQLITE_ERROR, "%s", bad);
  if (hm_json_depth(json, sqlite3_value_bytes(items)) > hm_limits.MAX_JSON_DEPTH + 2)
    return hc_fail(x, SQLITE_ERROR, "items nest deeper than %.0f levels",
                   hm_limits.MAX_JSON_DEPTH + 2);
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT CASE WHEN json_valid(?1) THEN CASE WHEN json_type(?1) = "
                         "'array' THEN json_array_length(?1) END END", &st);
  if (rc) return rc;
  sqlite3_bind_value(st, 1, items);
  rc = sqlite3_step(st);
  int is_array = rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER;
  i64 n = sqlite3_column_int64(st, 0), last = 0;
  hc_done(x, st);
  if (rc != SQLITE_ROW) return hc_sqlfail(x, rc);
  if (!is_array) return hc_fail(x, SQLITE_ERROR, "%s", bad);
  if ((double)n > hm_limits.MAX_IDS)
    return hc_fail(x, SQLITE_ERROR, "items lists %lld memories; at most %.0f are added at once",
                   (long long)n, hm_limits.MAX_IDS);
  if ((rc = hs_last_seq(x, &last))) return rc;
  i64 first = last + 1;
  rc = sqlite3_exec(x->db, "INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('"
                           HM_META_FTS_DEFERRED "', '1')", NULL, NULL, NULL);
  if (rc) return hc_sqlfail(x, rc);
  sqlite3_str *ids = sqlite3_str_new(x->db);
  sqlite3_str_appendchar(ids, 1, '[');
  hs_batch *b = sqlite3_malloc64(sizeof *b);
  if (!b) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  else if (!(rc = hc_prepare(x, hs_sql_items, &st))) {
    memset(b, 0, sizeof *b);
    sqlite3_bind_value(st, 1, items);
    rc = hs_add_items(x, b, st, copy, &last, ids);
    hc_done(x, st);
  }
  if (b) sqlite3_finalize(b->group);
  sqlite3_free(b);
  /* the batch's new rows into the index at once, and the trigger on again */
  if (!rc)
    rc = hc_prepare(x, "INSERT INTO memories_fts(rowid, nstag, text) SELECT seq, nstag, text "
                       "FROM memories WHERE seq >= ?1", &st);
  if (!rc) {
    sqlite3_bind_int64(st, 1, first);
    rc = hc_exec(x, st);
    hc_done(x, st);
  }
  /* FTS5 merges its segments a little at each flush (automerge), so a big
   * batch ends with merges half done, and until the next write finishes them
   * every recall walks each of their input segments (RESULTS 28): the batch
   * goes on with them, up to HS_MERGE_PER_ROW leaf pages a row it added, by
   * FTS5's own rule (a level merged once it holds 'usermerge' segments) */
  if (!rc && !(rc = hc_prepare(x, "INSERT INTO memories_fts(memories_fts, rank) "
                                   "VALUES('merge', ?1)", &st))) {
    sqlite3_bind_int64(st, 1, HS_MERGE_PER_ROW * (last - first + 1) + HS_MERGE_MIN);
    rc = hc_exec(x, st);
    hc_done(x, st);
  }
  /* and their terms into bm25_terms, a row per (namespace, term) (schema.py's
   * BM25_TERMS_BUILD: the trigger it replaces costs a statement a row) */
  if (!rc && !(rc = hc_prepare(x, HM_SQL_BM25_TERMS_BUILD, &st))) {
    sqlite3_bind_int64(st, 1, first);
    sqlite3_bind_int64(st, 2, (i64)1 << 62);
    rc = hc_exec(x, st);
    hc_done(x, st);
  }
  if (!rc && (rc = sqlite3_exec(x->db, "DELETE FROM heapmem_meta WHERE key = '"
                                       HM_META_FTS_DEFERRED "'", NULL, NULL, NULL)))
    hc_sqlfail(x, rc);
  /* what the batch owes each namespace's vector index, once (hx_maintain) */
  if (!rc) rc = hs_maintain_batch(x, first);
  sqlite3_str_appendchar(ids, 1, ']');
  if (sqlite3_str_errcode(ids) && !rc) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  char *text = sqlite3_str_finish(ids);
  if (rc) sqlite3_free(text);
  else *out = text;
  return rc;
}

/* Run one of the store's writes inside a savepoint of its own, after the
 * schema check; the result is set from `what` (0: the id text, 1 and 2: the
 * count, 3: the ids' JSON).
 * fname: the function's name. */
static void hs_write(sqlite3_context *ctx, int argc, sqlite3_value **argv, int what,
                     const char *fname) {
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  hc_keep_statements(&x);
  char *id = NULL;
  i64 count = 0;
  int rc;
  if (sqlite3_db_readonly(x.db, "main") == 1) {
    rc = hc_fail(&x, SQLITE_READONLY, "the store is read-only here");
  } else if ((rc = hs_check(&x)) == SQLITE_OK &&
             (rc = sqlite3_exec(x.db, "SAVEPOINT heap_write", NULL, NULL, NULL)) == SQLITE_OK) {
    i64 last = 0;
    if (what == 0) rc = (rc = hs_last_seq(&x, &last)) ? rc : hs_add(&x, argc, argv, 1, &last, &id);
    else if (what == 3) rc = hs_add_many(&x, argv[0], argc > 1 ? argv[1] : NULL, &id);
    else if (what == 1) rc = hs_forget(&x, argv[0], NULL, &count);
    else rc = hs_forget(&x, NULL, argv[0], &count);
    if (rc == SQLITE_OK) rc = sqlite3_exec(x.db, "RELEASE heap_write", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
      if (!x.err) hc_sqlfail(&x, rc);
      sqlite3_exec(x.db, "ROLLBACK TO heap_write", NULL, NULL, NULL);
      sqlite3_exec(x.db, "RELEASE heap_write", NULL, NULL, NULL);
    }
  } else if (rc != SQLITE_OK && !x.err) {
    hc_sqlfail(&x, rc);
  }
  if (rc == SQLITE_OK) {
    if (what == 0 || what == 3) sqlite3_result_text(ctx, id, -1, sqlite3_free);
    else sqlite3_result_int64(ctx, count);
    return;
  }
  sqlite3_free(id);
  hc_result_fail(ctx, &x, fname, rc);
}

static void heap_add(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hs_write(ctx, argc, argv, 0, "heap_add");
}

static void heap_add_many(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hs_write(ctx, argc, argv, 3, "heap_add_many");
}

static void heap_forget(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hs_write(ctx, argc, argv, 1, "heap_forget");
}

static void heap_forget_namespace(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hs_write(ctx, argc, argv, 2, "heap_forget_namespace");
}

#pragma endregion
