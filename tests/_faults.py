"""A fault-injecting SQLite VFS for the fault tests (not a test module), in
the manner of SQLite's own I/O-error and crash tests: heapmem.open(path,
vfs=FaultVFS.NAME) opens a store through it.

It passes every call to SQLite's default VFS and counts the reads, writes,
syncs and truncates of every file.  Armed (arm(at=N, how=...)), the Nth
counted call after arming fails:

- "ioerr": that call raises SQLITE_IOERR (the disk failed), once; the calls
  after it work again;
- "full": the Nth *write* raises SQLITE_FULL (the disk is full), once;
- "power": the power goes at that call: it and every later call fail with
  SQLITE_IOERR and reach no file.  What the disk holds then is each file as
  of its last sync plus any of the writes since, in order, each kept or
  lost (power_loss(rnd): seeded; a kept write may also be torn at a 512-byte
  boundary), and no -shm (memory, gone with the power).  The test closes the
  store, calls power_loss() to leave that on disk, and reopens it with the
  default VFS, as a machine coming back up would.

Writes to files without a name (SQLite's temporary files) are counted and
failed too, but what power leaves of them does not matter: SQLite deletes
them.  The -shm index is memory-mapped: SQLite does not read or write it
through the VFS, so it is neither counted nor failed.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

import apsw


@dataclass
class _Durable:
    """What one file holds for sure (as of its last sync), and the writes and
    truncates since: ("w", offset, data) or ("t", size, b"")."""

    image: bytearray
    since: list[tuple[str, int, bytes]] = field(default_factory=list)

    def settle(self) -> None:
        """A sync: every write and truncate since is durable now."""
        apply(self.image, self.since)
        self.since.clear()


def apply(data: bytearray, ops: list[tuple[str, int, bytes]]) -> None:
    """Writes and truncates, in order, on data."""
    for op, offset, payload in ops:
        if op == "t":
            del data[offset:]
            continue
        if len(data) < offset:
            data.extend(bytes(offset - len(data)))
        data[offset:offset + len(payload)] = payload


class FaultVFS(apsw.VFS):
    """The VFS: register it once (FaultVFS()), open stores with vfs=NAME."""

    NAME = "heapmem-faults"
    KINDS = ("read", "write", "sync", "truncate")

    def __init__(self) -> None:
        super().__init__(self.NAME, "")
        self.files: dict[str, _Durable] = {}
        self.disarm()

    # -- the plan -----------------------------------------------------------------------

    def disarm(self) -> None:
        """Count calls, fail none, and forget what was counted (not the files)."""
        self.at: int | None = None
        self.how = ""
        self.counted = 0
        self.calls = {k: 0 for k in self.KINDS}
        self.fired: str | None = None   # the kind of call the fault hit
        self.dead = False

    def arm(self, at: int, how: str) -> None:
        """Fail the at-th counted call from now (1 is the next one): how is
        "ioerr", "full" (counting writes only) or "power"."""
        assert how in ("ioerr", "full", "power") and at >= 1
        self.disarm()
        self.at, self.how = at, how

    def _io(self, kind: str) -> None:
        """Count a call of kind; raise the fault it is due."""
        if self.dead:
            raise apsw.IOError("the power is off")
        self.calls[kind] += 1
        if self.at is None or (self.how == "full" and kind != "write"):
            return
        self.counted += 1
        if self.counted != self.at:
            return
        self.fired = kind
        if self.how == "full":
            raise apsw.FullError(f"injected SQLITE_FULL at write {self.at}")
        if self.how == "power":
            self.dead = True
            raise apsw.IOError(f"the power went at {kind} call {self.at}")
        raise apsw.IOError(f"injected SQLITE_IOERR at {kind} call {self.at}")

    # -- what the disk holds --------------------------------------------------------

    def forget_files(self) -> None:
        """Start a new trial: no file is known (each is taken as durable as
        it is when first opened)."""
        self.files.clear()

    def power_loss(self, rnd: random.Random, *, keep: float = 0.5, tear: float = 0.2) -> None:
        """Leave on disk what the power cut left: for every file this VFS
        wrote, its content at its last sync plus each later write kept with
        probability keep (a kept one torn, with probability tear, at a
        512-byte boundary), in order; no -shm.  Call it with the store closed."""
        for path, d in self.files.items():
            kept = []
            for op, offset, payload in d.since:
                if rnd.random() >= keep:
                    continue
                if op == "w" and len(payload) > 512 and rnd.random() < tear:
                    payload = payload[:512 * rnd.randrange(1, len(payload) // 512 + 1)]
                kept.append((op, offset, payload))
            data = bytearray(d.image)
            apply(data, kept)
            if os.path.exists(path) or data:
                with open(path, "wb") as f:
                    f.write(data)
            if os.path.exists(path + "-shm"):
                os.remove(path + "-shm")
            if path.endswith("-wal") and os.path.exists(path[:-4] + "-shm"):
                os.remove(path[:-4] + "-shm")
        self.files.clear()

    # -- the VFS ----------------------------------------------------------------------

    def xOpen(self, name: Any, flags: list[int]) -> "FaultFile":  # noqa: N802 - apsw's names
        if self.dead:
            raise apsw.IOError("the power is off")
        return FaultFile(self, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:  # noqa: N802
        if self.dead:
            raise apsw.IOError("the power is off")
        self.files.pop(filename, None)
        super().xDelete(filename, syncdir)


class FaultFile(apsw.VFSFile):
    """One open file: each call counted, and failed when the plan says so."""

    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]):
        super().__init__("", name, flags)
        self.vfs = vfs
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        self.path: str | None = path
        if path and path not in vfs.files:  # durable as it is when first opened
            size = super().xFileSize()
            vfs.files[path] = _Durable(bytearray(super().xRead(size, 0) if size else b""))

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802
        self.vfs._io("read")
        return super().xRead(amount, offset)

    def xWrite(self, data: bytes, offset: int) -> None:  # noqa: N802
        self.vfs._io("write")
        super().xWrite(data, offset)
        if self.path:
            self.vfs.files[self.path].since.append(("w", offset, bytes(data)))

    def xTruncate(self, newsize: int) -> None:  # noqa: N802
        self.vfs._io("truncate")
        super().xTruncate(newsize)
        if self.path:
            self.vfs.files[self.path].since.append(("t", newsize, b""))

    def xSync(self, flags: int) -> None:  # noqa: N802
        """A sync, as the power-cut model sees it: what was written is
        durable now.  The disk's own fsync is not called: the model, not the
        disk, decides what a power cut leaves (and a trial costs no fsync)."""
        self.vfs._io("sync")
        if self.path:
            self.vfs.files[self.path].settle()

    def xClose(self) -> None:  # noqa: N802
        super().xClose()
