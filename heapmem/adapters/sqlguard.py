"""Read mode for user SQL: `heapmem sql` without --write.

Owns: what user SQL may do in heapmem's read mode.  run_read_only() runs one
statement of a person's (or a script's) SQL on a store's connection and
refuses, before anything runs, a statement that could change the store, the
connection or the file system:

- an authorizer (SQLite's sqlite3_set_authorizer, installed for the call only
  and removed after, as the connection is shared) allows only reading: SELECT,
  reading a column, calling a function (the heap_* ones included, not
  load_extension), a recursive WITH, and the read-only PRAGMAs of READ_PRAGMAS
  (without a value) and NAME_PRAGMAS (whose argument names a table or index,
  or bounds a check).  Everything else is denied: INSERT, UPDATE, DELETE,
  CREATE, DROP, ALTER, ANALYZE, REINDEX, ATTACH, DETACH, BEGIN, COMMIT,
  SAVEPOINT, any PRAGMA that sets a value or is not on the lists;
- SQLite's own verdict (sqlite3_stmt_readonly) must agree: VACUUM, which no
  authorizer code covers, is refused this way (VACUUM INTO writes a new file
  even on a read-only connection).  The one exception is a pragma of
  QUERY_PRAGMAS alone and without a value (`PRAGMA journal_mode`), which
  SQLite calls a write because with a value it would be one;
- one statement per call: SQLite parses the first statement, and the text
  after it must hold no statement (comments, blanks and semicolons are fine);
  this is SQLite's own parser, so a ';' inside a string literal is no split.

A refused statement raises heapmem.errors.ReadOnlyError (a write) or
ValueError (several statements), with one sentence; an SQL error is apsw's.
Nothing is promised about time or memory: a read can be slow.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import apsw

from ..errors import ReadOnlyError

#: PRAGMAs read mode runs when they are called without a value: each only
#: reports something (a header field, a size, a list).
READ_PRAGMAS = frozenset({
    "user_version", "application_id", "schema_version", "data_version", "page_count",
    "page_size", "freelist_count", "encoding", "journal_mode", "auto_vacuum",
    "compile_options", "function_list", "module_list", "pragma_list", "collation_list",
    "database_list",
})

#: The READ_PRAGMAS SQLite itself does not call read-only (sqlite3_stmt_readonly
#: is false: the same statement with a value changes the file), though
#: without a value they only report: `PRAGMA journal_mode` prints the mode.
#: Read mode runs one of these when the authorizer saw nothing but it, without
#: a value; with one (`PRAGMA journal_mode=DELETE`) the authorizer refuses it.
QUERY_PRAGMAS = frozenset({"journal_mode"})

#: PRAGMAs whose argument names a table or an index, or bounds a check: they
#: read, with or without it.
NAME_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
})

#: Functions read mode refuses (one runs code from a file).
DENIED_FUNCTIONS = frozenset({"load_extension"})

_ALLOWED = frozenset({apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION,
                      apsw.SQLITE_RECURSIVE, apsw.SQLITE_PRAGMA})


def _what(code: int, third: Optional[str], fourth: Optional[str]) -> str:
    """The sentence for a denied action."""
    name = apsw.mapping_authorizer_function.get(code, str(code))
    verb = str(name).replace("SQLITE_", "").replace("_", " ")
    writes = "the statement writes to the store or the file system"
    if code == apsw.SQLITE_PRAGMA:
        pragma = (third or "").lower()
        if fourth is not None and pragma not in NAME_PRAGMAS:
            return f"the statement sets a pragma ({pragma} = {fourth})"
        return (f"the statement runs the pragma {pragma}, which read mode does not allow "
                "(it allows " + ", ".join(sorted(READ_PRAGMAS | NAME_PRAGMAS)) + ")")
    if code == apsw.SQLITE_FUNCTION:
        return f"the statement loads code ({fourth}())"
    if code == apsw.SQLITE_TRANSACTION:
        return f"the statement opens or ends a transaction ({(third or verb).upper()})"
    if code == apsw.SQLITE_SAVEPOINT:
        return f"the statement opens or ends a transaction ({verb})"
    if code == apsw.SQLITE_ATTACH:
        return f"{writes} (ATTACH {third!r})"
    if code == apsw.SQLITE_DETACH:
        return f"the statement changes the connection (DETACH {third})"
    if code in (apsw.SQLITE_INSERT, apsw.SQLITE_DELETE):
        return f"{writes} ({verb} on {third})"
    if code == apsw.SQLITE_UPDATE:
        return f"{writes} ({verb} of {third}.{fourth})"
    target = fourth if code in (apsw.SQLITE_ALTER_TABLE,) else third
    return f"{writes} ({verb} {target})" if target else f"{writes} ({verb})"


class _Guard:
    """The authorizer of one call; remembers the first action it denied."""

    def __init__(self) -> None:
        self.denied: Optional[str] = None
        #: every action asked about, as (code, third, fourth)
        self.seen: list[tuple[int, Optional[str], Optional[str]]] = []

    def only_queries(self) -> bool:
        """Whether every action asked about since `seen` was emptied is a
        pragma of QUERY_PRAGMAS without a value (and there was one)."""
        return bool(self.seen) and all(
            code == apsw.SQLITE_PRAGMA and (third or "").lower() in QUERY_PRAGMAS
            and fourth is None for code, third, fourth in self.seen)

    def __call__(self, code: int, third: Optional[str], fourth: Optional[str],
                 dbname: Optional[str], trigview: Optional[str]) -> int:
        self.seen.append((code, third, fourth))
        ok = code in _ALLOWED
        if code == apsw.SQLITE_PRAGMA:
            pragma = (third or "").lower()
            ok = pragma in NAME_PRAGMAS or (pragma in READ_PRAGMAS and fourth is None)
        elif code == apsw.SQLITE_FUNCTION:
            ok = (fourth or "").lower() not in DENIED_FUNCTIONS
        if ok:
            return apsw.SQLITE_OK
        if self.denied is None:
            # CREATE and DROP first write a row of sqlite_master: quote the statement
            schema_row = code in (apsw.SQLITE_INSERT, apsw.SQLITE_UPDATE, apsw.SQLITE_DELETE) \
                and (third or "").lower().startswith("sqlite_")
            self.denied = "" if schema_row else _what(code, third, fourth)
        return apsw.SQLITE_DENY


def _first(conn: apsw.Connection, text: str) -> Optional[tuple[str, bool]]:
    """(the first statement's text, whether SQLite calls it read-only), or None
    when text holds no statement; nothing runs (the exec tracer aborts it)."""
    seen: list[tuple[str, bool]] = []

    def tracer(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if cursor.has_vdbe:  # (text of only comments prepares to no program)
            seen.append((sql, bool(cursor.is_readonly)))
        return False  # abort: prepared, never stepped

    cur = conn.cursor()
    cur.exec_trace = tracer
    try:
        cur.execute(text, can_cache=False)
    except apsw.ExecTraceAbort:
        pass
    finally:
        cur.exec_trace = None
    return seen[0] if seen else None


def _refused(guard: _Guard, statement: str) -> ReadOnlyError:
    """The error for a refused statement: what the authorizer denied, else the
    statement itself (VACUUM, which no authorizer code covers; CREATE, DROP)."""
    if guard.denied:
        return ReadOnlyError(guard.denied)
    text = " ".join(statement.split()).rstrip(";").strip()
    text = text if len(text) <= 60 else text[:57] + "..."
    return ReadOnlyError(f"the statement writes to the store or the file system ({text})")


def run_read_only(conn: apsw.Connection, statement: str,
                  cell: Callable[[Any], Any] = lambda v: v) -> tuple[list[str], list[list[Any]]]:
    """Run one read-only SQL statement on conn: (column names, rows), each
    value passed through cell.  Raises ReadOnlyError for a statement that
    could write, ValueError for more than one statement; nothing runs then.
    The caller keeps other threads off conn meanwhile (Memory.snapshot())."""
    if not isinstance(statement, str):
        raise TypeError("the SQL must be a string")
    previous = conn.authorizer
    guard = _Guard()
    conn.authorizer = guard
    try:
        try:
            first = _first(conn, statement)
        except apsw.Error:
            if guard.denied is None:
                raise  # an SQL error, not a refusal
            raise _refused(guard, statement) from None
        if first is None:
            return [], []
        text, readonly = first
        # SQLite calls `PRAGMA journal_mode` a write; without a value it reads
        query_pragma = not readonly and guard.denied is None and guard.only_queries()
        if not readonly and not query_pragma:
            raise _refused(guard, text)
        rest = statement[len(text):]
        try:
            more = _first(conn, rest) if rest.strip() else None
        except apsw.Error:  # a refused or broken statement: a statement all the same
            more = (rest, False)
        if more is not None:
            after = " ".join(rest.split())
            raise ValueError(f"one statement per call: {after[:60]!r} follows "
                             f"{' '.join(text.split())!r}; run each statement on its own")
        cur = conn.cursor()
        steps = 0

        def tracer(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            nonlocal steps
            steps += 1
            return steps == 1 and (bool(cursor.is_readonly) or query_pragma)

        cur.exec_trace = tracer
        try:
            cur.execute(text, can_cache=False)
            try:
                cols = [d[0] for d in cur.get_description()]
            except apsw.ExecutionCompleteError:
                cols = []
            rows = [[cell(v) for v in r] for r in cur] if cols else []
        except apsw.ExecTraceAbort:
            raise _refused(guard, text) from None
        except apsw.Error:
            if guard.denied is None:
                raise
            raise _refused(guard, text) from None
        finally:
            cur.exec_trace = None
        return cols, rows
    finally:
        conn.authorizer = previous
