"""The logs a store keeps of its recalls and their feedback, read: mem.log.

Owns: the readers of the recall log (one tracked recall, the judged ones)
and of the event log (one Event per judged memory), and how their rows
become LoggedRecall and Event values.  The logs are written by the C core
(recall's sql.LOG_RECALL, heap_feedback's events); nothing here writes.
"""
from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from .db import sql
from .guard import from_file, guarded, locked
from .results import Event, LoggedRecall

if TYPE_CHECKING:
    from .store import Memory


def logged_recall(r: tuple) -> LoggedRecall:
    """A LoggedRecall from a row of sql.GET_RECALL / sql.JUDGED_RECALLS."""
    with from_file("reading the recall log"):
        row = dict(zip(sql.LOGGED_RECALL_COLUMNS, r))
        for name in ("shown", "ages", "features", "rest"):  # JSON arrays in the log
            row[name] = tuple(json.loads(row[name]))
        return LoggedRecall(**row)


class Log:
    """A store's recall log and event log (mem.log), read."""

    _door = "log."

    def __init__(self, mem: Memory, lock: threading.RLock):
        self._mem = mem
        self._lock = lock

    @guarded
    @locked
    def get(self, recall_id: int) -> LoggedRecall | None:
        """A tracked recall as the log keeps it, or None (never tracked, or
        forgotten)."""
        if isinstance(recall_id, bool) or not isinstance(recall_id, int):
            raise TypeError(f"recall_id must be an integer, got {type(recall_id).__name__}")
        if not -(1 << 63) <= recall_id < (1 << 63):
            return None
        rows = self._mem.connection.execute(sql.GET_RECALL, {"id": recall_id}).fetchall()
        return logged_recall(rows[0]) if rows else None

    @guarded
    @locked
    def judged(self, *, newest: int | None = None) -> list[LoggedRecall]:
        """Every logged recall in which feedback judged some memory used,
        oldest first; newest=N: only the newest N of them (still oldest
        first).  newest must be a positive integer (TypeError/ValueError)."""
        c = self._mem.connection
        if newest is None:
            return [logged_recall(r) for r in c.execute(sql.JUDGED_RECALLS)]
        if isinstance(newest, bool) or not isinstance(newest, int):
            raise TypeError(f"newest must be an integer, got {type(newest).__name__}")
        if not 0 < newest < (1 << 62):
            raise ValueError(f"newest must be a positive integer, got {newest}")
        rows = c.execute(sql.NEWEST_JUDGED_RECALLS, {"n": newest}).fetchall()
        return [logged_recall(r) for r in reversed(rows)]

    @guarded
    @locked
    def events(self, *, first_recall: int | None = None) -> list[Event]:
        """The feedback event log, oldest first: one Event per judged memory;
        first_recall=ID: only the events of recalls from that id on (none of
        forgotten recalls).  first_recall must be an integer (TypeError)."""
        c = self._mem.connection
        if first_recall is None:
            rows = c.execute(sql.EVENTS).fetchall()
        else:
            if isinstance(first_recall, bool) or not isinstance(first_recall, int):
                raise TypeError(f"first_recall must be an integer, got "
                                f"{type(first_recall).__name__}")
            first = max(min(first_recall, (1 << 63) - 1), -(1 << 63))
            rows = c.execute(sql.EVENTS_FROM, {"first": first}).fetchall()
        with from_file("reading the event log"):
            return [Event(i, rid, pos, ns, qt, bool(used),
                          tuple(tuple(d) for d in json.loads(deltas)))
                    for i, rid, pos, ns, qt, used, deltas in rows]
