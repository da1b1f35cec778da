"""Where the within-a-conversation gain comes from, and what a memory's own
record could add (issue 24).

    python bench/within_probe.py [--policy oracle|shuffled|answer] [--seed N]
                                 [--config k=v,...] [--bands] [--near]

bench/locomo.py's within protocol, its own pieces (the split, the feedback
rounds, the evaluation), for heapmem alone, in a few seconds:

- MRR over the evaluated half before and after feedback on the other half,
  for all questions and split by whether the feedback rounds marked one of
  the question's gold turns used ("shared": the only questions a memory's own
  record can help).
- With --bands, how well a memory's record predicts use: every candidate of
  every evaluated question (top 50, after feedback) by the highest cosine
  (potion-base-8M) between this question and a feedback question that used
  the candidate, with the share of them that are gold.  A flat column means
  the record says nothing; the band where it rises is where a contextual
  factor can act.
- With --near, the same candidates by how many turns they lie from the
  nearest turn of their session that feedback marked used (0: used itself):
  whether a used turn's neighbours answer other questions.

--config passes ScoringConfig fields to every recall and feedback round, as
bench/locomo.py's --heapmem-config does.  Figures go to bench/RESULTS.md 16.3.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from typing import Any, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

import locomo as L  # noqa: E402


class _Recording:
    """A bench store that remembers, per feedback round, its question and the
    turns it marked used."""

    def __init__(self, store: Any) -> None:
        self.store, self.rounds, self._last = store, [], ""

    def recall(self, query: str, **kw: Any) -> tuple[list[str], Any]:
        self._last = query
        return self.store.recall(query, **kw)

    def feedback(self, token: Any, used: Sequence[str], *, now: float) -> None:
        self.rounds.append((self._last, list(used)))
        self.store.feedback(token, used, now=now)

    def feedback_answer(self, token: Any, answer: str, *, now: float) -> list[str]:
        used = self.store.feedback_answer(token, answer, now=now)
        self.rounds.append((self._last, list(used)))
        return used


def _ranked(store: Any, questions: Sequence[Any], config: Any) -> list[list[str]]:
    return [store.recall(q.text, k=L.K_EVAL, namespace=q.conv, now=q.ask_ts, config=config,
                         track=False)[0] for q in questions]


def run(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """Each evaluated question's ranks before and after feedback, and (with
    --bands or --near) the candidates counted by band: {band: [candidates,
    gold]}."""
    largs = L.parse_args(["--systems", "heapmem", "--protocol", "within", "--conditions",
                          args.policy, "--seed", str(args.seed)]
                         + (["--heapmem-config", "probe:" + args.config] if args.config else []))
    convs, _ = L.load_locomo(largs.data, largs.evidence)
    plan = L.make_plan(convs, largs)
    system = L.make_system("heapmem", largs)
    config = system.configs["probe" if args.config else "defaults"]
    embed = None
    if args.bands:
        from heapmem.embedders import Potion
        embed = Potion()
    out: list[dict[str, Any]] = []
    bands: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory() as work:
        base = system.build_base([m for c in plan.convs for m in c.memories], work,
                                 max(c.ask_ts for c in plan.convs))
        for ci, (conv, (fb, ev)) in enumerate(plan.within.items()):
            store = system.fork(base, work, f"probe-{ci}")
            try:
                before = _ranked(store, ev, config)
                rec = _Recording(store)
                L.feedback_phase(rec, fb, config, args.policy,
                                 L.stream(plan.seed, "within", args.policy, conv))
                after = _ranked(store, ev, config)
            finally:
                store.close()
            used_by: dict[str, list[str]] = collections.defaultdict(list)
            for q, used in rec.rounds:
                for i in used:
                    used_by[i].append(q)
            for q, b, a in zip(ev, before, after):
                out.append({"shared": bool(q.gold & set(used_by)),
                            "r0": L.rank_of(b, q.gold), "r1": L.rank_of(a, q.gold)})
                if embed is not None:
                    _count_bands(bands, embed, q, a, used_by)
                if args.near:
                    _count_near(bands, q, a, used_by)
    return out, bands


def _count_bands(bands: dict[str, list[int]], embed: Any, q: Any, ranked: list[str],
                 used_by: dict[str, list[str]]) -> None:
    qv = embed([q.text])[0]
    for i in ranked:
        if i in used_by:
            s = float(np.max(embed(used_by[i]) @ qv))
            band = f"{max(min(int(s * 10) / 10, 0.9), 0.0):.1f}"
        else:
            band = "no record"
        bands[band][0] += 1
        bands[band][1] += i in q.gold


def _turn(memory_id: str) -> tuple[str, int]:
    """A LoCoMo turn's session and place in it ('conv-26:D1:12' -> ('D1', 12))."""
    _, session, turn = memory_id.split(":")
    return session, int(turn)


def _count_near(bands: dict[str, list[int]], q: Any, ranked: list[str],
                used_by: dict[str, list[str]]) -> None:
    used = [_turn(i) for i in used_by]
    for i in ranked:
        session, turn = _turn(i)
        gaps = [abs(turn - t) for s, t in used if s == session]
        if not gaps:
            band = "no used turn in its session"
        else:
            g = min(gaps)
            band = "0 (used itself)" if g == 0 else str(g) if g <= 2 else "3-5" if g <= 5 else "6+"
        bands["turns from a used one: " + band][0] += 1
        bands["turns from a used one: " + band][1] += i in q.gold


def report(rows: list[dict[str, Any]], bands: dict[str, list[int]]) -> str:
    lines = ["| questions | n | MRR before | MRR after | ΔMRR | Hit@1 after |",
             "|---|---|---|---|---|---|"]
    for name, sel in (("all", rows), ("shared", [r for r in rows if r["shared"]]),
                      ("not shared", [r for r in rows if not r["shared"]])):
        if not sel:
            continue
        r0, r1 = np.array([r["r0"] for r in sel]), np.array([r["r1"] for r in sel])
        m0, m1 = float(L.rr(r0).mean()), float(L.rr(r1).mean())
        h1 = float(np.mean(r1 == 1))
        lines.append(f"| {name} | {len(sel)} | {m0:.3f} | {m1:.3f} | {m1 - m0:+.3f} | {h1:.3f} |")
    if bands:
        lines += ["", "| band | candidates | gold "
                  "| share gold |",
                  "|---|---|---|---|"]
        for b in sorted(bands, key=lambda x: (x == "no record", x)):
            n, g = bands[b]
            label = b if not b[0].isdigit() else f"{b}-{float(b) + 0.1:.1f}"
            lines.append(f"| {label} | {n} | {g} | {g / n:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="oracle", choices=("oracle", "shuffled", "answer"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", default="", help="ScoringConfig fields, k=v,k=v")
    ap.add_argument("--bands", action="store_true", help="the record's predictive value")
    ap.add_argument("--near", action="store_true", help="the candidates by turns from a used one")
    args = ap.parse_args(argv)
    rows, bands = run(args)
    print(report(rows, bands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
