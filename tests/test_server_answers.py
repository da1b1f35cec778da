"""A libSQL server that answers the loop's statements with valid Hrana but
wrong values (issue 33, seen item 7): a hostile server, or a broken one.

The server is tests/_hrana.py's, in process: it runs every statement for
real on a file and spoils the answer of the statement named.  Each wrong
answer must be one sentence, a ForeignAnswerError (a HeapmemError) naming
the function, not a KeyError, IndexError, JSONDecodeError or RecursionError
from deep inside a verb, nor a wrong value believed; the verb's transaction
is rolled back, so the file's tables are as before, and the same call goes
through once the server answers honestly again.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import pytest

import heapmem

sys.path.insert(0, os.path.dirname(__file__))
from _hrana import HranaServer, Spoiler, first_cell  # noqa: E402

from conftest import T0, tables_digest  # noqa: E402


def edit_json(change: Callable[[dict[str, Any]], None]) -> Spoiler:
    """A spoiler that changes the JSON the statement answered (its first cell)."""
    def spoil(sql: str, result: dict[str, Any]) -> dict[str, Any]:
        d = json.loads(result["rows"][0][0]["value"])
        change(d)
        result["rows"][0][0] = {"type": "text", "value": json.dumps(d)}
        return result
    return spoil


def no_rows(sql: str, result: dict[str, Any]) -> dict[str, Any]:
    result["rows"] = []
    return result


def _set(**kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.update(kw)


DEEP = "[" * 100_000 + "]" * 100_000
ANSWER = "You flew to Lisbon on March 14."

#: name: (the statement spoiled, how, the call: a function of the store and
#: the recall it judges)
CASES: dict[str, tuple[str, Spoiler, Callable[[heapmem.Memory, Any], Any]]] = {
    "feedback answers {}": (
        "heap_feedback(", first_cell("{}"),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "feedback answers text that is not JSON": (
        "heap_feedback(", first_cell("<html>502 Bad Gateway</html>"),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "feedback answers JSON nested 100,000 deep": (
        "heap_feedback(", first_cell(DEEP),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "feedback answers a number": (
        "heap_feedback(", first_cell(7),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "feedback's used ids are numbers": (
        "heap_feedback(", edit_json(_set(used=[1, 2])),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "feedback's auto-tune report is {}": (
        "heap_feedback(", edit_json(_set(auto_tune={"point": 30, "judged": 30, "report": {}})),
        lambda m, r: m.feedback(used=r.ids[:1], recall_id=r.recall_id)),
    "answer's attribution rows are cut short": (
        "heap_answer(", edit_json(lambda d: d.update(attribution=[
            {k: v[k] for k in ("verdict", "share")} for v in d["attribution"]])),
        lambda m, r: m.feedback(answer=ANSWER, recall_id=r.recall_id)),
    "answer's attribution misses a shown memory": (
        "heap_answer(", edit_json(lambda d: d.update(attribution=d["attribution"][:1])),
        lambda m, r: m.feedback(answer=ANSWER, recall_id=r.recall_id)),
    "answer's attribution verdict is a word": (
        "heap_answer(", edit_json(lambda d: d.update(attribution=[
            {**v, "verdict": "used"} for v in d["attribution"]])),
        lambda m, r: m.feedback(answer=ANSWER, recall_id=r.recall_id)),
    "the judged recall's shown ids are not JSON": (
        "SELECT shown FROM recalls", first_cell("m1, m2"),
        lambda m, r: m.feedback(answer=ANSWER, recall_id=r.recall_id)),
    "add answers an integer": (
        "heap_add(", first_cell(12),
        lambda m, r: m.add("Maya's passport expires in June.", namespace="user:maya")),
    "add answers an id that is not there": (
        "SELECT seq, features, turn FROM memories", no_rows,
        lambda m, r: m.add("Maya's passport expires in June.", namespace="user:maya")),
    "tune answers {}": (
        "heap_tune(", first_cell("{}"), lambda m, r: m.tune()),
    "tune's gain is two numbers": (
        "heap_tune(", edit_json(_set(gain=[0.1, 0.2])), lambda m, r: m.tune()),
    "forget answers a word": (
        "heap_forget(", first_cell("two"), lambda m, r: m.forget(["m1"])),
}


@pytest.fixture
def served(tmp_path):
    """A store on the fake server, two memories and a tracked recall of both."""
    server = HranaServer(str(tmp_path / "served.db")).start()
    mem = heapmem.open(server.url + "?timeout=10", clock=lambda: T0)
    mem.add("Booked the flight: SFO to Lisbon, departs March 14", namespace="user:maya")
    mem.add("The flight to Lisbon has a window seat for Maya", namespace="user:maya")
    res = mem.recall("When is the flight to Lisbon?", namespace="user:maya")
    assert len(res) == 2 and res.recall_id is not None
    yield server, mem, res
    mem.close()
    server.stop()


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_answer_is_one_sentence_and_writes_nothing(served, case):
    server, mem, res = served
    marker, spoiler, call = CASES[case]
    before = tables_digest(server.path)
    server.spoil[marker] = spoiler
    with pytest.raises(heapmem.HeapmemError) as e:
        call(mem, res)
    assert server.spoiled, "the statement was never spoiled: the case tests nothing"
    msg = str(e.value)
    assert type(e.value).__name__ == "ForeignAnswerError", repr(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert "heapmem's library never does" in msg and "nothing of this call was written" in msg
    assert tables_digest(server.path) == before
    # honest answers again: the very same call goes through (a feedback
    # written before would now be "already judged")
    server.spoil.clear()
    call(mem, res)
    if not marker.startswith("heap_tune"):  # (a tune of one judged recall deploys nothing)
        assert tables_digest(server.path) != before
    assert mem.check().ok


def test_the_honest_fake_server_runs_the_loop(served):
    """The fake server itself: the loop runs on it as on a file (so the
    cases above fail for what they spoil)."""
    server, mem, res = served
    fb = mem.feedback(answer=ANSWER, recall_id=res.recall_id)
    assert fb.judgements and fb.judgements[0].verdict in ("used", "ignored", "unjudged")
    assert mem.tune(deploy=False).recalls == 1
    assert mem.forget([res.ids[1]]) == 1
    assert mem.count == 1 and mem.check().ok
