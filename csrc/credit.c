/*
 * credit.c: what one judged memory teaches the links (hm_credit): the Beta
 * updates that heap_credit writes into an event and heap_fold sums into the
 * links (both in sqlfuncs.c).
 *
 * Relies on: text.c (hm_active), links.c (hm_links_count), score.c
 * (hm_config_check; hm_usefulness, for the reference model's strengths).
 * Makes no sqlite3_* call.
 */

#pragma region feedback credit

/* What one judged memory teaches, feature by feature.
 * model 1: a used memory gives each active feature one success, an ignored
 *   one each feature one failure: the links count how often a memory with
 *   that feature, shown for that kind of question, was used.
 * model 0 (the reference design): a used memory gives each feature success
 *   r_f = s_f / U and failure 1 - r_f (credit in proportion to current
 *   strength, U the noisy-OR); an ignored memory one failure per feature.
 * names receives the active feature names, space-separated; d_alpha/d_beta
 * one entry each.  Returns the number of features, or -1 with a message.
 * features, qtype, age_days: the memory shown and the question's type; used: 1
 * used, 0 ignored; links, linkslen: the link set; c: the config; names,
 * nameslen: where the features' names go; d_alpha, d_beta: their deltas, at
 * most max. */
HM_API int hm_credit(const char *features, const char *qtype, double age_days, int used,
                     const unsigned char *links, i64 linkslen, const hm_config *c,
                     char *names, int nameslen, double *d_alpha, double *d_beta, int max,
                     char *err, int errlen) {
  double s[2 * HM_MAX_FEATURES];
  i64 count = hm_links_count(links, linkslen);
  if (count < 0) {
    hm_errf(err, errlen, "links is not a link set made by heap_links()");
    return -1;
  }
  if (hm_config_check(c, err, errlen)) return -1;
  int rc = hm_active(features, qtype, age_days, names, nameslen, err, errlen);
  if (rc == HM_TOOBIG) hm_errf(err, errlen, "too many features");
  if (rc) return -1;
  double use = 0.0;
  int k = 0;
  if (c->model == 1 || !used) {
    /* counts: the credit does not depend on the links, only on the names */
    for (const char *p = names; *p;) {
      while (*p == ' ') p++;
      if (!*p) break;
      k++;
      p += strcspn(p, " ");
    }
  } else {
    hm_config c0 = *c;
    c0.model = 0; /* the raw strengths s_f */
    k = hm_usefulness(names, links, count, &c0, NULL, &use, s, 2 * HM_MAX_FEATURES, NULL);
  }
  if (k < 0 || k > max) {
    hm_errf(err, errlen, "too many features");
    return -1;
  }
  for (int i = 0; i < k; i++) {
    if (!used) {
      d_alpha[i] = 0;
      d_beta[i] = 1;
    } else if (c->model == 1) {
      d_alpha[i] = 1;
      d_beta[i] = 0;
    } else {
      double r = use > 0 ? s[i] / use : 1.0 / k;
      if (r > 1) r = 1;
      d_alpha[i] = r;
      d_beta[i] = 1.0 - r;
    }
  }
  return k;
}

#pragma endregion
