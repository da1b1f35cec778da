"""A LangChain agent whose memory is heapmem: the model calls heapmem's tools
(recall, then report_answer with its answer), and a retriever serves the same
store to a chain.

Needs langchain (pip install "heapmem[langchain]"): the agent loop is
LangChain's own create_agent.  No network: the chat
model is a scripted stand-in (a LangChain BaseChatModel) that calls recall,
answers from the memory that holds a clock time (agent_world.model_answer),
and reports that answer.

    python examples/langchain_agent.py [path/to/store.db]
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
except ImportError:
    sys.exit("this example needs LangChain: pip install \"heapmem[langchain]\"")

from agent_world import MAYA, QUESTIONS, ROUNDS, model_answer, open_world, ranking

from heapmem.adapters.langchain import HeapmemRetriever, heapmem_tools


class ScriptedModel(BaseChatModel):
    """recall the question; answer from what recall returned and report it."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        last = messages[-1]
        n = len(messages)
        if isinstance(last, HumanMessage):
            msg = AIMessage(content="", tool_calls=[
                {"name": "recall", "args": {"query": last.content, "k": 3}, "id": f"c{n}"}])
        elif isinstance(last, ToolMessage) and last.name == "recall":
            out = json.loads(last.content)
            answer = model_answer("\n".join(m["text"] for m in out["memories"]))
            msg = AIMessage(content=answer or "I don't know.", tool_calls=[
                {"name": "report_answer", "id": f"c{n}",
                 "args": {"recall_id": out["recall_id"], "answer": answer or "I don't know."}}])
        else:  # report_answer's reply: say the answer
            answer = [m for m in messages if isinstance(m, AIMessage)][-1].content
            msg = AIMessage(content=answer)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def main(path: str) -> None:
    mem = open_world(path)
    print(f"maya asks: {MAYA}\n{ranking(mem)}\n")
    for _ in range(ROUNDS):
        for user, question in QUESTIONS.items():
            agent = create_agent(ScriptedModel(), heapmem_tools(mem, namespace=f"user:{user}"))
            out = agent.invoke({"messages": [HumanMessage(question)]})
    calls = [m.name for m in out["messages"] if isinstance(m, ToolMessage)]
    print(f"the agent answered {len(QUESTIONS)} users {ROUNDS} times each, calling "
          f"{' then '.join(calls)}; heapmem judged {len(mem.log.judged())} recalls")
    print(f"(the last answer: {out['messages'][-1].content!r})\n")
    print(f"maya asks again:\n{ranking(mem)}\n")
    retriever = HeapmemRetriever(mem=mem, namespace="user:maya", k=1)
    doc = retriever.invoke(MAYA)[0]
    fb = retriever.report_answer(doc.page_content)
    print(f"retriever: {doc.id} {doc.page_content!r}; report_answer -> used {list(fb.used)}")
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "lc.db"))
