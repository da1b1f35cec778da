"""heapmem in LlamaIndex (pip install "heapmem[llamaindex]", i.e. llama-index-core):
a memory block for LlamaIndex's Memory, and a retriever.

Owns: the mapping between LlamaIndex's chat messages and nodes and heapmem's
verbs.  Both are thin: they call Memory's recall, add and feedback, and never
score anything themselves.

    from llama_index.core.memory import Memory as ChatMemory
    from heapmem.adapters.llamaindex import HeapmemMemoryBlock, HeapmemRetriever

    block = HeapmemMemoryBlock(mem=heapmem.open("agent.db"), namespace="user:maya")
    memory = ChatMemory.from_defaults(session_id="maya", memory_blocks=[block])
    await agent.run("When is my flight?", memory=memory)

HeapmemMemoryBlock (a BaseMemoryBlock, the interface LlamaIndex's long-term
memory blocks implement): when Memory builds the prompt (aget), it recalls
the memories most worth knowing for the latest user message and returns them
as text, one line each; when Memory flushes messages out of its short-term
queue (aput), it adds the user's messages as memories.  Feedback: the next
time the block is asked, the assistant's reply to the question it recalled
for is reported as the answer (feedback(recall_id, answer=...)), so heapmem
learns which memories answers use without the agent naming any;
report_answer(text) does it by hand.

HeapmemRetriever (a BaseRetriever): retrieve(question) gives heapmem's
ranked memories as NodeWithScore (score: heapmem's, metadata: id, kind,
recall_id, explain); report_answer(answer) or mark_used(node_ids) reports
what the answer used.
"""
from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..results import Feedback, Recall
from ..store import Memory


def _text(m: ChatMessage) -> str:
    return (m.content or "").strip() if isinstance(m.content, str) or m.content is None \
        else str(m.content).strip()


def _lines(res: Recall) -> str:
    """A recall as the prompt shows it: one memory a line, with its id."""
    return "\n".join(f"- {r.text} (id {r.id})" for r in res)


class HeapmemMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block backed by a heapmem store (see the module)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="heapmem", description="The block's name in the prompt.")
    mem: Memory = Field(description="The heapmem store (heapmem.open(...)).")
    namespace: str = Field(default="default", description="Whose memories: one per user.")
    k: int = Field(default=5, description="How many memories a recall returns.")
    kind: str = Field(default="note", description="The kind a flushed user message is "
                                                  "stored as.")
    _pending: Optional[tuple[int, str]] = PrivateAttr(default=None)
    _shown: str = PrivateAttr(default="")

    async def _aget(self, messages: Optional[List[ChatMessage]] = None,
                    **block_kwargs: Any) -> str:
        messages = list(messages or [])
        self._report_from(messages)
        users = [i for i, m in enumerate(messages) if m.role == MessageRole.USER and _text(m)]
        if not users:
            return ""
        question = _text(messages[users[-1]])
        answered = any(m.role == MessageRole.ASSISTANT and _text(m)
                       for m in messages[users[-1] + 1:])
        if answered or (self._pending is not None and self._pending[1] == question):
            return self._shown  # asked again in the same turn: the same memories
        res = self.mem.recall(question, k=self.k, namespace=self.namespace)
        self._pending = (res.recall_id, question) if res.recall_id is not None else None
        self._shown = _lines(res)
        return self._shown

    async def _aput(self, messages: List[ChatMessage]) -> None:
        self._report_from(messages)
        for m in messages:
            if m.role == MessageRole.USER and _text(m):
                self.mem.add(_text(m), kind=self.kind, source="user", namespace=self.namespace)

    def _report_from(self, messages: List[ChatMessage]) -> None:
        """Report the assistant's reply to the pending question, if messages hold it."""
        if self._pending is None:
            return
        question = self._pending[1]
        asked = [i for i, m in enumerate(messages)
                 if m.role == MessageRole.USER and _text(m) == question]
        if not asked:
            return
        replies = [_text(m) for m in messages[asked[-1] + 1:]
                   if m.role == MessageRole.ASSISTANT and _text(m)]
        if replies:
            self.report_answer(replies[-1])

    def report_answer(self, answer: str) -> Optional[Feedback]:
        """Report the answer written from the block's latest recall (once);
        None when there is no recall waiting for one."""
        if self._pending is None:
            return None
        recall_id = self._pending[0]
        self._pending = None
        return self.mem.feedback(recall_id=recall_id, answer=answer, namespace=self.namespace)


class HeapmemRetriever(BaseRetriever):
    """A LlamaIndex retriever over one namespace of a heapmem store."""

    def __init__(self, mem: Memory, *, namespace: str = "default", k: int = 5,
                 **kwargs: Any) -> None:
        self.mem = mem
        self.namespace = namespace
        self.k = k
        #: the recall_id of the latest retrieve (what report_answer reports on)
        self.recall_id: Optional[int] = None
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        res = self.mem.recall(query_bundle.query_str, k=self.k, namespace=self.namespace)
        self.recall_id = res.recall_id
        return [NodeWithScore(node=TextNode(id_=r.id, text=r.text, metadata={
            **r.to_dict(("id", "kind")), "recall_id": res.recall_id, "explain": r.explain()}),
            score=r.score) for r in res]

    def report_answer(self, answer: str, *, recall_id: Optional[int] = None) -> Feedback:
        """Report the answer written from a retrieve (default: the latest)."""
        return self.mem.feedback(recall_id=recall_id or self.recall_id, answer=answer,
                                 namespace=self.namespace)

    def mark_used(self, node_ids: List[str], *, recall_id: Optional[int] = None) -> Feedback:
        """Report the nodes (memories) the answer used; the others shown count
        as ignored."""
        return self.mem.feedback(used=list(node_ids), recall_id=recall_id or self.recall_id,
                                 namespace=self.namespace)
