"""What a model does over MCP, with the official SDK's client: start `heapmem mcp`
on a store (stdio), list its tools, recall, answer, and report what was used.

    python examples/mcp_client.py agent.db      # the store examples/lisbon.py made

Needs the mcp extra (pip install "heapmem[mcp]").
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(db: str) -> None:
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "heapmem", "--db", db, "--now", "2025-03-14", "-n", "user:maya", "mcp"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print("instructions:", init.instructions.split(".")[0] + ".")
            tools = await session.list_tools()
            print("tools:", ", ".join(t.name for t in tools.tools))
            out = await session.call_tool("recall", {"query": "When is my flight to Lisbon?",
                                                     "k": 2})
            res = json.loads(out.content[0].text)
            print(f"recall -> recall_id {res['recall_id']}")
            for m in res["memories"]:
                print(f"  {m['id']}  {m['text']}\n      {m['explain']}")
            used = res["memories"][0]["id"]
            out = await session.call_tool("mark_used", {"ids": [used],
                                                        "recall_id": res["recall_id"]})
            print("mark_used ->", json.dumps(json.loads(out.content[0].text)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "agent.db"))
