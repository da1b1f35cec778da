
import os

import apsw
import pytest

import heapmem


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long soak variants, run with HEAPMEM_SOAK=1 "
                                       "(see RELIABILITY.md)")


def _memory_tmp(root="/dev/shm", room=1 << 30):
    """root when it is a directory this process can write with at least room
    bytes free, else None."""
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    ok = os.path.isdir(root) and os.access(root, os.W_OK | os.X_OK)
    return root if ok and st.f_bavail * st.f_frsize >= room else None


#: Where a test that makes a new store for each of many examples makes them
#: (tempfile's dir=): a memory file system (/dev/shm) where there is one with
#: room, as SQLite's own tests use one and tests/test_faults.py does, so that
#: a store costs no fsync, which none of those tests is about; None (the usual
#: temporary directory) elsewhere.  The stores are the same files either way.
MEMORY_TMP = _memory_tmp()


T0 = 1_700_000_000.0  # 2023-11-14: every test runs on this fixed clock
DAY = 86400.0


@pytest.fixture
def clock():
    """A settable clock: clock.t is now."""
    class Clock:
        t = T0 + 30 * DAY

        def __call__(self):
            return self.t
    return Clock()


@pytest.fixture
def mem(tmp_path, clock):
    m = heapmem.open(str(tmp_path / "agent.db"), clock=clock)
    yield m
    m.close()


@pytest.fixture
def lexmem(tmp_path, clock):
    """A store with lexical recall only (embedder=None): for tests of BM25's
    own arithmetic, which the default hybrid recall blends with cosines."""
    m = heapmem.open(str(tmp_path / "agent.db"), clock=clock, embedder=None)
    yield m
    m.close()


@pytest.fixture
def db():
    """A bare in-memory apsw connection with the extension loaded."""
    conn = apsw.Connection(":memory:")
    heapmem.load(conn)
    yield conn
    conn.close()


def back_to_schema_9(c):
    """Take schema 10's objects out of a store (the pooled layer's pending
    changes, folded into its rows first; the vector index's tables and
    triggers; threads and their index; BM25 term statistics and their
    triggers): a file as schema 9 wrote it, but for its user_version."""
    heapmem.load(c)
    c.execute("SELECT heap_fold_pool()")
    c.execute("DROP TABLE pool_pending")
    c.execute("DROP TRIGGER bm25_terms_ai; DROP TRIGGER bm25_terms_ad; "
              "DROP TRIGGER bm25_terms_au; DROP TABLE bm25_terms")
    c.execute("DROP TRIGGER vectors_part_ai; DROP TRIGGER vectors_part_au; "
              "DROP TRIGGER vectors_part_ad; DROP TRIGGER memories_part_move; "
              "DROP TABLE vector_parts; DROP TABLE vector_centroids; DROP TABLE vector_index")
    c.execute("DELETE FROM heapmem_meta WHERE key IN ('vector_index', 'last_part')")
    c.execute("DROP INDEX memories_thread; ALTER TABLE memories DROP COLUMN turn; "
              "ALTER TABLE memories DROP COLUMN thread")


def back_to_schema_7(c):
    """Take schema 10's, 9's and 8's objects out of a store (the vector index;
    threads and their index; the pooled layer's pending changes; BM25 term
    statistics; the filters' index; vector stamps, the triggers that keep
    vectors with their memories): what a test that makes a file of an older
    schema from a new store runs before it sets user_version."""
    back_to_schema_9(c)
    c.execute("DROP INDEX memories_filter")
    c.execute("DROP TRIGGER memories_embed; DROP TRIGGER memories_reembed; "
              "DROP TRIGGER memories_vector_move; DROP TRIGGER memories_vector_ad; "
              "DROP TRIGGER vectors_ad; DROP TRIGGER vectors_au; DROP TRIGGER vectors_ai; "
              "DROP TABLE vector_stamps; DROP INDEX memories_text; DROP TRIGGER events_judged; "
              "DROP TRIGGER memories_judged_ad; DROP TRIGGER recalls_judged_ad; DROP TABLE judged")


def one(conn, sql, *params):
    return conn.execute(sql, params).fetchall()[0][0]


def stop(proc):
    """End a server subprocess a test started: politely, then for sure."""
    import subprocess
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=20)


def tables_digest(path):
    """A digest of every row of every table of the SQLite file at path (its
    WAL included; FTS5's shadow tables stand for the index; not SQLite's own
    sqlite_stat tables, the planner's, which PRAGMA optimize rewrites at a
    close): equal before and after a call that wrote nothing, however SQLite
    laid out the pages."""
    c = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return connection_digest(c)
    finally:
        c.close()


def connection_digest(c):
    """tables_digest of the database a connection (apsw's, or a server
    store's heapmem.remote connection) reads."""
    import hashlib

    h = hashlib.sha256()
    for name, ddl in c.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table' "
                               "ORDER BY name").fetchall():
        if ddl.upper().startswith("CREATE VIRTUAL") or name.startswith(("sqlite_", "libsql_",
                                                                        "_litestream")):
            continue
        q = name.replace('"', '""')
        cols = [r[1].replace('"', '""') for r in c.execute(
            "SELECT * FROM pragma_table_info(?)", (name,)).fetchall()]
        # each value as its type and bytes: text that is not UTF-8 digests too
        exprs = ", ".join(f'typeof("{col}"), CAST("{col}" AS BLOB)' for col in cols)
        h.update(repr((name, sorted(repr(r) for r in c.execute(
            f'SELECT {exprs} FROM "{q}"').fetchall()))).encode())
    return h.hexdigest()
