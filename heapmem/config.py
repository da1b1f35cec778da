"""ScoringConfig: the weights and constants of heapmem's ranking.

Owns: the config's fields, their defaults and their checks on the Python
side.  The fields the C core reads (and their defaults and bounds) are listed
once, in csrc/heapmem.h's HM_CONFIG_FIELDS; this module takes them from
there, and a test checks that every one is a field here.  Adding a C knob:
one line in HM_CONFIG_FIELDS, one field here, its use in C.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from .db import native

#: Importance a memory gets from its kind when none is given (csrc/heapmem.h's
#: HM_KINDS; another kind gets 1).
KIND_IMPORTANCE: dict[str, float] = dict(native.VOCABULARY.kinds)
#: A memory's kind when none is given (heapmem.h's HM_DEFAULT_KIND).
DEFAULT_KIND = native.VOCABULARY.default_kind
#: Importance must lie in (0, MAX_IMPORTANCE] (heapmem.h's HM_LIMITS).
MAX_IMPORTANCE = float(native.LIMITS["MAX_IMPORTANCE"])

# The fields the C core reads, in the order of its config string, and their
# defaults (csrc/heapmem.h).
_C_FIELDS = tuple(f.name for f in native.CONFIG_FIELDS)
_C = {f.name: f.default for f in native.CONFIG_FIELDS}


@dataclass(frozen=True)
class ScoringConfig:
    """How recall scores a candidate:

    score = relevance^w_relevance x recency^w_recency x importance^w_importance
            x usefulness^w_usefulness x rules x context x thread x time

    A weight of 0 switches its factor off.

    - relevance: BM25 over the best candidate's (the top `candidates` are
      re-ranked).  With an embedder (hybrid recall) the candidates are the
      BM25 top `candidates` united with the vector top `candidates`, and
      relevance = lexical_weight x BM25 share + (1 - lexical_weight) x cosine
      over the best candidate's cosine.  A candidate that only the vectors
      found (no word in common) needs a cosine of at least min_cosine
      (default 0.2, for potion-base-8M, the library's own embedder; another
      embedder's candidates are not filtered: its cosines lie on its own
      scale).  On LoCoMo 0.2 costs nothing (bench/RESULTS.md 11) and keeps
      a small namespace from returning every memory it holds.
    - recency = recency_floor + (1 - recency_floor) * 0.5^(age / half_life_days),
      age since last use (or creation).  Off by default (w_recency=0): a fixed
      decay hurts when questions reach back months; how much age matters is
      learned instead, through the age-bucket features.
    - importance: given, or from the kind.
    - usefulness: from the learned links of the memory's features, each link a
      Beta(prior_alpha + successes, prior_beta + failures) posterior; a
      namespace borrows the other namespaces' evidence, scaled down to at most
      pooled_pseudocount observations.  That evidence is the store's pooled
      layer: a trimmed sum in which each namespace weighs at most 300
      observations of a link, the two most and two least favourable
      namespaces are left out, and nothing counts until five namespaces back
      the link (mem.pool.set), so one tenant, or two, cannot steer the
      others however much feedback they give.  model=1 (default) is the gated lift:
      a link moves rankings only where its rate of use differs from the base
      rate by more than gate_z standard errors, and usefulness is the
      product, over the memory's feature slots, of the most specific link's
      ratio to the base rate (combine=1, default; combine=0: the noisy-OR
      likelihood of use over the base rate); exactly 1 before any feedback.
      With backoff=1 (default; combine=1) a link crossed with the question's type
      (when/src:user) counts only where it differs from what its plain link
      (src:user) predicts for that type by more than gate_z standard errors;
      where the two agree the plain link counts, as it rests on more
      evidence (its layer holds every question type's judgements, so its
      interval's near edge lies further from the base rate).  backoff=0:
      the crossed link whenever it passes the gate.
      model=0 is the reference design's plain noisy-OR of link strengths
      with credit split in proportion to strength.
      The exponent is w_usefulness + w_evidence x evidence (model 1 only;
      w_evidence 0, the default, leaves it w_usefulness): evidence, 0..1, is
      how far the links in effect lie past the gate, each 1 - gate_z / z for
      a link z standard errors from the base rate (0 at the gate, towards 1
      as its evidence grows), averaged with weights |log ratio|.  So a lift
      that rests on much evidence may count more than one barely past the
      gate; a link that passes by chance mostly lies near the gate, where
      w_evidence adds little (no link past it: nothing moves at any weight).
      explain() shows it: 'useful 2.85^0.93 (0.3 + 0.7 x evidence 0.90)'.
      Off by default: on LoCoMo leave-one-conversation-out a larger
      exponent costs MRR (answer and shuffled feedback most); on
      bench/authority.py it lifts held-out Hit@1 (bench/RESULTS.md 15).
      Memory.tune() picks w_usefulness from a store's own feedback, which is
      the way to a larger exponent where that feedback supports one; a
      store opened without config= runs it by itself at 30, 60, 120, ...
      judged recalls (heapmem.open's auto_tune; bench/RESULTS.md 17), so
      w_usefulness here is where a store starts, and an explicit config
      keeps its weights (auto-tune does not run).
      However strong the evidence, usefulness^exponent is bounded to
      [1 / max_lift, max_lift], and so is the product of every learned
      factor on a score (usefulness's, context's and exploration's,
      Result.lift): what a prior merged from elsewhere, tenants colluding
      past the trimmed pool, or one user judging one memory again and again
      can do to a ranking is bounded too (explain() says when either bound
      applied; bench/RESULTS.md 22 measured bounding them together).
    - context (w_context, 1; every store, with vectors or without): the
      memory's own record in this namespace (its 32 latest judgements, so
      that a recall's cost does not grow with a memory's history), each
      weighted by how similar its question was to this one (the library's
      own model's cosine, whatever the store's embedder, above
      context_min_sim, 0.7, rescaled to 0..1), against the base rate of use
      (a Beta of weight context_prior, 2, around it), lifting the memory only
      where its record beats the base rate by context_z (0.5) standard
      errors, bounded by max_lift; exactly 1 with no such record, or one
      that cannot beat chance.  A boost only: being shown and ignored does
      not push a memory down.  Gated by the store as well: a memory judged
      used for a question closer than context_min_sim shows the feature
      ctx:1, whose link (learned and pooled like every link) must beat the
      base rate by gate_z standard errors before any memory's record counts;
      until then ctx:1 can lift only through its own learned usefulness.
    - thread (w_thread, 0.5; thread_turns, 2): a memory added with a thread
      (add(thread=..., turn=...): a turn of a conversation) is lifted by its
      neighbours there, the memories of its thread at most thread_turns
      turns before or after it: its relevance counts as its own plus
      w_thread x the best relevance among those neighbours that are
      candidates, so a reply is found by the words of the turn it answers;
      and the neighbours of the 10 best candidates join the candidates (with
      vectors: relevance from their cosine).  explain() shows it as "x thread
      1.21 (m41, 1 turn before)".  No effect where memories have no thread
      (the ranking is exactly as without it), and none with w_thread 0.
      LoCoMo, chosen on conversations 0-4: bench/RESULTS.md 21.
    - time (w_time, 1): a question that names a time ("last week", "in May
      2023", "yesterday", "two days ago", "on 18 August, 2023"; English, read
      as of the recall's now, heap_time_window) multiplies by 1 + w_time the
      memories created in that window (or the day after it, when it was told
      of); never a filter.  explain() shows it as 'x time 2.00 ("May 2023":
      2023-05-01 to 2023-05-31)'.
    - rules: a memory superseded by a newer one with the same key is
      multiplied by superseded_factor.
    - explore (0 to 4; 0, the default, is off): damped Thompson sampling, in
      tracked recalls only (track=True, or heap_recall's track or tracked
      1); an untracked recall ranks exactly as with explore=0.  Feedback can
      only confirm what was shown, so a kind of memory that never reaches
      the top k is never learned.  With explore > 0 each link's Beta
      posterior (the counts usefulness uses) is drawn from once per recall,
      and the link counts at its usual value times (draw / posterior
      mean)^explore: 1 takes the draw as it is (Thompson sampling), 0.5 half
      its deviation in the log scale usefulness multiplies in, 2 twice it.
      The draw's spread shrinks as a link's evidence grows, so exploration
      fades where the store has learned.  The candidates' median effect is
      taken off (links they all share move them alike) and the explored
      lift stays within max_lift's bounds.  ctx:1 stays a boost under
      exploration too: a draw below the base rate counts as the base rate.
      The draws are seeded by the recall's inputs (question, namespace,
      now, and how many recalls the namespace has logged), never the clock's
      entropy: the same inputs rank the same.  explain() shows the factor
      as "x explore 1.23".
      bench/RESULTS.md 14.1: in a simulation where BM25 keeps the useful kind
      of memory out of the top 3, explore=2 takes held-out Hit@3 from 0.06
      to 0.80 after 12 rounds; where BM25 shows it a third of the time it
      costs up to 0.04 (so it is off by default).
    Invalid values raise ValueError when the config is made.
    """

    w_relevance: float = _C["w_relevance"]
    w_recency: float = _C["w_recency"]
    w_importance: float = _C["w_importance"]
    w_usefulness: float = _C["w_usefulness"]
    half_life_days: float = _C["half_life_days"]
    recency_floor: float = _C["recency_floor"]
    superseded_factor: float = _C["superseded_factor"]
    candidates: int = int(_C["candidates"])
    lexical_weight: float = _C["lexical_weight"]
    min_cosine: float = _C["min_cosine"]
    w_context: float = _C["w_context"]
    context_min_sim: float = _C["context_min_sim"]
    context_z: float = _C["context_z"]
    context_prior: float = _C["context_prior"]
    prior_alpha: float = _C["prior_alpha"]
    prior_beta: float = _C["prior_beta"]
    pooled_pseudocount: float = _C["pooled_pseudocount"]
    model: int = int(_C["model"])
    gate_z: float = _C["gate_z"]
    combine: int = int(_C["combine"])
    backoff: int = int(_C["backoff"])
    max_lift: float = _C["max_lift"]
    w_evidence: float = _C["w_evidence"]
    explore: float = _C["explore"]
    w_thread: float = _C["w_thread"]
    thread_turns: int = int(_C["thread_turns"])
    w_time: float = _C["w_time"]
    if TYPE_CHECKING:  # set on each instance by __post_init__; ClassVar keeps them out of
        _sql: ClassVar[str]  # the fields, as mypy's dataclass plugin would count them
        _c: ClassVar[Any]

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"ScoringConfig.{f.name} must be a number, got {type(v).__name__}")
            if isinstance(v, int) and abs(v) > 1e300:  # float(v) would overflow
                raise ValueError(f"ScoringConfig.{f.name} is out of range")
        if not isinstance(self.candidates, int) or not 1 <= self.candidates <= 1000:
            raise ValueError(f"ScoringConfig.candidates must be an integer from 1 to 1000, "
                             f"got {self.candidates!r}")
        if not 0 <= self.lexical_weight <= 1:
            raise ValueError("ScoringConfig.lexical_weight must be between 0 and 1, "
                             f"got {self.lexical_weight!r}")
        if not (math.isfinite(self.pooled_pseudocount) and self.pooled_pseudocount >= 0):
            raise ValueError("ScoringConfig.pooled_pseudocount must be a finite number >= 0, "
                             f"got {self.pooled_pseudocount!r}")
        # one validator: the C core's own parser
        sql = " ".join(f"{name}={float(getattr(self, name))!r}" for name in _C_FIELDS)
        object.__setattr__(self, "_sql", sql)
        try:
            object.__setattr__(self, "_c", native.config(sql))
        except ValueError as e:
            raise ValueError(str(e).replace("heapmem: ", "ScoringConfig.")) from None

    @property
    def cdata(self) -> Any:
        """The config as the C core's hm_config struct (cffi), parsed once."""
        return self._c

    def to_sql(self) -> str:
        """The config as the text heap_score() and heap_explain() take as their
        last argument, e.g. 'w_relevance=1.0 w_recency=0.0 ...'."""
        return self._sql

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScoringConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"ScoringConfig: unknown field(s) {sorted(unknown)}")
        return cls(**dict(d))

    def replace(self, **changes: Any) -> "ScoringConfig":
        return replace(self, **changes)
