"""heapmem in the OpenAI Agents SDK (pip install "heapmem[openai-agents]", i.e. the
openai-agents package): heapmem's tools as the SDK's function tools.

Owns: nothing but the wrapping: each tool is heapmem.tools' (its schema as the
tool's params_json_schema, its run tools.call), so it never scores anything
itself.

    from agents import Agent, Runner
    from heapmem import tools
    from heapmem.adapters.openai_agents import heapmem_function_tools

    agent = Agent(name="assistant",
                  instructions=tools.INSTRUCTIONS.format(namespace="user:maya"),
                  tools=heapmem_function_tools(mem, namespace="user:maya"))
    result = await Runner.run(agent, "When is my flight?")

The instructions ask the model to recall before answering and to call
report_answer with its answer after it: that report is what heapmem learns
from.  A call's bad input is the tool's output {"error": "..."} (one
sentence), so that the model can correct it.
"""
from __future__ import annotations

import asyncio
from typing import Any, List, Optional

from agents import FunctionTool, RunContextWrapper

from .. import tools
from ..store import Memory


def _function_tool(mem: Memory, t: tools.Tool, namespace: str) -> FunctionTool:
    async def invoke(ctx: RunContextWrapper[Any], arguments: str) -> str:
        # the store's verbs block on the file: off the event loop
        return await asyncio.to_thread(tools.call_json, mem, t.name, arguments,
                                       namespace=namespace)

    # strict_json_schema off: strict mode would make every optional argument required
    return FunctionTool(name=t.name, description=t.description,
                        params_json_schema=t.parameters, on_invoke_tool=invoke,
                        strict_json_schema=False)


def heapmem_function_tools(mem: Memory, *, namespace: str = "default",
                           names: Optional[List[str]] = None) -> List[FunctionTool]:
    """heapmem's tools (heapmem.tools: add, recall, report_answer, mark_used,
    mark_ignored, forget, list; names: only those) as the Agents SDK's
    FunctionTools acting on mem, in namespace."""
    return [_function_tool(mem, tools.tool(n), namespace) for n in (names or tools.NAMES)]
