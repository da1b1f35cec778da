"""heapmem's plain tool schemas and its one dispatcher, in the shapes of
OpenAI's and Anthropic's tool calling, and in Pydantic AI (a framework that
takes JSON schemas): what any framework that takes tool schemas needs.

    python examples/tool_calling.py [path/to/store.db]

No network: the "models" are scripted stand-ins that emit tool calls in each
API's own shape (OpenAI Chat Completions' tool_calls, Anthropic Messages'
tool_use blocks; Pydantic AI's FunctionModel), answer from the memory that
holds a clock time (agent_world.model_answer), and report that answer.
Pydantic AI's part needs pydantic-ai-slim (in the test extra); without it,
that part says so.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_world import MAYA, QUESTIONS, ROUNDS, model_answer, open_world, ranking

from heapmem import tools


def openai_turn(mem, ns: str, question: str) -> str:
    """One Chat Completions exchange: the model's tool_calls, run by
    tools.call_json, their results sent back as role "tool" messages."""
    messages = [{"role": "user", "content": question}]
    # what the API returns: choices[0].message with tool_calls (arguments as JSON text)
    messages.append({"role": "assistant", "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "recall", "arguments": json.dumps({"query": question, "k": 3})}}]})
    for tc in messages[-1]["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": tc["id"], "content": tools.call_json(
            mem, tc["function"]["name"], tc["function"]["arguments"], namespace=ns)})
    res = json.loads(messages[-1]["content"])
    answer = model_answer("\n".join(m["text"] for m in res["memories"])) or "I don't know."
    call = {"name": "report_answer", "arguments": json.dumps(
        {"recall_id": res["recall_id"], "answer": answer})}
    json.loads(tools.call_json(mem, call["name"], call["arguments"], namespace=ns))
    return answer


def anthropic_turn(mem, ns: str, question: str) -> dict:
    """One Messages exchange: tool_use blocks in, tool_result blocks out."""
    content = [{"type": "tool_use", "id": "toolu_1", "name": "recall",
                "input": {"query": question, "k": 3}}]
    results = [{"type": "tool_result", "tool_use_id": b["id"],
                "content": tools.call_json(mem, b["name"], b["input"], namespace=ns)}
               for b in content if b["type"] == "tool_use"]
    res = json.loads(results[0]["content"])
    answer = model_answer("\n".join(m["text"] for m in res["memories"])) or "I don't know."
    return tools.call(mem, "report_answer", {"recall_id": res["recall_id"], "answer": answer},
                      namespace=ns)


def pydantic_ai_turn(mem, ns: str, question: str) -> str:
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def bind(name):
        return lambda **kwargs: tools.call_json(mem, name, kwargs, namespace=ns)

    schemas = tools.schemas("plain")
    agent_tools = [Tool.from_schema(bind(s["name"]), s["name"], s["description"],
                                    s["parameters"]) for s in schemas]

    def scripted(messages, info):
        parts = [p for m in messages for p in m.parts]
        last = parts[-1]
        if isinstance(last, ToolReturnPart) and last.tool_name == "recall":
            res = json.loads(last.content)
            answer = model_answer("\n".join(m["text"] for m in res["memories"]))
            return ModelResponse(parts=[ToolCallPart("report_answer", {
                "recall_id": res["recall_id"], "answer": answer or "I don't know."})])
        if isinstance(last, ToolReturnPart):  # report_answer's reply
            return ModelResponse(parts=[TextPart(", ".join(json.loads(last.content)["used"]))])
        return ModelResponse(parts=[ToolCallPart("recall", {"query": question, "k": 3})])

    agent = Agent(FunctionModel(scripted), tools=agent_tools)
    return agent.run_sync(question).output


def main(path: str) -> None:
    mem = open_world(path)
    print("tools:", ", ".join(tools.NAMES))
    print("OpenAI:", json.dumps(tools.schemas("openai")[0])[:96] + " ...")
    print("Anthropic:", json.dumps(tools.schemas("anthropic")[0])[:93] + " ...")
    print(f"\nmaya asks: {MAYA}\n{ranking(mem)}\n")
    for _ in range(ROUNDS):
        for user, question in QUESTIONS.items():
            answer = openai_turn(mem, f"user:{user}", question)
    print(f"OpenAI-shaped calls: {len(QUESTIONS)} users {ROUNDS} times each; "
          f"the last answer {answer!r}")
    out = anthropic_turn(mem, "user:ana", QUESTIONS["ana"])
    print(f"Anthropic-shaped calls: report_answer -> used {out['used']}")
    try:
        used = pydantic_ai_turn(mem, "user:ben", QUESTIONS["ben"])
        print(f"Pydantic AI (Tool.from_schema): report_answer -> used {used}")
    except ImportError:
        print("Pydantic AI: not installed (pip install pydantic-ai-slim)")
    print(f"heapmem judged {len(mem.log.judged())} recalls\n")
    print(f"maya asks again:\n{ranking(mem)}")
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "tc.db"))
