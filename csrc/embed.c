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
 * Relies on: unicode.h (generated), hm_seterr.
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

/* The token ids of text (at most cap), [UNK] dropped: their number. */
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
 * the number of tokens, or -1 with err set. */
HM_API int hm_embed(const char *text, int len, float *out, int dim, char *err, int errlen) {
  const he_model *m = he_get();
  if (!m) {
    hm_seterr(err, errlen, "this heapmem library was built without its embedding model "
                           "(potion-base-8M)%s", "");
    return -1;
  }
  if (dim != (int)m->dim) {
    hm_seterr(err, errlen, "the model's vectors have 256 dimensions%s", "");
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
    hm_json_string(out, tok, (int)strlen(tok));
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
 * vectors as int8 rows (seq order) with their inverse norms.  A namespace's
 * row of vector_stamps counts the vectors added to it and the other changes
 * (a vector replaced or deleted, a memory forgotten or moved): added alone
 * moved means new rows at the end (seq grows), which are read on their own;
 * anything else reads the namespace again.  Rows read inside a write
 * transaction are used once and never kept (a rollback could undo them).
 * At most HV_BYTES in all; the namespace used longest ago goes first. */
#define HV_BYTES (256u << 20)
#define HV_SLOTS 64

typedef struct {
  char *ns;
  i64 added, changed;
  int keep; /* 0: read inside a write transaction, read again next time */
  int n, cap, dim;
  i64 *seq;
  int8_t *v;
  float *inv;
  u64 used;
} hv_ns;

typedef struct {
  hv_ns slot[HV_SLOTS];
  u64 tick;
  size_t bytes;
} hv_cache;

static size_t hv_size(const hv_ns *e) {
  return (size_t)e->cap * ((size_t)e->dim + sizeof(i64) + sizeof(float));
}

static void hv_drop(hv_cache *c, hv_ns *e) {
  c->bytes -= hv_size(e);
  sqlite3_free(e->ns);
  sqlite3_free(e->seq);
  sqlite3_free(e->v);
  sqlite3_free(e->inv);
  memset(e, 0, sizeof *e);
}

static void hv_free(hv_cache *c) {
  if (!c) return;
  for (int i = 0; i < HV_SLOTS; i++)
    if (c->slot[i].ns) hv_drop(c, &c->slot[i]);
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
  e->added = e->changed = -1;
  e->used = ++c->tick;
  return e;
}

/* Room for n more rows in e (and under HV_BYTES in all, dropping the
 * namespaces used longest ago): 0, or SQLITE_NOMEM. */
static int hv_grow(hv_cache *c, hv_ns *e, int more) {
  if (e->n + more <= e->cap) return SQLITE_OK;
  int cap = e->cap ? e->cap : 256;
  while (cap < e->n + more) cap *= 2;
  size_t row = (size_t)e->dim + sizeof(i64) + sizeof(float);
  while (c->bytes + (size_t)(cap - e->cap) * row > HV_BYTES) {
    hv_ns *oldest = NULL;
    for (int i = 0; i < HV_SLOTS; i++)
      if (c->slot[i].ns && &c->slot[i] != e && (!oldest || c->slot[i].used < oldest->used))
        oldest = &c->slot[i];
    if (!oldest) break; /* this namespace alone: let it have what it needs */
    hv_drop(c, oldest);
  }
  i64 *seq = sqlite3_realloc64(e->seq, (sqlite3_uint64)cap * sizeof *seq);
  if (!seq) return SQLITE_NOMEM;
  e->seq = seq;
  int8_t *v = sqlite3_realloc64(e->v, (sqlite3_uint64)cap * (sqlite3_uint64)e->dim);
  if (!v) return SQLITE_NOMEM;
  e->v = v;
  float *inv = sqlite3_realloc64(e->inv, (sqlite3_uint64)cap * sizeof *inv);
  if (!inv) return SQLITE_NOMEM;
  e->inv = inv;
  c->bytes += (size_t)(cap - e->cap) * row;
  e->cap = cap;
  return SQLITE_OK;
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
/* n rows of the carried model's dimension against q16, in AVX2: twice the
 * width of hv_dot16 (the machines that have it are checked at run time) */
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
#endif

/* the dot products of e's rows [i0, i0 + n) with q16, into out */
static void hv_dots(const hv_ns *e, int i0, int n, const int16_t *q16, int *out) {
#ifdef HV_AVX2
  static int avx2 = -1;
  if (avx2 < 0) avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
  if (avx2 && e->dim == HM_EMBED_DIM) {
    hv_dots_avx2(e->v + (size_t)i0 * HM_EMBED_DIM, q16, n, out);
    return;
  }
#endif
  for (int i = 0; i < n; i++) {
    const int8_t *row = e->v + (size_t)(i0 + i) * e->dim;
    out[i] = e->dim == HM_EMBED_DIM ? hv_dot16(row, q16, HM_EMBED_DIM)
                                    : hv_dot16(row, q16, e->dim);
  }
}

static float hv_inv_norm(const int8_t *v, int dim) {
  int s = 0;
  for (int d = 0; d < dim; d++) s += (int)v[d] * (int)v[d];
  return s > 0 ? (float)(1.0 / sqrt((double)s)) : 0.0f;
}

/* Of e's rows, the n with the highest cosine to q (int8, as hv_read gives),
 * best first, into top (seqs): their number.  A row whose cosine is below
 * least is left out (the cosine here is of int8 vectors: least should
 * leave a margin under the threshold applied to the exact one), and so is
 * row i when allow (NULL: every row) has allow[i] == 0. */
static int hv_top(const hv_ns *e, const int8_t *q, int n, double least,
                  const unsigned char *allow, i64 *top) {
  if (n <= 0 || e->dim > HM_MAX_DIM) return 0;
  float *s = sqlite3_malloc64((sqlite3_uint64)n * sizeof *s);
  int16_t *q16 = sqlite3_malloc64((sqlite3_uint64)e->dim * sizeof *q16);
  if (!s || !q16) { sqlite3_free(s); sqlite3_free(q16); return -1; }
  for (int d = 0; d < e->dim; d++) q16[d] = q[d];
  float qinv = hv_inv_norm(q, e->dim);
  int k = 0, dots[256];
  for (int i0 = 0; i0 < e->n; i0 += 256) { /* in blocks of 256 rows */
    int m = e->n - i0 < 256 ? e->n - i0 : 256;
    hv_dots(e, i0, m, q16, dots);
    for (int b = 0; b < m; b++) {
      int i = i0 + b;
      if (e->inv[i] == 0 || (allow && !allow[i])) continue;
      float x = (float)dots[b] * e->inv[i] * qinv;
      if (x < least || (k == n && x <= s[k - 1])) continue;
      int j = k < n ? k++ : n - 1; /* insert in order (n is the candidate count, small) */
      while (j > 0 && s[j - 1] < x) { s[j] = s[j - 1]; top[j] = top[j - 1]; j--; }
      s[j] = x;
      top[j] = e->seq[i];
    }
  }
  sqlite3_free(s);
  sqlite3_free(q16);
  return k;
}

/* The row of seq in e, or -1 (rows are in seq order). */
static int hv_find(const hv_ns *e, i64 seq) {
  int lo = 0, hi = e->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (e->seq[mid] < seq) lo = mid + 1;
    else if (e->seq[mid] > seq) hi = mid - 1;
    else return mid;
  }
  return -1;
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
      hm_result_err(ctx, "heap_embed", "format must be 'int4' (the store's), 'int8' or "
                                       "'float32'");
      return;
    }
  }
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    hm_result_err(ctx, "heap_embed", "the text to embed must be text");
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (!text) { sqlite3_result_error_nomem(ctx); return; }
  float v[HM_EMBED_DIM];
  char err[HM_ERRLEN];
  if (hm_embed(text, sqlite3_value_bytes(argv[0]), v, HM_EMBED_DIM, err, sizeof err) < 0) {
    hm_result_err(ctx, "heap_embed", err);
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
    hm_result_err(ctx, "heap_tokens", "the text must be text");
    return;
  }
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  if (!text) { sqlite3_result_error_nomem(ctx); return; }
  sqlite3_str *out = sqlite3_str_new(sqlite3_context_db_handle(ctx));
  int n = he_tokens_json(text, sqlite3_value_bytes(argv[0]), out);
  char *js = sqlite3_str_finish(out);
  if (n < 0) {
    sqlite3_free(js);
    hm_result_err(ctx, "heap_tokens", "this heapmem library was built without its embedding "
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
    hm_result_err(ctx, "heap_cosine", "both vectors must be blobs (float32, or heap_embed's)");
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
