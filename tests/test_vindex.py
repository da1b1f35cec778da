"""The vector index of a big namespace (csrc/vindex.c, schema 10): below the
threshold the vector top N is the exact scan's, above it a seeded partition
index whose top N reaches the promised recall against the exact one; the
filters apply inside it; forget takes vectors out; check() holds it to the
vectors; bad settings are one sentence and write nothing; a store written
before it gets its index on the first writable open."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import apsw
import numpy as np
import pytest

import heapmem
import heapmem.vectors
from heapmem.db import schema

from conftest import back_to_schema_9

WORDS = ("flight hotel dinner sister brother paint garden book concert museum river trip "
         "doctor school work running piano guitar dog cat lake beach mountain city train "
         "coffee birthday wedding camping photo recipe cake movie song friend job class "
         "project garden market car bike rain snow summer winter morning evening").split()


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def _store(path, n: int, seed: int = 0, settings: dict | None = None, kinds=("fact",)):
    m = heapmem.open(str(path))
    if settings:
        m.vectors.settings(**settings)
    rng = random.Random(seed)
    m.add_many([{"text": t, "namespace": "big", "kind": rng.choice(kinds),
                 "created_at": 1_700_000_000 + i} for i, t in enumerate(_texts(n, seed))])
    return m


def _top(m, q: str, n: int, probe: float | None = None) -> list[int]:
    sql = "SELECT heap_vector_top(?, 'big', ?)" if probe is None else \
        "SELECT heap_vector_top(?, 'big', ?, ?)"
    args = (q, n) if probe is None else (q, n, probe)
    return [s for s, _ in json.loads(m.connection.execute(sql, args).fetchall()[0][0])]


def _reference(m, q: str, n: int) -> list[int]:
    """The exact top n in numpy: the int8 score the cache ranks by (the
    question's int8 vector . the memory's int4 components, over both norms,
    in float32 as the C core multiplies), ties by seq."""
    rows = m.connection.execute("SELECT v.seq, v.v FROM memories AS m JOIN vectors AS v "
                                "ON v.seq = m.seq WHERE m.namespace = 'big' ORDER BY m.seq"
                                ).fetchall()
    q8 = np.frombuffer(m.connection.execute("SELECT heap_embed(?, 'int8')", (q,))
                       .fetchall()[0][0][4:], np.int8).astype(np.int64)
    qinv = np.float32(1 / np.sqrt(float((q8 * q8).sum())))
    scored = []
    for seq, blob in rows:
        raw = np.frombuffer(bytes(blob)[4:], np.uint8)
        x = np.empty(2 * len(raw), np.int64)
        x[0::2] = (raw & 15).astype(np.int64) - 8
        x[1::2] = (raw >> 4).astype(np.int64) - 8
        ss = int((x * x).sum())
        if not ss:
            continue
        inv = np.float32(1 / np.sqrt(float(ss)))
        score = np.float32(np.float32(int((x * q8).sum())) * inv) * qinv
        scored.append((-float(score), seq))
    scored.sort()
    return [s for _, s in scored[:n]]


QUESTIONS = ["when is the flight to the city", "my sister plays piano", "a dog at the beach",
             "coffee in the morning before work", "the wedding cake recipe",
             "camping by the lake in summer", "which movie and song", "school project class"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_below_the_threshold_the_top_n_is_the_exact_scan(tmp_path, seed):
    m = _store(tmp_path / "a.db", 300 + 50 * seed, seed)
    assert m.connection.execute("SELECT count(*) FROM vector_index").fetchall() == [(0,)]
    for q in QUESTIONS:
        for n in (1, 7, 50):
            assert _top(m, q, n) == _reference(m, q, n)
    m.close()


def test_ties_and_copies_rank_as_the_exact_scan(tmp_path):
    """Rows of one vector (copies of a text) tie on their cosine, and the
    scan keeps the lowest seqs among them, however many blocks of eight
    rows it passes over (embed.c's hv_scan_block_avx2 sends a row on only
    where the exact test could keep it): the exact top n of numpy, for
    questions that find the copies, others and none."""
    m = _store(tmp_path / "a.db", 700, 3)
    rng = random.Random(3)
    for i in range(260):  # copies in runs, between other rows
        m.add("a dog at the beach" if i % 3 else "camping by the lake in summer",
              namespace="big", copy=True)
        if rng.random() < 0.2:
            m.add(" ".join(rng.choice(WORDS) for _ in range(5)), namespace="big")
    for q in QUESTIONS + ["a dog at the beach", "zzzz qqqq"]:
        for n in (1, 8, 9, 50, 300):
            assert _top(m, q, n) == _reference(m, q, n), (q, n)
    m.close()


def _indexed(tmp_path, n=3000, seed=5, **kw):
    return _store(tmp_path / "big.db", n, seed,
                  {"threshold": 1000, "size": 32, "probe": 0.25, **kw.pop("settings", {})}, **kw)


def _recall(found: list[int], exact: list[int]) -> float:
    return len(set(found) & set(exact)) / len(exact)


def test_above_the_threshold_recall_at_10_is_at_least_the_bound(tmp_path):
    """Seeded synthetic store of 3,000 vectors in partitions of about 32,
    probe 0.25: mean recall@10 against the exact top 10 at least 0.9
    (bench/ivf.py measures LoCoMo at 100k and 1M)."""
    m = _indexed(tmp_path)
    parts = m.connection.execute("SELECT count(*) FROM vector_centroids").fetchall()[0][0]
    assert parts >= 3000 // 64
    rng = random.Random(9)
    qs = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(60)]
    got = [_recall(_top(m, q, 10), _top(m, q, 10, 1.0)) for q in qs]
    assert np.mean(got) >= 0.9, np.mean(got)
    # probe 1 scans everything: the exact scan's top n
    for q in qs[:10]:
        assert _top(m, q, 10, 1.0) == _reference(m, q, 10)
    assert m.check().ok
    m.close()


def test_just_past_the_threshold_more_of_the_namespace_is_scanned(tmp_path):
    """Recall scans the larger share of probe and (threshold / n) ** (1/3)
    (recall.c's hr_scan_budget; RESULTS 28.4): 3,000 vectors past a threshold
    of 1,000 scan 0.69 of them, not probe's 0.25.  On 5339a6b the default
    top equals probe 0.25's and the first assertion fails."""
    m = _indexed(tmp_path)
    share = (1000 / 3000) ** (1 / 3)
    rng = random.Random(11)
    qs = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(40)]
    assert all(_top(m, q, 10) == _top(m, q, 10, share) for q in qs)
    exact = {q: _top(m, q, 10, 1.0) for q in qs}
    lifted = np.mean([_recall(_top(m, q, 10), exact[q]) for q in qs])
    quarter = np.mean([_recall(_top(m, q, 10, 0.25), exact[q]) for q in qs])
    assert lifted >= quarter and lifted > 0.95, (lifted, quarter)
    # a store whose probe asks for more than the lift keeps its probe
    m.vectors.settings(probe=0.9)
    assert all(_top(m, q, 10) == _top(m, q, 10, 0.9) for q in qs[:10])
    m.close()


def test_recall_reads_the_settings_as_the_index_builder_does(tmp_path):
    """One reader of the vector index's settings (vindex.c), for the builder
    and for recall's scan: settings written by hand that it cannot use (a
    threshold as text, a size below 16) are the defaults for both.  Before,
    recall read them on its own, took the text threshold 1000 and scanned
    0.69 of 3,000 vectors where the builder's threshold of 20,000 says scan
    them all."""
    m = _indexed(tmp_path)
    c = m.connection
    c.execute("UPDATE heapmem_meta SET value = ? WHERE key = 'vector_index'",
              (json.dumps({"threshold": "1000", "size": 8, "probe": 0.25, "seed": 0}),))
    assert m.vectors.settings()["threshold"] == 20000
    rng = random.Random(12)
    qs = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(20)]
    assert all(_top(m, q, 50) == _top(m, q, 50, 1.0) for q in qs)
    # (the share the text threshold would give finds another top 50)
    assert any(_top(m, q, 50, (1000 / 3000) ** (1 / 3)) != _top(m, q, 50, 1.0) for q in qs)
    m.close()


def test_the_index_is_deterministic(tmp_path):
    a = _store(tmp_path / "a.db", 1500, 4, {"threshold": 1000, "size": 32})
    b = _store(tmp_path / "b.db", 1500, 4, {"threshold": 1000, "size": 32})
    q = "SELECT part, hex(centroid) FROM vector_centroids ORDER BY part"
    p = "SELECT seq, part FROM vector_parts ORDER BY seq"
    assert a.connection.execute(q).fetchall() == b.connection.execute(q).fetchall()
    assert a.connection.execute(p).fetchall() == b.connection.execute(p).fetchall()
    a.close()
    b.close()


def test_adds_go_to_a_partition_and_a_grown_partition_splits(tmp_path):
    m = _indexed(tmp_path, n=1200)
    c = m.connection
    v0 = c.execute("SELECT version FROM vector_index").fetchall()[0][0]
    for t in _texts(400, 77):
        m.add(t, namespace="big")
    for _ in range(100):  # one partition grows past twice the size: the same vector, so
        m.add("a dog at the beach", namespace="big", copy=True)  # cut in seq order
    assert c.execute("SELECT count(*) FROM vector_parts").fetchall()[0][0] == 1700
    biggest = c.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM vector_parts "
                        "GROUP BY part)").fetchall()[0][0]
    assert biggest <= 2 * 32 + 1
    assert c.execute("SELECT version FROM vector_index").fetchall()[0][0] > v0  # splits
    assert m.check().ok
    m.close()


def _nearest_parts(c, parts: list[int]) -> dict[int, int]:
    """Each vector's nearest of the centroids parts, as heap_vector_part
    scores them (csrc/embed.c, hv_nearest): the int dot product of its int4
    components with the int8 centroid, times the centroid's float32 inverse
    norm; the first of equal scores in part order."""
    cents = dict(c.execute("SELECT part, centroid FROM vector_centroids").fetchall())
    ids = sorted(p for p in parts if p in cents)
    cm = np.stack([np.frombuffer(cents[p], np.int8).astype(np.int64) for p in ids])
    cinv = np.array([1 / np.sqrt(float((r * r).sum())) for r in cm], np.float32)
    out = {}
    for seq, blob in c.execute("SELECT seq, v FROM vectors").fetchall():
        raw = np.frombuffer(bytes(blob)[4:], np.uint8)
        x = np.empty(2 * len(raw), np.int64)
        x[0::2] = (raw & 15).astype(np.int64) - 8
        x[1::2] = (raw >> 4).astype(np.int64) - 8
        score = (cm @ x).astype(np.float32) * cinv
        out[seq] = ids[int(np.argmax(score))]
    return out


def test_an_added_vector_goes_to_its_nearest_partition(tmp_path):
    """heap_vector_part (the trigger's) puts a new vector in the partition
    of its nearest centroid, exactly as hv_nearest scores them, whichever
    kernel the machine runs (AVX2 or not, the small-component one for the
    int4 store's vectors): checked for every vector add_many added to a
    partition that was not split since (all of them against the centroids
    before it)."""
    m = _indexed(tmp_path, n=1200)
    c = m.connection
    before = [p for (p,) in c.execute("SELECT part FROM vector_centroids").fetchall()]
    last = c.execute("SELECT max(seq) FROM memories").fetchall()[0][0]
    m.add_many([{"text": t, "namespace": "big"} for t in _texts(300, 91)])
    now = {p for (p,) in c.execute("SELECT part FROM vector_centroids").fetchall()}
    kept = [p for p in before if p in now]  # partitions not split since
    nearest = _nearest_parts(c, before)
    placed = c.execute("SELECT seq, part FROM vector_parts WHERE seq > ? ORDER BY seq",
                       (last,)).fetchall()
    checked = [(seq, part) for seq, part in placed if part in kept]
    assert len(checked) > 200
    assert [(seq, nearest[seq]) for seq, _ in checked] == checked
    m.close()


def test_filters_apply_inside_the_indexed_top_n(tmp_path):
    m = _indexed(tmp_path, kinds=("fact", "note", "event"))
    since = 1_700_000_000 + 1500
    for q in QUESTIONS:
        res = m.recall(q, k=20, namespace="big", kinds=["note"], since=since, track=False,
                       config=heapmem.ScoringConfig(lexical_weight=0.0))
        assert res.ids
        for r in res:
            assert r.kind == "note" and r.created_at >= since
        # a window of time, no kinds: only what it holds
        res = m.recall(q, k=20, namespace="big", since=since, until=since + 400, track=False,
                       config=heapmem.ScoringConfig(lexical_weight=0.0))
        assert res.ids and all(since <= r.created_at < since + 400 for r in res)
    m.close()


def test_forget_takes_vectors_out_of_the_index(tmp_path):
    m = _indexed(tmp_path, n=1500)
    c = m.connection
    ids = [r[0] for r in c.execute("SELECT id FROM memories ORDER BY seq LIMIT 40")]
    seqs = [r[0] for r in c.execute("SELECT seq FROM memories ORDER BY seq LIMIT 40")]
    q = QUESTIONS[0]
    _top(m, q, 50)  # the connection's cache holds the namespace
    m.forget(ids)
    assert c.execute("SELECT count(*) FROM vector_parts WHERE seq <= ?", (max(seqs),)
                     ).fetchall()[0][0] == 0
    for q in QUESTIONS:
        assert not set(_top(m, q, 50)) & set(seqs)
        assert not set(_top(m, q, 50, 1.0)) & set(seqs)
    assert m.check().ok
    m.forget_namespace("big") if hasattr(m, "forget_namespace") else m.forget(namespace="big")
    for t in ("vector_index", "vector_centroids", "vector_parts"):
        assert c.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] == 0
    m.close()


def test_check_finds_a_vector_out_of_its_partition(tmp_path):
    m = _indexed(tmp_path, n=1200)
    c = m.connection
    c.execute("DELETE FROM vector_parts WHERE seq = (SELECT min(seq) FROM vector_parts)")
    problems = m.check().problems
    assert any("1 vectors of indexed namespaces are in no partition" in p for p in problems)
    c.execute("INSERT INTO vector_parts(seq, part) VALUES (999999, 1)")
    assert any("partition rows name no vector" in p for p in m.check().problems)
    c.execute("UPDATE vector_index SET digest = digest + 1")
    assert any("version or digest" in p for p in m.check().problems)
    m.vectors.index("big")  # built again: whole
    c.execute("DELETE FROM vector_parts WHERE seq = 999999")
    assert m.check().ok, m.check().problems
    m.close()


@pytest.mark.parametrize("settings, message", [
    ('{"threshold": 0}', "threshold must be a whole number from 1 to 1000000000"),
    ('{"size": 8}', "size must be a whole number from 16 to 65536"),
    ('{"size": 32.5}', "size must be a whole number from 16 to 65536"),
    ('{"probe": 0}', "probe must be a number above 0 and at most 1"),
    ('{"probe": "a"}', "probe must be a number above 0 and at most 1"),
    ('{"seed": -1}', "seed must be a whole number >= 0"),
    ('{"colour": 1}', "'colour' is not a setting of the vector index"),
    ("[1]", "the settings must be a JSON object"),
    ("nonsense", "the settings must be a JSON object"),
])
def test_bad_settings_are_one_sentence_and_write_nothing(tmp_path, settings, message):
    m = heapmem.open(str(tmp_path / "a.db"))
    before = m.connection.execute("SELECT * FROM heapmem_meta ORDER BY key").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_settings: " + message):
        m.connection.execute("SELECT heap_vector_settings(?)", (settings,)).fetchall()
    with pytest.raises(ValueError, match=message):
        m.vectors.settings(**json.loads(settings)) if settings.startswith("{") else \
            (_ for _ in ()).throw(ValueError(message))
    assert m.connection.execute("SELECT * FROM heapmem_meta ORDER BY key").fetchall() == before
    m.close()


def test_bad_calls_of_the_index_functions(tmp_path):
    m = heapmem.open(str(tmp_path / "a.db"))
    c = m.connection
    with pytest.raises(apsw.SQLError, match="heap_vector_index: namespace '\\*' is the pooled"):
        c.execute("SELECT heap_vector_index('*')").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_index: namespace must be text"):
        c.execute("SELECT heap_vector_index(3)").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_top: namespace must be valid UTF-8 "
                                            "without NUL bytes"):
        c.execute("SELECT heap_vector_top('q', ?, 5)", ("a\0b",)).fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_maintain: namespace must be valid UTF-8"):
        c.execute("SELECT heap_vector_maintain(CAST(x'61ff' AS TEXT), 1)").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_maintain: seq must be a whole number"):
        c.execute("SELECT heap_vector_maintain('a', -1)").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_top: give the question"):
        c.execute("SELECT heap_vector_top('q', 'a', 0)").fetchall()
    with pytest.raises(apsw.SQLError, match="heap_vector_top: probe must be"):
        c.execute("SELECT heap_vector_top('q', 'a', 5, 2)").fetchall()
    m.close()
    lex = heapmem.open(str(tmp_path / "lex.db"), embedder=None)
    with pytest.raises(heapmem.HeapmemError, match="serves the library's own embedder"):
        lex.vectors.index("a")
    lex.close()


def test_a_store_written_before_the_index_gets_it_on_open(tmp_path, capsys, monkeypatch):
    path = tmp_path / "old.db"
    m = _store(path, 1200, 3, {"threshold": 5000, "size": 32})
    m.close()
    # schema 9 as it was: the index's tables and triggers gone, the version back
    c = apsw.Connection(str(path))
    back_to_schema_9(c)
    # (a threshold the test can pass; schema 9 had no such key, and ignores it)
    c.execute("INSERT INTO heapmem_meta(key, value) VALUES ('vector_index', "
              "'{\"threshold\": 1000, \"size\": 32, \"probe\": 0.25, \"seed\": 0}')")
    c.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION - 1}")
    c.close()
    monkeypatch.setattr(heapmem.vectors, "VECTOR_INDEX_PROGRESS", 1)
    m = heapmem.open(str(path))
    err = capsys.readouterr().err
    assert "building the vector index of namespace 'big' (1,200 memories), once" in err
    assert m.connection.execute("SELECT count(*) FROM vector_parts").fetchall() == [(1200,)]
    assert m.check().ok
    m.close()
    heapmem.open(str(path), readonly=True).close()
    assert "building" not in capsys.readouterr().err


def test_the_cache_follows_a_vector_out_of_and_back_into_its_partition(tmp_path):
    """A connection that holds the namespace reads again only the partitions a
    change touched (their stamps): a vector deleted leaves its top n, the same
    vector put back (among older rows) returns, as the exact scan says."""
    m = _indexed(tmp_path, n=1500)
    c = m.connection
    q = QUESTIONS[2]
    first = _top(m, q, 10, 1.0)
    seq = first[0]
    text = c.execute("SELECT text FROM memories WHERE seq = ?", (seq,)).fetchall()[0][0]
    c.execute("DELETE FROM vectors WHERE seq = ?", (seq,))
    assert seq not in _top(m, q, 10, 1.0)
    assert _top(m, q, 10, 1.0) == _reference(m, q, 10)
    c.execute("INSERT INTO vectors(seq, v) VALUES (?, heap_embed(?))", (seq, text))
    assert _top(m, q, 10, 1.0) == first == _reference(m, q, 10)
    # a memory moved out of the namespace leaves it, and comes back
    c.execute("UPDATE memories SET namespace = 'other' WHERE seq = ?", (seq,))
    assert seq not in _top(m, q, 10, 1.0)
    c.execute("UPDATE memories SET namespace = 'big' WHERE seq = ?", (seq,))
    assert _top(m, q, 10, 1.0) == first
    m.close()


def test_the_vector_top_n_outside_its_namespace(tmp_path):
    """heap_vector_top ranks the namespace's own vectors only (another
    namespace's closer vector is never among them), and answers [] for a
    namespace without vectors, a question with no word the model knows and a
    lexical store (bench/scale.py times it as recall's vector stage)."""
    m = heapmem.open(str(tmp_path / "a.db"))
    m.add_many([{"text": f"{t}, note {i}", "namespace": "big"}
                for i in range(20) for t in QUESTIONS])
    m.add_many([{"text": q, "namespace": "other"} for q in QUESTIONS])
    mine = {r[0] for r in m.connection.execute(
        "SELECT seq FROM memories WHERE namespace = 'big'").fetchall()}
    for q in QUESTIONS[:3]:
        got = _top(m, q, 50)
        assert len(got) == 50 and set(got) <= mine and got == _reference(m, q, 50)
    c = m.connection
    assert c.execute("SELECT heap_vector_top('flight', 'nobody', 5)").fetchall()[0][0] == "[]"
    assert c.execute("SELECT heap_vector_top('', 'big', 5)").fetchall()[0][0] == "[]"
    m.close()
    lex = heapmem.open(str(tmp_path / "lex.db"), embedder=None)
    lex.add("a flight to Lisbon")
    assert lex.connection.execute(
        "SELECT heap_vector_top('flight', 'default', 5)").fetchall()[0][0] == "[]"
    lex.close()


def _probed_exact(m, q: str, n: int, probe: float) -> list[int]:
    """The exact top n (numpy, as _reference ranks) of the partitions a
    probe of `probe` scans: partitions nearest the question first, as
    embed.c's hv_top orders them (the int8 question's dot product with the
    int8 centroid times the centroid's float32 inverse norm; ties by part),
    until ceil(probe x rows) rows are passed."""
    c = m.connection
    q8 = np.frombuffer(c.execute("SELECT heap_embed(?, 'int8')", (q,)).fetchall()[0][0][4:],
                       np.int8).astype(np.int64)
    cents = c.execute("SELECT part, centroid FROM vector_centroids WHERE namespace = 'big' "
                      "ORDER BY part").fetchall()
    scored = []
    for j, (part, blob) in enumerate(cents):
        cm = np.frombuffer(blob, np.int8).astype(np.int64)
        inv = np.float32(1 / np.sqrt(float((cm * cm).sum())))
        scored.append((-float(np.float32(int(cm @ q8)) * inv), j, part))
    size = dict(c.execute("SELECT part, count(*) FROM vector_parts GROUP BY part").fetchall())
    budget = int(np.ceil(probe * sum(size.values())))
    probed, passed = set(), 0
    for _, _, part in sorted(scored):
        if passed >= budget:
            break
        probed.add(part)
        passed += size.get(part, 0)
    inside = {s for s, p in c.execute("SELECT seq, part FROM vector_parts").fetchall()
              if p in probed}
    return [s for s in _reference(m, q, 100_000) if s in inside][:n]


def test_a_probe_reads_signs_first_and_scores_its_shortlist_exactly(tmp_path):
    """A probe that is not the whole namespace passes each row of the
    partitions it scans through its residual's signs (32 bytes and a
    factor, embed.c's hv_sign_scan) and scores only the best estimates
    exactly: 512 here, of the 2,400 rows a probe of 0.4 passes over 6,000
    vectors.  The top n it gives is, on average over 40 questions, at least
    0.95 of the exact top n of the same partitions, ranked by the rows'
    exact scores.  With the estimates upside down (the worst kept) the first
    assertion fails."""
    m = _store(tmp_path / "big.db", 6000, 8, {"threshold": 1000, "size": 32, "probe": 0.25})
    rng = random.Random(21)
    qs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(40)]
    got = []
    for q in qs:
        for n in (1, 10):
            top = _top(m, q, n, 0.4)
            got.append(_recall(top, _probed_exact(m, q, n, 0.4)))
    assert np.mean(got) >= 0.95, np.mean(got)
    order = _reference(m, qs[0], 6000)  # every row, by its exact score
    top = _top(m, qs[0], 10, 0.4)
    assert top == [s for s in order if s in set(top)]
    m.close()


def test_the_portable_kernels_give_what_avx2_gives(tmp_path):
    """HEAPMEM_NO_AVX2=1 runs the library's portable C where it has AVX2
    kernels (the int4 and int8 dot products, the scan's blocks, the signs,
    the residuals): the same integers and floats, so the same vector tops
    and cosines, exact scan and probes alike, with and without filters.  On
    a machine without AVX2 both runs are the portable C."""
    path = tmp_path / "big.db"
    _store(path, 3000, 4, {"threshold": 1000, "size": 32, "probe": 0.25},
           kinds=("fact", "note")).close()
    script = (
        "import json, sys, heapmem\n"
        "m = heapmem.open(sys.argv[1])\n"
        "out = []\n"
        "for q in json.loads(sys.argv[2]):\n"
        "    for sql in (\"SELECT heap_vector_top(?, 'big', 20)\",\n"
        "                \"SELECT heap_vector_top(?, 'big', 20, 1.0)\",\n"
        "                \"SELECT heap_vector_top(?, 'big', 3, 0.3)\"):\n"
        "        out.append(m.connection.execute(sql, (q,)).fetchall()[0][0])\n"
        "    res = m.recall(q, k=10, namespace='big', kinds=['note'], track=False)\n"
        "    out.append([[r.id, r.score] for r in res])\n"
        "print(json.dumps(out))\n")
    runs = []
    for no in ("0", "1"):
        env = {**os.environ, "HEAPMEM_NO_AVX2": no}
        runs.append(subprocess.run([sys.executable, "-c", script, str(path), json.dumps(QUESTIONS)],
                                   env=env, capture_output=True, text=True, check=True).stdout)
    assert json.loads(runs[0]) == json.loads(runs[1])
    assert len(json.loads(runs[0])) == 4 * len(QUESTIONS)


def test_a_probe_after_adds_ranks_as_a_fresh_connection(tmp_path):
    """A connection's cache writes a partition's signs when a probe first
    scans it (embed.c, hv_sign_bucket), and the rows added later when a
    probe next does: after adds between its probes, a connection that read
    the namespace before gives the probe tops of one that reads it now.
    With the added rows' signs left unwritten the tops differ."""
    m = _store(tmp_path / "big.db", 3000, 12, {"threshold": 1000, "size": 200, "probe": 0.25})
    rng = random.Random(5)
    qs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(30)]
    for q in qs:
        _top(m, q, 10, 1.0)
        _top(m, q, 10, 0.5)  # the partitions it probes signed
    before = m.connection.execute("SELECT version FROM vector_index").fetchall()[0][0]
    m.add_many([{"text": t, "namespace": "big"} for t in _texts(1500, 99)])
    assert m.connection.execute("SELECT version FROM vector_index").fetchall()[0][0] == before
    fresh = heapmem.open(str(tmp_path / "big.db"))
    assert [_top(m, q, 10, 0.5) for q in qs] == [_top(fresh, q, 10, 0.5) for q in qs]
    fresh.close()
    m.close()
