"""The heapmem command: every verb, human and --json output, and bad input
answered with one sentence on stderr, a non-zero exit status, and nothing
written."""
import io
import json
import os
import subprocess
import sys

import pytest

import heapmem
import heapmem.adapters
from heapmem.adapters import cli

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
DAY = 86400.0


class Run:
    """heapmem's main() in-process, on a fixed clock, with captured output."""

    def __init__(self, db, env=None):
        self.db = db
        self.env = env if env is not None else {}

    def __call__(self, *argv, db=True, stdin=None):
        out, err = io.StringIO(), io.StringIO()
        args = (["--db", self.db] if db else []) + [str(a) for a in argv]
        old = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
        try:
            code = cli.main(args, clock=lambda: T, stdout=out, stderr=err, env=self.env)
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code
        finally:
            sys.stdin = old
        self.out, self.err, self.code = out.getvalue(), err.getvalue(), code
        return self

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def run(tmp_path):
    return Run(str(tmp_path / "agent.db"))


def fails(r, *words):
    """A one-sentence error on stderr, exit status 1, nothing on stdout."""
    assert r.code == 1, (r.code, r.out, r.err)
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("heapmem: error: "), r.err
    for w in words:
        assert w in lines[0], (w, lines[0])


def seed(run):
    ns = ["-n", "user:maya"]
    run("add", "Booked the flight: SFO to LIS, departs March 14, 9:40am", "--source", "maya",
        "--created-at", T - 20 * DAY, *ns)
    run("add", "Lisbon! I'd love to visit Lisbon someday", "--kind", "preference",
        "--created-at", T - 5 * DAY, *ns)
    run("add", "Flights to Lisbon from SFO cost around $700 in spring", "--kind", "tool_result",
        "--source", "tool", "--created-at", "2026-11-28", *ns)
    assert run.code == 0


def test_help_reads_well(capsys):
    for argv in (["--help"], ["mcp", "--help"], ["recall", "--help"], ["export", "--help"],
                 ["--version"]):
        assert Run("x")(*argv, db=False).code == 0
        assert capsys.readouterr().out.startswith(("usage: heapmem", "heapmem "))
    # and as a process, as a person would run it
    p = subprocess.run([sys.executable, "-m", "heapmem", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0
    for verb in ("add", "recall", "feedback", "links", "stats", "forget", "check", "report",
                 "export", "import", "sql", "path", "mcp"):
        assert f"\n    {verb} " in p.stdout, verb
    assert "HEAPMEM_DB" in p.stdout and "examples:" in p.stdout
    p = subprocess.run([sys.executable, "-m", "heapmem", "mcp", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for word in ("add", "recall", "mark_used", "mark_ignored", "forget", "list", "stdio",
                 "http", "loopback", "heapmem[mcp]", "--token", "HEAPMEM_MCP_TOKEN", "Origin"):
        assert word in p.stdout, word


def test_add_recall_feedback_links(run, tmp_path):
    seed(run)
    r = run("-n", "user:maya", "recall", "When is my flight to Lisbon?")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split() == ["#", "id", "score", "relevance", "recency", "importance",
                                "usefulness", "context", "rules", "text"]
    assert lines[1].split()[:2] == ["1", "m2"] and "Lisbon!" in lines[1]
    assert lines[2].strip().startswith("score ") and " = rel " in lines[2]  # the explain line
    assert "recall_id 1" in r.out and "heapmem feedback 1 --used" in r.out
    r = run("feedback", "1", "--used", "m1")
    assert r.code == 0 and r.out.startswith("recall 1: used m1; ignored m2, m3;")
    fails(run("feedback", "1", "--used", "m1"), "already has feedback")
    r = run("-n", "user:maya", "links", "--limit", "3")
    assert r.code == 0 and "as user:maya sees them" in r.out
    assert r.out.splitlines()[1].split() == ["#", "feature", "strength", "alpha", "beta", "n"]
    assert len(r.out.splitlines()) == 5
    r = run("links", "--pooled", "--json")
    d = r.json()
    assert d["namespace"] == "*" and d["links"][0]["strength"] >= d["links"][-1]["strength"]
    assert run("links", "-n", "*", "--json").json() == d
    with heapmem.open(run.db, clock=lambda: T) as mem:
        assert d["total"] == len(mem.links())


def test_json_output(run):
    r = run("add", "Seat preference: window", "--kind", "preference", "--key", "seat",
            "--metadata", '{"cabin": "economy"}', "--importance", "2", "--json")
    item = r.json()
    assert item["id"] == "m1" and item["metadata"] == {"cabin": "economy"}
    assert item["importance"] == 2 and item["created_at"] == T and "kind:preference" in \
        item["features"]
    r = run("recall", "which seat do I like?", "--json")
    d = r.json()
    assert d["recall_id"] == 1 and d["qtype"]
    res = d["results"][0]
    assert {"rank", "id", "score", "relevance", "recency", "importance", "usefulness", "rules",
            "text", "explain"} <= set(res)
    r = run("feedback", "--used", "m1", "--json")  # the recall found by its ids
    # (links_updated: the count MCP and the text output give under that name)
    fb = r.json()
    assert fb == {"recall_id": 1, "used": ["m1"], "ignored": [],
                  "links_updated": fb["links_updated"]} and fb["links_updated"] > 0
    s = run("stats", "--json").json()
    assert (s["memories"], s["recalls"], s["events"], s["used"]) == (1, 1, 1, 1)
    assert s["by_namespace"][0]["namespace"] == "default"
    assert run("check", "--json").json()["ok"] is True
    assert run("path", "--json").json()["path"] == heapmem.loadable_path()


def test_global_options_anywhere_and_from_the_environment(tmp_path):
    db = str(tmp_path / "env.db")
    run = Run("unused", env={"HEAPMEM_DB": db, "HEAPMEM_NAMESPACE": "user:ana"})
    run("add", "Dentist appointment confirmed for Tuesday at 3:15pm", db=False)
    assert run.code == 0 and "to user:ana" in run.out and os.path.exists(db)
    r = run("recall", "When is my dentist appointment?", "--json", db=False)
    assert r.json()["namespace"] == "user:ana" and r.json()["results"][0]["id"] == "m1"
    other = str(tmp_path / "other.db")
    r = run("add", "x marks the spot", "--db", other, "-n", "elsewhere", db=False)
    assert r.code == 0 and "to elsewhere" in r.out and os.path.exists(other)


def test_stats_forget_check(run):
    seed(run)
    run("add", "Dentist appointment confirmed for Tuesday at 3:15pm", "-n", "user:ana")
    r = run("stats")
    assert r.code == 0
    assert "memories   4 in 2 namespaces" in r.out and "user:maya" in r.out
    r = run("forget", "m4")
    assert r.code == 0 and r.out.strip() == "forgot 1 memory"
    fails(run("forget", "m4"), "unknown memory ids")
    fails(run("forget", "--all"), "--namespace")
    fails(run("forget"), "ids")
    fails(run("forget", "m1", "--all", "-n", "user:maya"), "not both")
    r = run("forget", "--all", "-n", "user:maya")
    assert r.code == 0 and r.out.strip() == "forgot 3 memories (all of user:maya)"
    r = run("check")
    assert r.code == 0 and r.out.startswith("ok: 0 memories")


def test_check_reports_problems(run):
    seed(run)
    run("recall", "When is my flight?", "-n", "user:maya")
    run("feedback", "1", "--used", "m1")
    with heapmem.open(run.db) as mem:
        mem.connection.execute("SELECT heap_fold_pool()")  # the pooled rows, written now
        mem.connection.execute("UPDATE links SET alpha = alpha + 5 WHERE namespace = '*'")
    r = run("check")
    assert r.code == 1 and "the event log gives" in r.out
    assert r.err.startswith("heapmem: error: the store has ") and len(r.err.splitlines()) == 1


def test_export_import_round_trip(run, tmp_path):
    seed(run)
    run("recall", "When is my flight to Lisbon?", "-n", "user:maya")
    run("feedback", "1", "--used", "m1")
    path = str(tmp_path / "backup.jsonl")
    r = run("export", path)
    assert r.code == 0 and r.out.strip() == (
        f"wrote 3 memories, 1 recall, 3 events and {r.out.split()[-4]} links to {path}")
    copy = Run(str(tmp_path / "copy.db"))
    r = copy("import", path)
    assert r.code == 0 and r.out.startswith("imported 3 memories, 1 recall, 3 events")
    assert copy("check").code == 0
    a = run("recall", "When is my flight to Lisbon?", "-n", "user:maya", "--no-track",
            "--json").json()
    b = copy("recall", "When is my flight to Lisbon?", "-n", "user:maya", "--no-track",
             "--json").json()
    assert a == b
    # to standard output, and back from standard input
    r = run("export")
    assert r.out.splitlines()[0].startswith('{"heapmem":"export"')
    third = Run(str(tmp_path / "third.db"))
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(r.out.encode()), encoding="utf-8")
    try:
        r = third("import", "-", "--json")
    finally:
        sys.stdin = old
    assert r.code == 0 and r.json()["memories"] == 3
    # the same file again: ids collide, nothing is written
    before = open(path).read()
    fails(copy("import", path), "already in the store")
    assert copy("export").out.splitlines()[1:] == before.splitlines()[1:]


def test_links_only_export_and_prior_import(run, tmp_path):
    seed(run)
    run("recall", "When is my flight to Lisbon?", "-n", "user:maya")
    run("feedback", "1", "--used", "m1")
    path = str(tmp_path / "links.jsonl")
    r = run("export", "--links-only", path)
    assert r.code == 0 and "no text, no ids" in r.out
    text = open(path).read()
    assert "Lisbon" not in text and "m1" not in text and "maya" not in text
    fresh = Run(str(tmp_path / "fresh.db"))
    r = fresh("import", path)
    assert r.code == 0 and r.out.strip().endswith("into the pooled layer '*' as a prior")
    assert fresh("check").code == 0
    assert fresh("links", "--pooled", "--json").json() == run("links", "--pooled",
                                                              "--json").json()
    assert "carry a merged prior" in fresh("stats").out
    fails(fresh("import", path), "already merged")


def test_progress_bar_on_request(run, tmp_path):
    seed(run)
    r = run("export", str(tmp_path / "x.jsonl"), "--progress")
    assert r.code == 0 and "export [" in r.err and "100%" in r.err
    r = Run(str(tmp_path / "y.db"))("import", str(tmp_path / "x.jsonl"), "--progress")
    assert r.code == 0 and "import [" in r.err
    r = Run(str(tmp_path / "z.db"))("import", str(tmp_path / "x.jsonl"))
    assert r.err == ""  # not a terminal: no bar


def test_sql_and_path(run):
    seed(run)
    r = run("sql", "SELECT id, kind, importance FROM memories ORDER BY seq")
    assert r.code == 0
    assert r.out.splitlines()[0].split() == ["id", "kind", "importance"]
    assert r.out.splitlines()[1].split() == ["m1", "fact", "1.0"]
    r = run("sql", "SELECT heap_qtype('When is my flight?') AS qtype", "--json")
    assert r.json() == [{"qtype": "when"}]
    assert run("sql", "SELECT 1 WHERE 0").out.strip() == "(no rows)"
    fails(run("sql", "DELETE FROM memories"), "--write")
    assert run("sql", "SELECT count(*) AS n FROM memories", "--json").json() == [{"n": 3}]
    fails(run("sql", "SELECT nope"), "SQL error", "nope")
    fails(run("sql"), "needs a statement")
    fails(run("sql", "SELECT 1", "--load-line"), "not both")
    r = run("sql", "--load-line")
    assert r.out.strip() == f".load {heapmem.loadable_path()}"
    assert run("path").out.strip() == heapmem.loadable_path()
    r = run("sql", "UPDATE memories SET importance = 2 WHERE id = 'm1'", "--write")
    assert r.code == 0 and r.out.strip() == "(no rows)"


def test_add_reads_standard_input(run):
    r = run("add", "-", "--json", stdin="A memory from a pipe\n")
    assert r.code == 0 and r.json()["text"] == "A memory from a pipe"


@pytest.mark.parametrize("argv, words", [
    (["add", "  "], ["text must not be empty"]),
    (["add", "x", "--importance", "11"], ["importance"]),
    (["add", "x", "--importance", "nan"], ["importance"]),
    (["add", "x", "--metadata", "{oops"], ["not valid JSON"]),
    (["add", "x", "--metadata", "[1]"], ["JSON object"]),
    (["add", "x", "-n", "*"], ["reserved"]),
    (["add", "x", "--id", "m1"], ["already exists"]),
])
def test_add_refuses_bad_input_and_writes_nothing(run, argv, words):
    run("add", "the first memory")
    before = os.path.getsize(run.db), run("stats", "--json").json()
    fails(run(*argv), *words)
    assert run("stats", "--json").json() == before[1]


@pytest.mark.parametrize("argv, words", [
    (["recall", "x"], ["no store at"]),
    (["links"], ["no store at"]),
    (["tune"], ["no store at"]),
    (["config"], ["no store at"]),
    (["config", "w_usefulness=0.5"], ["no store at"]),
    (["stats"], ["no store at"]),
    (["check"], ["no store at"]),
    (["report"], ["no store at"]),
    (["export", "x.jsonl"], ["no store at"]),
    (["forget", "m1"], ["no store at"]),
    (["feedback", "1", "--used", "m1"], ["no store at"]),
    (["sql", "SELECT 1"], ["no store at"]),
])
def test_reading_verbs_never_create_a_store(run, argv, words):
    fails(run(*argv), *words)
    assert not os.path.exists(run.db)


def test_bad_input_elsewhere(run, tmp_path):
    seed(run)
    fails(run("recall", "x", "-k", "1001"), "k must be")
    fails(run("feedback", "1"), "--used")
    fails(run("feedback", "99", "--used", "m1"), "unknown recall_id")
    fails(run("import", str(tmp_path / "missing.jsonl")), "no file at")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    fails(run("import", str(bad)), "not a heapmem export")
    fails(run("export", str(tmp_path)), "folder")
    fails(run("export", str(tmp_path / "no" / "x.jsonl")), "does not exist")
    fails(Run(str(tmp_path / "no" / "x.db"))("add", "x"), "does not exist")
    not_a_store = tmp_path / "other.sqlite"
    import apsw
    c = apsw.Connection(str(not_a_store))
    c.execute("CREATE TABLE t(x)")
    c.close()
    size = not_a_store.stat().st_size
    fails(Run(str(not_a_store))("add", "x"), "not a heapmem store")
    assert not_a_store.stat().st_size == size


def test_usage_errors_are_one_line(run, capsys):
    for argv in (["recall"], ["add", "x", "--importance", "high"], ["nosuchverb"],
                 ["--now", "yesterday", "add", "x"], ["recall", "x", "-k", "0"]):
        r = run(*argv)
        err = capsys.readouterr().err  # argparse writes to sys.stderr
        assert r.code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
        assert err.startswith("heapmem") and "error:" in err and "--help" in err
    assert not os.path.exists(run.db)


def test_now_option_makes_output_reproducible(run):
    run("--now", "2026-01-01T00:00:00Z", "add", "New year memory", "--json")
    assert run.json()["created_at"] == 1767225600.0
    run("add", "x", "--json", "--now", "1767225700")
    assert run.json()["created_at"] == 1767225700.0


def test_mcp_without_the_package(run, monkeypatch):
    # as if mcp were missing
    monkeypatch.setitem(sys.modules, "heapmem.adapters.mcp_server", None)
    monkeypatch.delattr(heapmem.adapters, "mcp_server", raising=False)
    fails(run("mcp"), 'pip install "heapmem[mcp]"')
    assert not os.path.exists(run.db)


def test_mcp_http_is_loopback_only_without_a_token(run):
    pytest.importorskip("mcp")
    fails(run("mcp", "--transport", "http", "--host", "0.0.0.0"), "loopback", "--token")
    fails(run("mcp", "--transport", "http", "--host", "192.168.1.5"), "loopback")
    fails(run("mcp", "--transport", "http", "--host", "0.0.0.0", "--token", "too-short"),
          "at least 16")
    assert not os.path.exists(run.db)  # (more in tests/test_trust_io.py)


@pytest.mark.parametrize("code", [
    "from heapmem.adapters.cli import main",  # the console script's entry point
    "from heapmem.adapters.cli import main",  # its path before the subpackages (issue 25)
])
def test_console_script_entry_point(code):
    p = subprocess.run([sys.executable, "-c", f"import sys; {code}; "
                        "sys.exit(main(['--version']))"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == f"heapmem {heapmem.__version__}"


@pytest.mark.parametrize("module", ["heapmem", "heapmem.adapters.cli"])
def test_python_dash_m(module):
    p = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == f"heapmem {heapmem.__version__}", p.stderr


def test_feedback_from_the_answer_text(run):
    seed(run)
    r = run("-n", "user:maya", "recall", "When is my flight to Lisbon?")
    assert r.code == 0
    r = run("feedback", "1", "--answer", "You fly out March 14 at 9:40am, SFO to LIS.")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("recall 1: used m1; ignored m2;")
    assert len(lines) == 4  # one line per shown memory, in rank order
    assert any(ln.split()[1:3] == ["used", "m1:"] and "sfo" in ln and "of the answer's" in ln
               for ln in lines[1:])
    fails(run("feedback", "1", "--answer", "March 14"), "already has feedback")
    run("-n", "user:maya", "recall", "When is my flight to Lisbon?")
    d = run("feedback", "2", "--answer", "March 14, 9:40am", "--json").json()
    assert d["used"] == ["m1"]
    assert {j["id"]: j["verdict"] for j in d["judgements"]}["m1"] == "used"
    assert {"id", "verdict", "share", "matched", "dated", "reason"} <= set(d["judgements"][0])
    fails(run("feedback", "2", "--answer", "x", "--used", "m1"), "not both")
    fails(run("feedback", "--answer", "x"), "needs the RECALL_ID")
    fails(run("feedback", "3", "--answer", " "), "must not be empty")


# -- list, get, update, portable: thin calls of Memory.list/get/update/set_portable ----

def test_list_is_a_namespace_newest_first(run, capsys):
    seed(run)
    r = run("-n", "user:maya", "list")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "user:maya: memories 1 to 3 of 3, newest first"
    assert lines[1].split() == ["id", "created", "kind", "importance", "text"]
    assert [ln.split()[0] for ln in lines[2:]] == ["m3", "m2", "m1"]
    assert lines[2].split()[1:5] == ["2026-11-28", "00:00", "tool_result", "0.6"]
    assert lines[4].endswith("Booked the flight: SFO to LIS, departs March 14, 9:40am")
    r = run("-n", "user:maya", "list", "--limit", "1", "--offset", "1")
    assert r.out.splitlines()[0] == "user:maya: memories 2 to 2 of 3, newest first"
    assert [ln.split()[0] for ln in r.out.splitlines()[2:]] == ["m2"]
    d = run("-n", "user:maya", "list", "--offset", "2", "--json").json()
    with heapmem.open(run.db, readonly=True) as mem:
        want = mem.list("user:maya", limit=20, offset=2)
    assert (d["namespace"], d["total"], d["offset"]) == ("user:maya", 3, 2)
    assert [m["id"] for m in d["memories"]] == [it.id for it in want] == ["m1"]
    assert d["memories"][0] == run("get", "m1", "--json").json()
    r = run("-n", "user:maya", "list", "--offset", "3")
    assert r.code == 0 and r.out == "no memories of user:maya past the first 3 (it holds 3)\n"
    r = run("-n", "user:mya", "list")  # a typo: which namespaces there are
    assert r.code == 0 and r.out.splitlines() == [
        "no memories of user:mya", "(the store has no namespace 'user:mya'; it has: user:maya; "
        "pick one with -n NAME)"]
    for bad, words in ((["--limit", "0"], "must be 1 or more"),
                       (["--offset", "-1"], "must be 0 or more"),
                       (["--limit", "x"], "not a whole number")):
        r = run("list", *bad)
        err = capsys.readouterr().err
        assert r.code == 2 and words in err and err.count("\n") == 1 and r.out == ""
    fails(Run(run.db + ".none")("list"), "no store at")


def test_get_shows_every_field(run):
    seed(run)
    run("add", "Seat preference: window", "--kind", "preference", "--key", "seat",
        "--metadata", '{"cabin": "economy"}', "-n", "user:maya")
    r = run("get", "m4")
    assert r.code == 0
    fields = dict((ln[:11].strip(), ln[11:]) for ln in r.out.splitlines())
    assert fields == {"id": "m4", "namespace": "user:maya", "kind": "preference",
                      "source": "-", "key": "seat", "importance": "1.3",
                      "created": "2026-11-30 12:00", "last used": "-",
                      "metadata": '{"cabin": "economy"}', "features": fields["features"],
                      "text": "Seat preference: window"}
    assert fields["features"].startswith("kind:preference ")
    with heapmem.open(run.db, readonly=True) as mem:
        it = mem.get("m4")
    d = run("get", "m4", "--json").json()
    assert d["id"] == it.id and d["metadata"] == it.metadata and d["features"] == list(
        it.features)
    fails(run("get", "m9"), "no memory with id 'm9'")


def test_update_changes_only_what_is_given(run):
    seed(run)
    r = run("update", "m2", "--text", "Lisbon in May, with Ana", "--key", "trip",
            "--importance", "2.5")
    assert r.code == 0
    assert r.out == ("updated m2 in user:maya (importance, key, text changed; heapmem get m2 "
                     "shows it)\n")
    with heapmem.open(run.db, readonly=True) as mem:
        it = mem.get("m2")
    assert (it.text, it.key, it.importance, it.kind) == ("Lisbon in May, with Ana", "trip", 2.5,
                                                         "preference")
    r = run("-n", "user:maya", "recall", "Who goes to Lisbon in May?", "--json")
    assert r.json()["results"][0]["id"] == "m2"  # the search index follows the new text
    d = run("update", "m2", "--key", "", "--importance", "default", "--source", "ana",
            "--metadata", '{"with": "ana"}', "--json").json()
    assert (d["key"], d["importance"], d["source"], d["metadata"]) == (None, 1.3, "ana",
                                                                      {"with": "ana"})
    d = run("update", "m2", "--kind", "fact", "--metadata", "", "--json").json()
    assert (d["kind"], d["importance"], d["metadata"]) == ("fact", 1.0, None)  # kind's default
    r = run("update", "m2", "--text", "-", stdin="Lisbon, from standard input\n")
    assert r.code == 0 and run("get", "m2", "--json").json()["text"] == (
        "Lisbon, from standard input")
    assert run("check").code == 0
    # bad input: one sentence, nothing written
    with heapmem.open(run.db, readonly=True) as mem:
        before = mem.get("m2")
    fails(run("update", "m2"), "needs at least one of --text")
    fails(run("update", "m9", "--text", "x"), "unknown memory id 'm9'")
    fails(run("update", "m2", "--importance", "11"), "importance")
    fails(run("update", "m2", "--importance", "lots"), "--importance must be a number")
    fails(run("update", "m2", "--text", " "), "text")
    fails(run("update", "m2", "--metadata", "[1]"), "must be a JSON object")
    fails(run("update", "m2", "--metadata", "{"), "not valid JSON")
    with heapmem.open(run.db, readonly=True) as mem:
        assert mem.get("m2") == before


def test_portable_switches_set_portable(run, capsys):
    seed(run)
    r = run("portable")
    assert r.out == ("portable off: forget erases in place (FTS5 secure-delete); readers "
                     "SQLite 3.37 or later (3.42 once a forget or update erases)\n")
    run("forget", "m3")
    assert run("portable").out == ("portable off: forget erases in place (FTS5 secure-delete);"
                                   " readers SQLite 3.42 or later\n")
    r = run("portable", "on")
    assert r.code == 0 and r.out == ("portable on: forget merges the whole index; readers "
                                     "SQLite 3.37 or later\n")
    with heapmem.open(run.db, readonly=True) as mem:
        st = mem.stats()
        assert not st.erases_in_place and st.oldest_reader == "3.37"
    run("forget", "m2")
    assert run("portable", "--json").json() == {"portable": True, "oldest_reader": "3.37"}
    assert run("portable", "off", "--json").json() == {"portable": False,
                                                       "oldest_reader": "3.37"}
    with heapmem.open(run.db, readonly=True) as mem:
        assert mem.stats().erases_in_place
    r = run("portable", "maybe")
    assert r.code == 2 and "invalid choice" in capsys.readouterr().err
    fails(Run(run.db + ".none")("portable", "on"), "no store at")


def test_import_remap_ids_merges_two_stores(run, tmp_path):
    seed(run)
    run("recall", "When is my flight to Lisbon?", "-n", "user:maya")
    run("feedback", "1", "--used", "m1")
    path = str(tmp_path / "x.jsonl")
    run("export", path)
    other = Run(str(tmp_path / "other.db"))
    other("add", "Dentist appointment confirmed for Tuesday at 3:15pm", "-n", "user:ana")
    fails(other("import", path), "already in the store", "--remap-ids")
    r = other("import", path, "--remap-ids")
    # m1 is taken and moves to m2 (its new seq), so m2 moves to m3, and m3 to m4
    assert r.code == 0 and r.out.splitlines()[1] == (
        "3 memories got a free id (theirs was taken): m1 -> m2, m2 -> m3, m3 -> m4")
    assert other("get", "m2", "--json").json()["text"].startswith("Booked the flight")
    # the record of m1's use came along under its new id: m2 shows ctx:1 (used
    # for this very question), nothing else does
    with heapmem.open(str(tmp_path / "other.db")) as mem:
        got = {r.id: r for r in mem.recall("When is my flight to Lisbon?", namespace="user:maya",
                                           track=False)}
    assert [i for i, r in got.items() if "ctx:1" in r.features] == ["m2"]
    assert got["m2"].context_n > 0
    assert other("check").code == 0
    d = Run(str(tmp_path / "third.db"))("import", path, "--remap-ids", "--json").json()
    assert d["remapped"] == {} and d["memories"] == 3


def test_config_shows_and_saves_the_scoring_config(run):
    """`heapmem config` prints the config in force beside the defaults; with
    NAME=VALUE it saves them (a later open starts from them); a bad name or
    value is one sentence and changes nothing."""
    run("add", "Booked the flight to Lisbon")
    r = run("config")
    assert r.code == 0 and r.out.splitlines()[0].split() == ["field", "value", "default"]
    assert "w_usefulness          0.3      0.3" in r.out and "*" not in r.out
    r = run("config", "w_usefulness=0.5", "candidates=40")
    assert r.code == 0 and r.out.startswith("saved in the store: candidates=40, w_usefulness=0.5")
    with heapmem.open(run.db) as mem:
        assert mem.config == heapmem.ScoringConfig(w_usefulness=0.5, candidates=40)
    for argv, words in ((["nope=1"], ["unknown config field 'nope'", "w_usefulness"]),
                        (["w_usefulness"], ["expected NAME=VALUE"]),
                        (["w_usefulness=x"], ["w_usefulness must be a number, got 'x'"]),
                        (["candidates=2.5"], ["candidates must be a whole number"]),
                        (["w_usefulness=0.7", "max_lift=0.5"], ["max_lift must be a number"]),
                        (["w_usefulness=nan"], ["w_usefulness must be a number from 0"])):
        fails(run("config", *argv), *words)
    d = run("config", "--json").json()
    assert d["saved"] is False and d["config"]["w_usefulness"] == 0.5
    assert d["config"]["candidates"] == 40

