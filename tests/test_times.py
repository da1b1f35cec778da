"""Times at the edges, and read mode's report-only pragmas (issue 20: items 10,
11 and 14).

- 10: every time a caller gives is unix seconds from validate.MIN_TIME (1970)
  to MAX_TIME (the last second of the year 9999), or a ValueError naming the
  parameter; the C library's time arithmetic (heap_attribute's days,
  heap_score's and heap_explain's ages) is defined for any double a store or
  raw SQL hands it: NaN, infinities, +-1e300, +-9.2e18 (`make sanitize` runs
  this file under ASan and UBSan);
- 11: a store that holds a time beyond what datetime can show (written by raw
  SQL, or by another program) still reads: `heapmem stats`, `recall`,
  `export`, `check` and `sql` exit 0 and print the raw number, marked; the
  CLI's --created-at and --now refuse such a time with one sentence;
- 14: `heapmem sql` without --write runs `PRAGMA journal_mode` (and every
  other report-only pragma) and still refuses `PRAGMA journal_mode=DELETE`.
"""
import io
import json
import math
from datetime import datetime, timezone

import apsw
import pytest

import heapmem
from heapmem import validate
from heapmem.adapters import cli, sqlguard
from heapmem.errors import ReadOnlyError

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
YEAR_10000 = 253402300800.0  # 10000-01-01T00:00:00Z, one second past MAX_TIME


def one_sentence(text):
    return len(text.strip().splitlines()) == 1 and "Traceback" not in text


# -- 10a: the door -----------------------------------------------------------------


def test_the_time_bounds_are_1970_to_the_end_of_the_year_9999():
    assert validate.MIN_TIME == 0.0
    assert validate.MAX_TIME == 253402300799.0
    assert datetime.fromtimestamp(validate.MAX_TIME, timezone.utc) == datetime(
        9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    assert validate.seconds(0, "now") == 0.0
    assert validate.seconds(validate.MAX_TIME, "now") == validate.MAX_TIME
    assert validate.seconds(datetime(2026, 11, 30, 12), "now") == T


OUT_OF_RANGE = [
    (1e300, "1e+300"), (-1e300, "-1e+300"), (math.inf, "inf"), (-math.inf, "-inf"),
    (math.nan, "nan"), (YEAR_10000, "253402300800.0"), (-1, "-1"), (-0.5, "-0.5"),
    (9.2e18, "9.2e+18"), (2 ** 63, str(2 ** 63)), (10 ** 400, "beyond float range"),
    (datetime(1969, 12, 31, 23, 59), "1969-12-31T23:59:00+00:00"),
    (datetime.max, "9999-12-31T23:59:59.999999"), (datetime.min, "0001-01-01"),
]


@pytest.mark.parametrize("value, shown", OUT_OF_RANGE, ids=[s for _, s in OUT_OF_RANGE])
def test_seconds_refuses_a_time_out_of_range_in_one_sentence_naming_the_parameter(value, shown):
    with pytest.raises(ValueError) as e:
        validate.seconds(value, "created_at")
    msg = str(e.value)
    assert msg.startswith("created_at must be a finite number of unix seconds from 0 to "
                          "253402300799"), msg
    assert shown in msg and one_sentence(msg), msg


@pytest.fixture
def mem(tmp_path):
    with heapmem.open(str(tmp_path / "agent.db"), clock=lambda: T) as m:
        m.add("Booked the flight to Lisbon yesterday", namespace="user:maya")
        yield m


@pytest.mark.parametrize("value", [1e300, -1e300, YEAR_10000, -1.0, 9.2e18])
def test_add_recall_and_feedback_refuse_a_time_out_of_range(mem, value):
    before = mem.count
    with pytest.raises(ValueError, match="unix seconds from 0 to 253402300799"):
        mem.add("a memory from the year 1e300", created_at=value)
    assert mem.count == before
    with pytest.raises(ValueError, match="now must be .* from 0 to 253402300799"):
        mem.recall("flight", namespace="user:maya", now=value)
    res = mem.recall("flight", namespace="user:maya")
    with pytest.raises(ValueError, match="now must be .* from 0 to 253402300799"):
        mem.feedback([res[0].id], recall_id=res.recall_id, now=value)


def test_add_names_created_at_in_its_error(mem):
    with pytest.raises(ValueError, match=r"^created_at must be"):
        mem.add("x", created_at=1e300)


# -- 10b: the C library's time arithmetic, for any double ----------------------------


# created_at / age_days values: SQL literals (9e999 is +inf, NULL the closest
# SQL gets to NaN: SQLite stores a NaN as NULL)
EXTREME = ["1e300", "-1e300", "9e999", "-9e999", "9.2e18", "-9.2e18", "1e19", "-1e19",
           "9223372036854775807", "-9223372036854775808", "253402300800", "-62135596801",
           "0", "-0.0", "4.9e-324", "-1", "NULL", "(9e999 - 9e999)"]

# each time expression hm_memory_overlaps moves a memory's day by
MEMORY_TEXTS = ["booked the flight yesterday", "booked it today", "flying tomorrow",
                "booked it last year", "going next year", "booked last week",
                "booked last month", "going next month", "booked a few days ago",
                "a couple of weeks ago", "the other day", "booked it"]
ANSWERS = ["7 May 2023", "May 7, 2023", "May 2023", "2023", "7 May 2023 before",
           "2099 after", "1900 before", "flight"]


@pytest.fixture(scope="module")
def conn():
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    yield c
    c.close()


def sql_ok_or_one_sentence(conn, sql, *args):
    """The rows, or None for an SQL error of one sentence (a crash kills the run)."""
    try:
        return conn.execute(sql, args).fetchall()
    except apsw.Error as e:
        assert one_sentence(str(e)) and str(e).startswith(("heap_", "Error")), str(e)
        return None


def q(text):
    return "'" + text.replace("'", "''") + "'"


def test_heap_attribute_takes_any_created_at(conn):
    for created in EXTREME:
        for answer in ANSWERS:
            rows = ", ".join(f"({i}, {q(t)}, {created})" for i, t in enumerate(MEMORY_TEXTS))
            got = sql_ok_or_one_sentence(
                conn, f"SELECT heap_attribute({q(answer)}, 'When is my flight?', column1, "
                      f"column2, column3) FROM (VALUES {rows})")
            if created in ("NULL", "(9e999 - 9e999)"):  # not a number: refused
                assert got is None
                continue
            out = json.loads(got[0][0])
            assert len(out) == len(MEMORY_TEXTS)
            far = created not in ("0", "-0.0", "4.9e-324", "-1")
            if far:  # a memory stated ~2.9e11 years away or more overlaps no answer's date
                assert all(entry["dated"] == 0 for entry in out), (created, answer, out)


def test_heap_attribute_still_dates_a_memory_of_its_own_day(conn):
    may8 = datetime(2023, 5, 8, 10, tzinfo=timezone.utc).timestamp()
    for created, dated in ((may8, 1), (may8 + 86400 * 30, 0), (1e300, 0), (-1e300, 0),
                           (9.2e18, 0), (-9.2e18, 0)):
        out = json.loads(conn.execute(
            "SELECT heap_attribute('7 May 2023', 'When did I book it?', 0, "
            "'booked the flight yesterday', ?)", (created,)).fetchall()[0][0])
        assert out[0]["dated"] == dated, (created, out)
    # "last year" from a day clamped far out never lands in 1900-2099
    for created in (1e300, -1e300, 9.2e18, -9.2e18, 1e19):
        for text in ("booked it last year", "going next year"):
            out = json.loads(conn.execute(
                "SELECT heap_attribute('2023', 'When?', 0, ?, ?)", (text, created)
            ).fetchall()[0][0])
            assert out[0]["dated"] == 0, (created, text, out)


SCORE_ARGS = "1.0, {age}, 1.0, 0, 'kind:fact src:none len:s date', 'when', NULL"


def test_every_function_that_takes_an_age_takes_any_age(conn):
    for age in EXTREME:
        for sql in (f"SELECT heap_score({SCORE_ARGS.format(age=age)})",
                    f"SELECT heap_score({SCORE_ARGS.format(age=age)}, 'half_life_days=0.001')",
                    f"SELECT heap_explain({SCORE_ARGS.format(age=age)})",
                    f"SELECT heap_recency({age})", f"SELECT heap_recency({age}, 1e-300, 0)",
                    f"SELECT heap_recency({age}, 1e300, 1)",
                    f"SELECT heap_credit('kind:fact date', 'when', {age}, 1, NULL)",
                    f"SELECT heap_credit('kind:fact date', 'when', {age}, 1, NULL, 'model=0')",
                    f"SELECT heap_fold('kind:fact date', 'when', {age}, 1, NULL)"):
            got = sql_ok_or_one_sentence(conn, sql)
            if got is not None and isinstance(got[0][0], float):
                assert math.isfinite(got[0][0]) and got[0][0] >= 0, (sql, got)


def test_heap_explain_shows_a_far_age_in_a_few_digits(conn):
    for age, shown in (("1e300", "(age 1e+300d)"), ("9.2e18", "(age 9.2e+18d)"),
                       ("9e999", "(age infd)"), ("3.25", "(age 3.2d)"), ("-5", "(age 0.0d)")):
        line = conn.execute(f"SELECT heap_explain({SCORE_ARGS.format(age=age)}, "
                            "'w_recency=1')").fetchall()[0][0]
        assert shown in line and line.endswith("]"), line
        assert len(line) < 200, line


# -- 11: reading a store that holds a time datetime cannot show ---------------------


class Run:
    def __init__(self, db):
        self.db = db

    def __call__(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        try:
            code = cli.main(["--db", self.db, *map(str, argv)], clock=lambda: T, stdout=out,
                            stderr=err, env={})
        except SystemExit as e:  # argparse
            code = e.code
        self.out, self.err, self.code = out.getvalue(), err.getvalue(), code
        return self


FAR = {"user:far": 1e300, "user:y10000": YEAR_10000, "user:past": -1e300}


@pytest.fixture
def far_store(tmp_path):
    """A store whose memories were stated (and last used) at times beyond
    datetime's range, written behind heapmem's back with raw SQL."""
    db = str(tmp_path / "far.db")
    with heapmem.open(db, clock=lambda: T) as m:
        for ns, when in FAR.items():
            it = m.add(f"Booked the flight to Lisbon ({ns})", namespace=ns)
            with m.transaction():
                m.connection.execute("UPDATE memories SET created_at = ?, last_used_at = ? "
                                     "WHERE id = ?", (when, when, it.id))
        m.add("Booked the hotel in Lisbon", namespace="user:now")
    return db


def test_stats_shows_a_time_out_of_range_as_its_number(far_store):
    run = Run(far_store)
    r = run("stats")
    assert (r.code, r.err) == (0, ""), (r.code, r.err)
    assert "1e+300 (out of range)" in r.out and "253402300800.0 (out of range)" in r.out
    assert "-1e+300 (out of range)" in r.out and "2026-11-30 12:00" in r.out
    r = run("stats", "--json")
    assert (r.code, r.err) == (0, "")
    by = {n["namespace"]: n for n in json.loads(r.out)["by_namespace"]}
    assert by["user:far"]["last_added"] == 1e300


@pytest.mark.parametrize("argv", [
    ["recall", "flight to Lisbon"], ["recall", "flight to Lisbon", "--json"],
    ["recall", "When did I book the flight?", "--no-track"], ["check"], ["links"],
    ["sql", "SELECT id, created_at, last_used_at FROM memories"],
    ["sql", "SELECT id, created_at FROM memories", "--json"],
])
def test_the_verbs_that_read_times_work_on_a_far_store(far_store, argv):
    run = Run(far_store)
    for ns in [*FAR, "user:now"]:
        r = run("-n", ns, *argv)
        assert r.code == 0 and r.err == "", (ns, argv, r.code, r.err)


def test_export_of_a_far_store_keeps_the_numbers(far_store, tmp_path):
    run = Run(far_store)
    target = str(tmp_path / "far.jsonl")
    r = run("export", target)
    assert (r.code, r.err) == (0, ""), r.err
    with open(target, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    times = {x["namespace"]: x["created_at"] for x in lines if x.get("type") == "memory"}
    assert times["user:far"] == 1e300 and times["user:y10000"] == YEAR_10000


@pytest.mark.parametrize("value", ["1e300", "-1e300", "253402300800", "-1", "10000-01-01",
                                   "10000-01-01T00:00:00Z", "+10000-01-01",
                                   "9999-12-31T23:59:59-01:00", "1969-12-31"])
def test_created_at_and_now_refuse_a_time_out_of_range_in_one_sentence(tmp_path, capsys,
                                                                      value):
    run = Run(str(tmp_path / "agent.db"))
    assert run("add", "first").code == 0
    # (--opt=VALUE: argparse takes -1e300 for an option of its own)
    for argv in (["add", "a memory from far away", f"--created-at={value}"],
                 [f"--now={value}", "add", "a memory from far away"]):
        r = run(*argv)
        err = capsys.readouterr().err  # argparse writes to sys.stderr
        assert r.code == 2 and r.out == "", (argv, r.code, r.out, err)
        assert one_sentence(err) and "out of range" in err, err
        assert "1970-01-01 to 9999-12-31T23:59:59Z" in err, err
        assert ("--created-at" if "add" == argv[0] else "--now") in err, err
    with heapmem.open(run.db, readonly=True) as m:
        assert m.count == 1


def test_created_at_takes_the_last_second_of_the_year_9999(tmp_path):
    run = Run(str(tmp_path / "agent.db"))
    for value in ("9999-12-31T23:59:59Z", "253402300799", "1970-01-01", "0"):
        r = run("add", f"memory at {value}", "--created-at", value, "--json")
        assert r.code == 0, r.err
    r = run("stats")
    assert r.code == 0 and "9999-12-31 23:59" in r.out


# -- 14: read mode runs the pragmas that only report --------------------------------


@pytest.fixture
def store(tmp_path):
    db = str(tmp_path / "agent.db")
    with heapmem.open(db, clock=lambda: T) as m:
        m.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", namespace="user:maya")
    return db


@pytest.mark.parametrize("statement", ["PRAGMA journal_mode", "pragma JOURNAL_MODE;",
                                       "PRAGMA main.journal_mode", "PRAGMA temp.journal_mode",
                                       "PRAGMA journal_mode -- the mode"])
def test_read_mode_runs_pragma_journal_mode(store, statement):
    r = Run(store)("sql", statement, "--json")
    assert (r.code, r.err) == (0, ""), r.err
    assert json.loads(r.out)[0]["journal_mode"] in ("wal", "delete", "memory")
    with heapmem.open(store) as m:  # the guard itself, on a read-write connection
        assert sqlguard.run_read_only(m.connection, statement)[1][0][0] in ("wal", "delete",
                                                                             "memory")


@pytest.mark.parametrize("statement", ["PRAGMA journal_mode=DELETE", "PRAGMA journal_mode = wal",
                                       "PRAGMA journal_mode('delete')",
                                       "PRAGMA main.journal_mode=MEMORY",
                                       "PRAGMA journal_mode=OFF"])
def test_read_mode_still_refuses_setting_journal_mode(store, statement):
    with heapmem.open(store, readonly=True) as m:
        mode = m.connection.execute("PRAGMA journal_mode").fetchall()[0][0]
    r = Run(store)("sql", statement)
    assert r.code == 1 and r.out == "" and one_sentence(r.err), r.err
    assert "sets a pragma (journal_mode = " in r.err and "add --write" in r.err, r.err
    with heapmem.open(store) as m:
        with pytest.raises(ReadOnlyError, match="sets a pragma"):
            sqlguard.run_read_only(m.connection, statement)
        assert m.connection.execute("PRAGMA journal_mode").fetchall()[0][0] == mode == "wal"


def test_journal_mode_then_a_write_is_still_two_statements(store):
    r = Run(store)("sql", "PRAGMA journal_mode; DELETE FROM memories")
    assert r.code == 1 and "one statement per call" in r.err, r.err
    with heapmem.open(store) as m:
        with pytest.raises(ValueError, match="one statement per call"):
            sqlguard.run_read_only(m.connection, "PRAGMA journal_mode; PRAGMA journal_mode=DELETE")
        assert m.count == 1
        assert m.connection.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"


@pytest.mark.parametrize("pragma", sorted(sqlguard.READ_PRAGMAS))
def test_every_read_pragma_runs_without_a_value(store, pragma):
    r = Run(store)("sql", f"PRAGMA {pragma}")
    assert (r.code, r.err) == (0, ""), (pragma, r.err)


def test_report_only_pragmas_are_read_pragmas_sqlite_calls_writes():
    assert sqlguard.QUERY_PRAGMAS <= sqlguard.READ_PRAGMAS
    c = apsw.Connection(":memory:")
    # which pragmas without a value SQLite does not call read-only: only the
    # ones read mode refuses, or reads knowingly (QUERY_PRAGMAS)
    for pragma in sqlguard.READ_PRAGMAS:
        cur = c.cursor()
        seen = []

        def trace(cursor, sql, bindings, seen=seen):
            seen.append(cursor.is_readonly)
            return False  # abort
        cur.exec_trace = trace
        try:
            cur.execute(f"PRAGMA {pragma}")
        except apsw.ExecTraceAbort:
            pass
        assert seen == [pragma not in sqlguard.QUERY_PRAGMAS], (pragma, seen)
    c.close()



def test_an_import_refuses_a_time_out_of_range(tmp_path, clock):
    import json as _json

    from heapmem.io import transfer
    with heapmem.open(str(tmp_path / "src.db"), clock=clock) as src:
        src.add("Booked the flight", namespace="user:maya")
        transfer.export(src, str(tmp_path / "out.jsonl"))
    lines = [_json.loads(x) for x in open(tmp_path / "out.jsonl")]
    for x in lines:
        if x.get("type") == "memory":
            x["created_at"] = 1e300
    with open(tmp_path / "bad.jsonl", "w") as f:
        f.write("".join(_json.dumps(x) + "\n" for x in lines))
    with heapmem.open(str(tmp_path / "dst.db"), clock=clock) as dst:
        with pytest.raises(ValueError, match="created_at must be at most 2.534"):
            transfer.import_file(dst, str(tmp_path / "bad.jsonl"))
        assert dst.count == 0
