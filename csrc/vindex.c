/*
 * vindex.c: the vector index of a big namespace, in the file.
 *
 * Owns: the tables vector_index, vector_centroids and vector_parts (schema
 * 10) and the meta keys vector_index (the settings) and last_part; the
 * seeded k-means that cuts a namespace's vectors into partitions, the
 * split of a partition grown past twice the size, and their SQL doors:
 *
 *   SELECT heap_vector_index();          -- index every namespace past the threshold
 *   SELECT heap_vector_index(namespace); -- (re)build one namespace's index now
 *   SELECT heap_vector_maintain(namespace, seq);   -- after an add (heap_add: itself)
 *   SELECT heap_vector_settings(['{"threshold": 20000, "size": 512, ...}']);
 *   heap_vector_part(namespace, digest, vector)    -- the triggers' (innocuous)
 *
 * A namespace of the library's own embedder with `threshold` vectors or
 * more (schema.VECTOR_INDEX_DEFAULTS) gets about n / size partitions: k-means
 * (cosine) over a seeded sample, at most HX_FANOUT centroids a level, each
 * cluster cut again until it holds about `size` (hierarchical: its cost is
 * n x HX_FANOUT x levels dot products, not n x partitions).  A new vector
 * goes to its nearest centroid (the trigger, heap_vector_part); when a
 * partition passes 2 x size the write that grew it splits it (k-means over
 * its own vectors: at most 2 x size + a batch of them, so no add waits for
 * the namespace's whole index), into partitions of new ids: a connection's
 * cache keeps the others.  Recall (recall.c, embed.c) scans the partitions
 * nearest the question until it has scanned `probe` of the namespace, or
 * more just past the threshold (recall.c's hr_scan_budget).
 * Relies on: embed.c (the vector formats, hv_nearest, hv_cents_*),
 * call.c (hc_ctx and its statement helpers), sample.c (hm_splitmix64),
 * text.c (hm_fnv64).
 */

#pragma region the vector index

#define HX_FANOUT 32  /* centroids per level of the build */
#define HX_SAMPLE 128 /* sample points per centroid for k-means */
#define HX_ITERS 8    /* Lloyd iterations */

typedef struct {
  i64 threshold, size;
  double probe;
  i64 seed;
} hx_settings;

static const char hx_sql_settings[] =
    "SELECT json_extract(value, '$.threshold'), json_extract(value, '$.size'), "
    "json_extract(value, '$.probe'), json_extract(value, '$.seed') FROM heapmem_meta "
    "WHERE key = '" HM_META_VECTOR_INDEX "' AND json_valid(value) AND json_type(value) = 'object'";

/* The settings in force (the defaults where the file says nothing usable). */
static int hx_settings_read(hc_ctx *x, hx_settings *s) {
  s->threshold = HM_VINDEX_THRESHOLD;
  s->size = HM_VINDEX_SIZE;
  s->probe = HM_VINDEX_PROBE;
  s->seed = HM_VINDEX_SEED;
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hx_sql_settings, &st);
  if (rc) return rc;
  if (sqlite3_step(st) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) == SQLITE_INTEGER && sqlite3_column_int64(st, 0) >= 1)
      s->threshold = sqlite3_column_int64(st, 0);
    if (sqlite3_column_type(st, 1) == SQLITE_INTEGER && sqlite3_column_int64(st, 1) >= 16 &&
        sqlite3_column_int64(st, 1) <= 65536)
      s->size = sqlite3_column_int64(st, 1);
    double p = sqlite3_column_double(st, 2);
    if (sqlite3_column_type(st, 2) != SQLITE_NULL && p > 0 && p <= 1) s->probe = p;
    if (sqlite3_column_type(st, 3) == SQLITE_INTEGER) s->seed = sqlite3_column_int64(st, 3);
  }
  hc_done(x, st);
  return SQLITE_OK;
}

/* The settings a recall scans by (recall.c's hr_scan_budget): the ones in
 * force, read by the one reader the index's builder uses. */
static int hx_scan_settings(hc_ctx *x, double *probe, i64 *size, i64 *threshold) {
  hx_settings s;
  int rc = hx_settings_read(x, &s);
  *probe = s.probe;
  *size = s.size;
  *threshold = s.threshold;
  return rc;
}

/* -- k-means ------------------------------------------------------------------------ */

/* A namespace's (or a partition's) vectors, read for a build or a split. */
typedef struct {
  int n, cap, dim;
  i64 *seq;
  int8_t *v; /* n x dim */
} hx_set;

static void hx_set_free(hx_set *s) {
  sqlite3_free(s->seq);
  sqlite3_free(s->v);
  memset(s, 0, sizeof *s);
}

/* Centroids made: (k x dim int8, their inverse norms), growing. */
typedef struct {
  int n, cap, dim;
  int8_t *c;
  float *inv;
} hx_cents;

static int hx_cents_push(hx_cents *cs, const int8_t *c) {
  if (cs->n == cs->cap) {
    int cap = cs->cap ? 2 * cs->cap : 64;
    int8_t *a = sqlite3_realloc64(cs->c, (sqlite3_uint64)cap * (sqlite3_uint64)cs->dim);
    if (!a) return SQLITE_NOMEM;
    cs->c = a;
    float *f = sqlite3_realloc64(cs->inv, (sqlite3_uint64)cap * sizeof *f);
    if (!f) return SQLITE_NOMEM;
    cs->inv = f;
    cs->cap = cap;
  }
  memcpy(cs->c + (size_t)cs->n * (size_t)cs->dim, c, (size_t)cs->dim);
  cs->inv[cs->n] = hv_inv_norm(c, cs->dim);
  cs->n++;
  return SQLITE_OK;
}

/* The int8 centroid of a sum of unit-scaled rows (sum[dim], exact
 * integers): its direction, its largest component 127. */
static void hx_centroid(const i64 *sum, int dim, int8_t *out) {
  i64 big = 0;
  for (int d = 0; d < dim; d++) big = llabs(sum[d]) > big ? llabs(sum[d]) : big;
  for (int d = 0; d < dim; d++)
    out[d] = big ? (int8_t)lrint((double)sum[d] * 127.0 / (double)big) : 0;
}

/* The mean direction of the rows idx[0..m) of s, into out.
 * sum: room for the sums, dim of them. */
static void hx_mean(const hx_set *s, const int *idx, int m, i64 *sum, int8_t *out) {
  memset(sum, 0, (size_t)s->dim * sizeof *sum);
  for (int i = 0; i < m; i++) {
    const int8_t *v = s->v + (size_t)idx[i] * (size_t)s->dim;
    for (int d = 0; d < s->dim; d++) sum[d] += v[d];
  }
  hx_centroid(sum, s->dim, out);
}

/* k centroids of the rows idx[0..m) of s (k <= m), by Lloyd's iterations
 * over a seeded sample, cosine: into c (k x dim) and inv.  0 or NOMEM.
 * seed: the sample's. */
static int hx_kmeans(const hx_set *s, const int *idx, int m, int k, u64 seed, int8_t *c,
                     float *inv) {
  int dim = s->dim, ns = m < HX_SAMPLE * k ? m : HX_SAMPLE * k;
  int *sample = sqlite3_malloc64((sqlite3_uint64)m * sizeof *sample);
  int *owner = sqlite3_malloc64((sqlite3_uint64)ns * sizeof *owner);
  i64 *sum = sqlite3_malloc64((sqlite3_uint64)k * (sqlite3_uint64)dim * sizeof *sum);
  int *count = sqlite3_malloc64((sqlite3_uint64)k * sizeof *count);
  float *fit = sqlite3_malloc64((sqlite3_uint64)ns * sizeof *fit);
  int rc = SQLITE_NOMEM;
  if (!sample || !owner || !sum || !count || !fit) goto done;
  memcpy(sample, idx, (size_t)m * sizeof *idx);
  for (int i = 0; i < ns; i++) { /* a seeded partial shuffle: the sample */
    int j = i + (int)(hm_splitmix64(&seed) % (u64)(m - i));
    int tmp = sample[i];
    sample[i] = sample[j];
    sample[j] = tmp;
  }
  for (int j = 0; j < k; j++) {
    memcpy(c + (size_t)j * dim, s->v + (size_t)sample[j] * dim, (size_t)dim);
    inv[j] = hv_inv_norm(c + (size_t)j * dim, dim);
  }
  for (int it = 0; it < HX_ITERS; it++) {
    memset(sum, 0, (size_t)k * (size_t)dim * sizeof *sum);
    memset(count, 0, (size_t)k * sizeof *count);
    for (int i = 0; i < ns; i++) {
      const int8_t *v = s->v + (size_t)sample[i] * dim;
      int j = hv_nearest(c, inv, k, v, dim);
      owner[i] = j;
      hv_query q;
      hv_query_make(&q, v, dim, 8);
      int dot;
      hv_dots((const unsigned char *)(c + (size_t)j * dim), 1, &q, &dot);
      fit[i] = (float)dot * inv[j] * q.inv;
      count[j]++;
      for (int d = 0; d < dim; d++) sum[(size_t)j * dim + d] += v[d];
    }
    for (int j = 0; j < k; j++) {
      if (!count[j]) { /* empty: the sample point worst served moves here */
        int worst = 0;
        for (int i = 1; i < ns; i++)
          if (fit[i] < fit[worst]) worst = i;
        fit[worst] = INFINITY;
        memcpy(c + (size_t)j * dim, s->v + (size_t)sample[worst] * dim, (size_t)dim);
      } else {
        hx_centroid(sum + (size_t)j * dim, dim, c + (size_t)j * dim);
      }
      inv[j] = hv_inv_norm(c + (size_t)j * dim, dim);
    }
  }
  rc = SQLITE_OK;
done:
  sqlite3_free(sample);
  sqlite3_free(owner);
  sqlite3_free(sum);
  sqlite3_free(count);
  sqlite3_free(fit);
  return rc;
}

/* The rows idx[0..m) of s cut into partitions of about `size`: k of them
 * (k > 1), by k-means at most HX_FANOUT at a time and again inside each
 * cluster that needs it.  Each partition's centroid is the mean of its
 * rows, pushed to out, and leaf[idx[i]] its index there.  Rows k-means
 * cannot tell apart (one cluster holds them all) are cut in seq order.
 * seed: the k-means' seed. */
static int hx_cut(const hx_set *s, int *idx, int m, int k, i64 size, u64 seed, hx_cents *out,
                  int *leaf) {
  int dim = s->dim, rc = SQLITE_OK;
  i64 sum[HM_MAX_DIM];
  int8_t mean[HM_MAX_DIM];
  if (k <= 1 || m <= 1) {
    hx_mean(s, idx, m, sum, mean);
    for (int i = 0; i < m; i++) leaf[idx[i]] = out->n;
    return hx_cents_push(out, mean);
  }
  int kk = k < HX_FANOUT ? k : HX_FANOUT;
  if (kk > m) kk = m;
  int8_t *c = sqlite3_malloc64((sqlite3_uint64)kk * (sqlite3_uint64)dim);
  float *inv = sqlite3_malloc64((sqlite3_uint64)kk * sizeof *inv);
  int *group = sqlite3_malloc64((sqlite3_uint64)m * sizeof *group);
  int *start = sqlite3_malloc64((sqlite3_uint64)(kk + 1) * sizeof *start);
  int *sorted = sqlite3_malloc64((sqlite3_uint64)m * sizeof *sorted);
  if (!c || !inv || !group || !start || !sorted) { rc = SQLITE_NOMEM; goto done; }
  if ((rc = hx_kmeans(s, idx, m, kk, seed, c, inv))) goto done;
  memset(start, 0, (size_t)(kk + 1) * sizeof *start);
  for (int i = 0; i < m; i++) {
    group[i] = hv_nearest(c, inv, kk, s->v + (size_t)idx[i] * dim, dim);
    start[group[i] + 1]++;
  }
  int biggest = 0;
  for (int j = 0; j < kk; j++) {
    if (start[j + 1] > biggest) biggest = start[j + 1];
    start[j + 1] += start[j];
  }
  if (biggest == m) { /* no progress: cut in seq order */
    for (int i = 0; i < m; i++) group[i] = (int)((i64)i * kk / m);
    memset(start, 0, (size_t)(kk + 1) * sizeof *start);
    for (int i = 0; i < m; i++) start[group[i] + 1]++;
    for (int j = 0; j < kk; j++) start[j + 1] += start[j];
  }
  int *fill = sqlite3_malloc64((sqlite3_uint64)(kk + 1) * sizeof *fill);
  if (!fill) { rc = SQLITE_NOMEM; goto done; }
  memcpy(fill, start, (size_t)(kk + 1) * sizeof *fill);
  for (int i = 0; i < m; i++) sorted[fill[group[i]]++] = idx[i];
  sqlite3_free(fill);
  memcpy(idx, sorted, (size_t)m * sizeof *idx);
  for (int j = 0; j < kk && rc == SQLITE_OK; j++) {
    int gm = start[j + 1] - start[j];
    if (!gm) continue;
    int gk = (int)((gm + size - 1) / size);
    int again = gk > 2 || (kk < k && gk > 1);
    u64 sub = seed ^ (0x9E3779B97F4A7C15ull * (u64)(j + 1));
    rc = hx_cut(s, idx + start[j], gm, again ? gk : 1, size, hm_splitmix64(&sub), out, leaf);
  }
done:
  sqlite3_free(c);
  sqlite3_free(inv);
  sqlite3_free(group);
  sqlite3_free(start);
  sqlite3_free(sorted);
  return rc;
}

#pragma endregion

#pragma region the index in the file

/* ?1 namespace: its vectors */
static const char hx_sql_ns_vectors[] =
    "SELECT v.seq, v.v FROM memories AS m CROSS JOIN vectors AS v ON v.seq = m.seq "
    "WHERE m.namespace = ?1 ORDER BY m.seq";
/* ?1 partition: its vectors */
static const char hx_sql_part_vectors[] =
    "SELECT v.seq, v.v FROM vector_parts AS p CROSS JOIN vectors AS v ON v.seq = p.seq "
    "WHERE p.part = ?1 ORDER BY p.seq";
static const char hx_sql_builtin[] =
    "SELECT (SELECT value FROM heapmem_meta WHERE key = '" HM_META_EMBEDDER "') = '"
    HM_BUILTIN_EMBEDDER "'";
static const char hx_sql_next_part[] =
    "SELECT max(coalesce((SELECT max(part) FROM vector_centroids), 0), coalesce((SELECT "
    "CAST(value AS INTEGER) FROM heapmem_meta WHERE key = '" HM_META_LAST_PART "'), 0))";
static const char hx_sql_set_last_part[] =
    "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_LAST_PART "', ?1) "
    "ON CONFLICT(key) DO UPDATE SET value = max(CAST(value AS INTEGER), excluded.value)";
static const char hx_sql_add_centroid[] =
    "INSERT INTO vector_centroids(part, namespace, centroid) VALUES (?1, ?2, ?3)";
static const char hx_sql_set_part[] =
    "INSERT OR REPLACE INTO vector_parts(seq, part) VALUES (?1, ?2)";
/* hx_sql_set_part for HX_SET_ROWS vectors at once (seq, part: 2 parameters a
 * row, in order): inside a write's savepoint a statement copies each page it
 * changes to the sub-journal, so a statement a vector copied the same pages
 * once per vector */
#define HX_SET_ROWS 64
#define HX_SET_2 "(?, ?)"
#define HX_SET_8 HX_SET_2 ", " HX_SET_2 ", " HX_SET_2 ", " HX_SET_2 ", " \
                 HX_SET_2 ", " HX_SET_2 ", " HX_SET_2 ", " HX_SET_2
#define HX_SET_64 HX_SET_8 ", " HX_SET_8 ", " HX_SET_8 ", " HX_SET_8 ", " \
                  HX_SET_8 ", " HX_SET_8 ", " HX_SET_8 ", " HX_SET_8
static const char hx_sql_set_parts[] =
    "INSERT OR REPLACE INTO vector_parts(seq, part) VALUES " HX_SET_64;
static const char hx_sql_drop_parts[] =
    "DELETE FROM vector_parts WHERE part IN (SELECT part FROM vector_centroids "
    "WHERE namespace = ?1)";
static const char hx_sql_drop_centroids[] = "DELETE FROM vector_centroids WHERE namespace = ?1";
static const char hx_sql_drop_index[] = "DELETE FROM vector_index WHERE namespace = ?1";
static const char hx_sql_drop_centroid[] = "DELETE FROM vector_centroids WHERE part = ?1";
static const char hx_sql_set_index[] =
    "INSERT INTO vector_index(namespace, version, digest) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(namespace) DO UPDATE SET version = excluded.version, digest = excluded.digest";
/* the namespace's cached vectors are read again (vector_stamps, schema 8) */
static const char hx_sql_restamp[] =
    "UPDATE vector_stamps SET changed = changed + 1 WHERE namespace = ?1";
static const char hx_sql_version[] = "SELECT version FROM vector_index WHERE namespace = ?1";
static const char hx_sql_docs[] = "SELECT docs FROM namespaces WHERE namespace = ?1";
/* ?1 from this seq, ?2 namespace: its partitions that vectors since went into
 * (the new rows read by their key, never the whole part index: a repeat is
 * skipped in C) */
static const char hx_sql_touched[] =
    "SELECT p.part FROM vector_parts AS p CROSS JOIN vector_centroids AS c "
    "ON c.part = p.part WHERE p.seq >= ?1 AND c.namespace = ?2 ORDER BY p.seq";
static const char hx_sql_part_size[] = "SELECT count(*) FROM vector_parts WHERE part = ?1";
static const char hx_sql_unindexed[] =
    "SELECT n.namespace FROM namespaces AS n WHERE n.docs >= ?1 AND NOT EXISTS (SELECT 1 "
    "FROM vector_index AS x WHERE x.namespace = n.namespace) ORDER BY n.namespace";

/* Run sql with ?1 bound to text a (and ?2 to b, when given). */
static int hx_run(hc_ctx *x, const char *sql, const char *a, const char *b) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, sql, &st);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, a, -1, SQLITE_TRANSIENT);
  if (b) sqlite3_bind_text(st, 2, b, -1, SQLITE_TRANSIENT);
  rc = hc_exec(x, st);
  hc_done(x, st);
  return rc;
}

/* One integer from sql (?1 text a, or ?1 integer when a is NULL): into *out
 * (unchanged with no row).
 * ia: ?1 when a is NULL. */
static int hx_int(hc_ctx *x, const char *sql, const char *a, i64 ia, i64 *out) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, sql, &st);
  if (rc) return rc;
  if (a) sqlite3_bind_text(st, 1, a, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_int64(st, 1, ia);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    *out = sqlite3_column_int64(st, 0);
  hc_done(x, st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* The vectors sql gives (?1 text ns, or ?1 integer part) into s (int8). */
static int hx_read(hc_ctx *x, const char *sql, const char *ns, i64 part, hx_set *s) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, sql, &st);
  if (rc) return rc;
  if (ns) sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_int64(st, 1, part);
  s->dim = HM_EMBED_DIM;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (s->n == s->cap) {
      int cap = s->cap ? 2 * s->cap : 1024;
      i64 *q = sqlite3_realloc64(s->seq, (sqlite3_uint64)cap * sizeof *q);
      if (q) s->seq = q;
      int8_t *v = sqlite3_realloc64(s->v, (sqlite3_uint64)cap * (sqlite3_uint64)s->dim);
      if (v) s->v = v;
      if (!q || !v) { hc_done(x, st); return hc_fail(x, SQLITE_NOMEM, "out of memory"); }
      s->cap = cap;
    }
    int8_t *row = s->v + (size_t)s->n * (size_t)s->dim;
    if (hv_read(sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1), s->dim, row))
      continue; /* not a vector of this store's embedder: left out of the index */
    s->seq[s->n++] = sqlite3_column_int64(st, 0);
  }
  hc_done(x, st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* The namespace's vector_index row made current: its newest partition id
 * and the digest of its centroids (read back in id order). */
static int hx_reindex(hc_ctx *x, const char *ns) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hv_sql_cents, &st), n = 0;
  if (rc) return rc;
  sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
  i64 *ids;
  int8_t *c;
  float *inv;
  rc = hv_cents_read(st, HM_EMBED_DIM, &n, &ids, &c, &inv, NULL);
  hc_done(x, st);
  if (rc != SQLITE_DONE) return rc == SQLITE_NOMEM ? hc_fail(x, rc, "out of memory")
                                                    : hc_sqlfail(x, rc);
  rc = SQLITE_OK;
  if (n == 0) {
    rc = hx_run(x, hx_sql_drop_index, ns, NULL);
  } else if (!(rc = hc_prepare(x, hx_sql_set_index, &st))) {
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, ids[n - 1]);
    sqlite3_bind_int64(st, 3, (i64)hv_cents_digest(n, ids, c, HM_EMBED_DIM));
    rc = hc_exec(x, st);
    hc_done(x, st);
  }
  sqlite3_free(ids);
  sqlite3_free(c);
  sqlite3_free(inv);
  return rc;
}

/* The partitions of cs written under new ids for namespace ns, and each row
 * i of s put into partition leaf[i]; the last part id given raised. */
static int hx_write(hc_ctx *x, const char *ns, const hx_set *s, const hx_cents *cs,
                    const int *leaf) {
  i64 base = 0;
  int rc = hx_int(x, hx_sql_next_part, NULL, 0, &base);
  sqlite3_stmt *st = NULL;
  if (!rc && !(rc = hc_prepare(x, hx_sql_add_centroid, &st))) {
    for (int j = 0; j < cs->n && !rc; j++) {
      sqlite3_bind_int64(st, 1, base + 1 + j);
      sqlite3_bind_text(st, 2, ns, -1, SQLITE_TRANSIENT);
      sqlite3_bind_blob(st, 3, cs->c + (size_t)j * (size_t)cs->dim, cs->dim, SQLITE_TRANSIENT);
      rc = hc_exec(x, st);
    }
    hc_done(x, st);
  }
  int i = 0; /* HX_SET_ROWS vectors a statement, then the rest one by one */
  if (!rc && s->n >= HX_SET_ROWS && !(rc = hc_prepare(x, hx_sql_set_parts, &st))) {
    for (; i + HX_SET_ROWS <= s->n && !rc; i += HX_SET_ROWS) {
      for (int j = 0; j < HX_SET_ROWS; j++) {
        sqlite3_bind_int64(st, 2 * j + 1, s->seq[i + j]);
        sqlite3_bind_int64(st, 2 * j + 2, base + 1 + leaf[i + j]);
      }
      rc = hc_exec(x, st);
    }
    hc_done(x, st);
  }
  if (!rc && i < s->n && !(rc = hc_prepare(x, hx_sql_set_part, &st))) {
    for (; i < s->n && !rc; i++) {
      sqlite3_bind_int64(st, 1, s->seq[i]);
      sqlite3_bind_int64(st, 2, base + 1 + leaf[i]);
      rc = hc_exec(x, st);
    }
    hc_done(x, st);
  }
  if (!rc && !(rc = hc_prepare(x, hx_sql_set_last_part, &st))) {
    sqlite3_bind_int64(st, 1, base + cs->n);
    rc = hc_exec(x, st);
    hc_done(x, st);
  }
  return rc;
}

/* The seed of namespace ns's k-means (and of a partition's split). */
static u64 hx_seed(const hx_settings *cfg, const char *ns, i64 part) {
  u64 s = (u64)cfg->seed ^ hm_fnv64(ns, strlen(ns)) ^ (0xD1B54A32D192ED03ull * (u64)part);
  return hm_splitmix64(&s);
}

/* Rows of s cut into partitions (k of them) and written for ns.
 * cfg: the index's settings; part: the first partition id to give out. */
static int hx_cut_write(hc_ctx *x, const char *ns, hx_set *s, int k, const hx_settings *cfg,
                        i64 part) {
  int *idx = sqlite3_malloc64((sqlite3_uint64)(s->n ? s->n : 1) * sizeof *idx);
  int *leaf = sqlite3_malloc64((sqlite3_uint64)(s->n ? s->n : 1) * sizeof *leaf);
  hx_cents cs = {.dim = s->dim};
  int rc = SQLITE_NOMEM;
  if (idx && leaf) {
    for (int i = 0; i < s->n; i++) idx[i] = i;
    rc = hx_cut(s, idx, s->n, k, cfg->size, hx_seed(cfg, ns, part), &cs, leaf);
  }
  if (rc == SQLITE_NOMEM) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (!rc) rc = hx_write(x, ns, s, &cs, leaf);
  sqlite3_free(idx);
  sqlite3_free(leaf);
  sqlite3_free(cs.c);
  sqlite3_free(cs.inv);
  return rc;
}

/* Namespace ns's index built from scratch (dropped when it holds fewer
 * vectors than the threshold): its vectors' count into *n, its partitions'
 * into *parts.
 * cfg: the index's settings. */
static int hx_build(hc_ctx *x, const char *ns, const hx_settings *cfg, i64 *n, i64 *parts) {
  hx_set s = {0};
  int rc = hx_read(x, hx_sql_ns_vectors, ns, 0, &s);
  *n = s.n;
  *parts = 0;
  if (!rc) rc = hx_run(x, hx_sql_drop_parts, ns, NULL);
  if (!rc) rc = hx_run(x, hx_sql_drop_centroids, ns, NULL);
  if (!rc && s.n >= cfg->threshold && s.n > 0) {
    i64 k = (s.n + cfg->size - 1) / cfg->size;
    rc = hx_cut_write(x, ns, &s, (int)(k > 1 ? k : 1), cfg, 0);
  }
  if (!rc) rc = hx_reindex(x, ns);
  if (!rc) rc = hx_run(x, hx_sql_restamp, ns, NULL);
  if (!rc && s.n >= cfg->threshold) rc = hx_int(x, hx_sql_version, ns, 0, parts);
  hx_set_free(&s);
  return rc;
}

/* Partition part of ns, grown past twice the size, cut into partitions of
 * about the size (new ids; the old one goes). */
static int hx_split(hc_ctx *x, const char *ns, i64 part, const hx_settings *cfg) {
  hx_set s = {0};
  int rc = hx_read(x, hx_sql_part_vectors, NULL, part, &s);
  if (!rc && s.n > 2 * cfg->size) {
    i64 k = (s.n + cfg->size - 1) / cfg->size;
    sqlite3_stmt *st = NULL;
    if (!(rc = hc_prepare(x, hx_sql_drop_centroid, &st))) {
      sqlite3_bind_int64(st, 1, part);
      rc = hc_exec(x, st);
      hc_done(x, st);
    }
    if (!rc) rc = hx_cut_write(x, ns, &s, (int)k, cfg, part);
    if (!rc) rc = hx_reindex(x, ns);
  }
  hx_set_free(&s);
  return rc;
}

/* Whether the store's vectors are the library's own embedder's (the index
 * serves those). */
static int hx_builtin(hc_ctx *x, int *yes) {
  i64 v = 0;
  int rc = hx_int(x, hx_sql_builtin, NULL, 0, &v);
  *yes = v == 1;
  return rc;
}

/* What a write that added memories to ns (seq and after) does to the index:
 * builds it when the namespace has passed the threshold without one, or
 * splits each partition the new vectors grew past twice the size.  Its work
 * is bounded by the threshold and the partitions touched (bench/RESULTS.md). */
static int hx_maintain(hc_ctx *x, const char *ns, i64 seq) {
  int builtin = 0, rc = hx_builtin(x, &builtin);
  hx_settings cfg;
  if (rc || !builtin || (rc = hx_settings_read(x, &cfg))) return rc;
  i64 version = 0, docs = 0, n, parts;
  if ((rc = hx_int(x, hx_sql_version, ns, 0, &version))) return rc;
  if (!version) {
    if ((rc = hx_int(x, hx_sql_docs, ns, 0, &docs))) return rc;
    return docs >= cfg.threshold ? hx_build(x, ns, &cfg, &n, &parts) : SQLITE_OK;
  }
  sqlite3_stmt *st = NULL;
  i64 *over = NULL;
  int nover = 0, cap = 0;
  if ((rc = hc_prepare(x, hx_sql_touched, &st))) return rc;
  sqlite3_bind_int64(st, 1, seq);
  sqlite3_bind_text(st, 2, ns, -1, SQLITE_TRANSIENT);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    i64 part = sqlite3_column_int64(st, 0);
    int seen = 0;
    for (int i = nover - 1; i >= 0 && !seen; i--) seen = over[i] == part;
    if (seen) continue;
    if (nover == cap) {
      cap = cap ? 2 * cap : 16;
      i64 *o = sqlite3_realloc64(over, (sqlite3_uint64)cap * sizeof *o);
      if (!o) { rc = SQLITE_NOMEM; break; }
      over = o;
    }
    over[nover++] = part;
  }
  hc_done(x, st);
  rc = rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
  for (int i = 0; i < nover && !rc; i++) {
    i64 size = 0;
    if (!(rc = hx_int(x, hx_sql_part_size, NULL, over[i], &size)) && size > 2 * cfg.size)
      rc = hx_split(x, ns, over[i], &cfg);
  }
  sqlite3_free(over);
  return rc;
}

/* The id of the centroid of ns (of this digest) nearest vector v, or 0.
 * conn: the connection's state (its vector cache); blob, bytes: the vector. */
static i64 hx_part_of(sqlite3 *db, hm_conn *conn, const char *ns, u64 digest, const void *blob,
                      int bytes) {
  if (!conn) return 0;
  if (!conn->vc) {
    conn->vc = sqlite3_malloc64(sizeof *conn->vc);
    if (!conn->vc) return 0;
    memset(conn->vc, 0, sizeof *conn->vc);
  }
  hv_cache *vc = conn->vc;
  hv_cents *set = NULL, *oldest = &vc->cents[0];
  for (int i = 0; i < HV_CENT_SLOTS && !set; i++) {
    hv_cents *s = &vc->cents[i];
    if (s->ns && s->digest == digest && !strcmp(s->ns, ns)) set = s;
    else if (!s->ns || (oldest->ns && s->used < oldest->used)) oldest = s;
  }
  if (!set) { /* read the centroids of this digest */
    hc_ctx x = {.db = db, .conn = conn};
    sqlite3_stmt *st = NULL;
    if (hc_prepare(&x, hv_sql_cents, &st) != SQLITE_OK) { sqlite3_free(x.err); return 0; }
    sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
    hv_cents_drop(oldest);
    set = oldest;
    int rc = hv_cents_read(st, HM_EMBED_DIM, &set->n, &set->id, &set->c, &set->inv, NULL);
    hc_done(&x, st);
    set->ns = sqlite3_mprintf("%s", ns);
    if (rc != SQLITE_DONE || !set->ns || !set->n) { hv_cents_drop(set); return 0; }
    set->dim = HM_EMBED_DIM;
    set->digest = hv_cents_digest(set->n, set->id, set->c, HM_EMBED_DIM);
    if ((set->sum = sqlite3_malloc64((sqlite3_uint64)set->n * sizeof *set->sum)))
      hv_row_sums(set->c, set->n, set->dim, set->sum);
  }
  set->used = ++vc->tick;
  int8_t v[HM_MAX_DIM];
  if (hv_read(blob, bytes, set->dim, v)) return 0;
  i64 id = set->id[hv_nearest_small(set->c, set->sum, set->inv, set->n, v, set->dim)];
  if (set->digest != digest) hv_cents_drop(set); /* what the file holds is not what it says */
  return id;
}

#pragma endregion

#pragma region SQL functions of the vector index

/* heap_vector_part(namespace, digest, vector): the partition of the
 * namespace's index (its centroids of that digest) nearest the vector, or
 * NULL (no centroids, or not a vector of the index's dimension).  What the
 * triggers call: it reads the namespace's centroids and nothing else. */
static void heap_vector_part(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT || sqlite3_value_type(argv[1]) !=
      SQLITE_INTEGER || sqlite3_value_type(argv[2]) != SQLITE_BLOB)
    return; /* NULL: the triggers insert nothing */
  const char *ns = (const char *)sqlite3_value_text(argv[0]);
  i64 id = hx_part_of(sqlite3_context_db_handle(ctx), hq_user_data(ctx), ns,
                      (u64)sqlite3_value_int64(argv[1]), sqlite3_value_blob(argv[2]),
                      sqlite3_value_bytes(argv[2]));
  if (id > 0) sqlite3_result_int64(ctx, id);
}

/* The start of a heap_vector_* write: the schema checked, the store
 * writable, a savepoint taken.  0, or the error set in x. */
static int hx_begin(hc_ctx *x) {
  if (sqlite3_db_readonly(x->db, "main") == 1)
    return hc_fail(x, SQLITE_READONLY, "the store is read-only here");
  int rc = hs_check(x);
  if (rc) return rc;
  rc = sqlite3_exec(x->db, "SAVEPOINT heap_vector", NULL, NULL, NULL);
  return rc ? hc_sqlfail(x, rc) : SQLITE_OK;
}

/* Its end: released, or rolled back (nothing written) when rc is an error. */
static int hx_end(hc_ctx *x, int rc) {
  if (rc == SQLITE_OK) rc = sqlite3_exec(x->db, "RELEASE heap_vector", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    if (!x->err) hc_sqlfail(x, rc);
    sqlite3_exec(x->db, "ROLLBACK TO heap_vector", NULL, NULL, NULL);
    sqlite3_exec(x->db, "RELEASE heap_vector", NULL, NULL, NULL);
  }
  return rc;
}

/* One namespace (re)built, its line appended to the report js. */
static int hx_build_one(hc_ctx *x, const char *ns, const hx_settings *cfg, sqlite3_str *js) {
  i64 n = 0, parts = 0;
  int rc = hx_build(x, ns, cfg, &n, &parts);
  if (rc) return rc;
  sqlite3_str_appendall(js, sqlite3_str_length(js) > 1 ? ", " : "");
  sqlite3_str_appendf(js, "{\"namespace\": ");
  hq_json_string(js, ns, (int)strlen(ns));
  i64 count = 0;
  if (parts) {
    sqlite3_stmt *st = NULL;
    if (!(rc = hc_prepare(x, "SELECT count(*) FROM vector_centroids WHERE namespace = ?1", &st))) {
      sqlite3_bind_text(st, 1, ns, -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) count = sqlite3_column_int64(st, 0);
      hc_done(x, st);
    }
  }
  sqlite3_str_appendf(js, ", \"vectors\": %lld, \"partitions\": %lld}", (long long)n,
                      (long long)count);
  return rc;
}

/* heap_vector_index([namespace]): with a namespace, its vector index built
 * again from scratch now (or dropped, below the threshold); without, an
 * index built for every namespace past the threshold that has none (what
 * heapmem.open runs after an upgrade).  A JSON array of what was built:
 * [{"namespace", "vectors", "partitions"}]. */
static void heap_vector_index(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  hc_keep_statements(&x);
  const char *ns = NULL;
  int rc = argc ? hf_name(&x, argv[0], "namespace", 0, &ns) : SQLITE_OK;
  if (!rc && ns && !strcmp(ns, "*"))
    rc = hc_fail(&x, SQLITE_ERROR, "namespace '*' is the pooled layer of learned links, which "
                                   "holds no vectors");
  int builtin = 0;
  sqlite3_str *js = sqlite3_str_new(x.db);
  sqlite3_str_appendchar(js, 1, '[');
  if (!rc && !(rc = hx_begin(&x))) {
    hx_settings cfg;
    rc = hx_builtin(&x, &builtin);
    if (!rc && !builtin)
      rc = hc_fail(&x, SQLITE_ERROR, "the vector index serves the library's own embedder's "
                                     "vectors (" HM_BUILTIN_EMBEDDER "), and this store has "
                                     "another's or none");
    if (!rc) rc = hx_settings_read(&x, &cfg);
    if (!rc && ns) {
      rc = hx_build_one(&x, ns, &cfg, js);
    } else if (!rc) {
      sqlite3_stmt *st = NULL;
      char **todo = NULL;
      int n = 0;
      if (!(rc = hc_prepare(&x, hx_sql_unindexed, &st))) {
        sqlite3_bind_int64(st, 1, cfg.threshold);
        while (sqlite3_step(st) == SQLITE_ROW) {
          char **t = sqlite3_realloc64(todo, (sqlite3_uint64)(n + 1) * sizeof *t);
          if (!t) break;
          todo = t;
          todo[n++] = sqlite3_mprintf("%s", sqlite3_column_text(st, 0));
        }
        hc_done(&x, st);
      }
      for (int i = 0; i < n && !rc; i++)
        rc = todo[i] ? hx_build_one(&x, todo[i], &cfg, js)
                     : hc_fail(&x, SQLITE_NOMEM, "out of memory");
      hf_free_ids(todo, n);
    }
    rc = hx_end(&x, rc);
  }
  sqlite3_str_appendchar(js, 1, ']');
  char *out = sqlite3_str_finish(js);
  if (rc == SQLITE_OK && out) {
    sqlite3_result_text(ctx, out, -1, sqlite3_free);
    return;
  }
  sqlite3_free(out);
  hc_result_fail(ctx, &x, "heap_vector_index", rc ? rc : SQLITE_NOMEM);
}

/* heap_vector_maintain(namespace, seq): what a write that added memories
 * to the namespace, seq and after, owes the vector index (heap_add does it
 * itself; add_many calls this): a build past the threshold, the splits of
 * partitions grown past twice the size.  NULL. */
static void heap_vector_maintain(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  hc_keep_statements(&x);
  const char *ns = NULL;
  int rc = hf_name(&x, argv[0], "namespace", 0, &ns);
  if (!rc && (sqlite3_value_type(argv[1]) != SQLITE_INTEGER || sqlite3_value_int64(argv[1]) < 0))
    rc = hc_fail(&x, SQLITE_ERROR, "seq must be a whole number >= 0 (the first memory added)");
  if (!rc && !(rc = hx_begin(&x)))
    rc = hx_end(&x, hx_maintain(&x, ns, sqlite3_value_int64(argv[1])));
  if (rc == SQLITE_OK) return;
  hc_result_fail(ctx, &x, "heap_vector_maintain", rc);
}

/* The settings in s as their JSON object. */
static char *hx_settings_json(const hx_settings *s) {
  char probe[32];
  hm_repr(s->probe, probe);
  return sqlite3_mprintf("{\"threshold\": %lld, \"size\": %lld, \"probe\": %s, \"seed\": %lld}",
                         (long long)s->threshold, (long long)s->size, probe, (long long)s->seed);
}

static const char hx_sql_settings_in[] =
    "SELECT key, type, value FROM json_each(?1) WHERE json_valid(?1) AND "
    "json_type(?1) = 'object'";

/* The settings given in text (a JSON object of some of threshold, size,
 * probe, seed) over *s: 0, or the error set in x. */
static int hx_settings_parse(hc_ctx *x, const char *text, hx_settings *s) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, hx_sql_settings_in, &st), rows = 0;
  if (rc) return rc;
  sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
  while (!rc && sqlite3_step(st) == SQLITE_ROW) {
    rows++;
    const char *k = (const char *)sqlite3_column_text(st, 0);
    const char *type = (const char *)sqlite3_column_text(st, 1);
    int whole = type && !strcmp(type, "integer");
    i64 v = sqlite3_column_int64(st, 2);
    double d = sqlite3_column_double(st, 2);
    if (!k) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
    else if (!strcmp(k, "threshold") && whole && v >= 1 && v <= 1000000000) s->threshold = v;
    else if (!strcmp(k, "threshold"))
      rc = hc_fail(x, SQLITE_ERROR, "threshold must be a whole number from 1 to 1000000000 "
                                    "(vectors a namespace holds before it is indexed)");
    else if (!strcmp(k, "size") && whole && v >= 16 && v <= 65536) s->size = v;
    else if (!strcmp(k, "size"))
      rc = hc_fail(x, SQLITE_ERROR, "size must be a whole number from 16 to 65536 (vectors "
                                    "in a partition)");
    else if (!strcmp(k, "probe") && (whole || (type && !strcmp(type, "real"))) && d > 0 &&
             d <= 1)
      s->probe = d;
    else if (!strcmp(k, "probe"))
      rc = hc_fail(x, SQLITE_ERROR, "probe must be a number above 0 and at most 1 (the least "
                                    "share of a namespace's vectors recall scans)");
    else if (!strcmp(k, "seed") && whole && v >= 0) s->seed = v;
    else if (!strcmp(k, "seed"))
      rc = hc_fail(x, SQLITE_ERROR, "seed must be a whole number >= 0");
    else
      rc = hc_fail(x, SQLITE_ERROR, "'%s' is not a setting of the vector index (threshold, "
                                    "size, probe, seed)", k);
  }
  hc_done(x, st);
  if (!rc && !rows) {
    int object = text[0] == '{';
    for (const char *p = text + 1; object && *p; p++) object = isspace((unsigned char)*p) || *p == '}';
    if (!object)
      rc = hc_fail(x, SQLITE_ERROR, "the settings must be a JSON object such as "
                                    "'{\"threshold\": 20000, \"size\": 512, \"probe\": 0.25}'");
  }
  return rc;
}

/* heap_vector_settings([settings]): the vector index's settings in force, as
 * JSON; with settings (a JSON object of some of threshold, size, probe,
 * seed), those changed and saved first.  Indexes already built keep their
 * partitions until heap_vector_index rebuilds them; a new size applies to
 * the next build and split, a new probe to the next recall. */
static void heap_vector_settings(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  hc_keep_statements(&x);
  hx_settings s;
  int rc = SQLITE_OK;
  if (argc && sqlite3_value_type(argv[0]) != SQLITE_TEXT)
    rc = hc_fail(&x, SQLITE_ERROR, "the settings must be a JSON object as text");
  if (!rc) rc = hs_check(&x);
  if (!rc) rc = hx_settings_read(&x, &s);
  if (!rc && argc) {
    rc = hx_settings_parse(&x, (const char *)sqlite3_value_text(argv[0]), &s);
    if (!rc && !(rc = hx_begin(&x))) {
      char *js = hx_settings_json(&s);
      sqlite3_stmt *st = NULL;
      if (!js) rc = hc_fail(&x, SQLITE_NOMEM, "out of memory");
      else if (!(rc = hc_prepare(&x, "INSERT INTO heapmem_meta(key, value) VALUES ('"
                                      HM_META_VECTOR_INDEX "', ?1) ON CONFLICT(key) DO UPDATE "
                                      "SET value = excluded.value", &st))) {
        sqlite3_bind_text(st, 1, js, -1, SQLITE_TRANSIENT);
        rc = hc_exec(&x, st);
        hc_done(&x, st);
      }
      sqlite3_free(js);
      rc = hx_end(&x, rc);
    }
  }
  if (rc == SQLITE_OK) {
    char *js = hx_settings_json(&s);
    if (js) sqlite3_result_text(ctx, js, -1, sqlite3_free);
    else sqlite3_result_error_nomem(ctx);
    return;
  }
  hc_result_fail(ctx, &x, "heap_vector_settings", rc);
}

#pragma endregion
