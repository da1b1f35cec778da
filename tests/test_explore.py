"""Exploration (ScoringConfig.explore, issue 24): damped Thompson sampling of
the learned links, in tracked recalls only: off by default, never in an
untracked recall, seeded by the recall's inputs, bounded, and the same from
Python and from raw SQL."""
import math
import shutil
import subprocess

import apsw
import numpy as np
import pytest

import heapmem
from heapmem.db import native

NS = "user:maya"
T = 1_700_000_000.0
Q = "When is my dentist appointment?"
# BM25 puts the user's own memory (one of the question's terms) last
TEXTS = [("The dentist appointment is Monday at 10am", "tool"),
         ("Dentist appointment: Friday at 9am", "web"),
         ("I think the dentist appointment is Thursday", "assistant"),
         ("Reminder about the dentist appointment on Wednesday", "tool"),
         ("The dentist moved it to Tuesday at 3pm", "user")]
EXPLORE = heapmem.ScoringConfig(explore=2)


def _store(path):
    m = heapmem.open(str(path), clock=lambda: T, embedder=None)
    m.add_many([{"text": t, "source": s, "id": f"m{i}", "namespace": NS}
                for i, (t, s) in enumerate(TEXTS)])
    return m


@pytest.fixture
def mem(tmp_path):
    m = _store(tmp_path / "a.db")
    yield m
    m.close()


def _learn(m, n=3):
    """Some evidence: the first memory shown, used, n times (the others ignored)."""
    for _ in range(n):
        r = m.recall(Q, namespace=NS, k=3)
        m.feedback(used=[r.ids[0]], recall_id=r.recall_id)


def _rows(c, config, track, tracked=None):
    return c.execute('SELECT id, score, usefulness, explore, "explain" FROM heap_recall('
                     "?, ?, 3, ?, ?, ?, NULL, ?)", (Q, NS, T, config, track, tracked)).fetchall()


def _recalls(m):
    return m.connection.execute("SELECT count(*) FROM recalls").fetchall()[0][0]


def test_off_by_default_ranks_as_without_the_key(mem):
    _learn(mem)
    assert heapmem.ScoringConfig().explore == 0.0
    c = mem.connection
    full = heapmem.ScoringConfig().to_sql()
    without = " ".join(kv for kv in full.split() if not kv.startswith("explore="))
    assert "explore=0.0" in full and "explore" not in without
    # bit-equal scores, with the key at 0 and without it, tracked or not
    assert _rows(c, full, 0, 1) == _rows(c, without, 0, 1) == _rows(c, without, 0)
    tracked = mem.recall(Q, namespace=NS, k=3)
    untracked = mem.recall(Q, namespace=NS, k=3, track=False)
    assert [(r.id, r.score) for r in tracked] == [(r.id, r.score) for r in untracked]
    assert all(r.explore == 1.0 and "x explore" not in r.explain() for r in tracked)


def test_never_applied_in_an_untracked_recall(mem):
    _learn(mem)
    c = mem.connection
    off = [(r.id, r.score, r.usefulness) for r in mem.recall(Q, namespace=NS, k=3, track=False)]
    for _ in range(5):
        on = mem.recall(Q, namespace=NS, k=3, track=False, config=EXPLORE)
        assert [(r.id, r.score, r.usefulness) for r in on] == off
        assert all(r.explore == 1.0 for r in on)
    before = _recalls(mem)
    sql_off = _rows(c, heapmem.ScoringConfig().to_sql(), 0)
    assert _rows(c, EXPLORE.to_sql(), 0) == _rows(c, EXPLORE.to_sql(), 0, 0) == sql_off
    assert [(i, s, u) for i, s, u, _, _ in sql_off] == off
    assert _recalls(mem) == before
    # a read-only store tracks nothing, so explores nothing
    mem.close()
    ro = heapmem.open(mem.path, readonly=True, clock=lambda: T, embedder=None)
    got = ro.recall(Q, namespace=NS, k=3, config=EXPLORE)
    assert [(r.id, r.score, r.usefulness) for r in got] == off and got.recall_id is None
    ro.close()


def test_the_same_inputs_draw_the_same_ranking(tmp_path):
    a, b = _store(tmp_path / "a.db"), _store(tmp_path / "b.db")
    for m in (a, b):
        _learn(m, 2)
    runs = [[(r.id, r.score, r.explore) for _ in range(6)
             for r in m.recall(Q, namespace=NS, k=3, config=EXPLORE)] for m in (a, b)]
    assert runs[0] == runs[1]
    # the same recall asked twice, unlogged in between: the same draw
    assert _rows(a.connection, EXPLORE.to_sql(), 0, 1) == _rows(a.connection, EXPLORE.to_sql(),
                                                                 0, 1)
    # and each logged recall draws anew (how many recalls were logged seeds it)
    drawn = {tuple(r.explore for r in a.recall(Q, namespace=NS, k=5, config=EXPLORE))
             for _ in range(4)}
    assert len(drawn) > 1
    a.close()
    b.close()


def test_it_moves_rankings_when_links_are_uncertain(mem):
    plain = mem.recall(Q, namespace=NS, k=3, track=False).ids
    assert "m4" not in plain  # BM25 alone never shows the user's own memory
    shown, moved = set(), []
    for _ in range(30):
        r = mem.recall(Q, namespace=NS, k=3, config=EXPLORE)
        shown |= set(r.ids)
        moved += [x for x in r if x.explore != 1.0]
    assert "m4" in shown
    x = moved[0]
    assert x.explain().endswith(f" x explore {x.explore:.2f}")
    # heap_recall's explain column says the same as Result.explain()
    for _id, _score, _use, factor, line in _rows(mem.connection, EXPLORE.to_sql(), 0, 1):
        if factor != 1.0:
            assert line.endswith(f" x explore {factor:.2f}")
    # the usefulness reported is the learned one; the score carries the draw
    r = mem.recall(Q, namespace=NS, k=5, config=EXPLORE)
    untracked = {x.id: x for x in mem.recall(Q, namespace=NS, k=5, track=False)}
    for x in r:
        assert x.usefulness == untracked[x.id].usefulness
        assert math.isclose(x.score, untracked[x.id].score * x.explore, rel_tol=1e-12)


def _link_set(rows):
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    blob = c.execute("SELECT heap_links(f, a, b, a, b, 1e9) FROM (SELECT column1 AS f, "
                     "column2 AS a, column3 AS b FROM (VALUES " +
                     ", ".join("(?, ?, ?)" for _ in rows) + "))",
                     [v for r in rows for v in r]).fetchall()[0][0]
    c.close()
    return bytes(blob)


def test_exploration_fades_as_evidence_grows_and_stays_bounded():
    feats = ["kind:fact src:user len:m", "kind:fact src:tool len:m", "kind:fact src:web len:s"]
    ages = [3.0, 3.0, 3.0]
    names = ["base", "kind:fact", "src:user", "src:tool", "src:web", "len:m", "len:s"]

    def spread(links, e, max_lift=3.0):
        cfg = heapmem.ScoringConfig(explore=e, max_lift=max_lift).cdata
        f = np.array([native.explore(feats, ages, "other", links, cfg, s) for s in range(300)])
        assert np.isfinite(f).all() and (f > 0).all()
        # the explored lift (the lift is 1 here: no link past its gate) within max_lift
        assert (f <= max_lift + 1e-12).all() and (f >= 1 / max_lift - 1e-12).all()
        return np.log(f).std()

    little = _link_set([(n, 2.0, 4.0) for n in names])
    much = _link_set([(n, 2000.0, 4000.0) for n in names])
    assert spread(much, 1.0) < spread(little, 1.0) / 5
    assert spread(little, 0.5) < spread(little, 1.0) < spread(little, 4.0)
    assert spread(b"", 4.0, max_lift=1.5) > 0  # no evidence at all, a tight bound
    off = heapmem.ScoringConfig().cdata
    assert list(native.explore(feats, ages, "other", little, off, 7)) == [1.0, 1.0, 1.0]


def test_a_draw_never_pushes_ctx_1_below_one():
    """ctx:1 only lifts (tests/test_context.py): no Thompson draw of its
    posterior puts a memory with a record below its twin without one, where
    the link sits at the base rate (its draws spread either side) or far
    below it (lift-only, so it counts at the base rate unexplored)."""
    names = ["base", "kind:fact", "src:user", "len:m"]
    twins = ["kind:fact src:user len:m ctx:1", "kind:fact src:user len:m"]
    cfg = heapmem.ScoringConfig(explore=4).cdata
    for ctx in ((30.0, 70.0), (0.0, 1000.0)):
        links = _link_set([(n, 30.0, 70.0) for n in names] + [("ctx:1",) + ctx])
        f = np.array([native.explore(twins, [3.0, 3.0], "other", links, cfg, s)
                      for s in range(200)])
        assert (f[:, 0] >= f[:, 1] - 1e-12).all()
        assert (f[:, 0] > f[:, 1] + 1e-3).any() or ctx[0] == 0  # draws above still lift


def test_the_sampler_is_a_seeded_beta():
    for a, b in ((0.1, 9.9), (2.5, 7.5), (1.0, 1.0), (300.0, 700.0)):
        x = native.beta_samples(a, b, 42, 20000)
        assert ((x >= 0) & (x <= 1)).all()
        assert abs(x.mean() - a / (a + b)) < 0.01
        assert abs(x.var() - a * b / ((a + b) ** 2 * (a + b + 1))) < 0.1 * x.var() + 1e-4
    assert (native.beta_samples(2, 3, 9, 50) == native.beta_samples(2, 3, 9, 50)).all()
    assert (native.beta_samples(2, 3, 9, 50) != native.beta_samples(2, 3, 10, 50)).any()
    tiny = native.beta_samples(1e-300, 1e300, 1, 100)
    assert np.isfinite(tiny).all() and ((tiny >= 0) & (tiny <= 1)).all()
    for a, b in ((0, 1), (-1, 1), (math.nan, 1), (math.inf, 1)):
        with pytest.raises(ValueError, match="positive finite"):
            native.beta_samples(a, b, 1, 3)


@pytest.mark.parametrize("bad", [-0.5, 4.5, math.nan, math.inf])
def test_a_bad_value_is_refused_and_nothing_written(mem, bad):
    with pytest.raises(ValueError, match=r"explore must be a number from 0 \(off\) to 4"):
        heapmem.ScoringConfig(explore=bad)
    with pytest.raises(ValueError, match="explore must be"):
        mem.set_config(explore=bad, save=True)
    assert mem.config.explore == 0.0
    before = _recalls(mem)
    with pytest.raises(apsw.SQLError, match=r"heap_recall: explore must be a number from 0"):
        _rows(mem.connection, f"explore={bad!r}", 1)
    assert _recalls(mem) == before
    with heapmem.open(mem.path, clock=lambda: T, embedder=None) as again:
        assert again.config.explore == 0.0


def test_text_and_bad_arguments_are_refused(mem):
    with pytest.raises(TypeError, match="ScoringConfig.explore must be a number, got str"):
        heapmem.ScoringConfig(explore="0.5")
    before = _recalls(mem)
    with pytest.raises(apsw.SQLError, match="config value of 'explore' is not a number"):
        _rows(mem.connection, "explore=lots", 1)
    with pytest.raises(apsw.SQLError, match="heap_recall: tracked must be 0 or 1"):
        _rows(mem.connection, "explore=1", 0, 2)
    assert _recalls(mem) == before


def _raw(path):
    c = apsw.Connection(str(path))
    heapmem.load(c)
    return c


def test_raw_sql_explores_its_tracked_recalls_as_python_does(tmp_path):
    a, b = _store(tmp_path / "a.db"), _store(tmp_path / "b.db")
    for m in (a, b):
        _learn(m, 2)
    b.close()
    c = _raw(tmp_path / "b.db")
    for _ in range(5):
        py = a.recall(Q, namespace=NS, k=3, config=EXPLORE)
        sql = c.execute("SELECT id, score, explore, recall_id FROM heap_recall(?, ?, 3, ?, ?, 1)",
                        (Q, NS, T, EXPLORE.to_sql())).fetchall()
        assert [(r.id, r.score, r.explore, py.recall_id) for r in py] == sql
    c.close()
    # the store's saved config reaches heap_recall without a config argument
    a.set_config(explore=2.0, save=True)
    a.close()
    c = _raw(tmp_path / "a.db")
    q = "SELECT count(*) FROM heap_recall(?, ?, 3, ?, NULL, ?) WHERE explore != 1"
    assert c.execute(q, (Q, NS, T, 0)).fetchall() == [(0,)]
    assert c.execute(q, (Q, NS, T, 1)).fetchall()[0][0] > 0
    c.close()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_the_sqlite3_shell_explores_a_tracked_recall(tmp_path):
    m = _store(tmp_path / "s.db")
    m.close()
    sql = ("SELECT count(*) > 0 FROM (SELECT 1 FROM heap_recall('When is my dentist "
           f"appointment?', '{NS}', 5, {T}, 'explore=4', 1) WHERE explore != 1.0 AND "
           "\"explain\" LIKE '% x explore %');\n"
           f"SELECT count(*) FROM heap_recall('When is my dentist appointment?', '{NS}', 5, {T}, "
           "'explore=4', 0) WHERE explore != 1.0;\n"
           "SELECT count(*) FROM recalls;\n")
    out = subprocess.run(["sqlite3", str(tmp_path / "s.db"), "-cmd",
                          f".load {heapmem.loadable_path()}"], input=sql, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "0", "1"]
