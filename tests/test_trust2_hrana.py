"""A server that claims to be sqld but is hostile or broken (issue 20, item 9).

Fake servers on a free loopback port, each stopping by itself: one trickles
its answer a byte at a time (a socket's timeout starts again at each byte, so
only a deadline on the whole request ends the wait), others answer with what
is not Hrana.  Every failure is a HeapmemError (hrana.HranaError inside
heapmem.hrana) of one sentence; nothing hangs."""
from __future__ import annotations

import socket
import threading
import time

import pytest

import heapmem
from heapmem import HeapmemError, hrana, remote

#: How long a fake server lives at most, whatever its client does.
LIFE = 10.0
#: The generous bound on a request whose timeout is 1 s (the deadline check).
BOUND = 5.0

def http_answer(body: bytes, status: str = "200 OK") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


VERSION = http_answer(b"sqld 0.24.32")
CLOSED = (b'{"baton":null,"base_url":null,"results":[{"type":"ok","response":'
          b'{"type":"close"}}]}')


class Fake:
    """A server on 127.0.0.1: GET /version is answered with version, every
    other request with pipeline.  The answers of the route slow ("version"
    or "pipeline") trickle: their first `fast` bytes at once, the rest one
    byte every `pause` seconds.  It stops by itself after LIFE seconds, or
    on stop()."""

    def __init__(self, pipeline: bytes, *, version: bytes = VERSION, slow: str = "",
                 fast: int = 0, pause: float = 0.2):
        self.answers = {"version": version, "pipeline": pipeline}
        self.slow, self.fast, self.pause = slow, fast, pause
        self._stop = threading.Event()
        self._until = time.monotonic() + LIFE
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _over(self) -> bool:
        return self._stop.is_set() or time.monotonic() > self._until

    def _serve(self) -> None:
        with self._sock:
            while not self._over():
                try:
                    conn, _ = self._sock.accept()
                except socket.timeout:
                    continue
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _request(conn: socket.socket) -> bytes | None:
        """The head of the next request on conn (its body read and dropped),
        or None once the client closed it."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        return head

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(LIFE)
        with conn:
            while not self._over():
                try:
                    head = self._request(conn)
                except OSError:
                    return
                if head is None:
                    return
                route = "version" if head.startswith(b"GET /version") else "pipeline"
                answer = self.answers[route]
                fast = self.fast if route == self.slow else len(answer)
                try:
                    conn.sendall(answer[:fast])
                    for i in range(fast, len(answer)):
                        if self._over():
                            return
                        time.sleep(self.pause)
                        conn.sendall(answer[i:i + 1])
                except OSError:  # the client gave up
                    return

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture
def fake():
    """Fake(...) for a test, each stopped at its end."""
    made: list[Fake] = []

    def make(pipeline: bytes, **kw) -> Fake:
        made.append(Fake(pipeline, **kw))
        return made[-1]

    yield make
    for f in made:
        f.stop()


def one_sentence(e: BaseException) -> str:
    msg = str(e)
    assert msg and "\n" not in msg, msg
    return msg


# -- a server that trickles its answer -----------------------------------------------------


TRICKLES = {
    # GET /version's status line and headers, a byte at a time
    "the head of /version": dict(slow="version", fast=0),
    # its head at once, then a body of 9999 bytes that never ends in time
    "the body of /version": dict(slow="version", fast=41,
                                 version=b"HTTP/1.1 200 OK\r\nContent-Length: 9999\r\n\r\n"
                                 + b"sqld" + b"x" * 9995),
    # /version answers at once; the answer to the first statement trickles
    "a pipeline answer": dict(slow="pipeline", fast=20),
}


@pytest.mark.parametrize("what", TRICKLES)
def test_a_trickling_server_fails_open_within_the_timeout(fake, what):
    f = fake(http_answer(CLOSED), **TRICKLES[what])
    t0 = time.monotonic()
    with pytest.raises(HeapmemError, match=r"did not (answer in full|acknowledge)") as e:
        heapmem.open(f.url + "?timeout=1")
    elapsed = time.monotonic() - t0
    one_sentence(e.value)
    assert elapsed < BOUND, f"open() returned after {elapsed:.1f} s"


def test_a_trickling_pipeline_answer_ends_by_the_timeout(fake):
    f = fake(http_answer(CLOSED), slow="pipeline")
    c = hrana.Client(f.url + "?timeout=1")
    t0 = time.monotonic()
    with pytest.raises(hrana.HranaError, match=r"did not answer in full within 1 s") as e:
        c.pipeline(None, [{"type": "close"}])
    assert e.value.code == "NETWORK" and time.monotonic() - t0 < BOUND
    one_sentence(e.value)
    c.close()
