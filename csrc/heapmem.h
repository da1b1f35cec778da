/*
 * heapmem.h: the C core's public API (the hm_* helpers), its config struct
 * and its buffer sizes.
 *
 * heapmem.c includes this file ahead of the units that define these
 * functions (text.c, when.c, links.c, sample.c, score.c, credit.c);
 * heapmem/db/native.py reads the part between the "cdef" markers below as
 * its cffi declarations (the header ships inside the Python package as
 * package data), so the C and Python sides cannot drift.
 * The marked part is therefore plain C that cffi's parser accepts: integer
 * #defines with literal values, typedefs, prototypes.  Two things are
 * rewritten by native.py before cffi sees it: the HM_API prefix is dropped,
 * and HM_CONFIG_FIELDS(HM_CONFIG_MEMBER) becomes one `double name;` per field.
 *
 * None of these functions calls sqlite3_*: they work without a database.
 */
#ifndef HEAPMEM_H
#define HEAPMEM_H

#include <stdint.h>

#ifndef HM_API
#ifdef _WIN32
#define HM_API __declspec(dllexport)
#else
#define HM_API __attribute__((visibility("default")))
#endif
#endif

/*
 * The scoring config: one line per field, the only list of them.
 *   X(name, default, low, high, rule, message)
 * rule: HM_RULE_RANGE    low <= value <= high
 *       HM_RULE_POSITIVE a finite number > 0
 *       HM_RULE_PRIOR    a normal positive number; prior_alpha + prior_beta <= high
 *       HM_RULE_SWITCH   exactly low or high
 *       HM_RULE_COUNT    a whole number, low <= value <= high
 * message is the error a bad value gets.
 * heapmem/config.py's ScoringConfig takes its C fields, in this order, and
 * their defaults from this list.
 */
#define HM_CONFIG_FIELDS(X)                                                                       \
  X(w_relevance, 1.0, 0, 100, HM_RULE_RANGE, "w_relevance must be a number from 0 to 100")        \
  X(w_recency, 0.0, 0, 100, HM_RULE_RANGE, "w_recency must be a number from 0 to 100")            \
  X(w_importance, 1.0, 0, 100, HM_RULE_RANGE, "w_importance must be a number from 0 to 100")      \
  X(w_usefulness, 0.3, 0, 100, HM_RULE_RANGE, "w_usefulness must be a number from 0 to 100")      \
  X(half_life_days, 30.0, 0, 0, HM_RULE_POSITIVE, "half_life_days must be a positive number")     \
  X(recency_floor, 0.5, 0, 1, HM_RULE_RANGE, "recency_floor must be between 0 and 1")             \
  X(superseded_factor, 0.1, 0, 1, HM_RULE_RANGE, "superseded_factor must be between 0 and 1")     \
  X(prior_alpha, 0.1, 0, 1e6, HM_RULE_PRIOR, "prior_alpha and prior_beta must be positive numbers")\
  X(prior_beta, 9.9, 0, 1e6, HM_RULE_PRIOR, "prior_alpha and prior_beta must be positive numbers")\
  X(model, 1.0, 0, 1, HM_RULE_SWITCH, "model must be 1 (gated lift) or 0 (reference noisy-OR)")   \
  X(gate_z, 2.0, 0, 10, HM_RULE_RANGE, "gate_z must be a number from 0 to 10")                    \
  X(combine, 1.0, 0, 1, HM_RULE_SWITCH, "combine must be 1 (product) or 0 (noisy-OR)")        \
  X(backoff, 1.0, 0, 1, HM_RULE_SWITCH, "backoff must be 1 (crossed links back off) or 0")      \
  X(max_lift, 3.0, 1, 1e12, HM_RULE_RANGE, "max_lift must be a number from 1 to 1e12")        \
  X(w_evidence, 0.0, 0, 100, HM_RULE_RANGE, "w_evidence must be a number from 0 to 100")        \
  X(candidates, 50, 1, 1000, HM_RULE_COUNT, "candidates must be an integer from 1 to 1000")      \
  X(lexical_weight, 0.7, 0, 1, HM_RULE_RANGE, "lexical_weight must be between 0 and 1")          \
  X(min_cosine, 0.2, -1, 1, HM_RULE_RANGE, "min_cosine must be between -1 and 1")                \
  X(w_context, 1.0, 0, 100, HM_RULE_RANGE, "w_context must be a number from 0 to 100")          \
  X(context_min_sim, 0.7, 0, 1, HM_RULE_RANGE, "context_min_sim must be between 0 and 1")      \
  X(context_z, 0.5, 0, 10, HM_RULE_RANGE, "context_z must be a number from 0 to 10")            \
  X(context_prior, 2.0, 0, 1e6, HM_RULE_POSITIVE, "context_prior must be a positive number")    \
  X(pooled_pseudocount, 1e9, 0, 1e300, HM_RULE_RANGE, "pooled_pseudocount must be a finite number >= 0")\
  X(explore, 0.0, 0, 4, HM_RULE_RANGE, "explore must be a number from 0 (off) to 4")           \
  X(w_thread, 0.5, 0, 100, HM_RULE_RANGE, "w_thread must be a number from 0 (off) to 100")      \
  X(thread_turns, 2, 0, 100, HM_RULE_COUNT, "thread_turns must be an integer from 0 to 100")    \
  X(w_time, 1.0, 0, 100, HM_RULE_RANGE, "w_time must be a number from 0 (off) to 100")

#define HM_CONFIG_MEMBER(name, dflt, lo, hi, rule, msg) double name;

/*
 * The vocabulary every door shares, written once.  heapmem/db/native.py reads
 * these tables from this header (validate.py's limits, config.py's kinds,
 * io/transfer.py's feature grammar); tests/test_architecture.py fails if
 * Python spells one of them itself.
 *
 * The limits, checked at the C entry points (heap_add, heap_recall, ...):
 *   X(name, value, what it bounds)
 * The C core reads them as hm_limits.name.
 */
#define HM_LIMITS(X)                                                                              \
  X(MAX_K, 1000, "the memories one recall returns (k), and the ids one feedback judges")           \
  X(MAX_TEXT_BYTES, 1048576, "a memory's text, in bytes of UTF-8 (1 MiB)")                         \
  X(MAX_METADATA_BYTES, 1048576, "a memory's metadata, in bytes of JSON text (1 MiB)")             \
  X(MAX_JSON_DEPTH, 64, "how deeply metadata, options and lists may nest")                        \
  X(MAX_NAME_CHARS, 256, "a namespace, kind, source, id or key, in characters")                   \
  X(MAX_ANSWER_BYTES, 65536, "the answer one feedback reads, in bytes of UTF-8 (64 KiB)")          \
  X(MAX_IDS, 100000, "the ids one forget or one batch of adds takes")                              \
  X(MAX_NAMESPACES, 1000, "the namespaces one recall ranks across")                               \
  X(MIN_TIME, 0, "the earliest time, unix seconds (1970-01-01T00:00:00Z)")                        \
  X(MAX_TIME, 253402300799, "the latest time, unix seconds (9999-12-31T23:59:59Z)")               \
  X(MAX_IMPORTANCE, 10, "importance lies in (0, MAX_IMPORTANCE]")

/* The kinds heapmem knows, with the importance each gives a memory by
 * default (another kind: 1, and the shape feature kind:other).
 *   X(kind, importance) */
#define HM_KINDS(X)                                                                               \
  X(instruction, 1.5) X(preference, 1.3) X(summary, 1.2) X(fact, 1.0) X(note, 1.0)                \
  X(episode, 0.8) X(tool_result, 0.6)

#define HM_DEFAULT_KIND "fact" /* a memory's kind when none is given */

/* The question types hm_qtype gives, "other" first (its enum's order). */
#define HM_QTYPES(X) X(other) X(when) X(who) X(where) X(what) X(how) X(how_many) X(why) X(yes_no)

/* The feature grammar: every feature heapmem makes.  hm_features gives a
 * memory one value in every shape slot:
 *   kind:<a kind of HM_KINDS, or HM_OTHER_VALUE>
 *   src:<a role of HM_SOURCE_ROLES, HM_NO_SOURCE without a source, HM_OTHER_VALUE for a name>
 *   len:<a bucket of HM_LEN_BUCKETS by its words: X(bucket, most words; 0: any)>
 *   <slot>:0 or :1 for each slot of HM_FLAG_SLOTS;
 * hm_relate adds HM_RELATE_SLOT:0/1 (the source is named in the question), a
 * recall adds HM_CTX_FEATURE to a memory judged used for a question like its
 * own, hm_active adds HM_BASE_FEATURE and age:<a bucket of HM_AGE_BUCKETS:
 * X(bucket, below this many days; 0: any)>, then each of those crossed with
 * the question type ("when/date:1"). */
#define HM_SOURCE_ROLES(X) X(user) X(assistant) X(agent) X(system) X(tool) X(document) X(web)
#define HM_LEN_BUCKETS(X) X(xs, 3) X(s, 8) X(m, 20) X(l, 40) X(xl, 0)
#define HM_FLAG_SLOTS(X) X(date) X(clock) X(num) X(money) X(entity) X(self) X(question) X(url)
#define HM_AGE_BUCKETS(X) X(day, 2) X(week, 8) X(month, 31) X(quarter, 92) X(year, 366) X(old, 0)
#define HM_OTHER_VALUE "other" /* a kind or a source role heapmem does not know */
#define HM_NO_SOURCE "none"    /* src: of a memory without a source */
#define HM_RELATE_SLOT "srcq"
#define HM_CTX_FEATURE "ctx:1"
#define HM_BASE_FEATURE "base"

/* cdef-begin */

/* Status codes. */
#define HM_OK 0
#define HM_ERROR 1
#define HM_TOOBIG 2

/* Limits and buffer sizes (literal values: cffi reads them). */
#define HM_MAX_WORD 64          /* longer "words" are cut for matching */
#define HM_MAX_QUERY_TERMS 32   /* terms kept from one question */
#define HM_MAX_FEATURES 64      /* shape features of one memory; active lists hold twice as many */
#define HM_ERRLEN 256           /* an error message buffer */
#define HM_FEATURES_LEN 1024    /* hm_features' output */
#define HM_ACTIVE_LEN 18432     /* hm_active's output: 2 * HM_MAX_FEATURES * (2 * HM_MAX_WORD + 16) */
#define HM_MAX_NS_BYTES 1024    /* the longest namespace hm_ns_tag tags: 256 characters of UTF-8 */
#define HM_NS_TAG_LEN 3075      /* hm_ns_tag's output: "ns" + 3 digits per byte of the name + NUL */
#define HM_MATCH_LEN 5443       /* hm_match's output: HM_MAX_QUERY_TERMS * (HM_MAX_WORD + 8) + 64 + HM_NS_TAG_LEN */
#define HM_RELATE_LEN 16        /* hm_relate's output */
#define HM_EXPLAIN_LEN 1024     /* hm_explain's output */
#define HM_SCORE_COLUMNS 8      /* hm_score_batch's output columns, see below */
#define HM_EMBED_DIM 256        /* the carried model's dimension (potion-base-8M) */
#define HM_MAX_DIM 4096         /* the longest vector the store takes */
#define HM_MAX_TURN 2147483647  /* the highest turn a memory may have in its thread */

/* Rules of the config fields (see HM_CONFIG_FIELDS). */
#define HM_RULE_RANGE 0
#define HM_RULE_POSITIVE 1
#define HM_RULE_PRIOR 2
#define HM_RULE_SWITCH 3
#define HM_RULE_COUNT 4

typedef struct {
  HM_CONFIG_FIELDS(HM_CONFIG_MEMBER)
} hm_config;

/* One candidate's score inputs (hm_explain). */
typedef struct {
  double relevance;     /* BM25 normalised over the candidates, best = 1 (or a blend) */
  double age_days;      /* since last use (or creation) */
  double importance;
  int superseded;
  const char *features; /* shape features, space-separated */
  double bm25_part;     /* hybrid recall: the parts of relevance, for explain; */
  double cos_part;      /* NaN when relevance is BM25 alone */
  double context;       /* contextual utility's factor (1: none) and the weighted */
  double context_n;     /* judgements behind it, as heap_recall found them */
  double explore;       /* exploration's factor (1: none) */
  double thread;        /* a thread neighbour's factor (1: none), from whom (the */
  const char *thread_from; /* neighbour's id, or NULL) and its turn less this one's */
  int64_t thread_offset;
  double time;          /* the factor for the window of time the question names */
  const char *time_window; /* (1: none), and that window in words (or NULL) */
} hm_input;

/* Text scanning (text.c). */
HM_API const char *hm_qtype(const char *q);
HM_API int hm_is_stop_word(const char *w);
HM_API int hm_features(const char *text, const char *kind, const char *source, char *out,
                       int outlen);
HM_API int hm_active(const char *features, const char *qtype, double age_days, char *out,
                     int outlen, char *err, int errlen);
HM_API int hm_relate(const char *question, const char *source, char *out, int outlen);

/* Time in a question (when.c): the window of days it names, anchored at now
 * (unix seconds), into [*lo, *hi) in unix seconds, with the bytes of q that
 * name it (*start, *len); returns 1, or 0 when it names none. */
HM_API int hm_time_window(const char *q, double now, double *lo, double *hi, int *start,
                          int *len);

/* FTS5 query building (text.c). */
HM_API uint64_t hm_hash(const char *s);
HM_API int hm_ns_tag(const char *ns, char *out, int outlen);
HM_API int hm_match(const char *q, const char *ns, char *out, int outlen);

/* Link sets (links.c). */
HM_API void hm_link_view(double own_a, double own_b, double pool_a, double pool_b,
                         double pseudocount, double *a, double *b);

/* Scoring (score.c).  hm_score_batch's out receives HM_SCORE_COLUMNS doubles
 * per candidate (n x HM_SCORE_COLUMNS in all): relevance, recency,
 * importance, usefulness, rules, score, rest, and lift.  rest is the score
 * without its usefulness factor (what tune() replays); lift is usefulness's
 * factor on the score, within max_lift.  hm_explain's line starts with the score as
 * heap_recall gives it: the learned factors (usefulness's lift, in->context
 * and in->explore) together within max_lift (model 1), so that the product
 * of the factors it prints is the score. */
HM_API void hm_config_default(hm_config *c);
HM_API int hm_config_parse(const char *text, hm_config *c, char *err, int errlen);
HM_API double hm_recency(double age_days, double half_life_days, double floor);
HM_API double hm_noisy_or(const double *s, int n);
HM_API double hm_cosine(const float *a, const float *b, int n);
HM_API int hm_score_batch(int n, const double *relevance, const double *age_days,
                          const double *importance, const int *superseded,
                          const char *const *features, const char *qtype,
                          const unsigned char *links, int64_t linkslen, const hm_config *c,
                          double *out, int *bad, char *err, int errlen);
HM_API int hm_explain(const hm_input *in, const char *qtype, const unsigned char *links,
                      int64_t linkslen, const hm_config *c, char *out, int outlen, char *err,
                      int errlen);

/* Exploration (sample.c, score.c): n draws of Beta(a, b) from the stream
 * seed starts; the factors a tracked recall's exploration (c->explore > 0)
 * puts on n candidates' scores, each one's usefulness with every link's
 * posterior sampled (seed: the recall's) against its usefulness, into
 * factor[n] (all 1 when off); work is room for 2n doubles.  Returns HM_OK,
 * or HM_ERROR with the failing row's index in *bad and a message in err. */
HM_API int hm_beta_samples(double a, double b, uint64_t seed, int n, double *out);
HM_API int hm_explore(int n, const char *const *features, const double *age_days,
                      const char *qtype, const unsigned char *links, int64_t linkslen,
                      const hm_config *c, uint64_t seed, double *factor, double *work,
                      int *bad, char *err, int errlen);

/* Feedback credit (credit.c). */
HM_API int hm_credit(const char *features, const char *qtype, double age_days, int used,
                     const unsigned char *links, int64_t linkslen, const hm_config *c,
                     char *names, int nameslen, double *d_alpha, double *d_beta, int max,
                     char *err, int errlen);

/* The static embedder the library carries (embed.c): text's unit vector
 * into out[dim] (dim must be HM_EMBED_DIM; zeros when no token is known);
 * returns the tokens read, or -1 with err set (a library built without the
 * model).  hm_embedder_info: the model's name and what it is, one line. */
HM_API int hm_embed(const char *text, int len, float *out, int dim, char *err, int errlen);
HM_API const char *hm_embedder_info(void);

/* cdef-end */

#endif /* HEAPMEM_H */
