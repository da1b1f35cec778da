"""The MCP tools' schemas tell a model the truth, read through the official
client from `heapmem mcp`: one tool per verb, every parameter described,
`kind` an enum of the kinds, required arguments required (a call without one
is refused, naming it), and a call that leaves out every optional argument
succeeds.  The schemas say what heapmem.tools says, the table every tool door
is built from."""
import json
import os
import sys

import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

import heapmem  # noqa: E402
from heapmem import tools  # noqa: E402


def _schema(t):
    return getattr(t, "input_schema", None) or t.inputSchema


def _is_error(result):
    e = getattr(result, "is_error", None)
    return result.isError if e is None else e


def _plain(prop):
    """An MCP property as heapmem.tools writes it: pydantic's title, and the
    null that an optional argument without a default may be, left out."""
    prop = {k: v for k, v in prop.items() if k != "title"}
    if "anyOf" in prop:
        (kept,) = [s for s in prop.pop("anyOf") if s != {"type": "null"}]
        prop.update(kept)
        if prop.get("default", 0) is None:
            del prop["default"]
    return prop


def test_schemas_are_true_through_the_official_client(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db) as mem:  # one memory of another namespace, never to be seen
        other = mem.add("Ben's train leaves at 7:01am", namespace="user:ben").id
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "heapmem", "--db", db, "-n", "user:maya", "mcp"])
    seen = {}

    async def call(session, name, args):
        r = await session.call_tool(name, args)
        text = r.content[0].text
        return (text, True) if _is_error(r) else (json.loads(text), False)

    async def main():
        async with stdio_client(params) as streams:
            async with ClientSession(*streams) as session:
                await session.initialize()
                listed = (await session.list_tools()).tools
                seen["tools"] = {t.name: (t.description, _schema(t)) for t in listed}
                # every required argument left out: refused, naming it
                for t in tools.TOOLS:
                    for p in t.params:
                        if p.required:
                            args = {q.name: "x" for q in t.params
                                    if q.required and q is not p}
                            msg, err = await call(session, t.name, args)
                            assert err and p.name in msg, (t.name, p.name, msg)
                # each tool with its required arguments only: it works
                out, err = await call(session, "add", {"text": "Booked the flight: SFO to LIS, "
                                                               "departs March 14, 9:40am"})
                assert not err and out["kind"] == "fact", out
                booking = out["id"]
                out, err = await call(session, "add", {"text": "Lisbon in spring is lovely"})
                assert not err
                wish = out["id"]
                out, err = await call(session, "list", {})
                assert not err and out["total"] == 2
                out, err = await call(session, "recall", {"query": "When is my flight to Lisbon?"})
                assert not err and {booking, wish} <= {m["id"] for m in out["memories"]}, out
                out, err = await call(session, "mark_ignored", {"ids": [wish]})
                assert not err and out["ignored"] == [wish], out
                out, err = await call(session, "mark_used", {"ids": [booking]})
                assert not err and out["used"] == [booking], out
                out, err = await call(session, "recall", {"query": "When is my flight to Lisbon?"})
                out, err = await call(session, "report_answer", {
                    "recall_id": out["recall_id"], "answer": "March 14 at 9:40am"})
                assert not err and out["used"] == [booking], out
                # a kind the enum does not hold is refused
                msg, err = await call(session, "add", {"text": "x y", "kind": "gossip"})
                assert err and "kind" in msg
                # another namespace's memory is unknown here
                msg, err = await call(session, "forget", {"ids": [other]})
                assert err and "unknown memory id" in msg
                out, err = await call(session, "forget", {"ids": [wish]})
                assert not err and out == {"forgotten": 1}

    anyio.run(main)
    listed = seen["tools"]
    # one tool per verb, in heapmem.tools' order, no twin names
    assert list(listed) == list(tools.NAMES)
    assert len({d for d, _ in listed.values()}) == len(listed)
    for t in tools.TOOLS:
        description, schema = listed[t.name]
        assert description == t.description
        props = schema.get("properties", {})
        assert set(props) == {p.name for p in t.params}
        assert sorted(schema.get("required", [])) == sorted(p.name for p in t.params
                                                            if p.required)
        for p in t.params:
            prop = props[p.name]
            assert prop.get("description"), (t.name, p.name)  # every parameter described
            assert _plain(prop) == p.schema, (t.name, p.name)
            if p.required:
                assert "default" not in prop, (t.name, p.name)
    assert listed["add"][1]["properties"]["kind"]["enum"] == list(heapmem.KIND_IMPORTANCE)
    assert _plain(listed["recall"][1]["properties"]["kinds"])["items"]["enum"] == list(
        heapmem.KIND_IMPORTANCE)
    assert "recall_id" in listed["report_answer"][1]["required"]
