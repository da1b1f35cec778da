"""The error contract every verb shows on its def.

Owns: the decorators a verb of Memory (or of an object Memory holds:
mem.log, mem.pool, mem.priors, mem.vectors) carries: guarded (SQLite's
failures reach the caller as HeapmemError subclasses, in one sentence that
names the verb), locked (the store's lock held while it runs), and
from_file (a value decoded from the file that does not decode is damage:
CorruptStoreError); and which exceptions count as damage (DAMAGE, DECODING).
A bad argument stays a ValueError/TypeError naming it, and a bug in heapmem
surfaces as itself.
"""
from __future__ import annotations

import functools
import re
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

import apsw

from .errors import CorruptStoreError, HeapmemError, from_sqlite

#: What SQLite can raise inside a verb; each reaches the caller as a
#: HeapmemError (errors.from_sqlite), never as itself.
DAMAGE = (apsw.Error,)
#: What decoding a value read from the file can raise when the value is
#: damaged (text where a number belongs, a log that is not JSON, a number past
#: int64): inside from_file only, so that an argument's error stays a
#: ValueError/TypeError naming it and a bug in heapmem stays a bug.
DECODING = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError,
            UnicodeError, AttributeError)


class Guarded(Protocol):
    """What the decorators need of the object a verb runs on: the store's
    lock (one for Memory and every object it holds), and where the verb is
    reached from, as its error sentences name it ("" for Memory's own verbs,
    "log." for mem.log's)."""
    _lock: threading.RLock
    _door: str


def c_sentence(e: BaseException) -> str:
    """The sentence a heap_* function of the C core said, without apsw's and
    the function's prefixes ("SQLError: heap_forget: unknown ids ..." ->
    "unknown ids ...")."""
    return re.sub(r"^(\w+Error: )?heap_\w+: ", "", str(e))


@contextmanager
def from_file(doing: str) -> Iterator[None]:
    """Decode values read from the file inside: what fails there is damage
    in the file (CorruptStoreError), said in one sentence."""
    try:
        yield
    except HeapmemError:
        raise
    except DECODING as e:
        raise CorruptStoreError(f"{doing}: a value in the store is damaged "
                                f"({type(e).__name__}: {' '.join(str(e).split())})") from e


def locked(method: Callable) -> Callable:
    """Run a verb holding the store's lock: threads share one apsw
    connection, which refuses to run two statements at once
    (ThreadingViolationError), and a read must not see another thread's
    half-done write transaction."""
    @functools.wraps(method)
    def run_locked(self: Guarded, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)
    return run_locked


def guarded(method: Callable) -> Callable:
    """Let SQLite's failures reach the caller as HeapmemError subclasses
    (errors.from_sqlite), named after the verb ("set: ..." of mem.pool.set
    reads "pool.set: ...").  Bad arguments raise ValueError/TypeError before
    anything is read; damaged values are caught where they are decoded
    (from_file); anything else is a bug in heapmem and surfaces as one."""
    @functools.wraps(method)
    def run_guarded(self: Guarded, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except HeapmemError:
            raise
        except DAMAGE as e:
            raise from_sqlite(e, self._door + method.__name__) from e
    return run_guarded
