"""Namespace-local BM25: a namespace ranks as if it were alone in the file.

heap_bm25_row() (an FTS5 auxiliary function) and heap_bm25_top() (an
aggregate) score the match set with the namespace's own statistics, kept in
the namespaces table by triggers; heap_ntokens() counts a text's tokens as
FTS5 does.  The IDF is Lucene's, log(1 + (N - n + 0.5) / (n + 0.5)), not
FTS5's, so the oracle is reference_bm25() below: plain Okapi BM25 in Python
over the term frequencies and row lengths FTS5 indexed.  With FTS5's IDF the
same reference gives FTS5's own bm25(), which checks the reference itself.
"""
import json
import math
import random
import re
import struct

import apsw
import pytest

import heapmem

from conftest import one

WORDS = ("flight lisbon booked hotel dinner sister birthday march concert tickets paris "
         "running marathon painting pottery garden dog adopted museum trip camping").split()
QUESTIONS = ["When is the flight to Lisbon?", "Who adopted a dog?", "hotel in Paris",
             "What did she paint in the garden?", "concert tickets for the birthday",
             "marathon running trip camping museum"]
RELEVANCE_ONLY = heapmem.ScoringConfig(w_relevance=1, w_recency=0, w_importance=0,
                                       w_usefulness=0)


K1, B = 1.2, 0.75
TOKENIZER = "porter unicode61 remove_diacritics 2"


def lucene_idf(n_docs, n_hit):
    return math.log(1.0 + (n_docs - n_hit + 0.5) / (n_hit + 0.5))


def fts5_idf(n_docs, n_hit):
    """FTS5's bm25() IDF, floored at 1e-6."""
    idf = math.log((n_docs - n_hit + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else 1e-6


def reference_bm25(tfs, doclen, idf=lucene_idf):
    """Okapi BM25 (k1 1.2, b 0.75), higher is better, of every document holding
    a query term.  tfs: one {doc: occurrences} per query phrase, in query order;
    doclen: {doc: length} of every document of the collection (its N and
    average length)."""
    n_docs = len(doclen)
    if not n_docs:
        return {}
    avgdl = sum(doclen.values()) / n_docs
    score = {}
    for tf in tfs:
        w = idf(n_docs, len(tf))
        for d, f in tf.items():
            score[d] = score.get(d, 0.0) + w * (f * (K1 + 1.0)) / (
                f + K1 * (1.0 - B + B * doclen[d] / avgdl))
    return score


def ranked(score, n=50):
    """(doc, score) best first, ties by rowid, as heap_bm25_top and bm25() order."""
    return sorted(score.items(), key=lambda x: (-x[1], x[0]))[:n]


def stem(word):
    """The token FTS5's tokenizer makes of one query word."""
    c = apsw.Connection(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE q USING fts5(t, tokenize='{TOKENIZER}')")
    c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(q, instance)")
    c.execute("INSERT INTO q(t) VALUES (?)", (word,))
    toks = [t for t, in c.execute("SELECT term FROM v ORDER BY \"offset\"")]
    c.close()
    assert len(toks) == 1, (word, toks)  # the reference handles one-token phrases only
    return toks[0]


def fts_inputs(conn, table, question, rowids):
    """The reference's inputs, read from FTS5's index of `table` (columns tag and
    text; BM25 counts only text, rows are as long as all their columns): each of
    heap_match's phrases' frequencies in the given rows, and the rows' lengths
    from %_docsize."""
    rowids = set(rowids)
    words = re.findall(r'"([^"]*)"', one(conn, "SELECT heap_match(?)", question))
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_inst USING "
                 f"fts5vocab(main, {table}, instance)")
    tfs = []
    for w in words:
        tf = {}
        for doc, in conn.execute(f"SELECT doc FROM temp.{table}_inst WHERE term = ? AND "
                                 "col = 'text'", (stem(w),)):
            if doc in rowids:
                tf[doc] = tf.get(doc, 0) + 1
        tfs.append(tf)
    doclen = {r: sum(varints(sz)) for r, sz in conn.execute(f"SELECT id, sz FROM {table}_docsize")
              if r in rowids}
    return tfs, doclen


def reference_recall(mem, q, namespace, idf=lucene_idf):
    """The reference's top 50 of a namespace, as {memory id: bm25}."""
    c = mem.connection
    seqs = dict(c.execute("SELECT seq, id FROM memories WHERE namespace = ?", (namespace,)))
    tfs, doclen = fts_inputs(c, "memories_fts", q, seqs)
    return {seqs[d]: s for d, s in ranked(reference_bm25(tfs, doclen, idf))}


def assert_same_ranking(got, want):
    assert list(got) == list(want)
    for i in got:
        assert got[i] == pytest.approx(want[i], rel=1e-9, abs=1e-15)


def texts(seed, n):
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 14))) for _ in range(n)]


def fill(mem, namespace, items, prefix):
    mem.add_many([{"text": t, "id": f"{prefix}{i}", "namespace": namespace}
                  for i, t in enumerate(items)])


def bm25s(mem, q, namespace):
    res = mem.recall(q, k=50, namespace=namespace, config=RELEVANCE_ONLY, track=False)
    return {r.id: r.bm25 for r in res}


@pytest.fixture
def stores(tmp_path, clock):
    """The same namespace 'a' alone in one file, and among two noisy
    namespaces (with very different term statistics) in another."""
    alone = heapmem.open(str(tmp_path / "alone.db"), clock=clock, embedder=None)
    multi = heapmem.open(str(tmp_path / "multi.db"), clock=clock, embedder=None)
    mine = texts(1, 300)
    fill(alone, "a", mine, "a")
    fill(multi, "b", ["flight lisbon " * 3] * 200 + texts(2, 500), "b")
    fill(multi, "a", mine, "a")
    fill(multi, "c", texts(3, 700), "c")
    yield alone, multi
    alone.close()
    multi.close()


def test_scores_equal_the_namespace_alone_and_the_reference(stores):
    alone, multi = stores
    for q in QUESTIONS:
        got = bm25s(multi, q, "a")
        assert got and got == bm25s(alone, q, "a")
        # plain BM25 with Lucene's IDF over namespace a alone, in either file
        assert_same_ranking(got, reference_recall(multi, q, "a"))
        assert_same_ranking(got, reference_recall(alone, q, "a"))
        # the reference with FTS5's IDF is FTS5's own bm25() in the file that
        # holds only this namespace: the reference reads FTS5's inputs right
        fts = {f"a{seq - 1}": -b for seq, b in alone.connection.execute(
            "SELECT rowid, bm25(memories_fts, 0.0, 1.0) AS b FROM memories_fts "
            "WHERE memories_fts MATCH heap_match(?, 'a') ORDER BY b, rowid LIMIT 50", (q,))}
        ref = reference_recall(alone, q, "a", fts5_idf)
        assert list(ref) == list(fts)
        for i in ref:
            assert ref[i] == pytest.approx(fts[i], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 20])
def test_small_namespaces_match_the_reference(lexmem, size):
    mem = lexmem
    """Namespaces of a few memories from a few words: most query terms are in
    more than half the documents (FTS5's IDF would floor them), some in all."""
    rnd = random.Random(size)
    few = WORDS[:4]
    fill(mem, "big", texts(9, 200), "b")
    fill(mem, "small", [" ".join(rnd.choice(few) for _ in range(rnd.randint(1, 6)))
                        for _ in range(size)], "s")
    found = 0
    for q in ["flight to lisbon", "booked hotel", "lisbon lisbon hotel dinner", "Lisbon?"]:
        got = bm25s(mem, q, "small")
        assert all(b > 0 for b in got.values())
        assert_same_ranking(got, reference_recall(mem, q, "small"))
        found += len(got)
    assert found
    # with no namespace statistics the match set stands in for the namespace
    mem.connection.execute("DELETE FROM namespaces")
    c = mem.connection
    for q in ["flight to lisbon", "hotel"]:
        got = bm25s(mem, q, "small")
        seqs = dict(c.execute("SELECT seq, id FROM memories WHERE namespace = 'small'"))
        tfs, doclen = fts_inputs(c, "memories_fts", q, seqs)
        matched = {d for tf in tfs for d in tf}
        want = {seqs[d]: s for d, s in ranked(reference_bm25(
            tfs, {d: n for d, n in doclen.items() if d in matched}))}
        assert_same_ranking(got, want)


# The Lisbon scenario (issue 12): a new user's five memories, four of which name
# Lisbon.  Texts 1, 2 and 5 are examples/lisbon.py's.
LISBON = [
    ("Lisbon! I'd love to visit Lisbon someday", "preference", "maya", 5),
    ("Flights to Lisbon from SFO cost around $700 in spring", "tool_result", "tool", 2),
    ("What is a good neighborhood to stay in Lisbon?", "note", "maya", 4),
    ("Ana says Lisbon is lovely in March", "fact", "ana", 3),
    ("Booked the flight: SFO to LIS, departs March 14, 9:40am", "fact", "maya", 20),
]
WISH, PRICE, HOOD, ANA, BOOKING = (t for t, *_ in LISBON)
LISBON_Q = "When is my flight to Lisbon?"
LISBON_NOW = 1_741_910_400.0  # examples/lisbon.py's clock


@pytest.fixture
def lisbon(tmp_path):
    m = heapmem.open(str(tmp_path / "lisbon.db"), clock=lambda: LISBON_NOW, embedder=None)
    m.add_many([{"text": t, "kind": k, "source": s, "namespace": "user:maya", "id": t,
                 "created_at": LISBON_NOW - age * 86400.0} for t, k, s, age in LISBON])
    yield m
    m.close()


def test_lisbon_bm25_arithmetic(lisbon):
    c = lisbon.connection
    assert one(c, "SELECT heap_match(?)", LISBON_Q) == '"flight" OR "lisbon"'
    # FTS5's row lengths: the namespace tag plus the text's tokens ("i'd" is two)
    assert [n for n, in c.execute("SELECT ntok FROM memories ORDER BY seq")] == [9, 11, 10, 8, 12]
    # N = 5, average length 10; "lisbon" is in 4 rows, "flight" in 2
    idf_lisbon, idf_flight = math.log(1 + 1.5 / 4.5), math.log(1 + 3.5 / 2.5)
    assert (idf_lisbon, idf_flight) == (lucene_idf(5, 4), lucene_idf(5, 2))

    def part(f, dl):
        return f * (K1 + 1) / (f + K1 * (1 - B + B * dl / 10))
    want = {PRICE: (idf_flight * part(1, 11) + idf_lisbon * part(1, 11)),   # 1.1174
            BOOKING: idf_flight * part(1, 12),                               # 0.8093
            WISH: idf_lisbon * part(2, 9),                                   # 0.4070
            ANA: idf_lisbon * part(1, 8),                                    # 0.3133
            HOOD: idf_lisbon * part(1, 10)}                                  # 0.2877
    got = bm25s(lisbon, LISBON_Q, "user:maya")
    assert_same_ranking(got, reference_recall(lisbon, LISBON_Q, "user:maya"))
    assert got == pytest.approx(want, rel=1e-12)
    assert got[PRICE] == pytest.approx(1.117437, abs=1e-6)
    assert got[BOOKING] == pytest.approx(0.809257, abs=1e-6)
    # plain BM25 ranks the booking second: behind the price quote (both query
    # terms, and "Flights" stems to "flight"), ahead of the wish (which only
    # says "Lisbon", twice)
    assert list(got) == [PRICE, BOOKING, WISH, ANA, HOOD]
    res = lisbon.recall(LISBON_Q, k=5, namespace="user:maya", track=False,
                        config=heapmem.ScoringConfig(w_recency=0, w_importance=0,
                                                     w_usefulness=0))
    assert res.ids == [PRICE, BOOKING, WISH, ANA, HOOD]
    # FTS5's IDF: "lisbon" (in 4 of 5) weighs 1e-6, so the three memories that
    # only name Lisbon tie near 0 and only "flight" separates the other two
    old = reference_recall(lisbon, LISBON_Q, "user:maya", fts5_idf)
    assert list(old)[:2] == [PRICE, BOOKING] and max(old[WISH], old[ANA], old[HOOD]) < 1e-5


def test_lisbon_default_recall_puts_the_booking_first(lisbon):
    """Day one, ScoringConfig defaults, no feedback: the price quote's relevance
    (1.0) times a tool result's importance (0.6) falls below the booking's
    (0.724 x 1.0)."""
    res = lisbon.recall(LISBON_Q, k=5, namespace="user:maya", track=False)
    assert res.ids[:2] == [BOOKING, PRICE]
    assert res.ids.index(BOOKING) < res.ids.index(PRICE)


def test_other_namespaces_never_move_a_namespace(stores):
    _, multi = stores
    before = {q: bm25s(multi, q, "a") for q in QUESTIONS}
    fill(multi, "b", ["lisbon dog hotel garden"] * 500, "more")
    multi.forget(namespace="c")
    assert {q: bm25s(multi, q, "a") for q in QUESTIONS} == before


def varints(blob):
    """SQLite varints, as FTS5's %_docsize rows hold one per column."""
    out, i = [], 0
    while i < len(blob):
        v = 0
        for j in range(9):
            b = blob[i]
            i += 1
            if j == 8:
                v = (v << 8) | b
                break
            v = (v << 7) | (b & 0x7F)
            if not b & 0x80:
                break
        out.append(v)
    return out


def stats(mem):
    c = mem.connection
    kept = c.execute("SELECT namespace, docs, tokens FROM namespaces ORDER BY 1").fetchall()
    truth = c.execute("SELECT namespace, count(*), sum(ntok) FROM memories GROUP BY 1 ORDER BY 1"
                      ).fetchall()
    # ntok is FTS5's own document length for the row (all columns)
    doclen = {seq: sum(varints(sz)) for seq, sz in c.execute(
        "SELECT id, sz FROM memories_fts_docsize")}
    ntok = dict(c.execute("SELECT seq, ntok FROM memories").fetchall())
    assert ntok == doclen
    return kept, truth


def test_namespace_statistics_follow_every_write(mem):
    mem.add("Café in Lisbon, naïve façade; 中文 too 🎉 x-ray 3.14 don't", namespace="u1")
    mem.add_many([{"text": t, "namespace": ns} for ns in ("u1", "u2") for t in texts(4, 50)])
    mem.forget(mem.recall("lisbon", namespace="u2", k=3, track=False).ids)
    kept, truth = stats(mem)
    assert kept == truth and [k[0] for k in kept] == ["u1", "u2"]
    mem.forget(namespace="u2")
    kept, truth = stats(mem)
    assert kept == truth == [("u1", 51, truth[0][2])]
    assert mem.check().ok


def test_check_reports_stale_statistics(mem):
    mem.add("flight to Lisbon", namespace="u1")
    mem.connection.execute("UPDATE namespaces SET docs = 7")
    report = mem.check()
    assert not report.ok and "namespace statistics" in report.problems[0]
    mem.connection.execute("UPDATE namespaces SET docs = 1; UPDATE memories SET ntok = 99")
    assert not mem.check().ok


def test_stale_or_missing_statistics_still_rank(mem):
    """A file whose namespaces table lost rows still answers, with the match
    set standing in for the namespace."""
    fill(mem, "u1", texts(5, 100), "x")
    ids = mem.recall("flight to Lisbon", namespace="u1", k=10, track=False).ids
    mem.connection.execute("DELETE FROM namespaces")
    res = mem.recall("flight to Lisbon", namespace="u1", k=10, track=False)
    assert len(res) == 10 and set(res.ids) & set(ids)
    assert all(r.bm25 > 0 for r in res)


FTS = ("CREATE VIRTUAL TABLE f USING fts5(tag, text, "
       "tokenize='porter unicode61 remove_diacritics 2')")


def test_heap_ntokens_counts_as_fts5(db):
    db.execute(FTS)
    rnd = random.Random(7)
    samples = ["", " ", "a", "Café naïve façade", "中文字符 and 日本語", "emoji 🎉🎉 x",
               "don't x-ray", "3.14 1,000 $5", "x" * 5000, "ÅÄÖ åäö ß", "tab\tnew\nline",
               "a_b a-b a.b a/b"]
    samples += ["".join(rnd.choice("ab é中 .,'-\t") for _ in range(rnd.randint(0, 60)))
                for _ in range(300)]
    for i, t in enumerate(samples):
        db.execute("INSERT INTO f(rowid, tag, text) VALUES (?, 'ns1', ?)", (i + 1, t))
    sizes = dict(db.execute("SELECT id, sz FROM f_docsize").fetchall())
    for rowid, n in db.execute("SELECT rowid, heap_ntokens(tag) + heap_ntokens(text) FROM f"):
        assert n == sum(varints(sizes[rowid])), samples[rowid - 1]
    assert one(db, "SELECT heap_ntokens(NULL)") == 0


def test_heap_bm25_top_in_raw_sql(db):
    db.execute(FTS)
    for i, t in enumerate(texts(6, 400)):
        db.execute("INSERT INTO f(rowid, tag, text) VALUES (?, 'ns1', ?)", (i + 1, t))
    q = '"lisbon" OR "hotel" OR "dog"'
    sql = ("SELECT heap_bm25_top(seq, r, ?, ?, ?, 'f') FROM (SELECT rowid AS seq, "
           "heap_bm25_row(f, 0.0, 1.0) AS r FROM f WHERE f MATCH ? LIMIT -1)")
    docs, tokens = db.execute("SELECT count(*), sum(heap_ntokens(tag) + heap_ntokens(text)) "
                              "FROM f").fetchall()[0]
    tfs, doclen = fts_inputs(db, "f", "lisbon hotel dog", range(1, 401))
    assert (len(doclen), sum(doclen.values())) == (docs, tokens)
    for n in (1, 10, 400):  # the top n is exact however much of the match set it skips
        top = json.loads(one(db, sql, docs, tokens, n, q))
        ref = ranked(reference_bm25(tfs, doclen), n)
        assert [r for r, _ in top] == [r for r, _ in ref]
        assert [-b for _, b in top] == pytest.approx([b for _, b in ref], rel=1e-9)
        # FTS5's IDF in the reference: FTS5's bm25()
        fts = db.execute("SELECT rowid, bm25(f, 0.0, 1.0) AS b FROM f WHERE f MATCH ? "
                         "ORDER BY b, rowid LIMIT ?", (q, n)).fetchall()
        old = ranked(reference_bm25(tfs, doclen, fts5_idf), n)
        assert [r for r, _ in old] == [r for r, _ in fts]
        assert [-b for _, b in fts] == pytest.approx([b for _, b in old], rel=1e-12)
    # an attached schema, named schema.table
    db.execute("ATTACH ':memory:' AS other")
    assert len(json.loads(one(db, sql.replace("'f'", "'main.f'"), docs, tokens, 10, q))) == 10
    # nothing matched: an empty list; NULL statistics: the match set stands in
    assert one(db, sql, docs, tokens, 10, '"zzz"') == "[]"
    assert len(json.loads(one(db, sql, None, None, 10, q))) == 10
    # a table that is not an FTS5 table with row sizes: a clear error
    for name in ("'nope'", "'main.nope'", "'x.f'"):
        with pytest.raises(apsw.SQLError, match="heap_bm25_top: cannot read the row lengths"):
            one(db, sql.replace("'f'", name), docs, tokens, 10, q)


@pytest.mark.parametrize("args, msg", [
    ("1, x'00', 1, 1, 5, 'f'", "not a heap_bm25_row"),
    ("1, zeroblob(16), 1, 1, 5, 'f'", "not a heap_bm25_row"),
    ("'1', heap_bm25_row(f), 1, 1, 5, 'f'", "takes (rowid"),
    ("rowid, 'text', 1, 1, 5, 'f'", "takes (rowid"),
    ("rowid, heap_bm25_row(f), 'x', 1, 5, 'f'", "must be numbers"),
    ("rowid, heap_bm25_row(f), 1, 1, 0, 'f'", "n must be from 1"),
    ("rowid, heap_bm25_row(f), 1, 9e999, 5, 'f'", "finite"),
    ("rowid, heap_bm25_row(f), 1, 1, 5, NULL", "table name must be text"),
    ("rowid, heap_bm25_row(f), 1, 1, 5, ''", "table name must be text"),
])
def test_heap_bm25_top_bad_input(db, args, msg):
    db.execute(FTS)
    db.execute("INSERT INTO f(rowid, tag, text) VALUES (1, 'ns1', 'lisbon')")
    args = args.replace("heap_bm25_row(f)", "r")
    sql = (f"SELECT heap_bm25_top({args}) FROM (SELECT rowid, heap_bm25_row(f) AS r "
           "FROM f WHERE f MATCH 'lisbon' LIMIT -1)")
    with pytest.raises(apsw.SQLError, match="heap_bm25_top: .*" + re.escape(msg)):
        db.execute(sql).fetchall()


def test_heap_bm25_top_hostile_blobs(db):
    rnd = random.Random(3)
    blobs = [b"HMB1" + struct.pack("I", n) + bytes(rnd.randrange(256) for _ in range(m))
             for n in (0, 1, 64, 65, 2**31, 2**32 - 1) for m in (0, 8, 17, 100, 600)]
    for b in blobs:
        try:
            db.execute("SELECT heap_bm25_top(1, ?, 10, 100, 5, 'f')", (b,)).fetchall()
        except apsw.SQLError as e:
            assert "heap_bm25_top" in str(e)
    # rows of two different queries never mix
    db.execute(FTS)
    db.execute("INSERT INTO f(rowid, tag, text) VALUES (1, 'ns1', 'a b c'), (2, 'ns1', 'a')")
    row1 = b"HMB1" + struct.pack("I", 1) + struct.pack("d", 3.0) + struct.pack("d", 1.0) + b"\x01"
    row2 = b"HMB1" + struct.pack("I", 0) + struct.pack("d", 3.0)
    with pytest.raises(apsw.SQLError, match="rows of different queries"):
        db.execute("SELECT heap_bm25_top(column1, column2, 10, 100, 5, 'f') FROM (VALUES (1, ?), "
                   "(2, ?))", (row1, row2)).fetchall()
    got = json.loads(one(db, "SELECT heap_bm25_top(column1, column2, 10, 100, 5, 'f') FROM "
                             "(VALUES (1, ?), (2, ?))", row1, row1))
    # the same frequencies: the shorter row (2: 'ns1' 'a', 2 tokens) ranks first
    assert [r for r, _ in got] == [2, 1] and got[0][1] < got[1][1] < 0


def test_the_recorded_length_is_a_lower_bound_that_uses_where_hits_reach(db):
    """heap_bm25_row and heap_bm25_tail record a length no row exceeds
    (heap_bm25_top and the pruned search pop rows by the score at that
    length, so one too long would drop a row from an exact top n), and it is
    where the query's words reach in each column when that says more than
    their count: a word at the end of a row bounds its length exactly."""
    db.execute(FTS)
    rnd = random.Random(11)
    rows = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 40))) for _ in range(300)]
    rows += ["filler " * 30 + "lisbon", "lisbon " + "filler " * 30]
    for i, t in enumerate(rows):
        db.execute("INSERT INTO f(rowid, tag, text) VALUES (?, 'ns1', ?)", (i + 1, t))
    sizes = {r: sum(varints(sz)) for r, sz in db.execute("SELECT id, sz FROM f_docsize")}
    for q in ('"lisbon"', '"hotel" OR "dog" OR "paris"', '"nstag" OR "lisbon" OR "trip"'):
        for fn in ("heap_bm25_row(f, 0.0, 1.0)", "heap_bm25_tail(f, 1, 0.0, 1.0)"):
            got = db.execute(f"SELECT rowid, {fn} FROM f WHERE f MATCH ?", (q,)).fetchall()
            assert got
            for rowid, blob in got:
                lower = struct.unpack("<d", blob[8:16])[0]
                assert 0 <= lower <= sizes[rowid], (q, fn, rowid)
    end, start = len(rows) - 1, len(rows)
    lower = {r: struct.unpack("<d", b[8:16])[0] for r, b in db.execute(
        "SELECT rowid, heap_bm25_row(f, 0.0, 1.0) FROM f WHERE f MATCH '\"lisbon\"'")}
    assert lower[end] == 31 and lower[start] == 1  # the text column's 31 tokens, reached
