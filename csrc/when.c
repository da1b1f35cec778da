/*
 * when.c: time in text, without a database.
 *
 * Owns: the civil-date helpers (a day from a date and back, the months' names
 * and lengths, the day of unix seconds), shared with attribute.c, and the
 * window of time a question names (hm_time_window): "on 18 August, 2023",
 * "in May 2023", "mid-August 2023", "the last week of October 2023", "summer
 * 2023", "in 2022", "in October", "yesterday", "two days ago", "last week",
 * "last Friday", "last summer", "this month", English only.  Relative ones
 * are anchored at the question's now (UTC days); a date with no year is the
 * latest such date not after it.  The window is a span of days; recall boosts
 * the memories created inside it (recall.c, hr_place), never filters.
 * Relies on: heapmem.c's preamble, text.c (the word scanner, hm_in_list,
 * hm_all_digits).  Makes no sqlite3_* call.
 */

#pragma region civil dates

static const char *const hm_month_names[] = {
    "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december", NULL};

/* 1..12 for a month's name or its first three letters ("sept" too), else 0 */
static int hm_month_of(const char *w) {
  size_t n = strlen(w);
  for (int i = 0; hm_month_names[i]; i++) {
    if (strcmp(w, hm_month_names[i]) == 0) return i + 1;
    if (n == 3 && strncmp(w, hm_month_names[i], 3) == 0) return i + 1;
  }
  return strcmp(w, "sept") == 0 ? 9 : 0;
}

/* a plain number, or -1 */
static long hm_number_of(const char *w) {
  if (!hm_all_digits(w) || strlen(w) > 6) return -1;
  return strtol(w, NULL, 10);
}

/* days since 1970-01-01 of a civil date (proleptic Gregorian); its products
 * fit a 32-bit long for |y| < 5,000,000: callers pass years of hm_is_year or
 * of hm_year_of_day on a day clamped by hm_day_of */
static long hm_days_from_civil(long y, long m, long d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400;
  long yoe = y - era * 400;
  long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* the civil date of day z since 1970-01-01 into *y, *m, *d; |z| <= HM_DAY_LIMIT */
static void hm_civil_of_day(long z, long *y, long *m, long *d) {
  z += 719468;
  long era = (z >= 0 ? z : z - 146096) / 146097;
  long doe = z - era * 146097;
  long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  long mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp + (mp < 10 ? 3 : -9);
  *y = yoe + era * 400 + (*m <= 2);
}

/* the year of day z since 1970-01-01; |z| <= HM_DAY_LIMIT (hm_day_of) */
static long hm_year_of_day(long z) {
  long y, m, d;
  hm_civil_of_day(z, &y, &m, &d);
  return y;
}

static int hm_month_days(long y, long m) {
  static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : d[m - 1];
}

static int hm_is_year(long v) { return v >= 1900 && v <= 2099; }

static const char *const hm_weekday_names[] = {"monday", "tuesday", "wednesday", "thursday",
                                               "friday", "saturday", "sunday", NULL};

static int hm_is_weekday(const char *w) { return hm_in_list(w, hm_weekday_names); }

static int hm_is_few(const char *w) {
  return !strcmp(w, "few") || !strcmp(w, "couple") || !strcmp(w, "two") ||
         !strcmp(w, "three") || !strcmp(w, "several");
}

/* The day (since 1970-01-01, UTC) of unix seconds t, clamped to
 * [-HM_DAY_LIMIT, HM_DAY_LIMIT]: defined for any double (NaN and the far
 * past give -HM_DAY_LIMIT, +inf and the far future HM_DAY_LIMIT).  An
 * answer's dates are years 1900-2099 moved by at most a few weeks, and a
 * memory's time by at most a year and a day, so a day this far out overlaps
 * none of them, clamped or not: the verdict is the same, and every sum and
 * product on it below stays far inside a 32-bit long (day 1e8 is in the year
 * 275,760, day -1e8 in -271,821; hm_days_from_civil of those about 1e8). */
#define HM_DAY_LIMIT 100000000.0  /* ~273,790 years either side of 1970 */

static long hm_day_of(double t) {
  double d = floor(t / 86400.0);
  if (!(d > -HM_DAY_LIMIT)) d = -HM_DAY_LIMIT;  /* NaN too */
  if (d > HM_DAY_LIMIT) d = HM_DAY_LIMIT;
  return (long)d;
}

#pragma endregion

#pragma region the window a question names

#define HW_MAX_WORDS 96 /* a question's words read for time (a longer one: its first 96) */

typedef struct {
  char w[HW_MAX_WORDS][HM_MAX_WORD + 1];
  int start[HW_MAX_WORDS], end[HW_MAX_WORDS]; /* each word's bytes in the question */
  int n;
  const char *q;
  long today; /* now's day */
} hw_text;

/* A window: days [lo, hi), and the words i0..i1 (inclusive) that named it. */
typedef struct {
  long lo, hi;
  int i0, i1;
} hw_found;

static const char *hw_at(const hw_text *t, int i) {
  return i >= 0 && i < t->n ? t->w[i] : "";
}

static int hw_is(const hw_text *t, int i, const char *w) { return !strcmp(hw_at(t, i), w); }

/* a day of the month, "18", "18th", "1st", "2nd", "23rd": 1..31, else -1 */
static long hw_day(const char *w) {
  long v = 0;
  int k = 0;
  for (; w[k] >= '0' && w[k] <= '9' && k < 3; k++) v = 10 * v + (w[k] - '0');
  if (k == 0 || k > 2) return -1;
  const char *s = w + k;
  if (*s && strcmp(s, "st") && strcmp(s, "nd") && strcmp(s, "rd") && strcmp(s, "th")) return -1;
  return v >= 1 && v <= 31 ? v : -1;
}

/* a count of units: "2", "two", "a", "a few" (3), "several" (3), "a couple" (2); -1 if none */
static long hw_count(const char *w) {
  static const char *const words[] = {"a", "an", "one", "two", "three", "four", "five", "six",
                                      "seven", "eight", "nine", "ten", "eleven", "twelve", NULL};
  for (int i = 0; words[i]; i++)
    if (!strcmp(w, words[i])) return i < 2 ? 1 : i - 1;
  if (!strcmp(w, "few") || !strcmp(w, "several")) return 3;
  if (!strcmp(w, "couple")) return 2;
  long v = hm_number_of(w);
  return v >= 1 && v <= 1000 ? v : -1;
}

/* a unit of time in days (a month 30, a year 365), singular or plural; 0 if none */
static long hw_unit(const char *w) {
  static const struct { const char *one, *many; long days; } units[] = {
      {"day", "days", 1}, {"week", "weeks", 7}, {"month", "months", 30}, {"year", "years", 365}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (!strcmp(w, units[i].one) || !strcmp(w, units[i].many)) return units[i].days;
  return 0;
}

/* the day's weekday, Monday 0 (1970-01-01 was a Thursday) */
static long hw_weekday(long day) { return ((day % 7) + 7 + 3) % 7; }

/* a season of year y as days [lo, hi): spring March-May, summer June-August,
 * autumn September-November, winter December to February; 0 if w is none */
static int hw_season(const char *w, long y, long *lo, long *hi) {
  static const struct { const char *name; int month; } seasons[] = {
      {"spring", 3}, {"summer", 6}, {"autumn", 9}, {"fall", 9}, {"winter", 12}};
  for (size_t i = 0; i < sizeof seasons / sizeof seasons[0]; i++)
    if (!strcmp(w, seasons[i].name)) {
      int m = seasons[i].month;
      *lo = hm_days_from_civil(y, m, 1);
      *hi = m == 12 ? hm_days_from_civil(y + 1, 3, 1) : hm_days_from_civil(y, m + 3, 1);
      return 1;
    }
  return 0;
}

/* The part of [lo, hi) the words before word i name ("early", "mid", "late",
 * "the end of", "the first week of", "the last two weeks of", ...), into *f;
 * i0 moves to the first of them.  None: [lo, hi) as it is.
 * t: the question's words. */
static void hw_part(const hw_text *t, int i, long lo, long hi, hw_found *f) {
  f->lo = lo, f->hi = hi, f->i0 = i;
  long len = hi - lo;
  const char *a = hw_at(t, i - 1), *b = hw_at(t, i - 2), *c = hw_at(t, i - 3);
  const char *d = hw_at(t, i - 4);
  int of = !strcmp(a, "of");
  if (!strcmp(a, "early")) f->hi = lo + len / 3, f->i0 = i - 1;
  else if (!strcmp(a, "mid")) f->lo = lo + len / 3, f->hi = hi - len / 3, f->i0 = i - 1;
  else if (!strcmp(a, "late")) f->lo = hi - len / 3, f->i0 = i - 1;
  else if (of && (!strcmp(b, "beginning") || !strcmp(b, "start")))
    f->hi = lo + len / 3, f->i0 = i - 2;
  else if (of && !strcmp(b, "middle")) f->lo = lo + len / 3, f->hi = hi - len / 3, f->i0 = i - 2;
  else if (of && !strcmp(b, "end")) f->lo = hi - len / 3, f->i0 = i - 2;
  else if (of && !strcmp(b, "half") && !strcmp(c, "first")) f->hi = lo + len / 2, f->i0 = i - 3;
  else if (of && !strcmp(b, "half") && !strcmp(c, "second")) f->lo = lo + len / 2, f->i0 = i - 3;
  else if (of && (!strcmp(b, "week") || !strcmp(b, "weekend")) && !strcmp(c, "first"))
    f->hi = lo + 7, f->i0 = i - 3;
  else if (of && (!strcmp(b, "week") || !strcmp(b, "weekend")) && !strcmp(c, "last"))
    f->lo = hi - 7, f->i0 = i - 3;
  else if (of && !strcmp(b, "weeks") && hw_count(c) > 0 && !strcmp(d, "first"))
    f->hi = lo + 7 * hw_count(c), f->i0 = i - 4;
  else if (of && !strcmp(b, "weeks") && hw_count(c) > 0 && !strcmp(d, "last"))
    f->lo = hi - 7 * hw_count(c), f->i0 = i - 4;
  if (f->lo < lo) f->lo = lo;
  if (f->hi > hi || f->hi <= f->lo) f->hi = hi;
}

/* whether words i and i + 1 are joined by one '-' or '/' (2023-05-08) */
static int hw_joined(const hw_text *t, int i) {
  if (i + 1 >= t->n || t->start[i + 1] != t->end[i] + 1) return 0;
  char ch = t->q[t->end[i]];
  return ch == '-' || ch == '/';
}

/* A day with its year at word i: "18 August 2023", "18th of August, 2023",
 * "August 18, 2023", "2023-08-18"; without a year, the latest such day not
 * after today ("August 18", "on 18 August").  Its words' count, or 0. */
static int hw_date(const hw_text *t, int i, hw_found *f) {
  long y = -1, m = 0, d = -1;
  int last = i;
  long v = hm_number_of(hw_at(t, i));
  if (hm_is_year(v) && strlen(t->w[i]) == 4 && hw_joined(t, i) && hw_joined(t, i + 1)) {
    y = v, m = hm_number_of(hw_at(t, i + 1)), d = hm_number_of(hw_at(t, i + 2)), last = i + 2;
    if (m < 1 || m > 12) return 0;
  } else if ((d = hw_day(hw_at(t, i))) > 0) { /* 18 [of] August [2023] */
    int j = i + 1 + hw_is(t, i + 1, "of");
    if (!(m = hm_month_of(hw_at(t, j)))) return 0;
    last = j;
    long yy = hm_number_of(hw_at(t, j + 1));
    if (hm_is_year(yy)) y = yy, last = j + 1;
  } else if ((m = hm_month_of(hw_at(t, i))) && (d = hw_day(hw_at(t, i + 1))) > 0) {
    last = i + 1; /* August 18 [2023] */
    long yy = hm_number_of(hw_at(t, i + 2));
    if (hm_is_year(yy)) y = yy, last = i + 2;
    else if (m == 5 && !hw_is(t, i - 1, "on")) return 0; /* "may 2 ..." is a verb */
  } else {
    return 0;
  }
  if (y < 0) { /* no year: the latest such day not after today */
    y = hm_year_of_day(t->today);
    if (d > hm_month_days(y, m) || hm_days_from_civil(y, m, d) > t->today) y--;
  }
  if (d < 1 || d > hm_month_days(y, m)) return 0;
  f->lo = hm_days_from_civil(y, m, d), f->hi = f->lo + 1, f->i0 = i, f->i1 = last;
  return last - i + 1;
}

/* A month with its year at word i ("May 2023", "mid-August 2023", "the end
 * of October, 2023"), or a season with its year ("summer 2023", "the summer
 * of 2022"), or a year after "in", "during", "of" or "year" ("in 2022").
 * Its words' count, or 0. */
static int hw_month_year(const hw_text *t, int i, hw_found *f) {
  long m = hm_month_of(hw_at(t, i)), lo, hi;
  int j = i + 1 + hw_is(t, i + 1, "of");
  long y = hm_number_of(hw_at(t, j));
  if (hm_is_year(y) && m && (m != 5 || j == i + 1)) {
    hw_part(t, i, hm_days_from_civil(y, m, 1), hm_days_from_civil(y, m, hm_month_days(y, m)) + 1,
            f);
  } else if (hm_is_year(y) && hw_season(hw_at(t, i), y, &lo, &hi)) {
    hw_part(t, i, lo, hi, f);
  } else {
    y = hm_number_of(hw_at(t, i));
    const char *b = hw_at(t, i - 1);
    if (!hm_is_year(y) || strlen(t->w[i]) != 4 || hw_joined(t, i) ||
        (strcmp(b, "in") && strcmp(b, "during") && strcmp(b, "of") && strcmp(b, "year")))
      return 0;
    f->lo = hm_days_from_civil(y, 1, 1), f->hi = hm_days_from_civil(y + 1, 1, 1);
    f->i0 = i - 1, f->i1 = i;
    return 1;
  }
  f->i1 = j;
  return j - i + 1;
}

/* The latest month m whose first day is before day `before`: days [lo, hi). */
static void hw_latest_month(long before, long m, long *lo, long *hi) {
  long y = hm_year_of_day(before);
  if (hm_days_from_civil(y, m, 1) >= before) y--;
  *lo = hm_days_from_civil(y, m, 1);
  *hi = hm_days_from_civil(y, m, hm_month_days(y, m)) + 1;
}

/* A month with no year after "in" or "during" ("in October": the latest
 * October begun by today).  Its words' count, or 0. */
static int hw_month_alone(const hw_text *t, int i, hw_found *f) {
  long m = hm_month_of(hw_at(t, i));
  if (!m || (strlen(t->w[i]) < 4 && m != 5) ||
      !(hw_is(t, i - 1, "in") || hw_is(t, i - 1, "during")))
    return 0;
  hw_latest_month(t->today + 1, m, &f->lo, &f->hi);
  f->i0 = i - 1, f->i1 = i;
  return 1;
}

/* "yesterday", "today", "tonight", "this morning", "last night", "N days
 * ago" (weeks, months, years; "a few", "a couple of"), "the past N days",
 * "the past week" at word i.  Its words' count, or 0. */
static int hw_ago(const hw_text *t, int i, hw_found *f) {
  long d = t->today;
  const char *w = hw_at(t, i), *n1 = hw_at(t, i + 1);
  f->i0 = f->i1 = i;
  if (!strcmp(w, "yesterday") || (!strcmp(w, "last") && !strcmp(n1, "night"))) {
    f->lo = d - 1, f->hi = d, f->i1 = i + (w[0] == 'l');
    return 1;
  }
  if (!strcmp(w, "today") || !strcmp(w, "tonight") ||
      (!strcmp(w, "this") && (!strcmp(n1, "morning") || !strcmp(n1, "afternoon") ||
                              !strcmp(n1, "evening")))) {
    f->lo = d, f->hi = d + 1, f->i1 = i + (w[1] == 'h' && w[2] == 'i');
    return 1;
  }
  int k = i + (!strcmp(w, "a") && (!strcmp(n1, "few") || !strcmp(n1, "couple")));
  long n = hw_count(hw_at(t, k));
  k += hw_is(t, k + 1, "of");
  long u = hw_unit(hw_at(t, k + 1));
  if (n > 0 && u && hw_is(t, k + 2, "ago")) { /* N units ago: a unit's width around it */
    long c = d - n * u, half = u / 2 + (n > 1 ? (u > 1 ? u / 2 : 1) : 0);
    f->lo = c - half, f->hi = c + half + 1, f->i1 = k + 2;
    return f->i1 - i + 1;
  }
  if ((!strcmp(w, "past") || !strcmp(w, "last")) && (n = hw_count(n1)) > 1 &&
      (u = hw_unit(hw_at(t, i + 2))) && !hw_is(t, i + 3, "of")) { /* the past 3 days */
    f->lo = d - n * u, f->hi = d + 1, f->i1 = i + 2;
    return 3;
  }
  if (!strcmp(w, "past") && (u = hw_unit(n1))) { /* the past week */
    f->lo = d - u, f->hi = d + 1, f->i1 = i + 1;
    return 2;
  }
  return 0;
}

/* "last week", "last weekend", "last month", "last year", "last Friday",
 * "last summer", "last October", "this week", "this month", "this year" at
 * word i.  Its words' count, or 0. */
static int hw_last(const hw_text *t, int i, hw_found *f) {
  long d = t->today, wd = hw_weekday(d), y = hm_year_of_day(d), m, dd, lo, hi;
  const char *w = hw_at(t, i), *u = hw_at(t, i + 1);
  int last = !strcmp(w, "last"), cur = !strcmp(w, "this");
  if (!last && !cur) return 0;
  if (hw_is(t, i + 2, "of")) return 0; /* "the last week of May 2023" is hw_month_year's */
  hm_civil_of_day(d, &y, &m, &dd);
  f->i0 = i, f->i1 = i + 1;
  if (!strcmp(u, "week")) f->lo = d - wd - (last ? 7 : 0), f->hi = last ? d - wd : d + 1;
  else if (!strcmp(u, "month") && cur) f->lo = d - dd + 1, f->hi = d + 1;
  else if (!strcmp(u, "month")) hw_latest_month(d - dd + 1, m == 1 ? 12 : m - 1, &f->lo, &f->hi);
  else if (!strcmp(u, "year"))
    f->lo = hm_days_from_civil(y - last, 1, 1), f->hi = last ? hm_days_from_civil(y, 1, 1) : d + 1;
  else if (last && !strcmp(u, "weekend")) { /* the Saturday and Sunday before today */
    long sat = d - ((wd - 5 + 7) % 7);
    if (sat >= d) sat -= 7;
    f->lo = sat, f->hi = sat + 2;
  } else if (last && hm_is_weekday(u)) {
    long want = 0;
    while (strcmp(hm_weekday_names[want], u)) want++;
    long back = (wd - want + 7) % 7;
    f->lo = d - (back ? back : 7), f->hi = f->lo + 1;
  } else if (last && hw_season(u, y, &lo, &hi)) { /* the latest one ended by today */
    for (long k = 1; hi > d && k < 3; k++) hw_season(u, y - k, &lo, &hi);
    f->lo = lo, f->hi = hi;
  } else if (last && (m = hm_month_of(u)) && strlen(u) >= 4) {
    hw_latest_month(d - dd + 1, m, &f->lo, &f->hi);
  } else {
    return 0;
  }
  return 2;
}

/* The question's words, lowercased, with where each lies in it (the first
 * HW_MAX_WORDS). */
static void hw_read(const char *q, double now, hw_text *t) {
  hm_scanner sc = {.s = (const unsigned char *)q, .n = (int)strlen(q)};
  t->n = 0;
  t->q = q;
  t->today = hm_day_of(now);
  int start;
  while (t->n < HW_MAX_WORDS && hm_next_word(&sc, t->w[t->n], &start) > 0) {
    int end = sc.pos;
    while (end > start && q[end - 1] == '\'') end--;
    t->start[t->n] = start;
    t->end[t->n++] = end;
  }
}

/* The window of time question q names, anchored at now (unix seconds): 1
 * with [*lo, *hi) in unix seconds (whole UTC days) and *start, *len the bytes
 * of q that name it, or 0 when it names none.  A date (with or without its
 * year) comes before a relative expression ("last weekend before April 10,
 * 2023" is April 10); among the same kind, the first in the question. */
HM_API int hm_time_window(const char *q, double now, double *lo, double *hi, int *start,
                          int *len) {
  static __thread hw_text t;
  if (!q || !lo || !hi || !start || !len || !(now >= 0 && now <= 253402300799.0)) return 0;
  hw_read(q, now, &t);
  hw_found f = {0};
  int found = 0;
  for (int i = 0; i < t.n && !found; i++)
    found = hw_date(&t, i, &f) || hw_month_year(&t, i, &f);
  for (int i = 0; i < t.n && !found; i++) found = hw_month_alone(&t, i, &f);
  for (int i = 0; i < t.n && !found; i++) found = hw_ago(&t, i, &f) || hw_last(&t, i, &f);
  if (!found || f.hi <= f.lo) return 0;
  *lo = 86400.0 * (double)f.lo;
  *hi = 86400.0 * (double)f.hi;
  *start = t.start[f.i0];
  *len = t.end[f.i1] - t.start[f.i0];
  return 1;
}

/* The window as explain shows it: the question's words that named it and its
 * days, '"May 2023": 2023-05-01 to 2023-05-31' (one day: 'on 2023-05-08'),
 * into out (cut to outlen, never mid-character).
 * q: the question, its words from start, len bytes; lo, hi: the window. */
static void hm_time_window_text(const char *q, int start, int len, double lo, double hi,
                                char *out, int outlen) {
  long y0, m0, d0, y1, m1, d1;
  long a = hm_day_of(lo), b = hm_day_of(hi) - 1;
  hm_civil_of_day(a, &y0, &m0, &d0);
  hm_civil_of_day(b, &y1, &m1, &d1);
  if (len > 60) len = hm_utf8_cut(q + start, 60);
  int n = a == b ? snprintf(out, (size_t)outlen, "\"%.*s\": on %04ld-%02ld-%02ld", len, q + start,
                            y0, m0, d0)
                 : snprintf(out, (size_t)outlen, "\"%.*s\": %04ld-%02ld-%02ld to %04ld-%02ld-%02ld",
                            len, q + start, y0, m0, d0, y1, m1, d1);
  if (n >= outlen) out[hm_utf8_cut(out, outlen - 1)] = 0;
}

#pragma endregion
