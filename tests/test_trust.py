"""Trust (issue 11): a shipped file, an imported prior or one tenant cannot
break heapmem's promises.  Each test reproduces an attack and shows it
defeated; where a defence can be switched off, the attack is also shown to
work without it, so the test can fail."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import apsw
import pytest

import heapmem
from heapmem import ScoringConfig
from heapmem.db import native, schema
from heapmem.io import transfer

T0 = 1_741_910_400


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _store(path, *, close=True):
    """A new user's five memories (the Lisbon scenario), one of them a tool
    result with a URL.  Lexical recall (embedder=None): the attacks below are
    measured against BM25's day-one ranking, where the booking leads."""
    m = heapmem.open(str(path), clock=lambda: T0, embedder=None)
    m.add_many([
        {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am", "id": "booking",
         "namespace": "user:maya"},
        {"text": "Flights to Lisbon from SFO cost around $700 in spring", "id": "quote",
         "kind": "tool_result", "source": "tool", "namespace": "user:maya"},
        {"text": "Lisbon! I'd love to visit Lisbon someday", "id": "wish", "kind": "preference",
         "namespace": "user:maya"},
        {"text": "What is a good neighborhood to stay in Lisbon?", "id": "hood", "kind": "note",
         "namespace": "user:maya"},
        {"text": "Lisbon trip ideas: https://travel.example/lisbon-guide", "id": "spam",
         "kind": "tool_result", "source": "tool", "namespace": "user:maya"},
    ])
    if close:
        m.close()
    return m


def _raw(path):
    """The file through a plain connection: what an attacker can write."""
    c = apsw.Connection(str(path))
    heapmem.load(c)
    return c


# -- a shipped file runs its author's SQL ------------------------------------------


def test_a_file_with_an_extra_trigger_is_refused_untouched(tmp_path):
    path = tmp_path / "shipped.db"
    _store(path)
    c = _raw(path)
    c.execute("CREATE TABLE loot(text TEXT)")
    c.execute("CREATE TRIGGER exfiltrate AFTER INSERT ON memories BEGIN "
              "INSERT INTO loot VALUES (new.text); END")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    before = _digest(path)
    for readonly in (False, True):
        with pytest.raises(heapmem.UnsafeStoreError, match="'loot'|'exfiltrate'"):
            heapmem.open(str(path), readonly=readonly)
    assert _digest(path) == before
    # and without the check, it fires on an ordinary add(): what the check prevents
    c = _raw(path)
    c.execute("INSERT INTO memories(seq, id, namespace, nstag, text, kind, importance, features, "
              "created_at) VALUES (9, 'x', 'user:maya', heap_ns_tag('user:maya'), 'secret', "
              "'fact', 1, '', 0)")
    assert c.execute("SELECT text FROM loot").fetchall() == [("secret",)]


def test_a_changed_heapmem_trigger_is_refused(tmp_path):
    """Not an extra object: one of heapmem's own, with the author's SQL."""
    path = tmp_path / "shipped.db"
    _store(path)
    c = _raw(path)
    c.execute("DROP TRIGGER namespaces_ai")
    c.execute("CREATE TRIGGER namespaces_ai AFTER INSERT ON memories BEGIN "
              "UPDATE memories SET namespace = 'user:eve' WHERE seq = new.seq; END")
    c.close()
    with pytest.raises(heapmem.UnsafeStoreError, match="trigger 'namespaces_ai' differs"):
        heapmem.open(str(path))


def test_an_older_file_with_a_trigger_is_refused_before_it_migrates(tmp_path):
    """A file claiming schema 2 would be migrated, and the migration's UPDATE
    would fire the file's triggers: it is refused first, and not modified."""
    path = tmp_path / "old.db"
    c = apsw.Connection(str(path))
    heapmem.load(c)
    for v in range(2):
        c.execute(schema.MIGRATIONS[v])
    c.execute("INSERT INTO heapmem_meta VALUES ('format', 'heapmem'), ('created_with', 'old')")
    c.execute("CREATE TABLE loot(text TEXT)")
    c.execute("CREATE TRIGGER grab AFTER UPDATE ON memories BEGIN "
              "INSERT INTO loot VALUES (new.text); END")
    c.execute("INSERT INTO memories(seq, id, namespace, nstag, text, kind, importance, features, "
              "created_at) VALUES (1, 'm1', 'a', heap_ns_tag('a'), 'private words', 'fact', 1, "
              "'', 0)")
    c.execute("PRAGMA user_version=2")
    c.close()
    before = _digest(path)
    with pytest.raises(heapmem.UnsafeStoreError, match="not part of heapmem's schema 2"):
        heapmem.open(str(path))
    assert _digest(path) == before
    assert _raw(path).execute("SELECT count(*) FROM loot").fetchall() == [(0,)]


def test_a_view_named_like_a_heapmem_table_never_runs(tmp_path):
    """A view in place of a table would run on every open (readonly included)
    for as long as its author wants; it is refused from sqlite_schema alone."""
    path = tmp_path / "view.db"
    _store(path)
    c = _raw(path)
    c.execute("ALTER TABLE heapmem_meta RENAME TO meta_real")
    c.execute("CREATE VIEW heapmem_meta AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
              "SELECT i + 1 FROM n WHERE i < 10000000) SELECT 'format' AS key, "
              "'heapmem' AS value FROM n WHERE i = 10000000")
    c.close()
    for readonly in (False, True):
        with pytest.raises(heapmem.UnsafeStoreError, match="'meta_real'|'heapmem_meta'"):
            heapmem.open(str(path), readonly=readonly)


def test_opening_has_a_deadline(tmp_path, monkeypatch):
    path = tmp_path / "a.db"
    _store(path)
    monkeypatch.setattr(schema, "OPEN_DEADLINE", -1.0)
    with pytest.raises(heapmem.UnsafeStoreError, match="took longer than"):
        heapmem.open(str(path), verify=True)
    monkeypatch.undo()
    with heapmem.open(str(path), verify=True) as m:  # a sound file passes quick_check
        assert m.count == 5


def test_every_connection_trusts_nothing_in_the_file(tmp_path):
    with _store(tmp_path / "a.db", close=False) as m:
        c = m.connection
        assert c.execute("PRAGMA trusted_schema").fetchall() == [(0,)]
        assert c.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) == 1
        assert c.execute("PRAGMA cell_size_check").fetchall() == [(1,)]
        # DEFENSIVE: SQL cannot rewrite the schema behind heapmem's back
        with pytest.raises(apsw.Error):
            c.execute("PRAGMA writable_schema=ON")
            c.execute("UPDATE sqlite_schema SET sql = 'x' WHERE name = 'memories'")


def test_check_reports_objects_added_after_open(tmp_path):
    with _store(tmp_path / "a.db", close=False) as m:
        assert m.check().ok
        m.connection.execute("CREATE TABLE extra(x)")
        r = m.check()
        assert not r.ok and any("'extra'" in p for p in r.problems)


def test_a_corrupt_file_fails_verify(tmp_path):
    path = tmp_path / "a.db"
    m = _store(path, close=False)
    m.add_many([{"text": f"filler memory number {i} " * 20, "namespace": "n"}
                for i in range(300)])
    m.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # scribble over a page in the middle of the file
        f.seek(size // 2)
        f.write(b"\xff" * 2048)
    with pytest.raises((heapmem.CorruptStoreError, heapmem.NotAStoreError)):
        heapmem.open(str(path), verify=True)


# -- a links-only prior ----------------------------------------------------------


def _prior(path, rows, blank=False):
    with open(path, "w") as f:
        f.write(json.dumps({"heapmem": "links", "format": 1, "version": "x", "count": len(rows)})
                + "\n")
        for r in rows:
            f.write(json.dumps(r) + "\n" + ("\n" if blank else ""))


HIJACK = [{"feature": "when/url:1", "qtype": "when", "alpha": 1e15, "beta": 0.0, "n": 1},
          {"feature": "when/url:0", "qtype": "when", "alpha": 0.0, "beta": 1e15, "n": 1},
          {"feature": "when/base", "qtype": "when", "alpha": 1e15, "beta": 1e15, "n": 1}]


def test_a_three_row_prior_cannot_hijack_every_namespace(tmp_path):
    m = _store(tmp_path / "a.db", close=False)
    q = "When is my flight to Lisbon?"
    assert m.recall(q, namespace="user:maya", track=False)[0].id == "booking"
    _prior(tmp_path / "prior.jsonl", HIJACK)
    transfer.import_file(m, str(tmp_path / "prior.jsonl"))
    assert m.recall(q, namespace="user:maya", track=False)[0].id == "booking"
    # each link of a prior weighs PRIOR_MAX_WEIGHT observations at most
    for r in m.links():
        assert r.alpha + r.beta <= schema.PRIOR_MAX_WEIGHT * (1 + 1e-9)
    # the same prior again, spelled otherwise (a blank line, another key order), is refused
    _prior(tmp_path / "again.jsonl", [dict(reversed(list(r.items()))) for r in HIJACK],
           blank=True)
    with pytest.raises(ValueError, match="already merged"):
        transfer.import_file(m, str(tmp_path / "again.jsonl"))
    assert m.check().ok, m.check().problems
    m.close()


def test_without_its_bound_the_prior_would_hijack(tmp_path, monkeypatch):
    """The same file with the per-link bound lifted flips the ranking: the
    bound is what defeats it."""
    monkeypatch.setattr(schema, "PRIOR_MAX_WEIGHT", 1e30)
    m = _store(tmp_path / "a.db", close=False)
    _prior(tmp_path / "prior.jsonl", HIJACK)
    transfer.import_file(m, str(tmp_path / "prior.jsonl"))
    assert m.recall("When is my flight to Lisbon?", namespace="user:maya",
                    track=False)[0].id == "spam"
    m.close()


# -- one tenant steers the others --------------------------------------------------

# the scenario bench/pool_attack.py measures, built by its own code
_spec = importlib.util.spec_from_file_location(
    "pool_attack", Path(__file__).resolve().parent.parent / "bench" / "pool_attack.py")
pool_attack = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pool_attack)
VICTIM, Q = pool_attack.VICTIM, pool_attack.Q
_tenants, _attack = pool_attack.tenants, pool_attack.attack


@pytest.mark.parametrize("attackers, rounds, honest", [
    (1, 10, 0), (1, 300, 0), (2, 300, 0), (2, 300, 1), (2, 1000, 3)])
def test_one_or_two_tenants_cannot_flip_another_namespaces_top_result(tmp_path, attackers,
                                                                       rounds, honest):
    m = _tenants(tmp_path / "t.db", attackers, honest=honest)
    assert m.recall(Q, namespace=VICTIM, track=False)[0].id == "real"
    _attack(m, attackers, rounds, honest=honest)
    res = m.recall(Q, namespace=VICTIM, track=False)
    assert res[0].id == "real"
    assert m.check().ok, m.check().problems
    # auto-tune ran at its points during the attack (the store's weight is
    # every tenant's) and the attack's feedback moved it nowhere
    point, _ = schema.autotune_state(m.connection)
    assert point >= (30 if attackers * rounds >= 30 else 0)
    assert m.config.w_usefulness == heapmem.ScoringConfig().w_usefulness
    # with a plain capped sum instead (no minimum support, no trimming), it works
    m.pool.set(min_namespaces=1, trim=0)
    assert m.recall(Q, namespace=VICTIM, track=False)[0].id == "spam"
    assert m.check().ok, m.check().problems
    m.close()


def test_set_pool_refuses_settings_that_leave_nothing_to_pool(tmp_path):
    m = _tenants(tmp_path / "t.db", 0)
    with pytest.raises(ValueError, match="at least 2 x trim \\+ 1"):
        m.pool.set(min_namespaces=2, trim=2)
    with pytest.raises(ValueError, match="cap must be a positive number"):
        m.pool.set(cap=0)
    assert m.pool.settings == schema.POOL_DEFAULTS
    m.close()


def test_honest_transfer_from_many_namespaces_still_works(tmp_path):
    """Five namespaces that all find the dated answer useful teach a new
    namespace to prefer it: pooled learning still transfers (agreeing
    namespaces lose nothing to the trimming)."""
    m = _tenants(tmp_path / "t.db", 0, honest=5)
    before = m.recall(Q, namespace=VICTIM, track=False)
    _attack(m, 0, 0, honest=5)
    after = m.recall(Q, namespace=VICTIM, track=False)
    assert after[0].id == "real"

    def real(r):
        return next(x for x in r if x.id == "real")
    assert real(after).usefulness > real(before).usefulness
    assert any(row.namespaces >= 5 for row in m.links(VICTIM))
    m.close()


def test_links_say_how_many_namespaces_back_them(tmp_path):
    m = _tenants(tmp_path / "t.db", 0, honest=3)
    _attack(m, 0, 0, honest=3)
    pooled = {r.feature: r for r in m.links()}
    assert pooled["base"].namespaces == 3
    assert pooled["base"].alpha == pooled["base"].beta == 0  # fewer than 5: nothing pooled
    seen = {r.feature: r.namespaces for r in m.links("tenant0")}
    assert seen["base"] == 2  # the others
    m.close()


# -- a full export from elsewhere ------------------------------------------------


def _export(tmp_path, edit):
    src = _store(tmp_path / "src.db", close=False)
    res = src.recall("When is my flight to Lisbon?", namespace="user:maya")
    src.feedback(used=["booking"], recall_id=res.recall_id)
    path = tmp_path / "export.jsonl"
    transfer.export(src, str(path))
    src.close()
    lines = [json.loads(x) for x in open(path)]
    edit(lines)
    with open(path, "w") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    return str(path)


def _meta(lines, key, value):
    lines[0]["counts"]["meta"] += 1
    lines.insert(1, {"type": "meta", "key": key, "value": value})


def test_an_import_with_a_bad_tuned_row_is_refused_and_the_store_still_opens(tmp_path):
    path = _export(tmp_path, lambda ls: _meta(ls, "tuned", json.dumps({"bogus_field": 1})))
    dst = heapmem.open(str(tmp_path / "dst.db"))
    with pytest.raises(ValueError, match="not a valid ScoringConfig"):
        transfer.import_file(dst, path)
    dst.close()
    with heapmem.open(str(tmp_path / "dst.db")) as again:
        assert again.count == 0


def test_an_import_never_retunes_a_store_in_use(tmp_path):
    evil = ScoringConfig(w_usefulness=100, w_relevance=0).to_dict()
    path = _export(tmp_path, lambda ls: _meta(ls, "tuned", json.dumps(evil)))
    dst = heapmem.open(str(tmp_path / "dst.db"))
    dst.add("something of my own", namespace="me")
    rep = transfer.import_file(dst, path)
    assert rep.notes and "not applied" in rep.notes[0]
    dst.close()
    with heapmem.open(str(tmp_path / "dst.db")) as again:
        assert again.config == ScoringConfig()


def test_an_import_refuses_unknown_meta_keys(tmp_path):
    path = _export(tmp_path, lambda ls: _meta(ls, "surprise", "1"))
    with heapmem.open(str(tmp_path / "dst.db")) as dst:
        with pytest.raises(ValueError, match="unknown meta key 'surprise'"):
            transfer.import_file(dst, path)
        assert dst.count == 0


def test_an_import_works_features_out_from_the_text(tmp_path):
    def fake(ls):
        for x in ls:
            if x.get("type") == "memory":
                x["features"] = " ".join(f"made:{i}" for i in range(300))
    path = _export(tmp_path, fake)
    with heapmem.open(str(tmp_path / "dst.db"), embedder=None) as dst:
        transfer.import_file(dst, path)
        assert dst.get("booking").features == tuple(native.features(
            dst.get("booking").text, "fact", None).split())
        assert dst.recall("When is my flight to Lisbon?", namespace="user:maya", track=False) \
            .ids == ["booking", "quote", "wish", "hood", "spam"]
        assert dst.check().ok


@pytest.mark.parametrize("edit, err", [
    (lambda ls: _meta(ls, "last_seq", str(2 ** 63 - 1)), "must be a whole number"),
    (lambda ls: ls.insert(1, {"type": "meta", "key": "k", "value": "[" * 100000}),
     "nests JSON too deeply|is not valid JSON|unknown meta key"),
    (lambda ls: [x.update(alpha="lots") for x in ls if x.get("type") == "link"],
     "alpha must be a number"),
    (lambda ls: [x.update(deltas=[["base", 5.0, 0.0]]) for x in ls if x.get("type") == "event"],
     "credits from 0 to 1"),
])
def test_corrupted_values_get_a_clear_error_and_nothing_is_written(tmp_path, edit, err):
    path = _export(tmp_path, edit)
    with heapmem.open(str(tmp_path / "dst.db")) as dst:
        with pytest.raises(ValueError, match=err):
            transfer.import_file(dst, path)
        assert dst.count == 0 and dst.check().ok


def test_a_negative_user_version_is_not_a_store(tmp_path):
    path = tmp_path / "neg.db"
    c = apsw.Connection(str(path))
    c.execute("CREATE TABLE heapmem_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("PRAGMA user_version=-1")
    c.close()
    with pytest.raises(heapmem.NotAStoreError, match="schema version -1"):
        heapmem.open(str(path))


# -- damaged values in the file: every failure is heapmem's own ---------------------

DAMAGE = {
    "link alpha is text": "UPDATE links SET alpha = 'abc'",
    "importance is negative": "UPDATE memories SET importance = -1",
    "importance is text": "UPDATE memories SET importance = 'x'",
    "recall log is not JSON": "UPDATE recalls SET shown = 'not json', ages = '[', features = '{'",
    "last_seq at the top of int64": "UPDATE heapmem_meta SET value = '9223372036854775807' "
                                    "WHERE key = 'last_seq'",
    "tuned is not JSON": "INSERT INTO heapmem_meta VALUES ('tuned', '{bad')",
    "tuned has an unknown field": "INSERT INTO heapmem_meta VALUES ('tuned', '{\"nope\": 1}')",
    "event deltas are not JSON": "UPDATE events SET deltas = 'nope'",
    "300 made-up features": "UPDATE memories SET features = (WITH RECURSIVE n(i) AS (SELECT 1 "
                            "UNION ALL SELECT i + 1 FROM n WHERE i < 300) SELECT group_concat("
                            "'made:' || i, ' ') FROM n)",
    "namespace statistics negative": "UPDATE namespaces SET docs = -5, tokens = -7",
    "pool settings are text": "UPDATE heapmem_meta SET value = 'lots' WHERE key = 'pool'",
    "pool settings are odd": "UPDATE heapmem_meta SET value = '{\"cap\": -1, \"trim\": 99}' "
                             "WHERE key = 'pool'",
    "ages are huge": "UPDATE recalls SET ages = '[1e999, 1e999, 1e999, 1e999, 1e999]'",
}


@pytest.mark.parametrize("what", sorted(DAMAGE))
def test_damaged_values_raise_heapmem_errors_only(tmp_path, what):
    path = tmp_path / "d.db"
    m = _store(path, close=False)
    res = m.recall("When is my flight to Lisbon?", namespace="user:maya")
    m.feedback(used=[res[0].id], recall_id=res.recall_id)
    res2 = m.recall("When is my flight to Lisbon?", namespace="user:maya")
    m.add("Remember it: forget me later", id="later", namespace="user:maya")
    m.close()
    c = apsw.Connection(str(path))
    c.execute("INSERT OR IGNORE INTO heapmem_meta VALUES ('last_seq', '0')")
    c.execute(DAMAGE[what])
    c.close()

    def attempt(fn):
        try:
            fn()
        except heapmem.HeapmemError:
            pass  # a clear error of heapmem's own
        # anything else (apsw.*, KeyError, OverflowError, ValueError ...) fails the test

    try:
        m = heapmem.open(str(path), clock=lambda: T0)
    except heapmem.HeapmemError:
        m = heapmem.open(str(path), clock=lambda: T0, config=ScoringConfig())
    with m:
        report = m.check()  # never raises
        assert isinstance(report.ok, bool)
        attempt(lambda: m.recall("When is my flight to Lisbon?", namespace="user:maya"))
        attempt(lambda: m.feedback(used=[res2[0].id], recall_id=res2.recall_id))
        attempt(lambda: m.add("a new memory after the damage", namespace="user:maya"))
        attempt(lambda: m.add_many([{"text": "two more", "namespace": "x"}] * 2))
        attempt(lambda: m.links())
        attempt(lambda: m.links("user:maya"))
        attempt(lambda: m.stats())
        attempt(lambda: m.tune(deploy=False))
        attempt(lambda: m.list("user:maya"))
        attempt(lambda: m.log.judged())
        attempt(lambda: m.log.events())
        attempt(lambda: transfer.export(m, str(tmp_path / "out.jsonl")))
        attempt(lambda: m.forget(["later"]))


@pytest.mark.parametrize("version", sorted(schema.MIGRATIONS.keys() | {schema.SCHEMA_VERSION}))
def test_the_known_fingerprints_are_heapmems_schemas(version):
    """The fast path of the check on open: each schema version's fingerprint
    is what heapmem's own steps create (a DDL change must update it)."""
    if version == 0:
        return
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    for v in range(version):
        c.execute(schema.MIGRATIONS[v])
    rows = c.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema").fetchall()
    assert schema.KNOWN_SCHEMAS[version] == schema.fingerprint(rows)
    assert schema.foreign_objects(rows, version) == []
    # one changed object changes the fingerprint: the full comparison then runs
    rows = [r if r[1] != "memories_ai" else (r[0], r[1], r[2], r[3] + " ") for r in rows]
    rows.append(("view", "v", "v", "CREATE VIEW v AS SELECT 1"))
    assert schema.fingerprint(rows) != schema.KNOWN_SCHEMAS[version]
    assert schema.foreign_objects(rows, version) == [
        "view 'v' (on 'v') is not part of heapmem's schema %d" % version]


def test_check_catches_what_raw_sql_writes_break(tmp_path):
    """`heapmem sql --write` bypasses heapmem's invariants; check() reports
    what such writes break."""
    m = _store(tmp_path / "a.db", close=False)
    res = m.recall("When is my flight to Lisbon?", namespace="user:maya")
    m.feedback(used=["booking"], recall_id=res.recall_id)
    assert m.check().ok
    cases = {
        "UPDATE memories SET ntok = 0 WHERE id = 'quote'": "token count",
        "INSERT INTO links VALUES ('user:x', 'made:up', '', 1, 0, 1, 0, 0, 0, NULL, NULL)":
            "no events behind it",
        "DELETE FROM events WHERE position = 0": "the event log gives",
        "UPDATE heapmem_meta SET value = '{\"nope\": 1}' WHERE key = 'pool'": None,
        "INSERT INTO heapmem_meta VALUES ('tuned', '{\"w_usefulness\": -5}')": "'tuned'",
        "INSERT INTO heapmem_meta VALUES ('mine', 'x')": "unknown key 'mine'",
    }
    for statement, expect in cases.items():
        with m.transaction() as w:
            w.execute("SAVEPOINT s")
            w.execute(statement)
            report = m.check()
            w.execute("ROLLBACK TO s")
            w.execute("RELEASE s")
        if expect is not None:
            assert not report.ok and any(expect in p for p in report.problems), \
                (statement, report.problems)
    assert m.check().ok
    m.close()


def _links_table(m):
    m.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
    return {(r[0], r[1]): r[2:] for r in m.connection.execute(
        "SELECT namespace, feature, alpha, beta, n, support, pool_alpha, pool_beta, low_rate, "
        "high_rate FROM links ORDER BY 1, 2")}


def _assert_pool_as_afresh(m):
    stored = _links_table(m)
    with m.transaction() as c:
        heapmem.learning.rebuild_pool(c)
    fresh = _links_table(m)
    assert stored.keys() == fresh.keys()
    for key in stored:
        assert stored[key][2:4] == fresh[key][2:4], key  # n, support exactly
        for x, y in zip(stored[key][:2] + stored[key][4:], fresh[key][:2] + fresh[key][4:]):
            assert x == (None if y is None else pytest.approx(y, rel=1e-9, abs=1e-9)), key
    assert m.check().ok, m.check().problems


@pytest.mark.parametrize("seed,cap,trim,least", [(0, 300, 2, 5), (1, 3, 1, 3), (2, 2, 2, 6),
                                                 (3, 5, 0, 1)])
def test_the_pool_stays_as_afresh_while_namespaces_join(tmp_path, seed, cap, trim, least):
    """Namespaces join one by one (a feature reaches enough of them to be
    pooled, then more), the rates cross the trim boundaries back and forth
    (a small cap, every kind of judgement), and many rows tie: after every
    few feedbacks the stored pool and each namespace's share are what
    working it out from scratch gives."""
    import random
    rnd = random.Random(seed)
    m = heapmem.open(str(tmp_path / "p.db"), clock=lambda: T0)
    m.pool.set(cap=cap, min_namespaces=least, trim=trim)
    texts = ["Dentist appointment on Tuesday at 3pm", "Dentist coupons at https://d.example",
             "I would like a dentist I trust", "Dentist costs $90 a visit",
             "The dentist said floss twice a day", "Maya said the dentist moved on 2024-03-02"]
    joined: list[str] = []
    for step in range(160):
        if step % 12 == 0 and len(joined) < 13:
            ns = f"t{len(joined):02d}"
            m.add_many([{"text": t, "namespace": ns, "id": f"{ns}-{j}",
                         "source": "user" if j % 2 else "maya"} for j, t in enumerate(texts)])
            joined.append(ns)
        ns = rnd.choice(joined)
        q = rnd.choice(["When is my dentist appointment?", "Who is my dentist?",
                        "How much does the dentist cost?"])
        res = m.recall(q, namespace=ns, k=4)
        kind = rnd.randrange(4)
        if kind == 0:
            m.feedback(used=[rnd.choice(res.ids)], recall_id=res.recall_id)
        elif kind == 1:
            m.mark_ignored(res.ids[:rnd.randrange(1, len(res.ids) + 1)],
                           recall_id=res.recall_id)
        elif kind == 2:
            m.feedback(recall_id=res.recall_id, answer=rnd.choice(res).text)
        else:
            m.mark_used(res.ids[-1:], recall_id=res.recall_id)
        if step % 40 == 39:
            _assert_pool_as_afresh(m)
    _assert_pool_as_afresh(m)
    m.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_feedback_keeps_the_pool_equal_to_working_it_out_afresh(tmp_path, seed):
    """Feedback updates pooled rows in place or from the rows around their
    trim boundaries; after any sequence, the pool (and each namespace's share)
    is what working it out from scratch gives, and check() agrees."""
    import random
    rnd = random.Random(seed)
    m = heapmem.open(str(tmp_path / "p.db"), clock=lambda: T0)
    texts = ["Dentist appointment on Tuesday at 3pm", "Dentist coupons at https://d.example",
             "I would like a dentist I trust", "Dentist costs $90 a visit",
             "The dentist said floss twice a day"]
    namespaces = [f"t{i}" for i in range(9)]
    for ns in namespaces:
        m.add_many([{"text": t, "namespace": ns, "id": f"{ns}-{j}"} for j, t in enumerate(texts)])
    for _ in range(150):
        ns = rnd.choice(namespaces)
        res = m.recall("When is my dentist appointment?", namespace=ns, k=5)
        m.feedback(used=[rnd.choice(res.ids)], recall_id=res.recall_id)
    m.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
    stored = {(r[0], r[1]): r[2:] for r in m.connection.execute(
        "SELECT namespace, feature, alpha, beta, n, support, pool_alpha, pool_beta "
        "FROM links ORDER BY 1, 2")}
    with m.transaction() as c:
        heapmem.learning.rebuild_pool(c)
    fresh = {(r[0], r[1]): r[2:] for r in m.connection.execute(
        "SELECT namespace, feature, alpha, beta, n, support, pool_alpha, pool_beta "
        "FROM links ORDER BY 1, 2")}
    assert stored.keys() == fresh.keys()
    for key in stored:
        assert stored[key][2:4] == fresh[key][2:4], key  # n, support exactly
        for x, y in zip(stored[key][:2] + stored[key][4:], fresh[key][:2] + fresh[key][4:]):
            assert x == pytest.approx(y, rel=1e-9, abs=1e-9), key
    assert m.check().ok, m.check().problems
    m.close()
