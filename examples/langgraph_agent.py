"""A LangGraph agent whose memory is heapmem: it recalls, answers, and reports
what its answer used, and the store learns from every report.

Needs the extra: pip install "heapmem[langgraph]".  No network, no model: the
"model" is a stand-in that answers from the memory that looks like an answer
(one with a clock time for a "when" question).  The clock is fixed, so the
output is the same on every run.

    python examples/langgraph_agent.py [path/to/store.db]

Maya asks when her flight is: her booking shares the fewest words with the
question and ranks last.  Five other users ask their own "when is my ...?"
questions, three times each, and the agent reports which memory answered
(the others count as ignored).  When Maya asks again, what the store learned
from those reports (that a fact with a date and a time answers "when") lifts
her booking to first.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from typing import TypedDict

try:
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph
except ImportError:
    sys.exit("this example needs LangGraph: pip install \"heapmem[langgraph]\"")

import heapmem
from heapmem.adapters.langgraph_store import HeapmemStore

NOW = 1_796_040_000.0  # 2026-11-30 12:00 UTC, the clock of this whole example
DAY = 86400.0

# (user, key, value, age in days)
MEMORIES = [
    ("ana", "dentist", {"text": "Dentist appointment confirmed for Tuesday at 3:15pm"}, 6),
    ("ana", "wish", {"text": "I really want to find a dentist I like", "kind": "preference"}, 30),
    ("ana", "prices", {"text": "Dentist appointments nearby start at $90", "kind": "tool_result",
                       "source": "tool"}, 1),
    ("ben", "train", {"text": "Train ticket: London to Paris, leaves June 2 at 7:01am"}, 15),
    ("ben", "wish", {"text": "Paris by train sounds lovely, I should go more",
                     "kind": "preference"}, 40),
    ("ben", "prices", {"text": "Trains to Paris from London cost about $120",
                       "kind": "tool_result", "source": "tool"}, 3),
    ("chen", "haircut", {"text": "Haircut booked with Sam, Friday at 11:30am"}, 4),
    ("chen", "wish", {"text": "My haircut needs a change, maybe shorter",
                      "kind": "preference"}, 12),
    ("chen", "prices", {"text": "Haircut prices in the area run $25 to $60",
                        "kind": "tool_result", "source": "tool"}, 2),
    ("dara", "service", {"text": "Car service scheduled: Monday April 7, drop off at 8:00am"},
     9),
    ("dara", "wish", {"text": "I hate taking the car in for service", "kind": "preference"}, 50),
    ("dara", "prices", {"text": "Car service quotes start at $150", "kind": "tool_result",
                        "source": "tool"}, 4),
    ("eli", "lease", {"text": "Lease renewal starts August 1; signed on July 3 at 5pm"}, 25),
    ("eli", "wish", {"text": "I want a lease with a balcony next time", "kind": "preference"},
     60),
    ("eli", "prices", {"text": "Lease renewal fees in the area run $200 to $400",
                       "kind": "tool_result", "source": "tool"}, 5),
    ("maya", "flight", {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am"}, 20),
    ("maya", "wish", {"text": "Lisbon! I'd love to visit Lisbon someday",
                      "kind": "preference"}, 5),
    ("maya", "prices", {"text": "Flights to Lisbon from SFO cost around $700 in spring",
                        "kind": "tool_result", "source": "tool"}, 2),
]

QUESTIONS = [
    ("ana", "When is my dentist appointment?"),
    ("ben", "When is my train to Paris?"),
    ("chen", "When is my haircut?"),
    ("dara", "When is my car service?"),
    ("eli", "When does my lease renewal start?"),
    ("maya", "When is my flight to Lisbon?"),
]


class State(TypedDict, total=False):
    user: str
    question: str
    hits: list       # (key, score, text) of the recalled items, best first
    answer: str
    used: list       # the keys the answer used


def recall(state: State) -> State:
    store = get_store()
    hits = store.search(("users", state["user"]), query=state["question"], limit=3)
    return {"hits": [(h.key, h.score, h.value["text"]) for h in hits]}


def answer(state: State) -> State:
    """A stand-in model: a "when" question is answered by the first memory
    that names a clock time."""
    for key, _, text in state["hits"]:
        if re.search(r"\d{1,2}:\d{2}", text):
            return {"answer": text, "used": [key]}
    return {"answer": "I don't know.", "used": []}


def report(state: State) -> State:
    """Tell the store what the answer used; the other recalled items count as
    ignored."""
    get_store().feedback(("users", state["user"]), state["used"])
    return {}


def build(store: HeapmemStore):
    g = StateGraph(State)
    g.add_node("recall", recall)
    g.add_node("answer", answer)
    g.add_node("report", report)
    g.add_edge(START, "recall")
    g.add_edge("recall", "answer")
    g.add_edge("answer", "report")
    g.add_edge("report", END)
    return g.compile(store=store)


class Clock:
    t = NOW

    def __call__(self) -> float:
        return self.t


def ask(agent, user: str, question: str, show: bool) -> None:
    out = agent.invoke({"user": user, "question": question})
    if show:
        print(f"{user} asks: {question}")
        for rank, (key, score, text) in enumerate(out["hits"], 1):
            mark = "   <- the answer used it" if key in out["used"] else ""
            print(f"  {rank}. {score:5.3f}  {text}{mark}")
        print()


def main(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    clock = Clock()
    mem = heapmem.open(path, clock=clock)
    store = HeapmemStore(mem, kind_field="kind", source_field="source")  # they feed learning
    for user, key, value, age in MEMORIES:
        clock.t = NOW - age * DAY  # when it was said
        store.put(("users", user), key, value)
    clock.t = NOW
    agent = build(store)
    print("Day one, no feedback yet:\n")
    ask(agent, "maya", "When is my flight to Lisbon?", show=True)
    for day in range(6):
        for user, question in QUESTIONS[:-1]:
            ask(agent, user, question, show=day == 0)
    print("...and five more times each.  Maya asks again:\n")
    ask(agent, "maya", "When is my flight to Lisbon?", show=True)
    print("Strongest learned links (pooled over all users):")
    for link in mem.links()[:4]:
        print(f"  {link.feature:<16} strength {link.strength:.2f}  from {link.n} events")
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "agent.db"))
