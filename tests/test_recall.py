"""recall(): candidates, each factor alone and switched off, rules, bad input."""
import pytest

import heapmem

from conftest import DAY

OFF = dict(w_relevance=0, w_recency=0, w_importance=0, w_usefulness=0)


def only(**w):
    return heapmem.ScoringConfig(**{**OFF, **w})


def test_relevance_alone_is_normalised_bm25(lexmem):
    mem = lexmem
    mem.add("lisbon lisbon flight", id="both")
    mem.add("lisbon", id="one")
    mem.add("rome", id="none")
    res = mem.recall("flight to Lisbon", k=5, config=only(w_relevance=1))
    assert res.ids == ["both", "one"]
    assert res[0].relevance == 1.0 and res[0].score == 1.0
    assert 0 < res[1].relevance < 1 and res[1].score == res[1].relevance
    assert res[0].bm25 > res[1].bm25 > 0


def test_recency_alone_uses_last_use(mem, clock):
    mem.add("lisbon trip old", id="old", created_at=clock.t - 60 * DAY)
    mem.add("lisbon trip new", id="new", created_at=clock.t - 30 * DAY)
    cfg = only(w_recency=1)
    res = mem.recall("lisbon", config=cfg)
    assert res.ids == ["new", "old"]
    assert res[0].recency == pytest.approx(0.75) and res[1].recency == pytest.approx(0.625)
    # a use refreshes: the old memory, used now, is fresh again
    mem.mark_used(["old"], recall_id=res.recall_id)
    res = mem.recall("lisbon", config=cfg)
    assert res.ids == ["old", "new"] and res[0].recency == 1.0 and res[0].age_days == 0


def test_recency_half_life_and_floor(mem, clock):
    mem.add("lisbon", created_at=clock.t - 10 * DAY)
    r = mem.recall("lisbon", config=only(w_recency=1).replace(half_life_days=10,
                                                             recency_floor=0.2))[0]
    assert r.recency == pytest.approx(0.2 + 0.8 * 0.5)


def test_importance_alone(mem):
    mem.add("lisbon note", kind="tool_result", id="tool")
    mem.add("lisbon rule", kind="instruction", id="rule")
    mem.add("lisbon custom", importance=7.5, id="custom")
    res = mem.recall("lisbon", config=only(w_importance=1))
    assert res.ids == ["custom", "rule", "tool"]
    assert [r.score for r in res] == [7.5, 1.5, 0.6]


def test_usefulness_alone_without_feedback_is_neutral(mem):
    mem.add("lisbon", kind="fact")
    mem.add("lisbon at 5pm on Friday with Ana, who paid $30?", kind="fact")
    res = mem.recall("where is lisbon", config=only(w_usefulness=1))
    assert [r.usefulness for r in res] == [1.0, 1.0]
    # the reference design's noisy-OR of the prior strengths
    r = mem.recall("where is lisbon", config=only(w_usefulness=1).replace(model=0))[0]
    k = 2 * (len(r.features) + 2)  # + base and age, each alone and crossed
    assert r.usefulness == pytest.approx(1 - 0.99 ** k)


def test_defaults_on_day_one_rank_by_relevance_and_importance(mem, clock):
    mem.add("lisbon lisbon", id="a", created_at=clock.t - 300 * DAY)
    mem.add("lisbon and porto", id="b", kind="instruction", created_at=clock.t)
    res = mem.recall("lisbon")
    for r in res:
        assert r.score == pytest.approx(r.relevance * r.importance)


def test_weight_zero_switches_a_factor_off(mem, clock):
    mem.add("lisbon", created_at=clock.t - 300 * DAY, importance=9)
    cfg = heapmem.ScoringConfig(w_recency=1, w_usefulness=1, model=0)
    full = mem.recall("lisbon", config=cfg)[0]
    assert full.score == pytest.approx(full.relevance * full.recency * full.importance
                                       * full.usefulness * full.rules)
    r = mem.recall("lisbon", config=cfg.replace(w_recency=0, w_importance=0))[0]
    assert r.score == pytest.approx(r.relevance * r.usefulness)
    line = r.explain()
    assert "recency" not in line and "importance" not in line


def test_superseded_by_key(mem, clock):
    mem.add("Maya's seat preference: aisle", key="seat", id="old", created_at=clock.t - DAY)
    mem.add("Maya's seat preference: window", key="seat", id="new", created_at=clock.t - DAY / 2)
    mem.add("seat belts on", id="other")
    res = mem.recall("seat preference", k=3, config=only(w_relevance=1))
    by = {r.id: r for r in res}
    assert by["old"].superseded and by["old"].rules == 0.1
    assert not by["new"].superseded and by["new"].rules == 1.0
    assert "superseded 0.10" in by["old"].explain()
    assert res.ids[0] == "new"
    # the key is per namespace
    mem.add("seat preference: middle", key="seat", namespace="other-user")
    assert {r.id: r.superseded for r in mem.recall("seat preference", k=3)}["new"] is False


def test_explain_line(lexmem, clock):
    mem = lexmem
    mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", source="maya",
            created_at=clock.t - 20 * DAY)
    res = mem.recall("When is my flight?")
    assert res[0].explain() == ("score 1.000 = rel 1.00 x importance 1.00 x useful 1.00^0.3 "
                                "[no link beats the base rate yet: kind:fact needs about 7 more "
                                "uses]")
    cfg = heapmem.ScoringConfig(w_recency=1, w_usefulness=1, model=0)
    line = mem.recall("When is my flight?", config=cfg)[0].explain()
    assert line.startswith("score 0.200 = rel 1.00 x recency 0.81 (age 20.0d) x importance "
                           "1.00 x useful 0.25 [base=0.01 ")
    assert line.endswith("+25]")


def test_fts_syntax_is_text(mem):
    mem.add('He said "NEAR" and AND OR NOT, then left (quickly): a-b ^c *', id="x")
    for q in ['"', '"NEAR"', "NEAR(", "AND", "OR NOT", "a-b", "^c", "*", "(quickly):",
              "nstag : foo", 'x" OR nstag:"', "text:left"]:
        res = mem.recall(q, track=False)
        assert res.ids in ([], ["x"]), q
    assert mem.recall('quickly" OR "x').ids == ["x"]


def test_empty_and_stop_word_questions_return_nothing(lexmem):
    mem = lexmem
    mem.add("the what is of")
    for q in ["", "   ", "what is the", "?!"]:
        res = mem.recall(q)
        assert len(res) == 0 and res.recall_id is None and res.ids == []


def test_namespaces_are_separate(mem):
    mem.add("lisbon flight", namespace="a", id="a1")
    mem.add("lisbon flight", namespace="b", id="b1")
    assert mem.recall("lisbon", namespace="a").ids == ["a1"]
    assert mem.recall("lisbon", namespace="b").ids == ["b1"]
    assert mem.recall("lisbon", namespace="c").ids == []


def test_k_and_candidates(lexmem):
    mem = lexmem
    for i in range(20):
        mem.add(f"lisbon memory {i}")
    assert len(mem.recall("lisbon", k=7)) == 7
    assert len(mem.recall("lisbon", k=50, config=heapmem.ScoringConfig(candidates=5))) == 5
    assert [r.rank for r in mem.recall("lisbon", k=3)] == [1, 2, 3]


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(query=None), TypeError, "query must be a string"),
    (dict(query=b"x"), TypeError, "query must be a string"),
    (dict(query="x", k=0), ValueError, "k must be from 1"),
    (dict(query="x", k=-3), ValueError, "k must be from 1"),
    (dict(query="x", k=2.5), TypeError, "k must be an integer"),
    (dict(query="x", namespace=""), ValueError, "namespace must not be empty"),
    (dict(query="x", now=float("inf")), ValueError, "finite"),
    (dict(query="x", config={"w_recency": 0}), TypeError, "ScoringConfig"),
    (dict(query="\udc80"), ValueError, "lone surrogate"),
])
def test_bad_recall(mem, kwargs, exc, msg):
    q = kwargs.pop("query")
    with pytest.raises(exc, match=msg):
        mem.recall(q, **kwargs)


def test_track_false_records_nothing(mem):
    mem.add("lisbon")
    changes = mem.connection.totalchanges()
    res = mem.recall("lisbon", track=False)
    assert res.recall_id is None and res.ids == ["m1"]
    assert mem.connection.totalchanges() == changes


@pytest.mark.parametrize("field, value, msg", [
    ("w_recency", -1, "w_recency must be a number from 0 to 100"),
    ("half_life_days", 0, "half_life_days must be a positive number"),
    ("recency_floor", 1.5, "recency_floor must be between 0 and 1"),
    ("candidates", 0, "candidates must be an integer from 1 to 1000"),
    ("prior_alpha", 0, "prior_alpha and prior_beta must be positive"),
    ("pooled_pseudocount", float("nan"), "pooled_pseudocount"),
])
def test_bad_config(field, value, msg):
    with pytest.raises(ValueError, match=msg):
        heapmem.ScoringConfig(**{field: value})
    with pytest.raises(TypeError, match="must be a number"):
        heapmem.ScoringConfig(**{field: "1"})


def test_explain_counts_down_to_the_first_link_that_counts(lexmem):
    """Before any link passes the gate, explain says which is nearest and how
    many more uses it needs; with uses alone (nothing ignored) the count is
    exact: after that many, the link counts."""
    import re
    mem = lexmem
    mem.add("Dentist appointment on Tuesday at 3pm", id="d")
    mem.add("I want a dentist")
    res = mem.recall("When is my dentist appointment?")
    first = re.search(r"needs about (\d+) more uses?\]", res[0].explain())
    assert first, res[0].explain()
    for left in range(int(first.group(1)), 0, -1):
        line = res[0].explain()
        # (the memory's own record may add "x context" after the bracket)
        assert f"needs about {left} more use{'s' if left > 1 else ''}]" in line, line
        mem.feedback(used=["d"], ignored=[], recall_id=res.recall_id)
        res = mem.recall("When is my dentist appointment?")
    assert "no link beats" not in res[0].explain() and res[0].usefulness > 1


def test_a_dropped_recall_is_freed_without_the_cyclic_collector(mem):
    """A Result points to what it was scored with, not to its Recall: a
    recall and its results form no cycle, so dropping them frees them at
    once (an agent's recall a turn never waits for gc)."""
    import gc
    import weakref
    mem.add("Maya's flight to Lisbon leaves at 07:40", namespace="user:maya")
    mem.add("The team flies to Lisbon too", namespace="team")
    gc.disable()
    try:
        for spaces in ("user:maya", ["user:maya", "team"]):
            res = mem.recall("flight to Lisbon", namespace=spaces)
            assert len(res) and res[0].explain()
            refs = [weakref.ref(res)] + [weakref.ref(r) for r in res]
            del res
            assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()
