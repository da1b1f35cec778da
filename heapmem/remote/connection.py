"""heapmem on a libSQL server (sqld): the connection Memory runs on when
heapmem.open() is given http://, https:// or libsql:// instead of a file.

Owns: RemoteConnection (the part of apsw.Connection that Memory, heapmem.
schema and heapmem.learning use, carried over one Hrana stream), what it
checks before a store is opened on a server (that a libSQL server answers,
that it loaded this heapmem's own library, the token, that the database
named exists), read-your-writes on a replica (the replication index a
connection has seen, the wait for a server behind it), and the few
connection settings that mean something else on a server.

Every statement Memory runs is sent to the server as it is: the ranking, the
feedback credit and the pooled links run in SQL there, in the heap_* functions
of the library sqld loaded, and Python's side (question type, MATCH
expression, scoring of the candidates) is the same code as for a file.  So a
recall on a server ranks exactly as one on a file with the same rows.  A
verb's transaction (BEGIN IMMEDIATE ... COMMIT) runs on one stream (a Hrana
baton): all or nothing, and on a replica sqld forwards it to the primary.
"""
from __future__ import annotations

import random
import re
import threading
import time
from typing import Any, Callable, Iterable, Iterator

import apsw

from .. import validate
from ..db import native, sql
from ..errors import HeapmemError
from ..remote import hrana

#: How the server is started when it lacks heapmem's library.
HOW_TO_START = ("start the server with heapmem's library: `heapmem sqld --primary DIR` "
                "(or `heapmem sqld --print ...` for the sqld command line)")

# Connection settings the server owns (sqld refuses to change them over
# Hrana: "unsupported statement"): the journal is WAL and synchronous is
# sqld's own choice; sqld checkpoints the WAL itself (wal_checkpoint);
# secure_delete and cell_size_check cannot be set (see ARCHITECTURE.md);
# optimize is not allowed; its page cache is its own (cache_size).  Memory's
# statements of these are answered here, with no rows.
_SERVER_OWNS = frozenset({"journal_mode", "synchronous", "secure_delete", "cell_size_check",
                          "wal_checkpoint", "optimize", "cache_size"})
# Settings every stream (a server-side connection) needs again.
_PER_STREAM = frozenset({"foreign_keys"})

_PRAGMA = re.compile(r"\s*pragma\s+(\w+)\s*(=|\(|$)", re.I)
# a pragma that only reads: PRAGMA name or PRAGMA name(argument)
_PRAGMA_READ = re.compile(r"\s*pragma\s+(\w+)\s*(?:\(\s*(\w+)\s*\))?\s*;?\s*$", re.I)


def _pragma_select(name: str, arg: str | None) -> str:
    return sql.PRAGMA_AS_SELECT.format(name=name.lower(), args=arg or "")
_WORD = re.compile(r"\s*(\w+)(?:\s+(\w+))?", re.I)

# Hrana error codes as the apsw exceptions Memory already handles
_CODES: tuple[tuple[str, type], ...] = (
    ("SQLITE_CONSTRAINT", apsw.ConstraintError), ("SQLITE_BUSY", apsw.BusyError),
    ("SQLITE_LOCKED", apsw.LockedError), ("SQLITE_CORRUPT", apsw.CorruptError),
    ("SQLITE_NOTADB", apsw.NotADBError), ("SQLITE_FULL", apsw.FullError),
    ("SQLITE_READONLY", apsw.ReadOnlyError), ("SQLITE_INTERRUPT", apsw.InterruptError),
    ("SQLITE_IOERR", apsw.IOError), ("SQLITE_TOOBIG", apsw.TooBigError),
)


class _BusyBegin(Exception):
    """A queued BEGIN IMMEDIATE met another writer: send the batch again."""


class _Behind(Exception):
    """A read was answered by a server behind this connection's writes (its
    replication index, in index): send it again once it has caught up."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


#: How long a read answered from before this connection's writes is sent
#: again before ReplicaLagError (bench/SQLD.md: the lag is ~3 ms at p50).
LAG_WAIT = 5.0


class ServerError(HeapmemError):
    """The server could not be reached, or failed in a way SQLite does not
    explain (nothing listens, a token refused, the primary down for a write)."""


class DatabaseNotFoundError(ServerError):
    """open(url, database=NAME) names a database the server does not have
    (heapmem.remote.sqld.create_database makes one), or a server with namespaces was
    opened without database=."""


class ReplicaLagError(ServerError):
    """A replica stayed behind this connection's own writes (for LAG_WAIT
    seconds, or the request's timeout): its primary down or slow, or
    restarted after a crash.  Said once: the next read takes what it has."""


def _server_error(e: hrana.HranaError) -> ServerError:
    return (DatabaseNotFoundError if e.code == "NO_DATABASE" else ServerError)(e.message)


def _sqlite_error(err: dict[str, Any]) -> Exception:
    msg = " ".join(str(err.get("message", "")).split()) or "the server failed"
    code = str(err.get("code") or "")
    for prefix, cls in _CODES:
        if code.startswith(prefix):
            return cls(msg)
    # a heap_* function's own sentence, forwarded by a replica from its primary
    inner = msg.split("error executing a request on the primary: ", 1)[-1]
    if re.match(r"heap_[a-z_]+: ", inner) and not code.startswith("SQLITE_"):
        # the forward loses the code: a taken id is the one constraint a heap_* says
        taken = re.search(r"a memory with id '.*' already exists; it was not changed", inner)
        return (apsw.ConstraintError if taken else apsw.SQLError)(inner)
    if "UNIQUE constraint failed" in msg or "constraint failed" in msg.lower():
        return apsw.ConstraintError(msg)
    if code.startswith(("SQLITE", "SQL_")):
        return apsw.SQLError(msg)
    return ServerError(f"the server failed: {msg}" + (f" ({code})" if code else ""))


def _several(sql: str) -> bool:
    """Whether sql holds more than one statement (apsw runs them all; a
    Hrana execute takes one)."""
    i = sql.find(";")
    while i >= 0:
        if sql[i + 1:].strip() and apsw.complete(sql[:i + 1]):
            return True
        i = sql.find(";", i + 1)
    return False


class RemoteCursor:
    """The rows of one statement (or of an executemany): iterate, or
    fetchall().  Inside a write transaction a statement waits to be sent
    until its rows are read, or something else needs the server (_flush)."""

    def __init__(self, conn: "RemoteConnection | None" = None, rows: list[tuple] | None = None):
        self._conn = conn
        self._rows: list[tuple] | None = rows

    def _done(self) -> list[tuple]:
        if self._rows is None:
            assert self._conn is not None
            self._conn.flush()
        return self._rows or []

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._done())

    def fetchall(self) -> list[tuple]:
        return list(self._done())

    def fetchone(self) -> tuple | None:
        rows = self._done()
        return rows[0] if rows else None


class _Pending:
    """A statement waiting to be sent: its Hrana form, the cursor its rows
    go to, and what it does to the transaction."""

    __slots__ = ("stmt", "cursor", "word", "kind", "setup")

    def __init__(self, stmt: dict[str, Any], cursor: RemoteCursor | None, kind: str, word: str,
                 setup: bool = False):
        self.stmt, self.cursor, self.kind, self.word, self.setup = stmt, cursor, kind, word, setup


class RemoteConnection:
    """Memory's connection to a store on a libSQL server.

    One Hrana stream (its baton) carries the statements, so a transaction
    and its savepoints stay on one server-side connection.  Inside a write
    transaction (BEGIN IMMEDIATE ... COMMIT) statements wait and travel
    together, in one Hrana batch where each step runs only if the one before
    succeeded, until Memory reads a result (or commits): an add costs three
    round trips, not eight, and a step that fails stops the rest, whose
    transaction Memory then rolls back.  Outside one each statement is sent at
    once.  A stream the server let expire while no transaction was open is
    replaced without the caller noticing.

    Read-your-writes: every result reports a replication index (a write's,
    where its commit reached on the primary; a read's, where the server that
    answered is), and the connection keeps the newest it has seen.  Each
    statement outside a transaction carries it (Hrana's replication_index):
    a replica runs a read only once it has replicated that far, waiting as
    long as the request's timeout allows; a primary has it already.  (The
    index a read reports is taken after it ran, so it cannot tell by itself
    that the read saw the write: through a replica, one read in some hundreds
    reported the write's index and missed it.)  Should a server answer from
    an older index all the same, the read is sent again, after short sleeps,
    until the server has caught up, or ReplicaLagError after LAG_WAIT
    seconds; a primary is never behind itself, so reads there are sent once.
    A server whose reads report an index older than its own reads did before
    has started its log again (a primary recovering from a crash, and its
    replicas after it): the old numbers mean nothing there, so the
    connection starts again from the new one."""

    def __init__(self, url: str, *, auth_token: str | None = None, timeout: float | None = None,
                 database: str | None = None):
        self.url = url if database is None else f"{url} (database {database!r})"
        self.database = database
        self.client = hrana.Client(url, auth_token=auth_token, timeout=timeout,
                                   database=database)
        self._index = 0             # the newest replication index this connection has seen
        self._read_index = 0        # the newest a read outside a transaction reported
        self._baton: str | None = None
        self._fresh = True          # the next request opens a new stream
        self._generation = 0        # how many streams this connection has had
        self._setup: dict[str, str] = {}   # per-stream settings, by pragma name
        self._needs_setup = True    # this stream has not had them yet
        self._pending: list[_Pending] = []
        self._depth = 0             # transaction and savepoint levels, as queued
        self._begun = False         # the open transaction's BEGIN reached the server
        self._snapshot = 0          # a read snapshot's levels, not sent (_control)
        self._unsure = False        # an error left the transaction state unknown
        self._last_rowid = 0
        self._changes = 0
        self._lock = threading.RLock()
        self._closed = False
        self._busy_ms = 10_000

    # -- what Memory calls --------------------------------------------------------

    def execute(self, sql: str, params: Any = None) -> RemoteCursor:
        with self._lock:
            return self._execute([(sql, params)])

    def executemany(self, sql: str, seq: Iterable[Any]) -> RemoteCursor:
        with self._lock:
            todo = [(sql, p) for p in seq]
            return self._execute(todo) if todo else RemoteCursor(rows=[])

    def last_insert_rowid(self) -> int:
        with self._lock:
            self.flush()
            return self._last_rowid

    def changes(self) -> int:
        with self._lock:
            self.flush()
            return self._changes

    def getautocommit(self) -> bool:
        with self._lock:
            if self._unsure and not self._fresh and not self._pending:
                try:
                    self._baton, res = self.client.pipeline(self._baton,
                                                            [{"type": "get_autocommit"}])
                    if res[0]["type"] == "ok":
                        auto = bool(res[0]["response"]["is_autocommit"])
                        if auto:
                            self._depth, self._begun = 0, False
                        else:
                            self._depth = max(self._depth, 1)
                        self._unsure = False
                except hrana.HranaError:
                    pass
            return self._depth == 0 and not self._snapshot

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._fresh:
                try:
                    self.client.pipeline(self._baton, [{"type": "close"}])
                except hrana.HranaError:
                    pass
            self.client.close()

    # apsw settings that are the server's business: accepted, changing nothing
    def setbusytimeout(self, ms: int) -> None:
        """How long a BEGIN IMMEDIATE the server answers SQLITE_BUSY is tried
        again (sqld answers at once while another connection writes)."""
        self._busy_ms = ms

    def setprogresshandler(self, handler: Callable | None, steps: int = 0) -> None:
        """No progress handler runs on a server (the HTTP timeout bounds a call)."""

    def config(self, op: int, value: int) -> int:
        """The DBCONFIG options are sqld's (defaults: DQS and trusted_schema as
        SQLite's, not DEFENSIVE); see ARCHITECTURE.md."""
        return value

    def enable_load_extension(self, on: bool) -> None:
        """sqld loads its extensions itself (-e DIR with a trusted.lst)."""

    def load_extension(self, path: str) -> None:
        """Check that the server loaded this very library: heap_version() and
        the heap_* functions it registers must be the client's own."""
        check_library(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise HeapmemError(f"{name}() of apsw.Connection is not available on a store served by "
                           f"sqld ({self.url}): heapmem's verbs are; raw connection features "
                           "such as authorizers, backups and blob I/O are not")

    # -- statements -------------------------------------------------------------------

    @staticmethod
    def _kind(sql: str) -> tuple[str, str]:
        m = _PRAGMA.match(sql)
        if m:
            return "pragma", m.group(1).lower()
        w = _WORD.match(sql)
        return ("word", (w.group(1) or "").upper() + " " + (w.group(2) or "").upper()) if w \
            else ("", "")

    def _execute(self, statements: list[tuple[str, Any]]) -> RemoteCursor:
        if self._closed:
            raise HeapmemError("this store is closed")
        if len(statements) == 1:
            handled = self._control(*statements[0])
            if handled is not None:
                return RemoteCursor(rows=handled)
        cursor = RemoteCursor(self)
        cursor._rows = None
        sent = False
        for text, params in statements:
            kind, word = self._kind(text)
            if kind == "pragma" and word in _SERVER_OWNS:
                continue
            if kind == "pragma" and word in _PER_STREAM and "=" in text:
                self._setup[word] = text
                continue
            if kind == "pragma":
                # a replica forwards every PRAGMA statement to its primary, but
                # serves the table-valued form itself
                m = _PRAGMA_READ.match(text)
                if m:
                    text = _pragma_select(m.group(1), m.group(2))
            self._pending.append(_Pending(hrana.stmt(text, params), cursor, kind, word))
            sent = True
        if not sent:
            cursor._rows = []
            return cursor
        if self._depth == 0:  # autocommit: at once
            self.flush()
        return cursor

    def _control(self, sql: str, params: Any) -> list[tuple] | None:
        """Transaction control and scripts, or None for an ordinary statement.

        A read snapshot (a deferred BEGIN or a SAVEPOINT outside any
        transaction: Memory.snapshot(), recall) is not sent: on a replica,
        sqld forwards every BEGIN and SAVEPOINT to the primary and runs the
        whole transaction there, which would make replicas serve no reads.
        Its statements run one by one instead, each on one consistent view.
        A write transaction (BEGIN IMMEDIATE) waits for its first statements,
        led by the stream's settings (foreign_keys)."""
        kind, word = self._kind(sql)
        first = word.split(" ")[0]
        if _several(sql):
            # a script (schema.MIGRATIONS): Hrana's sequence request, no rows
            self.flush()
            self._sequence(sql)
            return []
        if kind != "word":
            return None
        if self._snapshot:
            if first == "SAVEPOINT":
                self._snapshot += 1
                return []
            if first == "RELEASE" or word == "ROLLBACK TO":
                self._snapshot -= first == "RELEASE"
                return []
            if first in ("COMMIT", "END", "ROLLBACK"):
                self._snapshot = 0
                return []
            return None
        if self._depth == 0 and (first == "SAVEPOINT" or word in (
                "BEGIN ", "BEGIN DEFERRED", "BEGIN TRANSACTION")):
            self._snapshot = 1
            return []
        if first == "BEGIN":
            if self._needs_setup or self._fresh:
                for s in self._setup.values():
                    self._pending.append(_Pending(hrana.stmt(s, want_rows=False), None,
                                                  "pragma", "", setup=True))
                self._needs_setup = False
            self._pending.append(_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                          kind, word))
            self._depth += 1
            return []
        if first == "SAVEPOINT":
            self._pending.append(_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                          kind, word))
            self._depth += 1
            return []
        if first == "RELEASE" and self._depth > 1:
            self._pending.append(_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                          kind, word))
            self._depth -= 1
            return []
        if word == "ROLLBACK TO":
            self._pending.append(_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                          kind, word))
            return []
        if first in ("COMMIT", "END") or (first == "RELEASE" and self._depth <= 1):
            self._pending.append(_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                          kind, word))
            try:
                self.flush()
            finally:
                self._depth, self._begun = 0, False
            return []
        if first == "ROLLBACK":
            if not self._begun:  # nothing of the transaction reached the server
                self._pending = []
                self._depth = 0
                return []
            self._pending = [_Pending(hrana.stmt(sql, params, want_rows=False), None,
                                      kind, word)]
            try:
                self.flush()
            finally:
                self._depth, self._begun, self._unsure = 0, False, False
            return []
        return None

    # -- the stream -----------------------------------------------------------------

    def flush(self) -> None:
        """Send what waits, in one round trip; fill each statement's cursor."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            results = self._send([p.stmt for p in pending],
                                 writing=any(p.word.startswith("BEGIN") for p in pending),
                                 committing=any(p.word.split(" ")[0] in ("COMMIT", "END")
                                                for p in pending) or
                                 (self._depth <= 1 and any(p.word.startswith("RELEASE")
                                                           for p in pending)))
        except _StepError as e:
            for p, r in zip(pending, e.done):
                self._take(p, r)
            for p in pending[len(e.done):]:
                if p.cursor is not None:
                    p.cursor._rows = []
            raise e.error from None
        except BaseException:
            for p in pending:
                if p.cursor is not None and p.cursor._rows is None:
                    p.cursor._rows = []
            raise
        for p, r in zip(pending, results):
            self._take(p, r)

    def _take(self, p: _Pending, r: tuple[list[tuple], int, int | None]) -> None:
        rows, changes, rowid = r
        if p.word.startswith("BEGIN"):
            self._begun = True
        if p.cursor is None:
            return
        if p.kind == "pragma" and p.word == "data_version" and rows:
            # a new stream is a new server connection, with its own count:
            # keep the value moving across streams
            rows = [((self._generation << 32) + int(rows[0][0]),)]
        if p.cursor._rows is None:
            p.cursor._rows = []
        p.cursor._rows.extend(rows)
        self._changes = changes
        if rowid is not None:
            self._last_rowid = rowid

    def _sequence(self, sql: str) -> None:
        if self._fresh:
            self._generation += 1
            self._needs_setup = True
        try:
            self._baton, res = self.client.pipeline(None if self._fresh else self._baton,
                                                    [{"type": "sequence", "sql": sql}])
        except hrana.HranaError as e:
            self._fresh, self._depth = True, 0
            raise _server_error(e) from None
        self._fresh = self._baton is None
        for r in res:
            if r["type"] != "ok":
                self._unsure = True
                raise _sqlite_error(r.get("error") or {})

    def _send(self, stmts: list[dict[str, Any]], *, writing: bool, committing: bool
              ) -> list[tuple[list[tuple], int, int | None]]:
        """One round trip: stmts as a batch, each run only if the one before
        succeeded.  A BEGIN the server found busy (another writer) is tried
        again, the whole batch with it (nothing after it ran), until the busy
        timeout; a read answered by a replica behind this connection's writes
        is sent again until the replica catches up, for LAG_WAIT seconds."""
        deadline = time.monotonic() + self._busy_ms / 1000
        pause = 0.0005
        behind_since, wait = 0.0, 0.001
        while True:
            try:
                return self._send_once(stmts, writing, committing)
            except _BusyBegin:
                if time.monotonic() + pause > deadline:
                    raise apsw.BusyError("database is locked (another connection kept the "
                                         f"write lock past {self._busy_ms / 1000:g} s)") from None
                time.sleep(pause * random.uniform(0.5, 1.5))
                pause = min(pause * 2, 0.008)
            except _Behind as b:
                now = time.monotonic()
                behind_since = behind_since or now
                if now + wait - behind_since > LAG_WAIT:
                    seen, self._index = self._index, b.index
                    # said once; from here on the connection reads what the server has
                    # (a primary restarted after a crash numbers its log again, lower)
                    raise ReplicaLagError(
                        f"{self.url} is {seen - b.index} frames behind this connection's "
                        f"writes (its replication index is {b.index}, theirs {seen}) and did "
                        f"not catch up within {LAG_WAIT:g} s: a replica whose primary is down "
                        "or slow, or a server restarted after a crash (then the next call "
                        "reads what it has)") from None
                time.sleep(wait)
                wait = min(wait * 2, 0.05)

    def _send_once(self, stmts: list[dict[str, Any]], writing: bool, committing: bool
                   ) -> list[tuple[list[tuple], int, int | None]]:
        new_stream = self._fresh
        if new_stream:
            self._generation += 1
        in_txn = self._begun and not writing
        alone = not (writing or in_txn)  # outside a transaction: each statement commits itself
        # always a batch: its result reports the replication index even when a
        # step fails (a replica behind may answer "no such table")
        req = hrana.batch(stmts, replication_index=self._index if alone else 0)
        try:
            baton, res = self.client.pipeline(None if new_stream else self._baton, [req])
        except hrana.HranaError as e:
            self._fresh = True
            if e.code == "STREAM_EXPIRED" and not new_stream and not in_txn:
                return self._send_once(stmts, writing, committing)
            self._depth, self._begun = 0, False
            self._needs_setup = True
            if e.code == "NETWORK" and "did not answer" in e.message and (writing or in_txn):
                raise ServerError(
                    f"{self.url} did not acknowledge the write within {self.client.timeout:g} s "
                    "(a replica forwards writes to its primary: is the primary running?); "
                    + ("its outcome is unknown until the server answers again" if committing
                       else "nothing was written")) from None
            if e.code == "STREAM_EXPIRED" and in_txn:
                raise ServerError(f"{self.url} closed the stream of an open transaction (idle "
                                  "too long, or the server restarted); nothing of it was "
                                  "written") from None
            if e.code == "NETWORK" and "did not answer" in e.message and alone and \
                    self._read_index < self._index:
                seen, self._index = self._index, self._read_index  # said once, as below
                raise ReplicaLagError(
                    f"{self.url} did not answer a read within {self.client.timeout:g} s: a "
                    "replica runs it only once it has this connection's writes, and it was "
                    f"{seen - self._read_index} frames behind them when it last answered "
                    f"(its replication index {self._read_index}, theirs {seen}); is its "
                    "primary running?") from None
            raise _server_error(e) from None
        self._baton = baton
        self._fresh = baton is None
        if new_stream or self._fresh:
            self._needs_setup = True
        r = res[0]
        if r["type"] != "ok":
            err = r.get("error") or {}
            if str(err.get("code", "")) == "STREAM_EXPIRED" and not new_stream and not in_txn:
                self._fresh = True
                return self._send_once(stmts, writing, committing)
            self._unsure = True
            raise _StepError([], _sqlite_error(err))
        b = r["response"]["result"]  # its shape and values checked by client.pipeline()
        index = hrana.replication_index(b)
        changed = any(sr["affected_row_count"] for sr in b["step_results"] if sr)
        if alone and not changed:  # a read, answered by this very server
            if index < self._read_index:  # its log started again: old indices mean nothing
                self._index = index
            elif index < self._index:
                self._read_index = index
                raise _Behind(index)  # a replica that lacks this connection's writes yet
            self._read_index = index
        if committing or (alone and changed):
            # a commit: the primary's newest index (lower than one seen before only if
            # the primary's log started again, after a crash)
            self._index = index
        else:
            self._index = max(self._index, index)
        outs: list[tuple[list[tuple], int, int | None]] = []
        for i, (sr, se) in enumerate(zip(b["step_results"], b["step_errors"])):
            if se is not None:
                word = _WORD.match(stmts[i]["sql"])
                if str(se.get("code", "")).startswith("SQLITE_BUSY") and word and \
                        word.group(1).upper() == "BEGIN" and all(
                            _PRAGMA.match(s["sql"]) for s in stmts[:i]):
                    raise _BusyBegin()  # nothing after it ran: the batch is sent again
                self._unsure = True
                raise _StepError(outs, _sqlite_error(se))
            if sr is None:  # pragma: no cover - skipped only after an error
                raise _StepError(outs, ServerError("the server skipped a statement of a batch"))
            outs.append(hrana.rows_of(sr))
        return outs


class _StepError(Exception):
    """A step of a batch failed: the results of those before it, and the error."""

    def __init__(self, done: list, error: Exception):
        super().__init__(str(error))
        self.done = done
        self.error = error


# -- recall -----------------------------------------------------------------------------


# -- opening -----------------------------------------------------------------------------


def _local_library() -> tuple[str, list[str]]:
    """heap_version() and the heap_* function names of this heapmem's library."""
    c = apsw.Connection(":memory:")
    try:
        native.load(c)
        return _library_facts(c)
    finally:
        c.close()


def _library_facts(c: Any) -> tuple[str, list[str]]:
    version = c.execute(sql.LIBRARY_VERSION).fetchall()[0][0]
    names = [r[0] for r in c.execute(sql.LIBRARY_FUNCTIONS).fetchall()]
    return version, names


def check_library(conn: RemoteConnection) -> None:
    """HeapmemError unless the server runs this heapmem's own library."""
    try:
        remote = _library_facts(conn)
    except apsw.SQLError as e:
        if "heap_version" in str(e) or "no such function" in str(e):
            raise HeapmemError(f"{conn.url} is a libSQL server without heapmem's library "
                               f"(heap_version() is unknown there); {HOW_TO_START}") from None
        raise
    local = _local_library()
    if remote[0] != local[0]:
        raise HeapmemError(f"{conn.url} runs heapmem's library {remote[0]}, this client is "
                           f"{local[0]}: start the server with this heapmem's library "
                           "(`heapmem sqld ...` of the same version)")
    if remote[1] != local[1]:
        extra = sorted(set(remote[1]) ^ set(local[1]))
        raise HeapmemError(f"{conn.url} runs another build of heapmem's library {remote[0]} "
                           f"(functions differ: {', '.join(extra[:5])}); start it with this "
                           "client's library (`heapmem sqld ...`)")


def connect(url: str, *, auth_token: str | None = None, timeout: float | None = None,
            durable: bool = False, embedder: Any = None, database: str | None = None
            ) -> RemoteConnection:
    """A RemoteConnection to the server at url, after checking that a libSQL
    server answers there and accepts the token, and with database (one of a
    server started with namespaces), that the server has namespaces and that
    database (ServerError or DatabaseNotFoundError otherwise, one sentence;
    nothing is written)."""
    if durable:
        raise ValueError("durable=True is a file's setting: on a server, how commits reach "
                         "the disk is sqld's own (its WAL and replication log)")
    if embedder is not None:
        raise HeapmemError("open(embedder=...): hybrid recall is not supported on a server "
                           "store yet; open it without an embedder")
    if database is not None:
        validate.check_database(database)
    conn = RemoteConnection(url, auth_token=auth_token, timeout=timeout, database=database)
    try:
        status, body = conn.client.request("GET", "/version")
        if status in (401, 403):
            raise ServerError(conn.client.http_error(status, body).message)
        sqld = status == 200 and body.startswith(b"sqld")
        if database is not None or not sqld:
            # an older sqld may lack /version: ask the pipeline itself (and
            # whether the database named exists: a 404 if not)
            try:
                conn.client.pipeline(None, [{"type": "close"}])
            except hrana.HranaError as e:
                if sqld or e.code in ("HTTP 401", "HTTP 403", "NETWORK", "NO_DATABASE"):
                    raise
                raise hrana.HranaError(e.message, "NOT_HRANA") from None
        if database is not None and not conn.client.probe_databases():
            raise ServerError(f"{url} was started without namespaces, so it holds one database "
                              f"and would serve it as {database!r} too: open it without "
                              "database=, or start the server with namespaces (`heapmem sqld "
                              "--primary DIR --namespaces --admin HOST:PORT`)")
    except hrana.HranaError as e:
        conn.close()
        if e.code == "NOT_HRANA":
            raise ServerError(f"{url} is not a libSQL server (sqld): it does not answer Hrana "
                              "requests") from None
        raise _server_error(e) from None
    except BaseException:
        conn.close()
        raise
    return conn
