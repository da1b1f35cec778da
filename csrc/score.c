/*
 * score.c: a memory's score for one question, and the line that explains it.
 *
 * Owns: the config fields' table (hm_config_fields, made from heapmem.h's
 * HM_CONFIG_FIELDS) with its defaults, check and parser; recency; usefulness
 * from the learned links (hm_usefulness: the gated lift, model 1, the
 * default, or the reference noisy-OR, model 0), explored or not, and the
 * bound max_lift puts on its factor (hm_lift); the factor exploration puts
 * on a score (hm_explore); the score of a batch of candidates
 * (hm_score_batch), the explain line (hm_explain) and the cosine of two
 * vectors (hm_cosine).
 * Relies on: heapmem.c's preamble, text.c (hm_active, hm_age_bucket,
 * hm_qtype_valid, hm_fnv64), links.c (hm_links_count, hm_links_get),
 * sample.c (hm_draw, hm_stream, hm_beta_draw).  Makes
 * no sqlite3_* call.
 */

#pragma region scoring

#define HM_BASE_LEN ((int)sizeof HM_BASE_FEATURE - 1)


typedef struct {
  double relevance, recency, importance, usefulness, rules, score;
  double rest;     /* the score without its usefulness factor */
  double lift;     /* usefulness's factor on the score (hm_lift) */
  double evidence; /* how well evidenced usefulness is, 0..1 (hm_usefulness) */
} hm_factors;

/* The config fields' table, from HM_CONFIG_FIELDS: name, offset, default,
 * bounds, rule and the message a bad value gets. */
static const struct {
  const char *name;
  size_t offset;
  double dflt, lo, hi;
  int rule;
  const char *msg;
} hm_config_fields[] = {
#define HM_CONFIG_ROW(f, d, l, h, r, m)                                          \
  {.name = #f, .offset = offsetof(hm_config, f), .dflt = d, .lo = l, .hi = h, .rule = r, \
   .msg = m},
    HM_CONFIG_FIELDS(HM_CONFIG_ROW)
#undef HM_CONFIG_ROW
};
#define HM_NCONFIG ((int)(sizeof hm_config_fields / sizeof hm_config_fields[0]))

static double *hm_config_slot(hm_config *c, int i) {
  return (double *)((char *)c + hm_config_fields[i].offset);
}

HM_API void hm_config_default(hm_config *c) {
  for (int i = 0; i < HM_NCONFIG; i++) *hm_config_slot(c, i) = hm_config_fields[i].dflt;
}

static int hm_config_check(const hm_config *c, char *err, int errlen) {
  for (int i = 0; i < HM_NCONFIG; i++) {
    double v = *hm_config_slot((hm_config *)c, i), lo = hm_config_fields[i].lo,
           hi = hm_config_fields[i].hi;
    int ok;
    switch (hm_config_fields[i].rule) {
    case HM_RULE_POSITIVE: ok = isfinite(v) && v > 0; break;
    /* isnormal: a subnormal prior (5e-324) divides down to 0 and makes NaN scores */
    case HM_RULE_PRIOR: ok = isnormal(v) && v > 0 && c->prior_alpha + c->prior_beta <= hi; break;
    case HM_RULE_SWITCH: ok = v == lo || v == hi; break;
    case HM_RULE_COUNT: ok = v >= lo && v <= hi && v == floor(v); break;
    default: ok = v >= lo && v <= hi; break; /* NaN fails */
    }
    if (!ok) {
      hm_errf(err, errlen, "%s", hm_config_fields[i].msg);
      return HM_ERROR;
    }
  }
  return HM_OK;
}

/* Parse "w_recency=0 half_life_days=14" (spaces or commas between pairs)
 * over the defaults. */
HM_API int hm_config_parse(const char *text, hm_config *c, char *err, int errlen) {
  hm_config_default(c);
  const char *p = text ? text : "";
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
    if (!*p) break;
    const char *k = p;
    while (*p && *p != '=' && *p != ' ' && *p != ',') p++;
    int klen = (int)(p - k);
    char key[40];
    snprintf(key, sizeof key, "%.*s", klen < 39 ? klen : hm_utf8_cut(k, 39), k);
    if (*p != '=') {
      hm_errf(err, errlen, "expected key=value in the config, got '%s'", key);
      return HM_ERROR;
    }
    p++;
    char *end;
    /* a decimal number only (strtod alone would take 0x3e8 and more), or
     * nan, inf and -inf as Python writes them, which the field's rule then
     * refuses in its own words */
    const char *d = p + (*p == '-' || *p == '+');
    int digits = 0;
    if (!strncmp(p, "nan", 3) || !strncmp(d, "inf", 3)) d += 3, digits = 1;
    while (isdigit((unsigned char)*d)) d++, digits++;
    if (*d == '.') for (d++; isdigit((unsigned char)*d); d++) digits++;
    if (digits && (*d == 'e' || *d == 'E')) {
      d += 1 + (d[1] == '-' || d[1] == '+');
      if (!isdigit((unsigned char)*d)) digits = 0;
      while (isdigit((unsigned char)*d)) d++;
    }
    double v = digits ? strtod(p, &end) : 0.0;
    if (!digits) end = (char *)p;
    else if (end != d) end = (char *)p; /* strtod read something else */
    if (end == p || (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n')) {
      hm_errf(err, errlen, "config value of '%s' is not a number", key);
      return HM_ERROR;
    }
    p = end;
    double *slot = NULL;
    for (int i = 0; i < HM_NCONFIG && !slot; i++)
      if (!strcmp(key, hm_config_fields[i].name)) slot = hm_config_slot(c, i);
    if (!slot) {
      hm_errf(err, errlen, "unknown config key '%s'", key);
      return HM_ERROR;
    }
    *slot = v;
  }
  return hm_config_check(c, err, errlen);
}

HM_API double hm_recency(double age_days, double half_life_days, double floor) {
  if (!(age_days > 0)) age_days = 0;
  return floor + (1.0 - floor) * pow(0.5, age_days / half_life_days);
}

/* 1 - prod(1 - s_i) */
HM_API double hm_noisy_or(const double *s, int n) {
  double keep = 1.0;
  for (int i = 0; i < n; i++) keep *= 1.0 - s[i];
  return 1.0 - keep;
}

/* The evidence of the base links an active list is judged against: the
 * uncrossed "base" (b[0] alpha, b[1] beta) and its question type's
 * "<qtype>/base" (b[2], b[3]; the uncrossed one's when the list has no
 * crossed feature). */
static void hm_base_counts(const char *active, const unsigned char *links, i64 count,
                           double b[4]) {
  hm_links_get(links, count, HM_BASE_FEATURE, HM_BASE_LEN, &b[0], &b[1]);
  b[2] = b[0];
  b[3] = b[1];
  const char *slash = strchr(active, '/');
  if (slash) {
    const char *qs = slash;
    while (qs > active && qs[-1] != ' ') qs--;
    char qb[HM_MAX_WORD + 8];
    snprintf(qb, sizeof qb, "%.*s/" HM_BASE_FEATURE, (int)(slash - qs), qs);
    hm_links_get(links, count, qb, (int)strlen(qb), &b[2], &b[3]);
  }
}

/* The links' gate (model 1): a link of counts A, B, shrunk towards its
 * layer's base rate p with the prior's weight k0, moves rankings only where
 * its posterior lies more than gate_z standard errors from p, and then by the
 * interval's near edge.  Returns that edge, or p itself when the interval
 * holds p; *m and *se receive the posterior's mean and standard error. */
static double hm_gate(double p, double k0, double A, double B, double gate_z, double *m,
                      double *se) {
  *m = (p * k0 + A) / (k0 + A + B);
  *se = sqrt(*m * (1.0 - *m) / (k0 + A + B + 1.0));
  double lo = *m - gate_z * *se, hi = *m + gate_z * *se;
  return lo > p ? lo : hi < p ? hi : p;
}

/* Whether a feature may only lift (its link counts where it lies above the
 * base rate, never below): HM_CTX_FEATURE, a memory's record for questions
 * like this one, which like contextual utility itself is a boost only. */
static int hm_lift_only(const char *name, int len) {
  return len == (int)sizeof HM_CTX_FEATURE - 1 && memcmp(name, HM_CTX_FEATURE, (size_t)len) == 0;
}

/* One uncrossed link's ratio as hm_usefulness counts it under model 1: the
 * gated edge over the base rate of use, exactly 1 when the link cannot beat
 * chance (or the store has no base rate to judge it against).  *p receives
 * that base rate, the uncrossed "base" link's posterior mean.
 * links, count: the link set; name, len: the feature. */
static double hm_link_ratio(const unsigned char *links, i64 count, const char *name, int len,
                            const hm_config *c, double *p) {
  double k0 = c->prior_alpha + c->prior_beta, A0, B0, A, B, m, se;
  hm_links_get(links, count, HM_BASE_FEATURE, HM_BASE_LEN, &A0, &B0);
  *p = (c->prior_alpha + A0) / (k0 + A0 + B0);
  if (!(*p > 0 && *p < 1)) return 1.0;
  hm_links_get(links, count, name, len, &A, &B);
  return hm_gate(*p, k0, A, B, c->gate_z, &m, &se) / *p;
}

/* A link's value under exploration: g, the value it counts at unexplored,
 * times (a draw of its posterior Beta(a, b) / m, the posterior's mean) to
 * the power explore: the draw's deviation from the mean, damped in the log
 * scale usefulness multiplies in; at most 1.  g itself when the posterior
 * cannot be drawn from.
 * x: the recall's draws; name, len: the link's feature, which seeds its
 * draw. */
static double hm_explored(double g, double m, double a, double b, const hm_draw *x,
                          const char *name, int len) {
  if (!(a > 0 && b > 0 && isfinite(a + b) && m > 0)) return g;
  u64 s = hm_stream(x->seed, name, len);
  double v = g * pow(hm_beta_draw(a, b, &s) / m, x->explore);
  return v > 1 ? 1 : v >= 0 ? v : g;
}

/* The usefulness of one memory from the learned links of its active features.
 *
 * model 0 (the reference design): s_f = posterior mean of Beta(prior + counts),
 *   usefulness = 1 - prod(1 - s_f).
 * model 1 (gated lift): each link is compared with the base rate p of its
 *   layer (the "base" link: how often any shown memory is used; per question
 *   type for crossed features).  Its posterior, shrunk towards p with the
 *   prior's weight, moves rankings only where it lies more than gate_z
 *   standard errors from p, and then only by the near edge of that interval,
 *   g; its ratio is g / p (exactly 1 when gated).
 *   combine 1: usefulness = the product over the memory's slots of the most
 *     specific ratio that passed the gate (the crossed link, else the plain
 *     one): the likelihood ratio of use, naive-Bayes style, without counting
 *     a feature twice.  backoff 1: where both passed, the crossed link counts
 *     only if it differs from what the plain one predicts for its question
 *     type (the plain rate times p_q / p_all) by more than gate_z of its
 *     standard errors; where it agrees, the plain link's ratio counts, as it
 *     rests on more evidence (a crossed link's near edge is close to p only
 *     because its layer holds fewer judgements, not because its effect is
 *     smaller).
 *   combine 0: a link above p is a cause of use with strength
 *     (g - p) / (1 - p), one below p an inhibitor g / p; usefulness =
 *     P(used) / p with P(used) the noisy-OR of the causes leaking p.
 *   Either way usefulness is exactly 1 with no evidence, or with evidence
 *   that cannot beat chance.
 *   *evidence (NULL: not wanted) receives how well evidenced that
 *   usefulness is, 0..1: each link in effect has confidence 1 - gate_z / z,
 *   z its posterior's distance from p in standard errors (0 at the gate,
 *   towards 1 as evidence grows; 1 without a gate), and *evidence is their
 *   mean weighted by |log ratio|, the share each has in usefulness; 0 when
 *   no link is in effect (always under model 0).  hm_lift turns it into
 *   the exponent's share w_evidence.
 * eff[i] receives each feature's effect for explain (model 0: s_f; model 1:
 * the factor it multiplies usefulness by, 1 when it has none).
 *
 * x (NULL: none) explores, as a tracked recall does with explore > 0: each
 * link's posterior is sampled (a Thompson draw, one per link and recall) and
 * the link counts at g x (draw / m)^explore, at most 1, with g the value it
 * counts at unexplored (model 1: the gated value; model 0: s_f = m) and m
 * its posterior mean: the draw itself at explore 1 where nothing is gated.
 * The draw's spread shrinks as the link's evidence grows, so exploration
 * fades where the store has learned.  Which link of a slot counts (combine
 * 1) is still the gate's choice; eff then receives the explored effects.
 * A lift-only link (hm_lift_only) is never below 1, drawn or not.
 * links, count: the link set; x: the draws (NULL: unexplored); *eff: each
 * active feature's effect, at most max of them. */
static int hm_usefulness(const char *active, const unsigned char *links, i64 count,
                         const hm_config *c, const hm_draw *x, double *use, double *eff,
                         int max, double *evidence) {
  double k0 = c->prior_alpha + c->prior_beta, b[4];
  unsigned char passed[2 * HM_MAX_FEATURES]; /* model 1: the link beat the gate */
  double conf[2 * HM_MAX_FEATURES], ratio[2 * HM_MAX_FEATURES];
  double mean[2 * HM_MAX_FEATURES], sem[2 * HM_MAX_FEATURES]; /* each link's posterior */
  if (evidence) *evidence = 0.0;
  int n = 0, first_crossed = -1;
  if (max > 2 * HM_MAX_FEATURES) max = 2 * HM_MAX_FEATURES;
  /* base rates: uncrossed and of the question type's layer */
  hm_base_counts(active, links, count, b);
  double p_all = (c->prior_alpha + b[0]) / (k0 + b[0] + b[1]);
  double p_q = (c->prior_alpha + b[2]) / (k0 + b[2] + b[3]);
  double noisy = 1.0;
  const char *p = active;
  while (*p) {
    while (*p == ' ') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if (e > p) {
      if (n >= max || n >= 2 * HM_MAX_FEATURES) return -1;
      double A, B;
      conf[n] = mean[n] = sem[n] = 0.0;
      ratio[n] = 1.0;
      int L = (int)(e - p);
      hm_links_get(links, count, p, L, &A, &B);
      const char *sl = memchr(p, '/', (size_t)L);
      if (sl && first_crossed < 0) first_crossed = n;
      const char *name = sl ? sl + 1 : p;
      int is_base = (int)(e - name) == HM_BASE_LEN && memcmp(name, HM_BASE_FEATURE, HM_BASE_LEN) == 0;
      passed[n] = 0;
      if (c->model == 0) {
        double sf = (c->prior_alpha + A) / (k0 + A + B);
        if (x) sf = hm_explored(sf, sf, c->prior_alpha + A, c->prior_beta + B, x, p, L);
        noisy *= 1.0 - sf;
        eff[n] = sf;
      } else if (is_base) {
        eff[n] = 1.0;
      } else {
        double base = sl ? p_q : p_all, m, se;
        double g = hm_gate(base, k0, A, B, c->gate_z, &m, &se);
        int lift_only = hm_lift_only(name, (int)(e - name));
        if (g < base && lift_only) g = base;
        eff[n] = g / base; /* the ratio; combine 0 turns it into a cause below */
        passed[n] = eff[n] != 1.0;
        ratio[n] = eff[n]; /* as learned: exploration's draw is not evidence */
        mean[n] = m;
        sem[n] = se;
        if (g != base) conf[n] = c->gate_z > 0 ? 1.0 - c->gate_z * se / fabs(m - base) : 1.0;
        if (x) eff[n] = hm_explored(g, m, base * k0 + A, (1.0 - base) * k0 + B, x, p, L) / base;
        if (eff[n] < 1.0 && lift_only) eff[n] = 1.0; /* nor does a draw push it below */
      }
      n++;
    }
    p = e;
  }
  if (c->model == 0) {
    *use = 1.0 - noisy;
    return n;
  }
  if (first_crossed < 0 || 2 * first_crossed != n) return -1; /* not an hm_active list */
  if (c->combine == 1) {
    double u = 1.0;
    for (int j = 0; j < first_crossed; j++) {
      double *plain = &eff[j], *crossed = &eff[first_crossed + j];
      int cx = first_crossed + j;
      if (passed[cx] && passed[j] && c->backoff == 1 &&
          fabs(mean[cx] - mean[j] * p_q / p_all) <= c->gate_z * sem[cx]) {
        u *= *plain; /* the crossed link agrees with the plain one: back off to it */
        *crossed = 1.0;
        ratio[cx] = 1.0;
      } else if (passed[cx]) {
        u *= *crossed;
        *plain = 1.0;
        ratio[j] = 1.0;
      } else {
        u *= *plain;
      }
    }
    *use = u;
  } else {
    double keep = 1.0, inhib = 1.0;
    for (int i = 0; i < n; i++) {
      double base = i >= first_crossed ? p_q : p_all;
      if (eff[i] > 1.0) {
        double ef = (eff[i] * base - base) / (1.0 - base);
        keep *= 1.0 - ef;
        eff[i] = (1.0 - (1.0 - p_q) * (1.0 - ef)) / p_q; /* its effect alone */
      } else if (eff[i] < 1.0) {
        inhib *= eff[i];
      }
    }
    *use = (1.0 - (1.0 - p_q) * keep) / p_q * inhib;
  }
  if (evidence) {
    double wsum = 0.0, csum = 0.0;
    for (int i = 0; i < n; i++) {
      double w = fabs(log(ratio[i]));
      wsum += w;
      csum += w * conf[i];
    }
    if (wsum > 0) *evidence = csum / wsum;
  }
  return n;
}


/* The inputs every factor needs, checked. */
static int hm_check_input(const hm_input *in, char *err, int errlen) {
  if (!isfinite(in->relevance) || in->relevance < 0) {
    hm_errf(err, errlen, "relevance must be a finite number >= 0");
    return HM_ERROR;
  }
  if (isnan(in->age_days)) {
    hm_errf(err, errlen, "age_days must be a number");
    return HM_ERROR;
  }
  if (!isfinite(in->importance) || in->importance <= 0) {
    hm_errf(err, errlen, "importance must be a positive number");
    return HM_ERROR;
  }
  return HM_OK;
}

/* The exponent usefulness gets: w_usefulness, plus w_evidence times how well
 * evidenced it is (hm_usefulness's *evidence, 0..1; 0 under model 0).  So a
 * lift that rests on much evidence counts more, one near the gate barely
 * more than w_usefulness; with no link past the gate usefulness is 1 and
 * the exponent moves nothing. */
static double hm_exponent(double evidence, const hm_config *c) {
  return c->w_usefulness + (c->w_usefulness > 0 ? c->w_evidence * evidence : 0.0);
}

/* usefulness^exponent, the factor usefulness puts on a score.  Under the
 * gated lift (model 1) usefulness is a ratio to the base rate, and max_lift
 * bounds how far it may move a score either way: what any evidence (a prior
 * merged from elsewhere, colluding tenants) can do.  The reference noisy-OR
 * (model 0) gives a likelihood in [0, 1], left as it is. */
static double hm_lift(double usefulness, double evidence, const hm_config *c) {
  double lift = pow(usefulness, hm_exponent(evidence, c));
  if (c->model != 1) return lift;
  if (lift > c->max_lift) return c->max_lift;
  if (lift < 1.0 / c->max_lift) return 1.0 / c->max_lift;
  return lift;
}

/* The learned factors on a score together: usefulness's lift (hm_lift),
 * contextual utility's factor and exploration's, their product within
 * max_lift's bounds under the gated lift (model 1).  So max_lift bounds what
 * everything learned can do to a score, together: a prior merged from
 * elsewhere, colluding tenants, one user's repeated judgements of one
 * memory (bench/RESULTS.md 22 measured this against bounding usefulness
 * alone).  Under the reference noisy-OR (model 0) the product as it is. */
static double hm_learned(double lift, double context, double explore, const hm_config *c) {
  double l = lift * context * explore;
  if (c->model != 1) return l;
  if (l > c->max_lift) return c->max_lift;
  if (l < 1.0 / c->max_lift) return 1.0 / c->max_lift;
  return l;
}

/* Every factor and the score, given the usefulness.
 * in: the memory; use, evidence: its usefulness and the evidence behind it; f:
 * its factors. */
static void hm_finish(const hm_input *in, double use, double evidence, const hm_config *c,
                      hm_factors *f) {
  f->relevance = in->relevance;
  f->recency = hm_recency(in->age_days, c->half_life_days, c->recency_floor);
  f->importance = in->importance;
  f->usefulness = use;
  f->evidence = evidence;
  f->rules = in->superseded ? c->superseded_factor : 1.0;
  double fixed = pow(f->relevance, c->w_relevance) * pow(f->recency, c->w_recency) *
                 pow(f->importance, c->w_importance);
  f->lift = hm_lift(f->usefulness, f->evidence, c);
  f->score = fixed * f->lift * f->rules;
  f->rest = fixed * f->rules;
}

/* One memory scored: in, the memory; qtype, its question's type; links,
 * nlinks: the link set; f: its factors; active, activelen: its active
 * features; eff, ns: each one's effect and their number. */
static int hm_score_one(const hm_input *in, const char *qtype, const unsigned char *links,
                        i64 nlinks, const hm_config *c, hm_factors *f, char *active,
                        int activelen, double *eff, int *ns, char *err, int errlen) {
  if (hm_check_input(in, err, errlen)) return HM_ERROR;
  int rc = hm_active(in->features, qtype, in->age_days, active, activelen, err, errlen);
  if (rc == HM_TOOBIG) {
    hm_errf(err, errlen, "too many features");
    return HM_ERROR;
  }
  if (rc) return rc;
  double use, evidence;
  int k = hm_usefulness(active, links, nlinks, c, NULL, &use, eff, 2 * HM_MAX_FEATURES,
                        &evidence);
  if (k < 0) {
    hm_errf(err, errlen, "too many features");
    return HM_ERROR;
  }
  *ns = k;
  hm_finish(in, use, evidence, c, f);
  return HM_OK;
}


/* One memory's usefulness unexplored (*plain, with its *evidence) and
 * explored by x (*drawn).
 * features, qtype, age_days: the memory and its question's type; links, count:
 * the link set. */
static int hm_explore_one(const char *features, const char *qtype, double age_days,
                          const unsigned char *links, i64 count, const hm_config *c,
                          const hm_draw *x, double *plain, double *drawn, double *evidence,
                          char *err, int errlen) {
  static __thread char active[HM_ACTIVE_LEN];
  double eff[2 * HM_MAX_FEATURES];
  int rc = hm_active(features ? features : "", qtype, age_days, active, sizeof active, err,
                     errlen);
  if (rc == HM_OK &&
      (hm_usefulness(active, links, count, c, NULL, plain, eff, 2 * HM_MAX_FEATURES,
                     evidence) < 0 ||
       hm_usefulness(active, links, count, c, x, drawn, eff, 2 * HM_MAX_FEATURES, NULL) < 0))
    rc = HM_TOOBIG;
  if (rc == HM_TOOBIG) hm_errf(err, errlen, "too many features");
  return rc ? HM_ERROR : HM_OK;
}

static int hm_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The link set's count of links with the config checked, for a batch of
 * candidates (hm_explore, hm_score_batch); -1 with err set when either is bad.
 * links, linkslen: the link set. */
static i64 hm_batch_links(const unsigned char *links, i64 linkslen, const hm_config *c,
                          char *err, int errlen) {
  i64 count = hm_links_count(links, linkslen);
  if (count < 0) {
    hm_errf(err, errlen, "links is not a link set made by heap_links()");
    return -1;
  }
  return hm_config_check(c, err, errlen) ? -1 : count;
}

/* The factors a tracked recall's exploration puts on n candidates' scores
 * (see heapmem.h).  Each candidate's usefulness is drawn (hm_usefulness with
 * the stream seed starts, damped by c->explore), and its lift moves by the
 * draw's effect, its exponent (hm_exponent) x log(drawn / unexplored usefulness), less
 * the candidates' median effect: the links every candidate shares move them
 * all alike, and taking that common part off keeps it from pushing every
 * lift into the bound below, which would flatten the order the draws give.
 * The explored lift is then bounded as any lift is (model 1: max_lift
 * either way; model 0: at most 1), and factor[i] = explored lift / lift.
 * All 1 when exploration is off (explore 0) or usefulness is (w_usefulness
 * 0).  work holds 2n doubles.
 * features, age_days: each candidate's; qtype: the question's type; links,
 * linkslen: the link set; *bad: a failing candidate's index. */
HM_API int hm_explore(int n, const char *const *features, const double *age_days,
                      const char *qtype, const unsigned char *links, i64 linkslen,
                      const hm_config *c, uint64_t seed, double *factor, double *work,
                      int *bad, char *err, int errlen) {
  if (bad) *bad = -1;
  i64 count = hm_batch_links(links, linkslen, c, err, errlen);
  if (count < 0) return HM_ERROR;
  for (int i = 0; i < n; i++) factor[i] = 1.0;
  if (!(c->explore > 0) || !(c->w_usefulness > 0) || n < 1) return HM_OK;
  hm_draw x = {.seed = seed, .explore = c->explore};
  double *lift = work, *sorted = work + n, tiny = 1e-300;
  for (int i = 0; i < n; i++) {
    double plain, drawn, evidence = 0.0;
    if (hm_explore_one(features[i], qtype, age_days[i], links, count, c, &x, &plain, &drawn,
                       &evidence, err, errlen)) {
      if (bad) *bad = i;
      return HM_ERROR;
    }
    lift[i] = hm_lift(plain, evidence, c);
    double d = hm_exponent(evidence, c) *
               log((drawn > tiny ? drawn : tiny) / (plain > tiny ? plain : tiny));
    factor[i] = sorted[i] = isfinite(d) ? d : 0.0; /* the log ratio, for now */
  }
  qsort(sorted, (size_t)n, sizeof *sorted, hm_cmp_double);
  double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double hi = c->model == 1 ? c->max_lift : 1.0, lo = c->model == 1 ? 1.0 / c->max_lift : 0.0;
  for (int i = 0; i < n; i++) {
    double l = lift[i] * exp(factor[i] - median);
    if (!(l >= lo)) l = lo; /* NaN too */
    if (l > hi) l = hi;
    factor[i] = lift[i] > 0 && isfinite(lift[i]) ? l / lift[i] : 1.0;
  }
  return HM_OK;
}

/* One memory of a batch as hm_score_one reads it: no part of relevance to
 * explain, no factor but usefulness (heap_recall puts the others on after).
 * relevance, age_days, importance, superseded, features: the memory's. */
static hm_input hm_batch_input(double relevance, double age_days, double importance,
                               int superseded, const char *features) {
  return (hm_input){.relevance = relevance, .age_days = age_days, .importance = importance,
                    .superseded = superseded, .features = features, .bm25_part = NAN,
                    .cos_part = NAN, .context = 1.0, .explore = 1.0, .thread = 1.0,
                    .time = 1.0};
}

/* The scores hm_score_batch gives n memories (its column 5) under each of nw
 * weights of w_usefulness (w[0..nw), the rest of c as it is), into
 * score[k * n + i]: each memory's usefulness and evidence worked out once,
 * since they do not depend on the weight, then hm_finish under each weight
 * (what tune's replay needs: the same numbers as nw calls of hm_score_batch).
 * bad and err as hm_score_batch's.
 * relevance, age_days, importance, superseded, features: each memory's; qtype:
 * the question's type; links, linkslen: the link set. */
static int hm_score_weights(int n, const double *relevance, const double *age_days,
                            const double *importance, const int *superseded,
                            const char *const *features, const char *qtype,
                            const unsigned char *links, i64 linkslen, const hm_config *c,
                            const double *w, int nw, double *score, int *bad, char *err,
                            int errlen) {
  static __thread char active[HM_ACTIVE_LEN];
  double eff[2 * HM_MAX_FEATURES];
  if (bad) *bad = -1;
  i64 count = hm_batch_links(links, linkslen, c, err, errlen);
  if (count < 0) return HM_ERROR;
  for (int i = 0; i < n; i++) {
    hm_input in = hm_batch_input(relevance[i], age_days[i], importance[i], superseded[i],
                                 features[i]);
    hm_factors f;
    int k;
    if (hm_score_one(&in, qtype, links, count, c, &f, active, sizeof active, eff, &k, err,
                     errlen)) {
      if (bad) *bad = i;
      return HM_ERROR;
    }
    for (int j = 0; j < nw; j++) {
      hm_config cw = *c;
      cw.w_usefulness = w[j];
      hm_finish(&in, f.usefulness, f.evidence, &cw, &f);
      score[(i64)j * n + i] = f.score;
    }
  }
  return HM_OK;
}

/* Score n candidates.  out receives n x HM_SCORE_COLUMNS doubles: relevance,
 * recency, importance, usefulness, rules, score, rest, lift.  Returns HM_OK, or HM_ERROR with
 * the failing row's index in *bad and a message in err.
 * relevance, age_days, importance, superseded, features: each candidate's;
 * qtype: the question's type; links, linkslen: the link set; c: the config. */
HM_API int hm_score_batch(int n, const double *relevance, const double *age_days,
                          const double *importance, const int *superseded,
                          const char *const *features, const char *qtype,
                          const unsigned char *links, i64 linkslen, const hm_config *c,
                          double *out, int *bad, char *err, int errlen) {
  static __thread char active[HM_ACTIVE_LEN];
  double eff[2 * HM_MAX_FEATURES];
  if (bad) *bad = -1;
  i64 count = hm_batch_links(links, linkslen, c, err, errlen);
  if (count < 0) return HM_ERROR;
  /* candidates often share their shape: usefulness depends only on the
   * features and the age bucket, so each distinct pair is worked out once */
  struct { u64 h; const char *features, *bucket; double use, evidence; } memo[64];
  int nmemo = 0;
  for (int i = 0; i < n; i++) {
    hm_input in = hm_batch_input(relevance[i], age_days[i], importance[i], superseded[i],
                                 features[i]);
    hm_factors f;
    int k, hit = -1;
    u64 h = 0;
    const char *bucket = hm_age_bucket(age_days[i]);
    if (features[i]) {
      h = hm_fnv64(features[i], strlen(features[i]));
      for (int j = 0; j < nmemo && hit < 0; j++)
        if (memo[j].h == h && memo[j].bucket == bucket && strcmp(memo[j].features, features[i]) == 0)
          hit = j;
    }
    if (hit >= 0) {
      if (hm_check_input(&in, err, errlen)) {
        if (bad) *bad = i;
        return HM_ERROR;
      }
      hm_finish(&in, memo[hit].use, memo[hit].evidence, c, &f);
    } else {
      if (hm_score_one(&in, qtype, links, count, c, &f, active, sizeof active, eff, &k, err,
                       errlen)) {
        if (bad) *bad = i;
        return HM_ERROR;
      }
      if (features[i] && nmemo < (int)(sizeof memo / sizeof memo[0])) {
        memo[nmemo].h = h;
        memo[nmemo].features = features[i];
        memo[nmemo].bucket = bucket;
        memo[nmemo].use = f.usefulness;
        memo[nmemo].evidence = f.evidence;
        nmemo++;
      }
    }
    double *o = out + HM_SCORE_COLUMNS * (i64)i;
    o[0] = f.relevance; o[1] = f.recency; o[2] = f.importance;
    o[3] = f.usefulness; o[4] = f.rules; o[5] = f.score; o[6] = f.rest; o[7] = f.lift;
  }
  return HM_OK;
}

/* The name of the i-th word of a space-separated list, as (pointer, length). */
static int hm_nth(const char *list, int i, const char **name) {
  const char *p = list;
  int idx = 0;
  while (*p) {
    while (*p == ' ') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if (e > p) {
      if (idx == i) { *name = p; return (int)(e - p); }
      idx++;
    }
    p = e;
  }
  *name = "";
  return 0;
}

/* For explain when no link passes the gate (model 1): of the memory's active
 * features, the one that the fewest further uses would carry past the gate,
 * and how many (*more; 0 when none would within 1000): uses of this memory,
 * each judged used with nothing judged ignored, which add to the feature's
 * link and to its layer's base rate alike.  The gate is hm_usefulness's.
 * links, count: the link set; c: the config. */
static int hm_nearest_link(const char *active, const unsigned char *links, i64 count,
                           const hm_config *c, int *more) {
  double k0 = c->prior_alpha + c->prior_beta, A, B, b[4];
  hm_base_counts(active, links, count, b);
  int best = -1, n = 0;
  *more = 0;
  for (const char *p = active; *p;) {
    while (*p == ' ') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if (e == p) break;
    int L = (int)(e - p);
    const char *sl = memchr(p, '/', (size_t)L), *name = sl ? sl + 1 : p;
    if (!((int)(e - name) == HM_BASE_LEN && !memcmp(name, HM_BASE_FEATURE, HM_BASE_LEN))) {
      hm_links_get(links, count, p, L, &A, &B);
      double ba = sl ? b[2] : b[0], bb = sl ? b[3] : b[1];
      for (int u = 1; u <= 1000 && (!*more || u < *more); u++) {
        double base = (c->prior_alpha + ba + u) / (k0 + ba + bb + u);
        double a = A + u, m = (base * k0 + a) / (k0 + a + B);
        if (m - c->gate_z * sqrt(m * (1.0 - m) / (k0 + a + B + 1.0)) > base) {
          best = n;
          *more = u;
          break;
        }
      }
    }
    n++;
    p = e;
  }
  return best;
}

/* explain()'s words for the place's factors, appended to buf (size bytes,
 * u used; returns u): a neighbour in the memory's thread that lifted it
 * (place.c), then the window of time the question names. */
static int hm_explain_place(const hm_input *in, char *buf, int size, int u) {
#define HM_CAT(...) \
  do { if (u < size) u += snprintf(buf + u, (size_t)(size - u), __VA_ARGS__); } while (0)
  if (in->thread != 1.0) {
    long long off = in->thread_offset < 0 ? -(long long)in->thread_offset : in->thread_offset;
    HM_CAT(" x thread %.2f", in->thread);
    if (in->thread_from)
      HM_CAT(" (%s, %lld turn%s %s)", in->thread_from, off, off == 1 ? "" : "s",
             in->thread_offset < 0 ? "before" : "after");
  }
  if (in->time != 1.0) {
    HM_CAT(" x time %.2f", in->time);
    if (in->time_window) HM_CAT(" (%s)", in->time_window);
  }
#undef HM_CAT
  return u;
}

/* One line saying why a memory got its score, e.g.
 * "score 1.452 = rel 0.91 x importance 1.00 x useful 4.70^0.3 [when/kind:fact
 *  x1.36 when/len:m x1.36 when/date:1 x1.36 +2]": the factors with their
 * weights, then the three features that move usefulness most and how many
 * more do.
 * in: the memory; qtype: the question's type; links, linkslen: the link set; c:
 * the config; out, outlen: where the line goes. */
HM_API int hm_explain(const hm_input *in, const char *qtype, const unsigned char *links,
                      i64 linkslen, const hm_config *c, char *out, int outlen, char *err,
                      int errlen) {
  static __thread char active[HM_ACTIVE_LEN];
  double eff[2 * HM_MAX_FEATURES];
  if (!out || outlen < 1) return HM_TOOBIG;
  out[0] = 0;
  i64 count = hm_links_count(links, linkslen);
  if (count < 0) {
    hm_errf(err, errlen, "links is not a link set made by heap_links()");
    return HM_ERROR;
  }
  if (hm_config_check(c, err, errlen)) return HM_ERROR;
  if (!(in->context > 0 && isfinite(in->context) && in->explore > 0 && isfinite(in->explore) &&
        in->thread > 0 && isfinite(in->thread) && in->time > 0 && isfinite(in->time))) {
    hm_errf(err, errlen, "context, explore, thread and time must be positive numbers "
                         "(1: none)");
    return HM_ERROR;
  }
  hm_factors f;
  int k;
  if (hm_score_one(in, qtype, links, count, c, &f, active, sizeof active, eff, &k, err, errlen))
    return HM_ERROR;
  char buf[1024];
  int u = 0;
#define HM_CAT(...) \
  do { if (u < (int)sizeof buf) u += snprintf(buf + u, sizeof buf - (size_t)u, __VA_ARGS__); } while (0)
  /* the score as heap_recall gives it: every learned factor in, together
   * within max_lift (hm_learned), and the place's factors (a thread's
   * neighbour, the question's window of time), which are not learned */
  double learned = hm_learned(f.lift, in->context, in->explore, c);
  int alone = in->context == 1.0 && in->explore == 1.0; /* usefulness the one learned factor */
  HM_CAT("score %.3f = ", f.rest * in->thread * in->time * learned);
  /* a factor with a weight other than 1 shows it as an exponent: useful 16.31^0.3 */
#define HM_W(w) do { if ((w) != 1.0) HM_CAT("^%g", (w)); } while (0)
  if (c->w_relevance > 0) { HM_CAT("rel %.2f", f.relevance); HM_W(c->w_relevance); }
  else HM_CAT("rel off");
  if (c->w_relevance > 0 && !isnan(in->bm25_part) && !isnan(in->cos_part))
    HM_CAT(" (bm25 %.2f, cos %.2f)", in->bm25_part, in->cos_part);
  if (c->w_recency > 0) {
    HM_CAT(" x recency %.2f", f.recency);
    HM_W(c->w_recency);
    /* an age beyond ten million days (a corrupt or far-future time) in 3 digits,
     * not hundreds, so the rest of the line still fits */
    double age = in->age_days > 0 ? in->age_days : 0.0;
    if (age < 1e7) HM_CAT(" (age %.1fd)", age);
    else HM_CAT(" (age %.3gd)", age);
  }
  if (c->w_importance > 0) { HM_CAT(" x importance %.2f", f.importance); HM_W(c->w_importance); }
  if (c->w_usefulness > 0) {
    HM_CAT(" x useful %.2f", f.usefulness);
    double ex = hm_exponent(f.evidence, c), lift = pow(f.usefulness, ex);
    if (ex != c->w_usefulness) /* useful 4.70^0.91 (0.3 + 0.7 x evidence 0.87) */
      HM_CAT("^%.2f (%g + %g x evidence %.2f)", ex, c->w_usefulness, c->w_evidence, f.evidence);
    else HM_W(c->w_usefulness);
    if (lift != f.lift) HM_CAT(" (bounded to x%.3g)", f.lift);
    HM_CAT(" [");
    /* the three features with the largest effect, then how many more */
    int shown[3] = {-1, -1, -1}, printed = 0;
    for (int j = 0; j < 3; j++) {
      int best = -1;
      double bestv = 0;
      for (int i = 0; i < k; i++) {
        if (i == shown[0] || i == shown[1]) continue;
        double v = c->model == 0 ? eff[i] : fabs(log(eff[i]));
        if (c->model == 1 && !(v > 1e-12)) continue;
        if (best < 0 || v > bestv) { best = i; bestv = v; }
      }
      shown[j] = best;
      if (best < 0) break;
      const char *name;
      int L = hm_nth(active, best, &name);
      if (c->model == 0) HM_CAT("%s%.*s=%.2f", printed ? " " : "", L, name, eff[best]);
      else HM_CAT("%s%.*s x%.2f", printed ? " " : "", L, name, eff[best]);
      printed++;
    }
    if (c->model == 0) {
      if (k > printed) HM_CAT(" +%d", k - printed);
    } else {
      if (printed == 0) {
        HM_CAT("no link beats the base rate yet");
        int more, j = hm_nearest_link(active, links, count, c, &more);
        const char *name;
        if (j >= 0) {
          int L = hm_nth(active, j, &name);
          HM_CAT(": %.*s needs about %d more use%s", L, name, more, more == 1 ? "" : "s");
        }
      }
      else {
        int rest = 0;
        for (int i = 0; i < k; i++)
          if (eff[i] != 1.0) rest++;
        if (rest > printed) HM_CAT(" +%d", rest - printed);
      }
    }
    HM_CAT("]");
  }
  u = hm_explain_place(in, buf, (int)sizeof buf, u);
  if (in->context != 1.0) /* contextual utility, then exploration (a tracked recall) */
    HM_CAT(" x context %.2f (%.1f similar judgements)", in->context, in->context_n);
  if (in->explore != 1.0) HM_CAT(" x explore %.2f", in->explore);
  if (!alone && learned != f.lift * in->context * in->explore)
    HM_CAT(" (learned factors together bounded to x%.3g)", learned);
  if (in->superseded) HM_CAT(" x superseded %.2f", f.rules);
#undef HM_CAT
  if (u >= (int)sizeof buf) u = (int)sizeof buf - 1; /* snprintf counts what did not fit */
  if (u >= outlen) u = hm_utf8_cut(buf, outlen - 1);
  memcpy(out, buf, (size_t)u);
  out[u] = 0;
  return HM_OK;
}

/* Cosine similarity of two float32 vectors of n components; NaN if either
 * has no length. */
HM_API double hm_cosine(const float *a, const float *b, int n) {
  double dot = 0, na = 0, nb = 0;
  for (int i = 0; i < n; i++) {
    dot += (double)a[i] * b[i];
    na += (double)a[i] * a[i];
    nb += (double)b[i] * b[i];
  }
  if (!(na > 0 && nb > 0)) return NAN;
  return dot / sqrt(na * nb);
}

#pragma endregion
