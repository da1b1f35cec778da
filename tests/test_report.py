"""heapmem report: the HTML page of what a store learned (issue 23).

Its content on a small store built on a fixed clock (adds, tracked recalls,
feedback over three days), hostile strings escaped, empty charts that say
why, bad arguments answered with one sentence and no file; and the page in a
real headless browser (Debian's chromium): it loads with no console message
and its SVG charts hold the elements the page drew.  No timing here: the
report's speed is bench/report.py's (bench/RESULTS.md, section 12).
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

import heapmem
from heapmem import learning
from heapmem.adapters import cli
from heapmem.io import report

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC
DAY = 86400.0
EVIL_NS = 'team"<script>alert(1)</script>'
EVIL_TEXT = 'Booked <script>alert("x")</script> the flight to Oslo, departs May 2 at 6pm & \'soon\''

QUESTIONS = {  # namespace: (question, the fact that answers it)
    "user:ana": ("When is my dentist appointment?",
                 "Dentist appointment confirmed for Tuesday at 3:15pm"),
    EVIL_NS: ("When is my flight to Oslo?", EVIL_TEXT),
}


class Page(HTMLParser):
    """The page's charts: per figure (data-chart), a count of each tag and of
    each class of rect, and its text; and the page's whole text."""

    def __init__(self, text: str):
        super().__init__()
        self.charts: dict[str, Counter] = {}
        self.chart_text: dict[str, str] = {}
        self.text: list[str] = []
        self.tags: Counter = Counter()
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] += 1
        if tag == "figure":
            self._in = a.get("data-chart")
            self.charts[self._in] = Counter()
            self.chart_text[self._in] = ""
        elif self._in is not None:
            self.charts[self._in][tag] += 1
            if tag == "rect":
                self.charts[self._in]["rect." + a.get("class", "")] += 1

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        if tag == "figure":
            self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in is not None:
            self.chart_text[self._in] += data

    @property
    def all_text(self) -> str:
        return "".join(self.text)


class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def build(path: str) -> tuple[heapmem.Memory, Clock, list[tuple[int, str, int, int]]]:
    """A small store: two namespaces (one with a hostile name and text), three
    memories each, and tracked recalls with feedback on days 0 and 2 (none on
    day 1).  Returns the store, its clock and what was judged: (day,
    namespace, rank of the memory used, memories judged)."""
    clock = Clock(T0 - 10 * DAY)
    mem = heapmem.open(path, clock=clock)
    for ns, (q, fact) in QUESTIONS.items():
        topic = q.split("my ")[1].rstrip("?")
        mem.add(fact, namespace=ns, source="user")
        mem.add(f"I'd love to find a good {topic} someday", kind="preference", namespace=ns)
        mem.add(f"A {topic} costs about $90 around here", kind="tool_result", source="tool",
                namespace=ns)
    judged = []
    for day in (0, 2):
        for i, (ns, (q, fact)) in enumerate(QUESTIONS.items()):
            clock.t = T0 + day * DAY + 60 * i
            res = mem.recall(q, namespace=ns, k=3)
            used = next(r for r in res if r.text == fact)
            if i == 0:
                mem.feedback(used=[used.id], recall_id=res.recall_id)  # the rest ignored
                judged.append((day, ns, used.rank, len(res)))
            else:
                mem.mark_used([used.id], recall_id=res.recall_id)  # only this one
                judged.append((day, ns, used.rank, 1))
    clock.t = T0 + 3 * DAY
    mem.pool.set(min_namespaces=1, trim=0)  # two namespaces: pool what each one learned
    return mem, clock, judged


@pytest.fixture
def store(tmp_path):
    mem, clock, judged = build(str(tmp_path / "agent.db"))
    yield mem, judged
    mem.close()


def test_the_page_shows_learning_links_factors_and_health(store, tmp_path):
    mem, judged = store
    out = tmp_path / "report.html"
    assert report.write_report(mem, str(out)) == str(out)
    text = out.read_text(encoding="utf-8")
    page = Page(text)
    assert list(page.charts) == ["feedback", "rank", "links", "factors"]
    assert page.tags["script"] == 0 and page.tags["link"] == 0 and page.tags["img"] == 0
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    # feedback per day: days 0, 1 (empty) and 2; each day with feedback has a used bar and,
    # where the rest were ignored, an ignored bar
    fb = page.charts["feedback"]
    assert fb["svg"] == 1 and fb["rect.bar used"] == 2 and fb["rect.bar ignored"] == 2
    assert "2023-11-15" in page.chart_text["feedback"]
    total = sum(n for *_, n in judged)
    assert f"{total} judgements in all, {len(judged)} of them used." in page.all_text
    # the rank chart: one line through a point per day with a used memory
    rk = page.charts["rank"]
    assert rk["svg"] == 1 and rk["path"] == 1 and rk["circle"] == 2
    mrr = sum(1 / rank for _, _, rank, _ in judged) / len(judged)
    assert f"MRR {mrr:.3f}" in page.all_text
    # links: a strength bar and a share bar per link shown
    links = [r for r in mem.links() if r.alpha + r.beta > 0]
    n = min(report.TOP_LINKS, len(links))
    assert n >= 5
    lk = page.charts["links"]
    assert lk["rect.bar strength"] == n and lk["rect.bar share"] == n
    assert links[0].feature in page.chart_text["links"]
    # the factors of the newest tracked recall (the hostile namespace's, on day 2)
    fa = page.charts["factors"]
    cfg = mem.config
    on = sum(1 for w in (cfg.w_relevance, cfg.w_recency, cfg.w_importance, cfg.w_usefulness)
             if w > 0) + 1  # + context, a factor of its own (it was folded into usefulness)
    newest = mem.log.get(learning.newest_recall(mem.connection))
    assert newest.namespace == EVIL_NS
    assert sum(v for k, v in fa.items() if k.startswith("rect.bar factor")) == \
        on * len(newest.shown)
    assert f"Recall {newest.id}" in page.chart_text["factors"]
    # health: counts, schema, the oldest reader, check()
    st = mem.stats()
    assert f"version {st.schema}" in page.all_text
    assert f"SQLite {st.oldest_reader} or later" in page.all_text
    assert f"{st.memories} in {st.namespaces} namespaces" in page.all_text
    assert "ok: 6 memories" in page.all_text
    # the same store and clock: the same page, byte for byte
    assert report.build_report(mem) == text


def test_learning_by_day_adds_up_the_event_log(store):
    mem, judged = store
    days = learning.by_day(mem.connection)
    assert [d.day for d in days] == [int(T0 // DAY), int(T0 // DAY) + 2]
    for d in days:
        mine = [j for j in judged if int(T0 // DAY) + j[0] == d.day]
        assert d.judged == sum(n for *_, n in mine)
        assert d.used == d.answered == len(mine) == d.recalls
        assert d.mrr == pytest.approx(sum(1 / r for _, _, r, _ in mine) / len(mine))
        assert d.mean_rank == pytest.approx(sum(r for _, _, r, _ in mine) / len(mine))
    only = learning.by_day(mem.connection, "user:ana")
    assert sum(d.judged for d in only) == sum(n for _, ns, _, n in judged if ns == "user:ana")
    assert learning.newest_recall(mem.connection, "user:ana") == 3
    assert learning.newest_recall(mem.connection, "user:nobody") is None


def test_hostile_strings_are_escaped(store, tmp_path):
    mem, _ = store
    out = tmp_path / "r.html"
    # the hostile namespace's own page, and a question with quotes and markup in it
    q = 'When is my flight to Oslo? <b>"now"</b> & \'then\''
    report.write_report(mem, str(out), namespace=EVIL_NS, recall=q)
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text.lower() and "<b>" not in text
    assert "&lt;script&gt;" in text and "&quot;" in text and "&#x27;" in text
    page = Page(text)
    assert page.tags["script"] == 0 and page.tags["b"] == 0
    # the browser's reading of the text is the store's text, exactly
    assert EVIL_NS in page.all_text and q in page.all_text
    assert EVIL_TEXT in page.all_text
    assert page.charts["factors"]["svg"] == 1
    # attributes too: the chart's label carries the title, quotes escaped
    assert 'aria-label="Strongest learned links, as team&quot;&lt;script&gt;' in text


def test_empty_charts_say_why(tmp_path):
    with heapmem.open(str(tmp_path / "new.db"), clock=Clock(T0)) as mem:
        mem.add("Dentist appointment confirmed for Tuesday at 3:15pm", namespace="user:ana")
        text = report.build_report(mem)
        page = Page(text)
        assert all(c["svg"] == 0 for c in page.charts.values())
        assert "No feedback yet in the store" in page.chart_text["feedback"]
        assert "No feedback yet in the store, so no rank" in page.chart_text["rank"]
        assert "No learned links yet" in page.chart_text["links"]
        assert "No tracked recall yet in the store" in page.chart_text["factors"]
        assert "ok: 1 memories" in page.all_text
        # a recall with nothing judged used: the rank chart says so
        res = mem.recall("When is my dentist appointment?", namespace="user:ana")
        mem.mark_ignored(res.ids, recall_id=res.recall_id)
        page = Page(report.build_report(mem, namespace="user:ana"))
        assert "judged 1 memories, none of them used" in page.chart_text["rank"]
        assert page.charts["feedback"]["rect.bar ignored"] == 1
        empty = mem.recall("", namespace="user:ana")  # no term to search: no memory
        page = Page(report.build_report(mem, namespace="user:ana", recall=empty))
        assert "The recall “” showed no memory." in page.chart_text["factors"]


def test_nothing_pooled_yet_says_why(store):
    mem, _ = store
    mem.pool.set(min_namespaces=5, trim=2)  # the defaults: two namespaces pool nothing
    page = Page(report.build_report(mem))
    assert page.charts["links"]["svg"] == 0
    assert "Nothing pooled yet" in page.chart_text["links"]
    assert "once 5 namespaces back it" in page.chart_text["links"]
    # a namespace's own links are on its page
    page = Page(report.build_report(mem, namespace="user:ana"))
    assert page.charts["links"]["rect.bar strength"] >= 1


def test_a_namespace_page_and_a_recall_id(store, tmp_path):
    mem, judged = store
    page = Page(report.build_report(mem, namespace="user:ana", recall=1))
    ana = [j for j in judged if j[1] == "user:ana"]
    assert page.charts["feedback"]["rect.bar used"] == len(ana)
    assert "Recall 1, “When is my dentist appointment?” in user:ana" in \
        page.chart_text["factors"]
    assert "namespace user:ana" in page.all_text
    # a Recall object is drawn as given
    res = mem.recall("When is my dentist appointment?", namespace="user:ana", track=False)
    page = Page(report.build_report(mem, recall=res))
    assert "as given" in page.chart_text["factors"]


@pytest.mark.parametrize("kw, error, words", [
    ({"namespace": "user:nobody"}, ValueError, "no namespace 'user:nobody'; it has: team"),
    ({"namespace": "*"}, ValueError, "pooled layer"),
    ({"namespace": ""}, ValueError, "must not be empty"),
    ({"recall": "When is it?"}, ValueError, "ranked in one namespace"),
    ({"recall": " ", "namespace": "user:ana"}, ValueError, "question is empty"),
    ({"recall": 99}, ValueError, "no tracked recall has id 99"),
    ({"recall": 1, "namespace": EVIL_NS}, ValueError, "was asked in 'user:ana'"),
    ({"recall": 2.5}, TypeError, "recall must be None"),
    ({"recall": True}, TypeError, "recall must be None"),
])
def test_bad_arguments_write_nothing(store, tmp_path, kw, error, words):
    mem, _ = store
    out = tmp_path / "r.html"
    before = mem.stats()
    with pytest.raises(error) as e:
        report.write_report(mem, str(out), **kw)
    assert words in str(e.value)
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert mem.stats() == before


def test_bad_paths_and_stores(store, tmp_path):
    mem, _ = store
    with pytest.raises(ValueError, match="is a folder"):
        report.write_report(mem, str(tmp_path))
    with pytest.raises(ValueError, match="does not exist"):
        report.write_report(mem, str(tmp_path / "no" / "r.html"))
    with pytest.raises(TypeError, match="heapmem.Memory"):
        report.write_report("agent.db", str(tmp_path / "r.html"))
    assert not (tmp_path / "r.html").exists()


def test_the_report_writes_nothing_to_the_store(store, tmp_path):
    mem, _ = store
    before = (mem.stats(), [(lr.id, lr.query) for lr in mem.log.judged()])
    report.write_report(mem, str(tmp_path / "a.html"), namespace="user:ana",
                        recall="When is my dentist appointment?")
    report.write_report(mem, str(tmp_path / "b.html"))
    assert (mem.stats(), [(lr.id, lr.query) for lr in mem.log.judged()]) == before


# -- the verb --------------------------------------------------------------------------


def heapmem_cli(*argv, env=None):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(a) for a in argv], clock=lambda: T0 + 3 * DAY, stdout=out, stderr=err,
                    env=env or {})
    return code, out.getvalue(), err.getvalue()


def test_the_verb(store, tmp_path):
    mem, _ = store
    db = mem.path
    out = tmp_path / "page.html"
    code, stdout, err = heapmem_cli("report", db, "-o", out)
    assert (code, stdout, err) == (0, f"{out}\n", "")
    assert out.read_text(encoding="utf-8") == report.build_report(mem)
    code, stdout, _ = heapmem_cli("--db", db, "-n", "user:ana", "report", "-o", out, "--query",
                                  "When is my dentist appointment?", "--json")
    assert code == 0 and '"namespace": "user:ana"' in stdout
    assert "ranked now" in out.read_text(encoding="utf-8")
    code, _, _ = heapmem_cli("report", "-o", out, env={"HEAPMEM_DB": db})
    assert code == 0


@pytest.mark.parametrize("argv, words", [
    (["report", "{tmp}/nowhere.db"], "no store at"),
    (["report", "{db}", "-n", "user:nobody"], "no namespace 'user:nobody'"),
    (["report", "{db}", "--query", "When?"], "name it with -n NAME"),
    (["report", "{db}", "--recall", "99"], "no tracked recall has id 99"),
    (["--db", "{tmp}/other.db", "report", "{db}"], "two stores given"),
    (["report", "{db}", "-o", "{tmp}/no/r.html"], "does not exist"),
])
def test_the_verb_refuses_bad_input_and_writes_nothing(store, tmp_path, argv, words):
    mem, _ = store
    argv = [a.format(tmp=tmp_path, db=mem.path) for a in argv]
    out = tmp_path / "r.html"
    code, stdout, err = heapmem_cli(*argv, "-o", out) if "-o" not in argv else \
        heapmem_cli(*argv)
    assert code == 1 and stdout == ""
    assert err.startswith("heapmem: error: ") and len(err.strip().splitlines()) == 1
    assert words in err, err
    assert not out.exists()
    assert not (tmp_path / "nowhere.db").exists() and not (tmp_path / "other.db").exists()


def test_the_readme_demo_report(tmp_path):
    """The README's command after the demo: `heapmem report agent.db`."""
    subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp_path,
                   check=True, capture_output=True, timeout=300)
    p = subprocess.run([sys.executable, "-m", "heapmem", "report", "agent.db"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout == "report.html\n", p.stderr
    page = Page((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert all(c["svg"] == 1 for c in page.charts.values()), page.charts
    assert "ok: 27 memories" in page.all_text


# -- in a real browser -----------------------------------------------------------------

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run "
                             "installs it where it can)")


def chromium(url: str, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """Load url in headless chromium: the DOM it built, and every console
    message (console.log/error, an uncaught exception, a blocked load)."""
    profile = tmp_path / f"chrome-{len(os.listdir(tmp_path))}"
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
                        "--enable-logging=stderr", "--v=0", *args, url],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [line for line in p.stderr.splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    return p.stdout, console


@needs_chromium
def test_the_console_catcher_catches(tmp_path):
    """The check below means something: this chromium reports console messages."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><p>x</p><script>console.error("boom"); nothere();</script>')
    _, console = chromium(bad.as_uri(), tmp_path, "--dump-dom")
    assert any("boom" in m for m in console) and any("Uncaught" in m for m in console), console


@needs_chromium
def test_the_page_in_a_headless_browser(store, tmp_path):
    mem, _ = store
    out = tmp_path / "report.html"
    report.write_report(mem, str(out))
    drawn = Page(out.read_text(encoding="utf-8"))
    dom, console = chromium(out.as_uri(), tmp_path, "--dump-dom")
    assert console == []
    page = Page(dom)
    assert page.tags["svg"] == 4 and page.tags["script"] == 0
    assert page.charts == drawn.charts
    assert page.charts["feedback"]["rect.bar used"] == 2
    assert page.charts["rank"]["path"] == 1
    assert page.charts["links"]["rect.bar strength"] >= 1
    assert page.charts["factors"]["rect.bar factor usefulness"] >= 1
    assert EVIL_TEXT in page.all_text  # text, not markup, in the browser too
    # and it draws: a screenshot of the whole page
    png = tmp_path / "shot.png"
    _, console = chromium(out.as_uri(), tmp_path, f"--screenshot={png}",
                          "--window-size=1000,2600", "--hide-scrollbars")
    assert console == []
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
