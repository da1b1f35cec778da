"""tune(): replay the feedback log, deploy only what is significantly better."""
import random

import pytest

import heapmem


def _teach(mem, users=12, noise=False, seed=1):
    rng = random.Random(seed)
    for u in range(users):
        ns = f"u{u}"
        items = []
        for i in range(8):
            items.append({"text": f"appointment {i} with Dr Lee on Friday at {i + 1}pm",
                          "namespace": ns, "id": f"{ns}-t{i}"})
            items.append({"text": f"appointment {i} with Dr Lee is great, I really like "
                                  f"appointment {i} and appointment {i} again",
                          "namespace": ns, "id": f"{ns}-x{i}", "kind": "episode"})
        mem.add_many(items)
        for i in range(8):
            res = mem.recall(f"When is appointment {i} with Dr Lee?", namespace=ns, k=5)
            if noise:
                used = [rng.choice(res.ids)]
            else:
                used = [r for r in res.ids if r.startswith(f"{ns}-t")][:1]
            mem.feedback(used=used, recall_id=res.recall_id)


def test_tune_deploys_a_significantly_better_weight(tmp_path, clock):
    path = str(tmp_path / "t.db")
    cfg = heapmem.ScoringConfig(w_usefulness=0.0)  # learning switched off by hand
    mem = heapmem.open(path, clock=clock, config=cfg, embedder=None)  # lexical: as _teach expects
    _teach(mem)
    rep = mem.tune()
    assert rep.recalls == 96 and rep.folds == "namespace"
    assert rep.current == {"w_usefulness": 0.0, "mrr": pytest.approx(0.5)}
    assert rep.best["mrr"] == 1.0 and rep.gain[1] > 0
    assert rep.deployed and mem.config.w_usefulness == rep.best["w_usefulness"]
    assert "deployed: w_usefulness 0 ->" in str(rep)
    mem.close()
    # the tuned weight is the store's default from now on
    with heapmem.open(path, clock=clock) as again:
        assert again.config.w_usefulness == rep.best["w_usefulness"]
    # an explicit config still wins
    with heapmem.open(path, clock=clock, config=cfg) as explicit:
        assert explicit.config.w_usefulness == 0.0


def test_tune_leaves_chance_feedback_alone(tmp_path, clock):
    mem = heapmem.open(str(tmp_path / "n.db"), clock=clock)
    _teach(mem, noise=True)
    before = mem.config
    rep = mem.tune()
    assert not rep.deployed and mem.config == before
    mem.close()


def test_tune_needs_enough_feedback(mem):
    mem.add("appointment on Friday at 3pm", id="a")
    res = mem.recall("When is the appointment?")
    mem.feedback(used=["a"], recall_id=res.recall_id)
    rep = mem.tune()
    assert not rep.deployed and rep.recalls == 1 and "needs 30" in rep.reason
