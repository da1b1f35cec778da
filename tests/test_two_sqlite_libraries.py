"""The library loaded into two SQLite libraries in one process (issue 33).

apsw carries its own SQLite; Python's sqlite3 module and pysqlite3 carry
others.  The dynamic loader maps heapmem's library once for all of them, so a
single global `sqlite3_api` (SQLITE_EXTENSION_INIT1) held the routines of
whichever SQLite loaded it last, and every other library's connections were
driven through them: a Datasette-like pysqlite3 connection that ran
heap_recall, then heapmem.open() on the same file through apsw, then the
pysqlite3 connection again, and apsw's close finalized its statements with
pysqlite3's sqlite3_finalize (SIGSEGV, gdb: frame hr_disconnect ->
sqlite3_finalize in pysqlite3's sqlite3.c, sqlite3_api = pysqlite3's
sqlite3Apis).  Now the pointer is per thread, set on every entry from the
routines of the library that called (csrc/heapmem.c, csrc/register.c).

Each scenario runs in a child process, since the failure is a crash.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, sys, threading
    import heapmem
    from heapmem.db import native
    other_name, order, path = sys.argv[1], sys.argv[2], sys.argv[3]
    if other_name == "pysqlite3":
        from pysqlite3 import dbapi2 as other_sqlite
    else:
        import sqlite3 as other_sqlite

    def other():
        # as Datasette's plugin: a read-only connection, the library loaded into it
        c = other_sqlite.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        c.enable_load_extension(True)
        c.load_extension(native.loadable_path())
        rows = []
        for _ in range(10):
            rows = c.execute("SELECT id, round(score, 9), explain FROM heap_recall("
                             "'tea flight Lisbon', 'u', 5, NULL, NULL, 0)").fetchall()
        return c, [list(r) for r in rows]

    def apsw_side(n):
        m = heapmem.open(path)
        for i in range(n):
            m.add(f"Maya drinks tea number {i}", namespace="u")
            r = m.recall("tea Lisbon", namespace="u")
            m.feedback([r[0].id], recall_id=r.recall_id)
        ranked = [[r.id, round(r.score, 9), r.explain] for r in
                  m.recall("tea flight Lisbon", namespace="u", track=False)]
        return m, ranked

    keep = []
    if order == "other-first":
        c, a = other(); keep.append(c)
        m, b = apsw_side(20); keep.append(m)
        c2, a2 = other(); keep.append(c2)
    else:
        m, b = apsw_side(20); keep.append(m)
        c, a = other(); keep.append(c)
        m2, b2 = apsw_side(5); keep.append(m2)
        c2, a2 = other(); keep.append(c2)
    # both doors at once, from two threads
    errors = []
    def loop(fn):
        try:
            for _ in range(5):
                fn()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ts = [threading.Thread(target=loop, args=(lambda: other()[0].close(),)),
          threading.Thread(target=loop, args=(lambda: heapmem.open(path).recall(
              "tea", namespace="u", track=False),))]
    for t in ts: t.start()
    for t in ts: t.join()
    keep.reverse()
    for x in keep:
        x.close()
    print(json.dumps({"other": a2, "apsw": heapmem.open(path).recall(
        "tea flight Lisbon", namespace="u", track=False).ids, "errors": errors}))
""")


def _other_modules() -> list[str]:
    out = []
    try:
        from pysqlite3 import dbapi2
        if hasattr(dbapi2.connect(":memory:"), "enable_load_extension"):
            out.append("pysqlite3")
    except ImportError:
        pass
    import sqlite3
    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        out.append("sqlite3")
    return out


OTHERS = _other_modules()


@pytest.mark.skipif(not OTHERS, reason="no second SQLite library that loads extensions "
                                       "(pip install pysqlite3-binary: the test extra has it)")
@pytest.mark.parametrize("other", OTHERS or ["pysqlite3"])
@pytest.mark.parametrize("order", ["other-first", "apsw-first"])
def test_apsw_and_another_sqlite_in_one_process(tmp_path, other, order):
    import json

    import heapmem
    path = str(tmp_path / "s.db")
    with heapmem.open(path) as m:
        m.add("Booked the flight to Lisbon", namespace="u")
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-c", SCRIPT, other, order, path],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["errors"] == []
    # the other library's heap_recall ranks the file as apsw's does
    assert [r[0] for r in out["other"]] == out["apsw"]
