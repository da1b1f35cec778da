"""Namespace-local BM25: a namespace ranks as if it were alone in the file.

heap_bm25_row() (an FTS5 auxiliary function) and heap_bm25_top() (an
aggregate) score the match set with the namespace's own statistics, kept in
the namespaces table by triggers; heap_ntokens() counts a text's tokens as
FTS5 does.
"""
import json
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
    alone = heapmem.open(str(tmp_path / "alone.db"), clock=clock)
    multi = heapmem.open(str(tmp_path / "multi.db"), clock=clock)
    mine = texts(1, 300)
    fill(alone, "a", mine, "a")
    fill(multi, "b", ["flight lisbon " * 3] * 200 + texts(2, 500), "b")
    fill(multi, "a", mine, "a")
    fill(multi, "c", texts(3, 700), "c")
    yield alone, multi
    alone.close()
    multi.close()


def test_scores_equal_the_namespace_alone_and_fts5_bm25(stores):
    alone, multi = stores
    for q in QUESTIONS:
        got = bm25s(multi, q, "a")
        assert got and got == bm25s(alone, q, "a")
        # FTS5's own bm25() in the file that holds only this namespace
        fts = {f"a{seq - 1}": -b for seq, b in alone.connection.execute(
            "SELECT rowid, bm25(memories_fts, 0.0, 1.0) AS b FROM memories_fts "
            "WHERE memories_fts MATCH heap_match(?, 'a') ORDER BY b, rowid LIMIT 50", (q,))}
        assert list(got) == list(fts)
        for i in got:
            assert got[i] == pytest.approx(fts[i], rel=1e-12, abs=1e-15)


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


FTS = "CREATE VIRTUAL TABLE f USING fts5(tag, text, tokenize='porter unicode61 remove_diacritics 2')"


def test_heap_ntokens_counts_as_fts5(db):
    db.execute(FTS)
    rnd = random.Random(7)
    samples = ["", " ", "a", "Café naïve façade", "中文字符 and 日本語", "emoji 🎉🎉 x", "don't x-ray",
               "3.14 1,000 $5", "x" * 5000, "ÅÄÖ åäö ß", "tab\tnew\nline", "a_b a-b a.b a/b"]
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
    for n in (1, 10, 400):  # the top n is exact however much of the match set it skips
        top = json.loads(one(db, sql, docs, tokens, n, q))
        ref = db.execute("SELECT rowid, bm25(f, 0.0, 1.0) AS b FROM f WHERE f MATCH ? "
                         "ORDER BY b, rowid LIMIT ?", (q, n)).fetchall()
        assert [r for r, _ in top] == [r for r, _ in ref]
        assert [b for _, b in top] == pytest.approx([b for _, b in ref], rel=1e-12)
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
