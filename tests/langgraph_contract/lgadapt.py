"""Stand-ins for the stores LangGraph's own store tests build: each builds a
HeapmemStore over a new file, so the vendored tests run unchanged against it.

InMemoryStore(index=..., ttl=...) is HeapmemStore's contract-test twin of
langgraph.store.memory.InMemoryStore; SqliteStore and AsyncSqliteStore give
the from_conn_string()/setup() the SQLite store's tests call.  The names the
SQLite store's tests import for its internals are bound to NotApplicable:
those tests are listed in EXCLUDED.md and never run.
"""
from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any
from unittest import mock

from heapmem.adapters.langgraph_store import HeapmemStore

from conftest import MEMORY_TMP

_DIRS: list[str] = []


@atexit.register
def _cleanup() -> None:
    for d in _DIRS:
        shutil.rmtree(d, ignore_errors=True)


def new_path() -> str:
    d = tempfile.mkdtemp(prefix="heapmem-lg-", dir=MEMORY_TMP)  # tests/conftest.py says why
    _DIRS.append(d)
    return d + "/store.db"


def _index(index: Any) -> Any:
    """LangGraph's SQLite store calls the index fields text_fields."""
    if not index:
        return None
    index = dict(index)
    if "text_fields" in index:
        fields = index.pop("text_fields")
        if fields is not None:
            index["fields"] = fields
    index.pop("distance_type", None)
    return index


class InMemoryStore(HeapmemStore):
    """A HeapmemStore over a new file, built like LangGraph's InMemoryStore."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        super().__init__(new_path(), index=_index(index), ttl=ttl)


class SqliteStore(HeapmemStore):
    """A HeapmemStore built like LangGraph's SqliteStore (the connection
    string names a file or ':memory:'; heapmem always uses a new file)."""

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, conn_string: str, *, index: Any = None,
                         ttl: Any = None) -> Iterator["SqliteStore"]:
        store = cls(new_path(), index=_index(index), ttl=ttl)
        try:
            yield store
        finally:
            store.close()

    def setup(self) -> None:
        """Nothing to set up: heapmem makes its schema on open."""


class AsyncSqliteStore(HeapmemStore):
    """A HeapmemStore built like LangGraph's AsyncSqliteStore."""

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(cls, conn_string: str, *, index: Any = None,
                               ttl: Any = None) -> AsyncIterator["AsyncSqliteStore"]:
        store = cls(new_path(), index=_index(index), ttl=ttl)
        try:
            yield store
        finally:
            store.close()

    @classmethod
    @contextlib.contextmanager
    def open_sync(cls) -> Iterator["AsyncSqliteStore"]:
        store = cls(new_path())
        try:
            yield store
        finally:
            store.close()

    async def setup(self) -> None:
        """Nothing to set up: heapmem makes its schema on open."""


SqliteIndexConfig = dict


class _NotApplicable:
    """What the SQLite store's internals are bound to here (EXCLUDED.md)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError("this test checks LangGraph's SQLite store's internals")

    def __call__(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("this test checks LangGraph's SQLite store's internals")


NotApplicable = _NotApplicable()


class MockerFixture:
    """The two pytest-mock calls the vendored tests make (stub, spy)."""

    def __init__(self) -> None:
        self._patches: list[Any] = []

    def stub(self) -> mock.MagicMock:
        return mock.MagicMock()

    def spy(self, obj: Any, name: str) -> mock.MagicMock:
        p = mock.patch.object(obj, name, autospec=True, side_effect=getattr(obj, name))
        self._patches.append(p)
        return p.start()

    def stopall(self) -> None:
        for p in reversed(self._patches):
            p.stop()
        self._patches.clear()
