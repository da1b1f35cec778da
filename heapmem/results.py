"""The values heapmem's verbs return.

Owns: Item (a stored memory), Result and Recall (what recall() ranks),
Feedback, Judgement, LinkRow, CheckReport, Stats and NamespaceStats, LoggedRecall and
Event (the recall and feedback logs as tune() replays them), LearningDay (the
feedback log summed per day, for the report page), TuneReport and
ImportReport; how heap_recall's rows become Results (recalled), a stored
row an Item (item), and a recall's log row (log_params).  Plain data: none of
these touches the store.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .db import native, sql
from .guard import from_file

if TYPE_CHECKING:  # pragma: no cover
    from .config import ScoringConfig


@dataclass(frozen=True)
class Item:
    """One stored memory."""

    id: str
    text: str
    namespace: str
    kind: str
    source: str | None
    key: str | None
    importance: float
    created_at: float
    last_used_at: float | None
    metadata: dict | None
    features: tuple[str, ...]
    #: its place in a conversation: the thread it is a turn of, and the turn
    #: (None and None: a memory of no thread)
    thread: str | None = None
    turn: int | None = None


@dataclass
class Result:
    """One recalled memory with the factors of its score."""

    rank: int
    id: str
    text: str
    score: float
    kind: str
    source: str | None
    key: str | None
    relevance: float
    recency: float
    importance: float
    usefulness: float
    rules: float
    bm25: float
    age_days: float
    superseded: bool
    features: tuple[str, ...]
    created_at: float
    last_used_at: float | None
    metadata: dict | None
    #: hybrid recall: the BM25 and cosine parts of relevance (None otherwise)
    lexical: float | None = None
    cosine: float | None = None
    #: contextual utility (ScoringConfig.w_context): its factor on the score,
    #: and the weighted judgements of this memory behind it (1.0 and 0.0: none)
    context: float = 1.0
    context_n: float = 0.0
    #: exploration (ScoringConfig.explore, tracked recalls only): the factor
    #: its sampled usefulness put on the score (1.0: none)
    explore: float = 1.0
    #: its place in a conversation (Memory.add's thread and turn; None: none)
    thread: str | None = None
    turn: int | None = None
    #: the thread's factor on the score (ScoringConfig.w_thread; 1.0: none),
    #: the neighbour whose relevance lifted it, and that one's turn less its own
    thread_lift: float = 1.0
    thread_from: str | None = None
    thread_offset: int | None = None
    #: the factor for being created in the window of time the question names
    #: (ScoringConfig.w_time; 1.0: none), and that window as explain() shows it
    #: (None: the question names none)
    time_lift: float = 1.0
    time_window: str | None = None
    #: every learned factor on the score together (usefulness's lift x context
    #: x explore), within max_lift: score = relevance^w x recency^w x
    #: importance^w x thread_lift x time_lift x lift x rules
    lift: float = 1.0
    _scored: "Scored" = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    @property
    def namespace(self) -> str:
        """The namespace it was recalled from (in a recall across namespaces,
        its own)."""
        return self._scored.namespace

    def explain(self) -> str:
        """One line saying why this memory got its score: each factor, and the
        strongest learned links behind its usefulness."""
        r = self._scored
        nan = math.nan
        line = native.explain(self.relevance, self.age_days, self.importance, self.superseded,
                               " ".join(self.features), r.qtype, r.links, r.config.cdata,
                               nan if self.lexical is None else self.lexical,
                               nan if self.cosine is None else self.cosine,
                               self.context, self.context_n, self.explore,
                               self.thread_lift, self.thread_from, self.thread_offset or 0,
                               self.time_lift, self.time_window)
        if r.prior_features and r.config.w_usefulness > 0:
            # links a merged prior adds to: their lift is not only this store's
            hit = sorted(set(native.active(" ".join(self.features), r.qtype, self.age_days))
                         & r.prior_features)
            if hit:
                more = f" +{len(hit) - 3}" if len(hit) > 3 else ""
                line += f" (prior in {' '.join(hit[:3])}{more}: see mem.priors.list())"
        return line

    def to_dict(self, fields: Sequence[str] | None = None) -> dict[str, Any]:
        """This result as JSON-ready data: every field (features as a list)
        and "explain", its explain() line; or only the named ones, in that
        order.  What the CLI's --json, the tool doors (MCP, tool calling)
        and the framework adapters give out, so no door builds it again."""
        names = (*_RESULT_NAMES, "explain") if fields is None else fields
        out: dict[str, Any] = {}
        for name in names:
            if name == "explain":
                out[name] = self.explain()
            elif name == "features":
                out[name] = list(self.features)
            elif name in _RESULT_NAMES:
                out[name] = getattr(self, name)
            else:
                raise ValueError(f"a Result has no field {name!r}")
        return out

    def factors(self) -> dict[str, float | None]:
        """What each factor multiplies the score by, as applied: relevance,
        recency and importance to their weights (None: weight 0, off); the
        place's factors, thread and time; the learned ones, usefulness (its
        lift, to its weight and the evidence's exponent), context and
        explore, as the score carries them (together within max_lift: any
        bound is usefulness's share, read off the core's lift, never worked
        out again); and rules.  The values multiply to the score."""
        cfg = self._scored.config
        out: dict[str, float | None] = {}
        for name, w in (("relevance", cfg.w_relevance), ("recency", cfg.w_recency),
                        ("importance", cfg.w_importance)):
            v = getattr(self, name)
            out[name] = None if w == 0 else (v ** w if v > 0 else 0.0)
        out["thread"] = self.thread_lift
        out["time"] = self.time_lift
        share = self.lift / (self.context * self.explore)  # usefulness's, bound and all
        out["usefulness"] = None if cfg.w_usefulness == 0 and abs(share - 1) < 1e-12 else share
        out["context"] = self.context
        out["explore"] = self.explore
        out["rules"] = self.rules
        return out


#: a Result's public fields' names, in order (to_dict)
_RESULT_NAMES = tuple(f.name for f in fields(Result) if not f.name.startswith("_"))

#: RECALL's columns that are a Result's field as they are read (the others are
#: decoded in recalled, or are not a result's: rest, links)
_AS_READ = tuple(c for c in sql.RECALL_COLUMNS
                 if c not in ("superseded", "features", "metadata", "rest", "links"))


def item(r: Sequence[Any]) -> Item:
    """An Item from a row of sql.GET_MEMORY / sql.LIST_MEMORIES (a value that
    does not decode: CorruptStoreError)."""
    with from_file("reading a memory"):
        row = dict(zip(sql.ITEM_COLUMNS, r))
        row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else None
        row["features"] = tuple(row["features"].split())
        return Item(**row)


def recalled(rows: Sequence[Sequence[Any]]) -> tuple[list[Result], list[float], bytes]:
    """The Results of sql.RECALL's rows (heap_recall's columns), each one's
    score without usefulness (what the log keeps for tune()), and the link
    set they were scored with."""
    named = [dict(zip(sql.RECALL_COLUMNS, r)) for r in rows]
    results = [Result(**{c: r[c] for c in _AS_READ}, superseded=bool(r["superseded"]),
                      features=tuple(r["features"].split()),
                      metadata=json.loads(r["metadata"]) if r["metadata"] else None)
               for r in named]
    links = bytes(named[0]["links"]) if named and named[0]["links"] is not None else b""
    return results, [r["rest"] for r in named], links


def recalled_across(rows: Sequence[Sequence[Any]]) -> dict[str, tuple[list[Result],
                                                                      list[float], bytes]]:
    """sql.RECALL_ACROSS's rows, by namespace: as recalled gives them, each
    namespace's in its own rank order (the order across is the rows')."""
    parts: dict[str, list[Sequence[Any]]] = {}
    for row in rows:
        parts.setdefault(row[0], []).append(row[1:])
    return {ns: recalled(part) for ns, part in parts.items()}


def log_params(namespace: str, query: str, qtype: str, created_at: float,
               results: Sequence[Result], rest: Sequence[float]) -> dict[str, Any]:
    """The parameters of sql.LOG_RECALL for these results (rest: each one's
    score without usefulness, as tune() replays it)."""
    return {"namespace": namespace, "query": query, "qtype": qtype, "created_at": created_at,
            "shown": json.dumps([r.id for r in results]),
            "ages": json.dumps([r.age_days for r in results]),
            "features": json.dumps([" ".join(r.features) for r in results]),
            "rest": json.dumps(list(rest))}


@dataclass(frozen=True)
class Scored:
    """What one namespace's results were scored with, as explain() and
    factors() read it.  It holds no result: a Result points to it, never to
    its Recall, so a recall and its results form no reference cycle and are
    freed when dropped, not by the cyclic garbage collector (a recall a turn
    would otherwise leave one cycle of a dozen objects behind)."""

    namespace: str
    qtype: str
    config: ScoringConfig
    links: bytes
    prior_features: frozenset[str]


class Recall(Sequence[Result]):
    """The ranked results of one recall; indexable and iterable."""

    def __init__(self, query: str, namespace: str | tuple[str, ...], qtype: str,
                 results: list[Result], recall_id: int | None, config: ScoringConfig,
                 links: bytes, prior_features: frozenset[str] = frozenset(),
                 parts: "dict[str, Recall] | None" = None):
        self.query = query
        #: the features a links-only prior merged into the store adds to
        self.prior_features = prior_features
        #: the namespace recalled; a recall across namespaces: their tuple
        self.namespace = namespace
        self.qtype = qtype
        #: the logged recall feedback refers to (None: untracked, or a recall
        #: across namespaces, whose parts are logged each as its own)
        self.recall_id = recall_id
        self.config = config
        self._results = results
        self._parts = parts
        if parts is None:
            scored = Scored(str(namespace), qtype, config, links, prior_features)
            for r in results:
                r._scored = scored

    @property
    def parts(self) -> "dict[str, Recall]":
        """Each namespace's part of a recall across namespaces (its results,
        recall_id and link set), by namespace; a recall of one namespace is
        its own only part."""
        if self._parts is not None:
            return self._parts
        return {self.namespace: self} if isinstance(self.namespace, str) else {}

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self._results]

    def __getitem__(self, i):
        return self._results[i]

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __repr__(self) -> str:
        return (f"<Recall {self.query!r} in {self.namespace!r}: {len(self)} results, "
                f"recall_id={self.recall_id}>")


@dataclass(frozen=True)
class Judgement:
    """What feedback(answer=...) decided about one shown memory, and why."""

    id: str
    verdict: str                 # "used", "ignored" or "unjudged"
    share: float                 # of the answer's evidence weight the memory carries
    matched: tuple[str, ...]     # the answer's words it carries (with the date's, if dated)
    dated: bool                  # its time matches the date the answer names
    reason: str

    def __str__(self) -> str:
        return f"{self.id}: {self.verdict}: {self.reason}"


@dataclass(frozen=True)
class Feedback:
    """What one feedback call recorded."""

    recall_id: int
    used: tuple[str, ...]
    ignored: tuple[str, ...]
    links_updated: int  # distinct features whose links changed
    #: with answer=...: each shown memory's judgement, in rank order
    judgements: tuple[Judgement, ...] = ()
    #: what auto-tune did with this feedback (Memory.feedback): None unless
    #: this feedback's step ended a tune (auto-tune runs in steps, one after
    #: each feedback, from the feedback that claims a point of its schedule),
    #: else tune()'s report (deployed or not, and why; its reason says so if
    #: tune failed, the feedback being saved either way)
    auto_tune: TuneReport | None = None


@dataclass(frozen=True)
class LinkRow:
    """A learned link as a namespace (or the pooled layer) sees it."""

    feature: str
    strength: float
    n: int
    alpha: float
    beta: float
    #: how many namespaces back it: in the pooled layer, all that contribute (a
    #: links-only prior counts as several); in a namespace's view, the others
    namespaces: int = 0


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    problems: tuple[str, ...]
    memories: int
    events: int
    link_rows: int  # link rows checked against the event log, in all layers


@dataclass(frozen=True)
class NamespaceStats:
    """One namespace's share of the store."""

    namespace: str
    memories: int
    recalls: int
    events: int
    last_added: float | None
    last_used: float | None


@dataclass(frozen=True)
class Stats:
    """What a store holds (Memory.stats())."""

    schema: int
    memories: int
    recalls: int
    events: int
    used: int              # events that judged a memory used
    pooled_features: int   # features learned in the pooled layer
    link_rows: int         # link rows in all layers
    prior_links: int       # pooled features that carry a merged prior
    by_namespace: tuple[NamespaceStats, ...]
    erases_in_place: bool = True   # forget erases with FTS5's secure-delete (else merges)
    oldest_reader: str = "3.37"    # the oldest SQLite that can query the FTS index

    @property
    def namespaces(self) -> int:
        return len(self.by_namespace)

    @property
    def ignored(self) -> int:
        return self.events - self.used

    def namespace(self, name: str) -> NamespaceStats:
        """The stats of one namespace (all zeros if it holds nothing)."""
        for ns in self.by_namespace:
            if ns.namespace == name:
                return ns
        return NamespaceStats(name, 0, 0, 0, None, None)


@dataclass(frozen=True)
class LoggedRecall:
    """One tracked recall as the log keeps it: what it showed, and how each
    was scored (features, age, the score without usefulness)."""

    id: int
    namespace: str
    query: str
    qtype: str
    created_at: float
    shown: tuple[str, ...]
    ages: tuple[float, ...]
    features: tuple[str, ...]
    rest: tuple[float, ...]


@dataclass(frozen=True)
class Event:
    """One judged memory of the feedback log: no text, no memory id."""

    id: int
    recall_id: int | None  # None once the recall is forgotten
    position: int
    namespace: str
    qtype: str
    used: bool
    deltas: tuple[tuple[str, float, float], ...]  # (feature, d_alpha, d_beta)


@dataclass(frozen=True)
class LearningDay:
    """One UTC day of the feedback log (learning.by_day): its judgements, and
    the rank of the memories they judged used."""

    day: int                 # days since 1970-01-01 (UTC)
    judged: int              # judgements (events): used + ignored
    used: int                # of them, memories judged used
    recalls: int             # recalls judged that day
    answered: int            # of them, recalls with a memory judged used
    reciprocal_ranks: float  # sum over those of 1 / rank of the best ranked used memory
    used_ranks: int          # sum of the ranks of every memory judged used

    @property
    def ignored(self) -> int:
        return self.judged - self.used

    @property
    def mrr(self) -> float | None:
        """The day's mean reciprocal rank of the first used memory, over the
        recalls in which feedback judged one used (None: no such recall)."""
        return self.reciprocal_ranks / self.answered if self.answered else None

    @property
    def mean_rank(self) -> float | None:
        """The mean rank of the memories judged used (None: none was)."""
        return self.used_ranks / self.used if self.used else None


@dataclass(frozen=True)
class TuneReport:
    """What tune() measured and what it did."""

    deployed: bool
    reason: str
    recalls: int                 # judged recalls replayed
    folds: str                   # "namespace" or "recall"
    current: dict[str, float]    # the weight in force, and its replay MRR
    best: dict[str, float]       # the best weight, its replay MRR
    gain: tuple[float, float, float]  # best - current: mean, CI low, CI high
    table: tuple[tuple[float, float], ...]  # (w_usefulness, replay MRR) for the grid
    #: the w_usefulness in force after it (deployed or kept)
    after: float = math.nan
    #: what the gain is measured against when not the weight in force
    #: (auto-tune: the default weight, which it deploys when nothing beats it)
    against: float | None = None

    def __str__(self) -> str:
        if not self.table:  # nothing replayed (too few judged recalls)
            return "not deployed: " + self.reason
        lines = [f"replayed {self.recalls} judged recalls, folds by {self.folds}"]
        for w, m in self.table:
            mark = " <- in force" if w == self.current["w_usefulness"] else ""
            lines.append(f"  w_usefulness={w:<5g} replay MRR {m:.4f}{mark}")
        g = self.gain
        over = ("the weight in force" if self.against is None else
                f"w_usefulness={self.against:g}")
        lines.append(f"best w_usefulness={self.best['w_usefulness']:g}: "
                     f"{g[0]:+.4f} [{g[1]:+.4f}, {g[2]:+.4f}] over {over}")
        lines.append(("deployed: " if self.deployed else "not deployed: ") + self.reason)
        return "\n".join(lines)


@dataclass(frozen=True)
class Prior:
    """A links-only prior merged into the store (mem.priors.list())."""

    digest: str              # SHA-256 of its links (priors.LEGACY: all merged before schema 7)
    name: str | None         # the file it was read from
    merged_at: float | None  # unix seconds
    link_rows: int           # how many learned links it holds
    observations: float      # their alpha + beta, each link bounded

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ImportReport:
    """What one import wrote."""

    kind: str          # "export" (a full export) or "links" (merged as a prior)
    memories: int = 0
    recalls: int = 0
    events: int = 0
    link_rows: int = 0  # learned links merged (a prior) or imported
    seq_offset: int = 0     # added to every imported seq (0 into a new store)
    recall_offset: int = 0  # added to every imported recall id (0 into a new store)
    notes: tuple[str, ...] = ()  # what the import chose not to apply, and why
    #: remap_ids=True: (the id in the file, the id in the store) of each memory moved
    remapped: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["remapped"] = dict(self.remapped)
        return out
