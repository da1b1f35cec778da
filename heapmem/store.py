"""The store: Memory, one SQLite file holding memories, their FTS5 index,
the recall log, feedback events and learned links.  See heapmem.open().

Owns: the store's connection and its lock, every transaction (none is ever
left open), and the verbs a user reaches for (add, add_many, get, update,
list, recall, feedback, mark_used, mark_ignored, forget, links, stats, check,
tune, set_config).  What is about the store rather than its memories lives in
the objects a Memory holds, each owning what it touches: mem.log (the recall
and event logs, read: heapmem.log), mem.pool (the pooled layer's settings:
heapmem.learning.pool), mem.priors (merged priors: heapmem.learning.priors),
mem.vectors (the embedder and the vector index: heapmem.vectors); check()'s
replay is heapmem.integrity's, a memory made ready for the core heapmem.adding's,
opening the file heapmem.db.connect's.  Other modules reach the file only
through Memory's public methods; the SQL it runs is in heapmem.db.sql, the
schema and meta keys in heapmem.db.schema.
"""
from __future__ import annotations

import builtins
import json
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Iterable, Iterator, Mapping

import apsw

from . import adding, answers, integrity
from .config import DEFAULT_KIND, ScoringConfig
from .db import connect, native, schema, sql
from .db.sql import RECALL_SQL
from .errors import (
    AutoTuneWarning,
    HeapmemError,
)
from .guard import c_sentence, from_file, guarded, locked
from .learning import feedback, tune
from .learning import links as learning
from .learning.pool import Pool
from .learning.priors import Priors
from .learning.tune import AutoTune
from .log import Log
from .results import (
    CheckReport,
    Feedback,
    Item,
    LinkRow,
    NamespaceStats,
    Recall,
    Stats,
    TuneReport,
    item,
    log_params,
    recalled,
    recalled_across,
)
from .validate import (
    MAX_K,
    MAX_TEXT_BYTES,
    POOLED,
    Timestamp,
    check_answer,
    check_filters,
    check_ids,
    check_name,
    check_namespace,
    check_namespaces,
    seconds,
)
from .vectors import Vectors, is_builtin

__all__ = ["Memory", "open", "RECALL_SQL", "MAX_K", "MAX_TEXT_BYTES", "POOLED"]

#: update()'s "leave this field as it is".
_KEEP: Any = object()


class _Default:
    """open()'s embedder when none is named: potion-base-8M, the embedder the
    library carries, unless the store holds another embedder's vectors."""

    def __repr__(self) -> str:
        return "heapmem.DEFAULT_EMBEDDER"


DEFAULT_EMBEDDER: Any = _Default()


class Memory:
    """A heapmem store: use heapmem.open() to make one.  A context manager.

    Besides its verbs it holds mem.log (the recall and event logs), mem.pool
    (how the pooled layer is built), mem.priors (the links-only priors merged
    into it) and mem.vectors (its embedder and vector index)."""

    _door = ""  # a verb's error sentence names it as it is: "add: ..."
    auto_tune: AutoTune
    log: Log
    pool: Pool
    priors: Priors
    vectors: Vectors

    def __init__(self, path: str, *, clock: Callable[[], Timestamp] = time.time,
                 config: ScoringConfig | None = None, readonly: bool = False,
                 embedder: Callable[[list[str]], Any] | None = DEFAULT_EMBEDDER,
                 reembed: bool = False,
                 durable: bool = False, verify: bool = False, auth_token: str | None = None,
                 database: str | None = None, auto_tune: bool = True, vfs: str | None = None):
        path = connect.check_path(path)
        if vfs is not None and not isinstance(vfs, str):
            raise TypeError(f"vfs must be the name of a SQLite VFS (a string), got "
                            f"{type(vfs).__name__}")
        self.vfs = vfs
        if not isinstance(auto_tune, bool):
            raise TypeError(f"auto_tune must be True or False, got {auto_tune!r}")
        if not callable(clock):
            raise TypeError("clock must be a callable returning unix seconds or a datetime")
        if config is not None and not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        self.path = path
        self.readonly = bool(readonly)
        self.durable = bool(durable)
        self.verify = bool(verify)
        self.config = config or ScoringConfig()
        self._clock = clock
        default = embedder is DEFAULT_EMBEDDER
        if default:
            embedder = None  # decided once the file is open (heapmem.vectors)
        if embedder is not None and not callable(embedder):
            raise TypeError("embedder must be a callable from a list of texts to a 2-D array")
        self._links_gen = 0  # bumped by every write of this connection to links
        #: reads what the core's write functions answer (a server's, checked)
        self._answers = answers.Reader(path)
        # a file, or a libSQL server (chosen once, by db.connect)
        self._file = connect.open_store(
            path, readonly=self.readonly, durable=self.durable, verify=self.verify,
            auth_token=auth_token, database=database, vfs=vfs,
            embedder=None if is_builtin(embedder) else embedder,
            rebuild_pool=learning.rebuild_pool)
        self._lock, self._remote = self._file.lock, self._file.remote
        try:
            if config is None:
                self.config = tune.saved_config(self.connection, path) or self.config
            self.auto_tune = AutoTune(self, self._lock, enabled=auto_tune and config is None)
            self.pool = Pool(self, self._lock, remote=self._remote)
            self.log = Log(self, self._lock)
            self.priors = Priors(self, self._lock, lambda: self._links_gen)
            self.vectors = Vectors(self, self._lock, embedder, default=default,
                                   reembed=reembed, remote=self._remote)
        except BaseException:
            self._file.close()
            raise

    # -- connection and transactions -------------------------------------------

    def _write(self) -> ContextManager[schema.Connection]:
        """One write transaction, never left open (db.connect.Handle.write)."""
        return self._file.write()

    @contextmanager
    def transaction(self) -> Iterator[schema.Connection]:
        """A write transaction on the store's connection, for code that writes
        rows heapmem's own verbs do not (heapmem.io.transfer's import): all or
        nothing, holding the store's lock.  Learned links cached for recall are
        dropped afterwards, as the transaction may have changed them."""
        try:
            with self._write() as c:
                yield c
        finally:
            self._links_gen += 1

    def snapshot(self) -> ContextManager[schema.Connection]:
        """A read transaction: one consistent view of the file while other
        processes keep writing, holding the store's lock."""
        return self._file.snapshot()

    @guarded
    @locked
    def close(self) -> None:
        """Close the store (runs PRAGMA optimize first).  Safe to call twice.
        An auto-tune under way in steps (see auto_tune.finish) ends first, so
        that a connection that judged the point's recall and will judge no
        more (one opened per request) does not leave it to later feedback."""
        if self._file.closed:
            return
        try:
            if not self.readonly and not self._remote and self.auto_tune.enabled and \
                    schema.autotune_pending(self.connection) is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", AutoTuneWarning)  # (no one to tell)
                    self.auto_tune.finish()
        except (apsw.Error, HeapmemError):
            pass
        self._file.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def connection(self) -> schema.Connection:
        """The underlying apsw connection, with the heap_* functions loaded (on a
        libSQL server, heapmem.remote's connection, with the same methods)."""
        return self._file.connection

    def now(self, now: Timestamp | None = None) -> float:
        """now as unix seconds, or the store's clock() when now is None."""
        if now is None:
            return seconds(self._clock(), "clock()")
        return seconds(now, "now")

    # -- facts ---------------------------------------------------------------------

    @property
    @guarded
    @locked
    def schema_version(self) -> int:
        return schema.user_version(self.connection)

    @property
    @guarded
    @locked
    def count(self) -> int:
        """Number of memories in all namespaces."""
        return self.connection.execute(sql.COUNT_MEMORIES).fetchall()[0][0]

    @property
    @guarded
    @locked
    def namespaces(self) -> list[str]:
        return [r[0] for r in self.connection.execute(sql.NAMESPACES)]

    # -- adding ------------------------------------------------------------------

    @guarded
    def add(self, text: str, *, kind: str = DEFAULT_KIND, source: str | None = None,
            id: str | None = None, namespace: str = "default",
            created_at: Timestamp | None = None, importance: float | None = None,
            key: str | None = None, metadata: Mapping[str, Any] | None = None,
            copy: bool = False, thread: str | None = None, turn: int | None = None) -> Item:
        """Store one memory and return it (with its id).

        kind sets the default importance (instruction 1.5, preference 1.3,
        summary 1.2, fact 1.0, note 1.0, episode 0.8, tool_result 0.6, other
        kinds 1.0); importance, if given, must lie in (0, 10].  A memory with a
        key supersedes older memories of the namespace with the same key.
        Adding, without an id, a text the namespace holds already (with the
        same key) stores nothing and returns that memory, as it is;
        copy=True stores a second one.  thread names the conversation (a chat,
        a session) this memory is a turn of, and turn its place there (a whole
        number; without one, the thread's next turn): recall then lifts a
        memory whose neighbours in the thread match the question, and brings
        in the neighbours of its best matches (ScoringConfig.w_thread).  A
        thread's turn is never taken for an earlier memory of the same text.
        Bad input raises ValueError/TypeError;
        a duplicate id raises DuplicateIdError.  Nothing is written on error.
        """
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be True or False, got {type(copy).__name__}")
        row = adding.prepare(self.now, text, kind=kind, source=source, id=id,
                             namespace=namespace, created_at=created_at, importance=importance,
                             key=key, metadata=metadata, thread=thread, turn=turn, core=True)
        with self._write() as c:
            return adding.add(c, row, copy, self._answers, self.vectors)

    @guarded
    def add_many(self, items: Iterable[Mapping[str, Any]], *, copy: bool = False) -> list[Item]:
        """Store many memories in one transaction: all or none.  Each item is a
        dict with add()'s arguments ("text" required); one Item comes back for
        each, in order.  As add(), an item without an id whose text (and key)
        its namespace holds, or an earlier item of the batch holds, is that
        memory unless copy=True."""
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be True or False, got {type(copy).__name__}")
        rows = adding.prepare_many(self.now, items)
        if not rows:
            return []
        with self._write() as c:
            return adding.insert(c, rows, copy, self.vectors)

    @guarded
    @locked
    def get(self, id: str) -> Item | None:
        """The memory with this id, or None."""
        check_name(id, "id")
        rows = self.connection.execute(sql.GET_MEMORY, {"id": id}).fetchall()
        return item(rows[0]) if rows else None

    @guarded
    def update(self, id: str, *, text: Any = _KEEP, kind: Any = _KEEP, source: Any = _KEEP,
               key: Any = _KEEP, importance: Any = _KEEP, metadata: Any = _KEEP) -> Item:
        """Change a memory in place and return it.  Only the fields given
        change (source=None, key=None or metadata=None clear them; importance
        None goes back to the kind's default).  Its id, namespace, creation
        time, thread and turn, recall log and what it taught the links stay.  Its shape
        features, FTS index entry, namespace statistics and (with an embedder)
        its vector follow the new text in the same transaction.  Unknown id:
        ValueError; bad values: ValueError/TypeError; nothing is written."""
        check_name(id, "id")
        changes = {"text": text, "kind": kind, "source": source, "key": key,
                   "importance": importance, "metadata": metadata}
        with self._write() as c:
            return adding.update(c, id, {k: v for k, v in changes.items() if v is not _KEEP},
                                 self.now, self.vectors)

    @guarded
    @locked
    def list(self, namespace: str = "default", *, limit: int | None = None,
             offset: int = 0) -> list[Item]:
        """The namespace's memories, newest first (by creation time): at most
        limit of them (all when None), after skipping offset."""
        namespace = check_namespace(namespace)
        for name, v in (("limit", limit), ("offset", offset)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
            if v is not None and not 0 <= v < 1 << 63:
                raise ValueError(f"{name} must be an integer >= 0 and below 2**63, got {v!r}")
        return [item(r) for r in self.connection.execute(sql.LIST_MEMORIES, {
            "namespace": namespace, "limit": -1 if limit is None else limit, "offset": offset})]

    @guarded
    @locked
    def stats(self) -> Stats:
        """What the store holds: memories, recalls, judgements and learned
        links, in all and per namespace."""
        with self.snapshot() as c:
            per_ns = c.execute(sql.STATS_BY_NAMESPACE).fetchall()
            recalls = dict(c.execute(sql.RECALLS_BY_NAMESPACE).fetchall())
            ev = {ns: (u, t) for ns, u, t in c.execute(sql.EVENTS_BY_NAMESPACE)}
            nlinks = len(learning.pooled_rows(c))
            nrows = c.execute(sql.COUNT_LINKS).fetchall()[0][0] + nlinks - \
                c.execute(sql.COUNT_POOLED_LINKS).fetchall()[0][0]
            prior = schema.prior(c)
            version = schema.user_version(c)
            in_place, reader = schema.erases_in_place(c), schema.oldest_reader(c)
        by_ns = tuple(NamespaceStats(namespace=ns, memories=n, recalls=recalls.get(ns, 0),
                                     events=ev.get(ns, (0, 0))[1], last_added=last,
                                     last_used=lu)
                      for ns, n, last, lu in per_ns)
        return Stats(schema=version, memories=sum(s.memories for s in by_ns),
                     recalls=sum(recalls.values()), events=sum(t for _, t in ev.values()),
                     used=sum(u for u, _ in ev.values()), pooled_features=nlinks, link_rows=nrows,
                     prior_links=len(prior), by_namespace=by_ns, erases_in_place=in_place,
                     oldest_reader=reader)

    # -- recall --------------------------------------------------------------------

    @guarded
    @locked
    def recall(self, query: str, *, k: int = 5,
               namespace: str | builtins.list[str] | tuple[str, ...] = "default",
               now: Timestamp | None = None, config: ScoringConfig | None = None,
               track: bool = True, kinds: str | Iterable[str] | None = None,
               since: Timestamp | None = None, until: Timestamp | None = None) -> Recall:
        """The k memories of the namespace most worth putting in the prompt for
        this query.

        Candidates are the FTS5 BM25 top `config.candidates` for the query's
        terms (stop words dropped; the query is always treated as text, never
        as FTS5 syntax); they are re-ranked by relevance x recency x importance
        x learned usefulness x rules in C.  A query with no searchable term
        ("" or only stop words) returns an empty Recall without scanning.
        track=True records the recall so feedback() can refer to it by
        recall_id; track=False records nothing.  A recall that showed a
        memory another connection forgot meanwhile (after this recall read
        it) comes back untracked (recall_id None): the log never holds a
        forgotten id, nor the query that found it.  kinds (a kind or a list of
        them), since and until (memories created at or after since, and before
        until) filter inside the candidate searches: the BM25 and vector top
        N are the top N of the memories they let through.  A list of
        namespaces ranks across them on one scale (_recall_across).
        """
        filters = check_filters(kinds, since, until)
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"k must be an integer, got {type(k).__name__}")
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be from 1 to {MAX_K}, got {k}")
        spaces = None if isinstance(namespace, str) else check_namespaces(namespace)
        namespace = check_namespace(namespace) if spaces is None else spaces[0]
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        t = self.now(now)
        if "\x00" in query:
            query = query.replace("\x00", " ")
        try:
            query.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("query must be valid UTF-8 (it holds a lone surrogate)") from None
        qt = native.qtype(query)
        match = native.match(query, namespace)
        c = self.connection
        if self.vectors.embedder is None and config.lexical_weight < 1:
            # opened with embedder=None: lexical recall, even where the library
            # could embed the question itself
            config = config.replace(lexical_weight=1.0)
        hybrid = self.vectors.embedder is not None and config.lexical_weight < 1 and query.strip()
        if match is None and not hybrid:
            return Recall(query, spaces or namespace, qt, [], None, config, b"", parts=None
                          if spaces is None else {})
        # one statement, one snapshot, on a file or on a server (heap_recall in
        # C, which embeds the question itself for the library's own embedder)
        # tracked: heap_recall explores (config.explore) as for a recall it logs
        params = {"question": query, "namespace": namespace, "now": t, "k": k,
                  "config": config.to_sql(), "tracked": int(track and not self.readonly),
                  "qvec": self.vectors.embed([query])[0].tobytes()
                  if hybrid and not self.vectors.builtin else None, **filters}
        if spaces is not None:
            return self._recall_across(query, qt, spaces, params, config, track)
        rows = c.execute(sql.RECALL, params).fetchall()
        with from_file("recall: reading what the memories show"):
            results, rest, links = recalled(rows)
        recall_id = self._log(query, qt, t, {namespace: (results, rest)}, track)[namespace]
        return Recall(query, namespace, qt, results, recall_id, config, links, self._priors_in())

    def _priors_in(self) -> frozenset[str]:
        """The features a merged prior adds to, for explain() (on a server,
        none: that would be one more round trip a recall)."""
        return frozenset() if self._remote else self.priors.features

    def _log(self, query: str, qt: str, now: float,
             shown: dict[str, tuple[builtins.list[Any], builtins.list[float]]],
             track: bool) -> dict[str, int | None]:
        """Each namespace's part of a recall logged as a recall of its own
        (track), all in one write: its recall_id, or None (untracked, nothing
        shown, or it showed a memory forgotten since: LOG_RECALL writes no row)."""
        ids: dict[str, int | None] = dict.fromkeys(shown)
        if track and not self.readonly and any(results for results, _ in shown.values()):
            with self._write() as w:
                for ns, (results, rest) in shown.items():
                    if results:
                        logged = w.execute(sql.LOG_RECALL, log_params(
                            ns, query, qt, now, results, rest)).fetchall()
                        ids[ns] = logged[0][0] if logged else None
        return ids

    def _recall_across(self, query: str, qt: str, spaces: tuple[str, ...],
                       params: dict[str, Any], config: ScoringConfig, track: bool) -> Recall:
        """recall() across namespaces: one ranking in C, all of them on one
        scale (BM25 over the best BM25 among them); the Recall's parts hold
        each namespace's results and recall_id (a tracked part is logged as a
        recall of its namespace), and each Result's namespace says whose it
        is."""
        params = {**params, "namespace": None, "namespaces": json.dumps(spaces)}
        rows = self.connection.execute(sql.RECALL_ACROSS, params).fetchall()
        with from_file("recall: reading what the memories show"):
            read = recalled_across(rows)
        priors_in = self._priors_in()
        ids = self._log(query, qt, params["now"],
                        {ns: (results, rest) for ns, (results, rest, _) in read.items()}, track)
        parts = {ns: Recall(query, ns, qt, results, ids[ns], config, links, priors_in)
                 for ns, (results, _, links) in read.items()}
        order = {ns: iter(part) for ns, part in parts.items()}
        ranked = [next(order[row[0]]) for row in rows]
        return Recall(query, spaces, qt, ranked, None, config, b"", priors_in, parts=parts)

    def recall_sql(self, query: str, *, k: int = 5, namespace: str = "default",
                   now: Timestamp | None = None, config: ScoringConfig | None = None,
                   kinds: str | Iterable[str] | None = None, since: Timestamp | None = None,
                   until: Timestamp | None = None) -> tuple[str, dict[str, Any]]:
        """The one SQL statement that ranks like recall(), and its parameters,
        for any SQLite client with the library loaded: run it as
        `conn.execute(sql, params)`.  It returns id, text, score (heap_recall,
        untracked; add more of heap_recall's columns as you like).  It is the
        lexical recall: on a store opened with an embedder, recall() also
        passes the question's vector (heap_recall's qvec).  kinds, since and
        until filter as recall()'s do."""
        config = config or self.config
        return sql.RECALL_SQL, {"question": query, "namespace": check_namespace(namespace),
                                "now": self.now(now), "k": k, "config": config.to_sql(),
                                **check_filters(kinds, since, until)}


    # -- feedback ----------------------------------------------------------------

    def _judge(self, recall_id: Any, used: Any, ignored: Any, rest_ignored: bool,
               now: Timestamp | None, answer: str | None = None,
               namespace: str | None = None) -> Feedback:
        """One feedback, run by heapmem.learning.feedback (heap_feedback,
        heap_answer); feedback, mark_used and mark_ignored call it."""
        return feedback.judge(self, self._answers, recall_id, used, ignored, rest_ignored, now,
                              answer, namespace, remote=self._remote)

    @guarded
    def feedback(self, used: Iterable[str] = (), *, recall_id: int | None = None,
                 ignored: Iterable[str] | None = None, answer: str | None = None,
                 now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Tell heapmem which memories of a recall the answer used.

        Every other memory the recall showed counts as ignored, unless
        `ignored` lists the ignored ones explicitly (the rest then stay
        unjudged).  A used memory adds one success to the link of each of its
        active features (shape features, crossed with the question type), in
        its namespace and in the pooled layer; an ignored one adds one
        failure.  (With model=0, the reference design's learner, a use is
        instead split among the features in proportion to their current
        strength.)  Each shown memory can be judged once: judging it again
        raises ValueError.  Without recall_id, the newest recall that showed
        all the given ids is meant.  Unknown ids or recall, ids the recall did
        not show, or a bare string for `used`: ValueError/TypeError, and
        nothing is written.

        answer="...": heapmem judges from the answer text itself, against
        exactly the memories the recall showed (recall_id required).  A shown
        memory that carries the answer's distinctive content (its words, by
        their weight among the shown memories, numbers and names included, and
        its date matched against when the memory was stated) counts as used;
        those that carry none of it are ignored; the rest stay unjudged.  The
        question's own words never count.  When the answer singles out no
        memory (no overlap, or a tie) nothing is judged and nothing written.
        The result's `judgements` say, for each shown memory, what was decided
        and why.  Giving answer= with used= or ignored= is a ValueError.

        namespace="...": the recall must be one of that namespace's (checked
        in the same transaction as the write; a door serving one tenant
        passes it), and without recall_id only its recalls are looked at:
        another namespace's recall_id is unknown here, and nothing is written.

        Auto-tune (open()'s auto_tune, on by default unless config= was given):
        the feedback that brings the store's judged recalls to 30, 60, 120, ...
        runs tune() after it, in the same transaction (the C core's
        heap_feedback does both), and the result's `auto_tune` is its report
        (None when it did not run).  If tune fails, the feedback stays saved:
        an AutoTuneWarning says so and the report's reason says why.
        mark_used and mark_ignored do the same.
        """
        if answer is not None:
            answer = check_answer(answer)
            if ignored is not None or not isinstance(used, (list, tuple, set)) or used:
                raise ValueError("give either answer=... or used=/ignored=, not both")
            if recall_id is None:
                raise ValueError("feedback(answer=...) needs the recall_id of the recall the "
                                 "answer was written from")
            return self._judge(recall_id, [], [], False, now, answer, namespace)
        return self._judge(recall_id, used, ignored, ignored is None, now, None, namespace)

    @guarded
    def mark_used(self, ids: Iterable[str], *, recall_id: int | None = None,
                  now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Judge only these memories of a recall as used (others stay
        unjudged); namespace as feedback() takes it."""
        return self._judge(recall_id, ids, [], False, now, None, namespace)

    @guarded
    def mark_ignored(self, ids: Iterable[str], *, recall_id: int | None = None,
                     now: Timestamp | None = None, namespace: str | None = None) -> Feedback:
        """Judge only these memories of a recall as ignored."""
        return self._judge(recall_id, [], ids, False, now, None, namespace)

    # -- what it learned -----------------------------------------------------------

    @guarded
    @locked
    def links(self, namespace: str = POOLED, *,
              config: ScoringConfig | None = None) -> builtins.list[LinkRow]:
        """The learned links as `namespace` sees them ('*': the pooled layer),
        strongest first: feature, strength (posterior mean), n (events), and
        the alpha and beta behind the strength."""
        if config is None:
            config = self.config
        elif not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        if namespace != POOLED:
            namespace = check_namespace(namespace)
        with self.snapshot() as c:
            pooled = learning.pooled_rows(c)
            own = {} if namespace == POOLED else {
                r[0]: r[1:] for r in c.execute(sql.OWN_LINKS, {"namespace": namespace})}
        return learning.as_seen(pooled, own, namespace, config)

    # -- forgetting ----------------------------------------------------------------

    @guarded
    def forget(self, ids: Iterable[str] | None = None, *, namespace: str | None = None) -> int:
        """Erase memories: the given ids, or a whole namespace.  Their text
        leaves the table and the FTS index at once (FTS5's secure-delete takes
        their terms out of the index pages that hold them, and PRAGMA
        secure_delete overwrites freed pages; see set_portable for old SQLite
        readers), and recall log entries that showed them (or, for a namespace,
        all its recalls) are dropped with their query text.  What they taught
        the learned links stays: links hold feature statistics only, never text
        or ids.  Unknown ids raise ValueError and nothing is erased.  Returns the
        number of memories erased."""
        if (ids is None) == (namespace is None):
            raise ValueError("forget needs either ids or namespace=..., not both")
        if namespace is not None:
            namespace = check_namespace(namespace)
        else:
            id_list = check_ids(ids, "ids")
            for i in id_list:
                check_name(i, "id")
            if not id_list:
                return 0
        with self._write() as c:
            # the C core erases (heap_forget, csrc/store.c): the memories, the
            # recalls that showed them, their FTS terms (in place with FTS5's
            # secure-delete, else by merging the index), and it raises the
            # high-water marks so that no id is given out again
            try:
                if namespace is not None:
                    rows = c.execute(sql.FORGET_NAMESPACE, {"namespace": namespace}).fetchall()
                else:
                    rows = c.execute(sql.FORGET, {"ids": json.dumps(id_list)}).fetchall()
            except apsw.SQLError as e:  # the C core's sentence: a bad argument
                raise ValueError(c_sentence(e)) from None
            n = self._answers.count(rows, "heap_forget")
        # the WAL still holds the old pages: copy the erased ones into the file
        self._file.checkpoint()
        return n

    def set_portable(self, portable: bool = True) -> None:
        """Whether the file must stay readable by SQLite 3.37 to 3.41.

        By default forget() and update() erase old text from the FTS index in
        place (FTS5's secure-delete): a forget costs what the memory costs.
        After the first such erasure, SQLite before 3.42 (2023-05) can no
        longer query the index (Debian 12's sqlite3 is 3.40).
        set_portable(True) turns secure-delete off and, if needed, rebuilds
        the index in the old format, once: from then on each forget merges
        the whole index instead (a quarter of a second at 100k memories), and
        old readers keep working.  set_portable(False) goes back.
        stats().oldest_reader says which SQLite the file needs now."""
        if not isinstance(portable, bool):
            raise TypeError("portable must be True or False")
        with self._write() as c:
            schema.set_portable(c, portable)

    # -- tuning --------------------------------------------------------------------

    @guarded
    def tune(self, *, deploy: bool = True, seed: int = 0) -> TuneReport:
        """Replay the logged recalls under other usefulness weights with
        grouped cross-validation, and deploy the best one only if it is
        significantly better than the weight in force (saved in the store,
        used by every later open without an explicit config).  Returns what it
        measured and why it did or did not deploy.  Feedback runs it by itself
        at 30, 60, 120, ... judged recalls unless auto-tune is off (open()'s
        auto_tune).  It is the C core's heap_tune (`SELECT heap_tune()` from
        any SQLite client does the same).  On a read-only store deploy=True
        raises ReadOnlyError; deploy=False measures only."""
        with self._lock:  # one view of the logs while it replays them
            return tune.tune(self, deploy=deploy, seed=seed)

    @guarded
    def set_config(self, config: ScoringConfig | None = None, *, save: bool = False,
                   **changes: Any) -> ScoringConfig:
        """Change the config recall and feedback use: a whole ScoringConfig,
        or some of its fields by name (set_config(w_usefulness=0.5)).
        save=True also keeps it in the store, for every later open without an
        explicit config (as tune() does); auto-tune may then change its
        w_usefulness at its next point (open with auto_tune=False, or pass
        config=, to keep it).  Returns the config now in force.
        Unknown fields or bad values raise ValueError/TypeError and change
        nothing."""
        if config is not None and not isinstance(config, ScoringConfig):
            raise TypeError("config must be a heapmem.ScoringConfig")
        new = (config or self.config).replace(**changes) if changes else (config or self.config)
        if save:
            with self._write() as c:
                c.execute(sql.SAVE_CONFIG, {"config": new.to_sql()})
        self.config = new
        return new

    # -- checking ------------------------------------------------------------------

    @locked
    def check(self) -> CheckReport:
        """Check the store: SQLite's integrity_check, the schema against
        heapmem's own, the FTS index against the memories table, each
        namespace's BM25 statistics (and its terms') against its memories, the
        vector index, and the links against a replay of the event log
        (heapmem.integrity).  Damage is reported, never raised: a check that
        cannot finish says where it stopped."""
        return integrity.check(self.connection, readonly=self.readonly, pool=self.pool)


def open(path: str, *, clock: Callable[[], Timestamp] = time.time,
         config: ScoringConfig | None = None, readonly: bool = False,
         embedder: Callable[[list[str]], Any] | None = DEFAULT_EMBEDDER, reembed: bool = False,
         durable: bool = False, verify: bool = False, auth_token: str | None = None,
         database: str | None = None, auto_tune: bool = True, vfs: str | None = None
         ) -> Memory:
    """Open (or create) the heapmem store at path.

    The connection runs in WAL mode with a busy timeout, and the schema is
    created or migrated in one transaction.  A SQLite file that is not a
    heapmem store raises NotAStoreError, one written by a newer heapmem raises
    SchemaVersionError; neither is modified.  clock() gives the time (unix
    seconds or a datetime) when a call has no now=; a fixed clock makes every
    output reproducible.  readonly=True opens without writing anything: recall
    works (nothing is tracked), writes raise ReadOnlyError.

    Recall is hybrid by default: BM25 candidates and the vector top N of the
    namespace, ranked together.  The vectors come from potion-base-8M
    (embedders.Potion: MinishLab, MIT licence, English), which the C library
    carries and runs inside SQL (about 4 microseconds a text), so every door
    (Python, the sqlite3 shell, a server) embeds alike; they live in the file
    at int8 (260 bytes a memory).  A store holding another embedder's vectors
    opens lexical unless that embedder is passed.  embedder=None: recall is
    lexical (the store's vectors, if any, stay and keep following their
    texts); a new store opened so holds no vectors.  Another embedder
    (embedders.E5Small: multilingual; MiniLM) is a callable from a list of
    texts to a 2-D float array, with a .name naming its model; its vectors
    are float32.  The model's name and dimension are recorded, and opening
    with another embedder raises HeapmemError unless reembed=True, which
    embeds every memory again.  Memories added without an embedder are
    embedded when the store is next opened with one.

    A file from elsewhere is checked before anything in it runs: its schema
    must be exactly heapmem's for its version (an extra trigger or view, or
    one of heapmem's with other SQL, raises UnsafeStoreError), and the
    connection trusts nothing in the file (trusted_schema off, DEFENSIVE).
    verify=True also runs SQLite's quick_check (CorruptStoreError).

    Commits survive the process dying at any point; durable=True also makes
    them survive an OS crash or power cut (synchronous=FULL), at the cost of
    a disk sync per commit.

    path may also be a libSQL server (sqld): "http://host:port", https://
    or libsql:// (heapmem.remote), with auth_token the JWT it checks.  The
    same verbs run there as SQL; the server must have loaded this heapmem's
    library (`heapmem sqld --primary DIR` starts one).  A replica serves
    recall and forwards writes to its primary; a connection reads its own
    writes through a replica too (it waits, briefly, for the replica to have
    them).

    database names one database of a server started with namespaces (sqld
    --enable-namespaces, `heapmem sqld --primary DIR --namespaces`): one
    database per tenant, each its own store, created first with
    heapmem.remote.sqld.create_database().  It is a lowercase DNS label ("acme",
    "tenant-42"); a database that does not exist raises
    heapmem.remote.DatabaseNotFoundError, database= on a server without
    namespaces ServerError, and nothing is written.  namespace= (of add,
    recall, ...) is another thing: tenants inside one store, which share its
    file, its write lock and its pooled layer of learned links; databases
    share nothing but the server (learning moves between them as links:
    heapmem.io.transfer.export_links and import_file).

    auto_tune (True or False, else TypeError before anything is opened):
    with True, the default, feedback runs tune() by itself once the store's
    judged recalls (recalls in which feedback marked a memory used) reach 30,
    then 60, 120, 240, ... (each point once per store, whichever process
    gets there: the point reached is kept in the file), seeded, on the newest
    2,000 judged recalls; Feedback.auto_tune is its report.  It deploys a
    usefulness weight only where the store's own feedback says it ranks
    better (Memory.tune()).  It does not run with auto_tune=False, nor when
    config= is given (the caller chose the weights; set_config(save=True)
    and tune() still work).  On a libSQL server it runs there, inside the
    feedback's own request (the server's heapmem library).

    vfs: a SQLite VFS registered in this process (an apsw.VFS) to open the file through (None:
    the default; tests/_faults.py's fails chosen I/O calls); unknown: HeapmemError."""
    return Memory(path, clock=clock, config=config, readonly=readonly, embedder=embedder,
                  reembed=reembed, durable=durable, verify=verify, auth_token=auth_token,
                  database=database, auto_tune=auto_tune, vfs=vfs)
