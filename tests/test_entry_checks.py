"""Every heap_* entry point checks its arguments, and what it reads from the
file, in the C core (issue 33): the SQL door keeps what the Python door keeps.

Each test is one of the issue's seen items and fails on 95c101e:
- 2: text that is not UTF-8 (a 0xFF byte, a CESU-8 surrogate, an overlong
  form) is refused by heap_add in every text argument, and by heap_recall,
  heap_feedback, heap_answer and heap_forget, with one sentence and nothing
  written;
- 3: a namespace holding a NUL byte is refused by heap_recall, heap_feedback
  and heap_answer (it read and judged the namespace before the NUL);
- 4: id lists are bounded and said in one short sentence (50,000 unknown ids
  made a 600 KB message);
- 5: heap_rebuild_pool makes the schema check every write makes, and blames a
  bad argument, not the store;
- 8: the tuned meta row is taken apart, never spliced into config text;
- 9: counters at 2^63 - 1 (last_seq, auto-tune's point and count) are damage,
  not a signed overflow (make sanitize runs this file under -fno-wrapv UBSan);
- 10: exploration's seed counts the namespace's own recalls.
"""
from __future__ import annotations

import hashlib
import json
import re

import apsw
import pytest

import heapmem
from heapmem.db import native

from conftest import T0

BAD_UTF8 = {
    "0xff": "CAST(x'4361666520636f6465ff3a2037' AS TEXT)",
    "cesu surrogate": "CAST(x'61eda08062' AS TEXT)",
    "overlong": "CAST(x'61c0af62' AS TEXT)",
    "nul": "CAST(x'610062' AS TEXT)",
    "past U+10FFFF": "CAST(x'61f4908080' AS TEXT)",
}
SENTENCE = "must be valid UTF-8 without NUL bytes"


def _conn(path):
    c = apsw.Connection(str(path))
    heapmem.load(c)
    return c


def _digest(c) -> str:
    """Every row of every table heapmem writes, as one digest."""
    h = hashlib.sha256()
    for t in ("memories", "recalls", "events", "links", "heapmem_meta", "namespaces",
              "vectors", "judged"):
        for r in c.execute(f"SELECT * FROM {t} ORDER BY 1, 2"):
            h.update(repr(r).encode())
    return h.hexdigest()


@pytest.fixture
def store(tmp_path):
    """A store with a tracked recall in user:bob and one in user:bob\\0eve's
    would-be prefix, through SQL alone."""
    c = _conn(tmp_path / "s.db")
    c.execute("SELECT heap_init()")
    for text, ns in [("Bob flies to Lisbon on Friday", "user:bob"),
                     ("Bob likes green tea", "user:bob"),
                     ("Eve flies to Oslo", "user:eve")]:
        c.execute("SELECT heap_add(?, ?)", (text, ns))
    rid = c.execute("SELECT recall_id FROM heap_recall('Lisbon flight tea', 'user:bob', 5, ?)",
                    (T0,)).fetchall()[0][0]
    yield c, rid
    c.close()


def _refused(c, sql, params=(), match=SENTENCE):
    before = _digest(c)
    with pytest.raises(apsw.Error, match=match) as e:
        c.execute(sql, params).fetchall()
    msg = str(e.value)
    assert len(msg) < 400 and not re.search(r"[.;]\s+[A-Z]", msg), msg  # one short sentence
    assert _digest(c) == before, "a refused call wrote something"
    return msg


# -- seen 2: not UTF-8 ----------------------------------------------------------------

@pytest.mark.parametrize("bad", sorted(BAD_UTF8))
@pytest.mark.parametrize("arg", ["text", "namespace", "kind", "source", "id", "key",
                                 "metadata"])
def test_heap_add_refuses_text_that_is_not_utf8_in_every_argument(store, bad, arg):
    c, _ = store
    args = {"text": "'Cafe code: 7'", "namespace": "'user:alice'", "kind": "'fact'",
            "source": "NULL", "id": "NULL", "key": "NULL", "metadata": "NULL"}
    args[arg] = BAD_UTF8[bad]
    if arg == "metadata":  # a JSON object whose string holds the bytes
        args[arg] = "'{\"a\": \"' || " + BAD_UTF8[bad] + " || '\"}'"
    sql = (f"SELECT heap_add({args['text']}, {args['namespace']}, {args['kind']}, "
           f"{args['source']}, {args['id']}, NULL, NULL, {args['key']}, {args['metadata']})")
    msg = _refused(c, sql)
    assert msg.startswith("heap_add: ") or "heap_add: " in msg


@pytest.mark.parametrize("bad", sorted(BAD_UTF8))
def test_the_loop_refuses_text_that_is_not_utf8(store, bad):
    c, rid = store
    b = BAD_UTF8[bad]
    if bad == "nul":  # a question's NUL is a space, as Memory.recall reads it
        assert c.execute(f"SELECT id FROM heap_recall({b}, 'user:bob', 5, NULL, NULL, 0)"
                         ).fetchall() == c.execute("SELECT id FROM heap_recall('a b', 'user:bob', "
                                                   "5, NULL, NULL, 0)").fetchall()
    else:
        _refused(c, f"SELECT id FROM heap_recall({b}, 'user:bob')", match="must be valid UTF-8")
    _refused(c, f"SELECT id FROM heap_recall('tea', {b})")
    _refused(c, f"SELECT id FROM heap_recall('tea', 'user:bob', 5, NULL, NULL, 0, NULL, NULL, "
                f"{b})")
    _refused(c, f"SELECT id FROM heap_recall('tea', 'user:bob', 5, NULL, NULL, 0, NULL, NULL, "
                f"json_array({b}))")
    _refused(c, f"SELECT heap_feedback(?, json_array({b}))", (rid,))
    _refused(c, f"SELECT heap_feedback(?, '[]', json_array({b}))", (rid,))
    _refused(c, f"SELECT heap_feedback(?, '[\"m1\"]', NULL, NULL, {b})", (rid,))
    _refused(c, f"SELECT heap_answer(?, {b})", (rid,))
    _refused(c, f"SELECT heap_forget(json_array({b}))")
    _refused(c, f"SELECT heap_forget_namespace({b})")
    # and the small functions
    names = ["heap_ns_tag({b})", "heap_features('x', {b}, NULL)", "heap_match('x', {b})"]
    for f in names + ([] if bad == "nul" else ["heap_qtype({b})"]):  # a question may hold NUL
        with pytest.raises(apsw.Error, match="must be valid UTF-8"):
            c.execute("SELECT " + f.format(b=b)).fetchall()


def test_python_reads_the_store_after_refusals(store, tmp_path):
    """On 95c101e heap_add took such text, and get, list, namespaces(), stats()
    and recall raised a raw UnicodeDecodeError afterwards."""
    c, _ = store
    for b in BAD_UTF8.values():
        with pytest.raises(apsw.Error):
            c.execute(f"SELECT heap_add({b}, 'user:alice')").fetchall()
    c.close()
    with heapmem.open(str(tmp_path / "s.db")) as m:
        assert m.namespaces == ["user:bob", "user:eve"]
        m.stats()
        assert m.list("user:bob")
        assert m.check().ok


# -- seen 3: NUL in a namespace ---------------------------------------------------------

def test_a_nul_in_the_namespace_reads_and_judges_nothing(store):
    c, rid = store
    ns = "user:bob\x00eve"
    _refused(c, "SELECT id FROM heap_recall('Lisbon', ?)", (ns,))
    _refused(c, "SELECT heap_feedback(?, '[\"m1\"]', NULL, NULL, ?)", (rid, ns))
    _refused(c, "SELECT heap_answer(?, 'Friday', NULL, ?)", (rid, ns))
    _refused(c, "SELECT heap_forget_namespace(?)", (ns,))
    _refused(c, "SELECT heap_add('x', ?)", (ns,))
    msg = _refused(c, "SELECT id FROM heap_recall('Lisbon', ?)", (ns,))
    assert msg.startswith("heap_recall: namespace must be valid UTF-8 without NUL bytes")


# -- seen 4: id lists -------------------------------------------------------------------

def test_id_lists_are_bounded_and_said_in_one_short_sentence(store):
    c, rid = store
    ids = json.dumps([f"nope{i}" for i in range(50_000)])
    msg = _refused(c, "SELECT heap_forget(?)", (ids,), match="unknown memory ids")
    assert "and 49995 more" in msg
    msg = _refused(c, "SELECT heap_feedback(?, ?)", (rid, ids), match="used lists 50000 ids")
    assert "at most 1000" in msg
    too_many = json.dumps([f"m{i}" for i in range(int(native.LIMITS["MAX_IDS"]) + 1)])
    _refused(c, "SELECT heap_forget(?)", (too_many,), match="at most 100000")
    # a duplicate at the two ends of a long list is found
    twice = json.dumps(["m1"] + [f"x{i}" for i in range(30_000)] + ["m1"])
    _refused(c, "SELECT heap_forget(?)", (twice,), match="ids lists the same id twice")


def test_forget_many_ids_erases_them_and_their_recalls(store):
    c, _ = store
    ids = [c.execute("SELECT heap_add(?, 'user:zed')", (f"note {i}",)).fetchall()[0][0]
           for i in range(300)]
    rid = c.execute("SELECT recall_id FROM heap_recall('note', 'user:zed', 5, ?)",
                    (T0,)).fetchall()[0][0]
    assert c.execute("SELECT heap_forget(?)", (json.dumps(ids),)).fetchall() == [(300,)]
    assert c.execute("SELECT count(*) FROM memories WHERE namespace = 'user:zed'"
                     ).fetchall() == [(0,)]
    assert c.execute("SELECT count(*) FROM recalls WHERE id = ?", (rid,)).fetchall() == [(0,)]
    assert c.execute("SELECT count(*) FROM recalls WHERE namespace = 'user:bob'"
                     ).fetchall() == [(1,)]


# -- seen 5: heap_rebuild_pool ---------------------------------------------------------

def test_heap_rebuild_pool_checks_the_schema_and_its_argument(store):
    c, _ = store
    msg = _refused(c, "SELECT heap_rebuild_pool('not json')", match="heap_rebuild_pool: features")
    assert "damaged" not in msg
    _refused(c, "SELECT heap_rebuild_pool('[\"colour:red\"]')", match="feature names heapmem makes")
    c.execute("SELECT heap_rebuild_pool('[\"kind:fact\", \"when/date:1\"]')").fetchall()
    c.execute("CREATE TABLE loot(t TEXT)")
    c.execute("CREATE TRIGGER steal AFTER INSERT ON links BEGIN "
              "INSERT INTO loot SELECT text FROM memories; END")
    with pytest.raises(apsw.Error, match="not part of heapmem's schema"):
        c.execute("SELECT heap_rebuild_pool()").fetchall()
    assert c.execute("SELECT count(*) FROM loot").fetchall() == [(0,)]


# -- seen 8: the tuned meta row ---------------------------------------------------------

@pytest.mark.parametrize("tuned", ['{"w_usefulness=0.3 w_relevance": 0}',
                                   '{"candidates": "0x3e8"}', '{"candidates": 1e9}',
                                   '[1, 2]', 'not json', '{"w_usefulness": true}'])
def test_the_tuned_row_is_read_as_json_not_spliced(store, tuned, tmp_path):
    c, rid = store
    c.execute("INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('tuned', ?)", (tuned,))
    _refused(c, "SELECT id FROM heap_recall('tea', 'user:bob')",
             match="the store's tuned config is damaged")
    _refused(c, "SELECT heap_feedback(?, '[]')", (rid,),
             match="the store's tuned config is damaged")
    _refused(c, "SELECT heap_tune('{\"deploy\": false}')", match="tuned config is damaged")
    # Python refuses the same rows on open
    c.close()
    with pytest.raises(heapmem.CorruptStoreError):
        heapmem.open(str(tmp_path / "s.db"))


def test_a_good_tuned_row_is_in_force(store):
    c, _ = store
    c.execute("INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('tuned', ?)",
              ('{"w_importance": 0, "candidates": 7}',))
    row = c.execute("SELECT explain FROM heap_recall('tea', 'user:bob', 5, NULL, NULL, 0)"
                    ).fetchall()[0][0]
    assert "importance" not in row


# -- seen 9: counters at 2^63 - 1 -------------------------------------------------------

def test_last_seq_at_the_top_is_damage_not_an_overflow(store):
    c, _ = store
    c.execute("INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('last_seq', ?)",
              (str((1 << 63) - 1),))
    msg = _refused(c, "SELECT heap_add('one more', 'user:bob')",
                   match="last memory number .* is damaged or spent")
    assert "9223372036854775807" in msg


def test_autotune_counters_at_the_top_are_counted_again(store):
    c, rid = store
    top = (1 << 63) - 1
    c.execute("INSERT OR REPLACE INTO heapmem_meta(key, value) VALUES ('autotune', ?)",
              (json.dumps({"point": top, "judged": top}),))
    out = json.loads(c.execute("SELECT heap_feedback(?, '[\"m1\"]', NULL, ?)",
                               (rid, T0)).fetchall()[0][0])
    assert out["auto_tune"] is None
    state = json.loads(c.execute("SELECT value FROM heapmem_meta WHERE key = 'autotune'"
                                 ).fetchall()[0][0])
    assert state == {"point": 0, "judged": 1}
    # a point near the top is damage too (its double would overflow)
    c.execute("UPDATE heapmem_meta SET value = ? WHERE key = 'autotune'",
              (json.dumps({"point": 1 << 62 + 1, "judged": 5}),))
    rid2 = c.execute("SELECT recall_id FROM heap_recall('tea', 'user:bob', 5, ?)",
                     (T0 + 1,)).fetchall()[0][0]
    c.execute("SELECT heap_feedback(?, '[\"m2\"]', NULL, ?)", (rid2, T0 + 1)).fetchall()
    state = json.loads(c.execute("SELECT value FROM heapmem_meta WHERE key = 'autotune'"
                                 ).fetchall()[0][0])
    assert state == {"point": 0, "judged": 2}


# -- seen 10: exploration's seed --------------------------------------------------------

def test_another_tenants_recalls_never_move_a_tenants_draws(tmp_path):
    def explored(path, other_recalls):
        c = _conn(path)
        c.execute("SELECT heap_init()")
        for i in range(12):
            c.execute("SELECT heap_add(?, 'user:a', ?, 'user')",
                      (f"Ana's trip number {i} to Lisbon", "fact" if i % 2 else "preference"))
            c.execute("SELECT heap_add(?, 'user:b')", (f"Bea note {i}",))
        cfg = "explore=2"
        for i in range(40):  # feedback, so the links have posteriors to draw from
            rid = c.execute("SELECT recall_id FROM heap_recall('trip Lisbon', 'user:a', 5, ?, ?)",
                            (T0 + i, cfg)).fetchall()[0][0]
            shown = json.loads(c.execute("SELECT shown FROM recalls WHERE id = ?",
                                         (rid,)).fetchall()[0][0])
            c.execute("SELECT heap_feedback(?, json_array(?), NULL, ?, NULL, ?)",
                      (rid, shown[0], T0 + i, cfg)).fetchall()
        for _ in range(other_recalls):
            c.execute("SELECT id FROM heap_recall('note', 'user:b', 5, ?)", (T0 + 50,)).fetchall()
        rows = c.execute("SELECT id, explore FROM heap_recall('trip Lisbon', 'user:a', 5, ?, ?)",
                         (T0 + 60, cfg)).fetchall()
        c.close()
        return rows

    a = explored(tmp_path / "a.db", 0)
    b = explored(tmp_path / "b.db", 7)
    assert any(x != 1.0 for _, x in a)  # exploration is on
    assert a == b
