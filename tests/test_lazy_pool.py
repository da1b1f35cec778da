"""The pooled layer folded lazily (schema 10, issue 34): a feedback puts what
it adds to the pooled rows into one row of pool_pending, the eighth such row
folds them all into the pooled rows at once, and every reader applies the
pending rows meanwhile, so that recall, links(), stats(), check() and the
exports read what an eager fold would have written."""
import io
import json

import pytest

import heapmem
from heapmem.io import transfer
from heapmem.learning import links as learning

T = 1_700_000_000.0
TEXTS = ["Dentist appointment on Tuesday at 3pm", "Dentist coupons at https://d.example",
         "I would like a dentist I trust", "Dentist costs $90 a visit",
         "The dentist said floss twice a day", "Maya said the dentist moved on 2024-03-02"]
QUESTIONS = ["When is my dentist appointment?", "Who is my dentist?",
             "How much does the dentist cost?"]


def _pending(mem):
    return mem.connection.execute("SELECT count(*) FROM pool_pending").fetchall()[0][0]


def _pooled_table(mem):
    return mem.connection.execute(
        "SELECT feature, alpha, beta, n, support, low_rate, high_rate FROM links "
        "WHERE namespace = '*' ORDER BY feature").fetchall()


def _seen(mem, namespaces):
    """What every reader gives: each namespace's recalls (ids, scores and
    explain lines), its links() and the pooled layer's, stats, check."""
    out = []
    for ns in namespaces:
        for q in QUESTIONS:
            out.append([(r.id, r.score, r.usefulness, r.explain()) for r in
                        mem.recall(q, namespace=ns, k=6, track=False)])
        out.append(mem.links(ns))
    out.append(mem.links())
    st = mem.stats()
    out.append((st.pooled_features, st.link_rows))
    out.append(mem.check().ok)
    return out


@pytest.fixture
def mem(tmp_path):
    m = heapmem.open(str(tmp_path / "p.db"), clock=lambda: T, embedder=None)
    for i in range(7):  # enough namespaces for a pooled layer (5 at least)
        m.add_many([{"text": t, "namespace": f"t{i}", "id": f"t{i}-{j}",
                     "source": "user" if j % 2 else "maya"} for j, t in enumerate(TEXTS)])
    yield m
    m.close()


def _judge(mem, ns, q, used=0):
    res = mem.recall(q, namespace=ns, k=4)
    return mem.feedback(used=[res.ids[used % len(res.ids)]], recall_id=res.recall_id)


def test_a_batch_of_eight_feedbacks_folds_the_pooled_rows_once(mem):
    """Seven feedbacks leave the pooled rows as they were, each adding one
    pending row; the eighth folds all eight into them and leaves none."""
    for k in range(8):
        _judge(mem, f"t{k % 7}", QUESTIONS[k % 3], k)  # (the first creates the pooled rows)
    assert _pending(mem) == 0
    table = _pooled_table(mem)
    for k in range(7):
        _judge(mem, f"t{(k + 3) % 7}", QUESTIONS[(k + 1) % 3], k)
        assert _pending(mem) == k + 1 and _pooled_table(mem) == table
    _judge(mem, "t2", QUESTIONS[2])
    assert _pending(mem) == 0 and _pooled_table(mem) != table


def test_every_reader_sees_what_the_fold_writes_to_the_digit(mem, tmp_path):
    """With changes pending, recall (its scores and explain lines), links(),
    stats() and check() give exactly what they give once heap_fold_pool() has
    written them into the rows; heap_pool_now() is those rows."""
    names = [f"t{i}" for i in range(7)]
    for k in range(8 * 5 + 5):  # five batches folded, five feedbacks pending
        _judge(mem, names[k * 3 % 7], QUESTIONS[k % 3], k)
    assert _pending(mem) == 5
    now = json.loads(mem.connection.execute("SELECT heap_pool_now()").fetchall()[0][0])
    rows = learning.pooled_rows(mem.connection)
    before = _seen(mem, names)
    assert mem.connection.execute("SELECT heap_fold_pool()").fetchall() == [(5,)]
    assert _pending(mem) == 0 and mem.connection.execute(
        "SELECT heap_pool_now()").fetchall() == [("{}",)]
    assert _seen(mem, names) == before
    assert learning.pooled_rows(mem.connection) == rows
    table = {r[0]: list(r[1:]) for r in _pooled_table(mem)}
    assert now and all(table[f] == v for f, v in now.items())


def test_the_exports_carry_the_pending_changes(mem, tmp_path):
    """A full export and a links-only export of a store with changes pending
    hold what they hold once the changes are folded."""
    for k in range(11):
        _judge(mem, f"t{k % 7}", QUESTIONS[k % 3], k)
    assert _pending(mem) == 3
    got = []
    for fold in (False, True):
        if fold:
            mem.connection.execute("SELECT heap_fold_pool()")
        full, links = io.StringIO(), io.StringIO()
        transfer.export(mem, full)
        transfer.export_links(mem, links)
        got.append(([json.loads(x) for x in full.getvalue().splitlines()[1:]],
                    [json.loads(x) for x in links.getvalue().splitlines()[1:]]))
    assert got[0] == got[1]


def test_a_read_only_store_reads_the_pending_changes_too(mem, tmp_path):
    for k in range(11):
        _judge(mem, f"t{k % 7}", QUESTIONS[k % 3], k)
    mem.close()
    path = str(tmp_path / "p.db")
    with heapmem.open(path, clock=lambda: T, embedder=None, readonly=True) as ro:
        assert ro.check().ok
        seen = _seen(ro, ["t0", "t4"])
        with pytest.raises(Exception, match="read-only"):
            ro.connection.execute("SELECT heap_fold_pool()").fetchall()
    with heapmem.open(path, clock=lambda: T, embedder=None) as rw:
        rw.connection.execute("SELECT heap_fold_pool()")
        assert _seen(rw, ["t0", "t4"]) == seen


def test_a_damaged_pending_row_is_one_sentence(mem):
    for k in range(3):
        _judge(mem, f"t{k}", QUESTIONS[k], k)
    with mem.transaction() as c:
        c.execute("UPDATE pool_pending SET ops = x'0100' WHERE id = (SELECT max(id) FROM "
                  "pool_pending)")
    with pytest.raises(heapmem.HeapmemError, match="damaged"):
        mem.recall(QUESTIONS[0], namespace="t0")
    assert any("damaged" in p for p in mem.check().problems)


def test_a_pooled_row_heap_links_would_refuse_is_refused_by_recall_too(mem):
    """Recall builds its link set in C (hr_link_set), not through heap_links;
    a pooled row whose feature name is not UTF-8 is damage to both."""
    for k in range(3):
        _judge(mem, f"t{k}", QUESTIONS[k], k)
    with mem.transaction() as c:
        c.execute("INSERT INTO links(namespace, feature, qtype, alpha, beta, n, support) "
                  "VALUES ('*', CAST(x'6b696e643aff' AS TEXT), '', 1, 1, 1, 5)")
        with pytest.raises(Exception, match="UTF-8"):
            c.execute("SELECT heap_links(feature, alpha, beta, alpha, beta) FROM links "
                      "WHERE namespace = '*'").fetchall()
    with pytest.raises(heapmem.HeapmemError, match="damaged"):
        mem.recall(QUESTIONS[0], namespace="t0")
