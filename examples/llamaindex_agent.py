"""A LlamaIndex agent whose long-term memory is heapmem: a memory block in
LlamaIndex's Memory recalls for each question, and reports each answer back.

Needs llama-index-core (pip install "heapmem[llamaindex]").  No network: the
LLM is LlamaIndex's own MockFunctionCallingLLM, scripted to answer from the
memories the block put in its prompt (agent_world.model_answer).

    python examples/llamaindex_agent.py [path/to/store.db]
"""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.memory import Memory as ChatMemory
except ImportError:
    sys.exit("this example needs LlamaIndex: pip install \"heapmem[llamaindex]\"")

from agent_world import MAYA, QUESTIONS, ROUNDS, model_answer, open_world, ranking

from heapmem.adapters.llamaindex import HeapmemMemoryBlock, HeapmemRetriever


def scripted(messages, **kwargs) -> ChatMessage:
    """The 'LLM': answers from the memories in its system prompt."""
    context = "\n".join(m.content or "" for m in messages if m.role == "system")
    return ChatMessage(role="assistant", content=model_answer(context) or "I don't know.")


async def ask(mem, user: str, question: str) -> str:
    block = HeapmemMemoryBlock(mem=mem, namespace=f"user:{user}", k=3)
    memory = ChatMemory.from_defaults(session_id=user, memory_blocks=[block])
    agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=scripted),
                          system_prompt="Answer from what you remember.")
    answer = str(await agent.run(question, memory=memory))
    await memory.aget()  # the block sees the reply and reports it to heapmem
    return answer


async def main(path: str) -> None:
    mem = open_world(path)
    print(f"maya asks: {MAYA}\n{ranking(mem)}\n")
    for _ in range(ROUNDS):
        for user, question in QUESTIONS.items():
            answer = await ask(mem, user, question)
    print(f"the agent answered {len(QUESTIONS)} users {ROUNDS} times each; "
          f"heapmem judged {len(mem.log.judged())} recalls from the answers alone")
    print(f"(the last: {answer!r})\n")
    print(f"maya asks again:\n{ranking(mem)}\n")
    retriever = HeapmemRetriever(mem, namespace="user:maya", k=1)
    node = retriever.retrieve(MAYA)[0]
    fb = retriever.report_answer(node.text)
    print(f"retriever: {node.node.node_id} {node.text!r}, score {node.score:.3f}; "
          f"report_answer -> used {list(fb.used)}")
    mem.close()


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "li.db")
    asyncio.run(main(path))
