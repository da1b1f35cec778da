"""Trust, round two (issue 20): doors where a tenant, a file or a caller
broke isolation, erasure, learning or the one-sentence error promise.  Each
test plays the attack and shows it defeated; RELIABILITY.md's Threats
section names the test beside each door."""
import os

import apsw
import pytest

import heapmem
from heapmem.db import native, schema

from conftest import back_to_schema_7


def _fnv_tag(ns: str) -> str:
    """The tag schema 6 and earlier gave a namespace: a 64-bit FNV-1a of its
    name (offset basis one digit short of FNV's), which a chosen name could
    collide with."""
    h = 1469598103934665603
    for b in ns.encode():
        h = ((h ^ b) * 1099511628211) & (2 ** 64 - 1)
    return f"ns{h:016x}"


# -- 1. a namespace's index tag ------------------------------------------------------

NAMES = ["users\x1fbob", "users\x01bob", "users bob", "usersbob", "Users:bob", "users:bob ",
         "users:bob", "users:bo", "u" * 256, "中文", "ü", "u\u0308", "\x7f", "a\tb", "a b"]


def test_every_name_has_its_own_tag_spelled_from_the_name_itself():
    tags = [native.ns_tag(n) for n in NAMES]
    assert len(set(tags)) == len(NAMES)
    for name, tag in zip(NAMES, tags):
        assert tag.startswith("ns") and tag[2:].isdigit()
        # the tag decodes back to the name: no two names can share one
        raw = bytes(int(tag[i:i + 3]) for i in range(2, len(tag), 3))
        assert raw.decode() == name


def test_fts5_reads_each_tag_as_one_token_the_stemmer_leaves_alone(db):
    for name in NAMES:
        tag = native.ns_tag(name)
        assert db.execute("SELECT heap_ntokens(?)", (tag,)).fetchall()[0][0] == 1
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 "
               "remove_diacritics 2')")
    db.executemany("INSERT INTO t(x) VALUES (?)", [(native.ns_tag(n),) for n in NAMES])
    for name in NAMES:
        assert db.execute("SELECT count(*) FROM t WHERE t MATCH ?",
                          (f'x : "{native.ns_tag(name)}"',)).fetchall()[0][0] == 1


def test_a_name_longer_than_the_limit_gets_no_tag_but_one_sentence(db):
    with pytest.raises(apsw.SQLError, match="heap_ns_tag: a namespace is at most 1024 bytes"):
        db.execute("SELECT heap_ns_tag(?)", ("x" * 1025,)).fetchall()
    with pytest.raises(ValueError, match="at most 1024 bytes"):
        native.ns_tag("x" * 1025)


def _plant(mem, victim_tag_of, attacker: str, victim: str, n: int) -> None:
    """What a collision did: the attacker's memories indexed under the
    victim's tag (written here through raw SQL, as a found collision made
    heapmem itself do)."""
    for i in range(n):
        mem.add(f"lisbon lisbon lisbon flight note {i}", namespace=attacker)
    c = mem.connection
    with mem.transaction():
        c.execute("UPDATE memories SET nstag = ? WHERE namespace = ?",
                  (victim_tag_of(victim), attacker))


def test_a_collided_tag_is_what_broke_isolation_and_check_now_names_it(tmp_path, clock):
    # lexical recall: the attack is on the FTS index's tags (vectors never had them)
    with heapmem.open(str(tmp_path / "a.db"), clock=clock, embedder=None) as mem:
        mem.add("Booked the flight: SFO to LIS", namespace="users:bob")
        before = mem.recall("lisbon flight", namespace="users:bob")
        assert [r.text for r in before] == ["Booked the flight: SFO to LIS"]
        # the attack as it worked: the attacker's rows under the victim's tag
        _plant(mem, native.ns_tag, "users\x1fbob", "users:bob", 61)
        # 61 planted rows take every candidate slot: the victim finds nothing
        assert len(mem.recall("lisbon flight", namespace="users:bob", k=100)) == 0
        report = mem.check()
        assert not report.ok
        assert any("carry another namespace's tag" in p for p in report.problems)


def test_a_chosen_name_cannot_reach_another_tenants_index(tmp_path, clock):
    """The same tenants as the attack, through heapmem's own doors only: the
    attacker's names (control characters included) never move the victim's
    BM25 nor learn which words it holds.  (Lexical recall: with vectors, a
    namespace's own notes would come back as vector candidates.)"""
    with heapmem.open(str(tmp_path / "a.db"), clock=clock, embedder=None) as mem:
        mem.add("Booked the flight: SFO to LIS", namespace="users:bob")
        alone = mem.recall("lisbon flight", namespace="users:bob", track=False)[0]
        for name in NAMES:
            if name != "users:bob":
                for i in range(5):
                    mem.add(f"lisbon flight note {i}", namespace=name)
        with_others = mem.recall("lisbon flight", namespace="users:bob", track=False)
        assert [r.id for r in with_others] == [alone.id]
        assert with_others[0].score == alone.score
        assert with_others[0].relevance == alone.relevance
        for name in NAMES:
            if name != "users:bob":
                got = mem.recall("booked sfo", namespace=name, track=False)
                assert len(got) == 0
        assert mem.check().ok


def test_a_schema_6_store_is_tagged_anew_on_open(tmp_path, clock):
    path = str(tmp_path / "old.db")
    with heapmem.open(path, clock=clock, embedder=None) as mem:
        mem.add("Booked the flight: SFO to LIS", namespace="users:bob")
        mem.add("the moon is far", namespace="users:eve")
    c = apsw.Connection(path)  # what schema 6 wrote: the hashed tags
    c.execute("BEGIN")
    back_to_schema_7(c)
    for seq, ns in c.execute("SELECT seq, namespace FROM memories").fetchall():
        c.execute("UPDATE memories SET nstag = ? WHERE seq = ?", (_fnv_tag(ns), seq))
    c.execute("PRAGMA user_version=6")
    c.execute("COMMIT")
    c.close()
    with heapmem.open(path, clock=clock, embedder=None) as mem:
        assert mem.schema_version == schema.SCHEMA_VERSION
        assert [r.text for r in mem.recall("flight", namespace="users:bob")] == [
            "Booked the flight: SFO to LIS"]
        assert len(mem.recall("flight", namespace="users:eve")) == 0
        assert mem.check().ok


# -- 4. forget racing a tracked recall -----------------------------------------------

def test_a_forget_between_a_recalls_read_and_its_log_leaves_nothing_in_the_log(tmp_path, clock):
    path = str(tmp_path / "a.db")
    with heapmem.open(path, clock=clock) as mem, heapmem.open(path, clock=clock) as other:
        a = mem.add("Booked the flight: SFO to LIS", namespace="users:bob")
        b = mem.add("The flight home is on the 20th", namespace="users:bob")
        write = mem._write
        raced = []

        def forget_first():
            # another process's forget commits after the recall read its
            # candidates and before it logs them
            if not raced:
                raced.append(other.forget([a.id]))
            return write()

        mem._write = forget_first
        res = mem.recall("flight", namespace="users:bob")
        del mem._write
        assert raced == [1] and a.id in [r.id for r in res]
        assert res.recall_id is None  # not tracked: it showed a forgotten memory
        logged = mem.connection.execute("SELECT shown, query FROM recalls").fetchall()
        assert logged == []
        # without the race the same recall is tracked
        again = mem.recall("flight", namespace="users:bob")
        assert [r.id for r in again] == [b.id] and again.recall_id is not None
        assert mem.check().ok


# -- 7. pool settings changed by another process ---------------------------------------

def _feedback_round(mem, tenants, rounds=2):
    for _ in range(rounds):
        for ns in tenants:
            res = mem.recall("when is my flight", namespace=ns)
            mem.feedback(used=[res[0].id], recall_id=res.recall_id)


def test_another_processs_set_pool_is_what_the_next_feedback_pools_by(tmp_path, clock):
    path = str(tmp_path / "a.db")
    tenants = [f"user:{i}" for i in range(10)]
    with heapmem.open(path, clock=clock) as mem:
        for ns in tenants:
            mem.add("Booked the flight: SFO to LIS, departs March 14", namespace=ns)
            mem.add("Flights to Lisbon cost around $700", namespace=ns)
        _feedback_round(mem, tenants[:8], rounds=1)
        with heapmem.open(path, clock=clock) as admin:
            admin.pool.set(min_namespaces=9, trim=4, cap=50)
        assert mem.pool.settings == {"cap": 50.0, "min": 9, "trim": 4}
        _feedback_round(mem, tenants[:8])
        # 8 namespaces back each link: fewer than 9, so nothing is pooled
        links = mem.links()
        assert links and all(r.alpha == r.beta == 0 for r in links)
        assert mem.check().ok
        _feedback_round(mem, tenants[8:])
        assert any(r.alpha > 0 for r in mem.links()) and mem.check().ok
    with heapmem.open(path, clock=clock) as fresh:
        assert fresh.check().ok


# -- 12. special files ---------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "devnull", "directory"])
@pytest.mark.parametrize("readonly", [False, True])
def test_a_special_file_is_refused_in_one_sentence_without_blocking(tmp_path, kind, readonly):
    if kind == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
        what = "a FIFO"
    elif kind == "devnull":
        path, what = os.devnull, "a device"
    else:
        path, what = str(tmp_path), "a directory"
    with pytest.raises(heapmem.HeapmemError, match=f"it is {what}") as e:
        heapmem.open(path, readonly=readonly)
    assert "\n" not in str(e.value)
    with pytest.raises(heapmem.HeapmemError, match=f"it is {what}"):
        heapmem.open("file:" + path, readonly=readonly)


@pytest.mark.parametrize("bad", [None, 3, b"\xff".decode("latin-1").encode("latin-1")[:0]])
def test_a_path_that_is_not_a_path_is_refused(tmp_path, bad, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises((TypeError, ValueError), match="path"):
        heapmem.open(bad)
    assert os.listdir(tmp_path) == []


# -- 13. bad arguments are not a damaged store ----------------------------------------

def _deep(n):
    d = {}
    for _ in range(n):
        d = {"x": d}
    return d


@pytest.mark.parametrize("call, exc, words", [
    (lambda m: m.list("user:maya", offset=2 ** 63), ValueError, "offset must be an integer"),
    (lambda m: m.list("user:maya", limit=2 ** 63), ValueError, "limit must be an integer"),
    (lambda m: m.list("user:maya", limit="3"), TypeError, "limit must be an integer"),
    (lambda m: m.add("x", metadata=_deep(5000)), ValueError, "metadata is nested too deeply"),
])
def test_a_bad_argument_is_named_and_never_called_damage(mem, call, exc, words):
    mem.add("Booked the flight", namespace="user:maya")
    with pytest.raises(exc, match=words) as e:
        call(mem)
    assert not isinstance(e.value, heapmem.CorruptStoreError)
    assert mem.count == 1 and mem.check().ok


def test_a_bug_in_heapmem_surfaces_as_itself(mem, monkeypatch):
    """The net that turns damage into CorruptStoreError covers decoding of
    values read from the file only: an error of heapmem's own code is not
    said to be the file's."""
    mem.add("Booked the flight", namespace="user:maya")
    monkeypatch.setattr(heapmem.store, "log_params", lambda *a: {}["no such key"])
    with pytest.raises(KeyError):
        mem.recall("flight", namespace="user:maya")


# -- 2. a door that serves one namespace checks the recall in the write ----------------

def test_feedback_with_a_namespace_refuses_another_namespaces_recall(mem):
    a = mem.add("Booked the flight: SFO to LIS", namespace="user:maya")
    mem.add("Ben's flight is on Friday", namespace="user:ben")
    theirs = mem.recall("flight", namespace="user:ben")
    for call in (lambda: mem.feedback([], recall_id=theirs.recall_id, namespace="user:maya",
                                      answer="Friday"),
                 lambda: mem.mark_used([theirs[0].id], recall_id=theirs.recall_id,
                                       namespace="user:maya"),
                 lambda: mem.mark_ignored([theirs[0].id], recall_id=theirs.recall_id,
                                          namespace="user:maya")):
        with pytest.raises(ValueError, match="unknown recall_id .* in namespace 'user:maya'"):
            call()
    # without a recall_id, only the namespace's own recalls are looked at
    with pytest.raises(ValueError, match="no tracked recall showed"):
        mem.mark_used([theirs[0].id], namespace="user:maya")
    assert mem.log.events() == []
    mine = mem.recall("flight", namespace="user:maya")
    assert mem.mark_used([a.id], namespace="user:maya").recall_id == mine.recall_id
