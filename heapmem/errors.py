"""heapmem's exceptions: one base class and a few specific ones.

Owns: the exception classes, and the one warning (AutoTuneWarning).

Bad arguments raise the built-in ValueError or TypeError with a sentence that
says what to do; errors about the store itself derive from HeapmemError.
"""
from __future__ import annotations


class HeapmemError(Exception):
    """Base class of heapmem's own errors."""


class NotAStoreError(HeapmemError):
    """The file exists but is not a heapmem store (left untouched)."""


class SchemaVersionError(HeapmemError):
    """The store was written by a newer heapmem (left untouched)."""


class ReadOnlyError(HeapmemError):
    """A write was attempted on a store opened with readonly=True."""


class DuplicateIdError(HeapmemError, ValueError):
    """A memory with this id already exists (the existing one is untouched)."""


class UnsafeStoreError(NotAStoreError):
    """The file holds schema objects heapmem did not create (an extra trigger
    or view, or one of heapmem's with other SQL), which would run their
    author's SQL; it is refused before any of them runs, and left untouched."""


class CorruptStoreError(HeapmemError):
    """The file fails SQLite's integrity checks (open(verify=True))."""


class StoreBusyError(HeapmemError):
    """Another connection held the store's write lock past the busy timeout."""


class ForeignAnswerError(HeapmemError):
    """A heap_* function answered with a value heapmem's library never gives
    (a hostile or broken libSQL server: valid Hrana, wrong values).  Nothing
    of the answer is believed and the verb's transaction is rolled back:
    nothing was written (heapmem.answers)."""


class AutoTuneWarning(RuntimeWarning):
    """Auto-tune failed after a feedback (Memory.feedback): the feedback was
    saved, the weights in force did not change, and Feedback.auto_tune's
    reason says what failed."""


class AddressInUseError(HeapmemError, OSError):
    """A server's address (host and port) is taken by another program; nothing
    was served (`heapmem mcp` exits with status 2)."""


def from_sqlite(e: BaseException, doing: str) -> HeapmemError:
    """The HeapmemError a failure from SQLite (or from a damaged value in
    the file) becomes, as one sentence saying what was being done."""
    import apsw

    msg = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, apsw.BusyError):
        return StoreBusyError(f"{doing}: the store is busy: another connection held its write "
                              "lock for the whole busy timeout (10 s); nothing was written, try "
                              "again")
    if isinstance(e, (apsw.CorruptError, apsw.NotADBError)):
        return CorruptStoreError(f"{doing}: the file is damaged: {msg}")
    if isinstance(e, apsw.ReadOnlyError):
        return ReadOnlyError(f"{doing}: the store cannot be written: {msg}")
    if isinstance(e, apsw.FullError):
        return HeapmemError(f"{doing}: the disk is full: {msg}")
    if isinstance(e, apsw.Error):
        return HeapmemError(f"{doing}: SQLite failed: {msg}")
    return CorruptStoreError(f"{doing}: a value in the store is damaged "
                             f"({type(e).__name__}: {msg})")
