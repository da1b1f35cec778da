"""A memory's place in a conversation (issue 35): thread and turn, through
add(), add_many(), heap_add and import, with one sentence for a bad value and
nothing written; and recall's use of it (tests further down)."""
from __future__ import annotations

import io
import json

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
    ("a\x00b", 0, "thread must not contain a NUL character", ValueError),
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
