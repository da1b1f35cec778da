"""Exploration (issue 24): does damped Thompson sampling (ScoringConfig.explore)
find, and learn, a kind of memory that BM25 keeps below the top k?

Feedback can only confirm what was shown.  A controlled, seeded world: each
synthetic user is a namespace of one store (heapmem.open(path, clock=fixed,
embedder=None): lexical, so BM25 alone decides what is shown before anything
is learned) holding TOPICS topics; each topic has one useful memory and
DISTRACTORS others that answer the same question with other values:

    the useful one   source "user"                       (what the answer needs)
    distractors      sources "tool", "web", "assistant"  (each drawn at random)

All are kind "fact", their texts from one pool of templates and their values
drawn alike, so only the source tells the useful one apart.  What keeps it
down is its wording: it names the topic with one of the question's two
terms (the "short" phrase: "the dentist", "the gym"), where a distractor
names it with both (the "full" phrase) unless it draws the short phrase too
(probability SHORT).  With k=3 BM25 shows the useful memory only when three
distractors or more drew the short phrase and it outranks them: in 4% of the
recalls at SHORT=0.3, 31% at 0.45.  A control world ("visible") gives the
useful memory the full phrase, so BM25 shows it already and exploration can
only cost.

The online loop: for ROUNDS rounds, every training user asks each of their
topics once (tracked, k=3, config explore=E); the feedback is on what was
shown only: the useful memory marked used when it was shown (the others
shown count as ignored), and no feedback when it was not (the answer could
use nothing, as heapmem's answer-based feedback judges nothing then).

Measured: the online Hit@3 (the useful memory among the shown) per bucket of
rounds, its regret against an oracle that always shows it (1 - Hit@3, summed
over the training recalls) and against explore=0; and the final Hit@3 of
held-out users (fresh namespaces, fresh values and wordings, never any
feedback, track=False: never explored) at the end, which sees what the
training users taught the pooled layer.

    python bench/explore.py                  # seeds 0-4, explore 0,0.5,1,2,4, three worlds
    python bench/explore.py --seeds 0 --explore 0,1 --rounds 6 --users 10,10 --worlds hidden:0.3
"""
from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time

import heapmem

NOW = 1_800_000_000.0          # the fixed clock
CREATED = NOW - 3 * 86400.0    # every memory stated three days before
TOPICS = 4                     # topics (questions) per user
DISTRACTORS = 5
SHORT = 0.3                    # a distractor's chance to draw the short phrase
K = 3
SOURCES = ("tool", "web", "assistant")

# (question, full phrase: both of its terms, short phrase: one, values)
TOPIC_BANK = [
    ("When is my dentist appointment?", "the dentist appointment", "the dentist",
     ["Tuesday at 3pm", "Monday at 10am", "Friday at 9am", "Thursday at 4pm", "Wednesday at noon",
      "Saturday at 11am"]),
    ("How much is the gym membership?", "the gym membership", "the gym",
     ["$45 a month", "$30 a month", "$60 a month", "$52 a month", "$39 a month", "$41 a month"]),
    ("When is my sister's birthday party?", "my sister's birthday party", "my sister's party",
     ["March 3", "July 19", "October 8", "May 27", "January 14", "June 2"]),
    ("What is the wifi password?", "the wifi password", "the wifi",
     ["bluefalcon77", "sunnyday42", "orchard-9", "maplestreet1", "kestrel2020", "riverbend5"]),
    ("When does the flight to Denver leave?", "the flight to Denver", "the flight",
     ["6:40am Saturday", "2:15pm Sunday", "11:05pm Friday", "8:30am Monday", "5:50pm Tuesday",
      "9:10am Thursday"]),
    ("What is the landlord's phone number?", "the landlord's phone number", "the landlord",
     ["555-0142", "555-0199", "555-0117", "555-0163", "555-0108", "555-0175"]),
    ("When is the car service due?", "the car service", "the car",
     ["at 60,000 miles", "next April", "in two weeks", "on the 12th", "at the end of June",
      "after the trip"]),
    ("Which hotel is booked in Lisbon?", "the hotel in Lisbon", "the hotel",
     ["Hotel Avenida", "Casa do Rio", "the Alfama Inn", "Pensao Central", "Lisboa Suites",
      "Hotel Miradouro"]),
    ("What size are the running shoes?", "the running shoes", "the shoes",
     ["size 10", "size 9.5", "size 11", "size 8", "size 10.5", "size 12"]),
    ("What time does school start?", "school start time", "school",
     ["8:15am", "7:50am", "8:45am", "9:00am", "8:00am", "8:30am"]),
    ("Where is the team offsite?", "the team offsite", "the offsite",
     ["in Asheville", "in Boulder", "at the lake house", "in Portland", "in Austin",
      "in Santa Fe"]),
    ("What is the book club reading?", "the book club", "the club",
     ["Middlemarch", "The Overstory", "Piranesi", "Pachinko", "Circe", "Station Eleven"]),
]

TEMPLATES = [
    "{np} is {val}.",
    "{np}: {val}",
    "Heads up, {np} was moved and is now {val}.",
    "Reminder that {np} should be {val} unless it changes.",
    "Looked it up: {val} for {np}.",
    "As far as I know {np} is {val}; worth double checking.",
]


def world(seed: int, n_users: int, first: int = 0, short: float = SHORT,
          visible: bool = False) -> list[list[dict]]:
    """n_users users (namespaces user{first}..), each TOPICS topics of one
    useful memory and DISTRACTORS others (visible: the useful memory names
    its topic with the full phrase, so BM25 shows it already)."""
    rng = random.Random(f"world:{seed}:{first}")
    users = []
    for u in range(first, first + n_users):
        topics = []
        for t, (q, full, short_np, vals) in enumerate(rng.sample(TOPIC_BANK, TOPICS)):
            vv = rng.sample(vals, DISTRACTORS + 1)
            mems = []
            for j in range(DISTRACTORS + 1):
                src = "user" if j == 0 else rng.choice(SOURCES)
                if j == 0:
                    np_ = full if visible else short_np
                else:
                    np_ = short_np if rng.random() < short else full
                text = rng.choice(TEMPLATES).format(np=np_, val=vv[j])
                mems.append({"id": f"u{u}-t{t}-m{j}", "text": text[0].upper() + text[1:],
                             "kind": "fact", "source": src, "namespace": f"user{u}",
                             "created_at": CREATED})
            topics.append({"question": q, "mems": mems, "useful": mems[0]["id"]})
        users.append(topics)
    return users


def run(seed: int, explore: float, n_train: int, n_test: int, rounds: int, tmp: str,
        short: float = SHORT, visible: bool = False) -> dict:
    train = world(seed, n_train, short=short, visible=visible)
    test = world(seed, n_test, first=n_train, short=short, visible=visible)
    path = tempfile.mktemp(suffix=".db", dir=tmp)
    mem = heapmem.open(path, clock=lambda: NOW, embedder=None,
                       config=heapmem.ScoringConfig(explore=explore))
    mem.add_many([m for users in (train, test) for topics in users for tp in topics
                  for m in tp["mems"]])
    rng = random.Random(f"order:{seed}")
    hits_by_round, moved = [], 0
    for _ in range(rounds):
        asks = [(u, tp) for u, topics in enumerate(train) for tp in topics]
        rng.shuffle(asks)
        hits = 0
        for u, tp in asks:
            ns = f"user{u}"
            if explore > 0:  # what the same recall shows unexplored (untracked)
                plain = mem.recall(tp["question"], namespace=ns, k=K, track=False).ids
            r = mem.recall(tp["question"], namespace=ns, k=K)
            moved += explore > 0 and set(r.ids) != set(plain)
            if tp["useful"] in r.ids and r.recall_id is not None:
                mem.feedback(used=[tp["useful"]], recall_id=r.recall_id)
                hits += 1
        hits_by_round.append(hits / len(asks))
    held = [tp["useful"] in mem.recall(tp["question"], namespace=f"user{n_train + u}", k=K,
                                       track=False).ids
            for u, topics in enumerate(test) for tp in topics]
    mem.close()
    return {"online": hits_by_round, "held": sum(held) / len(held),
            "recalls": rounds * n_train * TOPICS, "moved": moved}


def buckets(rounds: int, n: int) -> list[tuple[int, int]]:
    """n round buckets, [lo, hi) each, as even as the rounds allow."""
    edges = [round(i * rounds / n) for i in range(n + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def misses(res: dict, per_round: int) -> float:
    """The regret of one run against an oracle that always shows the useful
    memory: its training recalls that did not show it."""
    return sum(1 - h for h in res["online"]) * per_round


def table(rows: list[tuple[float, list[dict]]], rounds: int, seeds: list[int],
          per_round: int) -> list[str]:
    bk = buckets(rounds, 4)
    base = rows[0][1] if rows and rows[0][0] == 0 else None
    head = ("| explore | held-out Hit@3 (mean) | min | "
            + " | ".join(f"online Hit@3, rounds {a + 1}-{b}" for a, b in bk)
            + " | regret vs oracle (misses a seed) | vs explore=0 |")
    out = [head, "|---|---|---|" + "---|" * len(bk) + "---|---|"]
    for e, res in rows:
        held = [r["held"] for r in res]
        online = [statistics.mean(statistics.mean(r["online"][a:b]) for r in res) for a, b in bk]
        regret = statistics.mean(misses(r, per_round) for r in res)
        vs = "" if base is None else \
            f"{regret - statistics.mean(misses(r, per_round) for r in base):+.1f}"
        out.append(f"| {e:g} | **{statistics.mean(held):.3f}** | {min(held):.3f} | "
                   + " | ".join(f"{h:.3f}" for h in online)
                   + f" | {regret:.1f} | {vs} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    ap.add_argument("--explore", default="0,0.5,1,2,4",
                    help="comma-separated ScoringConfig.explore values (0 first: the baseline)")
    ap.add_argument("--users", default="20,20", help="TRAIN,TEST: training and held-out users")
    ap.add_argument("--rounds", type=int, default=12, help="rounds of the online loop")
    ap.add_argument("--worlds", default=f"hidden:{SHORT},hidden:0.45,visible:{SHORT}",
                    help="comma-separated WORLD:SHORT: hidden (the useful memory names its topic "
                         "with the short phrase) or visible (with the full one, a control where "
                         "BM25 shows it already), and each distractor's chance of the short "
                         "phrase")
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    values = [float(x) for x in a.explore.split(",")]
    n_train, n_test = (int(x) for x in a.users.split(","))
    if n_train < 5:
        ap.error("--users: at least 5 training users (the pooled layer needs 5 namespaces)")
    print(f"# heapmem from {heapmem.__file__}", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="heapmem-explore-")
    t0 = time.time()
    per_round = n_train * TOPICS
    out = [f"{n_train} training users x {TOPICS} questions a round ({per_round} tracked recalls "
           f"a round), {a.rounds} rounds, k={K}, {DISTRACTORS} distractors a question; "
           f"{n_test} held-out users ({n_test * TOPICS} questions a seed, track=False); "
           f"seeds {a.seeds}; embedder=None; heapmem {heapmem.__version__}"]
    try:
        for w in a.worlds.split(","):
            kind, short = w.split(":")
            rows = []
            for e in values:
                res = [run(s, e, n_train, n_test, a.rounds, tmp, float(short), kind == "visible")
                       for s in seeds]
                rows.append((e, res))
                print(f"# {w} explore {e:g}: held-out " + " ".join(f"{r['held']:.3f}" for r in res)
                      + f"  ({time.time() - t0:.0f}s)", file=sys.stderr)
            out += ["", f"**{kind}**, a distractor's chance of the short phrase {short}:", ""]
            out += table(rows, a.rounds, seeds, per_round)
            changed = [(e, statistics.mean(r["moved"] / r["recalls"] for r in res))
                       for e, res in rows if e > 0]
            out += ["", "Tracked recalls whose shown set exploration changed (against the same "
                    "recall untracked): " + ", ".join(f"explore {e:g}: {c:.2f}"
                                                       for e, c in changed)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out += ["", f"{time.time() - t0:.0f} s in all"]
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
