"""Every doc (README.md and docs/*.md) is what its blocks print today: each
fenced block runs (examples/docs.py runs it and pastes its output) or says
why it does not and which test covers it; the SQL reference is generated
from the C core's registration table; the report's picture shows the page
today's heapmem writes.  When one fails: python examples/docs.py (and
examples/report_shot.py for the picture), then commit."""
import re
import runpy
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = runpy.run_path(str(ROOT / "examples" / "docs.py"))
SHOT = runpy.run_path(str(ROOT / "examples" / "report_shot.py"))


def _blocks(doc):
    """(directives before it, first line) of each fenced block of doc."""
    lines = (ROOT / doc).read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append((DOCS["_directives"](lines, i), lines[i + 1] if j > i + 1 else ""))
            i = j + 1
        else:
            i += 1
    return out


def _needs(doc):
    """Why doc cannot be built here, or None."""
    text = (ROOT / doc).read_text()
    if shutil.which("sqlite3") is None and "run: sqlite3" in text:
        return "no sqlite3 shell on PATH (apt-get install sqlite3)"
    if "run: sqld" in text:
        from heapmem.remote import sqld
        try:
            sqld.binary()
        except sqld.SqldNotFound as e:
            return f"no sqld here: {e}"
    for package, word in (("mcp", "mcp_client"), ("langgraph", "langgraph"),
                          ("llama_index.core", "llamaindex_agent"),
                          ("langchain.agents", "langchain_agent"),
                          ("agents", "openai_agents_agent")):
        if f"examples/{word}" in text:
            try:
                __import__(package)
            except ImportError:
                return f"{package} is not installed (the test extra has it)"
    return None


@pytest.mark.parametrize("doc", DOCS["DOCS"])
def test_every_block_runs_or_says_why_not(doc):
    for d, first in _blocks(doc):
        runs = "run" in d or "output" in d or first.startswith("$ ")
        why = d.get("not run", "")
        assert runs or why, f"{doc}: a block that starts {first!r} neither runs nor says why"
        if why and not runs:
            named = re.findall(r"tests/(test_\w+\.py)", why)
            assert named, f"{doc}: 'not run: {why}' names no test that covers the block"
            for t in named:
                assert (ROOT / "tests" / t).exists(), f"{doc}: {t} does not exist"


@pytest.mark.parametrize("doc", DOCS["DOCS"])
def test_each_doc_shows_what_its_blocks_print_today(doc):
    why = _needs(doc)
    if why:
        pytest.skip(why)
    assert DOCS["build"](doc) == (ROOT / doc).read_text(), \
        f"{doc} is stale: run python examples/docs.py {doc}"


def test_the_sql_reference_is_the_c_cores_registration_table():
    import apsw

    import heapmem
    sqlref = runpy.run_path(str(ROOT / "examples" / "sqlref.py"))
    funcs = sqlref["registered"]()
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    loaded = {n for (n,) in c.execute(
        "SELECT DISTINCT name FROM pragma_function_list WHERE name LIKE 'heap%'")}
    # and the table-valued functions (heap_recall has its own part below)
    tables = {n for (n,) in c.execute(
        "SELECT name FROM pragma_module_list WHERE name LIKE 'heap%'")} - {"heap_recall"}
    assert set(funcs) == loaded | tables  # the parse of register.c is what the library registers
    for name, (kind, nargs, _) in funcs.items():
        if kind == "table-valued":
            cols = c.execute("SELECT name FROM pragma_table_xinfo(?) WHERE hidden",
                             (name,)).fetchall()
            assert nargs == [len(cols)], name  # each argument a hidden column
            continue
        got = {n for (n,) in c.execute("SELECT narg FROM pragma_function_list WHERE name = ?",
                                       (name,))}
        assert not nargs or got == set(nargs), name
    cols = [r[1] for r in c.execute("SELECT * FROM pragma_table_xinfo('heap_recall')")]
    assert [n for n, _ in sqlref["columns"]()] == cols
    doc = (ROOT / "docs" / "sql.md").read_text()
    region = doc.split("<!-- sql-reference -->\n")[1].split("<!-- /sql-reference -->")[0]
    assert region == sqlref["reference"]()
    for name in funcs:
        assert f"`{name}(" in region, name


def test_the_report_picture_shows_the_page_heapmem_writes_today(tmp_path):
    """Friction 2: docs/report.png showed another build's page (schema 8, MRR 0.896)."""
    png = (ROOT / "docs" / "report.png").read_bytes()
    shown = SHOT["shown_text"](png)
    assert shown is not None, "docs/report.png carries no page text: run " \
                              "python examples/report_shot.py"
    today = SHOT["page_text"](Path(SHOT["page"](str(tmp_path))).read_text())
    assert shown == today, "docs/report.png shows another page than heapmem writes today: " \
                           "run python examples/report_shot.py"
    # and it can fail: the page of another store is not the one shown
    assert SHOT["page_text"](today.replace("25 logged", "24 logged")) != shown
