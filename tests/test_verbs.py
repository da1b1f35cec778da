"""Memory's verbs that the adapters (LangGraph, MCP, CLI, transfer, tune) use
instead of reaching into the store: update, list, stats, links, set_config,
logged_recall, judged_recalls, events, transaction and snapshot."""
from __future__ import annotations

import threading

import apsw
import numpy as np
import pytest

import heapmem
import heapmem.db.schema
from heapmem import ScoringConfig
from heapmem.db import native

NS = "user:maya"


@pytest.fixture
def mem(tmp_path):
    m = heapmem.open(str(tmp_path / "v.db"), clock=lambda: 1_741_910_400)
    m.add_many([
        {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am", "namespace": NS,
         "id": "booking"},
        {"text": "Lisbon! I'd love to visit Lisbon someday", "kind": "preference",
         "namespace": NS, "id": "wish", "created_at": 1_741_000_000},
        {"text": "Flights to Lisbon from SFO cost around $700 in spring", "kind": "tool_result",
         "source": "tool", "namespace": NS, "id": "quote", "created_at": 1_740_000_000},
        {"text": "Tokyo in spring has cherry blossoms", "namespace": "user:ken", "id": "ken1"},
    ])
    yield m
    m.close()


def test_update_keeps_the_index_the_statistics_and_the_features_consistent(mem):
    before = mem.stats().namespace(NS)
    it = mem.update("booking", text="Flight moved: SFO to LIS now departs March 15, 7:05am")
    assert it.id == "booking" and it.namespace == NS and it.created_at == 1_741_910_400
    assert it.text.startswith("Flight moved") and mem.get("booking") == it
    # the FTS index follows: the new words find it, the old ones no longer do
    lexical = heapmem.ScoringConfig(lexical_weight=1.0)
    assert "booking" in mem.recall("When does it depart? 7:05am", namespace=NS,
                                   config=lexical).ids
    assert "booking" not in mem.recall("9:40am booked", namespace=NS, config=lexical).ids
    # and so does its vector (the default embedder): the new text's, not the old one's
    v = mem.connection.execute("SELECT v.v FROM vectors AS v JOIN memories AS m USING (seq) "
                               "WHERE m.id = 'booking'").fetchall()[0][0]
    assert v == mem.connection.execute("SELECT heap_embed(?)", (it.text,)).fetchall()[0][0]
    # features follow the text, and so do the namespace's statistics
    assert it.features == tuple(native.features(it.text, "fact", None).split())
    assert mem.stats().namespace(NS).memories == before.memories
    assert mem.check().ok, mem.check().problems


def test_update_changes_only_the_fields_given(mem):
    it = mem.update("quote", importance=2.5, metadata={"currency": "USD"})
    assert (it.text, it.kind, it.source, it.importance, it.metadata) == (
        "Flights to Lisbon from SFO cost around $700 in spring", "tool_result", "tool", 2.5,
        {"currency": "USD"})
    it = mem.update("quote", source=None, key="price")
    assert (it.source, it.key, it.importance, it.metadata) == (None, "price", 2.5,
                                                               {"currency": "USD"})
    # a kind change brings the kind's default importance, unless one was set
    assert mem.update("wish", kind="fact").importance == 1.0
    assert mem.check().ok


@pytest.mark.parametrize("kwargs, err", [
    ({"text": ""}, ValueError), ({"text": 7}, TypeError), ({"importance": -1}, ValueError),
    ({"metadata": "x"}, TypeError), ({"kind": ""}, ValueError)])
def test_update_refuses_bad_values_and_writes_nothing(mem, kwargs, err):
    before = mem.get("booking")
    with pytest.raises(err):
        mem.update("booking", **kwargs)
    assert mem.get("booking") == before and mem.check().ok


def test_update_of_an_unknown_id_is_a_clear_error(mem):
    with pytest.raises(ValueError, match="unknown memory id 'nope'; nothing was updated"):
        mem.update("nope", text="x")


def test_update_re_embeds_the_memory(tmp_path):
    class Toy:
        name = "toy-2d"

        def __call__(self, texts):
            return np.array([[1.0, float("LIS" in t)] for t in texts])

    with heapmem.open(str(tmp_path / "e.db"), embedder=Toy()) as m:
        m.add("nothing about it", id="a")
        m.update("a", text="SFO to LIS")
        v = m.connection.execute("SELECT v FROM vectors").fetchall()[0][0]
        assert np.frombuffer(v, dtype=np.float32) == pytest.approx([0.7071068, 0.7071068])


def test_list_is_newest_first_with_limit_and_offset(mem):
    assert [i.id for i in mem.list(NS)] == ["booking", "wish", "quote"]
    assert [i.id for i in mem.list(NS, limit=1, offset=1)] == ["wish"]
    assert mem.list("nobody") == []
    with pytest.raises(ValueError, match="limit must be an integer >= 0"):
        mem.list(NS, limit=-1)


def test_stats_counts_what_the_store_holds(mem):
    res = mem.recall("When is my flight to Lisbon?", namespace=NS)
    mem.feedback(used=["booking"], recall_id=res.recall_id)
    st = mem.stats()
    assert (st.memories, st.namespaces, st.recalls, st.events, st.used) == (4, 2, 1, 3, 1)
    assert st.ignored == 2 and st.pooled_features == len(mem.links())
    assert st.schema == heapmem.db.schema.SCHEMA_VERSION
    assert st.namespace(NS).memories == 3 and st.namespace("nobody").memories == 0


def test_links_is_one_verb_with_no_second_name(mem):
    res = mem.recall("When is my flight to Lisbon?", namespace=NS)
    mem.feedback(used=["booking"], recall_id=res.recall_id)
    assert mem.links() != [] and mem.links(NS) != []
    assert not hasattr(mem, "explain_usefulness")  # links() under its older name: gone


def test_set_config_changes_and_optionally_saves(mem, tmp_path):
    cfg = mem.set_config(w_usefulness=0.5)
    assert cfg.w_usefulness == 0.5 and mem.config == cfg
    with heapmem.open(mem.path) as other:
        assert other.config == ScoringConfig()  # not saved
    mem.set_config(w_usefulness=0.7, save=True)
    with heapmem.open(mem.path) as other:
        assert other.config.w_usefulness == 0.7
    with pytest.raises(TypeError, match="unexpected keyword|got an unexpected"):
        mem.set_config(no_such_knob=1)
    with pytest.raises(ValueError):
        mem.set_config(w_usefulness=-1)
    assert mem.config.w_usefulness == 0.7


def test_the_logs_as_tune_reads_them(mem):
    res = mem.recall("When is my flight to Lisbon?", namespace=NS)
    mem.feedback(used=["booking"], recall_id=res.recall_id)
    r = mem.log.get(res.recall_id)
    assert r.namespace == NS and r.shown == tuple(res.ids) and len(r.rest) == len(res)
    # the logged score without usefulness is the C core's, and recall's score is it
    # times usefulness^w_usefulness
    for x, rest in zip(res, r.rest):
        assert x.score == pytest.approx(rest * x.usefulness ** mem.config.w_usefulness, rel=1e-12)
    assert mem.log.get(10 ** 30) is None and mem.log.get(999) is None
    assert [j.id for j in mem.log.judged()] == [res.recall_id]
    ev = mem.log.events()
    assert [(e.recall_id, e.used) for e in ev] == [(res.recall_id, True)] + [
        (res.recall_id, False)] * (len(res) - 1)
    assert all(d[0] and d[1] + d[2] == 1 for e in ev for d in e.deltas)


def test_a_failed_commit_leaves_no_transaction_open(mem, tmp_path):
    """A COMMIT that fails (here a deferred foreign key) rolls back: the
    connection is not left inside the transaction holding the write lock."""
    with pytest.raises(apsw.ConstraintError):
        with mem.transaction() as c:
            c.execute("PRAGMA defer_foreign_keys=ON")
            c.execute("INSERT INTO vectors(seq, v) VALUES (99999, x'00000000')")
    assert mem.connection.getautocommit()
    mem.add("still writable", namespace=NS, id="after")
    with heapmem.open(mem.path) as other:  # and the write lock was released
        other.add("another writer", namespace=NS, id="other")
    assert mem.get("other") is not None
    assert mem.connection.execute("SELECT count(*) FROM vectors WHERE seq = 99999"
                                  ).fetchall()[0][0] == 0


def test_snapshot_is_a_read_transaction(mem):
    with mem.snapshot() as c:
        n = c.execute("SELECT count(*) FROM memories").fetchall()[0][0]
        with heapmem.open(mem.path) as other:
            other.add("added meanwhile", namespace=NS)
        assert c.execute("SELECT count(*) FROM memories").fetchall()[0][0] == n
    assert mem.count == n + 1


def test_tune_and_embedder_name_take_the_lock(mem):
    """Threads sharing a Memory: tune() and embedder_name read the connection
    under the store's lock (without it apsw raises ThreadingViolationError)."""
    errors = []

    def hammer(fn):
        try:
            for _ in range(30):
                fn()
        except Exception as e:  # pragma: no cover - the failure being tested
            errors.append(e)

    jobs = [lambda: mem.tune(deploy=False), lambda: mem.vectors.embedder_name,
            lambda: mem.recall("flight to Lisbon", namespace=NS, track=False),
            lambda: mem.stats()]
    threads = [threading.Thread(target=hammer, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_result_as_data_is_every_field_and_its_explain_line(mem, tmp_path):
    """issue 37: Result.to_dict() is what every door gives out (the CLI's
    --json, the tool doors, the framework adapters): every public field,
    features as a list, and explain(); or the fields named, in that order."""
    import io
    import json
    from dataclasses import fields

    from heapmem.adapters import cli

    res = mem.recall("When is my flight to Lisbon?", namespace=NS, track=False)
    r = res[0]
    d = r.to_dict()
    public = [f.name for f in fields(heapmem.Result) if not f.name.startswith("_")]
    assert list(d) == public + ["explain"]
    assert d["features"] == list(r.features) and d["explain"] == r.explain()
    assert json.loads(json.dumps(d)) == d
    assert list(r.to_dict(("explain", "id"))) == ["explain", "id"]
    with pytest.raises(ValueError, match="no field 'secret'"):
        r.to_dict(("id", "secret"))
    # the CLI's --json recall is the same data as Python's, field for field
    out = io.StringIO()
    assert cli.main(["--db", mem.path, "--json", "-n", NS, "recall", "--no-track",
                     "When is my flight to Lisbon?"], clock=lambda: 1_741_910_400,
                    stdout=out) == 0
    got = json.loads(out.getvalue())["results"]
    assert got == [json.loads(json.dumps(x.to_dict())) for x in res]
