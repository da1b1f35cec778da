"""heapmem: agent memory in one SQLite file, ranked in C inside SQL, that
learns from feedback which kinds of memory answer which kinds of question.

    import heapmem
    mem = heapmem.open("agent.db")
    mem.add("Booked the flight: SFO to LIS, departs March 14", namespace="user:maya")
    res = mem.recall("When is my flight to Lisbon?", namespace="user:maya")
    mem.feedback(used=[res[0].id], recall_id=res.recall_id)

The package's layers: heapmem.db (the file: the library's door, the schema,
the statements, the choice of connection), the core here (Memory in store
and the objects it holds: its logs, vectors; its config, results, errors,
input checks and embedders), heapmem.learning
(what feedback teaches, read from Python), heapmem.io (export, import, the
report page), heapmem.remote (libSQL server) and heapmem.adapters (the CLI,
MCP, LangGraph, LlamaIndex, LangChain, the OpenAI Agents SDK, Datasette);
heapmem.tools is the tool table every tool door is built from, and
heapmem.aio's AsyncMemory every verb as a coroutine.
"""
from ._version import __version__
from .aio import AsyncMemory, open_async
from .config import KIND_IMPORTANCE, MAX_IMPORTANCE, ScoringConfig
from .db.native import load, loadable_path
from .errors import (
    AutoTuneWarning,
    CorruptStoreError,
    DuplicateIdError,
    ForeignAnswerError,
    HeapmemError,
    NotAStoreError,
    ReadOnlyError,
    SchemaVersionError,
    UnsafeStoreError,
)
from .results import (
    CheckReport,
    Event,
    Feedback,
    ImportReport,
    Item,
    Judgement,
    LinkRow,
    LoggedRecall,
    NamespaceStats,
    Recall,
    Result,
    Stats,
    TuneReport,
)
from .store import DEFAULT_EMBEDDER, Memory, open
from .validate import MAX_TEXT_BYTES

__all__ = [
    "AsyncMemory",
    "AutoTuneWarning",
    "CheckReport",
    "CorruptStoreError",
    "DEFAULT_EMBEDDER",
    "DuplicateIdError",
    "Event",
    "Feedback",
    "ForeignAnswerError",
    "HeapmemError",
    "ImportReport",
    "Item",
    "Judgement",
    "KIND_IMPORTANCE",
    "LinkRow",
    "LoggedRecall",
    "MAX_IMPORTANCE",
    "MAX_TEXT_BYTES",
    "Memory",
    "NamespaceStats",
    "NotAStoreError",
    "ReadOnlyError",
    "Recall",
    "Result",
    "SchemaVersionError",
    "ScoringConfig",
    "Stats",
    "TuneReport",
    "UnsafeStoreError",
    "__version__",
    "load",
    "loadable_path",
    "open",
    "open_async",
]
