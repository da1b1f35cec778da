"""The report page: what a store (or one namespace) learned, as one HTML file.

    heapmem.io.report.write_report(mem, "report.html", namespace="user:maya")

Owns: the page (its sections, the words of every empty chart, the health
table), its charts drawn as inline SVG by the small drawing helpers below,
and the checks of write_report's arguments.  The page is self-contained: no
script, no network, no font or style from elsewhere (its Content-Security-
Policy forbids them all), and every string read from the store is
HTML-escaped, since memory texts and namespace names are the users' text.
It reads the store only through Memory's public methods and
heapmem.learning's reads of the event log; it writes nothing to the store,
and nothing at all (not even the output file) when an argument is wrong.
"""
from __future__ import annotations

import html
import math
import os
from datetime import datetime, timezone
from typing import Any, Sequence

from .._version import __version__
from ..db import native
from ..learning import links as learning
from ..results import LearningDay, LinkRow, Recall
from ..store import Memory
from ..validate import POOLED, check_namespace

DAY = 86400.0
#: The links the links chart shows, strongest first.
TOP_LINKS = 12
#: The most points a chart over time draws; past it, days are summed into weeks or months.
MAX_POINTS = 120
#: The chart's drawing area: SVG user units (the page scales it to its width).
WIDTH, HEIGHT = 720, 260


def _e(s: Any) -> str:
    """Any value as HTML text: escaped, quotes included (attributes too)."""
    return html.escape(str(s), quote=True)


def _date(day: float) -> str:
    """Days since 1970 (UTC) as YYYY-MM-DD (a day no date can show, which
    only a damaged file holds, as its number)."""
    try:
        return datetime.fromtimestamp(day * DAY, tz=timezone.utc).strftime("%Y-%m-%d")
    except (OverflowError, OSError, ValueError):
        return f"day {day:g}"


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return f"{t!r} (out of range)"


def _cut(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:max(1, n - 3)] + "..."


def _num(x: float) -> str:
    """A number as the page prints it: short, fixed, the same on every run."""
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < 1e9:
        return str(int(x))
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


# -- drawing -------------------------------------------------------------------------


def _f(v: float) -> str:
    """A coordinate or a length for SVG: a finite number (a NaN from a damaged
    file would make the browser complain), one decimal."""
    return f"{v:.1f}" if math.isfinite(v) else "0"


class _Svg:
    """One chart's SVG, built element by element; every text escaped."""

    def __init__(self, label: str, width: int = WIDTH, height: int = HEIGHT):
        self.width, self.height = width, height
        self.label = label
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, cls: str, tip: str = "") -> None:
        t = f"<title>{_e(tip)}</title>" if tip else ""
        self.parts.append(f'<rect class="{cls}" x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0))}" '
                          f'height="{_f(max(h, 0))}">{t}</rect>')

    def line(self, x1: float, y1: float, x2: float, y2: float, cls: str) -> None:
        self.parts.append(f'<line class="{cls}" x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" '
                          f'y2="{_f(y2)}"/>')

    def path(self, points: Sequence[tuple[float, float]], cls: str) -> None:
        d = " ".join(f"{'M' if i == 0 else 'L'}{_f(x)},{_f(y)}" for i, (x, y) in enumerate(points))
        self.parts.append(f'<path class="{cls}" d="{d}"/>')

    def circle(self, x: float, y: float, r: float, cls: str, tip: str = "") -> None:
        t = f"<title>{_e(tip)}</title>" if tip else ""
        self.parts.append(f'<circle class="{cls}" cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}">{t}'
                          "</circle>")

    def text(self, x: float, y: float, s: str, cls: str = "", anchor: str = "start",
             rotate: bool = False) -> None:
        turn = f' transform="rotate(-90 {_f(x)} {_f(y)})"' if rotate else ""
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<text{c} x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{turn}>'
                          f"{_e(s)}</text>")

    def render(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} '
                f'{self.height}" role="img" aria-label="{_e(self.label)}">'
                + "".join(self.parts) + "</svg>")


def _figure(key: str, title: str, body: str, note: str = "", extra: str = "") -> str:
    """A chart: its title, the SVG (or the words saying why it is empty), a
    note (text, escaped here) and extra HTML (already escaped)."""
    n = f'<p class="note">{_e(note)}</p>' if note else ""
    return (f'<figure class="chart" data-chart="{key}"><figcaption>{_e(title)}</figcaption>'
            f"{body}{n}{extra}</figure>")


def _empty(why: str) -> str:
    return f'<p class="empty">{_e(why)}</p>'


def _ticks(top: float, n: int = 4) -> list[float]:
    """Round values from 0 to at least top for a value axis."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    out = [0.0]
    while out[-1] < top - 1e-12:
        out.append(out[-1] + step)
    return out


# chart margins: left (value labels and the axis title), right, top, bottom (dates, title)
_ML, _MR, _MT, _MB = 64, 16, 14, 52


def _time_axes(svg: _Svg, buckets: list[tuple[int, int]], unit: str, ylabel: str,
               yticks: list[float], fmt: Any) -> tuple[Any, Any, float]:
    """Axes for a chart over time: x the buckets (first day, days), y the
    ticks; returns the x and y of a value, and one bucket's width."""
    x0, x1 = _ML, svg.width - _MR
    y0, y1 = svg.height - _MB, _MT
    slot = (x1 - x0) / len(buckets)
    top = yticks[-1] or 1.0

    def xs(i: float) -> float:
        return x0 + slot * (i + 0.5)

    def ys(v: float) -> float:
        return y0 - (y0 - y1) * (v / top)

    for t in yticks:
        svg.line(x0, ys(t), x1, ys(t), "grid")
        svg.text(x0 - 6, ys(t) + 4, fmt(t), "tick", "end")
    svg.line(x0, y0, x1, y0, "axis")
    svg.line(x0, y0, x0, y1, "axis")
    every = max(1, math.ceil(len(buckets) / 6))
    for i, (day, _) in enumerate(buckets):
        if i % every == 0:
            svg.text(xs(i), y0 + 16, _date(day), "tick", "middle")
    svg.text((x0 + x1) / 2, svg.height - 12, unit, "axis-label", "middle")
    svg.text(16, (y0 + y1) / 2, ylabel, "axis-label", "middle", rotate=True)
    return xs, ys, slot


def _buckets(days: list[LearningDay]) -> tuple[list[tuple[int, int]], list[list[LearningDay]], str]:
    """The days from the first to the last with feedback, in buckets of one
    day (a week, 30 days when they would be more than MAX_POINTS); each
    bucket's (first day, length) and its days, and the x axis's title."""
    first, last = days[0].day, days[-1].day
    width = next((w for w in (1, 7, 30) if (last - first) // w + 1 <= MAX_POINTS),
                 math.ceil((last - first + 1) / MAX_POINTS))
    n = (last - first) // width + 1
    spans = [(first + i * width, width) for i in range(n)]
    groups: list[list[LearningDay]] = [[] for _ in range(n)]
    for d in days:
        groups[(d.day - first) // width].append(d)
    unit = {1: "day (UTC)", 7: "week (UTC), from its first day"}.get(
        width, f"{width}-day period (UTC), from its first day")
    return spans, groups, unit


def feedback_chart(days: list[LearningDay], scope: str) -> str:
    """Judgements per day, used and ignored stacked."""
    title = "Feedback per day: memories judged used and ignored"
    if not days:
        return _figure("feedback", title, _empty(
            f"No feedback yet in {scope}: nothing has been judged. A tracked recall followed by "
            "feedback (mark_used, feedback(answer=...), or `heapmem feedback`) fills this chart."))
    spans, groups, unit = _buckets(days)
    if spans[0][1] > 1:
        title = title.replace("per day", "per " + unit.split(" ")[0])
    totals = [(sum(d.used for d in g), sum(d.ignored for d in g)) for g in groups]
    svg = _Svg(title)
    ticks = _ticks(max(u + i for u, i in totals))
    xs, ys, slot = _time_axes(svg, spans, unit, "judgements", ticks, _num)
    w = max(1.0, min(slot * 0.7, 40))
    for i, ((day, _), (u, ig)) in enumerate(zip(spans, totals)):
        if u + ig == 0:
            continue
        tip = f"{_date(day)}: {u} used, {ig} ignored"
        svg.rect(xs(i) - w / 2, ys(u), w, ys(0) - ys(u), "bar used", tip)
        svg.rect(xs(i) - w / 2, ys(u + ig), w, ys(u) - ys(u + ig), "bar ignored", tip)
    legend = ('<p class="legend"><span class="key used"></span>used '
              '<span class="key ignored"></span>ignored</p>')
    total = sum(d.judged for d in days)
    used = sum(d.used for d in days)
    return _figure("feedback", title, svg.render() + legend,
                   f"{total} judgements in all, {used} of them used.")


def rank_chart(days: list[LearningDay], scope: str) -> str:
    """The MRR proxy per day: 1 / the rank of the first used memory, averaged
    over the day's recalls with a memory judged used."""
    title = "Rank of the memories feedback used: MRR per day"
    answered = [d for d in days if d.answered]
    if not answered:
        why = (f"No feedback yet in {scope}, so no rank to show." if not days else
               f"Feedback in {scope} judged {sum(d.judged for d in days)} memories, none of them "
               "used: the rank of a used memory needs one judged used.")
        return _figure("rank", title, _empty(why))
    spans, groups, unit = _buckets(days)
    if spans[0][1] > 1:
        title = title.replace("per day", "per " + unit.split(" ")[0])
    svg = _Svg(title)
    xs, ys, _ = _time_axes(svg, spans, unit, "MRR (1 = first)", [0, 0.25, 0.5, 0.75, 1.0],
                           lambda t: f"{t:g}")
    points = []
    for i, ((day, _), g) in enumerate(zip(spans, groups)):
        n = sum(d.answered for d in g)
        if not n:
            continue
        mrr = sum(d.reciprocal_ranks for d in g) / n
        used = sum(d.used for d in g)
        mean_rank = sum(d.used_ranks for d in g) / used
        points.append((xs(i), ys(mrr), f"{_date(day)}: MRR {mrr:.3f} over {n} recalls; "
                                        f"used memories ranked {mean_rank:.2f} on average"))
    svg.path([(x, y) for x, y, _ in points], "series")
    for x, y, tip in points:
        svg.circle(x, y, 3.5, "dot", tip)
    n = sum(d.answered for d in days)
    mrr = sum(d.reciprocal_ranks for d in days) / n
    mean_rank = sum(d.used_ranks for d in days) / sum(d.used for d in days)
    return _figure("rank", title, svg.render(),
                   f"Each point: the mean of 1 / rank of the best ranked memory judged used, over "
                   f"that day's recalls with one ({n} recalls in all: MRR {mrr:.3f}; used "
                   f"memories ranked {mean_rank:.2f} on average). Rising means the memories "
                   "answers use are ranked higher.")


def links_chart(rows: list[LinkRow], view: str, pooled_min: int | None = None) -> str:
    """The strongest links: strength (the base rate marked), evidence, and
    each one's share of the evidence in the layer shown.  pooled_min: for
    the pooled layer, how many namespaces must back a link before it is
    pooled (what its empty state says)."""
    title = f"Strongest learned links, as {view} sees them"
    links = [r for r in rows if r.alpha + r.beta > 0]  # rows with evidence
    if not links:
        if rows and pooled_min is not None:
            why = (f"Nothing pooled yet: feedback has touched {len(rows)} features, but a link "
                   f"enters the pooled layer only once {pooled_min} namespaces back it (so that "
                   "no tenant steers what the others borrow). Each namespace's own links show "
                   "on its page (-n NAME).")
        else:
            why = (f"No learned links yet for {view}: links come from feedback (each judged "
                   "memory teaches its features), or from a links-only prior merged with "
                   "`heapmem import`.")
        return _figure("links", title, _empty(why))
    total = sum(r.alpha + r.beta for r in links)
    base = next((r.strength for r in links if r.feature == native.VOCABULARY.base_feature), None)
    top = links[:TOP_LINKS]
    row = 22
    svg = _Svg(title, height=_MT + row * len(top) + 48)
    lab, s0, s1 = 8, 170, 430          # labels, then strength bars from s0 to s1
    p0, p1 = 560, WIDTH - 16           # then share bars
    y_end = _MT + row * len(top)
    svg.line(s0, _MT - 4, s0, y_end, "axis")
    svg.line(p0, _MT - 4, p0, y_end, "axis")
    for t in (0, 0.5, 1):
        svg.text(s0 + (s1 - s0) * t, y_end + 14, f"{t:g}", "tick", "middle")
    smax = max((r.alpha + r.beta) / total for r in top)
    for t in (0, smax):
        svg.text(p0 + (p1 - p0) * (t / smax), y_end + 14, f"{100 * t:.0f}%", "tick", "middle")
    for i, r in enumerate(top):
        y = _MT + i * row
        share = (r.alpha + r.beta) / total
        svg.text(lab, y + 14, _cut(r.feature, 26), "label")
        svg.rect(s0, y + 3, (s1 - s0) * r.strength, row - 8, "bar strength",
                 f"{r.feature}: strength {r.strength:.3f} (alpha {r.alpha:.2f}, beta "
                 f"{r.beta:.2f}, n {r.n})")
        svg.text(s1 + 6, y + 14, f"α {_num(round(r.alpha, 2))} β {_num(round(r.beta, 2))}"
                                 f", {r.n} own", "value")
        svg.rect(p0, y + 3, (p1 - p0) * share / smax, row - 8, "bar share",
                 f"{r.feature}: {100 * share:.1f}% of the evidence")
    if base is not None:
        x = s0 + (s1 - s0) * base
        svg.line(x, _MT - 4, x, y_end, "base")
    svg.text((s0 + s1) / 2, y_end + 32, "strength: posterior rate of use"
             + (" (dashed: the base rate)" if base is not None else ""), "axis-label", "middle")
    svg.text((p0 + p1) / 2, y_end + 32, "share of the pool", "axis-label", "middle")
    note = (f"The {len(top)} strongest of {len(links)} links with evidence. "
            "α: times a memory with the feature was used, β: ignored (counts, borrowed "
            "evidence included); own: how many of those judgements were made here (the rest "
            "is borrowed from the pool or a prior). Share of the pool: the link's α + β as a "
            "part of all the evidence these links hold."
            + (f" Base rate {base:.3f}: a link above it lifts a memory's score, below it "
               "lowers it, once the evidence is beyond chance." if base is not None else ""))
    return _figure("links", title, svg.render(), note)


#: The factors the chart draws, as explain() names them, and their weights.
_FACTORS = (("relevance", "rel", "w_relevance"), ("recency", "recency", "w_recency"),
            ("importance", "importance", "w_importance"),
            ("usefulness", "useful", "w_usefulness"))


def _multipliers(r: Any, cfg: Any) -> list[tuple[str, str, float | None]]:
    """Each factor of a result: its name, its value as explain() words it,
    and what it multiplies the score by (Result.factors; None: switched
    off); context always, explore where exploration is on."""
    f = r.factors()
    out: list[tuple[str, str, float | None]] = []
    for name, word, wname in _FACTORS:
        w = getattr(cfg, wname)
        v = getattr(r, name)
        out.append((name, f"{word} off" if w == 0 else f"{word} {v:.2f}"
                    + (f"^{w:g}" if w != 1 else ""), f[name]))
    for name in ("thread", "time"):  # a thread's neighbour, the question's window (place.c)
        if f[name] != 1.0:
            out.append((name, f"{name} {f[name]:.2f}", f[name]))
    out.append(("context", f"context {r.context:.2f}", f["context"]))
    if cfg.explore > 0:
        out.append(("explore", f"explore {r.explore:.2f}", f["explore"]))
    return out


def factors_chart(rec: Recall | None, why_none: str, caption: str) -> str:
    """A recall's factors per shown memory, as bars on a log scale around x1."""
    title = "Why this ranking: each factor's effect on the score"
    if rec is None or not len(rec):
        return _figure("factors", title, _empty(why_none))
    results = list(rec)[:10]
    mults = [_multipliers(r, rec.config) for r in results]
    vals = [abs(math.log(m)) for ms in mults for _, _, m in ms
            if m is not None and math.isfinite(m) and m > 0]
    # the axis ends on a power of two past the largest effect (at most 2^20 either way)
    extent = math.log(2) * min(20, max(1, math.ceil(max(vals, default=0) / math.log(2) - 1e-9)))
    head, bar = 18, 15
    group = head + bar * len(mults[0]) + 10
    svg = _Svg(title, height=_MT + group * len(results) + 40)
    c0, c1 = 250, WIDTH - 90           # the bar area; its middle is x1
    mid = (c0 + c1) / 2

    def xs(m: float) -> float:
        v = max(-extent, min(extent, math.log(m))) if m > 0 and math.isfinite(m) else (
            extent if m == math.inf else -extent)
        return mid + (c1 - c0) / 2 * v / extent

    y_end = _MT + group * len(results)
    for t in sorted({1.0, *(2.0 ** k for k in range(-12, 13) if abs(k * math.log(2)) <= extent)}):
        if abs(math.log(t)) <= extent and (abs(math.log2(t)) % 1 == 0):
            for i in range(len(results)):  # beside each memory's bars, never through its title
                top = _MT + i * group + head
                svg.line(xs(t), top, xs(t), top + bar * len(mults[0]), "axis" if t == 1
                         else "grid")
            if abs(math.log2(t)) % (1 if extent < 3 else 2) == 0 or t == 1:
                svg.text(xs(t), y_end + 14, f"x{t:g}", "tick", "middle")
    for i, (r, ms) in enumerate(zip(results, mults)):
        y = _MT + i * group
        head_text = f"{r.rank}. {r.id}  score {r.score:.3f}  {_cut(r.text, 70)}"
        if r.superseded:
            head_text += "  (superseded)"
        svg.text(8, y + 13, head_text, "label strong")
        for j, (name, word, m) in enumerate(ms):
            yy = y + head + j * bar
            svg.text(16, yy + 11, word, "value")
            if m is None:
                svg.text(mid + 6, yy + 11, "off (weight 0)", "value")
                continue
            x = xs(m)
            svg.rect(min(x, mid), yy + 2, abs(x - mid), bar - 4, f"bar factor {name}",
                     f"{r.id}: {word} multiplies the score by {m:.3g}")
            svg.text(c1 + 8, yy + 11, f"x{m:.3g}", "value")
    svg.text(mid, y_end + 32, "what the factor multiplies the score by (log scale; x1: no "
                              "effect)", "axis-label", "middle")
    lines = "".join(f"<li><code>{_e(r.id)}</code> “{_e(r.text)}”<br>{_e(r.explain())}</li>"
                    for r in results)
    lw = rec.config.lexical_weight
    rel = ("its BM25 over the best candidate's" if rec.config.w_relevance and not any(
        r.cosine is not None for r in results) else
        f"{lw:g} x its BM25 + {1 - lw:g} x its cosine to the question, each as a share of the "
        "best candidate's (hybrid recall)")
    how = ("Score = relevance x recency x importance x usefulness, each to its weight (x "
           "context: this memory's own record on similar questions; x rules: a superseded "
           f"memory's penalty). Relevance is {rel}; usefulness is the learned lift over the "
           "base rate, the product of the links that pass the confidence gate. Each memory, "
           "and its explain():")
    return _figure("factors", title, svg.render(), caption,
                   f'<p class="note">{_e(how)}</p><ul class="explain">{lines}</ul>')


# -- health --------------------------------------------------------------------------


def health_table(mem: Memory, namespace: str | None) -> str:
    st = mem.stats()
    rep = mem.check()
    rows: list[tuple[str, str]] = []
    path = mem.path
    size = os.path.getsize(path) if os.path.isfile(path) else None
    rows.append(("store", path + (f" ({size / 1024:,.0f} KiB)" if size is not None else "")))
    rows.append(("schema", f"version {st.schema} (heapmem {__version__})"))
    rows.append(("oldest reader", f"SQLite {st.oldest_reader} or later can read it; forget "
                 + ("erases in place (FTS5 secure-delete)" if st.erases_in_place
                    else "merges the whole index (portable)")))
    if namespace is not None:
        ns = st.namespace(namespace)
        rows.append((f"namespace {namespace}",
                     f"{ns.memories} memories, {ns.recalls} recalls logged, {ns.events} "
                     f"judgements; last added {_when(ns.last_added)}, last used "
                     f"{_when(ns.last_used)}"))
    rows.append(("memories", f"{st.memories} in {st.namespaces} namespace"
                 + ("s" if st.namespaces != 1 else "")))
    rows.append(("recalls", f"{st.recalls} logged"))
    rows.append(("feedback", f"{st.events} judgements ({st.used} used, {st.ignored} ignored)"))
    prior = f"; {st.prior_links} carry a merged prior" if st.prior_links else ""
    rows.append(("links", f"{st.pooled_features} links learned in the pooled layer, "
                 f"{st.link_rows} rows in all{prior}"))
    if rep.ok:
        check = (f'<span class="ok">ok</span>: {rep.memories} memories, {rep.events} events and '
                 f"{rep.link_rows} links agree with each other")
    else:
        items = "".join(f"<li>{_e(p)}</li>" for p in rep.problems)
        check = (f'<span class="bad">{len(rep.problems)} problem'
                 f'{"s" * (len(rep.problems) != 1)}</span><ul>{items}</ul>')
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    body += f"<tr><th>check()</th><td>{check}</td></tr>"
    return f'<table class="health" data-chart="health">{body}</table>'


# -- the page ------------------------------------------------------------------------

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
margin:0 auto;max-width:980px;padding:18px 24px;color:#1d2330;background:#fff}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid
#dde2ea;padding-bottom:.2em}.sub{color:#5a6372;margin:0 0 1em}figure{margin:.6em 0 1.2em}
figcaption{font-weight:600;margin-bottom:.3em}svg{width:100%;height:auto;display:block}
.axis{stroke:#5a6372;stroke-width:1}.grid{stroke:#e4e8ee;stroke-width:1}
.base{stroke:#b4462e;stroke-width:1.5;stroke-dasharray:4 3}
text{font-size:11px;fill:#1d2330}.tick{fill:#5a6372}.axis-label{fill:#5a6372;font-size:11px}
.label.strong{font-weight:600}.value{fill:#3a4252}
.bar.used{fill:#2f7d5b}.bar.ignored{fill:#c9d2de}.bar.strength{fill:#3367b5}
.bar.share{fill:#8a6cc2}.bar.relevance{fill:#3367b5}.bar.recency{fill:#7a8aa0}
.bar.importance{fill:#c98a1e}.bar.usefulness{fill:#2f7d5b}
.series{fill:none;stroke:#3367b5;stroke-width:2}.dot{fill:#3367b5}
.empty{padding:1.2em;background:#f5f7fa;border:1px dashed #c9d2de;color:#3a4252}
.note{color:#5a6372;font-size:.9em;margin:.3em 0}.legend{font-size:.9em;margin:.2em 0}
.key{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}.key.used{background:#2f7d5b}
.key.ignored{background:#c9d2de}ul.explain{font-size:.85em;color:#3a4252;padding-left:1.2em}
table.health{border-collapse:collapse;font-size:.95em}table.health th{text-align:left;
padding:3px 14px 3px 0;vertical-align:top;color:#5a6372;font-weight:600}
table.health td{padding:3px 0}.ok{color:#2f7d5b;font-weight:600}.bad{color:#b4462e;font-weight:600}
code{font-size:.95em}
"""

#: Nothing may load: no script, no font, no image, no style from a file.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _chosen_recall(mem: Memory, namespace: str | None, recall: Any
                   ) -> tuple[Recall | None, str, str]:
    """The recall whose factors the page draws, the words for an empty chart,
    and its caption."""
    scope = "the store" if namespace is None else f"namespace {namespace}"
    if isinstance(recall, Recall):
        return recall, f"The recall “{recall.query}” showed no memory.", (
            f"The recall “{recall.query}” in {recall.namespace}, as given.")
    if isinstance(recall, str):
        assert namespace is not None
        rec = mem.recall(recall, namespace=namespace, k=5, track=False)
        return rec, (f"No memory of {namespace} matches “{recall}”: no term of the question is "
                     "in any of its memories."), (
            f"The question “{recall}” in {namespace}, ranked now ({_when(mem.now())}), "
            "untracked.")
    rid = recall
    if rid is None:
        with mem.snapshot() as c:
            rid = learning.newest_recall(c, namespace)
        if rid is None:
            return None, (f"No tracked recall yet in {scope}: a recall with track on (the "
                          "default) logs one; or give a question (--query, with -n)."), ""
    logged = mem.log.get(rid)
    assert logged is not None
    rec = mem.recall(logged.query, namespace=logged.namespace, k=max(1, len(logged.shown)),
                     now=logged.created_at, track=False)
    shown = " ".join(logged.shown)
    return rec, (f"Recall {rid} (“{logged.query}” in {logged.namespace}) finds no memory now: "
                 "those it showed were forgotten or changed since."), (
        f"Recall {rid}, “{logged.query}” in {logged.namespace} at {_when(logged.created_at)}, "
        f"ranked again at that time with what the store has learned since (it showed: "
        f"{shown}).")


def check_args(memory: Any, path: Any, namespace: Any, recall: Any) -> tuple[str, str | None]:
    """The output path and the namespace, checked; a ValueError or TypeError
    (one sentence) on bad input, before anything is read or written."""
    if not isinstance(memory, Memory):
        raise TypeError(f"memory must be a heapmem.Memory (heapmem.open(path)), got "
                        f"{type(memory).__name__}")
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise TypeError("path must be the file to write the page to (a non-empty string)")
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a folder; give the report's file name, like report.html")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    if namespace is not None:
        if namespace == POOLED:
            raise ValueError("namespace '*' is the pooled layer of learned links, not a "
                             "namespace of memories; leave it out for the whole store")
        namespace = check_namespace(namespace)
        have = memory.namespaces
        if namespace not in have:
            shown = ", ".join(have[:10]) + (f" (and {len(have) - 10} more)"
                                            if len(have) > 10 else "")
            raise ValueError(f"the store has no namespace {namespace!r}; it has: "
                             f"{shown or 'none yet'}")
    if recall is not None and not isinstance(recall, (str, int, Recall)) \
            or isinstance(recall, bool):
        raise TypeError("recall must be None (the newest tracked recall), a question (str), "
                        f"a recall_id (int) or a heapmem.Recall, got {type(recall).__name__}")
    if isinstance(recall, str):
        if not recall.strip():
            raise ValueError("the question is empty; give the question to rank, or leave it "
                             "out for the newest tracked recall")
        if namespace is None:
            raise ValueError("a question is ranked in one namespace: name it (namespace=, "
                             "or -n NAME)")
    if isinstance(recall, int):
        logged = memory.log.get(recall)
        if logged is None:
            raise ValueError(f"no tracked recall has id {recall} (never logged, or forgotten)")
        if namespace is not None and logged.namespace != namespace:
            raise ValueError(f"recall {recall} was asked in {logged.namespace!r}, not in "
                             f"{namespace!r}")
    return path, namespace


def build_report(memory: Memory, *, namespace: str | None = None, recall: Any = None) -> str:
    """The report page's HTML (see write_report)."""
    _, namespace = check_args(memory, "report.html", namespace, recall)
    return _page(memory, namespace, recall)


def _page(mem: Memory, namespace: str | None, recall: Any) -> str:
    scope = "the store" if namespace is None else f"namespace {namespace}"
    with mem.snapshot() as c:
        days = learning.by_day(c, namespace)
    view = namespace if namespace is not None else POOLED
    links = mem.links(view)
    rec, why, caption = _chosen_recall(mem, namespace, recall)
    name = os.path.basename(mem.path) or mem.path
    title = f"heapmem report: {name}" + (f", {namespace}" if namespace is not None else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">{_e(scope[0].upper() + scope[1:])}, written {_e(_when(mem.now()))} '
        f"by heapmem {_e(__version__)}.</p>",
        "<h2>Learning over time</h2>",
        feedback_chart(days, scope),
        rank_chart(days, scope),
        "<h2>What it learned</h2>",
        links_chart(links, "the pooled layer '*' (every namespace)" if namespace is None
                    else namespace, mem.pool.settings["min"] if namespace is None else None),
        "<h2>Why one memory beat another</h2>",
        factors_chart(rec, why, caption),
        "<h2>Health</h2>",
        health_table(mem, namespace),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def write_report(memory: Memory, path: str = "report.html", *, namespace: str | None = None,
                 recall: Any = None) -> str:
    """Write the report page for the store, or one namespace of it, to path;
    returns the path.

    The page shows learning over time (judgements per day, the rank of the
    memories they used), the strongest learned links with their evidence,
    one recall's factors (recall: None for the newest tracked recall, a
    question to rank now in namespace, a recall_id, or a Recall), and the
    store's health (stats() and check()).  It is one HTML file with inline
    SVG, nothing to load.  Nothing is written to the store; bad arguments (an
    unknown namespace, a missing folder, a question with no namespace) raise
    ValueError or TypeError and write no file.  The page is written whole or
    not at all (a temporary file, then renamed).
    """
    path, namespace = check_args(memory, path, namespace, recall)
    text = _page(memory, namespace, recall)
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
