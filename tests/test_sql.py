"""The SQL door: registered functions, their errors, and parity with recall()."""
import json
import random
import re

import apsw
import pytest

import heapmem
from heapmem.db import native

from conftest import DAY, T0, one

FUNCTIONS = [
    ("heap_active", 2), ("heap_add", 2), ("heap_add", 3), ("heap_add", 4), ("heap_add", 5),
    ("heap_add", 6), ("heap_add", 7), ("heap_add", 8), ("heap_add", 9), ("heap_add", 10),
    ("heap_add", 11), ("heap_add", 12), ("heap_add_many", 1), ("heap_add_many", 2),
    ("heap_answer", 2),
    ("heap_answer", 3), ("heap_answer", 4), ("heap_answer", 5), ("heap_answer", 6),
    ("heap_attribute", 5),
    ("heap_bm25_row", -1), ("heap_bm25_search", 3), ("heap_bm25_search", 4),
    ("heap_bm25_search", 5),
    ("heap_bm25_tail", -1),
    ("heap_bm25_top", 6), ("heap_cosine", 2), ("heap_credit", 5),
    ("heap_credit", 6), ("heap_embed", 1), ("heap_embed", 2), ("heap_embedder", 0),
    ("heap_explain", 7), ("heap_explain", 8), ("heap_features", 3),
    ("heap_feedback", 2), ("heap_feedback", 3), ("heap_feedback", 4), ("heap_feedback", 5),
    ("heap_feedback", 6), ("heap_feedback", 7), ("heap_fold", 5), ("heap_fold", 6),
    ("heap_fold_pool", 0), ("heap_forget", 1),
    ("heap_forget_namespace", 1), ("heap_init", 0), ("heap_init", 1), ("heap_links", 5),
    ("heap_links", 6),
    ("heap_match", 1), ("heap_match", 2), ("heap_ns_tag", 1), ("heap_ntokens", 1),
    ("heap_pool_now", 0), ("heap_qtype", 1), ("heap_rebuild_pool", 0), ("heap_rebuild_pool", 1),
    ("heap_recency", 1),
    ("heap_recency", 3), ("heap_relate", 2), ("heap_save_config", 1), ("heap_score", 7),
    ("heap_score", 8),
    ("heap_statement", 1), ("heap_text_hash", 1), ("heap_time_window", 2), ("heap_tokens", 1),
    ("heap_tune", 0), ("heap_tune", 1), ("heap_vector_index", 0), ("heap_vector_index", 1),
    ("heap_vector_maintain", 2), ("heap_vector_part", 3), ("heap_vector_settings", 0),
    ("heap_vector_settings", 1), ("heap_vector_top", 3), ("heap_vector_top", 4),
    ("heap_version", 0),
]


def test_registered_functions(db):
    rows = db.execute("SELECT name, narg FROM pragma_function_list WHERE name LIKE 'heap%' "
                      "ORDER BY name, narg").fetchall()
    assert rows == FUNCTIONS
    assert one(db, "SELECT heap_version()") == "v" + heapmem.__version__
    # and the table-valued functions, heap_bm25_terms, heap_recall and
    # heap_terms (eponymous virtual tables)
    assert db.execute("SELECT name FROM pragma_module_list WHERE name LIKE 'heap%' "
                      "ORDER BY name").fetchall() == [("heap_bm25_terms",), ("heap_recall",),
                                                      ("heap_terms",)]


def test_scalar_functions(db):
    assert one(db, "SELECT heap_qtype('How many cats?')") == "how_many"
    assert one(db, "SELECT heap_features('Met Ana at 5pm', 'fact', 'user')") == (
        "kind:fact src:user len:s date:0 clock:1 num:1 money:0 entity:1 self:0 question:0 url:0")
    assert one(db, "SELECT heap_features('x', 'fact', NULL)").startswith(
        "kind:fact src:none len:xs")
    assert one(db, "SELECT heap_relate('What did Ana say?', 'Ana')") == "srcq:1"
    assert one(db, "SELECT heap_relate('What did Ana say?', NULL)") == "srcq:0"
    assert one(db, "SELECT heap_match('flight?')") == '"flight"'
    assert one(db, "SELECT heap_match('the', 'ns')") == '""'
    assert one(db, "SELECT heap_active('date:1', 'when')") == "base date:1 when/base when/date:1"
    assert one(db, "SELECT heap_recency(30)") == pytest.approx(0.75)
    assert one(db, "SELECT heap_ns_tag('user:maya')") == native.ns_tag("user:maya")


def test_score_and_explain_in_sql(db):
    s = one(db, "SELECT heap_score(0.5, 30, 1.5, 1, 'kind:note date:1', 'what', NULL)")
    assert s == pytest.approx(0.5 * 1.5 * 1.0 * 0.1)  # recency off, no evidence yet
    s1 = one(db, "SELECT heap_score(0.5, 30, 1.5, 1, 'kind:note date:1', 'what', NULL, "
                 "'w_recency=1 w_importance=0 superseded_factor=1')")
    assert s1 == pytest.approx(0.5 * 0.75)
    ref = one(db, "SELECT heap_score(1, 0, 1, 0, 'kind:note', 'what', NULL, "
                  "'model=0 w_usefulness=1')")
    assert ref == pytest.approx(1 - 0.99 ** 6)
    line = one(db, "SELECT heap_explain(1, 0, 1, 0, 'kind:fact', 'when', NULL, "
                   "'model=0 w_usefulness=1')")
    assert line == ("score 0.059 = rel 1.00 x importance 1.00 x useful 0.06 "
                    "[base=0.01 kind:fact=0.01 age:day=0.01 +3]")


def test_links_aggregate_feeds_score(db):
    db.execute("CREATE TABLE l(feature, oa, ob, pa, pb)")
    db.execute("INSERT INTO l VALUES ('base', 0, 0, 10, 90), ('date:1', 0, 0, 30, 70), "
               "('when/date:1', 2, 0, 2, 0)")
    blob = one(db, "SELECT heap_links(feature, oa, ob, pa, pb, 20) FROM l")
    assert blob[:4] == b"HML1" and len(blob) == 8 + 3 * 24
    # the others' 100 observations of base and date:1 are scaled to 20
    blob_p = one(db, "SELECT heap_links(feature, oa, ob, pa, pb) FROM l")  # no cap by default
    s = one(db, "SELECT heap_score(1, 0, 1, 0, 'date:1', 'when', ?, 'model=0 w_usefulness=1')",
            blob)
    p = (0.1 + 2) / (10 + 20)       # base: 2 successes, 18 failures
    d = (0.1 + 6) / (10 + 20)       # date:1: 6 and 14
    wd = (0.1 + 2) / (10 + 2)       # when/date:1: its own 2 successes
    age = 0.1 / 10
    assert s == pytest.approx(1 - (1 - p) * (1 - d) * (1 - wd) * (1 - age) ** 2 * (1 - 0.01))
    # in the gated model date:1 beats its base rate; more so with all the evidence
    u = one(db, "SELECT heap_score(1, 0, 1, 0, 'date:1', 'when', ?, 'w_usefulness=1')", blob)
    u_all = one(db, "SELECT heap_score(1, 0, 1, 0, 'date:1', 'when', ?, 'w_usefulness=1')",
                blob_p)
    assert u_all > u > 1
    assert one(db, "SELECT heap_score(1, 0, 1, 0, 'date:0', 'when', ?, 'w_usefulness=1')",
               blob) == 1.0
    empty = one(db, "SELECT heap_links(feature, oa, ob, pa, pb) FROM l WHERE 0")
    assert empty == b"HML1\x00\x00\x00\x00"


@pytest.mark.parametrize("sql, msg", [
    ("SELECT heap_qtype(NULL)", "heap_qtype: the question must be text"),
    ("SELECT heap_qtype(3)", "heap_qtype: the question must be text"),
    ("SELECT heap_features('x', NULL, NULL)", "heap_features: kind must be text"),
    ("SELECT heap_match(x'00')", "heap_match: the question must be text"),
    ("SELECT heap_active('date', 'sometimes')", "heap_active: unknown question type 'sometimes'"),
    ("SELECT heap_relate('q', 3)", "heap_relate: source (or NULL) must be text"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'what', NULL, 'model=2')",
     "heap_score: model must be 1 (gated lift) or 0 (reference noisy-OR)"),
    ("SELECT heap_score(1, 0, 1, 0, 'a/b', 'what', NULL)",
     "heap_score: feature names must not contain '/'"),
    ("SELECT heap_score('a', 0, 1, 0, 'f', 'what', NULL)",
     "heap_score: relevance must be a number"),
    ("SELECT heap_score(1, NULL, 1, 0, 'f', 'what', NULL)",
     "heap_score: age_days must be a number"),
    ("SELECT heap_score(1, 0, -1, 0, 'f', 'what', NULL)",
     "heap_score: importance must be a positive number"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'what', x'0102')",
     "heap_score: links must be a link set made by heap_links"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'what', 'text')",
     "heap_score: links must be a link set made by heap_links"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'whenever', NULL)",
     "heap_score: unknown question type 'whenever'"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'what', NULL, 'w_recency=-2')",
     "heap_score: w_recency must be a number from 0 to 100"),
    ("SELECT heap_score(1, 0, 1, 0, 'f', 'what', NULL, 7)", "heap_score: config must be text"),
    ("SELECT heap_explain(1, 0, 1, 0, 3, 'what', NULL)", "heap_explain: features must be text"),
    ("SELECT heap_links('f', 1, 'x', 1, 1)", "heap_links: counts and pseudocount must be numbers"),
    ("SELECT heap_links('f', -1, 0, 1, 1)", "heap_links: counts and pseudocount must be finite"),
    ("SELECT heap_recency(1, 0, 0.5)", "heap_recency: age_days must be a number"),
    ("SELECT heap_score(1, 0, 1)", "wrong number of arguments to function heap_score()"),
])
def test_sql_errors_are_sentences(db, sql, msg):
    with pytest.raises(apsw.Error, match=re.escape(msg)):
        db.execute(sql).fetchall()


def _store_with_feedback(path, clock):
    """A store with several namespaces, keys and feedback, for parity checks."""
    rng = random.Random(7)
    words = ("flight lisbon train paris dentist tuesday booked price ticket concert "
             "wedding sister car service lease haircut morning meeting report").split()
    mem = heapmem.open(path, clock=clock)
    items = []
    for ns in ("a", "b", "c"):
        for _i in range(60):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))
            if rng.random() < 0.3:
                text += f" at {rng.randint(1, 12)}pm on March {rng.randint(1, 28)}"
            if rng.random() < 0.2:
                text = text.capitalize() + " with Ana"
            items.append({"text": text, "namespace": ns,
                          "kind": rng.choice(list(heapmem.KIND_IMPORTANCE) + ["misc"]),
                          "source": rng.choice([None, "user", "tool", "ana"]),
                          "created_at": T0 - rng.uniform(0, 90) * DAY,
                          "key": rng.choice([None, None, "k1", "k2"])})
    mem.add_many(items)
    for _ in range(40):
        ns = rng.choice("ab")
        q = rng.choice(["When is the flight?", "How many tickets?", "Where is the meeting?",
                        "what about the dentist", "Did she book the train?"])
        res = mem.recall(q, k=5, namespace=ns)
        if res.ids:
            mem.feedback(used=rng.sample(res.ids, 1), recall_id=res.recall_id)
    return mem


@pytest.mark.parametrize("config", [
    heapmem.ScoringConfig(),
    heapmem.ScoringConfig(w_recency=0, w_importance=0, w_usefulness=0),
    heapmem.ScoringConfig(w_usefulness=2.5, half_life_days=7, recency_floor=0.1,
                          candidates=20, pooled_pseudocount=3),
])
def test_raw_sql_ranks_exactly_like_recall(tmp_path, clock, config):
    mem = _store_with_feedback(str(tmp_path / "p.db"), clock)
    checked = 0
    for ns in "abc":
        for q in ["When is the flight to Lisbon?", "how many concert tickets", "dentist",
                  "Who is Ana?", "the wedding of my sister", "report"]:
            res = mem.recall(q, k=10, namespace=ns, config=config, track=False)
            sql, params = mem.recall_sql(q, k=10, namespace=ns, config=config)
            rows = mem.connection.execute(sql, params).fetchall()
            assert [r[0] for r in rows] == res.ids, (ns, q)
            for (_rid, _text, score), r in zip(rows, res):
                assert abs(score - r.score) <= 1e-9
            checked += len(rows)
    assert checked > 50
    mem.close()


@pytest.mark.parametrize("model", [0, 1])
def test_heap_credit_and_heap_fold_match_the_native_credit(db, model):
    cfg = heapmem.ScoringConfig(model=model)
    links = one(db, "SELECT heap_links(column1, 0, 0, column2, column3) FROM (VALUES "
                    "('when/date:1', 5, 1), ('kind:fact', 1, 4), ('base', 2, 2))")
    rows = [("kind:fact src:user len:s date:1 srcq:0", 3.0, 1),
            ("kind:note src:none len:m date:0 srcq:1", 40.0, 0),
            ("kind:fact src:user len:xs date:1 srcq:0", 0.5, 1)]
    total = {}
    for features, age, used in rows:
        want = native.credit(features, "when", age, bool(used), links, cfg._c)
        got = json.loads(one(db, "SELECT heap_credit(?, 'when', ?, ?, ?, ?)", features, age, used,
                             links, cfg.to_sql()))
        assert [tuple(r) for r in got] == [(f, pytest.approx(a, abs=1e-15), pytest.approx(
            b, abs=1e-15)) for f, a, b in want]
        for f, a, b in want:
            t = total.setdefault(f, [0.0, 0.0, 0])
            t[0] += a
            t[1] += b
            t[2] += 1
    folded = json.loads(one(db, "SELECT heap_fold(column1, 'when', column2, column3, ?, ?) "
                                "FROM (VALUES " + ", ".join("(?, ?, ?)" for _ in rows) + ")",
                            links, cfg.to_sql(), *[v for r in rows for v in r]))
    assert list(folded) == list(total)  # first-seen order
    for f, (a, b, n) in total.items():
        assert folded[f] == [pytest.approx(a, abs=1e-12), pytest.approx(b, abs=1e-12), n]
    assert one(db, "SELECT heap_fold('x', 'when', 1, 1, NULL) WHERE 0") == "{}"


@pytest.mark.parametrize("fn", ["heap_credit", "heap_fold"])
@pytest.mark.parametrize("args, msg", [
    ("1, 'when', 1, 1, NULL", "must be text"),
    ("'kind:fact', 'nope', 1, 1, NULL", "unknown question type"),
    ("'kind:fact', 'when', 'x', 1, NULL", "must be numbers"),
    ("'kind:fact', 'when', 1, 1, 'x'", "links must be a link set"),
    ("'kind:fact', 'when', 1, 1, x'00'", "links is not a link set"),
    ("'kind:fact', 'when', 1, 1, NULL, 'model=7'", "model"),
])
def test_heap_credit_and_heap_fold_bad_input(db, fn, args, msg):
    with pytest.raises(apsw.SQLError, match=f"{fn}: .*{msg}"):
        db.execute(f"SELECT {fn}({args})").fetchall()
