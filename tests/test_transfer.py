"""Export and import (heapmem.io.transfer): a lossless round trip, merging, the
links-only prior, and bad files refused with nothing written."""
import io
import json

import numpy as np
import pytest

import heapmem
from heapmem.db import schema
from heapmem.io import transfer

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
DAY = 86400.0
TABLES = ("memories", "recalls", "events", "links", "vectors")


def fixed(t=T):
    return lambda: t


def populate(mem):
    """Two users, feedback, a superseded key, metadata, a forgotten memory."""
    mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", source="maya",
            namespace="user:maya", created_at=T - 20 * DAY, metadata={"trip": "lisbon", "n": 1})
    mem.add("Lisbon! I'd love to visit Lisbon someday", kind="preference",
            namespace="user:maya", created_at=T - 5 * DAY)
    mem.add("Flights to Lisbon from SFO cost around $700 in spring", kind="tool_result",
            source="tool", namespace="user:maya", created_at=T - 2 * DAY)
    mem.add("Seat preference: aisle", kind="preference", key="seat", namespace="user:maya",
            created_at=T - 9 * DAY)
    mem.add("Seat preference: window, always", kind="preference", key="seat",
            namespace="user:maya", created_at=T - 1 * DAY, importance=2.5)
    mem.add("Dentist appointment confirmed for Tuesday at 3:15pm", namespace="user:ana",
            created_at=T - 6 * DAY)
    mem.add("Dentist appointments nearby start at $90", kind="tool_result", source="tool",
            namespace="user:ana", created_at=T - 1 * DAY)
    gone = mem.add("Temporary dentist note to forget", kind="note", namespace="user:ana")
    r = mem.recall("When is my dentist appointment?", namespace="user:ana")
    mem.feedback(used=[r.ids[0]], recall_id=r.recall_id)
    r = mem.recall("When is my flight to Lisbon?", namespace="user:maya")
    booking = [x.id for x in r if "Booked" in x.text][0]
    mem.mark_used([booking], recall_id=r.recall_id)
    mem.recall("Which seat do I like?", namespace="user:maya")  # logged, unjudged
    mem.forget([gone.id])


def dump(mem):
    c = mem.connection
    c.execute("SELECT heap_fold_pool()")  # the pooled layer's pending changes, into its rows
    out = {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES
           if c.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (t,)).fetchall()}
    # (the file's own records, which an export does not carry: created_with, and
    # auto-tune's place on its schedule)
    out["meta"] = c.execute("SELECT key, value FROM heapmem_meta WHERE key NOT IN (?, ?) "
                            "ORDER BY key", (schema.META_CREATED_WITH,
                                             schema.META_AUTOTUNE)).fetchall()
    return out


QUERIES = [("When is my flight to Lisbon?", "user:maya"), ("Which seat do I like?", "user:maya"),
           ("When is my dentist appointment?", "user:ana"), ("dentist prices", "user:ana")]


def rankings(mem):
    return [[(r.id, r.score, r.explain()) for r in mem.recall(q, namespace=ns, k=10, track=False)]
            for q, ns in QUERIES]


@pytest.fixture
def src(tmp_path):
    m = heapmem.open(str(tmp_path / "src.db"), clock=fixed())
    populate(m)
    yield m
    m.close()


def test_round_trip_is_lossless(src, tmp_path):
    counts = transfer.export(src, str(tmp_path / "x.jsonl"))
    assert counts["memories"] == 7 and counts["events"] > 0 and counts["links"] > 0
    with heapmem.open(str(tmp_path / "new.db"), clock=fixed()) as new:
        rep = transfer.import_file(new, str(tmp_path / "x.jsonl"))
        assert (rep.kind, rep.memories, rep.seq_offset, rep.recall_offset) == ("export", 7, 0, 0)
        assert dump(new) == dump(src)
        assert new.check().ok
        assert rankings(new) == rankings(src)
        assert new.links("user:maya") == src.links("user:maya")
        # a second export of the copy is the same file, byte for byte
        transfer.export(new, str(tmp_path / "y.jsonl"))
    assert (tmp_path / "x.jsonl").read_bytes() == (tmp_path / "y.jsonl").read_bytes()


def test_the_copy_goes_on_like_the_original(src, tmp_path):
    """Recall ids, pending feedback and id numbering carry over."""
    transfer.export(src, str(tmp_path / "x.jsonl"))
    with heapmem.open(str(tmp_path / "new.db"), clock=fixed()) as new:
        transfer.import_file(new, str(tmp_path / "x.jsonl"))
        for m in (src, new):
            rid = m.connection.execute("SELECT max(id) FROM recalls").fetchall()[0][0]
            shown = json.loads(m.connection.execute("SELECT shown FROM recalls WHERE id = ?",
                                                    (rid,)).fetchall()[0][0])
            m.feedback(used=[shown[0]], recall_id=rid)
            m.add("A new memory after the copy", namespace="user:maya")
        assert dump(new) == dump(src)  # same ids for new memories: m9, never the forgotten m8
        assert src.get("m9") is not None and src.get("m8") is None


def test_export_to_an_open_file_and_stdin_style_import(src, tmp_path):
    buf = io.StringIO()
    transfer.export(src, buf)
    lines = buf.getvalue().splitlines()
    header = json.loads(lines[0])
    assert header["heapmem"] == "export" and header["format"] == 1
    assert [json.loads(x)["type"] for x in lines[1:]] == sorted(
        [json.loads(x)["type"] for x in lines[1:]],
        key=["meta", "memory", "vector", "recall", "event", "link"].index)
    with heapmem.open(str(tmp_path / "new.db"), clock=fixed()) as new:
        transfer.import_file(new, io.BytesIO(buf.getvalue().encode()))
        assert dump(new) == dump(src)


def test_import_merges_into_a_store_with_data(src, tmp_path):
    transfer.export(src, str(tmp_path / "x.jsonl"))
    with heapmem.open(str(tmp_path / "other.db"), clock=fixed()) as other:
        other.add("Train ticket: London to Paris, leaves June 2 at 7:01am", id="t1",
                  namespace="user:ben")
        r = other.recall("When is my train?", namespace="user:ben")
        other.feedback(used=["t1"], recall_id=r.recall_id)
        before = {ln.feature: (ln.alpha, ln.beta) for ln in other.links()}
        rep = transfer.import_file(other, str(tmp_path / "x.jsonl"))
        assert rep.seq_offset == 1 and rep.recall_offset == 1
        assert other.check().ok
        assert other.count == 8 and other.get("t1") is not None
        src_links = {ln.feature: (ln.alpha, ln.beta) for ln in src.links()}
        for ln in other.links():
            a0, b0 = before.get(ln.feature, (0, 0))
            a1, b1 = src_links.get(ln.feature, (0, 0))
            assert ln.alpha == pytest.approx(a0 + a1) and ln.beta == pytest.approx(b0 + b1)
        # the imported recalls keep working under their shifted ids
        assert [x.id for x in other.recall("When is my dentist appointment?",
                                            namespace="user:ana", track=False)] == \
            [x.id for x in src.recall("When is my dentist appointment?", namespace="user:ana",
                                      track=False)]
        # and the same file again collides: nothing is written
        snap = dump(other)
        with pytest.raises(ValueError, match="already in the store"):
            transfer.import_file(other, str(tmp_path / "x.jsonl"))
        assert dump(other) == snap


def _bad(tmp_path, lines):
    p = tmp_path / "bad.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" if not isinstance(x, str) else x + "\n"
                         for x in lines))
    return str(p)


@pytest.mark.parametrize("mutate, message", [
    (lambda L: ["not json at all"] + L[1:], "not a heapmem export"),
    (lambda L: [], "is empty"),
    (lambda L: [dict(L[0], format=99)] + L[1:], "export format 99"),
    (lambda L: [dict(L[0], schema=999)] + L[1:], "newer than"),
    (lambda L: L[:-1], "incomplete"),
    (lambda L: L[:1] + ["{broken"] + L[1:], "not valid JSON"),
    (lambda L: L[:1] + [[1, 2]] + L[1:], "not a JSON object"),
    (lambda L: L[:1] + list(reversed(L[1:])), "in order"),
    (lambda L: [dict(x, importance=11) if x.get("type") == "memory" else x for x in L],
     "importance"),
    (lambda L: [dict(x, text="") if x.get("type") == "memory" else x for x in L], "text"),
    (lambda L: [dict(x, namespace="*") if x.get("type") == "memory" else x for x in L],
     "reserved"),
    (lambda L: [dict(x, recall_id=999) if x.get("type") == "event" else x for x in L],
     "not in the file"),
    (lambda L: [dict(x, alpha=x["alpha"] + 1) if x.get("type") == "link" else x for x in L],
     "does not match"),
    (lambda L: [dict(x, deltas="oops") if x.get("type") == "event" else x for x in L],
     "deltas"),
    (lambda L: [dict(x, type="mystery") if x.get("type") == "recall" else x for x in L],
     "unknown record type"),
    (lambda L: L[:1] + [{"type": "meta", "key": "fts_deferred", "value": "1"}] + L[1:],
     "heapmem's own"),
])
def test_bad_files_are_refused_and_nothing_is_written(src, tmp_path, mutate, message):
    buf = io.StringIO()
    transfer.export(src, buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    path = _bad(tmp_path, mutate(lines))
    with heapmem.open(str(tmp_path / "new.db"), clock=fixed()) as new:
        new.add("already here", id="keep")
        snap = dump(new)
        with pytest.raises(ValueError, match=message):
            transfer.import_file(new, path)
        assert dump(new) == snap and new.check().ok


def test_missing_files_and_folders(src, tmp_path):
    with pytest.raises(ValueError, match="no file"):
        transfer.import_file(src, str(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match="folder"):
        transfer.import_file(src, str(tmp_path))
    with pytest.raises(ValueError, match="does not exist"):
        transfer.export(src, str(tmp_path / "no" / "such" / "x.jsonl"))
    assert not (tmp_path / "no").exists()


def test_links_only_export_holds_no_text_or_ids(src, tmp_path):
    n = transfer.export_links(src, str(tmp_path / "links.jsonl"))
    lines = (tmp_path / "links.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["heapmem"] == "links" and len(lines) == n + 1
    body = "\n".join(lines[1:])
    for it in [src.get(f"m{i}") for i in range(1, 8)]:
        assert it.text not in body and f'"{it.id}"' not in body
        for word in it.text.split():
            if len(word) > 4 and word.isalpha() and word.lower() not in ("entity",):
                assert word not in body, word
    assert "user:" not in body and "Lisbon" not in body
    rows = [json.loads(x) for x in lines[1:]]
    assert all(set(r) == {"feature", "qtype", "alpha", "beta", "n"} for r in rows)
    pooled = {(ln.feature, ln.alpha, ln.beta, ln.n) for ln in src.links()}
    assert {(r["feature"], r["alpha"], r["beta"], r["n"]) for r in rows} == pooled


def teach(mem):
    """Six users ask "when is my ...?" three times each; a dated fact answers."""
    for u, thing in enumerate(["dentist", "train", "haircut", "concert", "meeting", "yoga"]):
        ns = f"user:{u}"
        ans = mem.add(f"The {thing} is confirmed for Tuesday at {u + 1}:15pm", namespace=ns,
                      created_at=T - 6 * DAY)
        mem.add(f"I really want a better {thing} someday", kind="preference", namespace=ns,
                created_at=T - 3 * DAY)
        mem.add(f"{thing.title()} prices nearby start at $90", kind="tool_result",
                source="tool", namespace=ns, created_at=T - DAY)
        for _ in range(3):
            r = mem.recall(f"When is my {thing}?", namespace=ns)
            mem.feedback(used=[ans.id], recall_id=r.recall_id)


def test_links_only_import_is_a_prior(tmp_path):
    with heapmem.open(str(tmp_path / "teacher.db"), clock=fixed()) as src:
        teach(src)
        transfer.export_links(src, str(tmp_path / "links.jsonl"))
        pooled = {(ln.feature, ln.alpha, ln.beta, ln.n) for ln in src.links()}
    with heapmem.open(str(tmp_path / "fresh.db"), clock=fixed()) as fresh:
        fresh.add("Lisbon! I'd love to see Lisbon and its flight museum", kind="preference",
                  namespace="user:zoe", created_at=T - 3 * DAY)
        fresh.add("Flight booked: SFO to Lisbon, departs May 2, 6:10pm", namespace="user:zoe",
                  created_at=T - 30 * DAY)
        day_one = fresh.recall("When is my flight to Lisbon?", namespace="user:zoe",
                               track=False)
        rep = transfer.import_file(fresh, str(tmp_path / "links.jsonl"))
        assert rep.kind == "links" and rep.link_rows > 0
        assert fresh.check().ok  # the prior is told apart from event evidence
        assert {(ln.feature, ln.alpha, ln.beta, ln.n)
                for ln in fresh.links()} == pooled
        after = fresh.recall("When is my flight to Lisbon?", namespace="user:zoe", track=False)
        assert "Flight booked" not in day_one[0].text and "Flight booked" in after[0].text
        # merging the same file twice would count its evidence twice: refused
        snap = dump(fresh)
        with pytest.raises(ValueError, match="already merged"):
            transfer.import_file(fresh, str(tmp_path / "links.jsonl"))
        assert dump(fresh) == snap
        # a store with a prior round-trips too
        transfer.export(fresh, str(tmp_path / "fresh.jsonl"))
    with heapmem.open(str(tmp_path / "copy.db"), clock=fixed()) as copy:
        transfer.import_file(copy, str(tmp_path / "fresh.jsonl"))
        assert copy.check().ok
        with heapmem.open(str(tmp_path / "fresh.db"), clock=fixed()) as fresh:
            assert dump(copy) == dump(fresh)


def test_links_prior_adds_to_existing_evidence(src, tmp_path):
    transfer.export_links(src, str(tmp_path / "links.jsonl"))
    before = {ln.feature: (ln.alpha, ln.beta, ln.n) for ln in src.links()}
    transfer.import_file(src, str(tmp_path / "links.jsonl"))
    for ln in src.links():
        a, b, n = before[ln.feature]
        assert (ln.alpha, ln.beta, ln.n) == (pytest.approx(2 * a), pytest.approx(2 * b), 2 * n)
    assert src.check().ok


@pytest.mark.parametrize("row, message", [
    ({"feature": "kind:fact", "qtype": "", "alpha": -1, "beta": 0, "n": 1}, "at least 0"),
    ({"feature": "when/clock:1", "qtype": "", "alpha": 1, "beta": 0, "n": 1}, "does not match"),
    ({"feature": "kind:fact", "qtype": "", "alpha": 1, "beta": 0, "n": 1.5}, "integer"),
    ({"feature": "kind:fact", "qtype": "", "alpha": 1, "beta": 0, "n": 1, "text": "x"},
     "unknown field"),
    ({"feature": "two words", "qtype": "", "alpha": 1, "beta": 0, "n": 1}, "not a feature"),
])
def test_bad_links_files_are_refused(src, tmp_path, row, message):
    path = _bad(tmp_path, [{"heapmem": "links", "format": 1, "count": 1}, row])
    snap = dump(src)
    with pytest.raises(ValueError, match=message):
        transfer.import_file(src, path)
    assert dump(src) == snap


def test_vectors_round_trip(tmp_path):
    class Toy:
        name = "toy-3"

        def __call__(self, texts):
            return np.array([[len(t), t.count("a") + 1.0, 1.0] for t in texts])

    try:
        m = heapmem.open(str(tmp_path / "v.db"), clock=fixed(), embedder=Toy())
    except TypeError:
        pytest.skip("this heapmem has no embedder")
    with m:
        m.add("hello world")
        m.add("a banana and a cat")
        transfer.export(m, str(tmp_path / "v.jsonl"))
        with heapmem.open(str(tmp_path / "w.db"), clock=fixed()) as w:
            transfer.import_file(w, str(tmp_path / "v.jsonl"))
            assert dump(w) == dump(m) and dump(w)["vectors"]

    class Other(Toy):
        name = "other-3"

    with heapmem.open(str(tmp_path / "o.db"), clock=fixed(), embedder=Other()) as o:
        o.add("something else")
        snap = dump(o)
        with pytest.raises(ValueError, match="embedder"):
            transfer.import_file(o, str(tmp_path / "v.jsonl"))
        assert dump(o) == snap


def test_progress_is_reported_and_drawn(src, tmp_path):
    seen = []
    counts = transfer.export(src, str(tmp_path / "x.jsonl"), progress=lambda d, t: seen.append(
        (d, t)))
    assert seen[-1] == (sum(counts.values()),) * 2
    err = io.StringIO()
    bar = transfer.ProgressBar("import", err, force=True)
    with heapmem.open(str(tmp_path / "new.db"), clock=fixed()) as new:
        transfer.import_file(new, str(tmp_path / "x.jsonl"), progress=bar)
    bar.close()
    assert "import [" in err.getvalue() and "100%" in err.getvalue()
    quiet = io.StringIO()
    bar = transfer.ProgressBar("export", quiet)  # not a terminal: draws nothing
    bar(5, 10)
    bar.close()
    assert quiet.getvalue() == ""


# -- merging two stores whose automatic ids collide (remap_ids) ----------------------

def _lisbon_like(mem, users, *, rounds=2):
    """What the demo does, for some users: three memories each (a dated fact,
    a preference, a price), feedback that the fact answered, and one tracked
    recall left unjudged; plus a memory with an id given by hand."""
    for i, (ns, question, fact) in enumerate(users):
        mem.add_many([{"text": fact, "namespace": ns, "created_at": T - (9 + i) * DAY},
                      {"text": f"I would love a better {question.split()[-1]}",
                       "kind": "preference", "namespace": ns, "created_at": T - 30 * DAY},
                      {"text": f"Prices for {question.split()[-1]} start at $90",
                       "kind": "tool_result", "source": "tool", "namespace": ns,
                       "created_at": T - 2 * DAY}])
    for _ in range(rounds):
        for ns, question, fact in users:
            r = mem.recall(question, k=3, namespace=ns)
            mem.feedback(used=[x.id for x in r if x.text == fact], recall_id=r.recall_id)
    ns, question, _ = users[0]
    pending = mem.recall(question, k=3, namespace=ns)
    mem.add("Checked in online", id=f"hand:{ns}", namespace=ns, created_at=T - DAY)
    return pending


USERS_A = [("user:ana", "When is my dentist appointment?",
            "Dentist appointment confirmed for Tuesday at 3:15pm"),
           ("user:ben", "When is my train to Paris?",
            "Train ticket: London to Paris, leaves June 2 at 7:01am")]
USERS_B = [("user:chen", "When is my haircut?",
            "Haircut booked with Sam for Friday May 9 at 11:30am"),
           ("user:dara", "When is my car service?",
            "Car service scheduled: Monday April 7, drop off at 8:00am"),
           ("user:fay", "How many tickets did I buy for the concert?",
            "Bought 4 tickets for the concert on Saturday, row 12")]


def _links(mem):
    mem.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
    return {(ns, f): (a, b, n, s, pa, pb) for ns, f, a, b, n, s, pa, pb in mem.connection.execute(
        "SELECT namespace, feature, alpha, beta, n, support, pool_alpha, pool_beta FROM links")}


def _same_links(got, want):
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-9), k


@pytest.mark.parametrize("first, second", [(USERS_A, USERS_B), (USERS_B, USERS_A)])
def test_two_stores_with_automatic_ids_merge_with_remap_ids(tmp_path, first, second):
    """Both stores number their memories m1, m2, ...: a plain import refuses,
    remap_ids gives each of the second store's memories whose id is taken the
    id of its new seq, and the learning is that of one store that lived
    through both."""
    one, two = str(tmp_path / "one.db"), str(tmp_path / "two.db")
    with heapmem.open(one, clock=fixed()) as a:
        _lisbon_like(a, first)
    with heapmem.open(two, clock=fixed()) as b:
        pending = _lisbon_like(b, second)
        transfer.export(b, str(tmp_path / "two.jsonl"))
        want_shown = pending.ids
        file_ids = {m.id: m.text for ns in b.namespaces for m in b.list(ns)}
    # a fresh store that lived through both: what the merge must equal
    with heapmem.open(str(tmp_path / "both.db"), clock=fixed()) as both:
        _lisbon_like(both, first)
        _lisbon_like(both, second)
        want_links = _links(both)
        want_texts = sorted(m.text for ns in both.namespaces for m in both.list(ns))
    with heapmem.open(one, clock=fixed()) as a:
        snap = dump(a)
        held = {m.id for ns in a.namespaces for m in a.list(ns)}
        with pytest.raises(ValueError, match=r"a memory with id 'm1' is already in the store; "
                                             r"import with remap_ids=True"):
            transfer.import_file(a, str(tmp_path / "two.jsonl"))
        assert dump(a) == snap
        seq_off = a.connection.execute("SELECT max(seq) FROM memories").fetchall()[0][0]
        rep = transfer.import_file(a, str(tmp_path / "two.jsonl"), remap_ids=True)
        assert rep.seq_offset == seq_off
        moved = dict(rep.remapped)
        # each automatic id of the file that was taken (by the store, or by the remap
        # itself) moved to m<its new seq>; the others, and the hand-given one, stayed
        assert moved and all(new == f"m{int(old[1:]) + seq_off}" for old, new in moved.items())
        for old, text in file_ids.items():
            assert a.get(moved.get(old, old)).text == text
            assert (old in moved) == (old in held or old in moved.values())
        assert f"hand:{second[0][0]}" not in moved and a.get(f"hand:{second[0][0]}") is not None
        assert rep.to_dict()["remapped"] == moved
        assert a.check().ok
        _same_links(_links(a), want_links)
        assert sorted(m.text for ns in a.namespaces for m in a.list(ns)) == want_texts
        # the file's unjudged recall shows the new ids, and feedback on it teaches
        logged = a.log.get(pending.recall_id + rep.recall_offset)
        assert list(logged.shown) == [moved.get(m, m) for m in want_shown]
        fact = [m for m in logged.shown if a.get(m).text == second[0][2]]
        fb = a.feedback(used=fact, recall_id=logged.id)
        assert fb.used == tuple(fact) and a.check().ok


def _file(tmp_path, records, name="f.jsonl"):
    counts = {"meta": 0, "memories": 0, "vectors": 0, "recalls": 0, "events": 0, "links": 0}
    for r in records:
        counts[{"memory": "memories", "recall": "recalls"}[r["type"]]] += 1
    head = {"heapmem": "export", "format": 1, "schema": 8, "version": heapmem.__version__,
            "exported_at": T, "counts": counts}
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in [head] + records) + "\n")
    return str(p)


def _mem(seq, mid, text, ns="user:maya"):
    return {"type": "memory", "seq": seq, "id": mid, "namespace": ns, "text": text,
            "kind": "fact", "source": None, "key": None, "importance": 1.0, "created_at": T,
            "last_used_at": None, "metadata": None, "features": ""}


def test_remap_ids_follows_a_chain_and_never_moves_an_id_given_by_hand(tmp_path):
    with heapmem.open(str(tmp_path / "s.db"), clock=fixed()) as mem:
        mem.add("The store's own first memory", namespace="user:maya")  # m1
        mem.add("A note", id="note", namespace="user:maya")               # seq 2
        # the file's m1 is taken: it moves to m3 (its new seq, 1 + 2); m2 is free and
        # stays; m3 is now taken by the remap itself: it moves to m5
        f = _file(tmp_path, [_mem(1, "m1", "Booked the flight to Lisbon"),
                             _mem(2, "m2", "Booked the hotel in Lisbon"),
                             _mem(3, "m3", "Booked a table in Lisbon"),
                             {"type": "recall", "id": 1, "namespace": "user:maya",
                              "query": "Lisbon?", "qtype": "other", "created_at": T,
                              "shown": ["m3", "m2", "m1"], "ages": [0, 0, 0],
                              "features": ["kind:fact"] * 3, "rest": [1.0] * 3}])
        rep = transfer.import_file(mem, f, remap_ids=True)
        assert rep.remapped == (("m1", "m3"), ("m3", "m5"))
        assert [mem.get(m).text for m in ("m1", "m3", "m2", "m5")] == [
            "The store's own first memory", "Booked the flight to Lisbon",
            "Booked the hotel in Lisbon", "Booked a table in Lisbon"]
        assert mem.log.get(1 + rep.recall_offset).shown == ("m5", "m2", "m3")
        assert mem.check().ok
        snap = dump(mem)
        # an id given by hand refuses to collide, remap or not; nothing is written
        for remap in (False, True):
            with pytest.raises(ValueError, match=r"line 2 of .*a memory with id 'note' is "
                                                 r"already in the store" +
                                                 (r" \(an id given by hand, which a remap never "
                                                  r"changes\)" if remap else r"; nothing")):
                transfer.import_file(mem, _file(tmp_path, [_mem(1, "note", "x")]),
                                     remap_ids=remap)
        # m<number> on another seq is an id given by hand too
        with pytest.raises(ValueError, match="given by hand"):
            transfer.import_file(mem, _file(tmp_path, [_mem(9, "m1", "x")]), remap_ids=True)
        # a file id the remap already gave one of the file's memories
        with pytest.raises(ValueError, match=r"line 3 of .*memory id 'm6' \(given by hand\) "
                                             r"is the id the remap gave the file's memory 'm1'"):
            transfer.import_file(mem, _file(tmp_path, [_mem(1, "m1", "x"),
                                                       _mem(3, "m6", "y")]), remap_ids=True)
        with pytest.raises(TypeError, match="remap_ids must be True or False"):
            transfer.import_file(mem, f, remap_ids="yes")
        assert dump(mem) == snap
