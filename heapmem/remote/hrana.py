"""A small client of Hrana over HTTP, the protocol libSQL server (sqld)
speaks: POST /v3/pipeline (falling back to /v2), JSON in and out, standard
library only.

Owns: the wire format (URLs, the pipeline request and its results, SQLite
values as Hrana encodes them, batons and base URLs, the replication index a
result reports), the check that an answer is Hrana (its shape and its
values, before any of it is handed on), the HTTP connection and the
deadline of each request (its timeout bounds all of it), the bearer token
and the Host header that picks one database of a server with namespaces,
and HranaError: one sentence per way a server or the network can fail.  It
knows nothing of heapmem's tables; heapmem.remote runs Memory's statements
through it.
"""
from __future__ import annotations

import base64
import http.client
import io
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Iterable, Sequence

#: URL schemes heapmem.open() reads as a server: libsql:// is https://
#: unless the URL says ?tls=0 (as libSQL's own clients read it).
SCHEMES = ("http", "https", "libsql")


class HranaError(Exception):
    """A server or network failure.  code: the server's error code
    (SQLITE_CONSTRAINT, STREAM_EXPIRED, ...), an HTTP status as "HTTP 401",
    or "NETWORK" / "NOT_HRANA" when no Hrana server answered."""

    def __init__(self, message: str, code: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code


def is_url(target: Any) -> bool:
    """Whether heapmem.open()'s target names a server, not a file."""
    return isinstance(target, str) and target.split("://", 1)[0].lower() in SCHEMES \
        and "://" in target


def url_timeout(url: str, default: float = 10.0) -> float:
    """The ?timeout=SECONDS of a server URL (how long one request may take,
    from connecting to the last byte of its answer), else default."""
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    if "timeout" not in q:
        return default
    try:
        t = float(q["timeout"][0])
    except ValueError:
        t = -1.0
    if not (math.isfinite(t) and 0 < t <= 3600):
        raise ValueError(f"{url!r}: timeout must be a number of seconds in (0, 3600]")
    return t


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme http|https, host, port, base path) of a server URL."""
    u = urllib.parse.urlsplit(url)
    scheme = u.scheme.lower()
    q = urllib.parse.parse_qs(u.query)
    if scheme == "libsql":
        scheme = "http" if q.get("tls", ["1"])[0] == "0" else "https"
    if scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"{url!r} is not a server URL: use http://host:port, https://host "
                         "or libsql://host")
    try:
        port = u.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"{url!r} has a bad port") from None
    return scheme, u.hostname, port, u.path.rstrip("/")


# -- values -------------------------------------------------------------------------


def encode(v: Any) -> dict[str, Any]:
    """A Python value as a Hrana value."""
    if v is None:
        return {"type": "null"}
    if isinstance(v, bool):
        return {"type": "integer", "value": str(int(v))}
    if isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            raise OverflowError(f"{v} does not fit a 64-bit SQLite integer")
        return {"type": "integer", "value": str(v)}
    if isinstance(v, float):
        if not math.isfinite(v):  # JSON has no NaN or infinity; SQLite stores NULL for NaN
            raise ValueError(f"{v!r} cannot be sent to a server (JSON has no such number)")
        return {"type": "float", "value": v}
    if isinstance(v, str):
        return {"type": "text", "value": v}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"type": "blob", "base64": base64.b64encode(bytes(v)).decode("ascii")}
    raise TypeError(f"a {type(v).__name__} cannot be bound to SQL")


def decode(v: Any) -> Any:
    """A Hrana value as a Python value; HranaError (NOT_HRANA) for anything
    else."""
    try:
        return _value(v)
    except NotHrana as e:
        raise HranaError(f"the server sent {e.what}", "NOT_HRANA") from None


_NAMES = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def stmt(sql: str, params: Any = None, *, want_rows: bool = True) -> dict[str, Any]:
    """A Hrana statement: sql with positional (a sequence) or named (a
    mapping; names as in the SQL, without their ':') parameters.  Only the
    names the SQL uses are sent (SQLite, like apsw, leaves others be)."""
    s: dict[str, Any] = {"sql": sql, "want_rows": want_rows}
    if params is None:
        return s
    if isinstance(params, dict):
        used = set(_NAMES.findall(sql))
        s["named_args"] = [{"name": ":" + k, "value": encode(v)} for k, v in params.items()
                           if k in used]
    else:
        s["args"] = [encode(v) for v in params]
    return s


# -- what an answer must be ------------------------------------------------------------


class NotHrana(Exception):
    """What makes a server's answer not Hrana (what: words for a sentence);
    Client.pipeline says it as a HranaError."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


#: An integer as Hrana sends one (a string, for 64 bits JSON numbers lack).
_INTEGER = re.compile(r"-?[0-9]{1,20}")


def _show(v: Any) -> str:
    """v for a message: a container by its kind (its repr could be huge, or
    too deep to make), anything else as a short repr."""
    if isinstance(v, (list, dict)):
        return "a JSON " + ("list" if isinstance(v, list) else "object")
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise NotHrana(what)


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _integer(v: Any, what: str, low: int, high: int) -> int:
    """v as an int in [low, high): a JSON integer or a string of one."""
    n = v if type(v) is int else int(v) if type(v) is str and _INTEGER.fullmatch(v) else None
    _need(n is not None and low <= n < high,
          f"{what} that is not {'a' if low else 'an unsigned'} 64-bit integer: {_show(v)}")
    return n  # type: ignore[return-value]


def _optional(v: Any, what: str, low: int, high: int) -> int | None:
    return None if v is None else _integer(v, what, low, high)


_I64 = (-(1 << 63), 1 << 63)
_U64 = (0, 1 << 64)


def _value(v: Any) -> Any:
    """A Hrana value as a Python value, or NotHrana."""
    _need(type(v) is dict, f"a value that is not an object: {_show(v)}")
    t = v.get("type")
    if t == "null":
        return None
    x = v.get("value")
    if t == "integer":
        return _integer(x, "an integer value", *_I64)
    if t == "float":
        if type(x) in (int, float):
            try:
                return float(x)
            except OverflowError:
                pass
        raise NotHrana(f"a float value that is not a number: {_show(x)}")
    if t == "text":
        _need(type(x) is str, f"a text value that is not a string: {_show(x)}")
        return x
    if t == "blob":
        b = v.get("base64", "")
        if type(b) is str:
            try:
                return base64.b64decode(b + "=" * (-len(b) % 4), validate=True)
            except ValueError:
                pass
        raise NotHrana(f"a blob value that is not base64: {_show(b)}")
    raise NotHrana(f"a value of unknown type {_show(t)}")


def _error(e: Any) -> None:
    _need(type(e) is dict and type(e.get("message")) is str
          and (e.get("code") is None or type(e.get("code")) is str),
          "an error without a message string")


def _statement(r: Any) -> None:
    """Check an execute's result (one statement's), and decode it in place:
    its rows become tuples of Python values, its counts ints."""
    _need(type(r) is dict, f"a statement result that is not an object: {_show(r)}")
    cols, rows = r.get("cols"), r.get("rows")
    _need(type(cols) is list, f"a statement result whose cols are not a list: {_show(cols)}")
    _need(type(rows) is list, f"a statement result whose rows are not a list: {_show(rows)}")
    width, out = len(cols), []
    for row in rows:
        _need(type(row) is list, f"a row that is not a list: {_show(row)}")
        _need(len(row) == width, f"a row of {_n(len(row), 'value')} for "
              f"{_n(width, 'column')}")
        out.append(tuple([_value(v) for v in row]))
    r["rows"] = out
    r["affected_row_count"] = _integer(r.get("affected_row_count"),
                                       "an affected row count", *_U64)
    r["last_insert_rowid"] = _optional(r.get("last_insert_rowid"), "a last insert rowid", *_I64)
    r["replication_index"] = _optional(r.get("replication_index"), "a replication index",
                                       *_U64)


def _result(request: dict[str, Any], r: Any) -> None:
    """Check the result of request (and decode what it holds, in place)."""
    _need(type(r) is dict, f"a result that is not an object: {_show(r)}")
    kind = request.get("type")
    if r.get("type") == "error":
        _error(r.get("error"))
        return
    _need(r.get("type") == "ok", f"a result of type {_show(r.get('type'))}")
    resp = r.get("response")
    _need(type(resp) is dict and resp.get("type") == kind,
          f"a response that does not answer a {kind} request")
    if kind == "execute":
        _statement(resp.get("result"))
    elif kind == "batch":
        b, steps = resp.get("result"), len(request["batch"]["steps"])
        _need(type(b) is dict, f"a batch result that is not an object: {_show(b)}")
        results, errors = b.get("step_results"), b.get("step_errors")
        _need(type(results) is list and type(errors) is list and
              len(results) == len(errors) == steps,
              "a batch result without a result and an error for each of its "
              + _n(steps, "step"))
        for sr, se in zip(results, errors):
            if se is not None:
                _error(se)
            if sr is not None:
                _statement(sr)
        b["replication_index"] = _optional(b.get("replication_index"), "a replication index",
                                           *_U64)
    elif kind == "get_autocommit":
        _need(type(resp.get("is_autocommit")) is bool,
              "a get_autocommit response without is_autocommit true or false")


def checked(data: bytes, requests: Sequence[dict[str, Any]]
            ) -> tuple[str | None, list[dict[str, Any]]]:
    """(baton, results) of a pipeline answer to requests, checked to be
    Hrana (each result an answer to its request: its rows decoded into
    tuples of Python values, its counts and indices into ints); NotHrana
    says what is not."""
    try:
        out = json.loads(data)
    except RecursionError:
        raise NotHrana("JSON nested too deeply") from None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError too
        raise NotHrana("not JSON") from None
    _need(type(out) is dict, f"{_show(out)} where an object was expected")
    baton, results = out.get("baton"), out.get("results")
    _need(baton is None or type(baton) is str, f"a baton that is not a string: {_show(baton)}")
    _need(type(results) is list, f"results that are not a list: {_show(results)}")
    _need(len(results) == len(requests),
          f"{_n(len(results), 'result')} for {_n(len(requests), 'request')}")
    for request, r in zip(requests, results):
        _result(request, r)
    return baton, results


# -- the HTTP side ----------------------------------------------------------------------


#: A database's name in sqld's answer when the database a request named does
#: not exist (a primary names it; a replica says "Requested namespace").
_NO_NAMESPACE = re.compile(r"namespace `([^`]*)` doesn't exist|requested namespace doesn't exist",
                           re.I)
#: The header sqld reads a database's name from before the Host header (its
#: replicas' gRPC metadata: the name in unpadded base64); "!" is never
#: base64, so a server with namespaces refuses it before it looks anything up.
_NAMESPACE_BYTES = "x-namespace-bin"
#: Pauses before a request for a database is sent again after sqld answered
#: that it does not exist: sqld 0.24.32 says so, now and then, of a database
#: it closed to keep at most --max-active-namespaces (100) open, and answers
#: the same request at once when it is sent again (bench/SQLD.md).  A 404
#: comes before anything runs, so sending again is safe for a write too.
MISSING_RETRIES = (0.005, 0.02, 0.08)
#: A name no database of heapmem's has (validate.check_database refuses a
#: leading underscore): probe_databases()'s fallback asks for it.
_ABSENT = "_heapmem_probe"


#: The most bytes of one answer a request reads: sqld's own limit on an
#: answer is 10 MB (--max-response-size) of SQLite values, which Hrana's JSON
#: makes a few times larger.
MAX_RESPONSE = 64 << 20


def _left(deadline: float) -> float:
    """The seconds until deadline (time.monotonic()); socket.timeout once it
    has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class _DeadlineReader(io.RawIOBase):
    """The bytes of one answer from sock, each read waiting only until
    deadline: a server that sends one byte at a time cannot stretch a
    request past its timeout (a socket's timeout starts again at each
    byte)."""

    def __init__(self, sock: socket.socket, deadline: float):
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int | None:
        self._sock.settimeout(_left(self._deadline))
        return self._raw.readinto(b)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _ReadUntil:
    """What http.client.HTTPResponse asks of its socket (makefile) for an
    answer read before deadline."""

    def __init__(self, sock: socket.socket, deadline: float):
        self._sock, self._deadline = sock, deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


class _Connection(http.client.HTTPConnection):
    """An HTTP connection whose requests end by self.deadline (time.monotonic()):
    connecting, sending and every read of the answer wait only until then."""

    deadline = math.inf

    def connect(self) -> None:
        self.timeout = _left(self.deadline)
        super().connect()

    def before(self, deadline: float) -> None:
        """Let the next request run until deadline."""
        self.deadline = deadline
        if self.sock is not None:
            self.sock.settimeout(_left(deadline))

    # http.client calls self.response_class(sock, ...): a method serves as well as
    # the class typeshed declares; HTTPResponse asks its sock only for makefile()
    def response_class(self, sock: socket.socket, *args: Any,  # type: ignore[override]
                       **kwargs: Any) -> http.client.HTTPResponse:
        return http.client.HTTPResponse(_ReadUntil(sock, self.deadline),  # type: ignore[arg-type]
                                        *args, **kwargs)


class _TLSConnection(_Connection):
    """_Connection over TLS (context checks the certificate and the host
    name); the handshake too ends by the deadline."""

    default_port = 443

    def __init__(self, host: str, port: int, context: ssl.SSLContext):
        super().__init__(host, port)
        self.context = context

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(_left(self.deadline))
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)


class Client:
    """One server: an HTTP/1.1 keep-alive connection, re-opened when the
    server closes it.  pipeline() is safe to call from several threads (they
    take turns).

    database names one database of a server started with namespaces (sqld
    --enable-namespaces): every request then carries the Host header
    `<database>.<host>`, whose first label is how sqld picks the database
    (the connection still goes to host:port).  It is not checked here
    (heapmem.validate.check_database is)."""

    def __init__(self, url: str, *, auth_token: str | None = None, timeout: float | None = None,
                 database: str | None = None):
        if auth_token is not None and (not isinstance(auth_token, str) or not auth_token
                                       or any(ch in auth_token for ch in "\r\n")):
            raise ValueError("auth_token must be a non-empty string (the JWT sqld checks)")
        self.url = url
        self.scheme, self.host, self.port, self.base = split_url(url)
        self.auth_token = auth_token
        self.timeout = url_timeout(url) if timeout is None else timeout
        self.database = database
        self.host_header = None if database is None else self.host_for(database)
        self.version = 3
        self._conn: _Connection | None = None
        self._lock = threading.Lock()

    def host_for(self, database: str) -> str:
        """The Host header naming database on this server: `<database>.<host>`,
        with the port unless it is the scheme's own."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return f"{database}.{host}" + ("" if self.port == default else f":{self.port}")

    def _connection(self) -> _Connection:
        if self._conn is None:
            self._conn = _TLSConnection(self.host, self.port, ssl.create_default_context()) \
                if self.scheme == "https" else _Connection(self.host, self.port)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, *, deadline: float | None = None
                ) -> tuple[int, bytes]:
        """One HTTP request: (status, body); headers are added to (or replace)
        the usual ones.  It ends by deadline (time.monotonic(); by default
        the timeout from now), the whole of it: connecting, sending, and
        reading all of the answer, of at most MAX_RESPONSE bytes.  A
        connection the server closed while idle is re-opened once; anything
        else is a HranaError."""
        sent = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.auth_token:
            sent["Authorization"] = "Bearer " + self.auth_token
        if self.host_header:
            sent["Host"] = self.host_header
        sent.update(headers or {})
        headers = sent
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        with self._lock:
            for attempt in (0, 1):
                conn = self._connection()
                try:
                    conn.before(deadline)
                    conn.request(method, self.base + path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = self._read(resp)
                    if data is None:
                        conn.close()
                        self._conn = None
                        raise HranaError(f"{self.url} sent an answer of more than "
                                         f"{MAX_RESPONSE >> 20} MiB, more than a request reads "
                                         "(heapmem.remote.hrana.MAX_RESPONSE)", "TOO_LARGE")
                    if resp.getheader("connection", "").lower() == "close":
                        conn.close()
                        self._conn = None
                    return resp.status, data
                except (http.client.RemoteDisconnected, BrokenPipeError,
                        ConnectionResetError, http.client.CannotSendRequest) as e:
                    conn.close()
                    self._conn = None
                    if attempt:
                        raise HranaError(f"{self.url} closed the connection ({e})",
                                         "NETWORK") from None
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    self._conn = None
                    why = "nothing listens there" if isinstance(e, ConnectionRefusedError) \
                        else ("it did not answer in full within %g s" % self.timeout
                              if isinstance(e, socket.timeout) else f"{type(e).__name__}: {e}")
                    raise HranaError(f"cannot reach {self.url}: {why}", "NETWORK") from None
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _read(resp: http.client.HTTPResponse) -> bytes | None:
        """The body of resp, or None when it is longer than MAX_RESPONSE (the
        rest is left unread)."""
        if resp.length is not None:  # a Content-Length
            return resp.read() if resp.length <= MAX_RESPONSE else None
        chunks: list[bytes] = []
        size = 0
        while True:  # chunked, or until the server closes the connection
            chunk = resp.read(1 << 16)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_RESPONSE:
                return None
            chunks.append(chunk)

    def pipeline(self, baton: str | None, requests: Sequence[dict[str, Any]]
                 ) -> tuple[str | None, list[dict[str, Any]]]:
        """Send requests on the stream the baton names (None: a new stream);
        returns the next baton (None once the stream is closed) and one result
        per request, all within the timeout: {"type": "ok", "response": ...}
        or {"type": "error", "error": {"message", "code"}}, checked (checked():
        HranaError NOT_HRANA unless the answer is Hrana, its rows decoded)."""
        body = json.dumps({"baton": baton, "requests": list(requests)},
                          allow_nan=False).encode("utf-8")
        pauses = iter(MISSING_RETRIES if self.database is not None else ())
        deadline = time.monotonic() + self.timeout  # for all of it, the retries too
        while True:
            status, data = self.request("POST", f"/v{self.version}/pipeline", body,
                                        deadline=deadline)
            missing = status == 404 and _NO_NAMESPACE.search(data.decode("utf-8", "replace"))
            if status == 404 and self.version == 3 and not missing:
                self.version = 2  # an older sqld: Hrana 2 has what heapmem uses
                status, data = self.request("POST", "/v2/pipeline", body, deadline=deadline)
            pause = next(pauses, None) if missing else None
            if pause is None:
                break
            time.sleep(pause)
        if status != 200:
            raise self.http_error(status, data)
        try:
            return checked(data, requests)
        except NotHrana as e:
            raise HranaError(f"{self.url} answered with something that is not a Hrana "
                             f"pipeline response ({e.what}): is it a libSQL server (sqld)?",
                             "NOT_HRANA") from None

    def http_error(self, status: int, data: bytes) -> HranaError:
        text = data.decode("utf-8", "replace").strip()
        try:
            j = json.loads(text)
        except (ValueError, RecursionError):
            j = None
        detail, code = (j.get("error") or j.get("message"), j.get("code")) \
            if isinstance(j, dict) else (None, None)
        detail = detail if isinstance(detail, str) and detail else text
        code = code if isinstance(code, str) else ""
        detail = " ".join(detail[:1000].split())[:300]
        if status == 401 or status == 403:
            how = "no auth_token was given" if not self.auth_token else \
                "the auth_token was refused"
            return HranaError(f"{self.url} refused the request ({status}): {how} "
                              f"(sqld checks a JWT signed for its --auth-jwt-key-file): {detail}",
                              f"HTTP {status}")
        missing = _NO_NAMESPACE.search(detail) if status in (400, 404) else None
        if missing and self.database is not None:
            return HranaError(f"{self.url} has no database {self.database!r} (sqld: {detail}): "
                              "create it first on the primary's admin API, with "
                              "heapmem.remote.sqld.create_database(ADMIN_URL, "
                              f"{self.database!r}) or `heapmem sqld "
                              f"--create-database {self.database} --admin HOST:PORT`",
                              "NO_DATABASE")
        if missing:
            label = missing.group(1) or self.host.split(".")[0]
            return HranaError(f"{self.url} serves one database per tenant (sqld "
                              "--enable-namespaces) and picks it by the first label of the host "
                              f"name, here {label!r}, which names none: open one with "
                              "heapmem.open(url, database=NAME)", "NO_DATABASE")
        if status in (404, 405):
            return HranaError(f"{self.url} has no Hrana pipeline endpoint (HTTP {status}): "
                              "is it a libSQL server (sqld)?", "NOT_HRANA")
        if code == "STREAM_EXPIRED" or "expired" in detail.lower() or \
                "invalid baton" in detail.lower():
            # the stream is gone: it expired, or the server restarted since
            return HranaError(f"the server no longer has the stream: {detail}", "STREAM_EXPIRED")
        return HranaError(f"{self.url} answered HTTP {status}: {detail}", code or f"HTTP {status}")


    def probe_databases(self) -> bool:
        """Whether the server keeps one database per namespace (started with
        sqld --enable-namespaces), so that the Host header picks one; without
        namespaces sqld ignores it and serves its one database to every
        request.  A server with namespaces refuses a database name that is
        not base64 in the header its replicas use (x-namespace-bin) before it
        looks anything up; should a server ignore that header, a request for
        a database nobody has tells instead (a 404)."""
        body = json.dumps({"baton": None, "requests": [{"type": "close"}]}).encode()
        path = f"/v{self.version}/pipeline"
        status, data = self.request("POST", path, body, {_NAMESPACE_BYTES: "!"})
        if status == 400 and b"namespace" in data.lower():
            return True
        if status != 200:
            raise self.http_error(status, data)
        status, data = self.request("POST", path, body, {"Host": self.host_for(_ABSENT)})
        if status == 200:
            return False
        if _NO_NAMESPACE.search(data.decode("utf-8", "replace")):
            return True
        raise self.http_error(status, data)


def rows_of(result: dict[str, Any]) -> tuple[list[tuple], int, int | None]:
    """(rows, affected row count, last insert rowid) of an execute's result
    as Client.pipeline returns it (checked and decoded)."""
    r = result["result"] if "result" in result else result
    return r["rows"], r["affected_row_count"], r["last_insert_rowid"]


def replication_index(result: dict[str, Any]) -> int:
    """The replication index a result reports (an execute's or a batch's): on
    a write, the index its commit reached on the primary; on a read, the
    index of the server that answered (a replica's lags its primary's).  0
    when the server reports none (null: a database with nothing written)."""
    r = result["result"] if "result" in result else result
    v = r.get("replication_index")
    try:
        return int(v) if v is not None else 0
    except (TypeError, ValueError):
        raise HranaError(f"the server sent a replication index that is not a number: {v!r}",
                         "NOT_HRANA") from None


def batch(statements: Iterable[dict[str, Any]], *, replication_index: int = 0
          ) -> dict[str, Any]:
    """A Hrana batch request running statements in order, each only if the
    one before succeeded (executemany's semantics: stop at the first error).
    replication_index (when not 0): a replica runs the batch, if it only
    reads, once it has replicated the primary's log up to that index."""
    steps = []
    for i, s in enumerate(statements):
        step: dict[str, Any] = {"stmt": s}
        if i:
            step["condition"] = {"type": "ok", "step": i - 1}
        steps.append(step)
    body: dict[str, Any] = {"steps": steps}
    if replication_index:
        body["replication_index"] = str(replication_index)
    return {"type": "batch", "batch": body}
