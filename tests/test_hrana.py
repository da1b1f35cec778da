"""heapmem.remote.hrana without a server: URLs, values, statements."""
import math

import pytest

from heapmem.remote import hrana


def test_urls():
    assert hrana.split_url("http://127.0.0.1:8080") == ("http", "127.0.0.1", 8080, "")
    assert hrana.split_url("libsql://db.example.com") == ("https", "db.example.com", 443, "")
    assert hrana.split_url("libsql://127.0.0.1:8080?tls=0") == ("http", "127.0.0.1", 8080, "")
    assert hrana.split_url("https://h/base/") == ("https", "h", 443, "/base")
    assert hrana.is_url("http://x") and hrana.is_url("LIBSQL://x") and not hrana.is_url("x.db")
    assert not hrana.is_url("file:x.db")
    assert hrana.url_timeout("http://h?timeout=2.5") == 2.5
    assert hrana.url_timeout("http://h") == 10.0
    for bad in ("http://h?timeout=0", "http://h?timeout=nan", "http://h?timeout=x"):
        with pytest.raises(ValueError, match="timeout must be"):
            hrana.url_timeout(bad)


def test_values_round_trip():
    for v in (None, 0, -1, (1 << 63) - 1, -(1 << 63), 0.1, 1e300, -0.0, "", "héllo\x00",
              b"", b"\x00\xffblob"):
        assert hrana.decode(hrana.encode(v)) == v
    assert hrana.decode(hrana.encode(True)) == 1
    assert math.copysign(1, hrana.decode(hrana.encode(-0.0))) == -1
    with pytest.raises(OverflowError):
        hrana.encode(1 << 63)
    with pytest.raises(ValueError):
        hrana.encode(math.nan)
    with pytest.raises(TypeError):
        hrana.encode(object())


def test_named_parameters_only_those_the_sql_uses():
    s = hrana.stmt("SELECT :id, :ids", {"id": 1, "ids": "[]", "extra": 2})
    assert [a["name"] for a in s["named_args"]] == [":id", ":ids"]
    s = hrana.stmt("SELECT :ids", {"id": 1, "ids": "[]"})
    assert [a["name"] for a in s["named_args"]] == [":ids"]
    assert hrana.stmt("SELECT ?", (5,))["args"] == [{"type": "integer", "value": "5"}]


def test_bad_tokens():
    with pytest.raises(ValueError, match="auth_token must be a non-empty string"):
        hrana.Client("http://h", auth_token="")
    with pytest.raises(ValueError, match="auth_token"):
        hrana.Client("http://h", auth_token="a\r\nX-Evil: 1")


def test_host_header_names_the_database():
    assert hrana.Client("http://127.0.0.1:8080", database="acme").host_header == \
        "acme.127.0.0.1:8080"
    assert hrana.Client("https://db.example.com", database="acme").host_header == \
        "acme.db.example.com"
    assert hrana.Client("http://[::1]:8080", database="acme").host_header == "acme.[::1]:8080"
    assert hrana.Client("http://127.0.0.1:8080").host_header is None


def test_reads_carry_the_replication_index():
    s = [hrana.stmt("SELECT 1")]
    assert "replication_index" not in hrana.batch(s)["batch"]
    assert hrana.batch(s, replication_index=42)["batch"]["replication_index"] == "42"
    assert hrana.replication_index({"replication_index": "42"}) == 42
    assert hrana.replication_index({"replication_index": None}) == 0
    with pytest.raises(hrana.HranaError, match="not a number"):
        hrana.replication_index({"replication_index": "x"})


def _fake_sqld(answers: list):
    """A server answering each POST with the next (status, body) of answers
    (the last one again once they run out); its Host headers are kept."""
    import http.server
    import threading

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["Host"])
            status, body = answers[min(len(seen), len(answers)) - 1]
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


MISSING = (404, b'{"error":"Namespace `acme` doesn\'t exist"}')
CLOSED = (200, b'{"baton":null,"base_url":null,"results":[{"type":"ok","response":'
               b'{"type":"close"}}]}')


def test_a_database_sqld_says_is_missing_is_asked_for_again(monkeypatch):
    """sqld 0.24.32 says now and then that a database it closed (past
    --max-active-namespaces) does not exist, and answers when asked again."""
    monkeypatch.setattr(hrana, "MISSING_RETRIES", (0.001, 0.001, 0.001))
    srv, seen = _fake_sqld([MISSING, CLOSED])
    try:
        url = f"http://127.0.0.1:{srv.server_port}"
        c = hrana.Client(url, database="acme")
        assert c.pipeline(None, [{"type": "close"}])[1] == [{"type": "ok",
                                                             "response": {"type": "close"}}]
        assert seen == [f"acme.127.0.0.1:{srv.server_port}"] * 2
    finally:
        srv.shutdown()
    srv, seen = _fake_sqld([MISSING])
    try:
        c = hrana.Client(f"http://127.0.0.1:{srv.server_port}", database="acme")
        with pytest.raises(hrana.HranaError, match="has no database 'acme'") as e:
            c.pipeline(None, [{"type": "close"}])
        assert e.value.code == "NO_DATABASE" and len(seen) == 4  # once, then three times more
        c = hrana.Client(f"http://127.0.0.1:{srv.server_port}")  # without database=
        with pytest.raises(hrana.HranaError, match="which names none"):
            c.pipeline(None, [{"type": "close"}])
        assert len(seen) == 5  # asked once
    finally:
        srv.shutdown()


def test_telling_a_server_with_namespaces():
    """x-namespace-bin: ! is refused (400) only by a server with namespaces;
    one that ignored it is asked for a database nobody has (404 if it has
    namespaces), one without namespaces answers both."""
    refused = (400, b'{"error":"Invalid namespace bytes: `Invalid byte 33, offset 0.`"}')
    for answers, has in (([refused], True), ([CLOSED, MISSING], True), ([CLOSED], False)):
        srv, seen = _fake_sqld(answers)
        try:
            c = hrana.Client(f"http://127.0.0.1:{srv.server_port}", database="acme")
            assert c.probe_databases() is has
            assert seen[1:] == [f"_heapmem_probe.127.0.0.1:{srv.server_port}"][:len(seen) - 1]
        finally:
            srv.shutdown()
