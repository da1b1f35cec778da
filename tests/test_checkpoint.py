"""The WAL's checkpoints run beside the writer (db.connect.Checkpointer), not
inside the commit that took the WAL past its threshold: what a commit wrote
reaches the main file on the checkpoint thread, a commit does not wait for
it, close() ends the thread and the WAL, and a store opened through another
VFS keeps SQLite's own checkpoint (the fault VFS counts its calls)."""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import threading

import apsw
import pytest

import heapmem
from heapmem import learning
from heapmem.db import connect


def _open(path: str, vfs: str | None = None) -> connect.Handle:
    return connect.open_store(path, readonly=False, durable=False, verify=False,
                              auth_token=None, database=None, embedder=None, vfs=vfs,
                              rebuild_pool=learning.rebuild_pool)


def _add(h: connect.Handle, text: str) -> None:
    with h.write() as c:
        c.execute("SELECT heap_add(?, 'ns')", (text,)).fetchall()


def _in_main_file(path: str, text: str, tmp_path) -> bool:
    """Whether the main file alone (no -wal beside it) holds a memory of text."""
    alone = str(tmp_path / "alone.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(alone + suffix):
            os.remove(alone + suffix)
    shutil.copyfile(path, alone)
    c = apsw.Connection(alone, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return c.execute("SELECT count(*) FROM memories WHERE text = ?",
                         (text,)).fetchall()[0][0] > 0
    finally:
        c.close()


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "heapmem-checkpoint"]


@pytest.fixture
def low(tmp_path, monkeypatch):
    """A store whose every commit asks for a checkpoint (a threshold of one
    page), closed after the test."""
    monkeypatch.setattr(connect, "CHECKPOINT_PAGES", 1)
    h = _open(str(tmp_path / "s.db"))
    assert h.checkpointer is not None
    yield h
    h.close()


def test_a_commit_past_the_threshold_reaches_the_main_file_on_the_checkpoint_thread(
        low, tmp_path):
    ck = low.checkpointer
    # the thread held out of its checkpoint: the commit returns all the same,
    # and what it wrote is in the WAL only (the commit did not checkpoint)
    with ck.lock:
        _add(low, "Booked the flight to Lisbon")
        assert not _in_main_file(low.path, "Booked the flight to Lisbon", tmp_path)
    assert ck.wait(30)
    assert ck.runs >= 1
    assert _in_main_file(low.path, "Booked the flight to Lisbon", tmp_path)


def test_below_the_threshold_nothing_is_asked_and_no_thread_starts(tmp_path):
    h = _open(str(tmp_path / "s.db"))
    try:
        _add(h, "A small write")
        assert h.checkpointer is not None and h.checkpointer.runs == 0
        assert h.checkpointer.wait(0)
    finally:
        h.close()


def test_a_commit_waits_for_a_running_checkpoint_once_the_wal_is_past_its_bound(
        low, tmp_path, monkeypatch):
    monkeypatch.setattr(connect, "CHECKPOINT_WAIT_PAGES", 1)
    ck = low.checkpointer
    ck.lock.acquire()  # the first checkpoint asked for cannot end
    try:
        _add(low, "first")  # asks; the thread takes the ask and waits for the lock
        done = threading.Event()
        writer = threading.Thread(target=lambda: (_add(low, "second"), done.set()))
        writer.start()
        # the second commit waits in its WAL hook until the first checkpoint ends
        assert not done.wait(0.5)
    finally:
        ck.lock.release()
    writer.join(30)
    assert done.is_set()
    assert ck.wait(30)
    assert _in_main_file(low.path, "second", tmp_path)


def test_a_file_the_thread_cannot_open_is_checkpointed_inside_the_commit(low, tmp_path):
    ck = low.checkpointer
    ck.path = str(tmp_path / "gone" / "s.db")  # as if the file's folder had moved
    _add(low, "first")  # starts the thread, which cannot open the file
    assert ck.wait(30)
    _add(low, "second")  # checkpointed in its own WAL hook, as SQLite would
    assert _in_main_file(low.path, "second", tmp_path)
    assert ck.runs == 0


def test_close_ends_the_thread_and_the_wal(tmp_path, monkeypatch):
    monkeypatch.setattr(connect, "CHECKPOINT_PAGES", 1)
    path = str(tmp_path / "s.db")
    mem = heapmem.open(path)
    mem.add("Booked the flight to Lisbon", namespace="ns")
    assert _checkpoint_threads()
    mem.close()
    assert not _checkpoint_threads()
    assert not os.path.exists(path + "-wal")
    assert _in_main_file(path, "Booked the flight to Lisbon", tmp_path)


def test_the_callers_wal_autocheckpoint_pragma_takes_the_hook_back(low, tmp_path):
    low.connection.execute("PRAGMA wal_autocheckpoint=0")  # the caller's own choice
    _add(low, "kept in the WAL")
    assert low.checkpointer.runs == 0
    assert not _in_main_file(low.path, "kept in the WAL", tmp_path)


def test_a_store_dropped_unclosed_ends_its_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(connect, "CHECKPOINT_PAGES", 1)
    h = _open(str(tmp_path / "s.db"))
    _add(h, "left open")
    thread = h.checkpointer._thread if h.checkpointer else None
    assert thread is not None and thread.is_alive()
    del h
    gc.collect()
    thread.join(30)
    assert not thread.is_alive()


def test_a_store_never_closed_has_its_thread_waited_for_at_exit(tmp_path):
    # the interpreter's exit waits for the thread (not inside a checkpoint):
    # the dropped store's finalizer must not stop it first without waiting
    script = (
        "import sys\n"
        "import heapmem\n"
        "from heapmem.db import connect\n"
        "connect.CHECKPOINT_PAGES = 1\n"
        "stop = connect.Checkpointer.stop\n"
        "def told(self, wait=True):\n"
        "    alive = self._thread is not None and self._thread.is_alive()\n"
        "    print('stop', wait, alive, flush=True)\n"
        "    stop(self, wait)\n"
        "connect.Checkpointer.stop = told\n"
        "mem = heapmem.open(sys.argv[1])\n"
        "mem.add('left open at exit', namespace='ns')\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s.db")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "stop True True"


def test_a_child_process_after_a_fork_has_fresh_locks_and_no_thread(low):
    ck = low.checkpointer
    _add(low, "before the fork")
    with ck.lock:  # as the thread holds it during a checkpoint
        pid = os.fork()
        if pid == 0:  # the child: the lock is free, no thread, nothing asked
            ok = (ck.lock.acquire(timeout=5) and ck._thread is None and ck.wait(5))
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_another_vfs_keeps_sqlites_checkpoint_inside_the_commit(tmp_path):
    class Plain(apsw.VFS):
        def __init__(self) -> None:
            super().__init__("heapmem-test-plain", "")

    vfs = Plain()
    try:
        h = _open(str(tmp_path / "s.db"), vfs="heapmem-test-plain")
        try:
            assert h.checkpointer is None
            _add(h, "through another VFS")
        finally:
            h.close()
    finally:
        vfs.unregister()


def test_a_reader_has_no_checkpointer(tmp_path):
    path = str(tmp_path / "s.db")
    _open(path).close()
    h = connect.open_store(path, readonly=True, durable=False, verify=False,
                           auth_token=None, database=None, embedder=None, vfs=None,
                           rebuild_pool=learning.rebuild_pool)
    try:
        assert h.checkpointer is None
    finally:
        h.close()
