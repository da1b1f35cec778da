"""heapmem in Datasette (issue 23): the plugin heapmem.adapters.datasette_plugin, through
Datasette's own test client.

The plugin is registered by setup.py's entry point; every connection Datasette
opens has heapmem's library loaded, so heap_recall runs from the SQL page (the
README's query), and each heapmem store gets the canned query "recall".
Datasette reads through read-only connections: browsing and ranking write
nothing to the store.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

datasette_app = pytest.importorskip(
    "datasette.app", reason="datasette is not installed (pip install 'heapmem[datasette]')")

import heapmem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "When is my flight to Lisbon?"
README_SQL = """SELECT rank, id, round(score, 3) AS score, text, explain FROM heap_recall
WHERE query = 'When is my flight to Lisbon?' AND namespace = 'user:maya'"""


def loads_extensions() -> bool:
    """Whether the sqlite3 module Datasette uses can load an extension."""
    from datasette.utils.sqlite import sqlite3
    return hasattr(sqlite3.connect(":memory:"), "enable_load_extension")


needs_loading = pytest.mark.skipif(
    not loads_extensions(), reason="this Python's sqlite3 cannot load extensions and "
                                   "pysqlite3-binary is not installed")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The README demo's agent.db."""
    tmp = tmp_path_factory.mktemp("datasette")
    subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                   check=True, capture_output=True, timeout=300)
    return str(tmp / "agent.db")


def get(paths: list[str], *urls: str) -> list:
    """GET each url from a Datasette serving paths, through its own test client."""
    async def run():
        ds = datasette_app.Datasette(paths)
        await ds.invoke_startup()
        return [await ds.client.get(u) for u in urls]
    return asyncio.run(run())


def sql_url(db: str, sql: str, **params: str) -> str:
    return f"/{db}.json?" + urllib.parse.urlencode({"sql": sql, "_shape": "array", **params})


def test_the_plugin_is_registered_by_the_entry_point():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="datasette") if ep.name == "heapmem"]
    assert [ep.value for ep in eps] == ["heapmem.adapters.datasette_plugin"], \
        "reinstall heapmem (pip install -e .) to register its Datasette plugin"
    (r,) = get([], "/-/plugins.json")
    mine = [p for p in r.json() if p["name"] == "heapmem"]
    assert mine and set(mine[0]["hooks"]) == {"prepare_connection", "canned_queries"}


@needs_loading
def test_heap_recall_runs_on_the_sql_page_and_ranks_as_python_does(demo):
    (r, v) = get([demo], sql_url("agent", README_SQL),
                 sql_url("agent", "SELECT heap_version() AS v"))
    assert r.status_code == 200, r.text
    rows = r.json()
    assert v.json() == [{"v": "v" + heapmem.__version__}]  # heapmem's own library
    with heapmem.open(demo, readonly=True) as mem:
        res = mem.recall(QUESTION, namespace="user:maya", k=5)
        assert [row["id"] for row in rows] == res.ids
        assert [row["score"] for row in rows] == [round(x.score, 3) for x in res]
        assert [row["explain"] for row in rows] == [x.explain() for x in res]
        assert rows[0]["text"].startswith("Booked the flight")


@needs_loading
def test_the_store_is_browsable_and_has_a_recall_query(demo):
    before = os.path.getsize(demo), heapmem.open(demo, readonly=True).stats()
    r_db, r_mem, r_q, r_empty_k = get(
        [demo], "/agent.json", "/agent/memories.json?_shape=array&_size=3",
        "/agent/recall.json?" + urllib.parse.urlencode(
            {"question": QUESTION, "namespace": "user:maya", "k": "2", "_shape": "array"}),
        "/agent/recall.json?" + urllib.parse.urlencode(
            {"question": QUESTION, "namespace": "user:maya", "k": "", "_shape": "array"}))
    tables = {t["name"] for t in r_db.json()["tables"]}
    assert {"memories", "recalls", "events", "links"} <= tables
    assert [q["name"] for q in r_db.json()["queries"]] == ["recall"]
    assert len(r_mem.json()) == 3 and "text" in r_mem.json()[0]
    assert [row["rank"] for row in r_q.json()] == [1, 2]
    assert r_q.json()[0]["text"].startswith("Booked the flight")
    assert len(r_empty_k.json()) == 3  # the demo's Maya has three memories; k 5 when empty
    # a tracked recall would write the log: Datasette's recalls are not tracked
    (r,) = get([demo], sql_url("agent", "SELECT recall_id FROM heap_recall WHERE query = :q "
                                        "AND namespace = 'user:maya'", q=QUESTION))
    assert r.status_code == 200, r.text
    assert [row["recall_id"] for row in r.json()] == [None] * 3
    with heapmem.open(demo, readonly=True) as mem:
        assert mem.stats() == before[1]


@needs_loading
def test_bad_input_is_one_sentence_and_writes_nothing(demo):
    with heapmem.open(demo, readonly=True) as mem:
        before = mem.stats()
    (bad_k, track, ns) = get(
        [demo],
        "/agent/recall.json?" + urllib.parse.urlencode(
            {"question": QUESTION, "namespace": "user:maya", "k": "lots"}),
        sql_url("agent", "SELECT id FROM heap_recall WHERE query = 'flight' AND "
                         "namespace = 'user:maya' AND track = 1"),
        sql_url("agent", "SELECT id FROM heap_recall WHERE query = 'flight' AND namespace = '*'"))
    assert "k must be an integer from 1 to 1000" in bad_k.text
    # asked to track on a read-only connection: SQLite refuses the write, nothing is logged
    assert track.status_code == 400 and "attempt to write a readonly database" in track.text
    assert "is not a namespace" in ns.text
    with heapmem.open(demo, readonly=True) as mem:
        assert mem.stats() == before


@needs_loading
def test_a_database_that_is_no_store_gets_no_recall_query(tmp_path):
    import sqlite3
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE t(x)")
    c.commit()
    c.close()
    (r,) = get([str(other)], "/other.json")
    assert r.json()["queries"] == []
