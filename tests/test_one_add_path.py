"""One add path (issue 33, item 3): add_many is heap_add_many, heap_add for
each item with the FTS index taken at the end, so ids, the same-text rule
and the features are one implementation.

- seen 12: add_many hung forever on [{"text": "x", "id": "m2"}, {"text": "y"}]
  (its own loop naming automatic ids added a name to the set before testing
  it); add() and heap_add gave m2-0.  It fails on 95c101e (a timeout).
- the same items through add() one by one, add_many() and SQL's
  heap_add_many make the same rows.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import heapmem

from conftest import MEMORY_TMP, T0


def test_add_many_names_an_automatic_id_as_add_does(tmp_path):
    script = textwrap.dedent(f"""
        import heapmem
        m = heapmem.open({str(tmp_path / "s.db")!r})
        print([i.id for i in m.add_many([{{"text": "x", "id": "m2"}}, {{"text": "y"}}])])
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "['m2', 'm2-0']"
    with heapmem.open(str(tmp_path / "t.db")) as m:
        m.add("x", id="m2")
        assert m.add("y").id == "m2-0"


TEXTS = ["Booked the flight to Lisbon", "Maya likes green tea", "Call Ana at 9:40",
         "Paid $40 for the tickets", "Booked the flight to Lisbon"]
ITEMS = st.lists(st.fixed_dictionaries(
    {"text": st.sampled_from(TEXTS)},
    optional={"id": st.sampled_from(["m1", "m2", "m3", "a", "m2-0"]),
              "namespace": st.sampled_from(["u1", "u2"]),
              "kind": st.sampled_from(["fact", "preference", "mine"]),
              "source": st.sampled_from(["user", "Ana"]),
              "key": st.sampled_from(["trip", "tea"]),
              "importance": st.sampled_from([0.5, 2.0]),
              "metadata": st.sampled_from([{"a": 1}, {"b": [1, 2]}])}), max_size=8)


def _rows(m):
    return m.connection.execute(
        "SELECT seq, id, namespace, text, kind, source, key, importance, features, metadata, "
        "nstag, ntok FROM memories ORDER BY seq").fetchall()


@settings(max_examples=60, deadline=None)
@given(items=ITEMS, copy=st.booleans())
def test_add_add_many_and_sql_make_the_same_rows(items, copy):
    d = Path(tempfile.mkdtemp(prefix="adds", dir=MEMORY_TMP))  # three new stores each example
    items = [dict(it, created_at=T0) for it in items]
    one = heapmem.open(str(d / "one.db"), clock=lambda: T0)
    many = heapmem.open(str(d / "many.db"), clock=lambda: T0)
    try:
        got_one, err_one = [], None
        try:
            for it in items:
                got_one.append(one.add(**it, copy=copy).id)
        except heapmem.DuplicateIdError as e:
            err_one = e
        try:
            got_many = [it.id for it in many.add_many(items, copy=copy)]
        except heapmem.DuplicateIdError:
            assert err_one is not None
            assert _rows(many) == []
            return
        assert err_one is None and got_many == got_one
        assert _rows(many) == _rows(one)
        assert many.check().ok and one.check().ok
        # and SQL's door: the same items as JSON
        c = apsw.Connection(str(d / "sql.db"))
        heapmem.load(c)
        c.execute("SELECT heap_init()")
        for it in items:
            it.setdefault("metadata", None)
        ids = c.execute("SELECT heap_add_many(?, ?)",
                        (json.dumps(items), int(copy))).fetchall()[0][0]
        assert json.loads(ids) == got_many
        c.close()
    finally:
        one.close()
        many.close()
        shutil.rmtree(d)


def test_a_bad_item_is_named_and_nothing_is_written(mem):
    with pytest.raises(ValueError, match=r"add_many: item 1: text must not be empty"):
        mem.add_many([{"text": "fine"}, {"text": " "}])
    assert mem.count == 0
    with pytest.raises(heapmem.DuplicateIdError, match="item 1: a memory with id 'x'"):
        mem.add_many([{"text": "a", "id": "x"}, {"text": "b", "id": "x"}])
    assert mem.count == 0


def _long_batch(seed):
    """200 items: repeated texts (in the file and earlier in the batch), keys,
    two namespaces, ids given (some a later automatic id's name), threads."""
    import random

    rng = random.Random(seed)
    items = []
    for n in range(200):
        it = {"text": f"{rng.choice(TEXTS)} {rng.randrange(30)}", "created_at": T0 + n}
        if rng.random() < 0.05:
            it["id"] = rng.choice([f"m{n + 20}", f"given-{n}"])  # m<n+20>: a later add's
        if rng.random() < 0.2:
            it["key"] = rng.choice(["trip", "tea"])
        if rng.random() < 0.3:
            it["namespace"] = "u2"
        if n >= 140 and rng.random() < 0.1:  # the first 140: groups of 64 rows
            it["thread"] = rng.choice(["t1", "t2"])
        items.append(it)
    return items


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_longer_than_a_statement_makes_add_s_rows(tmp_path, seed):
    """heap_add_many inserts its rows many to a statement (csrc/store.c,
    hs_batch): across those statements, the same rows, ids, turns and same-text
    answers as add() one by one, and a duplicate id after them still names
    its item with nothing written."""
    items = _long_batch(seed)
    pre = [{"text": f"{TEXTS[0]} 3", "created_at": T0, "id": "m40"}]
    one = heapmem.open(str(tmp_path / "one.db"), clock=lambda: T0)
    many = heapmem.open(str(tmp_path / "many.db"), clock=lambda: T0)
    try:
        one.add_many(pre)
        many.add_many(pre)
        got_one = [one.add(**it).id for it in items]
        assert [it.id for it in many.add_many(items)] == got_one
        assert _rows(many) == _rows(one)
        assert many.check().ok
        before = _rows(many)
        fresh = [{k: v for k, v in it.items() if k != "id"} for it in items]
        bad = fresh[:150] + [{"text": "again", "id": got_one[3]}] + fresh[150:]
        with pytest.raises(heapmem.DuplicateIdError, match=f"item 150: a memory with id "
                                                           f"'{got_one[3]}'"):
            many.add_many(bad, copy=True)
        assert _rows(many) == before
    finally:
        one.close()
        many.close()
