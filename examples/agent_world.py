"""The small world the framework examples share (llamaindex_agent.py,
langchain_agent.py, openai_agents_agent.py, tool_calling.py, async_agent.py):
six users' memories on a fixed clock, the questions their agents answer,
and a scripted "model" that needs no network: it answers a "when" question
with the line of the prompt that holds a clock time.

Maya's booking shares one word with her question and ranks low on day one;
after the other users' agents report their answers, what heapmem learned
(a fact with a date and a time answers "when") lifts it.
"""
from __future__ import annotations

import re
from typing import Optional

import heapmem

NOW = 1_796_040_000.0  # 2026-11-30 12:00 UTC: every example's clock
DAY = 86400.0

# (user, text, kind, age in days)
MEMORIES = [
    ("ana", "Dentist appointment confirmed for Tuesday at 3:15pm", "fact", 6),
    ("ana", "I really want to find a dentist I like", "preference", 30),
    ("ana", "Dentist appointments nearby start at $90", "tool_result", 1),
    ("ben", "Train ticket: London to Paris, leaves June 2 at 7:01am", "fact", 15),
    ("ben", "Paris by train sounds lovely, I should go more", "preference", 40),
    ("ben", "Trains to Paris from London cost about $120", "tool_result", 3),
    ("chen", "Haircut booked with Sam, Friday at 11:30am", "fact", 4),
    ("chen", "My haircut needs a change, maybe shorter", "preference", 12),
    ("chen", "Haircut prices in the area run $25 to $60", "tool_result", 2),
    ("dara", "Car service scheduled: Monday April 7, drop off at 8:00am", "fact", 9),
    ("dara", "I hate taking the car in for service", "preference", 50),
    ("dara", "Car service quotes start at $150", "tool_result", 4),
    ("eli", "Lease renewal starts August 1; signed on July 3 at 5pm", "fact", 25),
    ("eli", "I want a lease with a balcony next time", "preference", 60),
    ("eli", "Lease renewals in the area cost $200 to $400", "tool_result", 5),
    ("maya", "Booked the flight: SFO to LIS, departs March 14, 9:40am", "fact", 20),
    ("maya", "Lisbon! I'd love to visit Lisbon someday", "preference", 5),
    ("maya", "Flights to Lisbon from SFO cost around $700 in spring", "tool_result", 2),
]

QUESTIONS = {
    "ana": "When is my dentist appointment?",
    "ben": "When is my train to Paris?",
    "chen": "When is my haircut?",
    "dara": "When is my car service?",
    "eli": "When does my lease renewal start?",
}
MAYA = "When is my flight to Lisbon?"
ROUNDS = 3

_CLOCK = re.compile(r"\b\d{1,2}(:\d\d)?\s?(am|pm)\b", re.I)


def open_world(path: str) -> heapmem.Memory:
    """A store at path holding the world's memories (namespace user:NAME)."""
    mem = heapmem.open(path, clock=lambda: NOW)
    if mem.count == 0:
        mem.add_many([{"text": t, "kind": k, "namespace": f"user:{u}",
                       "source": "tool" if k == "tool_result" else u,
                       "created_at": NOW - d * DAY} for u, t, k, d in MEMORIES])
    return mem


def model_answer(context: str) -> Optional[str]:
    """The scripted model: the first line of context (memories, one a line)
    that holds a clock time, as its answer; None if none does."""
    for line in context.splitlines():
        line = re.sub(r"\s*\(id [^)]*\)\s*$", "", line.strip().lstrip("-").strip())
        if _CLOCK.search(line):
            return line
    return None


def ranking(mem: heapmem.Memory, question: str = MAYA, namespace: str = "user:maya") -> str:
    """The top 3 for question, untracked, as lines."""
    res = mem.recall(question, k=3, namespace=namespace, track=False)
    return "\n".join(f"  {r.rank}. {r.score:.3f}  {r.text}" for r in res)
