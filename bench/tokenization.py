#!/usr/bin/env python
"""Relevance-only LoCoMo MRR under FTS5 tokenizer and stop-word choices (issue 3).

    python bench/tokenization.py [--data ../shared/data/locomo/locomo10.json]

Builds one in-memory FTS5 table per choice over the raw LoCoMo turns (with
heapmem's namespace tags), asks every question with evidence in its own
conversation, and prints the MRR over the top 50 of plain BM25.  heapmem's
store uses the first row's tokenizer.
"""
import argparse
import os
import re
import sys

import apsw

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))

import locomo  # noqa: E402

import heapmem  # noqa: E402
from heapmem.db import native as n  # noqa: E402

SMALL_STOP = set("a an and are as at be by did do does for from had has have he her his how i "
                 "in is it its of on or she that the their them they this to was were what when "
                 "where which who whom why will with you your".split())


def match_with(stop):
    def build(q, ns):
        terms = []
        for w in re.findall(r"[A-Za-z0-9']+|[^\x00-\x7f]+", q.lower()):
            w = w.strip("'").split("'")[0]
            if w and w not in stop and w not in terms:
                terms.append(w)
        if not terms:
            return None
        return f'nstag : "{n.ns_tag(ns)}" AND (' + " OR ".join(f'"{t}"' for t in terms) + ")"
    return build


def mrr(convs, tokenizer, match=n.match, strip_speaker=False):
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    c.execute(f"CREATE VIRTUAL TABLE f USING fts5(nstag, text, tokenize='{tokenizer}')")
    ids = {}
    with c:
        for cv in convs:
            for m in cv.memories:
                t = m["text"].split(": ", 1)[1] if strip_speaker else m["text"]
                c.execute("INSERT INTO f(nstag, text) VALUES (?, ?)", (n.ns_tag(m["namespace"]), t))
                ids[c.last_insert_rowid()] = m["id"]
    total = count = 0
    for cv in convs:
        ns = cv.memories[0]["namespace"]
        for q in cv.questions:
            count += 1
            expr = match(q.text, ns)
            if not expr:
                continue
            rows = c.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f, 0.0, 1.0) "
                             "LIMIT 50", (expr,)).fetchall()
            for r, (rowid,) in enumerate(rows, 1):
                if ids[rowid] in q.gold:
                    total += 1 / r
                    break
    return total / count, count


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data", "locomo",
                                                   "locomo10.json"))
    args = p.parse_args()
    convs, _ = locomo.load_locomo(args.data)
    rows = [
        ("porter unicode61 remove_diacritics 2 (heapmem)",
         dict(tokenizer="porter unicode61 remove_diacritics 2")),
        ("unicode61 remove_diacritics 2 (no stemming)",
         dict(tokenizer="unicode61 remove_diacritics 2")),
        ("porter ascii (the reference's ASCII-only)", dict(tokenizer="porter ascii")),
        ("porter unicode61, text without the speaker",
         dict(tokenizer="porter unicode61 remove_diacritics 2", strip_speaker=True)),
        ("porter unicode61, a smaller stop-word list",
         dict(tokenizer="porter unicode61 remove_diacritics 2", match=match_with(SMALL_STOP))),
        ("porter unicode61, no stop words",
         dict(tokenizer="porter unicode61 remove_diacritics 2", match=match_with(set()))),
    ]
    print("| tokenizer / query | questions | MRR |\n|---|---|---|")
    for name, kw in rows:
        value, count = mrr(convs, **kw)
        print(f"| {name} | {count} | {value:.4f} |")


if __name__ == "__main__":
    main()
