"""A newcomer's first hour (issue 23): the doors a new user meets first say
what happened and what to do."""
import pytest

import heapmem
import heapmem.errors
from heapmem.adapters.cli import main


def test_times_take_iso_dates_as_the_cli_does(mem):
    a = mem.add("Booked the flight", created_at="2025-03-14")
    b = mem.add("Booked the train", created_at="2025-03-14T09:40:00Z")
    assert a.created_at == 1741910400.0 and b.created_at == 1741910400.0 + 9 * 3600 + 40 * 60
    with pytest.raises(ValueError, match="created_at must be unix seconds, a datetime or an "
                                         "ISO 8601 date"):
        mem.add("x", created_at="next tuesday")
    with pytest.raises(ValueError, match="created_at must be .* from 0 to 253402300799"):
        mem.add("x", created_at="1969-12-31")
    assert mem.count == 2


def test_recall_in_a_namespace_that_does_not_exist_names_those_that_do(tmp_path, capsys):
    db = str(tmp_path / "a.db")
    assert main(["--db", db, "-n", "user:maya", "add", "Booked the flight to Lisbon"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "-n", "user:mya", "recall", "When is my flight?"]) == 0
    out = capsys.readouterr().out
    assert "no memory of user:mya matches" in out
    assert "the store has no namespace 'user:mya'; it has: user:maya; pick one with -n NAME" in out
    # a namespace that exists but matches nothing gets no hint
    assert main(["--db", db, "-n", "user:maya", "recall", "dentist"]) == 0
    assert "has no namespace" not in capsys.readouterr().out


def test_a_directory_as_the_store_says_so(tmp_path, capsys):
    assert main(["--db", str(tmp_path), "stats"]) != 0
    err = capsys.readouterr().err
    assert "it is a directory" in err and "\n" == err[-1] and err.count("\n") == 1


def test_the_docs_name_every_mcp_tool_and_report_answer_requires_its_recall_id(tmp_path):
    pytest.importorskip("mcp")
    import asyncio
    from pathlib import Path

    from heapmem.adapters import mcp_server
    section = (Path(__file__).resolve().parent.parent / "docs" / "mcp.md").read_text()
    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1741910400) as mem:
        server = mcp_server.build_server(mem, "user:maya")

        async def main():
            names = {t.name for t in await server.list_tools()}
            for name in names:
                assert f"`{name}`" in section, name
            res = await server.call_tool("report_answer", {"answer": "March 14"})
            return res

        try:
            out = asyncio.run(main())
            text = str(out)
        except Exception as e:  # the SDK may raise the tool's error
            text = str(e)
        # the schema says recall_id is required (it said: default null), and the
        # refusal names it
        assert "recall_id" in text and "Field required" in text


def test_a_mistyped_verb_gets_a_did_you_mean(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--db", str(tmp_path / "a.db"), "recal", "x"])
    assert e.value.code == 2
    assert "did you mean 'recall'?" in capsys.readouterr().err


def test_a_store_held_by_another_writer_says_so_in_one_sentence(tmp_path):
    path = str(tmp_path / "a.db")
    with heapmem.open(path) as a, heapmem.open(path) as b:
        a.add("first")
        a.connection.execute("BEGIN IMMEDIATE")
        b.connection.setbusytimeout(50)  # (10 s in use: a test does not wait that long)
        with pytest.raises(heapmem.errors.StoreBusyError) as err:
            b.add("second")
        a.connection.execute("ROLLBACK")
        msg = str(err.value)
        assert "another connection held its write lock" in msg and "nothing was written" in msg
        assert "database is locked" not in msg
        assert b.count == 1


# -- item 7: the same text twice is one memory -------------------------------------------

def test_the_same_text_twice_is_one_memory(tmp_path):
    import apsw
    with heapmem.open(str(tmp_path / "a.db"), clock=lambda: 1_700_000_000) as m:
        a = m.add("Maya prefers a window seat", namespace="u", kind="preference")
        again = m.add("Maya prefers a window seat", namespace="u")
        assert again == a and m.count == 1  # returned as stored, nothing written
        assert m.add("Maya prefers a window seat", namespace="u", copy=True).id != a.id
        assert m.add("Maya prefers a window seat", namespace="other").id != a.id
        assert m.add("Maya prefers a window seat", namespace="u", key="seat").id != a.id
        assert m.add("Maya prefers a window seat", namespace="u", id="mine").id == "mine"
        assert m.count == 5
        got = m.add_many([{"text": "one", "namespace": "u"}, {"text": "one", "namespace": "u"},
                          {"text": "Maya prefers a window seat", "namespace": "u"}])
        assert got[0].id == got[1].id and got[2] == a and m.count == 6
        assert len(m.add_many([{"text": "one", "namespace": "u"}], copy=True)) == 1
        assert m.count == 7
        with pytest.raises(TypeError, match="copy must be True or False"):
            m.add("x", copy="yes")
        assert m.check().ok
    # the same in SQL: heap_add gives the memory that holds the text
    c = apsw.Connection(str(tmp_path / "a.db"))
    heapmem.load(c)
    assert c.execute("SELECT heap_add('Maya prefers a window seat', 'u')").fetchall() == [(a.id,)]
    with pytest.raises(apsw.SQLError, match="copy must be 0"):
        c.execute("SELECT heap_add('x', 'u', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2)")
    c.close()


# -- item 2: `heapmem mcp --transport http` says where it serves ---------------------------

def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("token", [None, "test-token-0123456789abcdef"])
def test_mcp_over_http_prints_the_url_it_serves(tmp_path, token):
    pytest.importorskip("mcp")
    import os
    import select
    import socket
    import subprocess
    import sys

    from conftest import stop
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "HEAPMEM_MCP_TOKEN"}
    if token is not None:
        env["HEAPMEM_MCP_TOKEN"] = token
    proc = subprocess.Popen([sys.executable, "-m", "heapmem", "--db",
                             str(tmp_path / "a.db"), "-n", "user:maya", "mcp", "--transport",
                             "http", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "the server printed nothing in 60 s"
        line = proc.stderr.readline()
        where = f"serving MCP at http://127.0.0.1:{port}/mcp (namespace user:maya)"
        assert line == (f"heapmem: {where}; a token is required: Authorization: Bearer "
                        "<token>\n" if token else
                        f"heapmem: warning: {where} with no token required: any program on "
                        "this machine can use the store; set $HEAPMEM_MCP_TOKEN (or --token) "
                        "to require one\n")
        if token:  # docs/cli.md shows the line (of port 8765)
            from pathlib import Path
            doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
            assert line.replace(f":{port}/", ":8765/") in doc
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # it listens
    finally:
        stop(proc)
        proc.stderr.close()


def test_mcp_on_a_port_in_use_says_so_in_one_sentence_and_exits_2(tmp_path):
    pytest.importorskip("mcp")
    import io
    import socket
    db = tmp_path / "a.db"
    with socket.socket() as held:  # another program on the port
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        for token in (None, "test-token-0123456789abcdef"):
            out, err = io.StringIO(), io.StringIO()
            env = {} if token is None else {"HEAPMEM_MCP_TOKEN": token}
            code = main(["--db", str(db), "mcp", "--transport", "http", "--port", str(port)],
                        stdout=out, stderr=err, env=env)
            assert code == 2 and out.getvalue() == ""
            msg = err.getvalue()
            assert msg.startswith(f"heapmem: error: port {port} on 127.0.0.1 is in use: ")
            assert msg.endswith("; pick another with --port\n") and msg.count("\n") == 1
            assert "Errno" not in msg
    assert not db.exists()  # nothing was written: not even a new store


# -- item 8: the docs' API list and verb list name everything there is ----------------

def _readme(doc="docs/python.md"):
    from pathlib import Path
    return (Path(__file__).resolve().parent.parent / doc).read_text()


def _calls(block, name):
    """The argument text of every mem.NAME(...) in block (parentheses balanced)."""
    import re
    out = []
    for m in re.finditer(r"\bmem\." + name + r"\(", block):
        i = j = m.end()
        depth = 1
        while depth:
            depth += {"(": 1, ")": -1}.get(block[j], 0)
            j += 1
        out.append(block[i:j - 1])
    return " ".join(out)


def test_the_readme_api_list_names_every_public_memory_method_and_its_options():
    import inspect
    import re
    block = _readme().split("\n## API\n")[1].split("```python\n")[1].split("```")[0]
    public = {n for n in dir(heapmem.Memory) if not n.startswith("_")}
    assert set(re.findall(r"\bmem\.([a-z_]+)", block)) == public
    for name in sorted(public):
        if isinstance(inspect.getattr_static(heapmem.Memory, name), property):
            continue
        shown = _calls(block, name)
        for p in list(inspect.signature(getattr(heapmem.Memory, name)).parameters.values())[1:]:
            if p.kind is p.KEYWORD_ONLY or (p.default is not p.empty and p.kind not in (
                    p.VAR_KEYWORD, p.VAR_POSITIONAL)):
                assert re.search(r"\b" + p.name + r"\b", shown), f"mem.{name}(... {p.name}=)"
    assert "copy=False" in _calls(block, "add") and "copy=False" in _calls(block, "add_many")


def test_the_readme_names_every_cli_verb():
    from heapmem.adapters import cli
    line = _readme("docs/cli.md").split("```text\n")[1].split("```")[0]
    listed = {w.strip() for w in line.split("VERB ...")[1].replace("\n", " ").split(",")}
    verbs = set(cli.build_parser()._subparsers._group_actions[0].choices)
    assert listed == verbs


def test_the_cli_doc_shows_the_export_header_the_file_has():
    """docs/cli.md prints the head of a real export (examples/cli_doc.py runs it), so
    the schema and meta counts it shows are the file's, not figures typed once."""
    import json
    from pathlib import Path

    from heapmem.db import schema
    doc = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert "\n$ head -n 7 backup.jsonl | cut -c 1-" in doc
    head = json.loads(next(ln for ln in doc.splitlines() if ln.startswith('{"heapmem":"export"')))
    assert head["schema"] == schema.SCHEMA_VERSION
    metas = [ln for ln in doc.splitlines() if ln.startswith('{"type":"meta"')]
    assert metas and head["counts"]["meta"] >= len(metas)
