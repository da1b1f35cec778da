/*
 * sqlfuncs.c: the heap_* SQL functions that wrap text.c, links.c, score.c
 * and credit.c: heap_version, heap_qtype, heap_features, heap_match,
 * heap_ns_tag, heap_relate, heap_active, heap_links, heap_score,
 * heap_explain, heap_recency, heap_credit and heap_fold.  Each
 * turns SQL values into hm_* arguments and hm_* errors into SQL errors.
 *
 * Owns also the helpers the units after it share for SQL values (the region
 * "SQL values"): HM_TEXT_ARG, hq_is_number, hq_result_err, hm_repr (a double
 * as Python's repr() writes it) and hq_json_string.
 * Relies on: text.c, links.c, score.c, credit.c.  The first unit that calls
 * sqlite3_*.
 */

#pragma region SQL values

/* What every heap_* function is registered with as its user data
 * (register.c, hg_create_function): the C function SQLite's call goes on to
 * (through the trampoline of its SQLite library, which sets sqlite3_api
 * first), the function's own user data (hq_user_data), and its destructor. */
typedef void (*hm_xfunc)(sqlite3_context *, int, sqlite3_value **);
typedef struct {
  const sqlite3_api_routines *api; /* the SQLite library it was registered in */
  hm_xfunc func, step;
  void (*final)(sqlite3_context *);
  void *ud;               /* the function's own user data: its hm_conn, tokenizer ... */
  void (*destroy)(void *); /* ud's destructor, or NULL */
} hm_fn;

/* A heap_* function's own user data (sqlite3_user_data is its hm_fn). */
static void *hq_user_data(sqlite3_context *ctx) {
  const hm_fn *f = sqlite3_user_data(ctx);
  return f ? f->ud : NULL;
}

/* What hq_arg_text asks of a text argument besides being text, valid UTF-8
 * and free of NUL bytes: */
#define HM_ARG_NAME 1     /* a name: 1 to MAX_NAME_CHARS characters, not blank */
#define HM_ARG_NOTBLANK 2 /* not empty, nor white space alone */
#define HM_ARG_NUL_OK 4   /* NUL bytes allowed (a question: its words are read around them) */

/* Text s[0..n) of SQLite type `type` (called `what` in the sentence), checked: text, well-formed
 * UTF-8 without NUL bytes (hm_utf8_ok), at most maxbytes bytes (0: any), and
 * flags' rules.  HM_OK with the text in *out; else HM_ERROR and why (one
 * sentence, after the function's name).  v is never read as anything but
 * what it holds: a NUL inside a namespace cannot end it early.
 * why, whylen: where the sentence goes. */
static int hm_check_text(int type, const unsigned char *s, i64 n, const char *what, int flags,
                         double maxbytes, char *why, int whylen) {
  i64 chars = 0;
  if (type != SQLITE_TEXT) return hm_errf(why, whylen, "%s must be text", what);
  if (!s) return hm_errf(why, whylen, "out of memory");
  if (maxbytes > 0 && (double)n > maxbytes)
    return hm_errf(why, whylen, "%s is longer than %.0f bytes", what, maxbytes);
  if (!hm_utf8_ok(s, n, flags & HM_ARG_NUL_OK, &chars))
    return hm_errf(why, whylen, flags & HM_ARG_NUL_OK ? "%s must be valid UTF-8"
                                                      : "%s must be valid UTF-8 without NUL bytes",
                   what);
  if (flags & (HM_ARG_NAME | HM_ARG_NOTBLANK)) {
    int blank = 1;
    for (i64 i = 0; i < n && blank; i++) blank = isspace(s[i]) != 0;
    if (blank) return hm_errf(why, whylen, "%s must not be empty", what);
  }
  if ((flags & HM_ARG_NAME) && (double)chars > hm_limits.MAX_NAME_CHARS)
    return hm_errf(why, whylen, "%s is longer than %.0f characters", what,
                   hm_limits.MAX_NAME_CHARS);
  return HM_OK;
}

/* Whether JSON text js[0..n) holds the escape of a NUL (\u0000) in a
 * string.  The names a JSON array argument lists (ids, kinds, namespaces)
 * are read through json_each, and an older SQLite's (3.40's, the sqlite3
 * shell's on Debian 12) cuts such a string at the NUL: "a\u0000b" would
 * arrive as "a", another name, where hm_check_text never sees the NUL.
 * Each reader of such an array refuses it as hm_check_text refuses a NUL. */
static int hm_json_nul(const char *js, i64 n) {
  for (i64 i = 0; i + 1 < n; i++) {
    if (js[i] != '\\') continue;
    if (js[i + 1] == 'u' && i + 5 < n && !memcmp(js + i + 2, "0000", 4)) return 1;
    i++; /* the escaped character: never the start of another escape */
  }
  return 0;
}

/* A text argument v of a heap_* function, checked as hm_check_text checks
 * it: what its name in the sentence, flags and maxbytes the rules; *out the
 * text, or HM_ERROR with why (whylen bytes) one sentence. */
static int hq_arg_text(sqlite3_value *v, const char *what, int flags, double maxbytes,
                       const char **out, char *why, int whylen) {
  *out = NULL;
  if (!v) return hm_errf(why, whylen, "%s must be text", what);
  int type = sqlite3_value_type(v);
  const unsigned char *s = type == SQLITE_TEXT ? sqlite3_value_text(v) : NULL;
  if (hm_check_text(type, s, type == SQLITE_TEXT ? sqlite3_value_bytes(v) : 0, what, flags,
                    maxbytes, why, whylen))
    return HM_ERROR;
  *out = (const char *)s;
  return HM_OK;
}

/* Whether a small function's argument is a name (namespace, kind, source):
 * those never hold a NUL byte; a question or a text may (read up to it). */
static int hm_is_name_arg(const char *what) {
  return !strcmp(what, "namespace") || !strcmp(what, "kind") || !strncmp(what, "source", 6);
}

/* A text argument of a small heap_* function, checked by hq_arg_text; on a
 * bad one, its sentence as the SQL error and on to cleanup. */
#define HM_TEXT_ARG(ctx, argv, i, fname, what, out)                                     \
  do {                                                                                  \
    char why_[HM_ERRLEN];                                                               \
    if (hq_arg_text(argv[i], what, hm_is_name_arg(what) ? 0 : HM_ARG_NUL_OK, 0, &out,   \
                    why_, sizeof why_) != HM_OK) {                                      \
      hq_result_err(ctx, fname, why_);                                                  \
      goto cleanup;                                                                     \
    }                                                                                   \
  } while (0)

static int hq_is_number(sqlite3_value *v) {
  int t = sqlite3_value_type(v);
  return t == SQLITE_INTEGER || t == SQLITE_FLOAT;
}

static void hq_result_err(sqlite3_context *ctx, const char *fname, const char *msg) {
  char *m = sqlite3_mprintf("%s: %s", fname, msg);
  if (!m) { sqlite3_result_error_nomem(ctx); return; }
  sqlite3_result_error(ctx, m, -1);
  sqlite3_free(m);
}
/* x as Python's repr() writes a float (the shortest text that reads back as
 * x, "1.0" not "1"), so deltas read the same whichever side wrote them. */
static void hm_repr(double x, char out[32]) {
  if (x == 0.0 || x == 1.0) { /* the counts model 1 writes: no printf */
    strcpy(out, signbit(x) ? "-0.0" : x == 0.0 ? "0.0" : "1.0");
    return;
  }
  if (!isfinite(x)) {
    strcpy(out, isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
    return;
  }
  for (int p = 15; p <= 17; p++) {
    snprintf(out, 32, "%.*g", p, x);
    if (strtod(out, NULL) == x) break;
  }
  if (!strpbrk(out, ".en")) strcat(out, ".0");
}

/* s[0..len) as a JSON string */
static void hq_json_string(sqlite3_str *str, const char *s, int len) {
  sqlite3_str_appendchar(str, 1, '"');
  int plain = 0; /* the run of bytes that need no escape, appended in one call */
  for (int i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch != '"' && ch != '\\' && ch >= 0x20) {
      plain++;
      continue;
    }
    sqlite3_str_append(str, s + i - plain, plain);
    plain = 0;
    if (ch == '"' || ch == '\\') sqlite3_str_appendf(str, "\\%c", ch);
    else sqlite3_str_appendf(str, "\\u%04x", ch);
  }
  sqlite3_str_append(str, s + len - plain, plain);
  sqlite3_str_appendchar(str, 1, '"');
}

#pragma endregion

#pragma region SQL functions

static void heap_version(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc; (void)argv;
  sqlite3_result_text(ctx, "v" HEAPMEM_VERSION, -1, SQLITE_STATIC);
}

/* heap_qtype(question) -> 'when' | 'who' | ... | 'other' */
static void heap_qtype(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *q = NULL;
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_qtype", "the question", q);
  sqlite3_result_text(ctx, hm_qtype(q), -1, SQLITE_STATIC);
cleanup:;
}

/* heap_features(text, kind, source) -> 'kind:fact src:user len:s date:1 clock:0 ...' */
static void heap_features(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *text = NULL, *kind = NULL, *source = NULL;
  char out[HM_FEATURES_LEN];
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_features", "text", text);
  HM_TEXT_ARG(ctx, argv, 1, "heap_features", "kind", kind);
  if (sqlite3_value_type(argv[2]) != SQLITE_NULL)
    HM_TEXT_ARG(ctx, argv, 2, "heap_features", "source (or NULL)", source);
  if (hm_features(text, kind, source, out, sizeof out) != HM_OK) {
    hq_result_err(ctx, "heap_features", "too many features");
    goto cleanup;
  }
  sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
cleanup:;
}

/* heap_match(question [, namespace]) -> FTS5 MATCH expression; '""' (which
 * matches nothing, without scanning) when the question has no searchable term */
static void heap_match(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *q = NULL, *ns = NULL;
  char out[HM_MATCH_LEN];
  HM_TEXT_ARG(ctx, argv, 0, "heap_match", "the question", q);
  if (argc > 1) HM_TEXT_ARG(ctx, argv, 1, "heap_match", "namespace", ns);
  int n = hm_match(q, ns, out, sizeof out);
  if (n < 0) { hq_result_err(ctx, "heap_match", "query too long"); goto cleanup; }
  if (n == 0) sqlite3_result_text(ctx, "\"\"", -1, SQLITE_STATIC);
  else sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
cleanup:;
}

/* heap_time_window(question, now) -> '{"from": ..., "until": ..., "text": ...}':
 * the window of time the question names (unix seconds, from inclusive, until
 * exclusive; when.c), read as of now; NULL when it names none */
static void heap_time_window(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *q = NULL;
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_time_window", "the question", q);
  double now = sqlite3_value_double(argv[1]), lo, hi;
  if (!hq_is_number(argv[1]) || !(now >= 0 && now <= 253402300799.0)) {
    hq_result_err(ctx, "heap_time_window", "now must be unix seconds from 0 to 253402300799 "
                                           "(1970 to the year 9999)");
    goto cleanup;
  }
  int start, len;
  if (!hm_time_window(q, now, &lo, &hi, &start, &len)) goto cleanup;
  sqlite3_str *js = sqlite3_str_new(sqlite3_context_db_handle(ctx));
  char num[32];
  hm_repr(lo, num);
  sqlite3_str_appendf(js, "{\"from\": %s, ", num);
  hm_repr(hi, num);
  sqlite3_str_appendf(js, "\"until\": %s, \"text\": ", num);
  hq_json_string(js, q + start, len);
  sqlite3_str_appendchar(js, 1, '}');
  if (sqlite3_str_errcode(js)) {
    sqlite3_free(sqlite3_str_finish(js));
    sqlite3_result_error_nomem(ctx);
    goto cleanup;
  }
  sqlite3_result_text(ctx, sqlite3_str_finish(js), -1, sqlite3_free);
cleanup:;
}

/* heap_ns_tag(namespace) -> the FTS5 token that tags the namespace */
static void heap_ns_tag(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *ns = NULL;
  char tag[HM_NS_TAG_LEN];
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_ns_tag", "namespace", ns);
  if (hm_ns_tag(ns, tag, sizeof tag) < 0) {
    hq_result_err(ctx, "heap_ns_tag", "a namespace is at most 1024 bytes of UTF-8");
    goto cleanup;
  }
  sqlite3_result_text(ctx, tag, -1, SQLITE_TRANSIENT);
cleanup:;
}

/* heap_relate(question, source) -> 'srcq:1' when the source is named in the
 * question, else 'srcq:0' */
static void heap_relate(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  const char *q = NULL, *src = NULL;
  char out[16];
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_relate", "the question", q);
  if (sqlite3_value_type(argv[1]) != SQLITE_NULL)
    HM_TEXT_ARG(ctx, argv, 1, "heap_relate", "source (or NULL)", src);
  hm_relate(q, src, out, sizeof out);
  sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
cleanup:;
}

/* heap_active(features, qtype) -> the features crossed with the question type */
static void heap_active(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *features = NULL, *qt = NULL;
  char out[HM_ACTIVE_LEN], err[HM_ERRLEN] = "";
  (void)argc;
  HM_TEXT_ARG(ctx, argv, 0, "heap_active", "features", features);
  HM_TEXT_ARG(ctx, argv, 1, "heap_active", "the question type", qt);
  if (hm_active(features, qt, NAN, out, sizeof out, err, sizeof err) != HM_OK) {
    hq_result_err(ctx, "heap_active", err[0] ? err : "too many features");
    goto cleanup;
  }
  sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
cleanup:;
}

/* heap_links(feature, own_alpha, own_beta, pooled_alpha, pooled_beta
 *            [, pseudocount]) aggregate -> link-set blob */
typedef struct {
  hm_link *v;
  i64 n, cap;
  int failed;
} hm_links_acc;

static void heap_links_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  hm_links_acc *acc = sqlite3_aggregate_context(ctx, sizeof(hm_links_acc));
  const char *name = NULL;
  if (!acc) { sqlite3_result_error_nomem(ctx); return; }
  if (acc->failed) return;
  HM_TEXT_ARG(ctx, argv, 0, "heap_links", "the feature", name);
  double x[5];
  x[4] = 1e9; /* no cap: borrow all the other namespaces' evidence */
  for (int i = 1; i < argc; i++) {
    if (!hq_is_number(argv[i])) {
      hq_result_err(ctx, "heap_links", "counts and pseudocount must be numbers");
      goto cleanup;
    }
    x[i - 1] = sqlite3_value_double(argv[i]);
    if (!isfinite(x[i - 1]) || x[i - 1] < 0) {
      hq_result_err(ctx, "heap_links", "counts and pseudocount must be finite and >= 0");
      goto cleanup;
    }
  }
  if (acc->n == acc->cap) {
    i64 cap = acc->cap ? acc->cap * 2 : 64;
    hm_link *v = sqlite3_realloc64(acc->v, (sqlite3_uint64)cap * sizeof(hm_link));
    if (!v) { sqlite3_result_error_nomem(ctx); goto cleanup; }
    acc->v = v;
    acc->cap = cap;
  }
  hm_link *l = &acc->v[acc->n++];
  l->h = hm_fnv64(name, strlen(name));
  hm_link_view(x[0], x[1], x[2], x[3], x[4], &l->a, &l->b);
  return;
cleanup:
  acc->failed = 1;
}

/* The link-set blob of v[0..n) (sorted here by hash; a feature listed
 * twice keeps its last row), sqlite3_malloc'ed, its size in *len; NULL when
 * out of memory.  heap_links and heap_recall's link set (recall.c) make it. */
static unsigned char *hq_links_blob(hm_link *v, i64 n, int *len) {
  if (n > 0) qsort(v, (size_t)n, sizeof(hm_link), hm_link_cmp);
  i64 m = 0;
  for (i64 i = 0; i < n; i++) {
    if (m > 0 && v[m - 1].h == v[i].h) v[m - 1] = v[i];
    else v[m++] = v[i];
  }
  i64 size = HM_LINKS_HEADER + m * (i64)sizeof(hm_link);
  unsigned char *blob = sqlite3_malloc64((sqlite3_uint64)size);
  if (!blob) return NULL;
  memcpy(blob, HM_LINKS_MAGIC, 4);
  u32 count = (u32)m;
  memcpy(blob + 4, &count, 4);
  if (m > 0) memcpy(blob + HM_LINKS_HEADER, v, (size_t)m * sizeof(hm_link));
  *len = (int)size;
  return blob;
}

static void heap_links_final(sqlite3_context *ctx) {
  hm_links_acc *acc = sqlite3_aggregate_context(ctx, 0);
  int size = 0;
  if (acc && acc->failed) goto cleanup;
  unsigned char *blob = hq_links_blob(acc ? acc->v : NULL, acc ? acc->n : 0, &size);
  if (!blob) sqlite3_result_error_nomem(ctx);
  else sqlite3_result_blob64(ctx, blob, (sqlite3_uint64)size, sqlite3_free);
cleanup:
  if (acc) sqlite3_free(acc->v);
}

/* The optional config argument argv[i] ('w_recency=0 ...', NULL or absent:
 * the defaults), parsed once per statement when it is a constant.
 * fname: the function's name, for its errors; *c: the config. */
static int hq_sql_config(sqlite3_context *ctx, int argc, sqlite3_value **argv, int i,
                         const char *fname, hm_config *c) {
  char err[HM_ERRLEN] = "";
  const char *cfg = "";
  if (argc > i && sqlite3_value_type(argv[i]) != SQLITE_NULL) {
    if (sqlite3_value_type(argv[i]) != SQLITE_TEXT) {
      hq_result_err(ctx, fname, "config must be text like 'w_recency=0 half_life_days=14'");
      return HM_ERROR;
    }
    cfg = (const char *)sqlite3_value_text(argv[i]);
    if (!cfg) { sqlite3_result_error_nomem(ctx); return HM_ERROR; }
  }
  hm_config *cached = argc > i ? sqlite3_get_auxdata(ctx, i) : NULL;
  if (cached) {
    *c = *cached;
  } else {
    if (hm_config_parse(cfg, c, err, sizeof err) != HM_OK) {
      hq_result_err(ctx, fname, err);
      return HM_ERROR;
    }
    if (argc > i) {
      hm_config *keep = sqlite3_malloc(sizeof *keep);
      if (keep) {
        *keep = *c;
        sqlite3_set_auxdata(ctx, i, keep, sqlite3_free);
      }
    }
  }
  return HM_OK;
}

/* Shared argument handling of heap_score and heap_explain:
 * (relevance, age_days, importance, superseded, features, qtype, links [, config])
 * fname: the function's name, for its errors; in, qt, links, linkslen, c: what
 * the arguments give. */
static int hq_sql_score_args(sqlite3_context *ctx, int argc, sqlite3_value **argv,
                             const char *fname, hm_input *in, const char **qt,
                             const unsigned char **links, i64 *linkslen, hm_config *c) {
  const char *names[4] = {"relevance", "age_days", "importance", "superseded"};
  for (int i = 0; i < 4; i++)
    if (!hq_is_number(argv[i])) {
      char *m = sqlite3_mprintf("%s: %s must be a number", fname, names[i]);
      if (!m) { sqlite3_result_error_nomem(ctx); return HM_ERROR; }
      sqlite3_result_error(ctx, m, -1);
      sqlite3_free(m);
      return HM_ERROR;
    }
  in->relevance = sqlite3_value_double(argv[0]);
  in->age_days = sqlite3_value_double(argv[1]);
  in->importance = sqlite3_value_double(argv[2]);
  in->superseded = sqlite3_value_int64(argv[3]) != 0;
  in->bm25_part = in->cos_part = NAN;
  /* heap_explain: no learned factor but usefulness, no place factor (heap_recall's
   * explain has them) */
  in->context = in->explore = in->thread = in->time = 1.0;
  in->context_n = 0.0;
  in->thread_from = in->time_window = NULL;
  in->thread_offset = 0;
  if (sqlite3_value_type(argv[4]) != SQLITE_TEXT) {
    hq_result_err(ctx, fname, "features must be text");
    return HM_ERROR;
  }
  in->features = (const char *)sqlite3_value_text(argv[4]);
  if (sqlite3_value_type(argv[5]) != SQLITE_TEXT) {
    hq_result_err(ctx, fname, "the question type must be text");
    return HM_ERROR;
  }
  *qt = (const char *)sqlite3_value_text(argv[5]);
  if (!in->features || !*qt) { sqlite3_result_error_nomem(ctx); return HM_ERROR; }
  if (!hm_qtype_valid(*qt)) {
    char *m = sqlite3_mprintf("%s: unknown question type '%s'", fname, *qt);
    if (!m) { sqlite3_result_error_nomem(ctx); return HM_ERROR; }
    sqlite3_result_error(ctx, m, -1);
    sqlite3_free(m);
    return HM_ERROR;
  }
  int lt = sqlite3_value_type(argv[6]);
  if (lt == SQLITE_NULL) {
    *links = NULL;
    *linkslen = 0;
  } else if (lt == SQLITE_BLOB) {
    *links = sqlite3_value_blob(argv[6]);
    *linkslen = sqlite3_value_bytes(argv[6]);
    if (hm_links_count(*links, *linkslen) < 0) {
      hq_result_err(ctx, fname, "links must be a link set made by heap_links() or NULL");
      return HM_ERROR;
    }
  } else {
    hq_result_err(ctx, fname, "links must be a link set made by heap_links() or NULL");
    return HM_ERROR;
  }
  return hq_sql_config(ctx, argc, argv, 7, fname, c);
}

/* heap_score(relevance, age_days, importance, superseded, features, qtype,
 *            links [, config]) -> the score */
static void heap_score(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hm_input in;
  const char *qt;
  const unsigned char *links;
  i64 linkslen;
  hm_config c;
  char err[HM_ERRLEN] = "";
  double out[HM_SCORE_COLUMNS];
  int bad;
  if (hq_sql_score_args(ctx, argc, argv, "heap_score", &in, &qt, &links, &linkslen, &c))
    return;
  int sup = in.superseded;
  if (hm_score_batch(1, &in.relevance, &in.age_days, &in.importance, &sup, &in.features, qt,
                     links, linkslen, &c, out, &bad, err, sizeof err) != HM_OK) {
    hq_result_err(ctx, "heap_score", err);
    return;
  }
  sqlite3_result_double(ctx, out[5]);
}

/* heap_explain(same arguments as heap_score) -> one line of text */
static void heap_explain(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hm_input in;
  const char *qt;
  const unsigned char *links;
  i64 linkslen;
  hm_config c;
  char err[HM_ERRLEN] = "", out[HM_EXPLAIN_LEN];
  if (hq_sql_score_args(ctx, argc, argv, "heap_explain", &in, &qt, &links, &linkslen, &c))
    return;
  if (hm_explain(&in, qt, links, linkslen, &c, out, sizeof out, err, sizeof err) != HM_OK) {
    hq_result_err(ctx, "heap_explain", err);
    return;
  }
  sqlite3_result_text(ctx, out, -1, SQLITE_TRANSIENT);
}

/* heap_recency(age_days [, half_life_days, floor]) */
static void heap_recency(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  double x[3] = {0, 30.0, 0.5};
  for (int i = 0; i < argc; i++) {
    if (!hq_is_number(argv[i])) {
      hq_result_err(ctx, "heap_recency", "arguments must be numbers");
      return;
    }
    x[i] = sqlite3_value_double(argv[i]);
  }
  if (isnan(x[0]) || !isfinite(x[1]) || x[1] <= 0 || !(x[2] >= 0 && x[2] <= 1)) {
    hq_result_err(ctx, "heap_recency",
                  "age_days must be a number, half_life_days positive, floor in [0, 1]");
    return;
  }
  sqlite3_result_double(ctx, hm_recency(x[0], x[1], x[2]));
}

/* Shared by heap_credit and heap_fold: (features, qtype, age_days, used, links
 * [, config]) -> hm_credit's names and deltas.  Returns the number of
 * features, or -1 with the SQL error set.
 * fname: the function's name; names, nameslen, da, db: hm_credit's outputs. */
static int hq_sql_credit(sqlite3_context *ctx, int argc, sqlite3_value **argv, const char *fname,
                         char *names, int nameslen, double *da, double *db) {
  const char *features = NULL, *qt = NULL;
  const unsigned char *links = NULL;
  i64 linkslen = 0;
  hm_config c;
  char err[HM_ERRLEN] = "";
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT || sqlite3_value_type(argv[1]) != SQLITE_TEXT) {
    hq_result_err(ctx, fname, "features and the question type must be text");
    return -1;
  }
  features = (const char *)sqlite3_value_text(argv[0]);
  qt = (const char *)sqlite3_value_text(argv[1]);
  if (!features || !qt) { sqlite3_result_error_nomem(ctx); return -1; }
  if (!hm_qtype_valid(qt)) {
    hq_result_err(ctx, fname, "unknown question type");
    return -1;
  }
  if (!hq_is_number(argv[2]) || !hq_is_number(argv[3])) {
    hq_result_err(ctx, fname, "age_days and used must be numbers");
    return -1;
  }
  if (sqlite3_value_type(argv[4]) == SQLITE_BLOB) {
    links = sqlite3_value_blob(argv[4]);
    linkslen = sqlite3_value_bytes(argv[4]);
  } else if (sqlite3_value_type(argv[4]) != SQLITE_NULL) {
    hq_result_err(ctx, fname, "links must be a link set made by heap_links() or NULL");
    return -1;
  }
  if (hq_sql_config(ctx, argc, argv, 5, fname, &c) != HM_OK) return -1;
  int k = hm_credit(features, qt, sqlite3_value_double(argv[2]), sqlite3_value_int64(argv[3]) != 0,
                    links, linkslen, &c, names, nameslen, da, db, 2 * HM_MAX_FEATURES, err,
                    sizeof err);
  if (k < 0) hq_result_err(ctx, fname, err);
  return k;
}

/* hm_credit's k names (space-separated) and deltas as an event's deltas,
 * [["feature", d_alpha, d_beta], ...], appended to str (heap_credit's
 * result; feedback.c writes events with it).
 * da, db: each one's deltas. */
static void hq_credit_json(sqlite3_str *str, const char *names, const double *da,
                           const double *db, int k) {
  sqlite3_str_appendchar(str, 1, '[');
  const char *name = names;
  for (int i = 0; i < k; i++) {
    while (*name == ' ') name++;
    int len = (int)strcspn(name, " ");
    char a[32], b[32];
    hm_repr(da[i], a);
    hm_repr(db[i], b);
    sqlite3_str_appendall(str, i ? ", [" : "[");
    hq_json_string(str, name, len);
    sqlite3_str_appendall(str, ", ");
    sqlite3_str_appendall(str, a);
    sqlite3_str_appendall(str, ", ");
    sqlite3_str_appendall(str, b);
    sqlite3_str_appendchar(str, 1, ']');
    name += len;
  }
  sqlite3_str_appendchar(str, 1, ']');
}

/* heap_credit(features, qtype, age_days, used, links [, config]) -> what
 * judging one shown memory teaches, as JSON [[feature, d_alpha, d_beta], ...]
 * (the events table's deltas); links matter only to the reference learner
 * (model=0). */
static void heap_credit(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char names[HM_ACTIVE_LEN];
  double da[2 * HM_MAX_FEATURES], db[2 * HM_MAX_FEATURES];
  int k = hq_sql_credit(ctx, argc, argv, "heap_credit", names, sizeof names, da, db);
  if (k < 0) return;
  sqlite3_str *str = sqlite3_str_new(NULL);
  hq_credit_json(str, names, da, db, k);
  int rc = sqlite3_str_errcode(str);
  char *out = sqlite3_str_finish(str);
  if (rc != SQLITE_OK || !out) {
    sqlite3_free(out);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_text(ctx, out, -1, sqlite3_free);
}

/* heap_fold(features, qtype, age_days, used, links [, config]) aggregate ->
 * the sum of heap_credit() over the rows, as a JSON object
 * {"feature": [d_alpha, d_beta, events], ...} in first-seen order: what one
 * feedback adds to each link. */
typedef struct {
  u64 h;
  char *name;
  double a, b;
  i64 n;
} hm_fold_entry;

typedef struct {
  hm_fold_entry *v;
  i64 n, cap;
  int failed;
} hm_fold_acc;

static void heap_fold_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hm_fold_acc *acc = sqlite3_aggregate_context(ctx, sizeof(hm_fold_acc));
  char names[HM_ACTIVE_LEN];
  double da[2 * HM_MAX_FEATURES], db[2 * HM_MAX_FEATURES];
  if (!acc) { sqlite3_result_error_nomem(ctx); return; }
  if (acc->failed) return;
  int k = hq_sql_credit(ctx, argc, argv, "heap_fold", names, sizeof names, da, db);
  if (k < 0) goto cleanup;
  const char *name = names;
  for (int i = 0; i < k; i++) {
    while (*name == ' ') name++;
    size_t len = strcspn(name, " ");
    u64 h = hm_fnv64(name, len);
    i64 j = 0;
    while (j < acc->n && !(acc->v[j].h == h && strlen(acc->v[j].name) == len &&
                           memcmp(acc->v[j].name, name, len) == 0))
      j++;
    if (j == acc->n) {
      if (acc->n == acc->cap) {
        i64 cap = acc->cap ? acc->cap * 2 : 64;
        hm_fold_entry *v = sqlite3_realloc64(acc->v, (sqlite3_uint64)cap * sizeof *v);
        if (!v) { sqlite3_result_error_nomem(ctx); goto cleanup; }
        acc->v = v;
        acc->cap = cap;
      }
      hm_fold_entry *e = &acc->v[acc->n];
      e->name = sqlite3_mprintf("%.*s", (int)len, name);
      if (!e->name) { sqlite3_result_error_nomem(ctx); goto cleanup; }
      e->h = h;
      e->a = e->b = 0.0;
      e->n = 0;
      acc->n++;
    }
    acc->v[j].a += da[i];
    acc->v[j].b += db[i];
    acc->v[j].n++;
    name += len;
  }
  return;
cleanup:
  acc->failed = 1;
}

static void heap_fold_final(sqlite3_context *ctx) {
  hm_fold_acc *acc = sqlite3_aggregate_context(ctx, 0);
  if (acc && acc->failed) goto cleanup;
  sqlite3_str *str = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(str, 1, '{');
  for (i64 i = 0; acc && i < acc->n; i++) {
    char a[32], b[32];
    hm_repr(acc->v[i].a, a);
    hm_repr(acc->v[i].b, b);
    if (i) sqlite3_str_appendall(str, ", ");
    hq_json_string(str, acc->v[i].name, (int)strlen(acc->v[i].name));
    sqlite3_str_appendf(str, ": [%s, %s, %lld]", a, b, (long long)acc->v[i].n);
  }
  sqlite3_str_appendchar(str, 1, '}');
  int rc = sqlite3_str_errcode(str);
  char *out = sqlite3_str_finish(str);
  if (rc != SQLITE_OK || !out) {
    sqlite3_free(out);
    sqlite3_result_error_nomem(ctx);
    goto cleanup;
  }
  sqlite3_result_text(ctx, out, -1, sqlite3_free);
cleanup:
  for (i64 i = 0; acc && i < acc->n; i++) sqlite3_free(acc->v[i].name);
  if (acc) sqlite3_free(acc->v);
}

#pragma endregion
