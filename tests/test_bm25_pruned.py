"""The pruned BM25 top N (issue 34): recall's lexical candidates
(csrc/recall.c hr_lexical, with csrc/bm25.c's bounds and formula) are the top
N of the whole match set, as heap_bm25_top ranks it over every matching row:
the same ids and the same scores to 1e-9, over random stores and questions,
after adds, updates and forgets.  bm25_terms (schema 10) follows every write;
a store of schema 9 gets its rows on its first writable open; heap_terms reads
a text as FTS5 indexes it."""
from __future__ import annotations

import io
import json
import random
import re
import tempfile

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heapmem
from heapmem.db import schema

from conftest import MEMORY_TMP, T0, back_to_schema_9, one
from test_bm25 import fts_inputs, ranked, reference_bm25

# relevance alone: no time in the question ("went today") lifts a memory
RELEVANCE_ONLY = heapmem.ScoringConfig(w_relevance=1, w_recency=0, w_importance=0,
                                       w_usefulness=0, w_time=0)

# A skewed vocabulary: two speakers in most memories, a few common words, a
# long tail of rare ones (the shape that makes pruning pay: a name in half of
# a conversation's turns)
SPEAKERS = ["Caroline", "Melanie"]
COMMON = "went support group painting today really love kids camping running run".split()
RARE = ("lisbon pottery marathon violin adoption sunrise museum bracelet tattoo hiking festival "
        "poetry garden volunteer canoe lecture mural oboe sketch").split()

# today's statement: heap_bm25_top over every row the question matches
EXHAUSTIVE = ("SELECT heap_bm25_top(hit.seq, hit.row, "
              "(SELECT docs FROM namespaces WHERE namespace = ?2), "
              "(SELECT tokens FROM namespaces WHERE namespace = ?2), ?3, 'memories_fts') "
              "FROM (SELECT rowid AS seq, heap_bm25_row(memories_fts, 0.0, 1.0) AS row "
              "FROM memories_fts WHERE memories_fts MATCH heap_match(?1, ?2) LIMIT -1) AS hit")
# the pruned search, forced to prune (small = 0) wherever the question allows
PRUNED = "SELECT heap_bm25_search(?1, ?2, ?3, 0)"
# the rounds only: the connection's posting cache never answers
ROUNDS = "SELECT heap_bm25_search(?1, ?2, ?3, 0, 1000000000000000000)"
# through the connection's posting cache (cache = 0) wherever the question allows
CACHED = "SELECT heap_bm25_search(?1, ?2, ?3, 0, 0)"


def turn(rnd: random.Random) -> str:
    words = [rnd.choice(SPEAKERS) + ":"]
    for _ in range(rnd.randint(0, 25)):
        r = rnd.random()
        words.append(rnd.choice(COMMON) if r < 0.55 else rnd.choice(RARE) if r < 0.8
                     else rnd.choice(SPEAKERS) if r < 0.9 else "the")
    return " ".join(words)


def even_turn(rnd: random.Random) -> str:
    """Six distinct words: every memory as long as the others, each word once,
    so every bound is exactly what its word adds (no slack to hide behind)."""
    return " ".join(rnd.sample(SPEAKERS + COMMON + RARE, 6))


def spiky_turn(rnd: random.Random) -> str:
    """A quarter of them one word, said up to four times: the shortest
    memories and the highest frequencies a word has, which its bound is made
    of (a bound taken at the average length, or at frequency 1, misses them)."""
    if rnd.random() < 0.25:
        return " ".join([rnd.choice(COMMON + RARE + SPEAKERS)] * rnd.randint(1, 4))
    return turn(rnd)


def question(rnd: random.Random) -> str:
    pool = COMMON + RARE + SPEAKERS + ["what", "did", "the", "lisbon's", "Running?", "x-ray"]
    return " ".join(rnd.choice(pool) for _ in range(rnd.randint(1, 9)))


def top(conn, sql, q, ns, n):
    got = one(conn, sql, q, ns, n)
    return json.loads(got) if got else []


def assert_same(got, want):
    assert [r for r, _ in got] == [r for r, _ in want]
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)


def truth(conn):
    """bm25_terms as the memories give it: {(namespace, term): (docs, maxtf, minlen)}."""
    return {(ns, t): (d, mx, mn) for ns, t, d, mx, mn in conn.execute(
        "SELECT m.namespace, t.term, count(*), max(t.tf), min(m.ntok) "
        "FROM memories AS m, heap_terms(m.text) AS t GROUP BY 1, 2")}


def assert_terms_follow(conn):
    """docs exact; the bounds still bounds (a forget leaves them where they were)."""
    kept = {(ns, t): (d, mx, mn) for ns, t, d, mx, mn in conn.execute(
        "SELECT namespace, term, docs, maxtf, minlen FROM bm25_terms")}
    real = truth(conn)
    assert set(kept) == set(real)
    for k, (d, mx, mn) in real.items():
        assert kept[k][0] == d and kept[k][1] >= mx and kept[k][2] <= mn, k


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.integers(1, 400),
       n=st.one_of(st.integers(1, 10), st.integers(1, 60)), churn=st.booleans(),
       make=st.sampled_from([turn, even_turn, spiky_turn]))
def test_the_pruned_top_n_is_the_whole_match_sets(seed, size, n, churn, make):
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(dir=MEMORY_TMP) as d:  # a new store each example
        mem = heapmem.open(f"{d}/p.db", clock=lambda: T0, embedder=None)
        spaces = ["a", "b"] if rnd.random() < 0.5 else ["a"]
        mem.add_many([{"text": make(rnd), "namespace": rnd.choice(spaces)}
                      for _ in range(size)])
        c = mem.connection
        if churn:  # updates and forgets leave the bounds loose, never wrong
            ids = [i for i, in c.execute("SELECT id FROM memories")]
            rnd.shuffle(ids)
            mem.forget(ids[: len(ids) // 4])
            for i in ids[len(ids) // 4: len(ids) // 3]:
                mem.update(i, text=make(rnd))
        assert_terms_follow(c)
        for _ in range(12):
            q, ns = question(rnd), rnd.choice(spaces)
            want = top(c, EXHAUSTIVE, q, ns, n)
            assert_same(top(c, PRUNED, q, ns, n), want)
            assert_same(top(c, "SELECT heap_bm25_search(?1, ?2, ?3)", q, ns, n), want)
            assert_same(top(c, CACHED, q, ns, n), want)
        mem.close()


@pytest.fixture
def big(tmp_path):
    """A namespace of 3,000 turns (enough postings that recall prunes by
    itself), another namespace beside it, kinds and times to filter by."""
    mem = heapmem.open(str(tmp_path / "big.db"), clock=lambda: T0, embedder=None)
    rnd = random.Random(7)
    mem.add_many([{"text": turn(rnd), "namespace": "a", "kind": rnd.choice(["fact", "note"]),
                   "created_at": T0 - rnd.randrange(1000) * 3600.0} for _ in range(3000)])
    mem.add_many([{"text": turn(rnd), "namespace": "b"} for _ in range(500)])
    yield mem
    mem.close()


QUESTIONS = ["What did Caroline paint at the museum?", "Melanie running marathon in Lisbon",
             "support group kids camping", "violin and oboe lecture", "went today",
             "Caroline Melanie really love"]


def test_recall_takes_the_pruned_top_n(big):
    c = big.connection
    for q in QUESTIONS:
        res = big.recall(q, namespace="a", k=50, config=RELEVANCE_ONLY, track=False)
        want = top(c, EXHAUSTIVE, q, "a", 50)
        seqs = dict(c.execute("SELECT id, seq FROM memories WHERE namespace = 'a'"))
        assert_same([(seqs[r.id], -r.bm25) for r in res], want)


def test_filters_rank_inside_with_the_namespaces_idf(big):
    """kinds and since keep only their memories in the top N; a word's IDF
    is the namespace's, whatever the filters let through (the reference:
    plain BM25 over the namespace, the filtered memories ranked)."""
    c = big.connection
    since = T0 - 300 * 3600.0
    keep = {i for i, in c.execute("SELECT id FROM memories WHERE namespace = 'a' AND "
                                  "kind = 'note' AND created_at >= ?", (since,))}
    seqs = dict(c.execute("SELECT seq, id FROM memories WHERE namespace = 'a'"))
    for q in QUESTIONS:
        res = big.recall(q, namespace="a", k=50, config=RELEVANCE_ONLY, track=False,
                         kinds="note", since=since)
        tfs, doclen = fts_inputs(c, "memories_fts", q, seqs)
        score = {d: s for d, s in reference_bm25(tfs, doclen).items() if seqs[d] in keep}
        want = [(seqs[d], s) for d, s in ranked(score)]  # (ties by seq)
        assert [r.id for r in res] == [i for i, _ in want]
        for r, (_, s) in zip(res, want):
            assert r.bm25 == pytest.approx(s, rel=1e-9)


def test_the_bounds_are_what_keeps_it_exact(big):
    """A bound set too low makes the pruned search lose rows (so it prunes,
    and by the bounds), and check() reports the table; rebuilt, they agree
    again."""
    c = big.connection
    q = "Melanie running marathon in Lisbon"
    want = top(c, EXHAUSTIVE, q, "a", 50)
    assert_same(top(c, ROUNDS, q, "a", 50), want)
    c.execute("UPDATE bm25_terms SET maxtf = 1, minlen = 1000 WHERE term = 'marathon'")
    assert [r for r, _ in top(c, ROUNDS, q, "a", 50)] != [r for r, _ in want]
    # the posting cache bounds each term by the postings it holds
    assert_same(top(c, CACHED, q, "a", 50), want)
    assert any("BM25 term statistics" in p for p in big.check().problems)
    with big.transaction() as t:
        t.execute("DELETE FROM bm25_terms")
        schema.build_bm25_terms(t, "big.db")
    assert_same(top(c, ROUNDS, q, "a", 50), want)
    assert big.check().ok


@pytest.mark.parametrize("q", [
    "the ns tag itself",                 # replaced below by the namespace's own FTS5 tag
    "Caroline\u2014Melanie went",         # one word, two FTS5 tokens: a phrase
    "\U0001F389 went",                    # a word FTS5 reads as no token at all
])
def test_questions_the_pruned_search_cannot_take_rank_as_before(big, q):
    c = big.connection
    if q.startswith("the ns tag"):
        q = one(c, "SELECT heap_ns_tag('a')") + " went"
    assert_same(top(c, PRUNED, q, "a", 50), top(c, EXHAUSTIVE, q, "a", 50))


def test_missing_statistics_rank_as_heap_bm25_top(big):
    c = big.connection
    c.execute("DELETE FROM namespaces WHERE namespace = 'a'")
    for q in QUESTIONS[:3]:
        assert_same(top(c, PRUNED, q, "a", 50), top(c, EXHAUSTIVE, q, "a", 50))


def test_bm25_terms_follow_every_write(mem):
    mem.add("Café in Lisbon, naïve façade; 中文 too 🎉 x-ray", namespace="u1")
    mem.add_many([{"text": f"run running runner {i} lisbon", "namespace": "u2"}
                  for i in range(30)])
    c = mem.connection
    assert_terms_follow(c)
    ids = [i for i, in c.execute("SELECT id FROM memories WHERE namespace = 'u2'")]
    mem.forget(ids[:10])
    mem.update(ids[10], text="lisbon lisbon lisbon")
    c.execute("UPDATE memories SET namespace = 'u1', nstag = heap_ns_tag('u1') WHERE id = ?",
              (ids[11],))
    assert_terms_follow(c)
    assert c.execute("SELECT docs, maxtf FROM bm25_terms WHERE namespace = 'u2' "
                     "AND term = 'lisbon'").fetchall() == [(19, 3)]
    mem.forget(namespace="u2")
    assert not c.execute("SELECT 1 FROM bm25_terms WHERE namespace = 'u2'").fetchall()
    assert mem.check().ok


def test_a_schema_9_store_gets_its_term_statistics_on_open(tmp_path):
    path = str(tmp_path / "v9.db")
    with heapmem.open(path, clock=lambda: T0, embedder=None) as m:
        rnd = random.Random(3)
        m.add_many([{"text": turn(rnd), "namespace": ns} for ns in ("a", "b")
                    for _ in range(200)])
        want = sorted(m.connection.execute("SELECT * FROM bm25_terms").fetchall())
        results = top(m.connection, PRUNED, QUESTIONS[1], "a", 20)
    c = apsw.Connection(path)
    back_to_schema_9(c)
    c.execute("PRAGMA user_version=9")
    c.close()
    with heapmem.open(path, clock=lambda: T0, embedder=None) as m:
        assert m.schema_version == schema.SCHEMA_VERSION
        assert sorted(m.connection.execute("SELECT * FROM bm25_terms").fetchall()) == want
        assert top(m.connection, PRUNED, QUESTIONS[1], "a", 20) == results
        assert m.check().ok


def test_building_says_how_far_it_is_past_a_second(lexmem):
    lexmem.add_many([{"text": f"memory number {i}"} for i in range(10)])
    c = lexmem.connection
    ticks = iter(range(0, 100, 2))  # two seconds a reading
    out = io.StringIO()
    with lexmem.transaction() as t:
        t.execute("DELETE FROM bm25_terms")
        schema.build_bm25_terms(t, "x.db", err=out, clock=lambda: float(next(ticks)))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("heapmem: x.db: BM25 term statistics for 10 of 10 memories")
    assert lines[-1] == "heapmem: x.db: BM25 term statistics built"
    quiet = io.StringIO()
    with lexmem.transaction() as t:
        t.execute("DELETE FROM bm25_terms")
        schema.build_bm25_terms(t, "x.db", err=quiet, clock=lambda: 0.0)
    assert quiet.getvalue() == ""
    assert_terms_follow(c)


def test_heap_terms_reads_a_text_as_fts5_indexes_it(db):
    db.execute("CREATE VIRTUAL TABLE f USING fts5(text, "
               "tokenize='porter unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, instance)")
    rnd = random.Random(11)
    samples = ["", "Flights to Lisbon; the flight", "Café naïve façade ÅÄÖ", "中文字符 and 日本語",
               "emoji 🎉🎉 x", "don't x-ray 3.14", "run running runs", "y" * 40000 + " z",
               "tab\tnew\nline a_b a-b"]
    samples += ["".join(rnd.choice("ab é中 .,'-\tRUN") for _ in range(rnd.randint(0, 60)))
                for _ in range(200)]
    for i, text in enumerate(samples):
        db.execute("INSERT INTO f(rowid, text) VALUES (?, ?)", (i + 1, text))
        want = {}
        for term, in db.execute("SELECT term FROM v WHERE doc = ?", (i + 1,)):
            want[term] = want.get(term, 0) + 1
        got = dict(db.execute("SELECT term, tf FROM heap_terms(?)", (text,)).fetchall())
        assert got == want, text[:80]
    assert db.execute("SELECT * FROM heap_terms(NULL)").fetchall() == []


@pytest.mark.parametrize("sql, msg", [
    ("SELECT * FROM heap_terms", "heap_terms: takes the text to read, as its argument"),
    ("SELECT * FROM heap_bm25_terms", "heap_bm25_terms: takes the first and the last seq"),
    ("SELECT * FROM heap_bm25_terms('1', 2)", "heap_bm25_terms: takes the first and the last"),
    ("SELECT heap_bm25_search(1, 'a', 5)", "heap_bm25_search: question must be text"),
    ("SELECT heap_bm25_search('q', '*', 5)", "heap_bm25_search: namespace '*' is reserved"),
    ("SELECT heap_bm25_search('q', 'a' || char(0) || 'b', 5)",
     "heap_bm25_search: namespace must be valid UTF-8 without NUL bytes"),
    ("SELECT heap_bm25_search('q', CAST(x'61ff' AS TEXT), 5)",
     "heap_bm25_search: namespace must be valid UTF-8"),
    ("SELECT heap_bm25_search('q', ' ', 5)", "heap_bm25_search: namespace"),
    ("SELECT heap_bm25_search('q', 'a', 1001)", "heap_bm25_search: n must be an integer from 1"),
    ("SELECT heap_bm25_search('q', 'a', 0)", "heap_bm25_search: n must be an integer from 1"),
    ("SELECT heap_bm25_search('q', 'a', 5, -1)", "heap_bm25_search: small must be an integer"),
    ("SELECT heap_bm25_search('q', 'a', 5, 'x')", "heap_bm25_search: small must be an integer"),
    ("SELECT heap_bm25_search('q', 'a', 5, 0, -1)", "heap_bm25_search: cache must be an integer"),
    ("SELECT heap_bm25_search('q', 'a', 5, 0, 0.5)", "heap_bm25_search: cache must be an integer"),
    ("SELECT heap_bm25_tail(memories_fts, 0) FROM memories_fts WHERE memories_fts MATCH 'a'",
     "heap_bm25_tail: n must be an integer from 1"),
    ("SELECT heap_bm25_tail(memories_fts, 1, 'x') FROM memories_fts WHERE memories_fts "
     "MATCH 'a'", "heap_bm25_tail: column weights must be numbers"),
])
def test_bad_input_is_one_sentence_and_writes_nothing(lexmem, sql, msg):
    lexmem.add("a memory about a")
    c = lexmem.connection
    before = c.execute("SELECT * FROM bm25_terms").fetchall()
    with pytest.raises(apsw.Error, match=re.escape(msg)):
        c.execute(sql).fetchall()
    assert c.execute("SELECT * FROM bm25_terms").fetchall() == before


def test_heap_bm25_search_outside_a_store(db):
    with pytest.raises(apsw.SQLError, match="heap_bm25_search: this database is not a heapmem"):
        db.execute("SELECT heap_bm25_search('q', 'a', 5)").fetchall()


# -- the posting cache (csrc/recall.c, hr_pc) ------------------------------------------


def test_the_posting_cache_follows_every_write(tmp_path):
    """What the cache took from the index is dropped when the index changes:
    another connection's add, update and forget (in place: FTS5's structure
    record may not move), this one's, memories moved to another namespace;
    inside a transaction that has written, the rounds answer (FTS5 may hold
    its changes unflushed).  Each answer is the whole match set's (cache =
    0: the cache answers from the first unchanged search, not the third)."""
    path = str(tmp_path / "w.db")
    mem = heapmem.open(path, clock=lambda: T0, embedder=None)
    other = heapmem.open(path, clock=lambda: T0, embedder=None)
    rnd = random.Random(3)
    mem.add_many([{"text": turn(rnd), "namespace": rnd.choice("ab")} for _ in range(400)])
    c = mem.connection
    qs = ["Caroline went to the support group", "marathon in Lisbon", "Melanie kids camping"]

    def agree(ns="a"):  # (one namespace: the cache holds one namespace's lengths at a time)
        for q in qs:
            assert_same(top(c, CACHED, q, ns, 20), top(c, EXHAUSTIVE, q, ns, 20))

    agree()
    ids = [i for i, in c.execute("SELECT id FROM memories ORDER BY seq")]
    other.add_many([{"text": "Caroline marathon Lisbon marathon", "namespace": "a"}] * 3)
    agree()
    other.update(ids[0], text="marathon marathon marathon Lisbon")
    agree()
    other.forget(ids[1:40])
    agree()
    agree("b")
    mem.add("Melanie kids camping kids", namespace="b")
    agree("b")
    moved = [i for i, in c.execute("SELECT id FROM memories WHERE namespace = 'a' AND "
                                   "text LIKE '%marathon%' ORDER BY seq LIMIT 3")]
    c.execute("UPDATE memories SET namespace = 'b', nstag = heap_ns_tag('b') "
              "WHERE id IN (?, ?, ?)", moved)
    agree("b")
    agree()
    # a text changed inside a transaction, as many tokens as it had: nothing
    # FTS5 has flushed yet, nor the namespace's statistics, tells of it
    seq, n = c.execute("SELECT seq, heap_ntokens(text) FROM memories WHERE namespace = 'a' "
                       "AND heap_ntokens(text) >= 4 ORDER BY seq DESC LIMIT 1").fetchall()[0]
    agree()
    with mem.transaction() as t:
        t.execute("UPDATE memories SET text = ? WHERE seq = ?",
                  (" ".join(["oboe"] * n), seq))
        got = top(t, CACHED, "oboe", "a", 5)
        assert got == top(t, EXHAUSTIVE, "oboe", "a", 5)
        assert got[0][0] == seq
    agree()
    other.close()
    mem.close()


def dense_turn(rnd: random.Random) -> str:
    """Mostly the common words: a few thousand rows hold each."""
    words = [rnd.choice(SPEAKERS) + ":"]
    for _ in range(rnd.randint(3, 12)):
        words.append(rnd.choice(COMMON) if rnd.random() < 0.8 else rnd.choice(RARE))
    return " ".join(words)


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """Two namespaces big enough that recall's questions reach the posting
    cache (more than 2,048 postings: HR_LEX_SMALL, HR_PC_FROM), kinds and times to
    filter by."""
    path = str(tmp_path_factory.mktemp("wide") / "wide.db")
    mem = heapmem.open(path, clock=lambda: T0, embedder=None)
    rnd = random.Random(11)
    for ns in ("a", "b"):
        mem.add_many([{"text": dense_turn(rnd), "namespace": ns,
                       "kind": rnd.choice(["fact", "note"]),
                       "created_at": T0 - rnd.randrange(1000) * 3600.0} for _ in range(3000)])
    yield mem
    mem.close()


WIDE = ["Caroline went to the support group today", "Melanie really love kids camping running",
        "painting support group kids running camping marathon",
        "Caroline Melanie went running today"]


def test_recall_reaches_the_cache_and_ranks_as_the_whole_match_set(wide):
    """recall's lexical candidates through the posting cache (the questions'
    postings past HR_PC_FROM), alternating namespaces, with and without
    filters: the same memories and BM25 as plain BM25 over the namespace."""
    c = wide.connection
    since = T0 - 500 * 3600.0
    for ns in ("a", "b", "a"):
        seqs = dict(c.execute("SELECT seq, id FROM memories WHERE namespace = ?", (ns,)))
        keep = {i for i, in c.execute("SELECT id FROM memories WHERE namespace = ? AND "
                                      "kind = 'note' AND created_at >= ?", (ns, since))}
        for q in WIDE:
            words = " ".join(re.findall(r'"([^"]*)"', one(c, "SELECT heap_match(?)", q)))
            terms = {t for t, in c.execute("SELECT term FROM heap_terms(?)", (words,))}
            postings = sum(d for t, d in c.execute(
                "SELECT term, docs FROM bm25_terms WHERE namespace = ?", (ns,)) if t in terms)
            assert postings > 2048, q
            tfs, doclen = fts_inputs(c, "memories_fts", q, seqs)
            score = reference_bm25(tfs, doclen)
            for filt, kept in (({}, set(seqs.values())),
                               ({"kinds": "note", "since": since}, keep)):
                res = wide.recall(q, namespace=ns, k=30, config=RELEVANCE_ONLY, track=False,
                                  **filt)
                want = ranked({d: s for d, s in score.items() if seqs[d] in kept})[:30]
                assert [r.id for r in res] == [seqs[d] for d, _ in want]
                for r, (_, s) in zip(res, want):
                    assert r.bm25 == pytest.approx(s, rel=1e-9)


def test_the_cache_waits_for_the_index_to_settle(big):
    """The cache is built at the third search in a row that finds the index
    unchanged, and every write starts the count again (until then the rounds
    answer).  Seen through bounds set too low in bm25_terms, which only the
    rounds read: they lose rows, the cache (which bounds a term by the
    postings it holds) does not."""
    c = big.connection
    q = "Melanie running marathon in Lisbon"
    search = "SELECT heap_bm25_search(?1, ?2, ?3, 0, 1)"  # cache from 1 posting, settling
    want = top(c, EXHAUSTIVE, q, "a", 50)
    c.execute("UPDATE bm25_terms SET maxtf = 1, minlen = 1000 WHERE term = 'marathon'")
    for _ in range(2):
        got = [[r for r, _ in top(c, search, q, "a", 50)] for _ in range(5)]
        assert [g == [r for r, _ in want] for g in got] == [False, False, False, True, True]
        big.add("Lisbon oboe", namespace="b")  # a write elsewhere: the index changed
        want = top(c, EXHAUSTIVE, q, "a", 50)
