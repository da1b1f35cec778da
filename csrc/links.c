/*
 * links.c: link sets, the learned state one recall scores with, as a blob.
 *
 * Owns: the blob's format (hm_link, HM_LINKS_MAGIC, HM_LINKS_HEADER), reading
 * it (hm_links_count, hm_links_get) and a namespace's view of one link's
 * evidence (hm_link_view).  heap_links (sqlfuncs.c) writes the blob.
 * Relies on: text.c (hm_fnv64).  Makes no sqlite3_* call.
 */

#pragma region link sets

/*
 * A link set is the learned state one recall needs, flattened into a blob:
 *   "HML1" | u32 count | count x { u64 feature hash, f64 alpha, f64 beta }
 * sorted by hash.  alpha/beta are evidence counts without the prior: the
 * namespace's own counts plus the other namespaces' counts scaled down to at
 * most `pseudocount` observations.  Missing features have no evidence.
 */
typedef struct {
  u64 h;
  double a, b;
} hm_link;

#define HM_LINKS_MAGIC "HML1"
#define HM_LINKS_HEADER 8

static int hm_link_cmp(const void *x, const void *y) {
  u64 a = ((const hm_link *)x)->h, b = ((const hm_link *)y)->h;
  return a < b ? -1 : a > b;
}

/* Check a link-set blob; returns the number of links or -1 if malformed. */
static i64 hm_links_count(const unsigned char *blob, i64 n) {
  if (n == 0) return 0; /* an empty blob is an empty set */
  if (!blob || n < HM_LINKS_HEADER || memcmp(blob, HM_LINKS_MAGIC, 4) != 0) return -1;
  u32 count;
  memcpy(&count, blob + 4, 4);
  if ((i64)count * (i64)sizeof(hm_link) != n - HM_LINKS_HEADER) return -1;
  return count;
}

/* Evidence (alpha, beta) for one feature name; 0/0 when absent.
 * blob, count: the link set and its links; name, len: the feature; *a, *b: its
 * evidence. */
static void hm_links_get(const unsigned char *blob, i64 count, const char *name, int len,
                         double *a, double *b) {
  *a = *b = 0;
  u64 h = hm_fnv64(name, (size_t)len);
  i64 lo = 0, hi = count - 1;
  while (lo <= hi) {
    i64 mid = lo + (hi - lo) / 2;
    hm_link l;
    memcpy(&l, blob + HM_LINKS_HEADER + mid * (i64)sizeof(hm_link), sizeof l);
    if (l.h == h) { *a = l.a; *b = l.b; return; }
    if (l.h < h) lo = mid + 1; else hi = mid - 1;
  }
}

/* A namespace's view of one link's evidence: its own counts plus the other
 * namespaces' counts (pooled minus own), scaled to at most `pseudocount`
 * observations.
 * own_a, own_b: the namespace's counts; pool_a, pool_b: the pooled row's; *a,
 * *b: the view. */
HM_API void hm_link_view(double own_a, double own_b, double pool_a, double pool_b,
                         double pseudocount, double *a, double *b) {
  double oa = pool_a - own_a, ob = pool_b - own_b;
  if (!(oa > 0)) oa = 0;
  if (!(ob > 0)) ob = 0;
  double n = oa + ob, scale = 1.0;
  if (n > 0 && pseudocount < n) scale = pseudocount / n;
  *a = own_a + scale * oa;
  *b = own_b + scale * ob;
}

#pragma endregion
