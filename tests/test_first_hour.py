"""The twelve frictions of a new user's first hour (issue 36), each replayed
as the user met it: the command they ran, and what they should have seen."""
import math
import os
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import heapmem
import heapmem.errors
from heapmem.adapters.cli import main
from heapmem.db import schema

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOW = "2025-03-14"


def heapmem_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "heapmem", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """The README's first command, run once for the module: the demo leaves
    agent.db in its folder, and nothing else."""
    d = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=d,
                   check=True, capture_output=True, timeout=120)
    assert [p.name for p in d.iterdir()] == ["agent.db"]
    return d / "agent.db"


@pytest.fixture
def demo(tmp_path, demo_db):
    """A folder as the README's first command leaves it: a copy of the
    demo's agent.db (the demo is a subprocess; five tests write to its file)."""
    shutil.copyfile(demo_db, tmp_path / "agent.db")
    return tmp_path


def block(doc, marker):
    text = (ROOT / doc).read_text()
    m = re.search(r"<!-- " + marker + r" -->\n(?:<!--.*?-->\n)*```\w*\n(.*?)```", text, re.S)
    assert m, f"{doc} has no block marked {marker}"
    return m.group(1)


# 1. explain()'s "score =" left out the context factor, and the CLI's usefulness column
#    showed the unbounded ratio: the table's factors did not multiply to its score
def test_1_the_recall_table_shows_every_factor_as_applied(demo):
    with heapmem.open(str(demo / "agent.db"), clock=lambda: 1741910400) as mem:
        res = mem.recall("When is my flight to Lisbon?", k=3, namespace="user:maya")
        mem.feedback(used=[res[0].id], recall_id=res.recall_id)  # now context counts
    r = heapmem_cli("--db", "agent.db", "--now", NOW, "-n", "user:maya", "recall",
                    "When is my flight to Lisbon?", "-k", "3", "--no-track", cwd=demo)
    assert r.returncode == 0, r.stderr
    head, *rows = [ln for ln in r.stdout.splitlines() if re.match(r"^(#|\d+ )", ln)]
    cols = head.split()
    assert cols[:8] == ["#", "id", "score", "relevance", "recency", "importance",
                        "usefulness", "context"]
    seen_context = False
    for row in rows:
        cells = dict(zip(cols, row.split()))
        product = math.prod(float(cells[c]) for c in cols[3:-1] if cells[c] != "off")
        assert product == pytest.approx(float(cells["score"]), rel=0.03), row
        assert float(cells["usefulness"]) <= heapmem.ScoringConfig().max_lift + 1e-9
        seen_context |= cells["context"] != "1.00"
    assert seen_context  # the factor the table used to leave out
    table = (DOCS / "python.md").read_text().split("## Reading `explain()`")[1]
    for term in ("`rel ", "`recency ", "`importance ", "`useful ", "bounded to", "`x context ",
                 "`x explore ", "`x superseded "):
        assert term in table, term


# 2. docs/report.png was stale and nothing made or checked it
def test_2_the_report_picture_is_made_by_a_command_and_shows_todays_page(tmp_path):
    shot = runpy.run_path(str(ROOT / "examples" / "report_shot.py"))
    shown = shot["shown_text"]((DOCS / "report.png").read_bytes())
    assert shown == shot["page_text"](Path(shot["page"](str(tmp_path))).read_text())
    assert f"version {schema.SCHEMA_VERSION}" in shown


# 3. running the Python sample twice changed the README's later outputs; loop.sql on its
#    own file again failed with an SQLite code and no way to start over
@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on PATH")
def test_3_the_samples_and_the_sql_tour_run_again(tmp_path):
    outs = {subprocess.run([sys.executable, "-c", block("README.md", "python-sample")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
            for _ in range(2)}
    assert outs == {block("README.md", "python-output")}
    load = ["-cmd", f".load {heapmem.loadable_path()}", "-cmd", ".mode box"]
    loop = (ROOT / "examples" / "loop.sql").read_text()
    outs = {subprocess.run(["sqlite3", *load], input=loop, capture_output=True, text=True,
                           timeout=120).stdout for _ in range(2)}
    assert outs == {block("docs/sql.md", "sql-loop-output")}
    # on a file, the second run stops at the first id that exists, in one sentence
    db = str(tmp_path / "loop.db")
    subprocess.run(["sqlite3", db, *load], input=loop, capture_output=True, text=True,
                   timeout=120)
    again = subprocess.run(["sqlite3", db, *load], input=loop, capture_output=True, text=True,
                           timeout=120)
    assert "heap_add: a memory with id 'booking' already exists; it was not changed" in \
        again.stderr
    assert "a second run on that file stops" in (DOCS / "sql.md").read_text()


# 4. heap_answer returned its attribution as arrays of unnamed values
def test_4_heap_answer_names_what_it_returns(demo):
    with heapmem.open(str(demo / "agent.db"), clock=lambda: 1741910400) as mem:
        res = mem.recall("When is my flight to Lisbon?", namespace="user:maya")
        import json
        out = json.loads(mem.connection.execute(
            "SELECT heap_answer(?, 'It departs March 14 at 9:40am', 1741910400)",
            (res.recall_id,)).fetchall()[0][0])
    first = out["attribution"][0]
    assert set(first) == {"verdict", "share", "question_share", "matched", "dated", "present",
                          "candidate"}
    assert first["verdict"] == 1 and "march" in first["matched"]


# 5. heap_init on a database that is not empty nested three sentences inside each other
def test_5_heap_init_on_someone_elses_database_is_one_sentence(tmp_path):
    c = apsw.Connection(str(tmp_path / "other.db"))
    heapmem.load(c)
    c.execute("CREATE TABLE t(x)")
    with pytest.raises(apsw.SQLError) as e:
        c.execute("SELECT heap_init()")
    msg = str(e.value)
    assert msg.split("SQLError: ")[-1] == (
        "heap_init: this database already holds tables of its own; heap_init makes a store "
        "only in an empty database")
    assert msg.count("(") == 0 and msg.count(";") == 1


# 6. stats, list and report (documented as only reading) left -wal and -shm files
def test_6_reading_verbs_leave_no_wal_or_shm(demo):
    for verb in (["stats"], ["-n", "user:maya", "list"], ["report", "agent.db"],
                 ["-n", "user:maya", "recall", "flight", "--no-track"], ["check"]):
        r = heapmem_cli("--db", "agent.db", *verb, cwd=demo)
        assert r.returncode == 0, r.stderr
        left = sorted(p.name for p in demo.iterdir() if p.name.startswith("agent.db-"))
        assert left == [], (verb, left)
    with heapmem.open(str(demo / "agent.db"), readonly=True) as mem:
        mem.stats()
    assert not (demo / "agent.db-wal").exists()


# 7. `pytest -q` printed "30 skipped" with no reasons, and the apt step was silenced
def test_7_skips_say_why_and_ci_says_what_it_installed(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.skip(reason='no widget here')\ndef test_w():\n    pass\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "test_x.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "SKIPPED" in r.stdout and "no widget here" in r.stdout, r.stdout
    ci = (ROOT / ".ci" / "run").read_text()
    assert "echo \"installed" in ci and "skip and say why" in ci
    readme = (ROOT / "README.md").read_text()
    assert ci.splitlines()[-1].split("; python3 -m venv")[0] in readme  # the same words


# 8. errors that named the wrong thing or spoke SQLite
def test_8_errors_name_the_users_mistake(demo, tmp_path):
    r = heapmem_cli("--db", "agent.db", "feedback", "--used", "m999", cwd=demo)
    assert r.returncode == 1 and r.stderr.strip() == "heapmem: error: unknown memory id 'm999'"
    heapmem.open(str(tmp_path / "empty.db")).close()
    r = heapmem_cli("--db", "empty.db", "-n", "user:x", "recall", "hello", cwd=tmp_path)
    assert "none yet" not in r.stdout and "holds no memories yet" in r.stdout
    assert "add TEXT" in r.stdout
    with pytest.raises(heapmem.HeapmemError, match="no such file") as e:
        heapmem.open(str(tmp_path / "missing.db"), readonly=True)
    assert "unable to open database file" not in str(e.value)
    assert not (tmp_path / "missing.db").exists()


# 9. the LangGraph section had no constructor line, called store.feedback(...) without
#    saying it exists, and did not say why search fills its page with unscored items
def test_9_the_langgraph_docs_say_how_to_make_the_store_and_report(tmp_path):
    pytest.importorskip("langgraph")
    doc = (DOCS / "frameworks.md").read_text().split("## LangGraph")[1].split("\n## ")[0]
    assert "HeapmemStore(memory, *," in doc
    assert "feedback(namespace, used_keys)" in doc and "report_answer(namespace, answer)" in doc
    assert "score `None`" in doc and "item.score is not None" in doc
    from heapmem.adapters.langgraph_store import HeapmemStore
    store = HeapmemStore(heapmem.open(str(tmp_path / "lg.db")))
    store.put(("users", "maya"), "flight", {"text": "Booked the flight, March 14 at 9:40am"})
    store.put(("users", "maya"), "seat", {"text": "Window seat, always"})
    hits = store.search(("users", "maya"), query="When is my flight?")
    assert [h.score is not None for h in hits] == [True, False]  # as the doc says
    assert store.feedback(("users", "maya"), ["flight"]).used


# 10. the report: BM25-only wording, "features learned", "α 27 β 0 n 0", a title run
#     through by the x1 line, one bar per chart, another user's question
def test_10_the_report_says_what_it_draws(demo):
    r = heapmem_cli("--db", "agent.db", "--now", NOW, "report", "agent.db", cwd=demo)
    assert r.returncode == 0, r.stderr
    html = (demo / "report.html").read_text()
    assert "cosine" in html and "BM25 over the best candidate" not in html
    assert "links learned in the pooled layer" in html and "features learned" not in html
    assert not re.search(r" n \d+</text>", html) and " own</text>" in html
    factors = html.split('data-chart="factors"')[1].split("</svg>")[0]
    titles = [float(y) for y in re.findall(r'<text class="label strong" x="[\d.]+" '
                                           r'y="([\d.]+)"', factors)]
    assert titles
    for y1, y2 in re.findall(r'<line class="(?:axis|grid)" x1="[\d.]+" y1="([\d.]+)" '
                             r'x2="[\d.]+" y2="([\d.]+)"', factors):
        # a title's glyphs lie from 11px above its baseline to 3px below
        assert not any(float(y1) < t + 3 and float(y2) > t - 11 for t in titles), (y1, y2)
    feedback = html.split('data-chart="feedback"')[1].split("</svg>")[0]
    assert len(set(re.findall(r"2025-03-1\d", feedback))) == 3  # three days of feedback
    assert "When is my flight to Lisbon?" in html.split('data-chart="factors"')[1]


# 11. install lines disagreed, --help pointed at a file a pip user lacks, --lexical was
#     missing from the CLI's docs
def test_11_one_install_form_help_that_stands_alone_every_option_documented():
    texts = {p: p.read_text() for p in [ROOT / "README.md", *DOCS.glob("*.md")]}
    texts.update({p: p.read_text() for p in (ROOT / "heapmem").rglob("*.py")})
    for path, text in texts.items():
        for m in re.finditer(r"pip install ([^\s`]*\[[\w,-]+\][^\s`]*)", text):
            spec = m.group(1).strip("\\")
            # (the one exception: how a clone says the same, once where the form is given)
            ok = spec.startswith(('"heapmem[', '\\"heapmem[')) or (
                spec == '".[mcp]"' and path.name in ("README.md", "python.md"))
            assert ok, f"{path}: pip install {spec}"
    r = subprocess.run([sys.executable, "-m", "heapmem", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert "docs/" not in r.stdout and "heapmem VERB --help" in r.stdout
    from heapmem.adapters import cli
    cli_md = (DOCS / "cli.md").read_text()
    for action in cli.build_parser()._actions:
        for opt in action.option_strings:
            if opt.startswith("--") and opt not in ("--help", "--version"):
                assert f"`{opt}" in cli_md, opt


# 12. the README was 844 lines: a user guide, internals, operations and a SQL tour
def test_12_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    heads = re.findall(r"^## (.*)$", readme, re.M)
    for want in ("The demo", "Python", "SQL", "Documentation"):
        assert any(h.startswith(want) for h in heads), want
    for gone in ("## API", "## Guarantees", "## Layout", "## More than one machine"):
        assert gone not in readme
    assert readme.count("```sql") == 1 and os.path.exists(DOCS / "sql.md")


# -- the first doors a newcomer meets (issue 23) -----------------------------------
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
    for m in re.finditer(r"\bmem\." + re.escape(name) + r"\(", block):
        i = j = m.end()
        depth = 1
        while depth:
            depth += {"(": 1, ")": -1}.get(block[j], 0)
            j += 1
        out.append(block[i:j - 1])
    return " ".join(out)


def _options_shown(block, prefix, cls, names):
    """Each keyword option of each method in names of cls appears in block's
    calls of prefix.NAME(...)."""
    import inspect
    import re
    for name in sorted(names):
        if isinstance(inspect.getattr_static(cls, name), property):
            continue
        shown = _calls(block, prefix + name)
        for p in list(inspect.signature(getattr(cls, name)).parameters.values())[1:]:
            if p.kind is p.KEYWORD_ONLY or (p.default is not p.empty and p.kind not in (
                    p.VAR_KEYWORD, p.VAR_POSITIONAL)):
                assert re.search(r"\b" + p.name + r"\b", shown), \
                    f"mem.{prefix}{name}(... {p.name}=)"


def test_the_readme_api_list_names_every_public_memory_method_and_its_options(tmp_path):
    import re
    block = _readme().split("\n## API\n")[1].split("```python\n")[1].split("```")[0]
    public = {n for n in dir(heapmem.Memory) if not n.startswith("_")}
    held = set(heapmem.Memory.__annotations__)  # what a Memory holds: mem.log, mem.pool, ...
    assert set(re.findall(r"\bmem\.([a-z_]+)", block)) == public | held
    _options_shown(block, "", heapmem.Memory, public)
    # and every verb of what it holds (pool.read takes a connection check() holds)
    with heapmem.open(str(tmp_path / "a.db"), embedder=None) as mem:
        for name in held:
            cls = type(getattr(mem, name))
            verbs = {n for n in vars(cls) if not n.startswith("_")} - {"read"}
            listed = set(re.findall(r"\bmem\." + name + r"\.([a-z_]+)", block))
            assert verbs <= listed, name
            _options_shown(block, name + ".", cls, verbs)
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
