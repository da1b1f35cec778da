"""The framework doors, each through the real package the test extra
installs: every example in examples/ runs (a scripted model, no network;
tests/test_docs.py runs each for docs/frameworks.md and checks what it
prints) and its agent's reported answers teach heapmem, so Maya's booking,
last on day one, comes first; and each door's own promises (thin: the scores and schemas
are heapmem's; bad input goes back to the model as one sentence)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import heapmem
from heapmem import tools

ROOT = Path(__file__).resolve().parent.parent
BOOKING = "Booked the flight: SFO to LIS, departs March 14, 9:40am"


def session(name):
    """The output docs/frameworks.md shows for `$ python examples/NAME ...`: a real
    run against the real package (tests/test_docs.py runs each and checks the doc
    is what it prints)."""
    doc = (ROOT / "docs" / "frameworks.md").read_text()
    out = doc.split(f"$ python examples/{name} ")[1].split("\n", 1)[1].split("```")[0]
    if "maya asks again:" not in out:  # async_agent.py shows only the end
        return out, "", out
    before, after = out.split("maya asks again:")
    return out, before, after


def first(text):
    """The text of the first ranked line of text."""
    return next(line.split("  ", 2)[-1] for line in text.splitlines()
                if line.strip().startswith("1. "))


@pytest.mark.parametrize("name", ["llamaindex_agent.py", "langchain_agent.py",
                                  "openai_agents_agent.py", "tool_calling.py", "async_agent.py"])
def test_each_example_runs_and_its_feedback_lifts_the_booking(name):
    out, before, after = session(name)
    if before:
        assert first(before) != BOOKING  # day one: the booking is not first
    assert first(after) == BOOKING, out
    assert "judged 15 recalls" in out or "judged 17 recalls" in out, out


def test_an_example_leaves_a_sound_store(tmp_path):
    pytest.importorskip("langchain.agents")
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "langchain_agent.py"),
                        str(tmp_path / "x.db")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == session("langchain_agent.py")[0].rstrip("\n") + "\n"
    with heapmem.open(str(tmp_path / "x.db"), readonly=True) as mem:
        assert mem.check().ok
        assert len(mem.log.judged()) == 15 + 1  # the agent's, and the retriever's


def test_the_schemas_in_each_shape_are_the_tool_table(mem):
    for fmt in tools.FORMATS:
        got = tools.schemas(fmt)
        assert len(got) == len(tools.TOOLS)
        flat = [s.get("function", s) for s in got]
        assert [s["name"] for s in flat] == list(tools.NAMES)
        for s, t in zip(flat, tools.TOOLS):
            assert (s.get("parameters") or s["input_schema"]) == t.parameters
            for name, prop in t.parameters["properties"].items():
                assert prop["description"], (t.name, name)
    with pytest.raises(ValueError, match="unknown format"):
        tools.schemas("gemini")


def test_the_dispatcher_checks_what_the_schema_says(mem):
    out = tools.call(mem, "add", '{"text": "Window seat, always", "kind": "preference"}',
                     namespace="user:maya")
    assert out["kind"] == "preference"
    for name, args, words in [
            ("add", {"text": "x y", "kind": "gossip"}, "kind must be one of"),
            ("add", {}, "add needs text"),
            ("add", {"text": "x y", "colour": "red"}, "takes no argument 'colour'"),
            ("recall", {"query": "seat", "k": 0}, "k must be from 1"),
            ("report_answer", {"answer": "x"}, "needs recall_id"),
            ("report_answer", {"answer": "x", "recall_id": "1"}, "recall_id must be an integer"),
            ("mark_used", {"ids": ["m1"], "recall_id": True}, "recall_id must be an integer"),
            ("forget", {"ids": [out["id"]]}, "unknown memory id"),  # another namespace's
            ("fly", {}, "unknown tool"), ("recall", "{not json", "not valid JSON")]:
        with pytest.raises((ValueError, TypeError), match=words):
            tools.call(mem, name, args, namespace="user:ben")
    err = json.loads(tools.call_json(mem, "recall", {"query": "seat", "k": 0}))
    assert "k must be from 1" in err["error"]
    assert mem.count == 1  # nothing written by the refused calls


def test_langchain_tools_and_retriever(mem):
    pytest.importorskip("langchain_core")
    from heapmem.adapters.langchain import HeapmemRetriever, heapmem_tools
    lc = {t.name: t for t in heapmem_tools(mem, namespace="user:maya")}
    assert list(lc) == list(tools.NAMES)
    assert lc["recall"].args_schema == tools.tool("recall").parameters
    added = lc["add"].invoke({"text": BOOKING})
    assert added["id"] == "m1"
    # bad input reaches the model as the tool's output, one sentence
    assert "k must be from 1" in lc["recall"].invoke({"query": "flight", "k": 0})
    r = HeapmemRetriever(mem=mem, namespace="user:maya", k=2)
    docs = r.invoke("When is my flight?")
    assert [d.id for d in docs] == ["m1"] and docs[0].metadata["recall_id"] == r.recall_id
    assert docs[0].metadata["score"] == mem.recall("When is my flight?", namespace="user:maya",
                                                   track=False)[0].score
    assert r.mark_used(["m1"]).used == ("m1",)


def test_llamaindex_block_recalls_once_a_question_and_reports_the_reply(mem):
    pytest.importorskip("llama_index.core")
    import asyncio

    from llama_index.core.base.llms.types import ChatMessage

    from heapmem.adapters.llamaindex import HeapmemMemoryBlock
    mem.add(BOOKING, namespace="user:maya")
    block = HeapmemMemoryBlock(mem=mem, namespace="user:maya")
    q = ChatMessage(role="user", content="When is my flight?")

    async def main():
        text = await block.aget([q])
        assert await block.aget([q]) == text and "(id m1)" in text  # one recall a question
        await block.aget([q, ChatMessage(role="assistant", content="March 14 at 9:40am")])
        await block.aput([ChatMessage(role="user", content="I prefer aisle seats now")])

    asyncio.run(main())
    judged = mem.log.judged()
    assert len(judged) == 1 and mem.stats().recalls == 1
    assert [it.text for it in mem.list("user:maya")][0] == "I prefer aisle seats now"


def test_openai_agents_function_tools_are_the_tool_table(mem):
    pytest.importorskip("agents")
    import asyncio

    from heapmem.adapters.openai_agents import heapmem_function_tools
    fts = heapmem_function_tools(mem, namespace="user:maya")
    assert [(f.name, f.params_json_schema) for f in fts] == [
        (t.name, t.parameters) for t in tools.TOOLS]
    add = fts[0]
    out = asyncio.run(add.on_invoke_tool(None, json.dumps({"text": BOOKING})))
    assert json.loads(out)["id"] == "m1"
    out = asyncio.run(add.on_invoke_tool(None, json.dumps({"text": " "})))
    assert "empty" in json.loads(out)["error"]
