/*
 * feedback.c: feedback as one SQL call, and the robust pooled layer it keeps.
 * Relies on: score.c (the config fields' table), sqlfuncs.c (hq_is_number,
 * hm_repr, hq_json_string), call.c (hm_conn, hc_ctx and its statement
 * helpers), recall.c (hr_now, the recall's statements) and store.c's
 * hs_check_store (declared in recall.c); heap_credit, heap_fold
 * (sqlfuncs.c) and heap_attribute (attribute.c) run inside its statements.
 * store.c reads its arguments with hf_ids and hf_namespace.
 *
 *   SELECT heap_feedback(recall_id, used [, ignored [, now [, namespace [, config
 *                        [, autotune]]]]]);
 *   SELECT heap_answer(recall_id, answer [, now [, namespace [, config [, autotune]]]]);
 *   SELECT heap_rebuild_pool([features]);
 *
 * used and ignored are JSON arrays of memory ids; ignored NULL means every
 * other memory the recall showed counts as ignored, '[]' that the rest stay
 * unjudged.  now defaults to the current time; namespace, when given, must
 * be the recall's (a door serving one tenant passes it).  heap_feedback and
 * heap_answer return JSON: the recall judged, the ids judged used and
 * ignored, how many of the namespace's links changed, and (heap_answer) each
 * shown memory's verdict as heap_attribute gives it, and auto_tune: null, or
 * what auto-tune did: the report (or error) of the tune this call's step
 * ended, else null (tune.c: autotune 1, the default, claims the points 30,
 * 60, 120, ... of judged recalls and runs each point's tune in steps, one
 * after each feedback; 0 only counts them), and claimed: the point this call
 * claimed, or null.
 * The feedback runs inside one savepoint: an error writes nothing; the
 * auto-tune after it in another, whose failure is in the result.
 *
 * The pooled layer ('*' rows) is a trimmed sum of the namespaces' own rows
 * (schema 4): each counts at most `cap` observations, nothing is pooled until
 * `min` namespaces back a feature, and the `trim` lowest and highest rates of
 * use count at the nearest kept rate.  Feedback updates it in place where the
 * namespace's place among the others cannot have changed, reworks a row from
 * the rows around its trim boundaries where it can (one indexed read), and
 * works a feature out in full otherwise (heapmem.learning replays the same
 * rules for check() and import).
 */

#pragma region feedback


typedef struct {
  double cap;
  int trim, least;
} hf_pool;

static double hf_rate(double a, double b) { return a + b > 0 ? a / (a + b) : -1.0; }

/* A row's counts a, b capped at cap observations in all, into *ca, *cb. */
static void hf_cap(double a, double b, double cap, double *ca, double *cb) {
  double s = a + b > cap ? cap / (a + b) : 1.0;
  *ca = a * s;
  *cb = b * s;
}

/* Capped counts ca, cb moved to a rate of use `rate`, into *sa, *sb (the
 * share a trimmed row has at a boundary rate). */
static void hf_at(double ca, double cb, double rate, double *sa, double *sb) {
  *sa = (ca + cb) * rate;
  *sb = (ca + cb) * (1 - rate);
}

/* The store's pool settings, as schema.pool_settings reads them. */
static int hf_pool_read(hc_ctx *x, hf_pool *p) {
  double cap = HM_POOL_CAP, least = HM_POOL_MIN, trim = HM_POOL_TRIM;
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT j.key, j.value, j.type FROM heapmem_meta AS m, "
                         "json_each(m.value) AS j WHERE m.key = '" HM_META_POOL "' "
                         "AND json_valid(m.value) "
                         "AND json_type(m.value) = 'object'", &st);
  if (rc) return rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(st, 0);
    const char *type = (const char *)sqlite3_column_text(st, 2);
    double v = sqlite3_column_double(st, 1);
    if (!k || !type || (strcmp(type, "integer") && strcmp(type, "real"))) continue;
    if (!(v >= 0) || !isfinite(v)) continue;
    if (!strcmp(k, "cap")) cap = v;
    else if (!strcmp(k, "min")) least = floor(v);
    else if (!strcmp(k, "trim")) trim = floor(v);
  }
  hc_done(x, st);
  if (rc != SQLITE_DONE) return hc_sqlfail(x, rc);
  if (trim > 1e6) trim = 1e6;
  if (least > 1e6) least = 1e6;
  p->cap = cap > 0 ? cap : HM_POOL_CAP;
  p->trim = (int)trim;
  p->least = (int)least > 2 * p->trim + 1 ? (int)least : 2 * p->trim + 1;
  return SQLITE_OK;
}

/* -- one feature's rows ------------------------------------------------------------ */

typedef struct {
  char *ns;
  double a, b, pa, pb; /* own counts, and its share of the pooled row */
  i64 n;
} hf_row;

typedef struct {
  hf_row *v;
  int n, cap;
} hf_rows;

static void hf_rows_free(hf_rows *r) {
  for (int i = 0; i < r->n; i++) sqlite3_free(r->v[i].ns);
  sqlite3_free(r->v);
  r->v = NULL;
  r->n = r->cap = 0;
}

/* A namespace's row of a feature pushed onto r: ns, its counts a, b, its
 * share of the pooled row pa, pb and its observations n. */
static int hf_rows_push(hc_ctx *x, hf_rows *r, const char *ns, double a, double b, double pa,
                        double pb, i64 n) {
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 16;
    hf_row *v = sqlite3_realloc64(r->v, (sqlite3_uint64)cap * sizeof *v);
    if (!v) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    r->v = v;
    r->cap = cap;
  }
  hf_row *w = &r->v[r->n];
  w->ns = sqlite3_mprintf("%s", ns ? ns : "");
  if (!w->ns) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  w->a = a; w->b = b; w->pa = pa; w->pb = pb; w->n = n;
  r->n++;
  return SQLITE_OK;
}

/* The order the trimming goes by: rate of use, ties by namespace. */
static int hf_order(const void *x, const void *y) {
  const hf_row *a = x, *b = y;
  double ra = hf_rate(a->a, a->b), rb = hf_rate(b->a, b->b);
  if (ra < rb) return -1;
  if (ra > rb) return 1;
  return strcmp(a->ns, b->ns);
}

static int hf_order_desc(const void *x, const void *y) { return hf_order(y, x); }

/* The links-only prior's counts of feature f, if any (heapmem.priors).
 * st: hf_sql_prior, prepared by the caller; *a, *b, *n: its counts; *has: 1
 * when there is one. */
static int hf_prior(hc_ctx *x, sqlite3_stmt *st, const char *f, double *a, double *b, i64 *n,
                    int *has) {
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, f, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  *has = 0;
  if (rc == SQLITE_ROW) {
    *has = 1;
    *a = sqlite3_column_double(st, 0);
    *b = sqlite3_column_double(st, 1);
    *n = sqlite3_column_int64(st, 2);
    rc = sqlite3_step(st);
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

static const char hf_sql_prior[] =
    "SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'), "
    "json_extract(j.value, '$[2]') FROM heapmem_meta AS m, json_each(m.value) AS j "
    "WHERE m.key = '" HM_META_LINKS_PRIOR "' AND json_valid(m.value) "
    "AND json_type(m.value) = 'object' "
    "AND j.key = ?1 AND json_array_length(j.value) = 3";

static const char *hf_qtype_of(const char *f, int *len) {
  const char *slash = strchr(f, '/');
  *len = slash ? (int)(slash - f) : 0;
  return f;
}

/* Run st (hf_rebuild's INSERT of a pooled row, or feedback's upsert adding
 * to one) with a pooled row's values: the feature, its question type, alpha,
 * beta, n, support, and the kept rates (NULL while nothing is pooled).
 * f: the feature; a, b, n: the pooled counts; support: how many namespaces back
 * it; has_rates, lo, hi: the kept rates. */
static int hf_pooled_row(hc_ctx *x, sqlite3_stmt *st, const char *f, double a, double b, i64 n,
                         i64 support, int has_rates, double lo, double hi) {
  int qlen;
  hf_qtype_of(f, &qlen);
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, f, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, f, qlen, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, a);
  sqlite3_bind_double(st, 4, b);
  sqlite3_bind_int64(st, 5, n);
  sqlite3_bind_int64(st, 6, support);
  if (has_rates) {
    sqlite3_bind_double(st, 7, lo);
    sqlite3_bind_double(st, 8, hi);
  } else {
    sqlite3_bind_null(st, 7);
    sqlite3_bind_null(st, 8);
  }
  return hc_exec(x, st);
}

/* Work feature f's pooled row and every namespace's share of it out again
 * from its rows (sorted by namespace) and its prior.
 * p: the pool settings; prior, set_share, insert_pooled: the statements that
 * read the prior, write a namespace's share and insert the pooled row. */
static int hf_pool_feature(hc_ctx *x, const char *f, hf_rows *rows, const hf_pool *p,
                           sqlite3_stmt *prior, sqlite3_stmt *set_share,
                           sqlite3_stmt *insert_pooled) {
  double pa0 = 0, pb0 = 0;
  i64 pn = 0;
  int has_prior = 0;
  int rc = hf_prior(x, prior, f, &pa0, &pb0, &pn, &has_prior);
  if (rc) return rc;
  if (rows->n == 0 && !has_prior) return SQLITE_OK;
  /* the rows with evidence, in the trimming's order, with their capped counts */
  int k = 0;
  hf_row *sorted = sqlite3_malloc64((sqlite3_uint64)(rows->n ? rows->n : 1) * sizeof *sorted);
  double *sa_of = sqlite3_malloc64((sqlite3_uint64)(rows->n ? rows->n : 1) * 2 * sizeof(double));
  if (!sorted || !sa_of) {
    sqlite3_free(sorted);
    sqlite3_free(sa_of);
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  for (int i = 0; i < rows->n; i++) {
    sa_of[2 * i] = sa_of[2 * i + 1] = 0.0;
    if (rows->v[i].a + rows->v[i].b > 0) sorted[k++] = rows->v[i];
  }
  qsort(sorted, (size_t)k, sizeof *sorted, hf_order);
  double sa = 0, sb = 0, lo = 0, hi = 0;
  int pooled = k >= p->least;
  if (pooled) {
    lo = hf_rate(sorted[p->trim].a, sorted[p->trim].b);
    hi = hf_rate(sorted[k - 1 - p->trim].a, sorted[k - 1 - p->trim].b);
    for (int i = 0; i < k; i++) {
      double ca, cb;
      hf_cap(sorted[i].a, sorted[i].b, p->cap, &ca, &cb);
      if (i < p->trim) hf_at(ca, cb, lo, &ca, &cb);
      else if (i >= k - p->trim) hf_at(ca, cb, hi, &ca, &cb);
      /* its place among rows (the same namespace string) */
      for (int j = 0; j < rows->n; j++)
        if (rows->v[j].ns == sorted[i].ns) {
          sa_of[2 * j] = ca;
          sa_of[2 * j + 1] = cb;
        }
      sa += ca;
      sb += cb;
    }
  }
  sqlite3_free(sorted);
  i64 n = 0;
  for (int i = 0; i < rows->n; i++) {
    n = hp_add_counts(n, rows->v[i].n);
    hf_row *r = &rows->v[i];
    if (sa_of[2 * i] != r->pa || sa_of[2 * i + 1] != r->pb) {
      sqlite3_reset(set_share);
      sqlite3_bind_double(set_share, 1, sa_of[2 * i]);
      sqlite3_bind_double(set_share, 2, sa_of[2 * i + 1]);
      sqlite3_bind_text(set_share, 3, r->ns, -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(set_share, 4, f, -1, SQLITE_TRANSIENT);
      if ((rc = hc_exec(x, set_share))) { sqlite3_free(sa_of); return rc; }
    }
  }
  sqlite3_free(sa_of);
  i64 support = rows->n;
  if (has_prior) {
    sa += pa0;
    sb += pb0;
    n = hp_add_counts(n, pn);
    support += HM_PRIOR_SUPPORT; /* a links-only prior counts as that many namespaces */
  }
  return hf_pooled_row(x, insert_pooled, f, sa, sb, n, support, pooled, lo, hi);
}

static int hf_pool_flush(hc_ctx *x, i64 *folded);

/* Rebuild the pooled rows of the features in the JSON array features (every
 * feature when NULL), inside the caller's transaction, the pending changes
 * folded first. */
static int hf_rebuild(hc_ctx *x, const char *features, const hf_pool *p) {
  sqlite3_stmt *own = NULL, *del = NULL, *prior = NULL, *share = NULL, *ins = NULL,
               *wanted = NULL;
  hf_rows rows = {0};
  char *cur = NULL;
  int rc;
  const char *sel =
      features
          ? "SELECT namespace, feature, alpha, beta, n, pool_alpha, pool_beta FROM links "
            "WHERE namespace != '*' AND feature IN (SELECT value FROM json_each(?1)) "
            "ORDER BY feature, namespace"
          : "SELECT namespace, feature, alpha, beta, n, pool_alpha, pool_beta FROM links "
            "WHERE namespace != '*' ORDER BY feature, namespace";
  /* the features to work out: those asked (sorted), or every feature with a
   * row or a prior */
  const char *want =
      features ? "SELECT DISTINCT value FROM json_each(?1) WHERE type = 'text' ORDER BY value"
               : "SELECT feature FROM links WHERE namespace != '*' UNION SELECT j.key FROM "
                 "heapmem_meta AS m, json_each(m.value) AS j WHERE m.key = '"
                 HM_META_LINKS_PRIOR "' AND "
                 "json_valid(m.value) AND json_type(m.value) = 'object' ORDER BY 1";
  i64 folded;
  /* the rows as the pending changes leave them (a store being migrated from
   * before schema 10 has none: heap_rebuild_pool runs at step 4) */
  sqlite3_stmt *has = NULL;
  if ((rc = hc_prepare(x, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND "
                          "name = 'pool_pending'", &has)))
    return rc;
  int pending = sqlite3_step(has) == SQLITE_ROW;
  hc_done(x, has);
  if (pending && (rc = hf_pool_flush(x, &folded))) return rc;
  if ((rc = hc_prepare(x, sel, &own)) || (rc = hc_prepare(x, want, &wanted)) ||
      (rc = hc_prepare(x, features ? "DELETE FROM links WHERE namespace = '*' AND feature IN "
                                     "(SELECT value FROM json_each(?1))"
                                   : "DELETE FROM links WHERE namespace = '*'", &del)) ||
      (rc = hc_prepare(x, hf_sql_prior, &prior)) ||
      (rc = hc_prepare(x, "UPDATE links SET pool_alpha = ?1, pool_beta = ?2 WHERE namespace = ?3 "
                          "AND feature = ?4", &share)) ||
      (rc = hc_prepare(x, "INSERT INTO links(namespace, feature, qtype, alpha, beta, n, support, "
                          "low_rate, high_rate) VALUES ('*', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                       &ins)))
    goto done;
  if (features) {
    sqlite3_bind_text(own, 1, features, -1, SQLITE_STATIC);
    sqlite3_bind_text(wanted, 1, features, -1, SQLITE_STATIC);
    sqlite3_bind_text(del, 1, features, -1, SQLITE_STATIC);
  }
  /* read every row first: the rebuild writes the rows it reads */
  typedef struct { char *f; hf_rows rows; } hf_feat;
  hf_feat *feats = NULL;
  int nf = 0, capf = 0;
  while ((rc = sqlite3_step(own)) == SQLITE_ROW) {
    const char *f = (const char *)sqlite3_column_text(own, 1);
    if (!f) f = "";
    if (!nf || strcmp(feats[nf - 1].f, f)) {
      if (nf == capf) {
        capf = capf ? 2 * capf : 64;
        hf_feat *g = sqlite3_realloc64(feats, (sqlite3_uint64)capf * sizeof *g);
        if (!g) { rc = hc_fail(x, SQLITE_NOMEM, "out of memory"); break; }
        feats = g;
      }
      feats[nf].f = sqlite3_mprintf("%s", f);
      memset(&feats[nf].rows, 0, sizeof feats[nf].rows);
      nf++;
    }
    rc = hf_rows_push(x, &feats[nf - 1].rows, (const char *)sqlite3_column_text(own, 0),
                      sqlite3_column_double(own, 2), sqlite3_column_double(own, 3),
                      sqlite3_column_double(own, 5), sqlite3_column_double(own, 6),
                      sqlite3_column_int64(own, 4));
    if (rc) break;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  else if (rc == SQLITE_ROW || (rc && !x->err)) rc = hc_sqlfail(x, rc);
  if (!rc) rc = hc_exec(x, del);
  int at = 0;
  while (!rc && (rc = sqlite3_step(wanted)) == SQLITE_ROW) {
    sqlite3_free(cur);
    cur = sqlite3_mprintf("%s", sqlite3_column_text(wanted, 0));
    if (!cur) { rc = hc_fail(x, SQLITE_NOMEM, "out of memory"); break; }
    while (at < nf && strcmp(feats[at].f, cur) < 0) at++;
    hf_rows *mine = at < nf && !strcmp(feats[at].f, cur) ? &feats[at].rows : &rows;
    rc = hf_pool_feature(x, cur, mine, p, prior, share, ins);
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  else if (rc == SQLITE_ROW || (rc && !x->err)) rc = hc_sqlfail(x, rc);
  for (int i = 0; i < nf; i++) {
    sqlite3_free(feats[i].f);
    hf_rows_free(&feats[i].rows);
  }
  sqlite3_free(feats);
done:
  sqlite3_free(cur);
  hc_done(x, own);
  hc_done(x, wanted);
  hc_done(x, del);
  hc_done(x, prior);
  hc_done(x, share);
  hc_done(x, ins);
  return rc;
}

/* -- after a fold: the pooled rows in place, reworked, or in full ------------------- */

typedef struct {
  sqlite3_stmt *edges, *all, *share, *before, *own, *own_new, *count;
  sqlite3_str *full; /* JSON array of the features to work out in full */
  int nfull;
  sqlite3_str *ops;  /* what this feedback adds to the pooled rows (csrc/pool.c) */
  int nops;
  hp_ops pending;    /* the pooled layer's pending changes before this feedback */
} hf_fold_st;

static void hf_full(hf_fold_st *s, const char *f) {
  sqlite3_str_appendchar(s->full, 1, s->nfull++ ? ',' : '[');
  hq_json_string(s->full, f, (int)strlen(f));
}

/* Namespace ns's share of feature f's pooled row set to a, b (s->share). */
static int hf_share(hc_ctx *x, hf_fold_st *s, const char *ns, const char *f, double a,
                    double b) {
  sqlite3_reset(s->share);
  sqlite3_bind_double(s->share, 1, a);
  sqlite3_bind_double(s->share, 2, b);
  sqlite3_bind_text(s->share, 3, ns, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s->share, 4, f, -1, SQLITE_TRANSIENT);
  return hc_exec(x, s->share);
}

/* Add to feature f's pooled row (made with nothing pooled if missing): one
 * op of this feedback's pending change (csrc/pool.c), folded into the row
 * later (hf_pool_flush).
 * s: the fold under way; da, db, dn, dsupport: what the row gains (counts,
 * observations, namespaces); has_rates, lo, hi: its kept rates, when known. */
static int hf_add(hc_ctx *x, hf_fold_st *s, const char *f, double da, double db, i64 dn,
                  i64 dsupport, int has_rates, double lo, double hi) {
  hp_encode(s->ops, f, (int)strlen(f), da, db, dn, dsupport, has_rates, lo, hi);
  s->nops++;
  return sqlite3_str_errcode(s->ops) ? hc_fail(x, SQLITE_NOMEM, "out of memory") : SQLITE_OK;
}

/* Rework feature f's pooled row after ns's own row changed, from the rows
 * around its trim boundaries only (one indexed read, however many namespaces
 * back it).  Only the `trim` lowest and highest rates have a share at a
 * boundary rate; every other row's share is its capped counts.  One row
 * moved, so every row that was among the `trim` lowest (highest) before is
 * among the `trim` + 1 lowest (highest) now, or is that row: the rows read
 * (hf_sql_edges) are all whose share can change.  Where the feature was not
 * pooled before (it has just reached `min` namespaces), every row's share
 * changes: all of them are read (hf_sql_all), and their ends are the lowest
 * and highest.  With rows without evidence (a damaged file's) among the
 * lowest, or too few rows for a pooled row, f is worked out in full.
 * s: the fold under way; ns, f: the namespace and feature; dn: the observations
 * ns's row gained; new_row: ns had no row before; was_pooled: the row was
 * pooled before; p: the pool settings. */
static int hf_rework(hc_ctx *x, hf_fold_st *s, const char *ns, const char *f, i64 dn,
                     int new_row, int was_pooled, const hf_pool *p) {
  hf_rows rows = {0}, low = {0}, high = {0};
  int rc = SQLITE_OK, m = p->trim + 1;
  sqlite3_stmt *st = was_pooled ? s->edges : s->all;
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, f, -1, SQLITE_TRANSIENT);
  if (was_pooled) { /* the edges also take how many at each end, and ns's own row */
    sqlite3_bind_int(st, 2, m);
    sqlite3_bind_text(st, 3, ns, -1, SQLITE_TRANSIENT);
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int side = was_pooled ? sqlite3_column_int(st, 0) : -1, o = was_pooled ? 1 : 0;
    const char *rns = (const char *)sqlite3_column_text(st, o);
    double a = sqlite3_column_double(st, o + 1), b = sqlite3_column_double(st, o + 2),
           pa = sqlite3_column_double(st, o + 3), pb = sqlite3_column_double(st, o + 4);
    int seen = 0;
    for (int i = 0; i < rows.n && !seen; i++) seen = !strcmp(rows.v[i].ns, rns ? rns : "");
    if (!seen && (rc = hf_rows_push(x, &rows, rns, a, b, pa, pb, 0))) break;
    if (side == 0 && (rc = hf_rows_push(x, &low, rns, a, b, pa, pb, 0))) break;
    if (side == 1 && (rc = hf_rows_push(x, &high, rns, a, b, pa, pb, 0))) break;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  else if (!x->err) rc = hc_sqlfail(x, rc);
  sqlite3_reset(st);
  if (rc) goto done;
  if (!was_pooled) { /* every row: the lowest and highest trim + 1 of them */
    for (int i = 0; i < rows.n && !rc; i++) {
      hf_row *r = &rows.v[i];
      rc = hf_rows_push(x, &low, r->ns, r->a, r->b, r->pa, r->pb, 0);
      if (!rc) rc = hf_rows_push(x, &high, r->ns, r->a, r->b, r->pa, r->pb, 0);
    }
    if (rc) goto done;
  }
  qsort(low.v, (size_t)low.n, sizeof *low.v, hf_order);
  qsort(high.v, (size_t)high.n, sizeof *high.v, hf_order_desc);
  int nlow = low.n < m ? low.n : m, nhigh = high.n < m ? high.n : m;
  int no_evidence = 0;
  for (int i = 0; i < nlow; i++) no_evidence |= !(low.v[i].a + low.v[i].b > 0);
  if (no_evidence || nlow <= p->trim || nhigh <= p->trim) {
    hf_full(s, f);
    goto done;
  }
  double lo = hf_rate(low.v[p->trim].a, low.v[p->trim].b);
  double hi = hf_rate(high.v[p->trim].a, high.v[p->trim].b);
  double da = 0, db = 0;
  for (int i = 0; i < rows.n && !rc; i++) {
    hf_row *r = &rows.v[i];
    double ca, cb;
    hf_cap(r->a, r->b, p->cap, &ca, &cb);
    int in_low = 0, in_high = 0;
    for (int j = 0; j < p->trim; j++) in_low |= !strcmp(low.v[j].ns, r->ns);
    for (int j = 0; j < p->trim; j++) in_high |= !strcmp(high.v[j].ns, r->ns);
    if (in_low) hf_at(ca, cb, lo, &ca, &cb);
    else if (in_high) hf_at(ca, cb, hi, &ca, &cb);
    if (ca != r->pa || cb != r->pb) {
      rc = hf_share(x, s, r->ns, f, ca, cb);
      da += ca - r->pa;
      db += cb - r->pb;
    }
  }
  if (!rc) rc = hf_add(x, s, f, da, db, dn, new_row, 1, lo, hi);
done:
  hf_rows_free(&rows);
  hf_rows_free(&low);
  hf_rows_free(&high);
  return rc;
}

static const char hf_sql_edges[] =
    "SELECT 0, * FROM (SELECT namespace, alpha, beta, pool_alpha, pool_beta FROM links "
    "WHERE feature = ?1 AND namespace != '*' ORDER BY alpha / (alpha + beta), namespace "
    "LIMIT ?2) UNION ALL "
    "SELECT 1, * FROM (SELECT namespace, alpha, beta, pool_alpha, pool_beta FROM links "
    "WHERE feature = ?1 AND namespace != '*' ORDER BY alpha / (alpha + beta) DESC, "
    "namespace DESC LIMIT ?2) UNION ALL "
    "SELECT 2, namespace, alpha, beta, pool_alpha, pool_beta FROM links "
    "WHERE namespace = ?3 AND feature = ?1";
static const char hf_sql_all[] =
    "SELECT namespace, alpha, beta, pool_alpha, pool_beta FROM links "
    "WHERE feature = ?1 AND namespace != '*'";
/* ?1 namespace, ?2 feature: its own row and the stored pooled row, before the fold */
static const char hf_sql_before[] =
    "SELECT o.alpha, o.beta, o.pool_alpha, o.pool_beta, p.alpha, p.beta, p.n, p.support, "
    "p.low_rate, p.high_rate, p.feature IS NOT NULL FROM (SELECT ?2 AS f) AS q "
    "LEFT JOIN links AS o ON o.namespace = ?1 AND o.feature = q.f "
    "LEFT JOIN links AS p ON p.namespace = '*' AND p.feature = q.f";
/* ?1 feature, ?2 least: how many namespaces back it, up to least */
static const char hf_sql_backers[] =
    "SELECT count(*) FROM (SELECT 1 FROM links WHERE feature = ?1 AND namespace != '*' LIMIT ?2)";
/* ?1 namespace, ?2 feature, ?3 qtype, ?4-?6 alpha, beta, n: the namespace's
 * first row of the feature (its share of the pooled row 0) */
static const char hf_sql_own_new[] =
    "INSERT INTO links(namespace, feature, qtype, alpha, beta, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
/* ?1 namespace, ?2 feature, ?4-?6 alpha, beta, n added; ?7, ?8 its share of the
 * pooled row (NULL: as it is) */
static const char hf_sql_own[] =
    "UPDATE links SET alpha = alpha + ?4, beta = beta + ?5, n = n + ?6, "
    "pool_alpha = coalesce(?7, pool_alpha), pool_beta = coalesce(?8, pool_beta) "
    "WHERE namespace = ?1 AND feature = ?2";
static const char hf_sql_pending[] = "SELECT id, ops FROM pool_pending ORDER BY id";

/* One feature of a fold: its deltas, and the namespace's own row and the
 * pooled row (with its pending changes) before the fold. */
typedef struct {
  char *f;
  double da, db;
  i64 dn;
  int has_own; /* alpha not NULL before */
  double a0, b0, pa0, pb0;
  int exists, has_rates;
  double lo, hi;
  i64 k_before;
} hf_touch;

/* u's rows before the fold: the namespace's own, and the pooled row as its
 * pending changes leave it; with no own row, how many namespaces back it.
 * s: the fold under way; ns: the namespace; p: the pool settings. */
static int hf_before(hc_ctx *x, hf_fold_st *s, const char *ns, hf_touch *u, const hf_pool *p) {
  sqlite3_reset(s->before);
  sqlite3_bind_text(s->before, 1, ns, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s->before, 2, u->f, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(s->before);
  if (rc != SQLITE_ROW) return hc_sqlfail(x, rc);
  u->has_own = sqlite3_column_type(s->before, 0) != SQLITE_NULL;
  u->a0 = sqlite3_column_double(s->before, 0);
  u->b0 = sqlite3_column_double(s->before, 1);
  u->pa0 = sqlite3_column_double(s->before, 2);
  u->pb0 = sqlite3_column_double(s->before, 3);
  hp_row r = {.exists = sqlite3_column_int(s->before, 10),
              .has_rates = sqlite3_column_type(s->before, 8) != SQLITE_NULL,
              .a = sqlite3_column_double(s->before, 4), .b = sqlite3_column_double(s->before, 5),
              .n = sqlite3_column_int64(s->before, 6),
              .support = sqlite3_column_int64(s->before, 7),
              .lo = sqlite3_column_double(s->before, 8),
              .hi = sqlite3_column_double(s->before, 9)};
  sqlite3_reset(s->before);
  hp_apply(&s->pending, u->f, (int)strlen(u->f), &r);
  u->exists = r.exists;
  u->has_rates = r.exists && r.has_rates;
  u->lo = r.lo;
  u->hi = r.hi;
  u->k_before = 0;
  if (u->has_own) return SQLITE_OK;
  sqlite3_reset(s->count);
  sqlite3_bind_text(s->count, 1, u->f, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(s->count, 2, p->least);
  if ((rc = sqlite3_step(s->count)) == SQLITE_ROW) u->k_before = sqlite3_column_int64(s->count, 0);
  sqlite3_reset(s->count);
  return rc == SQLITE_ROW ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* The namespace's own row of u takes the fold (and, has_share, its new share
 * of the pooled row: sa, sb).
 * s: the fold under way; ns: the namespace. */
static int hf_own(hc_ctx *x, hf_fold_st *s, const char *ns, const hf_touch *u, int has_share,
                  double sa, double sb) {
  int qlen;
  sqlite3_stmt *st = u->has_own ? s->own : s->own_new;
  hf_qtype_of(u->f, &qlen);
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, u->f, -1, SQLITE_TRANSIENT);
  if (!u->has_own) sqlite3_bind_text(st, 3, u->f, qlen, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 4, u->da);
  sqlite3_bind_double(st, 5, u->db);
  sqlite3_bind_int64(st, 6, u->dn);
  if (u->has_own && has_share) {
    sqlite3_bind_double(st, 7, sa);
    sqlite3_bind_double(st, 8, sb);
  } else if (u->has_own) {
    sqlite3_bind_null(st, 7);
    sqlite3_bind_null(st, 8);
  }
  return hc_exec(x, st);
}

/* Feature u of the fold: the namespace's own row takes it, and its pooled
 * row is kept current.  Where the namespace's place among the others cannot
 * have changed (its rate stays on the same side of the pooled row's lowest
 * and highest kept rates, or exactly where it was), or too few namespaces
 * back the feature to pool it, its share changes with its own row (one
 * write) and the pooled row by an op of this feedback's pending change.
 * Elsewhere (a rate crossing a boundary, one namespace more behind a pooled
 * feature) the pooled row is reworked from the rows around its trim
 * boundaries (hf_rework), or worked out in full (hf_rebuild, after the loop:
 * hf_full) where that cannot be done: a feature whose pooled row is missing,
 * a row without evidence joining or leaving the pool.
 * heapmem.learning.pool() replays the full rule for check().
 * s: the fold under way; ns: the namespace; p: the pool settings. */
static int hf_fold_feature(hc_ctx *x, hf_fold_st *s, const char *ns, const hf_touch *u,
                           const hf_pool *p) {
  double da = u->da, db = u->db;
  if (u->has_own && !(u->a0 + u->b0 > 0 && u->a0 + da + u->b0 + db > 0)) {
    hf_full(s, u->f); /* a row without evidence joins or leaves the pool */
    return hf_own(x, s, ns, u, 0, 0, 0);
  }
  int rc = !u->has_own || !u->exists || !u->has_rates ? hf_own(x, s, ns, u, 0, 0, 0) : SQLITE_OK;
  if (rc) return rc;
  if (!u->has_own) { /* one more namespace backs it */
    if (!u->exists && p->least > 1) return hf_add(x, s, u->f, 0, 0, u->dn, 1, 0, 0, 0);
    if (u->exists && !u->has_rates && u->k_before + 1 < p->least)
      return hf_add(x, s, u->f, 0, 0, u->dn, 1, 0, 0, 0);
    if (u->exists) return hf_rework(x, s, ns, u->f, u->dn, 1, u->has_rates, p);
    hf_full(s, u->f);
    return SQLITE_OK;
  }
  if (!u->exists) {
    hf_full(s, u->f);
    return SQLITE_OK;
  }
  if (!u->has_rates) return hf_add(x, s, u->f, 0, 0, u->dn, 0, 0, 0, 0); /* only n moves */
  double ca, cb, sa, sb, lo = u->lo, hi = u->hi;
  hf_cap(u->a0 + da, u->b0 + db, p->cap, &ca, &cb);
  double r0 = hf_rate(u->a0, u->b0), r1 = hf_rate(u->a0 + da, u->b0 + db);
  if (lo < r0 && r0 < hi && lo < r1 && r1 < hi) {
    sa = ca; sb = cb;
  } else if (r0 < lo && r1 < lo) {
    hf_at(ca, cb, lo, &sa, &sb);
  } else if (r0 > hi && r1 > hi) {
    hf_at(ca, cb, hi, &sa, &sb);
  } else if (r0 == r1 && (r1 == lo || r1 == hi)) { /* on a boundary, and staying */
    hf_at(ca, cb, r1, &sa, &sb);
  } else if (r0 == r1) {
    sa = ca; sb = cb;
  } else {
    if ((rc = hf_own(x, s, ns, u, 0, 0, 0))) return rc;
    return hf_rework(x, s, ns, u->f, u->dn, 0, 1, p);
  }
  rc = hf_own(x, s, ns, u, sa != u->pa0 || sb != u->pb0, sa, sb);
  if (!rc) rc = hf_add(x, s, u->f, sa - u->pa0, sb - u->pb0, u->dn, 0, 1, lo, hi);
  return rc;
}

/* ?1 feature: its stored pooled row */
static const char hf_sql_pooled[] =
    "SELECT alpha, beta, n, support, low_rate, high_rate FROM links "
    "WHERE namespace = '*' AND feature = ?1";

/* Op's feature (into *f, a copy sqlite3_malloc'ed, the old one freed) and
 * its pooled row as readers see it (*r): the stored one (row: hf_sql_pooled)
 * with every pending op of the feature applied.
 * ops: the pending changes, op one of them. */
static int hf_pooled_now(hc_ctx *x, sqlite3_stmt *row, const hp_ops *ops, const hp_op *op,
                         char **f, hp_row *r) {
  sqlite3_free(*f);
  if (!(*f = sqlite3_mprintf("%.*s", op->flen, op->f)))
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  memset(r, 0, sizeof *r);
  sqlite3_bind_text(row, 1, *f, -1, SQLITE_STATIC);
  int rc = sqlite3_step(row);
  if (rc == SQLITE_ROW) {
    *r = (hp_row){.exists = 1, .has_rates = sqlite3_column_type(row, 4) != SQLITE_NULL,
                  .a = sqlite3_column_double(row, 0), .b = sqlite3_column_double(row, 1),
                  .n = sqlite3_column_int64(row, 2), .support = sqlite3_column_int64(row, 3),
                  .lo = sqlite3_column_double(row, 4), .hi = sqlite3_column_double(row, 5)};
    rc = SQLITE_DONE;
  }
  sqlite3_reset(row);
  if (rc != SQLITE_DONE) return hc_sqlfail(x, rc);
  hp_apply(ops, *f, op->flen, r);
  return SQLITE_OK;
}

/* The pooled layer's pending changes folded into the pooled rows at once:
 * each feature's stored row with its ops applied (hp_apply), written once;
 * the pending rows deleted.  *folded: how many there were. */
static int hf_pool_flush(hc_ctx *x, i64 *folded) {
  HM_API_HERE; /* sqlite3_* calls for every feature of the batch */
  sqlite3_stmt *st = NULL, *row = NULL, *put = NULL, *del = NULL;
  hp_ops ops = {0};
  i64 maxid = 0;
  char *f = NULL;
  int rc;
  *folded = 0;
  if ((rc = hc_prepare(x, hf_sql_pending, &st))) return rc;
  rc = hp_read(st, &ops, &maxid);
  hc_done(x, st);
  if (rc == SQLITE_CORRUPT)
    return hc_fail(x, SQLITE_CORRUPT, "a pending change of the pooled layer is damaged");
  if (rc) return hc_sqlfail(x, rc);
  if (!maxid) return SQLITE_OK;
  if ((rc = hc_prepare(x, hf_sql_pooled, &row)) ||
      (rc = hc_prepare(x, "INSERT INTO links(namespace, feature, qtype, alpha, beta, n, support, "
                          "low_rate, high_rate) VALUES ('*', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                          "ON CONFLICT(namespace, feature) DO UPDATE SET alpha = excluded.alpha, "
                          "beta = excluded.beta, n = excluded.n, support = excluded.support, "
                          "low_rate = excluded.low_rate, high_rate = excluded.high_rate", &put)) ||
      (rc = hc_prepare(x, "DELETE FROM pool_pending WHERE id <= ?1", &del)))
    goto done;
  for (int k = 0; !rc && k < ops.n; k++) {
    const hp_op *op = &ops.v[k];
    if (ops.first[hp_slot(&ops, op->f, op->flen)] != k) continue; /* once a feature */
    hp_row r;
    if ((rc = hf_pooled_now(x, row, &ops, op, &f, &r))) break;
    rc = hf_pooled_row(x, put, f, r.a, r.b, r.n, r.support, r.has_rates, r.lo, r.hi);
  }
  if (!rc) {
    sqlite3_bind_int64(del, 1, maxid);
    rc = hc_exec(x, del);
    *folded = sqlite3_changes64(x->db);
  }
done:
  sqlite3_free(f);
  hp_free(&ops);
  hc_done(x, row);
  hc_done(x, put);
  hc_done(x, del);
  return rc;
}

/* Once this many feedbacks' changes of the pooled layer are pending, the
 * feedback that adds one folds them all (hf_pool_flush): each pooled row a
 * batch touches is written once, at most every feature of the grammar. */
#define HF_POOL_BATCH 8

/* This feedback's changes of the pooled layer (s->ops) as one pending row;
 * the batch folded once HF_POOL_BATCH rows are pending. */
static int hf_pool_pend(hc_ctx *x, hf_fold_st *s) {
  sqlite3_stmt *st = NULL;
  int len = sqlite3_str_length(s->ops);
  char *blob = sqlite3_str_finish(s->ops);
  int rc = SQLITE_OK;
  i64 folded = 0;
  s->ops = NULL;
  if (!s->nops) {
    sqlite3_free(blob);
    return SQLITE_OK;
  }
  if (!blob) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (!(rc = hc_prepare(x, "INSERT INTO pool_pending(ops) VALUES (?1)", &st))) {
    sqlite3_bind_blob(st, 1, blob, len, SQLITE_STATIC);
    rc = hc_exec(x, st);
  }
  hc_done(x, st);
  sqlite3_free(blob);
  if (!rc && s->pending.nblobs + 1 >= HF_POOL_BATCH) rc = hf_pool_flush(x, &folded);
  return rc;
}

/* After the namespace's own links took the fold (t: its nt features, in
 * the fold's order), keep the pooled rows current (hf_fold_feature).
 * ns: the namespace; p: the pool settings. */
static int hf_fold_pool(hc_ctx *x, const char *ns, hf_touch *t, int nt, const hf_pool *p) {
  hf_fold_st s = {0};
  sqlite3_stmt *pending = NULL;
  i64 maxid;
  int rc;
  s.full = sqlite3_str_new(x->db);
  s.ops = sqlite3_str_new(x->db);
  if ((rc = hc_prepare(x, hf_sql_edges, &s.edges)) || (rc = hc_prepare(x, hf_sql_all, &s.all)) ||
      (rc = hc_prepare(x, "UPDATE links SET pool_alpha = ?1, pool_beta = ?2 WHERE namespace = ?3 "
                          "AND feature = ?4", &s.share)) ||
      (rc = hc_prepare(x, hf_sql_before, &s.before)) || (rc = hc_prepare(x, hf_sql_own, &s.own)) ||
      (rc = hc_prepare(x, hf_sql_own_new, &s.own_new)) ||
      (rc = hc_prepare(x, hf_sql_backers, &s.count)) ||
      (rc = hc_prepare(x, hf_sql_pending, &pending)))
    goto done;
  if ((rc = hp_read(pending, &s.pending, &maxid))) {
    rc = rc == SQLITE_CORRUPT
             ? hc_fail(x, SQLITE_CORRUPT, "a pending change of the pooled layer is damaged")
             : hc_sqlfail(x, rc);
    goto done;
  }
  for (int i = 0; i < nt && !rc; i++) {
    rc = hf_before(x, &s, ns, &t[i], p);
    if (!rc) rc = hf_fold_feature(x, &s, ns, &t[i], p);
  }
  if (!rc) rc = hf_pool_pend(x, &s);
done:;
  sqlite3_str_appendchar(s.full, 1, s.nfull ? ']' : ' ');
  char *full = sqlite3_str_finish(s.full);
  if (!rc && s.nfull) {
    if (!full) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
    else rc = hf_rebuild(x, full, p);
  }
  sqlite3_free(full);
  sqlite3_free(sqlite3_str_finish(s.ops));
  hp_free(&s.pending);
  hc_done(x, s.edges);
  hc_done(x, s.all);
  hc_done(x, s.share);
  hc_done(x, s.before);
  hc_done(x, s.own);
  hc_done(x, s.own_new);
  hc_done(x, s.count);
  hc_done(x, pending);
  return rc;
}

/* -- the arguments every write takes ------------------------------------------------- */

/* A name argument (kind, source, id, key, namespace): hq_arg_text's name,
 * or NULL where optional.  Returns 0, or the error set.
 * v: the argument; what: its name in the sentence; optional: NULL is taken;
 * *out: the name. */
static int hf_name(hc_ctx *x, sqlite3_value *v, const char *what, int optional,
                   const char **out) {
  char why[HM_ERRLEN];
  *out = NULL;
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) {
    if (optional) return SQLITE_OK;
    return hc_fail(x, SQLITE_ERROR, "%s is required", what);
  }
  if (hq_arg_text(v, what, HM_ARG_NAME, 0, out, why, sizeof why) != HM_OK)
    return hc_fail(x, SQLITE_ERROR, "%s", why);
  return SQLITE_OK;
}

/* The namespace argument (NULL or absent: 'default' where allowed): a name,
 * and not '*', the pooled layer's. */
static int hf_namespace(hc_ctx *x, sqlite3_value *v, int optional, const char **out) {
  int rc = hf_name(x, v, "namespace", optional, out);
  if (rc) return rc;
  if (!*out) *out = "default";
  if (!strcmp(*out, "*"))
    return hc_fail(x, SQLITE_ERROR, "namespace '*' is reserved for the pooled layer of learned "
                                    "links");
  return SQLITE_OK;
}

/* -- heap_feedback and heap_answer ---------------------------------------------------- */

static void hf_free_ids(char **ids, int n) {
  for (int i = 0; i < n; i++) sqlite3_free(ids[i]);
  sqlite3_free(ids);
}

static int hf_strcmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ids[0..n) sorted, as a set to look ids up in (hf_has); *out
 * sqlite3_malloc'ed (the strings stay ids'). */
static int hf_set(hc_ctx *x, char **ids, int n, const char ***out) {
  const char **v = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof *v);
  if (!v) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (n) memcpy(v, ids, (size_t)n * sizeof *v);
  if (n > 1) qsort(v, (size_t)n, sizeof *v, hf_strcmp);
  *out = v;
  return SQLITE_OK;
}

static int hf_has(const char **set, int n, const char *id) {
  return n > 0 && bsearch(&id, set, (size_t)n, sizeof *set, hf_strcmp) != NULL;
}

/* A JSON array of at most `most` ids, as a list (NULL: an empty one): each
 * a name (hq_arg_text), none twice (found by sorting: linear in the list,
 * whatever its length).  Returns the count, or -1 with the error set (and
 * *out NULL).
 * v: the argument; what: its name in the sentence. */
static int hf_ids(hc_ctx *x, sqlite3_value *v, const char *what, double most, char ***out) {
  *out = NULL;
  if (!v || sqlite3_value_type(v) == SQLITE_NULL) return 0;
  sqlite3_stmt *st = NULL;
  i64 len = -1;
  if (sqlite3_value_type(v) == SQLITE_TEXT) {
    if (hc_prepare(x, "SELECT CASE WHEN json_valid(?1) AND json_type(?1) = 'array' THEN "
                      "json_array_length(?1) END", &st))
      return -1;
    sqlite3_bind_value(st, 1, v);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER)
      len = sqlite3_column_int64(st, 0);
    hc_done(x, st);
    st = NULL;
  }
  if (len < 0) {
    hc_fail(x, SQLITE_ERROR, "%s must be a JSON array of memory ids, such as '[\"m3\"]'", what);
    return -1;
  }
  if ((double)len > most) {
    hc_fail(x, SQLITE_ERROR, "%s lists %lld ids; at most %.0f are taken at once", what,
            (long long)len, most);
    return -1;
  }
  if (hm_json_nul((const char *)sqlite3_value_text(v), sqlite3_value_bytes(v))) {
    hc_fail(x, SQLITE_ERROR, "an id in %s must be valid UTF-8 without NUL bytes", what);
    return -1;
  }
  if (hc_prepare(x, "SELECT value, type FROM json_each(?1)", &st)) return -1;
  sqlite3_bind_value(st, 1, v);
  int n = 0, rc;
  char **ids = sqlite3_malloc64((sqlite3_uint64)(len + 1) * sizeof *ids);
  char *what_id = sqlite3_mprintf("an id in %s", what);
  char why[HM_ERRLEN];
  if (!ids || !what_id) hc_fail(x, SQLITE_NOMEM, "out of memory");
  while (!x->err && (rc = sqlite3_step(st)) == SQLITE_ROW && n < len) {
    const char *type = (const char *)sqlite3_column_text(st, 1);
    if (!type || strcmp(type, "text")) {
      hc_fail(x, SQLITE_ERROR, "%s must hold string ids", what);
      break;
    }
    const unsigned char *id = sqlite3_column_text(st, 0);
    if (hm_check_text(sqlite3_column_type(st, 0), id, sqlite3_column_bytes(st, 0), what_id,
                      HM_ARG_NAME, 0, why, sizeof why)) {
      hc_fail(x, SQLITE_ERROR, "%s", why);
      break;
    }
    if (!(ids[n] = sqlite3_mprintf("%s", id))) hc_fail(x, SQLITE_NOMEM, "out of memory");
    else n++;
  }
  if (!x->err && rc != SQLITE_DONE && rc != SQLITE_ROW) hc_sqlfail(x, rc);
  hc_done(x, st);
  sqlite3_free(what_id);
  const char **set = NULL;
  if (!x->err && !hf_set(x, ids, n, &set)) {
    for (int i = 1; i < n && !x->err; i++)
      if (!strcmp(set[i - 1], set[i])) hc_fail(x, SQLITE_ERROR, "%s lists the same id twice", what);
  }
  sqlite3_free(set);
  if (x->err) {
    hf_free_ids(ids, n);
    return -1;
  }
  *out = ids;
  return n;
}

/* a list of ids as Python writes one, ['m1', 'm2'], with at most five of
 * them named ("['m1', 'm2', 'm3', 'm4', 'm5', ... and 49995 more]") */
static char *hf_pylist(char **ids, int n) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(s, 1, '[');
  for (int i = 0; i < n && i < 5; i++) sqlite3_str_appendf(s, "%s'%s'", i ? ", " : "", ids[i]);
  if (n > 5) sqlite3_str_appendf(s, ", ... and %d more", n - 5);
  sqlite3_str_appendchar(s, 1, ']');
  return sqlite3_str_finish(s);
}

/* The recall as the log keeps it: its namespace, qtype and the JSON arrays
 * shown, ages, features, read into columns (one statement). */
typedef struct {
  char *ns, *qtype;
  int n;
  char **shown, **feats;
  double *ages;
  int *judged; /* 1: that position has an event already */
  int *order;  /* the positions sorted by shown id, then position (hf_last_pos) */
} hf_recall;

static void hf_recall_free(hf_recall *r) {
  sqlite3_free(r->ns);
  sqlite3_free(r->qtype);
  hf_free_ids(r->shown, r->n);
  hf_free_ids(r->feats, r->n);
  sqlite3_free(r->ages);
  sqlite3_free(r->judged);
  sqlite3_free(r->order);
  memset(r, 0, sizeof *r);
}

static __thread char **hf_sort_shown; /* the ids hf_pos_cmp sorts positions of */
static int hf_pos_cmp(const void *a, const void *b) {
  int i = *(const int *)a, j = *(const int *)b, c = strcmp(hf_sort_shown[i], hf_sort_shown[j]);
  return c ? c : (i > j) - (i < j);
}

/* r's positions sorted by id (r->order), for hf_last_pos. */
static int hf_recall_index(hc_ctx *x, hf_recall *r) {
  r->order = sqlite3_malloc64((sqlite3_uint64)(r->n + 1) * sizeof(int));
  if (!r->order) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  for (int i = 0; i < r->n; i++) r->order[i] = i;
  hf_sort_shown = r->shown;
  qsort(r->order, (size_t)r->n, sizeof(int), hf_pos_cmp);
  hf_sort_shown = NULL;
  return SQLITE_OK;
}

/* The last position at which recall r showed id (as a dict of the shown
 * keeps it), -1 when it did not: a binary search of r->order. */
static int hf_last_pos(const hf_recall *r, const char *id) {
  int lo = 0, hi = r->n; /* the first position whose id is greater than id */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(r->shown[r->order[mid]], id) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && !strcmp(r->shown[r->order[lo - 1]], id) ? r->order[lo - 1] : -1;
}

/* Whether recall rid's log is JSON (its shown, ages and features), read
 * before anything parses it: else it is damaged (SQLITE_CORRUPT). */
static int hf_log_is_json(hc_ctx *x, i64 rid) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT json_valid(shown) AND json_valid(ages) AND "
                         "json_valid(features) FROM recalls WHERE id = ?1", &st);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, rid);
  rc = sqlite3_step(st);
  int json = rc != SQLITE_ROW || sqlite3_column_int(st, 0);
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
  hc_done(x, st);
  if (!rc && !json)
    rc = hc_fail(x, SQLITE_CORRUPT, "recall %lld's log is damaged (it is not JSON)",
                 (long long)rid);
  return rc;
}

static int hf_read_recall(hc_ctx *x, i64 rid, hf_recall *r) {
  sqlite3_stmt *st = NULL;
  int rc = hf_log_is_json(x, rid);
  if (rc) return rc;
  rc = hc_prepare(
      x,
      "SELECT r.namespace, r.qtype, json_array_length(r.shown), json_array_length(r.ages), "
      "json_array_length(r.features), s.key, s.value, s.type, a.value, a.type, f.value, f.type, "
      "EXISTS (SELECT 1 FROM events AS e WHERE e.recall_id = r.id AND e.position = s.key) "
      "FROM recalls AS r LEFT JOIN json_each(r.shown) AS s "
      "LEFT JOIN json_each(r.ages) AS a ON a.key = s.key "
      "LEFT JOIN json_each(r.features) AS f ON f.key = s.key WHERE r.id = ?1 ORDER BY s.key",
      &st);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, rid);
  int row = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (row == 0) {
      r->ns = sqlite3_mprintf("%s", sqlite3_column_text(st, 0));
      r->qtype = sqlite3_mprintf("%s", sqlite3_column_text(st, 1));
      i64 n = sqlite3_column_int64(st, 2);
      if (sqlite3_column_type(st, 2) == SQLITE_NULL || n != sqlite3_column_int64(st, 3) ||
          n != sqlite3_column_int64(st, 4) || n < 0 || n > 100000) {
        hc_done(x, st);
        return hc_fail(x, SQLITE_CORRUPT, "recall %lld's log is damaged (its shown, ages and "
                                          "features are not JSON arrays of one length)",
                       (long long)rid);
      }
      r->shown = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(char *));
      r->feats = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(char *));
      r->ages = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(double));
      r->judged = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(int));
      if (!r->ns || !r->qtype || !r->shown || !r->feats || !r->ages || !r->judged) {
        hc_done(x, st);
        return hc_fail(x, SQLITE_NOMEM, "out of memory");
      }
    }
    row++;
    if (sqlite3_column_type(st, 5) == SQLITE_NULL) continue; /* an empty log */
    const char *st_t = (const char *)sqlite3_column_text(st, 7);
    const char *a_t = (const char *)sqlite3_column_text(st, 9);
    const char *f_t = (const char *)sqlite3_column_text(st, 11);
    if (!st_t || strcmp(st_t, "text") || !f_t || strcmp(f_t, "text") || !a_t ||
        (strcmp(a_t, "real") && strcmp(a_t, "integer"))) {
      hc_done(x, st);
      return hc_fail(x, SQLITE_CORRUPT, "recall %lld's log is damaged (a shown memory's id, "
                                        "age or features is of the wrong type)",
                     (long long)rid);
    }
    int i = r->n;
    r->shown[i] = sqlite3_mprintf("%s", sqlite3_column_text(st, 6));
    r->feats[i] = sqlite3_mprintf("%s", sqlite3_column_text(st, 10));
    r->ages[i] = sqlite3_column_double(st, 8);
    r->judged[i] = sqlite3_column_int(st, 12);
    r->n++;
    if (!r->shown[i] || !r->feats[i]) {
      hc_done(x, st);
      return hc_fail(x, SQLITE_NOMEM, "out of memory");
    }
  }
  int bad = rc != SQLITE_DONE;
  if (bad) rc = hc_sqlfail(x, rc);
  hc_done(x, st);
  if (bad) return rc;
  if (row == 0)
    return hc_fail(x, SQLITE_ERROR, "unknown recall_id %lld (never recorded, or forgotten)",
                   (long long)rid);
  return hf_recall_index(x, r);
}

/* No tracked recall showed every id: say why, an id that names no memory
 * first (a typo is likelier than a recall never made). */
static int hf_no_recall(hc_ctx *x, char **ids, int n) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT 1 FROM memories WHERE id = ?1", &st);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
      hc_done(x, st);
      return hc_fail(x, SQLITE_ERROR, "unknown memory id '%s'", ids[i]);
    }
    if (rc != SQLITE_ROW) { rc = hc_sqlfail(x, rc); hc_done(x, st); return rc; }
  }
  hc_done(x, st);
  return hc_fail(x, SQLITE_ERROR, "no tracked recall showed all of these ids; say which recall "
                                  "(the recall_id its recall gave)");
}

/* the newest recall that showed every id (of the namespace, if given)
 * ids: the n ids; ns: the namespace, or NULL; *rid: the recall found. */
static int hf_newest(hc_ctx *x, char **ids, int n, const char *ns, i64 *rid) {
  sqlite3_str *js = sqlite3_str_new(x->db);
  sqlite3_str_appendchar(js, 1, '[');
  for (int i = 0; i < n; i++) {
    if (i) sqlite3_str_appendchar(js, 1, ',');
    hq_json_string(js, ids[i], (int)strlen(ids[i]));
  }
  sqlite3_str_appendchar(js, 1, ']');
  char *j = sqlite3_str_finish(js);
  if (!j) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  sqlite3_stmt *st = NULL;
  /* the newest recall that showed them all, or a log met on the way that
   * is not JSON (damage: its shown is never parsed) */
  int rc = hc_prepare(x, "SELECT r.id, json_valid(r.shown) FROM recalls AS r WHERE (?2 IS NULL "
                         "OR r.namespace = ?2) AND CASE WHEN json_valid(r.shown) THEN NOT "
                         "EXISTS (SELECT 1 FROM json_each(?1) AS g WHERE g.value NOT IN (SELECT "
                         "value FROM json_each(r.shown))) ELSE 1 END ORDER BY r.id DESC LIMIT 1",
                      &st);
  if (!rc) {
    sqlite3_bind_text(st, 1, j, -1, SQLITE_TRANSIENT);
    if (ns) sqlite3_bind_text(st, 2, ns, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && !sqlite3_column_int(st, 1)) rc = hc_damaged_json(x);
    else if (rc == SQLITE_ROW) { *rid = sqlite3_column_int64(st, 0); rc = SQLITE_OK; }
    else if (rc == SQLITE_DONE) rc = hf_no_recall(x, ids, n);
    else rc = hc_sqlfail(x, rc);
  }
  hc_done(x, st);
  sqlite3_free(j);
  return rc;
}

/* One feedback as hf_judge works it out: its arguments, the recall it
 * judges, the ids it judges and what it writes. */
typedef struct {
  int answer_mode;        /* heap_answer: the verdicts come from the answer */
  i64 rid;                /* the recall judged */
  int have_rid;           /* given (else found from the ids) */
  double now;
  const char *ns_arg;     /* the namespace given, or NULL */
  const char *answer;     /* heap_answer's answer */
  hm_config cfg;
  char *cfgtext;          /* cfg as a config string heap_credit takes */
  char **used, **ignored; /* the ids judged; each list owns its strings */
  int nused, nignored;
  int rest_ignored;       /* no ignored given: every other shown memory is */
  hf_recall r;
  char *attribution;      /* heap_answer: heap_attribute's verdicts (JSON) */
  int *jpos, *jused;      /* each judged row's position and verdict (1 used) */
  char *used_json, *ignored_json;
  int njudged, nu;        /* rows judged (of memories that still exist), used among them */
  hf_touch *touch;        /* the fold: each feature the judged rows credit, summed */
  int ntouch;
  i64 nfeatures;          /* the namespace's links the fold changed */
} hf_judgment;

static void hf_judgment_free(hf_judgment *j) {
  hf_free_ids(j->used, j->nused);
  hf_free_ids(j->ignored, j->nignored);
  for (int i = 0; i < j->ntouch; i++) sqlite3_free(j->touch[i].f);
  sqlite3_free(j->touch);
  sqlite3_free(j->attribution);
  sqlite3_free(j->cfgtext);
  sqlite3_free(j->jpos);
  sqlite3_free(j->used_json);
  sqlite3_free(j->ignored_json);
  hf_recall_free(&j->r);
}

/* The config: argv[i] when given, else the store's tuned one; then the
 * config string heap_credit takes (the C fields only, as to_sql writes them).
 * i: the argument's index; j: the feedback, whose config is set. */
static int hf_judge_config(hc_ctx *x, sqlite3_value **argv, int argc, int i, hf_judgment *j) {
  sqlite3_stmt *st = NULL;
  char err[HM_ERRLEN];
  int rc;
  if (argc > i && sqlite3_value_type(argv[i]) != SQLITE_NULL) {
    if (sqlite3_value_type(argv[i]) != SQLITE_TEXT)
      return hc_fail(x, SQLITE_ERROR, "config must be text such as 'w_usefulness=0.5'");
    j->cfgtext = sqlite3_mprintf("%s", sqlite3_value_text(argv[i]));
    if (!j->cfgtext) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  } else {
    if ((rc = hc_prepare(x, hr_sql_tuned, &st))) return rc;
    rc = hr_tuned_read(st, &j->cfg, err, sizeof err);
    if (rc == SQLITE_CORRUPT) hc_fail(x, rc, "the store's tuned config is damaged (%s)", err);
    else if (rc) hc_sqlfail(x, rc);
    hc_done(x, st);
    if (rc) return x->code;
  }
  if (j->cfgtext && hm_config_parse(j->cfgtext, &j->cfg, err, sizeof err) != HM_OK)
    return hc_fail(x, SQLITE_ERROR, "config: %s", err);
  sqlite3_str *cs = sqlite3_str_new(x->db);
  for (int k = 0; k < HM_NCONFIG; k++) {
    char num[32];
    hm_repr(*hm_config_slot(&j->cfg, k), num);
    sqlite3_str_appendf(cs, "%s%s=%s", k ? " " : "", hm_config_fields[k].name, num);
  }
  sqlite3_free(j->cfgtext);
  j->cfgtext = sqlite3_str_finish(cs);
  if (!j->cfgtext) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  return SQLITE_OK;
}

/* The arguments, read and checked: feedback (rid, used, ignored, now,
 * namespace, config); answer (rid, answer, now, namespace, config). */
static int hf_judge_args(hc_ctx *x, sqlite3_value **argv, int argc, hf_judgment *j) {
  int i_now = j->answer_mode ? 2 : 3, i_ns = i_now + 1, i_cfg = i_now + 2, rc;
  sqlite3_value *vr = argv[0];
  if (sqlite3_value_type(vr) == SQLITE_INTEGER) {
    j->rid = sqlite3_value_int64(vr);
    j->have_rid = 1;
  } else if (sqlite3_value_type(vr) == SQLITE_TEXT) {
    const char *t = (const char *)sqlite3_value_text(vr);
    char *end;
    errno = 0;
    long long v = t ? strtoll(t, &end, 10) : 0;
    if (!t || end == t || *end || errno == ERANGE ||
        (int)strlen(t) != sqlite3_value_bytes(vr))
      return hc_fail(x, SQLITE_ERROR, "recall_id must be an integer");
    j->rid = v;
    j->have_rid = 1;
  } else if (sqlite3_value_type(vr) != SQLITE_NULL || j->answer_mode) {
    return hc_fail(x, SQLITE_ERROR, j->answer_mode ? "heap_answer needs the recall_id of the "
                                                     "recall the answer was written from"
                                                   : "recall_id must be an integer");
  }
  if (argc > i_now && sqlite3_value_type(argv[i_now]) != SQLITE_NULL) {
    j->now = sqlite3_value_double(argv[i_now]);
    if (!hq_is_number(argv[i_now]) ||
        !(j->now >= hm_limits.MIN_TIME && j->now <= hm_limits.MAX_TIME))
      return hc_fail(x, SQLITE_ERROR, "now must be unix seconds from %.0f to %.0f (1970 to the "
                                      "year 9999)", hm_limits.MIN_TIME, hm_limits.MAX_TIME);
  } else {
    j->now = hr_now(x->db);
  }
  /* the namespace: a name, never read past a NUL into another's */
  if (argc > i_ns && (rc = hf_name(x, argv[i_ns], "namespace", 1, &j->ns_arg))) return rc;
  if ((rc = hf_judge_config(x, argv, argc, i_cfg, j))) return rc;
  if (j->answer_mode) {
    char why[HM_ERRLEN];
    if (sqlite3_value_type(argv[1]) != SQLITE_TEXT)
      return hc_fail(x, SQLITE_ERROR, "the answer must be text");
    if (sqlite3_value_bytes(argv[1]) > hm_limits.MAX_ANSWER_BYTES)
      return hc_fail(x, SQLITE_ERROR, "the answer is longer than %.0f bytes (64 KiB): pass the "
                                      "answer, not a document", hm_limits.MAX_ANSWER_BYTES);
    if (hq_arg_text(argv[1], "the answer", HM_ARG_NOTBLANK, 0, &j->answer, why, sizeof why))
      return hc_fail(x, SQLITE_ERROR, "%s", why);
    return SQLITE_OK;
  }
  if ((j->nused = hf_ids(x, argv[1], "used", hm_limits.MAX_K, &j->used)) < 0) {
    j->nused = 0;
    return x->code;
  }
  if (argc > 2 && sqlite3_value_type(argv[2]) != SQLITE_NULL) {
    if ((j->nignored = hf_ids(x, argv[2], "ignored", hm_limits.MAX_K, &j->ignored)) < 0) {
      j->nignored = 0;
      return x->code;
    }
  } else {
    j->rest_ignored = 1;
  }
  const char **ignored = NULL;
  if ((rc = hf_set(x, j->ignored, j->nignored, &ignored))) return rc;
  for (int i = 0; i < j->nused && !rc; i++)
    if (hf_has(ignored, j->nignored, j->used[i]))
      rc = hc_fail(x, SQLITE_ERROR, "ids both used and ignored: ['%s']", j->used[i]);
  sqlite3_free(ignored);
  return rc;
}

/* The recall judged: the one given, else the newest that showed every id
 * judged (of the namespace, if given); read from the log. */
static int hf_judge_recall(hc_ctx *x, hf_judgment *j) {
  int rc, n = j->nused + j->nignored;
  if (!j->have_rid) {
    if (n == 0)
      return hc_fail(x, SQLITE_ERROR, "feedback needs a recall_id (or ids to find the recall by)");
    char **all = sqlite3_malloc64((sqlite3_uint64)n * sizeof(char *));
    if (!all) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    for (int i = 0; i < j->nused; i++) all[i] = j->used[i];
    for (int i = 0; i < j->nignored; i++) all[j->nused + i] = j->ignored[i];
    rc = hf_newest(x, all, n, j->ns_arg, &j->rid);
    sqlite3_free(all);
    if (rc) return rc;
  }
  if ((rc = hf_read_recall(x, j->rid, &j->r))) return rc;
  if (j->ns_arg && strcmp(j->ns_arg, j->r.ns))
    return hc_fail(x, SQLITE_ERROR, "unknown recall_id %lld in namespace '%s' (never recorded "
                                    "there, or forgotten)", (long long)j->rid, j->ns_arg);
  return SQLITE_OK;
}

/* heap_answer: the ids judged are heap_attribute's verdicts on the recall's
 * memories, used (1) and ignored (0); a recall judged already is refused. */
static int hf_answer_verdicts(hc_ctx *x, hf_judgment *j) {
  hf_recall *r = &j->r;
  sqlite3_stmt *st = NULL;
  int rc;
  for (int i = 0; i < r->n; i++)
    if (r->judged[i])
      return hc_fail(x, SQLITE_ERROR, "recall %lld already has feedback; an answer can only "
                                      "judge a recall nothing has judged yet", (long long)j->rid);
  if ((rc = hc_prepare(x, "SELECT heap_attribute(?1, r.query, s.key, m.text, m.created_at) "
                          "FROM recalls AS r CROSS JOIN json_each(r.shown) AS s LEFT JOIN "
                          "memories AS m ON m.id = s.value WHERE r.id = ?2", &st)))
    return rc;
  sqlite3_bind_text(st, 1, j->answer, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, j->rid);
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) { rc = hc_sqlfail(x, rc); hc_done(x, st); return rc; }
  j->attribution = sqlite3_mprintf("%s", sqlite3_column_text(st, 0));
  hc_done(x, st);
  st = NULL;
  if (!j->attribution) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  /* the verdicts by position: 1 used, 0 ignored */
  if ((rc = hc_prepare(x, "SELECT key, json_extract(value, '$.verdict') FROM json_each(?1)", &st)))
    return rc;
  sqlite3_bind_text(st, 1, j->attribution, -1, SQLITE_STATIC);
  j->used = sqlite3_malloc64((sqlite3_uint64)(r->n + 1) * sizeof(char *));
  j->ignored = sqlite3_malloc64((sqlite3_uint64)(r->n + 1) * sizeof(char *));
  if (!j->used || !j->ignored) {
    rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
    hc_done(x, st);
    return rc;
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int pos = sqlite3_column_int(st, 0);
    if (pos < 0 || pos >= r->n || sqlite3_column_type(st, 1) != SQLITE_INTEGER) continue;
    int verdict = sqlite3_column_int(st, 1);
    if (verdict == 1) j->used[j->nused++] = sqlite3_mprintf("%s", r->shown[pos]);
    else if (verdict == 0) j->ignored[j->nignored++] = sqlite3_mprintf("%s", r->shown[pos]);
  }
  if (rc != SQLITE_DONE) { rc = hc_sqlfail(x, rc); hc_done(x, st); return rc; }
  hc_done(x, st);
  return SQLITE_OK;
}

/* Every id judged must be one the recall showed, and not judged yet; with
 * no ignored given, every other shown memory not judged yet is ignored.
 * Each id is looked up in the recall's index (hf_last_pos): linear in the
 * ids and the shown. */
static int hf_judge_check(hc_ctx *x, hf_judgment *j) {
  hf_recall *r = &j->r;
  int rc = SQLITE_OK;
  char **bad = sqlite3_malloc64((sqlite3_uint64)(j->nused + j->nignored + 1) * sizeof(char *));
  int nbad = 0;
  if (!bad) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  for (int pass = 0; pass < 2 && !rc; pass++) {
    nbad = 0;
    for (int i = 0; i < j->nused + j->nignored; i++) {
      const char *id = i < j->nused ? j->used[i] : j->ignored[i - j->nused];
      int pos = hf_last_pos(r, id);
      if (pass == 0 ? pos < 0 : r->judged[pos]) bad[nbad++] = (char *)id;
    }
    if (nbad) {
      char *list = hf_pylist(bad, nbad);
      if (pass == 0)
        rc = hc_fail(x, SQLITE_ERROR, "recall %lld did not show %s; feedback can only judge "
                                      "memories that recall returned", (long long)j->rid, list);
      else
        rc = hc_fail(x, SQLITE_ERROR, "recall %lld already has feedback for %s; each shown "
                                      "memory is judged once", (long long)j->rid, list);
      sqlite3_free(list);
    }
  }
  sqlite3_free(bad);
  if (rc || !j->rest_ignored) return rc;
  /* every other shown memory not judged yet (at its last position, as a
   * dict keeps it), each once, in the order of its first position: each run
   * of one id in r->order (sorted by id, then position) starts at its first
   * position and ends at its last */
  char **extra = sqlite3_malloc64((sqlite3_uint64)(j->nignored + r->n + 1) * sizeof(char *));
  unsigned char *take = sqlite3_malloc64((sqlite3_uint64)r->n + 1);
  const char **used = NULL;
  if (!extra || !take || (rc = hf_set(x, j->used, j->nused, &used))) {
    sqlite3_free(extra);
    sqlite3_free(take);
    return rc ? rc : hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  memset(take, 0, (size_t)r->n + 1);
  for (int a = 0, b; a < r->n; a = b) {
    for (b = a + 1; b < r->n && !strcmp(r->shown[r->order[b]], r->shown[r->order[a]]); b++) {
    }
    const char *id = r->shown[r->order[a]];
    take[r->order[a]] = !hf_has(used, j->nused, id) && !r->judged[r->order[b - 1]];
  }
  for (int i = 0; i < j->nignored; i++) extra[i] = j->ignored[i];
  int n = j->nignored;
  for (int k = 0; k < r->n && !rc; k++)
    if (take[k] && !(extra[n++] = sqlite3_mprintf("%s", r->shown[k]))) {
      n--;
      rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
    }
  sqlite3_free(used);
  sqlite3_free(take);
  /* extra owns every name now: the given ones moved, the others copied */
  sqlite3_free(j->ignored);
  j->ignored = extra;
  j->nignored = n;
  return rc;
}

/* Which of the ids judged still exist (*alive_out, one flag per id, used
 * first); a used one that does not is an error. */
static int hf_judge_alive(hc_ctx *x, const hf_judgment *j, int **alive_out) {
  sqlite3_stmt *st = NULL;
  int rc;
  int *alive = sqlite3_malloc64((sqlite3_uint64)(j->nused + j->nignored + 1) * sizeof(int));
  if (!alive) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if ((rc = hc_prepare(x, "SELECT 1 FROM memories WHERE id = ?1", &st))) {
    sqlite3_free(alive);
    return rc;
  }
  for (int i = 0; i < j->nused + j->nignored && !rc; i++) {
    const char *id = i < j->nused ? j->used[i] : j->ignored[i - j->nused];
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    int s2 = sqlite3_step(st);
    alive[i] = s2 == SQLITE_ROW;
    if (s2 != SQLITE_ROW && s2 != SQLITE_DONE) rc = hc_sqlfail(x, s2);
    else if (!alive[i] && i < j->nused)
      rc = hc_fail(x, SQLITE_ERROR, "memory '%s' no longer exists (forgotten)", id);
  }
  hc_done(x, st);
  if (rc) { sqlite3_free(alive); return rc; }
  *alive_out = alive;
  return SQLITE_OK;
}

/* The judged rows that still exist, as the recall scored them (their
 * positions and verdicts: jpos, jused), and their ids, used and ignored. */
static int hf_judged_rows(hc_ctx *x, hf_judgment *j, const int *alive) {
  hf_recall *r = &j->r;
  sqlite3 *db = x->db;
  sqlite3_str *ujs = sqlite3_str_new(db), *ijs = sqlite3_str_new(db);
  sqlite3_str_appendchar(ujs, 1, '[');
  sqlite3_str_appendchar(ijs, 1, '[');
  j->jpos = sqlite3_malloc64((sqlite3_uint64)(j->nused + j->nignored + 1) * 2 * sizeof(int));
  j->jused = j->jpos ? j->jpos + j->nused + j->nignored + 1 : NULL;
  int ni = 0;
  for (int i = 0; j->jpos && i < j->nused + j->nignored; i++) {
    const char *id = i < j->nused ? j->used[i] : j->ignored[i - j->nused];
    if (!alive[i]) continue;
    j->jpos[j->njudged] = hf_last_pos(r, id);
    j->jused[j->njudged++] = i < j->nused;
    sqlite3_str *w = i < j->nused ? ujs : ijs;
    if (i < j->nused ? j->nu++ : ni++) sqlite3_str_appendchar(w, 1, ',');
    hq_json_string(w, id, (int)strlen(id));
  }
  sqlite3_str_appendchar(ujs, 1, ']');
  sqlite3_str_appendchar(ijs, 1, ']');
  j->used_json = sqlite3_str_finish(ujs);
  j->ignored_json = sqlite3_str_finish(ijs);
  if (!j->jpos || !j->used_json || !j->ignored_json)
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  return SQLITE_OK;
}

/* The namespace's link set, for the reference credit (model 0), which
 * depends on current strengths: *links, sqlite3_malloc'ed (recall.c's
 * hr_link_set, the pooled layer's pending changes applied). */
static int hf_credit_links(hc_ctx *x, const hf_judgment *j, unsigned char **links,
                           int *linkslen) {
  sqlite3_stmt *st = NULL, *own = NULL, *pending = NULL;
  hp_ops ops = {0};
  i64 maxid;
  int rc;
  if (!(rc = hc_prepare(x, hf_sql_pending, &pending)) &&
      (rc = hp_read(pending, &ops, &maxid)))
    rc = rc == SQLITE_CORRUPT
             ? hc_fail(x, SQLITE_CORRUPT, "a pending change of the pooled layer is damaged")
             : hc_sqlfail(x, rc);
  if (!rc && !(rc = hc_prepare(x, hr_sql_links, &st)) && !(rc = hc_prepare(x, hr_sql_own, &own)))
    if ((rc = hr_link_set(st, own, &ops, j->r.qtype, j->r.ns, j->cfg.pooled_pseudocount, links,
                          linkslen)))
      rc = rc == SQLITE_CORRUPT
               ? hc_fail(x, SQLITE_CORRUPT, "the learned links are damaged (counts that are "
                                            "not finite and >= 0, or a feature name that is "
                                            "not UTF-8)")
               : hc_sqlfail(x, rc);
  hp_free(&ops);
  hc_done(x, pending);
  hc_done(x, st);
  hc_done(x, own);
  return rc;
}

/* Feature name (len bytes) credited (da, db) by one judged memory, added to
 * the fold (j->touch, in first-seen order, sums from 0 in the judged order,
 * as heap_fold sums them; slot: nslot places by hash, -1 empty, nslot at
 * least twice the features the judged memories can have).
 * j: the feedback; cap: room in j->touch, grown here. */
static int hf_fold_add(hc_ctx *x, hf_judgment *j, const char *name, int len, double da,
                       double db, int *cap, int *slot, u64 nslot) {
  u64 h = hm_fnv64(name, (size_t)len) & (nslot - 1);
  for (; slot[h] >= 0; h = (h + 1) & (nslot - 1)) {
    hf_touch *u = &j->touch[slot[h]];
    if (!strncmp(u->f, name, (size_t)len) && u->f[len] == 0) {
      u->da += da;
      u->db += db;
      u->dn++;
      return SQLITE_OK;
    }
  }
  slot[h] = j->ntouch;
  if (j->ntouch == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    hf_touch *g = sqlite3_realloc64(j->touch, (sqlite3_uint64)*cap * sizeof *g);
    if (!g) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    j->touch = g;
  }
  hf_touch *u = &j->touch[j->ntouch];
  memset(u, 0, sizeof *u);
  if (!(u->f = sqlite3_mprintf("%.*s", len, name))) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  j->ntouch++;
  u->da = 0.0 + da;
  u->db = 0.0 + db;
  u->dn = 1;
  return SQLITE_OK;
}

/* The events, one per judged memory, each with the deltas hm_credit gives
 * it (as heap_credit writes them), and the same credits summed per feature
 * (as heap_fold sums them) into j->touch. */
static int hf_events(hc_ctx *x, hf_judgment *j, const unsigned char *links, int linkslen) {
  sqlite3_stmt *st = NULL;
  char names[HM_ACTIVE_LEN], err[HM_ERRLEN] = "";
  double da[2 * HM_MAX_FEATURES], db[2 * HM_MAX_FEATURES];
  int rc, cap = 0;
  u64 nslot = 64;
  while (nslot < (u64)(j->njudged + 1) * 4 * HM_MAX_FEATURES) nslot *= 2;
  if (!hm_qtype_valid(j->r.qtype))
    return hc_fail(x, SQLITE_ERROR, "heap_credit: unknown question type");
  int *slot = sqlite3_malloc64(nslot * sizeof *slot);
  if (!slot) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  for (u64 i = 0; i < nslot; i++) slot[i] = -1;
  if ((rc = hc_prepare(x, "INSERT INTO events(recall_id, position, namespace, qtype, used, "
                          "deltas, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &st))) {
    sqlite3_free(slot);
    return rc;
  }
  for (int i = 0; !rc && i < j->njudged; i++) {
    int pos = j->jpos[i];
    int k = hm_credit(j->r.feats[pos], j->r.qtype, j->r.ages[pos], j->jused[i], links, linkslen,
                      &j->cfg, names, sizeof names, da, db, 2 * HM_MAX_FEATURES, err, sizeof err);
    if (k < 0) {
      rc = hc_fail(x, SQLITE_ERROR, "heap_credit: %s", err);
      break;
    }
    sqlite3_str *d = sqlite3_str_new(x->db);
    hq_credit_json(d, names, da, db, k);
    int dlen = sqlite3_str_length(d);
    char *deltas = sqlite3_str_finish(d);
    if (!deltas) { rc = hc_fail(x, SQLITE_NOMEM, "out of memory"); break; }
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, j->rid);
    sqlite3_bind_int(st, 2, pos);
    sqlite3_bind_text(st, 3, j->r.ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, j->r.qtype, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, j->jused[i]);
    sqlite3_bind_text(st, 6, deltas, dlen, sqlite3_free);
    sqlite3_bind_double(st, 7, j->now);
    rc = hc_exec(x, st);
    const char *name = names;
    for (int f = 0; !rc && f < k; f++) {
      while (*name == ' ') name++;
      int len = (int)strcspn(name, " ");
      rc = hf_fold_add(x, j, name, len, da[f], db[f], &cap, slot, nslot);
      name += len;
    }
  }
  hc_done(x, st);
  sqlite3_free(slot);
  return rc;
}

/* What a feedback that judges something writes: the events, the fold into
 * the namespace's own links, and the pooled layer kept current
 * (hf_fold_pool, feature by feature). */
static int hf_judge_write(hc_ctx *x, hf_judgment *j) {
  hf_pool pool;
  unsigned char *links = NULL;
  int linkslen = 0;
  int rc = hf_pool_read(x, &pool);
  if (rc) return rc;
  if (j->cfg.model == 0) rc = hf_credit_links(x, j, &links, &linkslen);
  if (!rc) rc = hf_events(x, j, links, linkslen);
  sqlite3_free(links);
  if (!rc) rc = hf_fold_pool(x, j->r.ns, j->touch, j->ntouch, &pool);
  j->nfeatures = j->ntouch;
  return rc;
}

/* The memories judged used were used now. */
static int hf_mark_used(hc_ctx *x, const hf_judgment *j) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "UPDATE memories SET last_used_at = max(coalesce(last_used_at, 0), ?1) "
                         "WHERE id IN (SELECT value FROM json_each(?2))", &st);
  if (rc) return rc;
  sqlite3_bind_double(st, 1, j->now);
  sqlite3_bind_text(st, 2, j->used_json, -1, SQLITE_STATIC);
  rc = hc_exec(x, st);
  hc_done(x, st);
  return rc;
}

/* auto-tune's count and its run after the feedback (tune.c) */
static int ht_count(hc_ctx *x, i64 rid, int nused, int on, i64 *claim, i64 *judged,
                    int *tuning);
static char *ht_autotune(hc_ctx *x, const char *config, i64 claim, i64 judged);

/* The whole of one feedback, inside the caller's savepoint, step by step:
 * auto-tune's count kept last (on: a point may be claimed, into *claim;
 * *tuning: a tune is under way).  out: the JSON result, less its closing
 * brace.
 * answer_mode: heap_answer (the verdicts come from the answer); *judged: auto-
 * tune's count of judged recalls. */
static int hf_judge(hc_ctx *x, sqlite3_value **argv, int argc, int answer_mode, int on,
                    i64 *claim, i64 *judged, int *tuning, char **out) {
  hf_judgment j = {.answer_mode = answer_mode};
  int *alive = NULL;
  int rc = hf_judge_args(x, argv, argc, &j);
  if (!rc) rc = hf_judge_recall(x, &j);
  if (!rc && answer_mode) rc = hf_answer_verdicts(x, &j);
  if (!rc) rc = hf_judge_check(x, &j);
  if (!rc) rc = hf_judge_alive(x, &j, &alive);
  if (!rc) rc = hf_judged_rows(x, &j, alive);
  sqlite3_free(alive);
  if (!rc && j.njudged) rc = hf_judge_write(x, &j);
  if (!rc && j.nu) rc = hf_mark_used(x, &j);
  if (!rc) rc = ht_count(x, j.rid, j.nu, on, claim, judged, tuning);
  if (!rc) {
    *out = sqlite3_mprintf("{\"recall_id\":%lld,\"used\":%s,\"ignored\":%s,\"links_updated\":"
                           "%lld,\"attribution\":%s", (long long)j.rid, j.used_json,
                           j.ignored_json, (long long)j.nfeatures,
                           j.attribution ? j.attribution : "null");
    if (!*out) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  hf_judgment_free(&j);
  return rc;
}

/* The autotune argument (argv[i]): 1 (or absent, or NULL) to tune at the
 * schedule's points, 0 to count only.
 * i: its index; *on: 1 or 0. */
static int hf_autotune_arg(hc_ctx *x, sqlite3_value **argv, int argc, int i, int *on) {
  *on = 1;
  if (argc <= i || sqlite3_value_type(argv[i]) == SQLITE_NULL) return SQLITE_OK;
  i64 v = sqlite3_value_int64(argv[i]);
  if (sqlite3_value_type(argv[i]) != SQLITE_INTEGER || (v != 0 && v != 1))
    return hc_fail(x, SQLITE_ERROR, "autotune must be 1 (tune at 30, 60, 120, ... judged "
                                    "recalls) or 0 (count only)");
  *on = (int)v;
  return SQLITE_OK;
}

/* heap_feedback / heap_answer: hf_judge inside a savepoint of its own, so
 * that an error anywhere leaves nothing written; then, when the feedback
 * claimed a point or a tune is under way, auto-tune's next step, in a
 * savepoint of its own (its failure is in the result, never the
 * feedback's). */
static void hf_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv, int answer_mode) {
  const char *fname = answer_mode ? "heap_answer" : "heap_feedback";
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  char *out = NULL, *tuned = NULL;
  i64 claim = 0, judged = 0;
  int on = 1, tuning = 0, icfg = answer_mode ? 4 : 5;
  hc_keep_statements(&x);
  if (sqlite3_db_readonly(x.db, "main") == 1) {
    char *m = sqlite3_mprintf("%s: the store is read-only here; feedback writes events and "
                              "links", fname);
    sqlite3_result_error(ctx, m, -1);
    sqlite3_result_error_code(ctx, SQLITE_READONLY);
    sqlite3_free(m);
    return;
  }
  char *why = NULL;
  int rc = hs_check_store(x.db, x.conn, &why);
  if (rc != SQLITE_OK) {
    hc_fail(&x, rc, "%s", why ? why : "out of memory");
    sqlite3_free(why);
  } else if ((rc = sqlite3_exec(x.db, "SAVEPOINT heap_feedback", NULL, NULL, NULL)) !=
             SQLITE_OK) {
    hc_sqlfail(&x, rc);
  } else {
    rc = hf_autotune_arg(&x, argv, argc, icfg + 1, &on);
    if (!rc) rc = hf_judge(&x, argv, argc, answer_mode, on, &claim, &judged, &tuning, &out);
    if (rc == SQLITE_OK) {
      rc = sqlite3_exec(x.db, "RELEASE heap_feedback", NULL, NULL, NULL);
      if (rc != SQLITE_OK) hc_sqlfail(&x, rc);
    }
    if (rc != SQLITE_OK) {
      sqlite3_exec(x.db, "ROLLBACK TO heap_feedback", NULL, NULL, NULL);
      sqlite3_exec(x.db, "RELEASE heap_feedback", NULL, NULL, NULL);
    }
  }
  if (rc == SQLITE_OK && on && (claim || tuning)) { /* the claim's tune, or its next step */
    const char *cfg = argc > icfg && sqlite3_value_type(argv[icfg]) == SQLITE_TEXT
                          ? (const char *)sqlite3_value_text(argv[icfg]) : NULL;
    tuned = ht_autotune(&x, cfg, claim, judged);
  }
  if (rc == SQLITE_OK) {
    char claimed[24] = "null";
    if (claim) snprintf(claimed, sizeof claimed, "%lld", (long long)claim);
    char *full = sqlite3_mprintf("%s,\"auto_tune\":%s,\"claimed\":%s}", out,
                                 tuned ? tuned : "null", claimed);
    sqlite3_free(out);
    sqlite3_free(tuned);
    if (full) {
      sqlite3_result_text(ctx, full, -1, sqlite3_free);
      return;
    }
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_free(out);
  hc_result_fail(ctx, &x, fname, rc);
  if (!(x.code && x.code != SQLITE_ERROR) && rc != SQLITE_ERROR)
    sqlite3_result_error_code(ctx, rc);
}

static void heap_feedback(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hf_sql(ctx, argc, argv, 0);
}

static void heap_answer(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hf_sql(ctx, argc, argv, 1);
}

/* The features argument of heap_rebuild_pool: a JSON array of at most
 * MAX_IDS features heapmem makes (hm_feature_ok).  0, or the error set. */
static int hf_features_arg(hc_ctx *x, sqlite3_value *v) {
  static const char bad[] = "features must be a JSON array of feature names heapmem makes, "
                            "such as '[\"kind:fact\", \"when/date:1\"]'";
  char why[HM_ERRLEN];
  const char *text;
  if (hq_arg_text(v, "features", 0, hm_limits.MAX_TEXT_BYTES, &text, why, sizeof why))
    return hc_fail(x, SQLITE_ERROR, "%s", sqlite3_value_type(v) == SQLITE_TEXT ? why : bad);
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT json_valid(?1) AND json_type(?1) = 'array', "
                         "json_array_length(CASE WHEN json_valid(?1) THEN ?1 END)", &st);
  if (rc) return rc;
  sqlite3_bind_value(st, 1, v);
  int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0);
  i64 n = ok ? sqlite3_column_int64(st, 1) : 0;
  hc_done(x, st);
  if (!ok) return hc_fail(x, SQLITE_ERROR, "%s", bad);
  if ((double)n > hm_limits.MAX_IDS)
    return hc_fail(x, SQLITE_ERROR, "features lists %lld features; at most %.0f are taken at "
                                    "once", (long long)n, hm_limits.MAX_IDS);
  if ((rc = hc_prepare(x, "SELECT type, value FROM json_each(?1)", &st))) return rc;
  sqlite3_bind_value(st, 1, v);
  while (!x->err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *type = (const char *)sqlite3_column_text(st, 0);
    const char *f = (const char *)sqlite3_column_text(st, 1);
    if (!type || strcmp(type, "text") || !f ||
        (int)strlen(f) != sqlite3_column_bytes(st, 1) || !hm_feature_ok(f))
      hc_fail(x, SQLITE_ERROR, "%s; %s is not one", bad,
              type && !strcmp(type, "text") && f ? "a name in it" : "a value in it");
  }
  if (!x->err && rc != SQLITE_DONE) hc_sqlfail(x, rc);
  hc_done(x, st);
  return x->err ? x->code : SQLITE_OK;
}

/* heap_rebuild_pool([features]): the pooled rows of these features (a JSON
 * array; every feature when absent) worked out afresh, in the caller's
 * transaction (set_pool, an import, a prior removed), after the schema
 * check every write makes: a file with a foreign trigger on links is
 * refused before the rebuild writes a row. */
static void heap_rebuild_pool(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  const char *features = NULL;
  char *why = NULL;
  hf_pool pool;
  int rc;
  hc_keep_statements(&x);
  if (sqlite3_db_readonly(x.db, "main") == 1) {
    rc = hc_fail(&x, SQLITE_READONLY, "the store is read-only here");
  } else if ((rc = hs_check_store(x.db, x.conn, &why)) != SQLITE_OK) {
    hc_fail(&x, rc, "%s", why ? why : "out of memory");
  } else if (argc > 0 && sqlite3_value_type(argv[0]) != SQLITE_NULL &&
             (rc = hf_features_arg(&x, argv[0])) != SQLITE_OK) {
    /* x holds why */
  } else if ((rc = sqlite3_exec(x.db, "SAVEPOINT heap_rebuild_pool", NULL, NULL, NULL))) {
    hc_sqlfail(&x, rc);
  } else {
    if (argc > 0 && sqlite3_value_type(argv[0]) != SQLITE_NULL)
      features = (const char *)sqlite3_value_text(argv[0]);
    rc = hf_pool_read(&x, &pool);
    if (!rc) rc = hf_rebuild(&x, features, &pool);
    if (rc == SQLITE_OK) rc = sqlite3_exec(x.db, "RELEASE heap_rebuild_pool", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
      if (!x.err) hc_sqlfail(&x, rc);
      sqlite3_exec(x.db, "ROLLBACK TO heap_rebuild_pool", NULL, NULL, NULL);
      sqlite3_exec(x.db, "RELEASE heap_rebuild_pool", NULL, NULL, NULL);
    }
  }
  sqlite3_free(why);
  if (rc == SQLITE_OK) {
    sqlite3_result_null(ctx);
    return;
  }
  hc_result_fail(ctx, &x, "heap_rebuild_pool", rc);
}

/* heap_fold_pool(): the pooled layer's pending changes folded into its rows
 * now (feedback folds them every HF_POOL_BATCH feedbacks; every reader
 * applies them meanwhile), for a reader of the links table itself.  Returns
 * how many feedbacks' changes it folded. */
static void heap_fold_pool(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  char *why = NULL;
  i64 folded = 0;
  hc_keep_statements(&x);
  int rc = hs_check_store(x.db, x.conn, &why);
  if (rc != SQLITE_OK) hc_fail(&x, rc, "%s", why ? why : "out of memory");
  sqlite3_free(why);
  if (!rc && sqlite3_db_readonly(x.db, "main") == 1)
    rc = hc_fail(&x, SQLITE_READONLY, "the store is read-only here (readers apply the pending "
                                      "changes themselves: heap_pool_now)");
  if (!rc && (rc = sqlite3_exec(x.db, "SAVEPOINT heap_fold_pool", NULL, NULL, NULL)))
    hc_sqlfail(&x, rc);
  else if (!rc) {
    rc = hf_pool_flush(&x, &folded);
    if (rc) sqlite3_exec(x.db, "ROLLBACK TO heap_fold_pool", NULL, NULL, NULL);
    sqlite3_exec(x.db, "RELEASE heap_fold_pool", NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK) sqlite3_result_int64(ctx, folded);
  else hc_result_fail(ctx, &x, "heap_fold_pool", rc);
}

/* heap_pool_now(): the pooled rows that pending changes touch, as readers
 * see them (stored row and pending changes applied): a JSON object
 * {"feature": [alpha, beta, n, support, low_rate, high_rate], ...}, the
 * rates null while nothing is pooled.  Python's readers of the links table
 * put these over the rows they read (heapmem.learning.pooled_now). */
static void heap_pool_now(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  sqlite3_stmt *pending = NULL, *row = NULL;
  hp_ops ops = {0};
  i64 maxid = 0;
  char *why = NULL, *f = NULL;
  sqlite3_str *out = sqlite3_str_new(x.db);
  hc_keep_statements(&x);
  int rc = hs_check_store(x.db, x.conn, &why), n = 0;
  if (rc != SQLITE_OK) hc_fail(&x, rc, "%s", why ? why : "out of memory");
  sqlite3_free(why);
  if (!rc && !(rc = hc_prepare(&x, hf_sql_pending, &pending)) &&
      (rc = hp_read(pending, &ops, &maxid)))
    rc = rc == SQLITE_CORRUPT
             ? hc_fail(&x, SQLITE_CORRUPT, "a pending change of the pooled layer is damaged")
             : hc_sqlfail(&x, rc);
  if (!rc) rc = hc_prepare(&x, hf_sql_pooled, &row);
  sqlite3_str_appendchar(out, 1, '{');
  for (int k = 0; !rc && k < ops.n; k++) {
    const hp_op *op = &ops.v[k];
    if (ops.first[hp_slot(&ops, op->f, op->flen)] != k) continue;
    hp_row r;
    if ((rc = hf_pooled_now(&x, row, &ops, op, &f, &r))) break;
    char a[32], b[32], lo[32], hi[32];
    hm_repr(r.a, a);
    hm_repr(r.b, b);
    hm_repr(r.lo, lo);
    hm_repr(r.hi, hi);
    if (n++) sqlite3_str_appendchar(out, 1, ',');
    hq_json_string(out, f, op->flen);
    sqlite3_str_appendf(out, ":[%s,%s,%lld,%lld,%s,%s]", a, b, (long long)r.n,
                        (long long)r.support, r.has_rates ? lo : "null", r.has_rates ? hi : "null");
  }
  sqlite3_str_appendchar(out, 1, '}');
  sqlite3_free(f);
  hp_free(&ops);
  hc_done(&x, pending);
  hc_done(&x, row);
  char *json = sqlite3_str_finish(out);
  if (!rc && !json) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    sqlite3_result_text(ctx, json, -1, sqlite3_free);
    return;
  }
  sqlite3_free(json);
  if (rc == SQLITE_NOMEM && !x.err) sqlite3_result_error_nomem(ctx);
  else hc_result_fail(ctx, &x, "heap_pool_now", rc);
}

#pragma endregion
