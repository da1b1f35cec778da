/*
 * bm25.c: BM25 over one namespace, in SQL: heap_bm25_row (an FTS5
 * auxiliary function), heap_bm25_top (an aggregate) and heap_ntokens (a
 * text's length as FTS5 counts it).
 *
 * Owns: the BM25 constants and IDF, the row blob's format
 * (HM_BM25_ROW_SIZE), the top-n search that reads exact lengths from the
 * FTS5 table's %_docsize only for the rows that can still reach the top.
 * Relies on: sqlfuncs.c (hm_is_number, hm_result_err).  register.c makes
 * heap_ntokens' tokenizer (hm_counter) and registers all three.
 */

#pragma region namespace-local BM25

/*
 * FTS5's bm25() takes each term's document frequency over the whole table:
 * in a store of many namespaces, a tenant's scores (and the cost of its query,
 * which must count every posting of every term) depend on all the others.
 * heapmem ranks with Okapi BM25 (k1 = 1.2, b = 0.75, FTS5's term frequencies
 * and document lengths: every indexed column) over the namespace alone: N and
 * the average document length are the namespace's (kept by triggers in
 * the namespaces table), and a term's document frequency is counted over the match set,
 * which holds every document of the namespace that contains any query term.
 * The IDF is Lucene's, log(1 + (N - n + 0.5) / (n + 0.5)), not FTS5's
 * log((N - n + 0.5) / (n + 0.5)): FTS5's floors to 1e-6 any term in more than
 * half the documents, which in a new user's small namespace is most of the
 * words that matter ("Lisbon" in five memories of which four name it).  So the
 * scores are not FTS5's bm25() numbers; they are the same BM25 with that one
 * term changed, and still depend on nothing outside the namespace.
 */

#define HM_BM25_K1 1.2
#define HM_BM25_B 0.75
#define HM_BM25_MAX_PHRASES 64
#define HM_BM25_MAGIC "HMB1"

/* One matched row, as heap_bm25_row() encodes it:
 *   "HMB1" | u32 nphrase | f64 length, at least | nphrase x f64 weighted frequency
 *   | nphrase x u8 (1 if the phrase occurs in the row, in any column) */
#define HM_BM25_ROW_SIZE(n) (16 + (n) * 9)

/* Okapi BM25 IDF in Lucene's form: > 0 for every 0 <= n_hit <= n_docs, so no
 * floor, and a row's score never grows with its length (heap_bm25_top_final's
 * pruning relies on it). */
static double hm_bm25_idf(double n_docs, double n_hit) {
  return log(1.0 + (n_docs - n_hit + 0.5) / (n_hit + 0.5));
}

/* The (negative, lower is better, as FTS5) BM25 score of one row. */
static double hm_bm25(int nphrase, const double *freq, const double *idf, double doclen,
                      double avgdl) {
  double score = 0.0;
  for (int i = 0; i < nphrase; i++)
    score += idf[i] * (freq[i] * (HM_BM25_K1 + 1.0)) /
             (freq[i] + HM_BM25_K1 * (1.0 - HM_BM25_B + HM_BM25_B * doclen / avgdl));
  return -1.0 * score;
}

#pragma endregion

#pragma region BM25 in SQL

/* heap_bm25_row(fts_table [, weight of column 0, weight of column 1, ...]) is
 * an FTS5 auxiliary function: the current row's BM25 inputs as a blob (see
 * HM_BM25_ROW_SIZE), each phrase's frequency weighted per column as bm25()
 * weighs it.  The length it records is a lower bound (the distinct positions
 * the query's phrases occupy): reading every row's exact length from FTS5
 * would cost as much as the match itself, so heap_bm25_top() reads it only
 * for the rows that can still reach the top. */
static void heap_bm25_row(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                          int nval, sqlite3_value **val) {
  sqlite3_api = api->xUserData(fts); /* the routines of the library that called */
  HM_API_HERE;
  unsigned char buf[HM_BM25_ROW_SIZE(HM_BM25_MAX_PHRASES)];
  double freq[HM_BM25_MAX_PHRASES];
  unsigned char hit[HM_BM25_MAX_PHRASES];
  int ninst = 0, npos = 0, lastcol = -1, lastoff = -1;
  int nphrase = api->xPhraseCount(fts);
  if (nphrase > HM_BM25_MAX_PHRASES) {
    hm_result_err(ctx, "heap_bm25_row", "too many phrases in the query");
    return;
  }
  for (int i = 0; i < nval; i++) { /* (hm_is_number, with this function's API pointer) */
    int t = sqlite3_value_type(val[i]);
    if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
      hm_result_err(ctx, "heap_bm25_row", "column weights must be numbers");
      return;
    }
  }
  memset(freq, 0, sizeof freq);
  memset(hit, 0, sizeof hit);
  int rc = api->xInstCount(fts, &ninst);
  for (int i = 0; rc == SQLITE_OK && i < ninst; i++) {
    int ip, ic, io;
    rc = api->xInst(fts, i, &ip, &ic, &io);
    if (rc == SQLITE_OK && ip >= 0 && ip < nphrase) {
      freq[ip] += nval > ic ? sqlite3_value_double(val[ic]) : 1.0;
      hit[ip] = 1;
      /* instances come in position order: count each position once */
      if (ic != lastcol || io != lastoff) npos++;
      lastcol = ic;
      lastoff = io;
    }
  }
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  u32 n = (u32)nphrase;
  double lower = (double)npos;
  memcpy(buf, HM_BM25_MAGIC, 4);
  memcpy(buf + 4, &n, 4);
  memcpy(buf + 8, &lower, 8);
  memcpy(buf + 16, freq, n * sizeof(double));
  memcpy(buf + 16 + n * sizeof(double), hit, n);
  sqlite3_result_blob(ctx, buf, HM_BM25_ROW_SIZE(nphrase), SQLITE_TRANSIENT);
}

typedef struct {
  i64 n, cap;           /* rows collected */
  int nphrase;
  int started, failed;
  i64 limit;
  double docs, tokens;  /* the namespace's size (NULL -> 0: taken from the rows) */
  char *table;          /* the FTS5 table, "schema.name" or "name" */
  i64 *rowid;
  double *lower;        /* each row's length, at least */
  double *freq;         /* n x nphrase */
  i64 *nhit;            /* nphrase: rows holding each phrase */
} hm_bm25_acc;

/* heap_bm25_top(rowid, heap_bm25_row(fts), docs, tokens, n, fts_table)
 * aggregate -> a JSON array [[rowid, bm25], ...] of the n best rows, best
 * first (ties by rowid), scored with BM25 over a collection of `docs`
 * documents holding `tokens` tokens (the namespace's, from the namespaces
 * table).  Exact lengths come from fts_table's %_docsize table.  NULL or too
 * small docs/tokens fall back to the rows' own counts, so the scores are never
 * undefined. */
static void heap_bm25_top_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  hm_bm25_acc *acc = sqlite3_aggregate_context(ctx, sizeof(hm_bm25_acc));
  (void)argc;
  if (!acc) { sqlite3_result_error_nomem(ctx); return; }
  if (acc->failed) return;
  if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER ||
      sqlite3_value_type(argv[1]) != SQLITE_BLOB) {
    hm_result_err(ctx, "heap_bm25_top",
                  "takes (rowid, heap_bm25_row(fts), docs, tokens, n, fts table name)");
    goto fail;
  }
  const unsigned char *b = sqlite3_value_blob(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  u32 np = 0;
  if (len >= 16) memcpy(&np, b + 4, 4);
  if (len < 16 || memcmp(b, HM_BM25_MAGIC, 4) != 0 || np > HM_BM25_MAX_PHRASES ||
      len != HM_BM25_ROW_SIZE((int)np)) {
    hm_result_err(ctx, "heap_bm25_top", "the second argument is not a heap_bm25_row() blob");
    goto fail;
  }
  if (!acc->started) {
    acc->started = 1;
    for (int i = 2; i < 5; i++)
      if (sqlite3_value_type(argv[i]) != SQLITE_NULL && !hm_is_number(argv[i])) {
        hm_result_err(ctx, "heap_bm25_top", "docs, tokens and n must be numbers");
        goto fail;
      }
    acc->docs = sqlite3_value_double(argv[2]);
    acc->tokens = sqlite3_value_double(argv[3]);
    acc->limit = sqlite3_value_int64(argv[4]);
    if (!(acc->limit >= 1 && acc->limit <= 100000) || !isfinite(acc->docs) ||
        !isfinite(acc->tokens)) {
      hm_result_err(ctx, "heap_bm25_top", "n must be from 1 to 100000, docs and tokens finite");
      goto fail;
    }
    const char *t = (const char *)sqlite3_value_text(argv[5]);
    if (sqlite3_value_type(argv[5]) != SQLITE_TEXT || !t || !*t || strlen(t) > 200) {
      hm_result_err(ctx, "heap_bm25_top", "the FTS5 table name must be text");
      goto fail;
    }
    acc->table = sqlite3_mprintf("%s", t);
    acc->nphrase = (int)np;
    acc->nhit = sqlite3_malloc64(sizeof(i64) * (np ? np : 1));
    if (!acc->table || !acc->nhit) { sqlite3_result_error_nomem(ctx); goto fail; }
    memset(acc->nhit, 0, sizeof(i64) * (np ? np : 1));
  } else if ((int)np != acc->nphrase) {
    hm_result_err(ctx, "heap_bm25_top", "rows of different queries");
    goto fail;
  }
  if (acc->n == acc->cap) {
    i64 cap = acc->cap ? acc->cap * 2 : 256;
    i64 *r = sqlite3_realloc64(acc->rowid, (sqlite3_uint64)cap * sizeof(i64));
    if (r) acc->rowid = r;
    double *d = sqlite3_realloc64(acc->lower, (sqlite3_uint64)cap * sizeof(double));
    if (d) acc->lower = d;
    double *f =
        sqlite3_realloc64(acc->freq, (sqlite3_uint64)(cap * (np ? np : 1)) * sizeof(double));
    if (f) acc->freq = f;
    if (!r || !d || !f) { sqlite3_result_error_nomem(ctx); goto fail; }
    acc->cap = cap;
  }
  i64 k = acc->n++;
  acc->rowid[k] = sqlite3_value_int64(argv[0]);
  memcpy(&acc->lower[k], b + 8, 8);
  memcpy(&acc->freq[k * np], b + 16, np * sizeof(double));
  for (u32 i = 0; i < np; i++) acc->nhit[i] += b[16 + np * sizeof(double) + i] != 0;
  return;
fail:
  acc->failed = 1;
}

typedef struct {
  double score;
  i64 rowid;
  i64 k;        /* the row's index in the accumulator */
} hm_scored;

/* a before b in the ranking: lower (better) BM25 first, then lower rowid */
static int hm_scored_before(const hm_scored *a, const hm_scored *b) {
  return a->score < b->score || (a->score == b->score && a->rowid < b->rowid);
}

static int hm_scored_cmp(const void *x, const void *y) {
  const hm_scored *a = x, *b = y;
  return hm_scored_before(a, b) ? -1 : hm_scored_before(b, a) ? 1 : 0;
}

/* Binary heaps of scored rows: worst = 1 keeps the worst at the root (the
 * top-n kept so far), worst = 0 the best (the rows still to look at). */
static int hm_heap_above(const hm_scored *a, const hm_scored *b, int worst) {
  return worst ? hm_scored_before(b, a) : hm_scored_before(a, b);
}

static void hm_heap_down(hm_scored *h, i64 size, i64 i, int worst) {
  hm_scored s = h[i];
  for (;;) {
    i64 c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && hm_heap_above(&h[c + 1], &h[c], worst)) c++;
    if (!hm_heap_above(&h[c], &s, worst)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = s;
}

static void hm_heap_up(hm_scored *h, i64 i, int worst) {
  hm_scored s = h[i];
  while (i > 0 && hm_heap_above(&s, &h[(i - 1) / 2], worst)) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = s;
}

/* One SQLite varint (FTS5's %_docsize format); returns bytes read, 0 if cut. */
static int hm_varint(const unsigned char *p, int n, u64 *v) {
  u64 x = 0;
  for (int i = 0; i < 9 && i < n; i++) {
    if (i == 8) { *v = (x << 8) | p[i]; return 9; }
    x = (x << 7) | (p[i] & 0x7f);
    if (!(p[i] & 0x80)) { *v = x; return i + 1; }
  }
  return 0;
}

/* The exact length of a row (all columns), from the table's %_docsize row,
 * through one blob handle moved from row to row. */
static int hm_doclen(sqlite3 *db, const char *table, sqlite3_blob **blob, i64 rowid,
                     double *out) {
  int rc;
  if (!*blob) {
    const char *dot = strchr(table, '.');
    char *schema = dot ? sqlite3_mprintf("%.*s", (int)(dot - table), table)
                       : sqlite3_mprintf("main");
    char *name = sqlite3_mprintf("%s_docsize", dot ? dot + 1 : table);
    rc = schema && name ? sqlite3_blob_open(db, schema, name, "sz", rowid, 0, blob)
                        : SQLITE_NOMEM;
    sqlite3_free(schema);
    sqlite3_free(name);
  } else {
    rc = sqlite3_blob_reopen(*blob, rowid);
  }
  if (rc != SQLITE_OK) return rc;
  unsigned char buf[9 * 64];
  int n = sqlite3_blob_bytes(*blob);
  if (n > (int)sizeof buf) n = (int)sizeof buf;
  rc = sqlite3_blob_read(*blob, buf, n, 0);
  if (rc != SQLITE_OK) return rc;
  double total = 0.0;
  for (int i = 0; i < n;) {
    u64 v;
    int used = hm_varint(buf + i, n - i, &v);
    if (!used) return SQLITE_CORRUPT;
    total += (double)v;
    i += used;
  }
  *out = total;
  return SQLITE_OK;
}

static void heap_bm25_top_final(sqlite3_context *ctx) {
  HM_API_HERE;
  hm_bm25_acc *acc = sqlite3_aggregate_context(ctx, 0);
  hm_scored *todo = NULL, *top = NULL;
  sqlite3_blob *blob = NULL;
  char *out = NULL;
  if (!acc || acc->n == 0) {
    if (!acc || !acc->failed) sqlite3_result_text(ctx, "[]", -1, SQLITE_STATIC);
    goto cleanup;
  }
  if (acc->failed) goto cleanup;
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  int np = acc->nphrase, rc = SQLITE_OK;
  i64 n = acc->n, limit = acc->limit < n ? acc->limit : n, size = 0;
  double idf[HM_BM25_MAX_PHRASES];
  double docs = acc->docs, tokens = acc->tokens;
  /* stale or missing namespace counts: the rows are a lower bound */
  if (docs < (double)n) docs = (double)n;
  int exact = 0; /* acc->lower holds exact lengths, not bounds */
  if (tokens <= 0.0) {
    /* no statistics: the match set's mean length stands in (every length read) */
    double sum = 0.0;
    exact = 1;
    for (i64 k = 0; k < n && rc == SQLITE_OK; k++) {
      rc = hm_doclen(db, acc->table, &blob, acc->rowid[k], &acc->lower[k]);
      sum += acc->lower[k];
    }
    tokens = sum / (double)n * docs;
  }
  double avgdl = tokens / docs;
  if (!(avgdl > 0.0)) avgdl = 1.0;
  for (int i = 0; i < np; i++) idf[i] = hm_bm25_idf(docs, (double)acc->nhit[i]);
  todo = sqlite3_malloc64((sqlite3_uint64)n * sizeof(hm_scored));
  top = sqlite3_malloc64((sqlite3_uint64)limit * sizeof(hm_scored));
  if (!todo || !top) { sqlite3_result_error_nomem(ctx); goto cleanup; }
  /* each row's best possible score (at its shortest possible length: every idf is
   * > 0, since n_hit <= n <= docs, so a term's part only shrinks as the length
   * grows), best first */
  for (i64 k = 0; k < n; k++) {
    todo[k].score = hm_bm25(np, &acc->freq[k * np], idf, acc->lower[k], avgdl);
    todo[k].rowid = acc->rowid[k];
    todo[k].k = k;
  }
  for (i64 i = n / 2 - 1; i >= 0; i--) hm_heap_down(todo, n, i, 0);
  /* exact scores, in that order, until no remaining row can reach the top */
  for (i64 left = n; left > 0 && rc == SQLITE_OK; left--) {
    hm_scored best = todo[0];
    if (size == limit && !hm_scored_before(&best, &top[0])) break;
    todo[0] = todo[left - 1];
    if (left > 1) hm_heap_down(todo, left - 1, 0, 0);
    double dl = acc->lower[best.k];
    if (!exact) rc = hm_doclen(db, acc->table, &blob, best.rowid, &dl);
    if (rc != SQLITE_OK) break;
    hm_scored s = {.score = hm_bm25(np, &acc->freq[best.k * np], idf, dl, avgdl),
                   .rowid = best.rowid, .k = best.k};
    if (size < limit) {
      top[size++] = s;
      hm_heap_up(top, size - 1, 1);
    } else if (hm_scored_before(&s, &top[0])) {
      top[0] = s;
      hm_heap_down(top, size, 0, 1);
    }
  }
  if (rc != SQLITE_OK) {
    char *m = sqlite3_mprintf("heap_bm25_top: cannot read the row lengths of %s (%s)",
                              acc->table, sqlite3_errstr(rc));
    if (m) sqlite3_result_error(ctx, m, -1);
    else sqlite3_result_error_nomem(ctx);
    sqlite3_free(m);
    goto cleanup;
  }
  qsort(top, (size_t)size, sizeof(hm_scored), hm_scored_cmp);
  sqlite3_str *str = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(str, 1, '[');
  for (i64 i = 0; i < size; i++)
    sqlite3_str_appendf(str, "%s[%lld,%!.17g]", i ? "," : "", (long long)top[i].rowid,
                        top[i].score);
  sqlite3_str_appendchar(str, 1, ']');
  int err = sqlite3_str_errcode(str);
  out = sqlite3_str_finish(str);
  if (err != SQLITE_OK || !out) { sqlite3_result_error_nomem(ctx); goto cleanup; }
  sqlite3_result_text(ctx, out, -1, sqlite3_free);
  out = NULL;
cleanup:
  if (acc) {
    sqlite3_free(acc->table);
    sqlite3_free(acc->rowid);
    sqlite3_free(acc->lower);
    sqlite3_free(acc->freq);
    sqlite3_free(acc->nhit);
  }
  if (blob) sqlite3_blob_close(blob);
  sqlite3_free(todo);
  sqlite3_free(top);
  sqlite3_free(out);
}

/* heap_ntokens(text) -> the number of tokens FTS5 counts in text under
 * heapmem's tokenizer (unicode61 remove_diacritics 2; porter stems but never
 * splits or merges tokens): the document length BM25 uses. */
typedef struct {
  fts5_tokenizer tok;
  Fts5Tokenizer *inst;
} hm_counter;

static int hm_count_token(void *ctx, int flags, const char *t, int n, int start, int end) {
  (void)t; (void)n; (void)start; (void)end;
  if (!(flags & FTS5_TOKEN_COLOCATED)) ++*(i64 *)ctx;
  return SQLITE_OK;
}

static void heap_ntokens(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  hm_counter *c = hm_user_data(ctx);
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { sqlite3_result_int(ctx, 0); return; }
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  if (!text) { sqlite3_result_error_nomem(ctx); return; }
  i64 n = 0;
  int rc = c->tok.xTokenize(c->inst, &n, FTS5_TOKENIZE_DOCUMENT, text, len, hm_count_token);
  if (rc != SQLITE_OK) { sqlite3_result_error_code(ctx, rc); return; }
  sqlite3_result_int64(ctx, n);
}

static void hm_counter_free(void *p) {
  hm_counter *c = p;
  if (c && c->inst) c->tok.xDelete(c->inst);
  sqlite3_free(c);
}

#pragma endregion
