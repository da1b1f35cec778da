/*
 * attribute.c: heap_attribute, which of the memories a recall showed an
 * answer used (heap_answer, in feedback.c, judges a recall with it).
 *
 * Owns: the answer's and the question's terms (hm_aterms, stemmed by FTS5's
 * porter tokenizer through hm_stemmer), the dates an answer names and the
 * time a memory speaks of (hm_answer_span, hm_memory_overlaps), each memory's share and the verdicts.
 * Relies on: text.c (the word scanner, hm_in_list, hm_all_digits,
 * hm_is_stop_word), when.c (the civil-date helpers), sqlfuncs.c (hq_is_number, hq_result_err, hm_repr,
 * hq_json_string).  register.c makes its tokenizer and registers it.
 */

#pragma region attribution

/* heap_attribute(answer, question, position, text, created_at) aggregate ->
 * a JSON array, one object per position 0..n-1 (the recall's shown memories,
 * in rank order): {"verdict", "share", "question_share", "matched" (the
 * answer's words it carries), "dated", "present", "candidate"}, verdict 1
 * (used), 0 (ignored) or null (not judged); text NULL is a memory forgotten
 * since (present 0, never judged); candidate 1 where the share reaches
 * HM_ATTR_USED (two or more: a tie).
 *
 * The evidence is the answer's own terms, tokenized as the FTS index
 * tokenizes (porter over unicode61): stop words and every term of the
 * question are dropped, so a memory that only repeats the question carries
 * nothing.  A term weighs its BM25 IDF among the shown memories (one that
 * all of them hold weighs next to nothing).  A memory's share is the weight
 * of the answer terms it holds over the weight of them all.  An answer that
 * names a date ("7 May 2023", "June 2023", "2022") gives the weight of its
 * date terms to each memory whose time overlaps it: the day it was stated
 * (created_at, UTC), moved by what it says ("yesterday", "last week", "a
 * few days ago", "last year" ...).  The memory used is the one with the
 * largest share plus question share among those whose share reaches
 * HM_ATTR_USED, if no other is within HM_ATTR_MARGIN of it; the memories that
 * carry nothing of the answer are then ignored, and the rest not judged.
 * With no such memory (no overlap, or a tie) nothing is judged. */

#define HM_ATTR_MAX_TERMS 128   /* distinct answer (or question) terms kept */
#define HM_ATTR_USED 0.4        /* the share of the answer's weight a used memory carries */
#define HM_ATTR_MARGIN 0.05     /* a rival this close to the best one is a tie */
#define HM_ATTR_MAX_WORDS 4096  /* words of one text scanned for dates */

typedef struct {
  char stem[HM_MAX_WORD + 1];
  char raw[HM_MAX_WORD + 1];
  int date;                     /* a month name or a number of the answer's date */
  int df;                       /* shown memories holding it */
  double w;
} hm_aterm;

typedef struct {
  hm_aterm t[HM_ATTR_MAX_TERMS];
  int n;
} hm_aterms;

typedef struct {
  fts5_tokenizer tok;
  Fts5Tokenizer *inst;          /* porter over unicode61 remove_diacritics 2 */
  const sqlite3_api_routines *api; /* the SQLite library it was made in */
} hm_stemmer;

typedef struct {
  double pos;
  char *text;                   /* NULL: forgotten */
  double created;
} hm_shown;

typedef struct {
  char *answer, *question;
  hm_shown *rows;
  i64 n, cap;
  int failed;
} hm_attr_acc;

static void hm_cut_copy(char *dst, const char *src, int n) {
  if (n > HM_MAX_WORD) n = hm_utf8_cut(src, HM_MAX_WORD);
  memcpy(dst, src, (size_t)n);
  dst[n] = 0;
}

static int hm_aterm_find(const hm_aterms *a, const char *stem) {
  for (int i = 0; i < a->n; i++)
    if (a->t[i].stem[0] == stem[0] && strcmp(a->t[i].stem, stem) == 0) return i;
  return -1;
}

typedef struct {
  char (*w)[HM_MAX_WORD + 1];
  int n;
} hm_words;

/* The text's words, lowercased (at most HM_ATTR_MAX_WORDS); SQLITE_NOMEM when
 * out of memory (out->w, kept, is the caller's to free). */
static int ha_words_of(const char *text, hm_words *out) {
  hm_scanner sc = {.s = (const unsigned char *)text, .n = (int)strlen(text)};
  char buf[HM_MAX_WORD + 1];
  int cap = 64;
  out->n = 0;
  out->w = sqlite3_malloc(cap * (int)sizeof *out->w);
  if (!out->w) return SQLITE_NOMEM;
  while (out->n < HM_ATTR_MAX_WORDS && hm_next_word(&sc, buf, NULL)) {
    if (out->n == cap) {
      cap *= 2;
      void *p = sqlite3_realloc(out->w, cap * (int)sizeof *out->w);
      if (!p) return SQLITE_NOMEM;
      out->w = p;
    }
    strcpy(out->w[out->n++], buf);
  }
  return SQLITE_OK;
}

/* The span of days [lo, hi] the answer's date names, most precise mention
 * first (a day, else a month, else a year; the last of its kind); 0 if none. */
static int hm_answer_span(const hm_words *a, long *lo, long *hi) {
  int level = 0;
  for (int i = 0; i < a->n; i++) {
    int m = hm_month_of(a->w[i]);
    long v = hm_number_of(a->w[i]);
    if (m && i + 1 < a->n) {
      long d = hm_number_of(a->w[i + 1]);
      long y = i + 2 < a->n ? hm_number_of(a->w[i + 2]) : -1;
      long before = i > 0 ? hm_number_of(a->w[i - 1]) : -1;
      if (before >= 1 && before <= 31 && hm_is_year(d) && before <= hm_month_days(d, m)) {
        *lo = *hi = hm_days_from_civil(d, m, before);  /* 7 May 2023 */
        level = 3;
      } else if (d >= 1 && d <= 31 && hm_is_year(y) && d <= hm_month_days(y, m)) {
        *lo = *hi = hm_days_from_civil(y, m, d);       /* May 7, 2023 */
        level = 3;
      } else if (hm_is_year(d) && level <= 2) {
        *lo = hm_days_from_civil(d, m, 1);             /* May 2023 */
        *hi = hm_days_from_civil(d, m, hm_month_days(d, m));
        level = 2;
      }
    } else if (hm_is_year(v) && level <= 1) {
      *lo = hm_days_from_civil(v, 1, 1);
      *hi = hm_days_from_civil(v, 12, 31);
      level = 1;
    }
  }
  if (!level) return 0;
  for (int i = 0; i < a->n; i++) {
    const char *w = a->w[i];
    if (!strcmp(w, "before") || !strcmp(w, "ago") || !strcmp(w, "prior") || !strcmp(w, "earlier"))
      *lo -= 14;
    if (!strcmp(w, "after") || !strcmp(w, "later")) *hi += 14;
  }
  return 1;
}

/* Whether the memory's time overlaps [lo, hi]: the day it was stated, moved
 * by each time expression it holds (or that day itself, if none).  lo and
 * hi come from hm_answer_span (years 1900-2099, a fortnight either side). */
static int hm_memory_overlaps(const hm_words *m, double created, long lo, long hi) {
  long c = hm_day_of(created);
  int found = 0, hit = 0;
#define HM_SPAN(a, b) do { found = 1; if (c + (a) <= hi && lo <= c + (b)) hit = 1; } while (0)
  for (int i = 0; i < m->n; i++) {
    const char *w = m->w[i];
    const char *n1 = i + 1 < m->n ? m->w[i + 1] : "";
    const char *n2 = i + 2 < m->n ? m->w[i + 2] : "";
    const char *n3 = i + 3 < m->n ? m->w[i + 3] : "";
    if (!strcmp(w, "yesterday")) HM_SPAN(-1, -1);
    else if (!strcmp(w, "today") || !strcmp(w, "tonight")) HM_SPAN(0, 0);
    else if (!strcmp(w, "tomorrow")) HM_SPAN(1, 1);
    else if (!strcmp(w, "this") && (!strcmp(n1, "morning") || !strcmp(n1, "afternoon") ||
                                    !strcmp(n1, "evening"))) HM_SPAN(0, 0);
    else if (!strcmp(w, "last") && !strcmp(n1, "night")) HM_SPAN(-1, -1);
    else if (!strcmp(w, "last") && (!strcmp(n1, "week") || !strcmp(n1, "weekend") ||
                                    hm_is_weekday(n1))) HM_SPAN(-14, -1);
    else if (!strcmp(w, "last") && !strcmp(n1, "month")) HM_SPAN(-62, -15);
    else if ((!strcmp(w, "last") || !strcmp(w, "next")) && !strcmp(n1, "year")) {
      long y = hm_year_of_day(c) + (w[0] == 'l' ? -1 : 1);
      HM_SPAN(hm_days_from_civil(y, 1, 1) - c, hm_days_from_civil(y, 12, 31) - c);
    } else if (!strcmp(w, "next") && (!strcmp(n1, "week") || !strcmp(n1, "weekend")))
      HM_SPAN(1, 14);
    else if (!strcmp(w, "next") && !strcmp(n1, "month")) HM_SPAN(15, 62);
    else if (!strcmp(w, "a") && !strcmp(n2, "ago") && !strcmp(n1, "week")) HM_SPAN(-14, -1);
    else if (!strcmp(w, "a") && !strcmp(n2, "ago") && !strcmp(n1, "month")) HM_SPAN(-62, -15);
    else if (hm_is_few(w) && (!strcmp(n1, "days") && !strcmp(n2, "ago")))
      HM_SPAN(-7, -1);
    else if (hm_is_few(w) && !strcmp(n1, "of") && !strcmp(n2, "days") && !strcmp(n3, "ago"))
      HM_SPAN(-7, -1);
    else if (hm_is_few(w) && ((!strcmp(n1, "weeks") && !strcmp(n2, "ago")) ||
                              (!strcmp(n1, "of") && !strcmp(n2, "weeks") && !strcmp(n3, "ago"))))
      HM_SPAN(-28, -7);
    else if (!strcmp(w, "other") && !strcmp(n1, "day") && i > 0 && !strcmp(m->w[i - 1], "the"))
      HM_SPAN(-7, -1);
  }
#undef HM_SPAN
  if (!found) return c <= hi && lo <= c;
  return hit;
}

typedef struct {
  const char *text;
  hm_aterms *terms;
  int keep_stops;   /* collect: 0 drops stop words */
  int collect;      /* 1: add new terms; 0: mark the terms present in `seen` */
  unsigned char *seen;
  hm_aterms *terms2;     /* marking: a second list, marked in seen2 in the same pass */
  unsigned char *seen2;
} hm_tokctx;

static int hm_attr_token(void *p, int flags, const char *t, int n, int start, int end) {
  hm_tokctx *x = p;
  char stem[HM_MAX_WORD + 1], raw[HM_MAX_WORD + 1];
  if (flags & FTS5_TOKEN_COLOCATED || n <= 0) return SQLITE_OK;
  hm_cut_copy(stem, t, n);
  int i = hm_aterm_find(x->terms, stem);
  if (!x->collect) {
    if (i >= 0) x->seen[i] = 1;
    if (x->terms2 && (i = hm_aterm_find(x->terms2, stem)) >= 0) x->seen2[i] = 1;
    return SQLITE_OK;
  }
  if (i >= 0 || x->terms->n >= HM_ATTR_MAX_TERMS) return SQLITE_OK;
  int len = end - start;
  hm_cut_copy(raw, x->text + start, len > 0 ? len : 0);
  for (char *c = raw; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c += 32;
  int date = hm_month_of(raw) || hm_all_digits(raw);
  if (!x->keep_stops && !date && hm_is_stop_word(raw)) return SQLITE_OK;
  hm_aterm *a = &x->terms->t[x->terms->n++];
  strcpy(a->stem, stem);
  strcpy(a->raw, raw);
  a->date = date;
  a->df = 0;
  a->w = 0;
  return SQLITE_OK;
}

static void heap_attribute_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  hm_attr_acc *acc = sqlite3_aggregate_context(ctx, sizeof(hm_attr_acc));
  (void)argc;
  if (!acc) { sqlite3_result_error_nomem(ctx); return; }
  if (acc->failed) return;
  if (!acc->answer) {
    if (sqlite3_value_type(argv[0]) != SQLITE_TEXT || sqlite3_value_type(argv[1]) != SQLITE_TEXT) {
      acc->failed = 1;
      hq_result_err(ctx, "heap_attribute", "answer and question must be text");
      return;
    }
    acc->answer = sqlite3_mprintf("%s", (const char *)sqlite3_value_text(argv[0]));
    acc->question = sqlite3_mprintf("%s", (const char *)sqlite3_value_text(argv[1]));
    if (!acc->answer || !acc->question) { acc->failed = 1; sqlite3_result_error_nomem(ctx); return; }
  }
  if (!hq_is_number(argv[2]) || sqlite3_value_double(argv[2]) < 0 ||
      (sqlite3_value_type(argv[3]) != SQLITE_TEXT && sqlite3_value_type(argv[3]) != SQLITE_NULL) ||
      (sqlite3_value_type(argv[3]) == SQLITE_TEXT && !hq_is_number(argv[4]))) {
    acc->failed = 1;
    hq_result_err(ctx, "heap_attribute",
                  "each row needs a position >= 0, a text (or NULL) and a created_at number");
    return;
  }
  if (acc->n == acc->cap) {
    i64 cap = acc->cap ? 2 * acc->cap : 16;
    void *p = sqlite3_realloc64(acc->rows, (sqlite3_uint64)cap * sizeof(hm_shown));
    if (!p) { acc->failed = 1; sqlite3_result_error_nomem(ctx); return; }
    acc->rows = p;
    acc->cap = cap;
  }
  hm_shown *r = &acc->rows[acc->n++];
  r->pos = sqlite3_value_double(argv[2]);
  r->created = sqlite3_value_type(argv[3]) == SQLITE_TEXT ? sqlite3_value_double(argv[4]) : 0;
  r->text = NULL;
  if (sqlite3_value_type(argv[3]) == SQLITE_TEXT) {
    r->text = sqlite3_mprintf("%s", (const char *)sqlite3_value_text(argv[3]));
    if (!r->text) { acc->failed = 1; sqlite3_result_error_nomem(ctx); return; }
  }
}

static int hm_shown_cmp(const void *x, const void *y) {
  const hm_shown *a = x, *b = y;
  return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static double hm_attr_idf(int k, int df) {
  return log(1.0 + (k - df + 0.5) / (df + 0.5));
}

/* One heap_attribute's working state, over the n shown memories. */
typedef struct {
  hm_aterms *ans, *qs;         /* the answer's terms (less the question's), the question's */
  unsigned char *seen, *qseen; /* n x HM_ATTR_MAX_TERMS: which of them each memory holds */
  double *share, *qshare;      /* each memory's share of their weight */
  int *dated;                  /* 1: the memory's time overlaps the answer's date */
  int has_span;                /* the answer names a date: the days [lo, hi] */
  long lo, hi;
  int k;                       /* the memories still present (not forgotten) */
} hm_attr_work;

static int ha_attr_alloc(hm_attr_work *w, i64 n) {
  w->ans = sqlite3_malloc(sizeof *w->ans);
  w->qs = sqlite3_malloc(sizeof *w->qs);
  w->seen = sqlite3_malloc64((sqlite3_uint64)n * HM_ATTR_MAX_TERMS);
  w->qseen = sqlite3_malloc64((sqlite3_uint64)n * HM_ATTR_MAX_TERMS);
  w->share = sqlite3_malloc64((sqlite3_uint64)n * sizeof(double));
  w->qshare = sqlite3_malloc64((sqlite3_uint64)n * sizeof(double));
  w->dated = sqlite3_malloc64((sqlite3_uint64)n * sizeof(int));
  if (!w->ans || !w->qs || !w->seen || !w->qseen || !w->share || !w->qshare || !w->dated)
    return SQLITE_NOMEM;
  memset(w->seen, 0, (size_t)n * HM_ATTR_MAX_TERMS);
  memset(w->qseen, 0, (size_t)n * HM_ATTR_MAX_TERMS);
  w->ans->n = w->qs->n = 0;
  return SQLITE_OK;
}

static void ha_attr_free(hm_attr_work *w) {
  sqlite3_free(w->ans);
  sqlite3_free(w->qs);
  sqlite3_free(w->seen);
  sqlite3_free(w->qseen);
  sqlite3_free(w->share);
  sqlite3_free(w->qshare);
  sqlite3_free(w->dated);
}

/* The question's terms (stop words dropped), then the answer's, less every
 * word of the question. */
static int ha_attr_terms(hm_stemmer *st, const hm_attr_acc *acc, hm_attr_work *w) {
  hm_tokctx x = {.text = acc->question, .terms = w->qs, .collect = 1};
  int rc = st->tok.xTokenize(st->inst, &x, FTS5_TOKENIZE_DOCUMENT, acc->question,
                             (int)strlen(acc->question), hm_attr_token);
  if (rc != SQLITE_OK) return rc;
  hm_aterms *all = sqlite3_malloc(sizeof *all);
  if (!all) return SQLITE_NOMEM;
  all->n = 0;
  x = (hm_tokctx){.text = acc->answer, .terms = all, .collect = 1};
  rc = st->tok.xTokenize(st->inst, &x, FTS5_TOKENIZE_DOCUMENT, acc->answer,
                         (int)strlen(acc->answer), hm_attr_token);
  if (rc == SQLITE_OK) {
    /* the question's words never count, its stop words included */
    hm_aterms *qall = sqlite3_malloc(sizeof *qall);
    if (!qall) rc = SQLITE_NOMEM;
    else {
      qall->n = 0;
      hm_tokctx y = {.text = acc->question, .terms = qall, .keep_stops = 1, .collect = 1};
      rc = st->tok.xTokenize(st->inst, &y, FTS5_TOKENIZE_DOCUMENT, acc->question,
                             (int)strlen(acc->question), hm_attr_token);
      for (int i = 0; rc == SQLITE_OK && i < all->n; i++)
        if (hm_aterm_find(qall, all->t[i].stem) < 0) w->ans->t[w->ans->n++] = all->t[i];
      sqlite3_free(qall);
    }
  }
  sqlite3_free(all);
  return rc;
}

/* The answer's date, then for each present memory the terms it holds
 * (their document frequencies counted) and whether its time overlaps that
 * date. */
static int ha_attr_mark(hm_stemmer *st, const hm_attr_acc *acc, hm_attr_work *w) {
  hm_words aw = {0}, mw = {0};
  int rc = ha_words_of(acc->answer, &aw);
  if (rc == SQLITE_OK) w->has_span = hm_answer_span(&aw, &w->lo, &w->hi);
  for (i64 i = 0; rc == SQLITE_OK && i < acc->n; i++) {
    hm_shown *r = &acc->rows[i];
    unsigned char *seen = w->seen + i * HM_ATTR_MAX_TERMS;
    unsigned char *qseen = w->qseen + i * HM_ATTR_MAX_TERMS;
    w->dated[i] = 0;
    if (!r->text) continue;
    w->k++;
    /* one pass marks the answer's terms and the question's it holds */
    hm_tokctx m = {.text = r->text, .terms = w->ans, .seen = seen, .terms2 = w->qs,
                   .seen2 = qseen};
    rc = st->tok.xTokenize(st->inst, &m, FTS5_TOKENIZE_DOCUMENT, r->text, (int)strlen(r->text),
                           hm_attr_token);
    if (rc != SQLITE_OK) break;
    if (w->has_span) {
      sqlite3_free(mw.w);
      mw.w = NULL;
      rc = ha_words_of(r->text, &mw);
      if (rc != SQLITE_OK) break;
      w->dated[i] = hm_memory_overlaps(&mw, r->created, w->lo, w->hi);
    }
    for (int j = 0; j < w->ans->n; j++) w->ans->t[j].df += seen[j];
    for (int j = 0; j < w->qs->n; j++) w->qs->t[j].df += qseen[j];
  }
  sqlite3_free(aw.w);
  sqlite3_free(mw.w);
  return rc;
}

/* Each term's weight (its IDF among the present memories), then each
 * memory's share of the answer's weight and of the question's. */
static void hm_attr_share(const hm_attr_acc *acc, hm_attr_work *w) {
  hm_aterms *ans = w->ans, *qs = w->qs;
  double total = 0, date_w = 0, qtotal = 0;
  for (int j = 0; j < ans->n; j++) {
    ans->t[j].w = hm_attr_idf(w->k, ans->t[j].df);
    total += ans->t[j].w;
    if (w->has_span && ans->t[j].date) date_w += ans->t[j].w;
  }
  for (int j = 0; j < qs->n; j++) {
    qs->t[j].w = hm_attr_idf(w->k, qs->t[j].df);
    qtotal += qs->t[j].w;
  }
  for (i64 i = 0; i < acc->n; i++) {
    const unsigned char *seen = w->seen + i * HM_ATTR_MAX_TERMS;
    const unsigned char *qseen = w->qseen + i * HM_ATTR_MAX_TERMS;
    w->share[i] = w->qshare[i] = 0;
    if (!acc->rows[i].text || total <= 0) continue;
    double s = 0, lit = 0, q = 0;
    for (int j = 0; j < ans->n; j++)
      if (seen[j]) {
        s += ans->t[j].w;
        if (w->has_span && ans->t[j].date) lit += ans->t[j].w;
      }
    if (w->dated[i]) s += date_w - lit;
    for (int j = 0; j < qs->n; j++)
      if (qseen[j]) q += qs->t[j].w;
    w->share[i] = s / total;
    w->qshare[i] = qtotal > 0 ? q / qtotal : 0;
  }
}

/* The memory used: the largest share plus question share among the shares
 * that reach HM_ATTR_USED, if no other is within HM_ATTR_MARGIN; else -1. */
static int hm_attr_best(const hm_attr_acc *acc, const hm_attr_work *w) {
  const double *share = w->share, *qshare = w->qshare;
  int best = -1, rivals = 0;
  double best_score = -1;
  for (i64 i = 0; i < acc->n; i++)
    if (share[i] >= HM_ATTR_USED && share[i] + qshare[i] > best_score) {
      best_score = share[i] + qshare[i];
      best = (int)i;
    }
  for (i64 i = 0; best >= 0 && i < acc->n; i++)
    if (i != best && share[i] >= HM_ATTR_USED && share[i] + qshare[i] >= best_score - HM_ATTR_MARGIN)
      rivals++;
  return rivals ? -1 : best;
}

/* The JSON array heap_attribute returns, as the result of ctx. */
static int ha_attr_result(sqlite3_context *ctx, const hm_attr_acc *acc, const hm_attr_work *w,
                          int best) {
  const hm_aterms *ans = w->ans;
  sqlite3_str *out = sqlite3_str_new(sqlite3_context_db_handle(ctx));
  sqlite3_str_appendchar(out, 1, '[');
  for (i64 i = 0; i < acc->n; i++) {
    const unsigned char *seen = w->seen + i * HM_ATTR_MAX_TERMS;
    char a[32], b[32];
    hm_repr(w->share[i], a);
    hm_repr(w->qshare[i], b);
    const char *verdict = "null";
    if (best >= 0 && acc->rows[i].text)
      verdict = i == best ? "1" : w->share[i] <= 0 ? "0" : "null";
    sqlite3_str_appendf(out, "%s{\"verdict\":%s,\"share\":%s,\"question_share\":%s,"
                        "\"matched\":[", i ? "," : "", verdict, a, b);
    int first = 1;
    for (int j = 0; acc->rows[i].text && j < ans->n; j++)
      if (seen[j] || (w->dated[i] && ans->t[j].date)) {
        if (!first) sqlite3_str_appendchar(out, 1, ',');
        hq_json_string(out, ans->t[j].raw, (int)strlen(ans->t[j].raw));
        first = 0;
      }
    sqlite3_str_appendf(out, "],\"dated\":%d,\"present\":%d,\"candidate\":%d}", w->dated[i],
                        acc->rows[i].text != NULL,
                        w->share[i] >= HM_ATTR_USED);
  }
  sqlite3_str_appendchar(out, 1, ']');
  int rc = sqlite3_str_errcode(out);
  if (rc == SQLITE_OK) {
    int len = sqlite3_str_length(out);
    sqlite3_result_text(ctx, sqlite3_str_finish(out), len, sqlite3_free);
  } else {
    sqlite3_free(sqlite3_str_finish(out));
  }
  return rc;
}

static void heap_attribute_final(sqlite3_context *ctx) {
  hm_attr_acc *acc = sqlite3_aggregate_context(ctx, 0);
  hm_stemmer *st = hq_user_data(ctx);
  hm_attr_work w = {0};
  int rc = SQLITE_OK;
  if (!acc || acc->failed) goto done;
  if (!acc->n) { sqlite3_result_text(ctx, "[]", -1, SQLITE_STATIC); goto done; }
  qsort(acc->rows, (size_t)acc->n, sizeof(hm_shown), hm_shown_cmp);
  for (i64 i = 0; i < acc->n; i++)
    if (acc->rows[i].pos != (double)i) {
      hq_result_err(ctx, "heap_attribute", "positions must be 0, 1, ... n-1, each once");
      goto done;
    }
  if ((rc = ha_attr_alloc(&w, acc->n)) == SQLITE_OK &&
      (rc = ha_attr_terms(st, acc, &w)) == SQLITE_OK &&
      (rc = ha_attr_mark(st, acc, &w)) == SQLITE_OK) {
    hm_attr_share(acc, &w);
    rc = ha_attr_result(ctx, acc, &w, hm_attr_best(acc, &w));
  }
done:
  if (rc != SQLITE_OK) sqlite3_result_error_code(ctx, rc);
  ha_attr_free(&w);
  if (acc) { /* left empty: a second final call must find nothing to free */
    sqlite3_free(acc->answer);
    sqlite3_free(acc->question);
    for (i64 i = 0; i < acc->n; i++) sqlite3_free(acc->rows[i].text);
    sqlite3_free(acc->rows);
    memset(acc, 0, sizeof *acc);
  }
}

static void ha_stemmer_free(void *p) {
  hm_stemmer *s = p;
  if (!s) return;
  sqlite3_api = s->api; /* (a module's destructor: called on any thread) */
  if (s->inst) s->tok.xDelete(s->inst);
  sqlite3_free(s);
}

#pragma endregion
