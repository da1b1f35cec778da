"""heap_vector_search (issue 34): recall's vector top-N stage alone, as
bench/scale.py times it: the namespace's vectors (the connection's cache of
the store's int4 vectors) ranked by cosine with the question's int8 vector,
no cosine floor, no filter."""
from __future__ import annotations

import json

import apsw
import numpy as np
import pytest

import heapmem

from conftest import T0, one

TOPICS = ["flight to Lisbon", "dinner with my sister", "marathon training", "pottery class",
          "adopting a dog", "museum trip", "violin lessons", "camping in the mountains"]


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def decoded(blob: bytes) -> np.ndarray:
    """A vector in the store's formats (int4 or int8, csrc/embed.c) as floats."""
    raw = np.frombuffer(blob[4:], dtype=np.uint8)
    if blob[1] == 8:
        return raw.view(np.int8).astype(np.float64)
    v = np.empty(2 * len(raw))
    v[0::2], v[1::2] = (raw & 15).astype(float) - 8, (raw >> 4).astype(float) - 8
    return v


@pytest.fixture
def store(tmp_path):
    m = heapmem.open(str(tmp_path / "v.db"), clock=lambda: T0)
    m.add_many([{"text": f"{t}, note {i}", "namespace": "u"} for i in range(40) for t in TOPICS])
    m.add_many([{"text": t, "namespace": "other"} for t in TOPICS])
    yield m
    m.close()


@pytest.mark.parametrize("q", ["When is my flight?", "a dog from the shelter", "music"])
def test_the_vector_stage_is_the_exact_top_n_of_its_vectors(store, q):
    c = store.connection
    seqs, rows = zip(*c.execute("SELECT v.seq, v.v FROM vectors AS v JOIN memories AS m "
                                "ON m.seq = v.seq WHERE m.namespace = 'u'"))
    cos = unit(np.stack([decoded(r) for r in rows])) @ unit(decoded(one(c, "SELECT heap_embed(?, "
                                                                        "'int8')", q)))
    got = json.loads(one(c, "SELECT heap_vector_search(?, 'u', 20)", q))
    assert len(got) == 20 and set(got) <= set(seqs)  # the namespace's own, no other
    # the cosines of what it gives, best first, are the 20 highest (ties in any order)
    by_seq = dict(zip(seqs, cos))
    assert [by_seq[s] for s in got] == pytest.approx(sorted(cos, reverse=True)[:20], abs=1e-5)


def test_the_vector_stage_outside_its_stores(store, tmp_path):
    c = store.connection
    assert one(c, "SELECT heap_vector_search('flight', 'nobody', 5)") == "[]"
    assert one(c, "SELECT heap_vector_search('', 'u', 5)") == "[]"  # no word it knows
    lexical = heapmem.open(str(tmp_path / "l.db"), embedder=None)
    lexical.add("a flight to Lisbon")
    with pytest.raises(apsw.SQLError, match="heap_vector_search: this store holds no vectors of "
                                            "the library's own embedder"):
        one(lexical.connection, "SELECT heap_vector_search('flight', 'default', 5)")
    lexical.close()


@pytest.mark.parametrize("args", ["1, 'u', 5", "'q', 'u', 0", "'q', 'u', 1001", "'q', 'u', '5'",
                                  "'q', NULL, 5"])
def test_bad_input_is_one_sentence(store, args):
    with pytest.raises(apsw.SQLError,
                       match=r"heap_vector_search: takes \(question, namespace, n\)"):
        one(store.connection, f"SELECT heap_vector_search({args})")
