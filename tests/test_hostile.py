"""Hostile input, by property tests: every public call given any Unicode
(NUL, lone surrogates, RTL marks, emoji, CJK, 1 MiB strings), ids and
namespaces full of quotes and SQL/FTS5 syntax, NaN and infinities, huge
integers and wrong types either succeeds or raises heapmem.HeapmemError,
ValueError or TypeError (never a UnicodeError, OverflowError, apsw.Error,
KeyError...), and the store passes mem.check() afterwards.  What a call
accepts it stores exactly: get() returns the same text, to the code point.

Hypothesis runs derandomized (a fixed seed) with bounded max_examples; set
HEAPMEM_SOAK=1 for 20x the examples.
"""
import dataclasses
import math
import os
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import heapmem
from heapmem.validate import MAX_TEXT_BYTES

SOAK = os.environ.get("HEAPMEM_SOAK") == "1"
ALLOWED = (heapmem.HeapmemError, ValueError, TypeError)
T0 = 1_700_000_000.0


def hsettings(n):
    return settings(max_examples=n * (20 if SOAK else 1), derandomize=True, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


# -- strategies ------------------------------------------------------------------

FRAGMENTS = [
    "\x00", "\ud800", "\udfff", "\udc80x", "\u202e", "\u202d", "\u200f", "\u200e", "\u2066",
    "\ufeff", "\u200b", "\u0301", "e\u0301", "\ufffd", "\uffff", "\U0010ffff", "😀", "👨‍👩‍👧",
    "🏳️‍🌈", "中文字", "日本語のテキスト", "한국어", "العربية", "עברית", "Ünïcödé", "ǅ", "ß", "İ",
    "'", '"', "''", '""', "`", "\\", "%", "_", "*", "^", ":", ";", "(", ")", "{", "}", "[", "]",
    "-", "+", "NEAR(a b)", "AND", "OR", "NOT", "a OR b", '"a" AND "b"', "col:term",
    "nstag : ", "nstag:ns0000000000000000", "text:", "rank", "bm25(", "MATCH", "*", "^start",
    "'; DROP TABLE memories; --", "\" OR 1=1 --", "'); DELETE FROM links; --",
    "$(rm -rf /)", "%s%n%x", "\n", "\r\n", "\t", "\x0b", "\x1b[31m", " ", "   ", "when", "who",
    "how many", "What", "?", "!", ".", "2024-03-14", "9:40", "$1,000", "€", "£",
    "http://x.y/?q='a'", "x" * 70, "é" * 40, "中" * 40, "a'b'c", "'quoted'", "don't",
]

# st.characters() leaves out surrogates unless told otherwise: mostly valid
# text, with NUL and lone surrogates now and then
any_char = st.characters(exclude_categories=())
valid_char = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
fragment = st.sampled_from(FRAGMENTS)
piece = st.one_of(st.text(valid_char, max_size=12), fragment,
                  st.text("abcdefgh ", min_size=1, max_size=20), st.text(any_char, max_size=4))
hostile_text = st.lists(piece, min_size=1, max_size=8).map("".join)
hostile_name = st.lists(piece, min_size=1, max_size=3).map("".join)

BIG = {
    "1MiB ascii": "a" * MAX_TEXT_BYTES,
    "1MiB+1 ascii": "b" * (MAX_TEXT_BYTES + 1),
    "1MiB words": ("lisbon flight " * (MAX_TEXT_BYTES // 14))[:MAX_TEXT_BYTES],
    "1MiB emoji": "😀" * (MAX_TEXT_BYTES // 4),
    "1MiB cjk": "中" * (MAX_TEXT_BYTES // 3),
    "1MiB+ cjk": "中" * (MAX_TEXT_BYTES // 3 + 1),
    "1MiB rtl": ("\u202eabc " * (MAX_TEXT_BYTES // 7)),
    "long word": "q" * 100_000,
    "many words": "w " * 300_000,
    "1MiB with NUL": "x" * 1000 + "\x00" + "y" * 1000,
    "surrogate at end": "z" * 100_000 + "\ud800",
}
big_text = st.sampled_from(sorted(BIG)).map(BIG.get)
text_arg = st.one_of(hostile_text, hostile_text, hostile_text, hostile_text, hostile_text,
                     big_text)

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 10.0,
                     10.000000001, 1e-300]),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([2 ** 63, -(2 ** 63) - 1, 10 ** 400, -(10 ** 400), 2 ** 63 - 1]),
    st.sampled_from([np.float64("nan"), np.float32(1.5), np.int64(3), Decimal("NaN"),
                     Decimal("1.5"), 1 + 2j]),
)
odd_values = st.one_of(
    st.none(), st.booleans(), st.binary(max_size=8), st.lists(st.text(max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.just(object()),
    st.just(b"\x00\xff"), st.just(bytearray(b"abc")), st.just(("a", "b")), st.just({"a"}),
    st.datetimes(timezones=st.sampled_from([None, timezone.utc, timezone(timedelta(hours=-5))])),
    st.just(datetime.min), st.just(datetime.max),
)
anything = st.one_of(text_arg, numbers, odd_values)

# valid by construction but strange: every fragment without NUL or surrogates
NICE = [f for f in FRAGMENTS if "\x00" not in f and not any(0xD800 <= ord(c) <= 0xDFFF for c in f)]
nice_piece = st.one_of(st.text(valid_char, min_size=1, max_size=10), st.sampled_from(NICE))
nice_text = st.lists(nice_piece, min_size=1, max_size=10).map("".join).filter(str.strip)
nice_name = st.lists(nice_piece, min_size=1, max_size=3).map("".join).filter(
    lambda t: t.strip() and len(t) <= 256 and t != "*")


def mostly(nice, hostile):
    """nice three times in four, else hostile."""
    return st.integers(0, 3).flatmap(lambda i: hostile if i == 0 else nice)
name_like = st.one_of(hostile_name, hostile_name, hostile_name, st.sampled_from(FRAGMENTS),
                      st.sampled_from(["x" * 257, "default", "*", "user:maya", "User:Maya"]))
namespace_arg = st.one_of(name_like, name_like, anything)
metadata_arg = st.one_of(
    st.none(),
    st.dictionaries(hostile_text, st.one_of(hostile_text, numbers, st.none(),
                                           st.lists(numbers, max_size=3)), max_size=3),
    anything)


def call(f, *args, **kwargs):
    """f(...) must succeed or raise one of the documented errors."""
    try:
        out = f(*args, **kwargs), None
    except ALLOWED as e:
        assert not isinstance(e, UnicodeError), f"UnicodeError leaked: {e!r}"
        _event(f"{f.__name__}: {type(e).__name__}")
        return None, e
    _event(f"{f.__name__}: ok")
    return out


def _event(msg):
    try:
        event(msg)  # shown by pytest --hypothesis-show-statistics
    except Exception:
        pass  # outside a hypothesis test


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store for the module's property tests; its teardown checks it
    after whichever of them ran (alone or all), so no test relies on
    another having filled it."""
    path = str(tmp_path_factory.mktemp("hostile") / "hostile.db")
    mem = heapmem.open(path, clock=lambda: T0)
    mem.add_many([{"text": t, "namespace": ns, "kind": k} for t, ns, k in [
        ("Booked the flight: SFO to Lisbon, departs March 14", "user:maya", "fact"),
        ("Maya prefers a window seat", "user:maya", "preference"),
        ("The dentist appointment is on Tuesday at 9am", "user:maya", "episode"),
        ("Lisbon hotel is near the river", "default", "fact"),
        ("'; DROP TABLE memories; -- is a classic", "default", "note"),
    ]])
    yield mem
    report = mem.check()
    mem.close()
    assert report.ok, report.problems


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small store for the feedback tests, which check() after every call."""
    path = str(tmp_path_factory.mktemp("hostile") / "small.db")
    mem = heapmem.open(path, clock=lambda: T0)
    mem.add_many([{"text": t, "namespace": ns, "kind": k, "source": src} for t, ns, k, src in [
        ("Booked the flight: SFO to Lisbon, departs March 14", "user:maya", "fact", "user"),
        ("Maya prefers a window seat on every flight", "user:maya", "preference", None),
        ("The dentist appointment is on Tuesday at 9am", "user:maya", "episode", "Maya"),
        ("Lisbon hotel is near the river, 3 nights", "default", "fact", "tool"),
        ("The flight to Lisbon was delayed by 2 hours", "default", "episode", None),
        ("Window seat requests go through the travel desk", "default", "instruction", None),
    ]])
    yield mem
    report = mem.check()
    mem.close()
    assert report.ok, report.problems


def must_be_ok(mem):
    report = mem.check()
    assert report.ok, report.problems


# -- the calls ---------------------------------------------------------------------
#
# Each example gives every argument a value of the right type but hostile
# content (any Unicode, SQL/FTS5 syntax, extreme numbers), then, most of the
# time, swaps one or two arguments for anything at all (wrong types, NaN,
# huge integers, bytes, objects).  So both the happy path with strange
# content and the refusal of wrong values get exercised.

def with_wrong(data, args, n_max=2):
    """Replace up to n_max of the keyword arguments with anything."""
    names = sorted(args)
    for _ in range(data.draw(st.integers(0, n_max), label="wrong args")):
        name = data.draw(st.sampled_from(names), label="wrong arg")
        args[name] = data.draw(anything, label=name)
    return args


ns_pool = st.sampled_from(["user:maya", "default", "User:Maya", "u'1", 'u"2', "ns; --", "日本",
                           "‮user", "😀"])
namespace_ok = mostly(st.one_of(ns_pool, nice_name), name_like)
number_ok = st.one_of(st.none(), st.floats(0.001, 10), numbers)
time_ok = st.one_of(st.none(), st.floats(0, 4e9), numbers)


@hsettings(250)
@given(data=st.data())
def test_add(store, data):
    text = data.draw(mostly(nice_text, text_arg), label="text")
    args = {
        "kind": data.draw(mostly(st.sampled_from(list(heapmem.KIND_IMPORTANCE)) | nice_name,
                                 name_like)),
        "source": data.draw(st.none() | mostly(nice_name, name_like)),
        "id": data.draw(st.none() | mostly(nice_name, name_like)),
        "namespace": data.draw(namespace_ok),
        "created_at": data.draw(mostly(st.none() | st.floats(0, 4e9), time_ok)),
        "importance": data.draw(mostly(st.none() | st.floats(0.001, 10), number_ok)),
        "key": data.draw(st.none() | mostly(nice_name, name_like)),
        "metadata": data.draw(mostly(st.none(), metadata_arg))}
    if data.draw(st.integers(0, 2), label="wrong?") == 0:
        args = with_wrong(data, args)
    # copy=True: every add a new memory, whatever the store holds already (the
    # same text again would otherwise be the memory that has it)
    item, err = call(store.add, text, copy=True, **args)
    if item is not None:
        got = store.get(item.id)
        assert got is not None and got.text == text and got.namespace == args["namespace"]
        assert got.kind == args["kind"] and got.source == args["source"]
        assert got.key == args["key"]
        assert 0 < got.importance <= heapmem.MAX_IMPORTANCE
        assert math.isfinite(got.created_at)
        # what was stored can be recalled by its own text without error
        res, err = call(store.recall, text[:5000], namespace=args["namespace"], k=3)
        assert err is None, err
        if len(text) > 10_000:
            # keep the shared store small: forget the big ones again
            assert store.forget([item.id]) == 1 and store.get(item.id) is None


def test_add_then_check(store):
    must_be_ok(store)


@hsettings(120)
@given(data=st.data())
def test_add_many(store, data):
    items = data.draw(st.lists(st.fixed_dictionaries(
        {"text": mostly(nice_text, text_arg)},
        optional={"namespace": namespace_ok, "id": mostly(nice_name, name_like),
                  "kind": mostly(nice_name, name_like), "importance": number_ok,
                  "created_at": time_ok, "metadata": metadata_arg,
                  "source": mostly(nice_name, name_like), "key": mostly(nice_name, name_like)}),
        max_size=5), label="items")
    items = [with_wrong(data, dict(it), 1) if data.draw(st.integers(0, 4)) == 0 else it
             for it in items]
    if data.draw(st.integers(0, 9), label="whole") == 0:
        items = data.draw(anything, label="items instead")
    before = store.count
    out, err = call(store.add_many, items, copy=True)
    if err is not None:
        assert store.count == before, "a failed add_many wrote something"
    else:
        assert store.count == before + len(out)
        for item in out:
            assert store.get(item.id).text == item.text
        big = [item.id for item in out if len(item.text) > 10_000]
        if big:
            assert store.forget(big) == len(big)


@hsettings(200)
@given(data=st.data())
def test_recall(store, data):
    query = data.draw(st.one_of(text_arg, nice_text, st.sampled_from(
        ["flight to Lisbon?", "When is the dentist?", "window seat", "NEAR(flight seat)",
         '"flight" OR "seat"', "DROP TABLE memories", "nstag : x", "*", "lisbon*"])))
    args = {"k": data.draw(mostly(st.integers(1, 20), st.integers(1, 1000))),
            "namespace": data.draw(namespace_ok),
            "now": data.draw(mostly(st.none(), time_ok)), "track": data.draw(st.booleans())}
    if data.draw(st.integers(0, 2), label="wrong?") == 0:
        args = with_wrong(data, args)
    res, err = call(store.recall, query, **args)
    if res is not None:
        assert len(res) <= args["k"]
        for r in res:
            assert math.isfinite(r.score) and r.score >= 0
            item = store.get(r.id)
            assert item is not None and item.namespace == args["namespace"]
            assert item.text == r.text
            r.explain()


def _a_recall(store, data):
    """A recall of `small` to give feedback on, and the recall_id and now to
    give it with: mostly right, else missing, mistyped or hostile."""
    res = store.recall(data.draw(st.sampled_from(["flight to Lisbon?", "window seat",
                                                  "When is the dentist?", "Lisbon hotel"])),
                       namespace=data.draw(st.sampled_from(["user:maya", "default"])), k=5)
    args = {"recall_id": data.draw(mostly(st.just(res.recall_id), st.one_of(
                st.none(), st.just(str(res.recall_id)), st.integers(-2 ** 63, 2 ** 63 - 1),
                name_like))),
            "now": data.draw(mostly(st.none(), time_ok))}
    return res, args


def _judged(store, verb, *a, **kw):
    """verb(*a, **kw) with the store checked after it: a failure wrote no
    event, a success one per memory it judged.  Returns (result, error)."""
    # the events before the call, as check() counts them (its .events is the
    # number of rows of events); the whole check runs after the call
    events = store.connection.execute("SELECT count(*) FROM events").fetchall()[0][0]
    fb, err = call(verb, *a, **kw)
    after = store.check()
    assert after.ok, after.problems
    if err is not None:
        assert after.events == events, "a failed feedback wrote events"
    else:
        assert after.events == events + len(fb.used) + len(fb.ignored)
    return fb, err


@hsettings(300)
@given(data=st.data())
def test_feedback_and_mark_used(small, data):
    store = small
    res, args = _a_recall(store, data)
    real = list(res.ids)
    good_ids = st.lists(st.sampled_from(real or ["m1"]), max_size=4, unique=True)
    ids = mostly(good_ids, st.lists(st.one_of(st.sampled_from(real or ["m1"]), name_like),
                                    max_size=4))
    verb = data.draw(st.sampled_from(["feedback", "mark_used", "mark_ignored"]))
    if verb == "feedback":
        args["ignored"] = data.draw(mostly(st.none(), ids))
    if data.draw(st.integers(0, 3), label="wrong?") == 0:
        args = with_wrong(data, args, 1)
    used = data.draw(mostly(ids, anything))
    _judged(store, getattr(store, verb), used, **args)


@hsettings(200)
@given(data=st.data())
def test_feedback_from_an_answer(small, data):
    store = small
    res, args = _a_recall(store, data)
    args["answer"] = data.draw(st.one_of(text_arg, text_arg, text_arg, anything))
    if data.draw(st.integers(0, 5), label="ids too?") == 0:
        args["used"] = data.draw(st.lists(st.sampled_from(list(res.ids) or ["m1"]), max_size=2))
    fb, err = _judged(store, store.feedback, **args)
    if err is None and args["answer"] is not None:  # answer=None: plain feedback, no judgements
        assert [j.id for j in fb.judgements] == list(res.ids) or not res.ids
        assert all(j.verdict in ("used", "ignored", "unjudged") for j in fb.judgements)
        assert sum(j.verdict == "used" for j in fb.judgements) <= 1


@hsettings(60)
@given(ids=st.one_of(st.lists(name_like, max_size=3), anything),
       namespace=st.one_of(st.none(), st.none(), namespace_ok, anything), real=st.booleans())
def test_forget(store, ids, namespace, real):
    if real:
        victim = store.add("a memory to forget: flight to Lisbon", namespace="victims")
        ids = [victim.id] if not isinstance(ids, list) else ids + [victim.id]
    before = store.count
    n, err = call(store.forget, ids, namespace=namespace)
    if err is not None:
        assert store.count == before, "a failed forget erased something"
    else:
        assert store.count == before - n


@hsettings(200)
@given(id=st.one_of(st.sampled_from(["m1", "m2", "m3"]), name_like, anything))
def test_get(store, id):
    item, err = call(store.get, id)
    if item is not None:
        assert item.id == id


@hsettings(100)
@given(namespace=st.one_of(st.just("*"), namespace_ok, anything),
       config=st.one_of(st.none(), st.none(), st.just(heapmem.ScoringConfig()), anything))
def test_links(store, namespace, config):
    rows, err = call(store.links, namespace, config=config)
    for row in rows or []:
        assert 0 <= row.strength <= 1 and row.n >= 0


CONFIG_FIELDS = sorted(f.name for f in dataclasses.fields(heapmem.ScoringConfig))


@hsettings(60)
@given(field=st.sampled_from(CONFIG_FIELDS),
       value=st.one_of(numbers.filter(lambda v: not (isinstance(v, int) and abs(v) > 2 ** 1000)),
                       st.floats(0, 2), st.integers(0, 100), odd_values, hostile_text))
def test_scoring_config(store, field, value):
    cfg, err = call(heapmem.ScoringConfig, **{field: value})
    if cfg is not None:
        res = store.recall("flight to Lisbon", namespace="user:maya", config=cfg, track=False)
        for r in res:
            assert math.isfinite(r.score) and r.score >= 0


@pytest.mark.parametrize("field", CONFIG_FIELDS)
def test_scoring_config_edge_values(store, field):
    # every field at the float edges: refused, or scores stay finite
    for value in (5e-324, 2.2250738585072014e-308, 1e-300, 2 ** 63, 2 ** 64 + 1, 1e308, -0.0,
                  0, 1, 1000, 1001, math.nan, math.inf):
        cfg, err = call(heapmem.ScoringConfig, **{field: value})
        if cfg is not None:
            for track in (False, True):
                res = store.recall("When is the flight to Lisbon?", namespace="user:maya",
                                   config=cfg, track=track)
                for r in res:
                    assert math.isfinite(r.score) and r.score >= 0, (field, value, r.explain())
                sql, params = store.recall_sql("flight to Lisbon", namespace="user:maya",
                                               config=cfg)
                store.connection.execute(sql, params).fetchall()


@pytest.mark.parametrize("field", CONFIG_FIELDS)
def test_scoring_config_huge_int(field):
    call(heapmem.ScoringConfig, **{field: 10 ** 400})


def test_many_ids_without_recall_id(store):
    # feedback finds the recall by its ids: thousands of ids are refused
    # cleanly (no SQL expression-depth or variable-count error leaks out)
    for n in (1, 999, 1001, 5000, 40000):
        ids = [f"id{i}" for i in range(n)]
        for f in (store.feedback, store.mark_used, store.mark_ignored):
            call(f, ids)
    call(store.forget, [f"id{i}" for i in range(40000)])
    must_be_ok(store)


def test_use_after_close(tmp_path):
    mem = heapmem.open(str(tmp_path / "closed.db"))
    item = mem.add("Booked the flight to Lisbon")
    mem.close()
    mem.close()
    for f, a, kw in ((mem.add, ("x y",), {}), (mem.recall, ("flight",), {}),
                     (mem.get, (item.id,), {}), (mem.forget, ([item.id],), {}),
                     (mem.feedback, ([item.id],), {"recall_id": 1}), (mem.check, (), {}),
                     (mem.links, (), {}),
                     # and the verbs of what it holds: the same closed-store error
                     (mem.log.get, (1,), {}), (mem.log.judged, (), {}), (mem.log.events, (), {}),
                     (mem.pool.set, (), {"cap": 10}), (mem.priors.list, (), {}),
                     (mem.priors.remove, ("0" * 64,), {}), (mem.vectors.settings, (), {}),
                     (mem.vectors.index, ("default",), {}), (mem.auto_tune.finish, (), {}),
                     (lambda: mem.pool.settings, (), {}), (lambda: mem.priors.features, (), {}),
                     (lambda: mem.auto_tune.pending, (), {}),
                     (lambda: mem.vectors.embedder_name, (), {})):
        with pytest.raises(heapmem.HeapmemError):
            f(*a, **kw)


def test_hostile_text_round_trips_exactly(store):
    # every fragment, alone and as a whole sentence, is stored to the code point
    for i, frag in enumerate(FRAGMENTS):
        for text in (frag, f"Lisbon flight {frag} on Tuesday", frag * 3):
            item, err = call(store.add, text, namespace=f"frag{i % 7}")
            if item is not None:
                assert store.get(item.id).text == text
                res, err = call(store.recall, text, namespace=f"frag{i % 7}")
                assert err is None or not text.strip("\x00 ")
    must_be_ok(store)

