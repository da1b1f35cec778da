"""The window of time a question names (issue 35; csrc/when.c, hm_time_window),
read as of the question's now: through cffi and SQL's heap_time_window alike.
Recall's use of it is in tests/test_threads.py."""
from __future__ import annotations

import datetime as dt
import json

import apsw
import pytest

from heapmem.db import native

NOW = dt.datetime(2023, 11, 15, 15, 0, tzinfo=dt.timezone.utc).timestamp()  # a Wednesday


def _days(w):
    lo, hi, words = w
    day = dt.timedelta(days=1)
    first = dt.datetime.fromtimestamp(lo, dt.timezone.utc).date()
    last = dt.datetime.fromtimestamp(hi, dt.timezone.utc).date() - day
    return str(first), str(last), words


WINDOWS = [  # question, (first day, last day, the words that name it)
    ("What did Sam do on December 4, 2023?", ("2023-12-04", "2023-12-04", "December 4, 2023")),
    ("What did Sam make on 18 August, 2023?", ("2023-08-18", "2023-08-18", "18 August, 2023")),
    ("What news did Evan share on 9th December 2023?",
     ("2023-12-09", "2023-12-09", "9th December 2023")),
    ("What happened on the 1st of May, 2022?", ("2022-05-01", "2022-05-01", "1st of May, 2022")),
    ("Notes from 2023-05-08 please", ("2023-05-08", "2023-05-08", "2023-05-08")),
    ("What did we agree on August 11?", ("2023-08-11", "2023-08-11", "August 11")),
    ("What did we agree on December 11?", ("2022-12-11", "2022-12-11", "December 11")),
    ("Which hobby did Sam take up in May 2023?", ("2023-05-01", "2023-05-31", "May 2023")),
    ("Which classes did Evan join in mid-August 2023?",
     ("2023-08-11", "2023-08-21", "mid-August 2023")),
    ("Where was Calvin in the last week of October 2023?",
     ("2023-10-25", "2023-10-31", "last week of October 2023")),
    ("What was Dave doing in the first weekend of October 2023?",
     ("2023-10-01", "2023-10-07", "first weekend of October 2023")),
    ("Where was Dave in the last two weeks of August 2023?",
     ("2023-08-18", "2023-08-31", "last two weeks of August 2023")),
    ("What happened at the beginning of November 2022?",
     ("2022-11-01", "2022-11-10", "beginning of November 2022")),
    ("What happened towards the end of summer 2023?",
     ("2023-08-02", "2023-08-31", "end of summer 2023")),
    ("What health incidents did Evan face in 2023?", ("2023-01-01", "2023-12-31", "in 2023")),
    ("What painting did Evan share in October?", ("2023-10-01", "2023-10-31", "in October")),
    ("Who headlined in May?", ("2023-05-01", "2023-05-31", "in May")),
    ("What did we say in December?", ("2022-12-01", "2022-12-31", "in December")),
    ("What did Joanna write yesterday?", ("2023-11-14", "2023-11-14", "yesterday")),
    ("What did we eat tonight?", ("2023-11-15", "2023-11-15", "tonight")),
    ("What did you hear last night?", ("2023-11-14", "2023-11-14", "last night")),
    ("What did I do two days ago?", ("2023-11-12", "2023-11-14", "two days ago")),
    ("What did I do a few days ago?", ("2023-11-11", "2023-11-13", "a few days ago")),
    ("What happened a couple of weeks ago?",
     ("2023-10-26", "2023-11-07", "a couple of weeks ago")),
    ("What did John do last weekend?", ("2023-11-11", "2023-11-12", "last weekend")),
    ("What did Caroline do last week?", ("2023-11-06", "2023-11-12", "last week")),
    ("What did we eat last Friday?", ("2023-11-10", "2023-11-10", "last Friday")),
    ("What did we eat last Wednesday?", ("2023-11-08", "2023-11-08", "last Wednesday")),
    ("What did I buy last month?", ("2023-10-01", "2023-10-31", "last month")),
    ("Where did John go last year?", ("2022-01-01", "2022-12-31", "last year")),
    ("What did they do last summer?", ("2023-06-01", "2023-08-31", "last summer")),
    ("What did they do last winter?", ("2022-12-01", "2023-02-28", "last winter")),
    ("What happened last December?", ("2022-12-01", "2022-12-31", "last December")),
    ("What happened this month?", ("2023-11-01", "2023-11-15", "this month")),
    ("What happened this week?", ("2023-11-13", "2023-11-15", "this week")),
    ("What did I note in the past 3 days?", ("2023-11-12", "2023-11-15", "past 3 days")),
    # no such day: its month
    ("What did we agree on 31 February 2023?", ("2023-02-01", "2023-02-28", "February 2023")),
    # a date comes before a relative expression
    ("What did Maria do last weekend before April 10, 2023?",
     ("2023-04-10", "2023-04-10", "April 10, 2023")),
]


@pytest.mark.parametrize("question, want", WINDOWS)
def test_the_window_a_question_names(question, want):
    assert _days(native.time_window(question, NOW)) == want


@pytest.mark.parametrize("question", [
    "Where should we eat?", "What may 2 people do?", "When did Caroline go to the group?",
    "What is Evan planning for next summer?", "Did it rain recently?", "It may be so",
    "year 12345 and 2023-13-01", "",
])
def test_no_window(question):
    assert native.time_window(question, NOW) is None


def test_sql_gives_the_same_window(db):
    for question, _ in WINDOWS[:5] + WINDOWS[-6:]:
        got = db.execute("SELECT heap_time_window(?, ?)", (question, NOW)).fetchall()[0][0]
        lo, hi, words = native.time_window(question, NOW)
        assert json.loads(got) == {"from": lo, "until": hi, "text": words}
    assert db.execute("SELECT heap_time_window('Where should we eat?', ?)",
                      (NOW,)).fetchall() == [(None,)]


@pytest.mark.parametrize("now", ["'today'", "-1", "1e300", "NULL"])
def test_sql_refuses_a_bad_now(db, now):
    with pytest.raises(apsw.SQLError, match=r"^heap_time_window: now must be unix seconds"):
        db.execute(f"SELECT heap_time_window('yesterday', {now})").fetchall()
    with pytest.raises(apsw.SQLError, match=r"^heap_time_window: the question must be text"):
        db.execute("SELECT heap_time_window(3, 0)").fetchall()
