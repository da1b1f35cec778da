"""The one place a store's connection is chosen, at open: a file (apsw),
or a libSQL server (heapmem.remote's connection, with the same methods)
when the path is a URL.  The core asks this module, never the server
client, which door it has.

Owns: the choice between a file and a server (is_server, connect), the
store's connection opened and its file checked (open_store: what open()'s
path may name, the check of the file, a WAL file on read-only media read as
immutable), the open connection a Memory holds (Handle: its lock, its write
transactions and read snapshots, none ever left open, and its close), the
WAL's checkpoints off the writer's path (Checkpointer), and leaving no -wal
and -shm files behind a read-only connection that made them
(release_wal_files).
"""
from __future__ import annotations

import atexit
import os
import stat
import threading
import urllib.parse
import weakref
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator, cast

import apsw

from ..errors import HeapmemError, ReadOnlyError
from . import schema, sql
from .schema import Connection


def is_server(path: str) -> bool:
    """Whether path names a libSQL server (http://, https://, libsql://)."""
    from ..remote import hrana
    return hrana.is_url(path)


def connect(path: str, *, flags: int, auth_token: str | None, database: str | None,
            durable: bool, embedder: Any, vfs: str | None = None) -> tuple[Connection, bool]:
    """The connection of the store at path, and whether it is a server's.
    auth_token and database are a server's only (ValueError on a file), vfs a
    file's only (the SQLite VFS it is opened through; None: the default);
    embedder is the caller's own (None: the library's), which a server's
    connection embeds with."""
    if is_server(path):
        if vfs is not None:
            raise ValueError("vfs= names the SQLite VFS a file is opened through; a server "
                             "store's file is the server's")
        from ..remote import connection as remote
        return remote.connect(path, auth_token=auth_token, durable=durable,
                              embedder=embedder, database=database), True
    if auth_token is not None:
        raise ValueError("auth_token is for a server URL (http://, https://, libsql://)")
    if database is not None:
        raise ValueError("database= names one database of a libSQL server with namespaces "
                         "(http://, https://, libsql://); a file is one database already "
                         "(namespace= separates tenants inside it)")
    if vfs is not None and vfs not in apsw.vfs_names():
        raise HeapmemError(f"cannot open {path!r}: no SQLite VFS named {vfs!r} is registered "
                           f"in this process (there are {', '.join(apsw.vfs_names())})")
    return (apsw.Connection(path, flags=flags) if vfs is None else
            apsw.Connection(path, flags=flags, vfs=vfs)), False


def wal_files(path: str) -> bool:
    """Whether the file at path has a -wal or -shm file beside it now."""
    return os.path.exists(path + "-wal") or os.path.exists(path + "-shm")


def release_wal_files(path: str) -> None:
    """After a read-only connection closed: take the -wal and -shm files it
    made away again, as a writer's last close does (SQLite removes them only
    when no other connection has the file open, and checkpoints nothing that
    is not there: the WAL was empty when the reader came).  A file it cannot
    open for writing (read-only media) keeps them; nothing else changes."""
    try:
        c = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return
    try:
        c.execute(sql.READ_SCHEMA).fetchall()
    except apsw.Error:
        pass
    finally:
        c.close()


def check_path(path: Any) -> str:
    """open()'s path as a string (a PathLike or bytes decoded), refused when it
    is no path at all (None, a number, empty) or names no regular file."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        raise TypeError(f"path must be a file path or a server URL (a string), got "
                        f"{type(path).__name__}; heapmem.open(None) would make a file "
                        "named 'None'")
    if not path:
        raise ValueError("path is empty; give a file path, ':memory:' or a server URL")
    _refuse_special(path)
    return path


def _refuse_special(path: str) -> None:
    """HeapmemError unless path names a regular file or nothing yet: a
    directory, a FIFO (whose read would block forever), a device such as
    /dev/null or a socket is not a store, and SQLite's own error for it
    says nothing useful."""
    if is_server(path) or path == ":memory:":
        return
    if path.startswith("file:"):  # a URI: its path part (none for an in-memory one)
        parts = urllib.parse.urlsplit(path)
        if "mode=memory" in parts.query or not parts.path:
            return
        path = urllib.parse.unquote(parts.path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return  # a new store
    except OSError as e:
        raise HeapmemError(f"cannot open {path!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise HeapmemError(f"cannot open {path!r}: it is a directory; give the path of a "
                           "store file inside it (for example "
                           f"{os.path.join(path, 'heapmem.db')!r})")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise HeapmemError(f"cannot open {path!r}: it is {what}, not a regular file; a store "
                           "is a file")


def open_store(path: str, *, readonly: bool, durable: bool, verify: bool,
               auth_token: str | None, database: str | None, embedder: Any,
               vfs: str | None, rebuild_pool: Callable[[Connection], Any]) -> Handle:
    """The store's connection (a file, or a libSQL server: chosen by
    connect), configured and its file checked (schema.open_file, which runs
    rebuild_pool in the migration that needs it), as a Handle.  A WAL file
    on read-only media is read as immutable.  Closes what it opened on
    failure."""
    flags = apsw.SQLITE_OPEN_READONLY if readonly else (
        apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    flags |= apsw.SQLITE_OPEN_URI
    plain = path != ":memory:" and not path.startswith("file:") and not is_server(path)
    if readonly and plain and not os.path.exists(path):
        raise HeapmemError(f"cannot open {path!r} read-only: there is no such file "
                           "(readonly=True opens an existing store; without it, open() "
                           "creates one)")
    # a reader that finds no -wal/-shm beside the file takes away those it makes
    release_wal = readonly and plain and not wal_files(path)

    def check(c: Connection) -> Handle:
        schema.configure(c)
        schema.open_file(c, path, readonly=readonly, durable=durable, verify=verify,
                         rebuild_pool=rebuild_pool)
        h = Handle(c, path, readonly=readonly, remote=remote, release_wal=release_wal)
        # a file of the default VFS checkpoints beside the writer (another
        # VFS may not be safe to call from two threads, and a fault VFS
        # counts its calls: it keeps SQLite's checkpoint inside the commit)
        if plain and not readonly and vfs is None:
            ck = h.checkpointer = Checkpointer(cast(apsw.Connection, c), os.path.abspath(path),
                                               flags & ~apsw.SQLITE_OPEN_CREATE)
            # a store dropped unclosed: its thread ends (at the interpreter's exit,
            # _stop_checkpointers waits for it instead: a finalizer left to run
            # then would stop it first, without waiting)
            weakref.finalize(h, ck.stop, False).atexit = False
        return h

    try:
        conn, remote = connect(path, flags=flags, auth_token=auth_token, database=database,
                               durable=durable, embedder=embedder, vfs=vfs)
    except apsw.CantOpenError as e:
        raise HeapmemError(f"cannot open {path!r}: {e}") from None
    try:
        return check(conn)
    except apsw.CantOpenError as e:
        conn.close()
        wal = path + "-wal"
        if not readonly or path.startswith("file:") or (
                os.path.exists(wal) and os.path.getsize(wal) > 0):
            raise HeapmemError(f"cannot open {path!r}: {e}") from None
        # a WAL-mode file on read-only media (an app bundle, a read-only
        # mount): SQLite cannot make its -shm file there, and with no -wal
        # file nothing is pending, so read the file as immutable
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
        conn = connect(uri, flags=flags, auth_token=None, database=None, durable=False,
                       embedder=None, vfs=vfs)[0]
        try:
            return check(conn)
        except BaseException:
            conn.close()
            raise
    except BaseException:
        conn.close()
        raise


#: The WAL's size, in pages, from which a commit asks for a checkpoint:
#: SQLite's own (wal_autocheckpoint's default).
CHECKPOINT_PAGES = 1000
#: A commit that finds the background checkpoint still running and the
#: WAL past this many pages (64 MiB of 4 KiB pages) waits for it to end,
#: so that a writer faster than the disk cannot grow the WAL without bound.
CHECKPOINT_WAIT_PAGES = 16384


class Checkpointer:
    """The WAL's checkpoints on a thread of their own, with a connection of
    their own, instead of inside the commit that took the WAL past
    CHECKPOINT_PAGES (SQLite's autocheckpoint, which this replaces on the
    store's connection through its WAL hook).  Copying a big batch's pages
    into the file and syncing it took 0.55 s of add_many's 2.4 s for 10,000
    memories into a 1M namespace (bench/RESULTS.md 30); the next batch's
    work now runs meanwhile.  A PASSIVE checkpoint, as SQLite's: it never
    waits for a lock and never blocks a writer or a reader; one that cannot
    run (busy, an I/O error) leaves the pages in the WAL for the next, and
    the last connection to close checkpoints whatever is left.  The thread
    starts at the first commit that asks for it, and stops at stop()
    (Handle.close, or the interpreter's exit for a store never closed).  If
    it cannot open the file again, each such commit checkpoints inside its
    hook instead, as SQLite's autocheckpoint would have.  A PRAGMA
    wal_autocheckpoint on the store's connection takes the hook back (SQLite's
    own replaces it): the caller's choice wins."""

    _live: "weakref.WeakSet[Checkpointer]" = weakref.WeakSet()

    def __init__(self, conn: apsw.Connection, path: str, flags: int):
        self.path, self.flags = path, flags
        #: checkpoints run by the thread (a test waits on it)
        self.runs = 0
        self._stop = self._broken = False
        self._fresh()
        conn.set_wal_hook(self._hook)
        Checkpointer._live.add(self)

    def _fresh(self) -> None:
        """No thread yet, nothing asked, locks no one holds: at the start, and
        in a child process after a fork (which copies the parent's locks as
        they were, perhaps held by its thread, and not the thread)."""
        #: held while a checkpoint runs: Handle.checkpoint takes it first
        self.lock = threading.Lock()
        self._cond = threading.Condition()
        self._asked = self._done = 0  # checkpoints asked for; the asks the last one covered
        self._thread: threading.Thread | None = None

    def _hook(self, conn: Any, name: str, pages: int) -> int:
        """SQLite's WAL hook: called after each commit (its locks released)
        with the WAL's size in pages."""
        if pages < CHECKPOINT_PAGES:
            return apsw.SQLITE_OK
        if self._broken:
            _passive(conn)
            return apsw.SQLITE_OK
        with self._cond:
            if self._stop:
                return apsw.SQLITE_OK
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="heapmem-checkpoint")
                self._thread.start()
            if pages >= CHECKPOINT_WAIT_PAGES:
                self._cond.wait_for(lambda: self._done >= self._asked or self._stop)
            self._asked += 1
            self._cond.notify_all()
        return apsw.SQLITE_OK

    def _run(self) -> None:
        c = None
        try:
            try:
                c = apsw.Connection(self.path, flags=self.flags)
                # a read opens the file's WAL: until then a checkpoint does nothing
                c.execute(sql.READ_SCHEMA).fetchall()
            except apsw.Error:  # the file cannot be opened again: the hook checkpoints
                self._broken = True
                if c is not None:
                    c.close()
                    c = None
                return
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._asked > self._done or self._stop)
                    if self._stop:
                        break
                    asked = self._asked
                with self.lock:
                    _passive(c)
                with self._cond:
                    self.runs += 1
                    self._done = asked
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._done = self._asked
                self._cond.notify_all()
            if c is not None:
                c.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the checkpoints asked for so far have run (within timeout
        seconds)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._done >= self._asked, timeout)

    def stop(self, wait: bool = True) -> None:
        """End the thread (a checkpoint running finishes first) and close its
        connection, waiting for it unless wait is False.  Safe twice."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        Checkpointer._live.discard(self)


def _passive(c: apsw.Connection) -> None:
    """A PASSIVE checkpoint of c's WAL, as SQLite's autocheckpoint runs it;
    one that cannot run (busy, an I/O error) leaves the pages for the next."""
    try:
        c.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
    except apsw.Error:
        pass


def _after_fork_in_child() -> None:
    for ck in list(Checkpointer._live):
        ck._fresh()


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _stop_checkpointers() -> None:
    """A store never closed: its checkpoint thread ends with the interpreter,
    not inside a checkpoint."""
    for ck in list(Checkpointer._live):
        ck.stop()


class Handle:
    """A store's open connection, as a Memory holds it: the connection
    (`connection`, refused once closed), the lock its threads share (one
    apsw connection runs one statement at a time), its write transactions
    and read snapshots, and its close."""

    def __init__(self, conn: Connection, path: str, *, readonly: bool, remote: bool,
                 release_wal: bool):
        self._conn: Connection | None = conn
        self.path = path
        self.readonly = readonly
        #: whether the connection is a libSQL server's
        self.remote = remote
        #: the store's lock: every verb of the Memory holding it runs under it
        self.lock = threading.RLock()
        self._release_wal = release_wal
        #: the WAL's checkpoints off the writer's path (a writable file of the
        #: default VFS), or None: SQLite's own, inside the commit
        self.checkpointer: Checkpointer | None = None

    @property
    def connection(self) -> Connection:
        """The connection; HeapmemError once closed."""
        if self._conn is None:
            raise HeapmemError("this store is closed")
        return self._conn

    @property
    def closed(self) -> bool:
        return self._conn is None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction (BEGIN IMMEDIATE: the write lock up front, so
        the busy timeout applies instead of a failed upgrade).  It is never
        left open: an error inside rolls it back, and so does a COMMIT that
        fails (a full disk, an I/O error), so the write lock is released and
        the next call starts clean.  Read-only: ReadOnlyError."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path!r} was opened with readonly=True; writes are refused")
        with self.lock:
            c = self.connection
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                if not c.getautocommit():
                    try:
                        c.execute("ROLLBACK")
                    except apsw.Error:  # pragma: no cover - SQLite rolled back already
                        pass
                raise

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read transaction: one consistent view of the file while other
        processes keep writing, holding the lock."""
        with self.lock:
            c = self.connection
            c.execute("BEGIN")
            try:
                yield c
            finally:
                if not c.getautocommit():
                    c.execute("COMMIT")

    def checkpoint(self) -> None:
        """Copy what the WAL holds into the file and empty the WAL (forget()
        does, so that erased pages leave the -wal file too).  A TRUNCATE
        checkpoint stalls every writer while it waits for readers, so it waits
        0.25 s at most; if other connections are busy then, the old pages stay
        in the -wal file until a later complete checkpoint (at the latest when
        the last connection closes)."""
        ck = self.checkpointer
        with self.lock, (ck.lock if ck else nullcontext()):
            c = self.connection
            schema.wait_for_lock(c, 250)
            try:
                c.execute(sql.CHECKPOINT).fetchall()
            except apsw.BusyError:
                pass
            finally:
                schema.wait_for_lock(c, schema.BUSY_MS)

    def close(self) -> None:
        """Close the connection (PRAGMA optimize first, on a writable one),
        then take away the -wal/-shm files a reader made.  Safe twice."""
        conn = self._conn
        if conn is None:
            return
        if self.checkpointer is not None:  # its connection closed first: the last one ends the WAL
            self.checkpointer.stop()
        try:
            if not self.readonly:
                conn.execute(sql.OPTIMIZE)
        except apsw.Error:
            pass
        conn.close()
        self._conn = None
        if self._release_wal:
            release_wal_files(self.path)
