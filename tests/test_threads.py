"""A memory's place in a conversation (issue 35): thread and turn, through
add(), add_many(), heap_add and import, with one sentence for a bad value and
nothing written; and recall's use of it (tests further down)."""
from __future__ import annotations

import io
import json
import re

import apsw
import pytest

import heapmem
from heapmem.io import transfer
from heapmem.validate import MAX_TURN

ADD = ("SELECT heap_add(?1, 'chat', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ?2, ?3)")


def _place(mem, mid):
    it = mem.get(mid)
    return it.thread, it.turn


def test_a_thread_without_turns_numbers_them_in_order(mem):
    a = mem.add("Where shall we eat tonight?", namespace="chat", thread="t1")
    b = mem.add("The noodle bar on 5th", namespace="chat", thread="t1")
    other = mem.add("Unrelated thread", namespace="chat", thread="t2")
    assert (a.thread, a.turn, b.turn, other.turn) == ("t1", 0, 1, 0)
    assert _place(mem, b.id) == ("t1", 1)
    # a turn given is kept; the next one follows the highest
    assert mem.add("Much later", namespace="chat", thread="t1", turn=10).turn == 10
    assert mem.add("And then", namespace="chat", thread="t1").turn == 11
    # the same thread name in another namespace is another thread
    assert mem.add("Elsewhere", namespace="other", thread="t1").turn == 0
    # add_many numbers a batch in order, after what the thread holds
    items = mem.add_many([{"text": "one", "namespace": "chat", "thread": "t2"},
                          {"text": "two", "namespace": "chat", "thread": "t2"},
                          {"text": "three", "namespace": "chat", "thread": "t2", "turn": 40}])
    assert [(i.thread, i.turn) for i in items] == [("t2", 1), ("t2", 2), ("t2", 40)]
    assert [_place(mem, i.id) for i in items] == [("t2", 1), ("t2", 2), ("t2", 40)]
    # heap_add, from SQL, by the same rule
    mid = mem.connection.execute(ADD, ("four", "t2", None)).fetchall()[0][0]
    assert _place(mem, mid) == ("t2", 41)
    # a memory of no thread has neither
    assert _place(mem, mem.add("no thread").id) == (None, None)


def test_a_turn_repeating_an_earlier_text_is_its_own_memory(mem):
    """Without a thread, the same text is the memory that has it; "thanks" said
    twice in a conversation is two turns."""
    a = mem.add("Thanks!", namespace="chat", thread="t")
    b = mem.add("Thanks!", namespace="chat", thread="t")
    assert a.id != b.id and (a.turn, b.turn) == (0, 1)
    c = mem.add("Thanks!", namespace="chat")
    assert mem.add("Thanks!", namespace="chat").id == c.id
    got = mem.add_many([{"text": "ok", "namespace": "chat", "thread": "t"},
                        {"text": "ok", "namespace": "chat", "thread": "t"}])
    assert got[0].id != got[1].id


BAD = [  # (thread, turn, the error's words, the Python error)
    (None, 3, "turn needs a thread", ValueError),
    ("t", -1, f"turn must be a whole number from 0 to {MAX_TURN}", ValueError),
    ("t", MAX_TURN + 1, f"turn must be a whole number from 0 to {MAX_TURN}", ValueError),
    ("t", 1.5, "turn must be a whole number", TypeError),
    ("t", "3", "turn must be a whole number", TypeError),
    ("", 0, "thread must not be empty", ValueError),
    ("x" * 257, 0, "thread is longer than 256 characters", ValueError),
    ("a\x00b", 0, "thread must be valid UTF-8 without NUL bytes", ValueError),
]


@pytest.mark.parametrize("thread, turn, says, err", BAD)
def test_bad_places_are_one_sentence_and_write_nothing(mem, thread, turn, says, err):
    mem.add("already here", namespace="chat")
    with pytest.raises(err, match=says):
        mem.add("hello", namespace="chat", thread=thread, turn=turn)
    with pytest.raises(err, match=says):
        mem.add_many([{"text": "fine", "namespace": "chat", "thread": "ok"},
                      {"text": "hello", "namespace": "chat", "thread": thread, "turn": turn}])
    if not isinstance(turn, str):  # SQL takes no Python types: its own words for "3"
        with pytest.raises(apsw.SQLError, match="^heap_add: " + says):
            mem.connection.execute(ADD, ("hello", thread, turn)).fetchall()
    assert mem.count == 1


def test_sql_refuses_a_turn_of_text(mem):
    with pytest.raises(apsw.SQLError, match="^heap_add: turn must be a whole number"):
        mem.connection.execute(ADD, ("hello", "t", "3")).fetchall()
    assert mem.count == 0


def test_threads_travel_in_an_export(tmp_path, mem):
    mem.add("Where shall we eat?", namespace="chat", thread="t1", id="a")
    mem.add("Noodles", namespace="chat", thread="t1", id="b")
    mem.add("plain", namespace="chat", id="c")
    buf = io.StringIO()
    transfer.export(mem, buf)
    with heapmem.open(str(tmp_path / "copy.db")) as other:
        transfer.import_file(other, io.StringIO(buf.getvalue()))
        assert [_place(other, i) for i in "abc"] == [("t1", 0), ("t1", 1), (None, None)]
    # a damaged record is one sentence, and nothing is imported
    recs = [json.loads(line) for line in buf.getvalue().splitlines()]
    for bad, says in (({"turn": -3}, "turn must be a whole number"),
                      ({"turn": None}, "a memory of thread 't1' needs its turn"),
                      ({"thread": None}, "turn needs a thread")):
        out = [dict(r, **bad) if r.get("id") == "b" else r for r in recs]
        with heapmem.open(str(tmp_path / f"bad{len(says)}.db")) as other:
            with pytest.raises(ValueError, match=says):
                transfer.import_file(other, io.StringIO("\n".join(map(json.dumps, out))))
            assert other.count == 0


# -- recall: a neighbour's match lifts a memory -----------------------------------------------

T = 1_750_000_000.0  # 2025-06-15
DAY = 86400.0
PLAIN = heapmem.ScoringConfig(w_thread=0, w_time=0)

CHAT = [  # (speaker: text), one session
    "Ana: Where should we eat tonight?",
    "Ben: The noodle bar on 5th street, they open at six",
    "Ana: I still have to finish the quarterly report",
    "Ben: Good luck, the deadline is Friday",
]
OTHER = ["Ana: The garden needs water", "Ben: I bought a new hose yesterday",
         "Ana: Tomatoes are growing well", "Ben: We should plant basil too"]


def _chat(mem, thread=True, ns="chat"):
    rows = [{"text": t, "namespace": ns, "id": f"a{i}", "created_at": T - 10 * DAY + i}
            for i, t in enumerate(CHAT)]
    rows += [{"text": t, "namespace": ns, "id": f"b{i}", "created_at": T - 3 * DAY + i}
             for i, t in enumerate(OTHER)]
    if thread:
        for r in rows:
            r["thread"], r["turn"] = r["id"][0], int(r["id"][1:])
    mem.add_many(rows)


def _ranking(res):
    return [(r.id, r.score) for r in res]


def test_a_store_without_threads_ranks_exactly_as_before(mem):
    """A namespace whose memories have no thread, asked a question that names
    no time, ranks bit for bit as with the thread and time steps switched off."""
    _chat(mem, thread=False)
    for q in ("Where should we eat?", "When is the report due?", "What did Ben buy?",
              "noodle bar", "What grows in the garden?"):
        a = mem.recall(q, namespace="chat", k=8, now=T, track=False)
        b = mem.recall(q, namespace="chat", k=8, now=T, track=False, config=PLAIN)
        assert _ranking(a) == _ranking(b) and a
        assert all(r.thread_lift == 1.0 and r.time_lift == 1.0 for r in a)
        assert all(r.thread is None and r.thread_from is None for r in a)


def test_a_reply_is_found_by_the_words_of_the_turn_it_answers(mem):
    _chat(mem)
    res = mem.recall("Where should we eat?", namespace="chat", k=8, now=T, track=False)
    plain = mem.recall("Where should we eat?", namespace="chat", k=8, now=T, track=False,
                       config=PLAIN)
    # the answer shares no word with the question, nor is its vector close: its
    # neighbour brings it in and lifts it
    assert "a1" not in plain.ids and res.ids[:2] == ["a0", "a1"]
    r = res[1]
    assert (r.thread, r.turn, r.thread_from, r.thread_offset) == ("a", 1, "a0", -1)
    assert r.thread_lift > 1 and r.score == pytest.approx(r.relevance * r.thread_lift)
    assert r.explain().endswith(f" x thread {r.thread_lift:.2f} (a0, 1 turn before)")
    # the turn it answers is lifted by its reply too, and says so
    assert res[0].thread_from == "a1" and "(a1, 1 turn after)" in res[0].explain()
    # w_thread 0: as if there were no threads
    off = mem.recall("Where should we eat?", namespace="chat", k=8, now=T, track=False,
                     config=heapmem.ScoringConfig(w_thread=0))
    assert _ranking(off) == _ranking(plain)


def test_sql_and_python_rank_and_explain_a_thread_alike(mem):
    _chat(mem)
    q = "Where should we eat?"
    res = mem.recall(q, namespace="chat", k=8, now=T, track=False)
    rows = mem.connection.execute(
        "SELECT id, score, thread_lift, thread_from, thread_offset, explain FROM "
        "heap_recall(?, 'chat', 8, ?, NULL, 0)", (q, T)).fetchall()
    assert [(i, s) for i, s, *_ in rows] == _ranking(res)
    assert [(lift, fr, off) for _, _, lift, fr, off, _ in rows] == [
        (r.thread_lift, r.thread_from, r.thread_offset) for r in res]
    assert [e for *_, e in rows] == [r.explain() for r in res]


def test_the_neighbours_of_the_best_join_the_candidates(mem):
    """With few candidates, the turn after the best match is brought in
    although it shares no word with the question and its vector is far."""
    _chat(mem)
    few = heapmem.ScoringConfig(candidates=1, min_cosine=0.99)
    res = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                     config=few)
    alone = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                       config=few.replace(w_thread=0))
    assert alone.ids == ["a2"]
    assert set(res.ids) == {"a0", "a1", "a2", "a3"}  # two turns either side
    assert res.ids[0] == "a2"
    one = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                     config=few.replace(thread_turns=1))
    assert set(one.ids) == {"a1", "a2", "a3"}
    # a neighbour the recall's filters leave out is not brought in
    mem.add("Ana: And the slides", namespace="chat", thread="a", turn=4, kind="note",
            id="a4", created_at=T - 9 * DAY)
    both = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                      config=few)
    assert "a4" in both.ids
    facts = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                       config=few, kinds="fact")
    assert "a4" not in facts.ids and "a3" in facts.ids
    early = mem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                       config=few, until=T - 10 * DAY + 2.5)
    assert set(early.ids) == {"a0", "a1", "a2"}


def test_a_lexical_store_lifts_but_brings_no_one_in(lexmem):
    _chat(lexmem)
    few = heapmem.ScoringConfig(candidates=1)
    res = lexmem.recall("the quarterly report", namespace="chat", k=8, now=T, track=False,
                        config=few)
    assert res.ids == ["a2"]  # no relevance of their own: nothing to rank them by
    res = lexmem.recall("Ana report noodle", namespace="chat", k=8, now=T, track=False)
    plain = lexmem.recall("Ana report noodle", namespace="chat", k=8, now=T, track=False,
                          config=PLAIN)
    assert set(res.ids) == set(plain.ids) and _ranking(res) != _ranking(plain)
    assert any(r.thread_lift > 1 for r in res)


@pytest.mark.parametrize("field, value, says", [
    ("w_thread", -1, "w_thread must be a number from 0 (off) to 100"),
    ("thread_turns", 1.5, "thread_turns must be an integer from 0 to 100"),
    ("thread_turns", 101, "thread_turns must be an integer from 0 to 100"),
    ("w_time", 101, "w_time must be a number from 0 (off) to 100"),
])
def test_bad_thread_and_time_weights_are_one_sentence(mem, field, value, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        heapmem.ScoringConfig(**{field: value})
    with pytest.raises(apsw.SQLError, match="heap_recall: " + re.escape(says)):
        mem.connection.execute("SELECT id FROM heap_recall('x', 'default', 1, NULL, ?, 0)",
                               (f"{field}={value}",)).fetchall()


# -- recall: time in the question -------------------------------------------------------------

def test_the_window_a_question_names_lifts_what_was_said_in_it(mem):
    _chat(mem, thread=False)
    q = "What did Ben buy last week?"  # T is a Sunday: last week is June 2-8, 2025
    res = mem.recall(q, namespace="chat", k=8, now=T, track=False)
    plain = mem.recall(q, namespace="chat", k=8, now=T, track=False, config=PLAIN)
    inside = {r.id for r in res if r.time_lift != 1.0}
    assert inside and inside == {i for i in res.ids if i[0] == "a"}  # said on June 5
    assert all(r.time_lift == 2.0 for r in res if r.id in inside)
    for r in res:
        p = plain[plain.ids.index(r.id)]
        assert r.score == pytest.approx(p.score * r.time_lift)
        assert r.time_window == '"last week": 2025-06-02 to 2025-06-08'
    a = res[res.ids.index("a0")]
    assert a.explain().endswith(' x time 2.00 ("last week": 2025-06-02 to 2025-06-08)')
    rows = mem.connection.execute("SELECT id, score, time_lift, time_window, explain FROM "
                                  "heap_recall(?, 'chat', 8, ?, NULL, 0)", (q, T)).fetchall()
    assert [(i, s, tl, tw) for i, s, tl, tw, _ in rows] == [
        (r.id, r.score, r.time_lift, r.time_window) for r in res]
    assert [e for *_, e in rows] == [r.explain() for r in res]
    # never a filter: what lies outside the window is still ranked
    assert "b1" in res.ids and set(res.ids) == set(plain.ids)
    # w_time 0, or a window no memory lies in: the plain ranking
    off = mem.recall(q, namespace="chat", k=8, now=T, track=False,
                     config=heapmem.ScoringConfig(w_time=0))
    assert _ranking(off) == _ranking(plain)
    far = mem.recall("What did Ben buy in March 2021?", namespace="chat", k=8, now=T,
                     track=False)
    assert _ranking(far) == _ranking(mem.recall("What did Ben buy in March 2021?",
                                                namespace="chat", k=8, now=T, track=False,
                                                config=PLAIN))


# -- the doors that know a conversation -------------------------------------------------------

def test_the_add_tool_takes_a_thread(mem):
    """The tool table every tool door (MCP, the frameworks) is built from."""
    from heapmem import tools
    out = tools.call(mem, "add", {"text": "Where should we eat tonight?", "thread": "chat-1"},
                     namespace="user:maya")
    assert (out["thread"], out["turn"]) == ("chat-1", 0)
    out = tools.call(mem, "add", {"text": "The noodle bar on 5th", "thread": "chat-1"},
                     namespace="user:maya")
    assert (out["thread"], out["turn"]) == ("chat-1", 1)
    assert "thread" not in tools.call(mem, "add", {"text": "A memory of no conversation"},
                                      namespace="user:maya")
    with pytest.raises(ValueError, match="turn needs a thread"):
        tools.call(mem, "add", {"text": "hello", "turn": 3}, namespace="user:maya")
    assert mem.count == 3


def test_langgraph_takes_a_thread_from_the_value_when_asked(mem):
    pytest.importorskip("langgraph")
    from heapmem.adapters.langgraph_store import HeapmemStore
    s = HeapmemStore(mem, thread_field="chat.id", turn_field="chat.turn")
    s.put(("u",), "q", {"text": "Where should we eat tonight?", "chat": {"id": "c1", "turn": 4}})
    s.put(("u",), "a", {"text": "The noodle bar on 5th street", "chat": {"id": "c1"}})
    s.put(("u",), "odd", {"text": "x", "chat": {"id": ["no"], "turn": 2}})
    s.put(("u",), "neg", {"text": "y", "chat": {"id": "c2", "turn": -1}})
    place = {k: (lambda it: (it.thread, it.turn))(mem.get(s.item_id(("u",), k)))
             for k in ("q", "a", "odd", "neg")}
    assert place == {"q": ("c1", 4), "a": ("c1", 5), "odd": (None, None), "neg": ("c2", 0)}
    # a later put keeps the place its item was first put with
    s.put(("u",), "a", {"text": "The noodle bar on 5th street, at six", "chat": {"id": "c9"}})
    assert (mem.get(s.item_id(("u",), "a")).thread, mem.get(s.item_id(("u",), "a")).turn) == (
        "c1", 5)
    hits = s.search(("u",), query="Where should we eat?", limit=2)
    assert [h.key for h in hits] == ["q", "a"]
    # without thread_field, no thread
    HeapmemStore(mem).put(("v",), "q", {"text": "z", "chat": {"id": "c1"}})
    assert mem.get(HeapmemStore.item_id(("v",), "q")).thread is None


def test_the_cli_adds_a_turn_of_a_thread(tmp_path):
    from heapmem.adapters import cli
    db = str(tmp_path / "agent.db")

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["--db", db, *argv], clock=lambda: T, stdout=out, stderr=err, env={})
        return code, out.getvalue(), err.getvalue()

    assert run("add", "Where shall we eat?", "--thread", "chat-1")[0] == 0
    code, out, _ = run("--json", "add", "Noodles", "--thread", "chat-1")
    assert code == 0 and (json.loads(out)["thread"], json.loads(out)["turn"]) == ("chat-1", 1)
    code, out, err = run("add", "hello", "--turn", "3")
    assert (code, out) == (1, "") and err.strip() == (
        "heapmem: error: turn needs a thread: name the conversation the memory is a turn of")
    code, out, err = run("add", "hello", "--thread", "t", "--turn", "-1")
    assert code == 1 and "turn must be a whole number from 0 to" in err
    with heapmem.open(db) as mem:
        assert mem.count == 2
