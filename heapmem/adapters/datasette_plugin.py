"""Datasette plugin: browse a heapmem store in Datasette, and rank from its SQL page.

    pip install "heapmem[datasette]"
    datasette agent.db
    # then, on the SQL page of agent.db:
    SELECT rank, id, score, text, explain FROM heap_recall
    WHERE query = 'When is my flight to Lisbon?' AND namespace = 'user:maya'

Owns: the plugin's hooks.  prepare_connection loads heapmem's compiled
library into every connection Datasette opens (heapmem.load: the very
library the Python package ranks with), so heap_recall and every heap_*
function run in Datasette's SQL; canned_queries offers "recall" (a question,
a namespace, k) on the page of each database that is a heapmem store.
Datasette reads through read-only connections, where heap_recall logs
nothing (its track argument is off there, and the canned query says
track = 0), so browsing never writes to the store.  Registered by setup.py's
entry point in the "datasette" group.
"""
from __future__ import annotations

from typing import Any

from datasette import hookimpl

from ..db import native, schema, sql
from ..errors import HeapmemError


@hookimpl
def prepare_connection(conn: Any) -> None:
    """Load heapmem's SQL functions into one of Datasette's connections."""
    if getattr(conn, "enable_load_extension", None) is None:
        raise HeapmemError(
            "heapmem's Datasette plugin cannot load its SQLite extension: this Python's sqlite3 "
            "module was built without extension loading; pip install pysqlite3-binary (Datasette "
            "uses it when installed; pip install \"heapmem[datasette]\" brings it on Linux x86-64) "
            "or run Datasette on a Python whose sqlite3 can load extensions")
    native.load(conn)


#: The canned query each heapmem store gets, as Datasette's metadata spells one.
RECALL_QUERY = {
    "title": "heapmem recall",
    "description": "Rank a namespace's memories for a question with heap_recall, untracked "
                   "(k: how many, 5 when empty).",
    "sql": sql.DATASETTE_RECALL,
    "params": ["question", "namespace", "k"],
}


@hookimpl
def canned_queries(datasette: Any, database: str) -> Any:
    """The "recall" canned query, on the page of each database that is a
    heapmem store."""
    async def inner() -> dict[str, Any]:
        db = datasette.get_database(database)
        if db.is_memory:
            return {}
        store = await db.execute_fn(lambda conn: schema.has_table(conn, "heapmem_meta"))
        return {"recall": dict(RECALL_QUERY)} if store else {}

    return inner
