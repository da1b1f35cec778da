"""The one place a store's connection is chosen, at open: a file (apsw),
or a libSQL server (heapmem.remote's connection, with the same methods)
when the path is a URL.  The core asks this module, never the server
client, which door it has.

Owns: the choice between a file and a server (is_server, connect), and
leaving no -wal and -shm files behind a read-only connection that made them
(release_wal_files).
"""
from __future__ import annotations

import os
from typing import Any

import apsw

from ..errors import HeapmemError
from . import sql
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
