"""The two doors that take input from outside heapmem's own verbs (issue 11):

- `heapmem sql` without --write (heapmem.adapters.sqlguard): one statement, reading
  only; VACUUM INTO, ATTACH, a second statement, a PRAGMA with a value are
  refused before anything runs, and the connection is left as it was;
- `heapmem mcp --transport http`: a bearer token, and the Host and Origin of
  every request checked against the address served (DNS rebinding), so a web
  page cannot reach the store through the user's browser.

Every server here listens on a loopback address only.
"""
import io
import json
import os
import socket
import subprocess
import sys
import time
from contextlib import AsyncExitStack, contextmanager

import apsw
import pytest

import heapmem
from heapmem.adapters import cli, sqlguard
from heapmem.errors import ReadOnlyError

from conftest import stop

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC


# -- heapmem sql, read mode ------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db, clock=lambda: T) as mem:
        mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", namespace="user:maya")
        mem.add("Lisbon! I'd love to visit Lisbon someday", kind="preference",
                namespace="user:maya")
    return db


def sql(db, *argv):
    """`heapmem --db db sql ...` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--db", db, "sql", *argv], clock=lambda: T, stdout=out, stderr=err,
                    env={})
    return code, out.getvalue(), err.getvalue()


def refused(result, *words):
    code, out, err = result
    assert code == 1 and out == "", result
    assert len(err.strip().splitlines()) == 1 and err.startswith("heapmem: error: "), err
    for w in words:
        assert w in err, (w, err)


def count(db):
    with heapmem.open(db, readonly=True) as mem:
        return mem.count


def test_vacuum_into_a_path_is_refused_and_no_file_appears(store, tmp_path):
    target = tmp_path / "elsewhere" / "copy.db"
    target.parent.mkdir()
    refused(sql(store, f"VACUUM INTO '{target}'"), "writes to the store or the file system",
            "VACUUM INTO", "add --write")
    refused(sql(store, "VACUUM"), "VACUUM")
    assert not target.exists() and os.listdir(target.parent) == []
    with heapmem.open(store) as mem:  # the guard itself, on a read-write connection
        with pytest.raises(ReadOnlyError, match="VACUUM INTO"):
            sqlguard.run_read_only(mem.connection, f"VACUUM INTO '{target}'")
    assert not target.exists()


def test_attach_is_refused(store, tmp_path):
    other = tmp_path / "other.db"
    refused(sql(store, f"ATTACH 'file:{other}?mode=rwc' AS other"), "ATTACH", "add --write")
    refused(sql(store, "DETACH main"), "DETACH")
    assert not other.exists()


def test_a_second_statement_is_refused_and_nothing_runs(store):
    refused(sql(store, "SELECT 1; DELETE FROM memories"), "one statement per call",
            "DELETE FROM memories")
    refused(sql(store, "SELECT 1; SELECT 2"), "one statement per call")
    refused(sql(store, "SELECT 1; -- a comment\n SELECT 2"), "one statement per call")
    assert count(store) == 2
    with heapmem.open(store) as mem:  # not even on a read-write connection
        with pytest.raises(ValueError, match="one statement per call"):
            sqlguard.run_read_only(mem.connection, "SELECT 1; DELETE FROM memories")
        assert mem.count == 2


@pytest.mark.parametrize("statement, words", [
    ("PRAGMA user_version=5", ["sets a pragma", "user_version = 5"]),
    ("PRAGMA writable_schema=1", ["writable_schema"]),
    ("PRAGMA writable_schema", ["does not allow"]),
    ("PRAGMA wal_checkpoint", ["wal_checkpoint"]),
    ("DELETE FROM memories", ["DELETE on memories"]),
    ("UPDATE memories SET importance = 2", ["UPDATE of memories.importance"]),
    ("INSERT INTO memories_fts(memories_fts) VALUES('rebuild')", ["INSERT on memories_fts"]),
    ("DROP TABLE memories", ["DROP TABLE memories"]),
    ("CREATE TEMP TABLE t(x)", ["CREATE TEMP TABLE"]),
    ("BEGIN", ["transaction"]),
    ("SAVEPOINT a", ["transaction"]),
    ("ANALYZE", ["ANALYZE"]),
    ("REINDEX", ["REINDEX"]),
    ("EXPLAIN DELETE FROM memories", ["DELETE on memories"]),
    ("SELECT load_extension('x')", ["load_extension"]),
])
def test_statements_that_could_write_are_refused(store, statement, words):
    with heapmem.open(store, readonly=True) as mem:
        version = mem.schema_version
    refused(sql(store, statement), *words, "add --write")
    with heapmem.open(store) as mem:
        assert mem.count == 2 and mem.schema_version == version and mem.check().ok
    # no file but the store's own (its -wal and -shm come and go)
    assert [f for f in os.listdir(os.path.dirname(store)) if not f.startswith("agent.db")] == []


def test_pragma_user_version_is_refused_on_a_writable_connection(store):
    with heapmem.open(store) as mem:
        version = mem.schema_version
        with pytest.raises(ReadOnlyError, match="user_version = 5"):
            sqlguard.run_read_only(mem.connection, "PRAGMA user_version=5")
        assert mem.schema_version == version


def test_reads_work(store):
    code, out, err = sql(store, "SELECT heap_qtype('When is my flight?') AS qtype, "
                                "count(*) AS n FROM memories", "--json")
    assert (code, err) == (0, "") and json.loads(out) == [{"qtype": "when", "n": 2}]
    # a ';' inside a string literal is no second statement, nor is a trailing comment
    code, out, _ = sql(store, "SELECT 'a; DELETE FROM memories; b' AS s;  -- done", "--json")
    assert code == 0 and json.loads(out) == [{"s": "a; DELETE FROM memories; b"}]
    code, out, _ = sql(store, "SELECT id FROM memories WHERE text LIKE '%;%' OR 1 /* ; */",
                       "--json")
    assert code == 0 and len(json.loads(out)) == 2
    for statement in ("PRAGMA table_info(memories)", "PRAGMA user_version",
                      "PRAGMA integrity_check", "SELECT * FROM pragma_index_list('memories')",
                      "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                      "WHERE n < 3) SELECT n FROM r",
                      "SELECT m.id FROM memories_fts f JOIN memories m ON m.seq = f.rowid "
                      "WHERE memories_fts MATCH 'Lisbon'"):
        code, out, err = sql(store, statement)
        assert code == 0 and err == "", (statement, err)
    assert sql(store, "-- nothing but a comment")[0] == 0
    refused(sql(store, "SELECT nope"), "SQL error", "nope")
    assert count(store) == 2


def test_the_store_still_works_after_a_refusal(store):
    with heapmem.open(store, clock=lambda: T) as mem:
        conn = mem.connection
        for bad in ("DELETE FROM memories", "SELECT 1; SELECT 2", "VACUUM", "SELECT nope"):
            with pytest.raises((ReadOnlyError, ValueError, apsw.Error)):
                sqlguard.run_read_only(conn, bad)
            assert conn.authorizer is None  # removed after each call
        assert sqlguard.run_read_only(conn, "SELECT count(*) FROM memories") == (
            ["count(*)"], [[2]])
        assert conn.authorizer is None
        it = mem.add("Seat preference: window", kind="preference", namespace="user:maya")
        assert mem.count == 3 and mem.forget([it.id]) == 1
        assert mem.check().ok


def test_an_authorizer_of_the_callers_own_is_put_back(store):
    with heapmem.open(store) as mem:
        calls = []

        def mine(*args):
            calls.append(args)
            return apsw.SQLITE_OK

        mem.connection.authorizer = mine
        with pytest.raises(ReadOnlyError):
            sqlguard.run_read_only(mem.connection, "DELETE FROM memories")
        assert mem.connection.authorizer is mine
        mem.connection.authorizer = None


def test_write_runs_the_sql_as_it_is(store):
    code, out, _ = sql(store, "UPDATE memories SET importance = 2 WHERE id = 'm1'", "--write")
    assert code == 0 and out.strip() == "(no rows)"
    with heapmem.open(store, readonly=True) as mem:
        assert mem.get("m1").importance == 2
    p = subprocess.run([sys.executable, "-m", "heapmem", "sql", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    text = " ".join(p.stdout.split())
    assert "bypassing heapmem's invariants" in text and "heapmem check" in text


# -- MCP over HTTP ---------------------------------------------------------------

TOKEN = "trust-io-token-0123456789abcdef"
NS = "user:maya"


def free_port(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def mcp_http(db, host="127.0.0.1", *extra, env=None):
    """`heapmem mcp --transport http` on a free port of a loopback host, until
    the block ends: yields (port, the process, a function giving its stderr)."""
    assert host in ("127.0.0.1", "127.0.0.2", "::1")  # loopback only, always
    port = free_port(host)
    if env is None:  # only the token this test gives
        env = {k: v for k, v in os.environ.items() if k != "HEAPMEM_MCP_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "heapmem", "--db", db, "-n", NS, "mcp", "--transport",
         "http", "--host", host, "--port", str(port), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env)
    err = []

    def stderr():
        return b"".join(err).decode()

    try:
        deadline = time.monotonic() + 60
        while True:  # wait for the server to listen (bounded)
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.05)
        yield port, proc, stderr
    finally:
        stop(proc)
        err.append(proc.stderr.read())
        proc.stderr.close()


class Raw:
    """Plain HTTP requests to the server (http.client: every header as given)."""

    def __init__(self, host, port):
        self.host, self.port, self.session = host, port, None

    def post(self, body, **headers):
        import http.client
        c = http.client.HTTPConnection(self.host, self.port, timeout=20)
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            h["mcp-session-id"] = self.session
        h.update({k.replace("_", "-"): v for k, v in headers.items()})
        try:
            c.request("POST", "/mcp", json.dumps(body), h)
            r = c.getresponse()
            return r.status, r.getheader("mcp-session-id"), r.read().decode()
        finally:
            c.close()

    def initialize(self, **headers):
        status, sid, _ = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}, **headers)
        assert status == 200 and sid, status
        self.session = sid
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                         **headers)[0] == 202

    def call(self, tool, args, **headers):
        return self.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}}, **headers)


def seeded(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db, clock=lambda: T) as mem:
        mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", namespace=NS)
    return db


def ids(db):
    with heapmem.open(db, readonly=True) as mem:
        return [it.id for it in mem.list(NS, limit=100)]


def client(url, headers):
    try:
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client
        return streamablehttp_client(url, headers=headers)
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def sdk_session(url, headers, body, timeout=60):
    """Run body(session) in an SDK client session over streamable HTTP; the
    exception it ends with, or None."""
    anyio = pytest.importorskip("anyio")
    from mcp import ClientSession
    outcome = []

    async def main():
        with anyio.fail_after(timeout):
            async with AsyncExitStack() as stack:
                streams = await stack.enter_async_context(client(url, headers))
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                await body(session)

    try:
        anyio.run(main)
    except BaseException as e:  # an ExceptionGroup from the client's task group, too
        if isinstance(e, KeyboardInterrupt):
            raise
        outcome.append(e)
    return outcome[0] if outcome else None


def _text(result):
    return json.loads(result.content[0].text)


def test_with_the_token_the_tools_work(tmp_path):
    pytest.importorskip("mcp")
    db = seeded(tmp_path)
    env = dict(os.environ, HEAPMEM_MCP_TOKEN=TOKEN)  # the token from the environment

    async def body(session):
        out = _text(await session.call_tool("list", {}))
        assert out["total"] == 1
        out = _text(await session.call_tool("add", {"text": "Seat preference: window",
                                                    "kind": "preference"}))
        assert out["id"] == "m2"

    with mcp_http(db, env=env) as (port, _, stderr):
        assert sdk_session(f"http://127.0.0.1:{port}/mcp",
                           {"Authorization": f"Bearer {TOKEN}"}, body) is None
    assert ids(db) == ["m2", "m1"]
    assert "warning" not in stderr()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    """One server with --token for the requests without the right token (a
    server takes a second to start; each case checks the store is as seeded)."""
    pytest.importorskip("mcp")
    db = seeded(tmp_path_factory.mktemp("token"))
    with mcp_http(db, "127.0.0.1", "--token", TOKEN) as (port, proc, _err):
        yield db, port, proc
    assert ids(db) == ["m1"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-0123456789"},
                                     {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": f"Bearer {TOKEN}x"}])
def test_without_the_right_token_nothing_runs(token_server, headers):
    db, port, proc = token_server
    assert proc.poll() is None
    assert ids(db) == ["m1"], "an earlier case's request reached a tool"
    reached = []

    async def body(session):
        reached.append(True)
        await session.call_tool("forget", {"ids": ["m1"]})

    err = sdk_session(f"http://127.0.0.1:{port}/mcp", headers, body, timeout=30)
    assert err is not None and not reached  # the client fails at initialize
    # (the SDK's client reports the 401 as an MCPError; the raw request shows it)
    raw = Raw("127.0.0.1", port)
    status, _, text = raw.call("forget", {"ids": ["m1"]}, **headers)
    assert status == 401 and "Bearer" in text
    status, _, _ = raw.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                             "params": {}}, **headers)
    assert status == 401
    assert ids(db) == ["m1"]


def test_the_flag_wins_over_the_environment(tmp_path):
    db = seeded(tmp_path)
    env = dict(os.environ, HEAPMEM_MCP_TOKEN="the-environment-token-0123")
    with mcp_http(db, "127.0.0.1", "--token", TOKEN, env=env) as (port, _, _err):
        raw = Raw("127.0.0.1", port)
        assert raw.call("list", {}, Authorization="Bearer the-environment-token-0123")[0] == 401
        raw.initialize(Authorization=f"Bearer {TOKEN}")
        status, _, text = raw.call("list", {}, Authorization=f"Bearer {TOKEN}")
        assert status == 200 and '\\"total\\": 1' in text


def test_dns_rebinding_on_127_0_0_2_is_refused(tmp_path):
    """The SDK's own protection holds only for 127.0.0.1, localhost and ::1: on
    127.0.0.2 a page of evil.example that rebinds its name here would be
    served.  heapmem's Gate checks the Host and Origin for the address served."""
    db = seeded(tmp_path)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with mcp_http(db, "127.0.0.2", "--token", TOKEN) as (port, _, _err):
        raw = Raw("127.0.0.2", port)
        raw.initialize(**auth)  # a real client, with the right Host, gets a session
        evil = {"Host": "evil.example", "Origin": "http://evil.example", **auth}
        for tool, args in [("list", {}), ("forget", {"ids": ["m1"]})]:
            status, _, text = raw.call(tool, args, **evil)
            assert status == 403 and "Host" in text, (status, text)
        status, _, _ = Raw("127.0.0.2", port).post(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, **evil)
        assert status == 403
        # the right Host, a foreign Origin (a page of another site): 403 too
        for origin in ("http://evil.example", f"http://127.0.0.2:{port + 1}", "null",
                       f"https://127.0.0.2:{port}", "http://127.0.0.2"):
            status, _, text = raw.call("forget", {"ids": ["m1"]}, Origin=origin, **auth)
            assert status == 403 and "Origin" in text, (origin, status, text)
        # a Host of the right address but another port, or another loopback address
        for host in (f"127.0.0.2:{port + 1}", f"127.0.0.1:{port}", f"localhost:{port}"):
            assert raw.call("forget", {"ids": ["m1"]}, Host=host, **auth)[0] == 403, host
        assert ids(db) == ["m1"]
        # the server's own origin is fine, and so is the bare host
        status, _, text = raw.call("list", {}, Origin=f"http://127.0.0.2:{port}", **auth)
        assert status == 200 and '\\"total\\": 1' in text
        assert raw.call("list", {}, Host="127.0.0.2", **auth)[0] == 200
    assert ids(db) == ["m1"]


def test_rebinding_is_refused_without_a_token_too_and_a_warning_is_printed(tmp_path):
    db = seeded(tmp_path)
    with mcp_http(db, "127.0.0.1") as (port, _, stderr):
        raw = Raw("127.0.0.1", port)
        raw.initialize()
        assert raw.call("list", {})[0] == 200  # loopback without a token: allowed
        assert raw.call("forget", {"ids": ["m1"]}, Host=f"evil.example:{port}")[0] == 403
        assert raw.call("forget", {"ids": ["m1"]}, Origin="http://evil.example")[0] == 403
        # localhost names 127.0.0.1 (it never resolves elsewhere)
        assert raw.call("list", {}, Host=f"localhost:{port}",
                        Origin=f"http://localhost:{port}")[0] == 200
    lines = [ln for ln in stderr().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("heapmem: warning: ") and \
        "HEAPMEM_MCP_TOKEN" in lines[0], stderr()
    assert ids(db) == ["m1"]


def test_ipv6_loopback(tmp_path):
    db = seeded(tmp_path)
    with mcp_http(db, "::1", "--token", TOKEN) as (port, _, _err):
        raw = Raw("::1", port)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        raw.initialize(Host=f"[::1]:{port}", **auth)
        assert raw.call("list", {}, Host=f"[::1]:{port}", Origin=f"http://[::1]:{port}",
                        **auth)[0] == 200
        assert raw.call("forget", {"ids": ["m1"]}, Host="evil.example", **auth)[0] == 403
    assert ids(db) == ["m1"]


def test_the_cli_refuses_bad_tokens_and_non_loopback_hosts_without_one(tmp_path):
    pytest.importorskip("mcp")
    db = str(tmp_path / "agent.db")

    def mcp(*argv, env=None):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["--db", db, "mcp", *argv], stdout=out, stderr=err, env=env or {})
        return code, out.getvalue(), err.getvalue()

    refused(mcp("--transport", "http", "--host", "0.0.0.0"), "loopback", "token")
    refused(mcp("--transport", "http", "--host", "10.0.0.1"), "loopback")
    refused(mcp("--transport", "http", "--token", "short"), "at least 16")
    refused(mcp("--transport", "http", "--token", "has a space in it, sixteen+"), "spaces")
    refused(mcp("--transport", "http", env={"HEAPMEM_MCP_TOKEN": "short"}), "at least 16")
    refused(mcp("--token", TOKEN), "--transport http")
    assert not os.path.exists(db)  # nothing was opened, nothing listened


def test_the_gate_in_process():
    """Gate's decisions without a socket (and a wildcard address, which no test
    listens on: any Host, the Origin must match it, the token is the guard)."""
    from heapmem.adapters import mcp_server

    def ask(gate, **headers):
        scope = {"type": "http", "scheme": "http", "headers": [
            (k.lower().encode(), v.encode()) for k, v in headers.items()]}
        return gate.refusal(scope)

    gate = mcp_server.Gate(None, host="127.0.0.2", port=8765, token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert ask(gate, Host="127.0.0.2:8765", **auth) is None
    assert ask(gate, Host="127.0.0.2:8765")[0] == 401
    assert ask(gate, Host="evil.example", **auth)[0] == 403
    assert ask(gate, **auth)[0] == 403  # no Host at all
    wild = mcp_server.Gate(None, host="0.0.0.0", port=8765, token=TOKEN)
    assert ask(wild, Host="box.internal:8765", **auth) is None
    assert ask(wild, Host="box.internal:8765", Origin="http://box.internal:8765", **auth) is None
    assert ask(wild, Host="box.internal:8765", Origin="http://evil.example", **auth)[0] == 403
    assert ask(wild, Host="evil.example", Origin="http://evil.example")[0] == 401
    with pytest.raises(ValueError, match="at least 16"):
        mcp_server.Gate(None, host="127.0.0.1", port=1, token="x")
