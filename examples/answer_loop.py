"""An agent loop that never reports ids: heapmem learns from the answers.

Eight users ask their agent a "when ...?" or "how many ...?" question.  The
agent recalls, answers in prose, and hands heapmem only the recall_id and its
answer text: feedback(recall_id=..., answer=...).  heapmem works out from the
text which of the shown memories the answer used, says why, and learns from it
what kind of memory answers what kind of question.  Then Maya asks "When is my
flight to Lisbon?" for the first time, and her booking comes first.

    python examples/answer_loop.py [path/to/store.db]

The same users and memories as examples/lisbon.py; the clock is fixed, so the
output is the same on every run.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lisbon import OTHERS, QUESTION, build  # noqa: E402

# what each user's agent answered, in its own words (no ids anywhere)
ANSWERS = {
    "user:ana": "Your dentist appointment is on Tuesday at 3:15pm.",
    "user:ben": "Your train leaves London for Paris on June 2 at 7:01am.",
    "user:chen": "You're booked with Sam on Friday, May 9 at 11:30am.",
    "user:dara": "Drop the car off on Monday, April 7 at 8:00am.",
    "user:eli": "It starts on August 1; you signed on July 3.",
    "user:fay": "You bought 4 tickets, all in row 12.",
    "user:gus": "Two a day: one at 8am and one at 8pm.",
    "user:hana": "It's on September 20 at 4pm, in Kyoto.",
}


def main(path="answers.db"):
    mem = build(path)  # the users and memories of examples/lisbon.py

    for round_ in range(3):
        for ns, question, _, _ in OTHERS:
            res = mem.recall(question, k=3, namespace=ns)
            answer = ANSWERS[ns]          # ... the agent answers from res ...
            fb = mem.feedback(recall_id=res.recall_id, answer=answer)
            if round_ == 0 and ns == "user:ana":
                print(f'Ana asks "{question}"; her agent answers "{answer}"')
                print("heapmem judges the three memories it was shown:")
                for j in fb.judgements:
                    print(f"  {j.verdict:<8} {mem.get(j.id).text}")
                    print(f"           {j.reason}")
    print(f"\n{len(OTHERS)} users asked and were answered, 3 times each; no agent named a "
          "memory.")
    res = mem.recall(QUESTION, k=3, namespace="user:maya", track=False)
    print(f'\nMaya, on her first recall: "{QUESTION}"')
    for r in res:
        print(f"  {r.rank}. {r.text}\n       {r.explain()}")
    mem.close()


if __name__ == "__main__":
    main(*sys.argv[1:2])
