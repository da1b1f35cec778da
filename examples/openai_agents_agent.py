"""An OpenAI Agents SDK agent whose memory is heapmem: the model calls
heapmem's function tools (recall, then report_answer with its answer).

Needs openai-agents (pip install "heapmem[openai-agents]").  No network: the
model is a scripted stand-in (the SDK's Model interface) that calls recall,
answers from the memory that holds a clock time (agent_world.model_answer)
and reports that answer; tracing is off.

    python examples/openai_agents_agent.py [path/to/store.db]
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from agents import Agent, ModelResponse, Runner, Usage, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError:
    sys.exit("this example needs the OpenAI Agents SDK: pip install \"heapmem[openai-agents]\"")

from agent_world import MAYA, QUESTIONS, ROUNDS, model_answer, open_world, ranking

from heapmem import tools
from heapmem.adapters.openai_agents import heapmem_function_tools


def _call(name: str, args: dict, n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, call_id=f"c{n}",
                                    arguments=json.dumps(args))


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


class ScriptedModel(Model):
    """recall the question; answer from what recall returned and report it."""

    async def get_response(self, system_instructions, input, model_settings, tools, *args,
                           **kwargs) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        last, n = items[-1], len(items)
        calls = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
        if last.get("role") == "user":
            out = [_call("recall", {"query": last["content"], "k": 3}, n)]
        elif calls.get(last.get("call_id")) == "recall":
            res = json.loads(last["output"])
            answer = model_answer("\n".join(m["text"] for m in res["memories"]))
            answer = answer or "I don't know."
            out = [_say(answer), _call("report_answer", {"recall_id": res["recall_id"],
                                                         "answer": answer}, n)]
        else:  # report_answer's reply: say the answer again, and stop
            said = [i for i in items if i.get("type") == "message"][-1]
            out = [_say(said["content"][0]["text"])]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("this example does not stream")


async def main(path: str) -> None:
    set_tracing_disabled(True)  # no network
    mem = open_world(path)
    print(f"maya asks: {MAYA}\n{ranking(mem)}\n")
    for _ in range(ROUNDS):
        for user, question in QUESTIONS.items():
            ns = f"user:{user}"
            agent = Agent(name="assistant", model=ScriptedModel(),
                          instructions=tools.INSTRUCTIONS.format(namespace=ns),
                          tools=heapmem_function_tools(mem, namespace=ns))
            result = await Runner.run(agent, question)
    print(f"the agent answered {len(QUESTIONS)} users {ROUNDS} times each; "
          f"heapmem judged {len(mem.log.judged())} recalls from the answers it reported")
    print(f"(the last answer: {result.final_output!r})\n")
    print(f"maya asks again:\n{ranking(mem)}")
    mem.close()


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "oa.db")
    asyncio.run(main(path))
