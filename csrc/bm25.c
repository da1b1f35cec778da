/*
 * bm25.c: BM25 over one namespace, in SQL: heap_bm25_row and heap_bm25_tail
 * (FTS5 auxiliary functions), heap_bm25_top (an aggregate), heap_ntokens (a
 * text's length as FTS5 counts it) and heap_terms (a text's FTS5 terms, a
 * table-valued function); and what recall's pruned top N computes with.
 *
 * Owns: the BM25 constants and IDF, the row blob's format
 * (HM_BM25_ROW_SIZE), the ranking that reads exact lengths from the FTS5
 * table's %_docsize only for the rows that can still reach the top
 * (hb_bm25_rank), a phrase's bound, the first threshold to try and the
 * formula for a threshold (the pruned top N's arithmetic; recall.c's
 * hr_lexical runs its rounds).
 * Relies on: sqlfuncs.c (hq_is_number, hq_result_err), attribute.c
 * (hm_stemmer).  register.c makes heap_ntokens' tokenizer (hm_counter) and
 * heap_terms' (an hm_stemmer) and registers them all.
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
#define HM_BM25_MAX_PHRASES 128
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

/* One phrase's part of a row's BM25 score (positive): its IDF, its frequency
 * in the row, the row's length and the collection's mean length. */
static double hm_bm25_part(double idf, double freq, double doclen, double avgdl) {
  return idf * (freq * (HM_BM25_K1 + 1.0)) /
         (freq + HM_BM25_K1 * (1.0 - HM_BM25_B + HM_BM25_B * doclen / avgdl));
}

/* The (negative, lower is better, as FTS5) BM25 score of one row.
 * nphrase: the phrases; freq, idf: each one's frequency in the row and IDF;
 * doclen: the row's length; avgdl: the collection's mean length. */
static double hm_bm25(int nphrase, const double *freq, const double *idf, double doclen,
                      double avgdl) {
  double score = 0.0;
  for (int i = 0; i < nphrase; i++) score += hm_bm25_part(idf[i], freq[i], doclen, avgdl);
  return -1.0 * score;
}

#pragma endregion

#pragma region BM25 in SQL

/* A row's length is at least, in each column, one past the last offset a
 * phrase of the query was found at: HB_REACH_COLS columns' reach, kept by
 * hb_reach and summed by hb_reach_sum (a column past them adds nothing:
 * still a lower bound). */
#define HB_REACH_COLS 16
static void hb_reach(int *reach, int ic, int io) {
  if (ic >= 0 && ic < HB_REACH_COLS && io >= reach[ic]) reach[ic] = io + 1;
}

static double hb_reach_sum(const int *reach) {
  int sum = 0;
  for (int i = 0; i < HB_REACH_COLS; i++) sum += reach[i];
  return (double)sum;
}

/* heap_bm25_row(fts_table [, weight of column 0, weight of column 1, ...]) is
 * an FTS5 auxiliary function: the current row's BM25 inputs as a blob (see
 * HM_BM25_ROW_SIZE), each phrase's frequency weighted per column as bm25()
 * weighs it.  The length it records is a lower bound (the distinct positions
 * the query's phrases occupy, or where they reach in each column if that
 * says more: hb_reach): reading every row's exact length from FTS5
 * would cost as much as the match itself, so heap_bm25_top() reads it only
 * for the rows that can still reach the top. */
static void heap_bm25_row(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                          int nval, sqlite3_value **val) {
  sqlite3_api = api->xUserData(fts); /* the routines of the library that called */
  HM_API_HERE;
  unsigned char buf[HM_BM25_ROW_SIZE(HM_BM25_MAX_PHRASES)];
  double freq[HM_BM25_MAX_PHRASES];
  unsigned char hit[HM_BM25_MAX_PHRASES];
  int ninst = 0, npos = 0, lastcol = -1, lastoff = -1, reach[HB_REACH_COLS] = {0};
  int nphrase = api->xPhraseCount(fts);
  if (nphrase > HM_BM25_MAX_PHRASES) {
    hq_result_err(ctx, "heap_bm25_row", "too many phrases in the query");
    return;
  }
  for (int i = 0; i < nval; i++) { /* (hq_is_number, with this function's API pointer) */
    int t = sqlite3_value_type(val[i]);
    if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
      hq_result_err(ctx, "heap_bm25_row", "column weights must be numbers");
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
      hb_reach(reach, ic, io);
      lastcol = ic;
      lastoff = io;
    }
  }
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  u32 n = (u32)nphrase;
  double lower = hb_reach_sum(reach);
  if (lower < npos) lower = (double)npos;
  memcpy(buf, HM_BM25_MAGIC, 4);
  memcpy(buf + 4, &n, 4);
  memcpy(buf + 8, &lower, 8);
  memcpy(buf + 16, freq, n * sizeof(double));
  memcpy(buf + 16 + n * sizeof(double), hit, n);
  sqlite3_result_blob(ctx, buf, HM_BM25_ROW_SIZE(nphrase), SQLITE_TRANSIENT);
}

/* heap_bm25_tail(fts_table, n [, weight of column 0, ...]): heap_bm25_row's
 * blob for the query's last n phrases only (1 <= n <= the query's phrases),
 * read phrase by phrase, so that a query naming other phrases first (recall's
 * pruned search: the formula, then every word of the question) costs per row
 * what its last n cost.  The length it records is the distinct positions
 * those n phrases occupy, or where they reach in each column if that says
 * more (hb_reach). */
static void heap_bm25_tail(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx,
                           int nval, sqlite3_value **val) {
  sqlite3_api = api->xUserData(fts); /* the routines of the library that called */
  HM_API_HERE;
  unsigned char buf[HM_BM25_ROW_SIZE(HM_BM25_MAX_PHRASES)];
  double freq[HM_BM25_MAX_PHRASES];
  u64 pos[256];
  int npos = 0, spill = 0, most = 0, reach[HB_REACH_COLS] = {0};
  int total = api->xPhraseCount(fts);
  if (nval < 1 || sqlite3_value_type(val[0]) != SQLITE_INTEGER ||
      sqlite3_value_int64(val[0]) < 1 || sqlite3_value_int64(val[0]) > total ||
      sqlite3_value_int64(val[0]) > HM_BM25_MAX_PHRASES) {
    hq_result_err(ctx, "heap_bm25_tail", "n must be an integer from 1 to the query's phrases "
                                         "(at most 128)");
    return;
  }
  for (int i = 1; i < nval; i++) { /* (hq_is_number, with this function's API pointer) */
    int t = sqlite3_value_type(val[i]);
    if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
      hq_result_err(ctx, "heap_bm25_tail", "column weights must be numbers");
      return;
    }
  }
  int n = sqlite3_value_int(val[0]);
  memset(buf, 0, sizeof buf);
  for (int j = 0; j < n; j++) {
    Fts5PhraseIter it;
    int ic = -1, io = -1, tf = 0;
    int rc = api->xPhraseFirst(fts, total - n + j, &it, &ic, &io);
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(ctx, rc);
      return;
    }
    freq[j] = 0.0;
    for (; ic >= 0; api->xPhraseNext(fts, &it, &ic, &io), tf++) {
      freq[j] += nval > ic + 1 ? sqlite3_value_double(val[ic + 1]) : 1.0;
      if (npos < (int)(sizeof pos / sizeof pos[0])) pos[npos++] = (u64)ic << 32 | (u32)io;
      else spill = 1;
      hb_reach(reach, ic, io);
    }
    if (tf) buf[16 + n * sizeof(double) + j] = 1;
    if (tf > most) most = tf;
  }
  /* distinct positions: few instances a row, sorted by insertion */
  for (int i = 1; i < npos; i++)
    for (int k = i; k > 0 && pos[k - 1] > pos[k]; k--) {
      u64 x = pos[k];
      pos[k] = pos[k - 1];
      pos[k - 1] = x;
    }
  int distinct = 0;
  for (int i = 0; i < npos; i++) distinct += i == 0 || pos[i] != pos[i - 1];
  u32 un = (u32)n;
  double lower = spill ? (double)most : (double)distinct, reached = hb_reach_sum(reach);
  if (lower < reached) lower = reached;
  memcpy(buf, HM_BM25_MAGIC, 4);
  memcpy(buf + 4, &un, 4);
  memcpy(buf + 8, &lower, 8);
  memcpy(buf + 16, freq, (size_t)n * sizeof(double));
  sqlite3_result_blob(ctx, buf, HM_BM25_ROW_SIZE(n), SQLITE_TRANSIENT);
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
    hq_result_err(ctx, "heap_bm25_top",
                  "takes (rowid, heap_bm25_row(fts), docs, tokens, n, fts table name)");
    goto fail;
  }
  const unsigned char *b = sqlite3_value_blob(argv[1]);
  int len = sqlite3_value_bytes(argv[1]);
  u32 np = 0;
  if (len >= 16) memcpy(&np, b + 4, 4);
  if (len < 16 || memcmp(b, HM_BM25_MAGIC, 4) != 0 || np > HM_BM25_MAX_PHRASES ||
      len != HM_BM25_ROW_SIZE((int)np)) {
    hq_result_err(ctx, "heap_bm25_top", "the second argument is not a heap_bm25_row() blob");
    goto fail;
  }
  if (!acc->started) {
    acc->started = 1;
    for (int i = 2; i < 5; i++)
      if (sqlite3_value_type(argv[i]) != SQLITE_NULL && !hq_is_number(argv[i])) {
        hq_result_err(ctx, "heap_bm25_top", "docs, tokens and n must be numbers");
        goto fail;
      }
    acc->docs = sqlite3_value_double(argv[2]);
    acc->tokens = sqlite3_value_double(argv[3]);
    acc->limit = sqlite3_value_int64(argv[4]);
    if (!(acc->limit >= 1 && acc->limit <= 100000) || !isfinite(acc->docs) ||
        !isfinite(acc->tokens)) {
      hq_result_err(ctx, "heap_bm25_top", "n must be from 1 to 100000, docs and tokens finite");
      goto fail;
    }
    const char *t = (const char *)sqlite3_value_text(argv[5]);
    if (sqlite3_value_type(argv[5]) != SQLITE_TEXT || !t || !*t || strlen(t) > 200) {
      hq_result_err(ctx, "heap_bm25_top", "the FTS5 table name must be text");
      goto fail;
    }
    acc->table = sqlite3_mprintf("%s", t);
    acc->nphrase = (int)np;
    acc->nhit = sqlite3_malloc64(sizeof(i64) * (np ? np : 1));
    if (!acc->table || !acc->nhit) { sqlite3_result_error_nomem(ctx); goto fail; }
    memset(acc->nhit, 0, sizeof(i64) * (np ? np : 1));
  } else if ((int)np != acc->nphrase) {
    hq_result_err(ctx, "heap_bm25_top", "rows of different queries");
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

/* A %_docsize blob's row length (its columns' varints summed) into *out: 1,
 * or 0 when a varint is cut (damage).
 * b, n: the blob and its bytes. */
static int hm_docsize(const unsigned char *b, int n, double *out) {
  double total = 0.0;
  for (int i = 0; i < n;) {
    u64 v;
    int used = hm_varint(b + i, n - i, &v);
    if (!used) return 0;
    total += (double)v;
    i += used;
  }
  *out = total;
  return 1;
}

/* The exact length of a row (all columns), from the table's %_docsize row,
 * through one blob handle moved from row to row.
 * table: the FTS5 table; blob: the handle kept between calls; rowid: the row;
 * *out: its length. */
static int hb_doclen(sqlite3 *db, const char *table, sqlite3_blob **blob, i64 rowid,
                     double *out) {
  HM_API_HERE; /* (once a row) */
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
  return hm_docsize(buf, n, out) ? SQLITE_OK : SQLITE_CORRUPT;
}

/* Whether a row may rank (recall's filters): 0 or an SQLite code, *ok 1 or 0. */
typedef int (*hm_bm25_pass)(void *ctx, i64 rowid, int *ok);

/* The n best of rows (best first, ties by rowid) into top (room for limit),
 * their count into *size.  Each row: its rowid, a lower bound of its length
 * (or, exact = 1, its length) and np weighted phrase frequencies; idf: each
 * phrase's.  Rows are scored at their shortest possible length first (every
 * idf is > 0, so a phrase's part only shrinks as the length grows), best
 * first, and a row's exact length is read from table's %_docsize (through
 * *blob, one handle moved from row to row), and whether it may rank asked of
 * pass (NULL: every row may), only while it can still reach the top.  0 or
 * an SQLite code.
 * table, blob: as hb_doclen's; lengths lower bounds in len (exact: as they
 * are); freq, idf, avgdl: the formula's inputs; pass, pctx: the filter and its
 * state (NULL: none). */
static int hb_bm25_rank(sqlite3 *db, const char *table, sqlite3_blob **blob,
                        i64 n,              /* rows */
                        int np,             /* phrases */
                        const i64 *rowid,   /* n */
                        const double *len,  /* n: lengths, or their lower bounds */
                        int exact,          /* len holds exact lengths */
                        const double *freq, /* n x np */
                        const double *idf,  /* np */
                        double avgdl,
                        hm_bm25_pass pass, void *pctx,
                        i64 limit, hm_scored *top, i64 *size) {
  HM_API_HERE; /* (called once a search; its loop reads a length a row) */
  int rc = SQLITE_OK;
  *size = 0;
  if (n <= 0 || limit <= 0) return SQLITE_OK;
  hm_scored *todo = sqlite3_malloc64((sqlite3_uint64)n * sizeof(hm_scored));
  if (!todo) return SQLITE_NOMEM;
  for (i64 k = 0; k < n; k++) {
    todo[k].score = hm_bm25(np, &freq[k * np], idf, len[k], avgdl);
    todo[k].rowid = rowid[k];
    todo[k].k = k;
  }
  for (i64 i = n / 2 - 1; i >= 0; i--) hm_heap_down(todo, n, i, 0);
  /* exact scores, in that order, until no remaining row can reach the top */
  for (i64 left = n; left > 0 && rc == SQLITE_OK; left--) {
    hm_scored best = todo[0];
    if (*size == limit && !hm_scored_before(&best, &top[0])) break;
    todo[0] = todo[left - 1];
    if (left > 1) hm_heap_down(todo, left - 1, 0, 0);
    double dl = len[best.k];
    if (!exact) rc = hb_doclen(db, table, blob, best.rowid, &dl);
    if (rc != SQLITE_OK) break;
    hm_scored s = {.score = hm_bm25(np, &freq[best.k * np], idf, dl, avgdl),
                   .rowid = best.rowid, .k = best.k};
    /* the filters are asked only of a row that would enter the top: most
     * rows popped here score too low once their length is exact */
    if (*size == limit && !hm_scored_before(&s, &top[0])) continue;
    int ok = 1;
    if (pass && ((rc = pass(pctx, best.rowid, &ok)) != SQLITE_OK || !ok)) continue;
    if (*size < limit) {
      top[(*size)++] = s;
      hm_heap_up(top, *size - 1, 1);
    } else if (hm_scored_before(&s, &top[0])) {
      top[0] = s;
      hm_heap_down(top, *size, 0, 1);
    }
  }
  sqlite3_free(todo);
  if (rc == SQLITE_OK) qsort(top, (size_t)*size, sizeof(hm_scored), hm_scored_cmp);
  return rc;
}

/* A ranking as heap_bm25_top gives it: [[rowid, bm25], ...] (NULL: no memory). */
static char *hb_bm25_json(const hm_scored *top, i64 size) {
  sqlite3_str *str = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(str, 1, '[');
  for (i64 i = 0; i < size; i++)
    sqlite3_str_appendf(str, "%s[%lld,%!.17g]", i ? "," : "", (long long)top[i].rowid,
                        top[i].score);
  sqlite3_str_appendchar(str, 1, ']');
  if (sqlite3_str_errcode(str) != SQLITE_OK) {
    sqlite3_free(sqlite3_str_finish(str));
    return NULL;
  }
  return sqlite3_str_finish(str);
}

/* The match set's top: acc's rows (those pass lets through, all when it is
 * NULL) ranked with BM25 over a collection of acc->docs documents of
 * acc->tokens tokens, each phrase's IDF from the rows holding it (every row
 * counts, let through or not).  Missing or stale counts fall back to the
 * rows' own: fewer documents than rows count the rows, no tokens take the
 * rows' mean length (every length read).  top has room for acc->limit rows.
 * acc: the match set's rows; pass, pctx: the filter and its state; blob:
 * hb_doclen's handle; top, *size: the rows kept, best first. */
static int hm_bm25_top_of(sqlite3 *db, hm_bm25_acc *acc, hm_bm25_pass pass, void *pctx,
                          sqlite3_blob **blob, hm_scored *top, i64 *size) {
  int np = acc->nphrase, rc = SQLITE_OK;
  i64 n = acc->n;
  double idf[HM_BM25_MAX_PHRASES];
  double docs = acc->docs, tokens = acc->tokens;
  *size = 0;
  if (n == 0) return SQLITE_OK;
  /* stale or missing namespace counts: the rows are a lower bound */
  if (docs < (double)n) docs = (double)n;
  int exact = 0; /* acc->lower holds exact lengths, not bounds */
  if (tokens <= 0.0) {
    /* no statistics: the match set's mean length stands in (every length read) */
    double sum = 0.0;
    exact = 1;
    for (i64 k = 0; k < n && rc == SQLITE_OK; k++) {
      rc = hb_doclen(db, acc->table, blob, acc->rowid[k], &acc->lower[k]);
      sum += acc->lower[k];
    }
    if (rc != SQLITE_OK) return rc;
    tokens = sum / (double)n * docs;
  }
  double avgdl = tokens / docs;
  if (!(avgdl > 0.0)) avgdl = 1.0;
  for (int i = 0; i < np; i++) idf[i] = hm_bm25_idf(docs, (double)acc->nhit[i]);
  return hb_bm25_rank(db, acc->table, blob, n, np, acc->rowid, acc->lower, exact, acc->freq,
                      idf, avgdl, pass, pctx, acc->limit, top, size);
}

static void hb_bm25_acc_free(hm_bm25_acc *acc) {
  sqlite3_free(acc->table);
  sqlite3_free(acc->rowid);
  sqlite3_free(acc->lower);
  sqlite3_free(acc->freq);
  sqlite3_free(acc->nhit);
}

static void heap_bm25_top_final(sqlite3_context *ctx) {
  HM_API_HERE;
  hm_bm25_acc *acc = sqlite3_aggregate_context(ctx, 0);
  hm_scored *top = NULL;
  sqlite3_blob *blob = NULL;
  char *out = NULL;
  i64 size = 0;
  if (!acc || acc->n == 0) {
    if (!acc || !acc->failed) sqlite3_result_text(ctx, "[]", -1, SQLITE_STATIC);
    goto cleanup;
  }
  if (acc->failed) goto cleanup;
  i64 limit = acc->limit < acc->n ? acc->limit : acc->n;
  top = sqlite3_malloc64((sqlite3_uint64)limit * sizeof(hm_scored));
  if (!top) { sqlite3_result_error_nomem(ctx); goto cleanup; }
  acc->limit = limit;
  int rc = hm_bm25_top_of(sqlite3_context_db_handle(ctx), acc, NULL, NULL, &blob, top, &size);
  if (rc != SQLITE_OK) {
    char *m = sqlite3_mprintf("heap_bm25_top: cannot read the row lengths of %s (%s)",
                              acc->table, sqlite3_errstr(rc));
    if (m) sqlite3_result_error(ctx, m, -1);
    else sqlite3_result_error_nomem(ctx);
    sqlite3_free(m);
    goto cleanup;
  }
  out = hb_bm25_json(top, size);
  if (!out) { sqlite3_result_error_nomem(ctx); goto cleanup; }
  sqlite3_result_text(ctx, out, -1, sqlite3_free);
  out = NULL;
cleanup:
  if (acc) hb_bm25_acc_free(acc);
  if (blob) sqlite3_blob_close(blob);
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
  hm_counter *c = hq_user_data(ctx);
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

static void hb_counter_free(void *p) {
  hm_counter *c = p;
  if (c && c->inst) c->tok.xDelete(c->inst);
  sqlite3_free(c);
}

#pragma endregion

#pragma region the terms of a text: heap_terms

/* heap_terms(text): a table-valued function, one row (term, tf) per distinct
 * term FTS5 indexes for text in memories_fts's text column, with how many
 * times it occurs there: porter over unicode61 remove_diacritics 2, a token
 * cut at FTS5's 32,768 bytes, in byte order.  The bm25_terms triggers (schema
 * 10) keep each namespace's term statistics with it; it reads nothing but its
 * argument (innocuous), so the file's triggers may call it.
 *   SELECT term, tf FROM heap_terms('Flights to Lisbon; the flight');
 *   -> flight 2, lisbon 1, the 1, to 1 */

#define HM_FTS5_MAX_TOKEN 32768

typedef struct {
  sqlite3_vtab base;
  hm_stemmer *st; /* its tokenizer, and the SQLite library it was registered in */
} hb_terms_vtab;

/* every method of heap_terms and heap_bm25_terms that calls SQLite first sets
 * sqlite3_api to the routines of the library the module was registered in
 * (heapmem.c) */
#define HT_API(vt) (sqlite3_api = ((hb_terms_vtab *)(vt))->st->api)
#define HB_API(vt) (sqlite3_api = ((hb_vtab *)(vt))->st->api)

typedef struct {
  const char *p;
  int n;
} hb_terms_span;

typedef struct {
  sqlite3_vtab_cursor base;
  char *buf;       /* the tokens, back to back */
  i64 used, cap;
  i64 *tok;        /* each token: offset << 16 | length (lengths < 2^16) */
  int ntok, captok;
  hb_terms_span *term;   /* the distinct terms, sorted */
  int *tf;         /* how often each occurs */
  int nterm, capterm, i;
} hb_terms_cursor;

static int hb_terms_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err) {
  (void)argc; (void)argv; (void)err;
  sqlite3_api = ((hm_stemmer *)aux)->api;
  int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(term TEXT, tf INTEGER, text HIDDEN)");
  if (rc != SQLITE_OK) return rc;
  hb_terms_vtab *t = sqlite3_malloc64(sizeof *t);
  if (!t) return SQLITE_NOMEM;
  memset(t, 0, sizeof *t);
  t->st = aux;
  sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
  *out = &t->base;
  return SQLITE_OK;
}

static int hb_terms_disconnect(sqlite3_vtab *vt) {
  HT_API(vt); /* (hb_vtab too: its stemmer is in the same place) */
  sqlite3_free(vt);
  return SQLITE_OK;
}

/* text = ? is the argument (without one, xFilter says so). */
static int hb_terms_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  info->idxNum = 0;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn != 2) continue;
    if (!c->usable) return SQLITE_CONSTRAINT; /* wait until the text is known */
    if (c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    info->aConstraintUsage[i].argvIndex = 1;
    info->aConstraintUsage[i].omit = 1;
    info->idxNum = 1;
  }
  info->estimatedCost = info->idxNum ? 10 : 1e12;
  info->estimatedRows = 20;
  return SQLITE_OK;
}

static int hb_terms_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  HT_API(vt);
  hb_terms_cursor *c = sqlite3_malloc64(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static int hb_terms_close(sqlite3_vtab_cursor *cur) {
  HT_API(cur->pVtab);
  hb_terms_cursor *c = (hb_terms_cursor *)cur;
  sqlite3_free(c->buf);
  sqlite3_free(c->tok);
  sqlite3_free(c->term);
  sqlite3_free(c->tf);
  sqlite3_free(c);
  return SQLITE_OK;
}

/* (the longest token FTS5 keeps is 32,768 bytes: its offset takes the rest) */
static int hb_terms_token(void *p, int flags, const char *t, int n, int start, int end) {
  hb_terms_cursor *c = p;
  (void)flags; (void)start; (void)end;
  if (n <= 0) return SQLITE_OK;
  if (n > HM_FTS5_MAX_TOKEN) n = HM_FTS5_MAX_TOKEN;
  if (c->used + n > c->cap) {
    i64 cap = c->cap ? 2 * c->cap : 1024;
    while (cap < c->used + n) cap *= 2;
    char *b = sqlite3_realloc64(c->buf, (sqlite3_uint64)cap);
    if (!b) return SQLITE_NOMEM;
    c->buf = b;
    c->cap = cap;
  }
  if (c->ntok == c->captok) {
    int cap = c->captok ? 2 * c->captok : 64;
    i64 *k = sqlite3_realloc64(c->tok, (sqlite3_uint64)cap * sizeof *k);
    if (!k) return SQLITE_NOMEM;
    c->tok = k;
    c->captok = cap;
  }
  memcpy(c->buf + c->used, t, (size_t)n);
  c->tok[c->ntok++] = c->used << 16 | n;
  c->used += n;
  return SQLITE_OK;
}

static int hb_terms_cmp(const void *x, const void *y) {
  const hb_terms_span *a = x, *b = y;
  int r = memcmp(a->p, b->p, (size_t)(a->n < b->n ? a->n : b->n));
  return r ? r : (a->n > b->n) - (a->n < b->n);
}

/* One text's distinct terms and their frequencies, into c->term, c->tf and
 * c->nterm (sorted, as FTS5 reads the text column). */
static int hb_terms_read(hb_terms_cursor *c, hm_stemmer *st, const char *text, int len) {
  c->used = 0;
  c->ntok = c->nterm = c->i = 0;
  int rc = st->tok.xTokenize(st->inst, c, FTS5_TOKENIZE_DOCUMENT, text, len, hb_terms_token);
  if (rc != SQLITE_OK || c->ntok == 0) return rc;
  if (c->ntok > c->capterm) {
    sqlite3_free(c->term);
    sqlite3_free(c->tf);
    c->term = sqlite3_malloc64((sqlite3_uint64)c->ntok * sizeof *c->term);
    c->tf = sqlite3_malloc64((sqlite3_uint64)c->ntok * sizeof *c->tf);
    c->capterm = c->term && c->tf ? c->ntok : 0;
    if (!c->capterm) return SQLITE_NOMEM;
  }
  for (int j = 0; j < c->ntok; j++)
    c->term[j] = (hb_terms_span){.p = c->buf + (c->tok[j] >> 16), .n = (int)(c->tok[j] & 0xffff)};
  qsort(c->term, (size_t)c->ntok, sizeof *c->term, hb_terms_cmp);
  for (int j = 0; j < c->ntok; j++) {
    if (c->nterm && hb_terms_cmp(&c->term[c->nterm - 1], &c->term[j]) == 0) {
      c->tf[c->nterm - 1]++;
      continue;
    }
    c->term[c->nterm] = c->term[j];
    c->tf[c->nterm++] = 1;
  }
  return SQLITE_OK;
}

static int hb_terms_filter(sqlite3_vtab_cursor *cur, int idxNum, const char *idxStr, int argc,
                     sqlite3_value **argv) {
  (void)idxStr;
  hb_terms_cursor *c = (hb_terms_cursor *)cur;
  hb_terms_vtab *t = (hb_terms_vtab *)cur->pVtab;
  HT_API(t);
  c->ntok = c->nterm = c->i = 0;
  if (!idxNum || argc < 1) {
    sqlite3_free(t->base.zErrMsg);
    t->base.zErrMsg = sqlite3_mprintf("heap_terms: takes the text to read, as its argument: "
                                      "SELECT term, tf FROM heap_terms('Flights to Lisbon')");
    return SQLITE_ERROR;
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return SQLITE_OK;
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (!text) return SQLITE_NOMEM;
  return hb_terms_read(c, t->st, text, sqlite3_value_bytes(argv[0]));
}

static int hb_terms_next(sqlite3_vtab_cursor *cur) {
  ((hb_terms_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int hb_terms_eof(sqlite3_vtab_cursor *cur) {
  hb_terms_cursor *c = (hb_terms_cursor *)cur;
  return c->i >= c->nterm;
}

static int hb_terms_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  HT_API(cur->pVtab);
  hb_terms_cursor *c = (hb_terms_cursor *)cur;
  if (col == 0)
    sqlite3_result_text(ctx, c->term[c->i].p, c->term[c->i].n, SQLITE_TRANSIENT);
  else if (col == 1)
    sqlite3_result_int(ctx, c->tf[c->i]);
  return SQLITE_OK;
}

static int hb_terms_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
  *rowid = ((hb_terms_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static sqlite3_module hb_terms_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = hb_terms_connect,
    .xBestIndex = hb_terms_best_index,
    .xDisconnect = hb_terms_disconnect,
    .xDestroy = hb_terms_disconnect,
    .xOpen = hb_terms_open,
    .xClose = hb_terms_close,
    .xFilter = hb_terms_filter,
    .xNext = hb_terms_next,
    .xEof = hb_terms_eof,
    .xColumn = hb_terms_column,
    .xRowid = hb_terms_rowid,
};

/* heap_bm25_terms(first, last): bm25_terms' rows for the memories of seq
 * first to last, summed in C (namespace, term, docs, maxtf, minlen): what
 * add_many's batch and a migration add to the table in one statement, a row
 * per term rather than per term and memory.  It reads the memories table, so
 * a file's views and triggers cannot call it. */
typedef struct {
  sqlite3_vtab base;
  hm_stemmer *st; /* as hb_terms_vtab's (hb_terms_disconnect frees both) */
  sqlite3 *db;
} hb_vtab;

typedef struct {
  int ns;              /* its namespace: an index into the cursor's names */
  i64 off;             /* its term in the pool */
  int n;
  i64 docs, maxtf, minlen;
} hb_entry;

typedef struct {
  sqlite3_vtab_cursor base;
  hb_terms_cursor words;     /* one memory's terms */
  char *pool;          /* the terms and the namespaces' names, back to back */
  i64 used, cap;
  hb_entry *e;         /* the (namespace, term) rows */
  i64 n, cape;
  i64 *slot;           /* open addressing: 1 + an index into e, 0 empty */
  i64 nslot;
  i64 *name;           /* each namespace's name: its offset in the pool */
  int *namelen, nname, capname;
  i64 i;
} hb_cursor;

static int hb_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err) {
  (void)argc; (void)argv; (void)err;
  sqlite3_api = ((hm_stemmer *)aux)->api;
  int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(namespace TEXT, term TEXT, docs INTEGER, "
                                    "maxtf INTEGER, minlen INTEGER, first HIDDEN, last HIDDEN)");
  if (rc != SQLITE_OK) return rc;
  hb_vtab *t = sqlite3_malloc64(sizeof *t);
  if (!t) return SQLITE_NOMEM;
  memset(t, 0, sizeof *t);
  t->db = db;
  t->st = aux;
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  *out = &t->base;
  return SQLITE_OK;
}

/* first = ? and last = ? are the arguments, in that order (xFilter checks them). */
static int hb_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  int where[2] = {-1, -1};
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn != 5 && c->iColumn != 6) continue;
    if (!c->usable) return SQLITE_CONSTRAINT;
    if (c->op == SQLITE_INDEX_CONSTRAINT_EQ) where[c->iColumn - 5] = i;
  }
  info->idxNum = where[0] >= 0 && where[1] >= 0;
  if (info->idxNum)
    for (int j = 0; j < 2; j++) {
      info->aConstraintUsage[where[j]].argvIndex = j + 1;
      info->aConstraintUsage[where[j]].omit = 1;
    }
  info->estimatedCost = info->idxNum ? 1000 : 1e12;
  return SQLITE_OK;
}

static int hb_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  HB_API(vt);
  hb_cursor *c = sqlite3_malloc64(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static void hb_clear(hb_cursor *c) {
  sqlite3_free(c->words.buf);
  sqlite3_free(c->words.tok);
  sqlite3_free(c->words.term);
  sqlite3_free(c->words.tf);
  sqlite3_free(c->pool);
  sqlite3_free(c->e);
  sqlite3_free(c->slot);
  sqlite3_free(c->name);
  sqlite3_free(c->namelen);
  sqlite3_vtab_cursor base = c->base;
  memset(c, 0, sizeof *c);
  c->base = base;
}

static int hb_close(sqlite3_vtab_cursor *cur) {
  HB_API(cur->pVtab);
  hb_clear((hb_cursor *)cur);
  sqlite3_free(cur);
  return SQLITE_OK;
}

/* n bytes of p copied into the pool: their offset, or -1 out of memory. */
static i64 hb_keep(hb_cursor *c, const char *p, int n) {
  if (c->used + n > c->cap) {
    i64 cap = c->cap ? 2 * c->cap : 65536;
    while (cap < c->used + n) cap *= 2;
    char *b = sqlite3_realloc64(c->pool, (sqlite3_uint64)cap);
    if (!b) return -1;
    c->pool = b;
    c->cap = cap;
  }
  memcpy(c->pool + c->used, p, (size_t)n);
  c->used += n;
  return c->used - n;
}

/* The index of the namespace p[0..n) among the cursor's names (added). */
static int hb_name(hb_cursor *c, const char *p, int n) {
  for (int j = c->nname - 1; j >= 0; j--)
    if (c->namelen[j] == n && !memcmp(c->pool + c->name[j], p, (size_t)n)) return j;
  if (c->nname == c->capname) {
    int cap = c->capname ? 2 * c->capname : 8;
    i64 *a = sqlite3_realloc64(c->name, (sqlite3_uint64)cap * sizeof *a);
    if (a) c->name = a;
    int *b = sqlite3_realloc64(c->namelen, (sqlite3_uint64)cap * sizeof *b);
    if (b) c->namelen = b;
    if (!a || !b) return -1;
    c->capname = cap;
  }
  i64 off = hb_keep(c, p, n);
  if (off < 0) return -1;
  c->name[c->nname] = off;
  c->namelen[c->nname] = n;
  return c->nname++;
}

static u64 hb_hash(int ns, const char *p, int n) {
  u64 h = 1469598103934665603ULL ^ (u64)ns;
  for (int i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return h;
}

static int hb_grow(hb_cursor *c) {
  i64 nslot = c->nslot ? 2 * c->nslot : 4096;
  i64 *slot = sqlite3_malloc64((sqlite3_uint64)nslot * sizeof *slot);
  if (!slot) return SQLITE_NOMEM;
  memset(slot, 0, (size_t)nslot * sizeof *slot);
  for (i64 k = 0; k < c->n; k++) {
    u64 h = hb_hash(c->e[k].ns, c->pool + c->e[k].off, c->e[k].n);
    i64 s = (i64)(h & (u64)(nslot - 1));
    while (slot[s]) s = (s + 1) & (nslot - 1);
    slot[s] = k + 1;
  }
  sqlite3_free(c->slot);
  c->slot = slot;
  c->nslot = nslot;
  return SQLITE_OK;
}

/* One memory's terms counted into the (namespace, term) rows. */
static int hb_add(hb_cursor *c, int ns, i64 len) {
  for (int j = 0; j < c->words.nterm; j++) {
    const hb_terms_span *w = &c->words.term[j];
    if (2 * (c->n + 1) > c->nslot && hb_grow(c) != SQLITE_OK) return SQLITE_NOMEM;
    u64 h = hb_hash(ns, w->p, w->n);
    i64 s = (i64)(h & (u64)(c->nslot - 1));
    hb_entry *e = NULL;
    for (; c->slot[s]; s = (s + 1) & (c->nslot - 1)) {
      hb_entry *x = &c->e[c->slot[s] - 1];
      if (x->ns == ns && x->n == w->n && !memcmp(c->pool + x->off, w->p, (size_t)w->n)) {
        e = x;
        break;
      }
    }
    if (!e) {
      if (c->n == c->cape) {
        i64 cap = c->cape ? 2 * c->cape : 1024;
        hb_entry *grown = sqlite3_realloc64(c->e, (sqlite3_uint64)cap * sizeof *grown);
        if (!grown) return SQLITE_NOMEM;
        c->e = grown;
        c->cape = cap;
      }
      i64 off = hb_keep(c, w->p, w->n);
      if (off < 0) return SQLITE_NOMEM;
      e = &c->e[c->n];
      *e = (hb_entry){.ns = ns, .off = off, .n = w->n, .minlen = len};
      c->slot[s] = ++c->n;
    }
    e->docs++;
    if (c->words.tf[j] > e->maxtf) e->maxtf = c->words.tf[j];
    if (len < e->minlen) e->minlen = len;
  }
  return SQLITE_OK;
}

static int hb_filter(sqlite3_vtab_cursor *cur, int idxNum, const char *idxStr, int argc,
                     sqlite3_value **argv) {
  (void)idxStr;
  hb_cursor *c = (hb_cursor *)cur;
  hb_vtab *t = (hb_vtab *)cur->pVtab;
  HB_API(t);
  hb_clear(c);
  if (!idxNum || argc < 2 || sqlite3_value_type(argv[0]) != SQLITE_INTEGER ||
      sqlite3_value_type(argv[1]) != SQLITE_INTEGER) {
    sqlite3_free(t->base.zErrMsg);
    t->base.zErrMsg = sqlite3_mprintf("heap_bm25_terms: takes the first and the last seq of "
                                      "the memories to read, as integers: SELECT * FROM "
                                      "heap_bm25_terms(1, 1000)");
    return SQLITE_ERROR;
  }
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(t->db, "SELECT namespace, text, ntok FROM memories "
                                     "WHERE seq BETWEEN ?1 AND ?2", -1, &st, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_free(t->base.zErrMsg);
    t->base.zErrMsg = sqlite3_mprintf("heap_bm25_terms: %s", sqlite3_errmsg(t->db));
    return rc;
  }
  sqlite3_bind_value(st, 1, argv[0]);
  sqlite3_bind_value(st, 2, argv[1]);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *ns = (const char *)sqlite3_column_text(st, 0);
    int nsn = sqlite3_column_bytes(st, 0);
    const char *text = (const char *)sqlite3_column_text(st, 1);
    int len = sqlite3_column_bytes(st, 1);
    if (!ns || !text) { rc = SQLITE_NOMEM; break; }
    int k = hb_name(c, ns, nsn);
    if (k < 0 || (rc = hb_terms_read(&c->words, t->st, text, len)) != SQLITE_OK ||
        (rc = hb_add(c, k, sqlite3_column_int64(st, 2))) != SQLITE_OK) {
      rc = k < 0 ? SQLITE_NOMEM : rc;
      break;
    }
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int hb_next(sqlite3_vtab_cursor *cur) {
  ((hb_cursor *)cur)->i++;
  return SQLITE_OK;
}

static int hb_eof(sqlite3_vtab_cursor *cur) {
  hb_cursor *c = (hb_cursor *)cur;
  return c->i >= c->n;
}

static int hb_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col) {
  HB_API(cur->pVtab);
  hb_cursor *c = (hb_cursor *)cur;
  const hb_entry *e = &c->e[c->i];
  switch (col) {
  case 0:
    sqlite3_result_text(ctx, c->pool + c->name[e->ns], c->namelen[e->ns], SQLITE_TRANSIENT);
    break;
  case 1: sqlite3_result_text(ctx, c->pool + e->off, e->n, SQLITE_TRANSIENT); break;
  case 2: sqlite3_result_int64(ctx, e->docs); break;
  case 3: sqlite3_result_int64(ctx, e->maxtf); break;
  case 4: sqlite3_result_int64(ctx, e->minlen); break;
  default: break;
  }
  return SQLITE_OK;
}

static int hb_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *rowid) {
  *rowid = ((hb_cursor *)cur)->i + 1;
  return SQLITE_OK;
}

static sqlite3_module hb_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = hb_connect,
    .xBestIndex = hb_best_index,
    .xDisconnect = hb_terms_disconnect,
    .xDestroy = hb_terms_disconnect,
    .xOpen = hb_open,
    .xClose = hb_close,
    .xFilter = hb_filter,
    .xNext = hb_next,
    .xEof = hb_eof,
    .xColumn = hb_column,
    .xRowid = hb_rowid,
};

#pragma endregion

#pragma region the pruned top n: bounds, the first threshold, the formula

/*
 * heap_recall's BM25 top N (recall.c, hr_lexical) need not score every row
 * that holds a query word.  Each phrase has a bound on what it can add to
 * one row's score: its IDF times its part at the highest frequency and the
 * shortest row any of the namespace's rows holding it has (bm25_terms keeps
 * both, with the exact document count; BM25's part grows with the frequency
 * and shrinks with the length).  A row whose phrases' bounds sum to less
 * than a threshold t scores less than t.  So once n rows are known to score
 * t or more, only the rows holding a set of phrases whose bounds reach t can
 * still enter the top n: a boolean expression over the phrases (the
 * formula), which FTS5 evaluates by moving each phrase's iterator to the
 * next row its siblings could match, never reading what an AND rules out.
 * This is block-max WAND's test done as a query: FTS5 keeps no per-block
 * bounds, so the bound is the namespace's, and the skipping is FTS5's own.
 */

/* One query phrase as the pruned search sees it. */
typedef struct {
  const char *word;  /* as heap_match quotes it */
  int len;
  double df;         /* rows of the namespace holding it */
  double idf;
  double ub;         /* the most it can add to one row's score */
  double w;          /* what it adds to a row of average length holding it once */
} hm_bm25_phrase;

/* The most a phrase of this idf adds to a row's score, given the highest
 * frequency and the shortest length of the rows that hold it, a little over
 * (so that no rounding puts a row's exact part above it). */
static double hm_bm25_bound(double idf, double maxtf, double minlen, double avgdl) {
  double part = (maxtf * (HM_BM25_K1 + 1.0)) /
                (maxtf + HM_BM25_K1 * (1.0 - HM_BM25_B + HM_BM25_B * minlen / avgdl));
  return idf * part * (1.0 + 1e-9) + 1e-12;
}

/* The threshold to try first: about the highest t such that `want` rows
 * reach t if each held each phrase at random (in df / docs of the rows) and
 * scored its typical part w.  Only a guess: any t gives the exact top n
 * (recall.c tries again lower when fewer than n rows reach it), a good one
 * in one round.  0 when no t is expected to have `want` rows. */
#define HM_BM25_GUESS_STEPS 256
static double hm_bm25_guess(int m, const hm_bm25_phrase *p, double docs, double want) {
  double total = 0.0;
  for (int i = 0; i < m; i++) total += p[i].w;
  if (!(total > 0.0) || !(docs > 0.0)) return 0.0;
  double step = total / HM_BM25_GUESS_STEPS;
  double prob[HM_BM25_GUESS_STEPS + HM_MAX_QUERY_TERMS + 1];
  int top = 0;
  memset(prob, 0, sizeof prob);
  prob[0] = 1.0;
  for (int i = 0; i < m; i++) {
    int k = (int)(p[i].w / step + 0.5);
    double q = p[i].df / docs;
    if (q > 1.0) q = 1.0;
    for (int b = top; b >= 0; b--) {
      prob[b + k] += prob[b] * q;
      if (k) prob[b] *= 1.0 - q;
    }
    top += k;
  }
  double tail = 0.0;
  for (int b = top; b > 0; b--) {
    tail += prob[b];
    if (tail * docs >= want) return b * step;
  }
  return 0.0;
}

/* The formula for rows holding phrases i.. (p sorted by ub, highest first;
 * rest[i] the sum of ub from i on) whose bounds sum to t or more, appended
 * to out: 0 when no row can (nothing appended), 1 when every row can (t <=
 * 0), 2 when an expression was appended, -1 out of memory.  Past `depth`
 * phrases named on one path, the rest of that path becomes "any phrase that
 * could still be the next one" (more rows than needed, never fewer): with
 * depth 0 the formula is MaxScore's set of essential phrases.  *refs counts
 * the phrases named; past cap, 3: too long (out then holds a part of it).
 * m: how many phrases p holds; refs: the phrases named so far, against cap. */
static int hb_bm25_formula(const hm_bm25_phrase *p, const double *rest, int m, int i, double t,
                           int depth, int cap, int *refs, sqlite3_str *out) {
  if (*refs > cap) return 3;
  if (t <= 0.0) return 1;
  if (i >= m || rest[i] < t) return 0;
  if (depth <= 0) { /* a row here holds a phrase j >= i with rest[j] >= t */
    for (int j = i; j < m && rest[j] >= t; j++)
      sqlite3_str_appendf(out, "%s\"%.*s\"", j > i ? " OR " : "", p[j].len, p[j].word);
    for (int j = i; j < m && rest[j] >= t; j++) (*refs)++;
    return 2;
  }
  sqlite3_str *with = sqlite3_str_new(NULL), *without = sqlite3_str_new(NULL);
  (*refs)++;
  int a = hb_bm25_formula(p, rest, m, i + 1, t - p[i].ub, depth - 1, cap, refs, with);
  int b = a == 3 ? 3 : hb_bm25_formula(p, rest, m, i + 1, t, depth, cap, refs, without);
  char *wa = sqlite3_str_finish(with), *wb = sqlite3_str_finish(without);
  int r = 2;
  if (a < 0 || b < 0 || (a == 2 && !wa) || (b == 2 && !wb)) r = -1;
  else if (a == 3 || b == 3) r = 3;
  else if (a == 0 && b == 0) r = 0;
  else if (b == 1) r = 1;
  else {
    if (a == 1) sqlite3_str_appendf(out, "\"%.*s\"", p[i].len, p[i].word);
    else if (a == 2) sqlite3_str_appendf(out, "(\"%.*s\" AND (%s))", p[i].len, p[i].word, wa);
    if (b == 2) sqlite3_str_appendf(out, "%s%s", a ? " OR " : "", wb);
  }
  sqlite3_free(wa);
  sqlite3_free(wb);
  return r;
}

#pragma endregion
