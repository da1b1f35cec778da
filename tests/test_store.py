"""Opening, adding, getting, forgetting; bad input writes nothing."""
import os
import sqlite3

import apsw
import pytest

import heapmem
from heapmem.db import native
from heapmem.db.schema import SCHEMA_VERSION

from conftest import T0, back_to_schema_7


def test_open_creates_a_store_and_reopens_it(tmp_path, clock):
    path = str(tmp_path / "a.db")
    with heapmem.open(path, clock=clock) as mem:
        item = mem.add("Maya likes window seats", kind="preference", namespace="user:maya")
        assert item.id == "m1" and item.importance == 1.3
        assert mem.schema_version == SCHEMA_VERSION and mem.count == 1
        assert mem.namespaces == ["user:maya"]
        jm = mem.connection.execute("PRAGMA journal_mode").fetchall()[0][0]
        assert jm == "wal"
    with heapmem.open(path, clock=clock) as mem:
        assert mem.get("m1").text == "Maya likes window seats"
        assert mem.get("nope") is None


def test_not_a_store_is_refused_untouched(tmp_path):
    path = str(tmp_path / "other.db")
    conn = apsw.Connection(path)
    conn.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
    conn.close()
    before = open(path, "rb").read()
    with pytest.raises(heapmem.NotAStoreError, match="not a heapmem store"):
        heapmem.open(path)
    assert open(path, "rb").read() == before
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(heapmem.NotAStoreError, match="not a SQLite database"):
        heapmem.open(str(junk))


def test_newer_schema_is_refused_untouched(tmp_path):
    path = str(tmp_path / "new.db")
    heapmem.open(path).close()
    conn = apsw.Connection(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    before = open(path, "rb").read()
    with pytest.raises(heapmem.SchemaVersionError, match="schema version 99, newer"):
        heapmem.open(path)
    assert open(path, "rb").read() == before


def test_add_defaults_and_explicit_fields(mem):
    it = mem.add("Always answer in French", kind="instruction", source="user", id="rule-1",
                 namespace="n", created_at=T0, importance=2.5, key="lang",
                 metadata={"why": "asked", "n": 1})
    assert it.id == "rule-1" and it.importance == 2.5 and it.created_at == T0
    got = mem.get("rule-1")
    assert got == it
    assert got.features[:2] == ("kind:instruction", "src:user")
    for kind, imp in heapmem.KIND_IMPORTANCE.items():
        assert mem.add("x y", kind=kind, copy=True).importance == imp
    assert mem.add("x y", kind="gossip", copy=True).importance == 1.0


def test_add_many_is_one_transaction(mem):
    items = mem.add_many([{"text": "one"}, {"text": "two", "id": "b"}, {"text": "three"}])
    assert [i.id for i in items] == ["m1", "b", "m3"]
    with pytest.raises(heapmem.DuplicateIdError):
        mem.add_many([{"text": "four"}, {"text": "five", "id": "b"}])
    with pytest.raises(ValueError, match="item 1: text must not be empty"):
        mem.add_many([{"text": "four"}, {"text": "  "}])
    with pytest.raises(ValueError, match="unknown field"):
        mem.add_many([{"text": "four", "colour": "red"}])
    assert mem.count == 3


BAD_ADDS = [
    (dict(text=""), ValueError, "must not be empty"),
    (dict(text=" \n\t"), ValueError, "must not be empty"),
    (dict(text=None), TypeError, "text must be a string"),
    (dict(text=b"bytes"), TypeError, "text must be a string"),
    (dict(text=42), TypeError, "text must be a string"),
    (dict(text="x" * (heapmem.MAX_TEXT_BYTES + 1)), ValueError, "longer than 1048576 bytes"),
    (dict(text="a\x00b"), ValueError, "NUL"),
    (dict(text="\ud800 lone"), ValueError, "must be valid UTF-8"),
    (dict(text="ok", importance=0), ValueError, "importance must be a number in"),
    (dict(text="ok", importance=-1), ValueError, "importance must be a number in"),
    (dict(text="ok", importance=float("nan")), ValueError, "importance"),
    (dict(text="ok", importance=float("inf")), ValueError, "importance"),
    (dict(text="ok", importance=1e308), ValueError, "importance"),
    (dict(text="ok", importance="high"), TypeError, "importance must be a number"),
    (dict(text="ok", importance=True), TypeError, "importance must be a number"),
    (dict(text="ok", namespace=""), ValueError, "namespace must not be empty"),
    (dict(text="ok", namespace="*"), ValueError, "reserved"),
    (dict(text="ok", namespace=3), TypeError, "namespace must be a string"),
    (dict(text="ok", id=""), ValueError, "id must not be empty"),
    (dict(text="ok", kind=None), TypeError, "kind must be a string"),
    (dict(text="ok", created_at=float("nan")), ValueError, "finite"),
    (dict(text="ok", created_at="yesterday"), ValueError,
     "unix seconds, a datetime or an ISO 8601"),
    (dict(text="ok", metadata={"x": float("nan")}), ValueError, "JSON"),
    (dict(text="ok", metadata=[1, 2]), TypeError, "metadata must be a dict"),
]


@pytest.mark.parametrize("kwargs, exc, msg", BAD_ADDS)
def test_bad_add_raises_and_writes_nothing(mem, kwargs, exc, msg):
    mem.add("existing memory", id="keep")
    changes = mem.connection.totalchanges()
    with pytest.raises(exc, match=msg):
        mem.add(**kwargs)
    assert mem.connection.totalchanges() == changes
    assert mem.count == 1


def test_text_at_the_limit_is_accepted(mem):
    it = mem.add("x" * (heapmem.MAX_TEXT_BYTES - 2) + " y")
    assert len(mem.get(it.id).text.encode()) == heapmem.MAX_TEXT_BYTES


def test_duplicate_id_leaves_the_original(mem):
    mem.add("the original", id="a", importance=2)
    with pytest.raises(heapmem.DuplicateIdError, match="'a' already exists"):
        mem.add("an impostor", id="a")
    assert mem.get("a").text == "the original" and mem.get("a").importance == 2


def test_datetime_timestamps(mem):
    from datetime import datetime, timezone
    it = mem.add("dated", created_at=datetime(2024, 3, 14, tzinfo=timezone.utc))
    assert it.created_at == datetime(2024, 3, 14, tzinfo=timezone.utc).timestamp()
    naive = mem.add("naive", created_at=datetime(2024, 3, 14))
    assert naive.created_at == it.created_at  # naive datetimes are UTC


def test_forget_ids_and_namespace(mem):
    mem.add("flight to Lisbon booked", id="a", namespace="u1")
    mem.add("flight to Porto booked", id="b", namespace="u1")
    mem.add("flight to Rome booked", id="c", namespace="u2")
    res = mem.recall("flight", namespace="u1")
    with pytest.raises(ValueError, match="unknown memory ids \\['zz'\\]; nothing was forgotten"):
        mem.forget(["a", "zz"])
    with pytest.raises(TypeError, match="not a single string"):
        mem.forget("a")
    with pytest.raises(ValueError, match="either ids or namespace"):
        mem.forget()
    assert mem.forget(["a"]) == 1
    assert mem.get("a") is None and mem.get("b") is not None
    # the recall that showed it is dropped with its query text
    with pytest.raises(ValueError, match="unknown recall_id"):
        mem.feedback(used=["b"], recall_id=res.recall_id)
    assert [r.id for r in mem.recall("flight", namespace="u1")] == ["b"]
    assert mem.forget(namespace="u1") == 1
    assert mem.recall("flight", namespace="u1").ids == []
    assert mem.recall("flight", namespace="u2").ids == ["c"]
    assert mem.check().ok


def test_readonly_store_recalls_and_refuses_writes(tmp_path, clock):
    path = str(tmp_path / "ship.db")
    with heapmem.open(path, clock=clock) as mem:
        mem.add("ships with the app", id="a")
    with heapmem.open(path, clock=clock, readonly=True) as ro:
        res = ro.recall("app")
        assert res.ids == ["a"] and res.recall_id is None
        for call in (lambda: ro.add("x"), lambda: ro.forget(["a"]),
                     lambda: ro.feedback(used=["a"], recall_id=1)):
            with pytest.raises(heapmem.ReadOnlyError, match="readonly=True"):
                call()


def test_load_into_stdlib_sqlite3():
    conn = sqlite3.connect(":memory:")
    if not hasattr(conn, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 cannot load extensions")
    heapmem.load(conn)
    assert conn.execute("SELECT heap_qtype('Where is it?')").fetchone()[0] == "where"
    conn.close()


def test_public_surface():
    assert sorted(heapmem.__all__) == heapmem.__all__
    assert heapmem.loadable_path().endswith("heapmem0")
    assert os.path.exists(heapmem.loadable_path() + native.SUFFIX)


def _old_store(path, version):
    """A store file as heapmem schema `version` wrote it, holding two memories."""
    from heapmem.db.schema import MIGRATIONS as _MIGRATIONS
    conn = apsw.Connection(path)
    heapmem.load(conn)
    for v in range(version):
        conn.execute(_MIGRATIONS[v])
    conn.execute("INSERT INTO heapmem_meta VALUES ('format', 'heapmem'), ('created_with', 'old')")
    for seq, (ns, text) in enumerate([("a", "written by an older heapmem"),
                                      ("b", "another namespace, older still")], 1):
        conn.execute("INSERT INTO memories(seq, id, namespace, nstag, text, kind, importance,"
                     " features, created_at) VALUES (?, ?, ?, ?, ?, 'fact', 1, ?, 0)",
                     (seq, f"old{seq}", ns, native.ns_tag(ns), text,
                      native.features(text, "fact", None)))
    if version >= 3:  # what schema 3's add() computed
        conn.execute("UPDATE memories SET ntok = heap_ntokens(nstag) + heap_ntokens(text)")
    conn.execute(f"PRAGMA user_version={version}")
    conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 9])
def test_an_older_schema_migrates_in_place(tmp_path, clock, version):
    path = str(tmp_path / f"v{version}.db")
    _old_store(path, version)
    # a read-only open does not migrate: it says how to
    with pytest.raises(heapmem.SchemaVersionError, match="without readonly=True to upgrade"):
        heapmem.open(path, readonly=True)
    with heapmem.open(path, clock=clock) as mem:
        assert mem.schema_version == SCHEMA_VERSION
        assert mem.get("old1").text == "written by an older heapmem"
        # the library's embedder (the default) embeds the memories the file had
        assert mem.connection.execute("SELECT count(*) FROM vectors").fetchall() == [(2,)]
        assert mem.vectors.embedder_name == "potion-base-8M"
        # the namespaces' BM25 statistics are rebuilt from the memories
        stats = mem.connection.execute("SELECT * FROM namespaces ORDER BY 1").fetchall()
        assert stats == [("a", 1, 1 + 5), ("b", 1, 1 + 4)]
        assert mem.recall("older", namespace="a", track=False).ids == ["old1"]
        assert mem.check().ok
        mem.add("a third one", namespace="a")
        assert mem.check().ok


def test_a_schema_5_store_with_learned_links_migrates_to_the_rate_index(tmp_path, clock):
    """Schema 6 swaps links_feature for links_rate (the trim boundaries an
    index seek away).  A schema-5 file with a pooled layer migrates in place;
    its links are untouched, check() agrees, and feedback goes on keeping the
    pool equal to working it out afresh."""
    path = str(tmp_path / "v5.db")
    texts = ["Dentist appointment on Tuesday at 3pm", "I would like a dentist I trust",
             "Dentist costs $90 a visit", "The dentist said floss twice a day"]

    def judge(m, ns):
        res = m.recall("When is my dentist appointment?", namespace=ns, k=4)
        m.feedback(used=[res.ids[0]], recall_id=res.recall_id)

    with heapmem.open(path, clock=clock) as m:
        for i in range(6):
            m.add_many([{"text": t, "namespace": f"t{i}"} for t in texts])
            judge(m, f"t{i}")
    c = apsw.Connection(path)  # what schema 5 looked like
    back_to_schema_7(c)
    c.execute("DROP INDEX links_rate; CREATE INDEX links_feature ON links(feature); "
              "PRAGMA user_version=5")
    before = c.execute("SELECT * FROM links ORDER BY namespace, feature").fetchall()
    c.close()
    with heapmem.open(path, clock=clock) as m:
        assert m.schema_version == SCHEMA_VERSION >= 6
        names = {r[0] for r in m.connection.execute(
            "SELECT name FROM sqlite_schema WHERE tbl_name = 'links' AND type = 'index'")}
        assert "links_rate" in names and "links_feature" not in names
        assert m.connection.execute(
            "SELECT * FROM links ORDER BY namespace, feature").fetchall() == before
        assert m.check().ok
        for i in (2, 0, 5, 3):
            judge(m, f"t{i}")
        m.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
        stored = m.connection.execute("SELECT * FROM links ORDER BY 1, 2").fetchall()
        with m.transaction() as t:
            heapmem.learning.rebuild_pool(t)
        fresh = m.connection.execute("SELECT * FROM links ORDER BY 1, 2").fetchall()
        assert len(stored) == len(fresh)
        for a, b in zip(stored, fresh):
            assert a[:3] == b[:3] and a[5:7] == b[5:7]  # keys, n, support
            for x, y in zip(a[3:5] + a[7:], b[3:5] + b[7:]):
                assert x == (None if y is None else pytest.approx(y, rel=1e-9, abs=1e-12))
        assert m.check().ok


def test_raw_sql_writers_keep_the_index_current(mem):
    """add_many() indexes its rows in one statement with the per-row FTS
    trigger switched off by a meta row that never commits; any other writer
    (here raw SQL) still goes through the trigger."""
    mem.add_many([{"text": "flight to Lisbon", "namespace": "u"}] * 3)
    c = mem.connection
    assert c.execute("SELECT count(*) FROM heapmem_meta WHERE key = 'fts_deferred'"
                     ).fetchall() == [(0,)]
    c.execute("INSERT INTO memories(seq, id, namespace, nstag, text, kind, importance, features,"
              " created_at, ntok) VALUES (100, 'raw', 'u', heap_ns_tag('u'), 'a raw Lisbon row',"
              " 'fact', 1, heap_features('a raw Lisbon row', 'fact', NULL), 0,"
              " heap_ntokens(heap_ns_tag('u')) + heap_ntokens('a raw Lisbon row'))")
    assert "raw" in mem.recall("Lisbon", namespace="u", k=10, track=False).ids
    assert mem.check().ok
    # a failed add_many leaves no flag behind either
    with pytest.raises(heapmem.DuplicateIdError):
        mem.add_many([{"text": "x", "id": "new"}, {"text": "y", "id": "raw"}])
    assert c.execute("SELECT count(*) FROM heapmem_meta WHERE key = 'fts_deferred'"
                     ).fetchall() == [(0,)]
    # a committed flag would silence the trigger for everyone: check() says so
    c.execute("INSERT INTO heapmem_meta VALUES ('fts_deferred', '1')")
    assert any("fts_deferred" in p for p in mem.check().problems)
