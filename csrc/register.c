/*
 * register.c: what loading the library does to a connection.
 *
 * Owns: heap_statement (the text of the statements heap_recall, heap_feedback
 * and heap_tune run), the table of heap_* SQL functions (hm_functions), the FTS5 ones
 * (hg_register_fts5: heap_bm25_row, heap_ntokens and heap_attribute, with
 * the tokenizers the last two keep) and the entry point
 * sqlite3_heapmem_init, which also makes the connection's hm_conn and the
 * heap_recall module.
 * Relies on: every unit before it.
 */

#pragma region the statements the loop runs

/* heap_statement(name): the text of a statement heap_recall, heap_feedback or
 * heap_tune runs ('candidates', 'hybrid', 'links', 'show', 'log', 'edges', 'threads', ...,
 * 'tune_recalls', 'tune_events', 'tune_first_event', 'autotune_used',
 * 'autotune_count'), for EXPLAIN QUERY PLAN and for readers who want to see
 * what runs. */
static void heap_statement(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  static const struct { const char *name, *sql; } all[] = {
      {"candidates", hr_sql_cand}, {"hybrid", hr_sql_hybrid}, {"links", hr_sql_links},
      {"show", hr_sql_show},       {"log", hr_sql_log},       {"edges", hf_sql_edges},
      {"before", hf_sql_before},   {"vrows", hr_sql_vrows}, {"vectors", hr_sql_vload},
      {"allow", hr_sql_allow},     {"vpart", hr_sql_vpart},
      {"threads", hr_sql_threads}, {"place", hr_sql_place},
      {"neighbours", hr_sql_neighbours}, {"nrows", hr_sql_nrows},
      {"tune_recalls", ht_sql_recalls},
      {"tune_events", ht_sql_events}, {"tune_first_event", ht_sql_first_event},
      {"autotune_used", ht_sql_used}, {"autotune_count", ht_sql_count},
      {"bm25_namespace", hr_sql_lex_ns}, {"bm25_term", hr_sql_lex_term},
      {"bm25_match", hr_sql_lex_match}, {"bm25_pass", hr_sql_lex_pass},
      {"bm25_stamp", hr_sql_pc_stamp}, {"bm25_lengths", hr_sql_pc_lens},
      {"bm25_lengths_of", hr_sql_pc_lens_of}, {"bm25_filters", hr_sql_pc_filters},
  };
  const char *name = (const char *)sqlite3_value_text(argv[0]);
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
    if (!strcmp(name, all[i].name)) {
      sqlite3_result_text(ctx, all[i].sql, -1, SQLITE_STATIC);
      return;
    }
  sqlite3_result_error(ctx, "heap_statement: the name of one of heap_recall's, "
                            "heap_feedback's or heap_tune's statements: candidates, hybrid, "
                            "links, show, log, edges, before, vrows, vectors, allow, vpart, "
                            "threads, place, neighbours, nrows, "
                            "tune_recalls, tune_events, tune_first_event, autotune_used, "
                            "autotune_count, bm25_namespace, bm25_term, bm25_match, bm25_pass, "
                            "bm25_stamp, bm25_lengths, bm25_lengths_of, bm25_filters", -1);
}

#pragma endregion

#pragma region registration

/* -- one trampoline set per SQLite library ------------------------------------------
 * SQLite hands a function nothing but its context and arguments, and reading
 * the context's user data is itself a call into the library.  So each SQLite
 * library the process loads this one into gets its own slot: its routines in
 * hm_slot_api[s], and trampolines hm_func_s, hm_step_s, hm_final_s that set
 * sqlite3_api (this thread's) to them and only then read the hm_fn they were
 * registered with and call the function.  A slot is claimed by the library's
 * routines pointer, once, at its first load; the slots are never given back
 * (a library stays mapped while the process runs). */
#define HM_SLOTS 8
static const sqlite3_api_routines *_Atomic hm_slot_api[HM_SLOTS];

#define HM_SLOT(s)                                                                    \
  static void hm_func_##s(sqlite3_context *ctx, int argc, sqlite3_value **argv) {    \
    sqlite3_api = hm_slot_api[s];                                                     \
    ((const hm_fn *)sqlite3_user_data(ctx))->func(ctx, argc, argv);                   \
  }                                                                                   \
  static void hm_step_##s(sqlite3_context *ctx, int argc, sqlite3_value **argv) {    \
    sqlite3_api = hm_slot_api[s];                                                     \
    ((const hm_fn *)sqlite3_user_data(ctx))->step(ctx, argc, argv);                   \
  }                                                                                   \
  static void hm_final_##s(sqlite3_context *ctx) {                                    \
    sqlite3_api = hm_slot_api[s];                                                     \
    ((const hm_fn *)sqlite3_user_data(ctx))->final(ctx);                              \
  }
HM_SLOT(0) HM_SLOT(1) HM_SLOT(2) HM_SLOT(3) HM_SLOT(4) HM_SLOT(5) HM_SLOT(6) HM_SLOT(7)
#undef HM_SLOT
#define HM_SLOT_ROW(s) {.func = hm_func_##s, .step = hm_step_##s, .final = hm_final_##s}
static const struct {
  hm_xfunc func, step;
  void (*final)(sqlite3_context *);
} hm_slot_fns[HM_SLOTS] = {HM_SLOT_ROW(0), HM_SLOT_ROW(1), HM_SLOT_ROW(2), HM_SLOT_ROW(3),
                           HM_SLOT_ROW(4), HM_SLOT_ROW(5), HM_SLOT_ROW(6), HM_SLOT_ROW(7)};
#undef HM_SLOT_ROW

/* The slot of the library whose routines are api (claimed if new), or -1
 * when every slot is another library's. */
static int hm_slot(const sqlite3_api_routines *api) {
  for (int s = 0; s < HM_SLOTS; s++) {
    const sqlite3_api_routines *held = NULL; /* a free slot is claimed; else who holds it */
    if (atomic_compare_exchange_strong(&hm_slot_api[s], &held, api) || held == api) return s;
  }
  return -1;
}

/* An hm_fn's destructor: its own user data's, with sqlite3_api set first
 * (SQLite calls it on whatever thread closes the connection). */
static void hg_fn_free(void *p) {
  hm_fn *f = p;
  sqlite3_api = f->api;
  if (f->destroy && f->ud) f->destroy(f->ud);
  sqlite3_free(f);
}

/* sqlite3_create_function_v2 through the slot's trampolines: ud is what the
 * function reads with hq_user_data, destroy its destructor (called once,
 * also when the registration fails).
 * slot: the SQLite library's trampolines; name, nargs, flags: as
 * sqlite3_create_function_v2 takes them; func, or step and final: the function. */
static int hg_create_function(sqlite3 *db, int slot, const char *name, int nargs, int flags,
                              void *ud, void (*destroy)(void *), hm_xfunc func, hm_xfunc step,
                              void (*final)(sqlite3_context *)) {
  hm_fn *f = sqlite3_malloc(sizeof *f);
  if (!f) {
    if (destroy && ud) destroy(ud);
    return SQLITE_NOMEM;
  }
  *f = (hm_fn){.api = sqlite3_api, .func = func, .step = step, .final = final, .ud = ud,
               .destroy = destroy};
  return sqlite3_create_function_v2(db, name, nargs, flags, f,
                                    func ? hm_slot_fns[slot].func : NULL,
                                    step ? hm_slot_fns[slot].step : NULL,
                                    final ? hm_slot_fns[slot].final : NULL, hg_fn_free);
}

/* The connection's fts5_api, or NULL when SQLite was built without FTS5. */
static fts5_api *hg_fts5(sqlite3 *db) {
  fts5_api *api = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(st);
  }
  sqlite3_finalize(st);
  return api;
}

/* A porter over unicode61 remove_diacritics 2 tokenizer, as memories_fts
 * tokenizes (NULL: none, *err says why). */
static hm_stemmer *hg_new_stemmer(fts5_api *api, char **err) {
  hm_stemmer *st = sqlite3_malloc(sizeof *st);
  if (!st) return NULL;
  memset(st, 0, sizeof *st);
  st->api = sqlite3_api;
  void *ud = NULL;
  const char *pargs[] = {"unicode61", "remove_diacritics", "2"};
  int rc = api->xFindTokenizer(api, "porter", &ud, &st->tok);
  if (rc == SQLITE_OK) rc = st->tok.xCreate(ud, pargs, 3, &st->inst);
  if (rc != SQLITE_OK) {
    sqlite3_free(st);
    if (err) *err = sqlite3_mprintf("heapmem: FTS5 has no porter tokenizer");
    return NULL;
  }
  return st;
}

/* Registers heap_bm25_row and heap_bm25_tail (FTS5 auxiliary functions), heap_ntokens,
 * heap_attribute, heap_terms and heap_bm25_terms, with the FTS5 tokenizers
 * the last four keep, and the connection's (conn: heap_recall's lexical search).  Without
 * FTS5 (no heapmem store can exist then) it registers nothing, so the other
 * functions still load. */
static int hg_register_fts5(sqlite3 *db, int slot, hm_conn *conn, char **err) {
  fts5_api *api = hg_fts5(db);
  if (!api || api->iVersion < 2) return SQLITE_OK;
  /* their user data: the routines of this SQLite (FTS5's own API, which is
   * this library's, hands it back) */
  int rc = api->xCreateFunction(api, "heap_bm25_row", (void *)sqlite3_api, heap_bm25_row, NULL);
  if (rc == SQLITE_OK)
    rc = api->xCreateFunction(api, "heap_bm25_tail", (void *)sqlite3_api, heap_bm25_tail, NULL);
  if (rc != SQLITE_OK) return rc;
  hm_counter *c = sqlite3_malloc(sizeof *c);
  if (!c) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  void *ud = NULL;
  const char *args[] = {"remove_diacritics", "2"};
  rc = api->xFindTokenizer(api, "unicode61", &ud, &c->tok);
  if (rc == SQLITE_OK) rc = c->tok.xCreate(ud, args, 2, &c->inst);
  if (rc != SQLITE_OK) {
    sqlite3_free(c);
    if (err) *err = sqlite3_mprintf("heapmem: FTS5 has no unicode61 tokenizer");
    return rc;
  }
  rc = hg_create_function(db, slot, "heap_ntokens", 1,
                          SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, c,
                          hb_counter_free, heap_ntokens, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  /* heap_attribute, heap_terms and the lexical search tokenize as
   * memories_fts does: porter over unicode61 */
  hm_stemmer *st = hg_new_stemmer(api, err);
  if (!st) return SQLITE_ERROR;
  rc = hg_create_function(db, slot, "heap_attribute", 5,
                          SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, st,
                          ha_stemmer_free, NULL, heap_attribute_step, heap_attribute_final);
  if (rc != SQLITE_OK) return rc;
  if (!(st = hg_new_stemmer(api, err))) return SQLITE_ERROR;
  rc = sqlite3_create_module_v2(db, "heap_terms", &hb_terms_module, st, ha_stemmer_free);
  if (rc != SQLITE_OK) return rc;
  if (!(st = hg_new_stemmer(api, err))) return SQLITE_ERROR;
  rc = sqlite3_create_module_v2(db, "heap_bm25_terms", &hb_module, st, ha_stemmer_free);
  if (rc != SQLITE_OK) return rc;
  if (!(conn->stem = hg_new_stemmer(api, err))) return SQLITE_ERROR;
  return SQLITE_OK;
}

#define HM_WRITE_FLAGS (SQLITE_UTF8 | SQLITE_DIRECTONLY)
/* a function the schema's triggers call that reads the connection's cache */
#define HM_READS_FLAGS (SQLITE_UTF8 | SQLITE_INNOCUOUS)

static const struct {
  const char *name;
  int nargs;
  int flags;
  void (*func)(sqlite3_context *, int, sqlite3_value **);
  void (*step)(sqlite3_context *, int, sqlite3_value **);
  void (*final)(sqlite3_context *);
} hm_functions[] = {
#define HM_PURE (SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS)
#define HM_WRITE HM_WRITE_FLAGS
#define HM_READS HM_READS_FLAGS
/* a row: a scalar function, or an aggregate's step and final */
#define HM_SCALAR(fname, n, fl, fn) {.name = fname, .nargs = n, .flags = fl, .func = fn}
#define HM_AGGREGATE(fname, n, fl, st, fin) \
  {.name = fname, .nargs = n, .flags = fl, .step = st, .final = fin}
    HM_SCALAR("heap_version", 0, HM_PURE, heap_version),
    HM_SCALAR("heap_qtype", 1, HM_PURE, heap_qtype),
    HM_SCALAR("heap_features", 3, HM_PURE, heap_features),
    HM_SCALAR("heap_match", 1, HM_PURE, heap_match),
    HM_SCALAR("heap_match", 2, HM_PURE, heap_match),
    HM_SCALAR("heap_ns_tag", 1, HM_PURE, heap_ns_tag),
    HM_SCALAR("heap_time_window", 2, HM_PURE, heap_time_window),
    HM_SCALAR("heap_active", 2, HM_PURE, heap_active),
    HM_SCALAR("heap_relate", 2, HM_PURE, heap_relate),
    HM_SCALAR("heap_cosine", 2, HM_PURE, heap_cosine),
    HM_SCALAR("heap_embed", 1, HM_PURE, heap_embed),
    HM_SCALAR("heap_embed", 2, HM_PURE, heap_embed),
    HM_SCALAR("heap_tokens", 1, HM_PURE, heap_tokens),
    HM_SCALAR("heap_text_hash", 1, HM_PURE, heap_text_hash),
    HM_SCALAR("heap_embedder", 0, HM_PURE, heap_embedder),
    HM_SCALAR("heap_recency", 1, HM_PURE, heap_recency),
    HM_SCALAR("heap_recency", 3, HM_PURE, heap_recency),
    HM_SCALAR("heap_score", 7, HM_PURE, heap_score),
    HM_SCALAR("heap_score", 8, HM_PURE, heap_score),
    HM_SCALAR("heap_explain", 7, HM_PURE, heap_explain),
    HM_SCALAR("heap_explain", 8, HM_PURE, heap_explain),
    HM_AGGREGATE("heap_links", 5, HM_PURE, heap_links_step, heap_links_final),
    HM_AGGREGATE("heap_links", 6, HM_PURE, heap_links_step, heap_links_final),
    HM_SCALAR("heap_credit", 5, HM_PURE, heap_credit),
    HM_SCALAR("heap_credit", 6, HM_PURE, heap_credit),
    HM_AGGREGATE("heap_fold", 5, HM_PURE, heap_fold_step, heap_fold_final),
    HM_AGGREGATE("heap_fold", 6, HM_PURE, heap_fold_step, heap_fold_final),
    HM_AGGREGATE("heap_bm25_top", 6, SQLITE_UTF8, heap_bm25_top_step, heap_bm25_top_final),
    /* the loop's functions, which read the store and write it (never from a
     * file's views or triggers; given the connection's hm_conn) */
    HM_SCALAR("heap_bm25_search", 3, HM_WRITE, heap_bm25_search),
    HM_SCALAR("heap_bm25_search", 4, HM_WRITE, heap_bm25_search),
    HM_SCALAR("heap_bm25_search", 5, HM_WRITE, heap_bm25_search),
    HM_SCALAR("heap_feedback", 2, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_feedback", 3, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_feedback", 4, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_feedback", 5, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_feedback", 6, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_feedback", 7, HM_WRITE, heap_feedback),
    HM_SCALAR("heap_answer", 2, HM_WRITE, heap_answer),
    HM_SCALAR("heap_answer", 3, HM_WRITE, heap_answer),
    HM_SCALAR("heap_answer", 4, HM_WRITE, heap_answer),
    HM_SCALAR("heap_answer", 5, HM_WRITE, heap_answer),
    HM_SCALAR("heap_answer", 6, HM_WRITE, heap_answer),
    HM_SCALAR("heap_statement", 1, HM_PURE, heap_statement),
    HM_SCALAR("heap_init", 0, HM_WRITE, heap_init),
    HM_SCALAR("heap_init", 1, HM_WRITE, heap_init),
    HM_SCALAR("heap_add", 2, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 3, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 4, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 5, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 6, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 7, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 8, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 9, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 10, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 11, HM_WRITE, heap_add),
    HM_SCALAR("heap_add", 12, HM_WRITE, heap_add),
    HM_SCALAR("heap_add_many", 1, HM_WRITE, heap_add_many),
    HM_SCALAR("heap_add_many", 2, HM_WRITE, heap_add_many),
    HM_SCALAR("heap_forget", 1, HM_WRITE, heap_forget),
    HM_SCALAR("heap_forget_namespace", 1, HM_WRITE, heap_forget_namespace),
    HM_SCALAR("heap_rebuild_pool", 0, HM_WRITE, heap_rebuild_pool),
    HM_SCALAR("heap_fold_pool", 0, HM_WRITE, heap_fold_pool),
    HM_SCALAR("heap_pool_now", 0, HM_WRITE, heap_pool_now),
    HM_SCALAR("heap_rebuild_pool", 1, HM_WRITE, heap_rebuild_pool),
    HM_SCALAR("heap_tune", 0, HM_WRITE, heap_tune),
    HM_SCALAR("heap_tune", 1, HM_WRITE, heap_tune),
    HM_SCALAR("heap_save_config", 1, HM_WRITE, heap_save_config),
    HM_SCALAR("heap_vector_index", 0, HM_WRITE, heap_vector_index),
    HM_SCALAR("heap_vector_index", 1, HM_WRITE, heap_vector_index),
    HM_SCALAR("heap_vector_maintain", 2, HM_WRITE, heap_vector_maintain),
    HM_SCALAR("heap_vector_settings", 0, HM_WRITE, heap_vector_settings),
    HM_SCALAR("heap_vector_settings", 1, HM_WRITE, heap_vector_settings),
    /* the triggers': innocuous (it reads the namespace's centroids), with the
     * connection's cache of them */
    HM_SCALAR("heap_vector_part", 3, HM_READS, heap_vector_part),
    HM_SCALAR("heap_vector_top", 3, HM_WRITE, heap_vector_top),
    HM_SCALAR("heap_vector_top", 4, HM_WRITE, heap_vector_top),
#undef HM_PURE
#undef HM_WRITE
#undef HM_READS
#undef HM_SCALAR
#undef HM_AGGREGATE
};


#ifdef _WIN32
__declspec(dllexport)
#endif
HM_API int sqlite3_heapmem_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  SQLITE_EXTENSION_INIT2(pApi);
  int slot = hm_slot(pApi);
  if (slot < 0) {
    if (pzErrMsg)
      *pzErrMsg = sqlite3_mprintf("heapmem: loaded into more than %d SQLite libraries in one "
                                  "process", HM_SLOTS);
    return SQLITE_ERROR;
  }
  /* one per connection: where the loop's prepared statements are kept */
  hm_conn *conn = sqlite3_malloc64(sizeof *conn);
  if (!conn) return SQLITE_NOMEM;
  memset(conn, 0, sizeof *conn);
  conn->api = pApi;
  int rc = sqlite3_create_module_v2(db, "heap_recall", &hr_module, conn, hr_conn_free);
  if (rc != SQLITE_OK) {
    if (pzErrMsg) *pzErrMsg = sqlite3_mprintf("heapmem: could not register heap_recall");
    return rc;
  }
  for (size_t i = 0; i < sizeof(hm_functions) / sizeof(hm_functions[0]); i++) {
    rc = hg_create_function(db, slot, hm_functions[i].name, hm_functions[i].nargs,
                            hm_functions[i].flags,
                            hm_functions[i].flags == HM_WRITE_FLAGS ||
                                    hm_functions[i].flags == HM_READS_FLAGS
                                ? conn
                                : NULL,
                            NULL, hm_functions[i].func, hm_functions[i].step,
                            hm_functions[i].final);
    if (rc != SQLITE_OK) {
      if (pzErrMsg)
        *pzErrMsg = sqlite3_mprintf("heapmem: could not register %s", hm_functions[i].name);
      return rc;
    }
  }
  return hg_register_fts5(db, slot, conn, pzErrMsg);
}

#pragma endregion
