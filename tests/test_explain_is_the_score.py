"""explain() is the score (issue 33, item 7; seen 13).

With contextual utility in play, recall ranked a memory at 2.068 while its
explain read "score 1.506 = ... x useful 159.80^0.3 (bounded to x3) [...] x
context 1.37", and the report's bar labelled "useful 195.86^0.3" showed x6.39.
Now, for every result of every door, on random stores with context,
exploration, priors and the lift bound on:
- the score explain() prints is the score, to its printed precision;
- the factors it prints multiply to that score, within what their rounding
  allows; and the factors' values multiply to the score to 1e-9:
  relevance^w x recency^w x importance^w x lift x rules;
- heap_recall's explain column says what Python's explain() says;
- the report's bars multiply to the score.
max_lift bounds every learned factor together (usefulness's lift, context,
explore): Result.lift never leaves [1/max_lift, max_lift].
"""
from __future__ import annotations

import json
import math
import random
import re

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heapmem
from heapmem import ScoringConfig
from heapmem.io import report, transfer

from conftest import DAY, T0

WORDS = ["flight", "Lisbon", "tea", "green", "Ana", "meeting", "Friday", "9:40", "$40",
         "ticket", "hotel", "dinner", "Maya", "train", "Oslo", "book", "call", "doctor"]
QUESTIONS = ["When is my flight to Lisbon?", "What tea does Maya like?", "Who is Ana?",
             "When is the meeting on Friday?", "How much was the ticket?",
             "Where is the hotel in Oslo?", "When do I call the doctor?"]
KINDS = ["fact", "preference", "instruction", "episode", "tool_result", "note"]
SOURCES = [None, "user", "assistant", "tool", "Ana"]


def _store(path, seed: int, prior: bool, tmp):
    rnd = random.Random(seed)
    clock = {"t": T0}
    m = heapmem.open(str(path), clock=lambda: clock["t"])
    for _ in range(rnd.randint(8, 30)):
        words = rnd.sample(WORDS, rnd.randint(2, 6))
        m.add(" ".join(words), namespace="u", kind=rnd.choice(KINDS),
              source=rnd.choice(SOURCES), key=rnd.choice([None, None, "k1", "k2"]),
              created_at=T0 - rnd.random() * 90 * DAY)
    if prior:
        rows = [{"feature": f, "qtype": "when", "alpha": 100.0, "beta": 0.0, "n": 100}
                for f in ("when/kind:fact", "when/date:1", "when/src:user")]
        rows.append({"feature": "when/base", "qtype": "when", "alpha": 5.0, "beta": 95.0,
                     "n": 100})
        p = tmp / f"prior{seed}.jsonl"
        with open(p, "w") as f:
            f.write(json.dumps({"heapmem": "links", "format": 1, "version": "x",
                                "count": len(rows)}) + "\n")
            f.writelines(json.dumps(r) + "\n" for r in rows)
        transfer.import_file(m, str(p))
    for _ in range(rnd.randint(0, 40)):  # feedback: the same question over and over, mostly
        clock["t"] += 3600
        q = rnd.choice(QUESTIONS[:2]) if rnd.random() < 0.8 else rnd.choice(QUESTIONS)
        r = m.recall(q, namespace="u", k=4)
        if len(r) and r.recall_id is not None:
            m.feedback([r[0].id] if rnd.random() < 0.9 else [], recall_id=r.recall_id)
    clock["t"] += DAY
    return m


def _printed_product(line: str) -> tuple[float, float, float]:
    """The score a line prints, and the least and most its printed factors can
    multiply to given their rounding (each printed value +- half its last digit)."""
    score = float(re.match(r"score (\S+) = ", line)[1])
    lo = hi = 1.0

    def factor(value: str, exp: str | None) -> None:
        nonlocal lo, hi
        v = float(value)
        half = 0.5 * 10 ** -(len(value.split(".")[1]) if "." in value else 0)
        e = float(exp) if exp else 1.0
        a, b = max(v - half, 0.0) ** e, (v + half) ** e
        lo, hi = lo * min(a, b), hi * max(a, b)

    body = line.split(" = ", 1)[1]
    learned = re.search(r"\(learned factors together bounded to x(\S+)\)", body)
    for word in ("rel", "recency", "importance"):
        m = re.search(rf"(?:^| x ){word} ([0-9.]+)(?:\^([0-9.e+-]+))?", body)
        if m:
            factor(m[1], m[2])
    if learned:
        v = float(learned[1])  # %.3g
        lo, hi = lo * v * (1 - 5e-3), hi * v * (1 + 5e-3)
    else:
        m = re.search(r" x useful ([0-9.]+)(?:\^([0-9.e+-]+))?( \(bounded to x(\S+)\))?", body)
        if m and m[3]:
            v = float(m[4])
            lo, hi = lo * v * (1 - 5e-3), hi * v * (1 + 5e-3)
        elif m:
            factor(m[1], m[2])
        for word in ("context", "explore"):
            m = re.search(rf" x {word} ([0-9.]+)", body)
            if m:
                factor(m[1], None)
    m = re.search(r" x superseded ([0-9.]+)", body)
    if m:
        factor(m[1], None)
    return score, lo, hi


def _check_result(r, cfg, line):
    score, lo, hi = _printed_product(line)
    assert f"{r.score:.3f}" == f"{score:.3f}", line
    assert lo - 6e-4 <= score <= hi + 6e-4, (line, lo, hi)
    product = (r.relevance ** cfg.w_relevance * r.recency ** cfg.w_recency
               * r.importance ** cfg.w_importance * r.lift * r.rules)
    assert math.isclose(product, r.score, rel_tol=1e-9, abs_tol=1e-12), (product, r.score)
    if cfg.model == 1:
        assert 1 / cfg.max_lift * (1 - 1e-12) <= r.lift <= cfg.max_lift * (1 + 1e-12)
    bars = report._multipliers(r, cfg)
    barred = math.prod(m for _, _, m in bars if m is not None) * r.rules
    assert math.isclose(barred, r.score, rel_tol=1e-9, abs_tol=1e-12), (bars, r.score)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), prior=st.booleans(),
       w_usefulness=st.sampled_from([0.3, 1.0, 3.0]), max_lift=st.sampled_from([1.2, 3.0, 50.0]),
       explore=st.sampled_from([0.0, 1.0, 3.0]), w_context=st.sampled_from([0.0, 1.0, 4.0]),
       gate_z=st.sampled_from([0.0, 2.0]), w_recency=st.sampled_from([0.0, 1.0]))
def test_explain_is_the_score_on_random_stores(tmp_path_factory, seed, prior, w_usefulness,
                                               max_lift, explore, w_context, gate_z, w_recency):
    tmp = tmp_path_factory.mktemp("explain")
    cfg = ScoringConfig(w_usefulness=w_usefulness, max_lift=max_lift, explore=explore,
                        w_context=w_context, context_min_sim=0.3, gate_z=gate_z,
                        w_recency=w_recency)
    m = _store(tmp / "s.db", seed, prior, tmp)
    try:
        c = apsw.Connection(str(tmp / "s.db"), flags=apsw.SQLITE_OPEN_READONLY)
        heapmem.load(c)
        for q in QUESTIONS:
            for track in (True, False):
                rec = m.recall(q, namespace="u", k=8, config=cfg, track=track)
                for r in rec:
                    _check_result(r, cfg, r.explain())
                if track:
                    continue
                # heap_recall's explain column: Python's line (less its prior note)
                rows = c.execute("SELECT id, score, explain FROM heap_recall(?, 'u', 8, ?, ?, 0)",
                                 (q, m.now(), cfg.to_sql())).fetchall()
                assert [row[0] for row in rows] == rec.ids
                for r, (_, score, line) in zip(rec, rows):
                    assert score == r.score
                    said = re.sub(r" \(prior in .*?: see mem\.priors\.list\(\)\)", "", r.explain())
                    assert said == line
        c.close()
    finally:
        m.close()


def test_the_issues_store_explains_its_score(tmp_path):
    """One user judging the same memory again and again: usefulness at its bound
    and context on top.  The score is the bound, and explain says so."""
    clock = {"t": T0}
    m = heapmem.open(str(tmp_path / "s.db"), clock=lambda: clock["t"])
    m.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", namespace="u", id="m1")
    m.add("Maya likes green tea", namespace="u", id="m2")
    m.add("The flight to Oslo was cancelled", namespace="u", id="m3")
    for _ in range(60):
        clock["t"] += 3600
        r = m.recall("When is my flight?", namespace="u")
        m.feedback(["m1"], recall_id=r.recall_id)
    cfg = ScoringConfig(w_usefulness=1.0)
    r = m.recall("When is my flight?", namespace="u", track=False, config=cfg)[0]
    assert r.id == "m1" and r.context > 1.0
    line = r.explain()
    assert r.lift == pytest.approx(cfg.max_lift)
    assert f"score {r.score:.3f} = " in line and "learned factors together bounded to x3" in line
    _check_result(r, cfg, line)
    m.close()
