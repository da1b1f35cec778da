"""Contextual utility (ScoringConfig.w_context, issue 24): a memory's own
record of being used for similar questions lifts it, only past its gate,
only for similar questions, never as a penalty, and the record goes with the
memory and with the recall that judged it."""
import apsw
import pytest

import heapmem

NS = "user:caroline"
T = 1_700_000_000.0
Q = "What did Melanie paint last week?"
TEXTS = ["Melanie painted a sunrise over the lake last week",
         "Melanie painted her kitchen a pale green",
         "Caroline went to the support group on Tuesday",
         "Melanie ran a charity race for mental health"]


@pytest.fixture
def mem(tmp_path):
    m = heapmem.open(str(tmp_path / "a.db"), clock=lambda: T)
    m.add_many([{"text": t, "id": f"t{i}", "namespace": NS} for i, t in enumerate(TEXTS)])
    yield m
    m.close()


def _teach(m, n, used="t0", q=Q):
    for _ in range(n):
        r = m.recall(q, namespace=NS, k=4)
        m.feedback(used=[used], recall_id=r.recall_id)


def _by_id(m, q, **kw):
    return {r.id: r for r in m.recall(q, namespace=NS, k=4, track=False, **kw)}


def test_no_record_no_lift(mem):
    assert all(r.context == 1.0 and r.context_n == 0.0 for r in _by_id(mem, Q).values())


def test_a_memory_used_for_similar_questions_is_lifted_past_its_gate(mem):
    _teach(mem, 1)
    one = _by_id(mem, Q)["t0"]
    assert one.context_n > 0  # a record, not yet past the gate
    _teach(mem, 3)
    got = _by_id(mem, "What did Melanie paint last week by the lake?")
    assert got["t0"].context > 1.0 and "x context" in got["t0"].explain()
    # heap_recall's own explain says the same
    line = mem.connection.execute(
        'SELECT "explain", context FROM heap_recall(?, ?, 4, ?, NULL, 0) WHERE id = \'t0\'',
        ("What did Melanie paint last week by the lake?", NS, T)).fetchall()[0]
    assert line[0] == got["t0"].explain() and line[1] == got["t0"].context
    # an unrelated question finds no similar record: no lift
    other = _by_id(mem, "Where is the support group held?", config=heapmem.ScoringConfig(
        min_cosine=-1))
    assert other["t0"].context == 1.0
    # and w_context=0 switches it off
    off = _by_id(mem, Q, config=heapmem.ScoringConfig(w_context=0))
    assert off["t0"].context == 1.0


def test_being_ignored_is_no_penalty(mem):
    _teach(mem, 6, used="t2")  # t0 is shown and ignored six times
    assert _by_id(mem, Q)["t0"].context == 1.0


def test_the_record_goes_with_the_memory_and_the_recall(mem):
    _teach(mem, 4)
    c = mem.connection
    assert c.execute("SELECT count(*) FROM judged WHERE seq = 1").fetchall()[0][0] == 4
    mem.forget(["t1"])  # the recalls that showed t1 go, and what they judged with them
    assert c.execute("SELECT count(*) FROM judged").fetchall()[0][0] == 0
    assert _by_id(mem, Q)["t0"].context == 1.0


def test_a_lexical_store_has_context_too(tmp_path):
    """A store without vectors (embedder=None) compares questions with the
    library's own model all the same: the same lift past the same gate, and
    none for an unrelated question or with w_context=0."""
    m = heapmem.open(str(tmp_path / "l.db"), clock=lambda: T, embedder=None)
    m.add_many([{"text": t, "id": f"t{i}", "namespace": NS} for i, t in enumerate(TEXTS)])
    assert m.connection.execute("SELECT count(*) FROM vectors").fetchall()[0][0] == 0
    _teach(m, 5)
    got = _by_id(m, "What did Melanie paint last week by the lake?")
    assert got["t0"].context > 1.0 and "x context" in got["t0"].explain()
    assert all(r.context == 1.0 for r in _by_id(m, "Where is the support group held?").values())
    off = _by_id(m, Q, config=heapmem.ScoringConfig(w_context=0))
    assert all(r.context == 1.0 for r in off.values())
    m.close()
    m.close()


def test_bad_context_settings_are_refused(mem):
    for kw in ({"w_context": -1}, {"context_min_sim": 2}, {"context_z": 11},
               {"context_prior": 0}):
        with pytest.raises(ValueError):
            heapmem.ScoringConfig(**kw)
    with pytest.raises(apsw.SQLError, match="context_min_sim"):
        mem.connection.execute("SELECT * FROM heap_recall(?, ?, 4, ?, 'context_min_sim=2', 0)",
                               (Q, NS, T)).fetchall()
