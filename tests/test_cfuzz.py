"""The C library never crashes, whatever it is fed.

1. Every SQL function the library registers (listed from
   pragma_function_list, so new ones are covered without editing this file),
   at its own and at wrong argument counts, with each argument in turn
   replaced by NULL, numbers at the edges (huge, negative, NaN, infinities),
   texts (empty, 1 MiB, invalid UTF-8, embedded NUL, RTL, CJK, FTS5 syntax),
   and blobs (random bytes, 'HML1' link-set headers with lying counts),
   plus seeded random combinations.  An apsw.Error is a fine answer; a crash
   kills the test run.
2. The cffi entry points: every public function of heapmem.native called
   with hostile arguments picked from its annotations, and the raw hm_*
   functions with NULL pointers and output buffers from 0 bytes to 4 KiB.
3. A hypothesis fuzz of heap_score, heap_explain, heap_links, heap_match,
   heap_features and heap_qtype with properties: heap_match's output is
   always a valid FTS5 query, scores are finite and >= 0 (or NULL), link
   sets are well formed, and a statement's cached config never leaks into a
   row with a different config.

`make sanitize` runs this file under AddressSanitizer and UBSan.
"""
import inspect
import math
import os
import random
import re
import struct

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heapmem
from heapmem.db import native
from heapmem.db.native import ffi, lib

SOAK = os.environ.get("HEAPMEM_SOAK") == "1"
OK_ERRORS = (ValueError, TypeError, heapmem.HeapmemError)
QTYPES = ["other", "when", "who", "where", "what", "how", "how_many", "why", "yes_no"]


def hsettings(n):
    return settings(max_examples=n * (20 if SOAK else 1), derandomize=True, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def conn():
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    c.execute("CREATE VIRTUAL TABLE ft USING fts5(nstag, text, "
              "tokenize='porter unicode61 remove_diacritics 2')")
    c.execute("INSERT INTO ft VALUES ('ns0000000000000000', 'flight to Lisbon on March 14')")
    yield c
    c.close()


def functions(conn):
    return sorted(set(conn.execute(
        "SELECT name, narg FROM pragma_function_list WHERE name LIKE 'heap%'").fetchall()))


def link_blob(entries, count=None):
    """'HML1' | u32 count | count x (u64 hash, f64 alpha, f64 beta)."""
    body = b"".join(struct.pack("<Qdd", h, a, b) for h, a, b in entries)
    return b"HML1" + struct.pack("<I", len(entries) if count is None else count) + body


def sql_blob(b):
    return "x'" + b.hex() + "'"


_rnd = random.Random(20261130)
BLOBS = [
    b"", b"\x00", b"HML1", b"HML1\x00\x00\x00", link_blob([]),
    link_blob([], count=1), link_blob([(1, 1.0, 2.0)], count=2),
    link_blob([(1, 1.0, 2.0)], count=0xFFFFFFFF), link_blob([], count=0x0AAAAAAB),
    link_blob([(1, 1.0, 2.0)], count=0x0AAAAAAB), link_blob([(1, 1.0, 2.0)]) + b"\x00",
    link_blob([(2, math.nan, math.inf), (1, -1.0, -math.inf)]),  # unsorted, NaN, negative
    link_blob([(h, _rnd.random() * 10, _rnd.random() * 10) for h in range(1000)]),
    b"HML2" + link_blob([])[4:], b"hml1" + link_blob([])[4:],
] + [bytes(_rnd.randrange(256) for _ in range(_rnd.randrange(1, 200))) for _ in range(6)] \
  + [b"HML1" + bytes(_rnd.randrange(256) for _ in range(_rnd.randrange(0, 100))) for _ in range(6)]

HOSTILE_SQL = [
    "NULL", "0", "1", "-1", "0.5", "-0.0", "2", "100", "101", "1e308", "-1e308", "9e999",
    "-9e999", "(9e999 - 9e999)", "9223372036854775807", "-9223372036854775808", "4.9e-324",
    # times (created_at, age_days) past any day arithmetic: year 10000, +-1e300, +-2^63 s
    "253402300800", "1e300", "-1e300", "9.2e18", "-9.2e18", "1e19", "-1e19",
    "''", "' '", "'when'", "'how_many'", "'bogus'", "'kind:fact src:none len:s date num'",
    "'base'", "'a/b'", "'w_recency=0'", "'w_recency=nan'", "'w_relevance=1e999'",
    "'half_life_days=-1'", "'x=1'", "'='", "'w_recency='", "'w_recency=1 w_recency=2'",
    "'" + "k" * 500 + "=1'", "'" + " ".join(f"f{i}" for i in range(200)) + "'",
    "'" + "x" * 100 + "'", "'" + " ".join("y" * 64 for _ in range(70)) + "'",
    "printf('%.*c', 1048576, 'a')", "replace(hex(zeroblob(50000)), '00', 'word ')",
    "replace(hex(zeroblob(20000)), '00', '中文 ')", "replace(hex(zeroblob(3000)), '00', 'é')",
    "CAST(x'fffefd80c0' AS TEXT)", "CAST(x'41004200' AS TEXT)", "CAST(x'e4b8' AS TEXT)",
    "char(0x202e) || 'abc' || char(0x200f)", "'\"quoted\" OR NEAR(a b) * ^ :col'",
    "'When is my flight to Lisbon?'", "'user:maya'", "zeroblob(0)", "zeroblob(100000)",
    "(SELECT heap_links('kind:fact', 1, 2, 3, 4))",
] + [sql_blob(b) for b in BLOBS]

# plausible arguments per function, so that a hostile value in one position
# reaches the code behind the argument checks of the others
DEFAULTS = {
    "heap_qtype": ["'When is my flight?'"],
    "heap_features": ["'Booked the flight on March 14'", "'fact'", "'user'"],
    "heap_match": ["'flight to Lisbon'", "'user:maya'"],
    "heap_ns_tag": ["'user:maya'"],
    "heap_relate": ["'What did Ana say?'", "'Ana'"],
    "heap_active": ["'kind:fact src:none len:s'", "'when'", "3.0"],
    "heap_recency": ["3.0", "30.0", "0.5"],
    "heap_score": ["1.0", "3.0", "1.0", "0", "'kind:fact src:none len:s date'", "'when'",
                   "(SELECT heap_links('when/date', 1, 2, 3, 4))", "'w_recency=1'"],
    "heap_links": ["'when/date'", "1", "2", "3", "4", "20"],
}
DEFAULTS["heap_explain"] = DEFAULTS["heap_score"]
DEFAULTS["heap_credit"] = ["'kind:fact src:none len:s date:1'", "'when'", "3.0", "1",
                           "(SELECT heap_links('when/date:1', 1, 2, 3, 4))", "'model=0'"]
DEFAULTS["heap_fold"] = DEFAULTS["heap_credit"]
DEFAULTS["heap_ntokens"] = ["'Café at 5pm'"]
# an answer that names a day and a memory that says "yesterday": a hostile
# created_at reaches the day arithmetic (hm_memory_overlaps)
DEFAULTS["heap_attribute"] = ["'March 14, 2025 at 9:40am'", "'When is my flight?'", "0",
                              "'Booked the flight yesterday: departs March 14 9:40am'",
                              "1741910400"]


def run_sql(conn, sql):
    try:
        conn.execute(sql).fetchall()
        return True
    except apsw.Error:
        return False
    except UnicodeDecodeError:
        return True  # invalid UTF-8 in, invalid UTF-8 out: Python cannot decode it


def call_sql(name, args):
    return f"SELECT {name}({', '.join(args)})"


def test_every_sql_function_every_position(conn):
    fns = functions(conn)
    names = {n for n, _ in fns}
    assert {"heap_score", "heap_explain", "heap_links", "heap_match", "heap_features",
            "heap_qtype"} <= names
    calls = ok = 0
    for name, narg in fns:
        base = (DEFAULTS.get(name, []) + ["'x'"] * 10)[:max(narg, 0)]
        for i in range(len(base)):
            for v in HOSTILE_SQL:
                args = list(base)
                args[i] = v
                ok += run_sql(conn, call_sql(name, args))
                calls += 1
    # wrong argument counts: refused when the statement is prepared
    for name in names:
        registered = {n for f, n in fns if f == name}
        for narg in range(0, 10):
            if narg not in registered and -1 not in registered:
                assert not run_sql(conn, call_sql(name, ["1"] * narg))
                calls += 1
    assert calls > 3000 and ok > 100, (calls, ok)
    assert conn.execute("SELECT heap_version()").fetchall()[0][0].startswith("v")


def test_random_combinations(conn):
    fns = functions(conn)
    rnd = random.Random(5)
    n = 3000 * (10 if SOAK else 1)
    for _ in range(n):
        name, narg = rnd.choice(fns)
        if rnd.random() < 0.05:
            narg = rnd.randrange(0, 10)
        base = (DEFAULTS.get(name, []) + ["'x'"] * 10)[:narg]
        args = [rnd.choice(HOSTILE_SQL) if rnd.random() < 0.5 else a for a in base]
        run_sql(conn, call_sql(name, args))


def test_heap_links_aggregate_hostile_rows(conn):
    rows = ", ".join(f"({f}, {a}, {b}, {c}, {d})" for f, a, b, c, d in [
        ("'a'", "1", "2", "3", "4"), ("'a'", "5", "6", "7", "8"), ("NULL", "1", "1", "1", "1"),
        ("'b'", "-1", "1", "1", "1"), ("'c'", "9e999", "1", "1", "1"),
        ("'d'", "'x'", "1", "1", "1"), ("x'00'", "1", "1", "1", "1"), ("''", "0", "0", "0", "0")])
    for where in ("", " WHERE column1 IS NOT NULL AND typeof(column2) != 'text'",
                  " WHERE 0", " WHERE column1 = 'a'"):
        for extra in ("", ", 20", ", -1", ", NULL", ", 9e999", ", 0"):
            run_sql(conn, f"SELECT heap_links(column1, column2, column3, column4, column5{extra})"
                          f" FROM (VALUES {rows}){where}")
            run_sql(conn, f"SELECT column1, heap_links(column1, column2, column3, column4, "
                          f"column5{extra}) FROM (VALUES {rows}){where} GROUP BY column1")
            run_sql(conn, f"SELECT heap_links(column1, column2, column3, column4, column5{extra})"
                          f" OVER () FROM (VALUES {rows}){where}")
    # many rows, with duplicates: one well-formed blob
    blob = conn.execute("WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s "
                        "WHERE value < 20000) SELECT heap_links('f' || (value % 5000), value, 1,"
                        " value, 2) FROM s").fetchall()[0][0]
    check_link_blob(bytes(blob))


def test_heap_attribute_aggregate_hostile_rows(conn):
    rows = ", ".join(f"({p}, {t}, {c})" for p, t, c in [
        ("0", "'Booked the flight March 14, 9:40am yesterday'", "1741910400"),
        ("1", "NULL", "NULL"), ("2", "x'00ff'", "1"), ("3", "''", "9e999"),
        ("4", "'" + "lisbon " * 20000 + "'", "-9e999"), ("5", "'7 May 2023 last year'", "'x'"),
        ("1", "'dup'", "0"), ("9e999", "'far'", "0"), ("-1", "'neg'", "0"),
        ("'two'", "'text position'", "0"), ("6", "'" + "中" * 3000 + "'", "0")])
    answers = ["'March 14, 9:40am'", "'7 May 2023 before'", "''", "NULL", "x'00'", "1",
               "'" + "flight 14 " * 5000 + "'", "'May 2023 2022 1899 31 February 2024'",
               "'‮́'"]
    for answer in answers:
        for where in ("", " WHERE column1 = 0", " WHERE 0", " WHERE typeof(column1) = 'integer'"
                      " AND column1 BETWEEN 0 AND 4"):
            run_sql(conn, f"SELECT heap_attribute({answer}, 'When is my flight?', column1, "
                          f"column2, column3) FROM (VALUES {rows}){where}")
            run_sql(conn, f"SELECT heap_attribute({answer}, 'When?', column1, column2, column3)"
                          f" OVER () FROM (VALUES {rows}){where}")
    # many rows: one well-formed answer, an entry per position
    out = conn.execute("WITH RECURSIVE s(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM s "
                       "WHERE v < 999) SELECT heap_attribute('flight 7 on March 14 2023', "
                       "'When?', v, 'flight number ' || v || ' yesterday', 1678752000 + v) "
                       "FROM s").fetchall()[0][0]
    import json
    assert len(json.loads(out)) == 1000


def check_link_blob(blob):
    assert blob[:4] == b"HML1"
    (count,) = struct.unpack("<I", blob[4:8])
    assert len(blob) == 8 + 24 * count
    hashes = [struct.unpack("<Q", blob[8 + 24 * i:16 + 24 * i])[0] for i in range(count)]
    assert hashes == sorted(set(hashes))


# -- cffi ------------------------------------------------------------------------------

HOSTILE_STR = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfff", "\u202eabc", "😀" * 50,
               "中" * 100, "é" * 33, "q" * 70, "'\"*^:()", "NEAR(a b) OR c", "when", "how_many",
               "kind:fact src:none", "base", "a/b", " ".join(f"f{i}" for i in range(100)),
               " ".join("z" * 64 for _ in range(80)), "w_recency=nan", "w_relevance=1e999",
               "x" * (1 << 20), "word " * 50000, "When is my flight to Lisbon?"]
HOSTILE_FLOAT = [0.0, -0.0, 1.0, -1.0, 1e308, -1e308, math.inf, -math.inf, math.nan, 5e-324, 3.0]


def hostile_arg(annotation, rnd, n):
    a = str(annotation).replace("'", "").replace('"', "")
    if a in ("str",):
        return rnd.choice(HOSTILE_STR)
    if a in ("str | None", "Optional[str]"):
        return rnd.choice(HOSTILE_STR + [None])
    if a == "float":
        return rnd.choice(HOSTILE_FLOAT)
    if a == "bool":
        return rnd.choice([True, False])
    if a == "int":
        return rnd.choice([0, 1, -1, 2 ** 31 - 1, -(2 ** 31)])
    if a == "bytes":
        return rnd.choice(BLOBS)
    if a in ("np.ndarray", "Sequence[float]"):
        return np.array([rnd.choice(HOSTILE_FLOAT) for _ in range(n)])
    if a == "Sequence[str]":
        return [rnd.choice(HOSTILE_STR[:-3]) for _ in range(n)]
    if "CData" in a:
        return native.config("")
    raise LookupError(a)


def public_native_functions():
    out = []
    for name, f in vars(native).items():
        if name.startswith("_") or not inspect.isfunction(f) or f.__module__ != native.__name__:
            continue
        if name in ("loadable_path", "load", "read_header", "read_vocabulary"):  # no C call
            continue
        out.append((name, f))
    return sorted(out)


def test_native_functions_with_hostile_arguments():
    rnd = random.Random(11)
    tried = {}
    for name, f in public_native_functions():
        sig = inspect.signature(f)
        for _ in range(60 * (10 if SOAK else 1)):
            n = rnd.choice([0, 1, 3])
            try:
                # the required arguments in order, an optional one by its name (or
                # left out): dropping one must not shift the rest into its place
                args = [hostile_arg(p.annotation, rnd, n) for p in sig.parameters.values()
                        if p.default is inspect.Parameter.empty]
                kwargs = {p.name: hostile_arg(p.annotation, rnd, n)
                          for p in sig.parameters.values()
                          if p.default is not inspect.Parameter.empty and rnd.random() < 0.5}
            except LookupError as e:
                pytest.fail(f"native.{name}: no hostile values for annotation {e}")
            valid_text = all(not isinstance(a, str) or _encodable(a)
                             for a in [*args, *kwargs.values()])
            try:
                f(*args, **kwargs)
            except OK_ERRORS as e:
                if isinstance(e, UnicodeError) and valid_text:
                    raise AssertionError(f"native.{name} broke valid UTF-8: {e!r}") from e
            tried[name] = tried.get(name, 0) + 1
    assert len(tried) >= 10, tried


def _encodable(s):
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


SIGNATURE_DRIFT = {}


def attempt(f, *args):
    """Call a raw C function; a TypeError means its signature changed (the
    call did not happen: counted, and the test fails if a function was never
    called), anything else but a crash is fine."""
    name = getattr(f, "__name__", repr(f))
    SIGNATURE_DRIFT.setdefault(name, [0, 0])[1] += 1
    try:
        return f(*args)
    except TypeError:
        SIGNATURE_DRIFT[name][0] += 1
        return None


def test_raw_c_functions_null_pointers_and_small_buffers():
    NULL = ffi.NULL
    cfg = native.config("")
    cfg_recency = native.config("w_recency=1")
    for s in (NULL, b"", b"When is my flight to Lisbon?", b"\xff\xfe" * 100, b"q" * 5000):
        attempt(lib.hm_qtype, s)
        attempt(lib.hm_is_stop_word, s)
        if hasattr(lib, "hm_hash"):
            attempt(lib.hm_hash, s)
        tag = ffi.new("char[]", 19)
        attempt(lib.hm_ns_tag, s, tag)
        for L in (0, 1, 2, 5, 7, 19, 64, 100, 1024, 4096):
            out = ffi.new("char[]", max(L, 1))
            attempt(lib.hm_features, s, s, s, out, L)
            attempt(lib.hm_features, s, NULL, NULL, out, L)
            attempt(lib.hm_match, s, s, out, L)
            attempt(lib.hm_match, s, NULL, out, L)
            if hasattr(lib, "hm_relate"):
                attempt(lib.hm_relate, s, s, out, L)
            for el in (0, 1, 5, 256):
                err = ffi.new("char[]", max(el, 1))
                for qt in (NULL, b"when", b"bogus", s):
                    attempt(lib.hm_active, s, qt, math.nan, out, L, err, el)
                    attempt(lib.hm_active, s, qt, 3.0, out, L, err, el)
                c = ffi.new("hm_config *")
                attempt(lib.hm_config_parse, s, c, err, el)
                attempt(lib.hm_config_parse, b"w_recency=" + (s or b""), c, err, el)
        attempt(lib.hm_features, s, s, s, NULL, 0)
        attempt(lib.hm_match, s, s, NULL, 0)
        attempt(lib.hm_active, s, b"when", 1.0, NULL, 0, NULL, 0)
        attempt(lib.hm_config_parse, s, ffi.new("hm_config *"), NULL, 0)
    lo, hi, at, n = (ffi.new("double *"), ffi.new("double *"), ffi.new("int *"),
                     ffi.new("int *"))
    for s in (NULL, b"", b"on 18 August, 2023", b"\xff\xfe" * 100, b"2 days ago " * 500):
        for v in HOSTILE_FLOAT + [1.7e9]:
            attempt(lib.hm_time_window, s, v, lo, hi, at, n)
            attempt(lib.hm_time_window, s, v, NULL, NULL, NULL, NULL)
    attempt(lib.hm_noisy_or, NULL, 0)
    attempt(lib.hm_noisy_or, NULL, -5)
    for v in HOSTILE_FLOAT:
        arr = ffi.new("double[]", [v] * 4)
        attempt(lib.hm_noisy_or, arr, 4)
        attempt(lib.hm_recency, v, v, v)
        a, b = ffi.new("double *"), ffi.new("double *")
        attempt(lib.hm_link_view, v, v, v, v, v, a, b)
    # scoring with NULL features, NULL links, empty batches and small outputs
    err = ffi.new("char[]", 256)
    bad = ffi.new("int *")
    attempt(lib.hm_score_batch, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, cfg, NULL, NULL,
            NULL, 0)
    for blob in BLOBS:
        for feats in (NULL, ffi.new("char[]", b"kind:fact src:none len:s"),
                      ffi.new("char[]", b" ".join(b"z" * 64 for _ in range(80))),
                      ffi.new("char[]", b" ".join(b"f%02d" % i + b"z" * 60 for i in range(20)))):
            for vals in ((1.0, 3.0, 1.0), (1e308, 1e308, 1e308), (math.nan,) * 3,
                         (math.inf, -math.inf, 5e-324)):
                rel, age, imp = (ffi.new("double[]", [v]) for v in vals)
                sup = ffi.new("int[]", [1])
                fp = ffi.new("const char *[]", [feats])
                out = ffi.new("double[]", lib.HM_SCORE_COLUMNS)
                for qt in (b"when", b"bogus", NULL):
                    attempt(lib.hm_score_batch, 1, rel, age, imp, sup, fp, qt, blob, len(blob),
                            cfg, out, bad, err, 256)
                    inp = ffi.new("hm_input *", {"relevance": vals[0], "age_days": vals[1],
                                                 "importance": vals[2], "superseded": 1,
                                                 "features": feats})
                    for L in (0, 1, 10, 1024, 4096):
                        o = ffi.new("char[]", max(L, 1))
                        # (w_recency=1 prints the age too: with 1e308s the
                        # line outgrows the C side's own 1 KiB buffer)
                        for c in (cfg, cfg_recency):
                            attempt(lib.hm_explain, inp, qt, blob, len(blob), c, o, L, err, 256)
                    for mx in (0, 1, 4, 128, 256):
                        names = ffi.new("char[]", 64)
                        da = ffi.new("double[]", max(mx, 1))
                        db = ffi.new("double[]", max(mx, 1))
                        attempt(lib.hm_credit, feats, qt, vals[1], 1, blob, len(blob), cfg,
                                names, 64, da, db, mx, err, 256)
                        attempt(lib.hm_credit, feats, qt, vals[1], 0, NULL, 0, cfg, names, 64,
                                da, db, mx, err, 256)
    never = [n for n, (bad, total) in SIGNATURE_DRIFT.items() if bad == total]
    assert not never, f"signature changed, update this test: {never}"


# -- hypothesis fuzz of the SQL functions ------------------------------------------------

sql_text = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=200),
    st.lists(st.sampled_from(["when", "who", "flight", "Lisbon", "'", '"', "*", "^", ":", "(",
                              ")", "NEAR", "AND", "OR", "NOT", "-", "+", "中文", "😀",
                              "\u202e", " ", "don't", "x" * 70, "é" * 40, "\x00"]),
             max_size=30).map(" ".join))
sql_num = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-(2 ** 63), 2 ** 63 - 1), st.none(), st.text(max_size=5),
                    st.binary(max_size=8))
feature_text = st.lists(st.one_of(
    st.sampled_from(["kind:fact", "src:none", "len:s", "date", "num", "entity", "when/date",
                     "base", "a/b", "z" * 64, "z" * 65]),
    st.text("abcxyz:_", min_size=1, max_size=10)), max_size=40).map(" ".join)
link_entries = st.lists(st.tuples(st.integers(0, 2 ** 64 - 1),
                                  st.floats(allow_nan=True, allow_infinity=True),
                                  st.floats(allow_nan=True, allow_infinity=True)), max_size=20)
links_arg = st.one_of(st.none(), link_entries.map(link_blob), st.binary(max_size=64),
                      st.binary(max_size=40).map(lambda b: b"HML1" + b), sql_num)
config_arg = st.one_of(st.none(), st.just("w_recency=1"), st.text(max_size=60), st.lists(
    st.tuples(st.sampled_from(["w_relevance", "w_recency", "w_importance", "w_usefulness",
                               "half_life_days", "recency_floor", "superseded_factor",
                               "prior_alpha", "prior_beta", "bogus"]),
              st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 200))),
    max_size=5).map(lambda kv: " ".join(f"{k}={v!r}" for k, v in kv)))


def one(conn, sql, *args):
    return conn.execute(sql, args).fetchall()[0][0]


@hsettings(400)
@given(rel=sql_num, age=sql_num, imp=sql_num, sup=sql_num, feats=st.one_of(feature_text, sql_num),
       qt=st.one_of(st.sampled_from(QTYPES), sql_text, sql_num), links=links_arg, cfg=config_arg)
def test_fuzz_heap_score_and_explain(conn, rel, age, imp, sup, feats, qt, links, cfg):
    try:
        score = one(conn, "SELECT heap_score(?, ?, ?, ?, ?, ?, ?, ?)", rel, age, imp, sup, feats,
                    qt, links, cfg)
    except apsw.Error:
        score = "error"
    try:
        line = one(conn, "SELECT heap_explain(?, ?, ?, ?, ?, ?, ?, ?)", rel, age, imp, sup, feats,
                   qt, links, cfg)
    except apsw.Error:
        line = "error"
    # the two agree on whether the arguments are acceptable
    assert (score == "error") == (line == "error")
    if score != "error":
        assert score is None or (isinstance(score, float) and score >= 0)
        assert isinstance(line, str) and line.startswith("score ")
    try:
        one(conn, "SELECT heap_score(?, ?, ?, ?, ?, ?, ?)", rel, age, imp, sup, feats, qt, links)
    except apsw.Error:
        pass


@hsettings(300)
@given(rows=st.lists(st.tuples(st.one_of(feature_text, sql_num), sql_num, sql_num, sql_num,
                               sql_num), max_size=12),
       pseudo=st.one_of(st.none(), sql_num))
def test_fuzz_heap_links(conn, rows, pseudo):
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS lk(f, a, b, c, d)")
    conn.execute("DELETE FROM lk")
    conn.executemany("INSERT INTO lk VALUES (?, ?, ?, ?, ?)", rows)
    for sql, args in (("SELECT heap_links(f, a, b, c, d) FROM lk", ()),
                      ("SELECT heap_links(f, a, b, c, d, ?) FROM lk", (pseudo,))):
        try:
            blob = one(conn, sql, *args)
        except apsw.Error:
            continue
        check_link_blob(bytes(blob))


@hsettings(400)
@given(q=st.one_of(sql_text, sql_num), ns=st.one_of(sql_text, sql_num, st.none()))
def test_fuzz_heap_match_is_always_a_valid_fts5_query(conn, q, ns):
    for sql, args in (("SELECT heap_match(?)", (q,)), ("SELECT heap_match(?, ?)", (q, ns))):
        try:
            expr = one(conn, sql, *args)
        except apsw.Error:
            # or a namespace with a NUL byte: a name never holds one (issue 33)
            assert not isinstance(q, str) or not isinstance(args[-1], str) or (
                len(args) == 2 and "\x00" in args[-1])
            continue
        if expr is None:
            continue
        # user text never becomes FTS5 syntax: the expression always parses
        conn.execute("SELECT count(*) FROM ft WHERE ft MATCH ?", (expr,)).fetchall()


@hsettings(300)
@given(text=st.one_of(sql_text, sql_num), kind=st.one_of(st.sampled_from(
    ["fact", "preference", "bogus"]), sql_text, sql_num), source=st.one_of(st.none(), sql_text,
                                                                           sql_num))
def test_fuzz_heap_features_and_qtype(conn, text, kind, source):
    try:
        feats = one(conn, "SELECT heap_features(?, ?, ?)", text, kind, source)
        assert isinstance(feats, str)
        # features describe the shape of the text, never its words
        for f in feats.split():
            assert re.fullmatch(r"[a-z_]+(:[a-z0-9_]+)?", f), f
    except apsw.Error:
        assert not (isinstance(text, str) and isinstance(kind, str)
                    and (source is None or isinstance(source, str))) \
            or "\x00" in kind or "\x00" in (source or "")  # names hold no NUL (issue 33)
    try:
        qt = one(conn, "SELECT heap_qtype(?)", text)
        assert qt in QTYPES
    except apsw.Error:
        assert not isinstance(text, str)


def test_cached_config_never_leaks_between_rows(conn):
    # heap_score caches its parsed config per statement: a column of configs
    # must score each row with its own
    configs = ["w_recency=0", "w_recency=1 half_life_days=1", "bogus=1", None, "w_importance=0",
               "w_recency=nan", "w_relevance=2", "w_recency=0"]
    args = "1.0, 40.0, 1.5, 0, 'kind:fact src:none len:s', 'when', NULL"
    single = []
    for cfg in configs:
        try:
            single.append(one(conn, f"SELECT heap_score({args}, ?)", cfg))
        except apsw.Error:
            single.append("error")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS cf(i, c)")
    conn.execute("DELETE FROM cf")
    conn.executemany("INSERT INTO cf VALUES (?, ?)", list(enumerate(configs)))
    # row by row, skipping rows whose config is refused
    batch = []
    for i in range(len(configs)):
        try:
            batch.append(one(conn, f"SELECT heap_score({args}, c) FROM cf WHERE i = ?", i))
        except apsw.Error:
            batch.append("error")
    assert batch == single
    ok_rows = [i for i, s in enumerate(single) if s != "error"]
    whole = conn.execute(f"SELECT i, heap_score({args}, c) FROM cf WHERE i IN "
                         f"({','.join(map(str, ok_rows))}) ORDER BY i").fetchall()
    assert [s for _, s in whole] == [single[i] for i in ok_rows]


@hsettings(300)
@given(q=st.one_of(sql_text, st.lists(st.sampled_from(
    ["on", "in", "the", "last", "this", "past", "of", "ago", "a", "few", "couple", "2", "18th",
     "31", "May", "August", "2023", "1999", "summer", "week", "weekend", "days", "years",
     "Friday", "yesterday", "mid-", "end", "first", "two", "-", "/", ",", "2023-05-08"]),
    max_size=12).map(" ".join)), now=st.one_of(st.floats(-1e12, 3e11), st.just(math.nan)))
def test_fuzz_time_window(q, now):
    """A window is days [from, until), from before until, named by a span of the question."""
    got = native.time_window(q, now)
    if got is None:
        return
    lo, hi, words = got
    assert lo < hi and lo % 86400 == 0 and hi % 86400 == 0
    assert words and words in q.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
