"""Adapters for the two reference systems the LoCoMo harness compares against.

Both are driven through their public Python API only (no code of theirs lives here):

- heapdb-memory 0.1.0 (``heapdb_memory.Memory``): the reference design heapmem follows.
- veramem 0.1.0 (``veramem.Memory``): the same idea with a gated, learned ranker.

Every system, heapmem's own adapter in ``locomo.py`` included, exposes the same small
interface to the harness:

``System``
    ``name``, ``version``, ``configs`` (name -> whatever the system takes as a scoring
    configuration; always ``"relevance"`` and ``"defaults"``), ``feedback_configs`` (the
    configurations the feedback conditions run under), optionally ``same_ranking``
    (config -> another config it ranks exactly like before any feedback, so its
    no-feedback row is not re-run), ``build_base(memories, workdir)``
    once, then ``fork(base, workdir, tag)`` for every store that needs all memories and no
    feedback yet.
``Store``
    ``recall(query, k=, namespace=, now=, config=, track=) -> (ids, token)``: turn ids,
    best first; ``feedback(token, used, now=)``: the turns of that recall the agent used
    (every other one shown counts as ignored); ``prepare_eval(train_namespaces, config)``:
    called once after a feedback phase, before the held-out evaluation (returns a dict
    for the row notes); ``close()``.

``memories`` are dicts with ``text``, ``kind``, ``source``, ``id``, ``namespace`` and
``created_at`` (unix seconds), in conversation order.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
from typing import Any, Iterable, Iterator, Sequence

import perf  # bench/perf.py: removing a store's files

PEERS = ("heapdb-memory", "veramem")
_MODULE = {"heapdb-memory": "heapdb_memory", "veramem": "veramem"}


def unavailable(name: str) -> str | None:
    """None if the peer's package can be imported here, else a one-line reason."""
    mod = _MODULE[name]
    if importlib.util.find_spec(mod) is None:
        return f"package {name!r} (module {mod}) is not importable by this interpreter"
    return None


def make(name: str) -> "HeapdbMemorySystem | VeramemSystem":
    if name == "heapdb-memory":
        return HeapdbMemorySystem()
    if name == "veramem":
        return VeramemSystem()
    raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------------------------------
# heapdb-memory
# ---------------------------------------------------------------------------------------

class HeapdbMemorySystem:
    """heapdb-memory keeps its store in process memory. Building it takes under a second
    for all ten conversations, so every fork is simply a fresh build."""

    name = "heapdb-memory"

    def __init__(self) -> None:
        import heapdb_memory as hm

        self._hm = hm
        self.version = _version("heapdb-memory")
        sc = hm.ScoringConfig
        self.configs: dict[str, Any] = {
            "relevance": sc(w_recency=0.0, w_importance=0.0, w_usefulness=0.0),
            "defaults": sc(),
            # the setting its own LoCoMo write-up recommends for archive-style recall
            "no-recency": sc(w_recency=0.0),
        }
        self.feedback_configs = ["defaults", "no-recency"]
        self.clock = 0.0

    def build_base(self, memories: Sequence[dict[str, Any]], workdir: str, clock: float) -> Any:
        self.clock = float(clock)
        return [dict(m) for m in memories]

    def fork(self, base: Any, workdir: str, tag: str) -> "HeapdbMemoryStore":
        clock = self.clock
        mem = self._hm.Memory(None, clock=lambda: clock)
        mem.add_many(base)
        return HeapdbMemoryStore(mem)


class HeapdbMemoryStore:
    def __init__(self, mem: Any) -> None:
        self.mem = mem

    def recall(self, query: str, *, k: int, namespace: str, now: float, config: Any,
               track: bool) -> tuple[list[str], Any]:
        res = self.mem.recall(query, k=k, namespace=namespace, now=now, config=config,
                              track=track, explain=False)
        return list(res.ids), res.recall_id

    def feedback(self, token: Any, used: Sequence[str], *, now: float) -> None:
        self.mem.feedback(used=list(used), recall_id=token, now=now)

    def prepare_eval(self, train_namespaces: Sequence[str], config: str) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.mem = None


# ---------------------------------------------------------------------------------------
# veramem
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def _veramem_clock(t: float) -> Iterator[None]:
    """veramem's search reads the wall clock for a memory's age (a feature of its learned
    ranker). Pin it to the question time so runs are reproducible and ages are those of
    the benchmark, not of the day the benchmark ran."""
    import veramem.retrieval as vr

    saved = vr.now
    vr.now = lambda: t
    try:
        yield
    finally:
        vr.now = saved


class VeramemSystem:
    """veramem without a model (no LLM, its built-in hashing embedder): every turn is
    stored as a raw episode plus one raw fact memory, and search fuses dense, BM25 and
    entity channels over both.

    Ranking modes (``Memory.ranking``): ``none`` is its fused retrieval score alone
    (relevance only), ``contextual`` its default (per-memory outcome utility weighted by
    query similarity), ``ranker`` its learned logistic ranker, deployed only when
    ``train_ranker()`` finds it beats retrieval on held-out feedback (95% bound); without
    a deployed ranker it falls back to ``contextual``. Contextual utility belongs to
    individual memories, so it cannot move a conversation that gave no feedback: the
    feedback conditions therefore run under ``ranker``.
    """

    name = "veramem"

    def __init__(self) -> None:
        import veramem

        self._v = veramem
        self.version = _version("veramem")
        self.configs: dict[str, Any] = {
            "relevance": "none",
            "defaults": "contextual",
            "ranker": "ranker",
        }
        self.feedback_configs = ["ranker"]
        # with no trained ranker, "ranker" falls back to "contextual": the same ranking
        self.same_ranking = {"ranker": "defaults"}

    def _open(self, path: str) -> Any:
        from veramem import Config, Memory
        from veramem.providers import HashEmbedder, NoLLM

        cfg = Config(db_path=path, llm_provider="none", embed_provider="hash")
        return Memory(path, llm=NoLLM(), embedder=HashEmbedder(), config=cfg,
                      ranking="contextual", exploration="none", seed=0, vector_index="exact")

    def build_base(self, memories: Sequence[dict[str, Any]], workdir: str, clock: float) -> Any:
        path = os.path.join(workdir, "veramem-base.db")
        perf.remove_sqlite(path)
        mem = self._open(path)
        to_turn: dict[str, str] = {}     # veramem memory / episode id -> turn id
        fact_of: dict[str, str] = {}     # turn id -> veramem memory id
        try:
            for ns, chunk in _chunks_by_namespace(memories, 256):
                # role "user": the speakers are the people whose memory this is (a role
                # of "assistant" would make veramem store episodes only, no memories)
                msgs = [{"role": "user", "content": m["text"], "timestamp": m["created_at"]}
                        for m in chunk]
                res = mem.add(msgs, user_id=ns, infer=False, timestamp=chunk[0]["created_at"])
                if len(res.episodes) != len(chunk) or len(res.changes) != len(chunk):
                    raise RuntimeError("veramem did not store one episode and one memory per turn")
                for m, ep, ch in zip(chunk, res.episodes, res.changes):
                    to_turn[ep] = m["id"]
                    to_turn[ch.memory_id] = m["id"]
                    fact_of[m["id"]] = ch.memory_id
        finally:
            mem.close()
        return {"path": path, "to_turn": to_turn, "fact_of": fact_of}

    def fork(self, base: Any, workdir: str, tag: str) -> "VeramemStore":
        path = os.path.join(workdir, f"veramem-{tag}.db")
        perf.copy_sqlite(base["path"], path)
        return VeramemStore(self._open(path), path, base["to_turn"], base["fact_of"])


class VeramemStore:
    def __init__(self, mem: Any, path: str, to_turn: dict[str, str],
                 fact_of: dict[str, str]) -> None:
        self.mem, self.path, self.to_turn, self.fact_of = mem, path, to_turn, fact_of

    def _search(self, query: str, k: int, namespace: str, now: float, config: str,
                record: bool) -> Any:
        self.mem.ranking = config
        with _veramem_clock(now):
            return self.mem.search(query, user_id=namespace, limit=k, record=record)

    def recall(self, query: str, *, k: int, namespace: str, now: float, config: str,
               track: bool) -> tuple[list[str], Any]:
        res = self._search(query, k, namespace, now, config, track)
        # veramem lists the hits of a temporal question in date order; the ranking is
        # its score (the hits that make the cut for any smaller limit), so order by it.
        hits = sorted(enumerate(res.hits), key=lambda ih: (-ih[1].score, ih[0]))
        ids: list[str] = []
        for _, h in hits:
            t = self.to_turn.get(h.memory.id)
            if t is not None and t not in ids:
                ids.append(t)
        token = {"trace": res.trace_id, "shown": [h.memory.id for h in res.hits],
                 "query": query, "k": k, "namespace": namespace, "config": config}
        return ids[:k], token

    def feedback(self, token: Any, used: Sequence[str], *, now: float) -> None:
        """Used turns become a +1 outcome citing their memories; the other memories shown
        become a -1 outcome. veramem takes one outcome per trace, so the -1 goes on a
        second recorded search of the same question, run before any of this feedback
        is applied (so it shows the same memories)."""
        shown = [i for i in token["shown"] if i.startswith("mem_")]
        used_set = set(used)
        pos = [i for i in shown if self.to_turn[i] in used_set]
        neg = [i for i in shown if self.to_turn[i] not in used_set]
        if neg:
            again = self._search(token["query"], token["k"], token["namespace"], now,
                                 token["config"], True)
            seen = {h.memory.id for h in again.hits}
            neg = [i for i in neg if i in seen]
            if neg:
                self.mem.feedback(again.trace_id, -1.0, cited=neg)
        if pos:
            # only memories the trace showed can be cited; passing none would make
            # veramem credit its top results instead, so a recall with none is skipped
            self.mem.feedback(token["trace"], 1.0, cited=pos)

    def prepare_eval(self, train_namespaces: Sequence[str], config: str) -> dict[str, Any]:
        if config != "ranker":
            return {}
        rep = self.mem.train_ranker(user_ids=list(train_namespaces))
        return {"ranker_trained": bool(rep.get("trained")),
                "ranker_active": bool(rep.get("active", False)),
                "ranker_examples": int(rep.get("examples", 0))}

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
            self.mem = None
        with contextlib.suppress(OSError):
            perf.remove_sqlite(self.path)


def _chunks_by_namespace(memories: Iterable[dict[str, Any]],
                         size: int) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    chunk: list[dict[str, Any]] = []
    for m in memories:
        if chunk and (m["namespace"] != chunk[0]["namespace"] or len(chunk) >= size):
            yield chunk[0]["namespace"], chunk
            chunk = []
        chunk.append(m)
    if chunk:
        yield chunk[0]["namespace"], chunk
