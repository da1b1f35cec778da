/*
 * call.c: the call runtime, what every heap_* function that runs statements
 * shares: the connection's state (hm_conn, one per connection, and the
 * statements it keeps), one call's context (hc_ctx: the connection and the
 * call's first error with its SQLite code), the one way to fail a call
 * (hc_fail, printf's arguments, the first error wins, as fts5's *pRc), the
 * statement helpers (hc_prepare, hc_done, hc_exec, hc_sqlfail) and the end
 * of a heap_* SQL function that failed (hc_result_fail).  heap_recall's
 * table sets its zErrMsg from its call's first error (hc_vtab_fail).
 * feedback.c, store.c, tune.c, vindex.c, recall.c and place.c use it.
 * Relies on: embed.c (hv_cache), attribute.c (hm_stemmer); recall.c's
 * hr_vtab and hr_qvec and tune.c's ht_job are named ahead.
 *
 * Damage is told by result codes, never by the words of an error: what the
 * file holds is read through a check (json_valid in the statement, a value's
 * type in C) that fails the call with SQLITE_CORRUPT and a sentence of its
 * own (hc_damaged_json), and a statement that does not prepare in a file
 * whose schema version is not heapmem's says so (hc_is_store).
 */

#pragma region the call runtime

typedef struct hr_vtab hr_vtab; /* recall.c: the connection's heap_recall table */
typedef struct hr_qvec hr_qvec; /* recall.c: a logged question's vector */
typedef struct hr_pc hr_pc;     /* recall.c: the posting cache of big namespaces */
typedef struct ht_job ht_job;   /* tune.c: a tune run in steps */
static void ht_job_free(ht_job *j);

/* The statements the loop's functions run, prepared once per connection
 * and kept here while the connection's heap_recall table is connected; its
 * xDisconnect (run before SQLite checks for unfinalized statements at close)
 * finalizes them. */
#define HC_KEPT 40
typedef struct {
  const char *sql; /* a static string: the key */
  sqlite3_stmt *st;
  int busy;        /* handed out by hc_prepare, not yet given back */
} hc_kept;

/* One per connection: the module's client data (register.c makes it). */
typedef struct {
  const sqlite3_api_routines *api; /* the SQLite library of the connection */
  hr_vtab *vt;      /* the connection's heap_recall, once connected */
  hc_kept kept[HC_KEPT]; /* the statements kept, while vt is connected */
  int checked;      /* the file's schema was found heapmem's own ... */
  long long cookie; /* ... at this schema cookie (store.c, hs_check) */
  hv_cache *vc;     /* the namespaces' vectors (embed.c), once a recall needs them */
  hr_qvec *qc;      /* HR_QCACHE logged questions' vectors, once a recall needs them */
  hr_pc *pc;        /* big namespaces' postings, once a BM25 search needs them */
  unsigned long long qc_clock; /* lookups in qc so far: its entries' recency */
  ht_job *job;      /* the auto-tune this connection steps after its feedback (tune.c) */
  hm_stemmer *stem; /* porter over unicode61, as memories_fts tokenizes (register.c) */
} hm_conn;

/* One call's context: the connection, where its prepared statements are
 * kept (hc_prepare), and the first error, which ends the call. */
typedef struct {
  sqlite3 *db;
  hm_conn *conn; /* where the prepared statements are kept (NULL: none kept) */
  char *err;     /* the first error, one sentence (sqlite3_malloc'd) */
  int code;      /* its SQLite code */
} hc_ctx;

/* Fail the call with code and a sentence made as printf makes it, unless it
 * failed already: the first error wins.  Returns code. */
static int hc_fail(hc_ctx *x, int code, const char *fmt, ...) {
  if (!x->err) {
    va_list ap;
    va_start(ap, fmt);
    x->err = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    x->code = code;
  }
  return code;
}

/* A value the file holds is not the JSON heapmem wrote: damage. */
static int hc_damaged_json(hc_ctx *x) {
  return hc_fail(x, SQLITE_CORRUPT, "a value in the store is damaged (malformed JSON)");
}

/* Whether the database has heapmem's schema version (PRAGMA user_version). */
static int hc_is_store(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int version = -1;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return version == HM_SCHEMA_VERSION;
}

/* A statement of heapmem's failed with rc: the connection's words for it
 * (when the file is not a heapmem store, said so first: a table or column
 * of heapmem's is missing). */
static int hc_sqlfail(hc_ctx *x, int rc) {
  if (rc == SQLITE_NOMEM) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  int code = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_ERROR : rc;
  char *msg = sqlite3_mprintf("%s", sqlite3_errmsg(x->db));
  if (!msg) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (code == SQLITE_ERROR && !hc_is_store(x->db))
    hc_fail(x, code, "this database is not a heapmem store (%s)", msg);
  else
    hc_fail(x, code, "%s", msg);
  sqlite3_free(msg);
  return code;
}

/* The statement for sql (a static string), prepared once per connection and
 * kept while its heap_recall is connected; give it back with hc_done. */
static int hc_prepare(hc_ctx *x, const char *sql, sqlite3_stmt **st) {
  hc_kept *kept = x->conn && x->conn->vt ? x->conn->kept : NULL;
  int slot = -1;
  for (int i = 0; kept && i < HC_KEPT; i++) {
    if (kept[i].sql == sql && kept[i].st && !kept[i].busy) {
      kept[i].busy = 1;
      *st = kept[i].st;
      return SQLITE_OK;
    }
    if (slot < 0 && !kept[i].st) slot = i;
  }
  int rc = sqlite3_prepare_v3(x->db, sql, -1, slot >= 0 ? SQLITE_PREPARE_PERSISTENT : 0, st,
                              NULL);
  if (rc == SQLITE_OK && slot >= 0) kept[slot] = (hc_kept){.sql = sql, .st = *st, .busy = 1};
  return rc == SQLITE_OK ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* Give back a statement from hc_prepare: reset and kept, or finalized. */
static void hc_done(hc_ctx *x, sqlite3_stmt *st) {
  if (!st) return;
  hc_kept *kept = x->conn && x->conn->vt ? x->conn->kept : NULL;
  for (int i = 0; kept && i < HC_KEPT; i++)
    if (kept[i].st == st) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      kept[i].busy = 0;
      return;
    }
  sqlite3_finalize(st);
}

/* Run a statement that returns no rows (or ignore them). */
static int hc_exec(hc_ctx *x, sqlite3_stmt *st) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
  }
  if (rc != SQLITE_DONE) return hc_sqlfail(x, rc);
  sqlite3_reset(st);
  return SQLITE_OK;
}

/* The connection's heap_recall table keeps the statements: connect it (an
 * eponymous table is made when a statement first names it). */
static void hc_keep_statements(hc_ctx *x) {
  if (!x->conn || x->conn->vt) return;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(x->db, "SELECT rank FROM heap_recall WHERE 0", -1, &st, NULL) ==
      SQLITE_OK)
    sqlite3_finalize(st);
}

/* End a heap_* SQL function that failed with rc: "fname: " and x's first
 * error (else SQLite's words for rc) as its error, with x's code when that
 * is not plain SQLITE_ERROR; x's error is freed. */
static void hc_result_fail(sqlite3_context *ctx, hc_ctx *x, const char *fname, int rc) {
  char *m = sqlite3_mprintf("%s: %s", fname, x->err ? x->err : sqlite3_errstr(rc));
  sqlite3_result_error(ctx, m ? m : "out of memory", -1);
  if (x->code && x->code != SQLITE_ERROR) sqlite3_result_error_code(ctx, x->code);
  sqlite3_free(m);
  sqlite3_free(x->err);
  x->err = NULL;
}

/* End a virtual table's method that failed with rc: "fname: " and x's first
 * error become the table's zErrMsg (none: SQLite's words for rc); x's error
 * is freed.  Returns rc. */
static int hc_vtab_fail(sqlite3_vtab *vt, hc_ctx *x, const char *fname, int rc) {
  sqlite3_free(vt->zErrMsg);
  vt->zErrMsg = x->err ? sqlite3_mprintf("%s: %s", fname, x->err) : NULL;
  sqlite3_free(x->err);
  x->err = NULL;
  return rc;
}

#pragma endregion
