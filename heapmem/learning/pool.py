"""How a store's pooled layer is built: mem.pool.

Owns: the pooled layer's settings (meta 'pool': cap, the most observations
of a link one namespace weighs in it; min, the namespaces that must back a
link before any is pooled; trim, the namespaces left out at each end), read
and changed: a change is checked, written and the pooled rows worked out
again by it (heapmem.learning.links.rebuild_pool) in one transaction.
Nothing else writes that key.  Recall and feedback read the settings in C,
from the file, at every call (csrc/feedback.c).
"""
from __future__ import annotations

import json
import math
import threading
from typing import TYPE_CHECKING, Any

from ..db import schema
from ..guard import guarded, locked
from . import links as learning

if TYPE_CHECKING:
    from ..store import Memory


class Pool:
    """How a store's pooled layer is built (mem.pool): its settings, and set()."""

    _door = "pool."

    def __init__(self, mem: Memory, lock: threading.RLock, *, remote: bool):
        self._mem = mem
        self._lock = lock
        self._remote = remote
        self._settings = schema.pool_settings(mem.connection)

    def read(self, c: schema.Connection) -> dict[str, Any]:
        """The settings as the file says now (another process's set()
        changes them), on c: check() reads them so, and they are kept for
        `settings` on a server."""
        self._settings = schema.pool_settings(c)
        return dict(self._settings)

    @property
    @locked
    def settings(self) -> dict[str, Any]:
        """{"cap", "min", "trim"} as the file says now (on a server: as of
        this connection's open, last check() or set(), which read them, so a
        recall costs no extra round trip)."""
        c = self._mem.connection
        if not self._remote:
            self.read(c)
        return dict(self._settings)

    @guarded
    def set(self, *, cap: float | None = None, min_namespaces: int | None = None,
            trim: int | None = None) -> dict[str, Any]:
        """Change how the pooled layer is built and work it out again, in one
        transaction; returns the settings now in force.  A lower cap or a
        larger trim leaves any one tenant less say in what others borrow, at
        some cost to honest transfer (bench/RESULTS.md measures both).
        Bad values raise ValueError and change nothing."""
        new = self.settings
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not (
                    math.isfinite(cap) and cap > 0):
                raise ValueError(f"cap must be a positive number, got {cap!r}")
            new["cap"] = float(cap)
        for name, key, v in (("min_namespaces", "min", min_namespaces), ("trim", "trim", trim)):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1_000_000:
                    raise ValueError(f"{name} must be an integer from 0 to 1000000, got {v!r}")
                new[key] = v
        if new["min"] < 2 * new["trim"] + 1:
            raise ValueError(f"min_namespaces must be at least 2 x trim + 1 = "
                             f"{2 * new['trim'] + 1}, so some namespace is left to pool")
        with self._mem.transaction() as c:
            schema.meta_set(c, schema.META_POOL, json.dumps(new, sort_keys=True))
            learning.rebuild_pool(c)  # by the settings just written
        self._settings = new
        return dict(new)
