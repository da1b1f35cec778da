/*
 * place.c: a candidate's place in its conversation and in time, for
 * heap_recall (issue 35).  Included by heapmem.c right after recall.c, whose
 * rows, cursor and statements it works on; recall.c declares its entry
 * points ahead (hr_place, hr_place_factors, hr_place_input).
 *
 * Owns:
 *   - the thread step (hr_place, after the candidates are read): a memory
 *     added with a thread and a turn (schema 10) is a turn of a
 *     conversation.  When the namespace holds any such memory (one seek on
 *     memories_thread) and w_thread > 0, each candidate's thread and turn are
 *     read, and in hybrid recall the memories of the threads of the
 *     HR_THREAD_WIDEN best candidates, up to thread_turns turns before or
 *     after them, join the candidates (the recall's filters apply to them;
 *     their relevance is their cosine's share, no BM25 of their own);
 *   - the thread's factor (hr_place_factors, in hr_score): a candidate's
 *     relevance counts as its own plus w_thread x the best relevance among
 *     its candidate neighbours (the same thread, at most thread_turns turns
 *     away), as a factor ((own + lift) / own)^w_relevance on the score: the
 *     reply is found by the words of the turn it answers, and the other way
 *     round;
 *   - the time factor: a question that names a window of time (when.c,
 *     hm_time_window, read as of the recall's now) multiplies by 1 + w_time
 *     the candidates created inside it or within a day after it;
 *   - the words explain() adds for both.
 * A store whose memories have no thread, asked a question that names no
 * time, reads nothing more and ranks exactly as without this step.
 * Relies on: recall.c (hr_vtab, hr_cursor, hr_row, hr_stmt, hr_take_rows,
 * hr_relevance, hr_bind_filters), call.c (hc_sqlfail on the table's call),
 * when.c (hm_time_window, hm_time_window_text).
 */

#pragma region where a candidate stands: its thread, its time

#define HR_THREAD_WIDEN 10      /* the candidates whose neighbours join them */
#define HR_TIME_SLACK 86400.0   /* the window reaches a day past its end: told the day after */

/* The rows' seqs from row `from` on, as a JSON array (sqlite3_malloc'd). */
static char *hr_seqs_json(hr_vtab *t, const hr_cursor *c, int from) {
  sqlite3_str *js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  for (int i = from; i < c->n; i++)
    sqlite3_str_appendf(js, i > from ? ",%lld" : "%lld", (long long)c->rows[i].seq);
  sqlite3_str_appendchar(js, 1, ']');
  return sqlite3_str_finish(js);
}

/* The row of seq among rows[0..n), by a scan (n is the candidates' number). */
static int hr_row_of(const hr_cursor *c, i64 seq) {
  for (int i = 0; i < c->n; i++)
    if (c->rows[i].seq == seq) return i;
  return -1;
}

/* Each row's time and place in its thread, from row `from` on. */
static int hr_read_places(hr_vtab *t, hr_cursor *c, int from) {
  char *seqs = hr_seqs_json(t, c, from);
  if (!seqs) return SQLITE_NOMEM;
  sqlite3_stmt *st = NULL;
  int rc = hr_stmt(t, HR_ST_PLACE, &st);
  if (rc != SQLITE_OK) { sqlite3_free(seqs); return hc_sqlfail(&t->call, rc); }
  sqlite3_bind_text(st, 1, seqs, -1, sqlite3_free);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int i = hr_row_of(c, sqlite3_column_int64(st, 0));
    if (i < from) continue;
    hr_row *r = &c->rows[i];
    r->created = sqlite3_column_double(st, 1);
    if (sqlite3_column_type(st, 2) != SQLITE_TEXT || sqlite3_column_type(st, 3) != SQLITE_INTEGER)
      continue; /* no thread (or a turn that is not one): no neighbours */
    r->thread = sqlite3_mprintf("%s", sqlite3_column_text(st, 2));
    r->mid = sqlite3_mprintf("%s", sqlite3_column_text(st, 4));
    r->turn = sqlite3_column_int64(st, 3);
    if (!r->thread || !r->mid) { sqlite3_reset(st); return SQLITE_NOMEM; }
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : hc_sqlfail(&t->call, rc);
}

/* The seqs of the neighbours of the HR_THREAD_WIDEN best candidates with a
 * thread (by relevance, ties by seq) that are not candidates yet, as a JSON
 * array into *out ("[]": none). */
static int hr_neighbours(hr_vtab *t, hr_cursor *c, const hr_args *a, char **out) {
  *out = NULL;
  double *rel = sqlite3_malloc64((sqlite3_uint64)c->n * (sizeof(double) + sizeof(char)));
  if (!rel) return SQLITE_NOMEM;
  char *taken = (char *)(rel + c->n);
  hr_relevance(c, rel);
  sqlite3_str *js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  memset(taken, 0, (size_t)c->n);
  for (int k = 0; k < HR_THREAD_WIDEN; k++) { /* the next best, n small: a scan each */
    int b = -1;
    for (int i = 0; i < c->n; i++)
      if (!taken[i] && c->rows[i].thread &&
          (b < 0 || rel[i] > rel[b] || (rel[i] == rel[b] && c->rows[i].seq < c->rows[b].seq)))
        b = i;
    if (b < 0) break;
    taken[b] = 1;
    sqlite3_str_appendf(js, k ? ",%lld" : "%lld", (long long)c->rows[b].seq);
  }
  sqlite3_str_appendchar(js, 1, ']');
  sqlite3_free(rel);
  char *best = sqlite3_str_finish(js);
  if (!best) return SQLITE_NOMEM;
  sqlite3_stmt *st = NULL;
  int rc = hr_stmt(t, HR_ST_NEIGHBOURS, &st);
  if (rc != SQLITE_OK) { sqlite3_free(best); return hc_sqlfail(&t->call, rc); }
  sqlite3_bind_text(st, 1, best, -1, sqlite3_free);
  sqlite3_bind_int64(st, 2, (i64)c->cfg.thread_turns);
  hr_bind_filters(st, a);
  js = sqlite3_str_new(t->db);
  sqlite3_str_appendchar(js, 1, '[');
  int w = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    i64 seq = sqlite3_column_int64(st, 0);
    if (hr_row_of(c, seq) < 0) sqlite3_str_appendf(js, w++ ? ",%lld" : "%lld", (long long)seq);
  }
  sqlite3_reset(st);
  sqlite3_str_appendchar(js, 1, ']');
  *out = sqlite3_str_finish(js);
  if (rc != SQLITE_DONE) { sqlite3_free(*out); *out = NULL; return hc_sqlfail(&t->call, rc); }
  return *out ? SQLITE_OK : SQLITE_NOMEM;
}

/* The neighbours of the best candidates, brought in as candidates (hybrid
 * recall only: with no BM25 rank and no vector, a memory has no relevance of
 * its own to lift). */
static int hr_widen(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  char *seqs = NULL;
  int rc = hr_neighbours(t, c, a, &seqs);
  if (rc != SQLITE_OK) return rc;
  if (!strcmp(seqs, "[]")) { sqlite3_free(seqs); return SQLITE_OK; }
  sqlite3_stmt *st = NULL;
  if ((rc = hr_stmt(t, HR_ST_NROWS, &st)) != SQLITE_OK) {
    sqlite3_free(seqs);
    return hc_sqlfail(&t->call, rc);
  }
  sqlite3_bind_text(st, 1, a->query, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, a->ns, -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(st, 3, a->now);
  sqlite3_bind_text(st, 4, seqs, -1, sqlite3_free);
  if (c->hybrid == 1) sqlite3_bind_blob(st, 5, a->qvec, a->qbytes, SQLITE_TRANSIENT);
  else sqlite3_bind_blob(st, 5, c->qf, (int)(sizeof(float) * (size_t)c->qdim), SQLITE_TRANSIENT);
  int from = c->n, cap = c->n;
  if ((rc = hr_take_rows(t, c, st, &cap)) != SQLITE_OK) return rc;
  return hr_read_places(t, c, from);
}

/* The step after the candidates are read: the question's window of time,
 * and, in a namespace with threads, each candidate's place and the
 * neighbours of the best. */
static int hr_place(hr_vtab *t, hr_cursor *c, const hr_args *a) {
  int start, len, rc;
  c->window = c->cfg.w_time > 0 &&
              hm_time_window(a->query, a->now, &c->wlo, &c->whi, &start, &len);
  if (c->window)
    hm_time_window_text(a->query, start, len, c->wlo, c->whi, c->wtext, sizeof c->wtext);
  int threads = 0;
  if (c->cfg.w_thread > 0 && c->cfg.w_relevance > 0) {
    sqlite3_stmt *st = NULL;
    if ((rc = hr_stmt(t, HR_ST_THREADS, &st)) != SQLITE_OK) return hc_sqlfail(&t->call, rc);
    sqlite3_bind_text(st, 1, a->ns, -1, SQLITE_TRANSIENT);
    if ((rc = sqlite3_step(st)) != SQLITE_ROW) return hc_sqlfail(&t->call, rc);
    threads = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
  }
  if (!c->window && !threads) return SQLITE_OK;
  if ((rc = hr_read_places(t, c, 0)) != SQLITE_OK) return rc;
  if (threads && c->hybrid && c->cfg.thread_turns > 0) return hr_widen(t, c, a);
  return SQLITE_OK;
}

/* for sorting the candidates with a thread by (thread, turn) */
typedef struct {
  const char *thread;
  i64 turn;
  int row;
} hr_turn;

static int hr_turn_cmp(const void *x, const void *y) {
  const hr_turn *a = x, *b = y;
  int d = strcmp(a->thread, b->thread);
  if (d) return d;
  if (a->turn != b->turn) return a->turn < b->turn ? -1 : 1;
  return a->row - b->row;
}

/* Each row's thread factor (and the neighbour behind it) from the rows'
 * relevance rel: w_thread x the best relevance among the candidates of its
 * thread at most thread_turns turns away, added to its own. */
static void hr_thread_factors(hr_cursor *c, const double *rel, hr_turn *ts) {
  int m = 0;
  for (int i = 0; i < c->n; i++)
    if (c->rows[i].thread) ts[m++] = (hr_turn){.thread = c->rows[i].thread,
                                               .turn = c->rows[i].turn, .row = i};
  qsort(ts, (size_t)m, sizeof *ts, hr_turn_cmp);
  i64 span = (i64)c->cfg.thread_turns;
  for (int k = 0; k < m; k++) {
    hr_row *r = &c->rows[ts[k].row];
    double own = rel[ts[k].row], lift = 0;
    int by = -1;
    for (int dir = -1; dir <= 1; dir += 2)
      for (int j = k + dir; j >= 0 && j < m && !strcmp(ts[j].thread, ts[k].thread); j += dir) {
        i64 off = ts[j].turn - ts[k].turn;
        if (off < -span || off > span) break;
        double v = c->cfg.w_thread * rel[ts[j].row];
        if (off != 0 && v > lift) lift = v, by = j;
      }
    if (by < 0 || !(own > 0) || !(lift > 0)) continue;
    r->thr = pow((own + lift) / own, c->cfg.w_relevance);
    r->from = c->rows[ts[by].row].mid;
    r->from_off = ts[by].turn - ts[k].turn;
  }
}

/* Each row's thread and time factors (1 where none applies), from the
 * rows' relevance rel; called by hr_score before it scores them. */
static int hr_place_factors(hr_cursor *c, const double *rel) {
  for (int i = 0; i < c->n; i++) {
    hr_row *r = &c->rows[i];
    r->thr = 1.0, r->from = NULL, r->from_off = 0, r->tf = 1.0;
    if (c->window && r->created >= c->wlo && r->created < c->whi + HR_TIME_SLACK)
      r->tf = 1.0 + c->cfg.w_time;
  }
  if (!(c->cfg.w_thread > 0) || !(c->cfg.w_relevance > 0)) return SQLITE_OK;
  int any = 0;
  for (int i = 0; i < c->n && !any; i++) any = c->rows[i].thread != NULL;
  if (!any) return SQLITE_OK;
  hr_turn *ts = sqlite3_malloc64((sqlite3_uint64)c->n * sizeof *ts);
  if (!ts) return SQLITE_NOMEM;
  hr_thread_factors(c, rel, ts);
  sqlite3_free(ts);
  return SQLITE_OK;
}

/* A candidate's place factors, and what explain() says of them (hm_explain
 * words them), into in. */
static void hr_place_input(const hr_cursor *c, const hr_row *r, hm_input *in) {
  in->thread = r->thr;
  in->thread_from = r->thr != 1.0 ? r->from : NULL;
  in->thread_offset = r->from_off;
  in->time = r->tf;
  in->time_window = r->tf != 1.0 && c->window ? c->wtext : NULL;
}

#pragma endregion
