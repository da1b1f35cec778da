"""heapmem: agent memory in one SQLite file, ranked in C inside SQL, that
learns from feedback which kinds of memory answer which kinds of question.

    import heapmem
    mem = heapmem.open("agent.db")
    mem.add("Booked the flight: SFO to LIS, departs March 14", namespace="user:maya")
    res = mem.recall("When is my flight to Lisbon?", namespace="user:maya")
    mem.feedback(used=[res[0].id], recall_id=res.recall_id)
"""
from ._native import loadable_path
from ._version import __version__
from .config import KIND_IMPORTANCE, MAX_IMPORTANCE, ScoringConfig
from .errors import DuplicateIdError, HeapmemError, NotAStoreError, ReadOnlyError, SchemaVersionError
from .store import (MAX_TEXT_BYTES, CheckReport, Feedback, Item, LinkRow, Memory, Recall, Result,
                    load, open)
from .tune import TuneReport

__all__ = [
    "CheckReport",
    "DuplicateIdError",
    "Feedback",
    "HeapmemError",
    "Item",
    "KIND_IMPORTANCE",
    "LinkRow",
    "MAX_IMPORTANCE",
    "MAX_TEXT_BYTES",
    "Memory",
    "NotAStoreError",
    "ReadOnlyError",
    "Recall",
    "Result",
    "SchemaVersionError",
    "ScoringConfig",
    "TuneReport",
    "__version__",
    "load",
    "loadable_path",
    "open",
]
