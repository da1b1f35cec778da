"""The whole loop in SQL (issue 21): a store made, memories added, recalls,
feedback and forgetting through the C core's heap_* entry points, from any
SQLite client, ranking and learning exactly as Python does (Python runs the
same statements)."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import apsw
import numpy as np
import pytest

import heapmem
from heapmem.db import schema

ROOT = Path(__file__).resolve().parent.parent
LOOP = (ROOT / "examples" / "loop.sql").read_text()
NOW = 1741910400
Q = "When is my flight to Lisbon?"


def _raw(path, readonly=False):
    flags = apsw.SQLITE_OPEN_READONLY if readonly else (
        apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    c = apsw.Connection(str(path), flags=flags)
    heapmem.load(c)
    return c


def _statements(sql: str) -> list[str]:
    """loop.sql's statements, one by one (for a client that runs one at a time)."""
    out, cur = [], ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--") and not cur.strip():
            continue
        cur += line
        if apsw.complete(cur):
            out.append(cur.strip())
            cur = ""
    return out


def _ranks_like_python(path):
    """The file the loop left, opened by Python: recall() gives the same ids,
    order and scores as heap_recall did, and check() replays its events."""
    c = _raw(path, readonly=True)
    rows = c.execute("SELECT id, score FROM heap_recall(?, 'user:maya', 3, ?, NULL, 0)",
                     (Q, NOW)).fetchall()
    c.close()
    with heapmem.open(str(path), clock=lambda: NOW) as mem:
        res = mem.recall(Q, namespace="user:maya", k=3, track=False)
        assert [(r.id, r.score) for r in res] == rows
        assert res.ids[0] == "booking"
        report = mem.check()
        assert report.ok, report.problems
        assert report.events == 45 and report.memories == 20
    return rows


# -- the schema the C core makes --------------------------------------------------------

def test_the_c_schema_header_is_current():
    assert (ROOT / "csrc" / "schema.h").read_text() == schema.c_header(), \
        "csrc/schema.h is stale: regenerate it with schema.c_header() (its docstring says how)"


def test_heap_init_makes_exactly_heapmems_schema(tmp_path):
    c = _raw(tmp_path / "a.db")
    v = schema.SCHEMA_VERSION
    assert c.execute("SELECT heap_init()").fetchall() == [(f"a new heapmem store (schema {v})",)]
    rows = c.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema").fetchall()
    assert schema.fingerprint(rows) == schema.KNOWN_SCHEMAS[schema.SCHEMA_VERSION]
    # hybrid from the start: the library's own embedder
    assert dict(c.execute("SELECT key, value FROM heapmem_meta")) == {
        "format": "heapmem", "created_with": heapmem.__version__,
        "pool": json.dumps(schema.POOL_DEFAULTS), "embedder": "potion-base-8M",
        "embedding_dim": "256"}
    assert c.execute("SELECT heap_init()").fetchall() == [
        (f"a heapmem store already (schema {v})",)]
    with pytest.raises(apsw.SQLError, match="embed must be 1"):
        _raw(tmp_path / "b.db").execute("SELECT heap_init('yes')").fetchall()
    lexical = _raw(tmp_path / "c.db")
    lexical.execute("SELECT heap_init(0)").fetchall()
    assert "embedder" not in dict(lexical.execute("SELECT key, value FROM heapmem_meta"))
    c.close()
    with heapmem.open(str(tmp_path / "a.db")) as mem:
        assert mem.check().ok and mem.schema_version == schema.SCHEMA_VERSION


def test_heap_init_refuses_a_database_of_someone_elses(tmp_path):
    c = _raw(tmp_path / "a.db")
    c.execute("CREATE TABLE mine(x)")
    with pytest.raises(apsw.SQLError) as e:
        c.execute("SELECT heap_init()")
    # one sentence (friction 5: it nested three inside each other)
    assert str(e.value).endswith("heap_init: this database already holds tables of its own; "
                                 "heap_init makes a store only in an empty database")
    assert c.execute("SELECT name FROM sqlite_schema").fetchall() == [("mine",)]
    c.execute("PRAGMA user_version = 3")  # a store of an older schema: what to do about it
    with pytest.raises(apsw.SQLError, match=r"heap_init: this store has schema 3; open it once "
                                            r"with heapmem \(Python\) to upgrade it to \d+$"):
        c.execute("SELECT heap_init()")


# -- the loop, in three clients ----------------------------------------------------------

@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_the_loop_in_the_sqlite3_shell(tmp_path):
    """docs/sql.md's sql-loop block, run by the real sqlite3 shell with nothing
    but .load, gives the output the doc shows, and Python agrees with it."""
    out = subprocess.run(["sqlite3", str(tmp_path / "loop.db"), "-cmd",
                          f".load {heapmem.loadable_path()}", "-cmd", ".mode box"],
                         input=LOOP, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = (ROOT / "docs" / "sql.md").read_text()
    block = doc.split("<!-- sql-loop-output -->")[1].split("```text\n")[1].split("```")[0]
    assert out.stdout.strip() == block.strip()
    assert LOOP.strip() in doc
    _ranks_like_python(tmp_path / "loop.db")


def test_the_loop_through_apsw(tmp_path):
    c = _raw(tmp_path / "loop.db")
    for st in _statements(LOOP):
        c.execute(st).fetchall()
    c.close()
    _ranks_like_python(tmp_path / "loop.db")


TCL = r"""
package require sqlite3
sqlite3 db [lindex $argv 0]
db enable_load_extension 1
db eval "SELECT load_extension('[lindex $argv 1]')"
set f [open [lindex $argv 2]]
set sql [read $f]
close $f
set cur ""
foreach line [split $sql "\n"] {
  if {$cur eq "" && [string match "--*" [string trimleft $line]]} continue
  append cur $line "\n"
  if {[db complete $cur]} {
    db eval $cur row { }
    set cur ""
  }
}
db eval {SELECT id, round(score, 3) AS s FROM heap_recall('When is my flight to Lisbon?',
                                                         'user:maya', 3, 1741910400, NULL, 0)} {
  puts "$id $s"
}
db close
"""


def _tcl_sqlite() -> str | None:
    tclsh = shutil.which("tclsh")
    if tclsh is None:
        return "no tclsh on PATH"
    r = subprocess.run([tclsh], input="package require sqlite3\n", capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0 or r.stderr:
        return "Tcl has no sqlite3 package (Debian: apt-get install libsqlite3-tcl)"
    return None


@pytest.mark.skipif(_tcl_sqlite() is not None, reason=_tcl_sqlite() or "")
def test_the_loop_in_tcl(tmp_path):
    """The same loop from a language that is not Python, with its own SQLite
    binding (Debian's libsqlite3-tcl, SQLite 3.40): the same ranking."""
    script = tmp_path / "loop.tcl"
    script.write_text(TCL)
    out = subprocess.run(["tclsh", str(script), str(tmp_path / "loop.db"),
                          heapmem.loadable_path(), str(ROOT / "examples" / "loop.sql")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = _ranks_like_python(tmp_path / "loop.db")
    assert out.stdout.split() == [x for r in rows for x in (r[0], f"{round(r[1], 3):g}")]


# -- heap_recall is Memory.recall --------------------------------------------------------

class Toy:
    """A deterministic 8-d embedder: hybrid recall without a model."""
    name = "toy-8d"

    def __call__(self, texts):
        out = []
        for t in texts:
            v = np.zeros(8)
            for w in t.lower().split():
                v[sum(map(ord, w)) % 8] += 1.0
            out.append(v + 0.01)
        return np.array(out)


@pytest.mark.parametrize("hybrid", [False, True])
def test_heap_recall_ranks_as_recall_on_a_learned_store(tmp_path, hybrid):
    rnd = random.Random(7)
    words = "flight lisbon hotel booked march dinner friend sister paris train dentist".split()
    mem = heapmem.open(str(tmp_path / "a.db"), clock=lambda: NOW,
                       embedder=Toy() if hybrid else None)
    mem.set_config(w_recency=0.5, save=True)  # a tuned config heap_recall must find itself
    mem.add_many([{"text": " ".join(rnd.choice(words) for _ in range(6)) + f" {i}",
                   "namespace": f"ns{i % 6}", "created_at": NOW - rnd.randrange(90) * 86400,
                   "key": f"k{i % 7}" if i % 3 == 0 else None,
                   "kind": rnd.choice(["fact", "note", "tool_result", "preference"])}
                  for i in range(600)])
    for i in range(120):
        res = mem.recall(" ".join(rnd.sample(words, 3)), namespace=f"ns{i % 6}", k=5)
        if len(res):
            mem.feedback([res[0].id], recall_id=res.recall_id)
    c = mem.connection
    for i in range(40):
        q, ns = " ".join(rnd.sample(words, 2)), f"ns{i % 6}"
        res = mem.recall(q, namespace=ns, k=10, track=False)
        qvec = Toy()([q])[0].astype(np.float32)
        qvec = (qvec / np.linalg.norm(qvec)).tobytes() if hybrid else None
        rows = c.execute("SELECT id, score, \"explain\" FROM heap_recall(?, ?, 10, ?, NULL, 0, ?)",
                         (q, ns, NOW, qvec)).fetchall()
        assert [(r.id, r.score) for r in res] == [r[:2] for r in rows]
        assert [r.explain().split(" (prior")[0] for r in res] == [r[2] for r in rows]
    mem.close()


def test_a_tracked_heap_recall_is_logged_as_recall_logs_it(mem):
    mem.add("Booked the flight: SFO to LIS", namespace="u")
    mem.add("Flights to Lisbon cost $700", namespace="u")
    res = mem.recall(Q, namespace="u", now=NOW)
    rid = mem.connection.execute("SELECT DISTINCT recall_id FROM heap_recall(?, 'u', 5, ?)",
                                 (Q, NOW)).fetchall()[0][0]
    a, b = mem.log.get(res.recall_id), mem.log.get(rid)
    assert (a.namespace, a.query, a.qtype, a.shown, a.ages, a.features, a.rest) == \
        (b.namespace, b.query, b.qtype, b.shown, b.ages, b.features, b.rest)


# -- bad input through SQL: one sentence, nothing written ---------------------------------

@pytest.fixture
def loop_db(tmp_path):
    """The file examples/loop.sql leaves and the raw connection that ran it
    (its statements kept, its caches warm, as a client's would be).  The
    loop's commits skip their syncs (a raw connection's rollback journal with
    full syncs made this fixture cost more than the tests that use it); the
    connection is back at SQLite's default before the test gets it."""
    path = tmp_path / "loop.db"
    c = _raw(path)
    default = c.execute("PRAGMA synchronous").fetchall()[0][0]
    c.execute("PRAGMA synchronous=OFF")
    for st in _statements(LOOP):
        c.execute(st).fetchall()
    c.execute(f"PRAGMA synchronous={default}")
    assert c.execute("PRAGMA synchronous").fetchall() == [(default,)]
    yield path, c
    c.close()


def _snapshot(c):
    return [c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
            for t in ("memories", "recalls", "events", "links", "heapmem_meta")]


@pytest.mark.parametrize("sql, words", [
    ("SELECT heap_feedback('x', '[]')", "heap_feedback: recall_id must be an integer"),
    ("SELECT heap_feedback(99999, '[\"booking\"]')", "unknown recall_id 99999"),
    ("SELECT heap_feedback(1, 'booking')", "used must be a JSON array of memory ids"),
    ("SELECT heap_feedback(1, '[3]')", "used must hold string ids"),
    ("SELECT heap_feedback(1, '[\"m6\"]')", "already has feedback for \\['m6'\\]"),
    ("SELECT heap_feedback(1, '[\"booking\"]')", "did not show \\['booking'\\]"),
    ("SELECT heap_feedback(1, '[]', NULL, NULL, 'user:nobody')",
     "unknown recall_id 1 in namespace 'user:nobody'"),
    ("SELECT heap_answer(1, 'Tuesday at 3:15pm')", "already has feedback; an answer can only"),
    ("SELECT heap_answer(NULL, 'x')", "needs the recall_id"),
    ("SELECT heap_feedback(1, '[]', NULL, 'soon')", "now must be unix seconds"),
    ("SELECT * FROM heap_recall(5)", "heap_recall: the question must be text"),
    ("SELECT * FROM heap_recall('x', '*')", "is not a namespace"),
    ("SELECT * FROM heap_recall('x', 'u', 0)", "k must be an integer from 1 to 1000"),
    ("SELECT * FROM heap_recall('x', 'u', 3, 1e300)", "now must be unix seconds"),
    ("SELECT * FROM heap_recall('x', 'u', 3, NULL, 'w_usefulness=-1')",
     "w_usefulness must be a number from 0 to 100"),
    ("SELECT heap_add('', 'u')", "text must not be empty"),
    ("SELECT heap_add('x', 'u', 'fact', NULL, 'booking')", "a memory with id 'booking' already "
                                                           "exists"),
    ("SELECT heap_add('x', '*')", "namespace '\\*' is reserved"),
    ("SELECT heap_add('x', 'u', 'fact', NULL, NULL, 1e300)", "created_at must be unix seconds"),
    ("SELECT heap_add('x', 'u', 'fact', NULL, NULL, NULL, 11)", "importance must be a number"),
    ("SELECT heap_add('x', 'u', 'fact', NULL, NULL, NULL, NULL, NULL, '[1]')",
     "metadata must be a JSON object"),
    ("SELECT heap_forget('[\"booking\", \"nope\"]')", "unknown memory ids \\['nope'\\]; nothing "
                                                      "was forgotten"),
    ("SELECT heap_forget('booking')", "ids must be a JSON array"),
])
def test_bad_input_through_sql_is_one_sentence_and_writes_nothing(loop_db, sql, words):
    _, c = loop_db
    before = _snapshot(c)
    with pytest.raises(apsw.Error, match=words) as e:
        c.execute(sql).fetchall()
    assert "\n" not in str(e.value)
    assert _snapshot(c) == before


def test_a_read_only_connection_refuses_writes_in_one_sentence(loop_db):
    path, _ = loop_db
    ro = _raw(path, readonly=True)
    for sql in ("SELECT heap_feedback(16, '[\"booking\"]')", "SELECT heap_add('x', 'u')",
                "SELECT heap_forget('[\"booking\"]')"):
        with pytest.raises(apsw.ReadOnlyError, match="read-only"):
            ro.execute(sql).fetchall()
    # and a recall there is not tracked
    rows = ro.execute("SELECT recall_id FROM heap_recall(?, 'user:maya', 3, ?)",
                      (Q, NOW)).fetchall()
    assert rows and all(r[0] is None for r in rows)
    ro.close()


def test_a_file_with_a_foreign_trigger_is_refused_at_every_entry_point(loop_db):
    """The check Python's open() makes, in C: a trigger someone added never
    runs, through any heap_* entry point."""
    path, c = loop_db
    c.execute("CREATE TABLE stolen(text); CREATE TRIGGER leak AFTER INSERT ON memories BEGIN "
              "INSERT INTO stolen VALUES (new.text); END")
    for sql in ("SELECT * FROM heap_recall('When is my flight?', 'user:maya')",
                "SELECT heap_feedback(1, '[]')", "SELECT heap_add('a secret', 'user:maya')",
                "SELECT heap_forget('[\"booking\"]')"):
        with pytest.raises(apsw.SQLError, match="this file holds schema objects heapmem did "
                                                "not create .*(trigger 'leak'|table 'stolen')"):
            c.execute(sql).fetchall()
    assert c.execute("SELECT count(*) FROM stolen").fetchall() == [(0,)]
    c.execute("DROP TRIGGER leak; DROP TABLE stolen")
    assert c.execute("SELECT count(*) FROM heap_recall('When is my flight?', 'user:maya', 3, "
                     "NULL, NULL, 0)").fetchall()[0][0] == 2  # booking and quote


def test_a_database_that_is_no_store_gets_one_sentence(tmp_path):
    c = _raw(tmp_path / "plain.db")
    for sql in ("SELECT * FROM heap_recall('x', 'u')", "SELECT heap_feedback(1, '[]')",
                "SELECT heap_add('x', 'u')"):
        with pytest.raises(apsw.SQLError, match="this database is not a heapmem store"):
            c.execute(sql).fetchall()


# -- adding and forgetting ----------------------------------------------------------------

def test_heap_add_writes_the_row_add_many_writes(tmp_path):
    rows = {}
    for how in ("sql", "python"):
        path = tmp_path / f"{how}.db"
        with heapmem.open(str(path), clock=lambda: NOW) as mem:
            if how == "python":
                mem.add_many([{"text": "Booked it: SFO to LIS, March 14 at 9:40am",
                               "namespace": "user:maya", "kind": "fact", "source": "maya",
                               "created_at": NOW - 86400, "key": "trip",
                               "metadata": {"a": 1}}])
            else:
                mem.connection.execute(
                    "SELECT heap_add('Booked it: SFO to LIS, March 14 at 9:40am', 'user:maya', "
                    "'fact', 'maya', NULL, ?, NULL, 'trip', '{\"a\": 1}')", (NOW - 86400,))
            rows[how] = mem.connection.execute(
                "SELECT seq, id, namespace, nstag, text, kind, source, key, importance, "
                "features, created_at, metadata, ntok FROM memories").fetchall()
            assert mem.check().ok
    assert rows["sql"] == rows["python"]


def test_heap_forget_erases_as_forget_does(loop_db):
    path, c = loop_db
    shown = c.execute("SELECT count(*) FROM recalls WHERE namespace = 'user:ana'").fetchall()
    assert shown[0][0] > 0
    assert c.execute("SELECT heap_forget_namespace('user:ana')").fetchall() == [(3,)]
    assert c.execute("SELECT heap_forget_namespace('user:nobody')").fetchall() == [(0,)]
    assert c.execute("SELECT count(*) FROM recalls WHERE namespace = 'user:ana'"
                     ).fetchall() == [(0,)]
    assert c.execute("SELECT heap_forget('[\"booking\"]')").fetchall() == [(1,)]
    assert not c.execute("SELECT 1 FROM memories_fts WHERE memories_fts MATCH 'dentist OR "
                         "departs'").fetchall()
    # the id is never given out again
    assert c.execute("SELECT heap_add('x', 'user:maya', 'fact', NULL, NULL, ?)",
                     (NOW,)).fetchall() == [("m21",)]
    c.close()
    with heapmem.open(str(path)) as mem:
        report = mem.check()
        assert report.ok, report.problems


# -- the C fuzz, on the loop's entry points -------------------------------------------------

LOOP_DEFAULTS = {
    "heap_recall": ["'When is my flight to Lisbon?'", "'user:maya'", "3", "1741910400", "NULL",
                    "1", "NULL"],
    "heap_feedback": ["16", "'[\"booking\"]'", "NULL", "1741910400", "'user:maya'", "NULL"],
    "heap_answer": ["16", "'It departs March 14 at 9:40am'", "1741910400", "'user:maya'", "NULL"],
    "heap_add": ["'Booked a hotel in Lisbon for March 14'", "'user:maya'", "'fact'", "'maya'",
                 "NULL", "1741910400", "1.0", "'trip'", "'{\"a\": 1}'"],
    "heap_forget": ["'[\"seat\"]'"],
    "heap_forget_namespace": ["'user:eli'"],
}


def test_hostile_values_in_every_position_of_the_loops_entry_points(loop_db):
    """Every argument of heap_recall, heap_feedback, heap_answer, heap_add and
    heap_forget given each of the C fuzz's hostile values (make sanitize runs
    this under ASan and UBSan): a result or an error, never a crash, and the
    store stays one that check() passes."""
    from test_cfuzz import HOSTILE_SQL
    path, c = loop_db
    calls = 0
    for name, base in LOOP_DEFAULTS.items():
        for i in range(len(base)):
            for v in HOSTILE_SQL:
                args = list(base)
                args[i] = v
                sql = (f"SELECT * FROM {name}({', '.join(args)})" if name == "heap_recall"
                       else f"SELECT {name}({', '.join(args)})")
                try:
                    c.execute(sql).fetchall()
                except apsw.Error:
                    pass
                except UnicodeDecodeError:
                    pass  # invalid UTF-8 in, invalid UTF-8 out
                calls += 1
    assert calls > 2000
    c.close()
    with heapmem.open(str(path)) as mem:
        report = mem.check()
        assert report.ok, report.problems
