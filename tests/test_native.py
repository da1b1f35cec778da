"""The C core's pure helpers, reached through cffi."""
import math

import pytest

from heapmem import _native as n


@pytest.mark.parametrize("q, qt", [
    ("When is my flight to Lisbon?", "when"),
    ("what time does it leave", "when"),
    ("Which year did she move?", "when"),
    ("How long ago was the trip?", "when"),
    ("Who painted the mural?", "who"),
    ("whose dog is it", "who"),
    ("Where did Caroline go camping?", "where"),
    ("What is Maya's favourite food?", "what"),
    ("Which book did he read", "what"),
    ("How did the interview go?", "how"),
    ("How many kids does she have?", "how_many"),
    ("how much did it cost", "how_many"),
    ("Why did he quit?", "why"),
    ("Did Melanie go camping when she was young?", "yes_no"),
    ("Is the meeting still on?", "yes_no"),
    ("Tell me about the trip and when it was", "when"),
    ("Lisbon flights", "other"),
    ("", "other"),
    ("?!?", "other"),
])
def test_qtype(q, qt):
    assert n.qtype(q) == qt


def test_features_describe_shape_not_words():
    f = n.features("Booked the flight: SFO to LIS, departs March 14, 9:40am", "fact", "maya").split()
    assert f == ["kind:fact", "src:other", "len:m", "date", "clock", "num", "entity"]
    assert n.features("ok", "tool_result", "tool").split() == ["kind:tool_result", "src:tool", "len:xs"]
    # unknown kinds and sources never become features of their own
    assert n.features("I paid $40?", "my-weird-kind", None).split() == [
        "kind:other", "src:none", "len:xs", "num", "money", "self", "question"]
    assert n.features("see https://example.com", "note", "Assistant").split()[:2] == [
        "kind:note", "src:assistant"]


def test_features_entity_skips_sentence_starts():
    assert "entity" not in n.features("The cat sat. Then it slept.", "fact", None).split()
    assert "entity" in n.features("I met Caroline at the park", "fact", None).split()


def test_active_crosses_with_question_type():
    assert n.active("kind:fact date", "when") == ["kind:fact", "date", "when/kind:fact", "when/date"]
    with pytest.raises(ValueError, match="unknown question type 'sometimes'"):
        n.active("kind:fact", "sometimes")


@pytest.mark.parametrize("q, expected", [
    ("When is my flight to Lisbon?", '"flight" OR "lisbon"'),
    ('Lisbon" OR 1=1 --', '"lisbon" OR "1"'),
    ("NEAR(flight lisbon) AND NOT * ^x:y -z", '"near" OR "flight" OR "lisbon" OR "x" OR "y" OR "z"'),
    ("Maya's flights, flights!", '"maya" OR "flights"'),
    # non-ASCII case is left to FTS5's unicode61 tokenizer, which folds it
    ("café Ünïcode 東京", '"café" OR "Ünïcode" OR "東京"'),
])
def test_match_quotes_every_term(q, expected):
    assert n.match(q) == expected


def test_match_with_namespace_and_without_terms():
    tag = n.ns_tag("user:maya")
    assert tag.startswith("ns") and len(tag) == 18
    assert n.match("flight", "user:maya") == f'nstag : "{tag}" AND ("flight")'
    assert n.match("") is None
    assert n.match("what is the", "x") is None


def test_recency_and_noisy_or_arithmetic():
    assert n.recency(0, 30, 0.5) == 1.0
    assert n.recency(30, 30, 0.5) == pytest.approx(0.75)
    assert n.recency(60, 30, 0.2) == pytest.approx(0.2 + 0.8 * 0.25)
    assert n.recency(-5, 30, 0.5) == 1.0  # the future counts as now
    assert n.noisy_or([0.5, 0.5]) == pytest.approx(0.75)
    assert n.noisy_or([]) == 0.0


def test_link_view_borrows_at_most_pseudocount():
    # others: pooled minus own = (30, 70): 100 observations scaled to 20
    a, b = n.link_view(1, 2, 31, 72, 20)
    assert (a, b) == pytest.approx((1 + 6, 2 + 14))
    # few observations elsewhere are taken whole
    assert n.link_view(0, 0, 3, 5, 20) == pytest.approx((3, 5))


def test_config_parse_rejects_bad_values():
    c = n.config("w_recency=0, half_life_days=7")
    assert c.w_recency == 0 and c.half_life_days == 7 and c.w_relevance == 1
    for bad, msg in [("w_recency=-1", "w_recency must be a number from 0 to 100"),
                     ("half_life_days=0", "half_life_days must be a positive number"),
                     ("recency_floor=nan", "recency_floor must be between 0 and 1"),
                     ("colour=3", "unknown config key 'colour'"),
                     ("w_usefulness=lots", "config value of 'w_usefulness' is not a number"),
                     ("w_usefulness", "expected key=value")]:
        with pytest.raises(ValueError, match=msg):
            n.config(bad)


def test_credit_used_in_proportion_to_strength():
    # no evidence: every link at the prior mean 0.1 / 10 = 0.01
    cfg = n.config("")
    rows = n.credit("kind:fact date", "when", True, b"", cfg)
    assert [r[0] for r in rows] == ["kind:fact", "date", "when/kind:fact", "when/date"]
    U = 1 - 0.99 ** 4
    for _, da, db in rows:
        assert da == pytest.approx(0.01 / U)
        assert db == pytest.approx(1 - 0.01 / U)
    ignored = n.credit("kind:fact date", "when", False, b"", cfg)
    assert [(da, db) for _, da, db in ignored] == [(0, 1)] * 4


def test_score_batch_is_the_product_of_factors():
    import numpy as np
    cfg = n.config("")
    out = n.score_batch(np.array([1.0, 0.5]), np.array([0.0, 30.0]), np.array([1.0, 1.5]),
                        np.array([0, 1]), ["kind:fact", "kind:note date"], "what", b"", cfg)
    rel, rec, imp, use, rules, score = out[1]
    assert (rel, rec, imp, rules) == pytest.approx((0.5, 0.75, 1.5, 0.1))
    assert use == pytest.approx(1 - 0.99 ** 4)
    assert score == pytest.approx(rel * rec * imp * use * rules)
    with pytest.raises(ValueError, match="candidate 0: importance must be a positive number"):
        n.score_batch(np.array([1.0]), np.array([0.0]), np.array([0.0]), np.array([0]),
                      ["kind:fact"], "what", b"", cfg)
    with pytest.raises(ValueError, match="not a link set"):
        n.score_batch(np.array([1.0]), np.array([0.0]), np.array([1.0]), np.array([0]),
                      ["kind:fact"], "what", b"HML1junk", cfg)
