/*
 * pool.c: the pooled layer's pending changes (schema 10), what every reader
 * of the pooled rows applies.
 *
 * Owns: the format of a pool_pending row (one per feedback that changed the
 * pooled layer: what it added to each pooled row, in order), reading it
 * (hp_read) and applying it to a stored pooled row (hp_apply), so that a
 * reader sees exactly the row an eager fold would have written.  Feedback
 * (feedback.c) appends the rows and folds them into the pooled rows in a
 * batch (hf_pool_flush); recall (recall.c, hr_read_links) and
 * heap_pool_now apply them as they read.
 * Relies on: text.c (hm_fnv64).
 *
 * A row's ops blob is a sequence of records, each
 *   u32 feature length | feature bytes | u8 has_rates | f64 alpha | f64 beta |
 *   i64 n | i64 support | f64 low_rate | f64 high_rate
 * (little-endian): alpha, beta, n and support added to the pooled row (a row
 * made with them when there is none), its low_rate and high_rate set (NULL
 * when has_rates is 0), as feedback's upsert of a pooled row did.
 */

#pragma region pending pooled changes

typedef struct {
  const char *f; /* the feature (into the ops' own copy of the blobs) */
  int flen;
  int has_rates;
  double a, b, lo, hi;
  i64 n, support;
  int next; /* the next op of the same feature, -1 for none */
} hp_op;

typedef struct {
  hp_op *v;
  int n, cap;
  int *first, nslot; /* each feature's first op, by its hash (open addressing) */
  int *last;         /* ... and its last (parallel to first) */
  char **blobs;      /* the blobs the ops point into */
  int nblobs, capblobs;
} hp_ops;

static void hp_free(hp_ops *o) {
  for (int i = 0; i < o->nblobs; i++) sqlite3_free(o->blobs[i]);
  sqlite3_free(o->blobs);
  sqlite3_free(o->v);
  sqlite3_free(o->first);
  sqlite3_free(o->last);
  memset(o, 0, sizeof *o);
}

static void hp_put64(unsigned char *p, u64 v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static u64 hp_get64(const unsigned char *p) {
  u64 v = 0;
  for (int i = 0; i < 8; i++) v |= (u64)p[i] << (8 * i);
  return v;
}

static void hp_putd(unsigned char *p, double d) {
  u64 v;
  memcpy(&v, &d, 8);
  hp_put64(p, v);
}

static double hp_getd(const unsigned char *p) {
  u64 v = hp_get64(p);
  double d;
  memcpy(&d, &v, 8);
  return d;
}

#define HP_FIXED 53 /* the bytes of a record besides its feature */

/* The op's slot in o's index of features, -1 when the feature has none. */
static int hp_slot(const hp_ops *o, const char *f, int flen) {
  if (!o->nslot) return -1;
  u64 h = hm_fnv64(f, (size_t)flen);
  for (u64 i = h & (u64)(o->nslot - 1); o->first[i] >= 0; i = (i + 1) & (u64)(o->nslot - 1)) {
    const hp_op *p = &o->v[o->first[i]];
    if (p->flen == flen && !memcmp(p->f, f, (size_t)flen)) return (int)i;
  }
  return -1;
}

/* Index every op by its feature, in order (the chains go by next). */
static int hp_index(hp_ops *o) {
  int ns = 64;
  while (ns < 2 * o->n) ns *= 2;
  sqlite3_free(o->first);
  sqlite3_free(o->last);
  o->first = sqlite3_malloc64((sqlite3_uint64)ns * sizeof *o->first);
  o->last = sqlite3_malloc64((sqlite3_uint64)ns * sizeof *o->last);
  if (!o->first || !o->last) return SQLITE_NOMEM;
  o->nslot = ns;
  for (int i = 0; i < ns; i++) o->first[i] = o->last[i] = -1;
  for (int k = 0; k < o->n; k++) {
    hp_op *p = &o->v[k];
    p->next = -1;
    int s = hp_slot(o, p->f, p->flen);
    if (s >= 0) {
      o->v[o->last[s]].next = k;
      o->last[s] = k;
      continue;
    }
    u64 i = hm_fnv64(p->f, (size_t)p->flen) & (u64)(ns - 1);
    while (o->first[i] >= 0) i = (i + 1) & (u64)(ns - 1);
    o->first[i] = o->last[i] = k;
  }
  return SQLITE_OK;
}

static int hp_push(hp_ops *o, const hp_op *op) {
  if (o->n == o->cap) {
    int cap = o->cap ? 2 * o->cap : 64;
    hp_op *v = sqlite3_realloc64(o->v, (sqlite3_uint64)cap * sizeof *v);
    if (!v) return SQLITE_NOMEM;
    o->v = v;
    o->cap = cap;
  }
  o->v[o->n++] = *op;
  return SQLITE_OK;
}

/* The records of one blob (len bytes) added to o, in order (the blob is
 * copied and kept).  SQLITE_CORRUPT when it is not what hp_encode writes. */
static int hp_decode(hp_ops *o, const void *blob, int len) {
  if (len < 0) return SQLITE_CORRUPT;
  if (o->nblobs == o->capblobs) {
    int cap = o->capblobs ? 2 * o->capblobs : 16;
    char **b = sqlite3_realloc64(o->blobs, (sqlite3_uint64)cap * sizeof *b);
    if (!b) return SQLITE_NOMEM;
    o->blobs = b;
    o->capblobs = cap;
  }
  unsigned char *p = sqlite3_malloc64((sqlite3_uint64)len + 1);
  if (!p) return SQLITE_NOMEM;
  if (len) memcpy(p, blob, (size_t)len);
  o->blobs[o->nblobs++] = (char *)p;
  for (int at = 0; at < len;) {
    if (len - at < 4) return SQLITE_CORRUPT;
    u32 fl = (u32)p[at] | (u32)p[at + 1] << 8 | (u32)p[at + 2] << 16 | (u32)p[at + 3] << 24;
    if (fl > 4096 || (u64)len - (u64)at - 4 < (u64)fl + HP_FIXED - 4) return SQLITE_CORRUPT;
    const unsigned char *r = p + at + 4 + fl;
    hp_op op = {.f = (const char *)p + at + 4, .flen = (int)fl, .has_rates = r[0] != 0,
                .a = hp_getd(r + 1), .b = hp_getd(r + 9), .n = (i64)hp_get64(r + 17),
                .support = (i64)hp_get64(r + 25), .lo = hp_getd(r + 33),
                .hi = hp_getd(r + 41), .next = -1};
    if (r[0] > 1 || !isfinite(op.a) || !isfinite(op.b)) return SQLITE_CORRUPT;
    if (hp_push(o, &op)) return SQLITE_NOMEM;
    at += 4 + (int)fl + HP_FIXED - 4;
  }
  return SQLITE_OK;
}

/* One op appended to a blob being written (sqlite3_str).
 * s: the blob; f, flen: the feature; a, b, n: what its pooled counts gain;
 * support: the namespaces backing it; has_rates, lo, hi: its kept rates. */
static void hp_encode(sqlite3_str *s, const char *f, int flen, double a, double b, i64 n,
                      i64 support, int has_rates, double lo, double hi) {
  unsigned char r[HP_FIXED];
  r[0] = (unsigned char)flen;
  r[1] = (unsigned char)(flen >> 8);
  r[2] = (unsigned char)(flen >> 16);
  r[3] = (unsigned char)(flen >> 24);
  sqlite3_str_append(s, (const char *)r, 4);
  sqlite3_str_append(s, f, flen);
  r[0] = has_rates ? 1 : 0;
  hp_putd(r + 1, a);
  hp_putd(r + 9, b);
  hp_put64(r + 17, (u64)n);
  hp_put64(r + 25, (u64)support);
  hp_putd(r + 33, has_rates ? lo : 0.0);
  hp_putd(r + 41, has_rates ? hi : 0.0);
  sqlite3_str_append(s, (const char *)r, HP_FIXED - 4);
}

/* st ("SELECT id, ops FROM pool_pending ORDER BY id", stepped here and
 * reset) read into o, indexed by feature; *maxid the newest row's id (0:
 * none). */
static int hp_read(sqlite3_stmt *st, hp_ops *o, i64 *maxid) {
  HM_API_HERE; /* sqlite3_* calls for every pending row */
  int rc;
  *maxid = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    *maxid = sqlite3_column_int64(st, 0);
    if (sqlite3_column_type(st, 1) != SQLITE_BLOB) { rc = SQLITE_CORRUPT; break; }
    if ((rc = hp_decode(o, sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1)))) break;
  }
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) rc = o->n ? hp_index(o) : SQLITE_OK;
  return rc;
}

/* a + b, held at INT64_MAX (INT64_MIN): counts read from the file may be
 * anything (feedback.c sums the pooled rows' n with it too) */
static i64 hp_add_counts(i64 a, i64 b) {
  i64 s;
  return __builtin_add_overflow(a, b, &s) ? (b < 0 ? INT64_MIN : INT64_MAX) : s;
}

/* A pooled row as a reader sees it. */
typedef struct {
  int exists, has_rates;
  double a, b, lo, hi;
  i64 n, support;
} hp_row;

/* Feature f's pending ops applied to its stored row r, in order, as
 * feedback's upsert applied each: returns whether f had any. */
static int hp_apply(const hp_ops *o, const char *f, int flen, hp_row *r) {
  int s = hp_slot(o, f, flen);
  if (s < 0) return 0;
  for (int k = o->first[s]; k >= 0; k = o->v[k].next) {
    const hp_op *p = &o->v[k];
    if (r->exists) {
      r->a = r->a + p->a;
      r->b = r->b + p->b;
      r->n = hp_add_counts(r->n, p->n);
      r->support = hp_add_counts(r->support, p->support);
    } else {
      r->exists = 1;
      r->a = p->a;
      r->b = p->b;
      r->n = p->n;
      r->support = p->support;
    }
    r->has_rates = p->has_rates;
    r->lo = p->lo;
    r->hi = p->hi;
  }
  return 1;
}

#pragma endregion
