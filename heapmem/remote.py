"""heapmem on a libSQL server (sqld): the connection Memory runs on when
heapmem.open() is given http://, https:// or libsql:// instead of a file.

Owns: RemoteConnection (the part of apsw.Connection that Memory, heapmem.
schema and heapmem.learning use, carried over one Hrana stream), what it
checks before a store is opened on a server (that a libSQL server answers,
that it loaded this heapmem's own library, the token), and the few
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

import re
import threading
from typing import Any, Callable, Iterable, Iterator, Sequence

import apsw

from . import _native, hrana, sql
from .errors import HeapmemError

#: How the server is started when it lacks heapmem's library.
HOW_TO_START = ("start the server with heapmem's library: `heapmem sqld --primary DIR` "
                "(or `heapmem sqld --print ...` for the sqld command line)")

# Connection settings the server owns (sqld refuses to change them over
# Hrana: "unsupported statement"): the journal is WAL and synchronous is
# sqld's own choice; sqld checkpoints the WAL itself (wal_checkpoint);
# secure_delete and cell_size_check cannot be set (see ARCHITECTURE.md);
# optimize is not allowed.  Memory's statements of these are answered here,
# with no rows.
_SERVER_OWNS = frozenset({"journal_mode", "synchronous", "secure_delete", "cell_size_check",
                          "wal_checkpoint", "optimize"})
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


class ServerError(HeapmemError):
    """The server could not be reached, or failed in a way SQLite does not
    explain (nothing listens, a token refused, the primary down for a write)."""


def _sqlite_error(err: dict[str, Any]) -> Exception:
    msg = " ".join(str(err.get("message", "")).split()) or "the server failed"
    code = str(err.get("code") or "")
    for prefix, cls in _CODES:
        if code.startswith(prefix):
            return cls(msg)
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
    """The rows of one statement, all fetched: iterate, or fetchall()."""

    def __init__(self, rows: list[tuple]):
        self._rows = rows

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._rows)

    def fetchall(self) -> list[tuple]:
        return list(self._rows)

    def fetchone(self) -> tuple | None:
        return self._rows[0] if self._rows else None


class RemoteConnection:
    """Memory's connection to a store on a libSQL server.

    One Hrana stream (its baton) carries the statements, so a transaction
    and its savepoints stay on one server-side connection.  BEGIN and
    SAVEPOINT wait and travel with the next statement, in one Hrana batch
    where each step runs only if the one before succeeded: a write
    transaction costs one round trip less, and a failed BEGIN never lets the
    statement after it run on its own.  A stream the server let expire while
    no transaction was open is replaced without the caller noticing."""

    def __init__(self, url: str, *, auth_token: str | None = None, timeout: float | None = None):
        self.url = url
        self.client = hrana.Client(url, auth_token=auth_token, timeout=timeout)
        self._baton: str | None = None
        self._fresh = True          # the next request opens a new stream
        self._generation = 0        # how many streams this connection has had
        self._setup: dict[str, str] = {}   # per-stream settings, by pragma name
        self._queued: list[dict[str, Any]] = []
        self._depth = 0             # open savepoints/transaction levels, as sent
        self._snapshot = 0          # a read snapshot's levels, not sent (_control)
        self._needs_setup = True    # the stream has not had the settings yet
        self._unsure = False        # an error left the transaction state unknown
        self._last_rowid = 0
        self._changes = 0
        self._lock = threading.RLock()
        self._closed = False

    # -- what Memory calls --------------------------------------------------------

    def execute(self, sql: str, params: Any = None) -> RemoteCursor:
        with self._lock:
            return RemoteCursor(self._run([(sql, params)])[-1])

    def executemany(self, sql: str, seq: Iterable[Any]) -> RemoteCursor:
        with self._lock:
            rows: list[tuple] = []
            todo = [(sql, p) for p in seq]
            if todo:
                for r in self._run(todo):
                    rows.extend(r)
            return RemoteCursor(rows)

    def last_insert_rowid(self) -> int:
        return self._last_rowid

    def changes(self) -> int:
        return self._changes

    def getautocommit(self) -> bool:
        with self._lock:
            if self._unsure and not self._fresh:
                try:
                    self._baton, res = self.client.pipeline(self._baton,
                                                            [{"type": "get_autocommit"}])
                    if res[0]["type"] == "ok":
                        auto = bool(res[0]["response"]["is_autocommit"])
                        self._depth = 0 if auto else max(self._depth, 1)
                        self._unsure = False
                except (hrana.HranaError, KeyError, TypeError):
                    pass
            return self._depth == 0 and not self._queued and not self._snapshot

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
        """sqld queues writers itself; the client's wait is its HTTP timeout."""

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

    # -- the stream -----------------------------------------------------------------

    def _stmt_kind(self, sql: str) -> tuple[str, str]:
        m = _PRAGMA.match(sql)
        if m:
            return "pragma", m.group(1).lower()
        w = _WORD.match(sql)
        return ("word", (w.group(1) or "").upper() + " " + (w.group(2) or "").upper()) if w \
            else ("", "")

    def _run(self, statements: Sequence[tuple[str, Any]]) -> list[list[tuple]]:
        """Run statements in order on the stream; one list of rows each."""
        if self._closed:
            raise HeapmemError("this store is closed")
        if len(statements) == 1:
            sql, params = statements[0]
            handled = self._control(sql, params)
            if handled is not None:
                return [handled]
        out: list[list[tuple]] = []
        send: list[dict[str, Any]] = []
        local: dict[int, list[tuple]] = {}
        kinds = []
        for i, (sql, params) in enumerate(statements):
            kind, word = self._stmt_kind(sql)
            kinds.append((kind, word))
            if kind == "pragma" and word in _SERVER_OWNS:
                local[i] = []
                continue
            if kind == "pragma" and word in _PER_STREAM and "=" in sql:
                self._setup[word] = sql
                local[i] = []
                continue
            if kind == "pragma":
                # a replica forwards every PRAGMA statement to its primary, but
                # serves the table-valued form itself
                m = _PRAGMA_READ.match(sql)
                if m:
                    sql = _pragma_select(m.group(1), m.group(2))
            send.append(hrana.stmt(sql, params))
        if not send:
            return [local[i] for i in range(len(statements))]
        prefix = self._queued
        self._queued = []
        results = self._send(prefix + send, len(prefix))
        it = iter(results)
        for i, (kind, word) in enumerate(kinds):
            if i in local:
                out.append(local[i])
                continue
            rows, changes, rowid = next(it)
            if kind == "pragma" and word == "data_version" and rows:
                # a new stream is a new server connection, with its own count:
                # keep the value moving across streams
                rows = [((self._generation << 32) + int(rows[0][0]),)]
            self._changes = changes
            if rowid is not None:
                self._last_rowid = rowid
            self._track(word)
            out.append(rows)
        return out

    def _control(self, sql: str, params: Any) -> list[tuple] | None:
        """Transaction control and scripts, or None for an ordinary statement.

        A read snapshot (a deferred BEGIN or a SAVEPOINT outside any
        transaction: Memory.snapshot(), recall) is not sent: on a replica,
        sqld forwards every BEGIN and SAVEPOINT to the primary and runs the
        whole transaction there, which would make replicas serve no reads.
        Its statements run one by one instead, each on one consistent view.
        A write transaction (BEGIN IMMEDIATE) waits and travels with the
        next statement, led by the stream's settings (foreign_keys)."""
        kind, word = self._stmt_kind(sql)
        first = word.split(" ")[0]
        if _several(sql):
            # a script (schema.MIGRATIONS): Hrana's sequence request, no rows
            if self._queued:
                prefix, self._queued = self._queued, []
                self._send(prefix, len(prefix))
            self._sequence(sql)
            return []
        if kind != "word":
            return None
        if self._snapshot:
            if first == "SAVEPOINT":
                self._snapshot += 1
                return []
            if first == "RELEASE" or (first == "ROLLBACK" and word == "ROLLBACK TO"):
                self._snapshot -= first == "RELEASE"
                return []
            if first in ("COMMIT", "END", "ROLLBACK"):
                self._snapshot = 0
                return []
            return None
        if self._depth == 0 and not self._queued and (
                first == "SAVEPOINT" or word in ("BEGIN ", "BEGIN DEFERRED", "BEGIN TRANSACTION")):
            self._snapshot = 1
            return []
        if first in ("BEGIN", "SAVEPOINT"):
            if first == "BEGIN" and self._needs_setup:
                self._queued += [hrana.stmt(s, want_rows=False) for s in self._setup.values()]
                self._needs_setup = False
            self._queued.append(hrana.stmt(sql, params, want_rows=False))
            self._depth += 1
            return []
        return None

    def _track(self, word: str) -> None:
        first = word.split(" ")[0]
        if first in ("BEGIN", "SAVEPOINT"):
            self._depth += 1
        elif first in ("COMMIT", "END") or (first == "ROLLBACK" and word != "ROLLBACK TO"):
            self._depth = 0
        elif first == "RELEASE":
            self._depth = max(self._depth - 1, 0)

    def _sequence(self, sql: str) -> None:
        if self._fresh:
            self._generation += 1
            self._needs_setup = True
        try:
            self._baton, res = self.client.pipeline(None if self._fresh else self._baton,
                                                    [{"type": "sequence", "sql": sql}])
        except hrana.HranaError as e:
            self._fresh, self._depth = True, 0
            raise ServerError(e.message) from None
        self._fresh = self._baton is None
        for r in res:
            if r["type"] != "ok":
                self._unsure = True
                raise _sqlite_error(r.get("error") or {})

    def _send(self, stmts: list[dict[str, Any]], queued: int
              ) -> list[tuple[list[tuple], int, int | None]]:
        """One round trip: a batch of stmts, each run only if the one before
        succeeded.  The queued BEGIN/SAVEPOINTs lead it; their results are
        not returned."""
        reqs: list[dict[str, Any]] = []
        new_stream = self._fresh
        if new_stream:
            self._generation += 1
        nsetup = 0
        if len(stmts) == 1:
            reqs.append({"type": "execute", "stmt": stmts[0]})
        else:
            reqs.append(hrana.batch(stmts))
        try:
            baton, res = self.client.pipeline(None if new_stream else self._baton, reqs)
        except hrana.HranaError as e:
            if e.code == "STREAM_EXPIRED" and not new_stream:
                self._fresh = True
                if self._depth - queued > 0:
                    self._depth = 0
                    raise ServerError(f"{self.url} closed the stream of an open transaction "
                                      "(idle too long); nothing of it was written") from None
                return self._send(stmts, queued)
            writing = self._depth - queued > 0 or any(
                _WORD.match(st["sql"]).group(1).upper() == "BEGIN" for st in stmts[:queued])
            committing = any(_WORD.match(st["sql"]).group(1).upper() in ("COMMIT", "END")
                             for st in stmts)
            self._fresh = True
            self._depth = 0
            if e.code == "NETWORK" and "did not answer" in e.message and writing:
                raise ServerError(
                    f"{self.url} did not acknowledge the write within {self.client.timeout:g} s "
                    "(a replica forwards writes to its primary: is the primary running?); "
                    + ("its outcome is unknown until the server answers again" if committing
                       else "nothing was written")) from None
            raise ServerError(e.message) from None
        self._baton = baton
        self._fresh = baton is None
        self._needs_setup = self._needs_setup or new_stream or self._fresh
        for r in res[:nsetup]:
            if r["type"] != "ok":
                raise _sqlite_error(r.get("error") or {})
        r = res[nsetup]
        if r["type"] != "ok":
            err = r.get("error") or {}
            if str(err.get("code", "")) == "STREAM_EXPIRED" and not new_stream \
                    and self._depth - queued <= 0:
                self._fresh = True
                return self._send(stmts, queued)
            self._unsure = True
            raise _sqlite_error(err)
        resp = r["response"]
        if resp.get("type") == "execute":
            return [hrana.rows_of(resp)]
        b = resp["result"]
        outs = []
        for i, (sr, se) in enumerate(zip(b["step_results"], b["step_errors"])):
            if se is not None:
                self._unsure = True
                # the steps before it ran; a queued BEGIN that ran leaves a transaction
                self._depth -= sum(1 for j in range(i, queued))
                raise _sqlite_error(se)
            if sr is None:  # pragma: no cover - skipped only after an error
                raise ServerError("the server skipped a statement of the batch")
            if i >= queued:
                outs.append(hrana.rows_of(sr))
        return outs


# -- opening ------------------------------------------------------------------------------


def _local_library() -> tuple[str, list[str]]:
    """heap_version() and the heap_* function names of this heapmem's library."""
    c = apsw.Connection(":memory:")
    try:
        _native.load(c)
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
            durable: bool = False, embedder: Any = None) -> RemoteConnection:
    """A RemoteConnection to the server at url, after checking that a libSQL
    server answers there and accepts the token (ServerError otherwise, one
    sentence; nothing is written)."""
    if durable:
        raise ValueError("durable=True is a file's setting: on a server, how commits reach "
                         "the disk is sqld's own (its WAL and replication log)")
    if embedder is not None:
        raise HeapmemError("open(embedder=...): hybrid recall is not supported on a server "
                           "store yet; open it without an embedder")
    conn = RemoteConnection(url, auth_token=auth_token, timeout=timeout)
    try:
        status, body = conn.client.request("GET", "/version")
        if status in (401, 403):
            raise ServerError(conn.client.http_error(status, body).message)
        if status != 200 or not body.startswith(b"sqld"):
            # an older sqld may lack /version: ask the pipeline itself
            try:
                conn.client.pipeline(None, [{"type": "close"}])
            except hrana.HranaError as e:
                if e.code in ("HTTP 401", "HTTP 403", "NETWORK"):
                    raise
                raise hrana.HranaError(e.message, "NOT_HRANA") from None
    except hrana.HranaError as e:
        conn.close()
        if e.code == "NOT_HRANA":
            raise ServerError(f"{url} is not a libSQL server (sqld): it does not answer Hrana "
                              "requests") from None
        raise ServerError(e.message) from None
    except BaseException:
        conn.close()
        raise
    return conn
