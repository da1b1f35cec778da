"""Isolation and the file itself.

- Namespaces: recall never returns another namespace's memory (property
  test over namespaces that differ only in case, quotes, spaces, invisible
  characters), through recall() and through recall_sql().
- The pooled layer and the event log hold feature statistics only: never
  text, ids or query words.
- forget(ids) and forget(namespace=...) erase the text: a unique marker put
  in the text, id, key, source, metadata and a recall's query is found in
  the raw bytes of the file (db + -wal) before, and nowhere after.
- readonly=True recalls and refuses every write with ReadOnlyError, and
  leaves the file's bytes as they were; a store on read-only media (a
  read-only bind mount, or a 0555 directory for an unprivileged user)
  opens and recalls.
- Upgrades: a file with a newer schema version, or a SQLite file that is not
  a heapmem store (or not SQLite at all), is refused with
  SchemaVersionError / NotAStoreError and its bytes are untouched.
"""
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heapmem
from heapmem.db.schema import SCHEMA_VERSION

from conftest import MEMORY_TMP

SOAK = os.environ.get("HEAPMEM_SOAK") == "1"
WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_workers.py")
T0 = 1_700_000_000.0

# namespaces that differ only in case, quotes, spaces, invisible characters
NAMESPACES = ["user:maya", "User:maya", "USER:MAYA", "user:maya ", " user:maya", "user:maya\t",
              "user:'maya'", 'user:"maya"', "user:maya'", 'user:maya"', "user:maya;--",
              "user:maya\u200b", "user:mayа",  # Cyrillic a
              "user:máya", "user:maya\u202e", "ｕｓｅｒ:maya", "user%maya", "user_maya", "user*",
              "default", "ns0000000000000000", "nstag", "'", '"', "''", "日本", "😀"]
WORDS = ["flight", "lisbon", "hotel", "dentist", "tuesday", "march", "window", "seat", "piano",
         "budget", "maya", "user", "default", "nstag"]


def hsettings(n):
    return settings(max_examples=n * (20 if SOAK else 1), derandomize=True, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


@hsettings(60)
@given(adds=st.lists(st.tuples(st.integers(0, len(NAMESPACES) - 1),
                               st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)),
                     min_size=1, max_size=40),
       queries=st.lists(st.tuples(st.integers(0, len(NAMESPACES) - 1),
                                  st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)),
                        min_size=1, max_size=10),
       feedback=st.booleans())
def test_recall_never_crosses_namespaces(adds, queries, feedback):
    d = tempfile.mkdtemp(dir=MEMORY_TMP)  # a new store each example: no fsyncs
    try:
        # lexical recall: "every memory that holds a query word" is BM25's set
        # (tests/test_embed.py checks that vector candidates keep to the namespace)
        with heapmem.open(os.path.join(d, "iso.db"), clock=lambda: T0, embedder=None) as mem:
            items = mem.add_many([{"text": " ".join(words), "namespace": NAMESPACES[i]}
                                  for i, words in adds])
            owner = {it.id: it.namespace for it in items}
            for i, words in queries:
                ns = NAMESPACES[i]
                res = mem.recall(" ".join(words), namespace=ns, k=50)
                assert all(owner[r] == ns for r in res.ids), (ns, res.ids)
                # every memory of ns that holds a query word is found (k is large)
                want = {it.id for it in items if it.namespace == ns
                        and set(it.text.split()) & set(words)}
                assert set(res.ids) == want
                if feedback and res.recall_id is not None:
                    mem.feedback(used=res.ids[:1], recall_id=res.recall_id)
                sql, params = mem.recall_sql(" ".join(words), namespace=ns, k=50)
                rows = mem.connection.execute(sql, params).fetchall()
                assert {r[0] for r in rows} == want
            assert mem.check().ok
    finally:
        shutil.rmtree(d)


def test_pooled_layer_and_event_log_hold_no_text_or_ids(tmp_path):
    marker = "zqx" + secrets.token_hex(6)
    with heapmem.open(str(tmp_path / "pool.db"), clock=lambda: T0) as mem:
        ids = []
        for i, ns in enumerate(NAMESPACES[:8]):
            it = mem.add(f"{marker} flight to Lisbon with Maya on March {i + 1}", namespace=ns,
                         id=f"{marker}-id-{i}", source=f"{marker}src", key=f"{marker}key",
                         metadata={"secret": marker})
            ids.append(it.id)
            res = mem.recall(f"When is the {marker} flight to Lisbon?", namespace=ns)
            mem.feedback(used=res.ids[:1], recall_id=res.recall_id)
        c = mem.connection
        links = c.execute("SELECT namespace, feature, qtype FROM links").fetchall()
        assert links
        for ns, feature, _qt in links:
            assert ns in NAMESPACES or ns == "*"
            assert marker not in feature and "lisbon" not in feature.lower()
            assert re.fullmatch(r"([a-z_]+/)?[a-z_]+(:[a-z0-9_]+)?", feature), feature
        for (deltas,) in c.execute("SELECT deltas FROM events"):
            assert marker not in deltas and "Lisbon" not in deltas
            for f, _da, _db in json.loads(deltas):
                assert re.fullmatch(r"([a-z_]+/)?[a-z_]+(:[a-z0-9_]+)?", f), f
        for row in mem.links("*"):
            assert marker not in row.feature


# -- forget erases the bytes --------------------------------------------------------------

def file_bytes(path):
    out = b""
    for suffix in ("", "-wal", "-journal"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as f:
                out += f.read()
    return out


def found(path, marker):
    """Where the marker is in the raw bytes (its stem too: the FTS index keeps
    porter-stemmed terms)."""
    data = file_bytes(path)
    return [m for m in {marker, marker[:-2]} if m.encode() in data]


def fill(mem, marker, ns, n=30):
    """Memories holding the marker in every column, with a recall and feedback."""
    ids = []
    for i in range(n):
        it = mem.add(f"The vault code {marker} was set on Tuesday {i}", namespace=ns,
                     id=f"{marker}-id-{i}", source=f"{marker}src", key=f"{marker}key{i % 3}",
                     metadata={"note": f"{marker} metadata"})
        ids.append(it.id)
    res = mem.recall(f"What is the {marker} vault code?", namespace=ns, k=10)
    assert res.ids
    mem.feedback(used=res.ids[:2], recall_id=res.recall_id)
    return ids


def make_marker():
    # letters only (one FTS5 token); ends in "ing" so that porter stems it
    return "zqx" + "".join(secrets.choice("bcdfghjklmnpvw") for _ in range(10)) + "ing"


@pytest.mark.parametrize("portable", [False, True], ids=["in-place", "portable"])
@pytest.mark.parametrize("how", ["ids", "namespace"])
def test_forget_leaves_no_trace_in_the_file(tmp_path, how, portable):
    path = str(tmp_path / "forget.db")
    doomed, kept = make_marker(), make_marker()
    with heapmem.open(path, clock=lambda: T0) as mem:
        mem.set_portable(portable)
        for i in range(200):  # bulk, so the FTS index has several segments
            mem.add(f"filler memory {i} about flights hotels and trains", namespace="other")
        ids = fill(mem, doomed, "user:doomed")
        fill(mem, kept, "user:kept")
        for i in range(50):
            mem.add(f"more filler {i} about cars and boats", namespace="other")
        mem.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        assert found(path, doomed), "control: the marker is in the file before forget"
        if how == "ids":
            assert mem.forget(ids) == len(ids)
        else:
            assert mem.forget(namespace="user:doomed") == len(ids)
        assert not found(path, doomed), f"forgotten text still in the file: {found(path, doomed)}"
        assert found(path, kept), "control: the other namespace's text is still there"
        assert mem.check().ok
        assert not mem.recall(f"{doomed} vault", namespace="user:doomed").ids
        assert mem.connection.execute("SELECT count(*) FROM recalls WHERE query LIKE ?",
                                      (f"%{doomed}%",)).fetchall()[0][0] == 0
    assert not found(path, doomed)


def segments(mem):
    """How many segments the FTS index has (a whole-index merge leaves one)."""
    return mem.connection.execute(
        "SELECT count(DISTINCT segid) FROM memories_fts_idx").fetchall()[0][0]


def fts_format(mem):
    return mem.connection.execute(
        "SELECT v FROM memories_fts_config WHERE k = 'version'").fetchall()[0][0]


def test_forget_erases_in_place_without_merging_the_index(tmp_path):
    path = str(tmp_path / "inplace.db")
    doomed = make_marker()
    with heapmem.open(path, clock=lambda: T0) as mem:
        assert mem.stats().erases_in_place and mem.stats().oldest_reader == "3.37"
        for batch in range(6):  # one segment per transaction
            mem.add_many([{"text": f"filler {batch} {i} about trains", "namespace": "other"}
                          for i in range(40)])
        ids = fill(mem, doomed, "user:doomed", n=3)
        before = segments(mem)
        assert before > 2
        mem.forget(ids[:1])
        assert segments(mem) >= before - 1, "forget merged the whole index"
        assert not mem.recall(f"{doomed} vault code", namespace="user:doomed", k=5,
                              track=False).ids.count(ids[0])
        assert fts_format(mem) == 5 and mem.stats().oldest_reader == "3.42"
        assert mem.check().ok


def test_set_portable_keeps_the_index_readable_by_old_sqlite(tmp_path):
    path = str(tmp_path / "portable.db")
    with heapmem.open(path, clock=lambda: T0) as mem:
        ids = fill(mem, make_marker(), "user:a", n=4)
        mem.forget(ids[:1])
        assert fts_format(mem) == 5
        mem.set_portable(True)  # rebuilds the index in format 4
        assert fts_format(mem) == 4
        st = mem.stats()
        assert not st.erases_in_place and st.oldest_reader == "3.37"
        mem.forget(ids[1:2])
        assert fts_format(mem) == 4 and segments(mem) == 1  # merged, old format kept
        assert mem.recall("vault code Tuesday", namespace="user:a", k=5).ids
        mem.set_portable(False)
        assert mem.stats().erases_in_place
        with pytest.raises(TypeError, match="True or False"):
            mem.set_portable("yes")
    with heapmem.open(path) as mem:
        assert mem.stats().erases_in_place and mem.check().ok


def test_forget_with_a_reader_holding_a_snapshot(tmp_path):
    # a reader in another connection pins the WAL: forget cannot empty it at
    # once, but the text is gone from the file once the reader is done and the
    # last connection closes (documented in RELIABILITY.md)
    path = str(tmp_path / "pinned.db")
    doomed = make_marker()
    with heapmem.open(path, clock=lambda: T0) as mem:
        ids = fill(mem, doomed, "user:doomed", n=5)
        reader = apsw.Connection(path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchall()
        mem.forget(ids)
        reader.execute("COMMIT")
        reader.close()
    assert not found(path, doomed)


# -- readonly -----------------------------------------------------------------------------

def make_store(path):
    with heapmem.open(path, clock=lambda: T0) as mem:
        mem.add("Booked the flight: SFO to Lisbon, departs March 14", namespace="user:maya")
        mem.add("Maya prefers a window seat", namespace="user:maya", kind="preference")
        res = mem.recall("When is the flight to Lisbon?", namespace="user:maya")
        mem.feedback(used=res.ids[:1], recall_id=res.recall_id)
        return res.recall_id


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_readonly_recalls_and_refuses_every_write(tmp_path):
    path = str(tmp_path / "ro.db")
    rid = make_store(path)
    before = digest(path)
    with heapmem.open(path, readonly=True, clock=lambda: T0) as mem:
        res = mem.recall("When is the flight to Lisbon?", namespace="user:maya")
        assert res.ids and res.recall_id is None  # nothing tracked
        assert mem.get(res.ids[0]).namespace == "user:maya"
        assert mem.links("user:maya")
        writes = {
            "add": lambda: mem.add("a new memory", namespace="user:maya"),
            "add_many": lambda: mem.add_many([{"text": "another memory"}]),
            "feedback": lambda: mem.feedback(used=res.ids[:1], recall_id=rid),
            "mark_used": lambda: mem.mark_used(res.ids[:1], recall_id=rid),
            "mark_ignored": lambda: mem.mark_ignored(res.ids[:1], recall_id=rid),
            "forget ids": lambda: mem.forget(res.ids[:1]),
            "forget namespace": lambda: mem.forget(namespace="user:maya"),
        }
        for write in writes.values():
            with pytest.raises(heapmem.ReadOnlyError):
                write()
        # the raw connection refuses too
        with pytest.raises(apsw.ReadOnlyError):
            mem.connection.execute("DELETE FROM memories")
        assert mem.check().ok
    assert digest(path) == before
    with heapmem.open(path) as mem:
        assert mem.count == 2


def test_readonly_sees_a_live_writer(tmp_path):
    path = str(tmp_path / "live.db")
    make_store(path)
    with heapmem.open(path) as writer, heapmem.open(path, readonly=True) as reader:
        writer.add("The piano lesson moved to Thursday", namespace="user:maya")
        assert reader.recall("piano lesson", namespace="user:maya").ids
        with pytest.raises(heapmem.ReadOnlyError):
            reader.add("nope")


def run_probe(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def assert_probe_ok(report, count=2, files=("ro.db",)):
    assert not report["dir_writable"] and not report["file_writable"], \
        f"the location was not read-only: {report}"
    assert "open_error" not in report, report
    assert report["recall_ids"] and report["recall_id"] is None and report["count"] == count
    assert all(v == "ReadOnlyError" for v in report["refused"].values()), report["refused"]
    assert report["check_ok"], report["check_problems"]
    assert report["files"] == list(files), report["files"]  # nothing could be made


def leave_wal(path):
    """A writer killed with a transaction in the WAL, not checkpointed."""
    code = ("import heapmem, os, signal\n"
            f"m = heapmem.open({path!r})\n"
            "m.add('The piano lesson moved to Thursday', namespace='user:maya')\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", code], timeout=60)
    assert os.path.getsize(path + "-wal") > 0


@pytest.mark.parametrize("layout", ["clean", "wal and shm", "wal without shm"])
def test_read_only_bind_mount(tmp_path, layout):
    """A store on a read-only file system: a read-only bind mount in a private
    mount namespace (needs CAP_SYS_ADMIN, so usually root; skipped otherwise).
    Root ignores permission bits but not a read-only mount.  A file shipped
    with its -wal and -shm is read with the WAL's content; a -wal without its
    -shm cannot be read consistently and is refused."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        pytest.skip("unshare/mount not available")
    d = tmp_path / "media"
    d.mkdir()
    path = str(d / "ro.db")
    make_store(path)
    if layout != "clean":
        leave_wal(path)
    if layout == "wal without shm":
        os.remove(path + "-shm")
    before = snapshot(d)
    probe = subprocess.run(["unshare", "--mount", "sh", "-c",
                            f"mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}' '{d}'"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    script = (f"mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}' '{d}' && "
              f"exec '{sys.executable}' '{WORKERS}' readonly '{path}'")
    report = run_probe(["unshare", "--mount", "sh", "-c", script])
    if layout == "clean":
        assert_probe_ok(report)
    elif layout == "wal and shm":
        assert_probe_ok(report, count=3, files=sorted(before))
    else:
        assert report.get("open_error", "").startswith("HeapmemError"), report
    assert snapshot(d) == before


def world_readable(path):
    """Whether any user can read path (through o+x directories all the way)."""
    path = os.path.realpath(path)
    if not os.stat(path).st_mode & stat.S_IROTH:
        return False
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == os.path.dirname(d):
            return True
        d = os.path.dirname(d)


def test_read_only_directory_for_an_unprivileged_user():
    """A store in a 0555 directory, file 0444, opened by a user without write
    permission: the current user if not root, else 'nobody' (root ignores
    permission bits)."""
    base = tempfile.mkdtemp(prefix="heapmem-ro-")
    try:
        os.chmod(base, 0o755)
        d = os.path.join(base, "media")
        os.mkdir(d)
        path = os.path.join(d, "ro.db")
        make_store(path)
        before = digest(path)
        os.chmod(path, 0o444)
        os.chmod(d, 0o555)
        kw = {}
        if os.geteuid() == 0:
            try:
                import pwd
                nobody = pwd.getpwnam("nobody")
            except (ImportError, KeyError):
                pytest.skip("running as root and there is no 'nobody' user")

            def drop():
                os.setgid(nobody.pw_gid)
                os.setgroups([])
                os.setuid(nobody.pw_uid)
            kw["preexec_fn"] = drop
            kw["env"] = {k: v for k, v in os.environ.items() if k != "HOME"} | {"HOME": "/"}
            import apsw as _a
            import numpy as _n
            for p in (sys.executable, WORKERS, heapmem.__file__, _a.__file__, _n.__file__):
                if not world_readable(p):
                    pytest.skip(f"'nobody' cannot read {os.path.realpath(p)} (or a directory "
                                "above it), so it cannot run Python here")
        assert_probe_ok(run_probe([sys.executable, WORKERS, "readonly", path], **kw))
        assert digest(path) == before
    finally:
        for root, _dirs, _files in os.walk(base):
            os.chmod(root, 0o755)
        shutil.rmtree(base)


# -- upgrades and foreign files ---------------------------------------------------------------

def snapshot(d):
    return {name: digest(os.path.join(d, name)) for name in sorted(os.listdir(d))}


EMPTY = hashlib.sha256(b"").hexdigest()


def assert_untouched(d, before, readonly):
    """Every file as it was.  A read-only SQLite connection to a WAL-mode file
    leaves an empty -wal and a -shm index behind (it may not delete them);
    the database file itself is untouched."""
    after = snapshot(d)
    if readonly:
        extra = {n: h for n, h in after.items() if n not in before}
        assert all(n.endswith(("-wal", "-shm")) for n in extra), extra
        assert all(h == EMPTY for n, h in extra.items() if n.endswith("-wal")), extra
        after = {n: h for n, h in after.items() if n in before}
    assert after == before


def test_newer_schema_is_refused_untouched(tmp_path):
    path = str(tmp_path / "future.db")
    make_store(path)
    c = apsw.Connection(path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    before = snapshot(tmp_path)
    assert list(before) == ["future.db"]
    for readonly in (False, True):
        with pytest.raises(heapmem.SchemaVersionError):
            heapmem.open(path, readonly=readonly)
        assert_untouched(tmp_path, before, readonly)


def foreign_files(d):
    def sqlite_db(name, *sql, wal=False):
        p = os.path.join(d, name)
        c = apsw.Connection(p)
        if wal:
            c.execute("PRAGMA journal_mode=WAL")
        for s in sql:
            c.execute(s)
        c.close()
        return p

    def raw(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    return [
        sqlite_db("app.db", "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)"),
        sqlite_db("wal.db", "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)", wal=True),
        sqlite_db("versioned.db", "CREATE TABLE t(x)", "PRAGMA user_version = 1"),
        sqlite_db("fake_meta.db", "CREATE TABLE heapmem_meta(key TEXT PRIMARY KEY, value TEXT)",
                  "INSERT INTO heapmem_meta VALUES ('format', 'not-heapmem')",
                  "PRAGMA user_version = 1"),
        sqlite_db("only_view.db", "CREATE VIEW v AS SELECT 1"),
        raw("text.db", b"hello, this is not a database\n" * 100),
        raw("random.db", secrets.token_bytes(8192)),
        raw("header_only.db", b"SQLite format 3\x00" + b"\x00" * 84),
    ]


def test_foreign_files_are_refused_untouched(tmp_path):
    paths = foreign_files(str(tmp_path))
    for path in paths:
        for readonly in (False, True):
            before = snapshot(tmp_path)
            with pytest.raises(heapmem.NotAStoreError):
                heapmem.open(path, readonly=readonly)
            assert_untouched(tmp_path, before, readonly)


def test_empty_file_becomes_a_store(tmp_path):
    # a zero-byte file is an empty SQLite database: it is migrated in place
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with heapmem.open(str(path)) as mem:
        assert mem.schema_version == SCHEMA_VERSION
        mem.add("now it holds a memory")
        assert mem.check().ok
