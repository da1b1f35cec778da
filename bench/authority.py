"""Authority under noisy and scarce feedback (issue 24): does heapmem learn that
what the user said outranks a tool, a web snippet or the assistant's guess, when
the feedback that teaches it is noisy, scarce or meaningless?

A controlled, seeded world.  Each synthetic user is a namespace of one store
(heapmem.open(path, clock=fixed)) holding TOPICS topics; each topic has four
memories that answer the same question, one from each source:

    source "user"       kind "fact"          (the one the agent should use)
    source "tool"       kind "tool_result"   (importance 0.6 by its kind)
    source "web"        kind "note"
    source "assistant"  kind "fact"

Their texts come from one pool of templates, dealt to the four sources at
random for each topic, with a different value in each (the sources disagree),
so every shape feature (length, numbers, dates, "I"/"my", ...) and BM25 itself
are independent of the source: only src: (and kind:) can tell the user's memory
apart.  The relevance-only row checks that BM25/hybrid relevance alone puts the
user's memory first about a quarter of the time.

Training users get one tracked recall per topic (k=4) and feedback marking one
shown memory used (the others shown count as ignored); held-out users never
give feedback and are evaluated with track=False: Hit@1 = the user's memory
ranked first.

Conditions:
    clean     the user's memory is marked used (when it was shown)
    flip20    as clean, but 20% of the rewards go to a random wrong shown memory
    scarce40  clean feedback from the first 10 training users only (40, one round)
    shuffled  the used memory is chosen at random among those shown
    none      no feedback at all (the library's defaults as they stand)
and a relevance-only row (w_importance = w_usefulness = w_context = 0, no feedback).

    python bench/authority.py                        # seeds 0-4, defaults and embedder=None
    python bench/authority.py --seeds 0,1 --users 30,20 --embedders default --out x.md
    python bench/authority.py --tune     # Memory.tune() after the feedback, before held-out

The stores open with the defaults, so feedback runs tune() by itself at 30, 60
and 120 judged recalls (auto-tune); each condition's line on stderr gives the
w_usefulness in force after the feedback, per seed.  --config opens with an
explicit config, under which auto-tune does not run.  The second table counts,
per condition, the held-out misses and those where the user's memory was
lifted as far as max_lift lets a lift go (explain() says "bounded to"): there
the links had found the user's memory and the trust bound kept it second.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter

import heapmem

NOW = 1_800_000_000.0          # the fixed clock
CREATED = NOW - 3 * 86400.0    # every memory stated three days before
SOURCES = (("user", "fact"), ("tool", "tool_result"), ("web", "note"), ("assistant", "fact"))
TOPICS = 4                     # topics (questions) per user: 10 users x 4 = 40 feedbacks
K = 4

# (question, noun phrase, short noun, values): the values the sources disagree on
TOPIC_BANK = [
    ("When is my dentist appointment?", "the dentist appointment", "dentist",
     ["Tuesday at 3pm", "Monday at 10am", "Friday at 9am", "Thursday at 4pm", "Wednesday at noon"]),
    ("How much is my gym membership fee?", "the gym membership fee", "gym",
     ["$45 a month", "$30 a month", "$60 a month", "$52 a month", "$39 a month"]),
    ("When is my sister's birthday?", "my sister's birthday", "birthday",
     ["March 3", "July 19", "October 8", "May 27", "January 14"]),
    ("What is the wifi password at home?", "the home wifi password", "wifi",
     ["bluefalcon77", "sunnyday42", "orchard-9", "maplestreet1", "kestrel2020"]),
    ("When does my flight to Denver leave?", "the flight to Denver", "flight",
     ["6:40am Saturday", "2:15pm Sunday", "11:05pm Friday", "8:30am Monday", "5:50pm Tuesday"]),
    ("What is my landlord's name?", "my landlord's name", "landlord",
     ["Gerald Huang", "Maria Okafor", "Tom Petrov", "Linda Alvarez", "Sam Whitfield"]),
    ("When is the car service due?", "the car service", "car",
     ["at 60,000 miles", "next April", "in two weeks", "on the 12th", "at the end of June"]),
    ("What is my doctor's phone number?", "my doctor's phone number", "doctor",
     ["555-0142", "555-0199", "555-0117", "555-0163", "555-0108"]),
    ("Which hotel did I book in Lisbon?", "the hotel booked in Lisbon", "hotel",
     ["Hotel Avenida", "Casa do Rio", "the Alfama Inn", "Pensao Central", "Lisboa Suites"]),
    ("What size are my running shoes?", "my running shoes size", "shoes",
     ["size 10", "size 9.5", "size 11", "size 8", "size 10.5"]),
    ("What time does my daughter's school start?", "my daughter's school start time", "school",
     ["8:15am", "7:50am", "8:45am", "9:00am", "8:00am"]),
    ("Where is the team offsite this year?", "the team offsite this year", "offsite",
     ["in Asheville", "in Boulder", "at the lake house", "in Portland", "in Austin"]),
]

# One pool, dealt at random to the sources of each topic: BM25 favours the short
# templates holding the whole noun phrase, so whichever source draws one wins.
TEMPLATES = [
    "{np} is {val}.",
    "{np}: {val}",
    "I think {np} is {val}",
    "Heads up, {np} was moved and is now {val}, according to the latest note.",
    "Regarding the {noun}, it looks like {val} this time, though that may change later.",
    "Reminder that {np} should be {val} unless it gets changed again.",
    "Looked it up: {val} for {np}.",
    "As far as anyone knows the {noun} thing is {val}; worth double checking.",
]


# --templates phrase: only those naming the whole noun phrase (a narrower BM25 spread)
PHRASE = [t for t in TEMPLATES if "{np}" in t]


def world(seed: int, n_users: int, pool: list[str] = TEMPLATES) -> list[list[dict]]:
    """n_users users, each TOPICS topics of four memories (one per source)."""
    rng = random.Random(seed)
    users = []
    for u in range(n_users):
        topics = []
        for t, (q, np_, noun, vals) in enumerate(rng.sample(TOPIC_BANK, TOPICS)):
            tmpl = rng.sample(pool, len(SOURCES))
            vv = rng.sample(vals, len(SOURCES))
            mems = []
            for (src, kind), tp, val in zip(SOURCES, tmpl, vv):
                text = tp.format(np=np_, noun=noun, val=val)
                mems.append({"id": f"u{u}-t{t}-{src}", "text": text[0].upper() + text[1:],
                             "kind": kind, "source": src, "namespace": f"user{u}",
                             "created_at": CREATED})
            topics.append({"question": q, "mems": mems, "user_id": mems[0]["id"]})
        users.append(topics)
    return users


def run(seed: int, cond: str, n_train: int, n_test: int, embedder: str,
        tmp: str, pool: list[str] = TEMPLATES, config: dict | None = None,
        tune: bool = False) -> dict:
    users = world(seed, n_train + n_test, pool)
    path = os.path.join(tmp, f"auth-{seed}-{cond}-{embedder}.db")
    kw = {} if embedder == "default" else {"embedder": None}
    if config:
        kw["config"] = heapmem.ScoringConfig().replace(**config)
    mem = heapmem.open(path, clock=lambda: NOW, **kw)
    mem.add_many([m for topics in users for tp in topics for m in tp["mems"]])
    rng = random.Random(f"{seed}:{cond}")
    train = users[:n_train]
    if cond == "scarce40":
        train = train[:10]
    given = unshown = 0
    if cond not in ("none", "relevance"):
        for u, topics in enumerate(train):
            for tp in topics:
                r = mem.recall(tp["question"], namespace=f"user{u}", k=K)
                shown = list(r.ids)
                if r.recall_id is None or not shown:
                    continue
                target = tp["user_id"]
                if cond == "shuffled":
                    used = rng.choice(shown)
                elif cond == "flip20" and rng.random() < 0.2:
                    wrong = [i for i in shown if i != target]
                    used = rng.choice(wrong) if wrong else None
                else:
                    used = target if target in shown else None
                if used is None:
                    unshown += 1
                    continue
                mem.feedback(used=[used], recall_id=r.recall_id)
                given += 1
    in_force = mem.config.w_usefulness  # after the feedback: what auto-tune deployed, if anything
    tuned = None
    if tune and given:  # the weight in force after tune(): what it deployed, or the one before
        rep = mem.tune()
        tuned = (rep.best if rep.deployed else rep.current)["w_usefulness"]
    cfg = None
    if cond == "relevance":
        cfg = mem.config.replace(w_importance=0.0, w_usefulness=0.0, w_context=0.0)
    hits = bounded = 0
    first = Counter()
    for u in range(n_train, n_train + n_test):
        for tp in users[u]:
            r = mem.recall(tp["question"], namespace=f"user{u}", k=K, track=False,
                           **({"config": cfg} if cfg else {}))
            top = r.ids[0] if r.ids else None
            hits += top == tp["user_id"]
            # a miss where the user's memory was lifted as far as max_lift lets it go
            mine = [x for x in r if x.id == tp["user_id"]]
            bounded += bool(top != tp["user_id"] and mine and mine[0].usefulness > 1
                            and "(bounded to x" in mine[0].explain())
            first[top.rsplit("-", 1)[1] if top else "none"] += 1
    mem.close()
    n = n_test * TOPICS
    return {"hit1": hits / n, "misses": n - hits, "bounded": bounded, "given": given,
            "unshown": unshown, "first": first, "n": n, "tuned": tuned, "in_force": in_force}


CONDS = ["relevance", "none", "clean", "flip20", "scarce40", "shuffled"]
LABEL = {"relevance": "relevance only (no feedback)", "none": "no feedback (defaults)",
         "clean": "clean", "flip20": "20% flipped", "scarce40": "scarce: 10 users x 4 = 40",
         "shuffled": "shuffled"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    ap.add_argument("--users", default="30,20",
                    help="TRAIN,TEST: training users and held-out users (train >= 10)")
    ap.add_argument("--embedders", default="default,none",
                    help="default (hybrid, potion-base-8M) and/or none (embedder=None)")
    ap.add_argument("--conditions", default=",".join(CONDS))
    ap.add_argument("--templates", choices=("all", "phrase"), default="all",
                    help="phrase: only the templates naming the whole noun phrase")
    ap.add_argument("--config", default="",
                    help="NAME=VALUE,... ScoringConfig fields for every condition "
                         "(a diagnostic; the default is the library's defaults)")
    ap.add_argument("--tune", action="store_true",
                    help="call Memory.tune() after the feedback (it deploys a w_usefulness "
                         "only where the store's own feedback says it ranks better)")
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    n_train, n_test = (int(x) for x in a.users.split(","))
    if n_train < 10:
        ap.error("--users: at least 10 training users (the pool needs 5 namespaces, "
                 "scarce40 takes 10)")
    conds = a.conditions.split(",")
    pool = TEMPLATES if a.templates == "all" else PHRASE
    config = {}
    for kv in filter(None, a.config.split(",")):
        name, v = kv.split("=")
        ints = ("candidates", "model", "combine", "backoff")
        config[name] = int(v) if name in ints else float(v)
    embs = a.embedders.split(",")
    tmp = tempfile.mkdtemp(prefix="heapmem-authority-")
    t0 = time.time()
    rows = []
    try:
        for emb in embs:
            for cond in conds:
                res = [run(s, cond, n_train, n_test, emb, tmp, pool, config, a.tune)
                       for s in seeds]
                rows.append((emb, cond, res))
                print(f"# {emb} {cond}: " + " ".join(f"{r['hit1']:.3f}" for r in res)
                      + (" tuned w_usefulness " + " ".join(f"{r['tuned']:g}" for r in res)
                         if a.tune and res[0]["tuned"] is not None else
                         " w_usefulness in force " + " ".join(f"{r['in_force']:g}"
                                                               for r in res))
                      + f"  ({time.time() - t0:.0f}s)", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = [f"{n_train} training users, {n_test} held-out users, {TOPICS} questions each "
           f"({n_test * TOPICS} held-out questions a seed), k={K}, templates {a.templates}"
           f"{', config ' + a.config if a.config else ''}"
           f"{', then Memory.tune()' if a.tune else ''}; heapmem "
           f"{heapmem.__version__}; {time.time() - t0:.0f} s", "",
           "| recall | condition | feedbacks | " + " | ".join(f"seed {s}" for s in seeds)
           + " | mean | min |",
           "|---|---|---|" + "---|" * (len(seeds) + 2)]
    for emb, cond, res in rows:
        hs = [r["hit1"] for r in res]
        fb = sorted({r["given"] for r in res})
        fbs = str(fb[0]) if len(fb) == 1 else f"{fb[0]}-{fb[-1]}"
        out.append(f"| {'hybrid (defaults)' if emb == 'default' else 'embedder=None'} | "
                   f"{LABEL[cond]} | {fbs} | " + " | ".join(f"{h:.3f}" for h in hs)
                   + f" | **{statistics.mean(hs):.3f}** | {min(hs):.3f} |")
    out += ["", "Which source the held-out users' recalls put first (all seeds), and the misses "
            "where the user's memory was lifted as far as max_lift allows (the bound, not the "
            "learning, kept it second):", "",
            "| recall | condition | user | tool | web | assistant | misses | at the bound |",
            "|---|---|---|---|---|---|---|---|"]
    for emb, cond, res in rows:
        tot = sum((r["first"] for r in res), Counter())
        n = sum(r["n"] for r in res)
        out.append(f"| {'hybrid' if emb == 'default' else 'embedder=None'} | {LABEL[cond]} | "
                   + " | ".join(f"{tot[s] / n:.2f}" for s in ("user", "tool", "web",
                                                              "assistant"))
                   + f" | {sum(r['misses'] for r in res)} | {sum(r['bounded'] for r in res)} |")
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
