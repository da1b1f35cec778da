"""heapmem as an MCP server: `heapmem mcp` (the official `mcp` SDK, an extra:
pip install "heapmem[mcp]").

Owns: the MCP server built from heapmem.tools (one tool per verb: add,
recall, report_answer, mark_used, mark_ignored, forget, list, each a thin
call of the Memory method it is named after; their schemas, descriptions and
checks are heapmem.tools', so the schema a client reads is the one every
other tool door gives), and who may reach them over HTTP.  The server's
instructions ask the model to call report_answer with its answer right after
answering: that feedback is what heapmem learns from, and a model that never
reports ids still teaches it.

One server serves one namespace (from --namespace or $HEAPMEM_NAMESPACE), so a
model can neither read nor change another namespace's memories.

    heapmem --db agent.db -n user:maya mcp                      # stdio
    HEAPMEM_MCP_TOKEN=... heapmem --db agent.db -n user:maya mcp --transport http

Over HTTP (streamable HTTP at http://HOST:PORT/mcp) every request passes the
Gate first, an ASGI middleware around the SDK's app: its Host header must name
the address served (host:port, or the bare host; localhost too on 127.0.0.1
and ::1), its Origin, when it has one, must be http://<that host:port> (else
403: a web page that rebinds its own name to 127.0.0.x is refused), and, when
the server has a token, it must carry `Authorization: Bearer <token>` (else
401).  Nothing reaches a tool before that.  A token is required to listen on
an address that is not loopback.

Works with mcp 1.x (FastMCP) and 2.x (MCPServer, FastMCP's new name).
"""
from __future__ import annotations

import copy
import errno
import hmac
import inspect
import ipaddress
import json
import socket
import sys
from contextlib import contextmanager
from typing import Annotated, Any, Awaitable, Callable, Iterator, Optional

from pydantic import Field  # the mcp SDK's own dependency

try:  # mcp >= 2: FastMCP was renamed MCPServer
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server
    from mcp.server.fastmcp.exceptions import ToolError

from .. import tools
from ..errors import AddressInUseError, HeapmemError
from ..store import Memory
from ..validate import check_namespace

#: The most memories `list` returns in one call; the server's instructions
#: to the model (heapmem.tools owns both, for every tool door).
MAX_LIST = tools.MAX_LIST
INSTRUCTIONS = tools.INSTRUCTIONS


#: The environment variable that holds the HTTP transport's bearer token.
TOKEN_ENV = "HEAPMEM_MCP_TOKEN"

#: The shortest token accepted (a token is a secret: make it long and random).
MIN_TOKEN = 16


def is_loopback(host: str) -> bool:
    """Whether host is a loopback address (127.0.0.0/8, ::1) or localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, token: Optional[str] = None) -> None:
    """The HTTP transport listens on a loopback address, or elsewhere with a token."""
    if token is None and not is_loopback(host):
        raise ValueError(f"--host {host!r} is not a loopback address; the HTTP transport "
                         "listens on 127.0.0.1, ::1 or localhost only, unless it has a token "
                         f"(--token or ${TOKEN_ENV}) that every request must carry")


def check_token(token: Optional[str]) -> Optional[str]:
    """token, after checking it can be a bearer token (None: no token)."""
    if token is None:
        return None
    if len(token) < MIN_TOKEN or not token.isascii() or not token.isprintable() \
            or any(c.isspace() for c in token):
        raise ValueError(f"the MCP token must be at least {MIN_TOKEN} printable ASCII "
                         "characters without spaces, like the output of: python -c "
                         "\"import secrets; print(secrets.token_urlsafe(32))\"")
    return token


def _served_names(host: str, port: int) -> Optional[set[str]]:
    """The Host header values that name host:port (lower case), or None for a
    wildcard address (0.0.0.0, ::), where any name may reach the server."""
    bare = host.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        ip = None
    if ip is not None and ip.is_unspecified:
        return None
    names = {bare}
    if bare in ("localhost", "127.0.0.1", "::1"):  # localhost never resolves elsewhere
        names |= {"localhost", "127.0.0.1", "::1"}
    out = set()
    for n in names:
        n = f"[{n}]" if ":" in n else n
        out |= {n, f"{n}:{port}"}
    return out


Send = Callable[[dict[str, Any]], Awaitable[None]]


class Gate:
    """ASGI middleware: the Host, Origin and bearer-token checks of every HTTP
    request, before the wrapped app (the SDK's) sees it."""

    def __init__(self, app: Any, *, host: str, port: int, token: Optional[str] = None):
        self.app = app
        self.names = _served_names(host, port)
        self.origins = {n for n in self.names or () if n.endswith(f":{port}")}
        checked = check_token(token)
        self.token = None if checked is None else checked.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope.get("type") not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": message}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="heapmem"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: dict[str, Any]) -> Optional[tuple[int, str]]:
        """(status, message) when the request must not reach the server."""
        headers: dict[bytes, list[bytes]] = {}
        for k, v in scope.get("headers") or ():
            headers.setdefault(k.lower(), []).append(v)
        hosts = headers.get(b"host", [])
        if len(hosts) != 1:
            return 403, "a request needs exactly one Host header"
        host = hosts[0].decode("latin-1").strip().lower()
        if self.names is not None and host not in self.names:
            return 403, "the Host header does not name this server"
        origins = headers.get(b"origin", [])
        if len(origins) > 1:
            return 403, "a request has at most one Origin header"
        if origins:  # a browser's request: its page must be this server's own
            origin = origins[0].decode("latin-1").strip().lower()
            scheme = "https://" if scope.get("scheme") in ("https", "wss") else "http://"
            where = origin[len(scheme):] if origin.startswith(scheme) else None
            ok = where in self.origins if self.names is not None else where == host
            if not ok:
                return 403, "the Origin header is not this server's"
        if self.token is not None:
            auth = headers.get(b"authorization", [])
            given = auth[0] if len(auth) == 1 else b""
            scheme_, _, credential = given.partition(b" ")
            ok = scheme_.lower() == b"bearer" and hmac.compare_digest(credential.strip(),
                                                                      self.token)
            if not ok:
                return 401, "this server needs Authorization: Bearer <token>"
        return None


@contextmanager
def _told() -> Iterator[None]:
    """Bad input reaches the model as the tool's error message (the SDK hides
    the text of any other exception)."""
    try:
        yield
    except (ValueError, TypeError, HeapmemError) as e:
        raise ToolError(" ".join(str(e).split())) from None


def _annotation(p: tools.Param) -> Any:
    """A tool parameter's type for the SDK, which writes the tool's schema
    from the function's signature: any value (heapmem.tools checks each, and
    says what is wrong in one sentence), whose schema is the parameter's
    schema in heapmem.tools, word for word."""
    def schema(s: dict[str, Any]) -> None:
        s.clear()
        s.update(copy.deepcopy(p.schema))
    return Annotated[Any, Field(json_schema_extra=schema)]


def _tool_function(t: tools.Tool, mem: Memory, namespace: str) -> Callable[..., dict[str, Any]]:
    """The function the SDK registers as the tool t: its signature is t's
    parameters (required ones without a default, the others None: left
    out), its body tools.call."""
    def run(**arguments: Any) -> dict[str, Any]:
        with _told():
            return tools.call(mem, t.name, arguments, namespace=namespace)

    params = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY,
                                annotation=_annotation(p),
                                default=inspect.Parameter.empty if p.required else None)
              for p in sorted(t.params, key=lambda p: not p.required)]
    run.__signature__ = inspect.Signature(params,  # type: ignore[attr-defined]
                                          return_annotation=dict[str, Any])
    run.__name__ = t.name
    run.__doc__ = t.description
    return run


def build_server(mem: Memory, namespace: str = "default") -> Any:
    """An MCP server (FastMCP / MCPServer) whose tools (heapmem.tools.TOOLS,
    in their order, one per verb) act on mem, in namespace."""
    namespace = check_namespace(namespace)
    server = _Server("heapmem", instructions=INSTRUCTIONS.format(namespace=namespace),
                     log_level="WARNING")
    for t in tools.TOOLS:
        server.tool(name=t.name, description=t.description)(_tool_function(t, mem, namespace))
    return server


def _sdk_http_app(server: Any, host: str, security: Any) -> Any:
    """The SDK's streamable-HTTP ASGI app (mcp 1.x or 2.x)."""
    settings = getattr(server, "settings", None)
    if settings is not None and hasattr(settings, "host"):  # mcp 1.x
        settings.host = host
        if security is not None and hasattr(settings, "transport_security"):
            settings.transport_security = security
        return server.streamable_http_app()
    return server.streamable_http_app(host=host, transport_security=security)


def _sdk_security(host: str, port: int) -> Any:
    """The SDK's own DNS-rebinding settings for the names Gate allows (a
    second lock, the same key), or None where the SDK has none."""
    try:
        from mcp.server.transport_security import TransportSecuritySettings
    except ImportError:  # pragma: no cover - an old mcp 1.x
        return None
    names = _served_names(host, port)
    if names is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=sorted(names),
        allowed_origins=sorted(f"http://{n}" for n in names if n.endswith(f":{port}")))


def http_app(mem: Memory, *, namespace: str = "default", host: str = "127.0.0.1",
             port: int = 8765, token: Optional[str] = None) -> Any:
    """The ASGI app `heapmem mcp --transport http` serves: the SDK's
    streamable-HTTP app at /mcp, behind Gate."""
    check_host(host, token)
    server = build_server(mem, namespace)
    return Gate(_sdk_http_app(server, host, _sdk_security(host, port)), host=host, port=port,
                token=token)


def url(host: str, port: int) -> str:
    """The address a client connects to: http://host:port/mcp (an IPv6 host in brackets)."""
    h = host.strip("[]")
    return f"http://[{h}]:{port}/mcp" if ":" in h else f"http://{h}:{port}/mcp"


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening, for the HTTP transport.
    A port another program holds raises AddressInUseError, any other failure
    to listen OSError, each as one sentence."""
    h = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind((h, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        why = e.strerror or str(e)
        if e.errno == errno.EADDRINUSE:
            raise AddressInUseError(f"port {port} on {h} is in use: another program listens "
                                    f"there ({why}); pick another with --port") from None
        raise OSError(f"cannot listen on port {port} of {h}: {why}") from None
    sock.set_inheritable(True)
    return sock


def serve(mem: Memory, *, namespace: str = "default", transport: str = "stdio",
          host: str = "127.0.0.1", port: int = 8765, token: Optional[str] = None,
          log: Any = None, sock: Optional[socket.socket] = None) -> None:
    """Run the server until the client disconnects (stdio) or it is stopped
    (http: streamable HTTP at http://host:port/mcp, behind Gate; token: the
    bearer token every request must carry, required off loopback).  Over
    http, once the port is bound, one line on log (default sys.stderr) says
    the URL served and whether a token is required; a port already in use
    raises AddressInUseError before anything is served.  sock: the socket
    listen(host, port) gave (the CLI binds it before it opens the store),
    closed when the server stops; by default serve binds its own."""
    if transport == "stdio":
        build_server(mem, namespace).run("stdio")
        return
    if transport != "http":
        raise ValueError(f"unknown transport {transport!r}: use stdio or http")
    token = check_token(token)
    app = http_app(mem, namespace=namespace, host=host, port=port, token=token)
    sock = sock if sock is not None else listen(host, port)
    try:
        where = f"serving MCP at {url(host, port)} (namespace {namespace})"
        out = log or sys.stderr
        if token is None:  # a warning: anyone on the machine can use the store
            out.write(f"heapmem: warning: {where} with no token required: any program on this "
                      f"machine can use the store; set ${TOKEN_ENV} (or --token) to require "
                      "one\n")
        else:
            out.write(f"heapmem: {where}; a token is required: Authorization: Bearer "
                      "<token>\n")
        out.flush()
        import uvicorn
        config = uvicorn.Config(app, host=host.strip("[]"), port=port, log_level="warning",
                                proxy_headers=False, server_header=False)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
