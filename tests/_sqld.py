"""sqld servers on loopback for the tests and bench/sqld.py: a primary and
its replicas on free ports, each in its own directory, killed at the end;
with namespaces=True, one database per tenant (the primary's admin API on a
free port too)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from heapmem.remote import sqld

free_port, answers = sqld.free_port, sqld.answers


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "a condition"
             ) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - the server may still be starting
            pass
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")


class Server:
    """One sqld process: a primary (grpc port) or a replica (primary_grpc)."""

    def __init__(self, directory: str, *, primary_grpc: str | None = None,
                 library: bool = True, auth_key_file: str | None = None,
                 namespaces: bool = False):
        self.directory = directory
        self.port = free_port()
        self.grpc = None if primary_grpc else free_port()
        self.primary_grpc = primary_grpc
        self.library = library
        self.auth_key_file = auth_key_file
        self.namespaces = namespaces
        self.admin = free_port() if namespaces and not primary_grpc else None
        self.proc: subprocess.Popen | None = None
        self.log = os.path.join(directory + ".log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def grpc_url(self) -> str:
        return f"http://127.0.0.1:{self.grpc}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin}"

    def databases(self) -> list[str]:
        """The databases sqld keeps in this server's directory."""
        dbs = os.path.join(self.directory, sqld.DATA, "dbs")
        return sorted(os.listdir(dbs)) if os.path.isdir(dbs) else []

    def args(self) -> list[str]:
        cmd = sqld.command(self.directory, http=f"127.0.0.1:{self.port}",
                           grpc=f"127.0.0.1:{self.grpc}" if self.grpc else None,
                           primary_grpc_url=self.primary_grpc,
                           auth_jwt_key_file=self.auth_key_file, namespaces=self.namespaces,
                           admin=f"127.0.0.1:{self.admin}" if self.admin else None)
        if not self.library:
            i = cmd.index("-e")
            del cmd[i:i + 2]
        return cmd

    def start(self) -> "Server":
        os.makedirs(self.directory, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait_for(lambda: answers(self.port), 30, f"sqld on port {self.port}")
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        self.proc = None


class Cluster:
    """A primary and n replicas in base/, started in that order."""

    def __init__(self, base: str, replicas: int = 2, **kw):
        self.primary = Server(os.path.join(base, "primary"), **kw).start()
        self.replicas = [Server(os.path.join(base, f"replica{i}"),
                                primary_grpc=self.primary.grpc_url, **kw).start()
                         for i in range(replicas)]

    def servers(self) -> list[Server]:
        return [self.primary, *self.replicas]

    def stop(self) -> None:
        for s in self.servers():
            s.kill()
