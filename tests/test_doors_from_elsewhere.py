"""Issue 20 (items 2, 3, 5, 6 and the LangGraph part of 11): every door that
takes a recall_id, a file or a time from elsewhere.

- a recall_id names a recall of the caller's namespace, or it is refused
  before anything is judged (LangGraph's store, the MCP server);
- an imported recall shows memories of its own namespace only;
- an imported event credits something, an imported link holds evidence, and
  a damaged file's links of no evidence cannot break feedback;
- an imported feature is one heapmem makes (the C core's grammar);
- a time from the file that no datetime holds never raises from LangGraph.

Each test reproduces the attack of the issue; before the fixes each failed.
"""
from __future__ import annotations

import asyncio
import inspect
import io
import json
import math
import re
from datetime import datetime, timezone

import pytest

import heapmem
from heapmem import learning
from heapmem.db import native
from heapmem.db.schema import SCHEMA_VERSION
from heapmem.io import transfer

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
DAY = 86400.0
MAYA, BEN = ("users", "maya"), ("users", "ben")


def one_sentence(e):
    """The error's message: one line, one sentence."""
    msg = str(e.value if hasattr(e, "value") else e)
    assert msg and "\n" not in msg and not re.search(r"[.!?]\s+[A-Z]", msg), msg
    return msg


def tables(mem):
    """Every row heapmem keeps: what 'nothing was written' compares."""
    c = mem.connection
    return {t: c.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
            for t in ("memories", "recalls", "events", "links", "heapmem_meta", "namespaces")}


def write(path, lines):
    with open(path, "w") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    return str(path)


def header(**counts):
    return {"heapmem": "export", "format": 1, "schema": SCHEMA_VERSION, "version": "0.1.0",
            "exported_at": T, **({"counts": counts} if counts else {})}


# -- 2. a recall_id of another namespace -------------------------------------------


@pytest.fixture
def lg(tmp_path):
    pytest.importorskip("langgraph")
    from heapmem.adapters.langgraph_store import HeapmemStore
    m = heapmem.open(str(tmp_path / "lg.db"), clock=lambda: T)
    s = HeapmemStore(m)
    s.put(MAYA, "flight", {"text": "Booked the flight: SFO to LIS, departs March 14, 9:40am"})
    s.put(BEN, "pin", {"text": "My train leaves June 2 at 7:01am, door code 4711"})
    s.put(BEN, "note", {"text": "Ben's train pass renews in June"})
    yield s
    m.close()


def _lg_calls(store, rid):
    """Every public method of the LangGraph store that takes a recall_id,
    called from maya's namespace with rid (ben's search)."""
    def run(coro):
        return asyncio.run(coro)
    return {
        "report_answer": lambda: store.report_answer(MAYA, "June 2 at 7:01am, code 4711",
                                                     recall_id=rid),
        "areport_answer": lambda: run(store.areport_answer(MAYA, "June 2, code 4711",
                                                           recall_id=rid)),
        "feedback": lambda: store.feedback(MAYA, [], recall_id=rid),
        "mark_used": lambda: store.mark_used(MAYA, ["flight"], recall_id=rid),
        "amark_used": lambda: run(store.amark_used(MAYA, ["flight"], recall_id=rid)),
        "mark_ignored": lambda: store.mark_ignored(MAYA, ["flight"], recall_id=rid),
        "amark_ignored": lambda: run(store.amark_ignored(MAYA, ["flight"], recall_id=rid)),
    }


def test_langgraph_refuses_a_recall_id_of_another_namespace(lg):
    """report_answer and feedback with ben's recall_id, from maya's namespace,
    judged ben's recall: they read back which of his memories matched (their
    words) and wrote events into his links.  Every method that takes a
    recall_id now refuses it, and nothing is written."""
    from heapmem.adapters.langgraph_store import HeapmemStore
    mem = lg.memory
    lg.search(MAYA, query="When is my flight?")
    lg.search(BEN, query="When does my train leave?")
    rid = lg.last_recalls["users/ben"]
    calls = _lg_calls(lg, rid)
    takes = {name for name, fn in inspect.getmembers(HeapmemStore, inspect.isfunction)
             if not name.startswith("_") and "recall_id" in inspect.signature(fn).parameters}
    assert takes == set(calls)  # a new door with a recall_id must be added here
    before = tables(mem)
    for name, call in calls.items():
        with pytest.raises(ValueError) as e:
            call()
        msg = one_sentence(e)
        assert f"unknown recall_id {rid}" in msg and "4711" not in msg, (name, msg)
        assert tables(mem) == before, name
    for bad in ("x", 1.5, True):
        with pytest.raises(TypeError):
            lg.report_answer(MAYA, "March 14", recall_id=bad)
    assert tables(mem) == before
    # the owner's own recall_id still works, from its own namespace
    fb = lg.report_answer(BEN, "It leaves June 2 at 7:01am; the door code is 4711",
                          recall_id=rid)
    assert fb.used == ("users/ben.pin",)
    assert lg.report_answer(MAYA, "March 14 at 9:40am").used == ("users/maya.flight",)


def _tool_result(result):
    """A tool's JSON reply (mcp 1.x or 2.x, in process)."""
    if isinstance(result, tuple):
        result = result[0]
    content = getattr(result, "content", result)
    return json.loads(content[0].text)


def test_mcp_refuses_a_recall_id_of_another_namespace_in_every_tool(tmp_path):
    pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    from heapmem.adapters import mcp_server
    from heapmem.adapters.mcp_server import ToolError
    with heapmem.open(str(tmp_path / "m.db"), clock=lambda: T) as mem:
        mine = mem.add("Booked the flight: SFO to LIS, March 14", namespace="user:maya")
        mem.add("Ben's door code is 4711", namespace="user:ben")
        theirs = mem.recall("What is the door code?", namespace="user:ben")
        server = mcp_server.build_server(mem, "user:maya")
        before = tables(mem)

        async def main():
            tools = await server.list_tools()
            takes = {t.name for t in tools
                     if "recall_id" in (getattr(t, "inputSchema", None) or
                                        getattr(t, "input_schema", {}))["properties"]}
            assert takes == {"report_answer", "mark_used", "mark_ignored"}
            for tool in sorted(takes):
                args = {"recall_id": theirs.recall_id}
                args.update({"answer": "The code is 4711"} if tool == "report_answer"
                            else {"ids": [mine.id]})
                with pytest.raises(ToolError) as e:
                    await server.call_tool(tool, args)
                assert f"unknown recall_id {theirs.recall_id}" in str(e.value), tool
                assert "4711" not in str(e.value)
                assert tables(mem) == before, tool
            own = await server.call_tool("recall", {"query": "When is my flight?"})
            rid = _tool_result(own)["recall_id"]
            out = _tool_result(await server.call_tool(
                "report_answer", {"recall_id": rid, "answer": "March 14, SFO to LIS"}))
            assert out["used"] == [mine.id]

        anyio.run(main)


# -- 3. an imported recall shows memories of its own namespace only -----------------


def _maya_export(tmp_path):
    """An honest export: maya's two memories, a recall of them, feedback."""
    with heapmem.open(str(tmp_path / "src.db"), clock=lambda: T) as src:
        src.add("Booked the flight: SFO to LIS, departs March 14", id="flight",
                namespace="user:maya")
        src.add("Lisbon! I'd love to visit Lisbon someday", id="wish", kind="preference",
                namespace="user:maya")
        r = src.recall("When is my flight?", namespace="user:maya")
        src.feedback(used=["flight"], recall_id=r.recall_id)
        pending = src.recall("Lisbon: my flight, or the trip I wish for?", namespace="user:maya")
        assert len(pending) == 2  # not judged yet
        buf = io.StringIO()
        transfer.export(src, buf)
    return [json.loads(x) for x in buf.getvalue().splitlines()]


def _pending(lines):
    return [x for x in lines if x.get("type") == "recall"][-1]


def _show(lines, mid):
    """The pending recall also shows mid."""
    r = _pending(lines)
    r["shown"].append(mid)
    r["ages"].append(0.0)
    r["features"].append(r["features"][0])
    r["rest"].append(0.5)


def _foreign_memory(lines):
    """The file also holds a memory of ben's, shown by maya's recall."""
    mem = dict(next(x for x in lines if x.get("type") == "memory"), id="bens", seq=99,
               namespace="user:ben", text="Ben's door code is 4711")
    lines.insert(max(i for i, x in enumerate(lines) if x.get("type") == "memory") + 1, mem)
    lines[0]["counts"]["memories"] += 1
    _show(lines, "bens")


def _events(lines, **change):
    for x in lines:
        if x.get("type") == "event":
            x.update(change)


RECALL_EDITS = {
    "another namespace's memory in the store": (lambda ls: _show(ls, "secret"), "not a memory"),
    "another namespace's memory in the file": (_foreign_memory, "not a memory"),
    "a memory nowhere": (lambda ls: _show(ls, "ghost"), "not a memory"),
    "a memory twice": (lambda ls: _show(ls, "flight"), "twice"),
    "rest one short": (lambda ls: _pending(ls)["rest"].pop(), "rest must be"),
    "rest not numbers": (lambda ls: _pending(ls).update(rest=["x"] * len(_pending(ls)["rest"])),
                         "rest must be"),
    "ages one long": (lambda ls: _pending(ls)["ages"].append(1.0), "same length"),
    "an event of another namespace's recall": (lambda ls: _events(ls, namespace="user:ben"),
                                               "not a memory that recall"),
    "an event past what the recall showed": (lambda ls: _events(ls, position=7),
                                             "not a memory that recall"),
    "a made-up feature in a recall": (
        lambda ls: _pending(ls)["features"].__setitem__(0, "kind:fact made:1"),
        "not a shape feature"),
    "a recall of a made-up question type": (lambda ls: _pending(ls).update(qtype="sometimes"),
                                           "not a question type"),
}


@pytest.mark.parametrize("what", sorted(RECALL_EDITS))
def test_an_imported_recall_shows_only_memories_of_its_namespace(tmp_path, what):
    """Imported recall records could name any memory id: an MCP server of
    maya's namespace then revealed, through report_answer, the words of
    ben's memory, set its last_used_at, and after its forget the log still
    showed its id.  Such a file (and one with a recall that does not add
    up) is now refused whole, in one sentence, with nothing written."""
    edit, words = RECALL_EDITS[what]
    lines = _maya_export(tmp_path)
    edit(lines)
    path = write(tmp_path / "x.jsonl", lines)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        dst.add("Ben's door code is 4711", id="secret", namespace="user:ben")
        before = tables(dst)
        with pytest.raises(ValueError) as e:
            transfer.import_file(dst, path)
        assert words in one_sentence(e)
        assert tables(dst) == before and dst.check().ok
        # so maya's server has no recall that shows ben's memory
        assert dst.get("secret").last_used_at is None
        assert not any("secret" in r[0] for r in dst.connection.execute(
            "SELECT shown FROM recalls"))


def test_the_attack_through_mcp_finds_nothing_to_report_on(tmp_path):
    """The issue's attack end to end: import (refused), then maya's MCP
    server's report_answer on the imported recall id."""
    pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    from heapmem.adapters import mcp_server
    lines = _maya_export(tmp_path)
    _show(lines, "secret")
    path = write(tmp_path / "x.jsonl", lines)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        dst.add("Ben's door code is 4711", id="secret", namespace="user:ben")
        with pytest.raises(ValueError, match="not a memory of its namespace"):
            transfer.import_file(dst, path)
        server = mcp_server.build_server(dst, "user:maya")

        async def main():
            with pytest.raises(mcp_server.ToolError, match="unknown recall_id 2"):
                await server.call_tool("report_answer", {"recall_id": 2,
                                                         "answer": "The code is 4711"})
        anyio.run(main)
        assert dst.get("secret").last_used_at is None
        dst.forget(["secret"])
        assert dst.connection.execute("SELECT count(*) FROM recalls").fetchall()[0][0] == 0


def test_an_imported_recall_may_show_the_stores_own_memories_of_its_namespace(tmp_path):
    """Merging: a recall may show a memory already in the store, of its own
    namespace (and the honest file imports as before)."""
    lines = _maya_export(tmp_path)
    _show(lines, "old")
    path = write(tmp_path / "x.jsonl", lines)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        dst.add("Maya's passport expires in 2031", id="old", namespace="user:maya")
        rep = transfer.import_file(dst, path)
        assert rep.recalls == 2 and dst.check().ok
        rid = rep.recall_offset + _pending(lines)["id"]
        assert dst.log.get(rid).shown == tuple(_pending(lines)["shown"])
        assert dst.log.get(rid).shown[-1] == "old"
        assert dst.feedback(used=["old"], recall_id=rid).used == ("old",)


# -- 5. links of no evidence -------------------------------------------------------


def _zero_file(tmp_path, spaces, *, deltas=(("base", 0.0, 0.0),), link=(0.0, 0.0)):
    """The issue's file: events in `spaces` namespaces whose deltas credit
    nothing, and the links they add up to."""
    lines = [header(meta=0, memories=0, vectors=0, recalls=0, events=spaces, links=spaces)]
    for i in range(spaces):
        lines.append({"type": "event", "id": i + 1, "recall_id": None, "position": 0,
                      "namespace": f"t{i}", "qtype": "other", "used": 0,
                      "deltas": [list(d) for d in deltas], "created_at": T})
    for i in range(spaces):
        lines.append({"type": "link", "namespace": f"t{i}", "feature": "base", "qtype": "",
                      "alpha": link[0], "beta": link[1], "n": 1})
    return write(tmp_path / "zero.jsonl", lines)


def _one_feedback(mem, ns="user:maya"):
    mem.add("Booked the flight: SFO to LIS, departs March 14", namespace=ns)
    r = mem.recall("When is my flight?", namespace=ns)
    return mem.feedback(used=[r[0].id], recall_id=r.recall_id)


@pytest.mark.parametrize("spaces", [5, 6, 9])
@pytest.mark.parametrize("deltas, link, words", [
    ((("base", 0.0, 0.0),), (0.0, 0.0), "credits 0 observations"),
    ((("base", 0.5, 0.0),), (0.5, 0.0), "credits 0.5 observations"),
    ((), (0.0, 0.0), "credits no feature"),
    ((("base", 1.0, 0.0),), (0.0, 0.0), "has no evidence"),
])
def test_an_import_whose_events_credit_nothing_is_refused(tmp_path, spaces, deltas, link, words):
    """A 7-line export whose events credit nothing was accepted (check()
    passed); from the 5th backing namespace on every feedback failed with
    NOT NULL constraint failed: links.pool_alpha, and with 5 the import
    itself raised a raw apsw.ConstraintError."""
    path = _zero_file(tmp_path, spaces, deltas=deltas, link=link)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        before = tables(dst)
        with pytest.raises(ValueError) as e:
            transfer.import_file(dst, path)
        assert words in one_sentence(e)
        assert tables(dst) == before
        assert _one_feedback(dst).used and dst.check().ok


def _pool_rows(mem):
    mem.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
    return {r[0]: r[1:] for r in mem.connection.execute(
        "SELECT feature, alpha, beta, pool_alpha, pool_beta, low_rate, high_rate FROM links "
        "WHERE namespace = '*' ORDER BY 1")}


def _all_links(mem):
    """Every row's pool numbers: alpha, beta, n, support, its share, the rates."""
    mem.connection.execute("SELECT heap_fold_pool()")  # the pending changes, into the rows
    return {r[:2]: tuple(-2.0 if v is None else v for v in r[2:]) for r in mem.connection.execute(
        "SELECT namespace, feature, alpha, beta, n, support, pool_alpha, pool_beta, low_rate, "
        "high_rate FROM links ORDER BY 1, 2")}


def _damage(mem, spaces, features):
    """Links of no evidence for `features` in `spaces` new namespaces, written
    as a damaged file would hold them (pooled rows left as they were)."""
    mem.connection.executemany(
        "INSERT INTO links(namespace, feature, qtype, alpha, beta, n) VALUES (?, ?, ?, 0, 0, 1)",
        [(f"z{i}", f, learning.feature_qtype(f)) for i in range(spaces) for f in features])


@pytest.mark.parametrize("rebuilt", [False, True])
def test_links_of_no_evidence_in_a_damaged_file_count_nothing(tmp_path, rebuilt):
    """Feedback onto a feature that 6 namespaces hold with alpha = beta = 0
    failed with NOT NULL constraint failed: links.pool_alpha (NaN from
    0 x -inf in the trimming).  Such rows now count nothing: no error, every
    pooled number finite, and the pool what it is without them."""
    clean = heapmem.open(str(tmp_path / "clean.db"), clock=lambda: T)
    damaged = heapmem.open(str(tmp_path / "damaged.db"), clock=lambda: T)
    texts = ["Dentist appointment on Tuesday at 3pm", "Dentist coupons at https://d.example",
             "The dentist said floss twice a day"]
    spaces = [f"t{i}" for i in range(6)]
    for m in (clean, damaged):
        for ns in spaces:
            m.add_many([{"text": t, "namespace": ns, "id": f"{ns}-{j}"}
                        for j, t in enumerate(texts)])
    features = set(transfer.FEATURES)
    _damage(damaged, 6, features)
    if rebuilt:
        with damaged.transaction() as c:
            learning.rebuild_pool(c)
    for step in range(24):  # every namespace joins, then the rates move
        ns = spaces[step % 6]
        for m in (clean, damaged):
            r = m.recall("When is my dentist appointment?", namespace=ns, k=3)
            m.feedback(used=[r.ids[step % 3]], recall_id=r.recall_id)
    pooled = _pool_rows(damaged)
    assert pooled and all(v is None or math.isfinite(v) for row in pooled.values() for v in row)
    want = _pool_rows(clean)
    for f, row in want.items():  # the rows of no evidence counted nothing
        assert pooled[f][:2] == pytest.approx(row[:2], rel=1e-9, abs=1e-9), f
        assert pooled[f][4:] == row[4:], f
    # what feedback kept is what working the pool out afresh gives
    kept = _all_links(damaged)
    with damaged.transaction() as c:
        learning.rebuild_pool(c)
    afresh = _all_links(damaged)
    assert kept.keys() <= afresh.keys()
    for key in afresh.keys() - kept.keys():  # features the damage named and feedback never
        assert key[0] == "*" and afresh[key][:2] == (0.0, 0.0)  # touched get their (empty) row
    for key, row in kept.items():
        assert row == pytest.approx(afresh[key], rel=1e-9, abs=1e-9), key
    clean.close()
    damaged.close()


def test_pool_feature_leaves_rows_of_no_evidence_out():
    settings = {"cap": 300.0, "min": 5, "trim": 2}
    honest = [(f"h{i}", 1.0 + i, 3.0) for i in range(5)]
    zeros = [(f"z{i}", 0.0, 0.0) for i in range(6)]
    shares, sa, sb, lo, hi = learning.pool_feature(honest + zeros, settings)
    want = learning.pool_feature(honest, settings)
    assert (sa, sb, lo, hi) == want[1:] and all(math.isfinite(x) for x in (sa, sb, lo, hi))
    assert all(shares[ns] == (0.0, 0.0) for ns, _, _ in zeros)
    assert learning.pool_feature(zeros + honest[:4], settings)[1:] == (0.0, 0.0, None, None)


# -- 6. only the features heapmem makes ---------------------------------------------


QUESTIONS = ["When did Ana go?", "Who is Ana?", "Where is Ana?", "What did Ana say?",
             "How is Ana?", "How many cats has Ana?", "Why did Ana go?", "Is Ana here?",
             "Tell me about Ana"]  # one of each question type


def _recalled_features(tmp_path):
    """The features real recalls show: a memory judged used for one question
    shows ctx:1 to a question like it (csrc/recall.c hr_context)."""
    with heapmem.open(str(tmp_path / "ctx.db"), clock=lambda: T) as mem:
        mem.add("Ana's flight to Lisbon departs March 14", id="f")
        mem.add("Ana packed two bags for the trip", id="b")
        r = mem.recall("When does Ana's flight to Lisbon depart?", track=True)
        mem.feedback(["f"], recall_id=r.recall_id)
        again = mem.recall("When does Ana's Lisbon flight leave?")
        feats = {h.id: h.features for h in again}
    assert transfer.CONTEXT_FEATURE in feats["f"]
    assert transfer.CONTEXT_FEATURE not in feats["b"]
    out = set()
    for fs in feats.values():
        for q in QUESTIONS:
            out.update(native.active(" ".join(fs), native.qtype(q), 1.0))
    return out


def _corpus_features():
    """Every feature the C core makes for a broad set of memories, questions
    and ages (shape features, srcq, base, age buckets, each crossed)."""
    texts = ["ok", "Booked the flight: SFO to LIS, departs March 14, 9:40am",
             "I paid $700 for it? See https://x.example " + "word " * 12,
             "Ana met Bruno in Lisbon on 2024-03-02 and they talked for hours " * 3,
             "three short words", "I went to Lisbon last week", "x " * 50]
    kinds = ["fact", "preference", "instruction", "summary", "note", "episode", "tool_result",
             "my own kind"]
    sources = [None, "user", "Assistant", "agent", "system", "tool", "document", "web", "Ana"]
    questions = QUESTIONS
    ages = [0.5, 5, 20, 60, 200, 1000]
    out = set()
    for text in texts:
        for kind in kinds:
            for src in sources:
                shape = native.features(text, kind, src)
                for q in questions:
                    feats = shape + " " + native.relate(q, src)
                    for age in ages:
                        out.update(native.active(feats, native.qtype(q), age))
    return out


def test_the_feature_grammar_is_what_the_c_core_makes(tmp_path):
    """transfer.FEATURES is the C core's vocabulary, both ways: everything
    it makes is in the grammar, and everything in the grammar it makes."""
    ctx = _recalled_features(tmp_path)
    made = _corpus_features() | ctx
    assert made == transfer.FEATURES
    assert len(transfer.FEATURES) == 480
    assert len({f for f in ctx if f.endswith("ctx:1")}) == 1 + len(transfer.QTYPES)
    assert {f.split("/")[0] for f in made if "/" in f} == set(transfer.QTYPES)
    for q in transfer.QTYPES:
        native.active("", q)  # each is a question type the C core takes


MADE_UP = ["made0:1", "when/date:2", "sometimes/date:1", "when/when/date:1", "base:1",
           "kind:whatever", "src:maya", "age:decade", "date", "when/", "/date:1", "Date:1"]


@pytest.mark.parametrize("bad", MADE_UP)
def test_a_prior_of_made_up_features_is_refused(tmp_path, bad):
    """50,000 made-up features merged in 1.2 s; a recall that took 0.1 ms
    then took 42 ms, and every tenant's links() listed them.  A prior
    holds only features heapmem makes (so at most 480 rows); the first
    other one is named, in one sentence, and nothing is merged."""
    rows = [{"feature": "when/date:1", "qtype": "when", "alpha": 2.0, "beta": 1.0, "n": 3},
            {"feature": bad, "qtype": learning.feature_qtype(bad), "alpha": 1.0, "beta": 1.0,
             "n": 1}]
    path = write(tmp_path / "prior.jsonl", [{"heapmem": "links", "format": 1,
                                             "count": len(rows)}] + rows)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        before = tables(dst)
        with pytest.raises(ValueError) as e:
            transfer.import_file(dst, path)
        msg = one_sentence(e)
        assert "line 3" in msg and repr(bad) in msg and "not a feature heapmem makes" in msg
        assert tables(dst) == before


def test_fifty_thousand_made_up_features_are_refused_at_the_first(tmp_path):
    rows = [{"feature": f"made{i}:1", "qtype": "", "alpha": 1.0, "beta": 1.0, "n": 1}
            for i in range(50_000)]
    path = write(tmp_path / "prior.jsonl", [{"heapmem": "links", "format": 1,
                                             "count": len(rows)}] + rows)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        with pytest.raises(ValueError, match="'made0:1' is not a feature heapmem makes"):
            transfer.import_file(dst, path)
        assert dst.links() == [] and dst.connection.execute(
            "SELECT count(*) FROM heapmem_meta WHERE key = 'links_prior'").fetchall() == [(0,)]


def test_a_prior_of_every_feature_heapmem_makes_is_merged(tmp_path):
    rows = [{"feature": f, "qtype": learning.feature_qtype(f), "alpha": 1.0, "beta": 2.0, "n": 1}
            for f in sorted(transfer.FEATURES)]
    path = write(tmp_path / "prior.jsonl", [{"heapmem": "links", "format": 1,
                                             "count": len(rows)}] + rows)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        assert transfer.import_file(dst, path).link_rows == 480
        assert {ln.feature for ln in dst.links()} == transfer.FEATURES


def _made_up_link(lines):
    for x in lines:
        if x.get("type") == "link" and x["feature"] == "base":
            x["feature"] = "made:1"


def _made_up_delta(lines):
    for x in lines:
        if x.get("type") == "event":
            x["deltas"][0][0] = "made:1"


@pytest.mark.parametrize("edit", [_made_up_link, _made_up_delta,
                                  lambda ls: ls.insert(1, {"type": "meta", "key": "links_prior",
                                                           "value": json.dumps(
                                                               {"made:1": [1, 1, 1]})})])
def test_a_full_export_of_made_up_features_is_refused(tmp_path, edit):
    lines = _maya_export(tmp_path)
    edit(lines)
    lines[0].pop("counts")
    path = write(tmp_path / "x.jsonl", lines)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        before = tables(dst)
        with pytest.raises(ValueError) as e:
            transfer.import_file(dst, path)
        assert "'made:1' is not a feature heapmem makes" in one_sentence(e)
        assert tables(dst) == before


def test_the_honest_export_still_imports(tmp_path):
    lines = _maya_export(tmp_path)
    path = write(tmp_path / "x.jsonl", lines)
    with heapmem.open(str(tmp_path / "dst.db"), clock=lambda: T) as dst:
        rep = transfer.import_file(dst, path)
        assert (rep.memories, rep.recalls, rep.events) == (2, 2, lines[0]["counts"]["events"])
        assert rep.events and dst.check().ok


# -- 11. times from the file that no datetime holds ----------------------------------

EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
LATEST = datetime.max.replace(tzinfo=timezone.utc)


@pytest.mark.parametrize("value, want", [
    ("1e300", LATEST), ("253402300800.0", LATEST),  # year 10000
    ("9e999", LATEST), ("-1e300", EARLIEST), ("-9e999", EARLIEST)])
@pytest.mark.parametrize("updated", ["1e300", "'soon'", "9e999", None])
def test_langgraph_reads_times_no_datetime_holds(lg, value, want, updated):
    """A memory created at 1e300 (or in year 10000) made a LangGraph search
    raise a raw OverflowError.  get and search now read it, its time the
    latest (earliest) a datetime holds; a time of the last put that is not
    a finite number is the creation time."""
    c = lg.memory.connection
    c.execute(f"UPDATE memories SET created_at = {value} WHERE id = 'users/maya.flight'")
    if updated is not None:
        c.execute("UPDATE memories SET metadata = json_set(metadata, '$.langgraph.updated_at', "
                  f"{updated}) WHERE id = 'users/maya.flight'")
    it = lg.get(MAYA, "flight")
    assert it.created_at == want
    assert it.updated_at == (LATEST if updated == "1e300" else want if updated else
                             datetime.fromtimestamp(T, timezone.utc))
    hits = lg.search(MAYA, query="When is my flight?")
    assert [h.key for h in hits] == ["flight"] and hits[0].created_at == want
    assert [h.key for h in lg.search(MAYA)] == ["flight"]
    assert {h.key for h in lg.search(("users",))} == {"flight", "pin", "note"}


def test_langgraph_reports_a_time_that_is_not_a_number(lg):
    lg.memory.connection.execute("UPDATE memories SET created_at = 'soon' "
                                 "WHERE id = 'users/maya.flight'")
    with pytest.raises(heapmem.HeapmemError) as e:
        lg.get(MAYA, "flight")
    assert "users/maya.flight" in one_sentence(e) and "'soon'" in str(e.value)


def test_langgraph_ignores_a_ttl_from_the_file_that_no_time_holds(lg):
    mem = lg.memory
    lg.put(MAYA, "soon", {"text": "The taxi comes at 8am"}, ttl=5)
    for ttl in ("1e308", "-3", "'x'"):
        mem.connection.execute("UPDATE memories SET metadata = json_set(metadata, "
                               f"'$.langgraph.ttl', {ttl}) WHERE id = 'users/maya.soon'")
        assert lg.get(MAYA, "soon").key == "soon"
        assert lg.search(MAYA, query="taxi")[0].key == "soon"


def test_mcp_lists_times_no_datetime_holds(tmp_path):
    pytest.importorskip("mcp")
    anyio = pytest.importorskip("anyio")
    from heapmem.adapters import mcp_server
    with heapmem.open(str(tmp_path / "m.db"), clock=lambda: T) as mem:
        mem.add("Booked the flight: SFO to LIS, March 14", namespace="user:maya")
        mem.connection.execute("UPDATE memories SET created_at = 1e300, last_used_at = -9e999")
        server = mcp_server.build_server(mem, "user:maya")

        async def main():
            out = _tool_result(await server.call_tool("list", {}))
            assert out["memories"][0]["created_at"].startswith("9999-12-31T23:59:59")
            assert out["memories"][0]["last_used_at"].startswith("0001-01-01T00:00:00")
        anyio.run(main)
