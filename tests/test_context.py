"""Contextual utility (ScoringConfig.w_context, issue 24): a memory's own
record of being used for similar questions lifts it, only past its gate and
the store's (the ctx:1 feature's link), only for similar questions, never as
a penalty, and the record goes with the memory and with the recall that
judged it."""
import json

import apsw
import pytest

import heapmem
from heapmem.db import native
from heapmem.io import transfer

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
    assert one.context == 1.0 and "ctx:1" in one.features
    _teach(mem, 5)
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


def test_a_record_shows_ctx_1_and_feedback_credits_it(mem):
    """A memory judged used for a question shows ctx:1 to a question like it
    (and only to one like it); the feedback on that recall credits ctx:1 like
    any feature, and that link is the store's gate."""
    _teach(mem, 1)
    got = _by_id(mem, "What did Melanie paint last week by the lake?")
    assert "ctx:1" in got["t0"].features
    assert not any("ctx:1" in r.features for i, r in got.items() if i != "t0")
    far = _by_id(mem, "Where is the support group held?", config=heapmem.ScoringConfig(
        min_cosine=-1))
    assert not any("ctx:1" in r.features for r in far.values())
    assert "ctx:1" not in {ln.feature for ln in mem.links(NS)}
    _teach(mem, 5)
    ctx = {ln.feature: ln for ln in mem.links(NS)}["ctx:1"]
    assert (ctx.alpha, ctx.beta, ctx.n) == (5.0, 0.0, 5)  # used all five times it showed
    # the gate: held while ctx:1 had four judgements, open at five
    with heapmem.open(mem.path, clock=lambda: T) as m2:
        assert m2.recall(Q, namespace=NS, k=4, track=False)[0].context > 1.0


def test_the_store_gate_holds_while_ctx_1_cannot_beat_chance(mem):
    """Four judgements of ctx:1 cannot beat the prior's weight: t0's own
    record is as strong as at six, yet nothing is lifted until the link
    passes."""
    _teach(mem, 5)
    assert {ln.feature: ln for ln in mem.links(NS)}["ctx:1"].alpha == 4.0
    got = _by_id(mem, Q)["t0"]
    assert got.context == 1.0 and got.context_n > 3 and "x context" not in got.explain()


def test_ctx_1_lifts_and_never_pushes_down(mem, tmp_path):
    """A prior that says memories with a record are used far less often
    than the rest (ctx:1 at 0 of 1,000 against a base rate of 0.3) moves
    nothing down: like contextual utility itself, ctx:1 is a boost only."""
    rows = [{"feature": "base", "qtype": "", "alpha": 300.0, "beta": 700.0, "n": 1000},
            {"feature": "ctx:1", "qtype": "", "alpha": 0.0, "beta": 1000.0, "n": 1000}]
    path = tmp_path / "prior.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in
                              [{"heapmem": "links", "format": 1, "count": 2}] + rows) + "\n")
    transfer.import_file(mem, str(path))
    _teach(mem, 1)
    got = _by_id(mem, Q)["t0"]
    assert "ctx:1" in got.features and "ctx:1 x" not in got.explain()
    plain = _by_id(mem, Q, config=heapmem.ScoringConfig(w_context=0))["t0"]
    assert "ctx:1" not in plain.features
    assert got.usefulness == plain.usefulness and got.score == plain.score


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
    _teach(m, 6)
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


def test_a_connection_that_kept_the_questions_vectors_ranks_as_a_new_one(mem, tmp_path):
    """heap_recall keeps each logged question's vector per connection: a
    connection that has seen the questions (and texts that share a slot of
    its cache) gives what a fresh one gives, to the digit."""
    _teach(mem, 6)
    _teach(mem, 2, used="t1", q="Did Melanie paint the kitchen green?")
    qs = [Q, "What did Melanie paint last week by the lake?", "Did Melanie paint anything?"]
    warm = [[(r.id, r.score, r.context, r.context_n) for r in mem.recall(
        q, namespace=NS, k=4, track=False)] for q in qs * 3]
    with heapmem.open(mem.path, clock=lambda: T) as fresh:
        cold = [[(r.id, r.score, r.context, r.context_n) for r in fresh.recall(
            q, namespace=NS, k=4, track=False)] for q in qs * 3]
    assert warm == cold and any(c > 1.0 for row in warm for _, _, c, _ in row)


def _one_set(n, sets=1024):
    """n questions of one length, of words the model knows, whose texts fall
    in one set of heap_recall's cache of logged questions' vectors
    (csrc/recall.c: hm_fnv64 of the text, native.fnv64 here, modulo HR_QSETS
    sets)."""
    words = ["lake", "barn", "boat", "tree", "door", "wall", "bird", "road", "hill", "moon",
             "star", "fish", "cake", "kite", "ship", "farm"]
    by_set = {}
    for a in words:
        for b in words:
            for c in words:
                q = f"Did Melanie paint the {a} {b} {c}?"
                at = by_set.setdefault(native.fnv64(q) % sets, [])
                at.append(q)
                if len(at) == n:
                    return at
    raise AssertionError("no set holds enough questions")


def test_questions_that_share_a_set_of_the_cache_get_their_own_vectors(mem):
    """More questions than a set of the cache has entries, all of one length:
    each recall needs all of their vectors, so the set evicts and re-embeds
    within a recall, and every vector it returns is its own question's: each
    memory's context_n (its judgements, weighted by how close their questions
    are) is what the questions' own vectors give (to float32's precision:
    the recall's own question vector is normalized once more)."""
    qs = _one_set(7)
    for i, q in enumerate(qs):
        _teach(mem, 1, used=f"t{i % 2}", q=q)
    lo = heapmem.ScoringConfig().context_min_sim
    vs = dict(zip(qs, native.embed(qs).astype(float)))
    judged = mem.connection.execute(
        "SELECT m.id, r.query FROM judged AS j JOIN recalls AS r ON r.id = j.recall_id "
        "JOIN memories AS m ON m.seq = j.seq ORDER BY r.id, m.id").fetchall()
    for _ in range(2):
        for q in qs:
            sims = {p: float(vs[p] @ vs[q]) for p in qs}
            assert len({round(s, 6) for s in sims.values()}) > 2  # the vectors differ
            got = mem.recall(q, namespace=NS, k=4, track=False)
            assert len(got) >= 3
            for r in got:
                want = sum((sims[p] - lo) / (1 - lo) for i, p in judged
                           if i == r.id and sims[p] > lo)
                assert want > 0 and abs(r.context_n - want) < 1e-5, (q, r.id, r.context_n, want)


def test_a_memory_record_is_its_latest_judgements(mem):
    """Contextual utility reads a candidate's 32 latest judgements, so that a
    recall costs the same after a memory's thousandth feedback as after its
    fortieth (csrc/recall.c HR_CTX_RECENT): t0, judged used for 40 different
    questions, has the weight of the last 32 as its context_n, not of all 40
    (the first eight are as alike the probe as the rest)."""
    qs = _one_set(40, sets=1)  # any 40 distinct questions of one length
    for q in qs:
        _teach(mem, 1, used="t0", q=q)
    lo = heapmem.ScoringConfig().context_min_sim
    probe = qs[0]
    vs = dict(zip(qs, native.embed(qs).astype(float)))
    sims = [float(vs[p] @ vs[probe]) for p in qs]
    weight = [(s - lo) / (1 - lo) if s > lo else 0.0 for s in sims]
    assert sum(weight[:8]) > 1e-3  # the eight dropped ones weigh something
    got = _by_id(mem, probe)["t0"].context_n
    assert abs(got - sum(weight[8:])) < 1e-5, (got, sum(weight[8:]), sum(weight))
    judged = mem.connection.execute("SELECT count(*) FROM judged WHERE seq = 1").fetchall()
    assert judged[0][0] == 40  # the record is kept whole; recall reads its window


def test_a_recall_numbered_0_by_hand_still_counts(mem):
    """A recall whose id was set to 0 by hand (heapmem numbers them from 1;
    recall's memo of cosines marks its empty slots with 0) is read like any
    other: t0's record is the same before and after."""
    _teach(mem, 1)
    before = _by_id(mem, Q)["t0"].context_n
    c = mem.connection
    rid = c.execute("SELECT max(id) FROM recalls").fetchall()[0][0]
    c.execute("UPDATE recalls SET id = 0 WHERE id = ?", (rid,))
    c.execute("UPDATE judged SET recall_id = 0 WHERE recall_id = ?", (rid,))
    assert before > 0.5 and _by_id(mem, Q)["t0"].context_n == before
