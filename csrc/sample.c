/*
 * sample.c: seeded random draws for exploration (ScoringConfig.explore):
 * splitmix64, a standard normal, Marsaglia and Tsang's gamma and the Beta
 * made of two gammas.
 *
 * Owns: hm_draw (a stream: its 64-bit state, nothing else), hm_stream (the
 * stream of one link in one recall), hm_beta_draw and hm_beta_samples (the
 * same draws, for tests).  A stream never reads the clock or rand(): the
 * same seed gives the same draws.  Relies on: heapmem.c's preamble, text.c
 * (hm_fnv64).  Makes no sqlite3_* call.
 */

#pragma region sampling

/* Exploration in one scoring: the recall's seed and the power a draw's
 * ratio to its posterior mean is raised to (ScoringConfig.explore, 0 to 4). */
typedef struct {
  u64 seed;
  double explore;
} hm_draw;

/* splitmix64 (Steele, Lea and Flood): the next 64 bits of the stream. */
static u64 hm_splitmix64(u64 *state) {
  u64 z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The stream of the link named name[0..len) in a scoring seeded with seed:
 * each link draws from its own, so the draws do not depend on which
 * candidates are scored, or in what order. */
static u64 hm_stream(u64 seed, const char *name, int len) {
  u64 s = seed ^ hm_fnv64(name, (size_t)len);
  hm_splitmix64(&s);
  return s;
}

/* Uniform on (0, 1): 53 bits, never 0 nor 1. */
static double hm_uniform(u64 *s) {
  return ((double)(hm_splitmix64(s) >> 11) + 0.5) * 0x1.0p-53;
}

/* Standard normal (Box and Muller, one of the pair). */
static double hm_normal(u64 *s) {
  double u = hm_uniform(s), v = hm_uniform(s);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(shape a, scale 1), a > 0: Marsaglia and Tsang (2000), with shape
 * a + 1 and the U^(1/a) boost below 1.  The rejection loop is bounded (each
 * try is accepted with probability > 0.95); past it, the mode's value. */
static double hm_gamma(double a, u64 *s) {
  double boost = 1.0;
  if (a < 1.0) {
    boost = pow(hm_uniform(s), 1.0 / a); /* may underflow to 0: a draw of 0 */
    a += 1.0;
  }
  double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (int tries = 0; tries < 64; tries++) {
    double x = hm_normal(s), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = hm_uniform(s), x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + d * (1.0 - v + log(v)))
      return d * v * boost;
  }
  return d * boost;
}

/* One draw of Beta(a, b), a and b positive and finite, in [0, 1]; the mean
 * when the two gammas give nothing to divide (both underflowed). */
static double hm_beta_draw(double a, double b, u64 *s) {
  double x = hm_gamma(a, s), y = hm_gamma(b, s), t = x + y;
  if (!(t > 0) || !isfinite(t)) return a / (a + b);
  double v = x / t;
  return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* n draws of Beta(a, b) from the stream seeded with seed, into out[n]:
 * HM_OK, or HM_ERROR when a or b is not a positive finite number or n < 0. */
HM_API int hm_beta_samples(double a, double b, uint64_t seed, int n, double *out) {
  if (!(a > 0 && b > 0 && isfinite(a) && isfinite(b) && isfinite(a + b)) || n < 0 ||
      (n > 0 && !out))
    return HM_ERROR;
  u64 s = seed;
  for (int i = 0; i < n; i++) out[i] = hm_beta_draw(a, b, &s);
  return HM_OK;
}

#pragma endregion
