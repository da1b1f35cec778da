"""feedback(answer=...): which shown memories an answer used, decided in C
(heap_attribute), its arithmetic on hand-made cases, and bad input."""
import json
from datetime import datetime, timezone

import apsw
import pytest

import heapmem

from conftest import T0

MAYA = "user:maya"
LISBON = [("wish", "I'd love to visit Lisbon and take a flight there someday"),
          ("quote", "Flights to Lisbon are about $600 in March"),
          ("hood", "What is a good neighborhood to stay in Lisbon?"),
          ("friend", "My friend says Lisbon is lovely in spring"),
          ("booking", "Booked the flight: SFO to LIS, departs March 14, 9:40am")]


def day(y, m, d):
    return datetime(y, m, d, 12, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def lisbon(mem):
    for i, t in LISBON:
        mem.add(t, id=i, namespace=MAYA)
    return mem


def written(mem):
    """Everything feedback can write: events, links, and when memories were used."""
    c = mem.connection
    return (c.execute("SELECT * FROM events ORDER BY id").fetchall(),
            c.execute("SELECT * FROM links ORDER BY namespace, feature").fetchall(),
            c.execute("SELECT id, last_used_at FROM memories ORDER BY seq").fetchall())


def verdicts(fb):
    return {j.id: j.verdict for j in fb.judgements}


def test_the_memory_that_carries_the_answer_is_used(lisbon):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    fb = lisbon.feedback(recall_id=r.recall_id,
                         answer="Your flight departs March 14 at 9:40am, SFO to LIS.")
    assert fb.used == ("booking",)
    # the memories that carry nothing of the answer are ignored; the price quote
    # shares "March" with it, so it is neither clearly used nor clearly unused
    assert set(fb.ignored) == {"wish", "hood", "friend"}
    assert verdicts(fb)["quote"] == "unjudged"
    assert [j.id for j in fb.judgements] == r.ids  # every shown memory, in rank order
    used = next(j for j in fb.judgements if j.verdict == "used")
    assert used.share == pytest.approx(1.0) and "sfo" in used.matched and "14" in used.matched
    assert "100% of the answer's evidence" in used.reason and "sfo" in used.reason
    quote = next(j for j in fb.judgements if j.id == "quote")
    assert quote.matched == ("march",) and 0 < quote.share < 0.4
    # and it taught what an explicit used=["booking"] would have taught
    assert fb.links_updated > 0
    assert {r[0] for r in lisbon.connection.execute(
        "SELECT position FROM events WHERE used = 1")} == {r.ids.index("booking")}


def test_an_explicit_report_and_the_answer_teach_the_same(tmp_path):
    paths = []
    for how in ("ids", "answer"):
        path = str(tmp_path / f"{how}.db")
        with heapmem.open(path, clock=lambda: T0) as mem:
            for i, t in LISBON:
                mem.add(t, id=i, namespace=MAYA)
            r = mem.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
            if how == "ids":
                mem.feedback(used=["booking"], ignored=["wish", "hood", "friend"],
                             recall_id=r.recall_id)
            else:
                mem.feedback(recall_id=r.recall_id, answer="It departs March 14, 9:40am (SFO)")
            paths.append(sorted(mem.connection.execute(
                "SELECT namespace, feature, alpha, beta, n FROM links")))
    assert paths[0] == paths[1]


def test_the_questions_own_words_never_count(lisbon):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    before = written(lisbon)
    # an answer that only repeats the question singles out nothing
    fb = lisbon.feedback(recall_id=r.recall_id, answer="Your flight to Lisbon, when it is.")
    assert fb.used == () and fb.ignored == () and fb.links_updated == 0
    assert all(j.verdict == "unjudged" and j.share == 0 for j in fb.judgements)
    assert "nothing was judged" in fb.judgements[0].reason
    assert written(lisbon) == before
    # nothing was judged, so the recall can still be reported on
    assert lisbon.feedback(used=["booking"], recall_id=r.recall_id).used == ("booking",)


def test_no_overlap_judges_nothing(lisbon):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    before = written(lisbon)
    fb = lisbon.feedback(recall_id=r.recall_id, answer="I am not sure; check your email.")
    assert fb.used == () and fb.ignored == () and written(lisbon) == before


def test_a_tie_judges_nothing(mem):
    mem.add("Sam adopted a cat named Pixel", id="a", namespace="u")
    mem.add("Sam adopted a cat named Pixel", id="b", namespace="u")
    mem.add("Sam likes hiking in the hills", id="c", namespace="u")
    r = mem.recall("What cat did Sam adopt?", namespace="u", k=5)
    before = written(mem)
    fb = mem.feedback(recall_id=r.recall_id, answer="Pixel")
    assert fb.used == () and written(mem) == before
    tie = next(j for j in fb.judgements if j.id == "a")
    assert tie.share == pytest.approx(1.0) and "a tie between" in tie.reason


def test_distinctive_terms_weigh_more_than_shared_ones(mem):
    # "piano" is in every shown memory and weighs next to nothing; "Chopin" is in one
    mem.add("Ana plays the piano every morning", id="m1", namespace="u")
    mem.add("Ana bought a new piano bench", id="m2", namespace="u")
    mem.add("Ana played Chopin on the piano at the recital", id="m3", namespace="u")
    r = mem.recall("What does Ana play?", namespace="u", k=5)
    assert set(r.ids) == {"m1", "m2", "m3"}
    fb = mem.feedback(recall_id=r.recall_id, answer="Chopin, on the piano")
    assert fb.used == ("m3",) and fb.ignored == ()  # m1 and m2 carry "piano"
    j = {x.id: x for x in fb.judgements}
    # with 3 shown, idf(piano, in 3) = ln(1 + 0.5/3.5), idf(chopin, in 1) = ln(1 + 2.5/1.5)
    import math
    w_piano, w_chopin = math.log(1 + 0.5 / 3.5), math.log(1 + 2.5 / 1.5)
    assert j["m1"].share == pytest.approx(w_piano / (w_piano + w_chopin))
    assert j["m3"].share == pytest.approx(1.0)


def test_a_date_in_the_answer_matches_when_the_memory_was_said(mem):
    # said on 8 May 2023: "yesterday" is 7 May; the answer gives the date only
    mem.add("Caroline: I went to the LGBTQ support group yesterday", id="told",
            namespace="u", created_at=day(2023, 5, 8))
    mem.add("Caroline: the support group was so welcoming", id="later",
            namespace="u", created_at=day(2023, 6, 20))
    mem.add("Melanie: support groups help a lot", id="other",
            namespace="u", created_at=day(2023, 5, 8))
    r = mem.recall("When did Caroline go to the LGBTQ support group?", namespace="u", k=5,
                   now=day(2023, 7, 1))
    fb = mem.feedback(recall_id=r.recall_id, answer="7 May 2023")
    assert fb.used == ("told",) and set(fb.ignored) == {"later", "other"}
    told = next(j for j in fb.judgements if j.id == "told")
    assert told.dated and "matches the answer's date" in told.reason
    assert set(told.matched) == {"7", "may", "2023"}


@pytest.mark.parametrize("said, when, answer, dated", [
    ("I finished the painting a few days ago", (2023, 12, 17),
     "A few days before 17 December 2023", True),
    ("I painted that sunrise last year", (2023, 5, 8), "2022", True),
    ("I painted that sunrise last year", (2023, 5, 8), "2023", False),
    ("We went camping last month", (2023, 8, 10), "July 2023", True),
    ("We go camping next month", (2023, 6, 10), "July 2023", True),
    ("We went camping", (2023, 7, 3), "July 2023", True),     # no expression: the day said
    ("We went camping", (2023, 8, 3), "July 2023", False),
    ("The race was last Sunday", (2023, 5, 25), "The sunday before 25 May 2023", True),
    ("The race is tomorrow", (2023, 5, 25), "May 26, 2023", True),
])
def test_time_expressions(mem, said, when, answer, dated):
    mem.add(said, id="m", namespace="u", created_at=day(*when))
    mem.add("Something else entirely about boats", id="x", namespace="u", created_at=day(*when))
    r = mem.recall("painting sunrise camping race boats", namespace="u", k=5, now=day(2024, 1, 1))
    fb = mem.feedback(recall_id=r.recall_id, answer=answer)
    assert next(j for j in fb.judgements if j.id == "m").dated is dated


def test_tokenized_as_the_fts_index_tokenizes(mem):
    # porter stems ("running" ~ "runs"), unicode61 folds diacritics ("café" ~ "cafe")
    mem.add("Leo runs to the cafe near the harbour", id="a", namespace="u")
    mem.add("Leo swims at the harbour pool", id="b", namespace="u")
    r = mem.recall("Where does Leo go at the harbour?", namespace="u", k=5)
    fb = mem.feedback(recall_id=r.recall_id, answer="Running to the Café")
    assert fb.used == ("a",) and fb.ignored == ("b",)


def test_forgetting_a_shown_memory_forgets_the_recall(lisbon):
    # forget drops the recalls that showed the memory (with their query text):
    # there is nothing left to judge the answer against
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    lisbon.forget(["friend"])
    with pytest.raises(ValueError, match="unknown recall_id"):
        lisbon.feedback(recall_id=r.recall_id, answer="It departs March 14, 9:40am from SFO")


def test_heap_attribute_leaves_out_a_missing_memory():
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    got = json.loads(c.execute(
        "SELECT heap_attribute('Pixel the cat', 'Which cat?', p, t, 0) FROM (SELECT 0 AS p, "
        "'Sam adopted Pixel' AS t UNION ALL SELECT 1, NULL UNION ALL SELECT 2, 'Sam hikes')"
    ).fetchall()[0][0])
    assert [g["verdict"] for g in got] == [1, None, 0]
    assert [g["present"] for g in got] == [1, 0, 1]
    assert [g["candidate"] for g in got] == [1, 0, 0]  # which shares reach the bar for "used"
    # each entry names its values (friction 4: they were arrays of unnamed values)
    assert set(got[0]) == {"verdict", "share", "question_share", "matched", "dated", "present",
                           "candidate"}


def test_raw_sql_attributes_as_feedback_does(lisbon):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    answer = "Your flight departs March 14 at 9:40am, SFO to LIS."
    sql = ("SELECT heap_attribute(?, ?, s.key, m.text, m.created_at) FROM json_each(?) AS s "
           "LEFT JOIN memories AS m ON m.id = s.value")
    got = json.loads(lisbon.connection.execute(
        sql, (answer, "When is my flight to Lisbon?", json.dumps(r.ids))).fetchall()[0][0])
    fb = lisbon.feedback(recall_id=r.recall_id, answer=answer)
    assert [{1: "used", 0: "ignored", None: "unjudged"}[g["verdict"]] for g in got] == \
        [j.verdict for j in fb.judgements]
    assert [g["share"] for g in got] == [j.share for j in fb.judgements]


def test_heap_attribute_refuses_bad_rows():
    c = apsw.Connection(":memory:")
    heapmem.load(c)
    q = "SELECT heap_attribute(?, ?, p, t, 0) FROM (SELECT ? AS p, 'x' AS t)"
    assert c.execute(q, ("a", "q", 0)).fetchall()[0][0] != "[]"
    with pytest.raises(apsw.SQLError, match="positions must be 0, 1"):
        c.execute(q, ("a", "q", 3)).fetchall()
    with pytest.raises(apsw.SQLError, match="answer and question must be text"):
        c.execute(q, (None, "q", 0)).fetchall()
    with pytest.raises(apsw.SQLError, match="position >= 0"):
        c.execute(q, ("a", "q", -1)).fetchall()
    assert c.execute("SELECT heap_attribute('a', 'q', 0, 'x', 0) WHERE 0").fetchall()[0][0] is None


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(answer=""), ValueError, "must not be empty"),
    (dict(answer="   "), ValueError, "must not be empty"),
    (dict(answer="x" * (1 << 20)), ValueError, "the limit is 65536"),
    (dict(answer=42), TypeError, "answer must be a string"),
    (dict(answer=b"bytes"), TypeError, "answer must be a string"),
    (dict(answer="a\x00b"), ValueError, "NUL"),
    (dict(answer="ok", used=["booking"]), ValueError, "not both"),
    (dict(answer="ok", ignored=["wish"]), ValueError, "not both"),
    (dict(answer="ok", recall_id=None), ValueError, "needs the recall_id"),
    (dict(answer="ok", recall_id=999), ValueError, "unknown recall_id 999"),
    (dict(answer="ok", recall_id="seven"), TypeError, "recall_id must be an integer"),
])
def test_bad_input_writes_nothing(lisbon, kwargs, error, match):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    kwargs = {"recall_id": r.recall_id, **kwargs}
    before = written(lisbon)
    with pytest.raises(error, match=match):
        lisbon.feedback(**kwargs)
    assert written(lisbon) == before


def test_an_answer_for_a_judged_recall_is_refused(lisbon):
    r = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    lisbon.feedback(recall_id=r.recall_id, answer="It departs March 14, 9:40am from SFO")
    before = written(lisbon)
    with pytest.raises(ValueError, match="already has feedback"):
        lisbon.feedback(recall_id=r.recall_id, answer="It departs March 14, 9:40am from SFO")
    r2 = lisbon.recall("When is my flight to Lisbon?", namespace=MAYA, k=5)
    lisbon.mark_used(["booking"], recall_id=r2.recall_id)
    with pytest.raises(ValueError, match="already has feedback"):
        lisbon.feedback(recall_id=r2.recall_id, answer="March 14")
    assert len(written(lisbon)[0]) == len(before[0]) + 1  # mark_used wrote; the answer did not


def test_readonly_store_refuses_an_answer(tmp_path):
    path = str(tmp_path / "ro.db")
    with heapmem.open(path, clock=lambda: T0) as mem:
        for i, t in LISBON:
            mem.add(t, id=i, namespace=MAYA)
        rid = mem.recall("When is my flight to Lisbon?", namespace=MAYA, k=5).recall_id
    with heapmem.open(path, readonly=True) as mem:
        with pytest.raises(heapmem.ReadOnlyError):
            mem.feedback(recall_id=rid, answer="March 14, 9:40am")
