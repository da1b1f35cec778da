/*
 * heapmem.c: the C core of heapmem, in one translation unit.
 *
 * Two doors lead here.  SQLite loads this file's shared library as an
 * extension (`.load heapmem0`, apsw's load_extension) and calls the heap_*
 * SQL functions and the heap_recall table; Python dlopens the very same
 * library through cffi (ABI mode) and calls the hm_* helpers heapmem.h
 * declares directly.  Those make no sqlite3_* call at all, so they work
 * without a database; the small heap_* functions are thin wrappers that turn
 * SQL values into their arguments and their errors into SQL errors, and the
 * loop (heap_recall, heap_feedback, heap_answer, heap_add, ...) runs its
 * statements on the caller's connection.
 *
 * This file holds what every unit shares (the includes, the extension's API
 * pointer, one per thread, the integer typedefs, hm_utf8_cut and hm_errf,
 * the pure code's one printf-style error) and includes the units, in this
 * order; each opens with what it owns and what it relies on, and uses only
 * what comes before it (except that call.c names recall.c's and tune.c's
 * types ahead, and recall.c declares store.c's hs_check_store and place.c's
 * entry points ahead):
 *   text.c       words, stop words, question types, a memory's shape
 *                features, the namespace tag, the FTS5 MATCH expression
 *   when.c       civil dates, and the window of time a question names
 *   links.c      link sets: the learned (feature -> Beta counts) table as a blob
 *   sample.c     seeded draws (splitmix64, gamma, Beta) for exploration
 *   score.c      the config; recency; usefulness (the gated lift, model 1,
 *                the default, or the reference noisy-OR, model 0), explored
 *                or not; the score and its explain line
 *   credit.c     the Beta updates one judged memory contributes
 *   sqlfuncs.c   the heap_* wrappers of the four above, and the helpers for
 *                SQL values the units after it share
 *   embed.c      the static embedder the library carries (potion-base-8M),
 *                heap_embed, heap_tokens, heap_embedder, heap_cosine, the
 *                vector formats and each connection's cache of vectors
 *   attribute.c  heap_attribute: which shown memories an answer used
 *   bm25.c       BM25 over one namespace: heap_bm25_row, heap_bm25_top,
 *                heap_ntokens
 *   pool.c       the pooled layer's pending changes: their blob, reading and
 *                applying them
 *   call.c       the call runtime: a connection's state and kept statements,
 *                one call's context, hc_fail (printf's arguments, the first
 *                error wins), the statement helpers, the end of a failed
 *                heap_* function or heap_recall call
 *   recall.c     heap_recall, recall as an eponymous virtual table
 *   place.c      recall's step for a candidate's place: its thread's
 *                neighbours and the question's window of time
 *   feedback.c   heap_feedback, heap_answer, the robust pooled layer,
 *                heap_rebuild_pool
 *   store.c      heap_init, heap_add, heap_forget, heap_forget_namespace and
 *                the check that a file is a heapmem store
 *   vindex.c     the vector index of a big namespace: seeded k-means
 *                partitions, their splits, heap_vector_index and the rest
 *   tune.c       heap_tune: w_usefulness chosen by replaying the log
 *   register.c   heap_statement, the function table and sqlite3_heapmem_init
 * text.c to credit.c make no sqlite3_* call: they hold every function
 * heapmem.h exports to Python.
 *
 * Names: hm_ is pure code, with no sqlite3_* call in its body (a test in
 * tests/test_architecture.py holds it), whatever the unit; the rest carry
 * their unit's prefix: ha_ attribute.c, hb_ bm25.c, hc_ call.c, he_ and hv_
 * embed.c, hf_ feedback.c, hg_ register.c, hp_ pool.c, hq_ sqlfuncs.c, hr_
 * recall.c and place.c, hs_ store.c, ht_ tune.c, hw_ when.c, hx_ vindex.c.
 * Errors: the pure code writes one sentence into its caller's buffer
 * (hm_errf); a call that runs statements fails through its hc_ctx (hc_fail),
 * and damage in the file is told by a result code (SQLITE_CORRUPT, from a
 * check of what is read), never by the words of an error.
 * A function of more than four parameters names each of them in the comment
 * above it (or beside it, as fts5_aux.c does), but those one convention
 * names everywhere: x the call's context (hc_ctx) or recall's lexical search
 * (hr_lex), t heap_recall's table, c its cursor (hr_cursor) or the config in
 * force (hm_config), db the connection, ctx, argc and argv a SQL function's,
 * err and errlen the error buffer; and those of SQLite's callbacks (an
 * xConnect, an xFilter, an FTS5 tokenizer's or auxiliary function's).
 * tests/test_architecture.py holds the prefixes, the parameters, one
 * printf-style error per kind and no match on SQLite's message.
 */
#include "sqlite3ext.h"
/* SQLITE_EXTENSION_INIT1, but one pointer per thread.  Every sqlite3_* call
 * of the units below goes through sqlite3_api, the routines of the SQLite
 * library that called in.  One process can hold several SQLite libraries
 * (apsw's own, Python's sqlite3, pysqlite3's), and the dynamic loader maps
 * this library once for all of them: with one global pointer, the library
 * that loaded it last got every call, the others' connections included
 * (issue 33: an apsw connection's statement finalized by pysqlite3's
 * sqlite3_finalize, SIGSEGV).  So every way SQLite enters the library (a
 * function through its library's trampoline, register.c; heap_recall's
 * methods; heap_bm25_row; a destructor) first sets this pointer to the
 * routines of the library it came from, for the thread it runs on. */
static _Thread_local const sqlite3_api_routines *sqlite3_api;

/* A thread-local read is a call in a loaded library (__tls_get_addr), and
 * every sqlite3_* call reads the pointer: a function SQLite calls for every
 * matched row (heap_bm25_row, heap_bm25_top ...) starts with HM_API_HERE, a
 * local of the same name read once, which its calls use instead (recall
 * took 13% longer without; bench/RESULTS.md 22). */
static const sqlite3_api_routines *hm_api_now(void) { return sqlite3_api; }
#define HM_API_HERE const sqlite3_api_routines *const sqlite3_api = hm_api_now()

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEAPMEM_VERSION
#define HEAPMEM_VERSION "0.1.0"
#endif

#include "heapmem.h"
#include "schema.h" /* the schema and constants heapmem/db/schema.py gives the C core */

typedef int64_t i64;
typedef uint64_t u64;
typedef uint32_t u32;

/* heapmem.h's limits, as numbers: hm_limits.MAX_K, ... */
static const struct {
#define HM_LIMIT_MEMBER(name, value, what) double name;
  HM_LIMITS(HM_LIMIT_MEMBER)
#undef HM_LIMIT_MEMBER
} hm_limits = {
#define HM_LIMIT_VALUE(name, value, what) .name = value,
    HM_LIMITS(HM_LIMIT_VALUE)
#undef HM_LIMIT_VALUE
};

/* the literal buffer sizes in heapmem.h, checked against what they hold */
_Static_assert(HM_ACTIVE_LEN == 2 * HM_MAX_FEATURES * (2 * HM_MAX_WORD + 16), "HM_ACTIVE_LEN");
_Static_assert(HM_NS_TAG_LEN == 2 + 3 * HM_MAX_NS_BYTES + 1, "HM_NS_TAG_LEN");
_Static_assert(HM_MATCH_LEN == HM_MAX_QUERY_TERMS * (HM_MAX_WORD + 8) + 64 + HM_NS_TAG_LEN,
               "HM_MATCH_LEN");

/* The longest prefix of s[0..len) that does not end inside a UTF-8 sequence. */
static int hm_utf8_cut(const char *s, int len) {
  int i = len, k = 0;
  while (i > 0 && k < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) { i--; k++; }
  if (i == 0) return len;
  unsigned char lead = (unsigned char)s[i - 1];
  int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  return (lead >= 0xC0 && k < need) ? i - 1 : len;
}

/* The pure code's one error: a sentence made as printf makes it into err (at
 * most errlen bytes, cut at a whole character); returns HM_ERROR. */
static int hm_errf(char *err, int errlen, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, (size_t)errlen, fmt, ap);
    va_end(ap);
    if (n >= errlen) err[hm_utf8_cut(err, errlen - 1)] = 0;
  }
  return 1; /* HM_ERROR */
}

/* the scoring core: no sqlite3_* call */
#include "text.c"
#include "when.c"
#include "links.c"
#include "sample.c"
#include "score.c"
#include "credit.c"
/* its SQL functions, and the ones that need FTS5 */
#include "sqlfuncs.c"
/* the static embedder, the vector formats and each connection's vector cache */
#include "embed.c"
#include "attribute.c"
#include "bm25.c"
/* the pooled layer's pending changes, which recall and feedback apply */
#include "pool.c"
/* the call runtime: a connection's state, one call's context and its first error */
#include "call.c"
/* the loop: recall as a table, feedback and the pooled layer as calls, the store */
#include "recall.c"
#include "place.c"
#include "feedback.c"
#include "store.c"
/* the vector index of a big namespace: partitions, k-means, splits */
#include "vindex.c"
/* tune: the usefulness weight chosen from the log */
#include "tune.c"
/* what loading the library registers */
#include "register.c"
