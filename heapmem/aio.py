"""heapmem for asyncio: AsyncMemory, every verb of Memory as a coroutine.

Owns: the pool of connections an AsyncMemory runs its verbs on, and the
config they share.  Each verb runs on a worker thread (at most `workers` at
once) with a Memory of that thread's own: a connection per worker, taken
from the pool and given back, opened with the arguments AsyncMemory was
opened with.  SQLite lets the readers run side by side (WAL) and queues the
writers on the file's write lock (each verb's write is one BEGIN IMMEDIATE
transaction with a 10 s busy timeout, as between processes), so many tasks
may share one AsyncMemory and nothing acknowledged is lost.  The event loop
never blocks on the file.

    import asyncio, heapmem

    async def main():
        async with heapmem.AsyncMemory("agent.db") as mem:
            await mem.add("Booked the flight: SFO to LIS, March 14", namespace="user:maya")
            res = await mem.recall("When is my flight?", namespace="user:maya")
            await mem.feedback(recall_id=res.recall_id, answer="March 14")

    asyncio.run(main())

What a Memory holds has its async twin: `await mem.log.events()`,
`await mem.pool.set(cap=50)`, `await mem.priors.list()`,
`await mem.vectors.settings()`, `await mem.auto_tune.finish()` (properties
as coroutines too: `await mem.pool.settings()`).

The config (set_config, and the weight auto-tune deploys after a feedback)
is shared: a change made on one connection is in force on all of them from
the next call on.  transaction() and snapshot(), which hand out a
connection, have no async twin: use a Memory for them.
"""
from __future__ import annotations

import asyncio
import builtins
import functools
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, TypeVar

from .config import ScoringConfig
from .errors import HeapmemError
from .results import (
    CheckReport,
    Event,
    Feedback,
    Item,
    LinkRow,
    LoggedRecall,
    Prior,
    Recall,
    Stats,
    TuneReport,
)
from .store import Memory
from .store import open as open_memory

T = TypeVar("T")
#: runs a function of a worker's Memory on a worker (AsyncMemory._call)
Call = Callable[..., Awaitable[Any]]


class AsyncLog:
    """Memory.log, as coroutines."""

    def __init__(self, call: Call):
        self._call = call

    async def get(self, recall_id: int) -> Optional[LoggedRecall]:
        """Memory.log.get, as a coroutine."""
        return await self._call(lambda m: m.log.get(recall_id))

    async def judged(self, **kwargs: Any) -> builtins.list[LoggedRecall]:
        """Memory.log.judged, as a coroutine."""
        return await self._call(lambda m: m.log.judged(**kwargs))

    async def events(self, **kwargs: Any) -> builtins.list[Event]:
        """Memory.log.events, as a coroutine."""
        return await self._call(lambda m: m.log.events(**kwargs))


class AsyncPool:
    """Memory.pool, as coroutines."""

    def __init__(self, call: Call):
        self._call = call

    async def settings(self) -> dict[str, Any]:
        """Memory.pool.settings: how the pooled layer is built."""
        return await self._call(lambda m: m.pool.settings)

    async def set(self, **kwargs: Any) -> dict[str, Any]:
        """Memory.pool.set, as a coroutine."""
        return await self._call(lambda m: m.pool.set(**kwargs))


class AsyncPriors:
    """Memory.priors, as coroutines."""

    def __init__(self, call: Call):
        self._call = call

    async def list(self) -> builtins.list[Prior]:
        """Memory.priors.list, as a coroutine."""
        return await self._call(lambda m: m.priors.list())

    async def remove(self, digest: str) -> Prior:
        """Memory.priors.remove, as a coroutine."""
        return await self._call(lambda m: m.priors.remove(digest))

    async def features(self) -> frozenset[str]:
        """Memory.priors.features."""
        return await self._call(lambda m: m.priors.features)


class AsyncVectors:
    """Memory.vectors, as coroutines."""

    def __init__(self, call: Call):
        self._call = call

    async def settings(self, **settings: Any) -> dict[str, Any]:
        """Memory.vectors.settings, as a coroutine."""
        return await self._call(lambda m: m.vectors.settings(**settings))

    async def index(self, namespace: str) -> builtins.list[Any]:
        """Memory.vectors.index, as a coroutine."""
        return await self._call(lambda m: m.vectors.index(namespace))

    async def embedder_name(self) -> Optional[str]:
        """Memory.vectors.embedder_name."""
        return await self._call(lambda m: m.vectors.embedder_name)

    async def embed(self, texts: builtins.list[str]) -> Any:
        """Memory.vectors.embed, as a coroutine."""
        return await self._call(lambda m: m.vectors.embed(builtins.list(texts)))


class AsyncAutoTune:
    """Memory.auto_tune, as coroutines."""

    def __init__(self, call: Call):
        self._call = call

    async def pending(self) -> Optional[int]:
        """Memory.auto_tune.pending: the point whose auto-tune runs in steps, or None."""
        return await self._call(lambda m: m.auto_tune.pending)

    async def finish(self) -> Optional[TuneReport]:
        """Memory.auto_tune.finish, as a coroutine: the auto-tune under way
        ended now, on whichever connection (a deployed weight is in force on
        every connection from the next call on)."""
        return await self._call(lambda m: m.auto_tune.finish())


class AsyncMemory:
    """A heapmem store for asyncio: each method is the Memory verb of the
    same name, as a coroutine (properties too: `await mem.count()`).  An
    async context manager; aclose() closes every connection."""

    def __init__(self, path: str, *, workers: int = 4, **open_kwargs: Any):
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
            raise ValueError(f"workers must be an integer from 1 to 64, got {workers!r}")
        if path == ":memory:":  # every connection would be a store of its own
            workers = 1
        self.path = path
        self.workers = workers
        self._open_kwargs = dict(open_kwargs)
        first = open_memory(path, **open_kwargs)  # errors here, and the schema made once
        self._config: ScoringConfig = first.config
        self._all = [first]
        self._idle: queue.LifoQueue[Memory] = queue.LifoQueue()
        self._idle.put(first)
        self._lock = threading.Lock()
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="heapmem")
        #: what each Memory holds, as coroutines on a worker's Memory
        self.log = AsyncLog(self._call)
        self.pool = AsyncPool(self._call)
        self.priors = AsyncPriors(self._call)
        self.vectors = AsyncVectors(self._call)
        self.auto_tune = AsyncAutoTune(self._call)

    # -- the pool ------------------------------------------------------------------

    def _take(self) -> Memory:
        try:
            return self._idle.get_nowait()
        except queue.Empty:  # fewer connections than workers yet: one more
            m = open_memory(self.path, **self._open_kwargs)
            with self._lock:
                self._all.append(m)
            return m

    def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """On a worker thread: method (a Memory function) on a connection of
        the pool, with the shared config in force."""
        m = self._take()
        try:
            config = self._config
            m.config = config
            out = method(m, *args, **kwargs)
            if m.config is not config:  # set_config, or auto-tune deployed a weight
                self._config = m.config
            return out
        finally:
            self._idle.put(m)

    async def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise HeapmemError("this store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._run, method, *args, **kwargs))

    @property
    def config(self) -> ScoringConfig:
        """The config in force on every connection."""
        return self._config

    def now(self, now: Any = None) -> float:
        """Memory.now: the store's clock, or now, as unix seconds."""
        return self._all[0].now(now)

    async def aclose(self) -> None:
        """Close every connection (after the verbs running now).  Safe twice."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    close = aclose

    def _shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            for m in self._all:
                m.close()

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # -- the verbs: each Memory's own, on a worker -----------------------------------

    async def add(self, text: str, **kwargs: Any) -> Item:
        """Memory.add, as a coroutine."""
        return await self._call(Memory.add, text, **kwargs)

    async def add_many(self, items: Iterable[Mapping[str, Any]], **kwargs: Any) -> list[Item]:
        """Memory.add_many, as a coroutine (the items are read before it runs)."""
        return await self._call(Memory.add_many, builtins.list(items), **kwargs)

    async def get(self, id: str) -> Optional[Item]:
        """Memory.get, as a coroutine."""
        return await self._call(Memory.get, id)

    async def update(self, id: str, **kwargs: Any) -> Item:
        """Memory.update, as a coroutine."""
        return await self._call(Memory.update, id, **kwargs)

    async def list(self, namespace: str = "default", **kwargs: Any) -> builtins.list[Item]:
        """Memory.list, as a coroutine."""
        return await self._call(Memory.list, namespace, **kwargs)

    async def stats(self) -> Stats:
        """Memory.stats, as a coroutine."""
        return await self._call(Memory.stats)

    async def recall(self, query: str, **kwargs: Any) -> Recall:
        """Memory.recall, as a coroutine."""
        return await self._call(Memory.recall, query, **kwargs)

    async def recall_sql(self, query: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Memory.recall_sql, as a coroutine."""
        return await self._call(Memory.recall_sql, query, **kwargs)

    async def feedback(self, used: Iterable[str] = (), **kwargs: Any) -> Feedback:
        """Memory.feedback, as a coroutine."""
        return await self._call(Memory.feedback, builtins.list(used), **kwargs)

    async def mark_used(self, ids: Iterable[str], **kwargs: Any) -> Feedback:
        """Memory.mark_used, as a coroutine."""
        return await self._call(Memory.mark_used, ids, **kwargs)

    async def mark_ignored(self, ids: Iterable[str], **kwargs: Any) -> Feedback:
        """Memory.mark_ignored, as a coroutine."""
        return await self._call(Memory.mark_ignored, ids, **kwargs)

    async def links(self, *args: Any, **kwargs: Any) -> builtins.list[LinkRow]:
        """Memory.links, as a coroutine."""
        return await self._call(Memory.links, *args, **kwargs)

    async def forget(self, ids: Optional[Iterable[str]] = None, **kwargs: Any) -> int:
        """Memory.forget, as a coroutine."""
        return await self._call(Memory.forget, ids, **kwargs)

    async def set_portable(self, portable: bool = True) -> None:
        """Memory.set_portable, as a coroutine."""
        return await self._call(Memory.set_portable, portable)

    async def tune(self, **kwargs: Any) -> TuneReport:
        """Memory.tune, as a coroutine (a deployed weight is in force on every
        connection from the next call on)."""
        return await self._call(Memory.tune, **kwargs)

    async def set_config(self, config: Optional[ScoringConfig] = None,
                         **kwargs: Any) -> ScoringConfig:
        """Memory.set_config, as a coroutine: in force on every connection."""
        return await self._call(Memory.set_config, config, **kwargs)

    async def check(self) -> CheckReport:
        """Memory.check, as a coroutine."""
        return await self._call(Memory.check)

    # -- Memory's properties, as coroutines ------------------------------------------

    async def count(self) -> int:
        """Memory.count: how many memories the store holds."""
        return await self._call(lambda m: m.count)

    async def namespaces(self) -> builtins.list[str]:
        """Memory.namespaces."""
        return await self._call(lambda m: m.namespaces)

    async def schema_version(self) -> int:
        """Memory.schema_version."""
        return await self._call(lambda m: m.schema_version)


def open_async(path: str, **kwargs: Any) -> AsyncMemory:
    """An AsyncMemory on path: heapmem.open's arguments, and workers (how
    many connections, and verbs at once; default 4)."""
    return AsyncMemory(path, **kwargs)
