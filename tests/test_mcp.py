"""The MCP server, end to end with the SDK's own client: `heapmem mcp` started
as a subprocess (stdio, and streamable HTTP on loopback with a token), its
tools listed and called, and the learned links changed by mark_used.  (Who
may reach the HTTP server: tests/test_trust_io.py.)"""
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import AsyncExitStack

import pytest

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

import heapmem  # noqa: E402
from heapmem.adapters import mcp_server  # noqa: E402

from conftest import stop  # noqa: E402

NOW = "2026-11-30T12:00:00Z"
TOOLS = {"add", "recall", "report_answer", "mark_used", "mark_ignored", "forget",
         "list"}


def server_args(db, *extra):
    return ["-m", "heapmem", "--db", db, "--now", NOW, "-n", "user:maya", "mcp", *extra]


def run(main, timeout=120):
    """Run an async test body, bounded in time."""
    async def bounded():
        with anyio.fail_after(timeout):
            await main()
    anyio.run(bounded)


def payload(result):
    """A tool result's JSON (its first text content) and whether it is an error."""
    is_error = getattr(result, "is_error", None)
    if is_error is None:
        is_error = result.isError
    text = result.content[0].text
    if is_error:
        return text, True
    return json.loads(text), False


async def call(session, tool, **args):
    return payload(await session.call_tool(tool, args))


def links(db):
    """The links user:maya sees: her own evidence (the pool needs five namespaces)."""
    with heapmem.open(db, readonly=True) as mem:
        return {ln.feature: (ln.alpha, ln.beta, ln.n) for ln in mem.links("user:maya")}


async def conversation(session, db, init_instructions):
    """What a model does: list the tools, remember, recall, answer, mark_used."""
    tools = await session.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    assert "report_answer" in init_instructions and "mark_used" in init_instructions
    assert "right after you answer" in init_instructions.lower()
    for text, kind in [("Booked the flight: SFO to LIS, departs March 14, 9:40am", "fact"),
                       ("Lisbon! I'd love to visit Lisbon someday", "preference"),
                       ("Flights to Lisbon from SFO cost around $700 in spring", "tool_result")]:
        out, err = await call(session, "add", text=text, kind=kind)
        assert not err and out["id"].startswith("m")
    assert links(db) == {}
    out, err = await call(session, "recall", query="When is my flight to Lisbon?")
    assert not err and out["recall_id"] == 1
    mems = out["memories"]
    assert len(mems) == 3 and all({"id", "text", "score", "explain"} <= set(m) for m in mems)
    assert mems[0]["explain"].startswith("score ")
    booking = [m["id"] for m in mems if m["text"].startswith("Booked")][0]
    out, err = await call(session, "mark_used", ids=[booking], recall_id=1)
    assert not err and out["used"] == [booking] and out["links_updated"] > 0
    learned = links(db)
    assert learned and learned["kind:fact"][0] > 0  # the links changed
    # judging it again, an unknown id, a bad text: a clear error, nothing written
    msg, err = await call(session, "mark_used", ids=[booking], recall_id=1)
    assert err and "already has feedback" in msg
    msg, err = await call(session, "mark_ignored", ids=["m99"], recall_id=1)
    assert err and "unknown memory id" in msg
    msg, err = await call(session, "add", text="   ")
    assert err and "empty" in msg
    msg, err = await call(session, "recall", query="x", k=0)
    assert err and "k must be" in msg
    assert links(db) == learned
    other = [m["id"] for m in mems if m["id"] != booking]
    out, err = await call(session, "mark_ignored", ids=other[:1], recall_id=1)
    assert not err and out["ignored"] == other[:1]
    # a model that reports its answer, not ids
    out, err = await call(session, "recall", query="When is my flight to Lisbon?")
    assert not err and out["recall_id"] == 2 and "report_answer(recall_id=2" in out["next"]
    before = links(db)
    out, err = await call(session, "report_answer", recall_id=2,
                          answer="Your flight leaves March 14 at 9:40am, SFO to LIS.")
    assert not err and out["used"] == [booking] and out["links_updated"] > 0
    assert {j["id"]: j["verdict"] for j in out["judgements"]}[booking] == "used"
    assert links(db) != before
    after = links(db)
    for kwargs, words in [({"recall_id": 2, "answer": "March 14"}, "already has feedback"),
                          ({"recall_id": 99, "answer": "March 14"}, "unknown recall_id"),
                          ({"recall_id": 2, "answer": " "}, "empty")]:
        msg, err = await call(session, "report_answer", **kwargs)
        assert err and words in msg, msg
    assert links(db) == after
    # the kind and time filters
    out, err = await call(session, "recall", query="Lisbon flights", kinds=["preference"])
    assert not err and [m["text"][:7] for m in out["memories"]] == ["Lisbon!"]
    out, err = await call(session, "recall", query="Lisbon flights", until="2026-11-30")
    assert not err and out["memories"] == []  # all three were added at --now
    msg, err = await call(session, "recall", query="Lisbon", since="someday")
    assert err and "since must be unix seconds" in msg
    out, err = await call(session, "list", limit=2)
    assert not err and out["total"] == 3 and len(out["memories"]) == 2
    assert out["memories"][0]["created_at"] == "2026-11-30T12:00:00+00:00"
    out, err = await call(session, "forget", ids=[other[1]])
    assert not err and out == {"forgotten": 1}
    out, err = await call(session, "list")
    assert out["total"] == 2


def test_stdio_end_to_end(tmp_path):
    db = str(tmp_path / "agent.db")
    params = StdioServerParameters(command=sys.executable, args=server_args(db),
                                   env=dict(os.environ))

    async def main():
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                await conversation(session, db, init.instructions)

    run(main)
    with heapmem.open(db) as mem:
        assert mem.check().ok and mem.count == 2
        assert mem.namespaces == ["user:maya"]


def test_namespaces_are_kept_apart(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db) as mem:
        theirs = mem.add("Ben's train leaves at 7:01am", namespace="user:ben")
        r = mem.recall("When does the train leave?", namespace="user:ben")
    params = StdioServerParameters(command=sys.executable, args=server_args(db),
                                   env=dict(os.environ))

    async def main():
        async with stdio_client(params) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                out, _ = await call(session, "recall", query="When does the train leave?")
                assert out["memories"] == []
                for tool, args in [("forget", {"ids": [theirs.id]}),
                                   ("mark_used", {"ids": [theirs.id]}),
                                   ("mark_used", {"ids": [theirs.id],
                                                  "recall_id": r.recall_id})]:
                    msg, err = await call(session, tool, **args)
                    assert err and "unknown" in msg
                out, _ = await call(session, "list")
                assert out["total"] == 0

    run(main)
    with heapmem.open(db) as mem:
        assert mem.get(theirs.id) is not None and mem.links() == []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TOKEN = "test-token-0123456789abcdef"


def http_client(url, headers):
    """The SDK's streamable-HTTP client, sending headers (mcp 1.x or 2.x)."""
    try:
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client
        return streamablehttp_client(url, headers=headers)
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def test_streamable_http_end_to_end(tmp_path):
    db = str(tmp_path / "agent.db")
    port = free_port()
    proc = subprocess.Popen([sys.executable] + server_args(db, "--transport", "http",
                                                           "--port", str(port),
                                                           "--token", TOKEN),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:  # wait for the server to listen (bounded)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)

        async def main():
            async with AsyncExitStack() as stack:
                streams = await stack.enter_async_context(
                    http_client(f"http://127.0.0.1:{port}/mcp",
                                {"Authorization": f"Bearer {TOKEN}"}))
                session = await stack.enter_async_context(ClientSession(streams[0],
                                                                        streams[1]))
                init = await session.initialize()
                await conversation(session, db, init.instructions)

        run(main)
    finally:
        stop(proc)
        proc.stderr.close()
    with heapmem.open(db) as mem:
        assert mem.check().ok and mem.count == 2


def test_build_server_in_process(tmp_path):
    """The tools without a subprocess, through the server object's own API."""
    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1_796_040_000.0) as mem:
        server = mcp_server.build_server(mem, "user:zoe")

        async def main():
            tools = await server.list_tools()
            assert {t.name for t in tools} == TOOLS

        run(main)
    with pytest.raises(ValueError, match="reserved"):
        mcp_server.build_server(mem, "*")


@pytest.mark.parametrize("host, ok", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                      ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                      ("10.0.0.1", False), ("example.com", False)])
def test_http_listens_on_loopback_only_without_a_token(host, ok):
    if ok:
        mcp_server.check_host(host)
    else:
        with pytest.raises(ValueError, match="loopback"):
            mcp_server.check_host(host)
    mcp_server.check_host(host, TOKEN)  # with a token, anywhere (nothing listens here)
