#!/usr/bin/env python
"""Attribution on LoCoMo (issue 14): how well heap_attribute finds, from the gold answer,
the gold evidence among a question's shown memories, and what the statement costs.

One store holds every LoCoMo turn (as bench/locomo.py builds it); each question with an
answer (the adversarial category has none) is recalled with relevance only (k=10, no
feedback), and the shown ids go through the statement feedback(answer=...) runs
(heapmem.db.sql.ATTRIBUTE's heap_attribute over the shown memories), timed alone.

    python bench/attribution.py            # about 20 s

Prints precision (shown memories judged used that are gold), coverage (questions whose
evidence was shown that got some of it judged used), how many ignored memories were gold,
and the statement's p50/p95. The data is read from ../shared/data/locomo (--data).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))

import locomo  # noqa: E402

import heapmem  # noqa: E402

ATTRIBUTE = """SELECT heap_attribute(:answer, :question, s.key, m.text, m.created_at)
FROM json_each(:shown) AS s LEFT JOIN memories AS m ON m.id = s.value"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=locomo.DEFAULT_DATA)
    ap.add_argument("-k", type=int, default=10)
    args = ap.parse_args()
    convs, _ = locomo.load_locomo(args.data)
    clock = max(c.ask_ts for c in convs)
    with tempfile.TemporaryDirectory() as tmp:
        mem = heapmem.open(os.path.join(tmp, "a.db"), clock=lambda: clock)
        mem.add_many([dict(m) for c in convs for m in c.memories])
        rel = heapmem.ScoringConfig(w_recency=0.0, w_importance=0.0, w_usefulness=0.0)
        tp = fp = covered = shown_gold = ignored = ignored_gold = n = 0
        times = []
        for q in (q for c in convs for q in c.questions if q.answer is not None):
            shown = mem.recall(q.text, k=args.k, namespace=q.conv, config=rel, track=False).ids
            p = {"answer": q.answer, "question": q.text, "shown": json.dumps(shown)}
            t = time.perf_counter()
            out = json.loads(mem.connection.execute(ATTRIBUTE, p).fetchall()[0][0])
            times.append(time.perf_counter() - t)
            n += 1
            used = [i for i, r in zip(shown, out) if r["verdict"] == 1]
            ign = [i for i, r in zip(shown, out) if r["verdict"] == 0]
            tp += sum(i in q.gold for i in used)
            fp += sum(i not in q.gold for i in used)
            ignored += len(ign)
            ignored_gold += sum(i in q.gold for i in ign)
            if any(i in q.gold for i in shown):
                shown_gold += 1
                covered += any(i in q.gold for i in used)
        mem.close()
    times.sort()
    print(f"{n} answered questions, top {args.k} by relevance")
    print(f"precision {tp / max(1, tp + fp):.3f} ({tp + fp} judged used)")
    print(f"coverage  {covered / max(1, shown_gold):.3f} ({covered} of {shown_gold} questions "
          "whose evidence was shown)")
    print(f"ignored   {ignored} memories, {ignored_gold} of them gold")
    print(f"heap_attribute p50 {statistics.median(times) * 1000:.3f} ms, "
          f"p95 {times[int(0.95 * len(times))] * 1000:.3f} ms")


if __name__ == "__main__":
    main()
