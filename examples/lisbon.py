"""Plain search vs heapmem on one store file: "When is my flight to Lisbon?"

Maya's memories hold the answer (her booking), but it shares the fewest words
with the question: plain full-text search puts it behind a wish to visit
Lisbon and a price quote for Lisbon flights.  Other users then ask their own
"when is my ...?" and "how many ...?" questions (never about flights, never
Maya) and say which memory answered.  heapmem learns from them that a fact
with a date and a time answers a "when" question, and Maya's booking rises to
first, on her very first recall.

    python examples/lisbon.py [path/to/store.db]

The store is left on disk (default ./agent.db) for `heapmem report` and the
samples in docs/ (made anew on every run).  The clock is fixed, so the output
is the same on every run.
"""
import os
import sys

import heapmem

DAY = 86400.0
NOW = 1_741_910_400.0  # 2025-03-14 00:00 UTC, the clock of this whole example

MAYA = [
    ("Booked the flight: SFO to LIS, departs March 14, 9:40am", "fact", "maya", 20),
    ("Lisbon! I'd love to visit Lisbon someday", "preference", "maya", 5),
    ("Flights to Lisbon from SFO cost around $700 in spring", "tool_result", "tool", 2),
]

# Other users: (namespace, question, [(memory, kind, source, age_days)], index of the answer)
OTHERS = [
    ("user:ana", "When is my dentist appointment?",
     [("Dentist appointment confirmed for Tuesday at 3:15pm", "fact", "ana", 6),
      ("I really want to find a dentist I like", "preference", "ana", 30),
      ("Dentist appointments nearby start at $90", "tool_result", "tool", 1)], 0),
    ("user:ben", "When is my train to Paris?",
     [("Train ticket: London to Paris, leaves June 2 at 7:01am", "fact", "ben", 15),
      ("Paris by train sounds lovely, I should go more", "preference", "ben", 40),
      ("Trains to Paris from London cost about $120", "tool_result", "tool", 3)], 0),
    ("user:chen", "When is my haircut?",
     [("Haircut booked with Sam for Friday May 9 at 11:30am", "fact", "chen", 3),
      ("I'd like a shorter haircut this summer", "preference", "chen", 12),
      ("Haircut prices downtown average $45", "tool_result", "tool", 2)], 0),
    ("user:dara", "When is my car service?",
     [("Car service scheduled: Monday April 7, drop off at 8:00am", "fact", "dara", 9),
      ("I hate taking the car in for service", "preference", "dara", 50),
      ("Car service quotes start at $150", "tool_result", "tool", 4)], 0),
    ("user:eli", "When does my lease renewal start?",
     [("Lease renewal starts August 1; signed on July 3 at 5pm", "fact", "eli", 25),
      ("I want a lease with a balcony next time", "preference", "eli", 60),
      ("Lease renewal fees in the area run $200 to $400", "tool_result", "tool", 5)], 0),
    ("user:fay", "How many tickets did I buy for the concert?",
     [("Bought 4 tickets for the concert on Saturday, row 12", "fact", "fay", 8),
      ("Concert tickets would make a great gift for my sister", "preference", "fay", 20),
      ("Concert tickets are selling for $85 each", "tool_result", "tool", 1)], 0),
    ("user:gus", "How many pills do I take each day?",
     [("Doctor said: take 2 pills each day, at 8am and 8pm", "fact", "gus", 11),
      ("I'd rather not take pills at all", "preference", "gus", 40),
      ("A box of 30 pills costs $12", "tool_result", "tool", 2)], 0),
    ("user:hana", "When is my sister's wedding?",
     [("My sister's wedding is on September 20 at 4pm in Kyoto", "fact", "hana", 30),
      ("I want to give a speech at my sister's wedding", "preference", "hana", 10),
      ("Wedding gift ideas under $100", "tool_result", "tool", 3)], 0),
]
QUESTION = "When is my flight to Lisbon?"
ROUNDS = 3  # days on which the other users ask


def show(title, rows):
    print(title)
    for rank, text, extra in rows:
        print(f"  {rank}. {text}" + (f"\n       {extra}" if extra else ""))


def build(path):
    """A new store at path holding Maya's memories and the other users'."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    mem = heapmem.open(path, clock=lambda: NOW)
    mem.add_many([{"text": t, "kind": k, "source": s, "namespace": "user:maya",
                   "created_at": NOW - age * DAY} for t, k, s, age in MAYA])
    for ns, _, memories, _ in OTHERS:  # (ages as on the first of the 3 days of feedback)
        mem.add_many([{"text": t, "kind": k, "source": s, "namespace": ns,
                       "created_at": NOW - (age + ROUNDS - 1) * DAY}
                      for t, k, s, age in memories])
    return mem


def main(path="agent.db"):
    mem = build(path)

    search = heapmem.ScoringConfig(w_recency=0, w_importance=0, w_usefulness=0)
    print(f'Maya asks: "{QUESTION}"\n')
    res = mem.recall(QUESTION, k=3, namespace="user:maya", config=search, track=False)
    show("Plain search (BM25 only):", [(r.rank, r.text, "") for r in res])
    res = mem.recall(QUESTION, k=3, namespace="user:maya", track=False)
    show("\nheapmem, day one (no feedback yet):",
         [(r.rank, r.text, r.explain()) for r in res])

    # Other users ask their own questions, once a day for three days; their
    # agents report what they used.
    for day in range(ROUNDS):
        when = NOW - (ROUNDS - 1 - day) * DAY
        for ns, question, memories, answer in OTHERS:
            res = mem.recall(question, k=3, namespace=ns, now=when)
            used = [r.id for r in res if r.text == memories[answer][0]]
            mem.feedback(used=used, recall_id=res.recall_id, now=when)
    print(f"\n{len(OTHERS)} other users gave feedback on their own questions, once a day for "
          f"{ROUNDS} days.")

    # Maya's recall is tracked: `heapmem report` shows the newest tracked recall
    res = mem.recall(QUESTION, k=3, namespace="user:maya")
    show("\nheapmem, after other users' feedback:",
         [(r.rank, r.text, r.explain()) for r in res])
    print("\nStrongest learned links (pooled over all users):")
    for link in mem.links("*")[:5]:
        print(f"  {link.feature:<22} strength {link.strength:.2f}  from {link.n} events")
    mem.close()
    print(f"\nThe store is {path}: `heapmem report {path}` draws what it learned.")


if __name__ == "__main__":
    main(*sys.argv[1:2])
