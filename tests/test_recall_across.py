"""A recall across several namespaces (issue 37: doors with nothing to
re-derive): heap_recall's namespaces argument ranks them all on one scale
in the core, the lexical part of relevance being BM25 over the best BM25
among them, so a weak match in one namespace never ties an exact match in
another.  Memory.recall(namespace=[...]) and LangGraph's search call it;
a tracked recall across namespaces logs each namespace's part as a recall
of its own, which feedback judges as any other."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import heapmem

T = 1_750_000_000.0
SPACES = ["user:maya", "team", "user:ben"]
QUESTIONS = ["When is my flight to Lisbon?", "team lunch", "Lisbon hotel booking",
             "Who books the flight?"]
ACROSS = ("SELECT namespace, id, score, relevance, bm25, recall_id FROM heap_recall "
          "WHERE query = ? AND namespaces = ? AND k = ? AND now = ? AND track = ?")


def _fill(m):
    """Three namespaces whose words overlap, at different BM25 scales."""
    texts = {
        "user:maya": ["Maya's flight to Lisbon leaves on May 3 at 07:40",
                      "Maya booked the Lisbon hotel near the river",
                      "Maya prefers an aisle seat on every flight"],
        "team": ["The team offsite is in Lisbon: flight booked, hotel booked",
                 "Team lunch is every Friday at noon",
                 "Flight Lisbon flight Lisbon: the team's travel desk books it",
                 "The team's hotel booking code is LIS-42"],
        "user:ben": ["Ben's train to Porto leaves at nine",
                     "Ben books his own flight"],
    }
    for ns, rows in texts.items():
        for i, text in enumerate(rows):
            m.add(text, namespace=ns, id=f"{ns.split(':')[-1]}{i}", created_at=T - (i + 1) * 3600)


@pytest.fixture
def lex(lexmem, clock):
    _fill(lexmem)
    clock.t = T
    return lexmem


@pytest.fixture
def hybrid(mem, clock):
    _fill(mem)
    clock.t = T
    return mem


def _own(m, q, ns, k=20):
    return m.recall(q, namespace=ns, k=k, track=False)


@pytest.mark.parametrize("q", QUESTIONS)
def test_relevance_is_bm25_over_the_best_bm25_among_the_namespaces(lex, q):
    res = lex.recall(q, namespace=SPACES, k=20, track=False)
    best = max((r.bm25 for ns in SPACES for r in _own(lex, q, ns)), default=0)
    assert len(res) and best > 0
    for r in res:
        assert r.relevance == pytest.approx(r.bm25 / best, rel=1e-12, abs=1e-12)
    # the namespace with the best BM25 scores as it does alone
    top = max(res, key=lambda r: r.bm25).namespace
    alone = {r.id: r.score for r in _own(lex, q, top)}
    for r in res.parts[top]:
        assert r.score == pytest.approx(alone[r.id], rel=1e-12)


@pytest.mark.parametrize("q", QUESTIONS)
def test_the_ranking_merges_each_namespaces_own_order(lex, q):
    res = lex.recall(q, namespace=SPACES, k=6, track=False)
    scores = [r.score for r in res]
    assert scores == sorted(scores, reverse=True)
    assert [r.namespace for r in res if r.namespace not in SPACES] == []
    for ns, part in res.parts.items():
        # lexical: one scale multiplies a namespace's relevances by one
        # number, so its own order is kept
        assert part.ids == _own(lex, q, ns).ids[:len(part)]
        assert [r.id for r in res if r.namespace == ns] == part.ids
    # and it is the top 6 of everything the namespaces hold for q
    every = sorted((r.score for ns in SPACES for r in lex.recall(q, namespace=SPACES, k=20,
                                                                 track=False).parts.get(ns, ())),
                   reverse=True)
    assert scores == pytest.approx(every[:len(scores)], rel=1e-12)


@pytest.mark.parametrize("q", QUESTIONS)
def test_python_and_sql_doors_give_the_same_ranking(hybrid, q):
    res = hybrid.recall(q, namespace=SPACES, k=7, track=False)
    rows = hybrid.connection.execute(ACROSS, (q, json.dumps(SPACES), 7, T, 0)).fetchall()
    assert [(r.namespace, r.id) for r in res] == [(ns, i) for ns, i, *_ in rows]
    assert [r.score for r in res] == pytest.approx([row[2] for row in rows], rel=1e-12)
    for r in res:  # explain reads its own namespace's link set
        assert r.explain().startswith(f"score {r.score:.3f}")


def test_one_namespace_in_a_list_is_the_plain_recall(hybrid):
    for q in QUESTIONS:
        one = hybrid.recall(q, namespace="team", k=5, track=False)
        listed = hybrid.recall(q, namespace=["team"], k=5, track=False)
        assert listed.ids == one.ids
        assert [r.score for r in listed] == [r.score for r in one]
        assert listed.namespace == ("team",) and all(r.namespace == "team" for r in listed)


def test_a_tracked_recall_across_logs_each_namespaces_part(lex):
    q = "When is my flight to Lisbon?"
    res = lex.recall(q, namespace=SPACES, k=4)
    assert res.recall_id is None and set(res.parts) >= {"user:maya", "team"}
    for ns, part in res.parts.items():
        logged = lex.log.get(part.recall_id)
        assert logged.namespace == ns and list(logged.shown) == part.ids
    maya = res.parts["user:maya"]
    fb = lex.feedback([maya[0].id], recall_id=maya.recall_id)
    assert fb.used == (maya[0].id,) and set(fb.ignored) == set(maya.ids[1:])
    # a part's recall judges only its own namespace's memories
    team = res.parts["team"]
    with pytest.raises(ValueError, match="did not show"):
        lex.feedback([team[0].id], recall_id=team.recall_id, ignored=[maya[0].id])


def test_a_tracked_recall_across_in_sql_gives_each_row_its_namespaces_recall(lex):
    c = lex.connection
    rows = c.execute(ACROSS, ("flight Lisbon", json.dumps(SPACES), 5, T, 1)).fetchall()
    assert rows
    for ns, _mid, *_, rid in rows:
        assert c.execute("SELECT namespace FROM recalls WHERE id = ?", (rid,)).fetchall() == \
            [(ns,)]
        shown = json.loads(c.execute("SELECT shown FROM recalls WHERE id = ?",
                                     (rid,)).fetchall()[0][0])
        assert shown == [i for n, i, *_ in rows if n == ns]


def test_no_searchable_word_is_an_empty_recall_that_logs_nothing(lex):
    before = lex.connection.execute("SELECT count(*) FROM recalls").fetchall()
    res = lex.recall("the of and", namespace=SPACES)
    assert len(res) == 0 and res.parts == {} and res.recall_id is None
    assert lex.connection.execute("SELECT count(*) FROM recalls").fetchall() == before


@pytest.mark.parametrize("spaces,error,sentence", [
    ("team", None, None),  # a string is one namespace
    ({"team"}, TypeError, "namespace must be a string, or a list"),
    ([], ValueError, "namespaces must be a list of one or more namespaces"),
    (["team", 7], TypeError, "namespace must be a string"),
    (["team", "team"], ValueError, "namespaces names team twice"),
    (["team", "*"], ValueError, "reserved for the pooled layer"),
])
def test_bad_namespaces_get_a_sentence(lex, spaces, error, sentence):
    if error is None:
        assert lex.recall("flight", namespace=spaces, track=False).namespace == "team"
        return
    with pytest.raises(error, match=sentence):
        lex.recall("flight", namespace=spaces)


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_a_recall_across_in_the_sqlite3_shell(lex):
    q = "Lisbon hotel booking"
    want = lex.connection.execute(ACROSS, (q, json.dumps(SPACES), 5, T, 0)).fetchall()
    path = lex.path
    lex.close()
    sql = (f"SELECT namespace || ' ' || id FROM heap_recall WHERE query = '{q}' AND "
           f"namespaces = '{json.dumps(SPACES)}' AND k = 5 AND now = {T} AND track = 0;\n")
    out = subprocess.run(["sqlite3", str(path), "-cmd", f".load {heapmem.loadable_path()}"],
                         input=sql, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{ns} {i}" for ns, i, *_ in want]
