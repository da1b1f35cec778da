"""feedback(): credit arithmetic, pooled borrowing, persistence, bad input."""
import json

import pytest

import heapmem
from conftest import DAY, T0


def links(mem, ns):
    return {(f, ): (a, b, n) for f, a, b, n in mem.connection.execute(
        "SELECT feature, alpha, beta, n FROM links WHERE namespace = ?", (ns,))}


def test_credit_arithmetic_by_hand(mem):
    mem.add("Dentist on Tuesday at 3pm", id="d", source="user", namespace="u")
    mem.add("Dentist is nice", id="n", source="user", namespace="u")
    res = mem.recall("When is the dentist?", namespace="u", k=5)
    assert res.qtype == "when" and set(res.ids) == {"d", "n"}
    fb = mem.feedback(used=["d"], recall_id=res.recall_id)
    assert fb.used == ("d",) and fb.ignored == ("n",)
    d_active = mem.get("d").features
    k = 2 * len(d_active)
    U = 1 - 0.99 ** k          # every link starts at the prior mean 0.1 / 10
    r = 0.01 / U               # each feature's share of the credit
    own = links(mem, "u")
    assert own[("when/date",)] == pytest.approx((r, 1 - r, 1))
    assert own[("when/clock",)] == pytest.approx((r, 1 - r, 1))
    # features of both memories: d's credit plus n's failure
    assert own[("kind:fact",)] == pytest.approx((r, 1 - r + 1, 2))
    # the pooled layer got the same counts
    pooled = links(mem, "*")
    for key, v in own.items():
        assert pooled[key] == pytest.approx(v)
    # events carry features and deltas only
    ev = mem.connection.execute("SELECT used, deltas FROM events ORDER BY position").fetchall()
    assert [u for u, _ in ev] in ([1, 0], [0, 1])
    assert all("Dentist" not in d for _, d in ev)
    assert mem.check().ok


def test_used_memory_rises_in_its_namespace(mem, clock):
    mem.add("Flight departs March 14 at 9:40am", id="booking", namespace="u")
    mem.add("flight prices are high", id="quote", kind="tool_result", source="tool", namespace="u")
    for _ in range(5):
        res = mem.recall("When is my flight?", namespace="u")
        mem.feedback(used=["booking"], recall_id=res.recall_id)
    res = mem.recall("When is my flight?", namespace="u")
    assert res.ids[0] == "booking"
    assert res[0].usefulness > res[1].usefulness
    top = mem.explain_usefulness("u")[0]
    assert top.feature.startswith("when/") or top.feature in res[0].features


def test_pooled_borrowing_reaches_a_new_namespace(mem):
    # ten users teach that "when" questions are answered by memories with a time
    for u in range(10):
        ns = f"user{u}"
        mem.add(f"Appointment with Dr Lee on Friday at {u + 1}pm", id=f"t{u}", namespace=ns)
        mem.add("Dr Lee is a great appointment to have", id=f"x{u}", kind="episode", namespace=ns)
        res = mem.recall("When is my appointment with Dr Lee?", namespace=ns)
        mem.feedback(used=[f"t{u}"], recall_id=res.recall_id)
    pooled = {r.feature: r for r in mem.explain_usefulness("*")}
    fresh = {r.feature: r for r in mem.explain_usefulness("newbie")}
    assert fresh["when/clock"].strength == pytest.approx(pooled["when/clock"].strength)
    assert fresh["when/clock"].strength > 3 * 0.01  # well above the prior mean
    assert fresh["when/clock"].strength > fresh["when/kind:episode"].strength
    # borrowed evidence is capped at pooled_pseudocount observations
    heavy = {r.feature: r for r in mem.explain_usefulness(
        "newbie", config=heapmem.ScoringConfig(pooled_pseudocount=2))}
    assert heavy["kind:fact"].alpha + heavy["kind:fact"].beta == pytest.approx(2)
    # and the strength of a namespace's own evidence: prior + own + scaled others
    assert fresh["when/clock"].strength == pytest.approx(
        (0.1 + fresh["when/clock"].alpha) / (10 + fresh["when/clock"].alpha
                                              + fresh["when/clock"].beta))


def test_recall_id_survives_a_restart(tmp_path, clock):
    path = str(tmp_path / "r.db")
    with heapmem.open(path, clock=clock) as mem:
        mem.add("the lisbon booking", id="a")
        mem.add("lisbon is sunny", id="b")
        rid = mem.recall("lisbon").recall_id
    with heapmem.open(path, clock=clock) as mem:
        fb = mem.feedback(used=["a"], recall_id=rid)
        assert fb.recall_id == rid and fb.ignored == ("b",)
        assert mem.get("a").last_used_at == clock.t
        assert mem.check().ok


def test_feedback_without_recall_id_finds_the_newest_recall(mem):
    mem.add("lisbon one", id="a")
    mem.add("lisbon two", id="b")
    mem.recall("lisbon")
    newest = mem.recall("lisbon one two").recall_id
    assert mem.feedback(used=["a"]).recall_id == newest


def test_twice_for_one_recall_is_refused(mem):
    mem.add("lisbon one", id="a")
    mem.add("lisbon two", id="b")
    res = mem.recall("lisbon")
    mem.feedback(used=["a"], recall_id=res.recall_id)
    before = links(mem, "default")
    with pytest.raises(ValueError, match="already has feedback"):
        mem.feedback(used=["a"], recall_id=res.recall_id)
    with pytest.raises(ValueError, match="already has feedback"):
        mem.mark_ignored(["b"], recall_id=res.recall_id)
    assert links(mem, "default") == before


def test_mark_used_then_mark_ignored_judges_each_once(mem):
    mem.add("lisbon one", id="a")
    mem.add("lisbon two", id="b")
    mem.add("lisbon three", id="c")
    res = mem.recall("lisbon")
    assert mem.mark_used(["a"], recall_id=res.recall_id).ignored == ()
    assert mem.mark_ignored(["b"], recall_id=res.recall_id).ignored == ("b",)
    # the rest: c
    fb = mem.feedback(used=[], recall_id=res.recall_id)
    assert fb.ignored == ("c",)
    assert mem.connection.execute("SELECT count(*) FROM events").fetchall()[0][0] == 3


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(used="a"), TypeError, "not a single string"),
    (dict(used=[1]), TypeError, "string ids"),
    (dict(used=["zz"]), ValueError, "did not show \\['zz'\\]"),
    (dict(used=["a", "a"]), ValueError, "same id twice"),
    (dict(used=["a"], ignored=["a"]), ValueError, "both used and ignored"),
    (dict(used=["a"], recall_id=999), ValueError, "unknown recall_id 999"),
    (dict(used=["a"], recall_id="abc"), TypeError, "recall_id must be an integer"),
    (dict(used=["a"], recall_id=1.5), TypeError, "recall_id must be an integer"),
    (dict(used=None), TypeError, "list of ids"),
    (dict(used=["a"], now=float("nan")), ValueError, "finite"),
])
def test_bad_feedback_changes_nothing(mem, kwargs, exc, msg):
    mem.add("lisbon one", id="a")
    mem.add("lisbon two", id="b")
    mem.add("porto", id="other")
    res = mem.recall("lisbon")
    kwargs.setdefault("recall_id", res.recall_id)
    changes = mem.connection.totalchanges()
    with pytest.raises(exc, match=msg):
        mem.feedback(**kwargs)
    assert mem.connection.totalchanges() == changes


def test_feedback_with_nothing_to_find_it_by(mem):
    with pytest.raises(ValueError, match="needs a recall_id"):
        mem.feedback()
    with pytest.raises(ValueError, match="no tracked recall showed"):
        mem.feedback(used=["nope"])


def test_used_memory_forgotten_since(mem):
    mem.add("lisbon one", id="a")
    mem.add("lisbon two", id="b")
    res = mem.recall("lisbon")
    mem.connection.execute("DELETE FROM memories WHERE id = 'a'")
    with pytest.raises(ValueError, match="no longer exists"):
        mem.feedback(used=["a"], recall_id=res.recall_id)
    # an ignored memory that is gone is skipped
    assert mem.feedback(used=["b"], recall_id=res.recall_id).ignored == ()
