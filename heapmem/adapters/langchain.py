"""heapmem in LangChain (pip install "heapmem[langchain]", i.e. langchain-core): a
retriever, and the tools a model calls to remember, recall and report what
its answer used.

Owns: the mapping between LangChain's documents and tools and heapmem's verbs.
Both are thin: the retriever calls Memory.recall and feedback; the tools are
heapmem.tools' (the schemas every tool door gives, run by tools.call), so
they never score anything themselves.

    from heapmem.adapters.langchain import HeapmemRetriever, heapmem_tools

    retriever = HeapmemRetriever(mem=heapmem.open("agent.db"), namespace="user:maya")
    docs = retriever.invoke("When is my flight?")     # Documents, best first
    retriever.report_answer(answer_text)              # what heapmem learns from

    tools = heapmem_tools(mem, namespace="user:maya")   # add, recall, report_answer, ...
    agent = create_agent(model, tools)                  # or any agent that takes tools

A tool's bad input goes back to the model as the tool's output (one
sentence), so that it can correct the call.
"""
from __future__ import annotations

from typing import Any, List, Optional

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool, ToolException
from pydantic import ConfigDict, PrivateAttr

from .. import tools
from ..errors import HeapmemError
from ..results import Feedback
from ..store import Memory


class HeapmemRetriever(BaseRetriever):
    """A LangChain retriever over one namespace of a heapmem store: each
    Document's metadata holds its id, score, kind, the recall_id and the
    one-line explanation of its rank."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mem: Memory
    namespace: str = "default"
    k: int = 5
    _recall_id: Optional[int] = PrivateAttr(default=None)

    @property
    def recall_id(self) -> Optional[int]:
        """The recall_id of the latest retrieval (what report_answer reports on)."""
        return self._recall_id

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> List[Document]:
        res = self.mem.recall(query, k=self.k, namespace=self.namespace)
        self._recall_id = res.recall_id
        return [Document(page_content=r.text, id=r.id, metadata={
            **r.to_dict(("id", "score", "kind")), "recall_id": res.recall_id,
            "explain": r.explain()}) for r in res]

    def report_answer(self, answer: str, *, recall_id: Optional[int] = None) -> Feedback:
        """Report the answer written from a retrieval (default: the latest)."""
        return self.mem.feedback(recall_id=recall_id or self._recall_id, answer=answer,
                                 namespace=self.namespace)

    def mark_used(self, ids: List[str], *, recall_id: Optional[int] = None) -> Feedback:
        """Report the documents (memory ids) the answer used; the others shown
        count as ignored."""
        return self.mem.feedback(used=list(ids), recall_id=recall_id or self._recall_id,
                                 namespace=self.namespace)


def _tool(mem: Memory, t: tools.Tool, namespace: str) -> StructuredTool:
    def run(**arguments: Any) -> dict[str, Any]:
        try:
            return tools.call(mem, t.name, arguments, namespace=namespace)
        except (ValueError, TypeError, HeapmemError) as e:
            raise ToolException(" ".join(str(e).split())) from None

    return StructuredTool(name=t.name, description=t.description, args_schema=t.parameters,
                          func=run, handle_tool_error=True)


def heapmem_tools(mem: Memory, *, namespace: str = "default",
                  names: Optional[List[str]] = None) -> List[StructuredTool]:
    """heapmem's tools (heapmem.tools: add, recall, report_answer, mark_used,
    mark_ignored, forget, list; names: only those) as LangChain tools acting
    on mem, in namespace."""
    return [_tool(mem, tools.tool(n), namespace) for n in (names or tools.NAMES)]
