"""heapmem's exceptions: one base class and a few specific ones.

Owns: the exception classes.

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
