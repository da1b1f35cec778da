"""recall's kind and time filters (issue 23): kinds, since and until keep
only the memories they name, inside the candidate searches (the BM25 top N
and the vector top N are the top N of what the filters let through, so a
filtered recall finds memories an unfiltered one would have cut), through
every door: Python, recall_sql, raw SQL, the sqlite3 shell, the CLI and MCP."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import heapmem
from heapmem import ScoringConfig

DAY = 86400.0
T = 1_750_000_000.0
FEW = ScoringConfig(candidates=3)


def _ids(res):
    return [r.id for r in res]


@pytest.fixture
def lexical_pile(lexmem, clock):
    """Six facts that outrank one preference for 'flight to Lisbon' by BM25."""
    for i in range(6):
        lexmem.add(f"Flight to Lisbon, seat {i}", kind="fact", id=f"f{i}",
                   created_at=T - (10 - i) * DAY)
    lexmem.add("Somewhere in this long note about packing, shoes, books and snacks there is "
               "one flight", kind="preference", id="pref", created_at=T - 2 * DAY)
    clock.t = T
    return lexmem


def test_kinds_keep_only_those_kinds_and_search_inside_them(lexical_pile):
    q = "flight to Lisbon"
    assert "pref" not in _ids(lexical_pile.recall(q, k=10, config=FEW, track=False))
    only = lexical_pile.recall(q, k=10, config=FEW, track=False, kinds="preference")
    assert _ids(only) == ["pref"]  # BM25's top 3 of the preferences, not of all
    both = lexical_pile.recall(q, k=10, track=False, kinds=["preference", "fact"])
    assert set(_ids(both)) == {"pref"} | {f"f{i}" for i in range(6)}
    assert not len(lexical_pile.recall(q, track=False, kinds="episode"))


def test_since_is_inclusive_and_until_exclusive(lexical_pile):
    q = "flight to Lisbon"
    since = lexical_pile.recall(q, k=10, track=False, since=T - 6 * DAY)
    assert set(_ids(since)) == {"f4", "f5", "pref"}
    until = lexical_pile.recall(q, k=10, track=False, until=T - 6 * DAY)
    assert set(_ids(until)) == {"f0", "f1", "f2", "f3"}
    iso = lexical_pile.recall(q, k=10, track=False, since="2025-06-09T15:06:40Z", until=T)
    assert _ids(iso) == _ids(since)  # T - 6 days, as ISO 8601
    both = lexical_pile.recall(q, k=10, track=False, since=T - 6 * DAY, kinds="fact")
    assert set(_ids(both)) == {"f4", "f5"}


def test_the_vector_top_n_is_the_filtered_ones(mem, clock):
    """Hybrid recall: memories only the vectors find (no word of the
    question) come from the top N of the kinds asked for."""
    for i in range(6):
        mem.add(f"Booked an airplane ticket to Portugal ({i})", kind="fact", id=f"v{i}")
    mem.add("The plane departs from the airport at noon", kind="preference", id="plane")
    q = "When is my flight to Lisbon?"
    assert "plane" not in _ids(mem.recall(q, k=10, config=FEW, track=False))
    assert _ids(mem.recall(q, k=10, config=FEW, track=False, kinds="preference")) == ["plane"]


def test_a_filtered_recall_is_tracked_and_learns(lexical_pile):
    r = lexical_pile.recall("flight to Lisbon", kinds="preference")
    assert r.recall_id is not None and _ids(r) == ["pref"]
    fb = lexical_pile.feedback(["pref"], recall_id=r.recall_id)
    assert fb.used == ("pref",) or list(fb.used) == ["pref"]


@pytest.mark.parametrize("kw, error, words", [
    ({"kinds": []}, ValueError, "at least one kind"),
    ({"kinds": 3}, TypeError, "kind or a list of kinds"),
    ({"kinds": ["fact", ""]}, ValueError, "must not be empty"),
    ({"since": "yesterday"}, ValueError, "since must be unix seconds"),
    ({"until": -5}, ValueError, "until"),
    ({"since": T, "until": T}, ValueError, "since must be before until"),
])
def test_bad_filters_are_one_sentence_and_log_nothing(lexical_pile, kw, error, words):
    before = lexical_pile.stats().recalls
    with pytest.raises(error, match=words):
        lexical_pile.recall("flight to Lisbon", **kw)
    with pytest.raises(error, match=words):
        lexical_pile.recall_sql("flight to Lisbon", **kw)
    assert lexical_pile.stats().recalls == before


def test_recall_sql_carries_the_filters(lexical_pile):
    sql, params = lexical_pile.recall_sql("flight to Lisbon", k=10, kinds="preference",
                                          now=T)
    rows = lexical_pile.connection.execute(sql, params).fetchall()
    assert [r[0] for r in rows] == ["pref"]
    sql, params = lexical_pile.recall_sql("flight to Lisbon", k=10, now=T)
    assert len(lexical_pile.connection.execute(sql, params).fetchall()) == 7


@pytest.mark.parametrize("args, words", [
    ("3, NULL, NULL", "kinds must be a kind"),
    ("'[1]', NULL, NULL", "JSON array of one or more kinds"),
    ("'[]', NULL, NULL", "JSON array of one or more kinds"),
    ("'[\"fact\"', NULL, NULL", "JSON array of one or more kinds"),
    ("NULL, 'monday', NULL", "since must be unix seconds"),
    ("NULL, NULL, 1e300", "until must be unix seconds"),
    ("NULL, 20, 10", "since must be before until"),
])
def test_heap_recall_checks_its_filters(lexical_pile, args, words):
    c = lexical_pile.connection
    n = c.execute("SELECT count(*) FROM recalls").fetchall()[0][0]
    with pytest.raises(Exception, match=words):
        c.execute(f"SELECT id FROM heap_recall('flight', 'default', 5, NULL, NULL, 1, NULL, "
                  f"NULL, {args})").fetchall()
    assert c.execute("SELECT count(*) FROM recalls").fetchall()[0][0] == n


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_filters_in_the_sqlite3_shell(lexical_pile, tmp_path):
    path = lexical_pile.path
    lexical_pile.close()
    # (track 0, qvec NULL, tracked NULL, then kinds, since, until)
    sql = (f"SELECT id FROM heap_recall('flight to Lisbon', 'default', 10, {T}, NULL, 0, NULL, "
           f"NULL, '[\"preference\"]');\n"
           f"SELECT count(*) FROM heap_recall('flight to Lisbon', 'default', 10, {T}, NULL, 0, "
           f"NULL, NULL, NULL, {T - 6 * DAY}, NULL);\n")
    out = subprocess.run(["sqlite3", str(path), "-cmd", f".load {heapmem.loadable_path()}"],
                         input=sql, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["pref", "3"]
    # a kind with an escaped NUL: SQLite 3.40's json_each would cut "fact\u0000x" to
    # "fact"; the core refuses it as it refuses any NUL in a name
    bad = (f"SELECT id FROM heap_recall('flight to Lisbon', 'default', 10, {T}, NULL, 0, NULL, "
           f"NULL, '[\"fact\\u0000x\"]');\n")
    out = subprocess.run(["sqlite3", str(path), "-cmd", f".load {heapmem.loadable_path()}"],
                         input=bad, capture_output=True, text=True, timeout=60)
    assert "a kind in kinds must be valid UTF-8 without NUL bytes" in out.stderr
    assert out.stdout == ""


def test_the_cli_filters(lexical_pile):
    path = lexical_pile.path
    lexical_pile.close()
    base = [sys.executable, "-m", "heapmem", "--db", str(path), "--lexical",
            "--now", str(T), "--json"]
    out = subprocess.run(base + ["recall", "flight to Lisbon", "-k", "10", "--no-track",
                                 "--kind", "preference", "--kind", "episode"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [r["id"] for r in json.loads(out.stdout)["results"]] == ["pref"]
    out = subprocess.run(base[:-1] + ["recall", "flight to Lisbon", "--no-track",
                                      "--kind", "episode", "--since", "2020-01-01"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "(kind episode, created since 2020-01-01" in out.stdout
    out = subprocess.run(base + ["recall", "flight", "--since", "2026-01-01", "--until",
                                 "2025-01-01"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "since must be before until" in out.stderr
