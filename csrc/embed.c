/*
 * embed.c: the static embedder (potion-base-8M, MinishLab, MIT) and the
 * vectors of the store.
 *
 * Owns: the model the library carries (csrc/potion/potion-base-8M.hmv,
 * assembled into the library by setup.py; csrc/potion/make.py says its
 * format), the tokenizer (BERT's uncased normaliser and pre-tokenizer, then
 * WordPiece, as potion-base-8M's tokenizer.json asks), the encoder (the mean
 * of the tokens' rows, unit length), the vector formats of the vectors table
 * and the cosine over them, and each connection's vector cache (hv_*: a
 * namespace's vectors in memory, kept as current as the file's vector_stamps
 * say).  heapmem.h exports hm_embed and hm_embedder_info; the SQL functions
 * heap_embed, heap_tokens, heap_embedder and heap_cosine are in sqlfuncs.c's
 * manner below.
 * Relies on: unicode.h (generated), hm_errf.
 *
 * A text's vector is what model2vec's StaticModel.encode gives, except
 * where the tokenizer differs from Hugging Face's (bench/RESULTS.md 11.1
 * lists the differences measured): text that spells a special token
 * ("[MASK]") is read as text, not as that token; Unicode is that of the
 * tables in unicode.h; a combining mark of a class other than Mn keeps its
 * place as written (no canonical reordering); and a text is cut at 512
 * tokens, where model2vec first cuts the string at 512 x its median token
 * length.
 *
 * Vector formats, told apart by their first 4 bytes (a float32 NaN, which
 * no float32 vector of the store holds):
 *   float32   dim x float32: what a Python embedder gives (E5Small, MiniLM)
 *   int4      'h', 4, 0xC8, 0x7F, then dim / 2 bytes, two components to a
 *             byte (low nibble first), each the component over the largest,
 *             x 7, plus 8: potion-base-8M's in the store (132 bytes; on
 *             LoCoMo it ranks as float32 does, bench/RESULTS.md 11)
 *   int8      'h', 8, 0xC8, 0x7F, then dim x int8 (x 127): heap_embed(text,
 *             'int8'), read as the others are
 */

#pragma region static embedder

#include "unicode.h"

#define HE_MAX_TOKENS 512
#define HE_MAX_WORD_CHARS 100 /* WordPiece's max_input_chars_per_word */
#define HE_NAME HM_BUILTIN_EMBEDDER

#if defined(HM_MODEL_FILE) && defined(__ELF__)
__asm__(".section .rodata\n"
        ".globl hm_model_blob\n.hidden hm_model_blob\n.balign 16\n"
        "hm_model_blob:\n.incbin \"" HM_MODEL_FILE "\"\n"
        ".globl hm_model_blob_end\n.hidden hm_model_blob_end\nhm_model_blob_end:\n"
        ".byte 0\n.previous\n");
#define HE_HAVE_MODEL 1
#elif defined(HM_MODEL_FILE) && defined(__APPLE__)
__asm__(".section __TEXT,__const\n"
        ".globl _hm_model_blob\n.private_extern _hm_model_blob\n.p2align 4\n"
        "_hm_model_blob:\n.incbin \"" HM_MODEL_FILE "\"\n"
        ".globl _hm_model_blob_end\n.private_extern _hm_model_blob_end\n_hm_model_blob_end:\n"
        ".byte 0\n.text\n");
#define HE_HAVE_MODEL 1
#endif

#ifdef HE_HAVE_MODEL
extern const unsigned char hm_model_blob[] __attribute__((visibility("hidden")));
extern const unsigned char hm_model_blob_end[] __attribute__((visibility("hidden")));
#endif

typedef struct {
  u32 ntok, dim, unk, slots, maxlen;
  const char *vocab;
  const u32 *offs, *slot;
  const float *scale;
  const int8_t *rows;
} he_model;

/* The model the library carries, its header checked once; NULL when the
 * library was built without it (or it is not the format this code reads). */
static const he_model *he_get(void) {
#ifdef HE_HAVE_MODEL
  static he_model m;
  static int state; /* 0 unread, 1 good, -1 bad: the same answer from any thread */
  int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
  if (s) return s > 0 ? &m : NULL;
  const unsigned char *b = hm_model_blob;
  size_t size = (size_t)(hm_model_blob_end - hm_model_blob);
  he_model t;
  u32 h[7];
  int ok = size >= 68 && !memcmp(b, "HMSTATIC", 8);
  if (ok) {
    memcpy(h, b + 8, sizeof h);
    t.ntok = h[1]; t.dim = h[2]; t.unk = h[3]; t.slots = h[5]; t.maxlen = h[6];
    size_t off = 68, vbytes = h[4];
    ok = h[0] == 1 && t.dim == HM_EMBED_DIM && t.ntok > 0 && t.unk < t.ntok &&
         vbytes % 4 == 0 && t.slots && !(t.slots & (t.slots - 1)) &&
         size == off + vbytes + 4ull * t.ntok + 4ull * t.slots + 4ull * t.ntok +
                     (size_t)t.ntok * t.dim;
    if (ok) {
      t.vocab = (const char *)b + off;
      t.offs = (const u32 *)(const void *)(b + off + vbytes);
      t.slot = t.offs + t.ntok;
      t.scale = (const float *)(const void *)(t.slot + t.slots);
      t.rows = (const int8_t *)(const void *)(t.scale + t.ntok);
      m = t;
    }
  }
  __atomic_store_n(&state, ok ? 1 : -1, __ATOMIC_RELEASE);
  return ok ? &m : NULL;
#else
  return NULL;
#endif
}

/* -- the tokenizer -------------------------------------------------------------------- */

/* The next code point of s[*i..n), *i moved past it; a malformed sequence
 * reads as U+FFFD (which the normaliser drops). */
static u32 he_decode(const unsigned char *s, int n, int *i) {
  unsigned char c = s[*i];
  if (c < 0x80) { (*i)++; return c; }
  int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (!len || *i + len > n || c > 0xF4) { (*i)++; return 0xFFFD; }
  u32 cp = c & (0x3F >> (len - 1));
  for (int k = 1; k < len; k++) {
    if ((s[*i + k] & 0xC0) != 0x80) { (*i)++; return 0xFFFD; }
    cp = (cp << 6) | (s[*i + k] & 0x3F);
  }
  static const u32 least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
    (*i)++;
    return 0xFFFD;
  }
  *i += len;
  return cp;
}

static int he_encode_utf8(u32 cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int he_in_ranges(const uint32_t (*r)[2], int n, u32 cp) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (cp < r[mid][0]) hi = mid - 1;
    else if (cp > r[mid][1]) lo = mid + 1;
    else return 1;
  }
  return 0;
}

static const hu_entry *he_mapped(u32 cp) {
  int lo = 0, hi = (int)(sizeof hu_map / sizeof hu_map[0]) - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (cp < hu_map[mid].cp) hi = mid - 1;
    else if (cp > hu_map[mid].cp) lo = mid + 1;
    else return &hu_map[mid];
  }
  return NULL;
}

static int he_is_cjk(u32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int he_is_punct(u32 c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  return he_in_ranges(hu_punct, (int)(sizeof hu_punct / sizeof hu_punct[0]), c);
}

/* The id of a token (with "##" before it when cont), or -1. */
static int he_lookup(const he_model *m, const char *s, int n, int cont) {
  if (n + 2 * cont > (int)m->maxlen) return -1;
  u32 h = 0x811C9DC5u;
  if (cont) h = ((h ^ '#') * 0x01000193u ^ '#') * 0x01000193u;
  for (int i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x01000193u;
  for (u32 j = h & (m->slots - 1);; j = (j + 1) & (m->slots - 1)) {
    u32 id1 = m->slot[j];
    if (!id1) return -1;
    const char *t = m->vocab + m->offs[id1 - 1];
    if (cont) {
      if (t[0] != '#' || t[1] != '#') continue;
      t += 2;
    }
    if (!strncmp(t, s, (size_t)n) && t[n] == 0) return (int)(id1 - 1);
  }
}

typedef struct {
  const he_model *m;
  int *ids; /* out: token ids, [UNK] dropped */
  int n, cap;
  char word[4 * HE_MAX_WORD_CHARS + 8]; /* the word being read, normalised */
  int wlen, wchars, wlong;              /* its bytes, characters; longer than 100 */
} he_tok;

/* WordPiece over the word read, greedy longest-match-first; a word with a
 * piece not in the vocabulary, or of over 100 characters, is [UNK]: dropped. */
static void he_wordpiece(he_tok *t) {
  const he_model *m = t->m;
  int len = t->wlen, start = 0, first = t->n;
  if (!len) return;
  if (t->wlong) goto unknown;
  while (start < len) {
    int end = len, id = -1;
    if (end - start > (int)m->maxlen) end = start + (int)m->maxlen;
    while (end > start) {
      while (end > start && end < len && ((unsigned char)t->word[end] & 0xC0) == 0x80) end--;
      if (end <= start) break;
      if ((id = he_lookup(m, t->word + start, end - start, start > 0)) >= 0) break;
      end--;
    }
    if (id < 0) goto unknown;
    if (t->n < t->cap && id != (int)m->unk) t->ids[t->n++] = id;
    start = end;
  }
  t->wlen = t->wchars = t->wlong = 0;
  return;
unknown:
  t->n = first;
  t->wlen = t->wchars = t->wlong = 0;
}

/* one normalised code point: part of a word, a word of its own
 * (punctuation, CJK), or a break (white space) */
static void he_put(he_tok *t, u32 cp, int alone) {
  if (cp == ' ') { he_wordpiece(t); return; }
  if (alone || he_is_punct(cp)) {
    he_wordpiece(t);
    t->wlen = he_encode_utf8(cp, t->word);
    t->wchars = 1;
    he_wordpiece(t);
    return;
  }
  if (t->wchars >= HE_MAX_WORD_CHARS) { t->wlong = 1; return; }
  t->wlen += he_encode_utf8(cp, t->word + t->wlen);
  t->wchars++;
}

/* The token ids of text (at most cap), [UNK] dropped: their number.
 * m: the model; text, len: the text and its bytes; ids: where the ids go. */
static int he_tokenize(const he_model *m, const char *text, int len, int *ids, int cap) {
  he_tok t = {.m = m, .ids = ids, .cap = cap};
  const unsigned char *s = (const unsigned char *)text;
  for (int i = 0; i < len && t.n < cap;) {
    u32 cp = he_decode(s, len, &i);
    if (cp < 0x80) {
      if (cp == '\t' || cp == '\n' || cp == '\r' || cp == ' ') he_put(&t, ' ', 0);
      else if (cp < 0x20 || cp == 0x7F) continue; /* control: dropped */
      else he_put(&t, cp >= 'A' && cp <= 'Z' ? cp + 32 : cp, 0);
      continue;
    }
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* a Hangul syllable: its jamo (NFD) */
      u32 k = cp - 0xAC00;
      he_put(&t, 0x1100 + k / 588, 0);
      he_put(&t, 0x1161 + (k % 588) / 28, 0);
      if (k % 28) he_put(&t, 0x11A7 + k % 28, 0);
      continue;
    }
    if (he_in_ranges(hu_drop, (int)(sizeof hu_drop / sizeof hu_drop[0]), cp)) continue;
    int cjk = he_is_cjk(cp);
    const hu_entry *e = he_mapped(cp);
    if (!e) { he_put(&t, cp, cjk); continue; }
    for (int j = 0; j < e->len;) { /* what it becomes: one or more code points */
      u32 c2 = he_decode(hu_pool + e->off, e->len, &j);
      he_put(&t, c2, cjk);
    }
  }
  if (t.n < cap) he_wordpiece(&t);
  return t.n;
}

/* -- the encoder -------------------------------------------------------------------- */

/* The unit vector of text into out[dim] (zero when no token is known):
 * the number of tokens, or -1 with err set.
 * len: text's bytes. */
HM_API int hm_embed(const char *text, int len, float *out, int dim, char *err, int errlen) {
  const he_model *m = he_get();
  if (!m) {
    hm_errf(err, errlen, "this heapmem library was built without its embedding model "
                         "(potion-base-8M)");
    return -1;
  }
  if (dim != (int)m->dim) {
    hm_errf(err, errlen, "the model's vectors have 256 dimensions");
    return -1;
  }
  if (len < 0) len = (int)strlen(text);
  int ids[HE_MAX_TOKENS];
  int n = he_tokenize(m, text, len, ids, HE_MAX_TOKENS);
  for (int d = 0; d < dim; d++) out[d] = 0.0f;
  for (int k = 0; k < n; k++) {
    const int8_t *row = m->rows + (size_t)ids[k] * m->dim;
    float s = m->scale[ids[k]];
    for (int d = 0; d < dim; d++) out[d] += s * (float)row[d];
  }
  double ss = 0;
  for (int d = 0; d < dim; d++) ss += (double)out[d] * out[d];
  if (ss > 0) {
    float inv = (float)(1.0 / sqrt(ss));
    for (int d = 0; d < dim; d++) out[d] *= inv;
  }
  return n;
}

/* The tokens of text as the model reads them (a JSON array of strings, into
 * out of outlen bytes): the bytes written, or -1 (no model, or out too small). */
static int he_tokens_json(const char *text, int len, sqlite3_str *out) {
  const he_model *m = he_get();
  if (!m) return -1;
  int ids[HE_MAX_TOKENS];
  int n = he_tokenize(m, text, len, ids, HE_MAX_TOKENS);
  sqlite3_str_appendchar(out, 1, '[');
  for (int k = 0; k < n; k++) {
    if (k) sqlite3_str_appendchar(out, 1, ',');
    const char *tok = m->vocab + m->offs[ids[k]];
    hq_json_string(out, tok, (int)strlen(tok));
  }
  sqlite3_str_appendchar(out, 1, ']');
  return n;
}

/* -- vector formats ------------------------------------------------------------------- */

static const unsigned char hv_int8_magic[4] = {'h', 8, 0xC8, 0x7F};
static const unsigned char hv_int4_magic[4] = {'h', 4, 0xC8, 0x7F};

/* v[dim] (dim even) as the int4 format, into out[4 + dim / 2]. */
static void hv_to_int4(const float *v, int dim, unsigned char *out) {
  float big = 0;
  for (int d = 0; d < dim; d++) big = fabsf(v[d]) > big ? fabsf(v[d]) : big;
  memcpy(out, hv_int4_magic, 4);
  float k = big > 0 ? 7.0f / big : 0.0f;
  for (int d = 0; d < dim; d += 2) {
    long a = lrintf(v[d] * k), b = lrintf(v[d + 1] * k);
    a = a > 7 ? 7 : a < -7 ? -7 : a;
    b = b > 7 ? 7 : b < -7 ? -7 : b;
    out[4 + d / 2] = (unsigned char)((a + 8) | ((b + 8) << 4));
  }
}

/* the int4 format's components as int8 values (-7 to 7) */
static void hv_unpack4(const unsigned char *b, int dim, int8_t *q) {
  for (int d = 0; d < dim; d += 2) {
    q[d] = (int8_t)((b[d / 2] & 15) - 8);
    q[d + 1] = (int8_t)((b[d / 2] >> 4) - 8);
  }
}

/* v[dim] (unit length) as the int8 format, into out[4 + dim]. */
static void hv_to_int8(const float *v, int dim, unsigned char *out) {
  float big = 0;
  for (int d = 0; d < dim; d++) big = fabsf(v[d]) > big ? fabsf(v[d]) : big;
  memcpy(out, hv_int8_magic, 4);
  float k = big > 0 ? 127.0f / big : 0.0f;
  for (int d = 0; d < dim; d++) {
    long q = lrintf(v[d] * k);
    out[4 + d] = (unsigned char)(int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
  }
}

/* A stored vector of the store's dimension, read as int8 values into
 * q[dim] (a float32 one is quantised as the int8 format is): 0, or -1 when
 * the blob is neither format at this dimension. */
static int hv_read(const void *blob, int bytes, int dim, int8_t *q) {
  const unsigned char *b = blob;
  if (dim % 2 == 0 && bytes == 4 + dim / 2 && !memcmp(b, hv_int4_magic, 4)) {
    hv_unpack4(b + 4, dim, q);
    return 0;
  }
  if (bytes == 4 + dim && !memcmp(b, hv_int8_magic, 4)) {
    memcpy(q, b + 4, (size_t)dim);
    return 0;
  }
  if (bytes == 4 * dim) {
    float v[HM_MAX_DIM];
    if (dim > HM_MAX_DIM) return -1;
    memcpy(v, b, (size_t)bytes);
    for (int d = 0; d < dim; d++)
      if (!isfinite(v[d])) return -1;
    unsigned char tmp[4 + HM_MAX_DIM];
    hv_to_int8(v, dim, tmp);
    memcpy(q, tmp + 4, (size_t)dim);
    return 0;
  }
  return -1;
}

/* A vector blob as floats into v[*dim] (either format; dim found from it):
 * 0, or -1 when it is not one. */
static int hv_floats(const void *blob, int bytes, float *v, int *dim) {
  const unsigned char *b = blob;
  if (bytes > 4 && 2 * (bytes - 4) <= HM_MAX_DIM && !memcmp(b, hv_int4_magic, 4)) {
    *dim = 2 * (bytes - 4);
    int8_t q[HM_MAX_DIM];
    hv_unpack4(b + 4, *dim, q);
    for (int d = 0; d < *dim; d++) v[d] = (float)q[d];
    return 0;
  }
  if (bytes > 4 && bytes - 4 <= HM_MAX_DIM && !memcmp(b, hv_int8_magic, 4)) {
    *dim = bytes - 4;
    for (int d = 0; d < *dim; d++) v[d] = (float)(int8_t)b[4 + d];
    return 0;
  }
  if (bytes > 0 && bytes % 4 == 0 && bytes / 4 <= HM_MAX_DIM) {
    *dim = bytes / 4;
    memcpy(v, b, (size_t)bytes);
    for (int d = 0; d < *dim; d++)
      if (!isfinite(v[d])) return -1;
    return 0;
  }
  return -1;
}

#pragma endregion

#pragma region vector cache

/* Each connection keeps, per namespace it recalled in, that namespace's
 * vectors in buckets: bucket 0 the vectors no partition holds (a namespace
 * without a vector index: all of them, in seq order, scanned whole: the
 * exact top N), then one bucket per partition of the namespace's vector index
 * (vindex.c), in partition id order, each in seq order.  A row is the
 * vector's components as the file holds them (fmt 4: the int4 format's
 * nibbles, two to a byte; fmt 8: int8, for any other format), its inverse
 * norm, its memory's seq, kind (an index into the entry's kinds) and
 * created_at, so that recall's filters apply while scanning.
 *
 * A namespace's row of vector_stamps counts the vectors added to it and the
 * other changes (a vector replaced or deleted, a memory forgotten or
 * moved), and its vector_index row the newest partition id: added alone
 * moved means new rows (seq grows), read on their own into their buckets.
 * In an indexed namespace anything else is read partition by partition: a
 * partition id is never given twice, and a partition's stamp moves when a
 * vector leaves it (or joins it among older rows), so the partitions of new
 * ids or moved stamps are read, the ones gone dropped, the others kept.
 * Without an index (or with vectors in bucket 0) a change other than an
 * add reads the namespace again.
 * Rows read inside a write transaction are used once and never kept (a
 * rollback could undo them).  At most HV_BYTES in all; the namespace used
 * longest ago goes first. */
#define HV_BYTES (256u << 20)
#define HV_SLOTS 64
#define HV_KIND_OTHER 65535 /* the kinds past the 65,535th of a namespace */
#define HV_CENT_SLOTS 8

typedef struct {
  i64 id;    /* the partition (vector_centroids.part); 0: no partition */
  i64 stamp; /* its stamp as read (vector_centroids.stamp) */
  int n, cap;
  i64 *seq;
  unsigned char *code; /* n x the entry's stride */
  float *inv;
  uint16_t *kind;
  double *at;
  unsigned char *sign; /* the sign plane (hv_has_sign), or NULL */
  int signed_n;        /* its rows written: the first scan of the bucket writes the rest */
  int live;            /* rows with a vector (inv not 0) */
} hv_bucket;

typedef struct {
  char *ns;
  i64 added, changed, version, last; /* the stamps the rows are of; last: the highest seq read */
  int keep; /* 0: read inside a write transaction, read again next time */
  int dim, fmt, stride;
  int nb;        /* buckets: [0] no partition, [1..nb) the partitions in id order */
  hv_bucket *b;
  int8_t *cent;  /* the partitions' centroids, (nb - 1) x dim */
  float *cinv;
  char **kinds;  /* the kinds seen, by index */
  int nkinds;
  size_t bytes;
  u64 used;
} hv_ns;

/* A namespace's centroids, as the triggers' heap_vector_part reads them:
 * kept by their digest (the same digest, the same centroids, whatever the
 * transaction). */
typedef struct {
  char *ns;
  u64 digest;
  int n, dim;
  i64 *id;
  int8_t *c;
  float *inv;
  int *sum; /* each centroid's components summed (hv_nearest_small), or NULL */
  u64 used;
} hv_cents;

typedef struct {
  hv_ns slot[HV_SLOTS];
  hv_cents cents[HV_CENT_SLOTS];
  u64 tick;
  size_t bytes;
} hv_cache;

/* The sign plane of a partition's rows, what hv_sign_scan reads of every
 * row it passes: where the row's unit vector lies from its partition's
 * centroid's (the residual), each component's sign as one bit (set: 0 or
 * more), 32 bytes a row, and one factor, the residual's squared length over
 * its components' sizes summed (4 bytes), by which the residual's dot
 * product with a question is about the factor times the question's with the
 * signs.  Kept for the partitions of a namespace of the carried model's
 * int4 vectors, written when a probe first scans the partition's rows (a
 * connection's first recall pays only for the partitions it probes); laid
 * out for hv_sign_block: blocks of 32 rows, and in a
 * block, for each pair p of 4-component groups, 32 bytes, byte r holding
 * row r's group 2p in its low nibble and group 2p + 1 in its high one, then
 * the block's 32 factors (floats) in hv_sign_block's order (HV_SIGN_AT):
 * one stream of 1,152 bytes per 32 rows. */
#define HV_SIGN_ROW (HM_EMBED_DIM / 8)
#define HV_SIGN_BITS (32 * HV_SIGN_ROW)                   /* a block's signs */
#define HV_SIGN_BLOCK (HV_SIGN_BITS + 32 * sizeof(float)) /* and its factors */
#define HV_SIGN_FAC(block) ((float *)(void *)((block) + HV_SIGN_BITS))
/* the place of a block's row r in hv_sign_block's order: even rows 0-14,
 * 16-30, then odd rows 1-15, 17-31 (as AVX2 widens 16 lanes at a time) */
#define HV_SIGN_AT(r) ((r) % 2 * 16 + (r) / 16 * 8 + (r) % 16 / 2)

static int hv_has_sign(const hv_ns *e, const hv_bucket *b) {
  return b->id > 0 && e->fmt == 4 && e->dim == HM_EMBED_DIM;
}

/* What a row of bucket b of e costs the cache. */
static size_t hv_row_bytes(const hv_ns *e, const hv_bucket *b) {
  return (size_t)e->stride + sizeof(i64) + sizeof(float) + sizeof(uint16_t) + sizeof(double) +
         (hv_has_sign(e, b) ? HV_SIGN_BLOCK / 32 : 0);
}

static void hv_bucket_free(hv_bucket *b) {
  sqlite3_free(b->seq);
  sqlite3_free(b->code);
  sqlite3_free(b->inv);
  sqlite3_free(b->kind);
  sqlite3_free(b->at);
  sqlite3_free(b->sign);
  memset(b, 0, sizeof *b);
}

/* Bucket b of e freed, its bytes given back. */
static void hv_bucket_release(hv_cache *c, hv_ns *e, hv_bucket *b) {
  size_t bytes = (size_t)b->cap * hv_row_bytes(e, b);
  c->bytes -= bytes;
  e->bytes -= bytes;
  hv_bucket_free(b);
}

/* e emptied of its rows, centroids and kinds (its name and stamps kept) */
static void hv_clear(hv_cache *c, hv_ns *e) {
  for (int i = 0; i < e->nb; i++) hv_bucket_free(&e->b[i]);
  sqlite3_free(e->b);
  sqlite3_free(e->cent);
  sqlite3_free(e->cinv);
  for (int i = 0; i < e->nkinds; i++) sqlite3_free(e->kinds[i]);
  sqlite3_free(e->kinds);
  e->b = NULL;
  e->cent = NULL;
  e->cinv = NULL;
  e->kinds = NULL;
  e->nb = e->nkinds = 0;
  e->last = 0;
  c->bytes -= e->bytes;
  e->bytes = 0;
}

static void hv_drop(hv_cache *c, hv_ns *e) {
  hv_clear(c, e);
  sqlite3_free(e->ns);
  memset(e, 0, sizeof *e);
}

static void hv_cents_drop(hv_cents *s) {
  sqlite3_free(s->ns);
  sqlite3_free(s->id);
  sqlite3_free(s->c);
  sqlite3_free(s->inv);
  sqlite3_free(s->sum);
  memset(s, 0, sizeof *s);
}

static void hv_free(hv_cache *c) {
  if (!c) return;
  for (int i = 0; i < HV_SLOTS; i++)
    if (c->slot[i].ns) hv_drop(c, &c->slot[i]);
  for (int i = 0; i < HV_CENT_SLOTS; i++) hv_cents_drop(&c->cents[i]);
  sqlite3_free(c);
}

/* The cache's entry for ns (made empty when new): NULL when out of memory. */
static hv_ns *hv_entry(hv_cache *c, const char *ns, int dim) {
  hv_ns *free_slot = NULL, *oldest = NULL;
  for (int i = 0; i < HV_SLOTS; i++) {
    hv_ns *e = &c->slot[i];
    if (!e->ns) { if (!free_slot) free_slot = e; continue; }
    if (!strcmp(e->ns, ns)) {
      if (e->dim != dim) { hv_drop(c, e); free_slot = e; break; }
      e->used = ++c->tick;
      return e;
    }
    if (!oldest || e->used < oldest->used) oldest = e;
  }
  hv_ns *e = free_slot ? free_slot : oldest;
  if (e->ns) hv_drop(c, e);
  e->ns = sqlite3_mprintf("%s", ns);
  if (!e->ns) return NULL;
  e->dim = dim;
  e->added = e->changed = e->version = -1;
  e->used = ++c->tick;
  return e;
}

/* Room for one more row in bucket b of e (and under HV_BYTES in all,
 * dropping the namespaces used longest ago): 0, or SQLITE_NOMEM. */
static int hv_grow(hv_cache *c, hv_ns *e, hv_bucket *b) {
  if (b->n < b->cap) return SQLITE_OK;
  int cap = b->cap ? 2 * b->cap : 64;
  size_t row = hv_row_bytes(e, b);
  while (c->bytes + (size_t)(cap - b->cap) * row > HV_BYTES) {
    hv_ns *oldest = NULL;
    for (int i = 0; i < HV_SLOTS; i++)
      if (c->slot[i].ns && &c->slot[i] != e && (!oldest || c->slot[i].used < oldest->used))
        oldest = &c->slot[i];
    if (!oldest) break; /* this namespace alone: let it have what it needs */
    hv_drop(c, oldest);
  }
#define HV_REALLOC(field, size)                                                                \
  do {                                                                                         \
    void *p = sqlite3_realloc64(b->field, (sqlite3_uint64)cap * (size));                       \
    if (!p) return SQLITE_NOMEM;                                                               \
    b->field = p;                                                                              \
  } while (0)
  HV_REALLOC(seq, sizeof(i64));
  HV_REALLOC(code, (size_t)e->stride);
  HV_REALLOC(inv, sizeof(float));
  HV_REALLOC(kind, sizeof(uint16_t));
  HV_REALLOC(at, sizeof(double));
  if (hv_has_sign(e, b)) { /* cap: a multiple of 32; rows past n zero */
    HV_REALLOC(sign, HV_SIGN_BLOCK / 32);
    memset(b->sign + (size_t)b->cap / 32 * HV_SIGN_BLOCK, 0,
           (size_t)(cap - b->cap) / 32 * HV_SIGN_BLOCK);
  }
#undef HV_REALLOC
  c->bytes += (size_t)(cap - b->cap) * row;
  e->bytes += (size_t)(cap - b->cap) * row;
  b->cap = cap;
  return SQLITE_OK;
}

/* The index of kind among e's kinds (added when new; HV_KIND_OTHER past the
 * 65,535th): -1 when out of memory. */
static int hv_kind_id(hv_ns *e, const char *kind) {
  for (int i = e->nkinds - 1; i >= 0; i--)
    if (!strcmp(e->kinds[i], kind)) return i;
  if (e->nkinds >= HV_KIND_OTHER) return HV_KIND_OTHER;
  if ((e->nkinds & (e->nkinds - 1)) == 0) { /* 0, 1, 2, 4, ...: room doubles */
    char **k = sqlite3_realloc64(e->kinds, (sqlite3_uint64)(e->nkinds ? 2 * e->nkinds : 1) *
                                               sizeof *k);
    if (!k) return -1;
    e->kinds = k;
  }
  if (!(e->kinds[e->nkinds] = sqlite3_mprintf("%s", kind))) return -1;
  return e->nkinds++;
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* the dot product of an int8 row with a vector widened to int16 (q16), in
 * SSE2 (every x86-64 has it) when dim is a multiple of 16: about 20 ns a
 * row of 256, near what the memory gives */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int hv_dot16(const int8_t *a, const int16_t *q16, int dim) {
#if defined(__SSE2__)
  if (dim % 16 == 0) {
    __m128i acc = _mm_setzero_si128(), zero = _mm_setzero_si128();
    for (int d = 0; d < dim; d += 16) {
      __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(a + d));
      __m128i sign = _mm_cmpgt_epi8(zero, x);
      __m128i lo = _mm_unpacklo_epi8(x, sign), hi = _mm_unpackhi_epi8(x, sign);
      acc = _mm_add_epi32(acc, _mm_madd_epi16(
                                   lo, _mm_loadu_si128((const __m128i *)(const void *)(q16 + d))));
      acc = _mm_add_epi32(acc, _mm_madd_epi16(
                                   hi, _mm_loadu_si128((const __m128i *)(const void *)(q16 + d + 8))));
    }
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4E));
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xB1));
    return _mm_cvtsi128_si32(acc);
  }
#endif
  int s = 0;
  for (int d = 0; d < dim; d++) s += (int)a[d] * (int)q16[d];
  return s;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(_WIN32)
#include <immintrin.h>
#define HV_AVX2 1
/* n int8 rows of the carried model's dimension against q16, in AVX2: twice
 * the width of hv_dot16 (the machines that have it are checked at run time) */
__attribute__((target("avx2"))) static void hv_dots_avx2(const int8_t *v, const int16_t *q16,
                                                         int n, int *out) {
  for (int i = 0; i < n; i++) {
    const int8_t *a = v + (size_t)i * HM_EMBED_DIM;
    __m256i acc = _mm256_setzero_si256();
    for (int d = 0; d < HM_EMBED_DIM; d += 16) {
      __m256i a16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(a + d)));
      __m256i b16 = _mm256_loadu_si256((const __m256i *)(const void *)(q16 + d));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a16, b16));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    out[i] = _mm_cvtsi128_si32(s);
  }
}

/* The sum of s's sixteen int16 lanes, as an int. */
__attribute__((target("avx2"))) static inline int hv_hsum16_avx2(__m256i s) {
  __m256i w = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
  return _mm_cvtsi128_si32(x);
}

/* n int4 rows of the carried model's dimension (128 bytes: each byte's low
 * nibble a component of even index, its high nibble the next, both + 8)
 * against the query's even (qe) and odd (qo) components: sum(nibble x q),
 * the rows' dot products plus 8 x sum(q).  u8 x s8 pairs (maddubs) of at
 * most 2 x 15 x 127 each, eight of them summed per lane: 30,480, inside
 * int16. */
__attribute__((target("avx2"))) static void hv_dots4_avx2(const unsigned char *v,
                                                          const int8_t *qe, const int8_t *qo,
                                                          int n, int *out) {
  const __m256i m = _mm256_set1_epi8(15);
  __m256i e[4], o[4];
  for (int j = 0; j < 4; j++) {
    e[j] = _mm256_loadu_si256((const __m256i *)(const void *)(qe + 32 * j));
    o[j] = _mm256_loadu_si256((const __m256i *)(const void *)(qo + 32 * j));
  }
  for (int i = 0; i < n; i++) {
    const unsigned char *a = v + (size_t)i * (HM_EMBED_DIM / 2);
    __m256i s = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
      __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(a + 32 * j));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(b, m), e[j]));
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(
                                  _mm256_and_si256(_mm256_srli_epi16(b, 4), m), o[j]));
    }
    out[i] = hv_hsum16_avx2(s);
  }
}
#endif

#ifdef HV_AVX2
/* n int8 rows of the carried model's dimension against a vector of small
 * components (-8 to 7) given as u = v + 8 (0 to 15): sum(u x row) per row,
 * the dot product plus 8 x the row's sum.  u8 x s8 pairs (maddubs) of at most
 * 2 x 15 x 128 = 3,840, eight of them a lane: 30,720, inside int16.  Half the
 * instructions of hv_dots_avx2 (no widening), and u stays in registers. */
__attribute__((target("avx2"))) static void hv_dots_small_avx2(const int8_t *rows,
                                                               const uint8_t *u, int n,
                                                               int *out) {
  __m256i q[HM_EMBED_DIM / 32];
  for (int j = 0; j < HM_EMBED_DIM / 32; j++)
    q[j] = _mm256_loadu_si256((const __m256i *)(const void *)(u + 32 * j));
  for (int i = 0; i < n; i++) {
    const int8_t *a = rows + (size_t)i * HM_EMBED_DIM;
    __m256i s = _mm256_setzero_si256();
    for (int j = 0; j < HM_EMBED_DIM / 32; j++)
      s = _mm256_add_epi16(s, _mm256_maddubs_epi16(
                                  q[j], _mm256_loadu_si256((const __m256i *)(const void *)(a + 32 * j))));
    out[i] = hv_hsum16_avx2(s);
  }
}
#endif

/* Whether the AVX2 kernels run: the machine has AVX2 and the environment
 * does not set HEAPMEM_NO_AVX2 (the tests compare the portable C with them:
 * the same integers and floats, so the same tops). */
static int hv_has_avx2(void) {
#ifdef HV_AVX2
  static int avx2 = -1;
  if (avx2 < 0) {
    const char *no = getenv("HEAPMEM_NO_AVX2");
    avx2 = __builtin_cpu_supports("avx2") && !(no && *no && strcmp(no, "0")) ? 1 : 0;
  }
  return avx2;
#else
  return 0;
#endif
}

/* A question ready for the dot products of one entry's rows: its int8
 * components (q8), widened (q16), split into even and odd (qe, qo: fmt 4),
 * their sum, and its inverse norm. */
typedef struct {
  int dim, fmt, sum;
  int16_t q16[HM_MAX_DIM];
  int8_t qe[HM_MAX_DIM / 2], qo[HM_MAX_DIM / 2];
  float inv;
} hv_query;

static float hv_inv_norm(const int8_t *v, int dim) {
  int s = 0;
  for (int d = 0; d < dim; d++) s += (int)v[d] * (int)v[d];
  return s > 0 ? (float)(1.0 / sqrt((double)s)) : 0.0f;
}

/* The square of an int4 component (0..15 stored for -8..7), by its nibble. */
#define HV_SQ4 64, 49, 36, 25, 16, 9, 4, 1, 0, 1, 4, 9, 16, 25, 36, 49
#ifdef HV_AVX2
/* hv_inv_norm4's sum for a row of the carried model's dimension, 32 bytes
 * at a time: each nibble's square looked up (shuffle), a byte's two added (at
 * most 128: still a byte) and the bytes summed (sad against zero). */
__attribute__((target("avx2"))) static int hv_sumsq4_avx2(const unsigned char *b) {
  const __m256i sq = _mm256_setr_epi8(HV_SQ4, HV_SQ4);
  const __m256i m = _mm256_set1_epi8(15);
  __m256i acc = _mm256_setzero_si256();
  for (int j = 0; j < HM_EMBED_DIM / 64; j++) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32 * j));
    __m256i lo = _mm256_shuffle_epi8(sq, _mm256_and_si256(v, m));
    __m256i hi = _mm256_shuffle_epi8(sq, _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_add_epi8(lo, hi), _mm256_setzero_si256()));
  }
  __m128i h = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
}
#endif

/* hv_inv_norm of an int4 row (dim components packed two a byte, as
 * hv_unpack4 reads them) without unpacking it: the same integer sum of
 * squares, a byte's two squares looked up.  A namespace's first read into
 * the cache does it for every row (RESULTS 30.4, 32). */
static float hv_inv_norm4(const unsigned char *b, int dim) {
  static const unsigned char sq[16] = {HV_SQ4};
  int s = 0;
#ifdef HV_AVX2
  if (dim == HM_EMBED_DIM && hv_has_avx2()) s = hv_sumsq4_avx2(b);
  else
#endif
    for (int d = 0; d < dim / 2; d++) s += sq[b[d] & 15] + sq[b[d] >> 4];
  return s > 0 ? (float)(1.0 / sqrt((double)s)) : 0.0f;
}

static void hv_query_make(hv_query *q, const int8_t *q8, int dim, int fmt) {
  q->dim = dim;
  q->fmt = fmt;
  q->sum = 0;
  for (int d = 0; d < dim; d++) {
    q->q16[d] = q8[d];
    q->sum += q8[d];
    if (d % 2 == 0) q->qe[d / 2] = q8[d];
    else q->qo[d / 2] = q8[d];
  }
  q->inv = hv_inv_norm(q8, dim);
}

/* the dot products of n rows (the entry's format) with q, into out */
static void hv_dots(const unsigned char *rows, int n, const hv_query *q, int *out) {
  if (q->fmt == 4) {
#ifdef HV_AVX2
    if (hv_has_avx2() && q->dim == HM_EMBED_DIM) {
      hv_dots4_avx2(rows, q->qe, q->qo, n, out);
      for (int i = 0; i < n; i++) out[i] -= 8 * q->sum;
      return;
    }
#endif
    int half = q->dim / 2;
    for (int i = 0; i < n; i++) {
      const unsigned char *a = rows + (size_t)i * (size_t)half;
      int s = 0;
      for (int d = 0; d < half; d++)
        s += ((a[d] & 15) - 8) * q->qe[d] + ((a[d] >> 4) - 8) * q->qo[d];
      out[i] = s;
    }
    return;
  }
#ifdef HV_AVX2
  if (hv_has_avx2() && q->dim == HM_EMBED_DIM) {
    hv_dots_avx2((const int8_t *)rows, q->q16, n, out);
    return;
  }
#endif
  for (int i = 0; i < n; i++) {
    const int8_t *row = (const int8_t *)rows + (size_t)i * (size_t)q->dim;
    out[i] = q->dim == HM_EMBED_DIM ? hv_dot16(row, q->q16, HM_EMBED_DIM)
                                    : hv_dot16(row, q->q16, q->dim);
  }
}

/* The residual r = x inv - c cinv of a row x (its int4 code, inverse norm
 * inv) from a centroid c: its signs (bits, one a component, set: 0 or
 * more), and its squares (sq) and sizes (abs_sum) summed in 8 lanes
 * (component d in lane d % 8), so that hv_residual_avx2 gives the same
 * floats. */
static void hv_residual(const unsigned char *code, float inv, const int8_t *c, float cinv,
                        unsigned char *bits, float *sq, float *abs_sum) {
  int8_t x[HM_EMBED_DIM];
  hv_unpack4(code, HM_EMBED_DIM, x);
  for (int j = 0; j < 8; j++) sq[j] = abs_sum[j] = 0;
  for (int p = 0; p < HV_SIGN_ROW; p++) {
    unsigned v = 0;
    for (int j = 0; j < 8; j++) {
      int d = 8 * p + j;
      float r = (float)x[d] * inv - (float)c[d] * cinv;
      sq[j] += r * r;
      abs_sum[j] += fabsf(r);
      v |= (unsigned)(r >= 0) << j;
    }
    bits[p] = (unsigned char)v;
  }
}

#ifdef HV_AVX2
/* hv_residual, 8 components at a time, the code's nibbles unpacked 32 at
 * a time. */
__attribute__((target("avx2"))) static void hv_residual_avx2(const unsigned char *code,
                                                            float inv, const int8_t *c,
                                                            float cinv, unsigned char *bits,
                                                            float *sq, float *abs_sum) {
  const __m256 vi = _mm256_set1_ps(inv), ci = _mm256_set1_ps(cinv), zero = _mm256_setzero_ps(),
               sign = _mm256_set1_ps(-0.0f);
  const __m128i m = _mm_set1_epi8(15), eight = _mm_set1_epi8(8);
  __m256 s2 = zero, s1 = zero;
  for (int h = 0; h < HM_EMBED_DIM / 32; h++) { /* 16 bytes: components 32h..32h+31 */
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(code + 16 * h));
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    __m128i x[2] = {_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight),
                    _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight)};
    for (int k = 0; k < 4; k++) {
      int p = 4 * h + k;
      __m128i xb = k % 2 ? _mm_srli_si128(x[k / 2], 8) : x[k / 2];
      __m128i cb = _mm_loadl_epi64((const __m128i *)(const void *)(c + 8 * p));
      __m256 xv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(xb));
      __m256 cv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(cb));
      __m256 r = _mm256_sub_ps(_mm256_mul_ps(xv, vi), _mm256_mul_ps(cv, ci));
      s2 = _mm256_add_ps(s2, _mm256_mul_ps(r, r));
      s1 = _mm256_add_ps(s1, _mm256_andnot_ps(sign, r));
      bits[p] = (unsigned char)_mm256_movemask_ps(_mm256_cmp_ps(r, zero, _CMP_GE_OQ));
    }
  }
  _mm256_storeu_ps(sq, s2);
  _mm256_storeu_ps(abs_sum, s1);
}
#endif

/* Row i of bucket b of e into b's sign plane: its residual from the
 * centroid of b's partition. */
static void hv_sign_put(const hv_ns *e, hv_bucket *b, int i) {
  int part = (int)(b - e->b) - 1;
  const unsigned char *code = b->code + (size_t)i * (size_t)e->stride;
  const int8_t *c = e->cent + (size_t)part * HM_EMBED_DIM;
  unsigned char bits[HV_SIGN_ROW];
  float sq[8], abs_sum[8];
#ifdef HV_AVX2
  if (hv_has_avx2()) hv_residual_avx2(code, b->inv[i], c, e->cinv[part], bits, sq, abs_sum);
  else
#endif
    hv_residual(code, b->inv[i], c, e->cinv[part], bits, sq, abs_sum);
  float q = 0, a = 0;
  for (int j = 0; j < 8; j++) q += sq[j], a += abs_sum[j];
  /* byte p of bits: components 8p..8p+7, groups 2p (low nibble) and 2p + 1 */
  unsigned char *block = b->sign + (size_t)(i / 32) * HV_SIGN_BLOCK;
  for (int p = 0; p < HV_SIGN_ROW; p++) block[32 * p + i % 32] = bits[p];
  HV_SIGN_FAC(block)[HV_SIGN_AT(i % 32)] = a > 0 ? q / a : 0;
}

/* Row i of bucket b of e as int8 components, into out[e->dim]. */
static void hv_row8(const hv_ns *e, const hv_bucket *b, int i, int8_t *out) {
  const unsigned char *a = b->code + (size_t)i * (size_t)e->stride;
  if (e->fmt == 4) hv_unpack4(a, e->dim, out);
  else memcpy(out, a, (size_t)e->dim);
}

/* A vector blob added to bucket b of e (with its memory's seq, kind and
 * created_at): 0; 1 when it is not a vector of e's dimension; 2 when e
 * keeps int4 rows and the blob is another format (read e again as int8);
 * SQLITE_NOMEM.
 * c: the connection's cache; e: the namespace's entry; bytes: the blob's size;
 * at: created_at. */
static int hv_put(hv_cache *c, hv_ns *e, hv_bucket *b, i64 seq, const void *blob, int bytes,
                  const char *kind, double at) {
  int dim = e->dim;
  if (e->fmt == 4 && !(bytes == 4 + dim / 2 && !memcmp(blob, hv_int4_magic, 4))) return 2;
  if (hv_grow(c, e, b) != SQLITE_OK) return SQLITE_NOMEM;
  unsigned char *dst = b->code + (size_t)b->n * (size_t)e->stride;
  float inv;
  if (e->fmt == 4) {
    memcpy(dst, (const unsigned char *)blob + 4, (size_t)e->stride);
    inv = hv_inv_norm4(dst, dim);
  } else {
    int8_t row[HM_MAX_DIM];
    if (hv_read(blob, bytes, dim, row)) return 1;
    memcpy(dst, row, (size_t)dim);
    inv = hv_inv_norm(row, dim);
  }
  int k = hv_kind_id(e, kind ? kind : "");
  if (k < 0) return SQLITE_NOMEM;
  b->live += inv != 0;
  b->inv[b->n] = inv;
  b->seq[b->n] = seq;
  b->kind[b->n] = (uint16_t)k;
  b->at[b->n] = at;
  b->n++;
  if (seq > e->last) e->last = seq;
  return 0;
}

/* e's rows, in all its buckets (a probe's budget is a share of them). */
static i64 hv_rows(const hv_ns *e) {
  i64 rows = 0;
  for (int i = 0; i < e->nb; i++) rows += e->b[i].n;
  return rows;
}

/* The bucket of partition id in e (buckets 1.. in id order), or NULL. */
static hv_bucket *hv_bucket_of(hv_ns *e, i64 id) {
  if (id <= 0) return e->nb ? &e->b[0] : NULL;
  int lo = 1, hi = e->nb - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (e->b[mid].id < id) lo = mid + 1;
    else if (e->b[mid].id > id) hi = mid - 1;
    else return &e->b[mid];
  }
  return NULL;
}

/* The row of seq in bucket b, or -1 (rows are in seq order). */
static int hv_find(const hv_bucket *b, i64 seq) {
  int lo = 0, hi = b->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (b->seq[mid] < seq) lo = mid + 1;
    else if (b->seq[mid] > seq) hi = mid - 1;
    else return mid;
  }
  return -1;
}

/* What a recall's filters let through, as the cache reads them: kinds (by
 * e's kind indexes; NULL: any), created_at in [since, until). */
typedef struct {
  const unsigned char *kinds; /* e->nkinds + 1 flags, the last for HV_KIND_OTHER */
  int has_since, has_until;
  double since, until;
  /* a row of another kind than the first 65,535: whether its memory passes */
  int (*other)(void *ctx, i64 seq);
  void *ctx;
} hv_filter;

/* Whether row i of bucket b is of a kind the filter f keeps (f->kinds
 * set): by e's kind indexes, or, a kind past them, by f->other. */
static inline int hv_kind_allowed(const hv_ns *e, const hv_bucket *b, int i, const hv_filter *f) {
  int k = b->kind[i];
  if (k == HV_KIND_OTHER) return f->other ? f->other(f->ctx, b->seq[i]) : 0;
  return k < e->nkinds && f->kinds[k];
}

static int hv_allowed(const hv_ns *e, const hv_bucket *b, int i, const hv_filter *f) {
  if (!f) return 1;
  if (f->has_since && !(b->at[i] >= f->since)) return 0;
  if (f->has_until && !(b->at[i] < f->until)) return 0;
  return !f->kinds || hv_kind_allowed(e, b, i, f);
}

/* Row i's cosine with q, from its dot product: float, (dot x inv) x q->inv,
 * the one product both scans compare (hv_scan, hv_scan_block_avx2). */
static inline float hv_row_cos(const hv_bucket *b, int i, int dot, const hv_query *q) {
  return (float)dot * b->inv[i] * q->inv;
}

/* The best n so far: scores best first, ties by seq. */
typedef struct {
  int n, k;
  float *s;
  i64 *seq;
} hv_topn;

static void hv_topn_put(hv_topn *t, float x, i64 seq) {
  if (t->k == t->n && (x < t->s[t->k - 1] || (x == t->s[t->k - 1] && seq > t->seq[t->k - 1])))
    return;
  int j = t->k < t->n ? t->k++ : t->n - 1;
  while (j > 0 && (t->s[j - 1] < x || (t->s[j - 1] == x && t->seq[j - 1] > seq))) {
    t->s[j] = t->s[j - 1];
    t->seq[j] = t->seq[j - 1];
    j--;
  }
  t->s[j] = x;
  t->seq[j] = seq;
}

#ifdef HV_AVX2
/* Of rows i..i+7 of bucket b, those with a vector (inv not 0) that the
 * filter f lets through, a bit each, as hv_allowed asks: the times eight at
 * a time, then the kinds row by row (hv_kind_allowed). */
__attribute__((target("avx2"))) static int hv_allowed8_avx2(const hv_ns *e, const hv_bucket *b,
                                                           int i, const hv_filter *f) {
  int has = _mm256_movemask_ps(
      _mm256_cmp_ps(_mm256_loadu_ps(b->inv + i), _mm256_setzero_ps(), _CMP_NEQ_UQ));
  const double *at = b->at + i;
  if (f->has_since) {
    __m256d s = _mm256_set1_pd(f->since);
    has &= _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(at), s, _CMP_GE_OQ)) |
           _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(at + 4), s, _CMP_GE_OQ)) << 4;
  }
  if (f->has_until) {
    __m256d u = _mm256_set1_pd(f->until);
    has &= _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(at), u, _CMP_LT_OQ)) |
           _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(at + 4), u, _CMP_LT_OQ)) << 4;
  }
  for (int h = f->kinds ? has : 0; h; h &= h - 1)
    if (!hv_kind_allowed(e, b, i + __builtin_ctz((unsigned)h), f))
      has &= ~(1 << __builtin_ctz((unsigned)h));
  return has;
}
#endif

#ifdef HV_AVX2
/* hv_scan's rows of a block of m, eight at a time: each row's cosine as
 * hv_row_cos works it out (the same float products, eight lanes), and only
 * a row that could still enter t goes on to hv_topn_put.  A row is passed
 * over only where the scalar test is sure to refuse it: a cosine below lf
 * (a float at or below least) or, t full, below its worst; ties take the
 * scalar path.  The filter f (NULL: none) is asked of every row with a
 * vector (inv not 0), as hv_allowed asks it (hv_allowed8_avx2), and so
 * are the rows counted.  Returns the rows with a vector that the filter let
 * through; *r0 is where the scalar loop goes on.
 * e, b, i0: the entry, the bucket and the block's first row; dots: its dot
 * products. */
__attribute__((target("avx2"))) static int hv_scan_block_avx2(const hv_ns *e,
                                                              const hv_bucket *b, int i0,
                                                              const int *dots, int m,
                                                              const hv_query *q, double least,
                                                              const hv_filter *f, hv_topn *t,
                                                              int *r0) {
  float lf = (float)least;
  if ((double)lf > least) lf = nextafterf(lf, -INFINITY);
  const __m256 qinv = _mm256_set1_ps(q->inv), low = _mm256_set1_ps(lf),
               zero = _mm256_setzero_ps();
  int passed = 0, r = 0;
  for (; r + 8 <= m; r += 8) {
    __m256 inv = _mm256_loadu_ps(b->inv + i0 + r);
    __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(dots + r));
    __m256 x = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(d), inv), qinv);
    int has = f ? hv_allowed8_avx2(e, b, i0 + r, f)
                : _mm256_movemask_ps(_mm256_cmp_ps(inv, zero, _CMP_NEQ_UQ));
    passed += __builtin_popcount((unsigned)has);
    __m256 bar = t->k == t->n ? _mm256_set1_ps(t->s[t->k - 1]) : low;
    int out = _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(x, low, _CMP_LT_OQ),
                                              _mm256_cmp_ps(x, bar, _CMP_LT_OQ)));
    for (int keep = has & ~out & 0xff; keep; keep &= keep - 1) {
      int i = i0 + r + __builtin_ctz((unsigned)keep);
      float xi = hv_row_cos(b, i, dots[i - i0], q);
      if (xi < least) continue;
      hv_topn_put(t, xi, b->seq[i]);
    }
  }
  *r0 = r;
  return passed;
}
#endif

/* Bucket b's rows into t (those the filter lets through, with a cosine of
 * least or more): the rows the filter let through.  On a machine with AVX2
 * most rows are passed over eight at a time (hv_scan_block_avx2), for the
 * same t.
 * e: the namespace's entry; q: the question; f: the filter (NULL: none). */
static int hv_scan(const hv_ns *e, const hv_bucket *b, const hv_query *q, double least,
                   const hv_filter *f, hv_topn *t) {
  int dots[256], passed = 0;
  for (int i0 = 0; i0 < b->n; i0 += 256) { /* in blocks of 256 rows */
    int m = b->n - i0 < 256 ? b->n - i0 : 256, r = 0;
    hv_dots(b->code + (size_t)i0 * (size_t)e->stride, m, q, dots);
#ifdef HV_AVX2
    if (hv_has_avx2()) passed += hv_scan_block_avx2(e, b, i0, dots, m, q, least, f, t, &r);
#endif
    for (; r < m; r++) {
      int i = i0 + r;
      if (b->inv[i] == 0 || !hv_allowed(e, b, i, f)) continue;
      passed++;
      float x = hv_row_cos(b, i, dots[r], q);
      if (x < least) continue;
      hv_topn_put(t, x, b->seq[i]);
    }
  }
  return passed;
}

/* The partitions nearest a question first, popped one at a time from a
 * heap (a probe takes a quarter of them or so): each a key that sorts as
 * its cosine descending, then its index (ties to the lower). */
typedef struct {
  int n;
  u64 *key;
} hv_order;

static u64 hv_order_key(float cos, int j) {
  uint32_t u;
  memcpy(&u, &cos, sizeof u);
  u = u >> 31 ? ~u : u | 0x80000000u; /* ascending as the float */
  return (u64)~u << 32 | (uint32_t)j;    /* descending, then the index */
}

static void hv_order_down(hv_order *o, int i) {
  for (;;) {
    int l = 2 * i + 1, m = i;
    if (l < o->n && o->key[l] < o->key[m]) m = l;
    if (l + 1 < o->n && o->key[l + 1] < o->key[m]) m = l + 1;
    if (m == i) return;
    u64 k = o->key[i];
    o->key[i] = o->key[m];
    o->key[m] = k;
    i = m;
  }
}

/* o made a heap of the cosines of its n partitions (cos[j] the j-th's). */
static void hv_order_make(hv_order *o, const float *cos) {
  for (int j = 0; j < o->n; j++) o->key[j] = hv_order_key(cos[j], j);
  for (int i = o->n / 2 - 1; i >= 0; i--) hv_order_down(o, i);
}

/* The nearest partition not popped yet (its index), or -1. */
static int hv_order_pop(hv_order *o) {
  if (!o->n) return -1;
  int j = (int)(uint32_t)o->key[0];
  o->key[0] = o->key[--o->n];
  hv_order_down(o, 0);
  return j;
}

/* A question as hv_sign_block reads it: per group of 4 components, the
 * sum of its components (as int8, scaled to at most 15 in size) over each
 * subset of the group, by the subset's 4 bits: 16 entries, twice (one copy
 * per AVX2 lane).  A row's sum L over its groups, of the entry its signs
 * pick, is the question's components summed where the residual's are 0 or
 * more; g x L - h is then the question's dot product with the signs (+1 or
 * -1) over its length: the cosine's part from the residual, once times the
 * row's factor. */
typedef struct {
  int8_t lut[HM_EMBED_DIM / 4][32];
  float g, h;
} hv_signq;

static void hv_signq_make(hv_signq *s, const int8_t *q8, float qinv) {
  int top = 0, sum = 0;
  int8_t qs[HM_EMBED_DIM];
  for (int d = 0; d < HM_EMBED_DIM; d++) top = abs(q8[d]) > top ? abs(q8[d]) : top;
  for (int d = 0; d < HM_EMBED_DIM; d++) { /* integer rounding: the same on every machine */
    qs[d] = (int8_t)(top ? (q8[d] * 30 + (q8[d] < 0 ? -top : top)) / (2 * top) : 0);
    sum += qs[d];
  }
  for (int g = 0; g < HM_EMBED_DIM / 4; g++)
    for (int m = 0; m < 16; m++) {
      int x = 0;
      for (int j = 0; j < 4; j++)
        if (m >> j & 1) x += qs[4 * g + j];
      s->lut[g][m] = s->lut[g][16 + m] = (int8_t)x; /* at most 60 in size */
    }
  s->g = (float)(2.0 * top / 15.0 * qinv);
  s->h = (float)(top * (double)sum / 15.0 * qinv);
}

/* A block row's place in hv_sign_block's order (the inverse of HV_SIGN_AT) */
#define HV_SIGN_ROW_OF(k) ((k) / 16 + (k) % 8 * 2 + (k) % 16 / 8 * 16)

/* The estimated cosines of a block's 32 rows (in the order of HV_SIGN_AT)
 * into est[32]: its partition's centroid's cosine (base) plus each row's
 * factor (fac, the block's 32) times g x L - h.  Returns those of bar or
 * more, a bit each in that order. */
static unsigned hv_sign_block(const unsigned char *block, const hv_signq *s, float base,
                              float bar, float *est) {
  const float *fac = HV_SIGN_FAC(block);
  unsigned rows = 0;
  for (int r = 0; r < 32; r++) {
    int sum = 0, k = HV_SIGN_AT(r);
    for (int p = 0; p < HV_SIGN_ROW; p++) {
      unsigned v = block[32 * p + r];
      sum += s->lut[2 * p][v & 15] + s->lut[2 * p + 1][v >> 4];
    }
    est[k] = base + fac[k] * (s->g * (float)sum - s->h);
    rows |= (unsigned)(est[k] >= bar) << k;
  }
  return rows;
}

#ifdef HV_AVX2
#define HV_AHEAD (4 * HV_SIGN_BLOCK) /* what the scan fetches ahead of its block */
/* hv_sign_block, 32 rows at a time: each byte's two nibbles looked up in
 * their groups' tables (shuffle), the two added (at most 120: still a
 * byte) and widened to 16 bits, even rows and odd rows apart; then the
 * same float products, eight lanes at a time.  The block HV_AHEAD bytes
 * on is fetched meanwhile. */
__attribute__((target("avx2"))) static unsigned hv_sign_block_avx2(const unsigned char *block,
                                                                  const hv_signq *s, float base,
                                                                  float bar, float *est) {
  const float *fac = HV_SIGN_FAC(block);
  const __m256i m = _mm256_set1_epi8(15);
  __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
  for (int p = 0; p < HV_SIGN_ROW; p++) {
    if (p % 2 == 0) _mm_prefetch((const char *)block + HV_AHEAD + 32 * p, _MM_HINT_T0);
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(block + 32 * p));
    __m256i lo = _mm256_shuffle_epi8(
        _mm256_loadu_si256((const __m256i *)(const void *)s->lut[2 * p]), _mm256_and_si256(v, m));
    __m256i hi = _mm256_shuffle_epi8(
        _mm256_loadu_si256((const __m256i *)(const void *)s->lut[2 * p + 1]),
        _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
    __m256i x = _mm256_add_epi8(lo, hi);
    even = _mm256_add_epi16(even, _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8));
    odd = _mm256_add_epi16(odd, _mm256_srai_epi16(x, 8));
  }
  _mm_prefetch((const char *)block + HV_AHEAD + HV_SIGN_BITS, _MM_HINT_T0);
  _mm_prefetch((const char *)block + HV_AHEAD + HV_SIGN_BITS + 64, _MM_HINT_T0);
  const __m256 g = _mm256_set1_ps(s->g), h = _mm256_set1_ps(s->h), b = _mm256_set1_ps(base),
               f = _mm256_set1_ps(bar);
  __m128i part[4] = {_mm256_castsi256_si128(even), _mm256_extracti128_si256(even, 1),
                     _mm256_castsi256_si128(odd), _mm256_extracti128_si256(odd, 1)};
  unsigned rows = 0;
  for (int j = 0; j < 4; j++) {
    __m256 sum = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(part[j]));
    __m256 y = _mm256_add_ps(b, _mm256_mul_ps(_mm256_loadu_ps(fac + 8 * j),
                                              _mm256_sub_ps(_mm256_mul_ps(g, sum), h)));
    _mm256_storeu_ps(est + 8 * j, y);
    rows |= (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(y, f, _CMP_GE_OQ)) << (8 * j);
  }
  return rows;
}
#endif

/* The rows of bucket b with a vector that the filter f (NULL: none) lets
 * through: what hv_scan counts, without its dot products. */
static int hv_allowed_rows(const hv_ns *e, const hv_bucket *b, const hv_filter *f) {
  if (!f) return b->live;
  int n = 0, i = 0;
#ifdef HV_AVX2
  if (hv_has_avx2())
    for (; i + 8 <= b->n; i += 8) n += __builtin_popcount((unsigned)hv_allowed8_avx2(e, b, i, f));
#endif
  for (; i < b->n; i++) n += b->inv[i] != 0 && hv_allowed(e, b, i, f);
  return n;
}

/* The rows hv_sign_scan keeps for their exact cosines: the best `keep`
 * estimates or a few more (ties), those below `floor` refused.  An estimate
 * is counted by its key, floor(2,048 x it) (HV_KEY_MAX at most in size). */
typedef struct {
  int n, cap, keep, floor; /* floor: a key */
  int *key, *bucket, *row;
  int *count; /* a count per key, for hv_short_cut */
} hv_short;

#define HV_KEY_MAX 8192
static int hv_key(float x) {
  float k = floorf(x * 2048.0f);
  return k > HV_KEY_MAX ? HV_KEY_MAX : k < -HV_KEY_MAX ? -HV_KEY_MAX : (int)k;
}

/* s cut to its best estimates: those of the highest key that keeps at
 * least s->keep of them, or, when that keeps more than half as many again
 * (ties), those above it; later rows below the new floor are refused. */
static void hv_short_cut(hv_short *s) {
  memset(s->count, 0, (2 * HV_KEY_MAX + 1) * sizeof *s->count);
  for (int i = 0; i < s->n; i++) s->count[s->key[i] + HV_KEY_MAX]++;
  int v = 2 * HV_KEY_MAX, above = 0;
  while (v > 0 && above + s->count[v] < s->keep) above += s->count[v--];
  int cut = v - HV_KEY_MAX;
  if (above + s->count[v] > s->keep + s->keep / 2) cut++;
  int w = 0;
  for (int i = 0; i < s->n; i++)
    if (s->key[i] >= cut) {
      s->key[w] = s->key[i];
      s->bucket[w] = s->bucket[i];
      s->row[w++] = s->row[i];
    }
  s->n = w;
  s->floor = cut;
}

/* Bucket bi of e's rows through their signs (sq: the question as they
 * read it): those whose estimate could still make s, and that the filter f
 * (NULL: none) lets through, into s.
 * base: the cosine of the question with the partition's centroid. */
static void hv_sign_bucket(const hv_ns *e, int bi, float base, const hv_signq *sq,
                           const hv_filter *f, hv_short *s) {
  hv_bucket *b = &e->b[bi]; /* the cache's, written here: a connection's, one call at a time */
  for (; b->signed_n < b->n; b->signed_n++) hv_sign_put(e, b, b->signed_n);
  float est[32];
  for (int i0 = 0; i0 < b->n; i0 += 32) {
    const unsigned char *block = b->sign + (size_t)(i0 / 32) * HV_SIGN_BLOCK;
    const float bar = (float)s->floor / 2048.0f; /* a key's least estimate */
    unsigned rows;
#ifdef HV_AVX2
    if (hv_has_avx2()) rows = hv_sign_block_avx2(block, sq, base, bar, est);
    else
#endif
      rows = hv_sign_block(block, sq, base, bar, est);
    for (; rows; rows &= rows - 1) {
      int k = __builtin_ctz(rows), i = i0 + HV_SIGN_ROW_OF(k), key = hv_key(est[k]);
      if (i >= b->n || key < s->floor || (f && !hv_allowed(e, b, i, f))) continue;
      if (s->n == s->cap) {
        hv_short_cut(s);
        if (key < s->floor) continue;
      }
      s->key[s->n] = key;
      s->bucket[s->n] = bi;
      s->row[s->n++] = i;
    }
  }
}

#define HV_SHORT 40
#define HV_SHORT_MIN 512
/* e's partitions, nearest first, scanned through their signs until
 * `budget` rows the filter lets through were passed: the best estimates
 * (HV_SHORT a row of t, HV_SHORT_MIN at least) then scored exactly into t,
 * as hv_scan scores a row.  Returns the rows passed, or -1 when out of
 * memory.
 * order: the partitions, nearest first; cos: each one's centroid's cosine
 * with the question, over the question's norm; q8: the question; q: as
 * hv_dots takes it; least: the lowest cosine; f: the filter (NULL: none). */
static i64 hv_sign_scan(const hv_ns *e, hv_order *order, const float *cos, const int8_t *q8,
                        const hv_query *q, double least, const hv_filter *f, i64 budget,
                        hv_topn *t) {
  hv_short s = {.keep = t->n * HV_SHORT > HV_SHORT_MIN ? t->n * HV_SHORT : HV_SHORT_MIN,
                .floor = -HV_KEY_MAX};
  s.cap = 4 * s.keep;
  hv_signq *sq = sqlite3_malloc64(sizeof *sq);
  s.key = sqlite3_malloc64((sqlite3_uint64)s.cap * 3 * sizeof(int));
  s.count = sqlite3_malloc64((2 * HV_KEY_MAX + 1) * sizeof(int));
  i64 passed = -1;
  if (!sq || !s.key || !s.count) goto done;
  s.bucket = s.key + s.cap;
  s.row = s.bucket + s.cap;
  hv_signq_make(sq, q8, q->inv);
  passed = 0;
  for (int j; passed < budget && (j = hv_order_pop(order)) >= 0;) {
    passed += hv_allowed_rows(e, &e->b[1 + j], f);
    hv_sign_bucket(e, 1 + j, cos[j] * q->inv, sq, f, &s);
  }
  if (s.n > s.keep) hv_short_cut(&s);
  for (int k = 0; k < s.n; k++) {
    if (k + 16 < s.n) { /* rows in scan order, fetched ahead */
      const hv_bucket *ahead = &e->b[s.bucket[k + 16]];
      const char *code = (const char *)ahead->code + (size_t)s.row[k + 16] * (size_t)e->stride;
      __builtin_prefetch(code);
      __builtin_prefetch(code + 64);
      __builtin_prefetch(ahead->inv + s.row[k + 16]);
    }
    const hv_bucket *b = &e->b[s.bucket[k]];
    int i = s.row[k], dot;
    if (b->inv[i] == 0) continue; /* no vector, as hv_scan passes it over */
    hv_dots(b->code + (size_t)i * (size_t)e->stride, 1, q, &dot);
    float x = hv_row_cos(b, i, dot, q);
    if (x >= least) hv_topn_put(t, x, b->seq[i]);
  }
done:
  sqlite3_free(sq);
  sqlite3_free(s.key);
  sqlite3_free(s.count);
  return passed;
}

/* Of e's rows, the n with the highest cosine to q (int8, as hv_to_int8
 * gives), best first (ties by seq), into top (seqs): their number, or -1
 * when out of memory.  A row whose cosine is below least is left out (the
 * cosine here is of int8 vectors: least should leave a margin under the
 * threshold applied to the exact one), and so is one the filter (NULL:
 * none) does not let through.  Without partitions every row is scanned:
 * the exact top n.  With them, bucket 0 and then the partitions nearest q,
 * until `budget` rows the filter lets through were scanned: through their
 * signs first (hv_sign_scan) when the budget is less than every row and the
 * partitions keep them, each row whole otherwise.
 * q8: the question; f: the filter; budget: how many rows to scan at most. */
static int hv_top(const hv_ns *e, const int8_t *q8, int n, double least, const hv_filter *f,
                  i64 budget, i64 *top) {
  if (n <= 0 || e->dim > HM_MAX_DIM || !e->nb) return 0;
  hv_query *q = sqlite3_malloc64(sizeof *q);
  hv_topn t = {.n = n};
  t.s = sqlite3_malloc64((sqlite3_uint64)n * sizeof *t.s);
  int parts = e->nb - 1, got = -1;
  size_t room = (size_t)(parts > 0 ? parts : 1);
  float *cos = sqlite3_malloc64(room * sizeof(float));
  int *dots = sqlite3_malloc64(room * sizeof(int));
  hv_order order = {.key = sqlite3_malloc64(room * sizeof(u64))};
  if (!q || !t.s || !cos || !dots || !order.key) goto done;
  t.seq = top;
  hv_query_make(q, q8, e->dim, e->fmt);
  i64 scanned = hv_scan(e, &e->b[0], q, least, f, &t);
  if (parts > 0) {
    /* the centroids are int8 rows: the partitions nearest the question first */
    hv_query qc = *q;
    qc.fmt = 8;
    hv_dots((const unsigned char *)e->cent, parts, &qc, dots);
    for (int j = 0; j < parts; j++) cos[j] = (float)dots[j] * e->cinv[j];
    order.n = parts;
    hv_order_make(&order, cos);
    if (budget < hv_rows(e) && hv_has_sign(e, &e->b[1])) { /* a probe, not the whole: signs first */
      if (hv_sign_scan(e, &order, cos, q8, q, least, f, budget - scanned, &t) < 0) goto done;
    } else {
      for (int j; scanned < budget && (j = hv_order_pop(&order)) >= 0;)
        scanned += hv_scan(e, &e->b[1 + j], q, least, f, &t);
    }
  }
  got = t.k;
done:
  sqlite3_free(q);
  sqlite3_free(t.s);
  sqlite3_free(cos);
  sqlite3_free(order.key);
  sqlite3_free(dots);
  return got;
}

/* The cosine of a unit vector qf with e's row of seq (0 when e has no such
 * row, or it has no length); *found whether it has.
 * b: the bucket to look in first. */
static double hv_cos(const hv_ns *e, const hv_bucket *b, i64 seq, const float *qf, int *found) {
  *found = 0;
  int j = b ? hv_find(b, seq) : -1;
  if (j < 0) return 0.0;
  *found = 1;
  if (b->inv[j] == 0) return 0.0;
  int8_t v[HM_MAX_DIM];
  hv_row8(e, b, j, v);
  double dot = 0;
  for (int d = 0; d < e->dim; d++) dot += (double)qf[d] * v[d];
  return dot * b->inv[j];
}

/* ?1 namespace: its partitions' ids, centroids and stamps, in id order */
static const char hv_sql_cents[] =
    "SELECT part, centroid, stamp FROM vector_centroids WHERE namespace = ?1 ORDER BY part";

/* The rows of hv_sql_cents (st bound, stepped here, not reset) as *n ids,
 * int8 centroids of dim, their inverse norms and (when stamps is not NULL)
 * their stamps (sqlite3_malloc'ed; a centroid of another length is left
 * out: its partition's vectors are then scanned with the vectors of
 * none).  SQLITE_DONE, or the error.
 * *c: the centroids; *inv: their inverse norms. */
static int hv_cents_read(sqlite3_stmt *st, int dim, int *n, i64 **ids, int8_t **c,
                         float **inv, i64 **stamps) {
  int cap = 0, rc;
  *n = 0;
  *ids = NULL;
  *c = NULL;
  *inv = NULL;
  if (stamps) *stamps = NULL;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (sqlite3_column_bytes(st, 1) != dim || sqlite3_column_type(st, 1) != SQLITE_BLOB) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      if (stamps) {
        i64 *t = sqlite3_realloc64(*stamps, (sqlite3_uint64)cap * sizeof *t);
        if (!t) { rc = SQLITE_NOMEM; break; }
        *stamps = t;
      }
      i64 *a = sqlite3_realloc64(*ids, (sqlite3_uint64)cap * sizeof *a);
      if (a) *ids = a;
      int8_t *b = sqlite3_realloc64(*c, (sqlite3_uint64)cap * (sqlite3_uint64)dim);
      if (b) *c = b;
      float *f = sqlite3_realloc64(*inv, (sqlite3_uint64)cap * sizeof *f);
      if (f) *inv = f;
      if (!a || !b || !f) { rc = SQLITE_NOMEM; break; }
    }
    (*ids)[*n] = sqlite3_column_int64(st, 0);
    if (stamps) (*stamps)[*n] = sqlite3_column_int64(st, 2);
    memcpy(*c + (size_t)*n * (size_t)dim, sqlite3_column_blob(st, 1), (size_t)dim);
    (*inv)[*n] = hv_inv_norm(*c + (size_t)*n * (size_t)dim, dim);
    (*n)++;
  }
  if (rc != SQLITE_DONE) {
    if (stamps) { sqlite3_free(*stamps); *stamps = NULL; }
    sqlite3_free(*ids);
    sqlite3_free(*c);
    sqlite3_free(*inv);
    *ids = NULL;
    *c = NULL;
    *inv = NULL;
    *n = 0;
  }
  return rc;
}

/* FNV-1a 64 over n partitions' ids (8 bytes each, little-endian) and
 * centroids, in id order: vector_index.digest, never 0. */
static u64 hv_cents_digest(int n, const i64 *ids, const int8_t *c, int dim) {
  u64 h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 8; k++) h = (h ^ (((u64)ids[i] >> (8 * k)) & 255)) * 1099511628211ull;
    const unsigned char *p = (const unsigned char *)(c + (size_t)i * (size_t)dim);
    for (int d = 0; d < dim; d++) h = (h ^ p[d]) * 1099511628211ull;
  }
  return h ? h : 1;
}

/* The index (0..n) of the centroid nearest v (int8 of dim): the highest
 * cosine, ties to the lower index.
 * cents: the n centroids; cinv: their inverse norms. */
static int hv_nearest(const int8_t *cents, const float *cinv, int n, const int8_t *v, int dim) {
  hv_query q;
  hv_query_make(&q, v, dim, 8);
  int best = 0, dots[256];
  float top = -INFINITY;
  for (int i0 = 0; i0 < n; i0 += 256) {
    int m = n - i0 < 256 ? n - i0 : 256;
    hv_dots((const unsigned char *)(cents + (size_t)i0 * (size_t)dim), m, &q, dots);
    for (int j = 0; j < m; j++) {
      float x = (float)dots[j] * cinv[i0 + j];
      if (x > top) { top = x; best = i0 + j; }
    }
  }
  return best;
}

/* Each of n int8 rows' components summed, into sum[n]. */
static void hv_row_sums(const int8_t *rows, int n, int dim, int *sum) {
  for (int i = 0; i < n; i++) {
    int t = 0;
    for (int d = 0; d < dim; d++) t += rows[(size_t)i * (size_t)dim + (size_t)d];
    sum[i] = t;
  }
}

/* hv_nearest's answer (the same dot products, the same first best): the
 * nearest of n rows cents (dim components each, cinv their inverse norms) to
 * v, for a v of the int4 store's components (-8 to 7: what heap_vector_part
 * assigns) through hv_dots_small_avx2; csum: each row's sum (hv_row_sums), or
 * NULL.  Any other vector, dimension or machine: hv_nearest itself. */
static int hv_nearest_small(const int8_t *cents, const int *csum, const float *cinv, int n,
                            const int8_t *v, int dim) {
#ifdef HV_AVX2
  uint8_t u[HM_EMBED_DIM];
  int small = csum && dim == HM_EMBED_DIM && hv_has_avx2();
  for (int d = 0; small && d < dim; d++) {
    small = v[d] >= -8 && v[d] <= 7;
    u[d] = (uint8_t)(v[d] + 8);
  }
  if (small) {
    int best = 0, dots[256];
    float top = -INFINITY;
    for (int i0 = 0; i0 < n; i0 += 256) {
      int m = n - i0 < 256 ? n - i0 : 256;
      hv_dots_small_avx2(cents + (size_t)i0 * HM_EMBED_DIM, u, m, dots);
      for (int j = 0; j < m; j++) {
        float x = (float)(dots[j] - 8 * csum[i0 + j]) * cinv[i0 + j];
        if (x > top) { top = x; best = i0 + j; }
      }
    }
    return best;
  }
#endif
  (void)csum;
  return hv_nearest(cents, cinv, n, v, dim);
}

#pragma endregion

#pragma region SQL functions of the embedder

HM_API const char *hm_embedder_info(void) {
  return he_get() ? HE_NAME " (MinishLab, MIT licence): a static WordPiece embedding table, "
                    "29,528 tokens x 256 dimensions at int8, English"
                  : "none: this library was built without its embedding model";
}

/* heap_embed(text [, format]): text's vector in the store's int4 format,
 * or as 'int8' or 'float32'; NULL for NULL. */
static void heap_embed(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  int format = 4; /* 4, 8, or 32 */
  if (argc > 1) {
    const char *f = (const char *)sqlite3_value_text(argv[1]);
    if (f && !strcmp(f, "float32")) format = 32;
    else if (f && !strcmp(f, "int8")) format = 8;
    else if (!f || strcmp(f, "int4")) {
      hq_result_err(ctx, "heap_embed", "format must be 'int4' (the store's), 'int8' or "
                                       "'float32'");
      return;
    }
  }
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    hq_result_err(ctx, "heap_embed", "the text to embed must be text");
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (!text) { sqlite3_result_error_nomem(ctx); return; }
  float v[HM_EMBED_DIM];
  char err[HM_ERRLEN];
  if (hm_embed(text, sqlite3_value_bytes(argv[0]), v, HM_EMBED_DIM, err, sizeof err) < 0) {
    hq_result_err(ctx, "heap_embed", err);
    return;
  }
  if (format == 32) {
    sqlite3_result_blob(ctx, v, sizeof v, SQLITE_TRANSIENT);
    return;
  }
  unsigned char q[4 + HM_EMBED_DIM];
  if (format == 8) hv_to_int8(v, HM_EMBED_DIM, q);
  else hv_to_int4(v, HM_EMBED_DIM, q);
  sqlite3_result_blob(ctx, q, format == 8 ? 4 + HM_EMBED_DIM : 4 + HM_EMBED_DIM / 2,
                      SQLITE_TRANSIENT);
}

/* heap_tokens(text): the tokens the model reads in text, as a JSON array */
static void heap_tokens(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    hq_result_err(ctx, "heap_tokens", "the text must be text");
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (!text) { sqlite3_result_error_nomem(ctx); return; }
  sqlite3_str *out = sqlite3_str_new(sqlite3_context_db_handle(ctx));
  int n = he_tokens_json(text, sqlite3_value_bytes(argv[0]), out);
  char *js = sqlite3_str_finish(out);
  if (n < 0) {
    sqlite3_free(js);
    hq_result_err(ctx, "heap_tokens", "this heapmem library was built without its embedding "
                                      "model (potion-base-8M)");
    return;
  }
  if (!js) { sqlite3_result_error_nomem(ctx); return; }
  sqlite3_result_text(ctx, js, -1, sqlite3_free);
}

/* heap_text_hash(text): FNV-1a 64 of text's bytes, as an integer: the key of
 * the memories_text index, by which an add finds a memory of the same text */
static void heap_text_hash(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  const unsigned char *t = sqlite3_value_text(argv[0]);
  if (!t) { sqlite3_result_error_nomem(ctx); return; }
  u64 h = 1469598103934665603ull;
  for (int i = 0, n = sqlite3_value_bytes(argv[0]); i < n; i++) h = (h ^ t[i]) * 1099511628211ull;
  sqlite3_result_int64(ctx, (i64)h);
}

/* heap_embedder(): what the library carries, one line */
static void heap_embedder(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc; (void)argv;
  sqlite3_result_text(ctx, hm_embedder_info(), -1, SQLITE_STATIC);
}

/* heap_cosine(a, b): the cosine of two vectors of the store (float32 or
 * int8 blobs of one dimension); NULL when either has no length. */
static void heap_cosine(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HM_API_HERE;
  (void)argc;
  if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || sqlite3_value_type(argv[1]) != SQLITE_BLOB) {
    hq_result_err(ctx, "heap_cosine", "both vectors must be blobs (float32, or heap_embed's)");
    return;
  }
  int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]), da = 0, db = 0;
  const void *a = sqlite3_value_blob(argv[0]), *b = sqlite3_value_blob(argv[1]);
  if (!a || !b) { sqlite3_result_error_nomem(ctx); return; }
  float *va = sqlite3_malloc64(2 * HM_MAX_DIM * sizeof(float));
  if (!va) { sqlite3_result_error_nomem(ctx); return; }
  float *vb = va + HM_MAX_DIM;
  if (hv_floats(a, na, va, &da) || hv_floats(b, nb, vb, &db) || da != db) {
    sqlite3_free(va);
    char *m = sqlite3_mprintf("heap_cosine: vectors must be of one dimension, as float32 or "
                              "heap_embed's blobs, got %d and %d bytes", na, nb);
    if (!m) { sqlite3_result_error_nomem(ctx); return; }
    sqlite3_result_error(ctx, m, -1);
    sqlite3_free(m);
    return;
  }
  double c = hm_cosine(va, vb, da);
  sqlite3_free(va);
  if (isnan(c)) sqlite3_result_null(ctx);
  else sqlite3_result_double(ctx, c);
}

#pragma endregion
