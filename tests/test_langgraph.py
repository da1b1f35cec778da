"""HeapmemStore against LangGraph's own BaseStore interface (get, put,
search, delete, list_namespaces, their async twins, batch), inside a compiled
graph, and the example agent."""
import asyncio
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

import heapmem  # noqa: E402
from heapmem.adapters.langgraph_store import HeapmemStore  # noqa: E402

ROOT = Path(__file__).parent.parent
T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
DAY = 86400.0
MAYA = ("users", "maya")


@pytest.fixture
def clock(clock):
    """conftest's settable clock (and with it its `mem`), at this file's T."""
    clock.t = T
    return clock


def ranked(hits):
    """The keys a search ranked (the rest come after, unscored)."""
    return [h.key for h in hits if h.score is not None]


@pytest.fixture
def mem(lexmem):
    """The store behind: lexical recall, since these tests pin BM25's rankings
    and sets (tests/test_embed.py covers the default, hybrid recall)."""
    return lexmem


@pytest.fixture
def store(mem, clock):
    s = HeapmemStore(mem, kind_field="kind", source_field="source")
    for key, value, age in [
            ("flight", {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am"}, 20),
            ("wish", {"text": "Lisbon! I'd love to visit Lisbon someday", "kind": "preference",
                      "stars": 5}, 5),
            ("price", {"content": "Flights to Lisbon from SFO cost around $700",
                       "kind": "tool_result", "source": "tool", "stars": 2}, 2)]:
        clock.t = T - age * DAY
        s.put(MAYA, key, value)
    clock.t = T - DAY
    s.put(("users", "ben"), "train", {"text": "Train to Paris leaves June 2 at 7:01am"})
    s.put(("docs",), "readme", {"text": "heapmem keeps agent memory in SQLite"})
    clock.t = T
    return s


def test_is_a_langgraph_store(store):
    assert isinstance(store, BaseStore) and store.supports_ttl is True


def test_put_and_get(store, mem):
    item = store.get(MAYA, "flight")
    assert item.key == "flight" and item.namespace == MAYA
    assert item.value == {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am"}
    assert item.created_at == datetime.fromtimestamp(T - 20 * DAY, timezone.utc)
    assert item.updated_at == item.created_at
    assert store.get(MAYA, "nope") is None
    assert store.get(("users", "ben"), "flight") is None  # keys are per namespace
    # the memory behind it: namespace "users/maya", kind and source from the value
    it = mem.get("users/maya.price")
    assert (it.namespace, it.kind, it.source) == ("users/maya", "tool_result", "tool")
    assert it.text == "Flights to Lisbon from SFO cost around $700"


def test_put_updates_in_place(store, mem, clock):
    res = store.search(MAYA, query="When is my flight to Lisbon?")
    clock.t = T + DAY
    store.put(MAYA, "flight", {"text": "Booked the flight: SFO to LIS, departs April 2, 9:40am",
                               "note": "moved"})
    item = store.get(MAYA, "flight")
    assert item.value["note"] == "moved"
    assert item.created_at == datetime.fromtimestamp(T - 20 * DAY, timezone.utc)
    assert item.updated_at == datetime.fromtimestamp(T + DAY, timezone.utc)
    assert ranked(store.search(MAYA, query="April")) == ["flight"]
    assert ranked(store.search(MAYA, query="March")) == []  # the old text left the index
    # the earlier search can still be reported on
    store.mark_used(MAYA, ["flight"], recall_id=store.last_recalls["users/maya"])
    assert mem.check().ok and mem.count == 5
    assert res  # (it showed the booking)


def test_delete(store, mem):
    store.delete(MAYA, "wish")
    assert store.get(MAYA, "wish") is None and mem.get("users/maya.wish") is None
    store.delete(MAYA, "wish")  # deleting what is gone is fine
    assert mem.check().ok


def test_search_with_a_query_ranks_by_heapmem(store, mem):
    hits = store.search(MAYA, query="When is my flight to Lisbon?", limit=3)
    assert all(isinstance(h, SearchItem) for h in hits)
    assert {h.key for h in hits} == {"flight", "wish", "price"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    direct = mem.recall("When is my flight to Lisbon?", namespace="users/maya", track=False)
    assert [h.score for h in hits] == [r.score for r in direct]
    assert store.last_recalls["users/maya"] is not None
    assert store.search(MAYA, query="When is my flight to Lisbon?", limit=1, offset=1)[0].key \
        == hits[1].key
    # no searchable word: nothing is ranked, and every item comes, newest first
    assert [(h.key, h.score) for h in store.search(MAYA, query="the and of")] == [
        ("price", None), ("wish", None), ("flight", None)]
    # a prefix searches every namespace under it
    assert {h.namespace for h in store.search(("users",), query="when")} <= {
        MAYA, ("users", "ben")}
    assert ranked(store.search((), query="Paris train")) == ["train"]


def test_search_without_a_query_lists_newest_first(store):
    items = store.search(("users",))
    assert [i.key for i in items] == ["train", "price", "wish", "flight"]
    assert all(i.score is None for i in items)
    assert [i.key for i in store.search(("users",), limit=2, offset=1)] == ["price", "wish"]
    assert [i.key for i in store.search(())] == ["readme", "train", "price", "wish", "flight"]


def test_search_filters(store):
    assert [i.key for i in store.search(MAYA, filter={"kind": "preference"})] == ["wish"]
    assert [i.key for i in store.search(MAYA, filter={"stars": {"$gte": 3}})] == ["wish"]
    assert [i.key for i in store.search(MAYA, filter={"stars": {"$lt": 3}})] == ["price"]
    assert [i.key for i in store.search(MAYA, filter={"stars": {"$ne": 5}})] == ["price",
                                                                                  "flight"]
    hits = store.search(MAYA, query="Lisbon", filter={"kind": "tool_result"})
    assert [h.key for h in hits] == ["price"] and hits[0].score > 0
    hits = store.search(MAYA, query="booked", filter={"kind": "preference"})
    assert [(h.key, h.score) for h in hits] == [("wish", None)]  # matches, not ranked


def test_list_namespaces(store):
    assert store.list_namespaces() == [("docs",), ("users", "ben"), MAYA]
    assert store.list_namespaces(prefix=("users",)) == [("users", "ben"), MAYA]
    assert store.list_namespaces(suffix=("maya",)) == [MAYA]
    assert store.list_namespaces(prefix=("*", "ben")) == [("users", "ben")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [("users", "ben")]


def test_batch_runs_ops_in_order(store):
    out = store.batch([
        PutOp(("t",), "a", {"text": "alpha memory"}),
        GetOp(("t",), "a"),
        SearchOp(("t",), query="alpha"),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("t",)),)),
        PutOp(("t",), "a", None),
        GetOp(("t",), "a"),
    ])
    assert out[0] is None and out[1].value == {"text": "alpha memory"}
    assert ranked(out[2]) == ["a"] and out[3] == [("t",)] and out[5] is None


def test_async_interface(store):
    async def main():
        await store.aput(("a",), "k", {"text": "hello async world"})
        assert (await store.aget(("a",), "k")).value == {"text": "hello async world"}
        hits = await store.asearch(("a",), query="hello")
        assert [h.key for h in hits] == ["k"]
        assert ("a",) in await store.alist_namespaces()
        fb = await store.amark_used(("a",), ["k"])
        assert fb.used == ("a.k",)
        await store.adelete(("a",), "k")
        assert await store.aget(("a",), "k") is None
        res = await store.abatch([GetOp(MAYA, "flight"), GetOp(MAYA, "nope")])
        assert res[0].key == "flight" and res[1] is None

    asyncio.run(main())


def test_feedback_teaches_heapmem(store, mem):
    hits = store.search(MAYA, query="When is my flight to Lisbon?")
    assert mem.links() == []
    fb = store.feedback(MAYA, ["flight"])  # the rest of the search counts as ignored
    assert fb.used == ("users/maya.flight",) and len(fb.ignored) == len(hits) - 1
    links = {ln.feature: ln for ln in mem.links("users/maya")}
    assert links["kind:fact"].alpha > 0 and links["kind:preference"].beta > 0
    store.search(("users", "ben"), query="When does my train leave?")
    assert store.mark_used(("users", "ben"), ["train"]).used == ("users/ben.train",)
    with pytest.raises(ValueError, match="no item"):
        store.mark_used(MAYA, ["nope"])
    with pytest.raises(TypeError, match="list of keys"):
        store.mark_ignored(MAYA, "flight")
    assert mem.check().ok


def test_bad_input(store, mem):
    n = mem.count
    # what LangGraph itself refuses: no labels, an empty label, a '.', a NUL
    for ns in [(), ("",), ("a.b",), ("a\x00b",), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(ns, "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"text": "x"})])
    with pytest.raises(TypeError):
        store.put(MAYA, "k", "not a dict")
    for ttl in (-1, float("nan"), "5"):
        with pytest.raises(ValueError, match="ttl"):
            store.put(MAYA, "k", {"text": "x"}, ttl=ttl)
    with pytest.raises(TypeError):
        store.batch([object()])
    with pytest.raises(ValueError, match="operator"):
        store.search(MAYA, filter={"stars": {"$regex": "x"}})
    assert mem.count == n


def test_text_fields_and_index(mem):
    s = HeapmemStore(mem, text_fields=("body",))
    s.put(("n",), "a", {"body": "the body text", "text": "not this"})
    assert mem.get("n.a").text == "the body text"
    s.put(("n",), "b", {"title": "Title here", "summary": "and summary"},
          index=["title", "summary"])
    assert mem.get("n.b").text == "Title here\nand summary"
    s.put(("n",), "c", {"x": 1, "y": [2]})
    assert mem.get("n.c").text == '{"x": 1, "y": [2]}'
    with pytest.raises(TypeError):
        HeapmemStore(mem, text_fields="body")
    with pytest.raises(ValueError, match="once"):
        HeapmemStore(mem, text_fields=["a"], index={"fields": ["b"]})
    with pytest.raises(ValueError, match="embed"):
        HeapmemStore(mem, index={"embed": lambda texts: [[1.0] for _ in texts]})


def test_memories_added_otherwise_show_up(store, mem):
    mem.add("Maya's passport expires in 2031", namespace="users/maya", id="passport")
    item = store.get(MAYA, "passport")
    assert item.value["text"] == "Maya's passport expires in 2031" and item.key == "passport"
    assert "passport" in [h.key for h in store.search(MAYA, query="passport")]


def test_opens_a_path(tmp_path):
    s = HeapmemStore(str(tmp_path / "own.db"))
    s.put(("x",), "k", {"text": "owned store"})
    assert s.get(("x",), "k").value == {"text": "owned store"}
    s.close()
    with pytest.raises(TypeError):
        HeapmemStore(42)


def test_in_a_compiled_graph(store, mem):
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        question: str
        keys: list

    def recall(state):
        hits = get_store().search(MAYA, query=state["question"], limit=3)
        return {"keys": [h.key for h in hits]}

    def report(state):
        get_store().mark_used(MAYA, [k for k in state["keys"] if k == "flight"])
        return {}

    g = StateGraph(State)
    g.add_node("recall", recall)
    g.add_node("report", report)
    g.add_edge(START, "recall")
    g.add_edge("recall", "report")
    g.add_edge("report", END)
    out = g.compile(store=store).invoke({"question": "When is my flight to Lisbon?"})
    assert "flight" in out["keys"]
    assert any(ln.feature == "kind:fact" and ln.alpha > 0
               for ln in mem.links(HeapmemStore.namespace_name(MAYA)))


def test_example_agent(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_agent.py"),
                        str(tmp_path / "agent.db")], capture_output=True, text=True,
                       timeout=180, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    first, last = p.stdout.split("Maya asks again:")
    day_one = first.split("maya asks")[1].split("\n\n")[0]
    assert "3. " in day_one and day_one.split("3. ")[1].split("\n")[0].endswith(
        "the answer used it")
    again = last.split("\n\n")[1]
    assert "1. " in again and "Booked the flight" in again.split("1. ")[1].split("\n")[0]
    p2 = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_agent.py"),
                         str(tmp_path / "agent2.db")], capture_output=True, text=True,
                        timeout=180)
    assert p2.stdout == p.stdout  # deterministic


# -- issue 15: the BaseStore contract ------------------------------------------------

def test_two_puts_of_one_new_key_do_not_collide(tmp_path, clock):
    """Another connection puts the same new key between this put's read and
    its write: the put becomes an update instead of a DuplicateIdError."""
    path = str(tmp_path / "race.db")
    mem = heapmem.open(path, clock=clock)
    other = HeapmemStore(heapmem.open(path, clock=clock))
    store = HeapmemStore(mem)
    add = mem.add

    def add_after_the_other(*a, **kw):
        other.put(("t",), "k", {"text": "the other's value"})
        return add(*a, **kw)

    mem.add = add_after_the_other
    store.put(("t",), "k", {"text": "my value"})
    del mem.add
    assert store.get(("t",), "k").value == {"text": "my value"} and mem.count == 1
    other.close()
    other.memory.close()

    async def many():
        await asyncio.gather(*[store.aput(("t",), "new", {"text": f"v{i}"}) for i in range(20)])

    asyncio.run(many())
    assert store.get(("t",), "new").value["text"].startswith("v") and mem.count == 2
    assert mem.check().ok
    mem.close()


def test_index_false_is_not_ranked(store, mem):
    store.put(MAYA, "secret", {"text": "Lisbon hotel door code 4412"}, index=False)
    hits = store.search(MAYA, query="Lisbon door code")
    assert "secret" not in ranked(hits)
    assert [(h.key, h.score) for h in hits if h.key == "secret"] == [("secret", None)]
    assert store.get(MAYA, "secret").value == {"text": "Lisbon hotel door code 4412"}
    assert ("users", "maya") in store.list_namespaces() and len(store.list_namespaces()) == 3
    # indexed again: now ranked first, the same memory id
    store.put(MAYA, "secret", {"text": "Lisbon hotel door code 4412"})
    assert ranked(store.search(MAYA, query="Lisbon door code"))[0] == "secret"
    store.put(MAYA, "secret", {"text": "Lisbon hotel door code 4412"}, index=["missing"])
    assert "secret" not in ranked(store.search(MAYA, query="Lisbon door code"))
    store.delete(MAYA, "secret")
    assert store.get(MAYA, "secret") is None and mem.check().ok


@pytest.fixture
def sixty(mem):
    s = HeapmemStore(mem)
    for i in range(60):
        value = {"text": f"note number {i}"}
        if i == 7:  # the weakest match: the longest text
            value = {"text": "note " + " ".join(f"filler{j}" for j in range(40)), "tag": "x"}
        s.put(("n",), f"k{i}", value)
    return s


def test_a_filter_sees_every_match_of_a_query(sixty):
    hits = sixty.search(("n",), query="note", filter={"tag": "x"}, limit=1)
    assert [h.key for h in hits] == ["k7"] and hits[0].score > 0


def test_a_query_search_is_not_capped_at_fifty(sixty):
    hits = sixty.search(("n",), query="note", limit=100)
    assert len(hits) == 60 and all(h.score is not None for h in hits)
    assert hits[-1].key == "k7"
    page = sixty.search(("n",), query="note", limit=10, offset=55)
    assert [h.key for h in page] == [h.key for h in hits[55:]]


def test_a_query_sharing_no_word_still_returns_items(store):
    hits = store.search(MAYA, query="zebra xylophone")
    assert [(h.key, h.score) for h in hits] == [("price", None), ("wish", None),
                                               ("flight", None)]
    assert [h.key for h in store.search(MAYA, query="zebra", filter={"stars": 5})] == ["wish"]
    assert [h.key for h in store.search(MAYA, query="zebra", limit=1, offset=2)] == ["flight"]


def test_scores_share_one_scale_across_namespaces(mem):
    s = HeapmemStore(mem)
    s.put(("a",), "exact", {"text": "Paris"})
    s.put(("b",), "weak", {"text": "Paris is named once in this long sentence about other "
                                    "things: trains, rivers, bakeries and museums"})
    for ns in (("a",), ("b",)):
        s.put(ns, "x1", {"text": "unrelated one"})
        s.put(ns, "x2", {"text": "unrelated two"})
    hits = [h for h in s.search((), query="Paris") if h.score is not None]
    assert [h.key for h in hits] == ["exact", "weak"]
    assert hits[1].score < 0.8 * hits[0].score  # each namespace's best scored 1.0 before
    # one namespace: heapmem's own scores, unchanged
    direct = mem.recall("Paris", namespace="b", track=False)
    assert [h.score for h in s.search(("b",), query="Paris") if h.score] == [direct[0].score]


def test_value_fields_named_kind_or_source_are_just_values(mem):
    s = HeapmemStore(mem)
    s.put(("a",), "one", {"text": "the Lisbon trip", "kind": "instruction"})
    s.put(("a",), "two", {"text": "the Lisbon trip", "kind": "tool_result", "source": "tool"})
    s.put(("a",), "odd", {"text": "the Lisbon trip", "kind": "k" * 300, "source": 5})
    hits = s.search(("a",), query="Lisbon trip")
    assert len({h.score for h in hits}) == 1  # the same text ranks the same
    assert s.get(("a",), "odd").value["kind"] == "k" * 300
    assert {mem.get(s.item_id(("a",), k)).kind for k in ("one", "two", "odd")} == {"fact"}
    # asked for, kind and source feed heapmem; a value heapmem cannot take is ignored
    t = HeapmemStore(mem, kind_field="kind", source_field="meta.src")
    t.put(("b",), "one", {"text": "x", "kind": "instruction", "meta": {"src": "user"}})
    t.put(("b",), "odd", {"text": "x", "kind": "k" * 300, "meta": {"src": ["no"]}})
    it, odd = mem.get(t.item_id(("b",), "one")), mem.get(t.item_id(("b",), "odd"))
    assert (it.kind, it.source, odd.kind, odd.source) == ("instruction", "user", "fact", None)


LABELS = [("a/b",), ("a", "b"), (" ",), ("  ", "x"), ("*",), ("50%",), ("%2F",),
          ("langgraph", "x"), ("users", "alice\n"), ("ünï", "код", "🙂"), ("l" * 300,),
          tuple(f"label{i}" for i in range(40))]
KEYS = ["", " ", "k", "a/b.c", "50%", "k" * 1000, "key\twith\ttabs"]


def test_every_label_and_key_langgraph_allows(mem):
    s = HeapmemStore(mem)
    s.batch([PutOp(ns, key, {"text": f"value of {key!r}", "n": [list(ns), key]})
             for ns in LABELS for key in KEYS])
    assert mem.count == len(LABELS) * len(KEYS)
    for ns in LABELS:
        name = s.namespace_name(ns)
        assert len(name) <= 256 and s.namespace_tuple(name) == ns
        for key in KEYS:
            item = s.get(ns, key)
            assert (item.namespace, item.key, item.value["n"]) == (ns, key, [list(ns), key])
            assert len(s.item_id(ns, key)) <= 256
        found = s.search(ns)
        assert {(h.namespace, h.key) for h in found} >= {(ns, k) for k in KEYS}
    assert sorted(s.list_namespaces(limit=100)) == sorted(LABELS)
    assert s.list_namespaces(prefix=("a",)) == [("a", "b")]
    assert {h.namespace for h in s.search(("a",))} == {("a", "b")}
    assert len({s.namespace_name(ns) for ns in LABELS}) == len(LABELS)
    # simple names stay readable
    assert s.namespace_name(("users", "maya")) == "users/maya"
    assert s.item_id(("users", "maya"), "flight") == "users/maya.flight"
    assert s.namespace_name(("a/b",)) == "a%2Fb" and s.namespace_name(("*",)) == "%2A"
    s.delete(("l" * 300,), "k" * 1000)
    assert s.get(("l" * 300,), "k" * 1000) is None and mem.check().ok


def test_index_fields_index_every_field_and_path(mem):
    s = HeapmemStore(mem, text_fields=["title", "body"])
    s.put(("d",), "a", {"title": "Trip plan", "body": "Visit the Belem tower"})
    assert mem.get("d.a").text == "Trip plan\nVisit the Belem tower"
    assert ranked(s.search(("d",), query="Belem")) == ["a"]
    s.put(("d",), "b", {"a": {"b": "nested words"}, "arr": ["first item", "second item"],
                        "text": "not indexed"}, index=["a.b", "arr[*]"])
    assert mem.get("d.b").text == "nested words\nfirst item\nsecond item"
    assert ranked(s.search(("d",), query="second")) == ["b"]
    assert ranked(s.search(("d",), query="indexed")) == []
    t = HeapmemStore(mem, index={"fields": ["items[*].name", "{x,y}"]})
    t.put(("e",), "c", {"items": [{"name": "apple"}, {"name": "pear"}], "x": "ex", "y": "why"})
    assert sorted(mem.get("e.c").text.split("\n")) == ["apple", "ex", "pear", "why"]


def test_feedback_judges_only_what_the_search_returned(sixty, mem):
    hits = sixty.search(("n",), query="note", limit=3, offset=2)
    fb = sixty.feedback(("n",), [hits[0].key])
    assert fb.used == ("n." + hits[0].key,)
    assert sorted(fb.ignored) == sorted("n." + h.key for h in hits[1:])
    # a filtered search logs only the page too
    hit, = sixty.search(("n",), query="note", filter={"tag": "x"}, limit=1)
    fb = sixty.feedback(("n",), [])
    assert fb.ignored == ("n.k7",)
    assert mem.check().ok


def test_a_recall_id_of_digits_judges_its_own_page(sixty, mem):
    """A recall_id given as a string of digits (Memory.feedback reads "7" as
    7) names the same search, so only that search's page is judged."""
    hits = sixty.search(("n",), query="note", limit=3, offset=2)
    rid = sixty.last_recalls[sixty.namespace_name(("n",))]
    fb = sixty.feedback(("n",), [hits[0].key], recall_id=str(rid))
    assert fb.recall_id == rid and fb.used == ("n." + hits[0].key,)
    assert sorted(fb.ignored) == sorted("n." + h.key for h in hits[1:])


def test_report_answer_learns_without_keys(store, mem):
    hits = store.search(MAYA, query="When is my flight to Lisbon?", limit=3)
    assert "flight" in [h.key for h in hits]
    fb = store.report_answer(MAYA, "Your flight departs March 14 at 9:40am, SFO to LIS.")
    assert fb.used == ("users/maya.flight",) and fb.links_updated > 0
    assert [j.id for j in fb.judgements] == [f"users/maya.{h.key}" for h in hits
                                            if h.score is not None][:len(fb.judgements)]
    with pytest.raises(ValueError, match="already has feedback"):
        store.report_answer(MAYA, "March 14")
    with pytest.raises(ValueError, match="search it first"):
        store.report_answer(("users", "nobody"), "March 14")
    assert mem.check().ok


def test_areport_answer(store):
    async def main():
        await store.asearch(MAYA, query="When is my flight to Lisbon?", limit=3)
        return await store.areport_answer(MAYA, "It departs March 14, 9:40am")
    assert asyncio.run(main()).used == ("users/maya.flight",)
