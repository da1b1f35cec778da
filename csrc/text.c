/*
 * text.c: what heapmem reads in text, without a database.
 *
 * Owns: the word scanner (hm_scanner, hm_next_word) and its word lists (stop
 * words, months, days, ...), question types (hm_qtype), a memory's shape
 * features (hm_features), whether a question names a memory's source
 * (hm_relate), the features a memory shows to one question (hm_active, with
 * the age buckets), the 64-bit FNV-1a hash that keys a feature (hm_fnv64,
 * hm_hash), a namespace's FTS5 tag (hm_ns_tag) and a question's FTS5 MATCH
 * expression (hm_match).
 * Relies on: heapmem.c's preamble (hm_errf).  Makes no sqlite3_* call.
 */

#pragma region text scanning

/* Whether s[0..n) is well-formed UTF-8 (RFC 3629: no overlong form, no
 * surrogate as CESU-8 writes one (ED A0 80), nothing past U+10FFFF) holding
 * no NUL byte (unless nul_ok).  *chars (when not NULL) receives its number
 * of characters. */
static int hm_utf8_ok(const unsigned char *s, i64 n, int nul_ok, i64 *chars) {
  i64 i = 0, k = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      if (!c && !nul_ok) return 0;
      i++, k++;
      continue;
    }
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : lo, hi = c == 0xED ? 0x9F : hi;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : lo, hi = c == 0xF4 ? 0x8F : hi;
    else return 0;
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (int j = 2; j < len; j++)
      if ((s[i + j] & 0xC0) != 0x80) return 0;
    i += len, k++;
  }
  if (chars) *chars = k;
  return 1;
}

/* How deeply JSON text s[0..n) nests arrays and objects (its strings skipped). */
static int hm_json_depth(const char *s, i64 n) {
  int depth = 0, most = 0, in_string = 0;
  for (i64 i = 0; i < n; i++) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') i++;
      else if (c == '"') in_string = 0;
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      if (++depth > most) most = depth;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return most;
}

/* A word is a run of ASCII letters/digits/apostrophes or any non-ASCII byte
 * (so UTF-8 letters of any script stay inside words). */
static int hm_is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c >= 0x80 || c == '\'';
}

typedef struct {
  const unsigned char *s;
  int n;
  int pos;
} hm_scanner;

/* Next word into buf (ASCII lowercased, apostrophes dropped at the edges).
 * Returns the word's length, 0 at the end. *start gets its offset. */
static int hm_next_word(hm_scanner *sc, char *buf, int *start) {
  while (sc->pos < sc->n) {
    while (sc->pos < sc->n && !hm_is_word_byte(sc->s[sc->pos])) sc->pos++;
    int b = sc->pos;
    while (sc->pos < sc->n && hm_is_word_byte(sc->s[sc->pos])) sc->pos++;
    int e = sc->pos;
    while (b < e && sc->s[b] == '\'') b++;
    while (e > b && sc->s[e - 1] == '\'') e--;
    if (e <= b) continue;
    int len = 0;
    for (int i = b; i < e && len < HM_MAX_WORD; i++) {
      unsigned char c = sc->s[i];
      buf[len++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
    /* never cut a UTF-8 sequence in half */
    /* (the byte after the cut is in the source: buf[len] is not written yet) */
    if (e - b > len && (sc->s[b + len] & 0xC0) == 0x80) {
      while (len > 0 && ((unsigned char)buf[len - 1] & 0xC0) == 0x80) len--;
      if (len > 0 && ((unsigned char)buf[len - 1] & 0xC0) == 0xC0) len--;
    }
    buf[len] = 0;
    if (start) *start = b;
    if (len > 0) return len;
  }
  return 0;
}

static int hm_in_list(const char *w, const char *const *list) {
  for (int i = 0; list[i]; i++) /* the first two bytes rule out most entries cheaply */
    if (list[i][0] == w[0] && (!w[0] || (list[i][1] == w[1] && strcmp(w, list[i]) == 0)))
      return 1;
  return 0;
}

static const char *const hm_stop_words[] = {
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any",
    "are", "as", "at", "be", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down",
    "during", "each", "few", "for", "from", "further", "had", "has", "have",
    "having", "he", "her", "here", "hers", "herself", "him", "himself", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me",
    "might", "more", "most", "my", "myself", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
    "out", "over", "own", "same", "she", "should", "so", "some", "such", "than",
    "that", "the", "their", "theirs", "them", "themselves", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "whose", "why", "will", "with", "would", "you",
    "your", "yours", "yourself", "yourselves", "s", "t", "ll", "ve", "re", "d",
    "m", "don't", "didn't", "doesn't", "isn't", "aren't", "wasn't", "weren't",
    "won't", "can't", "i'm", "it's", "that's", "also", "ever", "get", "got",
    "kind", "much", "many", "one", "us", "let", "shall", "may", "must", "yes",
    "okay", "ok", "please", "tell", "know", "think", "like", NULL};

HM_API int hm_is_stop_word(const char *w) { return w && hm_in_list(w, hm_stop_words); }

/* Question types (heapmem.h's HM_QTYPES), and their enum: Q_other, Q_when, ... */
static const char *const hm_qtype_names[] = {
#define HM_QTYPE_NAME(q) #q,
    HM_QTYPES(HM_QTYPE_NAME)
#undef HM_QTYPE_NAME
    NULL};
enum {
#define HM_QTYPE_ENUM(q) Q_##q,
  HM_QTYPES(HM_QTYPE_ENUM)
#undef HM_QTYPE_ENUM
};

static const char *const hm_aux_words[] = {
    "is", "are", "am", "was", "were", "do", "does", "did", "can", "could",
    "will", "would", "should", "shall", "has", "have", "had", "may", "might",
    "must", "isn't", "aren't", "didn't", "doesn't", "don't", "won't", "wasn't",
    "weren't", "hasn't", "haven't", NULL};

static const char *const hm_time_nouns[] = {
    "time", "date", "year", "years", "day", "days", "month", "months", "week",
    "weeks", "hour", "season", "decade", "weekend", NULL};

/* Classify the wh-word at word index i (words[] lowercased). -1 if none. */
static int hm_wh_at(char words[][HM_MAX_WORD + 1], int nwords, int i) {
  const char *w = words[i];
  const char *next = i + 1 < nwords ? words[i + 1] : "";
  if (strcmp(w, "when") == 0) return Q_when;
  if (strcmp(w, "who") == 0 || strcmp(w, "whom") == 0 || strcmp(w, "whose") == 0) return Q_who;
  if (strcmp(w, "where") == 0) return Q_where;
  if (strcmp(w, "why") == 0) return Q_why;
  if (strcmp(w, "how") == 0) {
    if (strcmp(next, "many") == 0 || strcmp(next, "much") == 0 || strcmp(next, "often") == 0)
      return Q_how_many;
    if (strcmp(next, "long") == 0 && i + 2 < nwords && strcmp(words[i + 2], "ago") == 0)
      return Q_when;
    return Q_how;
  }
  if (strcmp(w, "what") == 0 || strcmp(w, "which") == 0) {
    if (hm_in_list(next, hm_time_nouns)) return Q_when;
    return Q_what;
  }
  return -1;
}

/* The question type of a question: "when", "who", ... or "other". */
HM_API const char *hm_qtype(const char *q) {
  if (!q) return hm_qtype_names[Q_other];
  char words[24][HM_MAX_WORD + 1];
  int nwords = 0;
  hm_scanner sc = {.s = (const unsigned char *)q, .n = (int)strlen(q)};
  while (nwords < 24 && hm_next_word(&sc, words[nwords], NULL) > 0) nwords++;
  if (nwords == 0) return hm_qtype_names[Q_other];
  int t = hm_wh_at(words, nwords, 0);
  if (t >= 0) return hm_qtype_names[t];
  if (hm_in_list(words[0], hm_aux_words)) return hm_qtype_names[Q_yes_no];
  for (int i = 1; i < nwords; i++) {
    t = hm_wh_at(words, nwords, i);
    if (t >= 0) return hm_qtype_names[t];
  }
  return hm_qtype_names[Q_other];
}

static int hm_qtype_valid(const char *qt) {
  return qt && hm_in_list(qt, hm_qtype_names);
}

static const char *const hm_months[] = {
    "january", "february", "march", "april", "june", "july", "august",
    "september", "october", "november", "december", "jan", "feb", "mar", "apr",
    "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", NULL};
static const char *const hm_days[] = {
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "today", "tomorrow", "yesterday", "tonight", "ago", "weekend",
    "morning", "afternoon", "evening", "last", "next", "week", "month", "year",
    "christmas", "birthday", "anniversary", "summer", "winter", "spring",
    "autumn", NULL};
static const char *const hm_number_words[] = {
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "twenty", "thirty", "forty", "fifty", "hundred",
    "thousand", "million", "dozen", "once", "twice", "first", "second",
    "third", NULL};
static const char *const hm_self_words[] = {
    "i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "myself", "we",
    "our", "us", "we're", "we've", NULL};
/* heapmem.h's kinds and source roles */
static const char *const hm_known_kinds[] = {
#define HM_KIND_NAME(k, importance) #k,
    HM_KINDS(HM_KIND_NAME)
#undef HM_KIND_NAME
    NULL};
static const char *const hm_source_roles[] = {
#define HM_ROLE_NAME(r) #r,
    HM_SOURCE_ROLES(HM_ROLE_NAME)
#undef HM_ROLE_NAME
    NULL};
/* heapmem.h's length and age buckets: the feature, and the bound (0: any) */
static const struct { const char *name; int most; } hm_len_buckets[] = {
#define HM_LEN_ROW(b, most) {"len:" #b, most},
    HM_LEN_BUCKETS(HM_LEN_ROW)
#undef HM_LEN_ROW
};
static const struct { const char *name; double below; } hm_age_buckets[] = {
#define HM_AGE_ROW(b, below) {"age:" #b, below},
    HM_AGE_BUCKETS(HM_AGE_ROW)
#undef HM_AGE_ROW
};
#define HM_NLEN ((int)(sizeof hm_len_buckets / sizeof hm_len_buckets[0]))
#define HM_NAGE ((int)(sizeof hm_age_buckets / sizeof hm_age_buckets[0]))

static int hm_all_digits(const char *w) {
  if (!*w) return 0;
  for (; *w; w++)
    if (*w < '0' || *w > '9') return 0;
  return 1;
}

/* Append " name" (or "name" when empty) to out; HM_TOOBIG if it does not fit. */
static int hm_append(char *out, int outlen, int *used, const char *name) {
  int len = (int)strlen(name);
  int need = len + (*used > 0 ? 1 : 0);
  if (*used + need + 1 > outlen) return HM_TOOBIG;
  if (*used > 0) out[(*used)++] = ' ';
  memcpy(out + *used, name, (size_t)len);
  *used += len;
  out[*used] = 0;
  return HM_OK;
}

/* The shape of a memory as space-separated feature names, e.g.
 * "kind:fact src:other len:m date:1 clock:0 num:1 ...": one value in every
 * slot.  Words are never features: only what kind of text this is.  Returns HM_OK or HM_TOOBIG.
 * text, kind, source: the memory's; out, outlen: where the names go. */
HM_API int hm_features(const char *text, const char *kind, const char *source,
                       char *out, int outlen) {
  if (!out || outlen < 1) return HM_TOOBIG;
  out[0] = 0;
  int used = 0, rc = HM_OK;
  char name[HM_MAX_WORD + 16];

  /* kind: only the known kinds; anything else is "other" */
  const char *k = (kind && hm_in_list(kind, hm_known_kinds)) ? kind : HM_OTHER_VALUE;
  snprintf(name, sizeof name, "kind:%s", k);
  if ((rc = hm_append(out, outlen, &used, name))) return rc;

  /* source: a role when it names one, "other" for any other name */
  char src[HM_MAX_WORD + 1] = HM_NO_SOURCE;
  if (source && source[0]) {
    int i = 0;
    for (; source[i] && i < HM_MAX_WORD; i++)
      src[i] = (char)tolower((unsigned char)source[i]);
    src[i] = 0;
    if (!hm_in_list(src, hm_source_roles)) strcpy(src, HM_OTHER_VALUE);
  }
  snprintf(name, sizeof name, "src:%s", src);
  if ((rc = hm_append(out, outlen, &used, name))) return rc;

  int nwords = 0, date = 0, num = 0, entity = 0, self = 0, clock = 0;
  int question = 0, money = 0, url = 0;
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  int n = (int)strlen((const char *)s);
  hm_scanner sc = {.s = s, .n = n};
  char w[HM_MAX_WORD + 1];
  int start = 0, prev_end = 0, prev_digits = 0;
  while (hm_next_word(&sc, w, &start) > 0) {
    /* a sentence starts at the first word and after . ! ? : or a newline */
    int sentence_start = nwords == 0;
    for (int i = prev_end; i < start; i++)
      if (s[i] == '.' || s[i] == '!' || s[i] == '?' || s[i] == ':' || s[i] == '\n')
        sentence_start = 1;
    prev_end = sc.pos;
    nwords++;
    if (hm_in_list(w, hm_months) || hm_in_list(w, hm_days)) date = 1;
    /* "may" is a month only next to a day number ("May 2", "2 May"), else a verb */
    if (strcmp(w, "may") == 0) {
      int j = sc.pos;
      while (j < n && s[j] == ' ') j++;
      if ((j < n && isdigit(s[j])) || prev_digits) date = 1;
    }
    prev_digits = hm_all_digits(w);
    if (hm_all_digits(w)) {
      num = 1;
      size_t L = strlen(w);
      if (L == 4 && (w[0] == '1' || w[0] == '2') && (w[1] == '9' || w[1] == '0')) date = 1;
      /* 3/14, 2024-03-14, 9:40 */
      if (sc.pos < n && (s[sc.pos] == '/' || s[sc.pos] == '-') && sc.pos + 1 < n &&
          isdigit(s[sc.pos + 1]) && L <= 4)
        date = 1;
      if (sc.pos < n && s[sc.pos] == ':' && sc.pos + 1 < n && isdigit(s[sc.pos + 1])) clock = 1;
    } else if (isdigit((unsigned char)w[0])) {
      num = 1; /* 9am, 3rd, 10k */
      const char *t = w;
      while (isdigit((unsigned char)*t)) t++;
      if (strcmp(t, "am") == 0 || strcmp(t, "pm") == 0) clock = 1;
      if (strcmp(t, "st") == 0 || strcmp(t, "nd") == 0 || strcmp(t, "rd") == 0 ||
          strcmp(t, "th") == 0)
        date = 1;
    } else if (hm_in_list(w, hm_number_words)) {
      num = 1;
    }
    if (hm_in_list(w, hm_self_words)) self = 1;
    if (strcmp(w, "http") == 0 || strcmp(w, "https") == 0 || strcmp(w, "www") == 0) url = 1;
    if (strcmp(w, "price") == 0 || strcmp(w, "cost") == 0 || strcmp(w, "dollars") == 0 ||
        strcmp(w, "euros") == 0 || strcmp(w, "paid") == 0)
      money = 1;
    unsigned char c0 = s[start];
    if (!sentence_start && c0 >= 'A' && c0 <= 'Z' && strcmp(w, "i") != 0 &&
        !hm_in_list(w, hm_self_words))
      entity = 1;
  }
  for (int i = 0; i < n; i++) {
    if (s[i] == '?') question = 1;
    if (s[i] == '$') money = num = 1;
    if (i + 1 < n && s[i] == 0xE2 && s[i + 1] == 0x82) money = 1; /* euro sign */
    if (i + 1 < n && s[i] == 0xC2 && s[i + 1] == 0xA3) money = 1; /* pound sign */
  }
  int b = 0;
  while (b < HM_NLEN - 1 && hm_len_buckets[b].most && nwords > hm_len_buckets[b].most) b++;
  const char *len = hm_len_buckets[b].name;
  if ((rc = hm_append(out, outlen, &used, len))) return rc;
  /* every memory has every slot, present or absent, so that no memory gets
   * more (or fewer) chances of being useful from the mere number of its
   * features */
  const struct { const char *name; int on; } slots[] = {
#define HM_FLAG_ROW(f) {#f, f},
      HM_FLAG_SLOTS(HM_FLAG_ROW)
#undef HM_FLAG_ROW
  };
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
    size_t L = strlen(slots[i].name);
    memcpy(name, slots[i].name, L);
    name[L] = ':';
    name[L + 1] = slots[i].on ? '1' : '0';
    name[L + 2] = 0;
    if ((rc = hm_append(out, outlen, &used, name))) return rc;
  }
  return HM_OK;
}

/* How a memory relates to the question, as features: "srcq:1" when the
 * memory's source is named in the question ("What did Ana say ...?" and a
 * memory Ana stated), else "srcq:0".  No word of either is kept. */
HM_API int hm_relate(const char *question, const char *source, char *out, int outlen) {
  int named = 0;
  if (source && source[0] && question) {
    char src[HM_MAX_WORD + 1], w[HM_MAX_WORD + 1];
    hm_scanner ss = {.s = (const unsigned char *)source, .n = (int)strlen(source)};
    if (hm_next_word(&ss, src, NULL) > 0 && !hm_in_list(src, hm_source_roles)) {
      hm_scanner sq = {.s = (const unsigned char *)question, .n = (int)strlen(question)};
      while (!named && hm_next_word(&sq, w, NULL) > 0) {
        char *ap = strchr(w, '\'');
        if (ap && ap != w) *ap = 0; /* "ana's" -> "ana" */
        named = strcmp(w, src) == 0;
      }
    }
  }
  if (!out || outlen < 7) return HM_TOOBIG;
  strcpy(out, named ? HM_RELATE_SLOT ":1" : HM_RELATE_SLOT ":0");
  return HM_OK;
}

/* The age bucket of a memory (time since last use, or creation). */
static const char *hm_age_bucket(double age_days) {
  if (isnan(age_days)) return NULL;
  int b = 0;
  while (b < HM_NAGE - 1 && hm_age_buckets[b].below && !(age_days < hm_age_buckets[b].below)) b++;
  return hm_age_buckets[b].name;
}

/* Whether the n bytes at s are one of list's words. */
static int hm_in_list_n(const char *s, int n, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if ((int)strlen(list[i]) == n && !memcmp(list[i], s, (size_t)n)) return 1;
  return 0;
}

/* Whether f is a feature heapmem makes (heapmem.h's grammar): its own part
 * (base, ctx:1, an age or length bucket, a kind, a source role, a flag slot
 * or srcq with 0 or 1), alone or after a question type and '/'. */
static int hm_feature_ok(const char *f) {
  const char *slash = strchr(f, '/');
  if (slash) {
    if (!hm_in_list_n(f, (int)(slash - f), hm_qtype_names)) return 0;
    f = slash + 1;
  }
  if (!strcmp(f, HM_BASE_FEATURE) || !strcmp(f, HM_CTX_FEATURE)) return 1;
  const char *colon = strchr(f, ':');
  if (!colon) return 0;
  int slot = (int)(colon - f);
  const char *v = colon + 1;
  int vlen = (int)strlen(v);
#define HM_SLOT_IS(name) (slot == (int)sizeof name - 1 && !memcmp(f, name, (size_t)slot))
  if (HM_SLOT_IS("kind"))
    return hm_in_list_n(v, vlen, hm_known_kinds) || !strcmp(v, HM_OTHER_VALUE);
  if (HM_SLOT_IS("src"))
    return hm_in_list_n(v, vlen, hm_source_roles) || !strcmp(v, HM_OTHER_VALUE) ||
           !strcmp(v, HM_NO_SOURCE);
  for (int i = 0; i < HM_NLEN; i++)
    if (!strcmp(f, hm_len_buckets[i].name)) return 1;
  for (int i = 0; i < HM_NAGE; i++)
    if (!strcmp(f, hm_age_buckets[i].name)) return 1;
  if (strcmp(v, "0") && strcmp(v, "1")) return 0;
  static const char *const flags[] = {
#define HM_FLAG_NAME(s) #s,
      HM_FLAG_SLOTS(HM_FLAG_NAME)
#undef HM_FLAG_NAME
      HM_RELATE_SLOT, NULL};
  return hm_in_list_n(f, slot, flags);
#undef HM_SLOT_IS
}

/* The features a memory shows to one question: "base" (every memory has it:
 * its link learns the base rate of use), the memory's shape features, its
 * age bucket (unless age_days is NaN), then each of those crossed with the
 * question type ("when/date:1").  Space-separated.
 * features: the memory's shape; qtype: the question's type; out, outlen: where
 * the list goes. */
HM_API int hm_active(const char *features, const char *qtype, double age_days, char *out,
                     int outlen, char *err, int errlen) {
  if (!out || outlen < 1) return HM_TOOBIG;
  out[0] = 0;
  if (!hm_qtype_valid(qtype)) {
    hm_errf(err, errlen, "unknown question type '%s'", qtype ? qtype : "");
    return HM_ERROR;
  }
  char own[HM_MAX_FEATURES * (HM_MAX_WORD + 2) + 32];
  int ownlen = snprintf(own, sizeof own, HM_BASE_FEATURE " %s", features ? features : "");
  if (ownlen >= (int)sizeof own) {
    hm_errf(err, errlen, "too many features");
    return HM_ERROR;
  }
  const char *age = hm_age_bucket(age_days);
  if (age) {
    if (ownlen + 1 + (int)strlen(age) + 1 > (int)sizeof own) {
      hm_errf(err, errlen, "too many features");
      return HM_ERROR;
    }
    own[ownlen++] = ' ';
    strcpy(own + ownlen, age);
  }
  int used = 0, count = 0, rc;
  char name[2 * HM_MAX_WORD + 16];
  size_t qlen = strlen(qtype); /* a valid question type: at most 8 bytes */
  for (int pass = 0; pass < 2; pass++) {
    const char *p = own;
    while (*p) {
      while (*p == ' ') p++;
      const char *e = p;
      while (*e && *e != ' ') e++;
      if (e > p) {
        int L = (int)(e - p);
        if (L > HM_MAX_WORD) {
          hm_errf(err, errlen, "feature name too long: ''");
          return HM_ERROR;
        }
        if (memchr(p, '/', (size_t)L)) {
          hm_errf(err, errlen, "feature names must not contain '/'");
          return HM_ERROR;
        }
        if (++count > HM_MAX_FEATURES) {
          hm_errf(err, errlen, "too many features");
          return HM_ERROR;
        }
        /* "name" or "qtype/name", built without snprintf (this runs for
         * every feature of every candidate of every recall) */
        int n = 0;
        if (pass == 1) {
          memcpy(name, qtype, qlen);
          n = qlen;
          name[n++] = '/';
        }
        memcpy(name + n, p, (size_t)L);
        name[n + L] = 0;
        if ((rc = hm_append(out, outlen, &used, name))) return rc;
      }
      p = e;
    }
  }
  return HM_OK;
}

#pragma endregion

#pragma region FTS5 query building

static u64 hm_fnv64(const char *s, size_t n) {
  u64 h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* The 64-bit FNV-1a hash that keys a feature in a link set. */
HM_API uint64_t hm_hash(const char *s) { return hm_fnv64(s ? s : "", s ? strlen(s) : 0); }

/* The FTS5 token that tags every memory of a namespace: "ns" and then each
 * byte of the name as three decimal digits ("ab" -> "ns097098").  It is the
 * name itself, spelled so that FTS5 reads it as one token: two names never
 * share a tag (a hash would let a chosen name collide with another tenant's),
 * and digits are the one spelling the porter stemmer leaves as it is.
 * Returns the tag's length, or -1 (out set to "") when the name is longer
 * than HM_MAX_NS_BYTES or out (outlen bytes) cannot hold the tag. */
HM_API int hm_ns_tag(const char *ns, char *out, int outlen) {
  size_t n = ns ? strlen(ns) : 0;
  if (!out || outlen < 1) return -1;
  out[0] = 0;
  if (n > HM_MAX_NS_BYTES || (size_t)outlen < 2 + 3 * n + 1) return -1;
  out[0] = 'n';
  out[1] = 's';
  for (size_t i = 0; i < n; i++) {
    unsigned b = (unsigned char)ns[i];
    out[2 + 3 * i] = (char)('0' + b / 100);
    out[3 + 3 * i] = (char)('0' + b / 10 % 10);
    out[4 + 3 * i] = (char)('0' + b % 10);
  }
  out[2 + 3 * n] = 0;
  return (int)(2 + 3 * n);
}

/* A safe FTS5 MATCH expression for a question: its terms (stop words
 * dropped, duplicates dropped) each quoted, OR-joined; with a namespace, the
 * whole is restricted to that namespace's tag column.  Writes "" when the
 * question has no term.  Returns the number of terms, or -1 if out is too
 * small. */
HM_API int hm_match(const char *q, const char *ns, char *out, int outlen) {
  if (!out || outlen < 1) return -1;
  out[0] = 0;
  char terms[HM_MAX_QUERY_TERMS][HM_MAX_WORD + 1];
  int nterms = 0;
  hm_scanner sc = {.s = (const unsigned char *)(q ? q : ""), .n = q ? (int)strlen(q) : 0};
  char w[HM_MAX_WORD + 1];
  while (nterms < HM_MAX_QUERY_TERMS && hm_next_word(&sc, w, NULL) > 0) {
    if (hm_is_stop_word(w)) continue;
    /* keep only the part before an apostrophe ("lisbon's" -> "lisbon") */
    char *ap = strchr(w, '\'');
    if (ap && ap != w) *ap = 0;
    if (hm_is_stop_word(w)) continue;
    int dup = 0;
    for (int i = 0; i < nterms; i++)
      if (strcmp(terms[i], w) == 0) dup = 1;
    if (!dup) strcpy(terms[nterms++], w);
  }
  if (nterms == 0) return 0;
  int used = 0;
#define HM_PUT(str)                                          \
  do {                                                       \
    size_t L_ = strlen(str);                                 \
    if (used + (int)L_ + 1 > outlen) return -1;              \
    memcpy(out + used, str, L_);                             \
    used += (int)L_;                                         \
    out[used] = 0;                                           \
  } while (0)
  if (ns) {
    char tag[HM_NS_TAG_LEN];
    if (hm_ns_tag(ns, tag, sizeof tag) < 0) return -1;
    HM_PUT("nstag : \"");
    HM_PUT(tag);
    HM_PUT("\" AND (");
  }
  for (int i = 0; i < nterms; i++) {
    if (i) HM_PUT(" OR ");
    HM_PUT("\"");
    HM_PUT(terms[i]); /* words never hold a double quote */
    HM_PUT("\"");
  }
  if (ns) HM_PUT(")");
#undef HM_PUT
  return nterms;
}

#pragma endregion
