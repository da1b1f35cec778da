"""heapmem as an MCP server: `heapmem mcp` (the official `mcp` SDK, an extra:
pip install 'heapmem[mcp]').

Owns: the MCP tools and the server's instructions to the model.  Each tool is
a thin call of the Memory method it is named after (add, recall, mark_used,
mark_ignored, forget, list; `remember` is add's older name).  The server's
instructions ask the model to call mark_used with the ids its answer used,
right after answering: that feedback is what heapmem learns from.

One server serves one namespace (from --namespace or $HEAPMEM_NAMESPACE), so a
model can neither read nor change another namespace's memories.

    heapmem --db agent.db -n user:maya mcp                      # stdio
    heapmem --db agent.db -n user:maya mcp --transport http     # http://127.0.0.1:8765/mcp

Works with mcp 1.x (FastMCP) and 2.x (MCPServer, FastMCP's new name).
"""
from __future__ import annotations

import ipaddress
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Optional

try:  # mcp >= 2: FastMCP was renamed MCPServer
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server
    from mcp.server.fastmcp.exceptions import ToolError

from .errors import HeapmemError
from .store import Memory
from .validate import MAX_K, check_namespace

#: The most memories `list` returns in one call.
MAX_LIST = 200

INSTRUCTIONS = """\
heapmem is the user's long-term memory (namespace {namespace}).

- Before answering anything that may depend on what you were told before, call
  recall with the user's question in their words.  It returns the most useful
  memories, each with its id and a one-line explanation of its rank, and a
  recall_id.
- Right after you answer, call mark_used with the ids of the memories your
  answer actually used, and the recall_id.  This is how heapmem learns which
  kinds of memory answer which kinds of question; do it every time.  If none of
  the shown memories helped, call mark_ignored with their ids instead.
- Call add for each fact, preference, instruction or event worth keeping,
  one per call, in plain words (kind: fact, preference, instruction, episode or
  note).
- forget erases memories by id (when the user asks you to); list shows the
  newest memories.
"""


def check_host(host: str) -> None:
    """The HTTP transport listens on loopback addresses only."""
    if host == "localhost":
        return
    try:
        ok = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"--host {host!r} is not a loopback address; the HTTP transport "
                         "listens on 127.0.0.1, ::1 or localhost only (put a proxy with "
                         "authentication in front of it to serve other machines)")


@contextmanager
def _told() -> Iterator[None]:
    """Bad input reaches the model as the tool's error message (the SDK hides
    the text of any other exception)."""
    try:
        yield
    except (ValueError, TypeError, HeapmemError) as e:
        raise ToolError(" ".join(str(e).split())) from None


def _iso(t: Optional[float]) -> Optional[str]:
    if t is None:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def build_server(mem: Memory, namespace: str = "default") -> Any:
    """An MCP server (FastMCP / MCPServer) whose tools act on mem, in namespace."""
    namespace = check_namespace(namespace)
    server = _Server("heapmem", instructions=INSTRUCTIONS.format(namespace=namespace),
                     log_level="WARNING")

    def own(ids: list[str]) -> list[str]:
        """ids, after checking each is a memory of this namespace."""
        if isinstance(ids, str):
            ids = [ids]
        for i in ids:
            it = mem.get(i) if isinstance(i, str) else None
            if it is None or it.namespace != namespace:
                raise ValueError(f"unknown memory id {i!r}")
        return list(ids)

    def own_recall(recall_id: Optional[int]) -> None:
        if recall_id is None:
            return
        logged = mem.logged_recall(recall_id) if isinstance(recall_id, int) else None
        if logged is None or logged.namespace != namespace:
            raise ValueError(f"unknown recall_id {recall_id}")

    def add(text: str, kind: str = "fact", source: Optional[str] = None,
            key: Optional[str] = None, importance: Optional[float] = None) -> dict[str, Any]:
        """Store one memory: a fact, preference, instruction, episode or note, in plain
        words.  kind sets its default importance (instruction 1.5, preference 1.3,
        fact 1.0, episode 0.8); source says who said it (the user's name, "tool");
        a newer memory with the same key supersedes an older one.  Returns its id."""
        with _told():
            it = mem.add(text, kind=kind, source=source, key=key, importance=importance,
                         namespace=namespace)
            return {"id": it.id, "kind": it.kind, "importance": it.importance}

    server.tool(name="add")(add)
    server.tool(name="remember", description="add under its older name. " + add.__doc__)(add)

    @server.tool()
    def recall(query: str, k: int = 5) -> dict[str, Any]:
        """The k memories most worth knowing to answer query, best first, each with its
        id, text, score and a one-line explanation of the score.  After answering,
        call mark_used with the ids your answer used and this recall_id."""
        with _told():
            if not 1 <= k <= MAX_K:
                raise ValueError(f"k must be from 1 to {MAX_K}")
            res = mem.recall(query, k=k, namespace=namespace)
            out: dict[str, Any] = {
                "recall_id": res.recall_id,
                "memories": [{"id": r.id, "text": r.text, "score": round(r.score, 6),
                              "explain": r.explain()} for r in res]}
            if res.recall_id is not None:
                out["next"] = (f"after answering, call mark_used(ids=[...], recall_id="
                               f"{res.recall_id}) with the ids your answer used")
            return out

    @server.tool()
    def mark_used(ids: list[str], recall_id: Optional[int] = None) -> dict[str, Any]:
        """Report the memories your answer used (ids from recall), right after answering.
        recall_id: the recall that showed them (default: the newest that showed them all).
        heapmem learns from this which kinds of memory answer which questions."""
        with _told():
            own_recall(recall_id)
            fb = mem.mark_used(own(ids), recall_id=recall_id)
            return {"recall_id": fb.recall_id, "used": list(fb.used),
                    "links_updated": fb.features}

    @server.tool()
    def mark_ignored(ids: list[str], recall_id: Optional[int] = None) -> dict[str, Any]:
        """Report memories that recall showed but your answer did not use."""
        with _told():
            own_recall(recall_id)
            fb = mem.mark_ignored(own(ids), recall_id=recall_id)
            return {"recall_id": fb.recall_id, "ignored": list(fb.ignored),
                    "links_updated": fb.features}

    @server.tool()
    def forget(ids: list[str]) -> dict[str, Any]:
        """Erase memories by id, for good (their text leaves the store)."""
        with _told():
            n = mem.forget(own(ids))
            return {"forgotten": n}

    @server.tool(name="list")
    def list_memories(limit: int = 20, offset: int = 0) -> dict[str, Any]:
        """The newest memories, newest first (limit at most 200), and how many there are."""
        with _told():
            if not 1 <= limit <= MAX_LIST:
                raise ValueError(f"limit must be from 1 to {MAX_LIST}")
            if offset < 0:
                raise ValueError("offset must be 0 or more")
            total = mem.stats().namespace(namespace).memories
            rows = mem.list(namespace, limit=limit, offset=offset)
            return {"total": total, "memories": [
                {"id": it.id, "text": it.text, "kind": it.kind, "source": it.source,
                 "created_at": _iso(it.created_at), "last_used_at": _iso(it.last_used_at)}
                for it in rows]}

    return server


def serve(mem: Memory, *, namespace: str = "default", transport: str = "stdio",
          host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run the server until the client disconnects (stdio) or it is stopped
    (http: streamable HTTP at http://host:port/mcp)."""
    server = build_server(mem, namespace)
    if transport == "stdio":
        server.run("stdio")
        return
    if transport != "http":
        raise ValueError(f"unknown transport {transport!r}: use stdio or http")
    check_host(host)
    settings = getattr(server, "settings", None)
    if settings is not None and hasattr(settings, "host"):  # mcp 1.x
        settings.host = host
        settings.port = port
        server.run("streamable-http")
    else:  # mcp 2.x
        server.run("streamable-http", host=host, port=port)
