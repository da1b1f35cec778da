"""The recall query's plan does not depend on statistics the store may not
have (issue 12): on a store that was never closed (no sqlite_stat1 yet), a
reopened one, and one whose statistics are stale or misleading, the top N
drives and each candidate is read by its rowid.  (The wrong plan visits every
memory of the namespace for each of the top N: 14 times slower.)"""
from __future__ import annotations

import apsw
import numpy as np
import pytest

import heapmem

GOOD = "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"
BAD = "SEARCH m USING INDEX memories_namespace"
# ?1 question, ?2 namespace, ?3 now, ?4 N, ?5 qvec, ?6-?8 the filters (kinds, since, until),
# ?9 the BM25 top N (JSON)
PARAMS = ("flight to lisbon", "ns1", 1.7e9, 50, None, None, None, None, "[[1, -1.5]]")


def _plan(mem, name, params):
    """The plan of one of the statements heap_recall or heap_feedback runs
    (their text from the C core itself: heap_statement)."""
    c = mem.connection
    statement = c.execute("SELECT heap_statement(?)", (name,)).fetchall()[0][0]
    return [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + statement, params)]


def _fill(path):
    m = heapmem.open(str(path), clock=lambda: 1.7e9)
    words = "flight lisbon hotel booked march dinner friend sister paris train".split()
    m.add_many([{"text": " ".join(words[(i * 7 + j) % len(words)] for j in range(6)),
                 "namespace": f"ns{i % 5}"} for i in range(2000)])
    return m


def _assert_good(mem):
    plan = _plan(mem, "candidates", PARAMS)
    assert GOOD in plan and not any(BAD in p for p in plan), plan


def test_a_store_that_was_never_closed(tmp_path):
    m = _fill(tmp_path / "a.db")
    assert not m.connection.execute(
        "SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_stat1'").fetchall()
    _assert_good(m)
    m.close()


def test_a_reopened_store(tmp_path):
    _fill(tmp_path / "a.db").close()  # PRAGMA optimize writes the statistics
    with heapmem.open(str(tmp_path / "a.db")) as m:
        assert m.connection.execute("SELECT count(*) FROM sqlite_stat1").fetchall()[0][0] > 0
        _assert_good(m)


def test_stale_or_misleading_statistics(tmp_path):
    _fill(tmp_path / "a.db").close()
    c = apsw.Connection(str(tmp_path / "a.db"))
    # statistics claiming the namespace index picks one row out of a million
    c.execute("DELETE FROM sqlite_stat1 WHERE tbl = 'memories'")
    c.execute("INSERT INTO sqlite_stat1 VALUES ('memories', 'memories_namespace', '1000000 1'), "
              "('memories', NULL, '1000000')")
    c.close()
    with heapmem.open(str(tmp_path / "a.db")) as m:
        _assert_good(m)


def test_hybrid_candidates_read_the_namespace_then_its_vectors(tmp_path):
    class Toy:
        name = "toy-2d"

        def __call__(self, texts):
            return np.array([[1.0, float(len(t) % 3)] for t in texts])

    with heapmem.open(str(tmp_path / "h.db"), embedder=Toy()) as m:
        m.add_many([{"text": f"flight number {i}", "namespace": f"ns{i % 3}"}
                    for i in range(300)])
        plan = _plan(m, "hybrid", PARAMS[:4] + (np.ones(2, np.float32).tobytes(),) + PARAMS[5:])
        # (either index that leads with the namespace covers it)
        assert {"SEARCH m USING COVERING INDEX memories_namespace (namespace=?)",
                "SEARCH m USING COVERING INDEX memories_text (namespace=?)"} & set(plan)
        assert "SEARCH v USING INTEGER PRIMARY KEY (rowid=?)" in plan
        assert GOOD in plan


@pytest.mark.parametrize("closed", [False, True])
def test_the_plan_does_not_change_the_ranking(tmp_path, closed):
    m = _fill(tmp_path / "a.db")
    if closed:
        m.close()
        m = heapmem.open(str(tmp_path / "a.db"))
    res = m.recall("flight to lisbon", namespace="ns1", k=10, track=False)
    q, p = m.recall_sql("flight to lisbon", namespace="ns1", k=10)
    rows = m.connection.execute(q, p).fetchall()
    assert [r[0] for r in rows] == res.ids
    m.close()


def _pool_edges_plan(mem):
    return _plan(mem, "edges", ("when/dated", 3, "ns1"))


@pytest.mark.parametrize("closed", [False, True])
def test_feedback_reads_a_features_trim_boundaries_from_the_rate_index(tmp_path, closed):
    """A pooled row is reworked from its feature's lowest and highest rates:
    read in links_rate's order, never sorted, whatever the statistics say,
    so a feedback does not read every namespace's row (80 ms with 1,700
    namespaces before schema 6)."""
    m = _fill(tmp_path / "a.db")
    for ns in ("ns0", "ns1", "ns2"):
        res = m.recall("flight to lisbon", namespace=ns, k=3)
        m.feedback([res.ids[0]], recall_id=res.recall_id)
    if closed:
        m.close()
        m = heapmem.open(str(tmp_path / "a.db"))
    plan = _pool_edges_plan(m)
    assert sum("USING INDEX links_rate (feature=?)" in p for p in plan) == 2, plan
    assert "SEARCH links USING PRIMARY KEY (namespace=? AND feature=?)" in plan
    assert not any("TEMP B-TREE" in p or p.startswith("SCAN links") for p in plan), plan
    m.close()


def test_filtered_candidates_look_each_hit_up_by_its_key(tmp_path):
    """With a kind or time filter, each BM25 hit that could still rank is
    looked up by its rowid (no scan of the namespace), and the vector filter reads the namespace's
    kinds and times from the covering index alone (schema 9), never from the
    rows; without a filter the lookup is never planned into a scan."""
    with _fill(tmp_path / "a.db") as m:
        # the BM25 search asks about a memory by its seq, one at a time
        plan = _plan(m, "bm25_pass", (1,))
        assert plan == ["SEARCH memories USING INTEGER PRIMARY KEY (rowid=?)"], plan
        plan = _plan(m, "candidates", PARAMS[:5] + ('["fact"]', 1.0, None) + PARAMS[8:])
        assert GOOD in plan and not any(BAD in p for p in plan), plan
        # the vector cache applies the filters itself (csrc/embed.c); a row of a
        # kind past the 65,535th is looked up by its key
        allow = _plan(m, "allow", (5, None, None, None, None, '["fact"]', None, None))
        assert "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in allow, allow
        # a partition of the vector index is read through vector_parts_part
        part = _plan(m, "vpart", (1, "ns1"))
        assert "SEARCH p USING COVERING INDEX vector_parts_part (part=?)" in part, part


def test_a_candidates_place_and_neighbours_are_index_seeks(tmp_path):
    """Schema 10: whether a namespace has threads is one seek on the partial
    index memories_thread (a store without threads reads no row to learn it),
    each candidate's place is read by its rowid, and its neighbours are a
    range of memories_thread, never a scan of the namespace."""
    with _fill(tmp_path / "a.db") as m:
        m.add_many([{"text": f"turn {i}", "namespace": "ns1", "thread": f"t{i % 3}"}
                     for i in range(30)])
        plan = _plan(m, "threads", ("ns1",))
        assert any("USING COVERING INDEX memories_thread (namespace=?" in p for p in plan), plan
        plan = _plan(m, "place", ("[1, 2]",))
        assert "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
        plan = _plan(m, "neighbours", ("[1, 2]", 2, None, None, None, None, None, None))
        assert "SEARCH o USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
        assert any("USING INDEX memories_thread (namespace=? AND thread=? AND turn>? AND "
                   "turn<?)" in p for p in plan), plan
        assert not any(BAD in p or p.startswith("SCAN m") for p in plan), plan


def test_the_posting_cache_reads_lengths_in_seq_order_without_sorting(tmp_path):
    """The posting cache reads a namespace's lengths once, in seq order: a
    namespace alone in the file walks %_docsize by its key, another walks
    its own memories by memories_namespace and looks each length up by its
    key; neither sorts, on a store never closed or reopened.  Its kinds and
    times come from memories_filter alone."""
    m = _fill(tmp_path / "a.db")
    for _ in range(2):
        assert _plan(m, "bm25_lengths", ()) == ["SCAN memories_fts_docsize"]
        plan = _plan(m, "bm25_lengths_of", ("ns1",))
        assert plan == ["SEARCH m USING COVERING INDEX memories_namespace (namespace=?)",
                        "SEARCH d USING INTEGER PRIMARY KEY (rowid=?)"], plan
        assert _plan(m, "bm25_stamp", ()) == [
            "SEARCH memories_fts_data USING INTEGER PRIMARY KEY (rowid=?)"]
        # the kinds and times recall's filters ask, from the covering index alone
        assert _plan(m, "bm25_filters", ("ns1",)) == [
            "SEARCH memories USING COVERING INDEX memories_filter (namespace=?)"]
        m.close()
        m = heapmem.open(str(tmp_path / "a.db"))
    m.close()
