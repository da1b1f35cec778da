"""A libSQL server in a test's own process (not a test module): Hrana over
HTTP on a free loopback port, its statements run by apsw on one file with
heapmem's library loaded, one apsw connection per Hrana stream (baton).

heapmem.open(server.url) opens a store on it as on sqld, at the cost of a
thread, so the cross-door matrix (tests/test_matrix.py) runs every bad input
through the libSQL client door, and a test can spoil chosen answers with
valid Hrana but wrong values (server.spoil: a hostile or broken server) and
then read the file to see what was written (server.path; the statement that
was spoiled ran for real, so what the client does with the wrong answer,
a rollback, is what decides).

Not sqld: no replication, no namespaces, no expiry of streams; its
replication index counts the writes it ran.  What heapmem relies on is
what it does: batches whose steps run while the one before succeeded,
sequences (scripts), transactions on one stream, SQLite errors as Hrana
errors with SQLite's code.
"""
from __future__ import annotations

import http.server
import itertools
import json
import re
import threading
from typing import Any, Callable

import apsw

import heapmem
from heapmem.remote import hrana

#: What a spoiler gets: the SQL of a statement that ran and its Hrana result
#: (a dict to change or replace); it returns the result to send.
Spoiler = Callable[[str, dict[str, Any]], dict[str, Any]]


def first_cell(value: Any) -> Spoiler:
    """A spoiler answering a statement with one row of one column: value (a
    Python value, encoded as Hrana; or a dict, sent as the Hrana value it is)."""
    cell = value if isinstance(value, dict) else hrana.encode(value)

    def spoil(sql: str, result: dict[str, Any]) -> dict[str, Any]:
        result["cols"] = (result["cols"] or [{"name": "x", "decltype": None}])[:1]
        result["rows"] = [[cell]]
        return result
    return spoil


def _code(e: apsw.Error) -> str:
    """SQLite's name of an apsw error's primary code (SQLITE_ERROR, ...)."""
    return apsw.mapping_result_codes.get(getattr(e, "result", 1) or 1, "SQLITE_ERROR")


def _message(e: apsw.Error) -> str:
    """SQLite's message, without apsw's class name in front."""
    return re.sub(r"^\w+Error: ", "", str(e))


class _Stream:
    """One Hrana stream: an apsw connection, used by one request at a time."""

    def __init__(self, path: str):
        self.conn = apsw.Connection(path)
        self.conn.setbusytimeout(10_000)
        heapmem.load(self.conn)
        self.lock = threading.Lock()


class HranaServer:
    """A libSQL server for one file (path), on 127.0.0.1: start() it, give
    its url to heapmem.open(), stop() it.  spoil[marker] = spoiler: every
    statement whose SQL holds marker is answered with spoiler's result (the
    statement itself ran).  spoiled counts the answers spoiled."""

    def __init__(self, path: str):
        self.path = path
        self.spoil: dict[str, Spoiler] = {}
        self.spoiled = 0
        self._streams: dict[str, _Stream] = {}
        self._ids = itertools.count(1)
        self._index = 1            # the replication index: one more per write
        self._lock = threading.Lock()
        c = apsw.Connection(path)  # sqld's files are in WAL mode
        c.execute("PRAGMA journal_mode=WAL")
        c.close()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # the body is a second write: no 40 ms wait

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/version":
                    self._send(200, b"sqld 0.24.32 (heapmem tests' fake)")
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not re.fullmatch(r"/v[23]/pipeline", self.path):
                    self._send(404, b"{}")
                    return
                self._send(200, json.dumps(server.pipeline(json.loads(body))).encode())

            def log_message(self, *a: Any) -> None:
                pass

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_port}"

    def start(self) -> "HranaServer":
        threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            streams, self._streams = list(self._streams.values()), {}
        for s in streams:
            with s.lock:
                s.conn.close()

    def __enter__(self) -> "HranaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- Hrana ------------------------------------------------------------------------

    def pipeline(self, body: dict[str, Any]) -> dict[str, Any]:
        baton = body.get("baton")
        with self._lock:
            if baton is None:
                baton = f"stream{next(self._ids)}"
                self._streams[baton] = _Stream(self.path)
            stream = self._streams.get(baton)
        if stream is None:
            error = {"message": "the stream expired", "code": "STREAM_EXPIRED"}
            return {"baton": None, "base_url": None,
                    "results": [{"type": "error", "error": error} for _ in body["requests"]]}
        results = []
        with stream.lock:
            for request in body["requests"]:
                if request["type"] == "close":
                    with self._lock:
                        self._streams.pop(baton, None)
                    stream.conn.close()
                    baton = None
                    results.append({"type": "ok", "response": {"type": "close"}})
                else:
                    results.append(self._request(stream.conn, request))
        return {"baton": baton, "base_url": None, "results": results}

    def _request(self, conn: apsw.Connection, request: dict[str, Any]) -> dict[str, Any]:
        kind = request["type"]
        if kind == "get_autocommit":
            return {"type": "ok", "response": {"type": kind,
                                               "is_autocommit": conn.getautocommit()}}
        if kind == "sequence":
            try:
                conn.execute(request["sql"])
            except apsw.Error as e:
                return {"type": "error", "error": {"message": _message(e), "code": _code(e)}}
            return {"type": "ok", "response": {"type": kind}}
        if kind == "execute":
            result, error = self._statement(conn, request["stmt"])
            if error is not None:
                return {"type": "error", "error": error}
            return {"type": "ok", "response": {"type": kind, "result": result}}
        if kind == "batch":
            results: list[Any] = []
            errors: list[Any] = []
            for step in request["batch"]["steps"]:
                cond = step.get("condition")
                if cond is not None and not (cond["type"] == "ok"
                                             and results[cond["step"]] is not None):
                    results.append(None)
                    errors.append(None)
                    continue
                r, e = self._statement(conn, step["stmt"])
                results.append(r)
                errors.append(e)
            return {"type": "ok", "response": {"type": kind, "result": {
                "step_results": results, "step_errors": errors,
                "replication_index": str(self._index)}}}
        return {"type": "error", "error": {"message": f"unknown request {kind}",
                                           "code": "HRANA_PROTO_ERROR"}}

    def _statement(self, conn: apsw.Connection, stmt: dict[str, Any]
                   ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        sql = stmt["sql"]
        if "named_args" in stmt:
            params: Any = {a["name"][1:]: hrana.decode(a["value"]) for a in stmt["named_args"]}
        else:
            params = [hrana.decode(v) for v in stmt.get("args", [])]
        before = conn.total_changes()
        try:
            cursor = conn.execute(sql, params)
            try:
                cols = [{"name": n, "decltype": t} for n, t in cursor.getdescription()]
            except apsw.ExecutionCompleteError:
                cols = []
            rows = [[hrana.encode(v) for v in row] for row in cursor]
        except apsw.Error as e:
            return None, {"message": _message(e), "code": _code(e)}
        changed = conn.total_changes() - before
        with self._lock:
            if changed or re.match(r"\s*(COMMIT|END)\b", sql, re.I):
                self._index += 1
            index = self._index
        result: dict[str, Any] = {
            "cols": cols, "rows": rows if stmt.get("want_rows", True) else [],
            "affected_row_count": conn.changes() if changed else 0,
            "last_insert_rowid": str(conn.last_insert_rowid()),
            "replication_index": str(index)}
        for marker, spoiler in self.spoil.items():
            if marker in sql:
                result = spoiler(sql, result)
                with self._lock:
                    self.spoiled += 1
        return result, None
