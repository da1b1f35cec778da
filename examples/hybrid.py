"""Hybrid recall: a memory that shares no word with the question.

    python examples/hybrid.py

"Booked it: SFO to LIS" never matches "When is my flight to Lisbon?" in a
full-text index. With an embedder, vector candidates join the BM25 ones.  The
embedder here is a toy (words mapped to a few concepts) so the output is the
same everywhere; heapmem.embedders.MiniLM is the real one (semantic extra).
"""
import os
import sys
import tempfile

import numpy as np

import heapmem

CONCEPTS = {"lisbon": 0, "lis": 0, "flight": 1, "booked": 1, "sfo": 1, "seat": 2, "window": 2}


class ToyEmbedder:
    name = "toy-concepts"

    def __call__(self, texts):
        out = np.zeros((len(texts), 4), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace(":", " ").replace(",", " ").split():
                out[i, CONCEPTS.get(w, 3)] += 1.0 if w in CONCEPTS else 0.05
        return out


def main(path):
    mem = heapmem.open(path, clock=lambda: 1741910400, embedder=ToyEmbedder())
    mem.add_many([{"text": "Booked it: SFO to LIS, March 14", "namespace": "maya"},
                  {"text": "Window seat, always", "namespace": "maya"},
                  {"text": "Lisbon has the best custard tarts", "namespace": "maya"}])
    q = "When is my flight to Lisbon?"
    words = mem.recall(q, namespace="maya", config=heapmem.ScoringConfig(lexical_weight=1),
                       track=False)
    print("BM25 only:", [r.text for r in words])
    for r in mem.recall(q, namespace="maya", track=False):
        print(f"{r.rank}. {r.text}\n   {r.explain()}")
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "hybrid.db"))
