/*
 * tune.c: heap_tune, the choice of w_usefulness from the store's own log.
 *
 *   SELECT heap_tune([options]);
 *   SELECT heap_save_config(config);
 *
 * options: a JSON object, every key optional: grid (the weights tried, an
 * array of numbers from 0 to 100), boot (bootstrap resamples, 1 to 100000;
 * 2000), seed (the bootstrap's, an integer; 0), deploy (true/false; true),
 * newest (replay only the newest N judged recalls, with the links learned
 * from the events of the recalls from the oldest of them on; all), against
 * (the weight a gain is measured against, deployed again where no weight is
 * significantly better than it; the weight in force), level (the bootstrap
 * interval's coverage for the whole choice, above 0 and below 1; 0.95: the
 * best of the n weights other than the reference is the one tested, so its
 * interval covers 1 - (1 - level) / n, Bonferroni), config (the config in
 * force, as heap_score takes it; the store's tuned config) and auto (true:
 * auto-tune's settings, ht_auto_opts, for every option not given, so that
 * '{"auto": true, "deploy": false}' says what auto-tune would do now).
 * '{"pending": true}' (with config, if any, and nothing else) ends the
 * auto-tune under way in this call instead (ht_pending, in the auto-tune
 * region below) and returns what a feedback's auto_tune would say, or null.
 *
 * Every tracked recall logs what it showed (features, ages, the score
 * without usefulness); feedback logs which were used.  heap_tune replays the
 * judged recalls (those with a used memory) under each weight, with the
 * links learned from the whole log less the replayed recall's own fold
 * (grouped cross-validation: by namespace when the judged recalls span at
 * least 5 namespaces, else by recall id mod 5), per namespace and pooled (a
 * plain sum over namespaces, as Python's tune() replayed it: see
 * bench/RESULTS.md 17.6), scores each with hm_score_batch (the logged rest
 * as relevance, importance 1, no rules), takes the reciprocal rank of the
 * first used memory, and deploys the best weight only when a paired
 * bootstrap over the folds' groups (splitmix64, seeded) puts its gain's
 * interval above 0.  Deploying writes meta 'tuned', as heap_save_config
 * (Memory.set_config(save=True)) does.  Returns one JSON object: deployed,
 * reason, recalls, folds, current, best, gain [mean, lo, hi], table
 * [[w, mrr], ...], after, against.
 *
 * Relies on: links.c (hm_link, the blob), sample.c (hm_splitmix64), score.c
 * (hm_score_batch, the config fields), sqlfuncs.c (hm_repr,
 * hq_json_string), call.c (hc_ctx, hc_prepare, hc_done, hc_fail,
 * hc_sqlfail, hc_keep_statements), store.c's hs_check_store.
 */

#pragma region tune

#define HT_MIN_RECALLS 30 /* fewer judged recalls and heap_tune does not try */
#define HT_FOLDS 5
#define HT_MAX_GRID 64

/* -- interned names and sums keyed by ids ----------------------------------------- */

typedef struct {
  char **s;
  int n, cap;
  int *slot; /* open addressing over s's ids, -1 empty */
  int nslot;
} ht_names;

typedef struct {
  u64 *key;
  double *a, *b;
  int n, cap;
  int *slot;
  int nslot;
} ht_sums;

static u64 ht_mix(u64 k) {
  u64 s = k;
  return hm_splitmix64(&s);
}

static void ht_names_free(ht_names *t) {
  for (int i = 0; i < t->n; i++) sqlite3_free(t->s[i]);
  sqlite3_free(t->s);
  sqlite3_free(t->slot);
  memset(t, 0, sizeof *t);
}

static void ht_sums_free(ht_sums *t) {
  sqlite3_free(t->key);
  sqlite3_free(t->a);
  sqlite3_free(t->b);
  sqlite3_free(t->slot);
  memset(t, 0, sizeof *t);
}

/* Room for at least need entries: the slots rebuilt at twice that.
 * *slot, *nslot: the slots and their number; hashes: the n entries' hashes. */
static int ht_reslot(int **slot, int *nslot, int need, const u64 *hashes, int n) {
  if (*nslot >= 2 * need) return SQLITE_OK;
  int ns = 64;
  while (ns < 4 * need) ns *= 2;
  int *s = sqlite3_malloc64((sqlite3_uint64)ns * sizeof *s);
  if (!s) return SQLITE_NOMEM;
  for (int i = 0; i < ns; i++) s[i] = -1;
  for (int i = 0; i < n; i++) {
    u64 h = hashes[i] & (u64)(ns - 1);
    while (s[h] >= 0) h = (h + 1) & (u64)(ns - 1);
    s[h] = i;
  }
  sqlite3_free(*slot);
  *slot = s;
  *nslot = ns;
  return SQLITE_OK;
}

/* s's id (added when new), or -1 when out of memory. */
static int ht_intern(ht_names *t, const char *s) {
  u64 h = hm_fnv64(s, strlen(s));
  if (t->nslot) {
    for (u64 i = h & (u64)(t->nslot - 1); t->slot[i] >= 0; i = (i + 1) & (u64)(t->nslot - 1))
      if (!strcmp(t->s[t->slot[i]], s)) return t->slot[i];
  }
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 64;
    char **v = sqlite3_realloc64(t->s, (sqlite3_uint64)cap * sizeof *v);
    if (!v) return -1;
    t->s = v;
    t->cap = cap;
  }
  if (!(t->s[t->n] = sqlite3_mprintf("%s", s))) return -1;
  t->n++;
  if (t->nslot < 2 * t->n) { /* rehash every name */
    u64 *hs = sqlite3_malloc64((sqlite3_uint64)t->n * sizeof *hs);
    if (!hs) return -1;
    for (int i = 0; i < t->n; i++) hs[i] = hm_fnv64(t->s[i], strlen(t->s[i]));
    int rc = ht_reslot(&t->slot, &t->nslot, t->n, hs, t->n);
    sqlite3_free(hs);
    if (rc) return -1;
  } else {
    u64 i = h & (u64)(t->nslot - 1);
    while (t->slot[i] >= 0) i = (i + 1) & (u64)(t->nslot - 1);
    t->slot[i] = t->n - 1;
  }
  return t->n - 1;
}

static int ht_find(const ht_sums *t, u64 key) {
  if (!t->nslot) return -1;
  for (u64 i = ht_mix(key) & (u64)(t->nslot - 1); t->slot[i] >= 0;
       i = (i + 1) & (u64)(t->nslot - 1))
    if (t->key[t->slot[i]] == key) return t->slot[i];
  return -1;
}

/* Add (da, db) to key's sums (0, 0 when new). */
static int ht_add(ht_sums *t, u64 key, double da, double db) {
  int at = ht_find(t, key);
  if (at < 0) {
    if (t->n == t->cap) {
      int cap = t->cap ? 2 * t->cap : 256;
      u64 *k = sqlite3_realloc64(t->key, (sqlite3_uint64)cap * sizeof *k);
      if (k) t->key = k;
      double *a = k ? sqlite3_realloc64(t->a, (sqlite3_uint64)cap * sizeof *a) : NULL;
      if (a) t->a = a;
      double *b = a ? sqlite3_realloc64(t->b, (sqlite3_uint64)cap * sizeof *b) : NULL;
      if (!b) return SQLITE_NOMEM;
      t->b = b;
      t->cap = cap;
    }
    at = t->n++;
    t->key[at] = key;
    t->a[at] = t->b[at] = 0.0;
    if (t->nslot < 2 * t->n) {
      u64 *hs = sqlite3_malloc64((sqlite3_uint64)t->n * sizeof *hs);
      if (!hs) return SQLITE_NOMEM;
      for (int i = 0; i < t->n; i++) hs[i] = ht_mix(t->key[i]);
      int rc = ht_reslot(&t->slot, &t->nslot, t->n, hs, t->n);
      sqlite3_free(hs);
      if (rc) return rc;
    } else {
      u64 i = ht_mix(key) & (u64)(t->nslot - 1);
      while (t->slot[i] >= 0) i = (i + 1) & (u64)(t->nslot - 1);
      t->slot[i] = at;
    }
  }
  t->a[at] += da;
  t->b[at] += db;
  return SQLITE_OK;
}

static void ht_get(const ht_sums *t, u64 key, double *a, double *b) {
  int at = ht_find(t, key);
  *a = at < 0 ? 0.0 : t->a[at];
  *b = at < 0 ? 0.0 : t->b[at];
}

/* -- the options ------------------------------------------------------------------ */

typedef struct {
  double grid[HT_MAX_GRID];
  int ngrid;
  i64 boot, seed, newest; /* newest -1: all */
  int deploy, has_against;
  double against, level;
  hm_config cfg; /* the config in force */
  int pending;   /* heap_tune('{"pending": true}'): auto-tune's tune under way, ended now */
  int given;     /* how many options were given */
} ht_opts;

static const double ht_grid[] = {0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0};

/* Auto-tune's settings (the only statement of them; heap_tune's option
 * "auto" takes them too).  The most judged recalls it replays, the newest:
 * the replay is linear in them (bench/RESULTS.md 17 times the feedback that
 * runs it). */
#define HT_AUTO_WINDOW 2000
/* Its interval: 99% for the whole choice, split among the grid's other
 * weights as every heap_tune's level is (Bonferroni: it deploys the best of
 * them, so each gets 1% / (n - 1), 99.875% for the nine), with the
 * resamples a tail that thin needs.  At a plain 99% a chance pass on
 * LoCoMo's shuffled feedback deployed in 1 to 2 of 10 folds (bench/RESULTS.md
 * 17.7). */
#define HT_AUTO_LEVEL 0.99
#define HT_AUTO_BOOT 20000

/* Auto-tune's options for a log of `judged` judged recalls: the default
 * grid, seed 0, against the default w_usefulness (deployed again when no
 * weight is significantly better: each decision rests on all the recalls it
 * replays, never on what an earlier, smaller replay deployed), the newest
 * HT_AUTO_WINDOW judged recalls past that many.  deploy and the config in
 * force are left as they are. */
static void ht_auto_opts(ht_opts *o, i64 judged) {
  memcpy(o->grid, ht_grid, sizeof ht_grid);
  o->ngrid = (int)(sizeof ht_grid / sizeof ht_grid[0]);
  o->boot = HT_AUTO_BOOT;
  o->seed = 0;
  o->newest = judged > HT_AUTO_WINDOW ? HT_AUTO_WINDOW : -1;
  o->has_against = 1;
  hm_config dflt;
  hm_config_default(&dflt);
  o->against = dflt.w_usefulness;
  o->level = HT_AUTO_LEVEL; /* ht_measure splits it among the grid's weights */
}

/* An integer option (st's row: key, type, value) from lo to hi into *out;
 * k its name in the sentence. */
static int ht_int_opt(hc_ctx *x, sqlite3_stmt *st, const char *k, i64 lo, i64 hi, i64 *out) {
  const char *type = (const char *)sqlite3_column_text(st, 1);
  double v = sqlite3_column_double(st, 2);
  if (!type || strcmp(type, "integer") || v < (double)lo || v > (double)hi)
    return hc_fail(x, SQLITE_ERROR, "%s must be an integer from %lld to %lld", k,
                   (long long)lo, (long long)hi);
  *out = sqlite3_column_int64(st, 2);
  return SQLITE_OK;
}

static int ht_num_opt(hc_ctx *x, sqlite3_stmt *st, const char *k, double *out) {
  const char *type = (const char *)sqlite3_column_text(st, 1);
  if (!type || (strcmp(type, "integer") && strcmp(type, "real")))
    return hc_fail(x, SQLITE_ERROR, "%s must be a number", k);
  *out = sqlite3_column_double(st, 2);
  return SQLITE_OK;
}

/* The grid option: a JSON array of 1 to HT_MAX_GRID weights from 0 to 100. */
static int ht_grid_opt(hc_ctx *x, const char *json, ht_opts *o) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT type, value FROM json_each(?1, '$.grid')", &st);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
  o->ngrid = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *type = (const char *)sqlite3_column_text(st, 0);
    double v = sqlite3_column_double(st, 1);
    if (!type || (strcmp(type, "integer") && strcmp(type, "real")) || !(v >= 0 && v <= 100) ||
        o->ngrid == HT_MAX_GRID) {
      rc = hc_fail(x, SQLITE_ERROR, "grid must be an array of 1 to %d weights from 0 to 100",
                   HT_MAX_GRID);
      break;
    }
    o->grid[o->ngrid++] = v;
  }
  hc_done(x, st);
  if (rc == SQLITE_DONE && !o->ngrid)
    return hc_fail(x, SQLITE_ERROR, "grid must be an array of 1 to %d weights from 0 to 100",
                   HT_MAX_GRID);
  return rc == SQLITE_DONE ? SQLITE_OK : rc == SQLITE_ROW || !x->err ? hc_sqlfail(x, rc) : rc;
}

/* The config in force: the option's text, or the store's tuned config. */
static int ht_config(hc_ctx *x, const char *text, hm_config *cfg) {
  sqlite3_stmt *st = NULL;
  char err[HM_ERRLEN] = "";
  int rc = SQLITE_OK;
  if (!text) {
    if ((rc = hc_prepare(x, hr_sql_tuned, &st))) return rc;
    rc = hr_tuned_read(st, cfg, err, sizeof err);
    if (rc == SQLITE_CORRUPT) hc_fail(x, rc, "the store's tuned config is damaged (%s)", err);
    else if (rc) hc_sqlfail(x, rc);
    hc_done(x, st);
    return rc;
  }
  rc = hm_config_parse(text, cfg, err, sizeof err) == HM_OK ? SQLITE_OK : SQLITE_ERROR;
  if (rc) hc_fail(x, SQLITE_ERROR, "config: %s", err);
  return rc;
}

static const char ht_keys[] =
    "against, auto, boot, config, deploy, grid, level, newest, pending, seed";

/* Read one option (st's row: key, type, value) into o.
 * json: the options; *config: the config option's text; *autotune: auto-tune's. */
static int ht_opt(hc_ctx *x, sqlite3_stmt *st, const char *json, ht_opts *o,
                  const char **config, int *autotune) {
  const char *k = (const char *)sqlite3_column_text(st, 0);
  const char *type = (const char *)sqlite3_column_text(st, 1);
  if (!k || !type) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  o->given++;
  if (!strcmp(k, "pending")) {
    if (strcmp(type, "true") && strcmp(type, "false"))
      return hc_fail(x, SQLITE_ERROR, "pending must be true or false");
    o->pending = !strcmp(type, "true");
    return SQLITE_OK;
  }
  if (!strcmp(k, "auto")) {
    if (strcmp(type, "true") && strcmp(type, "false"))
      return hc_fail(x, SQLITE_ERROR, "auto must be true or false");
    *autotune = !strcmp(type, "true");
    return SQLITE_OK;
  }
  if (!strcmp(k, "grid")) {
    if (strcmp(type, "array"))
      return hc_fail(x, SQLITE_ERROR, "grid must be an array of 1 to %d weights from 0 to 100",
                     HT_MAX_GRID);
    return ht_grid_opt(x, json, o);
  }
  if (!strcmp(k, "boot")) return ht_int_opt(x, st, k, 1, 100000, &o->boot);
  if (!strcmp(k, "seed"))
    return ht_int_opt(x, st, k, -(i64)(((u64)1 << 62)), (i64)((u64)1 << 62), &o->seed);
  if (!strcmp(k, "newest")) {
    if (!strcmp(type, "null")) return (o->newest = -1), SQLITE_OK;
    return ht_int_opt(x, st, k, 1, (i64)((u64)1 << 62), &o->newest);
  }
  if (!strcmp(k, "deploy")) {
    if (strcmp(type, "true") && strcmp(type, "false"))
      return hc_fail(x, SQLITE_ERROR, "deploy must be true or false");
    o->deploy = !strcmp(type, "true");
    return SQLITE_OK;
  }
  if (!strcmp(k, "against")) {
    if (!strcmp(type, "null")) return (o->has_against = 0), SQLITE_OK;
    int rc = ht_num_opt(x, st, k, &o->against);
    if (!rc && !(o->against >= 0 && o->against <= 100))
      rc = hc_fail(x, SQLITE_ERROR, "against must be a weight from 0 to 100");
    o->has_against = 1;
    return rc;
  }
  if (!strcmp(k, "level")) {
    int rc = ht_num_opt(x, st, k, &o->level);
    if (!rc && !(o->level > 0 && o->level < 1))
      rc = hc_fail(x, SQLITE_ERROR, "level must be a number above 0 and below 1 (0.95: a 95%% "
                                    "interval)");
    return rc;
  }
  if (!strcmp(k, "config")) {
    if (strcmp(type, "text"))
      return hc_fail(x, SQLITE_ERROR, "config must be text like 'w_recency=0 gate_z=2'");
    *config = (const char *)sqlite3_column_text(st, 2);
    return SQLITE_OK;
  }
  return hc_fail(x, SQLITE_ERROR, "unknown option '%s'; the options are %s", k, ht_keys);
}

/* The judged recalls in the log, as auto-tune counts them exactly. */
static const char ht_sql_count[] =
    "SELECT count(DISTINCT recall_id) FROM events WHERE used = 1 AND recall_id IS NOT NULL";
static int ht_judged(hc_ctx *x, i64 *judged) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, ht_sql_count, &st);
  if (!rc && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    *judged = sqlite3_column_int64(st, 0);
    rc = SQLITE_OK;
  } else if (!rc) {
    rc = hc_sqlfail(x, rc);
  }
  hc_done(x, st);
  return rc;
}

/* Each option of json (text, a JSON object) into o; *config_copy receives
 * the config option's text (sqlite3_malloc'd), *autotune the auto option. */
static int ht_apply_opts(hc_ctx *x, const char *json, ht_opts *o, char **config_copy,
                         int *autotune) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x,
      "SELECT j.key, j.type, j.value FROM json_each(?1) AS j WHERE json_valid(?1) AND "
      "json_type(?1) = 'object' UNION ALL SELECT NULL, NULL, NULL WHERE NOT json_valid(?1) OR "
      "json_type(?1) != 'object'", &st);
  if (rc) return rc;
  sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
      rc = hc_fail(x, SQLITE_ERROR, "options must be a JSON object like "
                                    "'{\"seed\": 0, \"deploy\": false}'");
      break;
    }
    const char *c = NULL;
    if ((rc = ht_opt(x, st, json, o, &c, autotune))) break;
    if (c) {
      sqlite3_free(*config_copy);
      if (!(*config_copy = sqlite3_mprintf("%s", c))) {
        rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
        break;
      }
    }
  }
  hc_done(x, st);
  if (rc == SQLITE_DONE) return SQLITE_OK;
  return x->err ? rc : hc_sqlfail(x, rc);
}

/* The options (a JSON object, or NULL for none) into o.  "auto": true takes
 * auto-tune's settings (ht_auto_opts, for the log as it is now), and then
 * the object's other options over them. */
static int ht_read_opts(hc_ctx *x, sqlite3_value *v, ht_opts *o) {
  memcpy(o->grid, ht_grid, sizeof ht_grid);
  o->ngrid = (int)(sizeof ht_grid / sizeof ht_grid[0]);
  o->boot = 2000;
  o->seed = 0;
  o->newest = -1;
  o->deploy = 1;
  o->has_against = 0;
  o->level = 0.95;
  o->pending = o->given = 0;
  int rc = SQLITE_OK, autotune = 0;
  char *config = NULL;
  if (v && sqlite3_value_type(v) != SQLITE_NULL) {
    const char *json = NULL;
    char why[HM_ERRLEN];
    if (sqlite3_value_type(v) != SQLITE_TEXT)
      return hc_fail(x, SQLITE_ERROR, "options must be a JSON object like "
                                      "'{\"seed\": 0, \"deploy\": false}'");
    if (hq_arg_text(v, "options", 0, hm_limits.MAX_TEXT_BYTES, &json, why, sizeof why))
      return hc_fail(x, SQLITE_ERROR, "%s", why);
    if (hm_json_depth(json, sqlite3_value_bytes(v)) > hm_limits.MAX_JSON_DEPTH)
      return hc_fail(x, SQLITE_ERROR, "options nest deeper than %.0f levels",
                     hm_limits.MAX_JSON_DEPTH);
    rc = ht_apply_opts(x, json, o, &config, &autotune);
    i64 judged = 0;
    if (!rc && o->pending && o->given > 1 + (config != NULL))
      rc = hc_fail(x, SQLITE_ERROR, "pending takes no other option but config: it ends the "
                                    "auto-tune under way with auto-tune's own settings");
    if (!rc && autotune && !(rc = ht_judged(x, &judged))) {
      ht_auto_opts(o, judged);
      o->given = 0;
      rc = ht_apply_opts(x, json, o, &config, &autotune); /* what was given wins */
    }
  }
  if (!rc) rc = ht_config(x, config, &o->cfg);
  sqlite3_free(config);
  return rc;
}

/* -- the log ---------------------------------------------------------------------- */

typedef struct {
  i64 id;
  int ns, qt, n; /* ns: a name of ht_log's names, qt of its qtypes */
  char **features;
  double *ages, *rest;
  unsigned char *used;
} ht_recall;

typedef struct {
  ht_recall *r; /* the judged recalls, oldest first */
  int n, cap;
  ht_names names, feats, qtypes;
  int *rank;    /* a namespace's place among the judged recalls' (sorted), -1 if none */
  int nrank;    /* rank's size: the names known when the folds were made */
  int by_ns, nranked;
  ht_sums own, held, pooled, hpooled;
  int *fqt;     /* each feature's question type (-1: a plain feature) */
} ht_log;

static void ht_log_free(ht_log *l) {
  for (int i = 0; i < l->n; i++) {
    for (int j = 0; j < l->r[i].n; j++) sqlite3_free(l->r[i].features[j]);
    sqlite3_free(l->r[i].features);
    sqlite3_free(l->r[i].ages);
    sqlite3_free(l->r[i].rest);
    sqlite3_free(l->r[i].used);
  }
  sqlite3_free(l->r);
  ht_names_free(&l->names);
  ht_names_free(&l->feats);
  ht_names_free(&l->qtypes);
  sqlite3_free(l->rank);
  sqlite3_free(l->fqt);
  ht_sums_free(&l->own);
  ht_sums_free(&l->held);
  ht_sums_free(&l->pooled);
  ht_sums_free(&l->hpooled);
}

/* The log a tune reads: the events and the recalls of these ids at most
 * (auto-tune's is the log as it was when its point was claimed; heap_tune's,
 * the log as it is when it starts). */
typedef struct {
  i64 max_event, max_recall;
} ht_bounds;

/* How much of a tune's work one step does at least, in units of about a
 * nanosecond each on the machine of bench/RESULTS.md 23 (the work is
 * counted, never timed): auto-tune runs in steps, one after each feedback,
 * so that no feedback waits for a whole tune, each step the rest of the tune
 * spread over half the feedbacks until the next point (ht_recalls_read), and
 * HT_STEP_WORK at least; heap_tune runs every step at once. */
#define HT_STEP_WORK 1000000
#define HT_RECALL_CHUNK 16 /* judged recalls read by one statement */
#define HT_EVENT_SPAN 32   /* event ids read by one statement */
#define HT_BOOT_CHUNK 64   /* bootstrap resamples between two looks at the budget */

/* a logged recall's array, parsed only when the three the replay reads are
 * JSON (else the recall is damage: hc_damaged_json) */
#define HT_LOG(A) "CASE WHEN r.json THEN r." A " END"
/* ?1 the newest id to read, ?2 how many recalls, ?3 the newest event that
 * counts.  One row per shown memory, each recall's in position order, the
 * recalls newest first: the judged recalls (a used memory's event within the
 * log) read a chunk at a time, from the newest down. */
static const char ht_sql_recalls[] =
    "SELECT r.id, r.namespace, r.qtype, json_array_length(" HT_LOG("features") "), f.value, "
    "json_extract(" HT_LOG("ages") ", '$[' || f.key || ']'), json_extract(" HT_LOG("rest")
    ", '$[' || f.key || ']'), f.type, r.json FROM (SELECT id, namespace, qtype, ages, "
    "features, rest, json_valid(ages) AND json_valid(features) AND json_valid(rest) AS json "
    "FROM recalls AS q WHERE q.id <= ?1 AND EXISTS (SELECT 1 FROM events AS e WHERE "
    "e.recall_id = q.id AND e.used = 1 AND e.id <= ?3) ORDER BY q.id DESC LIMIT ?2) AS r "
    "LEFT JOIN json_each(" HT_LOG("features") ") AS f ORDER BY r.id DESC, f.key";

static int ht_is_num(sqlite3_stmt *st, int i) {
  int t = sqlite3_column_type(st, i);
  return t == SQLITE_INTEGER || t == SQLITE_FLOAT;
}

static int ht_damaged(hc_ctx *x) {
  return hc_fail(x, SQLITE_CORRUPT, "the recall log is damaged (a logged recall's features, "
                                    "ages or rest are not what heap_recall writes)");
}

/* A new recall at the end of l->r, sized for n shown memories. */
static int ht_recall_new(hc_ctx *x, ht_log *l, sqlite3_stmt *st, int n) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    ht_recall *v = sqlite3_realloc64(l->r, (sqlite3_uint64)cap * sizeof *v);
    if (!v) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    l->r = v;
    l->cap = cap;
  }
  ht_recall *r = &l->r[l->n++];
  memset(r, 0, sizeof *r);
  const char *ns = (const char *)sqlite3_column_text(st, 1);
  const char *qt = (const char *)sqlite3_column_text(st, 2);
  r->id = sqlite3_column_int64(st, 0);
  r->ns = ht_intern(&l->names, ns ? ns : "");
  r->qt = ht_intern(&l->qtypes, qt ? qt : "");
  r->features = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(char *));
  r->ages = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(double));
  r->rest = sqlite3_malloc64((sqlite3_uint64)(n + 1) * sizeof(double));
  r->used = sqlite3_malloc64((sqlite3_uint64)(n + 1));
  if (r->ns < 0 || r->qt < 0 || !r->features || !r->ages || !r->rest || !r->used)
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  memset(r->used, 0, (size_t)n + 1);
  return SQLITE_OK;
}

/* One shown memory's row of ht_sql_recalls added to the recall read last
 * (the recall made first when the row starts one: *last its id).
 * l: the log read; st: the statement; *want: how many memories the recall
 * showed. */
static int ht_recall_row(hc_ctx *x, ht_log *l, sqlite3_stmt *st, i64 *last, int *want) {
  i64 id = sqlite3_column_int64(st, 0);
  int rc;
  if (!sqlite3_column_int(st, 8)) return hc_damaged_json(x);
  if (!l->n || id != *last) {
    *want = sqlite3_column_int(st, 3);
    if (*want < 0 || *want > 100000) return ht_damaged(x);
    if ((rc = ht_recall_new(x, l, st, *want))) return rc;
    *last = id;
  }
  ht_recall *r = &l->r[l->n - 1];
  if (sqlite3_column_type(st, 7) == SQLITE_NULL) return SQLITE_OK; /* shown nothing */
  const char *f = (const char *)sqlite3_column_text(st, 4);
  const char *type = (const char *)sqlite3_column_text(st, 7);
  if (r->n >= *want || !f || !type || strcmp(type, "text") || !ht_is_num(st, 5) ||
      !ht_is_num(st, 6))
    return ht_damaged(x);
  if (!(r->features[r->n] = sqlite3_mprintf("%s", f)))
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  r->ages[r->n] = sqlite3_column_double(st, 5);
  double rest = sqlite3_column_double(st, 6);
  r->rest[r->n] = rest < 0 ? 0.0 : rest; /* as the replay always took it */
  r->n++;
  return SQLITE_OK;
}

/* The judged recalls within b (the newest o->newest, or all), newest first,
 * HT_RECALL_CHUNK at a time while *work is below budget: *cursor the newest
 * id still to read.  *done once they are all read, then oldest first.
 * l: the log read. */
static int ht_read_recalls(hc_ctx *x, const ht_opts *o, const ht_bounds *b, ht_log *l,
                           i64 *cursor, i64 budget, i64 *work, int *done) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, ht_sql_recalls, &st), want = 0;
  while (!rc && !*done && *work < budget) {
    i64 chunk = HT_RECALL_CHUNK, had = l->n, last = 0;
    if (o->newest >= 0 && o->newest - l->n < chunk) chunk = o->newest - l->n;
    if (chunk <= 0) { *done = 1; break; }
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, *cursor);
    sqlite3_bind_int64(st, 2, chunk);
    sqlite3_bind_int64(st, 3, b->max_event);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      *work += 2200;
      if ((rc = ht_recall_row(x, l, st, &last, &want))) break;
    }
    if (rc != SQLITE_DONE) break;
    rc = SQLITE_OK;
    if (l->n > had) *cursor = l->r[l->n - 1].id - 1;
    if (l->n - had < chunk) *done = 1;
  }
  hc_done(x, st);
  if (rc != SQLITE_OK && !x->err) rc = hc_sqlfail(x, rc);
  if (!rc && *done) /* oldest first */
    for (int i = 0, j = l->n - 1; i < j; i++, j--) {
      ht_recall t = l->r[i];
      l->r[i] = l->r[j];
      l->r[j] = t;
    }
  return rc;
}

static __thread char **ht_sort_names; /* the names ht_rank_cmp sorts ids of */
static int ht_rank_cmp(const void *a, const void *b) {
  return strcmp(ht_sort_names[*(const int *)a], ht_sort_names[*(const int *)b]);
}

/* The folds: each judged recall's namespace ranked among theirs (sorted by
 * name); by namespace when there are at least HT_FOLDS of them. */
static int ht_folds(hc_ctx *x, ht_log *l) {
  int nn = l->names.n;
  int *ids = sqlite3_malloc64((sqlite3_uint64)(nn + 1) * sizeof *ids);
  l->rank = sqlite3_malloc64((sqlite3_uint64)(nn + 1) * sizeof *l->rank);
  if (!ids || !l->rank) {
    sqlite3_free(ids);
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  for (int i = 0; i < nn; i++) l->rank[i] = -1;
  l->nrank = nn;
  int k = 0;
  for (int i = 0; i < l->n; i++)
    if (l->rank[l->r[i].ns] < 0) {
      l->rank[l->r[i].ns] = 0;
      ids[k++] = l->r[i].ns;
    }
  ht_sort_names = l->names.s; /* namespaces are only read while sorting */
  qsort(ids, (size_t)k, sizeof *ids, ht_rank_cmp);
  for (int i = 0; i < k; i++) l->rank[ids[i]] = i;
  sqlite3_free(ids);
  l->nranked = k;
  l->by_ns = k >= HT_FOLDS;
  return SQLITE_OK;
}

static int ht_fold(const ht_log *l, i64 rid, int ns) {
  return l->by_ns ? l->rank[ns] % HT_FOLDS : (int)(((rid % HT_FOLDS) + HT_FOLDS) % HT_FOLDS);
}

/* The recall with id rid among the judged ones (sorted by id), or -1. */
static int ht_recall_at(const ht_log *l, i64 rid) {
  int lo = 0, hi = l->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (l->r[mid].id == rid) return mid;
    if (l->r[mid].id < rid) lo = mid + 1; else hi = mid - 1;
  }
  return -1;
}

static u64 ht_key2(int a, int b) { return ((u64)(u32)a << 32) | (u32)b; }
static u64 ht_key3(int fold, int ns, int f) {
  return ((u64)fold << 60) | ((u64)(u32)ns << 30) | (u32)f;
}

/* ?1 after this event id, ?2 up to this one, ?3 the first recall whose
 * events count (NULL: all): a span of the log, in its order (by rowid, so a
 * step reads only the span it is given). */
static const char ht_sql_events[] =
    "SELECT id, recall_id, namespace, used, position, deltas FROM events "
    "WHERE id > ?1 AND id <= ?2 AND (?3 IS NULL OR recall_id >= ?3) ORDER BY id";
/* ?1 the first recall whose events count: the first of their events (through
 * the UNIQUE(recall_id, position) index), where the span reads start */
static const char ht_sql_first_event[] =
    "SELECT min(id) FROM events INDEXED BY sqlite_autoindex_events_1 WHERE recall_id >= ?1";
/* one event's deltas through SQLite's JSON, where ht_parse_deltas declines */
static const char ht_sql_deltas[] =
    "SELECT json_extract(d.value, '$[0]'), json_extract(d.value, '$[1]'), "
    "json_extract(d.value, '$[2]'), d.type, json_extract(d.value, '$[0]') IS NOT NULL AND "
    "json_type(d.value, '$[0]') = 'text', 1 FROM json_each(CASE WHEN json_valid(?1) THEN ?1 "
    "END) AS d UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, 0 WHERE NOT json_valid(?1)";

/* One delta (feature f, da, db) of an event of namespace ns added to the
 * namespace's own counts and, when a fold holds the event out, to that fold's.
 * l: the log read. */
static int ht_delta(hc_ctx *x, ht_log *l, const char *f, double da, double db, int ns,
                    int fold) {
  int fid = ht_intern(&l->feats, f);
  if (fid < 0) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  int rc = ht_add(&l->own, ht_key2(ns, fid), da, db);
  if (!rc && fold >= 0) rc = ht_add(&l->held, ht_key3(fold, ns, fid), da, db);
  return rc ? hc_fail(x, SQLITE_NOMEM, "out of memory") : SQLITE_OK;
}

static const char *ht_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* A JSON number at p (strtod reads it, correctly rounded), its end in *end. */
static int ht_json_num(const char *p, const char **end, double *v) {
  const char *q = p;
  if (*q != '-' && !(*q >= '0' && *q <= '9')) return 0;
  while ((*q >= '0' && *q <= '9') || *q == '-' || *q == '+' || *q == '.' || *q == 'e' ||
         *q == 'E')
    q++;
  char *e;
  *v = strtod(p, &e);
  *end = q;
  return e == q && isfinite(*v);
}

/* Deltas as the C core writes them, [["feature", d_alpha, d_beta], ...],
 * read without SQLite's JSON (the replay's hot loop): pass 0 checks, pass 1
 * adds.  0 when the text is not that plain shape (an escape in a name, a
 * long name): the caller reads it through SQLite's JSON instead.
 * l: the log read; p0: the text; ns, fold: the event's namespace and the fold
 * holding it out (-1: none); *rc: an error. */
static int ht_parse_deltas(hc_ctx *x, ht_log *l, const char *p0, int ns, int fold, int *rc) {
  char name[512];
  *rc = SQLITE_OK;
  for (int pass = 0; pass < 2; pass++) {
    const char *p = ht_ws(p0);
    if (*p++ != '[') return 0;
    p = ht_ws(p);
    if (*p == ']') return *ht_ws(p + 1) == 0;
    for (;;) {
      p = ht_ws(p);
      if (*p++ != '[') return 0;
      p = ht_ws(p);
      if (*p++ != '"') return 0;
      const char *f = p;
      while (*p && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
      if (*p != '"' || p - f >= (long)sizeof name) return 0;
      memcpy(name, f, (size_t)(p - f));
      name[p - f] = 0;
      double d[2];
      p++;
      for (int k = 0; k < 2; k++) {
        p = ht_ws(p);
        if (*p++ != ',') return 0;
        if (!ht_json_num(ht_ws(p), &p, &d[k])) return 0;
      }
      p = ht_ws(p);
      if (*p++ != ']') return 0;
      if (pass == 1 && (*rc = ht_delta(x, l, name, d[0], d[1], ns, fold))) return 1;
      p = ht_ws(p);
      if (*p == ']') break;
      if (*p++ != ',') return 0;
    }
    if (*ht_ws(p + 1)) return 0;
  }
  return 1;
}

/* One event's deltas (text), through ht_parse_deltas or SQLite's JSON.
 * l: the log read; ns, fold: as ht_delta's. */
static int ht_deltas(hc_ctx *x, ht_log *l, const char *text, int ns, int fold) {
  int rc;
  if (!text || ht_parse_deltas(x, l, text, ns, fold, &rc)) return text ? rc : SQLITE_OK;
  sqlite3_stmt *st = NULL;
  if ((rc = hc_prepare(x, ht_sql_deltas, &st))) return rc;
  sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *type = (const char *)sqlite3_column_text(st, 3);
    if (!sqlite3_column_int(st, 5)) { /* not JSON */
      rc = hc_damaged_json(x);
      break;
    }
    if (!type || strcmp(type, "array") || !sqlite3_column_int(st, 4) || !ht_is_num(st, 1) ||
        !ht_is_num(st, 2)) {
      rc = hc_fail(x, SQLITE_CORRUPT, "the event log is damaged (an event's deltas are not "
                                      "[feature, d_alpha, d_beta] triples)");
      break;
    }
    if ((rc = ht_delta(x, l, (const char *)sqlite3_column_text(st, 0),
                       sqlite3_column_double(st, 1), sqlite3_column_double(st, 2), ns, fold)))
      break;
  }
  hc_done(x, st);
  if (rc == SQLITE_DONE) return SQLITE_OK;
  return x->err ? rc : hc_sqlfail(x, rc);
}

/* One event's row of ht_sql_events: its deltas counted, and the position it
 * marked used if its recall is replayed. */
static int ht_event_row(hc_ctx *x, ht_log *l, sqlite3_stmt *st) {
  const char *name = (const char *)sqlite3_column_text(st, 2);
  int ns = ht_intern(&l->names, name ? name : "");
  if (ns < 0) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  int has_rid = sqlite3_column_type(st, 1) != SQLITE_NULL;
  i64 rid = sqlite3_column_int64(st, 1);
  /* a forgotten recall's event, or one of a namespace no replayed recall is
   * in: every fold learns from it */
  int ranked = ns < l->nrank && l->rank[ns] >= 0;
  int fold = !has_rid || (l->by_ns && !ranked) ? -1 : ht_fold(l, rid, ns);
  int at = has_rid && sqlite3_column_int(st, 3) ? ht_recall_at(l, rid) : -1;
  i64 pos = sqlite3_column_int64(st, 4);
  if (at >= 0 && pos >= 0 && pos < l->r[at].n) l->r[at].used[pos] = 1;
  return ht_deltas(x, l, (const char *)sqlite3_column_text(st, 5), ns, fold);
}

/* Where the event log's reading starts (*cursor: after this id): the first
 * event of the oldest replayed recall on, or the beginning.
 * o: the options; l: the log read; *work: the work done. */
static int ht_first_event(hc_ctx *x, const ht_opts *o, const ht_log *l, i64 *cursor,
                          i64 *work) {
  *cursor = 0;
  if (o->newest < 0) return SQLITE_OK;
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, ht_sql_first_event, &st);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, l->n ? l->r[0].id : 0);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *cursor = sqlite3_column_int64(st, 0) - 1;
    rc = SQLITE_OK;
  } else {
    rc = hc_sqlfail(x, rc);
  }
  hc_done(x, st);
  *work += 20 * (i64)l->n;
  return rc;
}

/* The event log within b (all of it, or from the oldest replayed recall on),
 * HT_EVENT_SPAN ids at a time while *work is below budget (*cursor: read up
 * to this id): the counts, and the positions each judged recall's feedback
 * marked used.  *done at the end of the log.
 * o: the options; l: the log read. */
static int ht_read_events(hc_ctx *x, const ht_opts *o, const ht_bounds *b, ht_log *l,
                          i64 *cursor, i64 budget, i64 *work, int *done) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, ht_sql_events, &st);
  while (!rc && !*done && *work < budget) {
    i64 upto = b->max_event - *cursor > HT_EVENT_SPAN ? *cursor + HT_EVENT_SPAN : b->max_event;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, *cursor);
    sqlite3_bind_int64(st, 2, upto);
    if (o->newest >= 0) sqlite3_bind_int64(st, 3, l->n ? l->r[0].id : 0);
    else sqlite3_bind_null(st, 3);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      *work += 1500 + 7 * (i64)sqlite3_column_bytes(st, 5);
      if ((rc = ht_event_row(x, l, st))) break;
    }
    if (rc != SQLITE_DONE) break;
    rc = SQLITE_OK;
    *work += 200;
    *cursor = upto;
    if (upto >= b->max_event) *done = 1;
  }
  hc_done(x, st);
  if (rc != SQLITE_OK && !x->err) rc = hc_sqlfail(x, rc);
  return rc;
}

/* The pooled sums (a plain sum of the namespaces' own counts) and each
 * fold's, and each feature's question type, while *work is below budget:
 * *cursor runs over the own sums, the held-out sums, then the features.
 * *done when all are made.
 * l: the log read. */
static int ht_pool(hc_ctx *x, ht_log *l, i64 *cursor, i64 budget, i64 *work, int *done) {
  int rc = SQLITE_OK;
  for (; !rc && *cursor < l->own.n && *work < budget; ++*cursor, *work += 20) {
    i64 i = *cursor;
    rc = ht_add(&l->pooled, l->own.key[i] & 0xFFFFFFFFu, l->own.a[i], l->own.b[i]);
  }
  for (; !rc && *cursor < l->own.n + l->held.n && *work < budget; ++*cursor, *work += 20) {
    i64 i = *cursor - l->own.n;
    u64 k = l->held.key[i];
    rc = ht_add(&l->hpooled, ht_key2((int)(k >> 60), (int)(k & 0x3FFFFFFFu)), l->held.a[i],
                l->held.b[i]);
  }
  if (rc) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (*cursor < l->own.n + l->held.n) return SQLITE_OK;
  if (!l->fqt && !(l->fqt = sqlite3_malloc64((sqlite3_uint64)(l->feats.n + 1) * sizeof *l->fqt)))
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  for (; *work < budget && *cursor < l->own.n + l->held.n + l->feats.n; ++*cursor) {
    int f = (int)(*cursor - l->own.n - l->held.n);
    const char *name = l->feats.s[f], *slash = strchr(name, '/');
    l->fqt[f] = -1;
    *work += 40;
    if (slash && slash > name) {
      char *q = sqlite3_mprintf("%.*s", (int)(slash - name), name);
      l->fqt[f] = q ? ht_intern(&l->qtypes, q) : -1;
      sqlite3_free(q);
      if (l->fqt[f] < 0) return hc_fail(x, SQLITE_NOMEM, "out of memory");
      *work += 150;
    }
  }
  *done = *cursor >= l->own.n + l->held.n + l->feats.n;
  return SQLITE_OK;
}

typedef struct {
  ht_sums index; /* (fold, namespace, qtype) -> its place in blob */
  unsigned char **blob;
  i64 *len;
  int n, cap;
} ht_blobs;

static void ht_blobs_free(ht_blobs *b) {
  for (int i = 0; i < b->n; i++) sqlite3_free(b->blob[i]);
  sqlite3_free(b->blob);
  sqlite3_free(b->len);
  ht_sums_free(&b->index);
}

/* The link set a recall of namespace ns, question type qt, in fold sees when
 * replayed: what the whole log taught less the fold's own events, per
 * namespace and pooled, as the heap_links() blob (the plain features and
 * those crossed with qt).  Made once per (fold, ns, qt).
 * l: the log read; c: the link sets made so far; pseudocount: the config's
 * pooled pseudocount; *at: the set's index in c. */
static int ht_blob(hc_ctx *x, const ht_log *l, ht_blobs *c, int fold, int ns, int qt,
                   double pseudocount, int *at) {
  u64 key = ht_key3(fold, ns, qt);
  if ((*at = ht_find(&c->index, key)) >= 0) {
    *at = (int)c->index.a[*at];
    return SQLITE_OK;
  }
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    unsigned char **v = sqlite3_realloc64(c->blob, (sqlite3_uint64)cap * sizeof *v);
    if (v) c->blob = v;
    i64 *len = v ? sqlite3_realloc64(c->len, (sqlite3_uint64)cap * sizeof *len) : NULL;
    if (!len) return hc_fail(x, SQLITE_NOMEM, "out of memory");
    c->len = len;
    c->cap = cap;
  }
  hm_link *v = sqlite3_malloc64((sqlite3_uint64)(l->feats.n + 1) * sizeof *v);
  if (!v) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  i64 m = 0;
  for (int f = 0; f < l->feats.n; f++) {
    if (l->fqt[f] >= 0 && l->fqt[f] != qt) continue;
    double oa, ob, ha, hb, pa, pb, hpa, hpb;
    ht_get(&l->own, ht_key2(ns, f), &oa, &ob);
    ht_get(&l->held, ht_key3(fold, ns, f), &ha, &hb);
    ht_get(&l->pooled, (u64)f, &pa, &pb);
    ht_get(&l->hpooled, ht_key2(fold, f), &hpa, &hpb);
    v[m].h = hm_fnv64(l->feats.s[f], strlen(l->feats.s[f]));
    hm_link_view(fmax(oa - ha, 0.0), fmax(ob - hb, 0.0), fmax(pa - hpa, 0.0),
                 fmax(pb - hpb, 0.0), pseudocount, &v[m].a, &v[m].b);
    m++;
  }
  if (m > 0) qsort(v, (size_t)m, sizeof *v, hm_link_cmp);
  i64 k = 0; /* a feature hashed twice keeps one row, as heap_links does */
  for (i64 i = 0; i < m; i++) {
    if (k > 0 && v[k - 1].h == v[i].h) v[k - 1] = v[i];
    else v[k++] = v[i];
  }
  i64 size = HM_LINKS_HEADER + k * (i64)sizeof(hm_link);
  unsigned char *blob = sqlite3_malloc64((sqlite3_uint64)size);
  if (!blob || ht_add(&c->index, key, (double)c->n, 0.0)) {
    sqlite3_free(v);
    sqlite3_free(blob);
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  u32 count = (u32)k;
  memcpy(blob, HM_LINKS_MAGIC, 4);
  memcpy(blob + 4, &count, 4);
  if (k > 0) memcpy(blob + HM_LINKS_HEADER, v, (size_t)k * sizeof *v);
  sqlite3_free(v);
  c->blob[c->n] = blob;
  c->len[c->n] = size;
  *at = c->n++;
  return SQLITE_OK;
}

/* -- the replay ------------------------------------------------------------------- */

static int ht_dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The reciprocal rank of the first used memory in the order of scores
 * score[0..n) (ties by position), 0 when none was used. */
static double ht_rr(const double *score, const unsigned char *used, int n) {
  int best = 0;
  for (int u = 0; u < n; u++) {
    if (!used[u]) continue;
    double s = score[u];
    int rank = 1;
    for (int j = 0; j < n; j++) {
      double t = score[j];
      if (t > s || (t == s && j < u) || (isnan(s) && !isnan(t))) rank++;
    }
    if (!best || rank < best) best = rank;
  }
  return best ? 1.0 / best : 0.0;
}

/* The judged recalls from *next on scored again under each weight w[0..nw)
 * with the link set its fold learns (made once per fold, namespace and
 * question type, into blobs), while *work is below budget:
 * rr[iw * l->n + i], recall i's reciprocal rank.
 * o: the options. */
static int ht_replay(hc_ctx *x, const ht_log *l, const ht_opts *o, ht_blobs *blobs,
                     const double *w, int nw, double *rr, i64 *next, i64 budget, i64 *work) {
  int rc = SQLITE_OK, maxn = 1;
  for (int i = 0; i < l->n; i++) maxn = l->r[i].n > maxn ? l->r[i].n : maxn;
  double *out = sqlite3_malloc64((sqlite3_uint64)maxn * (HT_MAX_GRID + 2) * sizeof *out);
  double *ones = sqlite3_malloc64((sqlite3_uint64)maxn * sizeof *ones);
  int *zeros = sqlite3_malloc64((sqlite3_uint64)maxn * sizeof *zeros);
  if (!out || !ones || !zeros) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  for (int i = 0; !rc && i < maxn; i++) {
    ones[i] = 1.0;
    zeros[i] = 0;
  }
  hm_config cfg = o->cfg;
  cfg.w_relevance = 1.0;
  cfg.w_recency = 0.0;
  cfg.w_importance = 1.0;
  for (; !rc && *next < l->n && *work < budget; ++*next) {
    const ht_recall *r = &l->r[*next];
    int at, made = blobs->n;
    rc = ht_blob(x, l, blobs, ht_fold(l, r->id, r->ns), r->ns, r->qt,
                 o->cfg.pooled_pseudocount, &at);
    if (blobs->n > made) *work += 1000 * (i64)l->feats.n;
    *work += 1800 * (i64)(r->n + 1) + 60 * (i64)nw * (r->n + 1);
    char err[HM_ERRLEN] = "";
    int bad = -1;
    if (!rc && hm_score_weights(r->n, r->rest, r->ages, ones, zeros,
                                (const char *const *)r->features, l->qtypes.s[r->qt],
                                blobs->blob[at], blobs->len[at], &cfg, w, nw, out, &bad, err,
                                sizeof err) != HM_OK) {
      rc = hc_fail(x, SQLITE_CORRUPT, "recall %lld of the log cannot be replayed (%s)",
                   (long long)r->id, err);
      break;
    }
    for (int k = 0; !rc && k < nw; k++)
      rr[(i64)k * l->n + *next] = ht_rr(out + (i64)k * r->n, r->used, r->n);
  }
  sqlite3_free(out);
  sqlite3_free(ones);
  sqlite3_free(zeros);
  return rc;
}

/* The paired bootstrap over groups (group[i] is recall i's, 0..ng) of the
 * mean of diff[0..n): each group's sum and count, into gsum[0..2ng). */
static void ht_boot_groups(const double *diff, const int *group, int n, int ng, double *gsum) {
  double *gcnt = gsum + ng;
  for (int g = 0; g < ng; g++) gsum[g] = gcnt[g] = 0.0;
  for (int i = 0; i < n; i++) {
    gsum[group[i]] += diff[i];
    gcnt[group[i]] += 1.0;
  }
}

/* Resamples *b on (of boot) into means, drawing from *s, while *work is
 * below budget.
 * gsum: the ng groups' sums. */
static void ht_boot(const double *gsum, int ng, u64 *s, double *means, i64 *b, i64 boot,
                    i64 budget, i64 *work) {
  const double *gcnt = gsum + ng;
  u64 limit = UINT64_MAX - UINT64_MAX % (u64)ng;
  while (*b < boot && *work < budget) {
    i64 end = *b + HT_BOOT_CHUNK < boot ? *b + HT_BOOT_CHUNK : boot;
    for (; *b < end; ++*b) {
      double sum = 0.0, cnt = 0.0;
      for (int g = 0; g < ng; g++) {
        u64 v;
        do v = hm_splitmix64(s); while (v >= limit); /* no modulo bias */
        int k = (int)(v % (u64)ng);
        sum += gsum[k];
        cnt += gcnt[k];
      }
      means[*b] = sum / (cnt > 1.0 ? cnt : 1.0);
    }
    *work += 4 * (i64)ng * HT_BOOT_CHUNK;
  }
}

/* The k-th smallest of v[0..n) (0-based), v reordered around it. */
static double ht_nth(double *v, i64 n, i64 k) {
  i64 lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = v[lo + (hi - lo) / 2];
    i64 i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) {
        double t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return v[k];
  }
  return v[k];
}

/* The interval of coverage level from the resampled means (numpy's default
 * quantile: linear between order statistics).
 * boot: the resamples; lo, hi: the interval. */
static void ht_boot_interval(double *means, i64 boot, double level, double *lo, double *hi) {
  double tail = (1.0 - level) / 2, q[2] = {tail, 1.0 - tail}, r[2];
  for (int j = 0; j < 2; j++) {
    double h = q[j] * (double)(boot - 1);
    i64 at = (i64)floor(h);
    if (at >= boot - 1) {
      r[j] = ht_nth(means, boot, boot - 1);
    } else {
      double a = ht_nth(means, boot, at), b = ht_nth(means, boot, at + 1);
      r[j] = a + (h - (double)at) * (b - a);
    }
  }
  *lo = r[0];
  *hi = r[1];
}

/* -- the decision, the report and the deployment ---------------------------------- */

typedef struct {
  int deployed, n, nw, has_against;
  char *reason;
  const char *folds;
  double cur_w, cur_mrr, best_w, best_mrr, gain[3], after, against;
  double each; /* the interval's coverage for one weight: level split among the others */
  double *w, *mrr; /* the weights replayed and their MRR */
} ht_report;

/* cfg as meta 'tuned' holds it: ScoringConfig.to_dict's JSON with sorted
 * keys (json.dumps(sort_keys=True)), the integer fields as integers. */
static char *ht_tuned_json(const hm_config *cfg) {
  int order[HM_NCONFIG];
  for (int i = 0; i < HM_NCONFIG; i++) order[i] = i;
  for (int i = 1; i < HM_NCONFIG; i++) /* insertion sort by name */
    for (int j = i; j > 0 && strcmp(hm_config_fields[order[j - 1]].name,
                                    hm_config_fields[order[j]].name) > 0; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(s, 1, '{');
  for (int k = 0; k < HM_NCONFIG; k++) {
    int i = order[k];
    double v = *hm_config_slot((hm_config *)cfg, i);
    char num[32];
    int integral = hm_config_fields[i].rule == HM_RULE_SWITCH ||
                   hm_config_fields[i].rule == HM_RULE_COUNT;
    if (integral && v == floor(v) && fabs(v) < 1e15) snprintf(num, sizeof num, "%lld",
                                                              (long long)v);
    else hm_repr(v, num);
    sqlite3_str_appendf(s, "%s\"%s\": %s", k ? ", " : "", hm_config_fields[i].name, num);
  }
  sqlite3_str_appendchar(s, 1, '}');
  return sqlite3_str_finish(s);
}

/* Save cfg as the store's tuned config (meta 'tuned', whose only writer
 * this is); *saved (NULL: not wanted) receives the JSON written. */
static int ht_save(hc_ctx *x, const hm_config *cfg, char **saved) {
  char *json = ht_tuned_json(cfg);
  if (!json) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_TUNED "', ?1) "
                         "ON CONFLICT(key) DO UPDATE SET value = excluded.value", &st);
  if (!rc) {
    sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
    rc = hc_exec(x, st);
  }
  hc_done(x, st);
  if (!rc && saved) *saved = json;
  else sqlite3_free(json);
  return rc;
}

/* Save cfg with w_usefulness w as the store's tuned config. */
static int ht_deploy(hc_ctx *x, const hm_config *base, double w) {
  hm_config cfg = *base;
  cfg.w_usefulness = w;
  return ht_save(x, &cfg, NULL);
}

/* Deploy the best weight only if its gain's interval (over the reference:
 * against, or the weight in force) lies above 0, else the reference when
 * that is against; only what differs from the weight in force, and only
 * when o->deploy.  Sets rep's reason (and deployed, after). */
static int ht_decide(hc_ctx *x, const ht_opts *o, ht_report *rep) {
  double cur = rep->cur_w, best = rep->best_w, ref = rep->has_against ? rep->against : cur;
  int significant = best != ref && rep->gain[1] > 0;
  double target = significant ? best : ref;
  rep->after = cur;
  if (target == cur) {
    if (best == cur)
      rep->reason = significant
          ? sqlite3_mprintf("the weight in force is already the best, significantly better "
                            "than w_usefulness=%g", ref)
          : sqlite3_mprintf("the weight in force is already the best");
    else if (rep->nw > 2)
      rep->reason = sqlite3_mprintf("the gain's %g%% interval (%g%% for the choice among %d "
                                    "weights) includes 0: not significant", rep->each * 100,
                                    o->level * 100, rep->nw - 1);
    else
      rep->reason = sqlite3_mprintf("the gain's %g%% interval includes 0: not significant",
                                    o->level * 100);
    return rep->reason ? SQLITE_OK : hc_fail(x, SQLITE_NOMEM, "out of memory");
  }
  char *why = significant ? sqlite3_mprintf("%s", "")
                          : sqlite3_mprintf(" (no weight is significantly better than %g)", ref);
  int rc = why ? SQLITE_OK : hc_fail(x, SQLITE_NOMEM, "out of memory");
  if (!rc && !o->deploy) {
    rep->reason = significant ? sqlite3_mprintf("significant, but deploy=False")
                              : sqlite3_mprintf("back to %g%s, but deploy=False", ref, why);
  } else if (!rc && !(rc = ht_deploy(x, &o->cfg, target))) {
    rep->deployed = 1;
    rep->after = target;
    rep->reason = sqlite3_mprintf("w_usefulness %g -> %g%s, saved in the store", cur, target,
                                  why);
  }
  sqlite3_free(why);
  if (!rc && !rep->reason) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  return rc;
}

static void ht_num(sqlite3_str *s, double v) {
  char num[32];
  if (isnan(v)) {
    sqlite3_str_appendall(s, "null");
    return;
  }
  hm_repr(v, num);
  sqlite3_str_appendall(s, num);
}

/* The report as JSON (TuneReport's fields). */
static char *ht_report_json(const ht_report *r) {
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendf(s, "{\"deployed\":%s,\"reason\":", r->deployed ? "true" : "false");
  hq_json_string(s, r->reason ? r->reason : "", r->reason ? (int)strlen(r->reason) : 0);
  sqlite3_str_appendf(s, ",\"recalls\":%d,\"folds\":\"%s\",\"current\":{\"w_usefulness\":",
                      r->n, r->folds);
  ht_num(s, r->cur_w);
  sqlite3_str_appendall(s, ",\"mrr\":");
  ht_num(s, r->cur_mrr);
  sqlite3_str_appendall(s, "},\"best\":{\"w_usefulness\":");
  ht_num(s, r->best_w);
  sqlite3_str_appendall(s, ",\"mrr\":");
  ht_num(s, r->best_mrr);
  sqlite3_str_appendall(s, "},\"gain\":[");
  for (int i = 0; i < 3; i++) {
    if (i) sqlite3_str_appendchar(s, 1, ',');
    ht_num(s, r->gain[i]);
  }
  sqlite3_str_appendall(s, "],\"table\":[");
  for (int i = 0; i < r->nw; i++) {
    sqlite3_str_appendall(s, i ? ",[" : "[");
    ht_num(s, r->w[i]);
    sqlite3_str_appendchar(s, 1, ',');
    ht_num(s, r->mrr[i]);
    sqlite3_str_appendchar(s, 1, ']');
  }
  sqlite3_str_appendall(s, "],\"after\":");
  ht_num(s, r->after);
  sqlite3_str_appendall(s, ",\"against\":");
  if (r->has_against) ht_num(s, r->against);
  else sqlite3_str_appendall(s, "null");
  sqlite3_str_appendchar(s, 1, '}');
  return sqlite3_str_finish(s);
}

/* The weights replayed: the grid's, the weight in force and the reference,
 * sorted, each once; returns how many (into w, room for HT_MAX_GRID + 2). */
static int ht_weights(const ht_opts *o, double ref, double *w) {
  int n = 0;
  for (int i = 0; i < o->ngrid; i++) w[n++] = o->grid[i];
  w[n++] = o->cfg.w_usefulness;
  w[n++] = ref;
  qsort(w, (size_t)n, sizeof *w, ht_dbl_cmp);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!k || w[i] != w[k - 1]) w[k++] = w[i];
  return k;
}

/* The best weight's place: the highest MRR (to 12 decimals), ties to the
 * weight nearest ref, then the lowest. */
static int ht_best(const double *w, const double *mrr, int nw, double ref) {
  int best = 0;
  for (int k = 1; k < nw; k++) {
    double a = nearbyint(mrr[k] * 1e12) / 1e12, b = nearbyint(mrr[best] * 1e12) / 1e12;
    if (a > b || (a == b && fabs(w[k] - ref) < fabs(w[best] - ref))) best = k;
  }
  return best;
}

/* -- a tune in steps -------------------------------------------------------------- */

enum { HT_RECALLS, HT_FIRST_EVENT, HT_EVENTS, HT_POOL, HT_REPLAY, HT_MEASURE, HT_BOOT,
       HT_DECIDE, HT_REPORT, HT_DONE };

/* One tune (see the unit's opening comment), done in steps by ht_step:
 * heap_tune's all in one call, auto-tune's a step after each feedback (the
 * connection keeps it between them: hm_conn's job).  Every step's work is
 * counted, never timed, so the same calls make the same steps. */
struct ht_job {
  ht_opts o;
  ht_bounds b;
  int phase;
  i64 cursor;                       /* the phase's place */
  ht_log l;
  ht_report rep;
  ht_blobs blobs;                   /* each fold's link sets */
  double *rr, *diff, *gsum, *means; /* the replay's reciprocal ranks, ...; the bootstrap's */
  int *group, ng, cur, iref, best;
  u64 s;                            /* the bootstrap's draws */
  char *out;                        /* the report (JSON), once done */
  i64 point, judged, epoch;         /* auto-tune's: its point, the count then, its claim */
  i64 step;                         /* auto-tune's work a step, at least HT_STEP_WORK */
};

static void ht_job_free(ht_job *j) {
  if (!j) return;
  ht_log_free(&j->l);
  ht_blobs_free(&j->blobs);
  sqlite3_free(j->rep.reason);
  sqlite3_free(j->rep.w);
  sqlite3_free(j->rr);
  sqlite3_free(j->diff);
  sqlite3_free(j->gsum);
  sqlite3_free(j->means);
  sqlite3_free(j->group);
  sqlite3_free(j->out);
  sqlite3_free(j);
}

/* A tune of the log within b with options o (NULL: out of memory). */
static ht_job *ht_job_new(const ht_opts *o, const ht_bounds *b) {
  ht_job *j = sqlite3_malloc64(sizeof *j);
  if (!j) return NULL;
  memset(j, 0, sizeof *j);
  j->o = *o;
  j->b = *b;
  j->phase = HT_RECALLS;
  j->cursor = b->max_recall;
  j->rep = (ht_report){.n = 0, .folds = "-", .cur_w = o->cfg.w_usefulness, .cur_mrr = NAN,
                       .best_w = o->cfg.w_usefulness, .best_mrr = NAN,
                       .after = o->cfg.w_usefulness, .has_against = o->has_against,
                       .against = o->against};
  return j;
}

/* The log as it is now: its newest event and recall. */
static int ht_bounds_now(hc_ctx *x, ht_bounds *b) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, "SELECT coalesce((SELECT max(id) FROM events), 0), "
                         "coalesce((SELECT max(id) FROM recalls), 0)", &st);
  if (rc) return rc;
  if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    b->max_event = sqlite3_column_int64(st, 0);
    b->max_recall = sqlite3_column_int64(st, 1);
    rc = SQLITE_OK;
  } else {
    rc = hc_sqlfail(x, rc);
  }
  hc_done(x, st);
  return rc;
}

/* After the log is read: the weights replayed and room for what they give. */
static int ht_replay_start(hc_ctx *x, ht_job *j) {
  ht_log *l = &j->l;
  double ref = j->o.has_against ? j->o.against : j->o.cfg.w_usefulness;
  j->rep.w = sqlite3_malloc64((HT_MAX_GRID + 2) * 2 * sizeof(double));
  j->rr = sqlite3_malloc64((sqlite3_uint64)(HT_MAX_GRID + 2) * (l->n + 1) * sizeof *j->rr);
  j->diff = sqlite3_malloc64((sqlite3_uint64)(l->n + 1) * sizeof *j->diff);
  j->group = sqlite3_malloc64((sqlite3_uint64)(l->n + 1) * sizeof *j->group);
  if (!j->rep.w || !j->rr || !j->diff || !j->group)
    return hc_fail(x, SQLITE_NOMEM, "out of memory");
  j->rep.mrr = j->rep.w + HT_MAX_GRID + 2;
  j->rep.nw = ht_weights(&j->o, ref, j->rep.w);
  return SQLITE_OK;
}

/* After the replay: each weight's MRR, the best, its gain over the
 * reference recall by recall, and the bootstrap's groups. */
static int ht_measure(hc_ctx *x, ht_job *j) {
  ht_log *l = &j->l;
  ht_report *rep = &j->rep;
  const ht_opts *o = &j->o;
  double ref = o->has_against ? o->against : o->cfg.w_usefulness;
  for (int k = 0; k < rep->nw; k++) {
    double sum = 0.0;
    for (int i = 0; i < l->n; i++) sum += j->rr[(i64)k * l->n + i];
    rep->mrr[k] = sum / l->n;
    if (rep->w[k] == o->cfg.w_usefulness) j->cur = k;
    if (rep->w[k] == ref) j->iref = k;
  }
  j->best = ht_best(rep->w, rep->mrr, rep->nw, ref);
  double sum = 0.0;
  for (int i = 0; i < l->n; i++) {
    j->diff[i] = j->rr[(i64)j->best * l->n + i] - j->rr[(i64)j->iref * l->n + i];
    sum += j->diff[i];
    j->group[i] = l->by_ns ? l->rank[l->r[i].ns] : i;
  }
  rep->gain[0] = sum / l->n;
  /* the best of nw - 1 weights is tested, so each at level split among them
   * (Bonferroni), as auto-tune has been since 17.7: picking the best of
   * eight at 95% each would pass by chance far more often than 5% */
  rep->each = rep->nw > 2 ? 1.0 - (1.0 - o->level) / (rep->nw - 1) : o->level;
  j->ng = l->by_ns ? l->nranked : l->n;
  j->gsum = sqlite3_malloc64((sqlite3_uint64)j->ng * 2 * sizeof(double));
  j->means = sqlite3_malloc64((sqlite3_uint64)o->boot * sizeof(double));
  if (!j->gsum || !j->means) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  ht_boot_groups(j->diff, j->group, l->n, j->ng, j->gsum);
  j->s = (u64)o->seed;
  rep->folds = l->by_ns ? "namespace" : "recall";
  rep->cur_w = rep->w[j->cur];
  rep->cur_mrr = rep->mrr[j->cur];
  rep->best_w = rep->w[j->best];
  rep->best_mrr = rep->mrr[j->best];
  return SQLITE_OK;
}

/* Once every judged recall is read: too few to tune (the report says so),
 * else the folds. */
static int ht_recalls_read(hc_ctx *x, ht_job *j) {
  j->rep.n = j->l.n;
  /* auto-tune's steps: the rest of the tune spread over point / 2 feedbacks,
   * so that it ends before the next point of the schedule can be reached
   * (point feedbacks at the very least, each judging one more recall), and
   * each feedback carries a small share of it */
  i64 shown = 0, ng = j->l.names.n >= HT_FOLDS ? j->l.names.n : j->l.n;
  for (int i = 0; i < j->l.n; i++) shown += j->l.r[i].n;
  i64 rest = (1800 + 60 * (i64)(j->o.ngrid + 2)) * (shown + j->l.n) + 4 * j->o.boot * ng +
             12000 * shown;
  j->step = rest / (j->point > 2 ? j->point / 2 : 1);
  if (j->step < HT_STEP_WORK) j->step = HT_STEP_WORK;
  if (j->l.n >= HT_MIN_RECALLS) {
    j->phase = HT_FIRST_EVENT;
    return ht_folds(x, &j->l);
  }
  j->rep.has_against = 0; /* nothing replayed, nothing measured against */
  j->rep.reason = sqlite3_mprintf("only %d judged recalls in the log; tune() needs %d", j->l.n,
                                  HT_MIN_RECALLS);
  j->phase = HT_REPORT;
  return j->rep.reason ? SQLITE_OK : hc_fail(x, SQLITE_NOMEM, "out of memory");
}

/* The tune's next step, of about budget units of work (see HT_STEP_WORK),
 * inside the caller's savepoint: j->phase is HT_DONE, and j->out the report,
 * once the decision is taken (and deployed, when o.deploy). */
static int ht_step(hc_ctx *x, ht_job *j, i64 budget) {
  i64 work = 0;
  if (budget < j->step) budget = j->step;
  int rc = SQLITE_OK;
  while (!rc && j->phase != HT_DONE && work < budget) {
    int done = 0;
    switch (j->phase) {
    case HT_RECALLS:
      rc = ht_read_recalls(x, &j->o, &j->b, &j->l, &j->cursor, budget, &work, &done);
      if (!rc && done) rc = ht_recalls_read(x, j);
      break;
    case HT_FIRST_EVENT:
      rc = ht_first_event(x, &j->o, &j->l, &j->cursor, &work);
      j->phase = HT_EVENTS;
      break;
    case HT_EVENTS:
      rc = ht_read_events(x, &j->o, &j->b, &j->l, &j->cursor, budget, &work, &done);
      if (done) j->phase = HT_POOL, j->cursor = 0;
      break;
    case HT_POOL:
      rc = ht_pool(x, &j->l, &j->cursor, budget, &work, &done);
      if (!rc && done && !(rc = ht_replay_start(x, j))) j->phase = HT_REPLAY, j->cursor = 0;
      break;
    case HT_REPLAY:
      rc = ht_replay(x, &j->l, &j->o, &j->blobs, j->rep.w, j->rep.nw, j->rr, &j->cursor,
                     budget, &work);
      if (j->cursor >= j->l.n) j->phase = HT_MEASURE;
      break;
    case HT_MEASURE:
      rc = ht_measure(x, j);
      work += 10 * (i64)j->rep.nw * j->l.n;
      j->phase = HT_BOOT, j->cursor = 0;
      break;
    case HT_BOOT:
      ht_boot(j->gsum, j->ng, &j->s, j->means, &j->cursor, j->o.boot, budget, &work);
      if (j->cursor < j->o.boot) break;
      ht_boot_interval(j->means, j->o.boot, j->rep.each, &j->rep.gain[1], &j->rep.gain[2]);
      work += 40 * j->o.boot;
      j->phase = HT_DECIDE;
      break;
    case HT_DECIDE:
      rc = ht_decide(x, &j->o, &j->rep);
      j->phase = HT_REPORT;
      break;
    default: /* HT_REPORT */
      if (!(j->out = ht_report_json(&j->rep))) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
      j->phase = HT_DONE;
    }
  }
  return rc;
}

static int ht_pending(hc_ctx *x, const ht_opts *given, char **out);

/* heap_tune([options]): every step of a tune of the log as it is now (or,
 * with "pending", of the auto-tune under way: ht_pending), inside a
 * savepoint of its own, so that an error leaves nothing written. */
static void heap_tune(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  char *out = NULL, *why = NULL;
  ht_opts o;
  ht_bounds b;
  ht_job *j = NULL;
  hc_keep_statements(&x);
  int rc = hs_check_store(x.db, x.conn, &why);
  if (rc != SQLITE_OK) hc_fail(&x, rc, "%s", why ? why : "out of memory");
  sqlite3_free(why);
  if (!rc) rc = ht_read_opts(&x, argc ? argv[0] : NULL, &o);
  if (!rc && o.deploy && sqlite3_db_readonly(x.db, "main") == 1)
    rc = hc_fail(&x, SQLITE_READONLY, "the store is read-only here; tune deploys into it "
                                      "(pass '{\"deploy\": false}' to measure only)");
  if (!rc && (rc = sqlite3_exec(x.db, "SAVEPOINT heap_tune", NULL, NULL, NULL)) != SQLITE_OK) {
    hc_sqlfail(&x, rc);
  } else if (!rc) {
    if (o.pending) {
      rc = ht_pending(&x, &o, &out);
    } else {
      rc = ht_bounds_now(&x, &b);
      if (!rc && !(j = ht_job_new(&o, &b))) rc = hc_fail(&x, SQLITE_NOMEM, "out of memory");
      if (!rc) rc = ht_step(&x, j, INT64_MAX);
      if (!rc) out = j->out, j->out = NULL;
    }
    if (rc == SQLITE_OK && (rc = sqlite3_exec(x.db, "RELEASE heap_tune", NULL, NULL, NULL)))
      hc_sqlfail(&x, rc);
    if (rc != SQLITE_OK) {
      sqlite3_exec(x.db, "ROLLBACK TO heap_tune", NULL, NULL, NULL);
      sqlite3_exec(x.db, "RELEASE heap_tune", NULL, NULL, NULL);
    }
  }
  ht_job_free(j);
  if (rc == SQLITE_OK) {
    sqlite3_result_text(ctx, out, -1, sqlite3_free);
    return;
  }
  sqlite3_free(out);
  hc_result_fail(ctx, &x, "heap_tune", rc);
}

/* heap_save_config(config): config (text as heap_recall and heap_score take
 * it, 'w_usefulness=0.5 max_lift=4', over the defaults) becomes the store's
 * tuned config, the one heap_recall and every later open without an
 * explicit config use, as a deployment by heap_tune does
 * (Memory.set_config(save=True) calls it).  Returns the JSON saved.  A bad
 * config, a read-only store or a database that is not a heapmem store is an
 * error, and nothing is written. */
static void heap_save_config(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  hc_ctx x = {.db = sqlite3_context_db_handle(ctx), .conn = hq_user_data(ctx)};
  char *why = NULL, *saved = NULL, err[HM_ERRLEN];
  hm_config cfg;
  hc_keep_statements(&x);
  int rc = hs_check_store(x.db, x.conn, &why);
  if (rc != SQLITE_OK) hc_fail(&x, rc, "%s", why ? why : "out of memory");
  sqlite3_free(why);
  const char *text = NULL;
  if (!rc && sqlite3_value_type(argv[0]) != SQLITE_TEXT)
    rc = hc_fail(&x, SQLITE_MISMATCH, "config must be text such as 'w_usefulness=0.5'");
  if (!rc && hq_arg_text(argv[0], "config", 0, hm_limits.MAX_TEXT_BYTES, &text, err, sizeof err))
    rc = hc_fail(&x, SQLITE_ERROR, "%s", err);
  if (!rc && hm_config_parse(text, &cfg, err, sizeof err) != HM_OK)
    rc = hc_fail(&x, SQLITE_ERROR, "%s", err);
  if (!rc && sqlite3_db_readonly(x.db, "main") == 1)
    rc = hc_fail(&x, SQLITE_READONLY, "the store is read-only here");
  if (!rc) rc = ht_save(&x, &cfg, &saved);
  if (rc == SQLITE_OK) {
    sqlite3_result_text(ctx, saved, -1, sqlite3_free);
    return;
  }
  hc_result_fail(ctx, &x, "heap_save_config", rc);
}

#pragma endregion

#pragma region auto-tune

/* Auto-tune: heap_feedback and heap_answer tune the store themselves once its
 * judged recalls reach the next point of a doubling schedule (HT_MIN_RECALLS,
 * then twice that, ...), seeded with 0, against the default w_usefulness, at
 * 99% split among the grid's other weights, on the newest HT_AUTO_WINDOW
 * judged recalls at most (ht_auto_opts).
 *
 * Its place is meta 'autotune', {"point": the last point claimed, "judged":
 * the judged recalls as counted, null when unknown[, "tune": the tune under
 * way]}, kept in the feedback's own savepoint: the running count goes up by
 * one when the feedback judged a recall's first used memory (an index
 * lookup), and the exact count (every event) is taken only when the count is
 * unknown or says a point is reached.  Claiming a point there means two
 * connections never tune for the same one.
 *
 * The tune runs in small steps (ht_step: HT_STEP_WORK at least), one after each feedback
 * with auto-tune on, each in a savepoint of its own, so that no feedback
 * waits for a whole tune.  The feedback that claims the point pins the log
 * ("tune": {"point", "judged", "events" and "recalls": the newest event and
 * recall then, "epoch", "idle"}): every step reads the log as it was then,
 * so the report is the one heap_tune('{"auto": true}') gives right after that
 * feedback, and the feedback whose step finishes it returns the report (and
 * has deployed the weight).  The connection that claimed it keeps the tune
 * in memory (hm_conn's job, tagged with the claim's epoch) and steps it; a
 * feedback from another connection counts "idle", and after HT_TAKEOVER of
 * those in a row (the owner closed, or judges no more) it takes the tune
 * over, epoch + 1, from the start of the same pinned log.  A forget or an
 * import (the count marked unknown) restarts it the same way at the next
 * feedback.  A failed step ends the tune: its error is in that feedback's
 * result, the point stays claimed, and the feedback is never undone. */

#define HT_TAKEOVER 8

/* The most a count or a point of the schedule can be (2^62): the state
 * read from the file is untrusted, and past this it is damage, so that no
 * doubling or count below can overflow. */
#define HT_MAX_COUNT ((i64)1 << 62)

static i64 ht_next_point(i64 point) {
  return point < HT_MIN_RECALLS ? HT_MIN_RECALLS : point > HT_MAX_COUNT / 2 ? INT64_MAX : 2 * point;
}

static i64 ht_schedule_point(i64 judged) {
  if (judged < HT_MIN_RECALLS) return 0;
  i64 point = HT_MIN_RECALLS;
  while (point <= judged / 2) point *= 2;
  return point;
}

/* meta 'autotune' read; judged -1 when unknown, tuning 0 when no tune is
 * under way */
typedef struct {
  i64 point, judged;
  int tuning;
  i64 tpoint, tjudged, events, recalls, epoch, idle;
} ht_state;

/* the state when it is what ht_state_write writes (exactly those keys, each
 * count at most HT_MAX_COUNT: past it, damage, recounted) */
#define HT_MAX_COUNT_SQL "4611686018427387904"
#define HT_TUNE_INT(K)                                                                         \
  "json_type(v, '$.tune." K "') = 'integer' AND json_extract(v, '$.tune." K "') BETWEEN 0 "   \
  "AND " HT_MAX_COUNT_SQL
static const char ht_sql_state[] =
    "SELECT json_extract(v, '$.point'), json_extract(v, '$.judged'), "
    "json_type(v, '$.tune') = 'object', json_extract(v, '$.tune.point'), "
    "json_extract(v, '$.tune.judged'), json_extract(v, '$.tune.events'), "
    "json_extract(v, '$.tune.recalls'), json_extract(v, '$.tune.epoch'), "
    "json_extract(v, '$.tune.idle') "
    "FROM (SELECT value AS v FROM heapmem_meta WHERE key = '" HM_META_AUTOTUNE "') "
    "WHERE json_valid(v) AND json_type(v) = 'object' AND json_type(v, '$.point') = 'integer' "
    "AND json_extract(v, '$.point') BETWEEN 0 AND " HT_MAX_COUNT_SQL " AND "
    "(json_type(v, '$.judged') = 'null' OR (json_type(v, '$.judged') = 'integer' AND "
    "json_extract(v, '$.judged') BETWEEN 0 AND " HT_MAX_COUNT_SQL ")) "
    "AND (SELECT count(*) FROM json_each(v)) = 2 + (json_type(v, '$.tune') IS NOT NULL) "
    "AND (json_type(v, '$.tune') IS NULL OR ((SELECT count(*) FROM json_each(v, '$.tune')) = 6 "
    "AND " HT_TUNE_INT("point") " AND " HT_TUNE_INT("judged") " AND " HT_TUNE_INT("events")
    " AND " HT_TUNE_INT("recalls") " AND " HT_TUNE_INT("epoch") " AND " HT_TUNE_INT("idle") "))";
#undef HT_TUNE_INT
static const char ht_sql_used[] = "SELECT count(*) FROM events WHERE recall_id = ?1 AND used = 1";
static const char ht_sql_set_state[] =
    "INSERT INTO heapmem_meta(key, value) VALUES ('" HM_META_AUTOTUNE "', ?1) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value";

/* The state (a value heapmem cannot read counts as none: point 0, count
 * unknown, no tune under way). */
static int ht_state_read(hc_ctx *x, ht_state *s) {
  sqlite3_stmt *st = NULL;
  memset(s, 0, sizeof *s);
  s->judged = -1;
  int rc = hc_prepare(x, ht_sql_state, &st);
  if (rc) return rc;
  if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    s->point = sqlite3_column_int64(st, 0);
    s->judged = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 1);
    s->tuning = sqlite3_column_int(st, 2);
    i64 *f[6] = {&s->tpoint, &s->tjudged, &s->events, &s->recalls, &s->epoch, &s->idle};
    for (int i = 0; s->tuning && i < 6; i++) *f[i] = sqlite3_column_int64(st, 3 + i);
    rc = SQLITE_DONE;
  }
  hc_done(x, st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

static int ht_state_write(hc_ctx *x, const ht_state *s) {
  char judged[24] = "null";
  if (s->judged >= 0) snprintf(judged, sizeof judged, "%lld", (long long)s->judged);
  char *json = s->tuning
      ? sqlite3_mprintf("{\"point\": %lld, \"judged\": %s, \"tune\": {\"point\": %lld, "
                        "\"judged\": %lld, \"events\": %lld, \"recalls\": %lld, \"epoch\": %lld, "
                        "\"idle\": %lld}}", (long long)s->point, judged, (long long)s->tpoint,
                        (long long)s->tjudged, (long long)s->events, (long long)s->recalls,
                        (long long)s->epoch, (long long)s->idle)
      : sqlite3_mprintf("{\"point\": %lld, \"judged\": %s}", (long long)s->point, judged);
  sqlite3_stmt *st = NULL;
  if (!json) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  int rc = hc_prepare(x, ht_sql_set_state, &st);
  if (!rc) {
    sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
    rc = hc_exec(x, st);
  }
  hc_done(x, st);
  sqlite3_free(json);
  return rc;
}

/* One integer from sql (bound to rid when rid > 0). */
static int ht_one(hc_ctx *x, const char *sql, i64 rid, i64 *v) {
  sqlite3_stmt *st = NULL;
  int rc = hc_prepare(x, sql, &st);
  if (rc) return rc;
  if (rid > 0) sqlite3_bind_int64(st, 1, rid);
  if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    *v = sqlite3_column_int64(st, 0);
    rc = SQLITE_DONE;
  }
  hc_done(x, st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(x, rc);
}

/* Keep the count after a feedback on recall rid that judged nused memories
 * used, and claim the schedule's next point when it is reached and on (auto-
 * tune allowed): *claim, the point claimed (0: none), *judged, the count,
 * *tuning whether a tune is under way.  A count found unknown (a forget, an
 * import) restarts a tune under way. */
static int ht_count(hc_ctx *x, i64 rid, int nused, int on, i64 *claim, i64 *judged,
                    int *tuning) {
  ht_state s;
  i64 n = 0, used = 0;
  int rc;
  *claim = 0;
  if ((rc = ht_state_read(x, &s))) return rc;
  *tuning = s.tuning;
  n = s.judged;
  if (s.judged < 0) {
    if ((rc = ht_one(x, ht_sql_count, 0, &n))) return rc;
    if (s.tuning) s.epoch++, s.idle = HT_TAKEOVER; /* the next feedback starts it again */
  } else if (nused > 0) {
    if ((rc = ht_one(x, ht_sql_used, rid, &used))) return rc;
    if (used != nused) return (*judged = n), SQLITE_OK; /* not the recall's first use */
    n++;
  } else {
    return (*judged = n), SQLITE_OK;
  }
  if (on && n >= ht_next_point(s.point)) {
    if ((rc = ht_one(x, ht_sql_count, 0, &n))) return rc; /* exact */
    if (n >= ht_next_point(s.point)) *claim = s.point = ht_schedule_point(n);
  }
  *judged = s.judged = n;
  return ht_state_write(x, &s);
}

/* The end of a tune as the feedback's auto_tune: {"point", "judged",
 * "report"} (report: the JSON), or {"point", "judged", "error"}. */
static char *ht_outcome(i64 point, i64 judged, const char *report, const char *why) {
  if (!why)
    return sqlite3_mprintf("{\"point\":%lld,\"judged\":%lld,\"report\":%s}", (long long)point,
                           (long long)judged, report);
  sqlite3_str *s = sqlite3_str_new(NULL);
  sqlite3_str_appendf(s, "{\"point\":%lld,\"judged\":%lld,\"error\":", (long long)point,
                      (long long)judged);
  hq_json_string(s, why, (int)strlen(why));
  sqlite3_str_appendchar(s, 1, '}');
  return sqlite3_str_finish(s);
}

/* The tune this connection is to step now, into *out (NULL: none): the one
 * just claimed (claim > 0), the one under way that it owns, or one it takes
 * over (see the region's opening comment); s is updated to say so.
 * config: the feedback's config; judged: the judged recalls counted. */
static int ht_take(hc_ctx *x, const char *config, i64 claim, i64 judged, ht_state *s,
                   ht_job **out) {
  hm_conn *conn = x->conn;
  ht_job *mine = conn ? conn->job : NULL;
  *out = NULL;
  if (claim) {
    ht_bounds b;
    int rc = ht_bounds_now(x, &b);
    if (rc) return rc;
    *s = (ht_state){.point = s->point, .judged = s->judged, .tuning = 1, .tpoint = claim,
                    .tjudged = judged, .events = b.max_event, .recalls = b.max_recall,
                    .epoch = s->tuning ? s->epoch + 1 : 1};
  } else if (!s->tuning) {
    if (conn) ht_job_free(conn->job), conn->job = NULL; /* ended elsewhere: heap_tune's pending */
    return SQLITE_OK;
  } else if (mine && mine->point == s->tpoint && mine->epoch == s->epoch) {
    s->idle = 0;
    *out = mine;
    return SQLITE_OK;
  } else if (++s->idle < HT_TAKEOVER) {
    return SQLITE_OK;
  } else {
    s->epoch++, s->idle = 0;
  }
  ht_opts o;
  ht_bounds b = {.max_event = s->events, .max_recall = s->recalls};
  ht_auto_opts(&o, s->tjudged);
  o.deploy = 1;
  int rc = ht_config(x, config, &o.cfg);
  if (rc) return rc;
  ht_job *j = ht_job_new(&o, &b);
  if (!j) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  j->point = s->tpoint, j->judged = s->tjudged, j->epoch = s->epoch;
  if (conn) {
    ht_job_free(conn->job);
    conn->job = j;
  }
  *out = j;
  return SQLITE_OK;
}

/* Auto-tune's part of a feedback with auto-tune on (claim: the point it
 * claimed, 0 for none; judged, the count; config the feedback's, NULL for
 * the store's tuned one): the next step of the tune under way, in a
 * savepoint of its own.  Returns what a step that ended the tune did
 * (ht_outcome), else NULL; an error never reaches the feedback (x's error is
 * taken back). */
static int ht_state_same(const ht_state *a, const ht_state *b) {
  return a->point == b->point && a->judged == b->judged && a->tuning == b->tuning &&
         (!a->tuning || (a->tpoint == b->tpoint && a->tjudged == b->tjudged &&
                         a->events == b->events && a->recalls == b->recalls &&
                         a->epoch == b->epoch && a->idle == b->idle));
}

static char *ht_autotune(hc_ctx *x, const char *config, i64 claim, i64 judged) {
  hc_ctx t = {.db = x->db, .conn = x->conn};
  ht_state s, before;
  ht_job *j = NULL;
  char *out = NULL;
  int rc = sqlite3_exec(t.db, "SAVEPOINT heap_autotune", NULL, NULL, NULL);
  if (rc) return sqlite3_free(t.err), NULL; /* nothing tuned: the next feedback tries */
  if (!(rc = ht_state_read(&t, &s))) {
    before = s;
    rc = ht_take(&t, config, claim, judged, &s, &j);
  }
  if (!rc && j) rc = ht_step(&t, j, t.conn ? HT_STEP_WORK : INT64_MAX);
  if (rc) { /* the tune ends: its work undone, its error said, the point kept */
    sqlite3_exec(t.db, "ROLLBACK TO heap_autotune", NULL, NULL, NULL);
    if (s.tuning) out = ht_outcome(s.tpoint, s.tjudged, NULL, t.err ? t.err : sqlite3_errstr(rc));
    s.tuning = 0;
    sqlite3_free(t.err);
    t.err = NULL;
    rc = ht_state_write(&t, &s);
  } else if (j && j->phase == HT_DONE) {
    out = ht_outcome(j->point, j->judged, j->out, NULL);
    s.tuning = 0;
    rc = ht_state_write(&t, &s);
  } else if (!ht_state_same(&s, &before)) {
    rc = ht_state_write(&t, &s);
  }
  if (rc) sqlite3_exec(t.db, "ROLLBACK TO heap_autotune", NULL, NULL, NULL);
  sqlite3_exec(t.db, "RELEASE heap_autotune", NULL, NULL, NULL);
  if (j && (j->phase == HT_DONE || !s.tuning || !t.conn)) {
    if (t.conn && t.conn->job == j) t.conn->job = NULL;
    ht_job_free(j);
  }
  sqlite3_free(t.err);
  return out;
}

/* heap_tune('{"pending": true}'): the auto-tune under way run to its end in
 * this call, from the start of the log it pinned, with auto-tune's settings
 * and the config in force (given's), deploying as auto-tune does: *out its
 * outcome (ht_outcome), or null when no tune is under way. */
static int ht_pending(hc_ctx *x, const ht_opts *given, char **out) {
  ht_state s;
  ht_opts o;
  int rc = ht_state_read(x, &s);
  if (rc || !s.tuning) {
    if (!rc && !(*out = sqlite3_mprintf("null"))) rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
    return rc;
  }
  ht_bounds b = {.max_event = s.events, .max_recall = s.recalls};
  ht_auto_opts(&o, s.tjudged);
  o.deploy = 1;
  o.cfg = given->cfg;
  ht_job *j = ht_job_new(&o, &b);
  if (!j) return hc_fail(x, SQLITE_NOMEM, "out of memory");
  j->point = s.tpoint, j->judged = s.tjudged;
  rc = ht_step(x, j, INT64_MAX);
  s.tuning = 0;
  if (!rc) rc = ht_state_write(x, &s);
  if (!rc && !(*out = ht_outcome(j->point, j->judged, j->out, NULL)))
    rc = hc_fail(x, SQLITE_NOMEM, "out of memory");
  ht_job_free(j);
  return rc;
}

#pragma endregion
