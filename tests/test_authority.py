"""Authority under noisy and scarce feedback (issue 24): learned source links
beat a more relevant wording when the evidence is strong, move nothing when it
is chance, and ScoringConfig.w_evidence scales the usefulness exponent with the
evidence behind a lift (bench/RESULTS.md 15)."""
import math
import random
import re

import pytest

import heapmem

#: (question, what the user said: a long, less relevant wording, what the
#: assistant and a web page said: the question's own words)
TOPICS = [
    ("When is my dentist appointment?",
     "Regarding the dentist, it looks like {v} this time, though that may change later.",
     "My dentist appointment is {v}.", ["Tuesday at 3pm", "Monday at 10am", "Friday at 9am"]),
    ("What is my landlord's name?",
     "As far as anyone knows the landlord thing is {v}; worth double checking.",
     "My landlord's name is {v}.", ["Gerald Huang", "Maria Okafor", "Tom Petrov"]),
    ("Which hotel did I book in Lisbon?",
     "Regarding the hotel, it looks like {v} this time, though that may change later.",
     "The hotel I booked in Lisbon is {v}.", ["Hotel Avenida", "Casa do Rio", "Alfama Inn"]),
]
SOURCES = ("user", "assistant", "web")


def add_user(mem, u):
    """Namespace user<u>: each topic answered by the user, the assistant and a web page,
    each with a different value; the user's wording is the least relevant."""
    ns = f"user{u}"
    rows = []
    for t, (_q, said, plain, vals) in enumerate(TOPICS):
        v = vals[u % 3:] + vals[:u % 3]
        for s, src in enumerate(SOURCES):
            text = (said if src == "user" else plain).format(v=v[s])
            if src == "web":
                text = "Found online: " + text
            rows.append({"id": f"{ns}-{t}-{src}", "text": text, "source": src,
                         "kind": "note" if src == "web" else "fact", "namespace": ns})
    mem.add_many(rows)
    return ns


def train(mem, users, mode, seed=0):
    """One tracked recall per topic and user, and feedback: the user's memory used
    (clean), a random shown one (shuffled), or clean with 20% given to a wrong one."""
    rng = random.Random(seed)
    for u in users:
        ns = add_user(mem, u)
        for t, (q, *_rest) in enumerate(TOPICS):
            res = mem.recall(q, namespace=ns, k=3)
            target = f"{ns}-{t}-user"
            assert target in res.ids
            if mode == "shuffled":
                used = rng.choice(list(res.ids))
            elif mode == "flip20" and rng.random() < 0.2:
                used = rng.choice([i for i in res.ids if i != target])
            else:
                used = target
            mem.feedback(used=[used], recall_id=res.recall_id)


def held_out(mem, u=99):
    ns = add_user(mem, u)
    return [mem.recall(q, namespace=ns, k=3, track=False) for q, *_rest in TOPICS]


def evidence(result):
    """The evidence explain() gives the usefulness exponent (0 when it shows none)."""
    m = re.search(r"x evidence ([0-9.]+)", result.explain())
    return float(m.group(1)) if m else 0.0


def lift(result):
    """What usefulness multiplied the score by."""
    rest = result.relevance * result.importance * result.rules * result.context
    return result.score / rest


@pytest.fixture
def store(tmp_path, clock):
    def make(name="a", **config):
        return heapmem.open(str(tmp_path / f"{name}.db"), clock=clock,
                            config=heapmem.ScoringConfig(**config))
    return make


def test_relevance_alone_prefers_the_other_wordings(store):
    mem = store(w_usefulness=0, w_importance=0)
    for res in held_out(mem):
        assert not res.ids[0].endswith("-user")
    mem.close()


@pytest.mark.parametrize("mode", ["clean", "flip20"])
@pytest.mark.parametrize("w_evidence", [0.0, 0.7])
def test_learned_authority_outranks_a_more_relevant_wording(store, mode, w_evidence):
    mem = store(w_evidence=w_evidence)
    train(mem, range(20), mode)
    for res in held_out(mem):
        top = res[0]
        assert top.id.endswith("-user"), top.explain()
        assert top.relevance < max(r.relevance for r in res)
        assert "src:user x" in top.explain()
    mem.close()


@pytest.mark.parametrize("w_evidence", [0.0, 1.0])
def test_shuffled_feedback_cannot_move_a_ranking(store, w_evidence):
    # chance can carry a link past the gate (gate_z 2: about 1 in 40 a side); in this
    # world and seed none gets there, and then no weight moves anything
    trained, fresh = store("trained", w_evidence=w_evidence), store("fresh", w_evidence=w_evidence)
    train(trained, range(20), "shuffled", seed=3)
    fresh_res = held_out(fresh)
    for a, b in zip(held_out(trained), fresh_res):
        assert a.ids == b.ids
        assert [r.usefulness for r in a] == [1.0] * len(a)
        assert [r.score for r in a] == pytest.approx([r.score for r in b], rel=1e-12)
    trained.close()
    fresh.close()


def test_the_exponent_is_w_usefulness_plus_w_evidence_times_the_evidence(store):
    assert heapmem.ScoringConfig().w_evidence == 0  # off by default
    mem = store(w_evidence=0.7)
    cfg = mem.config
    train(mem, range(20), "clean")
    for res in held_out(mem):
        for r in res:
            e = evidence(r)
            assert 0 < e < 1
            shown = re.search(r"useful [0-9.]+\^([0-9.]+) \(([0-9.]+) \+ ([0-9.]+) x", r.explain())
            assert shown and (float(shown[2]), float(shown[3])) == (0.3, 0.7)
            ex = cfg.w_usefulness + cfg.w_evidence * e  # explain prints both to two places
            assert float(shown[1]) == pytest.approx(ex, abs=0.01)
            bounded = min(max(r.usefulness ** ex, 1 / cfg.max_lift), cfg.max_lift)
            assert lift(r) == pytest.approx(bounded, rel=0.03)
    mem.close()


def test_w_evidence_0_is_usefulness_to_w_usefulness(store):
    mem = store()  # the default, w_evidence=0
    train(mem, range(20), "clean")
    for res in held_out(mem):
        for r in res:
            assert "evidence" not in r.explain()
            w = mem.config.w_usefulness
            want = min(max(r.usefulness ** w, 1 / mem.config.max_lift), mem.config.max_lift)
            assert lift(r) == pytest.approx(want, rel=1e-9)
    mem.close()


def test_more_evidence_counts_more(store):
    scarce, ample = store("scarce", w_evidence=0.7), store("ample", w_evidence=0.7)
    train(scarce, range(6), "clean")
    train(ample, range(30), "clean")
    for s, a in zip(held_out(scarce), held_out(ample)):
        us = next(r for r in s if r.id.endswith("-user"))
        ua = next(r for r in a if r.id.endswith("-user"))
        assert 0 < evidence(us) < evidence(ua) < 1
    scarce.close()
    ample.close()


def test_no_evidence_no_exponent_change(store):
    mem = store(w_evidence=1.0)
    for res in held_out(mem):
        for r in res:
            assert r.usefulness == 1.0 and lift(r) == pytest.approx(1.0)
            assert "evidence" not in r.explain()
            assert math.isfinite(r.score)
    mem.close()


def test_backoff_a_crossed_link_that_agrees_defers_to_the_plain_one(store):
    # every question the training users asked is a when/what/which question; a
    # crossed link (what/src:user) says what the plain one (src:user) says, on a
    # third of the evidence
    plain, crossed = store("plain", backoff=1), store("crossed", backoff=0)
    for mem in (plain, crossed):
        train(mem, range(20), "clean")
    for p, c in zip(held_out(plain), held_out(crossed)):
        up = next(r for r in p if r.id.endswith("-user"))
        uc = next(r for r in c if r.id.endswith("-user"))
        assert f"{p.qtype}/src:user x" in uc.explain()
        assert f"{p.qtype}/src:user x" not in up.explain()
        assert re.search(r"[\[ ]src:user x", up.explain())
        # the plain link rests on three times the evidence: its near edge is further out
        assert up.usefulness > uc.usefulness > 1
    plain.close()
    crossed.close()


def test_backoff_keeps_a_crossed_link_that_disagrees(store):
    # the user's memory is used for "when" questions, the web page's for the rest:
    # src:user alone says little, when/src:user a lot
    mem = store(backoff=1)
    for u in range(20):
        ns = add_user(mem, u)
        for t, (q, *_rest) in enumerate(TOPICS):
            res = mem.recall(q, namespace=ns, k=3)
            used = f"{ns}-{t}-{'user' if res.qtype == 'when' else 'web'}"
            mem.feedback(used=[used], recall_id=res.recall_id)
    res = held_out(mem)[0]
    assert res.qtype == "when"
    top = res[0]
    assert top.id.endswith("-user") and "when/src:user x" in top.explain()
    mem.close()
