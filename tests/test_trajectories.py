"""Trajectories (transfer.export_trajectories, `heapmem export --trajectories`):
one record per tracked recall with what it showed, how each was judged and the
outcome; a forgotten memory leaves no trace; bad arguments write no file."""
import io
import json
import os

import pytest

import heapmem
from heapmem.adapters import cli
from heapmem.io import transfer

T = 1_796_040_000.0  # 2026-11-30 12:00 UTC
DAY = 86400.0


@pytest.fixture
def store(tmp_path):
    m = heapmem.open(str(tmp_path / "agent.db"), clock=lambda: T)
    yield m
    m.close()


def populate(mem):
    """Maya: a recall judged used/ignored, one judged in part, one unjudged,
    one untracked; Ana: a recall judged with nothing used."""
    ns = "user:maya"
    mem.add("Booked the flight: SFO to LIS, departs March 14, 9:40am", id="m1", source="maya",
            namespace=ns, created_at=T - 20 * DAY)
    mem.add("Lisbon! I'd love to visit Lisbon someday", id="m2", kind="preference",
            namespace=ns, created_at=T - 5 * DAY)
    mem.add("Flights to Lisbon from SFO cost around $700 in spring", id="m3",
            kind="tool_result", source="tool", namespace=ns, created_at=T - 2 * DAY,
            importance=2.0)
    mem.add("Dentist appointment confirmed for Tuesday at 3:15pm", id="a1",
            namespace="user:ana", created_at=T - 6 * DAY)
    r1 = mem.recall("When is my flight to Lisbon?", namespace=ns, k=3)
    mem.feedback(used=["m1"], recall_id=r1.recall_id)               # the others ignored
    r2 = mem.recall("How much is a flight to Lisbon?", namespace=ns, k=3)
    mem.feedback(used=["m3"], ignored=[], recall_id=r2.recall_id)  # the others unjudged
    r3 = mem.recall("Lisbon", namespace=ns, k=3)                    # never judged
    mem.recall("visit Lisbon", namespace=ns, track=False)           # not logged
    r4 = mem.recall("When is the dentist?", namespace="user:ana")
    mem.feedback(used=[], recall_id=r4.recall_id)                   # all ignored
    return r1, r2, r3, r4


def read(path):
    with open(path, encoding="utf-8") as fh:
        lines = [json.loads(line) for line in fh]
    return lines[0], lines[1:]


def test_one_record_per_tracked_recall_with_what_it_showed_and_how_it_went(store, tmp_path):
    r1, r2, r3, r4 = populate(store)
    path = tmp_path / "t.jsonl"
    assert transfer.export_trajectories(store, path) == 4
    header, recs = read(path)
    assert header == {"heapmem": "trajectories", "format": 1, "version": heapmem.__version__,
                      "exported_at": T, "namespace": None, "count": 4}
    assert [r["recall_id"] for r in recs] == [r1.recall_id, r2.recall_id, r3.recall_id,
                                              r4.recall_id]
    first = recs[0]
    assert {k: first[k] for k in ("namespace", "question", "qtype", "time")} == {
        "namespace": "user:maya", "question": "When is my flight to Lisbon?", "qtype": "when",
        "time": T}
    logged = store.log.get(r1.recall_id)
    assert [s["id"] for s in first["shown"]] == list(r1.ids) == list(logged.shown)
    assert [s["rank"] for s in first["shown"]] == list(range(1, len(r1.ids) + 1))
    for s, age, rest, feats in zip(first["shown"], logged.ages, logged.rest, logged.features):
        assert (s["age_days"], s["rest"], s["features"]) == (age, rest, feats.split())
        item = store.get(s["id"])
        assert (s["text"], s["importance"]) == (item.text, item.importance)
    assert "kind:fact" in first["shown"][r1.ids.index("m1")]["features"]
    verdicts = {s["id"]: s["judged"] for s in first["shown"]}
    assert verdicts == {i: "used" if i == "m1" else "ignored" for i in r1.ids}
    rank = r1.ids.index("m1") + 1
    assert first["outcome"] == {"used": 1, "ignored": len(r1.ids) - 1,
                                "first_used_rank": rank, "reciprocal_rank": 1.0 / rank}
    # judged in part: the memories feedback did not name stay unjudged
    second = recs[1]
    assert {s["id"]: s["judged"] for s in second["shown"]} == {
        i: "used" if i == "m3" else None for i in r2.ids}
    assert second["outcome"]["used"] == 1 and second["outcome"]["ignored"] == 0
    # never judged: no outcome at all
    assert recs[2]["outcome"] is None and all(s["judged"] is None for s in recs[2]["shown"])
    # judged, nothing used
    assert recs[3]["namespace"] == "user:ana"
    assert recs[3]["outcome"] == {"used": 0, "ignored": len(r4.ids), "first_used_rank": None,
                                  "reciprocal_rank": 0.0}
    # the same bytes again: nothing in it depends on when or how it ran
    again = tmp_path / "again.jsonl"
    transfer.export_trajectories(store, again)
    assert again.read_bytes() == path.read_bytes()


def test_one_namespace_and_an_open_file(store):
    populate(store)
    out = io.StringIO()
    assert transfer.export_trajectories(store, out, namespace="user:ana") == 1
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0]["namespace"] == "user:ana" and lines[0]["count"] == 1
    assert [r["namespace"] for r in lines[1:]] == ["user:ana"]
    # an empty store: the header alone
    empty = io.StringIO()
    with heapmem.open(":memory:", clock=lambda: T) as fresh:
        assert transfer.export_trajectories(fresh, empty) == 0
    assert json.loads(empty.getvalue())["count"] == 0


def test_a_forgotten_memory_leaves_no_text_in_the_trajectories(store, tmp_path):
    populate(store)
    before = tmp_path / "before.jsonl"
    transfer.export_trajectories(store, before)
    text = before.read_text()
    assert "Booked the flight" in text and '"m1"' in text and "When is my flight" in text
    store.forget(["m1"])
    after = tmp_path / "after.jsonl"
    n = transfer.export_trajectories(store, after)
    text = after.read_text()
    for gone in ("Booked the flight", "SFO to LIS", '"m1"', "When is my flight"):
        assert gone not in text
    header, recs = read(after)
    assert header["count"] == n == len(recs)
    assert all("m1" not in [s["id"] for s in r["shown"]] for r in recs)


def test_bad_arguments_give_one_clear_error_and_write_no_file(store, tmp_path):
    populate(store)
    target = tmp_path / "out.jsonl"
    cases = [
        (lambda: transfer.export_trajectories("agent.db", target), TypeError, "Memory"),
        (lambda: transfer.export_trajectories(store, target, namespace=7), TypeError,
         "namespace"),
        (lambda: transfer.export_trajectories(store, target, namespace="*"), ValueError,
         "reserved"),
        (lambda: transfer.export_trajectories(store, target, namespace="user:zed"), ValueError,
         "no namespace 'user:zed'"),
        (lambda: transfer.export_trajectories(store, 42), TypeError, "path or an open"),
        (lambda: transfer.export_trajectories(store, tmp_path), ValueError, "is a folder"),
        (lambda: transfer.export_trajectories(store, tmp_path / "no" / "t.jsonl"), ValueError,
         "does not exist"),
    ]
    listing = sorted(os.listdir(tmp_path))
    for call, exc, words in cases:
        with pytest.raises(exc, match=words):
            call()
        assert sorted(os.listdir(tmp_path)) == listing


def cli_run(db, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--db", db, *map(str, argv)], clock=lambda: T, stdout=out, stderr=err,
                    env={})
    return code, out.getvalue(), err.getvalue()


def test_the_cli_verb(store, tmp_path):
    populate(store)
    db = store.connection.filename
    path = tmp_path / "t.jsonl"
    code, out, err = cli_run(db, "export", "--trajectories", path)
    assert (code, err) == (0, "")
    assert out == f"wrote 4 trajectories (recall, shown, judged, outcome) to {path}\n"
    assert path.read_bytes() == _python_export(store, tmp_path / "py.jsonl")
    code, out, _ = cli_run(db, "-n", "user:ana", "export", "--trajectories")  # stdout
    assert code == 0 and [json.loads(x)["namespace"] for x in out.splitlines()] == [
        "user:ana", "user:ana"]
    code, out, _ = cli_run(db, "export", "--trajectories", "--json", tmp_path / "j.jsonl")
    assert code == 0 and json.loads(out)["trajectories"] == 4
    # errors: one sentence, no file
    code, out, err = cli_run(db, "-n", "user:zed", "export", "--trajectories",
                             tmp_path / "x.jsonl")
    assert code == 1 and out == "" and "no namespace 'user:zed'" in err
    assert not (tmp_path / "x.jsonl").exists()
    with pytest.raises(SystemExit):
        cli_run(db, "export", "--trajectories", "--links-only", tmp_path / "y.jsonl")
    assert not (tmp_path / "y.jsonl").exists()
    # import does not read them, and says why
    code, out, err = cli_run(str(tmp_path / "other.db"), "import", path)
    assert code == 1 and "holds trajectories" in err


def _python_export(store, path):
    transfer.export_trajectories(store, path)
    return path.read_bytes()
