"""Many agents at once on one store, with asyncio: heapmem.AsyncMemory runs
each verb on a worker thread with a connection of its own, so the event loop
never waits on the file and concurrent writes queue on SQLite's lock.

    python examples/async_agent.py [path/to/store.db]

Each of five users' agents (asyncio tasks, all at once) asks its question
three times, answers from the memory that holds a clock time (the scripted
model of agent_world.py), and reports the answer; nothing is lost.
"""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_world import MAYA, NOW, QUESTIONS, ROUNDS, model_answer, open_world, ranking

import heapmem


async def agent(mem: heapmem.AsyncMemory, user: str, question: str) -> int:
    ns, reported = f"user:{user}", 0
    for _ in range(ROUNDS):
        res = await mem.recall(question, k=3, namespace=ns)
        answer = model_answer("\n".join(r.text for r in res))
        if answer:
            await mem.feedback(recall_id=res.recall_id, answer=answer, namespace=ns)
            reported += 1
    return reported


async def main(path: str) -> None:
    open_world(path).close()  # the memories, once
    async with heapmem.AsyncMemory(path, workers=4, clock=lambda: NOW) as mem:
        reported = await asyncio.gather(*(agent(mem, u, q) for u, q in QUESTIONS.items()))
        judged = len(await mem.log.judged())
        print(f"{len(QUESTIONS)} agents at once reported {sum(reported)} answers; "
              f"heapmem judged {judged} recalls; check: {(await mem.check()).ok}")
    with heapmem.open(path, clock=lambda: NOW) as mem:
        print(f"maya asks: {MAYA}\n{ranking(mem)}")


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "as.db")
    asyncio.run(main(path))
