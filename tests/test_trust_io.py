"""The two doors that take input from outside heapmem's own verbs (issue 11):

- `heapmem sql` without --write (heapmem.sqlguard): one statement, reading
  only; VACUUM INTO, ATTACH, a second statement, a PRAGMA with a value are
  refused before anything runs, and the connection is left as it was;
- `heapmem mcp --transport http`: a bearer token, and the Host and Origin of
  every request checked against the address served (DNS rebinding), so a web
  page cannot reach the store through the user's browser.

Every server here listens on a loopback address only.
"""
import io
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import AsyncExitStack, contextmanager

import apsw
import pytest

import heapmem
from heapmem import cli, sqlguard
from heapmem.errors import ReadOnlyError

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC


# -- heapmem sql, read mode ------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db, clock=lambda: T) as mem:
        mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", namespace="user:maya")
        mem.add("Lisbon! I'd love to visit Lisbon someday", kind="preference",
                namespace="user:maya")
    return db


def sql(db, *argv):
    """`heapmem --db db sql ...` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--db", db, "sql", *argv], clock=lambda: T, stdout=out, stderr=err,
                    env={})
    return code, out.getvalue(), err.getvalue()


def refused(result, *words):
    code, out, err = result
    assert code == 1 and out == "", result
    assert len(err.strip().splitlines()) == 1 and err.startswith("heapmem: error: "), err
    for w in words:
        assert w in err, (w, err)


def count(db):
    with heapmem.open(db, readonly=True) as mem:
        return mem.count


def test_vacuum_into_a_path_is_refused_and_no_file_appears(store, tmp_path):
    target = tmp_path / "elsewhere" / "copy.db"
    target.parent.mkdir()
    refused(sql(store, f"VACUUM INTO '{target}'"), "writes to the store or the file system",
            "VACUUM INTO", "add --write")
    refused(sql(store, "VACUUM"), "VACUUM")
    assert not target.exists() and os.listdir(target.parent) == []
    with heapmem.open(store) as mem:  # the guard itself, on a read-write connection
        with pytest.raises(ReadOnlyError, match="VACUUM INTO"):
            sqlguard.run_read_only(mem.connection, f"VACUUM INTO '{target}'")
    assert not target.exists()


def test_attach_is_refused(store, tmp_path):
    other = tmp_path / "other.db"
    refused(sql(store, f"ATTACH 'file:{other}?mode=rwc' AS other"), "ATTACH", "add --write")
    refused(sql(store, "DETACH main"), "DETACH")
    assert not other.exists()


def test_a_second_statement_is_refused_and_nothing_runs(store):
    refused(sql(store, "SELECT 1; DELETE FROM memories"), "one statement per call",
            "DELETE FROM memories")
    refused(sql(store, "SELECT 1; SELECT 2"), "one statement per call")
    refused(sql(store, "SELECT 1; -- a comment\n SELECT 2"), "one statement per call")
    assert count(store) == 2
    with heapmem.open(store) as mem:  # not even on a read-write connection
        with pytest.raises(ValueError, match="one statement per call"):
            sqlguard.run_read_only(mem.connection, "SELECT 1; DELETE FROM memories")
        assert mem.count == 2


@pytest.mark.parametrize("statement, words", [
    ("PRAGMA user_version=5", ["sets a pragma", "user_version = 5"]),
    ("PRAGMA writable_schema=1", ["writable_schema"]),
    ("PRAGMA writable_schema", ["does not allow"]),
    ("PRAGMA wal_checkpoint", ["wal_checkpoint"]),
    ("DELETE FROM memories", ["DELETE on memories"]),
    ("UPDATE memories SET importance = 2", ["UPDATE of memories.importance"]),
    ("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')", ["INSERT on memories_fts"]),
    ("DROP TABLE memories", ["DROP TABLE memories"]),
    ("CREATE TEMP TABLE t(x)", ["CREATE TEMP TABLE"]),
    ("BEGIN", ["transaction"]),
    ("SAVEPOINT a", ["transaction"]),
    ("ANALYZE", ["ANALYZE"]),
    ("REINDEX", ["REINDEX"]),
    ("EXPLAIN DELETE FROM memories", ["DELETE on memories"]),
    ("SELECT load_extension('x')", ["load_extension"]),
])
def test_statements_that_could_write_are_refused(store, statement, words):
    with heapmem.open(store, readonly=True) as mem:
        version = mem.schema_version
    refused(sql(store, statement), *words, "add --write")
    with heapmem.open(store) as mem:
        assert mem.count == 2 and mem.schema_version == version and mem.check().ok
    # no file but the store's own (its -wal and -shm come and go)
    assert [f for f in os.listdir(os.path.dirname(store)) if not f.startswith("agent.db")] == []


def test_pragma_user_version_is_refused_on_a_writable_connection(store):
    with heapmem.open(store) as mem:
        version = mem.schema_version
        with pytest.raises(ReadOnlyError, match="user_version = 5"):
            sqlguard.run_read_only(mem.connection, "PRAGMA user_version=5")
        assert mem.schema_version == version


def test_reads_work(store):
    code, out, err = sql(store, "SELECT heap_qtype('When is my flight?') AS qtype, "
                                "count(*) AS n FROM memories", "--json")
    assert (code, err) == (0, "") and json.loads(out) == [{"qtype": "when", "n": 2}]
    # a ';' inside a string literal is no second statement, nor is a trailing comment
    code, out, _ = sql(store, "SELECT 'a; DELETE FROM memories; b' AS s;  -- done", "--json")
    assert code == 0 and json.loads(out) == [{"s": "a; DELETE FROM memories; b"}]
    code, out, _ = sql(store, "SELECT id FROM memories WHERE text LIKE '%;%' OR 1 /* ; */",
                       "--json")
    assert code == 0 and len(json.loads(out)) == 2
    for statement in ("PRAGMA table_info(memories)", "PRAGMA user_version",
                      "PRAGMA integrity_check", "SELECT * FROM pragma_index_list('memories')",
                      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                      "WHERE n < 3) SELECT n FROM r",
                      "SELECT m.id FROM memories_fts f JOIN memories m ON m.seq = f.rowid "
                      "WHERE memories_fts MATCH 'Lisbon'"):
        code, out, err = sql(store, statement)
        assert code == 0 and err == "", (statement, err)
    assert sql(store, "-- nothing but a comment")[0] == 0
    refused(sql(store, "SELECT nope"), "SQL error", "nope")
    assert count(store) == 2


def test_the_store_still_works_after_a_refusal(store):
    with heapmem.open(store, clock=lambda: T) as mem:
        conn = mem.connection
        for bad in ("DELETE FROM memories", "SELECT 1; SELECT 2", "VACUUM", "SELECT nope"):
            with pytest.raises((ReadOnlyError, ValueError, apsw.Error)):
                sqlguard.run_read_only(conn, bad)
            assert conn.authorizer is None  # removed after each call
        assert sqlguard.run_read_only(conn, "SELECT count(*) FROM memories") == (
            ["count(*)"], [[2]])
        assert conn.authorizer is None
        it = mem.add("Seat preference: window", kind="preference", namespace="user:maya")
        assert mem.count == 3 and mem.forget([it.id]) == 1
        assert mem.check().ok


def test_an_authorizer_of_the_callers_own_is_put_back(store):
    with heapmem.open(store) as mem:
        calls = []

        def mine(*args):
            calls.append(args)
            return apsw.SQLITE_OK

        mem.connection.authorizer = mine
        with pytest.raises(ReadOnlyError):
            sqlguard.run_read_only(mem.connection, "DELETE FROM memories")
        assert mem.connection.authorizer is mine
        mem.connection.authorizer = None


def test_write_runs_the_sql_as_it_is(store):
    code, out, _ = sql(store, "UPDATE memories SET importance = 2 WHERE id = 'm1'", "--write")
    assert code == 0 and out.strip() == "(no rows)"
    with heapmem.open(store, readonly=True) as mem:
        assert mem.get("m1").importance == 2
    p = subprocess.run([sys.executable, "-m", "heapmem.cli", "sql", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert "bypassing heapmem's invariants" in text and "heapmem check" in text
